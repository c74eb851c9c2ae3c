#!/usr/bin/env bash
# On torch 2.x, inside the Debian 13 root (scripts/in-debian13): PyTorch's
# distributed test suite against gloo and conflux at 2 ranks
# (tests/torch_suite/check.py).
set -euo pipefail
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
exec "$SRC/scripts/in-debian13" python3 "$SRC/tests/torch_suite/check.py" --world-size 2
