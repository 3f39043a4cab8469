#!/usr/bin/env bash
# The differential harness: random admission cases through OpenKruise v1.9.1's own handlers and
# through kruise-admission, compared decision by decision (tests/kruise-reference/main.go says what
# is compared; classes.go lists the deliberate deviations, each in docs/differences.md).
#
#   tests/kruise-reference/run.sh                     the fixed seed, then a fresh one (printed)
#   SEED=N tests/kruise-reference/run.sh              replay one seed only
#   CASES=N FAMILIES=pod,sidecarset tests/kruise-reference/run.sh ...   fewer cases or families
#   tests/kruise-reference/run.sh --build             only build the reference; print its path
#
# The reference is a Go program of ours (this folder) that requires github.com/openkruise/kruise
# v1.9.1 from the Go module proxy, pinned by go.mod and go.sum with Kruise's replace directives
# repeated (Go ignores a dependency's replaces). It is built with the machine's Go
# (GOTOOLCHAIN=local) and cached by the hash of this folder's files under KUBE_BINARIES_CACHE
# (default ~/.cache/kruise-admission-e2e), beside the end-to-end suite's kube-apiserver. A cold
# build downloads Kruise's modules and takes several minutes on 2 cores (CONTRIBUTING.md has the
# time). kruise-admission is the release build (cargo build --release), as the other CI checks use.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${KUBE_BINARIES_CACHE:-$HOME/.cache/kruise-admission-e2e}
FIXED_SEED=20261207
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

say() { printf '[kruise-reference %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'kruise-reference/run.sh: %s\n' "$*" >&2; exit 2; }

command -v go >/dev/null || die "Go is needed (GOTOOLCHAIN=local; the polyglot machines have Go 1.26)"

build_reference() {
    local hash out start
    hash=$(cd "$HERE" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
    out=$CACHE/kruise-reference-$hash
    if [ ! -x "$out" ]; then
        mkdir -p "$CACHE"
        say "building the reference (OpenKruise v1.9.1's handlers; cold: downloads modules, several minutes)"
        start=$SECONDS
        (cd "$HERE" && go build -trimpath -o "$out.tmp" .)
        mv "$out.tmp" "$out"
        say "built $out in $((SECONDS - start)) s"
        # Each edit of the harness is a new hash and an 80 MB binary: keep the three newest (other
        # worktrees may be on other revisions of it).
        find "$CACHE" -maxdepth 1 -name 'kruise-reference-????????????????' -type f -printf '%T@ %p\n' \
            | sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r -d '\n' rm -f
    fi
    echo "$out"
}

# Every deviation class names its line in docs/differences.md.
while IFS= read -r doc; do
    grep -qF -- "$doc" "$ROOT/docs/differences.md" || die "classes.go cites \"$doc\", which docs/differences.md does not have"
done < <(sed -n 's/^[[:space:]]*doc: *"\(.*\)",$/\1/p' "$HERE/classes.go")
unformatted=$(gofmt -l "$HERE")
[ -z "$unformatted" ] || die "not gofmt-formatted: $unformatted"
reference=$(build_reference)
if [ "${1:-}" = --build ]; then
    echo "$reference"
    exit 0
fi

cd "$ROOT"
. .ci/cargo-paths.sh
ours=$(cargo_exe kruise-admission --release --bin kruise-admission)

run_seed() {
    say "seed $1"
    "$reference" -ours "$ours" -seed "$1" -cases "${CASES:-1000}" ${FAMILIES:+-family "$FAMILIES"}
}

if [ -n "${SEED:-}" ]; then
    run_seed "$SEED"
    exit
fi
status=0
run_seed "$FIXED_SEED" || status=$?
# A fresh seed each run finds what the fixed one cannot; it is printed so a failure replays.
fresh=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
run_seed "$fresh" || status=$?
[ "$status" = 0 ] && echo "kruise-reference: both seeds agree, or differ only in documented classes"
exit "$status"
