#!/usr/bin/env python3
"""Train a small Mixture-of-Experts layer with expert parallelism over
conflux.MoE: each rank holds a slice of the experts and its own tokens; a
router picks each token's top-k experts, conflux.MoE.dispatch sends the
tokens to them, the experts run where they live, and combine brings the
weighted outputs back. The router is replicated and its gradients are
summed over the ranks; each expert's gradient is complete on its own rank,
since every token that used it sent its gradient back through dispatch's
and combine's backward.

    conflux run -n 4 python3 examples/moe_train.py --steps 10
    conflux run -n 2 python3 examples/moe_train.py --check     # compare with one process

With --check, every rank also trains the same model in a single process on
all ranks' tokens (all experts local, plain torch) and the run fails unless
the losses agree step by step within --rtol. Rank 0 prints one line per
step: "step N loss L [reference R]". PYTHONPATH must reach the conflux
package (e.g. <build>/python) unless it is installed.
"""
import argparse
import sys

import numpy as np
import torch
import torch.nn as nn

import conflux


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--tokens", type=int, default=32, help="tokens per rank per step")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--check", action="store_true", help="compare with a single-process reference")
    p.add_argument("--rtol", type=float, default=1e-4)
    return p.parse_args()


class Model(nn.Module):
    """Router plus every expert (each a small MLP); a rank uses its own experts only."""

    def __init__(self, args):
        super().__init__()
        torch.manual_seed(1234)  # the same parameters on every rank and in the reference
        self.router = nn.Linear(args.hidden, args.experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(args.hidden, 2 * args.hidden), nn.Tanh(), nn.Linear(2 * args.hidden, args.hidden))
            for _ in range(args.experts))
        self.topk = args.topk

    def route(self, x):
        probs = torch.softmax(self.router(x), dim=-1)
        w, idx = probs.topk(self.topk, dim=-1)
        return idx, w / w.sum(dim=-1, keepdim=True)


def batch(args, rank, step):
    """This rank's tokens and targets at a step (a fixed regression problem)."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(args.tokens, args.hidden, generator=g)
    y = torch.sin(x) + 0.1 * torch.randn(args.tokens, args.hidden, generator=g)
    return x, y


def distributed_step(args, comm, moe, model, opt, step, total_tokens):
    x, target = batch(args, comm.rank, step)
    idx, w = model.route(x)
    d = moe.dispatch(x, idx, w)
    outs = [model.experts[e](rows) for e, rows in d.blocks()]
    expert_out = torch.cat(outs) if outs else d.rows * 0.0
    y = moe.combine(d, expert_out)
    loss = ((y - target) ** 2).sum() / (total_tokens * args.hidden)
    opt.zero_grad()
    loss.backward()
    # The router is replicated: sum its gradient over the ranks. Experts
    # other ranks hold got no gradient here and are not stepped.
    for p in model.router.parameters():
        g = p.grad.detach().numpy()
        comm.allreduce(g)
    opt.step()
    total = np.array([loss.item()], np.float64)
    comm.allreduce(total)
    return float(total[0])


def reference_step(args, nranks, model, opt, step, total_tokens):
    xs, ts = zip(*(batch(args, r, step) for r in range(nranks)))
    x, target = torch.cat(xs), torch.cat(ts)
    idx, w = model.route(x)
    y = torch.zeros_like(x)
    for j in range(args.topk):
        for e in range(args.experts):
            sel = idx[:, j] == e
            if sel.any():
                y = y.index_add(0, sel.nonzero().squeeze(1), w[sel, j:j + 1] * model.experts[e](x[sel]))
    loss = ((y - target) ** 2).sum() / (total_tokens * args.hidden)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def main():
    args = parse_args()
    torch.set_num_threads(1)
    comm = conflux.Comm.from_env()
    if args.experts % comm.size:
        sys.exit("--experts must be a multiple of the ranks")
    moe = conflux.MoE(comm, args.experts, args.topk, args.hidden, max_tokens_per_rank=args.tokens)
    model = Model(args)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    total_tokens = args.tokens * comm.size
    if args.check:
        ref_model = Model(args)
        ref_opt = torch.optim.SGD(ref_model.parameters(), lr=args.lr)
    worst = 0.0
    for step in range(args.steps):
        loss = distributed_step(args, comm, moe, model, opt, step, total_tokens)
        line = "step %d loss %.6f" % (step, loss)
        if args.check:
            ref = reference_step(args, comm.size, ref_model, ref_opt, step, total_tokens)
            worst = max(worst, abs(loss - ref) / max(abs(ref), 1e-12))
            line += " reference %.6f" % ref
        if comm.rank == 0:
            print(line, flush=True)
    if args.check:
        ok = worst <= args.rtol
        if comm.rank == 0:
            print("%s: losses within %.1e of the single-process reference (worst %.2e)"
                  % ("ok" if ok else "FAIL", args.rtol, worst), flush=True)
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
