#!/usr/bin/env bash
# Training under torchrun on 2 and 4 ranks: DistributedDataParallel,
# FullyShardedDataParallel (CPU) and fully_shard (FSDP2) over conflux, with
# the mean loss of every step matching gloo's (examples/train.py: seeded
# model, data and optimizer). Run on the host's torch, and by
# debian13_torch.sh on torch 2.x inside the Debian 13 root.
#
# References and what this torch can run, decided by asking torch:
#   ddp, fsdp    conflux against gloo with the same wrapper.
#   fully_shard  conflux against gloo's DDP: both average the gradients
#                over the ranks each step, so the runs are the same
#                computation. gloo is no reference for fully_shard on the
#                CPU: its reduce_scatter_tensor takes ReduceOp.AVG (which
#                FSDP2 sends) as SUM, while its all_reduce rejects AVG.
#   fsdp is skipped, saying why, where torch.distributed.fsdp cannot be
#   imported (torch 1.13 on Python 3.11: a dataclass in
#   torch.distributed._shard is rejected by Python 3.11); fully_shard where
#   this torch has none.
set -euo pipefail

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

WORK=$(mktemp -d "${TMPDIR:-/tmp}/conflux_py_train.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
version=$("$PY" -c 'import torch; print(torch.__version__)')
echo "torch $version"

wraps=(ddp)
if why=$("$PY" -c 'import torch.distributed.fsdp' 2>&1); then
  wraps+=(fsdp)
else
  echo "SKIP fsdp on torch $version: torch.distributed.fsdp does not import: $(tail -n 1 <<<"$why")"
fi
if "$PY" -c 'import torch.distributed.fsdp as f, sys; sys.exit(0 if hasattr(f, "fully_shard") else 1)' 2>/dev/null ||
   "$PY" -c 'import torch.distributed._composable.fsdp as f; f.fully_shard' 2>/dev/null; then
  wraps+=(fully_shard)
else
  echo "SKIP fully_shard on torch $version: this torch has no fully_shard (FSDP2)"
fi

free_port() { "$PY" "$SRC/python/tests/free_port.py"; }

train() {  # ranks backend wrap -> $WORK/<wrap>-<backend>-<ranks>.out
  local n=$1 backend=$2 wrap=$3 out=$WORK/$3-$2-$1.out try
  # Another process may still take the port between the check and
  # torchrun's bind: a store that could not bind is tried again on another.
  for try in 1 2 3; do
    timeout 300 "$PY" "$SRC/python/tests/torchrun.py" --nproc_per_node "$n" --master_addr 127.0.0.1 \
      --master_port "$(free_port)" "$SRC/examples/train.py" --backend "$backend" --wrap "$wrap" \
      --steps 6 --hidden 128 >"$out" 2>"$out.err" && break
    if [ "$try" -lt 3 ] && grep -q "Address already in use" "$out.err"; then
      echo "torchrun's store port was taken; again on another port"
      continue
    fi
    cat "$out" "$out.err"
    echo "FAIL: $wrap over $backend, $n ranks"
    exit 1
  done
  grep -E '^(backend|median)' "$out"
}

compare() {  # what conflux.out reference.out
  "$PY" - "$@" <<'PYEOF'
import sys
what, a_path, b_path = sys.argv[1:]
def losses(path):
    return [float(line.split()[3]) for line in open(path) if line.startswith("step ")]
a, b = losses(a_path), losses(b_path)
assert len(a) == len(b) == 6, (what, len(a), len(b))
for step, (x, y) in enumerate(zip(a, b)):
    assert abs(x - y) <= 1e-5 * max(1.0, abs(y)), f"{what}: step {step}: conflux {x} reference {y}"
print(f"{what}: {len(a)} steps, losses match within 1e-5: {' '.join(f'{x:.6f}' for x in a)}")
PYEOF
}

for n in 2 4; do
  for wrap in "${wraps[@]}"; do
    train "$n" conflux "$wrap"
    ref=$wrap
    [ "$wrap" = fully_shard ] && ref=ddp
    [ -f "$WORK/$ref-gloo-$n.out" ] || train "$n" gloo "$ref"
    compare "$wrap over conflux vs $ref over gloo, $n ranks" "$WORK/$wrap-conflux-$n.out" "$WORK/$ref-gloo-$n.out"
  done
done
echo "PASS"
