#!/usr/bin/env bash
# Fuzz every target for a short fixed time (FUZZ_SECONDS, default 30 s each) from corpora seeded
# out of ../shared/fixtures. Fails on any crash, panic, leak, timeout or out-of-memory; the
# reproducer is left in fuzz/artifacts/<target>/. Needs cargo-fuzz (installed here when missing)
# and nightly features, which stable Rust unlocks with RUSTC_BOOTSTRAP=1.
# Long runs: FUZZ_SECONDS=3600 .ci/fuzz.sh, or see docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export RUSTC_BOOTSTRAP=1
seconds="${FUZZ_SECONDS:-30}"
targets=(${FUZZ_TARGETS:-review sidecarset patch})

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
bash fuzz/seed.sh
(cd fuzz && cargo fuzz build 2>&1 | tail -n 3)
for target in "${targets[@]}"; do
    echo "==> fuzz $target for ${seconds}s"
    # -timeout: one input taking over 10 s is a finding (a webhook has a 10 s budget);
    # -rss_limit_mb: memory blow-ups are findings too.
    (cd fuzz && cargo fuzz run "$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tail -n 12)
done
echo "fuzzing: no findings"
