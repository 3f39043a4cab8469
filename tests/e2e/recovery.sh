# shellcheck shell=bash
# Live mode through API-server faults (sourced by run.sh while the suite's server runs; the API
# server is stopped and started again on the same port and etcd, so what follows finds the same
# cluster).
#
# A second server ("recovery") reaches the API server through tests/e2e/stall_proxy.py, with
# --max-cache-staleness 15s so that each fault turns it unready, and a service-account token that
# can be revoked: a Secret-backed (legacy) token, which the API server checks against the Secret's
# copy on every request (a success is cached for 10 s). One server goes through, in turn:
#   1. its token revoked for 60 s, then restored: /readyz 200 again, and a SidecarSet created
#      after every watch met the revocation seen, within 3 s of the restore;
#   2. kube-apiserver killed, started again 60 s later: both within 3 s of the API server's /readyz
#      turning 200; and the outage's log lines: none at ERROR, none from the client library, at
#      most 5 per watch;
#   3. every connection stalled by the proxy (open, silent): the silent watches noticed within
#      60 s (kruise_admission_cluster_watch_failing_seconds, /readyz 503), and re-established once
#      new connections pass again.
# Each check prints what it measured.

say "recovery: live mode through API server faults (token revoked, API server stopped, stalled connections)"
R_PORT=$(free_port)
R_METRICS=$(free_port)
PROXY_PORT=$(free_port)
R_LOG=$WORK/logs/kruise-admission-recovery.log
echo forward >"$WORK/proxy-mode"
spawn "$WORK/logs/stall-proxy.log" "$PYTHON" "$E2E/stall_proxy.py" "$PROXY_PORT" "$APISERVER_PORT" "$WORK/proxy-mode"
PROXY_PID=$SPAWNED
wait_for 20 curl -s --cacert "$WORK/apiserver-tls/ca.crt" -o /dev/null "https://127.0.0.1:$PROXY_PORT/readyz" \
    || die "the stall proxy did not start (see $WORK/logs/stall-proxy.log)"

# A legacy service-account token, signed with the API server's service-account key: valid while
# the Secret it names holds the same token.
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
sa_uid=$(kc -n kruise-admission get serviceaccount kruise-admission -o jsonpath='{.metadata.uid}')
jwt_head=$(printf '{"alg":"RS256","typ":"JWT"}' | b64url)
jwt_body=$(jq -nc --arg uid "$sa_uid" '{iss: "kubernetes/serviceaccount",
    sub: "system:serviceaccount:kruise-admission:kruise-admission",
    "kubernetes.io/serviceaccount/namespace": "kruise-admission",
    "kubernetes.io/serviceaccount/secret.name": "e2e-recovery-token",
    "kubernetes.io/serviceaccount/service-account.name": "kruise-admission",
    "kubernetes.io/serviceaccount/service-account.uid": $uid}' | b64url)
jwt_sig=$(printf '%s.%s' "$jwt_head" "$jwt_body" | openssl dgst -sha256 -sign "$WORK/sa.key" -binary | b64url)
R_TOKEN=$jwt_head.$jwt_body.$jwt_sig
token_copy() { # token_copy TOKEN: the API server's copy of the recovery server's token
    jq -nc --arg t "$(printf %s "$1" | base64 -w0)" '{apiVersion: "v1", kind: "Secret", type: "Opaque",
        metadata: {name: "e2e-recovery-token", namespace: "kruise-admission"}, data: {token: $t}}' | kc apply -f - >/dev/null
}
token_copy "$R_TOKEN"
write_kubeconfig "$WORK/recovery.kubeconfig" "$R_TOKEN"
sed -i "s|https://127.0.0.1:$APISERVER_PORT|https://127.0.0.1:$PROXY_PORT|" "$WORK/recovery.kubeconfig"

saved_flags=("${EXTRA_SERVER_FLAGS[@]}")
EXTRA_SERVER_FLAGS+=(--max-cache-staleness 15s)
suite_server=$SERVER_PID
start_server recovery "$R_PORT" "$R_METRICS" "$WORK/recovery.kubeconfig"
R_PID=$SERVER_PID
# SERVER_PID stays the suite's server, which later parts stop.
SERVER_PID=$suite_server
EXTRA_SERVER_FLAGS=("${saved_flags[@]}")
wait_for 90 server_ready "$R_METRICS" || die "the recovery server did not turn ready (see $R_LOG)"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}'; }
r_metrics() { curl -s --max-time 2 "http://127.0.0.1:$R_METRICS/metrics"; }
r_ready() { curl -sf --max-time 2 -o /dev/null "http://127.0.0.1:$R_METRICS/readyz"; }
# The SidecarSets the recovery server caches, and the most seconds any of its watches is failing.
r_sidecarsets() { r_metrics | awk '$1 == "kruise_admission_cluster_objects{kind=\"SidecarSet.apps.kruise.io\"}" {print $2}'; }
r_failing() { r_metrics | awk 'index($1, "kruise_admission_cluster_watch_failing_seconds{") == 1 && $2 > m {m = $2} END {print m + 0}'; }
r_reconnects() { r_metrics | awk 'index($1, "kruise_admission_cluster_watch_reconnects_total{") == 1 {n += $2} END {print n + 0}'; }
api_sidecarsets() { kc get sidecarsets -o name | wc -l; }
recovery_sidecarset() { # recovery_sidecarset NAME: one that selects no pod the suite creates
    jq -nc --arg name "$1" '{apiVersion: "apps.kruise.io/v1alpha1", kind: "SidecarSet", metadata: {name: $name},
        spec: {selector: {matchLabels: {"e2e-sidecar": $name}}, containers: [{name: "agent", image: "busybox:1.36"}]}}' \
        | kc create -f - >/dev/null
}
api_ready() { curl -sf --max-time 2 --cacert "$WORK/apiserver-tls/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
    -o /dev/null "https://127.0.0.1:$APISERVER_PORT/readyz"; }
# caught_up WANT: ready, and the cache holds WANT SidecarSets.
caught_up() { r_ready && [ "$(r_sidecarsets)" = "$1" ]; }
# measure FROM LIMIT CMD...: CMD every 0.1 s until it succeeds; TOOK = seconds since FROM (a
# `now` reading), or "not within LIMIT s".
measure() {
    local from=$1 limit=$2
    shift 2
    until "$@" >/dev/null 2>&1; do
        if awk -v t="$(elapsed "$from")" -v l="$limit" 'BEGIN {exit !(t > l)}'; then
            TOOK="not within $limit s"
            return 1
        fi
        sleep 0.1
    done
    TOOK=$(elapsed "$from")
}
# unready_within SECONDS: sleep SECONDS, noting in SAW_UNREADY whether /readyz was ever not 200.
unready_within() {
    local until=$((SECONDS + $1))
    SAW_UNREADY=""
    while [ "$SECONDS" -lt "$until" ]; do
        r_ready || SAW_UNREADY=yes
        sleep 0.5
    done
}
within3() { awk -v t="$1" 'BEGIN {exit !(t + 0 == t && t <= 3)}'; }

# --- 1. the token revoked for 60 s --------------------------------------------------------------
token_copy "revoked-$(openssl rand -hex 8)"
# Created once every watch has met the revocation (streams end after 30 s; the API server trusts a
# token it accepted for 10 s more), so only a watch back after the restore can see it.
unready_within 45
saw_unready=$SAW_UNREADY
recovery_sidecarset e2e-recovery-token
want=$(api_sidecarsets)
unready_within 15
SAW_UNREADY=$saw_unready$SAW_UNREADY
cached_before=$(r_sidecarsets)
token_copy "$R_TOKEN"
RESTORED=$(now)
measure "$RESTORED" 30 caught_up "$want" || true
token_took=$TOOK
unauthorized=$(grep -c '"level":"WARN".*unauthorized' "$R_LOG" || true)
if [ -n "$SAW_UNREADY" ] && within3 "$token_took" && [ "$unauthorized" -gt 0 ] && [ "$cached_before" != "$want" ]; then
    pass recovery-token-restored "token revoked 60 s: unready meanwhile (401s, --max-cache-staleness 15s); /readyz 200 and the SidecarSet created meanwhile cached ${token_took}s after the restore"
else
    fail recovery-token-restored "unready during the revocation: ${SAW_UNREADY:-no}; WARN lines naming 401: $unauthorized; SidecarSets cached before the restore $cached_before (want fewer than $want); ready with the SidecarSet after the restore: $token_took (want <= 3 s)"
fi

# --- 2. kube-apiserver stopped for 60 s ---------------------------------------------------------
R_FROM=$(log_lines "$R_LOG")
# Killed, as a crash or an OOM kill would: its connections are cut without a goodbye.
kill -KILL "$APISERVER_PID"
wait "$APISERVER_PID" 2>/dev/null || true
STOPPED=$(now)
unready_within 60
launch_apiserver
LAUNCHED=$(now)
measure "$LAUNCHED" 120 api_ready || die "kube-apiserver did not come back (see $WORK/logs/kube-apiserver.log)"
API_READY=$(now)
api_start=$(elapsed "$LAUNCHED")
outage=$(awk -v a="$STOPPED" -v b="$API_READY" 'BEGIN {printf "%.0f", b - a}')
recovery_sidecarset e2e-recovery-outage
want=$(api_sidecarsets)
measure "$API_READY" 30 caught_up "$want" || true
outage_took=$TOOK
if [ -n "$SAW_UNREADY" ] && within3 "$outage_took"; then
    pass recovery-apiserver-restarted "kube-apiserver down ${outage} s (started again in ${api_start} s): unready meanwhile; /readyz 200 and a SidecarSet created after the API server's /readyz cached ${outage_took}s after it"
else
    fail recovery-apiserver-restarted "unready during the outage: ${SAW_UNREADY:-no}; ready with the new SidecarSet: $outage_took after the API server's /readyz (want <= 3 s)"
fi
# What the outage wrote, per watch (by its `kind` field) and in all; none may be at ERROR.
outage_log=$(tail -n +"$((R_FROM + 1))" "$R_LOG" | jq -c 'select(type == "object") | (.fields // .) + {level: .level}' 2>/dev/null)
errors=$(jq -s '[.[] | select(.level == "ERROR")] | length' <<<"$outage_log")
library=$(jq -s '[.[] | select(.target // "" | startswith("kube_client"))] | length' <<<"$outage_log")
per_watch=$(jq -sc '[.[] | select(.kind)] | group_by(.kind) | map({key: .[0].kind, value: length}) | from_entries' <<<"$outage_log")
most=$(jq '[.[]] | max // 0' <<<"$per_watch")
total=$(jq -s 'length' <<<"$outage_log")
if [ "$errors" -eq 0 ] && [ "$library" -eq 0 ] && [ "$most" -le 5 ] && [ "$most" -gt 0 ]; then
    pass recovery-outage-log "a ${outage} s outage wrote $total lines, none at ERROR, none from the client library; per watch $per_watch"
else
    fail recovery-outage-log "$errors lines at ERROR, $library from the client library, per watch $per_watch (want at most 5 each): $(jq -c 'select(.level == "ERROR" or (.target // "" | startswith("kube_client")))' <<<"$outage_log" | head -3)"
fi
wait_for 60 server_ready || die "the suite's server did not turn ready after the API server restart"

# --- 3. stalled connections ---------------------------------------------------------------------
no_failing() { [ "$(r_failing)" = 0 ]; }
wait_for 60 no_failing || echo "note: a watch of the recovery server was still failing before the stall: $(r_failing) s"
reconnects_before=$(r_reconnects)
echo stall >"$WORK/proxy-mode"
STALLED=$(now)
failing_noticed() { awk -v f="$(r_failing)" 'BEGIN {exit !(f > 0)}'; }
measure "$STALLED" 75 failing_noticed || true
noticed=$TOOK
failing_then=$(r_failing)
unready_then=$(r_ready && echo 200 || echo 503)
recovery_sidecarset e2e-recovery-stall
want=$(api_sidecarsets)
echo forward >"$WORK/proxy-mode"
RELEASED=$(now)
restored() { caught_up "$want" && [ "$(r_failing)" = 0 ]; }
measure "$RELEASED" 60 restored || true
stall_took=$TOOK
since_stall=$(elapsed "$STALLED")
reconnects_after=$(r_reconnects)
if awk -v t="$noticed" 'BEGIN {exit !(t + 0 == t && t <= 60)}' && [ "$unready_then" = 503 ] \
    && awk -v t="$stall_took" -v s="$since_stall" 'BEGIN {exit !(t + 0 == t && s <= 60)}' \
    && [ "$reconnects_after" -gt "$reconnects_before" ]; then
    pass recovery-stalled-watch "connections stalled open: noticed ${noticed}s later (failing ${failing_then} s in kruise_admission_cluster_watch_failing_seconds, /readyz 503 by --max-cache-staleness); once new connections passed, ready with a SidecarSet created meanwhile ${stall_took}s later (${since_stall}s after the stall)"
else
    fail recovery-stalled-watch "noticed: $noticed (want <= 60 s); failing ${failing_then} s, /readyz $unready_then; re-established after release: $stall_took (${since_stall}s after the stall, want <= 60 s); reconnects $reconnects_before -> $reconnects_after"
fi

stop_pid "$R_PID"
stop_pid "$PROXY_PID"
kc delete sidecarset e2e-recovery-token e2e-recovery-outage e2e-recovery-stall --wait=false >/dev/null 2>&1 || true
kc -n kruise-admission delete secret e2e-recovery-token --wait=false >/dev/null 2>&1 || true
