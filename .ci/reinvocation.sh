#!/usr/bin/env bash
# Re-invocation and evanphx/json-patch check of every recorded Pod CREATE's /mutate-pod output.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bash tests/independent/check_reinvocation.sh
