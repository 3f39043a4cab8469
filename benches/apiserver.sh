#!/usr/bin/env bash
# Pod creation through the real kube-apiserver (results in docs/PERFORMANCE.md): etcd and the newest
# pinned kube-apiserver (tests/e2e/kube-binaries.sh) on 127.0.0.1, and four namespaces whose Pod
# CREATEs go through one mutating webhook each, or none:
#   ours   the release `serve` (folder mode), /mutate-pod injecting one SidecarSet
#   patch  the Go floor (benches/go-floor) answering the exact patch ours gives the same pod
#   allow  the Go floor answering allowed
#   none   no webhook
#   injected  no webhook, creating the pod with the sidecar already in it (`kruise-admission inject`):
#          what creating the pod ours stores costs without any webhook call
# In each of ROUNDS rounds every namespace in turn (so a change in machine load hits all alike):
#   - PODS creates one at a time (h2load, one HTTP/2 connection), between two snapshots of the API
#     server's metrics: the round's mean of apiserver_admission_webhook_admission_duration_seconds
#     for that webhook (the call and applying its patch), and the client's mean create time;
#   - then BURST creates from CONCURRENCY connections at once: Pod creates per second, and the CPU
#     time kube-apiserver, etcd and the namespace's webhook process spent per create meanwhile
#     (/proc/PID/stat), which says whose work a webhook's cost to the creation rate is.
# With KRUISE=1, OpenKruise's kruise-manager v1.9.1 (tests/e2e/kube-binaries.sh kruise-manager, in a
# network namespace of its own as the end-to-end suite runs it: tests/e2e/kruise_manager.sh) joins as
#   kruise  kruise-manager's own /mutate-pod (mpod.kb.io, its template narrowed to this namespace)
# with SIDECARSETS SidecarSets in the API, SELECTING of them selecting the latency pod (ours reads the
# same SidecarSets, as Kruise stored them, from its folder); its controllers run throughout, as in a
# cluster (its SidecarSet controller updates their status on every create, in every namespace). Then
# each round also sends the same AdmissionReview directly over TLS (h2load, REVIEWS requests on one
# connection and on CONCURRENCY), to ours and to kruise-manager inside its namespace, and the report
# adds the ratios ours / kruise-manager and the RSS of both.
# It prints (and writes to OUT/apiserver.md) each round's figures, the medians of the per-round
# ratios ours / patch floor, ours / allow floor and creates/s ours / none and ours / injected, and
# the CPU per create of each process in the bursts. The measurement and the
# patch floor's setup are tests/e2e/latency_lib.sh, shared with the end-to-end suite's latency check.
#
# Usage: benches/apiserver.sh   (about a minute per round after the builds)
# Knobs: ROUNDS=6 PODS=100 BURST=400 CONCURRENCY=8 OUT=<cargo target dir>/apiserver
#        KRUISE=1 SIDECARSETS=10 SELECTING=1 REVIEWS=2000 (kruise-manager rounds; needs root and socat)
#        E2E_VERSION (default: the newest of tests/e2e/kube/VERSIONS) BIN=path (else cargo builds
#        this tree's release binary) H2LOAD=path E2E_KEEP=1 (keep OUT/work: logs, etcd data)
# Needs: Go, curl, openssl, jq, python3, kubectl (PATH, or .ci/manifests-check.sh's tools folder).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. .ci/cargo-paths.sh
E2E=$ROOT/tests/e2e
PYTHON=${PYTHON:-python3}
TARGET_DIR=$(cargo_target_dir)
OUT=${OUT:-$TARGET_DIR/apiserver}
ROUNDS=${ROUNDS:-6}
PODS=${PODS:-100}
BURST=${BURST:-400}
CONCURRENCY=${CONCURRENCY:-8}
E2E_VERSION=${E2E_VERSION:-$(grep -m1 '^v' "$E2E/kube/VERSIONS")}
E2E_KEEP=${E2E_KEEP:-0}
KRUISE=${KRUISE:-0}
SIDECARSETS=${SIDECARSETS:-10}
SELECTING=${SELECTING:-1}
REVIEWS=${REVIEWS:-2000}
EXTRA_APISERVER_FLAGS=()
# shellcheck source=tests/e2e/lib.sh
source "$E2E/lib.sh"
# shellcheck source=tests/e2e/latency_lib.sh
source "$E2E/latency_lib.sh"
OUT=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
# shellcheck source=benches/support/h2load-tool.sh
. benches/support/h2load-tool.sh
PATH=$PATH:${MANIFESTS_TOOLS_DIR:-$TARGET_DIR/manifests-tools}
for tool in kubectl jq go curl openssl; do
    command -v $tool >/dev/null || die "$tool is needed (kubectl: .ci/manifests-check.sh unpacks one into target/manifests-tools)"
done

say "kube-apiserver $E2E_VERSION and etcd (tests/e2e/kube-binaries.sh)"
{ read -r KUBE_APISERVER; read -r ETCD; } < <(bash "$E2E/kube-binaries.sh" "$E2E_VERSION")
say "building the release server and the Go floor"
BIN=${BIN:-$(cargo_exe kruise-admission --release --bin kruise-admission)}
FLOOR=$OUT/go-floor
benches/go-floor/build.sh "$FLOOR"

WORK=$OUT/work
rm -rf "$WORK" && mkdir -p "$WORK/logs"
trap e2e_cleanup EXIT
trap 'exit 130' INT TERM
start_watchdog
"$BIN" certs --out "$WORK/floor-tls" >/dev/null

say "etcd and kube-apiserver on 127.0.0.1"
start_etcd
ETCD_PID=$SPAWNED
start_apiserver
APISERVER_PID=$SPAWNED
echo "kube-apiserver $("$KUBE_APISERVER" --version | cut -d' ' -f2) on https://127.0.0.1:$APISERVER_PORT"

# --- the webhooks ------------------------------------------------------------------------------------
declare -A WEBHOOK_PID=()
mkdir -p "$WORK/cluster"
if [ "$KRUISE" = 1 ]; then
    # shellcheck source=benches/support/kruise_peer.sh
    source benches/support/kruise_peer.sh
    kruise_peer "$SIDECARSETS" "$SELECTING" "$WORK/cluster"
    WEBHOOK_PID[kruise]=$KM_PID
    say "ours (folder mode, Kruise's $SIDECARSETS SidecarSets), the patch floor and the allow floor"
else
    say "ours (folder mode, one SidecarSet), the patch floor and the allow floor"
    jq -n '{apiVersion: "apps.kruise.io/v1alpha1", kind: "SidecarSet", metadata: {name: "e2e-lat"},
        spec: {selector: {matchLabels: {"e2e-sidecar": "e2e-lat"}},
               containers: [{name: "e2e-lat-agent", image: "busybox:1.36", command: ["sleep", "3600"]}]}}' \
        >"$WORK/cluster/sidecarset.json"
fi
PORT=$(free_port)
METRICS_PORT=$(free_port)
spawn "$WORK/logs/kruise-admission.log" "$BIN" serve --listen "127.0.0.1:$PORT" \
    --metrics-listen "127.0.0.1:$METRICS_PORT" --cert-dir "$WORK/server-certs" --cluster-dir "$WORK/cluster"
WEBHOOK_PID[ours]=$SPAWNED
wait_for 60 server_ready || die "the server did not become ready (see $WORK/logs/kruise-admission.log)"
KEYS=(ours patch allow none injected)
[ "$KRUISE" = 1 ] && KEYS+=(kruise)
mkns e2e-lat-none e2e-lat-injected
for key in ours patch allow $([ "$KRUISE" = 1 ] && echo kruise); do
    mkns "e2e-lat-$key"
    kc label namespace "e2e-lat-$key" "e2e-floor=$key" >/dev/null
done
latency_our_patch e2e-lat-none e2e-lat-ours "https://localhost:$PORT/mutate-pod" "$WORK/server-certs/ca.crt" "$WORK/our-patch.json" \
    || die "no patch from /mutate-pod for the latency pod"
echo "our patch: $(jq length "$WORK/our-patch.json") operations, $(wc -c <"$WORK/our-patch.json") bytes"
register_floor e2e-bench-ours 0 ours "https://localhost:$PORT/mutate-pod" "$WORK/server-certs/ca.crt"
start_floor patch patch "$WORK/our-patch.json"
WEBHOOK_PID[patch]=$SPAWNED
register_floor e2e-bench-patch "$FLOOR_PORT" patch
start_floor allow allow
WEBHOOK_PID[allow]=$SPAWNED
register_floor e2e-bench-allow "$FLOOR_PORT" allow

# The pod each namespace's creates send, written once: the latency pod, and for "injected" the pod
# with the sidecar already in it.
for key in "${KEYS[@]}"; do
    if [ "$key" = injected ]; then
        latency_pod "e2e-lat-$key" | "$BIN" inject --cluster-dir "$WORK/cluster" -o json - >"$WORK/pod-$key.json"
    else
        latency_pod "e2e-lat-$key" >"$WORK/pod-$key.json"
    fi
done

# creates NAME KEY COUNT h2load-flags...: COUNT pod CREATEs of WORK/pod-KEY.json in e2e-lat-KEY;
# h2load's output in OUT/NAME.txt; fails unless every one was created.
creates() {
    local name=$1 key=$2 count=$3
    shift 3
    "$H2LOAD" -n "$count" "$@" -d "$WORK/pod-$key.json" -H "authorization: Bearer $ADMIN_TOKEN" \
        -H 'content-type: application/json' "https://127.0.0.1:$APISERVER_PORT/api/v1/namespaces/e2e-lat-$key/pods" \
        >"$OUT/$name.txt"
    grep -q "status codes: $count 2xx" "$OUT/$name.txt" \
        || die "not every create in e2e-lat-$key succeeded: $(grep -E 'status codes|requests:' "$OUT/$name.txt" | tr '\n' ' ')"
}
sequential() { creates "seq-$1-$2" "$1" "$PODS" -c 1 -m 1; }
# shellcheck source=benches/support/cpu.sh
source benches/support/cpu.sh
# burst KEY ROUND: BURST creates from CONCURRENCY connections; OUT/cpu-KEY-ROUND.txt holds the ticks
# that kube-apiserver, etcd and the namespace's webhook (0 for none) spent meanwhile, one per line.
burst() {
    local pids=("$APISERVER_PID" "$ETCD_PID" "${WEBHOOK_PID[$1]:-}") before after i
    mapfile -t before < <(cpu_ticks "${pids[@]}")
    creates "burst-$1-$2" "$1" "$BURST" -c "$CONCURRENCY" -m 1
    mapfile -t after < <(cpu_ticks "${pids[@]}")
    for i in 0 1 2; do echo $((after[i] - before[i])); done >"$OUT/cpu-$1-$2.txt"
}

# direct KEY ROUND (KRUISE=1, ours and kruise): the latency pod's AdmissionReview sent to the webhook
# itself, REVIEWS times on one connection, then on CONCURRENCY (HTTP/1.1: Kruise's server and ours
# alike); kruise-manager is asked inside its network namespace, with no relay in between.
direct() {
    local key=$1 r=$2 c url run=()
    case $key in
    ours) run=("$H2LOAD") url="https://127.0.0.1:$PORT/mutate-pod" ;;
    kruise) run=("${KM_NS[@]}" "$H2LOAD") url="https://127.0.0.1:$KM_WEBHOOK_PORT/mutate-pod" ;;
    *) return 0 ;;
    esac
    for c in 1 "$CONCURRENCY"; do
        "${run[@]}" --h1 -n "$REVIEWS" -c "$c" -d "$WORK/latency-review.json" -H 'content-type: application/json' "$url" \
            >"$OUT/direct-$key-c$c-$r.txt"
        grep -q "status codes: $REVIEWS 2xx" "$OUT/direct-$key-c$c-$r.txt" \
            || die "not every review to $key was answered 200: $(grep -E 'status codes|requests:' "$OUT/direct-$key-c$c-$r.txt" | tr '\n' ' ')"
    done
}
then_burst() { burst "$1" "$2"; [ "$KRUISE" != 1 ] || direct "$1" "$2"; }

say "warming up: 20 creates per namespace"
for key in "${KEYS[@]}"; do creates "warm-$key" "$key" 20 -c 1 -m 1; done
[ "$(latency_stored_pod e2e-lat-ours)" = "$(latency_stored_pod e2e-lat-patch)" ] \
    || die "the patch floor's pods differ from ours: $(diff <(latency_stored_pod e2e-lat-ours) <(latency_stored_pod e2e-lat-patch) | head -20)"
echo "the patch floor's pods equal ours (containers, volumes, labels, annotations)"

say "$ROUNDS rounds: $PODS creates one at a time, then $BURST from $CONCURRENCY connections, per namespace"
latency_rounds "$ROUNDS" sequential then_burst -- "${KEYS[@]}"
# The resident memory of each webhook process at the end (VmRSS) and at its peak (VmHWM), in KiB.
for key in "${!WEBHOOK_PID[@]}"; do
    awk -v k="$key" '$1 == "VmRSS:" {rss = $2} $1 == "VmHWM:" {hwm = $2} END {print k, rss, hwm}' "/proc/${WEBHOOK_PID[$key]}/status"
done >"$OUT/rss.txt"

# --- the report ----------------------------------------------------------------------------------------
for r in $(seq "$ROUNDS"); do
    for key in ours patch allow $([ "$KRUISE" = 1 ] && echo kruise); do
        webhook=$key.e2e.kruise-admission.dev
        [ "$key" != kruise ] || webhook=mpod.kb.io
        latency_summary "$webhook" "$key" "$r" | jq -c --arg key "$key" --argjson r "$r" '. + {key: $key, round: $r}'
    done
done >"$OUT/histogram.jsonl"
"$PYTHON" - "$OUT" "$ROUNDS" "$PODS" "$BURST" "$CONCURRENCY" "$(getconf CLK_TCK)" "$KRUISE" "$SIDECARSETS" "$SELECTING" <<'EOF' | tee "$OUT/apiserver.md"
import json, re, statistics, sys
out, rounds, pods, burst, conc, tck = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6], int(sys.argv[6])
kruise, sidecarsets, selecting = sys.argv[7] == "1", *sys.argv[8:10]
mean = {(h["round"], h["key"]): h["mean_ms"] for h in map(json.loads, open(f"{out}/histogram.jsonl"))}
count = {(h["round"], h["key"]): h["count"] for h in map(json.loads, open(f"{out}/histogram.jsonl"))}
def h2(name):
    text = open(f"{out}/{name}.txt").read()
    rate = float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", text).group(1))
    m = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", text).group(3)
    ms = float(m[:-2]) if m.endswith("ms") else float(m[:-2]) / 1000 if m.endswith("us") else float(m[:-1]) * 1000
    return rate, ms
ratios = {"ours/patch": [], "ours/allow": [], "creates ours/none": [], "creates patch/none": [],
          "creates ours/injected": [], "creates injected/none": []}
print("| round | webhook mean: ours | patch floor | allow floor | ours / patch | ours / allow "
      "| create, one at a time: ours / none (ms) | creates/s: ours | patch floor | none | injected "
      "| ours / none | ours / injected |")
print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
for r in range(1, rounds + 1):
    for k in ("ours", "patch", "allow"):
        assert count[(r, k)] == int(pods), f"round {r} {k}: {count[(r, k)]} calls in the histogram, not {pods}"
    o, p, a = (mean[(r, k)] for k in ("ours", "patch", "allow"))
    rate = {k: h2(f"burst-{k}-{r}")[0] for k in ("ours", "patch", "none", "injected")}
    seq = {k: h2(f"seq-{k}-{r}")[1] for k in ("ours", "none")}
    ratios["ours/patch"].append(o / p)
    ratios["ours/allow"].append(o / a)
    ratios["creates ours/none"].append(rate["ours"] / rate["none"])
    ratios["creates patch/none"].append(rate["patch"] / rate["none"])
    ratios["creates ours/injected"].append(rate["ours"] / rate["injected"])
    ratios["creates injected/none"].append(rate["injected"] / rate["none"])
    print(f"| {r} | {o:.2f} ms | {p:.2f} ms | {a:.2f} ms | {o / p:.2f} | {o / a:.2f} "
          f"| {seq['ours']:.2f} / {seq['none']:.2f} | {rate['ours']:.0f} | {rate['patch']:.0f} | {rate['none']:.0f} "
          f"| {rate['injected']:.0f} | {rate['ours'] / rate['none']:.2f} | {rate['ours'] / rate['injected']:.2f} |")
print()
print("medians over the rounds: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in ratios.items()))
# CPU per create in the bursts: the medians over the rounds, in ms, per process.
def cpu(key, r):
    return [int(t) * 1000 / tck / int(burst) for t in open(f"{out}/cpu-{key}-{r}.txt").read().split()]
print("\nCPU per create in the bursts (ms, median over the rounds):")
print("| webhook | kube-apiserver | etcd | the webhook | total |")
print("|---|---:|---:|---:|---:|")
cpu_med = {}
for key in ("ours", "patch", "allow", "none", "injected") + (("kruise",) if kruise else ()):
    per_round = [cpu(key, r) for r in range(1, rounds + 1)]
    med = cpu_med[key] = [statistics.median(column) for column in zip(*per_round)]
    print(f"| {key} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {sum(med):.2f} |")
if kruise:
    # ours / kruise-manager, per round: the API server's mean call, creates/s in the bursts, and the
    # direct review rates on one connection and on conc.
    vs = {"call": [], "creates/s": [], "direct c=1": [], f"direct c={conc}": []}
    print(f"\nagainst kruise-manager v1.9.1 ({sidecarsets} SidecarSets, {selecting} selecting the pod):")
    print(f"| round | call: ours | kruise-manager | ours / kruise | creates/s: ours | kruise | reviews/s c=1: ours | kruise | c={conc}: ours | kruise |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in range(1, rounds + 1):
        o, k = mean[(r, "ours")], mean[(r, "kruise")]
        co, ck = h2(f"burst-ours-{r}")[0], h2(f"burst-kruise-{r}")[0]
        d = {(key, c): h2(f"direct-{key}-c{c}-{r}")[0] for key in ("ours", "kruise") for c in ("1", conc)}
        vs["call"].append(o / k)
        vs["creates/s"].append(co / ck)
        vs["direct c=1"].append(d[("ours", "1")] / d[("kruise", "1")])
        vs[f"direct c={conc}"].append(d[("ours", conc)] / d[("kruise", conc)])
        print(f"| {r} | {o:.2f} ms | {k:.2f} ms | {o / k:.2f} | {co:.0f} | {ck:.0f} | {d[('ours', '1')]:.0f} "
              f"| {d[('kruise', '1')]:.0f} | {d[('ours', conc)]:.0f} | {d[('kruise', conc)]:.0f} |")
    rss = {k: (int(a) / 1024, int(b) / 1024) for k, a, b in (line.split() for line in open(f"{out}/rss.txt"))}
    print("\nmedians of the per-round ratios ours / kruise-manager: " + ", ".join(f"{k} {statistics.median(v):.2f}" for k, v in vs.items())
          + "; webhook CPU per create " + (f"{cpu_med['ours'][2] / cpu_med['kruise'][2]:.2f}" if cpu_med['kruise'][2] else "n/a")
          + f" ({cpu_med['ours'][2]:.3f} / {cpu_med['kruise'][2]:.3f} ms)")
    print(f"RSS at the end (peak): ours {rss['ours'][0]:.0f} MiB ({rss['ours'][1]:.0f}), kruise-manager {rss['kruise'][0]:.0f} MiB ({rss['kruise'][1]:.0f})")
print(f"\n{rounds} rounds; per round and namespace {pods} creates one at a time, then {burst} from {conc} connections")
EOF
echo "kube-apiserver $E2E_VERSION, Go floor $(go env GOVERSION), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)" \
    | tee -a "$OUT/apiserver.md"
