# SPDX-License-Identifier: Apache-2.0
"""collguard's Python face: ``import collguard.torch as hvd`` in place of
``import horovod.torch as hvd``. The native module (mpi_lib_v2) is found
beside this package or at ``COLLGUARD_LIB`` (see collguard/_native.py)."""

__version__ = "0.1.0"
