#!/usr/bin/env bash
# `conflux run`, the local multi-rank launcher, driven with small shell
# programs as ranks: environment per rank, output prefixes and routing,
# failure propagation, signal forwarding, --timeout, exec failure.
# The rank programs are single-quoted on purpose: $RANK and friends must
# expand in the rank's shell, not in this one.
# shellcheck disable=SC2016
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/conflux_run_test.XXXXXX")
BACKGROUND_PIDS=()
cleanup() {
  for pid in "${BACKGROUND_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

check() { echo "CHECK: $*"; }
fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/out "$WORK"/err; do
    [[ -f $f ]] && { echo "--- $f:" >&2; cat "$f" >&2; }
  done
  exit 1
}
expect_rc() {  # expected actual what
  [[ $1 == "$2" ]] || fail "$3: exit status $2, expected $1"
}
expect_grep() {  # pattern file what
  grep -Eq -- "$1" "$2" || fail "$3: no line matching '$1' in $(basename "$2")"
}
# Runs the tool with stdout/stderr captured in $WORK/out and $WORK/err and
# the exit status in $RC (never aborts the script).
run_tool() {
  RC=0
  "$TOOL" run "$@" >"$WORK/out" 2>"$WORK/err" </dev/null || RC=$?
}
# Waits (up to 10 s) until $1 files exist matching the glob $2.
wait_for_files() {
  local want=$1 pattern=$2 i
  for ((i = 0; i < 200; i++)); do
    (($(compgen -G "$pattern" | wc -l) >= want)) && return 0
    sleep 0.05
  done
  fail "ranks did not start: fewer than $want files match $pattern"
}
# A process counts as dead once it is gone or a zombie: a rank's own children
# are reparented when the rank exits and reaped by whoever adopts them, which
# is not the launcher's business. Signals take a moment, so retry for 1 s.
is_alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
  [[ $state != Z* ]]
}
expect_all_dead() {  # pid files...
  local f i
  for f in "$@"; do
    for ((i = 0; i < 20; i++)); do
      is_alive "$(cat "$f")" || continue 2
      sleep 0.05
    done
    fail "process $(cat "$f") ($f) survived the job"
  done
}

check "each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_*, CONFLUX_ROOT"
run_tool -n 4 sh -c 'echo "RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK" \
  "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK MASTER_ADDR=$MASTER_ADDR" \
  "MASTER_PORT=$MASTER_PORT CONFLUX_ROOT=$CONFLUX_ROOT"'
expect_rc 0 "$RC" "4 ranks printing their environment"
[[ $(wc -l <"$WORK/out") -eq 4 ]] || fail "expected 4 output lines"
port=$(sed -n 's/.*MASTER_PORT=\([0-9]*\) .*/\1/p' "$WORK/out" | sort -u)
[[ $port =~ ^[0-9]+$ && $port -gt 0 ]] || fail "ranks disagree on MASTER_PORT or it is not a port: '$port'"
for r in 0 1 2 3; do
  expect_grep "^\[$r\] RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r LOCAL_WORLD_SIZE=4 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port CONFLUX_ROOT=127.0.0.1:$port\$" \
    "$WORK/out" "environment of rank $r"
done

check "CONFLUX_JOB_ID is shared by the ranks of a job, new per job, and a user's value is kept"
run_tool -n 3 sh -c 'echo "$CONFLUX_JOB_ID"'
expect_rc 0 "$RC" "job id"
job_ids=$(sed 's/^\[[0-9]\] //' "$WORK/out" | sort -u)
[[ -n $job_ids && $(wc -l <<<"$job_ids") -eq 1 ]] || fail "ranks disagree on CONFLUX_JOB_ID: $job_ids"
run_tool -n 1 sh -c 'echo "$CONFLUX_JOB_ID"'
[[ $(cat "$WORK/out") != "[0] $job_ids" ]] || fail "two jobs got the same CONFLUX_JOB_ID"
RC=0
CONFLUX_JOB_ID=mine "$TOOL" run -n 2 sh -c 'echo "$CONFLUX_JOB_ID"' >"$WORK/out" 2>"$WORK/err" || RC=$?
expect_rc 0 "$RC" "user job id"
[[ $(grep -c '^\[[01]\] mine$' "$WORK/out") -eq 2 ]] || fail "user's CONFLUX_JOB_ID not kept"

check "another launcher's rank variables in our environment do not reach the ranks"
RC=0
OMPI_COMM_WORLD_RANK=7 SLURM_PROCID=7 PMI_RANK=7 "$TOOL" run -n 1 \
  sh -c 'echo "[${OMPI_COMM_WORLD_RANK:-}${SLURM_PROCID:-}${PMI_RANK:-}]"' >"$WORK/out" 2>"$WORK/err" || RC=$?
expect_rc 0 "$RC" "foreign launcher variables"
[[ $(cat "$WORK/out") == "[0] []" ]] || fail "foreign rank variables leaked to the ranks"

check "--master-port and --master-addr are passed through"
run_tool -n 2 --master-addr 127.0.0.1 --master-port 29517 sh -c 'echo "$MASTER_PORT $CONFLUX_ROOT"'
expect_rc 0 "$RC" "fixed port"
[[ $(grep -c '^\[[01]\] 29517 127.0.0.1:29517$' "$WORK/out") -eq 2 ]] || fail "fixed port not seen by both ranks"

check "stdout lines go to stdout, stderr lines to stderr, both prefixed; partial last lines are flushed"
run_tool -n 2 sh -c 'echo "out $RANK"; echo "err $RANK" >&2; printf "tail $RANK"'
expect_rc 0 "$RC" "stdout/stderr routing"
for r in 0 1; do
  expect_grep "^\[$r\] out $r\$" "$WORK/out" "stdout of rank $r"
  expect_grep "^\[$r\] tail $r\$" "$WORK/out" "unterminated last line of rank $r"
  expect_grep "^\[$r\] err $r\$" "$WORK/err" "stderr of rank $r"
done
if grep -q err "$WORK/out" || grep -q out "$WORK/err"; then fail "stdout and stderr mixed up"; fi

check "--no-prefix prints the lines bare"
run_tool -n 2 --no-prefix sh -c 'echo "bare $RANK"'
expect_rc 0 "$RC" "--no-prefix"
[[ $(sort "$WORK/out" | tr '\n' ,) == "bare 0,bare 1," ]] || fail "--no-prefix output wrong"

check "long lines of concurrent ranks never interleave mid-line"
run_tool -n 4 sh -c 'line="$RANK-$(printf "%02000d" 0)"; i=0
  while [ $i -lt 300 ]; do echo "$line"; i=$((i + 1)); done'
expect_rc 0 "$RC" "concurrent long lines"
[[ $(wc -l <"$WORK/out") -eq 1200 ]] || fail "expected 1200 lines, got $(wc -l <"$WORK/out")"
if grep -Evq '^\[([0-3])\] \1-0{2000}$' "$WORK/out"; then fail "a line was torn or mislabelled"; fi

check "-x NAME=VALUE adds and overrides variables; arguments after -- belong to the program"
run_tool -n 2 -x FOO=bar -x 'WITH_EQ=a=b' -- sh -c 'echo "$FOO $WITH_EQ $1"' prog -n
expect_rc 0 "$RC" "-x and --"
[[ $(grep -c '^\[[01]\] bar a=b -n$' "$WORK/out") -eq 2 ]] || fail "-x values or program arguments not passed"
run_tool -x NOEQUALS true
[[ $RC -ne 0 ]] || fail "-x without '=' accepted"

check "rank 0 reads a redirected stdin; the other ranks read /dev/null"
RC=0
echo hello | "$TOOL" run -n 2 cat >"$WORK/out" 2>"$WORK/err" || RC=$?
expect_rc 0 "$RC" "stdin"
[[ $(cat "$WORK/out") == "[0] hello" ]] || fail "stdin not delivered to rank 0 only"

check "a failing rank: clear report, siblings stopped quickly, its exit status returned"
rm -f "$WORK"/pid.*
start=$(date +%s)
run_tool -n 3 sh -c 'echo $$ > '"$WORK"'/pid.$RANK
  if [ "$RANK" = 1 ]; then sleep 0.5; exit 3; fi; exec sleep 60'
elapsed=$(($(date +%s) - start))
expect_rc 3 "$RC" "rank 1 exiting with 3"
expect_grep '^conflux run: rank 1 \(pid [0-9]+\) exited with status 3$' "$WORK/err" "failure report"
((elapsed < 3 + 2)) || fail "stopping the sleeping siblings took ${elapsed}s (grace is 3 s)"
expect_all_dead "$WORK"/pid.*

check "siblings that ignore SIGTERM get SIGKILL after --grace"
start=$(date +%s)
rm -f "$WORK/ready"
# Rank 0 fails only once rank 1 has set its trap, or SIGTERM could win the race.
run_tool -n 2 --grace 1 sh -c 'trap "" TERM
  if [ "$RANK" = 0 ]; then while [ ! -e '"$WORK"'/ready ]; do sleep 0.05; done; exit 5; fi
  touch '"$WORK"'/ready; sleep 60'
elapsed=$(($(date +%s) - start))
expect_rc 5 "$RC" "rank 0 exiting with 5"
expect_grep 'sending SIGKILL' "$WORK/err" "SIGKILL escalation"
((elapsed < 1 + 2)) || fail "SIGKILL after --grace 1 took ${elapsed}s"

check "a rank killed by a signal is named, exit status 128+signal"
run_tool -n 2 sh -c 'if [ "$RANK" = 1 ]; then kill -SEGV $$; fi; exec sleep 60'
expect_rc $((128 + 11)) "$RC" "rank killed by SIGSEGV"
expect_grep '^conflux run: rank 1 \(pid [0-9]+\) killed by signal SIGSEGV' "$WORK/err" "signal report"

check "exited ranks are reaped while the others run (no zombies)"
"$TOOL" run -n 2 sh -c 'if [ "$RANK" = 1 ]; then sleep 2; fi' >"$WORK/out" 2>"$WORK/err" &
launcher=$!
BACKGROUND_PIDS+=("$launcher")
sleep 1
# shellcheck disable=SC2009 # pgrep cannot select by process state
if ps -o stat= --ppid "$launcher" | grep -q Z; then fail "a finished rank is left as a zombie"; fi
RC=0
wait "$launcher" || RC=$?
expect_rc 0 "$RC" "zombie check job"

for sig in TERM INT; do
  check "SIG$sig to the launcher is forwarded to every rank (and their children)"
  rm -f "$WORK"/pid.* "$WORK"/child.*
  "$TOOL" run -n 3 sh -c 'trap "echo got-'$sig'; exit 0" '$sig'
    sleep 60 & echo $! > '"$WORK"'/child.$RANK; echo $$ > '"$WORK"'/pid.$RANK; wait' \
    >"$WORK/out" 2>"$WORK/err" &
  launcher=$!
  BACKGROUND_PIDS+=("$launcher")
  wait_for_files 3 "$WORK/pid.*"
  start=$(date +%s)
  kill -"$sig" "$launcher"
  RC=0
  wait "$launcher" || RC=$?
  elapsed=$(($(date +%s) - start))
  sig_number=$(kill -l "$sig")
  expect_rc $((128 + sig_number)) "$RC" "launcher after SIG$sig"
  ((elapsed < 2)) || fail "ranks took ${elapsed}s to stop after SIG$sig"
  [[ $(grep -c "^\[[0-2]\] got-$sig\$" "$WORK/out") -eq 3 ]] || fail "not every rank saw SIG$sig"
  expect_grep "caught SIG$sig" "$WORK/err" "signal forwarding report"
  expect_all_dead "$WORK"/pid.* "$WORK"/child.*
done

check "--timeout stops the job and exits 124"
start=$(date +%s)
run_tool -n 2 --timeout 1 sleep 60
elapsed=$(($(date +%s) - start))
expect_rc 124 "$RC" "--timeout 1"
expect_grep 'exceeded --timeout' "$WORK/err" "timeout report"
((elapsed < 1 + 2)) || fail "--timeout 1 took ${elapsed}s"

check "a program that cannot be executed is reported with the reason"
run_tool -n 2 "$WORK/no-such-program"
[[ $RC -ne 0 ]] || fail "exec failure exited 0"
expect_grep "cannot execute '.*no-such-program': No such file or directory" "$WORK/err" "exec failure report"
printf 'not a program\n' >"$WORK/not-executable"
run_tool -n 2 "$WORK/not-executable"
[[ $RC -ne 0 ]] || fail "exec of a non-executable file exited 0"
expect_grep 'cannot execute .*: Permission denied' "$WORK/err" "permission failure report"

check "ranks get disjoint CPU blocks that cover the launcher's mask, unless told otherwise"
mask() { grep Cpus_allowed_list /proc/self/status | cut -f2; }
ncpus=$(nproc)
allowed=$(mask)
# Each rank prints its mask as the expanded list of CPUs, one per line.
expand='for part in $(grep Cpus_allowed_list /proc/self/status | cut -f2 | tr , " "); do
  case $part in *-*) seq ${part%-*} ${part#*-};; *) echo $part;; esac; done | sed "s/^/cpu /"'
run_tool -n "$ncpus" sh -c "$expand"
expect_rc 0 "$RC" "--bind-to auto with one rank per CPU"
[[ $(grep -c ' cpu ' "$WORK/out") -eq $ncpus ]] || fail "$ncpus ranks were not bound to one CPU each"
[[ $(awk '{print $3}' "$WORK/out" | sort -u | wc -l) -eq $ncpus ]] || fail "two ranks share a CPU"
run_tool -n $((ncpus + 1)) sh -c 'grep Cpus_allowed_list /proc/self/status'
[[ $(grep -c "	$allowed\$" "$WORK/out") -eq $((ncpus + 1)) ]] || fail "oversubscribed ranks were bound"
run_tool --bind-to none -n "$ncpus" sh -c 'grep Cpus_allowed_list /proc/self/status'
[[ $(grep -c "	$allowed\$" "$WORK/out") -eq $ncpus ]] || fail "--bind-to none bound a rank"
run_tool --bind-to core -n $((ncpus + 1)) sh -c "$expand"
[[ $(grep -c ' cpu ' "$WORK/out") -eq $((ncpus + 1)) ]] || fail "--bind-to core did not give each rank one CPU"
run_tool -v -n 1 true
expect_grep 'ranks bound to blocks of' "$WORK/err" "--verbose names the binding"
run_tool --bind-to socket -n 2 true
[[ $RC -ne 0 ]] || fail "--bind-to socket was accepted"

echo "PASS: conflux run"
