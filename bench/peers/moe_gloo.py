#!/usr/bin/python3
"""What MoE code on torch.distributed does today, timed like `conflux perf moe`
and bench/peers/moe_mpi.c: route the tokens (the same routings, through
moe_routing_lib.c), permute one copy of each token per (token, expert) pair
into destination order, all_to_all_single of the counts, all_to_all_single
of the tokens, the experts (the identity), all_to_all_single back and the
weighted sum in token order. Run under torchrun, one process per rank:

    torchrun --nproc_per_node N moe_gloo.py ROUTING_LIB TOKENS HIDDEN EXPERTS TOPK ROUTING ITERS WARMUP EMPTY_RANKS

Prints (rank 0) one row: tokens hidden topk routing median_us p99_us wire_MiB_per_iteration
(the slowest rank's time per iteration, bf16 tokens).
"""
import ctypes
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist


def main():
    lib_path, tokens, hidden, experts, k, routing, iters, warmup, empty = sys.argv[1:10]
    tokens, hidden, experts, k = int(tokens), int(hidden), int(experts), int(k)
    iters, warmup, empty = int(iters), int(warmup), int(empty)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    lib = ctypes.CDLL(lib_path)
    nt = 0 if rank >= n - empty else tokens
    tok = torch.tensor([(i % 97) * 0.25 for i in range(97)], dtype=torch.float32)
    tok = tok.repeat((max(nt, 1) * hidden + 96) // 97)[: max(nt, 1) * hidden].view(max(nt, 1), hidden)[:nt]
    tok = tok.to(torch.bfloat16).contiguous()
    idx = np.zeros(max(nt * k, 1), dtype=np.int32)
    w = np.zeros(max(nt * k, 1), dtype=np.float32)
    times, wire = [], 0.0
    for it in range(warmup + iters):
        rc = lib.moe_route_tokens(routing.encode(), experts, k, rank, it, ctypes.c_size_t(nt),
                                  idx.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                  w.ctypes.data_as(ctypes.POINTER(ctypes.c_float)))
        if rc != 0:
            sys.exit("moe_gloo: bad routing " + routing)
        pair_expert = torch.from_numpy(idx[: nt * k].astype(np.int64))
        weights = torch.from_numpy(w[: nt * k].copy()).view(nt, k, 1)
        dist.barrier()
        t0 = time.perf_counter()
        # Permute: one row per (token, expert) pair, in destination order.
        dest = pair_expert * n // experts
        order = torch.argsort(dest, stable=True)
        send = tok.index_select(0, order // k).view(torch.uint8)  # gloo has no 16-bit integer type; bf16 as bytes
        scount = torch.bincount(dest, minlength=n)
        rcount = torch.empty_like(scount)
        dist.all_to_all_single(rcount, scount)
        recv = torch.empty((int(rcount.sum()), 2 * hidden), dtype=torch.uint8)
        dist.all_to_all_single(recv, send, rcount.tolist(), scount.tolist())
        # The experts are the identity; their rows go back the way they came.
        back = torch.empty_like(send)
        dist.all_to_all_single(back, recv, scount.tolist(), rcount.tolist())
        rows = torch.empty_like(back)
        rows[order] = back
        out = (rows.view(torch.bfloat16).float().view(nt, k, hidden) * weights).sum(1).to(torch.bfloat16)
        us = (time.perf_counter() - t0) * 1e6
        if it == 0 and nt > 0:  # identity experts, weights summing to 1: each token comes back
            err = (out.float() - tok.float()).abs().max().item()
            if err > 0.05 * max(1.0, tok.float().abs().max().item()):
                sys.exit("moe_gloo: the round trip changed the tokens (max error %g)" % err)
        if it >= warmup:
            times.append(us)
            wire += 2.0 * float(scount.sum() - scount[rank]) * hidden * 2
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    total_wire = torch.tensor([wire], dtype=torch.float64)
    dist.all_reduce(total_wire)
    if rank == 0:
        v = sorted(slowest.tolist())
        pct = lambda p: v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]
        print("  %8d %7d %5d %10s %11.1f %11.1f %13.3f" % (tokens, hidden, k, routing, pct(0.5), pct(0.99),
                                                         total_wire.item() / iters / (1 << 20)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
