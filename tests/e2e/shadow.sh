# shellcheck shell=bash
# Shadow mode (issue 19; sourced by run.sh last). The enforcing configurations are removed and the
# ones `kruise-admission manifests webhooks --shadow` prints are registered, pointed at a server
# started with --shadow (same Secret, self-managed certificates on the shadow configurations, with
# the RBAC of components/shadow).
# Through the API server's stored objects: nothing is changed or refused that the enforcing server
# changed or refused earlier in the suite, and the server counted and logged what it would have done.

say "shadow mode: manifests webhooks --shadow, serve --shadow"
SHADOW_PORT=$(free_port)
SHADOW_METRICS=$(free_port)
SHADOW_LOG=$WORK/logs/kruise-admission-shadow.log
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    kc delete "$kind" kruise-admission --ignore-not-found >/dev/null
done
# The RBAC of the base with components/shadow: self-managed certificates may now update the
# shadow configurations (and only those).
[ -d "$MANIFESTS/components/shadow" ] || die "no components/shadow in $MANIFESTS"
render "$(overlay shadow shadow)" | jq --argjson k "$RBAC_KINDS" '[.[] | select(.kind as $x | $k | index($x))]' >"$WORK/rbac-shadow.json"
echo "RBAC from the base + components/shadow: $(jq -c '.[] | select(.metadata.name == "kruise-admission:webhook-configurations" and .kind == "ClusterRole") | .rules[0].resourceNames' "$WORK/rbac-shadow.json")"
apply_json "$WORK/rbac-shadow.json"
"$BIN" manifests webhooks --shadow | yaml_to_json | jq --arg base "https://localhost:$SHADOW_PORT" '
    [.[] | .webhooks |= map(.clientConfig = {url: ($base + .clientConfig.service.path)})]' >"$WORK/webhooks-shadow.json"
jq -r '.[] | .kind as $k | .metadata.name as $n | .webhooks[] | "  \($k) \($n): \(.name) -> \(.clientConfig.url) (\(.failurePolicy), \(.timeoutSeconds)s)"' \
    "$WORK/webhooks-shadow.json"
apply_json "$WORK/webhooks-shadow.json"
EXTRA_SERVER_FLAGS=(--shadow --mutating-webhook-config-name kruise-admission-shadow --validating-webhook-config-name kruise-admission-shadow)
start_server shadow "$SHADOW_PORT" "$SHADOW_METRICS"
EXTRA_SERVER_FLAGS=()

shadow_ca_patched() {
    local ca
    ca=$(kc -n kruise-admission get secret kruise-admission-tls -o jsonpath='{.data.ca\.crt}') || return 1
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        kc get "$kind" kruise-admission-shadow -o json | jq -e --arg ca "$ca" '.webhooks | length > 0 and all(.clientConfig.caBundle == $ca)' >/dev/null || return 1
    done
}
if wait_for 90 server_ready "$SHADOW_METRICS" && wait_for 60 shadow_ca_patched; then
    ready=$(curl -s "http://127.0.0.1:$SHADOW_METRICS/readyz")
    warned=$(jq -c 'select(type == "object" and .level == "WARN" and (.message | test("SHADOW MODE.*NOTHING IS ENFORCED")))' "$SHADOW_LOG" 2>/dev/null | wc -l)
    check shadow-server-ready "ready ('$ready'), caBundle patched into both kruise-admission-shadow configurations, start-up WARN logged" \
        "readyz '$ready', WARN lines $warned" test "$ready" = "ok (shadow mode: nothing is enforced)" -a "$warned" -eq 1
else
    fail shadow-server-ready "not ready, or caBundle not in the shadow configurations: $(tail -3 "$SHADOW_LOG")"
fi

# shadow_decisions OBJECT: the server's "shadow decision" lines for OBJECT (namespace/name or name), one JSON per line.
shadow_decisions() {
    jq -c --arg o "$1" 'select(type == "object") | (.fields // .) | select(.message == "shadow decision" and .object == $o)' "$SHADOW_LOG" 2>/dev/null
}
# shadow_count WEBHOOK OUTCOME: the server's kruise_admission_shadow_decisions_total sample.
shadow_count() {
    curl -s "http://127.0.0.1:$SHADOW_METRICS/metrics" | grep '^kruise_admission_shadow_decisions_total{' \
        | grep -F "webhook=\"$1\"" | grep -F "outcome=\"$2\"" | awk '{print $2}'
}
# logged OBJECT WEBHOOK OUTCOME: a decision line for OBJECT from WEBHOOK with OUTCOME.
logged() { shadow_decisions "$1" | jq -e -s --arg w "$2" --arg out "$3" 'any(.[]; .webhook == $w and .outcome == $out)' >/dev/null; }

# A Pod the SidecarSet e2e-agent selects (the enforcing server injected web-1 and web-2 above).
if pod=$(create_json "$(pod_json e2e-inject shadow-1 e2e-sidecar=e2e-agent)" 2>&1) \
    && jq -e '[.spec.containers[].name] == ["app"] and (.metadata.annotations["kruise.io/sidecarset-hash"] == null)' <<<"$pod" >/dev/null \
    && wait_for 10 logged e2e-inject/shadow-1 mpod.kb.io would-patch; then
    patch=$(shadow_decisions e2e-inject/shadow-1 | jq -r 'select(.outcome == "would-patch") | .patch' | head -1)
    pass shadow-pod-not-injected "Pod e2e-inject/shadow-1 stored as created (containers [app], no hash annotation); logged would-patch: ${patch:0:160}"
else
    fail shadow-pod-not-injected "$(jq -c '{containers: [.spec.containers[]?.name], annotations: .metadata.annotations}' <<<"$pod" 2>/dev/null || echo "$pod"); decisions: $(shadow_decisions e2e-inject/shadow-1 | paste -sd' ')"
fi

# Re-invocation (IfNeeded): in e2e-reinvoke a later mutating webhook (zz-e2e-relabel, the Go floor)
# relabels every pod, so the API server calls the shadow's /mutate-pod again with the changed pod,
# as it would after kruise-manager's mutation.
if pod=$(create_json "$(pod_json e2e-reinvoke shadow-reinvoke-1 e2e-sidecar=e2e-reinvoke)" 2>&1) \
    && jq -e '[.spec.containers[].name] == ["app"] and .metadata.labels["e2e-relabeled"] == "yes"' <<<"$pod" >/dev/null \
    && wait_for 10 eval '[ "$(shadow_decisions e2e-reinvoke/shadow-reinvoke-1 | jq -s "map(select(.webhook == \"mpod.kb.io\")) | length")" = 2 ]'; then
    pass shadow-reinvoked "Pod e2e-reinvoke/shadow-reinvoke-1: two /mutate-pod shadow decisions ($(shadow_decisions e2e-reinvoke/shadow-reinvoke-1 | jq -r .outcome | paste -sd,)), the second after the relabelling webhook; stored with its label and without the sidecar"
else
    fail shadow-reinvoked "$(jq -c '{containers: [.spec.containers[]?.name], labels: .metadata.labels}' <<<"$pod" 2>/dev/null || echo "$pod"); decisions: $(shadow_decisions e2e-reinvoke/shadow-reinvoke-1 | paste -sd' ')"
fi

# A SidecarSet vsidecarset.kb.io refused earlier (container name Bad_Name): stored, undefaulted. (Its
# validation sees it without the defaults our mutating webhook would have added, so the would-be
# denial lists those fields too; next to kruise-manager, Kruise's defaulting comes first.)
if ss=$(create_json "$(sidecarset e2e-shadow-bad e2e-inject Bad_Name busybox:1.36)" 2>&1) \
    && jq -e '.spec.containers[0].name == "Bad_Name" and (.metadata.annotations["kruise.io/sidecarset-hash"] == null)' <<<"$ss" >/dev/null \
    && wait_for 10 logged e2e-shadow-bad vsidecarset.kb.io would-deny && logged e2e-shadow-bad msidecarset.kb.io would-patch; then
    reason=$(shadow_decisions e2e-shadow-bad | jq -r 'select(.outcome == "would-deny") | .reason' | head -1)
    pass shadow-sidecarset-stored "SidecarSet e2e-shadow-bad stored as sent (no defaults, no hash annotations); logged would-patch (defaulting) and would-deny: ${reason:0:160}"
else
    fail shadow-sidecarset-stored "$(jq -c '{containers: [.spec.containers[]?.name], annotations: .metadata.annotations}' <<<"$ss" 2>/dev/null || echo "$ss"); decisions: $(shadow_decisions e2e-shadow-bad | paste -sd' ')"
fi

# A delete-protected Namespace (refused as protect-namespace-always above): deleted.
mkns e2e-shadow-prot
kc label namespace e2e-shadow-prot policy.kruise.io/delete-protection=Always >/dev/null
# The API server names a Namespace's own namespace in its requests: the object is logged as ns/ns.
if out=$(kc delete namespace e2e-shadow-prot --wait=false 2>&1) && wait_for 10 logged e2e-shadow-prot/e2e-shadow-prot vnamespace.kb.io would-deny; then
    pass shadow-protected-namespace-deleted "Namespace e2e-shadow-prot (delete-protection=Always) deleted; logged would-deny: $(shadow_decisions e2e-shadow-prot/e2e-shadow-prot | jq -r .reason | head -1 | cut -c1-120)"
else
    fail shadow-protected-namespace-deleted "$out; decisions: $(shadow_decisions e2e-shadow-prot/e2e-shadow-prot | paste -sd' ')"
fi

# Two more refusals from above, now let through: a CloneSet change outside InPlaceOnly, a protected Deployment's delete.
if out=$(kc -n e2e-workloads patch cloneset web --type=json -o json \
    -p '[{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "SHADOW", "value": "1"}]}]' 2>&1) \
    && jq -e '.spec.template.spec.containers[0].env == [{"name": "SHADOW", "value": "1"}]' <<<"$out" >/dev/null \
    && wait_for 10 logged e2e-workloads/web vcloneset.kb.io would-deny; then
    pass shadow-cloneset-update-stored "CloneSet web: the env change InPlaceOnly refuses is stored; logged would-deny"
else
    fail shadow-cloneset-update-stored "$(tail -c 300 <<<"$out")"
fi
if out=$(kc -n e2e-workloads delete deployment keep-always --wait=false 2>&1) \
    && wait_for 10 logged e2e-workloads/keep-always vbuiltindeployment.kb.io would-deny; then
    pass shadow-protected-deployment-deleted "Deployment keep-always (delete-protection=Always) deleted; logged would-deny"
else
    fail shadow-protected-deployment-deleted "$out"
fi

# The metric counted each decision the log shows (and at least one of each checked above).
counted=""
counts_ok=true
for pair in mpod.kb.io/would-patch msidecarset.kb.io/would-patch vsidecarset.kb.io/would-deny vnamespace.kb.io/would-deny \
    vcloneset.kb.io/would-deny vbuiltindeployment.kb.io/would-deny; do
    webhook=${pair%/*} outcome=${pair#*/}
    metric=$(shadow_count "$webhook" "$outcome")
    lines=$(jq -c --arg w "$webhook" --arg out "$outcome" \
        'select(type == "object") | (.fields // .) | select(.message == "shadow decision" and .webhook == $w and .outcome == $out)' \
        "$SHADOW_LOG" 2>/dev/null | wc -l)
    counted="$counted $webhook{$outcome}=$metric/$lines"
    [ -n "$metric" ] && [ "$lines" -ge 1 ] && [ "${metric%.*}" -eq "$lines" ] || counts_ok=false
done
mode=$(curl -s "http://127.0.0.1:$SHADOW_METRICS/metrics" | awk '$1 == "kruise_admission_shadow_mode" {print $2}')
check shadow-metric-counted "kruise_admission_shadow_decisions_total (metric/log lines):$counted; kruise_admission_shadow_mode $mode" \
    "metric/log lines:$counted; kruise_admission_shadow_mode $mode" eval '$counts_ok && [ "$mode" = 1 ]'

# Live agreement (issue 19, points 2 and 4). A second mutating webhook stands in for kruise-manager:
# the Go floor answering a fixed JSON Patch, registered as kruise-mutating-e2e-* (after
# kruise-admission-shadow in name order, so the shadow decides the Pod as created, then is
# re-invoked). Its patch is what the enforcing server answers for that Pod (`dry-run` over the
# cluster's SidecarSet e2e-agent and Namespace), i.e. the Pod as kruise-manager would have stored
# it; a second floor answers the same patch with an older sidecar image.
say "shadow mode: live agreement with the stored Pods"
agree_dir=$WORK/agreement-cluster
mkdir -p "$agree_dir"
kc get sidecarset e2e-agent -o json >"$agree_dir/sidecarset.json"
kc get namespace e2e-inject -o json >"$agree_dir/namespace.json"
pod_json e2e-inject kruise-like e2e-sidecar=e2e-agent >"$WORK/agreement-pod.json"
"$BIN" dry-run --cluster-dir "$agree_dir" --output review "$WORK/agreement-pod.json" \
    | jq -r 'select(.response.patch != null) | .response.patch' | head -1 | base64 -d >"$WORK/kruise-like.json" || true
jq -c '[.[] | if .path == "/spec/containers/0" then .value.image = "busybox:1.36" else . end]' "$WORK/kruise-like.json" \
    >"$WORK/kruise-older.json" 2>/dev/null || true
echo "kruise-like patch: $(jq -c '[.[] | "\(.op) \(.path)"]' "$WORK/kruise-like.json" 2>/dev/null)"
register_object_floor() { # register_object_floor CONFIG-NAME PORT LABEL-VALUE: pods labelled e2e-kruise-like=VALUE
    jq -n --arg name "$1" --arg url "https://localhost:$2/" --arg sel "$3" \
        --arg ca "$(base64 -w0 <"$WORK/floor-tls/ca.crt")" '{
        apiVersion: "admissionregistration.k8s.io/v1", kind: "MutatingWebhookConfiguration", metadata: {name: $name},
        webhooks: [{name: ($sel + ".kruise-like.e2e.kruise-admission.dev"), admissionReviewVersions: ["v1", "v1beta1"],
            clientConfig: {url: $url, caBundle: $ca}, failurePolicy: "Fail", matchPolicy: "Equivalent",
            objectSelector: {matchLabels: {"e2e-kruise-like": $sel}}, reinvocationPolicy: "Never",
            rules: [{apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"], scope: "*"}],
            sideEffects: "None", timeoutSeconds: 2}]}' | kc apply -f - >/dev/null
}
# agreement SIDECARSET RESULT: the server's kruise_admission_shadow_agreement_total sample (0 when absent).
agreement() {
    curl -s "http://127.0.0.1:$SHADOW_METRICS/metrics" | grep '^kruise_admission_shadow_agreement_total{' \
        | grep -F "sidecarset=\"$1\"" | grep -F "result=\"$2\"" | awk '{print $2} END {if (NR == 0) print 0}'
}
disagreements() { # disagreements POD: the server's "shadow disagreement" lines for POD (namespace/name)
    jq -c --arg p "$1" 'select(type == "object") | (.fields // .) | select(.message == "shadow disagreement" and .pod == $p)' "$SHADOW_LOG" 2>/dev/null
}
if [ -s "$WORK/kruise-like.json" ] && ! cmp -s "$WORK/kruise-like.json" "$WORK/kruise-older.json"; then
    start_floor kruise-like patch "$WORK/kruise-like.json"
    register_object_floor kruise-mutating-e2e-same "$FLOOR_PORT" same
    start_floor kruise-older patch "$WORK/kruise-older.json"
    register_object_floor kruise-mutating-e2e-older "$FLOOR_PORT" older
    same=$(pod_json e2e-inject agree-1 e2e-sidecar=e2e-agent e2e-kruise-like=same)
    older=$(pod_json e2e-inject disagree-1 e2e-sidecar=e2e-agent e2e-kruise-like=older)
    wait_for 30 dry_run_has "$same" '.spec.containers | any(.name == "e2e-agent")' || true
    wait_for 30 dry_run_has "$older" '.spec.containers | any(.image == "busybox:1.36")' || true
    agree0=$(agreement e2e-agent agree) disagree0=$(agreement e2e-agent disagree)
    if stored_same=$(create_json "$same" 2>&1) && stored_older=$(create_json "$older" 2>&1) \
        && wait_for 20 eval '[ "$(agreement e2e-agent agree)" = $((${agree0%.*} + 1)) ] && [ "$(agreement e2e-agent disagree)" = $((${disagree0%.*} + 1)) ]' \
        && wait_for 10 eval '[ -n "$(disagreements e2e-inject/disagree-1)" ]'; then
        line=$(disagreements e2e-inject/disagree-1 | head -1)
        check shadow-agreement-live \
            "agree-1 (stored as kruise-manager would: $(jq -c '[.spec.containers[] | "\(.name) \(.image)"]' <<<"$stored_same")) counted agree, disagree-1 ($(jq -c '[.spec.containers[] | "\(.name) \(.image)"]' <<<"$stored_older")) disagree: $(jq -c '{sidecarset, diffs, diff}' <<<"$line"); no disagreement logged for agree-1" \
            "line: $line; agree-1 lines: $(disagreements e2e-inject/agree-1 | wc -l)" \
            eval '[ "$(jq -r .diff <<<"$line")" = "spec.containers[e2e-agent].image: \"busybox:1.37\" -> \"busybox:1.36\"" ] && [ "$(jq -r .diffs <<<"$line")" = 1 ] && [ -z "$(disagreements e2e-inject/agree-1)" ]'
    else
        fail shadow-agreement-live "agree e2e-agent $agree0 -> $(agreement e2e-agent agree), disagree $disagree0 -> $(agreement e2e-agent disagree); same: $(tail -c 300 <<<"${stored_same:-}"); older: $(tail -c 300 <<<"${stored_older:-}"); lines: $(disagreements e2e-inject/disagree-1 | paste -sd' ')"
    fi
else
    fail shadow-agreement-live "no kruise-like patch from dry-run: $(head -c 300 "$WORK/kruise-like.json" 2>/dev/null)"
fi
