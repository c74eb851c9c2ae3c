#!/usr/bin/env bash
# The "conflux" torch.distributed backend: every op against torch's gloo
# backend on the same inputs (2 and 4 ranks; python/tests/torch_backend.py),
# then a rank killed in the middle of a DDP step, which every other rank
# must report as an exception within the group's timeout (3 ranks).
# Runs on the host's torch, and by debian13_torch_backend.sh on torch 2.x.
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3  # Debian's python has torch; a pyenv python3 may come first in PATH
export CONFLUX_SOCKET_IFNAME=lo GLOO_SOCKET_IFNAME=lo
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore OMP_NUM_THREADS=1

if ! compgen -G "$BUILD/python/conflux/_conflux*.so" >/dev/null; then
  echo "SKIP: the Python module was not built"
  exit 0
fi
if ! "$PY" -c 'import torch.distributed' 2>/dev/null; then
  echo "SKIP: torch is not importable by $PY"
  exit 0
fi
echo "torch $("$PY" -c 'import torch; print(torch.__version__)')"

for n in 2 4; do
  echo "== backend ops vs gloo, $n ranks"
  "$TOOL" run -n "$n" --timeout 120 "$PY" "$SRC/python/tests/torch_backend.py"
done

echo "== a rank dies mid-step, 3 ranks"
"$PY" "$SRC/python/tests/torch_dead_rank.py" --ranks 3 --timeout 20
echo "PASS"
