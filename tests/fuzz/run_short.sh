#!/usr/bin/env bash
# Runs every libFuzzer binary of a -DCONFLUX_FUZZ=ON build briefly; builds
# nothing. Usage: tests/fuzz/run_short.sh BUILD_DIR [SECONDS]   (default 30)
# Seeds for the topology fuzzers are the real topology files in
# tests/data/topologies; the protocol fuzzers (bootstrap, frame) start from nothing.
set -euo pipefail
build=${1:?usage: run_short.sh BUILD_DIR [SECONDS]}
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
seeds=$here/../data/topologies
shopt -s nullglob
bins=("$build"/tests/fuzz/fuzz_*)
if [ ${#bins[@]} -eq 0 ]; then
  echo "run_short.sh: no fuzz binaries under $build/tests/fuzz (configure with CC=clang CXX=clang++ -DCONFLUX_FUZZ=ON)" >&2
  exit 1
fi
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || continue
  corpus=$(mktemp -d)
  max_len=65536
  case $(basename "$bin") in
    fuzz_topo*) cp "$seeds"/*.xml "$corpus"/ ;;
    *) max_len=4096 ;;  # binary protocol inputs: headers and a few frames
  esac
  echo "== $(basename "$bin") for ${seconds}s"
  "$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$corpus" 2>&1 | tail -n 15
  rm -rf "$corpus"
done
