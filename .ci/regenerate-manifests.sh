#!/usr/bin/env bash
# Rewrite every file generated from the routing table (run after adding a WEBHOOKS entry; the
# drift tests in tests/manifests.rs fail until then):
#   manifests/webhooks.yaml                       kruise-admission manifests webhooks
#   manifests/components/live-cluster/rbac.yaml   kruise-admission manifests rbac
#   charts/kruise-admission/files/webhooks.json   kruise-admission manifests chart-table
#   manifests/crds/, charts/kruise-admission/crds/ kruise-admission manifests crds
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin kruise-admission
bin=target/debug/kruise-admission
"$bin" manifests webhooks >manifests/webhooks.yaml
"$bin" manifests crds >manifests/crds/apps.kruise.io_sidecarsets.yaml
cp manifests/crds/apps.kruise.io_sidecarsets.yaml charts/kruise-admission/crds/
"$bin" manifests rbac >manifests/components/live-cluster/rbac.yaml
"$bin" manifests chart-table >charts/kruise-admission/files/webhooks.json
git status --short manifests charts
