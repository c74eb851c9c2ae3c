#!/usr/bin/env bash
# Proof by booting: `conflux vm plan` layouts of real hosts (Azure NDv4 from
# its NCCL file, AWS p5en from its hwloc dump) boot under QEMU's TCG (no KVM)
# with emulated stand-ins at the GPU and NIC positions, a Debian kernel and a
# busybox initramfs built here; inside, `conflux vm check` reads the guest's
# /sys. The switch layouts must match their plans, whose guest path classes
# equal the host's for every GPU-GPU and GPU-NIC pair (exit 0); the flat
# layout must be reported as a flat tree (exit 2) and as off the switch plan
# (exit 1).
set -euo pipefail
tool=${CONFLUX_TOOL:?}
src=${CONFLUX_SOURCE_DIR:?}
topo=$src/tests/data/topologies
need() { echo "vm_boot: $1 is missing; scripts/install-deps.sh installs it" >&2; exit 1; }
command -v qemu-system-x86_64 >/dev/null || need "qemu-system-x86_64 (qemu-system-x86)"
kernel=$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -n 1 || true)
[ -n "$kernel" ] || need "/boot/vmlinuz-*-cloud-amd64 (linux-image-cloud-amd64)"
# The guest needs no driver module: /sys lists PCI functions whether or not
# a driver binds them. It needs, built in, the PCI core with PCIe ports, ACPI
# NUMA (the expander buses' _PXM gives each device its node), the initramfs
# and the serial console.
config=/boot/config-${kernel#/boot/vmlinuz-}
for option in CONFIG_PCI CONFIG_PCIEPORTBUS CONFIG_NUMA CONFIG_ACPI_NUMA CONFIG_BLK_DEV_INITRD CONFIG_RD_GZIP \
              CONFIG_SERIAL_8250_CONSOLE; do
  grep -qx "$option=y" "$config" || { echo "vm_boot: $kernel lacks $option=y (see $config)" >&2; exit 1; }
done
busybox=/bin/busybox
[ -x "$busybox" ] && ! ldd "$busybox" >/dev/null 2>&1 || need "a static /bin/busybox (busybox-static)"
command -v cpio >/dev/null || need cpio

tmp=$(mktemp -d)
trap '[ -n "${VM_BOOT_KEEP:-}" ] || rm -rf "$tmp"' EXIT
start=$(date +%s)

# Plans: one vCPU and 96 MiB per guest NUMA node keep TCG quick.
plan() {  # name host layout
  "$tool" vm plan --host "$2" --map all --layout "$3" --out "$tmp/root/plans/$1" \
    --vcpus-per-node 1 --mem-per-node 96 >"$tmp/plan-$1.txt"
}
mkdir -p "$tmp/root/plans"
plan ndv4 "$topo/azure-ndv4-topo.xml" switch
plan ndv4-flat "$topo/azure-ndv4-topo.xml" flat
plan p5en "$topo/hwloc/aws-p5en.48xlarge-hwloc.xml" switch
grep -q "0 with a path class other than the host's; NUMA preserved" "$tmp/plan-ndv4.txt"
grep -q "0 with a path class other than the host's; NUMA preserved" "$tmp/plan-p5en.txt"

# The initramfs: busybox, conflux (debug info stripped) with the shared
# libraries ldd names, the plans, and an init that runs the case named on
# the kernel command line.
root=$tmp/root
mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev"
cp "$busybox" "$root/bin/busybox"
objcopy --strip-debug "$tool" "$root/bin/conflux"
ldd "$tool" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | while read -r lib; do
  cp --parents -L "$lib" "$root/"
done
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for arg in $(cat /proc/cmdline); do
  case "$arg" in conflux.case=*) case=${arg#conflux.case=} ;; esac
done
# case "name:plan[:topo]": check /sys against plans/<plan>, with its guest topology file when asked.
for c in $(echo "$case" | tr ',' ' '); do
  name=${c%%:*}; rest=${c#*:}; p=${rest%%:*}
  set -- --expect /plans/$p/plan.json
  [ "$rest" != "${rest%:topo}" ] && set -- "$@" --topo-file /plans/$p/guest-topo.xml
  echo "=== check $name"
  /bin/conflux vm check "$@"
  echo "=== exit $name $?"
done
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1 >"$tmp/initramfs.gz")

boot() {  # plan cases
  mapfile -t args <"$tmp/root/plans/$1/qemu-args-standin.txt"
  local t0=$(date +%s) try rc
  # QEMU 7.2's TCG emulator itself now and then dies of a signal while the
  # firmware boots (a segmentation fault after "Booting from ROM": one boot
  # in twelve here), before the guest runs anything of ours. Such a crash
  # is the emulator's, so the guest is booted once more; a failure after
  # the guest started, or a second crash, fails the test.
  for try in 1 2; do
    rc=0
    timeout 240 qemu-system-x86_64 "${args[@]}" -accel tcg -nodefaults -nographic -no-reboot \
      -serial "file:$tmp/console-$1.txt" -monitor none \
      -kernel "$kernel" -initrd "$tmp/initramfs.gz" \
      -append "console=ttyS0 panic=-1 quiet conflux.case=$2" >/dev/null 2>"$tmp/qemu-$1.err" || rc=$?
    [ "$rc" -eq 0 ] && break
    if [ "$try" -eq 1 ] && [ "$rc" -gt 128 ] && [ "$rc" -ne 124 ] && ! grep -qa "=== check" "$tmp/console-$1.txt"; then
      echo "vm_boot: qemu died of signal $((rc - 128)) before the $1 guest started; booting it again" >&2
      continue
    fi
    echo "vm_boot: qemu failed for $1 (exit $rc)" >&2; cat "$tmp/qemu-$1.err" >&2; tail -n 40 "$tmp/console-$1.txt" >&2; exit 1
  done
  echo "vm_boot: $1 booted and checked in $(( $(date +%s) - t0 )) s"
}
expect_exit() {  # plan name code [pattern]
  local console=$tmp/console-$1.txt
  if ! grep -qa "=== exit $2 $3" "$console"; then
    echo "vm_boot: $2 in the $1 guest did not exit $3" >&2
    sed -n "/=== check $2/,/=== exit $2/p" "$console" >&2
    [ -s "$console" ] || cat "$tmp/qemu-$1.err" >&2
    exit 1
  fi
  local section
  section=$(sed -n "/=== check $2/,/=== exit $2/p" "$console")
  if [ -n "${4:-}" ] && ! grep -qa "$4" <<<"$section"; then
    echo "vm_boot: $2 in the $1 guest does not say \"$4\"" >&2
    sed -n "/=== check $2/,/=== exit $2/p" "$console" >&2
    exit 1
  fi
}

boot ndv4 "switch:ndv4:topo"
expect_exit ndv4 switch 0 "as-planned"
boot p5en "switch:p5en:topo"
expect_exit p5en switch 0 "as-planned"
boot ndv4-flat "flat:ndv4-flat,offplan:ndv4"
expect_exit ndv4-flat flat 2 "flat tree"
expect_exit ndv4-flat offplan 1 "wrong-switch"
sed -n "/=== check switch/,/=== exit switch/p" "$tmp/console-ndv4.txt"
echo "vm_boot: ok in $(( $(date +%s) - start )) s"
