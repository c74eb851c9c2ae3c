#!/usr/bin/env python3
"""Time a float32 allreduce (25 MiB by default) through torch.distributed
over conflux and over gloo in one job, interleaved iteration by iteration so
both see the same machine load; also through the conflux module directly
(no torch in the path). Rank 0 prints medians and the gloo/conflux ratio.

    conflux run -n 4 python3 python/benchmarks/allreduce_vs_gloo.py --mib 25 --iters 10
"""
import argparse
import time

import torch
import torch.distributed as dist

import conflux.torch  # noqa: F401


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=float, default=25.0)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("conflux")
    cfx = dist.group.WORLD
    gloo = dist.new_group(backend="gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    numel = int(args.mib * 2**20) // 4
    t = torch.ones(numel)
    raw = cfx.comm  # the conflux.Comm under the process group
    arr = t.numpy()

    runs = {
        "conflux (torch.distributed)": lambda: dist.all_reduce(t, group=cfx),
        "gloo (torch.distributed)": lambda: dist.all_reduce(t, group=gloo),
        "conflux (module, numpy)": lambda: raw.allreduce(arr),
    }
    times = {k: [] for k in runs}
    for it in range(args.iters + 1):  # the first round warms up connections and pages
        for name, fn in runs.items():
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if it:
                times[name].append(dt)
    if rank == 0:
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        print(f"{n} ranks, {args.mib:g} MiB float32 allreduce, median of {args.iters}:")
        for k, v in med.items():
            busbw = 2 * (n - 1) / n * numel * 4 / v / 1e9
            print(f"  {k:30s} {v * 1e3:9.2f} ms  busbw {busbw:6.2f} GB/s")
        print(f"  gloo / conflux(torch) time ratio: {med['gloo (torch.distributed)'] / med['conflux (torch.distributed)']:.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
