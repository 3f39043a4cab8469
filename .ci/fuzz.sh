#!/usr/bin/env bash
# Fuzz every target for a short fixed time (FUZZ_SECONDS each, default 60) from corpora seeded out
# of tests/fixtures (fuzz/seed.sh). Exits non-zero on any finding: a panic (failed assertion,
# integer overflow: debug assertions are on), an input running over FUZZ_TIMEOUT seconds (a
# webhook has a 10 s budget), or memory over FUZZ_RSS_LIMIT_MB. The log names the reproducer
# (fuzz/artifacts/<target>/crash-*|timeout-*|oom-*) and the command that replays it.
#
# Built without a sanitizer by default (FUZZ_SANITIZER=none): the code under test is safe Rust, so
# ASan would look for memory errors that cannot happen there, and costs a slower build (every
# crate instrumented) and 2-3x slower runs. FUZZ_SANITIZER=address for long runs if wanted.
# Installs what it needs when missing: a nightly toolchain (rustup, minimal profile) and
# cargo-fuzz (pinned). Long runs and replays: docs/RELIABILITY.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo="$PWD"

seconds="${FUZZ_SECONDS:-60}"
read -r -a targets <<<"${FUZZ_TARGETS:-review sidecarset patch}"
sanitizer="${FUZZ_SANITIZER:-none}"
toolchain="${FUZZ_TOOLCHAIN:-nightly}"
cargo_fuzz_version=0.13.2
target_dir="$repo/fuzz/target"
# Passed to every libFuzzer run: one input over FUZZ_TIMEOUT seconds or a process over
# FUZZ_RSS_LIMIT_MB is a finding; -max_len bounds generated inputs to what the seeds need.
# A finding fails the step: it is a bug. Runs are not reproducible: libFuzzer's seed could be
# fixed, but the code under test hashes with per-process random keys (std's RandomState, also in
# serde_json's maps), so coverage and with it the corpus diverge from the first new input even
# with one seed. So: the reproducers of past findings (fuzz/regressions/<target>/) are in every
# run's corpus, so an old bug cannot come back unseen, and new ones are hunted by long runs before
# landing (docs/RELIABILITY.md), which explore far more than CI's minute per target.
libfuzzer_flags=(-timeout="${FUZZ_TIMEOUT:-10}" -rss_limit_mb="${FUZZ_RSS_LIMIT_MB:-2048}" -max_len=65536 -print_final_stats=1)

stamp() { printf '[fuzz %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# cargo-fuzz drives nightly-only rustc flags for the sanitizers; a nightly from rustup is the
# normal way. Without rustup (or offline) the stable toolchain with RUSTC_BOOTSTRAP=1 works too.
cargo=(cargo)
if command -v rustup >/dev/null 2>&1; then
    if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
        stamp "installing the $toolchain toolchain (rustup, minimal profile)"
        rustup toolchain install "$toolchain" --profile minimal || stamp "could not install $toolchain"
    fi
    if rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
        cargo=(cargo "+$toolchain")
    fi
fi
if [ "${cargo[*]}" = cargo ]; then
    stamp "no $toolchain toolchain: stable with RUSTC_BOOTSTRAP=1"
    export RUSTC_BOOTSTRAP=1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    stamp "installing cargo-fuzz $cargo_fuzz_version"
    cargo install --locked cargo-fuzz --version "$cargo_fuzz_version"
fi
stamp "$("${cargo[@]}" --version), $(cargo fuzz --version), sanitizer $sanitizer"

bash fuzz/seed.sh

# All targets in one cargo invocation, optimised (-O) with debug assertions and overflow checks (-a).
stamp "build"
build_start=$SECONDS
(cd fuzz && "${cargo[@]}" fuzz build -O -a --sanitizer "$sanitizer" --target-dir "$target_dir")
stamp "build done in $((SECONDS - build_start)) s"
host="$("${cargo[@]}" -vV | sed -n 's/^host: //p')"
bin_dir="$target_dir/$host/release"

findings=()
for target in "${targets[@]}"; do
    artifacts="$repo/fuzz/artifacts/$target"
    log="$artifacts/last-run.log"
    mkdir -p "$artifacts" "fuzz/corpus/$target"
    stamp "run $target for ${seconds}s (log: $log)"
    # The binary directly (what `cargo fuzz run` execs after checking the build): no second build,
    # and the artifact prefix is ours. New coverage is added to fuzz/corpus/<target>.
    status=0
    "$bin_dir/$target" "${libfuzzer_flags[@]}" -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
        "fuzz/corpus/$target" >"$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ]; then
        grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
        continue
    fi
    # libFuzzer names the file it wrote: "Test unit written to <path>".
    reproducer="$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)"
    echo "---- $target: last 80 lines of $log"
    tail -n 80 "$log"
    echo "----"
    stamp "FINDING in $target (exit $status): reproducer ${reproducer:-<none written, see $log>}"
    echo "  replay: $bin_dir/$target ${reproducer:-<input>}"
    echo "  or:     cd fuzz && cargo +$toolchain fuzz run -O -a --sanitizer $sanitizer $target ${reproducer:-<input>}"
    findings+=("$target: ${reproducer:-$log}")
done

if [ "${#findings[@]}" -gt 0 ]; then
    stamp "fuzzing found ${#findings[@]} problem(s):"
    printf '  %s\n' "${findings[@]}"
    exit 1
fi
stamp "fuzzing: no findings"
