#!/usr/bin/env bash
# Multi-channel TCP across emulated hosts (network namespaces; needs root).
# Every TCP flow between hosts is capped (cfx_flow_cap), as clouds cap a
# single flow. With CONFLUX_TCP_CHANNELS=4 the communicator's network probe
# must find that four flows outrun one and split large calls over the four
# connections; the split AllReduce must be correct (perf checks every
# result) and faster than one connection. 2 hosts x 2 ranks, so the split
# schedules also cross shared-memory peers (which have one link only).
set -euo pipefail
tool=${CONFLUX_TOOL:?}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: needs root and ip netns"; exit 0
fi
export CFX_NS_PREFIX=cfxchan$$
source "${CONFLUX_SOURCE_DIR:?}/tests/netns/emulate_hosts.sh"
trap cfx_hosts_down EXIT
export CONFLUX_TUNE_CACHE=off CONFLUX_TUNE_TABLE=off
unset CONFLUX_SOCKET_IFNAME
rate=${FLOW_RATE:-300mbit}
cfx_hosts_up 2
cfx_flow_cap 2 "$rate"

run() {  # channels -> perf output (4 MiB AllReduce, 2 x 2 ranks)
  CONFLUX_TCP_CHANNELS=$1 CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=TUNE \
    cfx_run_cluster 2 2 timeout 300 "$tool" perf allreduce -b 4M -e 4M -n 3 -w 1 -c 1 2>&1
}
time_of() { awk '$1 == 4194304 { print $6; exit }'; }

one=$(run 1)
four=$(run 4)
t1=$(echo "$one" | time_of)
t4=$(echo "$four" | time_of)
probe=$(echo "$four" | grep -a -m1 "network probe" || true)
echo "per-flow cap $rate, 2 hosts x 2 ranks, AllReduce 4 MiB: 1 channel $t1 us, 4 channels $t4 us"
echo "$probe"
for out in "$one" "$four"; do
  echo "$out" | grep -aq "Out of bounds values : 0 OK" || { echo "$out"; echo "FAIL: wrong results"; exit 1; }
done
grep -q "bytes split" <<<"$probe" || { echo "$four"; echo "FAIL: the probe did not choose to split"; exit 1; }
[ -n "$t1" ] && [ -n "$t4" ] || { echo "$one$four"; echo "FAIL: no timing"; exit 1; }
awk -v a="$t1" -v b="$t4" 'BEGIN { exit !(b < a) }' || { echo "FAIL: 4 channels not faster than 1"; exit 1; }
echo "ok: split over 4 connections, correct and faster under a per-flow cap"
