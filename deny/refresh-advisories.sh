#!/usr/bin/env bash
# Refresh deny/advisories/: the RustSec advisories of every crate in Cargo.lock and
# fuzz/Cargo.lock, taken from a clone of github.com/rustsec/advisory-db, for CI machines that
# cannot reach GitHub (.ci/deny.sh checks against it when the live database cannot be fetched).
#
#   deny/refresh-advisories.sh                   # clones https://github.com/rustsec/advisory-db
#   deny/refresh-advisories.sh /path/to/advisory-db   # a clone (or bare repository) you have
#
# Writes deny/advisories/crates/<crate>/RUSTSEC-*.md (the database's own files, CC0-1.0) and
# deny/advisories/snapshot.txt: the source commit and its date, then every crate name the
# snapshot was taken for (a crate with no advisory is listed too, so CI can tell "no advisory"
# from "not looked at"). Run it when a dependency is added, and now and then to pick up new
# advisories.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source="${1:-https://github.com/rustsec/advisory-db}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git clone --quiet --depth 1 "$source" "$work/db" 2>/dev/null || git clone --quiet "$source" "$work/db"
commit="$(git -C "$work/db" rev-parse HEAD)"
date="$(git -C "$work/db" show -s --format=%cI HEAD)"

out=deny/advisories
rm -rf "$out/crates"
mkdir -p "$out/crates"
crates="$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.lock fuzz/Cargo.lock | sort -u)"
for crate in $crates; do
    if [ -d "$work/db/crates/$crate" ]; then
        cp -r "$work/db/crates/$crate" "$out/crates/"
    fi
done
{
    echo "# rustsec/advisory-db $commit $date"
    echo "# Crates this snapshot was taken for (deny/refresh-advisories.sh); the advisories are in crates/."
    echo "$crates"
} >"$out/snapshot.txt"
echo "deny/advisories: advisory-db $commit ($date), $(echo "$crates" | wc -l) crates, $(find "$out/crates" -name '*.md' | wc -l) advisories"
