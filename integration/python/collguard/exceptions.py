# SPDX-License-Identifier: Apache-2.0
"""Exception types of the Python face, named as Horovod names them."""


class HorovodInternalError(RuntimeError):
    """An operation failed inside the collective engine (a mismatch across
    ranks, a backend error, a stopped core). Horovod's name, so code that
    catches ``horovod.common.exceptions.HorovodInternalError`` keeps its
    meaning."""
