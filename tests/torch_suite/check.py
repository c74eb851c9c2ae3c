#!/usr/bin/env python3
"""PyTorch's distributed test suite against gloo and against conflux, and
the verdict: every test that passes under gloo passes under conflux, or is
listed in conflux_cannot_run.txt with the reason.

    check.py [--world-size 2] [--out DIR] [--start-method fork|spawn]

Three runs of run_suite.py over the whole DistributedTest._DistTestBase
class (about 280 tests; a minute each on two cores with fork):
  1. BACKEND=gloo, the reference;
  2. BACKEND=conflux, at the same time as 1 (a test spends most of its
     quarter second in the runner's polling sleeps, so the two runs share
     two cores without slowing each other much);
  3. the tests that passed in 1 but skipped themselves in 2 because torch
     restricts them to gloo by backend name, again with conflux as the
     process group but the suite imported as for gloo (run_suite.py --as).
A test passes for conflux if it passes in 2 or in 3. Listed tests must not
pass (a stale entry fails the check too, so the list stays true), and every
listed test must exist in this torch. Results go to DIR as JSON.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


_print_lock = threading.Lock()


def run_suite(args, backend, out, extra=(), tag=""):
    """One run_suite.py run; its per-test lines are shown prefixed by tag."""
    cmd = [sys.executable, os.path.join(HERE, "run_suite.py"), "--backend", backend,
           "--world-size", str(args.world_size), "--start-method", args.start_method,
           "--results", out, *extra]
    with _print_lock:
        print("==", " ".join(cmd[1:]), flush=True)
    # The suite's own logging (INFO lines per process, tracebacks of the
    # failures it expects) goes to a log file; the per-test lines are shown.
    log = out[:-5] + ".log"
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=f, text=True)
        for line in proc.stdout:
            f.write(line)
            if re.match(r"^(pass|fail|error|skip|xfail) ", line) or " tests in " in line or line.startswith("torch "):
                with _print_lock:
                    sys.stdout.write(tag + line)
                    sys.stdout.flush()
        rc = proc.wait()
    if rc != 0 or not os.path.exists(out):
        raise RuntimeError(f"run_suite.py for {backend} failed (exit {rc}); log: {log}")
    with open(out) as f:
        return json.load(f)


def run_suites_together(args, runs):
    """run_suite for each (backend, out) at once; their results in order."""
    results, errors = [None] * len(runs), []

    def one(i, backend, out):
        try:
            results[i] = run_suite(args, backend, out, tag=f"[{backend}] ")
        except Exception as e:  # noqa: BLE001 - reported below, after both finish
            errors.append(f"{backend}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=one, args=(i, *r)) for i, r in enumerate(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("; ".join(errors))
    return results


def load_cannot_run(path, torch_major):
    """{test: reason} for this torch: lines 'name: reason' or
    'name [torch N]: reason' (an entry for torch N.x only)."""
    entries = {}
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            m = re.match(r"^(test_\w+)(?:\s+\[torch (\d+)\])?:\s*(\S.*)$", line)
            if not m:
                sys.exit(f"{path}:{lineno}: expected 'test_name: reason' or 'test_name [torch N]: reason'")
            name, major, reason = m.group(1), m.group(2), m.group(3)
            if major is None or int(major) == torch_major:
                entries[name] = reason
    return entries


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--start-method", choices=["fork", "spawn"], default="fork")
    p.add_argument("--out", help="folder for the JSON results and logs (default: a temporary one)")
    p.add_argument("--cannot-run", default=os.path.join(HERE, "conflux_cannot_run.txt"))
    args = p.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="conflux_torch_suite.")
    os.makedirs(out, exist_ok=True)
    t0 = time.monotonic()

    gloo, cfx = run_suites_together(args, [("gloo", os.path.join(out, "gloo.json")),
                                           ("conflux", os.path.join(out, "conflux.json"))])
    torch_version = gloo["torch"]
    torch_major = int(torch_version.split(".")[0])
    g, c = gloo["tests"], cfx["tests"]
    gated = sorted(n for n in g if g[n]["status"] == "pass" and c.get(n, {}).get("status") == "skip")
    as_gloo = {}
    if gated:
        try:
            as_gloo = run_suite(args, "conflux", os.path.join(out, "conflux_as_gloo.json"),
                                ["--as", "gloo", "--tests", *gated])["tests"]
        except RuntimeError as e:
            sys.exit(str(e))

    cannot = load_cannot_run(args.cannot_run, torch_major)
    problems = []
    unknown = sorted(set(cannot) - set(g))
    if unknown:
        problems.append(f"listed in {os.path.basename(args.cannot_run)} but not in torch {torch_version}'s suite: "
                        + ", ".join(unknown))
    gloo_pass = sorted(n for n in g if g[n]["status"] == "pass")
    passed, failed, listed, stale = [], [], [], []
    for n in gloo_pass:
        ok = c.get(n, {}).get("status") == "pass" or as_gloo.get(n, {}).get("status") == "pass"
        if n in cannot:
            (stale if ok else listed).append(n)
        elif ok:
            passed.append(n)
        else:
            failed.append(n)
    for n in failed:
        r = as_gloo.get(n) or c.get(n, {})
        last = (r.get("reason") or "").strip().splitlines()[-1:] or [""]
        problems.append(f"{n}: passes under gloo, {r.get('status')} under conflux: {last[0][:300]}")
    for n in stale:
        problems.append(f"{n}: listed as unable to run for conflux, but it passes: remove it from the list")

    counts = lambda d: ", ".join(f"{v} {k}" for k, v in sorted(  # noqa: E731
        {s: sum(1 for r in d.values() if r["status"] == s) for s in {r["status"] for r in d.values()}}.items()))
    print(f"\ntorch {torch_version}, {args.world_size} ranks, {len(g)} tests "
          f"({time.monotonic() - t0:.0f} s; results in {out})")
    print(f"  gloo:    {counts(g)}")
    print(f"  conflux: {counts(c)}")
    if as_gloo:
        print(f"  conflux, suite imported as for gloo ({len(gated)} tests torch restricts to gloo by name): "
              f"{counts(as_gloo)}")
    print(f"  of {len(gloo_pass)} tests that pass under gloo: {len(passed)} pass under conflux, "
          f"{len(listed)} cannot run for conflux (listed), {len(failed)} fail")
    for n in listed:
        print(f"    listed: {n}: {cannot[n]}")
    if problems:
        print("\nFAIL:")
        for line in problems:
            print("  " + line)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
