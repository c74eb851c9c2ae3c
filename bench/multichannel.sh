#!/usr/bin/env bash
# Multi-channel TCP on emulated hosts (network namespaces; needs root):
# AllReduce time for CONFLUX_TCP_CHANNELS=1,2,4, with every TCP flow capped
# (cfx_flow_cap, as clouds cap one flow) and uncapped, interleaved in
# rounds; plus what the network probe decided in each launch.
#   bench/multichannel.sh [--tool build/tools/conflux] [--hosts 2] [--per-host 2]
#                         [--rate 300mbit] [--rounds 2] [-b 1M] [-e 16M]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=$here/../build/tools/conflux hosts=2 per=2 rate=300mbit rounds=2 b=1M e=16M
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --per-host) per=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -b) b=$2; shift 2 ;;
    -e) e=$2; shift 2 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
export CFX_NS_PREFIX=cfxbmc$$
source "$here/../tests/netns/emulate_hosts.sh"
trap cfx_hosts_down EXIT
export CONFLUX_TUNE_CACHE=off CONFLUX_TUNE_TABLE=off
unset CONFLUX_SOCKET_IFNAME
out=$(mktemp -d)
for cap in "$rate" none; do
  cfx_hosts_up "$hosts"
  [ "$cap" = none ] || cfx_flow_cap "$hosts" "$cap"
  for ((r = 0; r < rounds; r++)); do
    for ch in 1 2 4; do
      CONFLUX_TCP_CHANNELS=$ch CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=TUNE \
        cfx_run_cluster "$hosts" "$per" timeout 600 "$tool" perf allreduce -b "$b" -e "$e" -f 4 -n 3 -w 1 -c 1 \
        >"$out/$cap.$ch.$r" 2>&1 || { tail "$out/$cap.$ch.$r"; exit 1; }
    done
  done
  cfx_hosts_down
done
echo "# AllReduce float32, $hosts hosts x $per ranks, out-of-place time in us (best of $rounds rounds); per-flow cap $rate or none"
printf "%-8s %10s %12s %12s %12s %8s %8s\n" cap bytes "1 channel" "2 channels" "4 channels" "2ch x" "4ch x"
for cap in "$rate" none; do
  for size in $(awk '$1 ~ /^[0-9]+$/ && NF > 10 { print $1 }' "$out/$cap.1.0"); do
    declare -A best=()
    for ch in 1 2 4; do
      best[$ch]=$(cat "$out/$cap.$ch".* | awk -v s="$size" '$1 == s && NF > 10 { if (m == "" || $6 < m) m = $6 } END { print m }')
    done
    awk -v c="$cap" -v s="$size" -v a="${best[1]}" -v b2="${best[2]}" -v b4="${best[4]}" \
      'BEGIN { printf "%-8s %10d %12.0f %12.0f %12.0f %7.2fx %7.2fx\n", c, s, a, b2, b4, a / b2, a / b4 }'
  done
done
echo "# network probe (first rank's log line per launch):"
for f in "$out"/*; do
  line=$(grep -a -m1 "network probe" "$f" | sed 's/.*network probe: //' || true)
  [ -n "$line" ] && echo "$(basename "$f"): $line"
done
rm -rf "$out"
