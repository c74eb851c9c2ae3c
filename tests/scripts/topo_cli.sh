#!/usr/bin/env bash
# `conflux topo` end to end: text, JSON, export and re-import, errors.
set -euo pipefail
tool=${CONFLUX_TOOL:?}
topo=${CONFLUX_SOURCE_DIR:?}/tests/data/topologies
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$tool" topo >"$tmp/live.txt"
grep -q "Advice:" "$tmp/live.txt"

"$tool" topo --topo-file "$topo/ibmcloud-gx3d-h100-vsi-topo.xml" --format json >"$tmp/ibm.json"
python3 - "$tmp/ibm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["paths"]["GPU0"]["GPU1"] == {"type": "NVL", "bw": 370.8}, d["paths"]["GPU0"]["GPU1"]
assert d["paths"]["GPU0"]["NIC0"]["type"] == "PIX"
assert any(w["code"] == "virtual-bridge-2.5gt-x1" for w in d["warnings"])
PY

# Export, re-import: the same JSON.
"$tool" topo --topo-file "$topo/alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml" --xml-out "$tmp/exp.xml"
"$tool" topo --topo-file "$topo/alibaba-hgx-a100-8gpu-icx-cx6bond-topo.xml" --format json | grep -v '"source"' >"$tmp/a.json"
"$tool" topo --topo-file "$tmp/exp.xml" --format json | grep -v '"source"' >"$tmp/b.json"
diff "$tmp/a.json" "$tmp/b.json"

# A wrong-version file is refused with the reason.
if "$tool" topo --topo-file "$topo/rccl-hygon-dcu-8gpu-topo-v2.xml" 2>"$tmp/err"; then
  echo "version-2 file accepted" >&2; exit 1
fi
grep -q "version 2" "$tmp/err"
# CONFLUX_TOPO_FILE pointing nowhere is an error, not a silent fallback.
if CONFLUX_TOPO_FILE=/nonexistent.xml "$tool" topo 2>"$tmp/err2"; then
  echo "missing CONFLUX_TOPO_FILE ignored" >&2; exit 1
fi
grep -q "CONFLUX_TOPO_FILE" "$tmp/err2"
echo "topo_cli: ok"
