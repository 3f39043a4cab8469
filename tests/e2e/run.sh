#!/usr/bin/env bash
# End-to-end suite against a real kube-apiserver (issue 16 point 3). Everything on 127.0.0.1.
#
#   - gets kube-apiserver 1.20.2 with tests/e2e/kube-apiserver.sh (built once from Debian's source
#     package, then cached) and starts etcd and kube-apiserver on random loopback ports in a temp
#     dir: RBAC, static tokens (an admin, and the server's service account with its real groups);
#   - applies what the kustomize base ships (the RBAC, namespace, service account; the CRD layout
#     next to an existing OpenKruise is checked on the way), minimal CRDs for the Kruise workloads
#     (tests/e2e/crds/), and the webhook configurations `kruise-admission manifests webhooks`
#     prints, with each clientConfig pointed at https://localhost:<port><path>;
#   - runs `kruise-admission serve --cluster-mode=live --cert-mode=self-managed` as its own
#     process, authenticated with the service-account token;
#   - checks through the API server with kubectl (the client users have), printing PASS/FAIL per
#     check and `N passed, M failed` at the end; exits non-zero on any failure;
#   - last, shadow mode (tests/e2e/shadow.sh): the configurations of `manifests webhooks --shadow`
#     in place of the enforcing ones, a server with --shadow, and the stored objects unchanged.
#
# Needs: root for apt-get on a fresh machine (golang-1.19, etcd-server, make, rsync; jq and
# python3-yaml when missing), kubectl, cargo, curl, openssl, python3.
# Knobs: E2E_PROFILE (cargo profile of the server, default release; dev is quicker to build),
#        E2E_LATENCY_PODS (pods per webhook for the latency comparison, default 200; 0 skips it),
#        E2E_KEEP=1 (keep the temp dir with all logs), E2E_TIMEOUT (seconds, default 1800),
#        E2E_MANIFESTS (the kustomize base whose RBAC and CRD layout are used, default manifests/),
#        KUBE_APISERVER_CACHE (see kube-apiserver.sh), PYTHON (an interpreter with PyYAML).
set -euo pipefail

E2E=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$E2E/../.." && pwd)
PYTHON=${PYTHON:-python3}
LATENCY_PODS=${E2E_LATENCY_PODS:-200}
MANIFESTS=$(cd "${E2E_MANIFESTS:-$ROOT/manifests}" && pwd)
EXTRA_APISERVER_FLAGS=()
EXTRA_SERVER_FLAGS=()
# shellcheck source=tests/e2e/lib.sh
source "$E2E/lib.sh"

# --- prerequisites ---------------------------------------------------------------------------------
say "prerequisites"
# kubectl from PATH, else the one .ci/manifests-check.sh unpacks (CI runs it first).
if ! command -v kubectl >/dev/null && [ -x "${MANIFESTS_TOOLS_DIR:-$ROOT/target/manifests-tools}/kubectl" ]; then
    PATH=$PATH:${MANIFESTS_TOOLS_DIR:-$ROOT/target/manifests-tools}
fi
command -v kubectl >/dev/null || die "kubectl is needed (the suite's client; .ci/manifests-check.sh unpacks one into target/manifests-tools)"
if ! command -v jq >/dev/null || ! "$PYTHON" -c 'import yaml' 2>/dev/null; then
    command -v apt-get >/dev/null || die "jq and PyYAML are needed"
    apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq python3-yaml >/dev/null
    "$PYTHON" -c 'import yaml' 2>/dev/null || PYTHON=/usr/bin/python3
fi
KUBE_APISERVER=$(bash "$E2E/kube-apiserver.sh")
GO=/usr/lib/go-1.19/bin/go
if [ ! -x "$GO" ]; then
    apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-1.19 >/dev/null
fi

# Release by default: the latency comparison means nothing for a debug build (CI's soak step has
# built it already).
PROFILE=${E2E_PROFILE:-release}
say "cargo build --profile $PROFILE --bin kruise-admission"
(cd "$ROOT" && cargo build --profile "$PROFILE" --bin kruise-admission)
TARGET_DIR=$(cd "$ROOT" && cargo metadata --format-version 1 --no-deps | jq -r .target_directory)
# Cargo names the dev profile's folder "debug".
BIN=$TARGET_DIR/$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")/kruise-admission
[ -x "$BIN" ] || die "no binary at $BIN"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kruise-admission-e2e.XXXXXX")
mkdir -p "$WORK/logs"
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM
start_watchdog

say "building the floor webhooks (Go, standard library)"
mkdir -p "$TARGET_DIR/e2e"
FLOOR=$TARGET_DIR/e2e/go-floor
(cd "$ROOT/benches/go-floor" && GO111MODULE=off GOCACHE="$TARGET_DIR/e2e/gocache" "$GO" build -o "$FLOOR" main.go)
"$BIN" certs --out "$WORK/floor-tls" >/dev/null

# --- cluster ---------------------------------------------------------------------------------------
# shellcheck source=tests/e2e/client_auth.sh
source "$E2E/client_auth.sh"
client_auth_prepare

say "etcd and kube-apiserver on 127.0.0.1"
start_etcd
start_apiserver
echo "kube-apiserver 1.20.2 ($KUBE_APISERVER) on https://127.0.0.1:$APISERVER_PORT, etcd on $ETCD_URL"

# --- what the kustomize base ships ------------------------------------------------------------------
# Kustomize loads other kustomizations only by relative path.
overlay() { # overlay NAME COMPONENT...: a kustomization of the base plus components; prints its dir
    local dir=$WORK/kustomize/$1 rel
    shift
    mkdir -p "$dir"
    rel=$("$PYTHON" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$MANIFESTS" "$dir")
    {
        echo "resources: [$rel]"
        echo "components: [$(for c in "$@"; do printf '%s/components/%s,' "$rel" "$c"; done | sed 's/,$//')]"
    } >"$dir/kustomization.yaml"
    echo "$dir"
}
render() { kubectl kustomize "$1" | yaml_to_json; }

say "rendering the kustomize base ($MANIFESTS)"
render "$MANIFESTS" >"$WORK/base.json"
jq -r '.[] | "  \(.kind) \(.metadata.namespace // "-")/\(.metadata.name)"' "$WORK/base.json"
RBAC_KINDS='["ServiceAccount","Role","ClusterRole","RoleBinding","ClusterRoleBinding"]'
if jq -e 'any(.[]; .kind == "ClusterRole" or .kind == "Role")' "$WORK/base.json" >/dev/null; then
    RBAC_FROM="the base"
    jq --argjson k "$RBAC_KINDS" '[.[] | select(.kind as $x | $k | index($x))]' "$WORK/base.json" >"$WORK/rbac.json"
elif [ -d "$MANIFESTS/components/live-cluster" ]; then
    # Older layout: the base was folder mode and the live-cluster component carried the RBAC.
    RBAC_FROM="the base + components/live-cluster"
    render "$(overlay live live-cluster)" | jq --argjson k "$RBAC_KINDS" '[.[] | select(.kind as $x | $k | index($x))]' >"$WORK/rbac.json"
else
    die "the kustomize base ships no RBAC and there is no live-cluster component"
fi
echo "RBAC from $RBAC_FROM: $(jq -r '[.[] | .kind + "/" + .metadata.name] | join(", ")' "$WORK/rbac.json")"

# apply_json FILE: kubectl apply a JSON array of objects.
apply_json() { jq '{apiVersion: "v1", kind: "List", items: .}' "$1" | kc apply -f - >/dev/null; }
crd_gone() { ! kc get crd "$1" >/dev/null 2>&1; }
established() { kc wait --for condition=Established --timeout=30s "crd/$1" >/dev/null; }

say "CRDs next to an existing OpenKruise (issue 16 point 6)"
# Kruise's SidecarSet CRD is already there: installing the base (everything but the webhook
# configurations, which would call a Service) must not touch it.
mkns default kube-system kruise-system
kc create -f "$E2E/crds/openkruise-sidecarset.yaml" >/dev/null
established sidecarsets.apps.kruise.io
before=$(kc get crd sidecarsets.apps.kruise.io -o json)
jq '[.[] | select(.kind != "MutatingWebhookConfiguration" and .kind != "ValidatingWebhookConfiguration")]' \
    "$WORK/base.json" >"$WORK/base-no-webhooks.json"
# One object at a time: the base is written for current Kubernetes, and objects 1.20 cannot take
# (policy/v1 PodDisruptionBudget, a preStop sleep action) are noted, not fatal: they are not what
# this check is about.
for i in $(seq 0 $(($(jq length "$WORK/base-no-webhooks.json") - 1))); do
    obj=$(jq -c ".[$i]" "$WORK/base-no-webhooks.json")
    out=$(kc apply -f - <<<"$obj" 2>&1) \
        || echo "note: 1.20 does not take $(jq -r '"\(.kind) \(.metadata.name)"' <<<"$obj") from the base: $(tail -1 <<<"$out" | cut -c1-200)"
done
after=$(kc get crd sidecarsets.apps.kruise.io -o json)
rv() { jq -r .metadata.resourceVersion <<<"$1"; }
if [ "$(rv "$before")" = "$(rv "$after")" ]; then
    pass crd-existing-kruise-untouched "applying the base left OpenKruise's SidecarSet CRD as it was (resourceVersion $(rv "$after"))"
else
    fail crd-existing-kruise-untouched "applying the base changed OpenKruise's SidecarSet CRD (resourceVersion $(rv "$before") -> $(rv "$after"); the base ships a CRD: $(jq -r '[.[] | select(.kind == "CustomResourceDefinition") | .metadata.name] | join(", ")' "$WORK/base.json"))"
fi
apply_json "$WORK/rbac.json"
mkns kruise-admission
kc delete crd sidecarsets.apps.kruise.io --wait=true >/dev/null
wait_for 60 crd_gone sidecarsets.apps.kruise.io || die "the stand-in OpenKruise CRD was not deleted"

# Without Kruise: the base plus the sidecarset-crd component installs ours.
if [ -d "$MANIFESTS/components/sidecarset-crd" ]; then
    CRD_FROM="the base + components/sidecarset-crd"
    render "$(overlay crd sidecarset-crd)" >"$WORK/with-crd.json"
else
    CRD_FROM="the base (no components/sidecarset-crd on this branch)"
    cp "$WORK/base.json" "$WORK/with-crd.json"
fi
jq '[.[] | select(.kind == "CustomResourceDefinition")]' "$WORK/with-crd.json" >"$WORK/crds.json"
apply_json "$WORK/crds.json"
if established sidecarsets.apps.kruise.io \
    && kc get crd sidecarsets.apps.kruise.io -o json | jq -e '
        (.metadata.annotations["e2e.kruise-admission.dev/installed-by"] == null)
        and ([.spec.versions[] | select(.served) | .name] | sort == ["v1alpha1", "v1beta1"])' >/dev/null; then
    pass crd-without-kruise-installed "$CRD_FROM created sidecarsets.apps.kruise.io (v1alpha1 and v1beta1 served)"
else
    fail crd-without-kruise-installed "$CRD_FROM did not install an established SidecarSet CRD serving v1alpha1 and v1beta1"
fi

say "Kruise workload CRDs and the suite's own"
kc apply -f "$E2E/crds/kruise-workloads.yaml" -f "$E2E/crds/e2e-protected.yaml" >/dev/null
for crd in clonesets.apps.kruise.io statefulsets.apps.kruise.io uniteddeployments.apps.kruise.io \
    widgets.e2e.kruise-admission.dev gadgets.e2e.kruise-admission.dev; do
    established "$crd" || die "CRD $crd not established"
done

# --- webhook configurations and the server -----------------------------------------------------------
WEBHOOK_PORT=$(free_port)
METRICS_PORT=$(free_port)
say "webhook configurations from \`kruise-admission manifests webhooks\`, pointed at https://localhost:$WEBHOOK_PORT"
# The self-managed serving certificate names the Service and localhost (no IP address), so the URLs
# name localhost, which /etc/hosts maps to 127.0.0.1.
"$BIN" manifests webhooks | yaml_to_json | jq --arg base "https://localhost:$WEBHOOK_PORT" '
    [.[] | .webhooks |= map(.clientConfig = ({url: ($base + .clientConfig.service.path)}
        + (if .clientConfig.caBundle then {caBundle: .clientConfig.caBundle} else {} end)))]' >"$WORK/webhooks.json"
jq -r '.[] | .kind as $k | .webhooks[] | "  \($k) \(.name) -> \(.clientConfig.url) (\(.failurePolicy))"' "$WORK/webhooks.json"
apply_json "$WORK/webhooks.json"

say "kruise-admission serve --cluster-mode=live --cert-mode=self-managed (as $SA_USER)"
start_server
if wait_for 90 server_ready; then
    pass server-ready "/readyz 200 in live mode with the base's RBAC"
else
    fail server-ready "/readyz not 200 after 90 s: $(curl -s "http://127.0.0.1:$METRICS_PORT/readyz")"
    die "nothing else can be checked without the server"
fi

ca_bundles_match() {
    local ca
    ca=$(kc -n kruise-admission get secret kruise-admission-tls -o jsonpath='{.data.ca\.crt}') || return 1
    [ -n "$ca" ] || return 1
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        kc get "$kind" kruise-admission -o json | jq -e --arg ca "$ca" '.webhooks | length > 0 and all(.clientConfig.caBundle == $ca)' >/dev/null || return 1
    done
}
if wait_for 60 ca_bundles_match; then
    secret=$(kc -n kruise-admission get secret kruise-admission-tls -o json)
    jq -r '.data["ca.crt"]' <<<"$secret" | base64 -d >"$WORK/server-ca.crt"
    keys=$(jq -r '.data | keys | join(",")' <<<"$secret")
    if [ "$keys" = "ca.crt,ca.key,tls.crt,tls.key" ] \
        && echo | openssl s_client -connect "127.0.0.1:$WEBHOOK_PORT" -servername localhost -CAfile "$WORK/server-ca.crt" \
            -verify_hostname localhost -verify_return_error 2>/dev/null | grep -q 'Verify return code: 0'; then
        pass self-managed-certs "Secret kruise-admission/kruise-admission-tls ($keys); its ca.crt is the caBundle of every webhook in both configurations and verifies the served certificate for localhost"
    else
        fail self-managed-certs "Secret keys $keys, or the served certificate does not verify against its ca.crt"
    fi
else
    fail self-managed-certs "Secret kruise-admission-tls missing or caBundle not patched into both configurations within 60 s"
fi

# --- checks through the API server -------------------------------------------------------------------
# shellcheck source=tests/e2e/checks.sh
source "$E2E/checks.sh"
# shellcheck source=tests/e2e/latency.sh
source "$E2E/latency.sh"
# shellcheck source=tests/e2e/shutdown.sh
source "$E2E/shutdown.sh"
client_auth_checks
# shellcheck source=tests/e2e/shadow.sh
source "$E2E/shadow.sh"

[ "$FAILED" -eq 0 ] || printf '\nfailed: %s\n' "${FAILURES[*]}"
printf '\n%d passed, %d failed\n' "$PASSED" "$FAILED"
[ "$FAILED" -eq 0 ] || exit 1
