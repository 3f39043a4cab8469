# shellcheck shell=bash
# MIGRATING §4 step 3 for PodUnavailableBudget users (sourced by migration.sh while kruise-manager runs
# with its default gates and its Pod entries are out of its templates): Kruise's PUB controller keeps
# computing the budget, kruise-admission alone answers /mutate-pod and /validate-pod, and the two
# agree on the status. Needs migration.sh's helpers (kc, run_doc, server_metric, REL_LOG).

say "MIGRATING §4 step 3, PodUnavailableBudget users: kruise-manager keeps its gates, kruise-admission checks evictions"
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
pub_cached() { [ "$(server_metric kruise_admission_cluster_objects 'PodUnavailableBudget')" -ge 1 ]; }
wait_for 30 pub_cached || fail migration-budget-cached "kruise-admission did not cache the PUB within 30 s"
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
# The two evicted Pods are gone (unscheduled Pods are deleted at once) and the CloneSet's replacements
# are not ready (no kubelet here); Kruise's controller takes the evicted ones out of disruptedPods and
# recomputes. Then a minute of steady state: the status must not move.
settled='[6,4,4,0,[]]'
now_status() { pub_status | jq -c '[.totalReplicas, .desiredAvailable, .currentAvailable, .unavailableAllowed, .disrupted]'; }
if wait_for 60 eval '[ "$(now_status)" = "$settled" ]'; then
    rv=$(kc -n mig-budget get podunavailablebudget web -o jsonpath='{.metadata.resourceVersion}')
    changes=0 samples=()
    for _ in $(seq 12); do
        sleep 5
        samples+=("$(now_status)")
        [ "$(kc -n mig-budget get podunavailablebudget web -o jsonpath='{.metadata.resourceVersion}')" = "$rv" ] || changes=$((changes + 1))
    done
    moved=$(printf '%s\n' "${samples[@]}" | sort -u | wc -l)
    check migration-budget-steady "after the evictions Kruise's controller settled the budget at $settled ([total, desired, current, allowed, disrupted]) and it stayed there for 60 s (12 samples, resourceVersion unchanged in $((12 - changes)))" \
        "samples: $(printf '%s ' "${samples[@]}" | sort -u); resourceVersion changed in $changes of 12" \
        eval '[ "$moved" = 1 ] && [ "$changes" = 0 ]'
else
    fail migration-budget-steady "the budget did not settle at $settled within 60 s: $(pub_status)"
fi
if out=$(run_doc 'kubectl get podunavailablebudgets -A' 2>&1) && grep -q 'mig-budget' <<<"$out"; then
    pass migration-budget-watch "the step's status commands ran as written: $(grep mig-budget <<<"$out" | head -2 | tr -s ' ' | paste -sd';')"
else
    fail migration-budget-watch "$out"
fi
