# shellcheck shell=bash
# OpenKruise's kruise-manager v1.9.1 as the peer a bench measures ours against (benches/apiserver.sh
# and benches/h2load.sh with KRUISE=1). Sourced after tests/e2e/lib.sh, with a running API server
# ($APISERVER_PORT, $WORK/admin.kubeconfig), $E2E, $WORK and $PYTHON set.

# shellcheck source=tests/e2e/kruise_manager.sh
source "$E2E/kruise_manager.sh"

# kruise_peer SIDECARSETS SELECTING FOLDER: kruise-manager (tests/e2e/kube-binaries.sh
# kruise-manager) with its CRDs and webhook configurations, its Pod webhook (`mpod.kb.io`) narrowed
# to the namespaces labelled e2e-floor=kruise in its `template` annotation (the entries it keeps,
# docs/MIGRATING.md §5); then SIDECARSETS SidecarSets created through its webhooks, SELECTING of
# them selecting the latency pod (label e2e-sidecar=e2e-lat), and FOLDER filled with them as Kruise
# stored them (its defaults and hashes), the revisions it wrote and the namespaces, for ours to
# read. Sets KM_PID, KM_NS and KM_WEBHOOK_PORT (tests/e2e/kruise_manager.sh).
kruise_peer() {
    local sidecarsets=$1 selecting=$2 folder=$3
    say "kruise-manager: its CRDs and webhook configurations, $sidecarsets SidecarSets ($selecting selecting the pod)"
    { read -r KRUISE_MANAGER; read -r KRUISE_SRC; } < <(bash "$E2E/kube-binaries.sh" kruise-manager)
    kruise_manager_install "$KRUISE_SRC"
    kc get mutatingwebhookconfiguration kruise-mutating-webhook-configuration -o json \
        | jq '.metadata.annotations.template = (.webhooks | map(if .name == "mpod.kb.io"
            then .namespaceSelector = {matchLabels: {"e2e-floor": "kruise"}} else . end) | tojson)' | kc replace -f - >/dev/null
    start_kruise_manager
    wait_for 120 km_ready || die "kruise-manager did not become ready (see $WORK/logs/kruise-manager.log)"
    jq -n --argjson n "$sidecarsets" --argjson sel "$selecting" '{apiVersion: "v1", kind: "List", items: [range($n) as $i | {
        apiVersion: "apps.kruise.io/v1alpha1", kind: "SidecarSet", metadata: {name: "e2e-lat-\($i)"},
        spec: {selector: {matchLabels: (if $i < $sel then {"e2e-sidecar": "e2e-lat"} else {"e2e-sidecar": "other-\($i)"} end)},
               containers: [{name: "agent-\($i)", image: "busybox:1.36", command: ["sleep", "3600"]}]}}]}' \
        | kc create -f - >/dev/null
    wait_for 60 eval '[ "$(kc -n kruise-system get controllerrevisions -l kruise.io/sidecarset-name -o name | wc -l)" -ge "$sidecarsets" ]' || true
    mkdir -p "$folder"
    kc get sidecarsets -o json >"$folder/sidecarsets.json"
    kc -n kruise-system get controllerrevisions -l kruise.io/sidecarset-name -o json >"$folder/revisions.json"
    kc get namespaces -o json >"$folder/namespaces.json"
}
