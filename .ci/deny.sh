#!/usr/bin/env bash
# Supply chain: cargo-deny over deny.toml. Licences, bans and sources always; advisories when the
# RustSec database (a GitHub clone) can be fetched, otherwise skipped with a notice (these
# machines reach crates.io but not github.com). Installs cargo-deny when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! cargo deny --version >/dev/null 2>&1; then
    cargo install cargo-deny --locked
fi
checks=(licenses bans sources)
if timeout 120 cargo deny fetch db >/dev/null 2>&1; then
    checks=(advisories "${checks[@]}")
else
    echo "NOTICE: the RustSec advisory database could not be fetched (github.com unreachable?); advisories NOT checked"
fi
# --offline: the database was fetched above (or not at all); nothing else needs the network.
cargo deny --log-level error --locked --offline check "${checks[@]}"
echo "cargo deny: ${checks[*]} ok"
