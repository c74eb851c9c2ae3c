"""How far apart two cores are at this moment, for the benchmark scripts.

bench/peers/core_handoff.c hands a cache line between two threads pinned
to two cores and streams 256 KiB messages through shared-memory slots
between them. On a VM whose vCPUs the host does not pin, the result moves
in distinct levels as the host moves the vCPUs (hardware threads of one
core, cores sharing a cache, cores that do not): bench/core_placement
reports them, bench/latency_series labels each launch with the level its
cores were at just before it.
"""
import os
import statistics
import subprocess

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers", "core_handoff.c")


def build(directory):
    """Compiles the probe into `directory`; returns its path."""
    exe = os.path.join(directory, "core_handoff")
    subprocess.run(["gcc", "-O2", "-pthread", "-o", exe, SRC], check=True)
    return exe


def windows(exe, seconds, gap_ms=0, cores=("0", "1")):
    """[(hand-off ns, stream GB/s)] per window over `seconds`."""
    out = subprocess.run([exe, str(seconds), str(gap_ms)] + list(cores), capture_output=True, text=True,
                         check=True).stdout
    return [(float(ns), float(gbps)) for _, ns, gbps in (line.split() for line in out.splitlines())]


def handoff_ns(exe, seconds=0.1, cores=("0", "1")):
    """The median one-way hand-off (ns) over `seconds` of back-to-back windows."""
    w = windows(exe, seconds, 0, cores)
    return statistics.median(ns for ns, _ in w) if w else None


def levels(values, key=lambda v: v):
    """Groups values into levels of key(value), nearest first: a new level
    starts where the next key is over 1.6x the one before (the distances'
    times differ by 2x and more, a level's own spread by far less). Returns
    a list of lists."""
    ordered = sorted(values, key=key)
    groups = []
    for i, v in enumerate(ordered):
        if i == 0 or key(v) > 1.6 * key(ordered[i - 1]):
            groups.append([])
        groups[-1].append(v)
    return groups


def level_of(bounds, ns):
    """The index of the level a hand-off time falls in, given each level's
    largest time (nearest first)."""
    return next(i for i, b in enumerate(bounds) if ns <= b)
