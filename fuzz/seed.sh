#!/usr/bin/env bash
# Build the fuzz corpora at run time from the read-only shared fixtures (nothing from them is
# committed here): fuzz/corpus/<target>/ (ignored by git). Usage: fuzz/seed.sh [shared dir]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
repo="$(cd .. && pwd)"
shared="${1:-${KRUISE_SHARED_DIR:-}}"
if [ -z "$shared" ]; then
    for candidate in "$repo/../shared" /work/shared; do
        if [ -d "$candidate/fixtures" ]; then shared="$candidate"; break; fi
    done
fi
[ -d "$shared/fixtures" ] || { echo "no shared fixtures found (set KRUISE_SHARED_DIR)" >&2; exit 1; }

mkdir -p corpus/review corpus/sidecarset corpus/patch
python3 - "$shared" "$repo" <<'PY'
import hashlib, json, pathlib, random, sys
shared, repo = map(pathlib.Path, sys.argv[1:3])
out = pathlib.Path("corpus")
def put(target, data):
    (out / target / hashlib.sha1(data).hexdigest()).write_bytes(data)
rng = random.Random(11)
reviews = sorted((shared / "fixtures/recorded").glob("*.json")) + sorted((repo / "examples/reviews").glob("*.json"))
for path in reviews:
    raw = path.read_bytes()
    put("review", raw)
    try:
        review = json.loads(raw)
    except ValueError:
        continue
    request = review.get("request") or {}
    for key in ("object", "oldObject"):
        obj = request.get(key)
        if isinstance(obj, dict) and obj:
            put("patch", json.dumps(obj).encode() + b"\0" + bytes(rng.randrange(256) for _ in range(64)))
# SidecarSets and workload manifests as the cluster folder would hold them (YAML text).
for path in sorted((repo / "examples/cluster").rglob("*.y*ml")) + sorted((shared / "fixtures/workloads").rglob("*.y*ml")):
    put("sidecarset", path.read_bytes())
PY
for target in review sidecarset patch; do
    echo "seeded $target: $(ls "corpus/$target" | wc -l) inputs"
done
