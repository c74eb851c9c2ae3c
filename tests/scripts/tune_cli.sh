#!/usr/bin/env bash
# `conflux sim` and `conflux plan`, and CONFLUX_ALGO on a real communicator:
# the simulated 1024-rank 8-byte tree AllReduce is under 1/10 of the ring's;
# plan explains a choice; a forced algorithm that cannot serve a call fails
# it with a message saying why; the TUNE log names each choice; MoE
# dispatch and combine are priced flat against hierarchical.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
export CONFLUX_TUNE_CACHE=${CONFLUX_TUNE_CACHE:-$(mktemp -d)}
model="--hosts 128 --ranks-per-host 8 --intra-bw 20 --intra-lat 1 --net-bw 50 --net-lat 5"
row=$("$tool" sim $model -b 8 -e 8 --algo allreduce:ring,tree -q | awk '$1 == 8')
ring=$(echo "$row" | awk '{print $2}'); tree=$(echo "$row" | awk '{print $5}')
awk -v r="$ring" -v t="$tree" 'BEGIN { exit !(t * 10 <= r) }' || { echo "FAIL: tree $tree us vs ring $ring us"; exit 1; }
echo "ok: 1024 ranks, 8 B AllReduce: tree $tree us, ring $ring us"

# A calibration taken while other work held the cores serves the next
# minute with the built-in constants, saying so, and is then measured again.
calibrated="--hosts 1 --ranks-per-host 2 -b 8 -e 8"
busy_dir=$(mktemp -d)
sim_calibrated() { CONFLUX_TUNE_CACHE="$busy_dir" "$tool" sim $calibrated "$@"; }
sim_calibrated -q >/dev/null
cache=$(ls "$busy_dir"/tune-*.txt)
sed -i -e 's/^held .*/held 0.1/' -e "s/^measured_at .*/measured_at $(date +%s)/" "$cache"
out=$(sim_calibrated 2>&1 | grep "^# constants")
grep -q "defaults (other work shared the cores: the calibration's threads ran 10% of their time), cached in" <<<"$out" \
  || { echo "$out"; echo "FAIL: a busy calibration's cache not reported as such"; exit 1; }
sed -i 's/^measured_at .*/measured_at 1000/' "$cache"
sim_calibrated -q >/dev/null
grep -q "^measured_at 1000$" "$cache" && { cat "$cache"; echo "FAIL: a busy calibration's cache was not measured again"; exit 1; }
echo "ok: a busy calibration is used for a minute, saying so, then measured again"

# Measured costs given as flags: refused when negative or malformed (not
# silently read as "use the calibrated value"), and shown when taken.
for bad in "--switch-cost -1" "--call-overhead -0.5" "--switch-cost nan" "--net-curve 8:9,4:10"; do
  if out=$("$tool" sim $model $bad -b 8 -e 8 -q 2>&1); then echo "$out"; echo "FAIL: sim accepted $bad"; exit 1; fi
  grep -qE "expected" <<<"$out" || { echo "$out"; echo "FAIL: no reason given for $bad"; exit 1; }
done
"$tool" sim --hosts 4 --ranks-per-host 1 --machine-cores 2 --switch-cost 2.5 -b 8 -e 8 -q 2>&1 | grep -q "switch 2.50us" \
  || { echo "FAIL: --switch-cost not in the model's description"; exit 1; }
echo "ok: sim refuses negative or malformed costs, and takes --switch-cost"

out=$("$tool" plan allreduce 1M --hosts 2 --ranks-per-host 4 --intra-bw 10 --intra-lat 1 --net-bw 1 --net-lat 20)
grep -q "^choice: " <<<"$out" || { echo "$out"; echo "FAIL: plan printed no choice"; exit 1; }
grep -q "^hier " <<<"$out" || { echo "$out"; echo "FAIL: plan did not list hier"; exit 1; }
echo "ok: plan explains ($(echo "$out" | grep '^choice'))"

# MoE: across hosts the hierarchical dispatch sends fewer bytes over the
# network than the flat one, and the layer is said to run it (the flat one
# with CONFLUX_MOE_HIER=0); on one host it runs the placed path; experts that
# do not divide over the ranks are refused.
moe="--intra-bw 10 --intra-lat 1 --net-bw 1 --net-lat 20 --hidden 512 --experts 16 --topk 4"
out=$("$tool" plan moe 64 --hosts 4 --ranks-per-host 2 $moe)
flat=$(awk '$1 == "flat" {print $2}' <<<"$out"); hier=$(awk '$1 == "hierarchical" {print $2}' <<<"$out")
awk -v f="$flat" -v h="$hier" 'BEGIN { exit !(h < f) }' || { echo "$out"; echo "FAIL: hierarchical dispatch bytes"; exit 1; }
grep -q "the layer runs: hier+flat (dispatch through a proxy per host" <<<"$out" ||
  { echo "$out"; echo "FAIL: plan moe names the wrong path"; exit 1; }
out=$(CONFLUX_MOE_HIER=0 "$tool" plan moe 64 --hosts 4 --ranks-per-host 2 $moe)
grep -q "the layer runs: flat (CONFLUX_MOE_HIER=0)" <<<"$out" || { echo "$out"; echo "FAIL: plan moe, flat forced"; exit 1; }
out=$("$tool" sim --coll moe --hosts 1 --ranks-per-host 4 --tokens 16 $moe)
grep -q "the layer runs: placed (one host)" <<<"$out" || { echo "$out"; echo "FAIL: sim moe on one host"; exit 1; }
grep -q "^ *placed " <<<"$out" || { echo "$out"; echo "FAIL: no placed row"; exit 1; }
if out=$("$tool" sim --coll moe --hosts 3 --ranks-per-host 1 --tokens 16 $moe 2>&1); then
  echo "$out"; echo "FAIL: 16 experts over 3 ranks accepted"; exit 1
fi
grep -q "experts must be a multiple of the ranks" <<<"$out" || { echo "$out"; echo "FAIL: no reason"; exit 1; }
echo "ok: plan and sim price MoE dispatch and combine (hierarchical dispatch $hier MiB against flat $flat)"

out=$(CONFLUX_ALGO="broadcast:ring" "$tool" plan broadcast 1K --ranks 4 --hosts 1 || true)
grep -q "leaves no usable algorithm for broadcast" <<<"$out" || { echo "$out"; echo "FAIL: forced ring for broadcast"; exit 1; }
echo "ok: plan reports a forced algorithm that cannot serve"

# A real communicator (2 ranks, TCP, one host): hier cannot serve, the call fails and says so.
out=$(CONFLUX_TRANSPORT=tcp CONFLUX_ALGO="allreduce:hier" "$tool" run -n 2 --timeout 60 -- \
      "$tool" perf allreduce -b 1K -e 1K -n 1 -w 0 -c 0 2>&1 || true)
grep -q "single host: nothing to make hierarchical" <<<"$out" || { echo "$out"; echo "FAIL: forced hier on one host"; exit 1; }
echo "ok: a forced algorithm that cannot serve fails the call, saying why"

out=$(CONFLUX_TRANSPORT=tcp CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=TUNE CONFLUX_ALGO="allreduce:0-4K:tree#allreduce:4K-inf:ring" \
      "$tool" run -n 2 --timeout 60 -- "$tool" perf allreduce -b 1K -e 64K -f 64 -n 1 -w 0 -c 1 2>&1)
grep -q "TUNE allreduce 1024 bytes on 2 ranks (1 hosts): tree" <<<"$out" || { echo "$out"; echo "FAIL: range rule"; exit 1; }
grep -q "TUNE allreduce 65536 bytes on 2 ranks (1 hosts): ring" <<<"$out" || { echo "$out"; echo "FAIL: range rule"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: wrong values"; exit 1; }
echo "ok: UCC-style size ranges choose per size, results correct"

# `conflux tune --write` measures each algorithm and stores the fastest per
# size; a later communicator of the same layout takes the measured choice.
table=$(mktemp -d)/algos.txt
out=$(CONFLUX_TUNE_TABLE="$table" CONFLUX_TRANSPORT=tcp "$tool" run -n 2 --timeout 120 -- \
      "$tool" tune --colls broadcast,allreduce -b 64 -e 4K -f 8 -r 1 --write 2>&1)
grep -q "written to $table" <<<"$out" || { echo "$out"; echo "FAIL: tune --write"; exit 1; }
entry=$(grep "^ranks=2,hosts=1,transport=tcp,shm_coll=1 " "$table") || { cat "$table"; echo "FAIL: no entry"; exit 1; }
bcast=$(echo "$out" | awk '$2 == "broadcast" && $3 == 4096 {print $5}')
[ -n "$bcast" ] || { echo "$out"; echo "FAIL: no broadcast 4096 row"; exit 1; }
out=$(CONFLUX_TUNE_TABLE="$table" CONFLUX_TRANSPORT=tcp CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=TUNE \
      "$tool" run -n 2 --timeout 60 -- "$tool" perf broadcast -b 4K -e 4K -n 1 -w 0 -c 1 2>&1)
grep -q "TUNE broadcast 4096 bytes on 2 ranks (1 hosts): $bcast — $bcast measured fastest on this host" <<<"$out" \
  || { echo "$out"; echo "FAIL: measured choice ($bcast) not taken"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: wrong values"; exit 1; }
echo "ok: conflux tune stores ${entry%% *}; the next communicator takes $bcast for broadcast 4 KiB"

# On one host the one-sided algorithms are candidates like any other:
# tune times them beside the point-to-point schedules.
out=$("$tool" run -n 2 --timeout 60 -- "$tool" tune --colls broadcast,allreduce -b 64 -e 64 -r 1 2>&1)
for algo in eager direct chain; do
  grep -q " $algo [0-9.]* us" <<<"$out" || { echo "$out"; echo "FAIL: tune did not time $algo"; exit 1; }
done
echo "ok: tune times the one-sided algorithms beside the others"

# A damaged table entry is reported and ignored; the job still runs correctly.
echo "ranks=2,hosts=1,transport=tcp,shm_coll=1 allreduce:0-:ring" >> "$table"
out=$(CONFLUX_TUNE_TABLE="$table" CONFLUX_TRANSPORT=tcp "$tool" run -n 2 --timeout 60 -- \
      "$tool" perf allreduce -b 1K -e 1K -n 1 -w 0 -c 1 2>&1)
grep -q "WARN TUNE ignoring the measured table: measured table $table" <<<"$out" \
  || { echo "$out"; echo "FAIL: no warning for a damaged table"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: wrong values"; exit 1; }
echo "ok: a damaged measured table is reported and ignored"
