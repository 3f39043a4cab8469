#!/usr/bin/env bash
# Instructions per request under callgrind (immune to the machine's load): each case runs the
# release `bench-tool` with 0 and N iterations; the difference divided by N is one request.
# Prints a table, and the top functions of the N-iteration run of each case to target/callgrind/.
#
# Usage: benches/callgrind.sh [N]   (needs valgrind; builds nothing: run benches/load.sh or
#        `cargo build --release --example bench-tool` first)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}
OUT=target/callgrind
TOOL=target/release/examples/bench-tool
mkdir -p "$OUT"
instructions() { # FILE → total Ir
    grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'
}
printf '%-18s %-8s %6s %14s\n' mode pod sets 'Ir/request'
while read -r mode pod sets; do
    name="$mode-$pod-$sets"
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$name-0.out" "$TOOL" "$mode" "$pod" "$sets" 0 >/dev/null 2>&1
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.out" "$TOOL" "$mode" "$pod" "$sets" "$N" >/dev/null 2>&1
    per=$(( ($(instructions "$OUT/$name.out") - $(instructions "$OUT/$name-0.out")) / N ))
    printf '%-18s %-8s %6s %14s\n' "$mode" "$pod" "$sets" "$per"
    # Not piped into head: with pipefail, callgrind_annotate's SIGPIPE would end the script.
    callgrind_annotate --inclusive=no "$OUT/$name.out" >"$OUT/$name.top.txt" 2>/dev/null || true
done <<'CASES'
decide typical 0
decide typical 10
decide typical 1000
decide typical 10000
decide small 1000
decide-unchecked small 1000
decide-unchecked typical 1000
decide largest 1000
decide env2000 1000
bytes typical 1000
bytes env2000 1000
CASES
