# shellcheck shell=bash
# OpenKruise's kruise-manager (v1.9.1, built by `tests/e2e/kube-binaries.sh kruise-manager`) as a
# process of the end-to-end suite (sourced by migration.sh and benches/apiserver.sh). Needs lib.sh's
# helpers, $WORK, $PYTHON and a running API server ($APISERVER_PORT, $WORK/admin.kubeconfig).
#
# Nothing it opens listens beyond loopback. Its webhook server binds 0.0.0.0 (hard-coded in
# Kruise), its metrics, probe and pprof listeners default to all addresses, and the machines that
# run this suite have interfaces besides `lo`. So kruise-manager runs in a network namespace of
# its own that holds only `lo`, and two pairs of socat relays join it to the API server through
# unix sockets in $WORK (a path is reachable from any network namespace):
#   kruise-manager -> 127.0.0.1:$APISERVER_PORT (in its namespace) -> apiserver.sock -> the API server
#   the API server -> 127.0.0.1:$KM_WEBHOOK_PORT (host, loopback) -> webhook.sock -> kruise-manager
# Both sides use the same port numbers, so the URLs kruise-manager writes into its webhook
# configurations and CRDs (https://127.0.0.1:$KM_WEBHOOK_PORT/...) and the admin kubeconfig are
# right on both sides of the relays. The relays set TCP_NODELAY (`nodelay`): without it a response
# written in two pieces waits for the peer's delayed ACK, 40 ms more on every call through the API
# server. Its metrics and probes are read inside its namespace (`km_curl`).

# kruise_manager_install SOURCE-DIR: Kruise's CRDs (its config/crd kustomize build, conversion
# webhooks included), its webhook configurations (config/webhook with the `kruise-` prefix of its
# config/default, each with the empty `template` annotation Kruise's chart writes) and the
# namespace kruise-system, labelled as Kruise's chart labels it, with the chart's (empty)
# kruise-configuration ConfigMap.
kruise_manager_install() {
    local src=$1 dir=$WORK/kruise-webhook-kustomize rel
    mkns kruise-system
    kc label --overwrite namespace kruise-system control-plane=openkruise >/dev/null
    kc -n kruise-system create configmap kruise-configuration >/dev/null
    # Server-side: some of Kruise's CRDs are too big for client-side apply's annotation.
    kubectl kustomize "$src/config/crd" 2>/dev/null >"$WORK/kruise-crds.yaml"
    kc apply --server-side -f "$WORK/kruise-crds.yaml" >/dev/null
    mkdir -p "$dir"
    # Kustomize loads another kustomization only by relative path.
    rel=$("$PYTHON" -c 'import os, sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$src/config/webhook" "$dir")
    printf 'namePrefix: kruise-\nresources: [%s]\n' "$rel" >"$dir/kustomization.yaml"
    kubectl kustomize "$dir" 2>/dev/null | yaml_to_json \
        | jq '[.[] | select(.kind | endswith("WebhookConfiguration")) | .metadata.annotations.template = ""]' >"$WORK/kruise-webhooks.json"
    apply_json "$WORK/kruise-webhooks.json"
    local crd
    for crd in $(yaml_to_json <"$WORK/kruise-crds.yaml" | jq -r '.[].metadata.name'); do
        established "$crd" || die "Kruise's CRD $crd not established"
    done
}

# start_kruise_manager [FEATURE-GATES]: kruise-manager in its network namespace (created on the
# first call, kept across restarts), as the cluster admin, leader election off; sets KM_PID.
start_kruise_manager() {
    local gates=${1:-} km=$WORK/kruise-manager
    if [ -z "${KM_NETNS_PID:-}" ]; then
        mkdir -p "$km"
        KM_WEBHOOK_PORT=$(free_port)
        spawn "$WORK/logs/kruise-manager-netns.log" unshare --net sleep infinity
        KM_NETNS_PID=$SPAWNED
        # nsenter execs the command: the recorded PID is the command's own.
        KM_NS=(nsenter --net="/proc/$KM_NETNS_PID/ns/net")
        wait_for 10 eval '[ "$(readlink "/proc/$KM_NETNS_PID/ns/net")" != "$(readlink /proc/self/ns/net)" ]' \
            || die "no network namespace for kruise-manager"
        km_in ip link set lo up
        # Host side: the webhook port on loopback, and the API server behind a unix socket.
        spawn "$WORK/logs/kruise-manager-relay.log" socat "TCP-LISTEN:$KM_WEBHOOK_PORT,bind=127.0.0.1,fork,reuseaddr,nodelay,backlog=128" "UNIX-CONNECT:$km/webhook.sock"
        spawn "$WORK/logs/kruise-manager-relay.log" socat "UNIX-LISTEN:$km/apiserver.sock,fork,unlink-early" "TCP:127.0.0.1:$APISERVER_PORT,nodelay"
        # Its side: the API server's port on its loopback, and its webhook behind a unix socket.
        spawn "$WORK/logs/kruise-manager-relay.log" "${KM_NS[@]}" socat "TCP-LISTEN:$APISERVER_PORT,bind=127.0.0.1,fork,reuseaddr,nodelay,backlog=128" "UNIX-CONNECT:$km/apiserver.sock"
        spawn "$WORK/logs/kruise-manager-relay.log" "${KM_NS[@]}" socat "UNIX-LISTEN:$km/webhook.sock,fork,unlink-early" "TCP:127.0.0.1:$KM_WEBHOOK_PORT,nodelay"
        wait_for 10 test -S "$km/apiserver.sock" -a -S "$km/webhook.sock" || die "the kruise-manager relays did not start"
    fi
    spawn "$WORK/logs/kruise-manager.log" "${KM_NS[@]}" env KUBECONFIG="$WORK/admin.kubeconfig" POD_NAMESPACE=kruise-system \
        WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT="$KM_WEBHOOK_PORT" WEBHOOK_CERT_DIR="$km/certs" \
        "$KRUISE_MANAGER" --enable-leader-election=false --enable-pprof=false \
        --metrics-addr 127.0.0.1:8080 --health-probe-addr 127.0.0.1:8000 ${gates:+--feature-gates="$gates"}
    KM_PID=$SPAWNED
}

# km_in CMD...: CMD in kruise-manager's network namespace.
km_in() { "${KM_NS[@]}" "$@"; }
# km_curl PATH: GET http://127.0.0.1:8000PATH (probes) or :8080 (metrics) inside that namespace.
km_curl() { km_in curl -sf "http://127.0.0.1:$1"; }
km_ready() { km_curl 8000/readyz >/dev/null; }

stop_kruise_manager() { stop_pid "$KM_PID"; }

# kruise_manager_names KIND: the names of the entries of Kruise's KIND (mutating|validating)
# configuration, one per line.
kruise_manager_names() {
    kc get "${1}webhookconfiguration" "kruise-${1}-webhook-configuration" -o jsonpath='{range .webhooks[*]}{.name}{"\n"}{end}'
}
