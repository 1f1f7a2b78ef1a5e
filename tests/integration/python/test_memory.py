# SPDX-License-Identifier: Apache-2.0
"""Memory pressure reaching the training loop. CTest runs this file
squeezed: CG_PRESSURE_WARN/CG_PRESSURE_CRITICAL above the host's free
share put the governor at critical, CG_MEM_RESERVE takes the whole budget
and CG_FAULT_ALLOC=3 fails every third buffer allocation. Results must
stay exact, memory_pressure() must report the squeeze and the callback
must fire at a synchronize on the training thread."""
import threading

import torch

import collguard.torch as hvd


def test_memory_pressure_reports_the_squeeze():
    state = hvd.memory_pressure()
    assert state["level"] == "critical", state
    assert state["budget_bytes"] == 0, state
    assert state["free_bytes"] > 0 and state["total_bytes"] > 0
    assert state["oom_eta_s"] is None or state["oom_eta_s"] >= 0
    cats = {"fusion", "ring", "staging", "registration", "control"}
    assert set(state["peak_bytes"]) == cats, state
    assert set(state["current_bytes"]) == cats, state
    assert all(state["peak_bytes"][c] >= state["current_bytes"][c]
               for c in cats), state


def test_callback_fires_on_the_training_thread_at_synchronize():
    seen = []
    hvd.on_memory_pressure(
        lambda s: seen.append((s["level"], threading.current_thread())))
    try:
        t = torch.ones(1000)
        hvd.synchronize(hvd.allreduce_async_(t, op=hvd.Sum, name="squeezed"))
        assert seen == [("critical", threading.current_thread())]
        hvd.synchronize(hvd.allreduce_async_(t, op=hvd.Sum, name="again"))
        assert len(seen) == 1, "fired again without a level change"
    finally:
        from collguard.torch import memory
        memory._callbacks.clear()


def test_results_stay_exact_under_allocation_faults():
    n = hvd.size()
    for step in range(5):
        ts = [torch.full((4096,), float(hvd.rank() + k)) for k in range(30)]
        hs = [hvd.allreduce_async_(t, op=hvd.Sum, name="f.%d.%d" % (step, k))
              for k, t in enumerate(ts)]
        for k, (h, t) in enumerate(zip(hs, ts)):
            hvd.synchronize(h)
            assert torch.all(t == float(n * k + n * (n - 1) / 2))
    state = hvd.memory_pressure()
    assert state["alloc_failures"] > 0
    assert state["peak_bytes"]["fusion"] > 0, state
    # Host tensors only: none of collguard's memory is GPU memory.
    assert sum(state["device_peak_bytes"].values()) == 0, state
    hvd.reset_memory_peaks()
    after = hvd.memory_pressure()
    assert after["peak_bytes"] == after["current_bytes"], after
