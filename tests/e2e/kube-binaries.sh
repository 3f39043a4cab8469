#!/usr/bin/env bash
# kube-apiserver and etcd for the end-to-end suite, and OpenKruise's kruise-manager, built from Go modules
# pinned in this repository.
#
#   tests/e2e/kube-binaries.sh [VERSION]       build (or reuse) kube-apiserver VERSION and etcd;
#                                              prints their paths, kube-apiserver first
#   tests/e2e/kube-binaries.sh --pin VERSION   write tests/e2e/kube/kube-apiserver-VERSION/ (go.mod,
#                                              go.sum) from upstream's go.mod; commit the result
#   tests/e2e/kube-binaries.sh --cached VERSION
#                                              exit 0 if both binaries for VERSION are already built
#   tests/e2e/kube-binaries.sh kruise-manager  build (or reuse) OpenKruise's kruise-manager; prints its
#                                              path, then the source directory of its module (whose
#                                              config/crd is the CRDs' kustomize build)
#   tests/e2e/kube-binaries.sh --cached kruise-manager
#                                              exit 0 if kruise-manager is already built
#
# VERSION defaults to the newest version the suite runs on in CI: the first of tests/e2e/kube/VERSIONS.
#
# Each version is a small module of ours (tests/e2e/kube/kube-apiserver-VERSION/): it requires
# k8s.io/kubernetes VERSION, replaces every k8s.io staging module (which k8s.io/kubernetes requires
# at v0.0.0 with local replaces, and Go ignores a dependency's replaces) with the matching v0.Y.Z,
# and names k8s.io/kubernetes/cmd/kube-apiserver as a `tool`, so that `go mod tidy` keeps exactly
# what it builds. etcd's main package is the root of go.etcd.io/etcd/server/v3, built the same way
# from tests/e2e/kube/etcd/, and OpenKruise's kruise-manager (the root of github.com/openkruise/kruise,
# with Kruise's replace block repeated) from tests/e2e/kruise-manager/. Only the Go module proxy is used; no code generation is needed (the
# generated OpenAPI is committed upstream).
#
# The binaries are cached outside the work tree, by version, under KUBE_BINARIES_CACHE (default
# ~/.cache/kruise-admission-e2e), with the hash of the module files they were built from: a changed
# pin rebuilds. A cold build downloads about 1 GB of modules and takes the longest step of CI (see
# CONTRIBUTING.md for the time on 2 cores). Progress goes to stderr.
#
# Needs Go >= the version in the module's go.mod (the machine's, GOTOOLCHAIN=local: no toolchain
# download). Never `go get -u` here: it pulls a kube-openapi that needs a newer Go.
set -euo pipefail

E2E=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MODULES=$E2E/kube
DEFAULT_VERSION=$(grep -m1 '^v' "$MODULES/VERSIONS")
CACHE=${KUBE_BINARIES_CACHE:-$HOME/.cache/kruise-admission-e2e}
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly

say() { printf '[kube-binaries.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { printf 'kube-binaries.sh: %s\n' "$*" >&2; exit 2; }

command -v go >/dev/null || die "Go is needed (GOTOOLCHAIN=local; the polyglot machines have Go 1.26)"

# The version a module's go.mod asks for must not exceed the local Go (no toolchain download).
need_go() {
    local want have
    want=$(awk '$1 == "go" {print $2; exit}' "$1/go.mod")
    have=$(go env GOVERSION | sed 's/^go//')
    [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" = "$want" ] \
        || die "$1 needs Go $want, and the local Go is $have"
}

# The hash of a module's pin: what its binary was built from.
pin_hash() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -c1-16; }

pin() {
    local version=$1 dir upstream minor
    [[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "VERSION is vMAJOR.MINOR.PATCH, e.g. $DEFAULT_VERSION"
    minor=${BASH_REMATCH[1]}
    dir=$MODULES/kube-apiserver-$version
    mkdir -p "$dir"
    upstream=$(cd "$dir" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" \
        | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
    [ -f "$upstream" ] || die "no go.mod for k8s.io/kubernetes@$version"
    {
        echo "// kube-apiserver $version for tests/e2e, written by tests/e2e/kube-binaries.sh --pin $version."
        echo "module kruise-admission.test/kube-apiserver"
        echo
        # The main module's go and godebug lines set the runtime's defaults: take upstream's.
        grep -E '^(go|godebug) ' "$upstream"
        echo
        echo "require k8s.io/kubernetes $version"
        echo
        echo "replace ("
        awk -v v="v0.$minor.${version##*.}" '$2 == "=>" && $3 ~ /^\.\/staging\// {print "\t" $1 " => " $1 " " v}' "$upstream"
        echo ")"
        echo
        echo "tool k8s.io/kubernetes/cmd/kube-apiserver"
    } >"$dir/go.mod"
    rm -f "$dir/go.sum"
    say "go mod tidy in $dir"
    (cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
    echo "$dir"
}

# build NAME MODULE-DIR PACKAGE OUT [LDFLAGS]: go build PACKAGE in MODULE-DIR unless OUT is current.
build() {
    local name=$1 dir=$2 package=$3 out=$4 ldflags=${5:-} hash
    [ -f "$dir/go.mod" ] && [ -f "$dir/go.sum" ] || die "no pinned module at $dir (run: $0 --pin VERSION)"
    hash=$(pin_hash "$dir")
    if [ -x "$out" ] && [ "$(cat "$out.pin" 2>/dev/null)" = "$hash" ]; then
        return 0
    fi
    need_go "$dir"
    mkdir -p "$(dirname "$out")"
    say "building $name from $dir (cold: downloads modules, several minutes on 2 cores)"
    local start=$SECONDS
    (cd "$dir" && go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$package")
    mv "$out.tmp" "$out"
    echo "$hash" >"$out.pin"
    say "built $out in $((SECONDS - start)) s"
}

etcd_version() { awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$MODULES/etcd/go.mod"; }

binaries() {
    local version=$1 minor dir
    [[ $version =~ ^v1\.([0-9]+)\.[0-9]+$ ]] || die "VERSION is vMAJOR.MINOR.PATCH, e.g. $DEFAULT_VERSION"
    minor=${BASH_REMATCH[1]}
    dir=$MODULES/kube-apiserver-$version
    [ -d "$dir" ] || die "kube-apiserver $version is not pinned (pinned: $(cd "$MODULES" && ls -d kube-apiserver-v* | sed 's/kube-apiserver-//' | tr '\n' ' ')); run: $0 --pin $version"
    # --version and /version report the real version, as a release build's would.
    local v=k8s.io/component-base/version
    build "kube-apiserver $version" "$dir" k8s.io/kubernetes/cmd/kube-apiserver "$CACHE/kube-apiserver-$version" \
        "-X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
    build "etcd $(etcd_version)" "$MODULES/etcd" go.etcd.io/etcd/server/v3 "$CACHE/etcd-$(etcd_version)"
    echo "$CACHE/kube-apiserver-$version"
    echo "$CACHE/etcd-$(etcd_version)"
}

# The pinned Kruise version, read from its module (the binary's cache name carries it).
KRUISE_MODULE=$E2E/kruise-manager
kruise_version() { awk '$1 == "github.com/openkruise/kruise" {print $2; exit}' "$KRUISE_MODULE/go.mod"; }

kruise_manager() {
    local version out
    version=$(kruise_version)
    out=$CACHE/kruise-manager-$version
    # The root package of github.com/openkruise/kruise is kruise-manager's main.
    build "kruise-manager $version" "$KRUISE_MODULE" github.com/openkruise/kruise "$out"
    echo "$out"
    (cd "$KRUISE_MODULE" && go mod download -json "github.com/openkruise/kruise@$version" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

cached() {
    local version=$1 bin pairs
    if [ "$version" = kruise-manager ]; then
        pairs=("$CACHE/kruise-manager-$(kruise_version):$KRUISE_MODULE")
    else
        pairs=("$CACHE/kube-apiserver-$version:$MODULES/kube-apiserver-$version" "$CACHE/etcd-$(etcd_version):$MODULES/etcd")
    fi
    for bin in "${pairs[@]}"; do
        [ -x "${bin%%:*}" ] && [ -d "${bin#*:}" ] && [ "$(cat "${bin%%:*}.pin" 2>/dev/null)" = "$(pin_hash "${bin#*:}")" ] || return 1
    done
}

case "${1:-}" in
--pin) pin "${2:?--pin VERSION}" ;;
--cached) cached "${2:-$DEFAULT_VERSION}" ;;
kruise-manager) kruise_manager ;;
-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
*) binaries "${1:-$DEFAULT_VERSION}" ;;
esac
