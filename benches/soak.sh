#!/usr/bin/env bash
# Soak: the release server on 127.0.0.1 for SOAK_SECONDS (default 600) at SOAK_RATE requests/s
# (default 100) of /mutate-pod reviews that trigger SidecarSet injection and the DaemonSet stamp,
# while the serving certificate is re-issued every 30 s (`kruise-admission certs`) and the
# SidecarSets / Namespaces in the cluster folder change every 5 s.
# Reports failed requests, p50/p99 latency and the server's RSS after warm-up and at the end.
# Exits 1 on any failed request or on RSS growth of 10 % or more between the warm-up reading and
# the end. The RSS series is printed to tell warm-up from steady growth.
# CI: SOAK_SECONDS=60. Other knobs: SOAK_WARMUP (s before the first RSS reading, default 10),
# SOAK_BINARY (skip the build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SECONDS_TOTAL="${SOAK_SECONDS:-600}"
RATE="${SOAK_RATE:-100}"
WARMUP="${SOAK_WARMUP:-10}"
. .ci/cargo-paths.sh

if [ -n "${SOAK_BINARY:-}" ]; then
    bin="$(realpath "$SOAK_BINARY")" # e.g. a debug build, to try the script itself
else
    echo "soak: building the release server (cargo build --release)" >&2
    bin="$(cargo_exe kruise-admission --release --bin kruise-admission)"
fi
work="$(mktemp -d)"
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

cp -r examples/cluster "$work/cluster"
"$bin" certs --out "$work/certs" >/dev/null
read -r port metrics_port < <(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(*[x.getsockname()[1] for x in s])')

# Review bodies: the example reviews plus pod CREATEs that the example SidecarSets inject into.
python3 - "$work" <<'PY'
import copy, json, pathlib, sys
work = pathlib.Path(sys.argv[1])
(work / "reviews").mkdir()
base = json.loads(pathlib.Path("examples/reviews/pod-target-node.json").read_text())
for path in sorted(pathlib.Path("examples/reviews").glob("*.json")):
    (work / "reviews" / path.name).write_text(path.read_text())
for i, labels in enumerate([{"mesh.example.com/inject": "true", "app": "shop"}, {"logging": "fluent-bit"},
                            {"mesh.example.com/agent": "hot"}, {"auth.example.com/token": "refresh", "logging": "fluent-bit"}]):
    review = copy.deepcopy(base)
    review["request"]["uid"] = f"soak-{i}"
    review["request"]["namespace"] = "shop"
    obj = review["request"]["object"]
    obj["metadata"] = {"generateName": "soak-", "namespace": "shop", "labels": labels}
    obj["spec"].pop("affinity", None)
    (work / "reviews" / f"soak-{i}.json").write_text(json.dumps(review))
PY

RUST_LOG="warn,kruise_admission::server::tls=info" "$bin" serve --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" \
    --tls-cert-file "$work/certs/tls.crt" --tls-key-file "$work/certs/tls.key" --cluster-dir "$work/cluster" \
    2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$metrics_port/readyz" >/dev/null || { echo "server did not get ready"; cat "$work/server.log"; exit 1; }

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$server_pid/status"; }

# Changes during the run: SidecarSet image tag and an extra Namespace every 5 s; a new serving
# certificate (same CA, new key) every 30 s, written next to the live files and renamed in.
churn() {
    local t=0 flip=0
    while sleep 5; do
        t=$((t + 5)); flip=$((1 - flip))
        sed -i -E "s#(fluent/fluent-bit:)[0-9.]+#\\13.2.$((4 + flip))#" "$work/cluster/sidecarsets/log-agent.yaml"
        if [ "$flip" = 1 ]; then
            printf 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: soak-%s\n' "$t" >"$work/cluster/soak-ns.yaml"
        else
            rm -f "$work/cluster/soak-ns.yaml"
        fi
        if [ $((t % 30)) = 0 ]; then
            rm -rf "$work/next" && mkdir "$work/next" && cp "$work/certs/ca.crt" "$work/certs/ca.key" "$work/next/"
            "$bin" certs --out "$work/next" >/dev/null
            mv "$work/next/tls.key" "$work/certs/tls.key" && mv "$work/next/tls.crt" "$work/certs/tls.crt"
            echo "rotation at ${t}s" >>"$work/rotations"
        fi
    done
}
churn &
churn_pid=$!
# RSS every 5 s, printed at the end, to tell warm-up from steady growth.
(while sleep 5; do rss_kb >>"$work/rss"; done) &
sampler_pid=$!

echo "soak: ${SECONDS_TOTAL} s at ${RATE} req/s on 127.0.0.1:$port (new certificate every 30 s, cluster changes every 5 s)" >&2
python3 benches/soak_load.py --port "$port" --ca "$work/certs/ca.crt" --rate "$RATE" --seconds "$SECONDS_TOTAL" \
    "$work"/reviews/*.json >"$work/load.json" &
load_pid=$!
sleep "$WARMUP"
rss_start="$(rss_kb)"
wait "$load_pid"
rss_end="$(rss_kb)"
kill "$churn_pid" "$sampler_pid" 2>/dev/null || true
wait "$churn_pid" "$sampler_pid" 2>/dev/null || true
echo "soak: RSS every 5 s (kB): $(tr '\n' ' ' <"$work/rss")"

metrics="$(curl -fsS "http://127.0.0.1:$metrics_port/metrics")"
reloads="$(grep -c 'serving certificate reloaded' "$work/server.log" || true)"
rotations="$(wc -l <"$work/rotations" 2>/dev/null || echo 0)"
errors="$(grep -E '^kruise_admission_http_errors_total' <<<"$metrics" || true)"
python3 - "$work/load.json" "$rss_start" "$rss_end" "$SECONDS_TOTAL" "$RATE" "$rotations" "$reloads" "$errors" <<'PY'
import json, sys
load = json.load(open(sys.argv[1]))
rss_start, rss_end = int(sys.argv[2]), int(sys.argv[3])
growth = (rss_end - rss_start) / rss_start * 100
print(f"soak: {sys.argv[4]} s at {sys.argv[5]} req/s: {load['ok']}/{load['requests']} ok, {load['failed']} failed, "
      f"{load['patched']} patched; p50 {load['p50_ms']} ms, p99 {load['p99_ms']} ms, max {load['max_ms']} ms; "
      f"late sends {load['late_sends']}")
print(f"soak: RSS {rss_start} kB after warm-up -> {rss_end} kB at the end ({growth:+.1f} %); "
      f"certificate rotations {sys.argv[6]}, reloads logged {sys.argv[7]}")
if sys.argv[8]:
    print("soak: HTTP errors:\n" + sys.argv[8])
for failure in load["first_failures"]:
    print("  failure:", failure)
rss_bad = growth >= 10
if rss_bad:
    print(f"soak: RSS grew {rss_end - rss_start} kB ({growth:.1f} %), 10 % or more")
bad = load["failed"] > 0 or rss_bad or load["ok"] == 0
print("soak: FAIL" if bad else "soak: ok")
sys.exit(1 if bad else 0)
PY
