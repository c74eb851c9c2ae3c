#!/usr/bin/env bash
# PyTorch's distributed test suite against gloo and conflux at 2 ranks on
# the host's torch (tests/torch_suite/check.py; debian13_torch_suite.sh runs
# it on torch 2.x).
set -euo pipefail
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3
if ! compgen -G "$BUILD/python/conflux/_conflux*.so" >/dev/null; then
  echo "SKIP: the Python module was not built"
  exit 0
fi
if ! "$PY" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: torch is not importable by $PY"
  exit 0
fi
export CONFLUX_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo PYTHONWARNINGS=ignore OMP_NUM_THREADS=1
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
exec "$PY" "$SRC/tests/torch_suite/check.py" --world-size 2
