# shellcheck shell=bash
# PodUnavailableBudget and WorkloadSpread accounting across two replicas of ours behind one URL
# (sourced by run.sh).
#
# Kruise's PodUnavailableBudget and WorkloadSpread CRDs (install_budget_crds) are installed, and two more replicas of ours start (live mode, the same Secret), behind an HTTPS
# round-robin that alternates per request (round_robin.py, with the replicas' certificate);
# `mpod.kb.io` and `vpod.kb.io` are pointed at it. Then 100 Running
# and Ready Pods guarded by one PUB with maxUnavailable 10, and 200 requests at once: an eviction
# and a DELETE of each Pod (budget_storm.py). What must hold: exactly 10 Pods go, never more; the
# PUB ends with 10 disruptedPods and unavailableAllowed 0; every refused request says why; both
# replicas decided some and hit conflicts they resolved by reading again.
# The PUB's status is written here as Kruise's PUB controller computes it for 100 ready Pods
# (kruise-manager itself is not running in this cluster; migration.sh runs it).
# Then a WorkloadSpread over a CloneSet (subsets of at most 20 and 30 Pods, and one without a limit)
# and 100 Pods of that CloneSet created at once (create_storm.py): no subset overfilled, and the
# WorkloadSpread's creatingPods hold each Pod of a limited subset once, in its subset.

say "pod budgets: two replicas behind one round-robin address, 200 evictions and deletes"
install_budget_crds

BUDGET_PORTS=() BUDGET_METRICS=() BUDGET_PIDS=()
for replica in a b; do
    port=$(free_port) metrics=$(free_port)
    start_server "budget-$replica" "$port" "$metrics"
    BUDGET_PORTS+=("$port") BUDGET_METRICS+=("$metrics") BUDGET_PIDS+=("$SERVER_PID")
done
for metrics in "${BUDGET_METRICS[@]}"; do
    wait_for 90 server_ready "$metrics" || die "a budget replica is not ready: $(curl -s "http://127.0.0.1:$metrics/readyz")"
done
RR_PORT=$(free_port)
mkdir -p "$WORK/round-robin"
for file in tls.crt tls.key ca.crt; do
    kc -n kruise-admission get secret kruise-admission-tls -o jsonpath="{.data.${file//./\\.}}" | base64 -d >"$WORK/round-robin/$file"
done
spawn "$WORK/logs/round-robin.log" "$PYTHON" "$E2E/round_robin.py" "$RR_PORT" \
    "$WORK/round-robin/tls.crt" "$WORK/round-robin/tls.key" "$WORK/round-robin/ca.crt" "${BUDGET_PORTS[@]}"
RR_PID=$SPAWNED
wait_for 10 eval "(: </dev/tcp/127.0.0.1/$RR_PORT) 2>/dev/null" || die "the round-robin did not start"

point_webhook mutatingwebhookconfiguration mpod.kb.io "https://localhost:$RR_PORT/mutate-pod"
point_webhook validatingwebhookconfiguration vpod.kb.io "https://localhost:$RR_PORT/validate-pod"

mkns budgets
kc -n budgets create -f - >/dev/null <<'YAML'
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: web}
spec:
  maxUnavailable: 10
  selector: {matchLabels: {app: budget-web}}
YAML
# What Kruise's PUB controller computes for 100 Running and Ready Pods and maxUnavailable 10.
kc -n budgets patch podunavailablebudget web --subresource=status --type=merge -p '{"status": {
    "observedGeneration": 1, "totalReplicas": 100, "desiredAvailable": 90, "currentAvailable": 100,
    "unavailableAllowed": 10}}' >/dev/null
# The replicas must have the PUB before its Pods are created: /mutate-pod names it in each Pod.
pub_cached() {
    local metrics
    for metrics in "${BUDGET_METRICS[@]}"; do
        cached "$metrics" PodUnavailableBudget.policy.kruise.io || return 1
    done
}
wait_for 30 pub_cached || fail budget-pub-cached "the replicas did not cache the PUB within 30 s"
for i in $(seq -w 1 100); do pod_json budgets "web-$i" app=budget-web; done | jq -s '{apiVersion: "v1", kind: "List", items: .}' \
    | kc create -f - >/dev/null
annotated=$(kc -n budgets get pods -o json | jq '[.items[] | select(.metadata.annotations["kruise.io/related-pub"] == "web")] | length')
check budget-related-pub "all 100 Pods created with kruise.io/related-pub: web" "$annotated of 100 Pods name the PUB" \
    [ "$annotated" = 100 ]
# A kubelet would report them Running and Ready.
kc -n budgets get pods -o name | xargs -P 4 -I{} kubectl --kubeconfig "$WORK/admin.kubeconfig" -n budgets patch {} \
    --subresource=status --type=merge -p '{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}' >/dev/null
pods_ready() {
    local metrics
    [ "$(kc -n budgets get pods -o json | jq '[.items[] | select(.status.phase == "Running")] | length')" = 100 ]
}
wait_for 30 pods_ready || die "the Pods' Running status was not stored"

kc -n budgets get pods -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' >"$WORK/budget-pods.txt"
"$PYTHON" "$E2E/budget_storm.py" "https://127.0.0.1:$APISERVER_PORT" "$ADMIN_TOKEN" "$WORK/apiserver-tls/ca.crt" \
    budgets "$WORK/budget-pods.txt" "$WORK/budget-storm.json"
remaining=$(kc -n budgets get pods -o json | jq '[.items[] | select(.metadata.deletionTimestamp == null)] | length')
gone=$(jq '[.[] | select(.status == 200 or .status == 201) | .pod] | unique | length' "$WORK/budget-storm.json")
statuses=$(jq -c 'group_by(.status) | map({(.[0].status | tostring): length}) | add' "$WORK/budget-storm.json")
check budget-exact "exactly 10 of 100 Pods went (evicted or deleted), 90 remain; answers by HTTP status $statuses" \
    "$gone Pods had a request admitted and $remaining remain; answers by HTTP status $statuses" \
    eval '[ "$gone" = 10 ] && [ "$remaining" = 90 ]'
# A request for a Pod another request already removed: the API server's 404, or (an eviction whose
# Pod the webhook no longer finds) Kruise's 400 naming the Pod.
unexplained=$(jq -c '[.[] | select(.status != 200 and .status != 201)
    | select((.status == 404) or (.status == 400 and (.message | test("pods \\\"[^\\\"]+\\\" not found")))
        or (.status == 403 and (.message | test("podunavailablebudget|PodUnavailableBudget"))) | not)]
    | .[:3]' "$WORK/budget-storm.json")
check budget-refusals-say-why "every refused request names the PodUnavailableBudget, or the Pod already gone" \
    "refusals without a reason: $unexplained" [ "$unexplained" = "[]" ]
pub=$(kc -n budgets get podunavailablebudget web -o json)
disrupted=$(jq '.status.disruptedPods // {} | length' <<<"$pub")
allowed=$(jq '.status.unavailableAllowed' <<<"$pub")
recorded_gone=$(jq -r '.status.disruptedPods // {} | keys[]' <<<"$pub" | sort | comm -12 - <(jq -r '[.[] | select(.status == 200 or .status == 201) | .pod] | unique[]' "$WORK/budget-storm.json" | sort) | wc -l)
check budget-status "the PUB records the 10 Pods that went in disruptedPods, unavailableAllowed 0" \
    "disruptedPods $disrupted (of which $recorded_gone went), unavailableAllowed $allowed" \
    eval '[ "$disrupted" = 10 ] && [ "$recorded_gone" = 10 ] && [ "$allowed" = 0 ]'
# Both replicas decided, and together wrote the budget exactly 10 times: the one that lost a race read
# the budget again and decided again (conflicts), never writing past it.
per_replica=() written=0 conflicts=0 deciders=0
for i in "${!BUDGET_METRICS[@]}"; do
    metrics=$(curl -s "http://127.0.0.1:${BUDGET_METRICS[$i]}/metrics")
    w=$(awk '/^kruise_admission_status_writes_total\{kind="PodUnavailableBudget",result="written"\}/ {print $2}' <<<"$metrics")
    c=$(awk '/^kruise_admission_status_writes_total\{kind="PodUnavailableBudget",result="conflict"\}/ {print $2}' <<<"$metrics")
    d=$(awk '/^kruise_admission_webhook_request_total\{.*name="vpod.kb.io"/ {n += $2} END {print n + 0}' <<<"$metrics")
    per_replica+=("replica $i: ${d} reviews, ${w:-0} written, ${c:-0} conflicts")
    written=$((written + ${w:-0})) conflicts=$((conflicts + ${c:-0}))
    [ "$d" -gt 0 ] && deciders=$((deciders + 1))
done
check budget-two-replicas "both replicas decided; 10 budget writes in all, conflicts resolved by reading again ($(IFS=';'; echo "${per_replica[*]}"))" \
    "$(IFS=';'; echo "${per_replica[*]}")" eval '[ "$deciders" = 2 ] && [ "$written" = 10 ] && [ "$conflicts" -gt 0 ]'

# --- WorkloadSpread: 100 creates at once, subsets with maxReplicas --------------------------------
say "workload spread: 100 Pods of one CloneSet created at once through both replicas"
kc -n budgets create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: spread}
spec:
  replicas: 100
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec: {containers: [{name: app, image: "nginx:1.25"}]}
---
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata: {name: spread}
spec:
  targetRef: {apiVersion: apps.kruise.io/v1alpha1, kind: CloneSet, name: spread}
  subsets:
  - {name: zone-a, maxReplicas: 20, tolerations: [{key: zone, operator: Equal, value: a, effect: NoSchedule}]}
  - {name: zone-b, maxReplicas: 30}
  - {name: zone-c}
YAML
spread_cached() {
    local metrics
    for metrics in "${BUDGET_METRICS[@]}"; do
        cached "$metrics" WorkloadSpread.apps.kruise.io && cached "$metrics" CloneSet.apps.kruise.io || return 1
    done
}
wait_for 30 spread_cached || fail spread-cached "the replicas did not cache the WorkloadSpread and its CloneSet within 30 s"
uid=$(kc -n budgets get cloneset spread -o jsonpath='{.metadata.uid}')
jq -nc --arg uid "$uid" '{apiVersion: "v1", kind: "Pod",
    metadata: {generateName: "spread-", labels: {app: "spread"},
        ownerReferences: [{apiVersion: "apps.kruise.io/v1alpha1", kind: "CloneSet", name: "spread", uid: $uid, controller: true}]},
    spec: {containers: [{name: "app", image: "nginx:1.25"}]}}' >"$WORK/spread-pod.json"
"$PYTHON" "$E2E/create_storm.py" "https://127.0.0.1:$APISERVER_PORT" "$ADMIN_TOKEN" "$WORK/apiserver-tls/ca.crt" \
    budgets "$WORK/spread-pod.json" 100 "$WORK/spread-storm.json"
per_subset=$(jq -c '[.[] | select(.status == 201) | (.annotations["apps.kruise.io/matched-workloadspread"] // "{}" | fromjson? // {}) | .subset // "none"]
    | group_by(.) | map({(.[0]): length}) | add' "$WORK/spread-storm.json")
created=$(jq '[.[] | select(.status == 201)] | length' "$WORK/spread-storm.json")
failed=$(jq -c '[.[] | select(.status != 201) | .message] | .[:3]' "$WORK/spread-storm.json")
check spread-no-overfill "all 100 Pods created and spread without overfilling a subset: $per_subset (zone-a at most 20, zone-b at most 30)" \
    "$created of 100 created ($failed); per subset $per_subset" \
    eval '[ "$created" = 100 ] && [ "$(jq ".\"zone-a\" // 0" <<<"$per_subset")" -le 20 ] && [ "$(jq ".\"zone-b\" // 0" <<<"$per_subset")" -le 30 ] &&
        [ "$(jq "[.[]] | add" <<<"$per_subset")" = 100 ] && [ "$(jq ".none // 0" <<<"$per_subset")" = 0 ]'
# The WorkloadSpread's status records each Pod once, in the subset it went to (Kruise v1.9 keeps the
# subsets' statuses under versionedSubsetStatuses, here "versionIgnored" for a CloneSet).
recorded=$(kc -n budgets get workloadspread spread -o json | jq -c '[(.status.versionedSubsetStatuses // {} | .[]), (.status.subsetStatuses // [])
    | .[] | {(.name): (.creatingPods // {} | length)}] | add')
# A subset without maxReplicas is not recorded (Kruise writes nothing for it).
expected=$(jq -c '. + {"zone-c": 0}' <<<"$per_subset")
check spread-status "the WorkloadSpread's creatingPods match the Pods of the limited subsets, none for zone-c: $recorded" \
    "creatingPods per subset $recorded, expected $expected" \
    eval '[ "$(jq -S . <<<"$recorded")" = "$(jq -S . <<<"$expected")" ]'

point_webhook mutatingwebhookconfiguration mpod.kb.io "https://localhost:$WEBHOOK_PORT/mutate-pod"
point_webhook validatingwebhookconfiguration vpod.kb.io "https://localhost:$WEBHOOK_PORT/validate-pod"
stop_pid "$RR_PID"
for pid in "${BUDGET_PIDS[@]}"; do stop_pid "$pid"; done
