# shellcheck shell=bash
# What a Pod create and an eviction wait for when the pod path's steps fire, as kube-apiserver
# measures it (sourced by run.sh; figures for docs/PERFORMANCE.md, not timed checks: the checks
# are only that every request was answered and measured).
#
# A server of ours in live mode (started here, once Kruise's PodUnavailableBudget and WorkloadSpread
# CRDs are served, so that it watches them) answers `mpod.kb.io` and `vpod.kb.io`. Two namespaces:
#   full   Pods of a CloneSet under a WorkloadSpread whose subset has maxReplicas (each create
#          writes the WorkloadSpread's creatingPods), a PodUnavailableBudget (each eviction writes its
#          disruptedPods) and a SidecarSet: steps 1 (readiness gate), 2, 3 and 5 of /mutate-pod,
#          and both checks of /validate-pod, with their status writes to the API server
#   plain  the same Pod, selected by the SidecarSet only: step 3, no status write, no budget
# In each of E2E_POD_PATH_ROUNDS rounds (default 3), each namespace in turn gets E2E_POD_PATH_PODS
# creates one at a time (default 50), then, once they are Running and Ready, an eviction of each,
# one at a time. The API server's histogram
# (apiserver_admission_webhook_admission_duration_seconds) gives the mean call of each webhook per
# batch; the table goes to target/e2e/pod-path.md.

say "pod path: a create and an eviction through every step, seen by kube-apiserver"
# shellcheck source=tests/e2e/latency_lib.sh
source "$E2E/latency_lib.sh"
PATH_ROUNDS=${E2E_POD_PATH_ROUNDS:-3}
PATH_PODS=${E2E_POD_PATH_PODS:-50}
install_budget_crds
PATH_PORT=$(free_port) PATH_METRICS=$(free_port)
start_server path "$PATH_PORT" "$PATH_METRICS"
PATH_PID=$SERVER_PID
wait_for 90 server_ready "$PATH_METRICS" || die "the pod path's server is not ready: $(curl -s "http://127.0.0.1:$PATH_METRICS/readyz")"
point_webhook mutatingwebhookconfiguration mpod.kb.io "https://localhost:$PATH_PORT/mutate-pod"
point_webhook validatingwebhookconfiguration vpod.kb.io "https://localhost:$PATH_PORT/validate-pod"

mkns path-full path-plain
kc create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: e2e-path}
spec:
  selector: {matchLabels: {e2e-path: "yes"}}
  containers: [{name: e2e-path-agent, image: "busybox:1.36", command: [sleep, "3600"]}]
YAML
kc -n path-full create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: web}
spec:
  replicas: 1000
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "nginx:1.25"}]}
---
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata: {name: web}
spec:
  targetRef: {apiVersion: apps.kruise.io/v1alpha1, kind: CloneSet, name: web}
  subsets:
  - {name: zone-a, maxReplicas: 100000, tolerations: [{key: zone, operator: Equal, value: a, effect: NoSchedule}]}
---
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: web}
spec:
  maxUnavailable: "90%"
  selector: {matchLabels: {app: web}}
YAML
# What Kruise's PUB controller would write for a budget with room for every eviction of the run
# (kruise-manager does not run in this cluster).
kc -n path-full patch podunavailablebudget web --subresource=status --type=merge -p '{"status": {
    "observedGeneration": 1, "totalReplicas": 1000, "desiredAvailable": 100, "currentAvailable": 1000,
    "unavailableAllowed": 900}}' >/dev/null
uid=$(kc -n path-full get cloneset web -o jsonpath='{.metadata.uid}')
jq -nc --arg uid "$uid" '{apiVersion: "v1", kind: "Pod",
    metadata: {generateName: "web-", labels: {app: "web", "e2e-path": "yes"},
        ownerReferences: [{apiVersion: "apps.kruise.io/v1alpha1", kind: "CloneSet", name: "web", uid: $uid, controller: true}]},
    spec: {containers: [{name: "app", image: "nginx:1.25"}]}}' >"$WORK/path-pod-full.json"
pod_json path-plain plain- e2e-path=yes >"$WORK/path-pod-plain.json"
# Every step's input in the server's cache: the SidecarSet, the workload, the spread and the budget.
path_cached() {
    local kind
    for kind in SidecarSet.apps.kruise.io CloneSet.apps.kruise.io WorkloadSpread.apps.kruise.io PodUnavailableBudget.policy.kruise.io; do
        cached "$PATH_METRICS" "$kind" || return 1
    done
}
wait_for 30 path_cached || fail pod-path-cached "the server did not cache the pod path's objects within 30 s"

mkdir -p "$WORK/latency"
# path_creates KEY COUNT: COUNT creates of the KEY pod, one at a time; their names go to
# WORK/path-KEY.names (replaced), their HTTP codes to WORK/path-codes.
path_creates() {
    local i
    : >"$WORK/path-$1.names"
    for i in $(seq "$2"); do
        curl -s -o "$WORK/path-created.json" -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
            -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
            --data-binary "@$WORK/path-pod-$1.json" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/path-$1/pods" >>"$WORK/path-codes"
        jq -r '.metadata.name // empty' "$WORK/path-created.json" >>"$WORK/path-$1.names"
    done
}
# path_evictions KEY: an eviction of each Pod just created, one at a time (made Running and Ready
# first, as a kubelet would report them, so that the budget counts them).
path_evictions() {
    local pod
    while read -r pod; do
        kc -n "path-$1" patch pod "$pod" --subresource=status --type=merge \
            -p '{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}' >/dev/null
    done <"$WORK/path-$1.names"
    apiserver_metrics >"$WORK/latency/evict-$1-$2-before.txt"
    while read -r pod; do
        curl -s -o /dev/null -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
            -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' -X POST \
            -d "{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"$pod\", \"namespace\": \"path-$1\"}}" \
            "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/path-$1/pods/$pod/eviction" >>"$WORK/path-codes"
    done <"$WORK/path-$1.names"
    apiserver_metrics >"$WORK/latency/evict-$1-$2-after.txt"
    [ "$1" = full ] || return 0
    # What Kruise's controllers would do once the Pods are gone: take them out of the statuses, which
    # would otherwise grow by a Pod per request from round to round.
    kc -n path-full patch podunavailablebudget web --subresource=status --type=merge -p '{"status": {"disruptedPods": null}}' >/dev/null
    kc -n path-full patch workloadspread web --subresource=status --type=merge -p '{"status": {"versionedSubsetStatuses": null}}' >/dev/null
}
: >"$WORK/path-codes"
for key in full plain; do path_creates "$key" 5; path_evictions "$key" 0; done # connections and caches warm
path_batch() { path_creates "$1" "$PATH_PODS"; }
latency_rounds "$PATH_ROUNDS" path_batch path_evictions -- full plain
codes=$(sort "$WORK/path-codes" | uniq -c | awk '{printf "%s×%s ", $1, $2}')
expected=$((2 * 2 * (5 + PATH_ROUNDS * PATH_PODS)))
answered=$(grep -cE '^20[01]$' "$WORK/path-codes" || true)
check pod-path-answered "$answered creates and evictions answered 201 ($codes)" "codes $codes, $answered of $expected were 201" \
    [ "$answered" = "$expected" ]

rounds=$(seq -s ' ' "$PATH_ROUNDS")
# shellcheck disable=SC2086
{
    for key in full plain; do
        latency_summary mpod.kb.io "$key" $rounds | jq -c --arg k "$key" '. + {key: "create, \($k)"}'
        latency_summary --validating vpod.kb.io "evict-$key" $rounds | jq -c --arg k "$key" '. + {key: "eviction, \($k)"}'
    done
    for r in $rounds; do
        for key in full plain; do
            latency_summary mpod.kb.io "$key" "$r" | jq -c --arg k "$key" --arg r "$r" '{round: $r, key: "create, \($k)", mean_ms}'
            latency_summary --validating vpod.kb.io "evict-$key" "$r" | jq -c --arg k "$key" --arg r "$r" '{round: $r, key: "eviction, \($k)", mean_ms}'
        done
    done
} >"$WORK/latency/pod-path.jsonl"
writes=$(curl -s "http://127.0.0.1:$PATH_METRICS/metrics" | awk '/^kruise_admission_status_writes_total\{/ {printf "%s ", $0}')
PATH_TABLE=$TARGET_DIR/e2e/pod-path.md
mkdir -p "$(dirname "$PATH_TABLE")"
"$PYTHON" - "$WORK/latency/pod-path.jsonl" <<'PY' | tee "$PATH_TABLE"
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
# The histogram's buckets are 5, 25, 100 ms, ...: the mean (its _sum over _count) is the figure, and the
# share of calls under each of the first two bounds says how they spread.
print("| request | calls | mean | ≤ 5 ms | ≤ 25 ms |")
print("|---|---:|---:|---:|---:|")
for h in (r for r in rows if "round" not in r):
    share = lambda le: f"{100 * h['buckets'].get(le, 0) / h['count']:.0f} %"
    print(f"| {h['key']} | {h['count']} | {h['mean_ms']} ms | {share('5ms')} | {share('25ms')} |")
per_round = {}
for r in (r for r in rows if "round" in r):
    per_round.setdefault(r["round"], {})[r["key"]] = r["mean_ms"]
ratios = {what: [m[f"{what}, full"] / m[f"{what}, plain"] for m in per_round.values()] for what in ("create", "eviction")}
print()
print("full / plain, medians of the per-round means' ratios: " + ", ".join(
    f"{what} {statistics.median(v):.2f} (rounds {', '.join(f'{x:.2f}' for x in v)})" for what, v in ratios.items()))
PY
echo "status writes: $writes" | tee -a "$PATH_TABLE"
echo "kube-apiserver $E2E_VERSION, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)" | tee -a "$PATH_TABLE"
counts=$(jq -r 'select(.round == null) | .count' "$WORK/latency/pod-path.jsonl" | sort -u)
check pod-path-measured "the API server's histogram holds every measured call ($counts per kind of request; table in $PATH_TABLE)" \
    "calls per kind: $(jq -r 'select(.round == null) | "\(.key)=\(.count)"' "$WORK/latency/pod-path.jsonl" | tr '\n' ' ')" \
    [ "$counts" = "$((PATH_ROUNDS * PATH_PODS))" ]

point_webhook mutatingwebhookconfiguration mpod.kb.io "https://localhost:$WEBHOOK_PORT/mutate-pod"
point_webhook validatingwebhookconfiguration vpod.kb.io "https://localhost:$WEBHOOK_PORT/validate-pod"
stop_pid "$PATH_PID"
