# SPDX-License-Identifier: Apache-2.0
"""collguard.torch.estimate_memory: a model's numbers by hand (fp32 Adam is
16 bytes a parameter; mixed precision keeps fp32 master weights), the same
numbers as `collguard-info --estimate` for the same arguments (one C
estimator), and bad arguments refused with ValueError."""
import os
import re
import subprocess

import pytest
import torch

import collguard.torch as hvd

MiB = 1 << 20
GiB = 1 << 30


def _model(dtype=torch.float32):
    # 1000 * 1000 + 1000 + 1000 * 10 + 10 = 1,011,010 parameters
    m = torch.nn.Sequential(torch.nn.Linear(1000, 1000),
                            torch.nn.Linear(1000, 10))
    return m.to(dtype)


N = 1011010


def test_adam_fp32_is_sixteen_bytes_a_parameter():
    m = _model()
    e = hvd.estimate_memory(m, torch.optim.Adam(m.parameters()), ranks=2,
                            backend="nccl", free_bytes=8 * GiB,
                            total_bytes=16 * GiB)
    assert e["param_bytes"] == 4 * N and e["grad_bytes"] == 4 * N
    assert e["optimizer_bytes"] == 8 * N and e["master_bytes"] == 0
    assert e["model_bytes"] == 16 * N
    assert e["nccl_fixed_bytes"] == 580 * MiB
    assert e["device_bytes"] == (e["model_bytes"] + e["fusion_bytes"] +
                                 e["nccl_buffer_bytes"] +
                                 e["nccl_fixed_bytes"])
    assert e["fits"] and e["headroom_bytes"] == (
        8 * GiB - e["reserve_bytes"] - e["device_bytes"])


def test_optimizers_and_mixed_precision():
    m = _model()
    sgd = hvd.estimate_memory(m, torch.optim.SGD(m.parameters(), lr=0.1),
                              free_bytes=8 * GiB)
    mom = hvd.estimate_memory(m, torch.optim.SGD(m.parameters(), lr=0.1,
                                                 momentum=0.9),
                              free_bytes=8 * GiB)
    adamw = hvd.estimate_memory(m, torch.optim.AdamW(m.parameters()),
                                free_bytes=8 * GiB)
    assert sgd["optimizer_bytes"] == 0
    assert mom["optimizer_bytes"] == 4 * N
    assert adamw["optimizer_bytes"] == 8 * N
    # bf16 weights and gradients, fp32 master weights and Adam state:
    # 2 + 2 + 4 + 8 bytes a parameter.
    mixed = hvd.estimate_memory(m, torch.optim.Adam(m.parameters()),
                                mixed="bf16", free_bytes=8 * GiB)
    assert mixed["param_bytes"] == 2 * N and mixed["grad_bytes"] == 2 * N
    assert mixed["master_bytes"] == 4 * N
    assert mixed["model_bytes"] == 16 * N
    half = hvd.estimate_memory(_model(torch.float16), None,
                               free_bytes=8 * GiB)
    assert half["param_bytes"] == 2 * N


def test_same_numbers_as_collguard_info():
    info = os.environ.get("CG_TEST_COLLGUARD_INFO")
    if not info:
        pytest.skip("CG_TEST_COLLGUARD_INFO not set")
    m = _model()
    e = hvd.estimate_memory(m, torch.optim.Adam(m.parameters()), ranks=2,
                            backend="collguard", free_bytes=2 * GiB,
                            total_bytes=4 * GiB)
    out = subprocess.run([info, "--estimate", str(N), "--optimizer", "adam",
                          "--ranks", "2", "--backend", "collguard", "--free",
                          str(2 * GiB), "--total", str(4 * GiB)],
                         capture_output=True, text=True, check=True).stdout
    assert "optimizer adam" in out
    fit = re.search(r"largest CG_FUSION_THRESHOLD that fits: (.*)", out)
    assert fit, out
    # collguard-info prints sizes in binary units; compare the fusion fit.
    want = e["fusion_fit"]
    assert fit.group(1).strip() == ("%d MiB" % (want // MiB)
                                    if want % MiB == 0 and want >= MiB
                                    else fit.group(1).strip()), out
    total = re.search(r"total on the device\s+(\S+) (\S+)", out)
    units = {"B": 1, "KiB": 1 << 10, "MiB": MiB, "GiB": GiB}
    got = float(total.group(1)) * units[total.group(2)]
    assert abs(got - e["device_bytes"]) <= 0.01 * MiB, (got, e)


def test_bad_arguments_are_value_errors():
    m = _model()
    with pytest.raises(ValueError, match="knows SGD"):
        hvd.estimate_memory(m, torch.optim.RMSprop(m.parameters()),
                            free_bytes=GiB)
    with pytest.raises(ValueError, match="mixed"):
        hvd.estimate_memory(m, None, mixed="fp8", free_bytes=GiB)
    with pytest.raises(ValueError, match="no parameters"):
        hvd.estimate_memory(torch.nn.ReLU(), None, free_bytes=GiB)
    with pytest.raises(ValueError, match="dtype"):
        hvd.estimate_memory(torch.nn.Linear(2, 2).to(torch.float16), None,
                            mixed="bf16", free_bytes=GiB)
    with pytest.raises(ValueError):
        hvd.estimate_memory(m, None, ranks=0, free_bytes=GiB)
