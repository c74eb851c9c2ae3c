#!/usr/bin/env bash
# Faults on shaped links (emulated hosts, 100 Mbit/s each way, 3 hosts x 1
# rank, a 4 MiB AllReduce loop that keeps every link busy):
#  1. a rank SIGKILLed mid-transfer: every survivor fails naming it;
#  2. a host whose interface goes down mid-transfer: every rank fails within
#     the heartbeat deadline, the survivors naming the silent rank;
#  3. a host whose links are shaped to almost nothing: the operation deadline
#     (CONFLUX_TIMEOUT) ends it on every rank, naming the call;
# and after each, nothing the run started is left: no process in any
# emulated host, and (on exit, even on failure) no namespace.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: needs root and ip netns"; exit 0
fi
export CFX_NS_PREFIX=cfxf$$
source "${CONFLUX_SOURCE_DIR:?}/tests/netns/emulate_hosts.sh"
work=$(mktemp -d)
cleanup() {
  local h
  for h in 0 1 2; do
    for p in $(ip netns pids "${CFX_NS_PREFIX}h$h" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  cfx_hosts_down
  rm -rf "$work"
}
trap cleanup EXIT
hosts=3
cfx_hosts_up $hosts 100mbit

fail() { echo "FAIL: $*"; for f in "$work"/*.log; do echo "== $f"; tail -20 "$f"; done; exit 1; }

# Runs the AllReduce loop in the background on cfx_run_cluster's layout
# (one rank per host); each rank writes its log and then its exit status
# into $work.
start_loop() {
  rm -f "$work"/rank*.log "$work"/status*
  CFX_FAULT_WORK=$work cfx_run_cluster $hosts 1 sh -c \
    'timeout 120 "$@" >"$CFX_FAULT_WORK/rank$RANK.log" 2>&1; echo $? >"$CFX_FAULT_WORK/status$RANK"' _ \
    "$tool" perf allreduce -b 4M -e 4M -n 1000 -w 1 -c 0 &
  cluster=$!
}

# Waits for every rank; each must have failed. Sets $took to the seconds
# since $1 (date +%s.%N).
wait_all() {
  local t0=$1 r
  wait "$cluster" || true
  for ((r = 0; r < hosts; r++)); do
    [ "$(cat "$work/status$r" 2>/dev/null)" != 0 ] || fail "rank $r finished 1000 calls: the fault did not happen"
  done
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

no_leftovers() {
  local h
  for ((h = 0; h < hosts; h++)); do
    [ -z "$(ip netns pids "${CFX_NS_PREFIX}h$h")" ] || fail "$1: processes left in emulated host $h"
  done
}

# Waits until rank 0 is past init (its table header is out) and a second
# into the loop, so the fault lands mid-transfer.
wait_busy() {
  local i
  for ((i = 0; i < 600; i++)); do
    grep -q "redop" "$work/rank0.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q "redop" "$work/rank0.log" || fail "$1: rank 0 not past init after 60 s"
  sleep 1
  ! ls "$work"/status* >/dev/null 2>&1 || fail "$1: a rank ended before the fault"
}

# Starts the loop on fresh ports and returns once it is mid-transfer; sets $t0.
begin_fault() {
  start_loop
  wait_busy "$1"
  t0=$(date +%s.%N)
}

# After the fault: every rank has ended (within LIMIT s), the ranks listed
# gave a reason matching PATTERN, and nothing is left in the hosts.
expect_ended() {
  local what=$1 limit=$2 pattern=$3 r
  shift 3
  wait_all "$t0"
  for r in "$@"; do
    grep -qiE "$pattern" "$work/rank$r.log" || fail "$what: rank $r gave no reason matching '$pattern'"
  done
  awk -v t="$took" -v l="$limit" 'BEGIN { exit !(t < l) }' || fail "$what: ranks took $took s"
  no_leftovers "$what"
}

# 1. SIGKILL rank 1 (the conflux process inside host 1).
begin_fault kill
for p in $(ip netns pids "${CFX_NS_PREFIX}h1"); do
  [ "$(cat /proc/"$p"/comm 2>/dev/null)" = conflux ] && kill -9 "$p"
done
expect_ended kill 30 "rank 1" 0 2
echo "ok: SIGKILL of rank 1 mid-transfer named by ranks 0 and 2 in $took s"

# 2. Host 2's interface goes down: its peers hear nothing, not even heartbeats.
export CONFLUX_HEARTBEAT_TIMEOUT=3
begin_fault "link down"
ip -n "${CFX_NS_PREFIX}h2" link set eth0 down
expect_ended "link down" 40 "rank 2" 0 1
ip -n "${CFX_NS_PREFIX}h2" link set eth0 up
unset CONFLUX_HEARTBEAT_TIMEOUT
echo "ok: interface of host 2 down mid-transfer: every rank failed in $took s, ranks 0 and 1 naming rank 2"

# 3. Host 1's links shaped to 8 kbit/s: bytes still trickle, so only the
#    operation deadline can end the call. A heartbeat to host 1 waits in the
#    same 8 kbit/s queue as the data, so with the default heartbeat deadline
#    (10 s, equal to this operation deadline) a rank may first report its peer
#    silent instead; the heartbeat deadline is set well past the operation's
#    so that the operation deadline is what this case proves.
export CONFLUX_TIMEOUT=10 CONFLUX_HEARTBEAT_TIMEOUT=60
begin_fault "stalled link"
_cfx_shape_dev "${CFX_NS_PREFIX}h1" eth0 8kbit tbf
_cfx_shape_dev "${CFX_NS_PREFIX}sw" port1 8kbit tbf
expect_ended "stalled link" 60 "timed out" 0 1 2
grep -hE "rank [0-9]" "$work"/rank*.log | head -3
echo "ok: links of host 1 shaped to 8 kbit/s: every rank ended with a reason in $took s"
