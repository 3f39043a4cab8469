#!/usr/bin/env bash
# CI soak: 60 s of benches/soak.sh (release build, certificate rotation every 30 s, cluster
# folder changes every 5 s). The documented long run is SOAK_SECONDS=600 benches/soak.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SOAK_SECONDS="${SOAK_SECONDS:-60}" exec bash benches/soak.sh
