#!/usr/bin/env bash
# On torch 2.x, inside the Debian 13 root (scripts/in-debian13, which builds
# the root on first use and fails plainly when it cannot): the backend's
# ops against gloo and a dead rank (python_torch.sh), the Python
# package (python_package.sh), and conflux.MoE with torch 2.x autograd
# (python_moe.sh).
set -euo pipefail
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
"$SRC/scripts/in-debian13" bash "$SRC/tests/scripts/python_torch.sh"
"$SRC/scripts/in-debian13" bash "$SRC/tests/scripts/python_package.sh"
"$SRC/scripts/in-debian13" bash "$SRC/tests/scripts/python_moe.sh"
