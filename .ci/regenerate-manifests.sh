#!/usr/bin/env bash
# Rewrite every file generated from the routing table and the API types (run after adding a
# WEBHOOKS entry or changing the RBAC or the SidecarSet types; the drift tests in
# tests/manifests.rs fail until then):
#   manifests/webhooks.yaml                                         kruise-admission manifests webhooks
#   manifests/components/shadow/webhooks.yaml                       kruise-admission manifests webhooks --shadow
#   manifests/rbac.yaml                                             kruise-admission manifests rbac
#   manifests/components/shadow/rbac.yaml                           kruise-admission manifests shadow-rbac
#   manifests/components/openkruise/rbac.yaml                       kruise-admission manifests openkruise-rbac
#   charts/kruise-admission/files/webhooks.json                     kruise-admission manifests chart-table
#   charts/kruise-admission/files/rbac.json                         kruise-admission manifests chart-rbac
#   manifests/components/sidecarset-crd/, charts/kruise-admission/files/  kruise-admission manifests crds
# Each file is written to a temporary file first and moved into place only when the command
# succeeded, so a failing binary never leaves a file truncated.
set -euo pipefail
cd "$(dirname "$0")/.."

# The binary cargo just built, wherever the target directory is (CARGO_TARGET_DIR, a workspace
# setting, --release in CARGO_BUILD_FLAGS...): cargo reports it in its JSON messages.
bin=$(cargo build --quiet --bin kruise-admission --message-format=json ${CARGO_BUILD_FLAGS:-} \
    | python3 -c '
import json, sys
found = [m["executable"] for m in map(json.loads, sys.stdin)
         if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "kruise-admission"]
if not found:
    sys.exit("cargo reported no kruise-admission executable")
print(found[-1])')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# generate DEST ARGS...: run `kruise-admission manifests ARGS...` into DEST, atomically.
generate() {
    local dest=$1
    shift
    local out
    out="$tmp/$(basename "$dest")"
    "$bin" manifests "$@" >"$out"
    [ -s "$out" ] || { echo "kruise-admission manifests $* printed nothing" >&2; exit 1; }
    mkdir -p "$(dirname "$dest")"
    mv "$out" "$dest"
}

generate manifests/webhooks.yaml webhooks
generate manifests/components/shadow/webhooks.yaml webhooks --shadow
generate manifests/rbac.yaml rbac
generate manifests/components/shadow/rbac.yaml shadow-rbac
generate manifests/components/openkruise/rbac.yaml openkruise-rbac
generate charts/kruise-admission/files/webhooks.json chart-table
generate charts/kruise-admission/files/rbac.json chart-rbac
generate manifests/components/sidecarset-crd/apps.kruise.io_sidecarsets.yaml crds
generate charts/kruise-admission/files/apps.kruise.io_sidecarsets.yaml crds
git status --short manifests charts
