#!/usr/bin/env bash
# End-to-end suite against a real kube-apiserver. Every address is on loopback (127.0.0.0/8).
#
#   - runs once per Kubernetes version in E2E_VERSIONS (default: the newest of
#     tests/e2e/kube/VERSIONS, plus the oldest we claim, its last, when that one's binaries are
#     already cached), each in a fresh cluster, and sums the results;
#   - gets kube-apiserver and etcd from tests/e2e/kube-binaries.sh (built from Go modules pinned in
#     tests/e2e/kube/, then cached) and starts them on random loopback ports in a temp dir: RBAC,
#     static tokens (an admin, and the server's service account with its real groups), the Service
#     IP range inside 127.0.0.0/8;
#   - checks what we ship against that API server with `kubectl apply --dry-run=server` (the
#     kustomize base, each component, `helm template` with default values and each documented
#     option), then applies the base's RBAC, namespace and service account (the CRD layout next to an
#     existing OpenKruise is checked on the way), minimal CRDs for the Kruise workloads
#     (tests/e2e/crds/), and the webhook configurations `kruise-admission manifests webhooks`
#     prints, with each clientConfig pointed at https://localhost:<port><path>;
#   - runs `kruise-admission serve --cluster-mode=live --cert-mode=self-managed` as its own
#     process, authenticated with the service-account token;
#   - checks through the API server with kubectl (the client users have), printing PASS/FAIL per
#     check and `N passed, M failed` at the end; exits non-zero on any failure;
#   - live mode through API-server faults (tests/e2e/recovery.sh: token revoked, API server stopped,
#     connections stalled);
#   - PodUnavailableBudget accounting across two replicas of ours behind one round-robin address
#     (tests/e2e/pod_budgets.sh: 200 evictions and deletes at once, exactly the allowed number pass);
#   - the pod path's latency as the API server sees it (tests/e2e/pod_path.sh: creates and evictions
#     through WorkloadSpread, PodUnavailableBudget and SidecarSet, against a SidecarSet alone; a table,
#     no timed check);
#   - last, shadow mode (tests/e2e/shadow.sh): the configurations of `manifests webhooks --shadow`
#     in place of the enforcing ones, a server with --shadow, and the stored objects unchanged.
#   - then the migration runbook (tests/e2e/migration.sh): docs/MIGRATING.md executed against
#     OpenKruise's kruise-manager v1.9.1 (built by kube-binaries.sh kruise-manager) in a fresh
#     cluster, shadow, the switch and the rollback, with Pods created throughout.
#
# Needs: Go (the machine's; tests/e2e/kube-binaries.sh), kubectl, helm (both from
# .ci/manifests-check.sh's tools folder when not on PATH), cargo, curl, openssl, python3 with
# PyYAML, jq, socat (apt-get as root when one is missing), root for unshare/nsenter (migration.sh).
# Knobs: E2E_VERSIONS (space-separated Kubernetes versions, e.g. "v1.34.4 v1.37.2"),
#        E2E_PROFILE (cargo profile of the server, default release; dev is quicker to build),
#        E2E_LATENCY_PODS (pods per webhook for the latency comparison, default 200; 0 skips it),
#        E2E_MIGRATION_PODS (the migration's random Pod mix, default 200), E2E_MIGRATION_SEED,
#        E2E_KEEP=1 (keep the temp dir with all logs), E2E_TIMEOUT (seconds per version, default 1800),
#        E2E_ONLY (space-separated parts to run, named as their scripts: installs dry_run_server
#        checks latency ca_bundle recovery shutdown client_auth pod_budgets pod_path shadow migration; default all; the cluster,
#        the shipped RBAC and CRDs and the suite's server are set up either way),
#        E2E_MANIFESTS (the kustomize base whose RBAC and CRD layout are used, default manifests/),
#        KUBE_BINARIES_CACHE (see kube-binaries.sh), PYTHON (an interpreter with PyYAML).
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

# --- one run per version -----------------------------------------------------------------------------
if [ -z "${E2E_VERSION:-}" ]; then
    if [ -n "${E2E_VERSIONS:-}" ]; then
        read -r -a versions <<<"$E2E_VERSIONS"
    else
        mapfile -t versions < <(grep '^v' "$E2E/kube/VERSIONS")
        newest=${versions[0]} floor=${versions[${#versions[@]} - 1]}
        versions=("$newest")
        if [ "$floor" != "$newest" ]; then
            if bash "$E2E/kube-binaries.sh" --cached "$floor"; then
                versions=("$floor" "$newest")
            else
                echo "e2e: the floor $floor is not cached, so only $newest runs (E2E_VERSIONS=\"$floor $newest\" builds and runs both)"
            fi
        fi
    fi
    total_passed=0 total_failed=0 summary=() rc=0
    for version in "${versions[@]}"; do
        log=$(mktemp)
        E2E_VERSION=$version bash "${BASH_SOURCE[0]}" 2>&1 | tee "$log" || rc=1
        line=$(grep -E '^v[0-9.]+: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
        rm -f "$log"
        if [ -z "$line" ]; then
            summary+=("$version: stopped before its checks ended")
            rc=1
            continue
        fi
        summary+=("$line")
        read -r _ p _ f _ <<<"$line"
        total_passed=$((total_passed + p)) total_failed=$((total_failed + f))
    done
    printf '\n== end to end on %s\n' "${versions[*]}"
    printf '  %s\n' "${summary[@]}"
    printf '\n%d passed, %d failed\n' "$total_passed" "$total_failed"
    [ "$total_failed" -eq 0 ] || rc=1
    exit "$rc"
fi

# --- prerequisites ---------------------------------------------------------------------------------
say "prerequisites"
# kubectl and helm from PATH, else the ones .ci/manifests-check.sh unpacks (CI runs it first).
PATH=$PATH:${MANIFESTS_TOOLS_DIR:-$ROOT/target/manifests-tools}
for tool in kubectl helm; do
    command -v $tool >/dev/null || die "$tool is needed (.ci/manifests-check.sh unpacks one into target/manifests-tools)"
done
if ! command -v jq >/dev/null || ! command -v socat >/dev/null || ! "$PYTHON" -c 'import yaml' 2>/dev/null; then
    command -v apt-get >/dev/null || die "jq, socat and PyYAML are needed"
    apt-get update -qq >/dev/null || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq socat python3-yaml >/dev/null
    "$PYTHON" -c 'import yaml' 2>/dev/null || PYTHON=/usr/bin/python3
fi
command -v go >/dev/null || die "Go is needed (kube-apiserver, etcd and the floor webhooks are built with it)"
say "kube-apiserver $E2E_VERSION and etcd (tests/e2e/kube-binaries.sh)"
{ read -r KUBE_APISERVER; read -r ETCD; } < <(bash "$E2E/kube-binaries.sh" "$E2E_VERSION")
[ -x "${KUBE_APISERVER:-}" ] && [ -x "${ETCD:-}" ] || die "tests/e2e/kube-binaries.sh $E2E_VERSION gave no binaries"

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
"$ROOT/benches/go-floor/build.sh" "$FLOOR"
"$BIN" certs --out "$WORK/floor-tls" >/dev/null

# --- cluster ---------------------------------------------------------------------------------------
# shellcheck source=tests/e2e/client_auth.sh
source "$E2E/client_auth.sh"
client_auth_prepare

say "etcd and kube-apiserver on 127.0.0.1"
start_etcd
start_apiserver
echo "kube-apiserver $("$KUBE_APISERVER" --version | cut -d' ' -f2) ($KUBE_APISERVER) on https://127.0.0.1:$APISERVER_PORT, etcd on $ETCD_URL"

# --- installs with the defaults, without OpenKruise and with it --------------------------------------
# shellcheck source=tests/e2e/installs.sh
selected installs && source "$E2E/installs.sh"

# --- every install path, checked by the API server -------------------------------------------------
# shellcheck source=tests/e2e/dry_run_server.sh
selected dry_run_server && source "$E2E/dry_run_server.sh"

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
if [ -d "$MANIFESTS/components/openkruise" ]; then
    # The cluster below stands for one that runs OpenKruise: the base plus the Role that reads its
    # SidecarSet revisions in kruise-system.
    RBAC_FROM="the base + components/openkruise"
    render "$(overlay openkruise openkruise)" | jq --argjson k "$RBAC_KINDS" '[.[] | select(.kind as $x | $k | index($x))]' >"$WORK/rbac.json"
elif jq -e 'any(.[]; .kind == "ClusterRole" or .kind == "Role")' "$WORK/base.json" >/dev/null; then
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


say "CRDs next to an existing OpenKruise (issue 16 point 6)"
# Kruise's SidecarSet CRD is already there: installing the base (everything but the webhook
# configurations, which would call a Service) must not touch it.
mkns default kube-system kruise-system
kc create -f "$E2E/crds/openkruise-sidecarset.yaml" >/dev/null
established sidecarsets.apps.kruise.io
before=$(kc get crd sidecarsets.apps.kruise.io -o json)
jq '[.[] | select(.kind != "MutatingWebhookConfiguration" and .kind != "ValidatingWebhookConfiguration")]' \
    "$WORK/base.json" >"$WORK/base-no-webhooks.json"
if out=$(jq '{apiVersion: "v1", kind: "List", items: .}' "$WORK/base-no-webhooks.json" | kc apply -f - 2>&1); then
    pass base-applies "the base without its webhook configurations applied: $(jq -r '[.[].kind] | join(", ")' "$WORK/base-no-webhooks.json")"
else
    fail base-applies "the base (without its webhook configurations) was refused: $out"
fi
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
    pass server-ready "/readyz 200 in live mode with the RBAC of $RBAC_FROM"
    unreadable=$(curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | grep '^kruise_admission_cluster_watch_unreadable{' || true)
    check server-reads-kruise-namespace "every watched kind readable: $(tr '\n' ' ' <<<"$unreadable")" \
        "unreadable kinds: $(grep ' 1$' <<<"$unreadable" | tr '\n' ' ')" \
        eval '[ -n "$unreadable" ] && ! grep -q " 1$" <<<"$unreadable"'
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
# In order; E2E_ONLY picks some (the cluster and the server above are always set up).
# shellcheck source=tests/e2e/checks.sh
selected checks && source "$E2E/checks.sh"
# shellcheck source=tests/e2e/latency.sh
selected latency && source "$E2E/latency.sh"
# shellcheck source=tests/e2e/ca_bundle.sh
selected ca_bundle && source "$E2E/ca_bundle.sh"
# shellcheck source=tests/e2e/recovery.sh
selected recovery && source "$E2E/recovery.sh"
# shellcheck source=tests/e2e/shutdown.sh
selected shutdown && source "$E2E/shutdown.sh"
selected client_auth && client_auth_checks
# shellcheck source=tests/e2e/pod_budgets.sh
selected pod_budgets && source "$E2E/pod_budgets.sh"
# shellcheck source=tests/e2e/pod_path.sh
selected pod_path && source "$E2E/pod_path.sh"
# shellcheck source=tests/e2e/shadow.sh
selected shadow && source "$E2E/shadow.sh"
# shellcheck source=tests/e2e/migration.sh
selected migration && source "$E2E/migration.sh"

[ "$FAILED" -eq 0 ] || printf '\nfailed: %s\n' "${FAILURES[*]}"
printf '\n%s: %d passed, %d failed\n' "$E2E_VERSION" "$PASSED" "$FAILED"
[ "$FAILED" -eq 0 ] || exit 1
