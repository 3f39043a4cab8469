#!/usr/bin/env bash
# Re-invocation and cross-library check (tests/independent/check_reinvocation.py): our /mutate-pod
# patches applied with evanphx/json-patch (Go, what kube-apiserver uses) and python jsonpatch give
# the reported object, and feeding the object back gives no patch.
# Installs what it needs: Go 1.19 and evanphx/json-patch from Debian (apt-get), python jsonpatch
# kubernetes-validate and PyYAML (a venv in cargo's target directory when the system Python lacks them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
. .ci/cargo-paths.sh
TARGET_DIR="$(cargo_target_dir)"
GO=/usr/lib/go-1.19/bin/go
EVANPHX_SRC=/usr/share/gocode/src/github.com/evanphx/json-patch

if [ ! -x "$GO" ] || [ ! -d "$EVANPHX_SRC" ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-1.19 golang-github-evanphx-json-patch-dev
fi
mkdir -p "$TARGET_DIR"
checker="$TARGET_DIR/evanphx-check"
(cd tests/independent/evanphx && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="${GOCACHE:-/tmp/go-build-cache}" \
    "$GO" build -o "$checker" .)

PY="${PY:-python3}"
PY_CHECK='import jsonpatch, yaml, kubernetes_validate'
if ! "$PY" -c "$PY_CHECK" 2>/dev/null; then
    VENV="$TARGET_DIR/ci-venv"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    "$VENV/bin/python" -c "$PY_CHECK" 2>/dev/null \
        || "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check jsonpatch==1.48 kubernetes-validate==1.37.0 pyyaml
    PY="$VENV/bin/python"
fi

echo "building kruise-admission (cargo build), then checking every recorded Pod CREATE" >&2
binary="$(cargo_exe kruise-admission --bin kruise-admission)"
"$PY" tests/independent/check_reinvocation.py --binary "$binary" --checker "$checker" \
    --cluster-dir examples/cluster
