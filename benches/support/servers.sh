# Shared by benches/load.sh and benches/h2load.sh (sourced after they set OUT, BIN, TOOL, PORT
# and METRICS_PORT): the servers they measure, started on 127.0.0.1 and stopped on exit.

say() { printf '\n== %s (load average: %s)\n' "$*" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# build_go_floor: benches/go-floor (net/http + encoding/json, decode, allow) as $OUT/go-floor.
build_go_floor() { benches/go-floor/build.sh "$OUT/go-floor"; }

# cluster_folder N: $OUT/cluster-N with N generated SidecarSets (3 match the typical pod). Generated
# beside the final name and moved into place whole: a folder that exists is complete.
cluster_folder() {
    if [ ! -d "$OUT/cluster-$1" ]; then
        rm -rf "$OUT/cluster-$1.tmp"
        "$TOOL" cluster "$OUT/cluster-$1.tmp" "$1"
        mv "$OUT/cluster-$1.tmp" "$OUT/cluster-$1"
    fi
}

# serve CLUSTER_DIR: start the server, wait until /readyz answers 200; sets SERVE_PID.
serve() {
    "$BIN" serve --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" --cert-dir "$OUT/certs" \
        --cluster-dir "$1" 2>>"$OUT/serve.log" &
    SERVE_PID=$!
    PIDS+=("$SERVE_PID")
    for _ in $(seq 600); do
        curl -sf "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null && return 0
        sleep 0.1
    done
    echo "the server did not become ready; see $OUT/serve.log" >&2
    exit 1
}

# wait_tls PORT: wait until something answers TLS with the server's certificate on PORT.
wait_tls() {
    for _ in $(seq 300); do
        curl -s -o /dev/null --cacert "$OUT/certs/ca.crt" "https://localhost:$1/" && return 0
        sleep 0.1
    done
    echo "nothing answers on port $1" >&2
    exit 1
}
