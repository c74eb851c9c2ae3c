#!/usr/bin/env bash
# Correctness across emulated hosts (network namespaces, distinct hostnames):
# 2 hosts x 2 ranks and 3 hosts x 2 ranks, shared memory inside a host and
# TCP between hosts, every collective checked by `conflux perf -c 1`.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: needs root and ip netns"; exit 0
fi
source "${CONFLUX_SOURCE_DIR:?}/tests/netns/emulate_hosts.sh"
trap cfx_hosts_down EXIT
cfx_hosts_up 3
for layout in "2 2" "3 2"; do
  set -- $layout
  for coll in allreduce allgather reducescatter broadcast reduce alltoall sendrecv; do
    log=$(mktemp)
    if ! CONFLUX_DEBUG=WARN cfx_run_cluster "$1" "$2" timeout 120 "$tool" perf "$coll" -b 8 -e 256K -f 8 -n 2 -w 1 -c 1 >"$log" 2>&1; then
      cat "$log"; echo "FAIL: $coll on $1 hosts x $2 ranks"; exit 1
    fi
    grep -q "Out of bounds values : 0 OK" "$log" || { cat "$log"; echo "FAIL: $coll wrong values"; exit 1; }
    echo "ok: $coll on $1 emulated hosts x $2 ranks"
    rm -f "$log"
  done
done
# Every hierarchical algorithm, forced, on both layouts.
for layout in "2 2" "3 2"; do
  set -- $layout
  for coll in allreduce allgather reducescatter broadcast; do
    log=$(mktemp)
    if ! CONFLUX_ALGO="$coll:hier" CONFLUX_CHUNK_SIZE=4K CONFLUX_DEBUG=WARN cfx_run_cluster "$1" "$2" timeout 120 \
        "$tool" perf "$coll" -b 8 -e 1M -f 16 -n 2 -w 1 -c 1 >"$log" 2>&1; then
      cat "$log"; echo "FAIL: hier $coll on $1 hosts x $2 ranks"; exit 1
    fi
    grep -q "Out of bounds values : 0 OK" "$log" || { cat "$log"; echo "FAIL: hier $coll wrong values"; exit 1; }
    echo "ok: hier $coll on $1 emulated hosts x $2 ranks"
    rm -f "$log"
  done
done
# The transport really differs inside and across hosts.
log=$(mktemp)
CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=INIT cfx_run_cluster 2 2 "$tool" perf allreduce -b 8 -e 8 -n 1 -w 0 -c 1 >"$log" 2>&1
grep -q "transport per peer: 0:shm, 2:tcp, 3:tcp" "$log" || { cat "$log"; echo "FAIL: expected shm inside, tcp across hosts"; exit 1; }
grep -q "host emuhost1" "$log" || { cat "$log"; echo "FAIL: hosts not distinct"; exit 1; }
rm -f "$log"
echo "ok: shm within a host, tcp across hosts"
