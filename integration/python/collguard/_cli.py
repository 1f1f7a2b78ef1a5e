# SPDX-License-Identifier: Apache-2.0
"""The console scripts of a pip-installed collguard: each starts the
native command of the same name from the package's bin/ folder (the
commands sit beside lib/ there, where they find the NCCL plugins), with
the arguments and environment unchanged."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            "collguard: %s is not installed (%s missing); this package "
            "was not installed by pip, or was built without it\n"
            % (name, path))
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name] + sys.argv[1:])


def collguard_run():
    _exec("collguard-run")


def collguard_info():
    _exec("collguard-info")


def collguard_train_demo():
    _exec("collguard-train-demo")


def cg_allreduce_perf():
    _exec("cg_allreduce_perf")


def cg_broadcast_perf():
    _exec("cg_broadcast_perf")


def cg_allgather_perf():
    _exec("cg_allgather_perf")


def cg_reducescatter_perf():
    _exec("cg_reducescatter_perf")
