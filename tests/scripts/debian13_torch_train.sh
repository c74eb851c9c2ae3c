#!/usr/bin/env bash
# On torch 2.x, inside the Debian 13 root (scripts/in-debian13): DDP, FSDP
# and fully_shard training under torchrun on 2 and 4 ranks, losses against
# gloo's (python_torch_train.sh).
set -euo pipefail
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
exec "$SRC/scripts/in-debian13" bash "$SRC/tests/scripts/python_torch_train.sh"
