#!/usr/bin/env bash
# The tests `cargo test --all-targets` leaves out: each is `#[ignore = "needs <tool>: ..."]` because it
# runs an external tool (helm, kubectl, kubernetes-validate). This installs the tools
# (.ci/manifests-tools.sh), runs exactly those tests (`-- --ignored`), and fails unless every one of
# them ran and passed: a test that cannot find its tool fails rather than skips, and the number of
# tests run must equal the number of `#[ignore` attributes in the sources.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

. .ci/manifests-tools.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
HELM=$helm KUBECTL=$kubectl KUBERNETES_VALIDATE=$kubernetes_validate \
    cargo test --all-targets -- --ignored 2>&1 | tee "$log"

# `test result: ok. 24 passed; 0 failed; 0 ignored; 0 measured; 700 filtered out; ...`, one per target.
read -r passed ignored < <(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^ignored;/) g += $i }
} END { print p + 0, g + 0 }' "$log")
declared=$(grep -rhoE '^\s*#\[ignore\b' tests src benches | wc -l)
echo "ignored tests: $declared declared, $passed passed, $ignored still ignored"
if [ "$passed" -ne "$declared" ] || [ "$ignored" -ne 0 ]; then
    echo "not every #[ignore]d test ran: $declared declared, $passed passed"
    exit 1
fi
