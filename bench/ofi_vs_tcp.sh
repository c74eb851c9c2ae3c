#!/bin/bash
# Interleaved TCP vs libfabric (tcp;ofi_rxm) AllReduce, 2 ranks on loopback.
# Usage: bench/ofi_vs_tcp.sh [build-dir] [rounds]
# Modes per round: tcp, ofi (CONFLUX_OFI_WAIT=1: CQ wait fd), ofi-poll
# (CONFLUX_OFI_WAIT=0: polled CQ, the default). MODES, MIN (-b), MAX (-e), ITERS, WARM override.
set -u
B=${1:-build}; R=${2:-2}
export CONFLUX_SOCKET_IFNAME=lo FI_TCP_IFACE=lo CONFLUX_SHM_COLL=0
for r in $(seq 1 "$R"); do
  for m in ${MODES:-tcp ofi ofi-poll}; do
    echo "### round $r mode $m"
    t=${m%%-*}; wait=1; [ "$m" = ofi-poll ] && wait=0
    CONFLUX_TRANSPORT=$t CONFLUX_OFI_PROVIDER="tcp;ofi_rxm" CONFLUX_OFI_WAIT=$wait \
      "$B/tools/conflux" run -n 2 "$B/tools/conflux" perf allreduce -b ${MIN:-8} -e ${MAX:-64M} -f 4 \
      -n ${ITERS:-10} -w ${WARM:-3} 2>&1 | grep -v "^\[1\]"
  done
done
