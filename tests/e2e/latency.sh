# shellcheck shell=bash
# Webhook latency as kube-apiserver sees it (issue 16 point 3; sourced by run.sh). Three mutating
# webhooks, each registered for its own namespace, get the same pods in the same run:
#   ours   kruise-admission's /mutate-pod injecting one SidecarSet (namespace e2e-lat-ours)
#   allow  the Go floor answering allowed (e2e-lat-allow)
#   patch  the Go floor answering every pod with the exact patch ours produced for that pod
#          (e2e-lat-patch): the API server applies the same patch, so this is the floor for
#          injecting the same sidecar
# Pods are created one at a time with curl (admin token), in rounds that alternate the three so a
# change in machine load hits all of them alike. The numbers are the API server's own histogram
# apiserver_admission_webhook_admission_duration_seconds (call + patch application), differenced
# around each batch; /mutate-pod is also called (no patch) for the floor namespaces, which is why
# only the batches of its own namespace count for it.

if [ "$LATENCY_PODS" -gt 0 ]; then
    say "latency: $LATENCY_PODS pods per webhook, seen by kube-apiserver"
    ROUNDS=4
    PER_ROUND=$(((LATENCY_PODS + ROUNDS - 1) / ROUNDS))
    mkns e2e-lat-ours
    for floor in allow patch; do
        mkns "e2e-lat-$floor"
        kc label namespace "e2e-lat-$floor" "e2e-floor=$floor" >/dev/null
    done
    create_json "$(sidecarset e2e-lat e2e-lat-ours e2e-lat-agent busybox:1.36)" >/dev/null
    wait_for 30 dry_run_has "$(pod_json e2e-lat-ours lat- e2e-sidecar=e2e-lat)" '.spec.containers | any(.name == "e2e-lat-agent")' || true

    # Our patch for this pod, asked of the server directly with the object the API server sends:
    # the pod after defaulting and the built-in admission plugins (a server-side dry run in a
    # namespace where nothing patches), before name generation and the fields set at storage.
    admitted=$(kc create --dry-run=server -o json -f - <<<"$(pod_json e2e-lat-patch lat- e2e-sidecar=e2e-lat)" \
        | jq -c '.metadata.namespace = "e2e-lat-ours" | del(.metadata.name, .metadata.uid, .metadata.creationTimestamp, .metadata.resourceVersion) | .status = {}')
    jq -n --argjson o "$admitted" '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {
        uid: "e2e-latency-patch", kind: {group: "", version: "v1", kind: "Pod"},
        resource: {group: "", version: "v1", resource: "pods"}, requestKind: {group: "", version: "v1", kind: "Pod"},
        requestResource: {group: "", version: "v1", resource: "pods"}, namespace: "e2e-lat-ours", operation: "CREATE",
        userInfo: {username: "e2e-admin", groups: ["system:masters", "system:authenticated"]},
        object: $o, oldObject: null, dryRun: false,
        options: {apiVersion: "meta.k8s.io/v1", kind: "CreateOptions"}}}' >"$WORK/latency-review.json"
    curl -sf --cacert "$WORK/server-ca.crt" -H 'Content-Type: application/json' --data-binary @"$WORK/latency-review.json" \
        "https://localhost:$WEBHOOK_PORT/mutate-pod?timeout=2s" | jq -r '.response.patch // ""' | base64 -d >"$WORK/our-patch.json"
    if jq -e 'length > 0' "$WORK/our-patch.json" >/dev/null 2>&1; then
        pass latency-our-patch "our patch for the latency pod, asked directly: $(jq length "$WORK/our-patch.json") operations, $(wc -c <"$WORK/our-patch.json") bytes"
    else
        fail latency-our-patch "no patch from /mutate-pod for the latency pod; the patch floor answers an empty patch"
        echo '[]' >"$WORK/our-patch.json"
    fi

    start_floor allow allow
    register_floor e2e-floor-allow "$FLOOR_PORT" allow
    start_floor patch patch "$WORK/our-patch.json"
    register_floor e2e-floor-patch "$FLOOR_PORT" patch

    # create_pods NAMESPACE COUNT: one pod at a time through the API server; prints the status codes.
    create_pods() {
        local body
        body=$(pod_json "$1" lat- e2e-sidecar=e2e-lat)
        for _ in $(seq "$2"); do
            curl -s -o /dev/null -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
                -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
                --data-binary "$body" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$1/pods"
        done
    }
    mkdir -p "$WORK/latency"
    for w in ours allow patch; do create_pods "e2e-lat-$w" 5 >/dev/null; done # connections and caches warm
    codes=$WORK/latency/codes
    : >"$codes"
    for r in $(seq "$ROUNDS"); do
        for w in ours allow patch; do
            apiserver_metrics >"$WORK/latency/$w-$r-before.txt"
            create_pods "e2e-lat-$w" "$PER_ROUND" >>"$codes"
            apiserver_metrics >"$WORK/latency/$w-$r-after.txt"
        done
    done
    created=$(grep -c '^201$' "$codes" || true)
    check latency-pods-created "$created pods created through the three webhooks" \
        "only $created of $((3 * ROUNDS * PER_ROUND)) creates returned 201: $(sort "$codes" | uniq -c | tr '\n' ' ')" \
        test "$created" -eq $((3 * ROUNDS * PER_ROUND))

    # The patch floor must produce our pod, or the comparison is not like with like.
    same_pod() {
        jq -S '{c: .spec.containers, v: .spec.volumes, l: .metadata.labels,
                a: (.metadata.annotations | with_entries(if (.key | startswith("kruise.io/sidecarset-hash"))
                    then .value |= (fromjson | map_values(del(.updateTimestamp))) else . end))}'
    }
    ours_pod=$(kc -n e2e-lat-ours get pods -o json | jq '.items[-1]' | same_pod)
    floor_pod=$(kc -n e2e-lat-patch get pods -o json | jq '.items[-1]' | same_pod)
    check latency-patch-floor-same-pod "the patch floor's pods equal ours (containers, volumes, labels, annotations but the timestamp)" \
        "the patch floor's pod differs from ours: $(diff <(echo "$ours_pod") <(echo "$floor_pod") | head -20 | tr '\n' ' ')" \
        test "$ours_pod" = "$floor_pod"

    pairs() { for r in $(seq "$ROUNDS"); do printf '%s %s ' "$WORK/latency/$1-$r-before.txt" "$WORK/latency/$1-$r-after.txt"; done; }
    # shellcheck disable=SC2046
    {
        "$PYTHON" "$E2E/webhook_latency.py" mpod.kb.io $(pairs ours)
        "$PYTHON" "$E2E/webhook_latency.py" allow.e2e.kruise-admission.dev $(pairs allow)
        "$PYTHON" "$E2E/webhook_latency.py" patch.e2e.kruise-admission.dev $(pairs patch)
    } >"$WORK/latency/summary.jsonl"
    LATENCY_TABLE=$TARGET_DIR/e2e/latency.md
    {
        echo "| webhook | calls | mean | p50 | p90 | p99 | calls per bucket (le) |"
        echo "|---|---|---|---|---|---|---|"
        jq -r '"| \(.webhook) | \(.count) | \(.mean_ms) ms | \(.p50_ms) ms | \(.p90_ms) ms | \(.p99_ms) ms | \((.buckets // {}) | to_entries | map("\(.key): \(.value)") | join(", ")) |"' \
            "$WORK/latency/summary.jsonl"
        echo
        echo "kube-apiserver $E2E_VERSION (Go modules, $(go env GOVERSION)), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
    } | tee "$LATENCY_TABLE"
    counts=$(jq -r .count "$WORK/latency/summary.jsonl" | sort -u)
    check latency-measured "each webhook observed $counts calls in the API server's histogram (table in $LATENCY_TABLE)" \
        "calls per webhook: $(jq -r '"\(.webhook)=\(.count)"' "$WORK/latency/summary.jsonl" | tr '\n' ' ')" \
        test "$counts" = "$((ROUNDS * PER_ROUND))"
    # The floors stay registered only for their namespaces; nothing else calls them.
fi
