#!/usr/bin/env bash
# Hierarchical AllReduce on emulated hosts (network namespaces; needs root):
# what the host-local phases gain from reading peers' buffers in place.
# Interleaved in rounds, one launch of `conflux perf allreduce` per variant:
#   heap        the tool's default on ordinary buffers
#   heap-old    the same with --old-tool (a build to compare against)
#   reg         the default on registered cfxMemAlloc buffers (-R 1): hier_direct,
#               whose host-local phases reduce from and write to peers' buffers
#   reg-hier    the same buffers with CONFLUX_ALGO=allreduce:hier: host-local
#               phases through the shared-memory slot rings, as before
#               hier_direct existed
# Prints `conflux plan` for the layout, then the median time per size and
# variant (us, out of place) and the ratios the comparison is about.
#   bench/hier_hosts.sh [--tool build/tools/conflux] [--old-tool OLD] [--hosts 2] [--per-host 2]
#                       [--rate RATE] [--rounds 3] [-b 1M] [-e 64M] [--out FILE]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tool=$here/../build/tools/conflux old="" hosts=2 per=2 rate="" rounds=3 b=1M e=64M outfile=""
while [ $# -gt 0 ]; do
  case $1 in
    --tool) tool=$2; shift 2 ;;
    --old-tool) old=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --per-host) per=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -b) b=$2; shift 2 ;;
    -e) e=$2; shift 2 ;;
    --out) outfile=$2; shift 2 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "needs root (ip netns)"; exit 2; }
export CFX_NS_PREFIX=cfxbhh$$
source "$here/../tests/netns/emulate_hosts.sh"
work=${CFX_KEEP:-$(mktemp -d)}; mkdir -p "$work"
trap 'cfx_hosts_down; [ -n "${CFX_KEEP:-}" ] || rm -rf "$work"' EXIT
cfx_hosts_up "$hosts" "$rate"
variants="heap reg reg-hier"
[ -z "$old" ] || variants="heap heap-old reg reg-hier"
launch() {  # variant round
  local v=$1 r=$2 t=$tool extra=() algo=""
  case $v in
    heap-old) t=$old ;;
    reg) extra=(--memalloc -R 1) ;;
    reg-hier) extra=(--memalloc -R 1); algo=allreduce:hier ;;
  esac
  CONFLUX_ALGO=$algo cfx_run_cluster "$hosts" "$per" timeout 900 "$t" perf allreduce -b "$b" -e "$e" -f 2 \
    -n "${iters:-20}" -w 3 -c 1 --oop-only "${extra[@]}" >"$work/$v.$r" 2>&1 || { tail "$work/$v.$r"; exit 1; }
}
# A launch runs faster right after another one here (the second of a
# round's pair read 0.8-0.9 of the first, whichever build it was), so the
# two builds swap places every other round.
for ((r = 0; r < rounds; r++)); do
  order=$variants
  [ -z "$old" ] || [ $((r % 2)) = 0 ] || order="heap-old heap ${variants#heap heap-old }"
  for v in $order; do launch "$v" "$r"; done
done
{
  echo "# AllReduce float32 on $hosts emulated hosts x $per ranks${rate:+, links shaped to $rate}: median of $rounds interleaved launches, out-of-place time (us)"
  echo "# the plan for 32 MiB (heap, then registered buffers):"
  "$tool" plan allreduce 32M --hosts "$hosts" --ranks-per-host "$per" | grep -E "^(hier|choice)"
  "$tool" plan allreduce 32M --hosts "$hosts" --ranks-per-host "$per" --registered | grep -E "^(hier|choice)"
  printf "%10s" bytes
  for v in $variants; do printf " %12s" "$v"; done
  printf " %14s" "reg-hier/reg"
  [ -z "$old" ] || printf " %14s" "heap-old/heap"
  printf "\n"
  for size in $(awk '$1 ~ /^[0-9]+$/ && NF > 10 { print $1 }' "$work/heap.0"); do
    declare -A med=()
    for v in $variants; do
      med[$v]=$(cat "$work/$v".* | awk -v s="$size" '$1 == s && NF > 10 { print $6 }' | sort -g |
        awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
    done
    printf "%10d" "$size"
    for v in $variants; do printf " %12.0f" "${med[$v]}"; done
    awk -v a="${med[reg-hier]}" -v b="${med[reg]}" 'BEGIN { printf " %13.2fx", a / b }'
    [ -z "$old" ] || awk -v a="${med[heap-old]}" -v b="${med[heap]}" 'BEGIN { printf " %13.2fx", a / b }'
    printf "\n"
  done
  wrong=$(cat "$work"/* | awk '$1 ~ /^[0-9]+$/ && NF > 10 && $9 != 0 && $9 != "N/A" { n++ } END { print n + 0 }')
  echo "# rows with wrong values: $wrong"
} | tee ${outfile:+"$outfile"}
