#!/usr/bin/env bash
# `conflux vm` end to end: plan writes its five files (from an NCCL file, an
# hwloc dump, a map, a libvirt domain); check's exit codes on fake /sys
# trees; xml on a flat guest; `conflux topo` cross-checking an injected file;
# cores on this machine's first two CPUs; and the bad inputs, each a clear
# error.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
topo=${CONFLUX_SOURCE_DIR:?}/tests/data/topologies
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "vm_cli: $*" >&2; exit 1; }

# A small host: NUMA 0 has a switch with a GPU and a NIC, NUMA 1 a GPU.
cat >"$tmp/host.xml" <<'EOF'
<system version="1">
  <cpu numaid="0" affinity="00000003" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed="32.0 GT/s PCIe" link_width="16"/>
      <pci busid="0000:12:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16"/>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="0000000c" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:90:00.0" class="0x030200" vendor="0x10de" device="0x2335" link_speed="32.0 GT/s PCIe" link_width="16"/>
  </cpu>
</system>
EOF

"$tool" vm plan --host "$tmp/host.xml" --map all --out "$tmp/small" >"$tmp/small.txt"
for f in qemu-args.txt qemu-args-standin.txt libvirt.xml guest-topo.xml plan.json; do
  [ -s "$tmp/small/$f" ] || fail "plan did not write $f"
done
grep -q "0 with a path class other than the host's; NUMA preserved" "$tmp/small.txt"
grep -qx "vfio-pci,host=0000:11:00.0,id=gpu0,bus=sw0p0,addr=0x0" "$tmp/small/qemu-args.txt"
grep -qx "virtio-gpu-pci,id=gpu0,bus=sw0p0,addr=0x0" "$tmp/small/qemu-args-standin.txt"
python3 - "$tmp/small/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
d = {x["qemu_id"]: x for x in p["devices"]}
assert d["gpu0"] == {**d["gpu0"], "kind": "gpu", "host": "0000:11:00.0", "guest": "0000:04:00.0"}, d["gpu0"]
assert d["nic0"]["guest"] == "0000:05:00.0" and d["nic0"]["guest_switch"] == "0000:02:00.0"
assert d["gpu1"]["guest"] == "0000:07:00.0" and d["gpu1"]["guest_numa"] == 1
pairs = {(x["a"], x["b"]): (x["host"], x["guest"]) for x in p["pairs"]}
assert pairs[("gpu0", "nic0")] == ("PIX", "PIX") and pairs[("gpu0", "gpu1")] == ("SYS", "SYS"), pairs
PY

# libvirt.xml in a q35 domain with the NUMA cells it asks for passes
# libvirt's own schema (virt-xml-validate, libvirt-clients).
command -v virt-xml-validate >/dev/null || fail "virt-xml-validate is missing; scripts/install-deps.sh installs libvirt-clients"
validate() {  # plan dir
  python3 - "$1" >"$1/domain.xml" <<'PY'
import json, sys
d = sys.argv[1]
p = json.load(open(d + "/plan.json"))
cells = "".join("<cell id='%d' cpus='%s' memory='%d' unit='MiB'/>" % (n["node"], n["cpus"], n["mem_mib"]) for n in p["numa"])
vcpus = sum(len(range(int(c.split("-")[0]), int(c.split("-")[-1]) + 1)) for c in (n["cpus"] for n in p["numa"]))
mem = sum(n["mem_mib"] for n in p["numa"])
print("<domain type='kvm'><name>plan</name><memory unit='MiB'>%d</memory><vcpu>%d</vcpu>" % (mem, vcpus))
print("<os><type arch='x86_64' machine='q35'>hvm</type></os><cpu><numa>%s</numa></cpu><devices>" % cells)
print(open(d + "/libvirt.xml").read())
print("</devices></domain>")
PY
  virt-xml-validate "$1/domain.xml" domain >"$tmp/validate.txt" 2>&1 || { cat "$tmp/validate.txt" >&2; fail "$1/libvirt.xml does not pass libvirt's domain schema"; }
}
validate "$tmp/small"
"$tool" vm plan --host "$topo/azure-ndv4-topo.xml" --map all --out "$tmp/ndv4plan" >/dev/null
validate "$tmp/ndv4plan"
sed "s/model='pcie-root-port'>/model='pcie-root-porto'>/" "$tmp/ndv4plan/domain.xml" >"$tmp/baddomain.xml"
if virt-xml-validate "$tmp/baddomain.xml" domain >/dev/null 2>&1; then fail "the schema check accepts a bad model"; fi

# An hwloc dump, and a map naming two of its devices with a guest NUMA node.
printf '# GPU and its EFA\n0000:59:00.0\n0000:55:00.0 0\n' >"$tmp/map.txt"
"$tool" vm plan --host "$topo/hwloc/aws-p5en.48xlarge-hwloc.xml" --map "$tmp/map.txt" --out "$tmp/p5en" >/dev/null
python3 -c "import json,sys; p=json.load(open('$tmp/p5en/plan.json')); assert [x['host'] for x in p['devices']]==['0000:59:00.0','0000:55:00.0'], p['devices']; assert p['pairs'][0]['guest']=='PIX'"

# The hostdevs of a libvirt domain.
cat >"$tmp/domain.xml" <<'EOF'
<domain type='kvm'>
  <os><type arch='x86_64' machine='q35'>hvm</type></os>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x11' slot='0x00' function='0x0'/></source>
    </hostdev>
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x12' slot='0x00' function='0x0'/></source>
    </hostdev>
  </devices>
</domain>
EOF
"$tool" vm plan --host "$tmp/host.xml" --domain "$tmp/domain.xml" --out "$tmp/dom" >/dev/null
grep -q "<source>" "$tmp/dom/libvirt.xml"
[ "$(grep -c "<hostdev " "$tmp/dom/libvirt.xml")" = 2 ]

# Fake /sys trees: function directories nested as the PCI tree, with
# /sys/bus/pci/devices links, CPUs and NUMA nodes. Spec lines:
# "fn PATH CLASS NUMA" (PATH: pci0000:01/0000:01:00.0/...) and "node N CPULIST".
cat >"$tmp/mkfake.py" <<'PY'
import os, sys
root = sys.argv[1]
cpus = []
for line in sys.stdin:
    f = line.split()
    if not f:
        continue
    if f[0] == "fn":
        path, cls, numa = f[1], f[2], f[3]
        d = os.path.join(root, "sys/devices", path)
        os.makedirs(d, exist_ok=True)
        for k, v in (("class", cls), ("vendor", "0x1af4"), ("numa_node", numa)):
            open(os.path.join(d, k), "w").write(v + "\n")
        bus = os.path.join(root, "sys/bus/pci/devices")
        os.makedirs(bus, exist_ok=True)
        os.symlink(os.path.join("../../../devices", path), os.path.join(bus, os.path.basename(path)))
    elif f[0] == "node":
        d = os.path.join(root, "sys/devices/system/node/node" + f[1])
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "cpulist"), "w").write(f[2] + "\n")
        cpus.append(f[2])
os.makedirs(os.path.join(root, "sys/devices/system/cpu"), exist_ok=True)
open(os.path.join(root, "sys/devices/system/cpu/online"), "w").write(",".join(cpus) + "\n")
PY
mkfake() { python3 "$tmp/mkfake.py" "$1"; }  # dir < spec
# The small plan's guest: pxb0 (bus 1, NUMA 0) with the switch, pxb1 (bus 6, NUMA 1).
guest_spec() {  # NUMA of nic0
  cat <<EOF
fn pci0000:01/0000:01:00.0 0x060400 0
fn pci0000:01/0000:01:00.0/0000:02:00.0 0x060400 0
fn pci0000:01/0000:01:00.0/0000:02:00.0/0000:03:00.0 0x060400 0
fn pci0000:01/0000:01:00.0/0000:02:00.0/0000:03:01.0 0x060400 0
fn pci0000:01/0000:01:00.0/0000:02:00.0/0000:03:00.0/0000:04:00.0 0x038000 0
fn pci0000:01/0000:01:00.0/0000:02:00.0/0000:03:01.0/0000:05:00.0 0x020000 $1
fn pci0000:06/0000:06:00.0 0x060400 1
fn pci0000:06/0000:06:00.0/0000:07:00.0 0x038000 1
node 0 0-1
node 1 2-3
EOF
}
grep -q '"bus_nr": 6' "$tmp/small/plan.json" || fail "the small plan's second expander is not at bus 6"
guest_spec 0 | mkfake "$tmp/good"
"$tool" vm check --expect "$tmp/small/plan.json" --sysfs-root "$tmp/good" --topo-file "$tmp/small/guest-topo.xml" >"$tmp/good.txt" ||
  { cat "$tmp/good.txt" >&2; fail "the planned guest does not pass"; }
grep -q "as-planned" "$tmp/good.txt"
grep -q "host (plan)" "$tmp/good.txt"
guest_spec 1 | mkfake "$tmp/badnuma"
rc=0; "$tool" vm check --expect "$tmp/small/plan.json" --sysfs-root "$tmp/badnuma" >"$tmp/bad.txt" || rc=$?
[ "$rc" = 1 ] || fail "a wrong NUMA node exits $rc, not 1"
grep -q "wrong-numa" "$tmp/bad.txt"
# A flat guest: three devices on root ports of pcie.0.
mkfake "$tmp/flat" <<'EOF'
fn pci0000:00/0000:00:10.0 0x060400 -1
fn pci0000:00/0000:00:10.1 0x060400 -1
fn pci0000:00/0000:00:10.2 0x060400 -1
fn pci0000:00/0000:00:10.0/0000:01:00.0 0x030200 -1
fn pci0000:00/0000:00:10.1/0000:02:00.0 0x020000 -1
fn pci0000:00/0000:00:10.2/0000:03:00.0 0x030200 -1
node 0 0-3
EOF
rc=0; "$tool" vm check --sysfs-root "$tmp/flat" >"$tmp/flat.txt" || rc=$?
[ "$rc" = 2 ] || fail "a flat guest exits $rc, not 2"
grep -q "flat tree" "$tmp/flat.txt"
rc=0; "$tool" vm check --expect "$tmp/small/plan.json" --sysfs-root "$tmp/flat" >/dev/null || rc=$?
[ "$rc" = 1 ] || fail "a flat guest against the switch plan exits $rc, not 1"
# vm xml: the host's grouping on the flat guest's bus ids, with a synthetic switch.
# The stand-ins carry no NVIDIA or Mellanox ids: match by kind and bus id order.
sed -i 's/vendor="0x10de" device="0x2335" //; s/vendor="0x15b3" device="0x1021" //' "$tmp/host.xml"
"$tool" vm xml --host "$tmp/host.xml" --sysfs-root "$tmp/flat" --out "$tmp/flat-topo.xml"
grep -q 'busid="ffff:ff:00.0"' "$tmp/flat-topo.xml"
"$tool" topo --topo-file "$tmp/flat-topo.xml" --format json | python3 -c "
import json, sys
d = json.load(sys.stdin)
assert d['paths']['GPU0']['NIC0']['type'] == 'PIX', d['paths']['GPU0']
assert d['paths']['GPU0']['GPU1']['type'] == 'PHB', d['paths']['GPU0']"
"$tool" vm check --sysfs-root "$tmp/flat" --topo-file "$tmp/flat-topo.xml" >/dev/null || [ $? = 2 ]

# conflux topo cross-checks an injected file against /sys: the historical
# NDv4 file on an NDv4 guest (devices on their own roots, current NUMA nodes).
python3 - "$topo/azure-ndv4-topo.xml" >"$tmp/ndv4.spec" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
for cpu in root.findall("cpu"):
    n = cpu.get("numaid")
    for pci in cpu.iter("pci"):
        b, c = pci.get("busid").lower(), pci.get("class")
        if b.startswith("ffff"):
            continue
        print("fn pci%s/%s %s %s" % (b[:7], b, c, n))
    print("node %s %d-%d" % (n, int(n) * 24, int(n) * 24 + 23))
PY
mkfake "$tmp/ndv4" <"$tmp/ndv4.spec"
"$tool" topo --topo-file "$topo/azure-ndv4-topo.xml" --sysfs-root "$tmp/ndv4" --format json >"$tmp/cur.json"
"$tool" topo --topo-file "$topo/azure-ndv4-topo.2023-06-historical-swapped-numa.xml" --sysfs-root "$tmp/ndv4" \
  --format json >"$tmp/old.json"
python3 - "$tmp/cur.json" "$tmp/old.json" <<'PY'
import json, sys
cur = {w["code"] for w in json.load(open(sys.argv[1]))["warnings"]}
old = {w["code"] for w in json.load(open(sys.argv[2]))["warnings"]}
assert not any(c.startswith("topo-file-") for c in cur), cur
assert "topo-file-wrong-numa" in old, old
PY

# Bad input: each a clear error, no crash.
expect_error() {  # pattern command...
  local pattern=$1; shift
  local rc=0
  "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
  [ "$rc" = 1 ] || { cat "$tmp/err" >&2; fail "exit $rc (not 1) for: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "no \"$pattern\" for: $*"; }
}
printf '0000:11:00.0\n0000:1x:00.0\n' >"$tmp/badmap.txt"
expect_error "badmap.txt:2: \"0000:1x:00.0\" is not a PCI address" \
  "$tool" vm plan --host "$tmp/host.xml" --map "$tmp/badmap.txt" --out "$tmp/x"
printf '0000:11:00.0\n0000:1' >"$tmp/cut.txt"
expect_error "cut.txt:2:" "$tool" vm plan --host "$tmp/host.xml" --map "$tmp/cut.txt" --out "$tmp/x"
printf '0000:99:00.0\n' >"$tmp/absent.txt"
expect_error "absent.txt:1: the host has no PCI device 0000:99:00.0" \
  "$tool" vm plan --host "$tmp/host.xml" --map "$tmp/absent.txt" --out "$tmp/x"
sed "s/machine='q35'/machine='pc-i440fx-7.2'/" "$tmp/domain.xml" >"$tmp/pc.xml"
expect_error "is not a q35 machine" "$tool" vm plan --host "$tmp/host.xml" --domain "$tmp/pc.xml" --out "$tmp/x"
head -c 150 "$tmp/domain.xml" >"$tmp/cutdom.xml"
expect_error "cutdom.xml: not well-formed XML (.* at line" \
  "$tool" vm plan --host "$tmp/host.xml" --domain "$tmp/cutdom.xml" --out "$tmp/x"
head -c 300 "$tmp/host.xml" >"$tmp/cuthost.xml"
expect_error "cuthost.xml: not well-formed XML (.* at line" \
  "$tool" vm plan --host "$tmp/cuthost.xml" --map all --out "$tmp/x"
expect_error "say what to pass through" "$tool" vm plan --host "$tmp/host.xml" --out "$tmp/x"
head -c 200 "$tmp/small/plan.json" >"$tmp/cut.json"
expect_error "not valid JSON" "$tool" vm check --expect "$tmp/cut.json" --sysfs-root "$tmp/good"
expect_error "no PCI devices in" "$tool" vm check --sysfs-root "$tmp/nowhere"
expect_error "say which guest" "$tool" vm xml --host "$tmp/host.xml"

# cores: 0 steady, 2 moving (this machine's vCPUs may be either), with the
# levels it saw; a pair that is not two CPUs is an error.
if [ "$(nproc)" -ge 2 ]; then
  rc=0
  "$tool" vm cores --seconds 0.2 >"$tmp/cores.txt" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 2 ] || fail "vm cores exited $rc: $(cat "$tmp/cores.txt")"
  grep -q "one-way cache-line hand-off" "$tmp/cores.txt" || fail "vm cores printed no levels"
  grep -Eq "steady|vcpus-move" "$tmp/cores.txt" || fail "vm cores gave no verdict"
  expect_error "two different CPUs" "$tool" vm cores --cpus 0,0 --seconds 0.1
fi
rc=0
"$tool" vm cores --cpus 0 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" != 0 ] && grep -q -- "--cpus: At least 2 required" "$tmp/err" || fail "vm cores --cpus 0: exit $rc, $(cat "$tmp/err")"
echo "vm_cli: ok"
