#!/usr/bin/env python3
"""conflux against gloo through torch.distributed, one launch per backend
and measurement, the backends' launches interleaved round by round (so both
see the same machine load over time), with medians and ratios.

    python3 python/benchmarks/torch_vs_gloo.py [--rounds 5] [--only allreduce,ddp,fsdp]

Measurements (each a fresh torchrun job of its own, through
python/tests/torchrun.py, which works around Debian's torch packages):
  allreduce  25 MiB float32 dist.all_reduce at 2 and 4 ranks: median of
             --iters calls after a warm-up call (this script's --child mode)
  ddp        examples/train.py --wrap ddp at 4 ranks, 25 MiB buckets, the
             example MLP with --hidden 2048 (16.5 MiB of gradients) and
             --batch samples per rank: the median step time it prints. The
             batch decides how much of a step is computation; at 64 a step
             on a 2-core machine is mostly matrix products.
  fsdp       the same with --wrap fsdp (where torch.distributed.fsdp imports)
Targets (conflux time / gloo time): allreduce <= 0.5, ddp <= 0.7, fsdp <= 0.7.
PYTHONPATH must reach the conflux package. Prints a table and, with --json,
writes the raw times.
"""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
TORCHRUN = os.path.join(SRC, "python", "tests", "torchrun.py")
TRAIN = os.path.join(SRC, "examples", "train.py")
TARGETS = {"allreduce": 0.5, "ddp": 0.7, "fsdp": 0.7}


def child(args):
    """One backend's allreduce timing inside a torchrun job."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if args.backend == "conflux":
        import conflux.torch  # noqa: F401
    dist.init_process_group(args.backend)
    t = torch.ones(int(args.mib * 2**20) // 4)
    times = []
    for it in range(args.iters + 1):  # the first call warms up connections and pages
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(t)
        if it:
            times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(f"median_ms {statistics.median(times) * 1e3:.3f}", flush=True)
    dist.destroy_process_group()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def launch(ranks, script_args, timeout):
    cmd = [sys.executable, TORCHRUN, "--nproc_per_node", str(ranks), "--master_addr", "127.0.0.1",
           "--master_port", str(free_port()), *script_args]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CONFLUX_SOCKET_IFNAME="lo",
               GLOO_SOCKET_IFNAME="lo")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-3000:]}")
    return out.stdout


def measure(kind, ranks, backend, args):
    if kind == "allreduce":
        out = launch(ranks, [os.path.abspath(__file__), "--child", "--backend", backend, "--mib", str(args.mib),
                             "--iters", str(args.iters)], args.timeout)
        m = re.search(r"median_ms ([0-9.]+)", out)
    else:
        out = launch(ranks, [TRAIN, "--backend", backend, "--wrap", kind, "--steps", str(args.steps),
                             "--hidden", str(args.hidden), "--batch", str(args.batch), "--bucket-mb", "25"],
                     args.timeout)
        m = re.search(r"median step time ([0-9.]+) ms", out)
    if not m:
        raise RuntimeError(f"no timing in the output of {kind} over {backend}:\n{out[-2000:]}")
    return float(m.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default="allreduce,ddp,fsdp")
    p.add_argument("--mib", type=float, default=25.0)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--batch", type=int, default=64, help="samples per rank per step (ddp, fsdp)")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--json", help="write the raw times here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="conflux", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
        return 0

    import torch
    kinds = args.only.split(",")
    cases = [(k, n) for k in kinds for n in ((2, 4) if k == "allreduce" else (4,))]
    if "fsdp" in kinds:
        try:
            import torch.distributed.fsdp  # noqa: F401
        except Exception as e:  # noqa: BLE001 - torch 1.13 on Python 3.11 fails inside torch
            print(f"fsdp skipped: torch {torch.__version__} cannot import torch.distributed.fsdp: {e}")
            cases = [c for c in cases if c[0] != "fsdp"]
    times = {(k, n, b): [] for k, n in cases for b in ("conflux", "gloo")}
    for r in range(args.rounds):
        for k, n in cases:
            # Alternate which backend goes first, so neither always follows the other.
            for b in (("conflux", "gloo") if r % 2 == 0 else ("gloo", "conflux")):
                ms = measure(k, n, b, args)
                times[(k, n, b)].append(ms)
                print(f"round {r + 1}/{args.rounds}: {k} {n} ranks {b}: {ms:.3f} ms", flush=True)

    print(f"\ntorch {torch.__version__}, {os.cpu_count()} CPUs, {args.rounds} rounds, medians "
          f"(allreduce {args.mib:g} MiB; ddp/fsdp: train.py --hidden {args.hidden} --batch {args.batch}, "
          "25 MiB buckets)")
    print(f"{'measurement':22s} {'conflux ms':>11s} {'gloo ms':>10s} {'ratio':>7s} {'target':>7s}")
    met = True
    for k, n in cases:
        c = statistics.median(times[(k, n, "conflux")])
        g = statistics.median(times[(k, n, "gloo")])
        ratio = c / g
        ok = ratio <= TARGETS[k]
        met &= ok
        print(f"{k + f' {n} ranks':22s} {c:11.3f} {g:10.3f} {ratio:7.2f} {'<= ' + str(TARGETS[k]):>7s} "
              f"{'met' if ok else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "rounds": args.rounds,
                       "times_ms": {f"{k} {n} {b}": v for (k, n, b), v in times.items()}}, f, indent=1)
    print("all targets met" if met else "some targets missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
