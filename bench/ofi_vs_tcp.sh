#!/bin/bash
# Interleaved TCP vs libfabric (tcp;ofi_rxm) AllReduce, 2 ranks on loopback.
# Usage: bench/ofi_vs_tcp.sh [build-dir] [rounds]
set -u
B=${1:-build}; R=${2:-2}
export CONFLUX_SOCKET_IFNAME=lo FI_TCP_IFACE=lo CONFLUX_SHM_COLL=0
for r in $(seq 1 "$R"); do
  for t in tcp ofi; do
    echo "### round $r transport $t"
    CONFLUX_TRANSPORT=$t CONFLUX_OFI_PROVIDER="tcp;ofi_rxm" \
      "$B/tools/conflux" run -n 2 "$B/tools/conflux" perf allreduce -b 8 -e 64M -f 4 -n ${ITERS:-10} -w 3 2>&1 | grep -v "^\[1\]"
  done
done
