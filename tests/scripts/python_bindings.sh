#!/usr/bin/env bash
# The conflux Python module on numpy arrays: every collective (blocking and
# nonblocking) against numpy references on 2 and 4 ranks, and misuse
# raising conflux.Error with the library's message and code.
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3  # Debian's python has numpy/torch; a pyenv python3 may come first in PATH
export CONFLUX_SOCKET_IFNAME=lo
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1

if ! compgen -G "$BUILD/python/conflux/_conflux*.so" >/dev/null; then
  echo "SKIP: the Python module was not built (CONFLUX_BUILD_PYTHON=OFF or no pybind11)"
  exit 0
fi

# Importable from the build tree, with docstrings.
"$PY" -c 'import conflux; assert conflux.Comm.allreduce.__doc__ and conflux.get_unique_id.__doc__; print("import ok, version", conflux.version())'

for n in 2 4; do
  echo "== numpy collectives, $n ranks"
  "$TOOL" run -n "$n" --timeout 60 "$PY" "$SRC/python/tests/numpy_collectives.py"
  echo "== error cases, $n ranks"
  "$TOOL" run -n "$n" --timeout 60 "$PY" "$SRC/python/tests/numpy_errors.py"
done
echo "PASS"
