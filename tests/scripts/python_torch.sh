#!/usr/bin/env bash
# The "conflux" torch.distributed backend: every op against torch's gloo
# backend on the same inputs (2 and 4 ranks), then DDP training whose
# per-step losses must match gloo's within float tolerance (2 ranks).
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3  # Debian's python has torch; a pyenv python3 may come first in PATH
export CONFLUX_SOCKET_IFNAME=lo
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

WORK=$(mktemp -d "${TMPDIR:-/tmp}/conflux_py_torch.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

for n in 2 4; do
  echo "== backend ops vs gloo, $n ranks"
  "$TOOL" run -n "$n" --timeout 90 "$PY" "$SRC/python/tests/torch_backend.py"
done

echo "== DDP: conflux and gloo losses step by step, 2 ranks"
for backend in conflux gloo; do
  "$TOOL" run -n 2 --timeout 90 --no-prefix "$PY" "$SRC/examples/ddp_train.py" \
    --backend "$backend" --steps 6 --hidden 128 >"$WORK/$backend.out"
  cat "$WORK/$backend.out"
done
"$PY" - "$WORK/conflux.out" "$WORK/gloo.out" <<'PYEOF'
import sys
def losses(path):
    return [float(line.split()[3]) for line in open(path) if line.startswith("step ")]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) == 6, (len(a), len(b))
for step, (x, y) in enumerate(zip(a, b)):
    assert abs(x - y) <= 1e-5 * max(1.0, abs(y)), f"step {step}: conflux {x} gloo {y}"
print(f"{len(a)} steps: conflux losses match gloo within 1e-5")
PYEOF
echo "PASS"
