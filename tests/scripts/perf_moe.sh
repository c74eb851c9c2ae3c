#!/usr/bin/env bash
# `conflux perf moe` checks its own last round trip: every combined element
# must be the contract's weighted sum of the token (the experts are the
# identity). Run it on the layer's paths (placed rows in shared memory, the
# caller's heap and cfxMemAlloc rows, the message exchange, TCP), each
# datatype, odd rank counts, empty ranks and a token count of zero, and check
# the row it prints: 0 wrong, receive memory committed = bytes received.
# Across emulated hosts (root) the hierarchical path, flat path and host
# partial sums run too.
set -euo pipefail
tool=${CONFLUX_TOOL:?}

check() {  # check LABEL OUTPUT: every data row has 0 wrong and commit/recv 1.000
  local label=$1 out=$2 rows
  rows=$(grep -E '^(\[0\] )? +[0-9]+ +[0-9]+ +[0-9]+ ' <<<"$out" | sed 's/^\[0\] //') || true
  [ -n "$rows" ] || { echo "$out"; echo "FAIL: $label printed no rows"; exit 1; }
  if awk '$10 != 0 || $8 != "1.000" { bad = 1 } END { exit !bad }' <<<"$rows"; then
    echo "$out"; echo "FAIL: $label: a row with wrong elements or extra receive memory"; exit 1
  fi
  echo "ok: $label ($(wc -l <<<"$rows") cases)"
}

moe() {  # moe RANKS [perf moe options...]: run on one host
  local n=$1
  shift
  "$tool" run -n "$n" --timeout 120 -- "$tool" perf moe --experts 12 --hidden 40 --topk 3 \
    --moe-iters 3 --moe-warmup 1 "$@" 2>&1
}

for n in 1 3 4; do
  for buffers in owned heap memalloc; do
    out=$(moe "$n" --tokens 0,1,7,130 --routing uniform,half,zipf1.5 --expert-buffers "$buffers") ||
      { echo "$out"; echo "FAIL: $n ranks, $buffers rows"; exit 1; }
    check "$n ranks, $buffers rows" "$out"
  done
done
for dtype in float half bfloat16; do
  out=$(moe 3 --tokens 5,64 --routing uniform --moe-dtype "$dtype" --empty-ranks 1) ||
    { echo "$out"; echo "FAIL: $dtype"; exit 1; }
  check "3 ranks, $dtype, one rank without tokens" "$out"
done
out=$(CONFLUX_MOE_PLACED=0 moe 3 --tokens 0,9,130 --routing uniform,half) ||
  { echo "$out"; echo "FAIL: message exchange"; exit 1; }
check "3 ranks, message exchange" "$out"
out=$(CONFLUX_TRANSPORT=tcp moe 3 --tokens 9,130 --routing zipf1) || { echo "$out"; echo "FAIL: tcp"; exit 1; }
check "3 ranks over TCP" "$out"

if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: emulated hosts need root and ip netns"; exit 0
fi
source "${CONFLUX_SOURCE_DIR:?}/tests/netns/emulate_hosts.sh"
trap cfx_hosts_down EXIT
cfx_hosts_up 2
for mode in "hierarchical:" "flat:CONFLUX_MOE_HIER=0" "host sums:" ; do
  label=${mode%%:*} env_set=${mode#*:}
  extra=()
  [ "$label" = "host sums" ] && extra=(--host-partial-sums 2)
  # shellcheck disable=SC2086,SC2163  # env_set is NAME=VALUE, exported as such
  out=$([ -z "$env_set" ] || export $env_set
        CONFLUX_DEBUG=WARN cfx_run_cluster 2 2 timeout 120 "$tool" perf moe --experts 12 --hidden 40 \
          --topk 3 --moe-iters 3 --moe-warmup 1 --tokens 0,7,130 --routing uniform,half "${extra[@]}" 2>&1) ||
    { echo "$out"; echo "FAIL: 2 emulated hosts x 2 ranks, $label"; exit 1; }
  check "2 emulated hosts x 2 ranks, $label" "$out"
done
