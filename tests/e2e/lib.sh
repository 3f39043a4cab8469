# shellcheck shell=bash
# Helpers of the end-to-end suite (sourced by run.sh): results, waiting, the cluster (etcd and
# kube-apiserver on 127.0.0.1) and kruise-admission as its own process. Every address is on
# loopback; every process this file starts is recorded and stopped by `e2e_cleanup`.

PASSED=0
FAILED=0
FAILURES=()
PIDS=()

say() { printf '\n== %s [%s, load %s]\n' "$*" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1-3 /proc/loadavg)"; }
pass() { PASSED=$((PASSED + 1)); printf 'PASS %s: %s\n' "$1" "$2"; }
fail() { FAILED=$((FAILED + 1)); FAILURES+=("$1"); printf 'FAIL %s: %s\n' "$1" "$2"; }
# check NAME REASON-IF-OK REASON-IF-NOT CMD...: PASS or FAIL on CMD's exit status.
check() {
    local name=$1 ok=$2 bad=$3
    shift 3
    if "$@"; then pass "$name" "$ok"; else fail "$name" "$bad"; fi
}
die() { printf 'e2e: %s\n' "$*" >&2; exit 2; }
# selected PART: PART is to run (E2E_ONLY is empty or names it).
selected() { [ -z "${E2E_ONLY:-}" ] || [[ " $E2E_ONLY " == *" $1 "* ]]; }

# wait_for SECONDS CMD...: run CMD every 0.2 s until it succeeds; false after SECONDS.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || return 1
        sleep 0.2
    done
}

# free_port: a loopback port that is free now and stays free until a listener takes it. Ports are
# picked below the kernel's ephemeral range (ip_local_port_range): a port the kernel hands out for
# bind(0) is also the local port of the next outgoing connection, so a port picked before the API
# server starts and bound minutes later could be taken by one of its connections meanwhile.
free_port() {
    "$PYTHON" - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, max(low, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free loopback port below the ephemeral range")
PY
}

# Start a background process, remembered for cleanup: spawn LOG CMD...; sets SPAWNED.
spawn() {
    local log=$1
    shift
    "$@" >>"$log" 2>&1 &
    SPAWNED=$!
    PIDS+=("$SPAWNED")
}

stop_pid() {
    local pid=$1 sig=${2:-TERM}
    kill -"$sig" "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

e2e_cleanup() {
    local rc=$?
    set +e
    # Newest first: the webhook servers, then kube-apiserver, then etcd.
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
    if [ -n "${WATCHDOG:-}" ]; then
        # Its sleep first: left running, it would hold the suite's stdout open for E2E_TIMEOUT.
        pkill -P "$WATCHDOG" 2>/dev/null
        kill "$WATCHDOG" 2>/dev/null
    fi
    # migration.sh works in a folder of $WORK (SUITE_WORK) while it runs.
    local work=${SUITE_WORK:-${WORK:-}}
    # Exit 1 is failed checks (their reasons are printed); anything else stopped the suite itself.
    if [ "$rc" -gt 1 ] && [ -n "$work" ] && [ -d "$work" ]; then
        printf '\nlogs (last lines; E2E_KEEP=1 keeps %s):\n' "$work" >&2
        for f in "$work"/logs/*.log "$work"/*/logs/*.log; do
            [ -f "$f" ] || continue
            printf -- '--- %s\n' "$f" >&2
            tail -n 15 "$f" >&2
        done
    fi
    if [ -n "$work" ] && [ "${E2E_KEEP:-0}" = 0 ]; then rm -rf "$work"; fi
    exit "$rc"
}

# The suite stops by itself: after E2E_TIMEOUT seconds it is sent SIGTERM and cleans up.
start_watchdog() {
    local main=$$
    (sleep "${E2E_TIMEOUT:-1800}" && echo "e2e: timed out after ${E2E_TIMEOUT:-1800} s" >&2 && kill -TERM "$main") &
    WATCHDOG=$!
}

# kubectl as the cluster admin (a static token in system:masters).
kc() { kubectl --kubeconfig "$WORK/admin.kubeconfig" --request-timeout=20s "$@"; }

# write_kubeconfig FILE TOKEN [CLIENT-CERT CLIENT-KEY]
write_kubeconfig() {
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority: $WORK/apiserver-tls/ca.crt
users:
- name: e2e
  user:
    token: $2
contexts:
- name: e2e
  context: {cluster: e2e, user: e2e}
current-context: e2e
EOF
}

start_etcd() {
    local client peer
    client=$(free_port)
    peer=$(free_port)
    ETCD_URL=http://127.0.0.1:$client
    # No fsync: a throwaway cluster in a temp dir (and a shared disk) needs no durability.
    spawn "$WORK/logs/etcd.log" "$ETCD" --name e2e --data-dir "$WORK/etcd" --unsafe-no-fsync \
        --listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "e2e=http://127.0.0.1:$peer"
    wait_for 30 curl -sf "$ETCD_URL/health" || die "etcd did not come up (see $WORK/logs/etcd.log)"
}

# kube-apiserver with RBAC and static tokens: ADMIN_TOKEN (system:masters) and SA_TOKEN (the
# server's service account, with the groups a real service-account token carries).
# EXTRA_APISERVER_FLAGS (array) is appended.
start_apiserver() {
    APISERVER_PORT=$(free_port)
    ADMIN_TOKEN=$(openssl rand -hex 16)
    SA_TOKEN=$(openssl rand -hex 16)
    SA_USER=system:serviceaccount:kruise-admission:kruise-admission
    cat >"$WORK/tokens.csv" <<EOF
$ADMIN_TOKEN,e2e-admin,e2e-admin,"system:masters"
$SA_TOKEN,$SA_USER,e2e-sa-uid,"system:serviceaccounts,system:serviceaccounts:kruise-admission,system:authenticated"
EOF
    # The API server's serving pair (names localhost and 127.0.0.1), from our own `certs` command.
    "$BIN" certs --out "$WORK/apiserver-tls" >/dev/null
    openssl genrsa -out "$WORK/sa.key" 2048 2>/dev/null
    launch_apiserver
    write_kubeconfig "$WORK/admin.kubeconfig" "$ADMIN_TOKEN"
    write_kubeconfig "$WORK/sa.kubeconfig" "$SA_TOKEN"
    wait_for 120 kc get --raw /readyz || die "kube-apiserver did not become ready (see $WORK/logs/kube-apiserver.log)"
    # RBAC's bootstrap roles are written by a post-start hook; wait for one we rely on.
    wait_for 60 kc get clusterrolebinding system:discovery || die "RBAC bootstrap roles missing"
}

# launch_apiserver: the kube-apiserver process of start_apiserver (same port, etcd, keys and
# flags each time, so that it can be stopped and started again); sets APISERVER_PID.
launch_apiserver() {
    # ServiceAccount admission is off: no controller-manager runs to create the service accounts
    # it would want for every pod. Everything else is the version's default admission chain.
    # The Service IP range is inside 127.0.0.0/8, so even the `kubernetes` Service's ClusterIP is
    # a loopback address; webhooks are registered by URL, so nothing dials a Service. The API
    # server refuses to advertise a loopback address in the `kubernetes` Service's endpoints, so
    # that reconciler is off (nothing here reaches the API server through the Service).
    spawn "$WORK/logs/kube-apiserver.log" "$KUBE_APISERVER" \
        --etcd-servers "$ETCD_URL" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --endpoint-reconciler-type none \
        --secure-port "$APISERVER_PORT" \
        --tls-cert-file "$WORK/apiserver-tls/tls.crt" --tls-private-key-file "$WORK/apiserver-tls/tls.key" \
        --cert-dir "$WORK/apiserver-certs" \
        --service-cluster-ip-range 127.100.0.0/24 \
        --token-auth-file "$WORK/tokens.csv" --authorization-mode RBAC \
        --service-account-key-file "$WORK/sa.key" --service-account-signing-key-file "$WORK/sa.key" \
        --service-account-issuer https://kubernetes.default.svc.cluster.local --api-audiences https://kubernetes.default.svc.cluster.local \
        --disable-admission-plugins ServiceAccount \
        --profiling=false \
        "${EXTRA_APISERVER_FLAGS[@]}"
    APISERVER_PID=$SPAWNED
}

# mkns NAME...: create namespaces with the label kube-apiserver >= 1.21 sets on every namespace
# (kubernetes.io/metadata.name=NAME). 1.20 predates it, and both the generated webhook
# configurations (namespaceSelector excluding kube-system and the server's own namespace) and
# SidecarSet v1alpha1 `spec.namespace` (converted to a selector on it, as Kruise does) rely on it.
mkns() {
    for ns in "$@"; do
        kc get namespace "$ns" >/dev/null 2>&1 || kc create namespace "$ns" >/dev/null
        kc label --overwrite namespace "$ns" "kubernetes.io/metadata.name=$ns" >/dev/null
    done
}

# pod_json NS NAME [LABEL=VALUE...]: a one-container Pod; a NAME ending in "-" is a generateName.
pod_json() {
    local ns=$1 name=$2 labels='{}'
    shift 2
    for kv in "$@"; do labels=$(jq -c --arg k "${kv%%=*}" --arg v "${kv#*=}" '. + {($k): $v}' <<<"$labels"); done
    jq -nc --arg ns "$ns" --arg name "$name" --argjson labels "$labels" '{
        apiVersion: "v1", kind: "Pod",
        metadata: ({namespace: $ns, labels: $labels}
            + (if ($name | endswith("-")) then {generateName: $name} else {name: $name} end)),
        spec: {containers: [{name: "app", image: "nginx:1.25"}]}}'
}

# The floor webhooks (benches/go-floor, built as $FLOOR, serving $WORK/floor-tls):
# start_floor NAME MODE [PATCH-FILE] sets FLOOR_PORT.
start_floor() {
    FLOOR_PORT=$(free_port)
    spawn "$WORK/logs/floor-$1.log" "$FLOOR" "$WORK/floor-tls/tls.crt" "$WORK/floor-tls/tls.key" "127.0.0.1:$FLOOR_PORT" "${@:2}"
    wait_for 20 curl -s --cacert "$WORK/floor-tls/ca.crt" -o /dev/null "https://localhost:$FLOOR_PORT/" \
        || die "floor webhook $1 did not start"
}
# register_floor CONFIG-NAME PORT NAMESPACE-LABEL-VALUE [URL CA-FILE]: a mutating webhook named
# VALUE.e2e.kruise-admission.dev for pod CREATEs in the namespaces labelled e2e-floor=VALUE; it calls
# the floor on PORT, or URL (verified with CA-FILE) when given.
register_floor() {
    jq -n --arg name "$1" --arg url "${4:-https://localhost:$2/}" --arg sel "$3" \
        --arg ca "$(base64 -w0 <"${5:-$WORK/floor-tls/ca.crt}")" '{
        apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: {name: $name},
        webhooks: [{name: ($sel + ".e2e.kruise-admission.dev"), admissionReviewVersions: ["v1", "v1beta1"],
            clientConfig: {url: $url, caBundle: $ca}, failurePolicy: "Fail", matchPolicy: "Equivalent",
            namespaceSelector: {matchLabels: {"e2e-floor": $sel}}, reinvocationPolicy: "Never",
            rules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "*"}],
            sideEffects: "None", timeoutSeconds: 2}]}' | kc apply -f - >/dev/null
}

crd_gone() { ! kc get crd "$1" >/dev/null 2>&1; }
established() { kc wait --for condition=Established --timeout=30s "crd/$1" >/dev/null; }

# Our server writes its INFO lines in batches at most 100 ms apart (src/cli/log_output.rs), so a
# review's line can reach the log that long after its answer. Reading the log waits this long first,
# so a step's lines neither spill past where it starts counting nor miss its own last review.
LOG_SETTLE=0.3

# log_lines FILE: how many lines FILE has now (to read only what a step adds after it).
log_lines() { sleep "$LOG_SETTLE"; wc -l <"$1"; }

# The apiserver's own metrics (as the admin).
apiserver_metrics() { kc get --raw /metrics; }

# install_budget_crds: Kruise's PodUnavailableBudget and WorkloadSpread CRDs, from the Kruise module
# pinned in tests/e2e/kruise-manager/ (tests/e2e/crds/ has only the workloads').
install_budget_crds() {
    local src
    src=$(cd "$E2E/kruise-manager" && go list -m -f '{{.Dir}}' github.com/openkruise/kruise)
    [ -d "$src/config/crd/bases" ] || die "no Kruise module source at $src"
    kc apply --server-side -f "$src/config/crd/bases/policy.kruise.io_podunavailablebudgets.yaml" \
        -f "$src/config/crd/bases/apps.kruise.io_workloadspreads.yaml" >/dev/null
    established podunavailablebudgets.policy.kruise.io || die "Kruise's PodUnavailableBudget CRD not established"
    established workloadspreads.apps.kruise.io || die "Kruise's WorkloadSpread CRD not established"
}

# point_webhook KIND NAME URL: the clientConfig URL of one webhook entry of our configuration KIND.
point_webhook() {
    local index
    index=$(kc get "$1" kruise-admission -o json | jq --arg n "$2" '.webhooks | map(.name) | index($n)')
    [ "$index" != null ] || die "no webhook $2 in $1 kruise-admission"
    kc patch "$1" kruise-admission --type=json \
        -p "[{\"op\": \"replace\", \"path\": \"/webhooks/$index/clientConfig/url\", \"value\": \"$3\"}]" >/dev/null
}

# cached METRICS-PORT KIND: that server's snapshot holds at least one object of KIND (`Kind.group`).
cached() {
    curl -s "http://127.0.0.1:$1/metrics" \
        | awk -v k="kruise_admission_cluster_objects{kind=\"$2\"}" '$1 == k && $2 >= 1 {found = 1} END {exit !found}'
}

# start_server [NAME WEBHOOK-PORT METRICS-PORT [KUBECONFIG]]: `kruise-admission serve` in live
# mode with self-managed certificates, as its service account (KUBECONFIG, default
# sa.kubeconfig); sets SERVER_PID. Without arguments it is the suite's server (WEBHOOK_PORT,
# METRICS_PORT, log kruise-admission.log); a NAME starts another replica (log
# kruise-admission-NAME.log) sharing the same Secret, as a rollout would.
start_server() {
    local name=${1:-} port=${2:-$WEBHOOK_PORT} metrics=${3:-$METRICS_PORT} kubeconfig=${4:-$WORK/sa.kubeconfig}
    spawn "$WORK/logs/kruise-admission${name:+-$name}.log" "$BIN" serve \
        --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics" \
        --cluster-mode live --cert-mode self-managed --kubeconfig "$kubeconfig" \
        --cert-dir "$WORK/server-certs${name:+-$name}" --namespace kruise-admission --kruise-namespace kruise-system \
        --log-format json "${EXTRA_SERVER_FLAGS[@]}"
    SERVER_PID=$SPAWNED
}

# server_ready [METRICS-PORT]
server_ready() { curl -sf "http://127.0.0.1:${1:-$METRICS_PORT}/readyz" >/dev/null; }

# server_reviews [FROM-LINE [LOG]]: the server's review log lines (after FROM-LINE) as JSON, one per line.
server_reviews() {
    sleep "$LOG_SETTLE"
    tail -n +"$((${1:-0} + 1))" "${2:-$WORK/logs/kruise-admission.log}" \
        | jq -c 'select(type == "object") | (.fields // .) | select(.message == "admission review")' 2>/dev/null
}

# apply_json FILE: kubectl apply a JSON array of objects.
apply_json() { jq '{apiVersion: "v1", kind: "List", items: .}' "$1" | kc apply -f - >/dev/null; }

# YAML (multi-document) on stdin -> a JSON array of the objects on stdout.
yaml_to_json() {
    "$PYTHON" -c 'import json, sys, yaml; print(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))'
}
