# shellcheck shell=bash
# Self-managed certificates against a caBundle that something else resets (sourced by run.sh while
# the suite's server runs): a wrong caBundle, stored with `kubectl patch`, is put back by the server
# within 2 s, measured as the time until a Pod CREATE through the API server gets its sidecar again
# (mpod is failurePolicy Ignore, so a Pod is stored either way: the sidecar says our server was
# reached). Then the chart's ValidatingAdmissionPolicy (certs.selfManaged.caBundleOnlyPolicy): the
# server's service account may change only caBundle in its webhook configurations, nothing else.

say "caBundle drift: a reset caBundle is repaired by the server's watch"
mkns e2e-drift
create_json "$(sidecarset e2e-drift e2e-drift e2e-drift-agent busybox:1.36)" >/dev/null
drift_pod=$(pod_json e2e-drift drift-1 e2e-sidecar=e2e-drift)
drift_injected() { dry_run_has "$drift_pod" '.spec.containers | any(.name == "e2e-drift-agent")'; }
wait_for 30 drift_injected || true
repairs() { curl -s "http://127.0.0.1:$METRICS_PORT/metrics" | awk '$1 == "kruise_admission_ca_bundle_repairs_total" {print $2}'; }
# wrong_ca_bundle KIND: every webhook of the configuration trusts the floor webhooks' CA instead.
wrong_ca_bundle() {
    local n
    n=$(kc get "$1" kruise-admission -o json | jq '.webhooks | length')
    kc patch "$1" kruise-admission --type=json -p "$(jq -nc --argjson n "$n" --arg ca "$(base64 -w0 <"$WORK/floor-tls/ca.crt")" \
        '[range($n) | {op: "replace", path: "/webhooks/\(.)/clientConfig/caBundle", value: $ca}]')" >/dev/null
}
# repaired_within SECONDS: after wrong_ca_bundle, a Pod CREATE is injected again within SECONDS;
# sets TOOK (seconds, from the patch's return to the first injected CREATE).
repaired_within() {
    local start deadline
    start=$(date +%s.%N)
    deadline=$(awk -v s="$start" -v d="$1" 'BEGIN {printf "%.3f", s + d + 3}')
    until drift_injected; do
        if awk -v n="$(date +%s.%N)" -v d="$deadline" 'BEGIN {exit !(n > d)}'; then
            TOOK=never
            return 1
        fi
        sleep 0.05
    done
    TOOK=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN {printf "%.2f", n - s}')
    awk -v t="$TOOK" -v d="$1" 'BEGIN {exit !(t <= d)}'
}
if drift_injected; then
    before=$(repairs)
    wrong_ca_bundle mutatingwebhookconfiguration
    if repaired_within 2; then
        pass ca-bundle-drift-repaired "kubectl patch set a wrong caBundle on every webhook of the mutating configuration; a Pod CREATE got its sidecar again ${TOOK} s later (kruise_admission_ca_bundle_repairs_total ${before:-?} -> $(repairs))"
    else
        fail ca-bundle-drift-repaired "after a wrong caBundle, Pod CREATEs got no sidecar for ${TOOK} s (over 2 s); caBundle now $(kc get mutatingwebhookconfiguration kruise-admission -o jsonpath='{.webhooks[0].clientConfig.caBundle}' | cut -c1-24)..., repairs $(repairs)"
    fi
else
    fail ca-bundle-drift-repaired "Pods in e2e-drift got no sidecar before the caBundle was touched"
fi

say "ValidatingAdmissionPolicy: the server's service account may change only caBundle"
sa() { kubectl --kubeconfig "$WORK/sa.kubeconfig" --request-timeout=20s "$@"; }
# sa_update KIND JQ [QUERY]: the service account reads the configuration and replaces it (PUT, as
# the server does, without kubectl's own annotations) with JQ applied.
sa_update() {
    sa get "$1" kruise-admission -o json | jq -c "$2" \
        | sa replace --raw "/apis/admissionregistration.k8s.io/v1/${1}s/kruise-admission${3:-}" -f - >/dev/null
}
policy=$(helm template kruise-admission "$ROOT/charts/kruise-admission" --namespace kruise-admission \
    --show-only templates/webhook-configuration-policy.yaml)
kc apply -f - <<<"$policy" >/dev/null
# The policy takes effect once the API server's policy informer has it; the probe is a dry run, so
# while it still passes it changes nothing.
wait_for 30 eval '! sa_update mutatingwebhookconfiguration ".webhooks[0].failurePolicy = \"Fail\"" "?dryRun=All"' || true
refused ca-bundle-policy-denies-failure-policy "ValidatingAdmissionPolicy 'kruise-admission-ca-bundle-only'" \
    sa_update mutatingwebhookconfiguration '.webhooks[0].failurePolicy = "Fail"'
refused ca-bundle-policy-denies-url "may change only clientConfig.caBundle" \
    sa_update validatingwebhookconfiguration '.webhooks[0].clientConfig = {url: "https://127.0.0.1:1/", caBundle: .webhooks[0].clientConfig.caBundle}'
refused ca-bundle-policy-denies-labels "not their metadata" \
    sa_update mutatingwebhookconfiguration '.metadata.labels["e2e-owned"] = "yes"'
allowed ca-bundle-policy-allows-admin "the same label change by the admin is allowed (the policy matches only the service account)" \
    kc label mutatingwebhookconfiguration kruise-admission e2e-owned=yes
floor_ca=$(base64 -w0 <"$WORK/floor-tls/ca.crt")
# A caBundle-only change by the service account passes, and the server's own repair of it (an update
# by the same account) passes too.
if sa_update mutatingwebhookconfiguration ".webhooks |= map(.clientConfig.caBundle = \"$floor_ca\")" 2>"$WORK/sa-update.err"; then
    if repaired_within 2; then
        pass ca-bundle-policy-allows-ca-bundle "the service account's caBundle-only UPDATE was allowed, and the server's repair through the policy made Pod CREATEs injected again ${TOOK} s later"
    else
        fail ca-bundle-policy-allows-ca-bundle "the caBundle-only UPDATE was allowed, but no repair within 2 s (${TOOK}): $(grep -i cabundle "$WORK/logs/kruise-admission.log" | tail -2)"
    fi
else
    fail ca-bundle-policy-allows-ca-bundle "the service account's caBundle-only UPDATE was refused: $(cat "$WORK/sa-update.err")"
fi
# Later steps (the rollout) rewrite the configurations as the admin; the policy stays, as it would in
# an install.
