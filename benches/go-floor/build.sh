#!/usr/bin/env bash
# benches/go-floor/build.sh OUT: build the Go floor (main.go beside this script) as the executable OUT
# with the machine's Go, the toolchain kube-apiserver and etcd are built with in tests/e2e. The one
# build of the floor: benches/load.sh, benches/h2load.sh, benches/apiserver.sh and the end-to-end
# suite all call it, so every figure measured against the floor is against the same Go.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT" >&2; exit 2; }
command -v go >/dev/null || { echo "Go is needed to build the Go floor (go on PATH)" >&2; exit 1; }
out=$1
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")"
# Standard library only, so GOPATH mode and no module download; the local toolchain, never one
# fetched by a go.mod line.
GO111MODULE=off GOTOOLCHAIN=local go build -trimpath -o "$out" main.go
