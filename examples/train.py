#!/usr/bin/env python3
"""Train a small MLP on synthetic data with DistributedDataParallel, FSDP
(FullyShardedDataParallel) or fully_shard (FSDP2, torch 2.x), over the
conflux or the gloo backend, for a fixed number of steps.

    torchrun --nproc-per-node 2 examples/train.py --backend conflux --wrap ddp
    python3 -m torch.distributed.run --nproc_per_node 4 examples/train.py --wrap fsdp
    conflux run -n 2 python3 examples/train.py --backend gloo --wrap fully_shard

Rank 0 prints one line per step ("step N loss L time_ms T"). The model, the
data and the optimizer are seeded, so two backends give the same losses up
to float rounding (the order in which gradients are summed may differ).
PYTHONPATH must reach the conflux package (e.g. <build>/python) unless it is
installed.
"""
import argparse
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["conflux", "gloo"], default="conflux")
    p.add_argument("--wrap", choices=["ddp", "fsdp", "fully_shard"], default="ddp",
                   help="DistributedDataParallel, FullyShardedDataParallel, or fully_shard (FSDP2)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--bucket-mb", type=float, default=25.0, help="DDP gradient bucket size (MiB)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    return p.parse_args()


def make_data(args, rank):
    """This rank's shard of a fixed regression problem: y = f(x) + noise."""
    g = torch.Generator().manual_seed(1234)
    w_true = torch.randn(args.features, 1, generator=g)
    g_rank = torch.Generator().manual_seed(1000 + rank)
    x = torch.randn(args.steps, args.batch, args.features, generator=g_rank)
    y = torch.tanh(x @ w_true) + 0.1 * torch.randn(args.steps, args.batch, 1, generator=g_rank)
    return x, y


def make_model(args):
    torch.manual_seed(0)  # the same initial weights on every rank
    return nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(),
                         nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                         nn.Linear(args.hidden, 1))


def wrap(args, model):
    if args.wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        return DDP(model, bucket_cap_mb=args.bucket_mb)
    if args.wrap == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        # device_id: FSDP otherwise looks for an accelerator and refuses the CPU.
        return FSDP(model, device_id=torch.device("cpu"))
    try:  # torch 2.6 exports it here; earlier 2.x under _composable
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard(model)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.backend == "conflux":
        import conflux.torch  # noqa: F401  (registers the "conflux" backend)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    model = make_model(args)
    nparams = sum(p.numel() for p in model.parameters())
    net = wrap(args, model)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    x, y = make_data(args, rank)
    if rank == 0:
        print(f"backend {args.backend} wrap {args.wrap} ranks {world} params {nparams} "
              f"({nparams * 4 / 2**20:.2f} MiB of gradients per step) torch {torch.__version__}", flush=True)

    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(net(x[step]), y[step])
        loss.backward()  # gradients are reduced (DDP) or reduce-scattered (FSDP) during backward
        opt.step()
        times.append(time.perf_counter() - t0)
        # Mean loss over ranks, so every rank prints the same number.
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if rank == 0:
            print(f"step {step} loss {mean_loss.item() / world:.9f} time_ms {times[-1] * 1e3:.3f}", flush=True)
    if rank == 0:
        steady = sorted(times[2:] or times)
        print(f"median step time {steady[len(steady) // 2] * 1e3:.3f} ms ({args.backend}, {args.wrap}, {world} ranks)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
