# shellcheck shell=bash
# SIGTERM drain during a rollout, then the failure policies while the server is down (sourced by
# run.sh last: no server runs afterwards).
#
# A rollout as Kubernetes does it: a second replica (same Secret) becomes ready, the webhook traffic
# moves to it (here: the configurations' URLs, as endpoints would), and the old replica gets
# SIGTERM while pod creates keep flowing and one review is still arriving at the old one. No call
# may fail: every pod gets its sidecar, and the old replica answers what it had accepted.

say "SIGTERM drain during a rollout, with creates in flight"
mkns e2e-drain
create_json "$(sidecarset e2e-drain e2e-drain e2e-drain-agent busybox:1.36)" >/dev/null
wait_for 30 dry_run_has "$(pod_json e2e-drain d- e2e-sidecar=e2e-drain)" '.spec.containers | any(.name == "e2e-drain-agent")' || true
OLD_PID=$SERVER_PID

NEW_PORT=$(free_port)
NEW_METRICS=$(free_port)
start_server new "$NEW_PORT" "$NEW_METRICS"
NEW_PID=$SERVER_PID
NEW_LOG=$WORK/logs/kruise-admission-new.log
if wait_for 90 server_ready "$NEW_METRICS" \
    && cmp -s "$WORK/server-certs/ca.crt" "$WORK/server-certs-new/ca.crt"; then
    pass second-replica-shares-secret "a second replica became ready with the CA the first one created (one Secret, no new CA)"
else
    fail second-replica-shares-secret "the second replica is not ready, or it wrote another CA than the first"
fi

# One review is in flight at the old replica for certain: its client sends the headers and half the
# body, waits until the old replica has had SIGTERM, then sends the rest. It must be answered.
jq -c '.request.uid = "e2e-drain-slow" | .request.namespace = "e2e-drain" | .request.object.metadata.namespace = "e2e-drain"' \
    "$WORK/latency-review.json" >"$WORK/slow-review.json" 2>/dev/null \
    || pod_json e2e-drain slow | jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "e2e-drain-slow",
        kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
        namespace: "e2e-drain", operation: "CREATE", userInfo: {username: "e2e"}, object: .}}' >"$WORK/slow-review.json"
"$PYTHON" - "$WEBHOOK_PORT" "$WORK/server-ca.crt" "$WORK/slow-review.json" "$WORK/slow-half-sent" "$WORK/slow-go" \
    >"$WORK/slow-result.txt" 2>&1 <<'EOF' &
import os, socket, ssl, sys, time
port, ca, review, sent, go = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read(), sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
head = (f"POST /mutate-pod?timeout=10s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(review)}\r\nConnection: close\r\n\r\n").encode()
s.sendall(head + review[: len(review) // 2])
open(sent, "w").close()
deadline = time.time() + 20
while not os.path.exists(go) and time.time() < deadline:
    time.sleep(0.05)
s.sendall(review[len(review) // 2 :])
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.split(b"\r\n", 1)[0].decode(), data.split(b"\r\n\r\n", 1)[-1].decode())
EOF
SLOW_PID=$!
PIDS+=("$SLOW_PID")

# Creates through the API server, three at a time, until told to stop.
load_loop() {
    local body
    body=$(pod_json e2e-drain d- e2e-sidecar=e2e-drain)
    until [ -e "$WORK/stop-load" ]; do
        curl -s -o /dev/null -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
            -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
            --data-binary "$body" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/e2e-drain/pods"
    done
}
OLD_FROM=$(log_lines "$WORK/logs/kruise-admission.log")
NEW_FROM=$(log_lines "$NEW_LOG")
APISERVER_FROM=$(log_lines "$WORK/logs/kube-apiserver.log")
LOAD_PIDS=()
for i in 1 2 3; do
    load_loop >"$WORK/drain-codes-$i" &
    LOAD_PIDS+=($!)
    PIDS+=($!)
done
wait_for 10 test -e "$WORK/slow-half-sent" || echo "note: the slow client did not connect"
sleep 1

# Traffic moves to the new replica (the endpoints update of a real rollout), then the old one stops.
for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
    kc get "$kind" kruise-admission -o json \
        | jq --arg old "https://localhost:$WEBHOOK_PORT/" --arg new "https://localhost:$NEW_PORT/" \
            '.webhooks |= map(.clientConfig.url |= sub($old; $new))' \
        | kc replace -f - >/dev/null
done
new_serves() { server_reviews "$NEW_FROM" "$NEW_LOG" | jq -e -s 'any(.[]; .object | startswith("e2e-drain/"))' >/dev/null; }
wait_for 15 new_serves || echo "note: the new replica got no drain review within 15 s"
sleep 1 # what preStop's sleep is for: every API server has switched
TERM_AT=$SECONDS
kill -TERM "$OLD_PID"
touch "$WORK/slow-go"
old_rc=0
wait "$OLD_PID" || old_rc=$?
DRAIN_SECONDS=$((SECONDS - TERM_AT))
sleep 2 # creates go on against the new replica
touch "$WORK/stop-load"
wait "${LOAD_PIDS[@]}" 2>/dev/null || true
wait "$SLOW_PID" 2>/dev/null || true

slow=$(cat "$WORK/slow-result.txt")
if grep -q '^HTTP/1.1 200' <<<"$slow" && jq -e '.response.uid == "e2e-drain-slow" and .response.allowed' <<<"${slow#* OK }" >/dev/null 2>&1; then
    pass drain-in-flight-answered "a review whose body was still arriving when the old replica got SIGTERM was answered 200"
else
    fail drain-in-flight-answered "slow client got: $(head -c 300 <<<"$slow")"
fi
check drain-exit "the old replica exited 0, ${DRAIN_SECONDS}s after SIGTERM" "exit code $old_rc" test "$old_rc" -eq 0

codes=$(cat "$WORK"/drain-codes-* | sort | uniq -c | tr -s ' ' | tr '\n' ',')
not_created=$(cat "$WORK"/drain-codes-* | grep -vc '^201$' || true)
pods=$(kc -n e2e-drain get pods -o json)
total=$(jq '.items | length' <<<"$pods")
without_sidecar=$(jq '[.items[] | select(all(.spec.containers[]; .name != "e2e-drain-agent"))] | length' <<<"$pods")
drain_reviews() { server_reviews "$1" "$2" | jq -c 'select(.path == "/mutate-pod" and .uid != "e2e-drain-slow" and (.object | startswith("e2e-drain/")) and .allowed and .patch_ops > 0)' | wc -l; }
by_old=$(drain_reviews "$OLD_FROM" "$WORK/logs/kruise-admission.log")
by_new=$(drain_reviews "$NEW_FROM" "$NEW_LOG")
failed_calls=$(tail -n +"$((APISERVER_FROM + 1))" "$WORK/logs/kube-apiserver.log" | grep -c 'Failed calling webhook' || true)
echo "drain: creates ${codes%,}; pods $total, without sidecar $without_sidecar; reviews answered by the old replica $by_old, by the new $by_new; failed webhook calls $failed_calls"
if [ "$not_created" -eq 0 ] && [ "$failed_calls" -eq 0 ] && [ "$without_sidecar" -eq 0 ] \
    && [ "$by_old" -gt 0 ] && [ "$by_new" -gt 0 ] && [ $((by_old + by_new)) -ge "$total" ]; then
    pass drain-no-failed-call "$total pods created across the switch and SIGTERM, all with their sidecar; the API server logged no failed webhook call"
else
    fail drain-no-failed-call "not created: $not_created; failed webhook calls: $failed_calls; pods without sidecar: $without_sidecar of $total; answered old/new: $by_old/$by_new"
fi

say "failure policies while the server is down"
kill -TERM "$NEW_PID"
new_rc=0
wait "$NEW_PID" || new_rc=$?
check drain-exit-idle "the new replica exited 0 on SIGTERM" "exit code $new_rc" test "$new_rc" -eq 0
if pod=$(create_json "$(pod_json e2e-inject down-1 e2e-sidecar=e2e-agent)" 2>&1) \
    && jq -e '[.spec.containers[].name] == ["app"]' <<<"$pod" >/dev/null; then
    pass failure-policy-ignore "/mutate-pod (Ignore): the pod is admitted, without its sidecar"
else
    fail failure-policy-ignore "$(jq -c '[.spec.containers[]?.name]' <<<"$pod" 2>/dev/null || echo "$pod")"
fi
refused failure-policy-fail-delete 'failed calling webhook "vbuiltindeployment.kb.io"' \
    kc -n e2e-workloads delete deployment keep-always --wait=false
refused failure-policy-fail-cloneset 'failed calling webhook "vcloneset.kb.io"' \
    kc -n e2e-workloads patch cloneset web --type=json -p '[{"op": "replace", "path": "/spec/replicas", "value": 3}]'
refused failure-policy-fail-sidecarset 'failed calling webhook "msidecarset.kb.io"' \
    kc create -f - <<<"$(sidecarset e2e-down e2e-inject e2e-down busybox:1.36)"
