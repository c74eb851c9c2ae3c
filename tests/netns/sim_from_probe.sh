#!/usr/bin/env bash
# The simulator's prediction for an AllReduce between emulated hosts (1 rank
# each, all on this machine), from the network probe a launch logged:
#   sim_from_probe.sh HOSTS ALGO "TUNE tuner: line"   -> "size us ..." rows of `conflux sim`
# (CONFLUX_TOOL: the conflux binary). The line reads "... net 9.1us 1.8GB/s,
# call 0.3us, switch 3.0us, net curve 8:9.1,1024:9.4,..."; call, switch and
# curve may be absent. The emulated hosts share this machine: its cores
# take every message's overheads (and, with more hosts than cores, a switch
# to wake each receiver), and its copy bandwidth every inter-host byte (the
# probe's per-direction figure was measured with both directions busy: x2).
# Used by tests/scripts/tune_netns.sh (TUNE_VALIDATE=1) and
# bench/reprice_sim_validation, so both price a launch the same way.
set -euo pipefail
hosts=$1 algo=$2 line=$3
lat=$(echo "$line" | sed -E 's/.*net ([0-9.]+)us.*/\1/')
bw=$(echo "$line" | sed -E 's/.*net [0-9.]+us ([0-9.]+)GB\/s.*/\1/')
call=$(echo "$line" | sed -nE 's/.*, call ([0-9.]+)us.*/\1/p')
switch=$(echo "$line" | sed -nE 's/.*, switch ([0-9.]+)us.*/\1/p')
curve=$(echo "$line" | sed -nE 's/.*net curve ([0-9.:,]+).*/\1/p')
"${CONFLUX_TOOL:?}" sim --hosts "$hosts" --ranks-per-host 1 --intra-lat 1 --intra-bw 10 --net-lat "$lat" --net-bw "$bw" \
  --machine-cores "$(nproc)" --machine-net-bw "$(awk -v b="$bw" 'BEGIN { print 2 * b }')" \
  --call-overhead "${call:-0}" --switch-cost "${switch:-0}" ${curve:+--net-curve "$curve"} \
  -b 8 -e 2M -f 8 --algo "allreduce:$algo" -q 2>/dev/null
