# SPDX-License-Identifier: Apache-2.0
"""The quick start of collguard.torch: a small regression model trained
data-parallel, each rank on its own shard, written as a Horovod script
with one changed import. Run it with any launcher:

    collguard-run -np 2 python examples/train_torch.py
    mpirun -np 2 python examples/train_torch.py

With --horovod it imports Horovod's own horovod.torch instead (after
`python -m collguard.horovod install` that runs on collguard too).

On a GPU machine it trains on CUDA tensors (rank i on GPU local rank %
GPUs); HOROVOD_GPU_OPERATIONS=NCCL|MPI|COLLGUARD picks their backend. At
the end every rank checks that its parameters equal rank 0's."""
import os
import sys

import torch

if "--horovod" in sys.argv[1:]:
    import horovod.torch as hvd
else:
    import collguard.torch as hvd  # in place of: import horovod.torch as hvd


def native():
    """Which native library runs hvd: collguard's or Horovod's own."""
    with open("/proc/self/maps") as f:
        ours = any(line.rstrip().endswith("/libcollguard_hvd.so")
                   for line in f)
    return "collguard" if ours else "horovod"


def main(steps=50):
    hvd.init()
    if torch.cuda.is_available():
        local = int(os.environ.get("CG_RUN_LOCAL_RANK",
                    os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")))
        dev = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(dev)
    else:
        dev = torch.device("cpu")

    torch.manual_seed(1234 + hvd.rank())  # ranks start apart on purpose
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(),
                          momentum=0.9)
    opt = hvd.DistributedOptimizer(opt,
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

    g = torch.Generator().manual_seed(99 + hvd.rank())  # this rank's shard
    w_true = torch.randn(32, 1, generator=torch.Generator().manual_seed(5))
    for step in range(steps):
        x = torch.randn(64, 32, generator=g)
        y = x @ w_true + 0.01 * torch.randn(64, 1, generator=g)
        x, y = x.to(dev), y.to(dev)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        avg = hvd.allreduce(loss.detach(), name="loss")  # averaged
        if hvd.rank() == 0 and (step % 10 == 0 or step == steps - 1):
            print("step %3d  loss %.4f" % (step, avg.item()), flush=True)

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    root = hvd.broadcast(flat, root_rank=0, name="check")
    same = torch.equal(flat, root)
    ok = hvd.allreduce(torch.tensor([0.0 if same else 1.0]), op=hvd.Sum,
                       name="mismatch").item() == 0
    if hvd.rank() == 0:
        print("%s on %s's library: %d ranks, %d steps on %s: parameters "
              "%s on every rank" % (hvd.__name__, native(), hvd.size(),
                                    steps, dev,
                                    "identical" if ok else "DIFFER"))
    hvd.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
