# shellcheck shell=bash
# MIGRATING §4 step 3 for PodUnavailableBudget and WorkloadSpread users (sourced by migration.sh once
# that section's template edit ran: kruise-manager with its default gates, its Pod entries out of its
# templates): Kruise's PUB and WorkloadSpread controllers keep reconciling, kruise-admission alone
# answers /mutate-pod and /validate-pod, and the two agree on the statuses (no fight over a minute of
# steady state). Needs migration.sh's helpers (kc, run_doc, has_entry, server_metric, REL_LOG).

# kruise-manager rebuilds its lists from the edited templates within seconds (MIGRATING §5).
wait_for 30 eval '! has_entry mutating kruise-mutating-webhook-configuration mpod.kb.io && ! has_entry validating kruise-validating-webhook-configuration vpod.kb.io' || true
if out=$(run_doc 'no vpod.kb.io, no vpodeviction.kb.io' 'rollout status' 2>&1) \
    && ! grep -qx 'mpod.kb.io\|vpod.kb.io\|vpodeviction.kb.io' <<<"$out" && has_entry validating kruise-admission vpod.kb.io; then
    pass migration-budget-entries "Kruise's configurations without its Pod entries ($(wc -l <<<"$out") entries), kruise-admission's with vpod.kb.io; kruise-manager runs with its default gates"
else
    fail migration-budget-entries "$out; ours: $(entries validating kruise-admission)"
fi
mkns mig-budget
# Kruise counts a budget's expected Pods from their workloads (bare Pods give 0, which allows
# everything): a CloneSet of 6, its Pods created by Kruise's CloneSet controller through our /mutate-pod.
kc -n mig-budget create -f - >/dev/null <<'YAML'
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: web}
spec:
  maxUnavailable: 2
  selector: {matchLabels: {app: budget}}
YAML
# A WorkloadSpread over a second CloneSet: at most 2 Pods in zone-a, the rest in zone-b.
kc -n mig-budget create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata: {name: spread}
spec:
  targetRef: {apiVersion: apps.kruise.io/v1alpha1, kind: CloneSet, name: spread}
  subsets:
  - {name: zone-a, maxReplicas: 2, tolerations: [{key: zone, operator: Equal, value: a, effect: NoSchedule}]}
  - {name: zone-b}
YAML
cached_kind() { [ "$(server_metric kruise_admission_cluster_objects "$1")" -ge 1 ]; }
wait_for 30 eval 'cached_kind PodUnavailableBudget && cached_kind WorkloadSpread' \
    || fail migration-budget-cached "kruise-admission did not cache the PUB and the WorkloadSpread within 30 s"
kc -n mig-budget create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: budget}
spec:
  replicas: 6
  selector: {matchLabels: {app: budget}}
  template:
    metadata: {labels: {app: budget}}
    spec: {containers: [{name: app, image: "nginx:1.25"}]}
YAML
kc -n mig-budget create -f - >/dev/null <<'YAML'
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: spread}
spec:
  replicas: 5
  selector: {matchLabels: {app: spread}}
  template:
    metadata: {labels: {app: spread}}
    spec: {containers: [{name: app, image: "nginx:1.25"}]}
YAML
budget_pods() { kc -n mig-budget get pods -l app=budget -o json; }
wait_for 60 eval '[ "$(budget_pods | jq ".items | length")" = 6 ]' || fail migration-budget-pods "Kruise's CloneSet controller did not create 6 Pods"
related=$(budget_pods | jq '[.items[] | select(.metadata.annotations["kruise.io/related-pub"] == "web")] | length')
check migration-budget-related "the CloneSet's 6 Pods were created naming their budget (kruise.io/related-pub, by kruise-admission's /mutate-pod)" \
    "$related of 6 Pods name the budget" [ "$related" = 6 ]
# As a kubelet would: Running and Ready.
for pod in $(budget_pods | jq -r '.items[].metadata.name'); do
    kc -n mig-budget patch pod "$pod" --subresource=status --type=merge \
        -p '{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}' >/dev/null
done
pub_status() { kc -n mig-budget get podunavailablebudget web -o json | jq -c '.status | {totalReplicas, desiredAvailable, currentAvailable, unavailableAllowed, disrupted: (.disruptedPods // {} | keys)}'; }
if wait_for 60 eval '[ "$(pub_status | jq -c "[.totalReplicas, .desiredAvailable, .currentAvailable, .unavailableAllowed]")" = "[6,4,6,2]" ]'; then
    pass migration-budget-controller "Kruise's PUB controller computed the budget of the 6 ready Pods: $(pub_status)"
else
    fail migration-budget-controller "status $(pub_status); $(grep -i podunavailablebudget "$WORK/logs/kruise-manager.log" | tail -2)"
fi
# Three evictions, one after the other: two within the budget, the third refused.
evict() {
    curl -s --cacert "$WORK/apiserver-tls/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
        -o "$WORK/evict-$1.json" -w '%{http_code}' -X POST "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/mig-budget/pods/$1/eviction" \
        -d "{\"apiVersion\": \"policy/v1\", \"kind\": \"Eviction\", \"metadata\": {\"name\": \"$1\", \"namespace\": \"mig-budget\"}}"
}
mapfile -t victims < <(budget_pods | jq -r '.items[].metadata.name' | head -3)
codes="$(evict "${victims[0]}") $(evict "${victims[1]}") $(evict "${victims[2]}")"
refusal=$(jq -r .message "$WORK/evict-${victims[2]}.json")
reviewed=$(server_reviews 0 "$REL_LOG" | jq -c 'select(.path == "/validate-pod" and (.object | startswith("mig-budget/")))' | wc -l)
check migration-budget-evictions "evictions answered $codes, the third: $refusal ($reviewed /validate-pod reviews by kruise-admission)" \
    "evictions answered $codes: $refusal; $reviewed reviews" \
    eval '[ "$codes" = "201 201 403" ] && grep -q "pub unavailable allowed is negative" <<<"$refusal" && [ "$reviewed" -ge 3 ]'
# The WorkloadSpread: kruise-admission placed the CloneSet's 5 Pods (2 in zone-a with its toleration,
# 3 in zone-b) and recorded them in creatingPods; Kruise's controller then counts the same Pods in the
# same subsets, empties creatingPods, and gives each subset's Pods its deletion cost (200 for zone-a,
# 100 for zone-b: the first subset is kept longest) without moving any Pod.
spread_pods() { kc -n mig-budget get pods -l app=spread -o json; }
wait_for 60 eval '[ "$(spread_pods | jq ".items | length")" = 5 ]' || fail migration-spread-pods "Kruise's CloneSet controller did not create 5 Pods"
placement() {
    spread_pods | jq -c '[.items[] | {subset: (.metadata.annotations["apps.kruise.io/matched-workloadspread"] // "{}" | fromjson | .subset // "none"),
        tolerated: any(.spec.tolerations[]?; .key == "zone"), cost: .metadata.annotations["controller.kubernetes.io/pod-deletion-cost"]}]
        | group_by(.subset) | map({key: .[0].subset, value: {pods: length, tolerated: map(select(.tolerated)) | length, cost: (map(.cost) | unique)}}) | from_entries'
}
placed=$(placement | jq -c 'map_values({pods, tolerated})')
check migration-spread-placed "kruise-admission placed the CloneSet's 5 Pods: $placed" "placement $placed" \
    [ "$placed" = '{"zone-a":{"pods":2,"tolerated":2},"zone-b":{"pods":3,"tolerated":0}}' ]
spread_status() {
    kc -n mig-budget get workloadspread spread -o json | jq -c '[.status.subsetStatuses[]? | {name, missingReplicas, replicas,
        creating: (.creatingPods // {} | length)}] + [{versionedCreating: ([.status.versionedSubsetStatuses // {} | .[][] | .creatingPods // {} | length] | add // 0)}]'
}
reconciled='[{"name":"zone-a","missingReplicas":0,"replicas":2,"creating":0},{"name":"zone-b","missingReplicas":-1,"replicas":3,"creating":0},{"versionedCreating":0}]'
costs='{"zone-a":["200"],"zone-b":["100"]}'
if wait_for 60 eval '[ "$(spread_status)" = "$reconciled" ] && [ "$(placement | jq -c "map_values(.cost)")" = "$costs" ]'; then
    pass migration-spread-controller "Kruise's WorkloadSpread controller counted the Pods where kruise-admission placed them: $(spread_status); deletion costs $costs"
else
    fail migration-spread-controller "status $(spread_status); placement $(placement); $(grep -i workloadspread "$WORK/logs/kruise-manager.log" | tail -2)"
fi
# The two evicted Pods are gone (unscheduled Pods are deleted at once) and the CloneSet's replacements
# are not ready (no kubelet here); Kruise's controller takes the evicted ones out of disruptedPods and
# recomputes. Then a minute of steady state: the status must not move.
settled='[6,4,4,0,[]]'
now_status() { pub_status | jq -c '[.totalReplicas, .desiredAvailable, .currentAvailable, .unavailableAllowed, .disrupted]'; }
# The same minute for the WorkloadSpread: its status, and the Pods' placement and deletion costs.
versions() { kc -n mig-budget get podunavailablebudget/web workloadspread/spread -o jsonpath='{.items[*].metadata.resourceVersion}'; }
if wait_for 60 eval '[ "$(now_status)" = "$settled" ]'; then
    rv=$(versions) spread_before="$(spread_status) $(placement)"
    changes=0 samples=()
    for _ in $(seq 12); do
        sleep 5
        samples+=("$(now_status) $(spread_status) $(placement)")
        [ "$(versions)" = "$rv" ] || changes=$((changes + 1))
    done
    moved=$(printf '%s\n' "${samples[@]}" | sort -u | wc -l)
    check migration-budget-steady "after the evictions Kruise's controllers settled the budget at $settled ([total, desired, current, allowed, disrupted]) and the WorkloadSpread as kruise-admission placed its Pods; both stayed there for 60 s (12 samples, resourceVersions unchanged in $((12 - changes)))" \
        "samples: $(printf '%s ' "${samples[@]}" | sort -u); before: $spread_before; resourceVersions changed in $changes of 12" \
        eval '[ "$moved" = 1 ] && [ "$changes" = 0 ] && [ "${samples[0]#* }" = "$spread_before" ]'
else
    fail migration-budget-steady "the budget did not settle at $settled within 60 s: $(pub_status)"
fi
if out=$(run_doc 'kubectl get podunavailablebudgets -A' 2>&1) && grep -q 'mig-budget' <<<"$out" \
    && grep -q '"missingReplicas": -1' <<<"$out"; then
    pass migration-budget-watch "the step's status commands ran as written: $(grep mig-budget <<<"$out" | head -2 | tr -s ' ' | paste -sd';'); $(grep -c '"name"' <<<"$out") WorkloadSpread names and subsets"
else
    fail migration-budget-watch "$out"
fi
# Deletes flow through kruise-admission too: with the budget at 0 a guarded Pod's DELETE is refused;
# a zone-b Pod of the WorkloadSpread's CloneSet is deleted, and the replacement Kruise's CloneSet
# controller creates is placed by kruise-admission in zone-b again (zone-a is full).
guarded=$(budget_pods | jq -r '[.items[] | select(.status.phase == "Running")][0].metadata.name')
if out=$(kc -n mig-budget delete pod "$guarded" --wait=false 2>&1); then
    fail migration-budget-delete "the DELETE of $guarded was allowed with the budget at 0: $out"
else
    check migration-budget-delete "the DELETE of a guarded Pod with the budget at 0 was refused: $out" "$out" \
        grep -q 'pub unavailable allowed is negative' <<<"$out"
fi
spread_victim=$(spread_pods | jq -r '[.items[] | select((.metadata.annotations["apps.kruise.io/matched-workloadspread"] // "" | fromjson? | .subset) == "zone-b")][0].metadata.name')
kc -n mig-budget delete pod "$spread_victim" --wait=false >/dev/null
replaced() { [ "$(placement | jq -c 'map_values(.pods)')" = '{"zone-a":2,"zone-b":3}' ] && ! spread_pods | jq -e --arg v "$spread_victim" 'any(.items[]; .metadata.name == $v)' >/dev/null; }
if wait_for 60 replaced; then
    pass migration-spread-delete "zone-b's $spread_victim deleted through kruise-admission; the CloneSet's replacement was placed in zone-b: $(placement | jq -c 'map_values(.pods)')"
else
    fail migration-spread-delete "after deleting $spread_victim: placement $(placement | jq -c 'map_values(.pods)')"
fi
