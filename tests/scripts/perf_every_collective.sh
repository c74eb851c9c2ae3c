#!/usr/bin/env bash
# `conflux run -n 4 conflux perf <coll> -c 1` reports 0 wrong for every
# collective, over shared memory and over TCP.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
max=${PERF_MAX_BYTES:-1M}
for transport in auto tcp; do
  for coll in allreduce allgather reducescatter broadcast reduce alltoall sendrecv gather scatter; do
    out=$(CONFLUX_TRANSPORT=$transport "$tool" run -n 4 --timeout 120 -- \
          "$tool" perf "$coll" -b 8 -e "$max" -f 8 -n 3 -w 1 -c 1 -r 1 2>&1) || {
      echo "FAIL: $coll over $transport exited non-zero"; echo "$out"; exit 1; }
    grep -q "Out of bounds values : 0 OK" <<<"$out" || {
      echo "FAIL: $coll over $transport reported wrong values"; echo "$out"; exit 1; }
    rows=$(echo "$out" | grep -cE '^\[0\] +[0-9]+ ')
    [ "$rows" -ge 3 ] || { echo "FAIL: $coll over $transport printed $rows rows"; echo "$out"; exit 1; }
    echo "ok: $coll over $transport ($rows sizes, 0 wrong)"
  done
done
