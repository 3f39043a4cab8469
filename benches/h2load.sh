#!/usr/bin/env bash
# End to end with h2load (issue 20.3; results in docs/PERFORMANCE.md): the release `serve` against
# the Go floor (benches/go-floor: net/http + encoding/json, decode, allow) in one run, over TLS on
# 127.0.0.1, HTTP/1.1 (`h2load --h1`) and HTTP/2, then the latency of `/mutate-pod` at half of its
# measured HTTP/1.1 maximum (`h2load --rps`).
#
# The servers are measured in alternation, ROUNDS times (Go h1, ours h1, Go h2, ours h2, ...), so a
# change in what else this machine runs hits both sides of each ratio; every round prints its own
# ratios. h2load has no percentiles of its own: each run writes a per-request log (`--log-file`:
# start, status, microseconds to the end of the response) and p50/p99/p99.9 are computed from it.
# The half-rate run is not latency-corrected: h2load sends at the set rate per connection and times
# each request from when it was sent (oha's --latency-correction in benches/load.sh also counts the
# time a request waited to be sent).
#
# Usage: benches/h2load.sh      (about ROUNDS × 45 s + 15 s after the build)
# Knobs: DURATION=10 (seconds per run) ROUNDS=3 CONNECTIONS=16 H2_CONNECTIONS=2 H2_STREAMS=8 SETS=1000
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
SETS=${SETS:-1000}
POD=${POD:-typical}
PORT=${PORT:-19543}
GO_PORT=$((PORT + 1))
METRICS_PORT=$((PORT + 2))
GO=${GO:-/usr/lib/go-1.19/bin/go}
mkdir -p "$OUT"
. benches/support/servers.sh

# --- h2load: from PATH, or Debian's package unpacked here (no root needed) -------------------------
if [ -n "${H2LOAD:-}" ]; then
    :
elif command -v h2load >/dev/null; then
    H2LOAD=$(command -v h2load)
else
    if [ ! -x "$OUT/nghttp2/usr/bin/h2load" ]; then
        say "unpacking Debian's nghttp2-client (h2load) under $OUT/nghttp2"
        rm -rf "$OUT/debs" && mkdir -p "$OUT/debs"
        (cd "$OUT/debs" && apt-get download nghttp2-client libnghttp2-14 libev4 libjemalloc2)
        for deb in "$OUT"/debs/*.deb; do dpkg -x "$deb" "$OUT/nghttp2"; done
    fi
    H2LOAD=$OUT/nghttp2/usr/bin/h2load
    export LD_LIBRARY_PATH="$OUT/nghttp2/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$H2LOAD" --version

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

# run NAME URL h1|h2 [h2load flags]: one h2load run; prints one line and keeps the log in OUT/NAME.*.
run() {
    local name=$1 url=$2 http=$3
    shift 3
    local proto=(--h1 -c "$CONNECTIONS" -m 1)
    [ "$http" = h2 ] && proto=(-c "$H2_CONNECTIONS" -m "$H2_STREAMS")
    rm -f "$OUT/$name.log"
    "$H2LOAD" -D "$DURATION" --warm-up-time=1 "${proto[@]}" "$@" -d "$OUT/review-$POD.json" \
        -H 'content-type: application/json' --log-file="$OUT/$name.log" "$url" >"$OUT/$name.txt"
    python3 - "$OUT/$name" <<'EOF'
import re, sys
base = sys.argv[1]
text = open(base + ".txt").read()
rate = float(re.search(r"finished in [\d.]+\w*, ([\d.]+) req/s", text).group(1))
done = re.search(r"requests: .* (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text).groups()
codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text).groups()
times = sorted(int(line.split("\t")[2]) for line in open(base + ".log") if line.strip())
pct = lambda q: times[min(len(times) - 1, int(q * len(times)))] / 1e3
print(f"{base.rsplit('/', 1)[1]:<22} {rate:>9.0f} req/s  p50 {pct(0.50):7.3f} ms  p99 {pct(0.99):7.3f} ms  "
      f"p99.9 {pct(0.999):7.3f} ms  succeeded/failed/errored/timeout {'/'.join(done)}  2xx {codes[0]}, 5xx {codes[3]}")
open(base + ".rate", "w").write(f"{rate}\n")
EOF
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

# Half of our best HTTP/1.1 rate of this run, spread over the connections (--rps is per connection).
HALF=$(python3 -c "import sys; print(max(float(open(f).read()) for f in sys.argv[1:]) / 2)" "$OUT"/ours-h1-*.rate)
PER=$(python3 -c "import math; print(max(1, math.ceil($HALF / $CONNECTIONS)))")
say "latency at half of our maximum: $((PER * CONNECTIONS)) req/s over $CONNECTIONS HTTP/1.1 connections"
run "ours-h1-half" "$OURS" h1 --rps="$PER"
run "go-h1-half" "$GOF" h1 --rps="$PER"
