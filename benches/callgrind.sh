#!/usr/bin/env bash
# Instructions per request under callgrind (immune to the machine's load): each case runs the
# release `bench-tool` with 0 and N iterations; the difference divided by N is one request.
# Prints a table, and the top functions of the N-iteration run of each case to callgrind/ in cargo's
# target directory.
#
# Usage: benches/callgrind.sh [N]   (needs valgrind; cargo builds the release bench-tool first, a no-op
#        when it is up to date; about a minute per case at the default N on a quiet machine)
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/cargo-paths.sh
N=${1:-200}
OUT=$(cargo_target_dir)/callgrind
echo "building the release bench-tool (cargo build --release --example bench-tool)" >&2
TOOL=$(cargo_exe bench-tool --release --example bench-tool)
mkdir -p "$OUT"
instructions() { # FILE → total Ir
    grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'
}
printf '%-18s %-8s %6s %14s\n' mode pod sets 'Ir/request'
while read -r mode pod sets; do
    name="$mode-$pod-$sets"
    echo "callgrind: $name, 0 and $N iterations" >&2
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$name-0.out" "$TOOL" "$mode" "$pod" "$sets" 0 >/dev/null 2>&1
    valgrind --tool=callgrind --callgrind-out-file="$OUT/$name.out" "$TOOL" "$mode" "$pod" "$sets" "$N" >/dev/null 2>&1
    per=$(( ($(instructions "$OUT/$name.out") - $(instructions "$OUT/$name-0.out")) / N ))
    printf '%-18s %-8s %6s %14s\n' "$mode" "$pod" "$sets" "$per"
    # Not piped into head: with pipefail, callgrind_annotate's SIGPIPE would end the script.
    if callgrind_annotate --inclusive=no "$OUT/$name.out" >"$OUT/$name.top.txt.tmp" 2>/dev/null; then
        mv -f "$OUT/$name.top.txt.tmp" "$OUT/$name.top.txt"
    else
        rm -f "$OUT/$name.top.txt.tmp"
    fi
done <<'CASES'
decide typical 0
decide typical 10
decide typical 1000
decide typical 10000
decide small 1000
decide largest 1000
decide env2000 1000
bytes typical 1000
bytes env2000 1000
CASES
