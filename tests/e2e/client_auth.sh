# shellcheck shell=bash
# Only the API server is let in (issue 17 point 6; sourced by run.sh). kube-apiserver presents a
# client certificate to the webhook at localhost:$AUTH_PORT, named in its admission configuration
# (--admission-control-config-file: a kubeconfig whose user is that host:port), and a server started
# with --client-ca-file and --allowed-client-name serves it; any other caller is refused at the TLS
# handshake.

AUTH_NAME=kube-apiserver-e2e

# client_cert DIR NAME CN: a client certificate (extendedKeyUsage clientAuth) for CN, signed by the
# CA in DIR (ca.crt, ca.key, as `kruise-admission certs` writes them).
client_cert() {
    openssl ecparam -name prime256v1 -genkey -noout -out "$1/$2.key" 2>/dev/null
    openssl req -new -key "$1/$2.key" -subj "/CN=$3" -out "$1/$2.csr" 2>/dev/null
    openssl x509 -req -in "$1/$2.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial -days 2 -out "$1/$2.crt" \
        -extfile <(printf 'extendedKeyUsage = clientAuth\nkeyUsage = critical, digitalSignature\n') 2>/dev/null
}

# Before kube-apiserver starts: the CAs, the client certificates and its admission configuration.
client_auth_prepare() {
    AUTH_PORT=$(free_port)
    "$BIN" certs --out "$WORK/client-ca" >/dev/null
    "$BIN" certs --out "$WORK/other-ca" >/dev/null
    client_cert "$WORK/client-ca" apiserver "$AUTH_NAME"
    client_cert "$WORK/client-ca" intruder intruder
    client_cert "$WORK/other-ca" impostor "$AUTH_NAME"
    cat >"$WORK/webhook-client.kubeconfig" <<EOF
apiVersion: v1
kind: Config
users:
- name: "localhost:$AUTH_PORT"
  user:
    client-certificate: $WORK/client-ca/apiserver.crt
    client-key: $WORK/client-ca/apiserver.key
EOF
    cat >"$WORK/admission-config.yaml" <<EOF
apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $WORK/webhook-client.kubeconfig
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: $WORK/webhook-client.kubeconfig
EOF
    EXTRA_APISERVER_FLAGS+=(--admission-control-config-file "$WORK/admission-config.yaml")
}

# After the other checks (no server running): a server that admits only the API server's certificate.
client_auth_checks() {
    say "client certificates: only the API server is let in (--client-ca-file, --allowed-client-name $AUTH_NAME)"
    local metrics from pod
    metrics=$(free_port)
    EXTRA_SERVER_FLAGS=(--client-ca-file "$WORK/client-ca/ca.crt" --allowed-client-name "$AUTH_NAME")
    start_server auth "$AUTH_PORT" "$metrics"
    EXTRA_SERVER_FLAGS=()
    local log=$WORK/logs/kruise-admission-auth.log
    wait_for 90 server_ready "$metrics" || { fail client-auth-server-ready "not ready: $(tail -3 "$log")"; return; }
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
        kc get "$kind" kruise-admission -o json \
            | jq --arg port "$AUTH_PORT" '.webhooks |= map(.clientConfig.url |= sub("localhost:[0-9]+/"; "localhost:\($port)/"))' \
            | kc replace -f - >/dev/null
    done

    from=$(log_lines "$log")
    local auth_pod
    auth_pod=$(pod_json e2e-inject auth-1 e2e-sidecar=e2e-agent)
    wait_for 30 dry_run_has "$auth_pod" '.spec.containers | any(.name == "e2e-agent")' || true
    if pod=$(create_json "$auth_pod" 2>&1) && jq -e 'any(.spec.containers[]; .name == "e2e-agent")' <<<"$pod" >/dev/null \
        && server_reviews "$from" "$log" | jq -e -s 'any(.[]; .object == "e2e-inject/auth-1")' >/dev/null; then
        pass client-auth-apiserver-served "the API server presented $AUTH_NAME's certificate (admission configuration kubeconfig) and the pod got its sidecar"
    else
        fail client-auth-apiserver-served "$(jq -c '[.spec.containers[]?.name]' <<<"$pod" 2>/dev/null || echo "$pod")"
    fi

    # call TAG [CERT KEY [MAX-TLS-VERSION]]: POST a review to the server directly; prints "<http code> <curl exit>".
    local review=$WORK/auth-review.json
    pod_json e2e-inject direct | jq -c '{apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {uid: "e2e-auth",
        kind: {group: "", version: "v1", kind: "Pod"}, resource: {group: "", version: "v1", resource: "pods"},
        namespace: "e2e-inject", operation: "CREATE", userInfo: {username: "e2e"}, object: .}}' >"$review"
    call() {
        local rc=0 code
        code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/server-ca.crt" ${2:+--cert "$2" --key "$3"} ${4:+--tls-max "$4"} \
            -H 'Content-Type: application/json' --data-binary @"$review" "https://localhost:$AUTH_PORT/mutate-pod?timeout=2s") || rc=$?
        echo "$code $rc"
    }
    refused_tls() { # NAME WHAT RESULT REVIEWS-BEFORE
        local reviews
        reviews=$(server_reviews "$4" "$log" | jq -s 'map(select(.uid == "e2e-auth")) | length')
        if [ "${3%% *}" = 000 ] && [ "${3##* }" != 0 ] && [ "$reviews" = 0 ]; then
            pass "$1" "$2: no HTTP exchange (curl exit ${3##* }), no review reached the server"
        else
            fail "$1" "$2: http code/curl exit $3, reviews served $reviews"
        fi
    }
    from=$(log_lines "$log")
    refused_tls client-auth-no-cert-refused "a caller without a client certificate" "$(call)" "$from"
    refused_tls client-auth-unlisted-refused "a certificate from the same CA for CN=intruder" \
        "$(call x "$WORK/client-ca/intruder.crt" "$WORK/client-ca/intruder.key")" "$from"
    refused_tls client-auth-other-ca-refused "a certificate for CN=$AUTH_NAME from another CA" \
        "$(call x "$WORK/other-ca/impostor.crt" "$WORK/other-ca/impostor.key")" "$from"
    # TLS 1.3 clients learn of the refusal on their first read (curl exit 56); under TLS 1.2 the
    # handshake itself fails (curl exit 35, SSL connect error).
    local tls12
    tls12=$(call x "$WORK/client-ca/intruder.crt" "$WORK/client-ca/intruder.key" 1.2)
    check client-auth-refused-in-handshake "over TLS 1.2 the unlisted certificate fails the handshake itself (curl exit ${tls12##* })" \
        "over TLS 1.2: http code/curl exit $tls12" test "$tls12" = "000 35"
    if grep -q 'client certificate refused' "$log"; then
        pass client-auth-refusal-logged "the unlisted subject is logged: $(grep -m1 'client certificate refused' "$log" | jq -c '{message, presented}' 2>/dev/null | cut -c1-160)"
    else
        fail client-auth-refusal-logged "no 'client certificate refused' line in the server log"
    fi
    local listed
    listed=$(call x "$WORK/client-ca/apiserver.crt" "$WORK/client-ca/apiserver.key")
    check client-auth-listed-served "the listed certificate from a plain client is served (HTTP ${listed%% *}), so the refusals above are the certificate's doing" \
        "the listed certificate got $listed" test "${listed%% *}" = 200
}
