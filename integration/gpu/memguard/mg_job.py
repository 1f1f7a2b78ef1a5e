# SPDX-License-Identifier: Apache-2.0
"""memguard.py's rank and device: rank, size and local rank from the
launcher's variables (collguard-run, torchrun, mpirun), the device this
rank uses, waiting for it and reading its free memory."""
import os

import torch

MiB = 1 << 20


def launcher_ranks():
    """(rank, size, local rank) from collguard-run, torchrun or mpirun."""
    for r, n, l in (("CG_RUN_RANK", "CG_RUN_SIZE", "CG_RUN_LOCAL_RANK"),
                    ("RANK", "WORLD_SIZE", "LOCAL_RANK"),
                    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_RANK")):
        if r in os.environ and n in os.environ:
            return (int(os.environ[r]), int(os.environ[n]),
                    int(os.environ.get(l, os.environ[r])))
    return 0, 1, 0


RANK, SIZE, LOCAL_RANK = launcher_ranks()


def pick_device(name):
    """--device auto: this rank's GPU (local rank), else the CPU."""
    if name != "auto":
        return torch.device(name)
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", LOCAL_RANK % torch.cuda.device_count())


def free_bytes(dev):
    if dev.type != "cuda":
        return None
    torch.cuda.synchronize(dev)
    return torch.cuda.mem_get_info(dev)[0]


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
