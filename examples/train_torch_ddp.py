"""PyTorch DistributedDataParallel under Orrery Train (docs/train.md "Framework processes").

Run by a C++ driver's TorchTrainer with an Entrypoint (examples/train_torch_ddp.cc): every
worker starts this script with torchrun's variables, so init_process_group() needs no
arguments. A small regression model on synthetic data (the same on every rank: each rank
takes its own shard), gloo on CPUs or nccl on GPUs; every epoch each rank reports its loss,
rank 0 with a checkpoint, and a restarted group resumes from the latest one.

Usage: python3 train_torch_ddp.py [--epochs N] [--kill-rank R --kill-epoch E]
  --kill-rank/--kill-epoch: that rank SIGKILLs itself at that epoch of a first attempt (to
  show a restart from the checkpoint).
"""

import argparse
import os
import signal
import tempfile

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import orrery_train


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--kill-rank", type=int, default=-1)
    parser.add_argument("--kill-epoch", type=int, default=-1)
    args = parser.parse_args()

    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    dist.init_process_group("nccl" if use_cuda else "gloo")  # env:// from torchrun's variables
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")

    torch.manual_seed(0)
    true_w = torch.randn(16, 1)
    x = torch.randn(1024, 16)
    y = x @ true_w + 0.01 * torch.randn(1024, 1)
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)
    x, y = x[shard].to(device), y[shard].to(device)

    model = torch.nn.Linear(16, 1).to(device)
    ddp = DistributedDataParallel(model, device_ids=[0] if use_cuda else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)

    start = 0
    checkpoint = orrery_train.get_checkpoint()
    if checkpoint:
        state = torch.load(os.path.join(checkpoint, "model.pt"), map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"]
    print("rank %d of %d on %s starts at epoch %d" % (rank, world, device, start), flush=True)

    for epoch in range(start + 1, args.epochs + 1):
        if checkpoint is None and rank == args.kill_rank and epoch == args.kill_epoch:
            os.kill(os.getpid(), signal.SIGKILL)
        for _ in range(20):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            optimizer.step()
        metrics = {"epoch": epoch, "loss": loss.item(), "world_size": world,
                   "resumed_from": start}
        if rank == 0:
            with tempfile.TemporaryDirectory() as tmp:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(tmp, "model.pt"))
                orrery_train.report(metrics, checkpoint_dir=tmp)  # copied before it returns
        else:
            orrery_train.report(metrics)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
