#!/usr/bin/env bash
# The same binary under Open MPI's launcher: rank and size come from
# OMPI_COMM_WORLD_*, the rendezvous from MASTER_ADDR/MASTER_PORT.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
command -v mpirun.openmpi >/dev/null || { echo "SKIP: mpirun.openmpi not installed"; exit 0; }
port=$(/usr/bin/python3 "${CONFLUX_SOURCE_DIR:?}/python/tests/free_port.py")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
out=$(timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe -np 4 \
      -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" -x CONFLUX_SOCKET_IFNAME=lo \
      "$tool" perf allreduce -b 8 -e 1M -f 8 -n 3 -w 1 -c 1 2>&1) || { echo "$out"; echo "FAIL: mpirun exited non-zero"; exit 1; }
echo "$out"
grep -q "perf allreduce: 4 ranks" <<<"$out" || { echo "FAIL: not 4 ranks"; exit 1; }
grep -q "Out of bounds values : 0 OK" <<<"$out" || { echo "FAIL: wrong values"; exit 1; }
echo "ok: 4 ranks under mpirun.openmpi, 0 wrong"
