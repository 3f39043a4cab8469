#!/usr/bin/env bash
# Supply chain: cargo-deny over deny.toml: advisories, licences, bans and sources.
#
# Advisories come from the live RustSec database (a clone from GitHub) when it can be fetched.
# These machines reach crates.io but not github.com, so otherwise they come from the snapshot
# committed in deny/advisories/ (the advisories of every crate in our lockfiles, with the source
# commit and date; deny/refresh-advisories.sh renews it), and the run says so and how old it is,
# with a loud warning past 30 days (.ci/advisory-age.sh).
# A crate in Cargo.lock that the snapshot was not taken for fails the check: refresh it.
# Installs cargo-deny (pinned) when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo_deny_version=0.20.2
if ! cargo deny --version >/dev/null 2>&1; then
    cargo install cargo-deny --locked --version "$cargo_deny_version"
fi

# cargo-deny runs `cargo metadata` offline below, which needs every crate of Cargo.lock on disk,
# those only other platforms build (windows-sys) included; a build fetches only this platform's.
cargo fetch --locked --quiet

if timeout 120 cargo deny fetch db >/dev/null 2>&1; then
    cargo deny --log-level error --locked --offline check advisories licenses bans sources
    echo "cargo deny: advisories (live RustSec database), licences, bans, sources ok"
    exit 0
fi

snapshot=deny/advisories
read -r _ _ commit date < <(head -n 1 "$snapshot/snapshot.txt")
echo "NOTICE: the live RustSec database could not be fetched (github.com unreachable?); advisories are checked"
echo "        against the committed snapshot: rustsec/advisory-db $commit of $date"
.ci/advisory-age.sh "$snapshot/snapshot.txt"

missing="$(comm -23 <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock fuzz/Cargo.lock | sort -u) <(grep -v '^#' "$snapshot/snapshot.txt" | sort -u))"
if [ -n "$missing" ]; then
    echo "the advisory snapshot was not taken for these crates of the lockfiles; run deny/refresh-advisories.sh:" >&2
    echo "$missing" | sed 's/^/  /' >&2
    exit 1
fi

# cargo-deny reads an offline database from <db-path>/advisory-db-<hash of its URL>, a git
# repository (it asks git for HEAD's date). Build one from the snapshot, dated as its source, under
# target/ (never in ~/.cargo, where it would shadow a real clone), and point a copy of deny.toml
# at it. The directory name is what cargo-deny 0.20 derives from deny.toml's db-urls.
db_path="$PWD/target/advisory-snapshot"
db="$db_path/advisory-db-3157b0e258782691"
rm -rf "$db_path"
mkdir -p "$db"
cp -r "$snapshot/crates" "$db/"
(
    cd "$db"
    git init --quiet
    git add -A
    GIT_AUTHOR_DATE="$date" GIT_COMMITTER_DATE="$date" \
        git -c user.name=kruise-admission-ci -c user.email=ci@localhost commit --quiet -m "rustsec/advisory-db $commit (subset)"
)
config="$db_path/deny.toml"
sed "s|^db-urls = .*|&\ndb-path = \"$db_path\"|" deny.toml >"$config"
grep -q '^db-path' "$config" || { echo "deny.toml has no db-urls line to anchor db-path on" >&2; exit 1; }
cargo deny --log-level error --locked --offline --config "$config" check advisories licenses bans sources
echo "cargo deny: advisories (snapshot of $date), licences, bans, sources ok"
