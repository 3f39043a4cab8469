#!/usr/bin/env bash
# End-to-end load bench of kruise-admission (issue 10; results in docs/PERFORMANCE.md).
#
# Builds the release binaries, starts on 127.0.0.1, each with the same certificate:
#   - `kruise-admission serve` (its embedded CA and serving certificate, --cluster-dir with SETS
#     generated SidecarSets of which 3 match the typical pod),
#   - our floor: the server's own stack with a trivial webhook that decodes the review and allows
#     (`bench-tool floor`, benches/support/bench_tool.rs),
#   - the Go floor: net/http + encoding/json, decode into a struct, allow (benches/go-floor/),
# and drives each with oha over verified TLS (--cacert), keep-alive, HTTP/1.1 and HTTP/2, in the
# same run, so the ratios compare like with like on whatever else this machine is doing. Then the
# p99 at half of the maximum throughput, RSS with 0/1k/5k/10k SidecarSets, and a plot.
#
# Usage: benches/load.sh            (about 4 minutes after the build)
# Knobs: DURATION=10s CONNECTIONS=16 H2_CONNECTIONS=2 H2_STREAMS=8 SETS=1000
#        OUT=<cargo target dir>/load (results; every file is written whole or not at all)
#        SKIP_DECIDE=1 (no criterion run for the decide plot)
#        SKIP_BUILD=1 (the Go floor is not rebuilt; cargo still brings the Rust binaries up to date, a no-op
#        when they are, and names their paths)
#        SKIP_THROUGHPUT=1 (only memory and latency against SidecarSets; the summary shows an earlier run's
#        throughput when OUT holds one)
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/cargo-paths.sh
TARGET=$(cargo_target_dir)
OUT=${OUT:-$TARGET/load}
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-16}
H2_CONNECTIONS=${H2_CONNECTIONS:-2}
H2_STREAMS=${H2_STREAMS:-8}
SETS=${SETS:-1000}
PORT=${PORT:-19443}
FLOOR_PORT=$((PORT + 1))
GO_PORT=$((PORT + 2))
METRICS_PORT=$((PORT + 3))
mkdir -p "$OUT"
. benches/support/servers.sh

# into FILE CMD...: run CMD with its stdout going to FILE, which appears only when CMD succeeds
# (a failed or interrupted run never leaves a truncated result for a later summary to read).
into() {
    local file=$1
    shift
    "$@" >"$file.tmp.$$" && mv -f "$file.tmp.$$" "$file" || { local rc=$?; rm -f "$file.tmp.$$"; return "$rc"; }
}

# --- prerequisites -------------------------------------------------------------------------------
if ! command -v oha >/dev/null; then
    say "installing oha (the one load generator with --cacert)"
    cargo install oha --locked
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
    python3 -m pip install --quiet matplotlib
fi

# --- build -----------------------------------------------------------------------------------------
# cargo_exe builds (a no-op when up to date) and names the binary wherever the target directory is.
say "building release binaries (cargo build --release)"
BIN=$(cargo_exe kruise-admission --release --bin kruise-admission)
TOOL=$(cargo_exe bench-tool --release --example bench-tool)
if [ -z "${SKIP_BUILD:-}" ]; then
    say "building the Go floor"
    build_go_floor
fi

say "generating reviews and cluster folders (SidecarSets: 0 1000 5000 10000 $SETS) under $OUT"
for pod in small typical largest env2000; do into "$OUT/review-$pod.json" "$TOOL" review "$pod"; done
for n in 0 1000 5000 10000 "$SETS"; do
    cluster_folder "$n"
done

stop() { kill "$1"; wait "$1" 2>/dev/null || true; }

# load NAME URL BODY h1|h2 [extra oha flags]: one oha run, its JSON report in $OUT/NAME.json.
load() {
    local name=$1 url=$2 body=$3 http=$4
    shift 4
    local proto=(-c "$CONNECTIONS")
    [ "$http" = h2 ] && proto=(--http2 -c "$H2_CONNECTIONS" -p "$H2_STREAMS")
    into "$OUT/$name.json" oha --no-tui --output-format json -z "$DURATION" "${proto[@]}" "$@" --cacert "$OUT/certs/ca.crt" \
        -m POST -H 'Content-Type: application/json' -D "$body" "$url"
    python3 - "$OUT/$name.json" "$name" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); s = r["summary"]; p = r["latencyPercentiles"]
codes = r.get("statusCodeDistribution", {}); errors = r.get("errorDistribution", {})
print(f"{sys.argv[2]:<28} {s['requestsPerSec']:>9.0f} req/s  p50 {p['p50']*1e3:7.3f} ms  p99 {p['p99']*1e3:7.3f} ms"
      f"  p99.9 {p['p99.9']*1e3:7.3f} ms  codes {codes} {errors or ''}")
EOF
}

# --- throughput: full /mutate-pod vs our floor vs the Go floor, same run ---------------------------
SERVE=https://localhost:$PORT/mutate-pod
if [ -z "${SKIP_THROUGHPUT:-}" ]; then
say "starting the servers (SidecarSets: $SETS)"
serve "$OUT/cluster-$SETS"
"$TOOL" floor "$OUT/certs/tls.crt" "$OUT/certs/tls.key" "127.0.0.1:$FLOOR_PORT" 2>"$OUT/floor.log" &
PIDS+=($!)
"$OUT/go-floor" "$OUT/certs/tls.crt" "$OUT/certs/tls.key" "127.0.0.1:$GO_PORT" allow 2>"$OUT/go-floor.log" &
PIDS+=($!)
wait_tls "$FLOOR_PORT"
wait_tls "$GO_PORT"

for http in h1 h2; do
    say "throughput, $http, $DURATION each"
    load "floor-$http" "https://localhost:$FLOOR_PORT/floor" "$OUT/review-typical.json" "$http"
    load "go-$http" "https://localhost:$GO_PORT/floor" "$OUT/review-typical.json" "$http"
    load "typical-$http" "$SERVE" "$OUT/review-typical.json" "$http"
    load "small-nomatch-$http" "$SERVE" "$OUT/review-small.json" "$http"
    load "env2000-$http" "$SERVE" "$OUT/review-env2000.json" "$http"
done

say "latency at half of the maximum throughput (typical pod, HTTP/1.1)"
HALF=$(python3 -c "import json; print(max(1, int(json.load(open('$OUT/typical-h1.json'))['summary']['requestsPerSec'] / 2)))")
load "typical-h1-half" "$SERVE" "$OUT/review-typical.json" h1 -q "$HALF" --latency-correction
load "floor-h1-half" "https://localhost:$FLOOR_PORT/floor" "$OUT/review-typical.json" h1 -q "$HALF" --latency-correction
into "$OUT/half-rate" echo "$HALF"
stop "$SERVE_PID"
fi

# --- memory and latency against the number of SidecarSets -----------------------------------------
say "RSS and latency against the number of SidecarSets"
: >"$OUT/memory.tsv.tmp"
for n in 0 1000 5000 10000; do
    serve "$OUT/cluster-$n"
    sleep 1
    idle=$(awk '/VmRSS/ {print $2}' "/proc/$SERVE_PID/status")
    DURATION=5s load "sets-$n" "$SERVE" "$OUT/review-typical.json" h1
    after=$(awk '/VmRSS/ {print $2}' "/proc/$SERVE_PID/status")
    printf '%s\t%s\t%s\n' "$n" "$idle" "$after" >>"$OUT/memory.tsv.tmp"
    stop "$SERVE_PID"
done
mv -f "$OUT/memory.tsv.tmp" "$OUT/memory.tsv"

# --- decide latency against the number of SidecarSets (criterion) ----------------------------------
if [ -z "${SKIP_DECIDE:-}" ]; then
    say "decide benches (criterion)"
    cargo bench --bench inject -- 'mutate-pod/typical/' --warm-up-time 1 --measurement-time 3 | grep -E '^mutate-pod|time:' || true
fi

# --- summary and plot --------------------------------------------------------------------------------
say "summary"
python3 - "$OUT" "$TARGET/criterion" <<'EOF'
import json, os, sys
out, criterion = sys.argv[1], sys.argv[2]
def rep(name):
    r = json.load(open(os.path.join(out, name + ".json")))
    return r["summary"]["requestsPerSec"], r["latencyPercentiles"]
if not os.path.exists(os.path.join(out, "half-rate")):
    print(f"no throughput results under {out} (SKIP_THROUGHPUT=1 summarises an earlier run's)")
else:
    for http in ("h1", "h2"):
        full, _ = rep(f"typical-{http}"); floor, _ = rep(f"floor-{http}"); go, _ = rep(f"go-{http}")
        nomatch, _ = rep(f"small-nomatch-{http}")
        print(f"{http}: /mutate-pod (3 of SidecarSets inject) {full:.0f} req/s = {full/floor:.0%} of our floor ({floor:.0f}), "
              f"{full/go:.2f}x the Go floor ({go:.0f}); no-match pod {nomatch:.0f} req/s = {nomatch/floor:.0%} of our floor")
    half = open(os.path.join(out, "half-rate")).read().strip()
    _, p = rep("typical-h1-half"); _, fp = rep("floor-h1-half")
    print(f"at {half} req/s (half of max): /mutate-pod p50 {p['p50']*1e3:.3f} ms, p99 {p['p99']*1e3:.3f} ms, p99.9 {p['p99.9']*1e3:.3f} ms;"
          f" floor p99 {fp['p99']*1e3:.3f} ms")
print("SidecarSets  idle RSS MiB  RSS after load MiB")
rows = [tuple(map(int, l.split())) for l in open(os.path.join(out, "memory.tsv")) if l.strip()]
for n, idle, after in rows:
    print(f"{n:>11}  {idle/1024:>12.1f}  {after/1024:>18.1f}")
base = {n: after for n, _, after in rows}
if 0 in base and 10000 in base:
    print(f"cost per SidecarSet (0 -> 10,000, after load): {(base[10000]-base[0])*1024/10000:.0f} bytes")

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
counts = [n for n, _, _ in rows]
p50 = [rep(f"sets-{n}")[1]["p50"] * 1e3 for n in counts]
p99 = [rep(f"sets-{n}")[1]["p99"] * 1e3 for n in counts]
axes[1].plot(counts, p50, "o-", label="p50"); axes[1].plot(counts, p99, "s-", label="p99")
axes[1].set(title="end to end /mutate-pod (HTTP/1.1, TLS)", xlabel="SidecarSets (3 match)", ylabel="ms", xscale="symlog")
axes[1].legend()
decide = []
for n in (0, 10, 1000, 10000):
    f = os.path.join(criterion, "mutate-pod", "typical", str(n), "new", "estimates.json")
    if os.path.exists(f):
        decide.append((n, json.load(open(f))["median"]["point_estimate"] / 1e3))
if decide:
    axes[0].plot([d[0] for d in decide], [d[1] for d in decide], "o-")
    for n, us in decide:
        axes[0].annotate(f"{us:.1f} µs", (n, us))
axes[0].set(title="decide, typical pod (criterion median)", xlabel="SidecarSets (3 match)", ylabel="µs", xscale="symlog", ylim=(0, None))
fig.tight_layout()
fig.savefig(os.path.join(out, "latency-vs-sidecarsets.png"), dpi=100)
print("plot:", os.path.join(out, "latency-vs-sidecarsets.png"))
EOF
