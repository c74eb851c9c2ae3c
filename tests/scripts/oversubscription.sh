#!/usr/bin/env bash
# Waiting ranks stop spinning when more of them share a set of cores than it
# has cores, counted by CPU affinity on one kernel rather than by hostname:
# two ranks confined to one core compete; two ranks bound to a core each
# (mpirun --bind-to core) do not.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
export CONFLUX_SOCKET_IFNAME=lo CONFLUX_DEBUG=INFO CONFLUX_DEBUG_SUBSYS=INIT
marker="compete for this rank's"

out=$(timeout 120 taskset -c 0 "$tool" run -n 2 "$tool" perf allreduce -b 8 -e 64K -f 8 -n 3 -w 1 -c 1 2>&1) \
  || { echo "$out"; echo "FAIL: 2 ranks on one core exited non-zero"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: wrong values"; exit 1; }
n=$(echo "$out" | grep -c "2 ranks $marker 1 core(s)" || true)
[ "$n" = 2 ] || { echo "$out"; echo "FAIL: expected both ranks to see 2 ranks on 1 core, saw $n"; exit 1; }
echo "ok: 2 ranks confined to one core yield instead of spinning"

if [ "$(nproc)" -ge 2 ] && command -v mpirun.openmpi >/dev/null; then
  port=$(/usr/bin/python3 "${CONFLUX_SOURCE_DIR:?}/python/tests/free_port.py")
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  out=$(timeout 120 mpirun.openmpi --allow-run-as-root --bind-to core -np 2 \
        -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x CONFLUX_SOCKET_IFNAME=lo -x CONFLUX_DEBUG -x CONFLUX_DEBUG_SUBSYS \
        "$tool" perf allreduce -b 8 -e 64K -f 8 -n 3 -w 1 -c 1 2>&1) \
    || { echo "$out"; echo "FAIL: mpirun --bind-to core exited non-zero"; exit 1; }
  grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "$out"; echo "FAIL: wrong values"; exit 1; }
  if grep -q "$marker" <<<"$out"; then
    echo "$out"; echo "FAIL: ranks bound to a core each were taken for oversubscribed"; exit 1
  fi
  echo "ok: 2 ranks bound to a core each keep spinning"
else
  echo "SKIP: mpirun --bind-to core case (needs 2 cores and mpirun.openmpi)"
fi
