#!/usr/bin/env bash
# The firmware's bus numbering against `conflux vm plan`'s prediction,
# without booting a kernel: QEMU (TCG) runs the firmware (SeaBIOS, QEMU's
# default, and OVMF, the UEFI one) on each stand-in layout, which enumerates
# PCI and numbers the buses; `query-pci` over QMP then gives
# every controller's and device's address by its id, and each must be the
# one plan.json predicts. Layouts: NCCL files (Azure NDv4, NDv5, the
# Broadcom-switched HGX A100) and hwloc dumps (AWS p5en, p6-b200, JUWELS
# Cluster), switch and flat.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
topo=${CONFLUX_SOURCE_DIR:?}/tests/data/topologies
command -v qemu-system-x86_64 >/dev/null ||
  { echo "vm_qmp: qemu-system-x86_64 is missing; scripts/install-deps.sh installs qemu-system-x86" >&2; exit 1; }
ovmf=/usr/share/ovmf/OVMF.fd
[ -f "$ovmf" ] || { echo "vm_qmp: $ovmf is missing; scripts/install-deps.sh installs ovmf" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/qmp.py" <<'PY'
import json, socket, sys, time
sock, plan_path = sys.argv[1], sys.argv[2]
plan = json.load(open(plan_path))
s = socket.socket(socket.AF_UNIX)
for _ in range(300):
    try:
        s.connect(sock)
        break
    except OSError:
        time.sleep(0.1)
f = s.makefile("rw")
def cmd(c):
    f.write(json.dumps({"execute": c}) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r
f.readline()
cmd("qmp_capabilities")
def addresses():
    out = {}
    def walk(bus):
        for d in bus["devices"]:
            if d.get("qdev_id"):
                out[d["qdev_id"]] = "0000:%02x:%02x.%x" % (d["bus"], d["slot"], d["function"])
            if "devices" in d.get("pci_bridge", {}):
                walk(d["pci_bridge"])
    for b in cmd("query-pci")["return"]:
        walk(b)
    return out
want = {d["qemu_id"]: d["guest"] for d in plan["devices"]}
want.update({c["id"]: c["guest"] for c in plan["controllers"]})
got = {}
for _ in range(600):  # the firmware numbers the buses shortly after reset
    got = addresses()
    if all(got.get(k) == v for k, v in want.items()):
        break
    time.sleep(0.1)
cmd("quit")
bad = sorted((k, v, got.get(k)) for k, v in want.items() if got.get(k) != v)
print("%s: %d ids, %d as predicted" % (sys.argv[3], len(want), len(want) - len(bad)))
for k, v, g in bad:
    print("  %s: predicted %s, firmware %s" % (k, v, g))
sys.exit(1 if bad else 0)
PY

# A synthetic host with 40 NICs on one root complex: two expander buses for
# one NUMA node (32 root ports each at most), and on the flat layout five
# slots of eight multifunction root ports.
python3 - >"$tmp/nics40.xml" <<'PY'
print('<system version="1">\n  <cpu numaid="0" affinity="0000000f">')
for i in range(1, 41):
    print('    <pci busid="0000:%02x:00.0" class="0x020000" vendor="0x15b3" device="0x1021"/>' % i)
print("  </cpu>\n</system>")
PY
n=0
for host in "$tmp/nics40.xml" azure-ndv4-topo.xml azure-ndv5-topo.xml alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml \
            hwloc/aws-p5en.48xlarge-hwloc.xml hwloc/aws-p6-b200.48xlarge-hwloc.xml \
            hwloc/jsc-juwelscluster-gpu-jwc09n003-hwloc.xml; do
  for layout in switch flat; do
    out=$tmp/$n
    path=$host
    [ "${host#/}" != "$host" ] || path=$topo/$host
    "$tool" vm plan --host "$path" --map all --layout "$layout" --out "$out" \
      --vcpus-per-node 1 --mem-per-node 64 >/dev/null
    mapfile -t args <"$out/qemu-args-standin.txt"
    for firmware in seabios ovmf; do
      bios=()
      [ "$firmware" = ovmf ] && bios=(-bios "$ovmf")
      sock=$tmp/qmp$n-$firmware.sock
      qemu-system-x86_64 "${args[@]}" "${bios[@]}" -accel tcg -nodefaults -display none -serial none -monitor none \
        -qmp "unix:$sock,server=on,wait=off" 2>"$tmp/qemu.err" &
      qemu=$!
      if ! python3 "$tmp/qmp.py" "$sock" "$out/plan.json" "$host ($layout, $firmware)"; then
        echo "vm_qmp: $host ($layout): $firmware numbered the buses otherwise" >&2
        cat "$tmp/qemu.err" >&2
        kill "$qemu" 2>/dev/null || true
        exit 1
      fi
      wait "$qemu"
    done
    n=$((n + 1))
  done
done
echo "vm_qmp: ok, $n layouts, each under SeaBIOS and OVMF"
