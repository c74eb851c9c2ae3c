#!/usr/bin/env bash
# Smoke test of bench/compare: a tiny --quick --strict run (2 ranks,
# 1 KiB..1 MiB, 1 round) of conflux, Open MPI, MPICH and Gloo side by side.
# Checks the exit status (non-zero on wrong results, failed runs, or a peer
# missing under --strict), that every collective's table has a column and
# numbers for every library, and that no wrong results were reported.
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
SRC=${CONFLUX_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${CONFLUX_BUILD_DIR:-${TMPDIR:-/tmp}}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/conflux_bench_compare.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; [[ -f $WORK/err ]] && tail -40 "$WORK/err" >&2; exit 1; }

RC=0
timeout 120 /usr/bin/python3 "$SRC/bench/compare" --quick --strict --conflux "$TOOL" \
  --build-dir "$BUILD/bench-peers" --out "$WORK/quick.md" >"$WORK/out" 2>"$WORK/err" || RC=$?
[[ $RC == 0 ]] || fail "bench/compare --quick --strict exited with $RC"
[[ -s $WORK/quick.md ]] || fail "no report written"
grep -q "None: every run of every library checked its results with 0 wrong elements" "$WORK/quick.md" \
  || fail "report lists wrong results or failures"
[[ -s $WORK/quick-busbw.png && -s $WORK/quick-latency.png ]] || fail "plots missing"

/usr/bin/python3 - "$WORK/quick.md" <<'PY' || fail "table check"
import re, sys
text = open(sys.argv[1]).read()
want = {"allreduce": 4, "allgather": 4, "reducescatter": 3, "broadcast": 4, "alltoall": 4}
for coll, nlibs in want.items():
    m = re.search(r"^## %s, 2 ranks\n\n(\|.*\n)\|[-:|]+\n((?:\|.*\n)+)" % coll, text, re.M)
    if not m:
        sys.exit("no table for %s" % coll)
    head = [c.strip() for c in m.group(1).strip().strip("|").split("|")]
    libs = [h[:-len(" busbw")] for h in head if h.endswith(" busbw")]
    expect = ["conflux", "Open MPI", "MPICH"] + (["Gloo"] if nlibs == 4 else [])
    if libs != expect:
        sys.exit("%s: libraries %s, expected %s" % (coll, libs, expect))
    rows = [[c.strip() for c in r.strip().strip("|").split("|")] for r in m.group(2).splitlines()]
    if len(rows) != 3:
        sys.exit("%s: %d size rows, expected 3" % (coll, len(rows)))
    for lib in libs:
        col = head.index(lib + " us")
        if not any(re.match(r"^[0-9.]+$", r[col]) and float(r[col]) > 0 for r in rows):
            sys.exit("%s: no numbers for %s" % (coll, lib))
print("tables OK")
PY
echo "PASS: bench/compare --quick --strict"
