#!/usr/bin/env bash
# Peak memory per request: the release server on 127.0.0.1, one fresh process per run, bodies of
# hostile shapes (many tiny values, empty and one-key objects, deep-ish objects, one long string,
# environment variables in an unknown spec field, and the same as the container's env) filled to
# MEM_BYTES (default: the default --max-request-bytes), sent once and then MEM_CONCURRENT (default
# 16) at once. `cargo bench --bench request_memory --no-default-features` shows where one
# request's heap goes, stage by stage. Prints one JSON line per run with the peak RSS
# (VmHWM from /proc/<pid>/status) over the idle RSS and its ratio to the bytes sent at once, and
# whether the kernel may use transparent huge pages for the server (serve opts out: src/main.rs).
# Knobs: MEM_BINARY (skip the build), MEM_BYTES, MEM_CONCURRENT, MEM_SHAPES (space-separated
# subset), MEM_SERVE_ARGS (extra serve flags, space-separated).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
if [ -n "${MEM_BINARY:-}" ]; then
    bin="$(realpath "$MEM_BINARY")"
else
    cargo build --release --bin kruise-admission
    bin="$(pwd)/$TARGET_DIR/release/kruise-admission"
fi
default_bytes="$("$bin" serve --help | tr '\n' ' ' | grep -o -- '--max-request-bytes <[A-Z_]*> [^[]*\[default: [0-9]*' | grep -o '[0-9]*$' || true)"
bytes="${MEM_BYTES:-${default_bytes:-8388608}}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r examples/cluster "$work/cluster"
"$bin" certs --out "$work/certs" >/dev/null
args=(--binary "$bin" --certs "$work/certs" --cluster "$work/cluster" --bytes "$bytes" --concurrent "${MEM_CONCURRENT:-16}")
for shape in ${MEM_SHAPES:-}; do args+=(--shape "$shape"); done
for flag in ${MEM_SERVE_ARGS:-}; do args+=("--serve-arg=$flag"); done
echo "# $(uptime)"
python3 benches/request_memory.py "${args[@]}"
