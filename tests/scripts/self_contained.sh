#!/usr/bin/env bash
# The repository stands on its own: no tracked file reads or names the
# workspace folder beside the checkout (a clone from a public host has none),
# and none speaks of the project's development history instead of what the
# code does. The patterns are split so that this file does not match itself.
set -euo pipefail
src=${CONFLUX_SOURCE_DIR:?}
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -d '' files < <(git ls-files -z)
else
  mapfile -d '' files < <(find . -path ./build -prune -o -path ./.git -prune -o -type f -print0)
fi
outside='\.\./'"shared"
history='sess''ion [0-9]'
status=0
if hits=$(printf '%s\0' "${files[@]}" | xargs -0 grep -nIiE "$outside" 2>/dev/null); then
  echo "files that name the workspace folder outside the repository:" >&2
  echo "$hits" >&2
  status=1
fi
if hits=$(printf '%s\0' "${files[@]}" | xargs -0 grep -nIiE "$history" 2>/dev/null); then
  echo "files that speak of development sessions:" >&2
  echo "$hits" | cut -c1-200 >&2
  status=1
fi
# The vendored topology data the tests read is present.
for f in tests/data/topologies/README.md tests/data/topologies/hwloc/README.md; do
  [ -f "$f" ] || { echo "missing $f" >&2; status=1; }
done
[ "$status" = 0 ] && echo "self-contained: ${#files[@]} files checked"
exit "$status"
