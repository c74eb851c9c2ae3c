#!/usr/bin/env bash
# Install into a prefix, then build a consumer with find_package(conflux) and
# with pkg-config, and run it.
set -euo pipefail
build=${CONFLUX_BUILD_DIR:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/conflux/conflux.h"
test -f "$tmp/prefix/lib/cmake/conflux/confluxConfig.cmake"
mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/main.c" <<'C'
#include <conflux/conflux.h>
#include <stdio.h>
int main(void) {
  int v = 0;
  if (cfxGetVersion(&v) != cfxSuccess) return 1;
  printf("conflux version code %d\n", v);
  return v == CFX_VERSION_CODE ? 0 : 2;
}
C
cat > "$tmp/consumer/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(conflux REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE conflux::conflux)
CM
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/consumer/build/consumer"
echo "ok: find_package(conflux)"
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" cc "$tmp/consumer/main.c" -o "$tmp/pc" $(PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --cflags --libs conflux)
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/pc"
echo "ok: pkg-config conflux"
test -x "$tmp/prefix/bin/conflux"
echo "ok: conflux tool installed"
