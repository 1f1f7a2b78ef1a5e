# SPDX-License-Identifier: Apache-2.0
"""memguard.py's model and its check: the parameter shapes of GPT-2
medium, the gradients and their references, and the check that every
rank's result is the exact average (or how close it is)."""
import torch

from mg_job import SIZE


def gpt2_medium_shapes(scale=1):
    """Parameter shapes in registration order (scale > 1 shrinks every
    dimension, for a dry run on a CPU)."""
    d, v, ctx, layers = 1024 // scale, 50257 // scale, 1024 // scale, 24
    shapes = [(v, d), (ctx, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (d, 3 * d), (3 * d,), (d, d), (d,), (d,),
                   (d,), (d, 4 * d), (4 * d,), (4 * d, d), (d,)]
    return shapes + [(d,), (d,)]


def check_exact(grads, refs):
    """Every rank averaged identical gradients: bit-exact where the rank
    count is a power of two (x * n / n); else (None, the largest relative
    error). refs[i] is a tensor of grads[i]'s shape or a one-element
    tensor every element must equal. Compared a slice at a time: a
    difference of the largest gradient whole (198 MiB in fp32) does not
    fit beside a ballast that leaves 256 MiB free."""
    err, same, ch = 0.0, True, 1 << 20
    for g, r in zip(grads, refs):
        gf = g.reshape(-1)
        rf = r.reshape(-1) if r.numel() == g.numel() else None
        d = m = 0.0
        for i in range(0, gf.numel(), ch):
            a = gf[i:i + ch]
            b = rf[i:i + ch] if rf is not None else r.reshape(1).expand_as(a)
            same = same and torch.equal(a, b)
            d = max(d, (a.float() - b.float()).abs().max().item())
            m = max(m, b.float().abs().max().item())
        err = max(err, d / m if m > 0 else d)
    if SIZE & (SIZE - 1) == 0:
        return same, err
    return None, err


def make_grads(args, dev, dtype):
    """The gradients in backward order (the last layer's first) and a copy
    of each to check the results against."""
    gen = torch.Generator(device="cpu").manual_seed(1234)
    shapes = gpt2_medium_shapes(args.scale)
    grads = [torch.randn(s, generator=gen).to(dev, dtype)
             for s in reversed(shapes)]
    return grads, [g.clone() for g in grads]


def check_result(args, out, dev, dtype, stepper, grads, refs, c):
    """The verifying step (where the stepper has one) and the check."""
    if refs is not None:
        if hasattr(stepper, "verify"):
            stepper.verify(grads)
        out["exact"], out["max_rel_err"] = check_exact(grads, refs)
    else:
        want = torch.full((1,), c, dtype=dtype, device=dev)
        out["exact"], out["max_rel_err"] = check_exact(
            grads, [want for g in grads])
