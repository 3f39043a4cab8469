# shellcheck shell=bash
# The migration runbook (docs/MIGRATING.md) against OpenKruise's own kruise-manager v1.9.1 (sourced by
# run.sh last). A cluster of its own: a fresh etcd and kube-apiserver (the earlier checks' webhooks,
# CRDs and objects would be in the way; their processes are stopped first, so this file stays last),
# with the audit policy of MIGRATING.md §3, Kruise's CRDs and
# webhook configurations from its pinned module, and kruise-manager itself (tests/e2e/kruise_manager.sh:
# in a network namespace of its own, nothing listening beyond loopback).
#
# The runbook's commands run as a user types them, where they can run here: the ```sh blocks of
# MIGRATING.md are read from the file and run with bash (`run_doc`), against this cluster. What cannot:
# - `helm install` / `helm upgrade` (no kubelet runs a Deployment here): `release` renders the same
#   chart with the same --set values (`helm template`), applies what it renders, with the webhook
#   clientConfigs pointed at https://localhost:PORT, and runs `kruise-admission` with the args of the
#   rendered Deployment, the new server ready before the configurations point at it and the old one
#   stopped after, as a rolling update does;
# - `kubectl -n kruise-system edit deploy kruise-controller-manager` and `rollout status`: kruise-manager
#   is a process here; it is restarted with the new --feature-gates (a stop and a start, not a rolling
#   update: Kruise's own webhooks are away for those seconds, its Pod entries were removed before);
# - `rollout status deploy/kruise-admission`: the server's /readyz instead;
# - the in-place sidecar upgrade itself needs a kubelet: what is observed is the Pod spec and annotations
#   kruise-manager's SidecarSet controller writes, and its SidecarSet status. Pods stay Pending; the
#   Pods of the upgrade get a Running/Ready status written through the API, as a kubelet would.
# Knobs: E2E_MIGRATION_PODS (the random mix, default 200), E2E_MIGRATION_SEED (default: random, printed).

# shellcheck source=tests/e2e/kruise_manager.sh
source "$E2E/kruise_manager.sh"

say "migration runbook against kruise-manager: a cluster of its own"
{ read -r KRUISE_MANAGER; read -r KRUISE_SRC; } < <(bash "$E2E/kube-binaries.sh" kruise-manager)
[ -x "${KRUISE_MANAGER:-}" ] && [ -d "${KRUISE_SRC:-}/config/crd" ] || die "tests/e2e/kube-binaries.sh kruise-manager gave no binary or source"
for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
PIDS=()
SUITE_WORK=$WORK
WORK=$SUITE_WORK/migration
USER_DIR=$WORK/user
mkdir -p "$WORK/logs" "$USER_DIR/bin"
ln -s "$BIN" "$USER_DIR/bin/kruise-admission"

# MIGRATING.md §3's audit rule, as a policy of its own: both sides of the offline comparison.
awk '/^```yaml$/ {inside = 1; next} inside && /^```$/ {exit} inside' "$ROOT/docs/MIGRATING.md" >"$WORK/audit-rule.yaml"
grep -q 'resources: \[pods\]' "$WORK/audit-rule.yaml" || die "no audit rule in docs/MIGRATING.md"
{
    echo "apiVersion: audit.k8s.io/v1"
    echo "kind: Policy"
    echo "rules:"
    cat "$WORK/audit-rule.yaml"
    echo "- level: None"
} >"$WORK/audit-policy.yaml"
EXTRA_APISERVER_FLAGS=(--audit-policy-file "$WORK/audit-policy.yaml" --audit-log-path "$USER_DIR/audit.log")
start_etcd
start_apiserver
EXTRA_APISERVER_FLAGS=()
mkns default kruise-admission

# run_doc MARKER [SKIP-REGEX]: the ```sh block of MIGRATING.md that holds the line MARKER, run as
# written by bash -e in $USER_DIR with the admin's kubeconfig (lines matching SKIP-REGEX left out,
# for the steps that cannot run here; each is said by the caller). Output to stdout.
run_doc() {
    local marker=$1 skip=${2:-^$^} block
    block=$("$PYTHON" - "$ROOT/docs/MIGRATING.md" "$marker" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
for block in re.findall(r"^[ ]*```sh\n(.*?)^[ ]*```$", text, re.S | re.M):
    if sys.argv[2] in block:
        print("\n".join(line[2:] if line.startswith("  ") and block.startswith("  ") else line for line in block.splitlines()))
        break
else:
    sys.exit("no sh block in docs/MIGRATING.md holds: " + sys.argv[2])
PY
    ) || return 1
    block=$(grep -Ev "$skip" <<<"$block")
    (cd "$USER_DIR" && KUBECONFIG=$WORK/admin.kubeconfig PATH=$USER_DIR/bin:$PATH bash -e -o pipefail -c "$block")
}

# --- kruise-manager --------------------------------------------------------------------------------
say "kruise-manager $(basename "$KRUISE_MANAGER" | sed 's/^kruise-manager-//'): CRDs and webhook configurations from its module, then the process"
kruise_manager_install "$KRUISE_SRC"
start_kruise_manager
if wait_for 120 km_ready; then
    pass kruise-manager-ready "readyz ok; $(kruise_manager_names mutating | wc -l) mutating and $(kruise_manager_names validating | wc -l) validating entries, clientConfig $(kc get mutatingwebhookconfiguration kruise-mutating-webhook-configuration -o jsonpath='{.webhooks[0].clientConfig.url}'); CRD conversion $(kc get crd sidecarsets.apps.kruise.io -o jsonpath='{.spec.conversion.webhook.clientConfig.url}')"
else
    fail kruise-manager-ready "not ready in 120 s: $(tail -5 "$WORK/logs/kruise-manager.log")"
    die "nothing else can be checked without kruise-manager"
fi
# Nothing of kruise-manager listens in the host's network namespace; in its own there is only lo.
host_listeners=$(ss -Hltnp | grep -F "pid=$KM_PID," || true)
links=$(km_in ip -o link | awk -F': ' '{print $2}' | paste -sd,)
km_listeners=$(km_in ss -Hltn | awk '{print $4}' | sort | paste -sd' ')
check kruise-manager-loopback-only "no socket of kruise-manager in the host namespace; its namespace has the links [$links], its listeners $km_listeners; the host reaches its webhook on 127.0.0.1:$KM_WEBHOOK_PORT only" \
    "host listeners of kruise-manager: $host_listeners; links $links" \
    eval '[ -z "$host_listeners" ] && [ "$links" = lo ] && ! ss -Hltn | awk "{print \$4}" | grep -qx "[^1].*:$KM_WEBHOOK_PORT"'

# --- before you start (§2): the inventory, as written ---------------------------------------------
say "MIGRATING §2: the inventory"
if out=$(run_doc 'kubectl get workloadspreads' 2>&1) && [ -z "$(grep -v '^No resources found' <<<"$out")" ] \
    && out2=$(run_doc 'policy.kruise.io/delete-protection -L' 2>&1) && [ -z "$(grep -v '^No resources found' <<<"$out2")" ]; then
    pass migration-inventory "the §2 inventory commands ran as written against kruise-manager's CRDs; nothing in use (step 3 is open)"
else
    fail migration-inventory "${out:-} ${out2:-}"
fi

# --- the workloads -------------------------------------------------------------------------------
mkns mig-prod mig-dev mig-batch mig-stream mig-after
kc label --overwrite namespace mig-prod env=prod >/dev/null
kc label --overwrite namespace mig-dev env=dev >/dev/null
kc label --overwrite namespace mig-stream env=prod >/dev/null
kc label --overwrite namespace mig-after env=prod >/dev/null
out=$(kc create -f "$E2E/migration/sidecarsets.yaml" 2>&1) || die "the SidecarSets were refused: $out"

# --- shadow (§3) -----------------------------------------------------------------------------------
# release REVISION HELM-ARGS...: what `helm install|upgrade kruise-admission charts/kruise-admission -n
# kruise-admission HELM-ARGS` would roll out, here (see the top of this file); sets REL_METRICS.
REL_PID="" REL_PREV=""
release() {
    local rev=$1 port metrics out=$WORK/release-$1.json args ca
    shift
    port=$(free_port) metrics=$(free_port)
    helm template kruise-admission "$ROOT/charts/kruise-admission" -n kruise-admission "$@" | yaml_to_json >"$out"
    mapfile -t args < <(jq -r --arg l "127.0.0.1:$port" --arg m "127.0.0.1:$metrics" --arg d "$WORK/certs-$rev" '
        .[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args[]
        | if startswith("--listen=") then "--listen=" + $l elif startswith("--metrics-listen=") then "--metrics-listen=" + $m
          elif startswith("--cert-dir=") then "--cert-dir=" + $d else . end' "$out")
    ca=$(kc -n kruise-admission get secret kruise-admission-tls -o jsonpath='{.data.ca\.crt}' 2>/dev/null || true)
    jq --arg base "https://localhost:$port" --arg ca "$ca" '[.[] | select(.kind | endswith("WebhookConfiguration"))
        | .webhooks |= map(.clientConfig = ({url: ($base + .clientConfig.service.path)} + (if $ca != "" then {caBundle: $ca} else {} end)))]' \
        "$out" >"$out.webhooks"
    # Everything but the webhook configurations first (the RBAC the new server needs). The server
    # wants the configurations it names to exist: configurations of a name the previous revision
    # had are pointed at the new server once it is ready (a Service would switch its endpoints
    # then); new names are created before it starts (calls fail by their failurePolicy until then).
    jq '[.[] | select(.kind | endswith("WebhookConfiguration") | not)]' "$out" >"$out.first"
    apply_json "$out.first"
    local existing=true name
    for name in $(jq -r '.[] | "\(.kind)/\(.metadata.name)"' "$out.webhooks"); do
        kc get "$name" >/dev/null 2>&1 || existing=false
    done
    $existing || apply_json "$out.webhooks"
    spawn "$WORK/logs/kruise-admission-$rev.log" env POD_NAMESPACE=kruise-admission "$BIN" "${args[@]}" --kubeconfig "$WORK/sa.kubeconfig"
    local pid=$SPAWNED
    wait_for 60 server_ready "$metrics" || { fail "release-$rev" "server not ready: $(tail -3 "$WORK/logs/kruise-admission-$rev.log")"; return 1; }
    ! $existing || apply_json "$out.webhooks"
    if [ -n "$REL_PREV" ]; then
        jq -r --slurpfile new "$out" '.[] | select(. as $o | $new[0] | all(.kind != $o.kind or .metadata.name != $o.metadata.name))
            | "\(.kind) \(.metadata.name) \(.metadata.namespace // "")"' "$REL_PREV" | while read -r kind name ns; do
            kc delete "$kind" "$name" ${ns:+-n "$ns"} --wait=false >/dev/null
        done
    fi
    # The configurations this server names carry its CA before the old server goes.
    wait_for 60 eval 'for n in $(jq -r ".[] | select(.kind | endswith(\"WebhookConfiguration\")) | \"\(.kind)/\(.metadata.name)\"" "$out"); do
        kc get "$n" -o json | jq -e --arg ca "$(kc -n kruise-admission get secret kruise-admission-tls -o jsonpath="{.data.ca\\.crt}")" "all(.webhooks[]; .clientConfig.caBundle == \$ca)" >/dev/null || exit 1; done' \
        || { fail "release-$rev" "caBundle not in the configurations of $rev"; return 1; }
    [ -z "$REL_PID" ] || stop_pid "$REL_PID"
    REL_PID=$pid REL_PREV=$out REL_METRICS=$metrics REL_LOG=$WORK/logs/kruise-admission-$rev.log
    echo "release $rev: $(jq -r '[.[] | select(.kind | endswith("WebhookConfiguration")) | "\(.metadata.name): \([.webhooks[].name] | join(","))"] | join("; ")' "$out"); server: $(jq -r '[.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].args[] | select(test("shadow|disable-capability|config-name"))] | join(" ")' "$out")"
}
# Helm values accumulate across upgrades (--reuse-values).
VALUES=(--set shadow.enabled=true --set 'webhooks.excludeNamespaces={kruise-system}')
say "MIGRATING §3: kruise-admission in shadow (helm install ${VALUES[*]})"
release shadow "${VALUES[@]}"

# server_metric NAME [REGEX]: the sum of the current server's samples of NAME whose line matches REGEX.
server_metric() { curl -s "http://127.0.0.1:$REL_METRICS/metrics" | awk -v m="^$1[{ ]" -v f="${2:-.}" '$0 ~ m && $0 ~ f {s += $NF} END {print s + 0}'; }

MIX=${E2E_MIGRATION_PODS:-200}
SEED=${E2E_MIGRATION_SEED:-$RANDOM}
say "shadow: $MIX random Pods (seed $SEED) and two CloneSets, created through both webhooks"
kc create -f "$E2E/migration/clonesets.yaml" >/dev/null
"$PYTHON" "$E2E/pod_mix.py" "$SEED" "$MIX" >"$WORK/mix.json"
kc create -f "$WORK/mix.json" -o name >"$WORK/mix-created.txt" 2>"$WORK/mix-errors.txt" || true
created=$(wc -l <"$WORK/mix-created.txt")
stored_pods() { kc get pods -n "$1" -o json | jq '.items | length'; }
wait_for 60 eval '[ $(( $(stored_pods mig-prod) + $(stored_pods mig-dev) + $(stored_pods mig-batch) )) -ge $((MIX + 12)) ]' || true
total=$(($(stored_pods mig-prod) + $(stored_pods mig-dev) + $(stored_pods mig-batch)))
check migration-shadow-pods-created "$created of $MIX mix Pods and $((total - created)) CloneSet Pods created by kruise-manager, Kruise injecting" \
    "$created of $MIX created, $total stored: $(head -c 300 "$WORK/mix-errors.txt")" test "$created" -eq "$MIX" -a "$total" -ge $((MIX + 12))

# Live agreement: every stored Pod compared (none unmatched), no disagreement.
decided() { server_metric kruise_admission_shadow_agreement_total; }
wait_for 60 eval '[ "$(decided)" -ge "$total" ] && [ "$(server_metric kruise_admission_shadow_unmatched_total)" = 0 ]' || true
agree=$(server_metric kruise_admission_shadow_agreement_total 'result="agree"')
disagree=$(server_metric kruise_admission_shadow_agreement_total 'result="disagree"')
per_set=$(curl -s "http://127.0.0.1:$REL_METRICS/metrics" | { grep '^kruise_admission_shadow_agreement_total{' || true; } \
    | sed 's/.*result="\([a-z]*\)",sidecarset="\([^"]*\)".*} \(.*\)/\2=\1:\3/; s/.*sidecarset="\([^"]*\)".*result="\([a-z]*\)".*} \(.*\)/\1=\2:\3/' | sort | paste -sd' ')
disagreements=$(jq -c 'select(type == "object") | (.fields // .) | select(.message == "shadow disagreement") | {pod, step, sidecarset, diff}' \
    "$WORK/logs/kruise-admission-shadow.log" 2>/dev/null | head -5)
check migration-shadow-agreement-live "kruise_admission_shadow_agreement_total over $total stored Pods: $per_set (agree $agree, disagree $disagree; unmatched $(server_metric kruise_admission_shadow_unmatched_total))" \
    "agree $agree, disagree $disagree: $per_set; $disagreements" \
    eval '[ "$disagree" = 0 ] && [ "$agree" -ge "$total" ] && for s in log-agent mesh-proxy metrics-exporter; do grep -q "$s=agree:[1-9]" <<<"$per_set" || exit 1; done'
# Every other /mutate-pod step (readiness gate, WorkloadSpread, launch priority, ...) agrees as well.
step_disagree=$(server_metric kruise_admission_shadow_step_agreement_total 'result="disagree"')
per_step=$(curl -s "http://127.0.0.1:$REL_METRICS/metrics" | { grep '^kruise_admission_shadow_step_agreement_total{.*result="disagree"' || true; } \
    | sed 's/.*step="\([^"]*\)".*} \(.*\)/\1:\2/' | paste -sd' ')
check migration-shadow-step-agreement-live "kruise_admission_shadow_step_agreement_total: no step disagrees over $total stored Pods" \
    "disagree per step: $per_step; $disagreements" test "$step_disagree" = 0

# Offline (§3, as written): the cluster folder, then every logged Pod creation against its stored Pod.
if out=$(run_doc 'dry-run --cluster-dir cluster --compare' 2>&1); then
    pass migration-shadow-agreement-offline "§3's folder export and dry-run --compare over the audit log: exit 0 (every creation had a stored Pod and agreed): $(grep -E 'pods?|agree' <<<"$out" | head -3 | paste -sd' ' | cut -c1-300)"
else
    fail migration-shadow-agreement-offline "$(tail -c 1500 <<<"$out")"
fi
if out=$(run_doc 'kruise-admission dry-run --cluster-dir cluster --output summary cluster/sidecarsets.yaml' 2>&1) \
    && [ "$(grep -c 'allowed' <<<"$out")" -ge 4 ] && ! grep -Eq '[1-9][0-9]* (patch )?op' <<<"$out"; then
    pass migration-shadow-hashes "§3's hash check: Kruise's stored SidecarSets admitted again with no patch: $(paste -sd' ' <<<"$out" | cut -c1-300)"
else
    fail migration-shadow-hashes "$out"
fi

# --- the switch (§4), Pods created throughout ------------------------------------------------------
# A Pod every 0.25 s in mig-stream (env=prod) labelled for log-agent and mesh-proxy, from now until
# the rollback is done; each must be created with both sidecars and mesh-proxy's init container.
STREAM_OUT=$WORK/stream.jsonl
spawn "$WORK/logs/pod-stream.log" "$PYTHON" "$E2E/pod_stream.py" "https://127.0.0.1:$APISERVER_PORT" "$ADMIN_TOKEN" \
    "$WORK/apiserver-tls/ca.crt" mig-stream '{"app": "web", "mesh": "on"}' "$STREAM_OUT" "$WORK/stream.stop" 0.25
STREAM_PID=$SPAWNED
PHASES=()
phase() { PHASES+=("$1:$(date +%s.%N)"); }
phase shadow
wait_for 20 test -s "$STREAM_OUT" || fail migration-stream "the Pod stream created nothing: $(tail -3 "$WORK/logs/pod-stream.log")"

# entries KIND CONFIG: the entry names of a webhook configuration, comma-separated ("" when absent).
entries() { kc get "${1}webhookconfiguration" "$2" -o jsonpath='{.webhooks[*].name}' 2>/dev/null | tr ' ' ','; }
has_entry() { [[ ",$(entries "$1" "$2")," == *",$3,"* ]]; }

say "MIGRATING §4 step 1: helm upgrade --set shadow.enabled=false --set capabilities.podMutation.enabled=false"
phase step1
VALUES+=(--set shadow.enabled=false --set capabilities.podMutation.enabled=false)
if release step1 "${VALUES[@]}" && ! kc get mutatingwebhookconfiguration kruise-admission-shadow >/dev/null 2>&1 \
    && ! has_entry mutating kruise-admission mpod.kb.io && has_entry mutating kruise-admission msidecarset.kb.io \
    && has_entry mutating kruise-mutating-webhook-configuration mpod.kb.io; then
    pass migration-step1 "kruise-admission enforces without its Pod entry ($(entries mutating kruise-admission)); the shadow configurations are gone; Kruise keeps mpod.kb.io"
else
    fail migration-step1 "ours: $(entries mutating kruise-admission); shadow: $(entries mutating kruise-admission-shadow); Kruise: $(entries mutating kruise-mutating-webhook-configuration)"
fi
sleep 3

say "MIGRATING §4 step 2: helm upgrade --set capabilities.podMutation.enabled=true"
phase step2
VALUES+=(--set capabilities.podMutation.enabled=true)
if release step2 "${VALUES[@]}" && has_entry mutating kruise-admission mpod.kb.io \
    && has_entry mutating kruise-mutating-webhook-configuration mpod.kb.io; then
    pass migration-step2 "both inject: mpod.kb.io in kruise-admission and in kruise-mutating-webhook-configuration"
else
    fail migration-step2 "ours: $(entries mutating kruise-admission); Kruise: $(entries mutating kruise-mutating-webhook-configuration)"
fi
sleep 3

say "MIGRATING §4 step 3 (Kruise installed otherwise): the templates, then PodWebhook=false"
phase step3
# As written, but for the Deployment edit: kruise-manager is restarted with the gate instead.
if out=$(run_doc 'kruise-mwc-before.json' 'edit deploy kruise-controller-manager' 2>&1) \
    && wait_for 30 eval '! has_entry mutating kruise-mutating-webhook-configuration mpod.kb.io && ! has_entry validating kruise-validating-webhook-configuration vpod.kb.io'; then
    pass migration-step3-templates "saved both configurations, took mpod.kb.io, vpod.kb.io and vpodeviction.kb.io out of the templates: kruise-manager rebuilt its lists without them"
else
    fail migration-step3-templates "$out; Kruise: $(entries mutating kruise-mutating-webhook-configuration)"
fi
stop_kruise_manager
start_kruise_manager PodWebhook=false
wait_for 120 km_ready || fail migration-step3-gate "kruise-manager with PodWebhook=false not ready: $(tail -3 "$WORK/logs/kruise-manager.log")"
sleep 2
if out=$(run_doc 'rollout status deploy/kruise-controller-manager' 'rollout status' 2>&1) \
    && ! grep -qx 'mpod.kb.io\|vpod.kb.io\|vpodeviction.kb.io' <<<"$out" && grep -qx 'msidecarset.kb.io' <<<"$out"; then
    pass migration-step3-gate "kruise-manager restarted with --feature-gates=PodWebhook=false; its configurations list $(wc -l <<<"$out") entries, no mpod.kb.io, vpod.kb.io or vpodeviction.kb.io"
else
    fail migration-step3-gate "$out"
fi
phase switched
sleep 3

# --- after the switch: Kruise's SidecarSet controller on the Pods we injected --------------------
say "after the switch: Kruise's SidecarSet controller counts and upgrades the Pods kruise-admission injected"
for i in 1 2 3; do
    kc create -f - -o name >/dev/null <<<"$(pod_json mig-after "upgrade-$i" upgrade=yes app=web)" || true
done
injected=$(kc -n mig-after get pods -o json | jq -c '[.items[] | [.metadata.name, [.spec.containers[].name], .metadata.annotations["kruise.io/sidecarset-injected-list"]]]')
reviewed=$(server_reviews 0 "$REL_LOG" | jq -c 'select(.path == "/mutate-pod" and (.object | startswith("mig-after/")))' | wc -l)
check migration-after-switch-injected "Pods created with only kruise-admission's Pod webhook registered ($reviewed reviews in its log): $injected" \
    "$injected; reviews $reviewed" eval '[ "$(jq "[.[] | select((.[1] | sort) == [\"app\", \"log-agent\", \"upgrade-agent\"])] | length" <<<"$injected")" = 3 ] && [ "$reviewed" -ge 3 ]'
# As a kubelet would: Running, Ready, every container started with its image.
for i in 1 2 3; do
    kc -n mig-after get pod "upgrade-$i" -o json | jq -c '{status: {phase: "Running", conditions: [
            {type: "Initialized", status: "True"}, {type: "Ready", status: "True"}, {type: "ContainersReady", status: "True"}, {type: "PodScheduled", status: "True"}],
        containerStatuses: [.spec.containers[] | {name, image, imageID: ("docker.io/library/" + .image + "@sha256:" + ("0" * 64)),
            ready: true, started: true, restartCount: 0, state: {running: {startedAt: "2026-01-01T00:00:00Z"}}}]}}' \
        | kc -n mig-after patch pod "upgrade-$i" --subresource=status --type=merge -p "$(cat)" >/dev/null
done
ss_status() { kc get sidecarset "$1" -o jsonpath='{.status.matchedPods} {.status.updatedPods} {.status.readyPods} {.status.updatedReadyPods}'; }
# log-agent selects the stream's Pods too, still being created: matched = updated, and at least the
# Pods it selected before the check.
selected=$(kc get pods -A -l 'app in (web,api)' -o name | wc -l)
log_agent_counts() { read -r m u _ <<<"$(ss_status log-agent)"; [ "${m:-0}" = "${u:-}" ] && [ "$m" -ge "$selected" ]; }
if wait_for 60 eval '[ "$(ss_status upgrade-agent)" = "3 3 3 3" ] && log_agent_counts'; then
    pass migration-after-switch-status "SidecarSet status (matched updated ready updatedReady): upgrade-agent $(ss_status upgrade-agent); log-agent $(ss_status log-agent), >= the $selected Pods it selected before, Kruise's and ours alike"
else
    fail migration-after-switch-status "upgrade-agent $(ss_status upgrade-agent) (want 3 3 3 3); log-agent $(ss_status log-agent) (want matched = updated >= $selected)"
fi
# An in-place sidecar upgrade by Kruise: the image in each Pod's spec and the hash it records.
kc patch sidecarset upgrade-agent --type=json -p '[{"op": "replace", "path": "/spec/containers/0/image", "value": "busybox:1.37"}]' >/dev/null
new_hash=$(kc get sidecarset upgrade-agent -o jsonpath='{.metadata.annotations.kruise\.io/sidecarset-hash}')
upgraded() {
    kc -n mig-after get pods -o json | jq -e --arg h "$new_hash" '[.items[] | select(
        (.spec.containers[] | select(.name == "upgrade-agent") | .image) == "busybox:1.37"
        and (.metadata.annotations["kruise.io/sidecarset-hash"] | fromjson | .["upgrade-agent"].hash) == $h)] | length == 3' >/dev/null
}
if wait_for 60 upgraded && wait_for 30 eval '[ "$(ss_status upgrade-agent | cut -d" " -f1-2)" = "3 3" ]'; then
    pass migration-inplace-upgrade "Kruise upgraded upgrade-agent in place on the 3 Pods kruise-admission injected: image busybox:1.37 and the new hash in each Pod's spec and annotation; status $(ss_status upgrade-agent) (the restart itself needs a kubelet: not run here)"
else
    fail migration-inplace-upgrade "$(kc -n mig-after get pods -o json | jq -c '[.items[] | [.metadata.name, (.spec.containers[] | select(.name == "upgrade-agent") | .image)]]'); status $(ss_status upgrade-agent); $(grep -i 'upgrade-agent' "$WORK/logs/kruise-manager.log" | tail -2)"
fi

# --- rollback, the same way back ------------------------------------------------------------------
say "rollback of step 3 (not Helm): Kruise's previous gates, then the saved templates"
phase back3
stop_kruise_manager
start_kruise_manager
wait_for 120 km_ready || fail migration-back3 "kruise-manager not ready: $(tail -3 "$WORK/logs/kruise-manager.log")"
# templates_back CHECK: step 3's way back as written (the saved templates patched back), and Kruise's
# Pod entries listed again.
templates_back() {
    if out=$(run_doc 'kubectl patch mutatingwebhookconfiguration kruise-mutating-webhook-configuration --type merge' 2>&1) \
        && wait_for 30 has_entry mutating kruise-mutating-webhook-configuration mpod.kb.io \
        && wait_for 30 has_entry validating kruise-validating-webhook-configuration vpod.kb.io; then
        pass "$1" "Kruise's gates as they were, saved templates patched back: mpod.kb.io and vpod.kb.io listed again ($(entries mutating kruise-mutating-webhook-configuration | tr ',' '\n' | wc -l) mutating entries)"
    else
        fail "$1" "$out; Kruise: $(entries mutating kruise-mutating-webhook-configuration)"
    fi
}
templates_back migration-back3
sleep 3

# --- §4 step 3 for WorkloadSpread and PodUnavailableBudget users, then its way back -------------
say "MIGRATING §4 step 3 with WorkloadSpread or PodUnavailableBudget: Kruise keeps its gates, its Pod entries leave its templates"
phase budgets
VALUES+=(--set capabilities.podValidation.enabled=true)
release budgets "${VALUES[@]}" || fail migration-budget-release "kruise-admission with capabilities.podValidation.enabled=true did not roll out"
# The section's block as written; its `helm upgrade` is the release above.
if out=$(run_doc 'capabilities.podValidation.enabled=true' '^helm upgrade|^  --set capabilities.podValidation' 2>&1); then
    pass migration-budget-templates "the section's template edit ran as written: $(grep -c . <<<"$out") lines of output"
else
    fail migration-budget-templates "$out"
fi
# shellcheck source=tests/e2e/migration_budgets.sh
source "$E2E/migration_budgets.sh"
templates_back migration-budget-back
sleep 3
say "rollback of step 2: --set capabilities.podMutation.enabled=false"
phase back2
VALUES+=(--set capabilities.podMutation.enabled=false)
if release back2 "${VALUES[@]}" && ! has_entry mutating kruise-admission mpod.kb.io; then
    pass migration-back2 "kruise-admission without its Pod entry ($(entries mutating kruise-admission)); Kruise injects alone"
else
    fail migration-back2 "ours: $(entries mutating kruise-admission)"
fi
sleep 3
say "rollback of step 1: --set shadow.enabled=true --set capabilities.podMutation.enabled=true"
phase back1
VALUES+=(--set shadow.enabled=true --set capabilities.podMutation.enabled=true)
if release back1 "${VALUES[@]}" && has_entry mutating kruise-admission-shadow mpod.shadow.kruise-admission.dev \
    && ! kc get mutatingwebhookconfiguration kruise-admission >/dev/null 2>&1; then
    pass migration-back1 "back in shadow: kruise-admission-shadow ($(entries mutating kruise-admission-shadow)), kruise-admission gone"
else
    fail migration-back1 "shadow: $(entries mutating kruise-admission-shadow); ours: $(entries mutating kruise-admission)"
fi
sleep 3
phase end
touch "$WORK/stream.stop"
wait_for 10 eval '! kill -0 $STREAM_PID'

# Every Pod of the stream: created, with both sidecars and the init container, per phase.
bounds=$(printf '%s\n' "${PHASES[@]}" | jq -Rsc 'split("\n") | map(select(. != "") | split(":") | {name: .[0], t: (.[1] | tonumber)})')
stream_report=$(jq -sc --argjson b "$bounds" '
    def phase($t): ([$b[] | select(.t <= $t)] | last | .name) // "before";
    {total: length,
     failed: [.[] | select(.status != 201)] | length,
     missing: [.[] | select(.status == 201 and ((.containers | index("mesh-proxy") and index("log-agent") and index("app")) and (.initContainers | index("mesh-init")) | not))] | length,
     per_phase: (group_by(phase(.t)) | map({key: phase(.[0].t), value: length}) | from_entries),
     first_bad: ([.[] | select(.status != 201 or ((.containers | index("mesh-proxy") and index("log-agent")) | not))] | .[0:3])}' "$STREAM_OUT")
check migration-stream "Pods created throughout the switch and the rollback: $stream_report" "$stream_report" \
    eval '[ "$(jq ".failed + .missing" <<<"$stream_report")" = 0 ] && [ "$(jq ".per_phase | length" <<<"$stream_report")" -ge 7 ] && [ "$(jq ".total" <<<"$stream_report")" -ge 100 ]'

WORK=$SUITE_WORK
