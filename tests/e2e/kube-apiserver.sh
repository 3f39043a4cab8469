#!/usr/bin/env bash
# Get a real kube-apiserver (Kubernetes 1.20.2) for the end-to-end suite, and etcd beside it.
#
# Kubernetes 1.20.2 is in Debian bookworm as the source package `kubernetes` (the whole tree with
# vendor/). This script builds cmd/kube-apiserver from it with Debian's Go 1.19 and caches the
# binary; later runs only print its path. It needs root for apt-get on the first run (deb-src,
# golang-1.19, etcd-server, make, rsync); the build itself takes about 15-30 minutes on 2 cores.
#
#   KUBE_APISERVER_CACHE   cache folder (default ~/.cache/kube-apiserver-1.20)
#
# Prints the binary's path on stdout; progress goes to stderr.
set -euo pipefail

CACHE=${KUBE_APISERVER_CACHE:-$HOME/.cache/kube-apiserver-1.20}
BIN=$CACHE/kube-apiserver-1.20.2
GO=/usr/lib/go-1.19/bin/go
VERSION=1.20.2

say() { printf '[kube-apiserver.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# Source packages come from the mirror the machine's binary packages come from.
enable_deb_src() {
    if grep -rqsE '^Types:.*deb-src|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 0
    fi
    local uri
    uri=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2; exit}')
    [ -n "$uri" ] || uri=$(awk '$1 == "deb" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
    [ -n "$uri" ] || uri=http://deb.debian.org/debian
    say "enabling deb-src for bookworm from $uri"
    printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$uri" >/etc/apt/sources.list.d/kruise-admission-e2e-src.sources
}

build() {
    local src=$CACHE/src gopath=$CACHE/gopath tree
    mkdir -p "$src"
    enable_deb_src
    say "apt-get update"
    apt-get update -qq >/dev/null || say "apt-get update failed; trying with the lists we have"
    apt_install golang-1.19 etcd-server make rsync golang-github-modern-go-reflect2-dev

    tree=$src/kubernetes-$VERSION
    if [ ! -d "$tree" ]; then
        # bookworm's version is 1.20.5+really1.20.2: the tarball unpacks to kubernetes-1.20.2/.
        if ! ls "$src"/kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
            say "downloading Debian's kubernetes source package (about 35 MB)"
            (cd "$src" && apt-get source --download-only kubernetes >/dev/null)
        fi
        say "unpacking the source tree"
        tar -xzf "$src"/kubernetes_*.orig.tar.gz -C "$src"
        [ -d "$tree" ] || { say "expected $tree after unpacking"; exit 1; }
    fi

    # The generated OpenAPI definitions are not in the tarball; the tree's own make rule writes them.
    if [ ! -f "$tree/pkg/generated/openapi/zz_generated.openapi.go" ]; then
        say "make gen_openapi (generates pkg/generated/openapi, a few minutes)"
        (cd "$tree" && PATH=/usr/lib/go-1.19/bin:$PATH GOCACHE=$CACHE/gocache nice make gen_openapi >"$CACHE/gen_openapi.log" 2>&1) \
            || { say "make gen_openapi failed; see $CACHE/gen_openapi.log"; exit 1; }
    fi

    # The vendored modern-go/reflect2 crashes at start on Go >= 1.18; Debian's 1.0.2 works.
    local r2=$tree/vendor/github.com/modern-go/reflect2 deb_r2=/usr/share/gocode/src/github.com/modern-go/reflect2
    if ! cmp -s "$deb_r2/reflect2.go" "$r2/reflect2.go"; then
        say "replacing vendor/github.com/modern-go/reflect2 with Debian's 1.0.2"
        rm -f "$r2"/*.go "$r2"/*.s
        find "$deb_r2" -maxdepth 1 \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' -exec cp {} "$r2"/ \;
    fi

    # GOPATH mode: the tree predates a working module build with this Go.
    mkdir -p "$gopath/src/k8s.io"
    ln -sfn "$tree" "$gopath/src/k8s.io/kubernetes"
    say "go build ./cmd/kube-apiserver (the long part: 15-30 minutes on 2 cores; log in $CACHE/build.log)"
    (cd "$gopath/src/k8s.io/kubernetes" && GOPATH=$gopath GO111MODULE=off GOCACHE=$CACHE/gocache \
        exec nice "$GO" build -o "$BIN.tmp" -ldflags '-s -w' ./cmd/kube-apiserver >"$CACHE/build.log" 2>&1) &
    local pid=$! started=$SECONDS
    # A line a minute, so a CI log shows the build is alive.
    while kill -0 "$pid" 2>/dev/null; do
        sleep 5
        if (((SECONDS - started) % 60 < 5)); then say "still building ($(((SECONDS - started) / 60)) min)"; fi
    done
    wait "$pid" || { tail -20 "$CACHE/build.log" >&2; say "build failed; see $CACHE/build.log"; exit 1; }
    mv "$BIN.tmp" "$BIN"
    say "built $BIN"
}

mkdir -p "$CACHE"
if [ ! -x "$BIN" ]; then
    # One build at a time: a second caller waits for the first one's binary.
    exec 9>"$CACHE/.build.lock"
    flock 9
    [ -x "$BIN" ] || build
    flock -u 9
fi
if ! command -v etcd >/dev/null 2>&1; then
    apt-get update -qq >/dev/null || true
    apt_install etcd-server
fi
"$BIN" --version >&2
echo "$BIN"
