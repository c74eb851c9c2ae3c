#!/usr/bin/env bash
# The Python package installs the ways the README gives: `pip install .`
# (here into a --target folder, reusing this build tree through
# CONFLUX_CMAKE_BUILD_DIR) and `cmake --install`. Either way the package
# imports from the install alone, carries its metadata (version, the
# torch entry points), and, where torch loads backends from entry points,
# init_process_group("conflux") works without importing conflux.
# Runs on the host, and by debian13_torch_backend.sh on torch 2.x.
set -euo pipefail

TOOL=${CONFLUX_TOOL:?CONFLUX_TOOL must name the built conflux binary}
BUILD=${CONFLUX_BUILD_DIR:?CONFLUX_BUILD_DIR must name the build tree}
SRC=${CONFLUX_SOURCE_DIR:?CONFLUX_SOURCE_DIR must name the source tree}
PY=/usr/bin/python3
export CONFLUX_SOCKET_IFNAME=lo PYTHONDONTWRITEBYTECODE=1 PYTHONWARNINGS=ignore OMP_NUM_THREADS=1
unset PYTHONPATH

if ! compgen -G "$BUILD/python/conflux/_conflux*.so" >/dev/null; then
  echo "SKIP: the Python module was not built"
  exit 0
fi
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  echo "SKIP: pip is not installed for $PY (python3-pip)"
  exit 0
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/conflux_py_pkg.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
version=$(sed -n 's/^project(conflux VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")

check_install() {  # what site-folder
  local what=$1 site=$2
  PYTHONPATH=$site "$PY" - "$site" "$version" "$BUILD/python/conflux-$version.dist-info/entry_points.txt" <<'PYEOF'
import importlib.metadata as md, os, sys
site, version, build_eps = sys.argv[1:]
import conflux
assert os.path.dirname(conflux.__file__) == os.path.join(site, "conflux"), conflux.__file__
assert md.version("conflux") == version, (md.version("conflux"), version)
eps = {(e.group, e.name, e.value) for e in md.distribution("conflux").entry_points}
want = {("torch.backends", "conflux", "conflux.torch:_autoload"),
        ("torch.distributed.backends", "conflux", "conflux.torch:register")}
assert eps == want, eps
# The build tree's metadata (CMake) declares the same entry points as pyproject.toml.
build = md.PathDistribution.at(os.path.dirname(build_eps))
assert {(e.group, e.name, e.value) for e in build.entry_points} == want
print(f"conflux {version} from {site}: imports, metadata and entry points as expected")
PYEOF
}

echo "== pip install --no-build-isolation --target"
# From a copy of what the package is built from, so that setuptools' folder
# (build-python/) is this test's own when other tests build at the same time.
mkdir "$WORK/src"
(cd "$SRC" && cp -r CMakeLists.txt cmake include src tools python pyproject.toml setup.py setup.cfg README.md "$WORK/src/")
CONFLUX_CMAKE_BUILD_DIR=$BUILD "$PY" -m pip install -q --no-build-isolation --no-deps --no-cache-dir \
  --target "$WORK/pip" "$WORK/src" 2>&1 | grep -v "Running pip as the 'root' user" || true
check_install pip "$WORK/pip"

echo "== cmake --install"
cmake --install "$BUILD" --prefix "$WORK/prefix" >/dev/null
site=$("$PY" -c 'import sys; print(f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/dist-packages")')
check_install cmake "$WORK/prefix/$site"

# torch 2.5+ imports the "torch.backends" entry points at `import torch`
# (torch._import_device_backends); asked of torch, not of its version.
if PYTHONPATH=$WORK/pip "$PY" -c 'import sys, torch; sys.exit(0 if hasattr(torch, "_import_device_backends") else 1)' 2>/dev/null; then
  echo "== init_process_group(\"conflux\") without importing conflux, 2 ranks"
  cat >"$WORK/no_import.py" <<'PYEOF'
import sys
import torch, torch.distributed as dist
dist.init_process_group("conflux")
assert dist.get_backend() == "conflux", dist.get_backend()
t = torch.ones(4)
dist.all_reduce(t)
assert torch.equal(t, torch.full((4,), 2.0)), t
print(f"rank {dist.get_rank()}: backend {dist.get_backend()} loaded from its entry point, torch {torch.__version__}")
dist.destroy_process_group()
PYEOF
  PYTHONPATH=$WORK/pip "$TOOL" run -n 2 --timeout 60 "$PY" "$WORK/no_import.py"
elif "$PY" -c 'import torch' 2>/dev/null; then
  echo "torch $("$PY" -c 'import torch; print(torch.__version__)') loads no backends from entry points: init_process_group(\"conflux\") needs import conflux.torch there"
fi
echo "PASS"
