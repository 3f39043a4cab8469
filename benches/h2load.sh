#!/usr/bin/env bash
# End to end with h2load (issue 20.3; results in docs/PERFORMANCE.md): the release `serve` against
# the Go floor (benches/go-floor: net/http + encoding/json, decode, allow) in one run, over TLS on
# 127.0.0.1, HTTP/1.1 (`h2load --h1`) and HTTP/2, then the latency of `/mutate-pod` (and of the Go
# floor) at half of our measured HTTP/1.1 maximum, from independent clients (below).
#
# The servers are measured in alternation, ROUNDS times (Go h1, ours h1, Go h2, ours h2, ...), so a
# change in what else this machine runs hits both sides of each ratio; every round prints its own
# ratios. h2load has no percentiles of its own: each run writes a per-request log (`--log-file`:
# start, status, microseconds to the end of the response) and p50/p99/p99.9 are computed from it.
# The half-rate runs are not latency-corrected: h2load sends at the set rate per connection and times
# each request from when it was sent (oha's --latency-correction in benches/load.sh also counts the
# time a request waited to be sent).
#
# Latency comes from LATENCY_CLIENTS independent clients, each its own h2load process with one
# connection, started at a random moment. One h2load process with N connections and --rps fires all N
# on the same timer tick: N requests arrive together, the last waits for the other N-1, and p99 measures
# that burst (3.2 ms at 5,000 req/s over 16 connections against 1.4 ms from 4 independent clients at the
# same rate, 2026-12-02). An apiserver's webhook calls come from independent pod creations: interleaved.
#
# With KRUISE=1, OpenKruise's kruise-manager v1.9.1 joins as a third server (benches/support/kruise_peer.sh:
# etcd and kube-apiserver on 127.0.0.1, kruise-manager in a network namespace of its own as the
# end-to-end suite runs it). The SidecarSets are then SETS created through Kruise's webhooks, SELECTING
# of them selecting the pod, and ours reads them as Kruise stored them; every server gets the same
# review, the pod `benches/apiserver.sh` creates (POD is not used), and kruise-manager is driven by
# h2load inside its namespace. Each round adds kruise-manager's h1 and h2 runs and the ratios ours /
# kruise-manager. The half-rate latency runs stay ours and the Go floor's (kruise-manager's maximum is
# below half of ours).
#
# With PIN=1 the servers and the client stop sharing cores: every server process (all its threads) is
# pinned to CPU 0 once started and every h2load runs on CPU 1 (taskset), with the cluster's processes,
# so a server's requests/s is what one core gives it, not what is left after the client's share. Each
# server runs the threads its runtime would start in a Pod with a CPU limit of one core or less: ours
# one tokio worker (TOKIO_WORKER_THREADS=1; std's available_parallelism reads the cgroup's cpu.max,
# so our chart's 500m limit gives one), Go GOMAXPROCS 2 (Go reads cpu.max too, with a floor of 2,
# which is also the CPU count here). The kernel's loopback work is charged to whichever side sends,
# as without pinning.
#
# Usage: benches/h2load.sh      (about ROUNDS × 45 s + 15 s after the build; KRUISE=1 adds ROUNDS × 20 s
#        and a minute of setup)
# Knobs: DURATION=10 (seconds per run) ROUNDS=3 CONNECTIONS=16 H2_CONNECTIONS=2 H2_STREAMS=8 SETS=1000
#        LATENCY_CLIENTS="4 16" (one half-rate run per count, for each server)
#        POD=typical (small|typical|largest|env2000) OUT=<cargo target dir>/h2load
#        H2LOAD=path (else h2load from PATH, else Debian's nghttp2-client unpacked under OUT)
#        BIN=path TOOL=path (the `kruise-admission` and `bench-tool` to measure, e.g. an earlier build kept
#        aside for a before/after run; else cargo builds this tree's release binaries)
#        PIN=1 (servers on CPU 0, h2load on CPU 1; needs taskset and 2 CPUs)
#        KRUISE=1 SELECTING=1 (kruise-manager as a third server; needs root, socat, Go, kubectl, jq, python3
#        with PyYAML; E2E_VERSION picks the kube-apiserver, default the newest of tests/e2e/kube/VERSIONS)
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/cargo-paths.sh
TARGET=$(cargo_target_dir)
OUT=${OUT:-$TARGET/h2load}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=${CONNECTIONS:-16}
H2_CONNECTIONS=${H2_CONNECTIONS:-2}
H2_STREAMS=${H2_STREAMS:-8}
LATENCY_CLIENTS=${LATENCY_CLIENTS:-4 16}
SETS=${SETS:-1000}
KRUISE=${KRUISE:-0}
SELECTING=${SELECTING:-1}
POD=${POD:-typical}
PIN=${PIN:-0}
PORT=${PORT:-19543}
GO_PORT=$((PORT + 1))
METRICS_PORT=$((PORT + 2))
mkdir -p "$OUT"
. benches/support/servers.sh

. benches/support/h2load-tool.sh
. benches/support/cpu.sh

# --- build ---------------------------------------------------------------------------------------
say "building release binaries (cargo build --release) and the Go floor"
BIN=${BIN:-$(cargo_exe kruise-admission --release --bin kruise-admission)}
TOOL=${TOOL:-$(cargo_exe bench-tool --release --example bench-tool)}
build_go_floor
REVIEW=$OUT/review-$POD.json
if [ "$KRUISE" = 1 ]; then
    # The cluster kruise-manager needs, with the e2e suite's helpers (they replace servers.sh's `say`
    # and stop every process they start, ours included, on exit).
    E2E=$PWD/tests/e2e WORK=$OUT/work PYTHON=${PYTHON:-python3}
    EXTRA_APISERVER_FLAGS=()
    # shellcheck source=tests/e2e/lib.sh
    source "$E2E/lib.sh"
    # shellcheck source=tests/e2e/latency_lib.sh
    source "$E2E/latency_lib.sh"
    # shellcheck source=benches/support/kruise_peer.sh
    source benches/support/kruise_peer.sh
    PATH=$PATH:${MANIFESTS_TOOLS_DIR:-$TARGET/manifests-tools}
    { read -r KUBE_APISERVER; read -r ETCD; } < <(bash "$E2E/kube-binaries.sh" "${E2E_VERSION:-$(grep -m1 '^v' "$E2E/kube/VERSIONS")}")
    rm -rf "$WORK" && mkdir -p "$WORK/logs"
    trap 'peer_wake; e2e_cleanup; cleanup' EXIT
    start_etcd
    start_apiserver
    mkns e2e-lat-none e2e-lat-ours
    kruise_peer "$SETS" "$SELECTING" "$WORK/cluster"
    CLUSTER=$WORK/cluster
else
    "$TOOL" review "$POD" >"$REVIEW"
    cluster_folder "$SETS"
    CLUSTER=$OUT/cluster-$SETS
fi

# --- servers: ours (its own embedded CA and certificate) and the Go floor with the same certificate
# One tokio worker, as in a Pod with our chart's CPU limit (see PIN above).
if [ "$PIN" = 1 ]; then TOKIO_WORKER_THREADS=1 serve "$CLUSTER"; else serve "$CLUSTER"; fi
if [ "$KRUISE" = 1 ]; then
    REVIEW=$OUT/review-kruise.json
    latency_our_patch e2e-lat-none e2e-lat-ours "https://localhost:$PORT/mutate-pod" "$OUT/certs/ca.crt" "$WORK/our-patch.json" \
        || die "no patch from ours for the pod the SidecarSets select"
    cp "$WORK/latency-review.json" "$REVIEW"
fi
"$OUT/go-floor" "$OUT/certs/tls.crt" "$OUT/certs/tls.key" "127.0.0.1:$GO_PORT" allow 2>"$OUT/go-floor.log" &
GO_PID=$!
PIDS+=("$GO_PID")
wait_tls "$GO_PORT"
CLIENT_PIN=()
if [ "$PIN" = 1 ]; then
    if [ "$(nproc)" -lt 2 ]; then
        echo "PIN=1 needs 2 CPUs; this machine has $(nproc)" >&2
        exit 2
    fi
    # What else runs (etcd, kube-apiserver and kruise-manager's relays with KRUISE=1) goes with the
    # client, so that CPU 0 holds only the servers.
    for pid in "${PIDS[@]}"; do
        taskset -a -p -c 1 "$pid" >/dev/null 2>&1 || true
    done
    for pid in "$SERVE_PID" "$GO_PID" ${KM_PID:+"$KM_PID"}; do
        taskset -a -p -c 0 "$pid" >/dev/null
    done
    CLIENT_PIN=(taskset -c 1)
fi

# percentiles NAME LOG...: one line with the rate (the sum of the runs' own), p50/p99/p99.9 over every
# request of the logs (start, status, microseconds to the end of the response), and the outcomes;
# the rate is kept in OUT/NAME.rate.
percentiles() {
    python3 - "$OUT/$1" "${@:2}" <<'EOF'
import re, sys
base, logs = sys.argv[1], sys.argv[2:]
rate, done, codes = 0.0, [0] * 4, [0] * 4
for log in logs:
    text = open(log[: -len(".log")] + ".txt").read()
    rate += float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", text).group(1))
    for acc, pattern in ((done, r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout"),
                         (codes, r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx")):
        for i, n in enumerate(re.search(pattern, text).groups()):
            acc[i] += int(n)
times = sorted(int(line.split("\t")[2]) for log in logs for line in open(log) if line.strip())
pct = lambda q: times[min(len(times) - 1, int(q * len(times)))] / 1e3
print(f"{base.rsplit('/', 1)[1]:<22} {rate:>9.0f} req/s  p50 {pct(0.50):7.3f} ms  p99 {pct(0.99):7.3f} ms  "
      f"p99.9 {pct(0.999):7.3f} ms  succeeded/failed/errored/timeout {'/'.join(map(str, done))}  "
      f"2xx {codes[0]}, 5xx {codes[3]}")
open(base + ".rate", "w").write(f"{rate}\n")
EOF
}

# h2load_run NAME URL [h2load flags]: one h2load process (inside kruise-manager's network namespace
# for a URL of kruise-manager's), its output in OUT/NAME.txt and its per-request log in OUT/NAME.log.
h2load_run() {
    local name=$1 url=$2 inside=()
    shift 2
    [ "$name" = "${name#kruise-}" ] || inside=("${KM_NS[@]}")
    rm -f "$OUT/$name.log"
    "${inside[@]}" "${CLIENT_PIN[@]}" "$H2LOAD" -D "$DURATION" --warm-up-time=1 "$@" -d "$REVIEW" \
        -H 'content-type: application/json' --log-file="$OUT/$name.log" "$url" >"$OUT/$name.txt"
}

# peer_pause / peer_wake: kruise-manager's controllers keep working in the background (its SidecarSet
# controller, its caches); it is stopped (SIGSTOP) while another server is measured, so that work
# does not take the measured server's CPU, and woken for its own runs. Nothing without KRUISE=1.
peer_pause() { if [ -n "${KM_PID:-}" ]; then kill -STOP "$KM_PID"; fi; }
peer_wake() { if [ -n "${KM_PID:-}" ]; then kill -CONT "$KM_PID" 2>/dev/null || true; fi; }

# run NAME URL h1|h2 PID: one throughput run over CONNECTIONS (HTTP/1.1) or H2_CONNECTIONS × H2_STREAMS,
# and the CPU per request of the server PID (its ticks over the requests h2load counted, in µs; the
# ticks include the 1 s warm-up, the same share for every server), kept in OUT/NAME.cpu: the work the
# server did, which the client's share of the 2 cores does not cap.
run() {
    local name=$1 url=$2 http=$3 pid=$4 before after
    [ "$pid" = "${KM_PID:-}" ] || peer_pause
    local proto=(--h1 -c "$CONNECTIONS" -m 1)
    [ "$http" = h2 ] && proto=(-c "$H2_CONNECTIONS" -m "$H2_STREAMS")
    before=$(cpu_ticks "$pid")
    h2load_run "$name" "$url" "${proto[@]}"
    after=$(cpu_ticks "$pid")
    peer_wake
    percentiles "$name" "$OUT/$name.log"
    python3 - "$OUT/$name" "$((after - before))" "$(getconf CLK_TCK)" <<'EOF'
import re, sys
base, ticks, tck = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", open(base + ".txt").read()).group(1))
cpu = ticks * 1e6 / tck / max(done, 1)
open(base + ".cpu", "w").write(f"{cpu}\n")
print(f"{'':<22} server CPU {cpu:.1f} µs per request")
EOF
}

# latency NAME URL CLIENTS RATE: CLIENTS independent one-connection HTTP/1.1 clients at RATE req/s
# each, in parallel, each started at a random moment within a tenth of a second (many of its periods).
latency() {
    local name=$1 url=$2 clients=$3 rate=$4 k pids=() logs=()
    for k in $(seq "$clients"); do
        h2load_run "$name.$k" "$url" --h1 -c 1 -m 1 --rps="$rate" &
        pids+=($!)
        logs+=("$OUT/$name.$k.log")
        sleep "0.0$((RANDOM % 10))$((RANDOM % 10))"
    done
    wait "${pids[@]}"
    percentiles "$name" "${logs[@]}"
}

# ratio WHAT A B: one line, "round R PROTO: WHAT = A/B" from two figure files (round and http: the
# loop's), also kept in OUT/ratios.tsv for the medians at the end.
: >"$OUT/ratios.tsv"
ratio() {
    local line
    line=$(python3 -c "import sys; a, b = (float(open(f).read()) for f in sys.argv[2:]); print(f'round $round $http: {sys.argv[1]} = {a / b:.2f}x')" "$@")
    echo "$line"
    sed -E 's/^round [0-9]+ (h[12]): (.*) = (.*)x$/\1 \2\t\3/' <<<"$line" >>"$OUT/ratios.tsv"
}

OURS=https://127.0.0.1:$PORT/mutate-pod
GOF=https://127.0.0.1:$GO_PORT/floor
for round in $(seq "$ROUNDS"); do
    for http in h1 h2; do
        say "round $round, $http, ${DURATION}s each"
        run "go-$http-$round" "$GOF" "$http" "$GO_PID"
        run "ours-$http-$round" "$OURS" "$http" "$SERVE_PID"
        ratio "ours / Go floor, requests/s" "$OUT/ours-$http-$round.rate" "$OUT/go-$http-$round.rate"
        if [ "$KRUISE" = 1 ]; then
            run "kruise-$http-$round" "https://127.0.0.1:$KM_WEBHOOK_PORT/mutate-pod" "$http" "$KM_PID"
            ratio "ours / kruise-manager, requests/s" "$OUT/ours-$http-$round.rate" "$OUT/kruise-$http-$round.rate"
            ratio "kruise-manager / ours, server CPU per request" "$OUT/kruise-$http-$round.cpu" "$OUT/ours-$http-$round.cpu"
        fi
    done
done

say "medians of the per-round ratios"
python3 - "$OUT/ratios.tsv" <<'EOF'
import statistics, sys
ratios = {}
for line in open(sys.argv[1]):
    what, value = line.rstrip("\n").split("\t")
    ratios.setdefault(what, []).append(float(value))
for what, values in ratios.items():
    print(f"{what}: {statistics.median(values):.2f}x (rounds {', '.join(f'{v:.2f}' for v in values)})")
EOF

# Half of our best HTTP/1.1 rate of this run, from independent clients (see the top).
HALF=$(python3 -c "import sys; print(max(float(open(f).read()) for f in sys.argv[1:]) / 2)" "$OUT"/ours-h1-[0-9]*.rate)
for clients in $LATENCY_CLIENTS; do
    PER=$(python3 -c "import math; print(max(1, math.ceil($HALF / $clients)))")
    say "latency at half of our maximum: $((PER * clients)) req/s from $clients independent HTTP/1.1 clients"
    peer_pause
    latency "ours-h1-half-$clients" "$OURS" "$clients" "$PER"
    latency "go-h1-half-$clients" "$GOF" "$clients" "$PER"
    peer_wake
done
