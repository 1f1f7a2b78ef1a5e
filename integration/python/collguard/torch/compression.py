# SPDX-License-Identifier: Apache-2.0
"""Gradient compression for allreduce, as horovod.torch.Compression:
none, and fp16 (floating tensors sent as float16, restored after)."""
import torch


class NoneCompressor:
    """Sends tensors as they are."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor:
    """Sends floating-point tensors as float16 and restores their dtype."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor, ctx):
        if ctx is not None and ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """Compression algorithms for DistributedOptimizer and allreduce."""
    none = NoneCompressor
    fp16 = FP16Compressor
