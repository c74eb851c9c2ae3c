#!/usr/bin/env python3
"""A rank that dies in the middle of a DDP training step must surface as an
exception on every other rank within the group's timeout, not as a hang.

    python3 torch_dead_rank.py --ranks 3 [--timeout 20]

Starts the ranks itself (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so no
launcher stops the survivors before they report. Each trains a small model
with DistributedDataParallel over conflux; at step 3 the victim (rank 1)
kills itself with SIGKILL after its forward pass, so the others are inside
backward's gradient all-reduce. Every survivor must raise within the
timeout with an error naming rank 1, and exit with status 3.
"""
import argparse
import os
import signal
import subprocess
import sys
import time

from free_port import free_port

VICTIM, KILL_STEP, EXIT_REPORTED = 1, 3, 3


def rank_main(timeout):
    import datetime

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import conflux
    import conflux.torch  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("conflux", timeout=datetime.timedelta(seconds=timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    for step in range(10):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        if rank == VICTIM and step == KILL_STEP:
            os.kill(os.getpid(), signal.SIGKILL)
        if step == KILL_STEP:
            t0 = time.monotonic()
        try:
            loss.backward()
            opt.step()
            dist.barrier()
        except Exception as e:  # noqa: BLE001 - whatever torch wraps conflux's error in
            waited = time.monotonic() - t0 if step >= KILL_STEP else -1.0
            print(f"rank {rank}: step {step} raised after {waited:.1f} s: {type(e).__name__}: {e}", flush=True)
            os._exit(EXIT_REPORTED)  # the group cannot be torn down cleanly now
    print(f"rank {rank}: finished all steps although rank {VICTIM} died", flush=True)
    sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--timeout", type=float, default=20.0, help="the process group's timeout (seconds)")
    p.add_argument("--rank-main", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_main:
        rank_main(args.timeout)
        return 0
    port = free_port()
    procs = []
    for r in range(args.ranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, __file__, "--rank-main", "--timeout", str(args.timeout)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    limit = time.monotonic() + args.timeout + 60
    failures = []
    for r, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=max(1.0, limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            failures.append(f"rank {r} still running {args.timeout + 60:.0f} s after the start: a hang")
            continue
        if r == VICTIM:
            if proc.returncode != -signal.SIGKILL:
                failures.append(f"the victim, rank {r}, exited with {proc.returncode}, not SIGKILL:\n{out}")
            continue
        line = next((ln for ln in out.splitlines() if ln.startswith(f"rank {r}: step")), None)
        print(line or f"rank {r}: no report")
        if proc.returncode != EXIT_REPORTED or line is None:
            failures.append(f"rank {r} exited with {proc.returncode} without reporting the failure:\n{out[-3000:]}")
            continue
        waited = float(line.split(" raised after ")[1].split(" s:")[0])
        if not f"step {KILL_STEP} " in line:
            failures.append(f"rank {r} reported the failure at the wrong step: {line}")
        if waited > args.timeout:
            failures.append(f"rank {r} took {waited:.1f} s, more than the {args.timeout:g} s timeout: {line}")
        if "rank 1" not in line:
            failures.append(f"rank {r}'s error does not name rank 1: {line}")
    if failures:
        print("FAIL:\n" + "\n".join(failures))
        return 1
    print(f"every survivor of {args.ranks} ranks raised within {args.timeout:g} s, naming rank {VICTIM}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
