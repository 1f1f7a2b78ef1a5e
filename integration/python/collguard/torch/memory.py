# SPDX-License-Identifier: Apache-2.0
"""Memory pressure for the training loop: memory_pressure() returns the
governor's view (level, budget, free bytes, projected seconds to OOM);
on_memory_pressure(callback) calls callback(state) on the training
thread, inside synchronize, when the level has changed since the last
report (the first report compares with "ok"). Sampling costs a probe
read, so synchronize samples at most every CHECK_INTERVAL_S seconds."""
import time

from collguard._native import mpi_lib

CHECK_INTERVAL_S = 0.1
LEVELS = ("ok", "warn", "critical")

_callbacks = []
_state = {"last_level": "ok", "last_check": 0.0}


def memory_pressure():
    """A dict: level ('ok', 'warn', 'critical'), memory ('host' or
    'device'), free_bytes, total_bytes, reserve_bytes, budget_bytes,
    fusion_bytes, chunk_bytes, nccl_buffsize, oom_eta_s (None: no OOM
    projected), alloc_failures, early_warnings, fusion_current_bytes,
    degrades (samples that shrank a buffer size), device (CUDA ordinal;
    -1: host), and peak_bytes / current_bytes: dicts of collguard's own
    accounted memory by category (fusion, ring, staging, registration,
    control), with device_peak_bytes / device_current_bytes the part of
    them that is GPU memory."""
    return mpi_lib.collguard_memory_snapshot()


def reset_memory_peaks():
    """From now on, memory_pressure()'s peaks are the peaks since this
    call."""
    mpi_lib.collguard_memory_reset_peaks()


def on_memory_pressure(callback):
    """Registers callback(state) for level changes; returns callback, so
    it can be used as a decorator. remove_memory_pressure_callback undoes
    it."""
    if not callable(callback):
        raise TypeError("collguard: on_memory_pressure needs a callable")
    _callbacks.append(callback)
    return callback


def remove_memory_pressure_callback(callback):
    _callbacks.remove(callback)


def _check(force=False):
    now = time.monotonic()
    if not force and now - _state["last_check"] < CHECK_INTERVAL_S:
        return
    _state["last_check"] = now
    state = memory_pressure()
    if state["level"] == _state["last_level"]:
        return
    state["previous_level"] = _state["last_level"]
    _state["last_level"] = state["level"]
    for cb in list(_callbacks):
        cb(state)


def _reset():
    _state["last_level"] = "ok"
    _state["last_check"] = 0.0
