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
# Usage: benches/h2load.sh      (about ROUNDS × 45 s + 15 s after the build)
# Knobs: DURATION=10 (seconds per run) ROUNDS=3 CONNECTIONS=16 H2_CONNECTIONS=2 H2_STREAMS=8 SETS=1000
#        LATENCY_CLIENTS="4 16" (one half-rate run per count, for each server)
#        POD=typical (small|typical|largest|env2000) OUT=<cargo target dir>/h2load
#        H2LOAD=path (else h2load from PATH, else Debian's nghttp2-client unpacked under OUT)
#        BIN=path TOOL=path (the `kruise-admission` and `bench-tool` to measure, e.g. an earlier build kept
#        aside for a before/after run; else cargo builds this tree's release binaries)
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
POD=${POD:-typical}
PORT=${PORT:-19543}
GO_PORT=$((PORT + 1))
METRICS_PORT=$((PORT + 2))
mkdir -p "$OUT"
. benches/support/servers.sh

. benches/support/h2load-tool.sh

# --- build ---------------------------------------------------------------------------------------
say "building release binaries (cargo build --release) and the Go floor"
BIN=${BIN:-$(cargo_exe kruise-admission --release --bin kruise-admission)}
TOOL=${TOOL:-$(cargo_exe bench-tool --release --example bench-tool)}
build_go_floor
"$TOOL" review "$POD" >"$OUT/review-$POD.json"
cluster_folder "$SETS"

# --- servers: ours (its own embedded CA and certificate) and the Go floor with the same certificate
serve "$OUT/cluster-$SETS"
"$OUT/go-floor" "$OUT/certs/tls.crt" "$OUT/certs/tls.key" "127.0.0.1:$GO_PORT" allow 2>"$OUT/go-floor.log" &
PIDS+=($!)
wait_tls "$GO_PORT"

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

# h2load_run NAME URL [h2load flags]: one h2load process, its output in OUT/NAME.txt and its
# per-request log in OUT/NAME.log.
h2load_run() {
    local name=$1 url=$2
    shift 2
    rm -f "$OUT/$name.log"
    "$H2LOAD" -D "$DURATION" --warm-up-time=1 "$@" -d "$OUT/review-$POD.json" \
        -H 'content-type: application/json' --log-file="$OUT/$name.log" "$url" >"$OUT/$name.txt"
}

# run NAME URL h1|h2: one throughput run over CONNECTIONS (HTTP/1.1) or H2_CONNECTIONS × H2_STREAMS.
run() {
    local name=$1 url=$2 http=$3
    local proto=(--h1 -c "$CONNECTIONS" -m 1)
    [ "$http" = h2 ] && proto=(-c "$H2_CONNECTIONS" -m "$H2_STREAMS")
    h2load_run "$name" "$url" "${proto[@]}"
    percentiles "$name" "$OUT/$name.log"
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

OURS=https://127.0.0.1:$PORT/mutate-pod
GOF=https://127.0.0.1:$GO_PORT/floor
for round in $(seq "$ROUNDS"); do
    for http in h1 h2; do
        say "round $round, $http, ${DURATION}s each"
        run "go-$http-$round" "$GOF" "$http"
        run "ours-$http-$round" "$OURS" "$http"
        python3 -c "import sys; o, g = (float(open(f).read()) for f in sys.argv[1:]); print(f'round $round $http: ours / Go floor = {o / g:.2f}x')" \
            "$OUT/ours-$http-$round.rate" "$OUT/go-$http-$round.rate"
    done
done

# Half of our best HTTP/1.1 rate of this run, from independent clients (see the top).
HALF=$(python3 -c "import sys; print(max(float(open(f).read()) for f in sys.argv[1:]) / 2)" "$OUT"/ours-h1-[0-9]*.rate)
for clients in $LATENCY_CLIENTS; do
    PER=$(python3 -c "import math; print(max(1, math.ceil($HALF / $clients)))")
    say "latency at half of our maximum: $((PER * clients)) req/s from $clients independent HTTP/1.1 clients"
    latency "ours-h1-half-$clients" "$OURS" "$clients" "$PER"
    latency "go-h1-half-$clients" "$GOF" "$clients" "$PER"
done
