#!/usr/bin/env bash
# TCP data goes over each rank's nearest NIC by topology, not just the
# interface that reaches the rendezvous, and falls back to that
# interface when the NIC cannot reach a peer. Two emulated hosts, each with
# eth0 (10.77.0.x, the rendezvous network) and eth1 (10.78.0.x); a topology
# file puts eth1 at 100 Gb/s next to the CPU, so it is the nearest NIC.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
if [ "$(id -u)" != 0 ] || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: needs root and ip netns"; exit 0
fi
source "${CONFLUX_SOURCE_DIR:?}/tests/netns/emulate_hosts.sh"
work=$(mktemp -d)
trap 'cfx_hosts_down; rm -rf "$work"' EXIT
cfx_hosts_up 2
cfx_add_network 2 10.78.0 eth1
cat >"$work/topo.xml" <<'XML'
<system version="1">
  <cpu numaid="0" affinity="ffffffff,ffffffff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:00:1f.0" class="0x020000" vendor="0x15b3" device="0x101b" subsystem_vendor="0x15b3" subsystem_device="0x0007" link_speed="16.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="eth1" dev="0" speed="100000" port="1" latency="0.000000" guid="0x1" maxconn="65536" gdr="0"/>
      </nic>
    </pci>
  </cpu>
</system>
XML
tx_bytes() { ip netns exec "${CFX_NS_PREFIX}h$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
run() {  # run LOG [env...]: 2 hosts x 1 rank, 8 MiB allreduce x 4, checked
  local log=$1
  shift
  env CFX_IFNAME= CONFLUX_TOPO_FILE="$work/topo.xml" CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=NET "$@" \
    bash -c "source '$CONFLUX_SOURCE_DIR/tests/netns/emulate_hosts.sh'; CFX_NS_PREFIX=$CFX_NS_PREFIX; \
             cfx_run_cluster 2 1 timeout 120 '$tool' perf allreduce -b 8M -e 8M -n 4 -w 0 -c 1" >"$log" 2>&1
  grep -q "Out of bounds values : 0 OK" "$log" || { cat "$log"; echo "FAIL: wrong values"; exit 1; }
}

# 1. Reachable: the data connection is made to the peer's eth1 address and
#    the bytes leave through eth1 (eth0 carries only the rendezvous).
e1=$(tx_bytes 1 eth1); e0=$(tx_bytes 1 eth0)
run "$work/a.log"
grep -q "TCP data on eth1 10.78.0.1" "$work/a.log" || { cat "$work/a.log"; echo "FAIL: rank 0 not listening on eth1"; exit 1; }
grep -q "rank 1 -> rank 0: via 10.78.0.1" "$work/a.log" || { cat "$work/a.log"; echo "FAIL: not connected via eth1"; exit 1; }
d1=$(( $(tx_bytes 1 eth1) - e1 )); d0=$(( $(tx_bytes 1 eth0) - e0 ))
echo "host 1 sent $d1 bytes on eth1, $d0 on eth0"
[ "$d1" -gt $((4 * 8 * 1024 * 1024 / 2)) ] || { echo "FAIL: the data did not go over eth1"; exit 1; }
[ "$d0" -lt 1000000 ] || { echo "FAIL: $d0 bytes went over eth0"; exit 1; }
echo "ok: data over the nearest NIC (eth1)"

# 2. libfabric (tcp;ofi_rxm) opens the domain of the nearest NIC too.
if "$tool" version | grep -q "ofi"; then
  e1=$(tx_bytes 1 eth1)
  run "$work/ofi.log" CONFLUX_TRANSPORT=ofi CONFLUX_OFI_PROVIDER="tcp;ofi_rxm" FI_TCP_IFACE=
  grep -q "libfabric: domain eth1 (the data interface or nearest NIC)" "$work/ofi.log" || { cat "$work/ofi.log"; echo "FAIL: ofi not on eth1"; exit 1; }
  d1=$(( $(tx_bytes 1 eth1) - e1 ))
  [ "$d1" -gt $((4 * 8 * 1024 * 1024 / 2)) ] || { echo "FAIL: ofi data did not go over eth1 ($d1 bytes)"; exit 1; }
  echo "ok: libfabric data over the nearest NIC (eth1, $d1 bytes)"
fi

# 3. Unreachable: host 0's eth1 is cut at the switch. Rank 1 tries eth1,
#    warns, and falls back to eth0; results stay correct.
ip -n "${CFX_NS_PREFIX}sw" link set "cfxq${$}h0" down
run "$work/b.log"
grep -q "nearest-NIC address 10.78.0.1.* is unreachable" "$work/b.log" || { cat "$work/b.log"; echo "FAIL: no fallback warning"; exit 1; }
echo "ok: unreachable nearest NIC falls back to the rendezvous interface"
