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
for i in 1 2 3 4 5 6; do pod_json mig-budget "budget-$i" app=budget; done | jq -s '{apiVersion: "v1", kind: "List", items: .}' \
    | kc create -f - >/dev/null
for i in 1 2 3 4 5 6; do
    kc -n mig-budget patch pod "budget-$i" --subresource=status --type=merge \
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
codes="$(evict budget-1) $(evict budget-2) $(evict budget-3)"
refusal=$(jq -r .message "$WORK/evict-budget-3.json")
reviewed=$(server_reviews 0 "$REL_LOG" | jq -c 'select(.path == "/validate-pod" and (.object | startswith("mig-budget/")))' | wc -l)
check migration-budget-evictions "evictions answered $codes, the third: $refusal ($reviewed /validate-pod reviews by kruise-admission)" \
    "evictions answered $codes: $refusal; $reviewed reviews" \
    eval '[ "$codes" = "201 201 403" ] && grep -q "pub unavailable allowed is negative" <<<"$refusal" && [ "$reviewed" -ge 3 ]'
# The two evicted Pods are gone (unscheduled Pods are deleted at once); Kruise's controller takes them
# out of disruptedPods and recomputes. Then a minute of steady state: the status must not move.
settled='[4,2,4,2,[]]'
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
