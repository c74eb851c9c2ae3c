#!/usr/bin/env bash
# conflux.MoE from Python: dispatch and combine on numpy arrays and torch
# tensors against references at 1-4 ranks (python/tests/moe_layer.py), across
# faked hosts with each host_partial_sums mode (python/tests/moe_hosts.py), and
# a MoE model trained with expert parallelism whose losses match the same
# model trained in one process (examples/moe_train.py --check).
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3  # Debian's python has numpy/torch; a pyenv python3 may come first in PATH
export CONFLUX_SOCKET_IFNAME=lo OMP_NUM_THREADS=1
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore

if ! compgen -G "$BUILD/python/conflux/_conflux*.so" >/dev/null; then
  echo "SKIP: the Python module was not built"
  exit 0
fi
for n in 1 2 3 4; do
  echo "== moe layer, $n ranks"
  "$TOOL" run -n "$n" --timeout 120 "$PY" "$SRC/python/tests/moe_layer.py"
done
for n in 3 4; do
  echo "== moe across hosts of two ranks, $n ranks"
  "$TOOL" run -n "$n" --timeout 120 "$PY" "$SRC/python/tests/moe_hosts.py"
done
if ! "$PY" -c 'import torch' 2>/dev/null; then
  echo "SKIP training: torch is not importable by $PY"
  exit 0
fi
for n in 2 4; do
  echo "== moe training, $n ranks, against one process"
  "$TOOL" run -n "$n" --timeout 300 "$PY" "$SRC/examples/moe_train.py" --steps 6 --check
done
echo "PASS"
