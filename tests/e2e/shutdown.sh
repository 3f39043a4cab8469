# shellcheck shell=bash
# SIGTERM drain, then the failure policies while the server is down (sourced by run.sh last: the
# server does not come back).

say "SIGTERM drain with creates in flight"
mkns e2e-drain
create_json "$(sidecarset e2e-drain e2e-drain e2e-drain-agent busybox:1.36)" >/dev/null
wait_for 30 dry_run_has "$(pod_json e2e-drain d- e2e-sidecar=e2e-drain)" '.spec.containers | any(.name == "e2e-drain-agent")' || true

# One review is in flight for certain: its client sends the headers and half the body, the server
# gets SIGTERM, then the rest follows. It must still be answered.
jq -c '.request.uid = "e2e-drain-slow" | .request.namespace = "e2e-drain" | .request.object.metadata.namespace = "e2e-drain"' \
    "$WORK/latency-review.json" >"$WORK/slow-review.json" 2>/dev/null \
    || pod_json e2e-drain slow | jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "e2e-drain-slow",
        kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
        namespace: "e2e-drain", operation: "CREATE", userInfo: {username: "e2e"}, object: .}}' >"$WORK/slow-review.json"
"$PYTHON" - "$WEBHOOK_PORT" "$WORK/server-ca.crt" "$WORK/slow-review.json" "$WORK/slow-half-sent" >"$WORK/slow-result.txt" 2>&1 <<'EOF' &
import socket, ssl, sys, time
port, ca, review, marker = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read(), sys.argv[4]
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])
s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")
head = (f"POST /mutate-pod?timeout=10s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(review)}\r\nConnection: close\r\n\r\n").encode()
s.sendall(head + review[: len(review) // 2])
open(marker, "w").close()
time.sleep(1.5)  # SIGTERM arrives meanwhile
s.sendall(review[len(review) // 2 :])
data = b""
while chunk := s.recv(65536):
    data += chunk
print(data.split(b"\r\n", 1)[0].decode(), data.split(b"\r\n\r\n", 1)[-1].decode())
EOF
SLOW_PID=$!

# Creates through the API server, three at a time, from before SIGTERM until after the server exited.
load_loop() {
    local body
    body=$(pod_json e2e-drain d- e2e-sidecar=e2e-drain)
    until [ -e "$WORK/stop-load" ]; do
        curl -s -o /dev/null -w '%{http_code}\n' --cacert "$WORK/apiserver-tls/ca.crt" \
            -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
            --data-binary "$body" "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/e2e-drain/pods"
    done
}
LOG_LINES_AT_LOAD=$(log_lines "$WORK/logs/kruise-admission.log")
LOAD_PIDS=()
for i in 1 2 3; do
    load_loop >"$WORK/drain-codes-$i" &
    LOAD_PIDS+=($!)
    PIDS+=($!)
done
wait_for 10 test -e "$WORK/slow-half-sent" || echo "note: the slow client did not connect"
sleep 0.5
LOG_LINES_AT_TERM=$(log_lines "$WORK/logs/kruise-admission.log")
APISERVER_LOG_AT_TERM=$(log_lines "$WORK/logs/kube-apiserver.log")
TERM_AT=$SECONDS
kill -TERM "$SERVER_PID"
server_rc=0
wait "$SERVER_PID" || server_rc=$?
DRAIN_SECONDS=$((SECONDS - TERM_AT))
sleep 1 # creates keep coming while nothing listens (failurePolicy Ignore)
touch "$WORK/stop-load"
wait "${LOAD_PIDS[@]}" 2>/dev/null || true
wait "$SLOW_PID" 2>/dev/null || true

slow=$(cat "$WORK/slow-result.txt")
if grep -q '^HTTP/1.1 200' <<<"$slow" && sed 's/^[^{]*//' <<<"$slow" | jq -e '.response.uid == "e2e-drain-slow" and .response.allowed' >/dev/null 2>&1; then
    pass drain-in-flight-answered "a review whose body was still arriving at SIGTERM got its 200 answer"
else
    fail drain-in-flight-answered "slow client got: $(head -c 300 <<<"$slow")"
fi
check drain-exit "the server exited 0, ${DRAIN_SECONDS}s after SIGTERM" "exit code $server_rc" test "$server_rc" -eq 0

codes=$(cat "$WORK"/drain-codes-* | sort | uniq -c | tr -s ' ' | tr '\n' ',')
not_created=$(cat "$WORK"/drain-codes-* | grep -vc '^201$' || true)
pods=$(kc -n e2e-drain get pods -o json)
total=$(jq '.items | length' <<<"$pods")
with_sidecar=$(jq '[.items[] | select(any(.spec.containers[]; .name == "e2e-drain-agent"))] | length' <<<"$pods")
# The pod reviews of the load (not the slow one, not the dry runs before it).
drain_reviews() { server_reviews "$1" | jq -c 'select(.path == "/mutate-pod" and .uid != "e2e-drain-slow" and (.object | startswith("e2e-drain/")) and .allowed and .patch_ops > 0)'; }
answered=$(drain_reviews "$LOG_LINES_AT_LOAD" | wc -l)
after_term=$(drain_reviews "$LOG_LINES_AT_TERM" | wc -l)
failed_open=$(tail -n +"$((APISERVER_LOG_AT_TERM + 1))" "$WORK/logs/kube-apiserver.log" | grep 'Failed calling webhook, failing open mpod.kb.io' || true)
refused_at_connect=$(grep -c 'connection refused' <<<"$failed_open" || true)
other_failures=$(grep -v 'connection refused' <<<"$failed_open" | grep -c . || true)
echo "drain: creates $codes pods $total, with sidecar $with_sidecar, reviews answered $answered ($after_term finished after SIGTERM), calls refused at connect after the listener closed: $refused_at_connect"
if [ "$not_created" -eq 0 ] && [ "$other_failures" -eq 0 ] && [ "$with_sidecar" -eq "$answered" ] \
    && [ $((total - with_sidecar)) -eq "$refused_at_connect" ] && [ "$answered" -gt 0 ]; then
    pass drain-no-failed-call "every create succeeded; every review the server accepted reached its pod ($answered, $after_term of them finished after SIGTERM); the $refused_at_connect pods without sidecar are exactly the calls refused at connect once the listener closed"
else
    fail drain-no-failed-call "not created: $not_created; accepted calls that failed: $other_failures ($(grep -v 'connection refused' <<<"$failed_open" | head -2 | cut -c1-300)); with sidecar $with_sidecar vs answered $answered; without sidecar $((total - with_sidecar)) vs refused $refused_at_connect"
fi

say "failure policies while the server is down"
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
