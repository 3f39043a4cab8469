# shellcheck shell=bash
# Webhook latency as kube-apiserver measures it, shared by the suite's latency check
# (tests/e2e/latency.sh) and benches/apiserver.sh; sourced after lib.sh (kc, apiserver_metrics,
# pod_json), with WORK, PYTHON and E2E set. The numbers are the API server's own histogram
# apiserver_admission_webhook_admission_duration_seconds (the call and applying its patch),
# differenced around each batch by webhook_latency.py.

# latency_pod NS: the pod every latency batch creates (generateName lat-, the label the latency
# SidecarSet e2e-lat selects).
latency_pod() { pod_json "$1" lat- e2e-sidecar=e2e-lat; }

# latency_our_patch PLAIN-NS OURS-NS URL CA-FILE OUT: the patch /mutate-pod at URL gives the latency
# pod of OURS-NS, asked directly with the object the API server sends: the pod after defaulting and
# the built-in admission plugins (a server-side dry run in PLAIN-NS, where nothing patches), before
# name generation and the fields set at storage. Writes the patch (JSON) to OUT; false when empty.
latency_our_patch() {
    local plain=$1 ours=$2 url=$3 ca=$4 out=$5 admitted
    admitted=$(kc create --dry-run=server -o json -f - <<<"$(latency_pod "$plain")" \
        | jq -c --arg ns "$ours" '.metadata.namespace = $ns | del(.metadata.name, .metadata.uid, .metadata.creationTimestamp, .metadata.resourceVersion) | .status = {}')
    jq -n --argjson o "$admitted" --arg ns "$ours" '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {
        uid: "e2e-latency-patch", kind: {group: "", version: "v1", kind: "Pod"},
        resource: {group: "", version: "v1", resource: "pods"}, requestKind: {group: "", version: "v1", kind: "Pod"},
        requestResource: {group: "", version: "v1", resource: "pods"}, namespace: $ns, operation: "CREATE",
        userInfo: {username: "e2e-admin", groups: ["system:masters", "system:authenticated"]},
        object: $o, oldObject: null, dryRun: false,
        options: {apiVersion: "meta.k8s.io/v1", kind: "CreateOptions"}}}' >"$WORK/latency-review.json"
    curl -sf --cacert "$ca" -H 'Content-Type: application/json' --data-binary @"$WORK/latency-review.json" \
        "$url?timeout=2s" | jq -r '.response.patch // ""' | base64 -d >"$out"
    jq -e 'length > 0' "$out" >/dev/null 2>&1
}

# latency_rounds ROUNDS CREATE [THEN] -- KEY...: in each round, for each KEY in turn (so a change
# in machine load hits all of them alike), `CREATE KEY ROUND` between two snapshots of the API
# server's metrics ($WORK/latency/KEY-ROUND-before.txt and -after.txt), then `THEN KEY ROUND` when
# given (work that must not count in the histogram).
latency_rounds() {
    local rounds=$1 create=$2 then= r key
    shift 2
    if [ "$1" != -- ]; then then=$1; shift; fi
    shift
    mkdir -p "$WORK/latency"
    for r in $(seq "$rounds"); do
        for key in "$@"; do
            apiserver_metrics >"$WORK/latency/$key-$r-before.txt"
            "$create" "$key" "$r"
            apiserver_metrics >"$WORK/latency/$key-$r-after.txt"
            [ -z "$then" ] || "$then" "$key" "$r"
        done
    done
}

# latency_summary [--validating] WEBHOOK KEY ROUND...: webhook_latency.py's JSON for the mutating (or
# validating) webhook named WEBHOOK over the batches of KEY in the given rounds.
latency_summary() {
    local kind=() webhook key r files=()
    if [ "$1" = --validating ]; then kind=(--validating); shift; fi
    webhook=$1 key=$2
    shift 2
    for r in "$@"; do files+=("$WORK/latency/$key-$r-before.txt" "$WORK/latency/$key-$r-after.txt"); done
    "$PYTHON" "$E2E/webhook_latency.py" "${kind[@]}" "$webhook" "${files[@]}"
}

# latency_stored_pod NS: what the latency SidecarSet made of the last pod stored in NS (containers,
# volumes, labels, annotations without the hash annotations' timestamps), to check that the patch
# floor's pods equal ours.
latency_stored_pod() {
    kc -n "$1" get pods -o json | jq -S '.items[-1] | {c: .spec.containers, v: .spec.volumes, l: .metadata.labels,
        a: (.metadata.annotations | with_entries(if (.key | startswith("kruise.io/sidecarset-hash"))
            then .value |= (fromjson | map_values(del(.updateTimestamp))) else . end))}'
}
