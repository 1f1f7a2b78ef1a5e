# SPDX-License-Identifier: Apache-2.0
"""Shared by the collguard.torch tests, which every rank of a
`collguard-run -np N python3 -m pytest FILE` runs in the same order: one
hvd.init() per process (the module-scoped fixture), the package found
through PYTHONPATH and the built module through COLLGUARD_LIB (CTest sets
both)."""
import pytest
import torch

import collguard.torch as hvd


@pytest.fixture(scope="session", autouse=True)
def initialized():
    torch.manual_seed(1234)
    hvd.init()
    yield
    hvd.shutdown()


DTYPES = [torch.int32, torch.int64, torch.float16, torch.float32,
          torch.float64, torch.bfloat16]
SHAPES = [(17,), (5, 3), (2, 3, 4)]
