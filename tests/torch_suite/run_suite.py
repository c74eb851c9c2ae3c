#!/usr/bin/env python3
"""Runs PyTorch's own distributed test suite against one backend.

The tests are torch's: DistributedTest._DistTestBase from
torch.testing._internal.distributed.distributed_test, the class that torch's
test/distributed/test_distributed_spawn.py runs with BACKEND and WORLD_SIZE
set. As there, each test is a MultiProcessTestCase: the runner's process
starts WORLD_SIZE rank processes, each joins a process group of the backend
through a file:// store, runs the test, and the parent checks every rank's
exit status (torch's skip exit codes count as skips).

    run_suite.py --backend conflux --world-size 2 --scope scope.txt --results out.json

Differences from test_distributed_spawn.py, all in the open:
  * test_distributed_spawn.py only defines its test class for gloo, nccl and
    ucc; here it is defined for any backend, and "conflux" is added to the
    suite's feature sets for what it supports on CPU (DistTestCases
    .backend_feature "ddp", "subgroup" and "plugin"), so those tests run
    instead of skipping for a backend name the suite does not know.
  * --start-method fork (the default) forks the rank processes from the
    runner, which has torch imported already, instead of spawning fresh
    interpreters (torch's MultiProcessTestCase offers both); each spawn
    re-imports torch and the suite, several seconds per test on a small
    machine. --start-method spawn runs exactly as test_distributed_spawn.py.
  * expecttest, which torch's test utilities import, comes from
    stand_ins/ when it is not installed (Debian 12 does not package it).
  * --timeout bounds each test (torch's default is 300 s per test).
  * --as gloo --backend conflux imports the suite as if BACKEND were gloo
    (so tests that torch restricts to gloo by name are not skipped, and
    their bodies take gloo's paths) while every process group they create
    for gloo is created with conflux. It is how the tests that need
    "gloo" by name but test generic behaviour (object collectives,
    coalesced all-reduce, batch_isend_irecv, monitored barriers, futures)
    run against conflux; a test that checks gloo itself (isinstance
    ProcessGroupGloo, gloo's own messages) fails there and is listed.

The selection (--scope, one test name or fnmatch pattern per line, # for
comments) is the runner's documented subset; --tests picks names directly.
Results: one line per test on stdout, a summary, and --results JSON
({"torch": version, "backend": ..., "tests": {name: {"status", "reason",
"seconds"}}}) that compare.py reads.
"""
import argparse
import fnmatch
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _configure_from_argv():
    """Parse arguments and set the environment the suite reads at import.

    Rank processes started by spawn re-import this file as __mp_main__ and
    inherit the environment set here, so they configure themselves the same
    way without parsing anything."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", required=True, help="conflux, gloo, ...")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--scope", help="file of test names or fnmatch patterns, one per line")
    p.add_argument("--tests", nargs="*", default=[], help="test names or patterns (added to --scope)")
    p.add_argument("--as", dest="as_backend", help="import the suite as for this backend (see above)")
    p.add_argument("--start-method", choices=["fork", "spawn"], default="fork")
    p.add_argument("--timeout", type=int, default=120, help="seconds per test before its ranks are killed")
    p.add_argument("--results", help="write the results as JSON here")
    p.add_argument("--list", action="store_true", help="print the selected test names and exit")
    args = p.parse_args()
    os.environ["BACKEND"] = args.as_backend or args.backend
    os.environ["CONFLUX_SUITE_PG_BACKEND"] = args.backend
    os.environ["WORLD_SIZE"] = str(args.world_size)
    os.environ["CONFLUX_SUITE_START_METHOD"] = args.start_method
    os.environ.setdefault("CONFLUX_SOCKET_IFNAME", "lo")
    return args


ARGS = _configure_from_argv() if __name__ == "__main__" else None

# expecttest: the real one if installed, else the stand-in (end of sys.path).
sys.path.append(os.path.join(HERE, "stand_ins"))
# torch's common_utils parses sys.argv at import; give it only the program name.
_saved_argv, sys.argv = sys.argv, sys.argv[:1]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal import common_distributed  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

BACKEND = os.environ["BACKEND"]
PG_BACKEND = os.environ.get("CONFLUX_SUITE_PG_BACKEND", BACKEND)
if PG_BACKEND == "conflux":
    import conflux.torch  # noqa: F401,E402  (registers the backend in every rank process)

    # What conflux supports on CPU, in the suite's own vocabulary; the
    # decorators read these sets when distributed_test is imported below.
    for feature in ("ddp", "subgroup", "plugin"):
        DistTestCases.backend_feature[feature].add("conflux")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

sys.argv = _saved_argv


def _substitute_backend(fn, suite_backend, real_backend):
    """fn (init_process_group or new_group) creating real_backend groups
    where the suite asks for suite_backend."""
    import functools
    import inspect
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind_partial(*args, **kwargs)
        if str(bound.arguments.get("backend") or "") == suite_backend:
            bound.arguments["backend"] = real_backend
        return fn(*bound.args, **bound.kwargs)
    return wrapper


if PG_BACKEND != BACKEND:
    from torch.distributed import distributed_c10d  # noqa: E402
    for _name in ("init_process_group", "new_group"):
        _wrapped = _substitute_backend(getattr(distributed_c10d, _name), BACKEND, PG_BACKEND)
        setattr(distributed_c10d, _name, _wrapped)
        setattr(dist, _name, _wrapped)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    """test_distributed_spawn.py's class, for any backend."""

    def setUp(self):
        super().setUp()
        method = os.environ.get("CONFLUX_SUITE_START_METHOD", "fork")
        self._start_processes(torch.multiprocessing.get_context(method).Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def all_tests():
    return sorted(n for n in dir(TestDistBackendWithSpawn) if n.startswith("test_"))


def select(names, scope_file, patterns):
    pats = list(patterns)
    if scope_file:
        with open(scope_file) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    pats.append(line)
    if not pats:
        return names
    chosen = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    unmatched = [p for p in pats if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    return chosen, unmatched


class _Recorder(unittest.TextTestResult):
    """Records each test's outcome, reason and duration."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.records = {}
        self._t0 = {}

    def _name(self, test):
        return test.id().split(".")[-1]

    def startTest(self, test):  # noqa: N802 - unittest's name
        self._t0[self._name(test)] = time.monotonic()
        super().startTest(test)

    def _record(self, test, status, reason=""):
        # torch's how-to-rerun footer is not part of the reason.
        reason = "\n".join(line for line in reason.splitlines()
                           if "PYTORCH_PRINT_REPRO_ON_FAILURE" not in line and "To execute this test" not in line
                           and not line.strip().startswith("python run_suite.py"))
        name = self._name(test)
        secs = time.monotonic() - self._t0.get(name, time.monotonic())
        self.records[name] = {"status": status, "reason": reason.strip()[-4000:], "seconds": round(secs, 2)}
        print(f"{status:7s} {secs:6.1f}s {name}" + (f"  ({reason.strip().splitlines()[-1][:160]})"
                                                    if reason and status != "pass" else ""), flush=True)

    def addSuccess(self, test):  # noqa: N802
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):  # noqa: N802
        super().addFailure(test, err)
        self._record(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):  # noqa: N802
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):  # noqa: N802
        super().addSkip(test, reason)
        self._record(test, "skip", reason)

    def addExpectedFailure(self, test, err):  # noqa: N802
        super().addExpectedFailure(test, err)
        self._record(test, "xfail", self._exc_info_to_string(err, test))

    def addUnexpectedSuccess(self, test):  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._record(test, "fail", "unexpected success")


def main(args):
    names = all_tests()
    chosen, unmatched = select(names, args.scope, args.tests) if (args.scope or args.tests) else (names, [])
    if unmatched:
        # A scope line that matches nothing is a stale list, not a pass.
        print(f"scope entries matching no test of torch {torch.__version__}: {unmatched}", file=sys.stderr)
    if args.list:
        print("\n".join(chosen))
        return 0
    common_distributed.TIMEOUT_DEFAULT = args.timeout
    as_note = f" (suite imported as for {args.as_backend})" if args.as_backend else ""
    print(f"torch {torch.__version__}, backend {args.backend}{as_note}, {args.world_size} ranks, "
          f"{len(chosen)} of {len(names)} tests, {args.start_method}", flush=True)
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in chosen)
    t0 = time.monotonic()
    with open(os.devnull, "w") as quiet:
        result = unittest.TextTestRunner(stream=quiet, resultclass=_Recorder, verbosity=0).run(suite)
    wall = time.monotonic() - t0
    counts = {}
    for r in result.records.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    print(f"torch {torch.__version__} {args.backend}: {len(result.records)} tests in {wall:.0f}s: "
          + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), flush=True)
    if args.results:
        with open(args.results, "w") as f:
            json.dump({"torch": torch.__version__, "backend": args.backend, "as": args.as_backend,
                       "world_size": args.world_size,
                       "start_method": args.start_method, "seconds": round(wall, 1),
                       "tests": result.records}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
