# shellcheck shell=bash
# Webhook latency as kube-apiserver sees it (issue 16 point 3; sourced by run.sh; the measurement
# itself is tests/e2e/latency_lib.sh, shared with benches/apiserver.sh). Three mutating
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
    # shellcheck source=tests/e2e/latency_lib.sh
    source "$E2E/latency_lib.sh"
    say "latency: $LATENCY_PODS pods per webhook, seen by kube-apiserver"
    ROUNDS=4
    PER_ROUND=$(((LATENCY_PODS + ROUNDS - 1) / ROUNDS))
    mkns e2e-lat-ours
    for floor in allow patch; do
        mkns "e2e-lat-$floor"
        kc label namespace "e2e-lat-$floor" "e2e-floor=$floor" >/dev/null
    done
    create_json "$(sidecarset e2e-lat e2e-lat-ours e2e-lat-agent busybox:1.36)" >/dev/null
    wait_for 30 dry_run_has "$(latency_pod e2e-lat-ours)" '.spec.containers | any(.name == "e2e-lat-agent")' || true

    if latency_our_patch e2e-lat-patch e2e-lat-ours "https://localhost:$WEBHOOK_PORT/mutate-pod" "$WORK/server-ca.crt" "$WORK/our-patch.json"; then
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
        body=$(latency_pod "$1")
        for _ in $(seq "$2"); do
            curl -s -o /dev/null -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
                -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
                --data-binary "$body" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/$1/pods"
        done
    }
    for w in ours allow patch; do create_pods "e2e-lat-$w" 5 >/dev/null; done # connections and caches warm
    codes=$WORK/latency/codes
    mkdir -p "$WORK/latency"
    : >"$codes"
    batch() { create_pods "e2e-lat-$1" "$PER_ROUND" >>"$codes"; }
    latency_rounds "$ROUNDS" batch -- ours allow patch
    created=$(grep -c '^201$' "$codes" || true)
    check latency-pods-created "$created pods created through the three webhooks" \
        "only $created of $((3 * ROUNDS * PER_ROUND)) creates returned 201: $(sort "$codes" | uniq -c | tr '\n' ' ')" \
        test "$created" -eq $((3 * ROUNDS * PER_ROUND))

    # The patch floor must produce our pod, or the comparison is not like with like.
    ours_pod=$(latency_stored_pod e2e-lat-ours)
    floor_pod=$(latency_stored_pod e2e-lat-patch)
    check latency-patch-floor-same-pod "the patch floor's pods equal ours (containers, volumes, labels, annotations but the timestamp)" \
        "the patch floor's pod differs from ours: $(diff <(echo "$ours_pod") <(echo "$floor_pod") | head -20 | tr '\n' ' ')" \
        test "$ours_pod" = "$floor_pod"

    rounds=$(seq -s ' ' "$ROUNDS")
    # shellcheck disable=SC2086
    {
        latency_summary mpod.kb.io ours $rounds
        latency_summary allow.e2e.kruise-admission.dev allow $rounds
        latency_summary patch.e2e.kruise-admission.dev patch $rounds
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
