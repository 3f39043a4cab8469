#!/usr/bin/env bash
# How old is the committed RustSec snapshot (deny/advisories/snapshot.txt, first line:
# `# rustsec/advisory-db <commit> <ISO date>`)? Past 30 days, warn loudly: advisories published
# since then are not being checked. Warns only (exit 0): a stale snapshot must not block an
# unrelated fix, but nobody may miss it. Usage: advisory-age.sh [SNAPSHOT_TXT] (default the
# committed one); ADVISORY_NOW=<unix seconds> pins "now" for tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
snapshot_txt=${1:-deny/advisories/snapshot.txt}
max_days=30
read -r _ _ commit date < <(head -n 1 "$snapshot_txt")
taken=$(date -d "$date" +%s)
now=${ADVISORY_NOW:-$(date +%s)}
age_days=$(((now - taken) / 86400))
if ((age_days > max_days)); then
    # GitHub Actions shows `::warning::` lines as annotations; elsewhere they are plain text.
    echo "::warning title=RustSec snapshot is ${age_days} days old::advisories published after ${date} are not checked; run deny/refresh-advisories.sh"
    cat >&2 <<MSG
################################################################################
WARNING: the offline RustSec advisory snapshot is ${age_days} days old (more than ${max_days}).
         rustsec/advisory-db ${commit} of ${date}
         Advisories published since then are NOT being checked.
Refresh it on a machine that reaches github.com, then commit deny/advisories/:
         deny/refresh-advisories.sh
         git add deny/advisories && git commit -m "RustSec snapshot refreshed"
################################################################################
MSG
else
    echo "advisory snapshot: ${age_days} days old (rustsec/advisory-db ${commit} of ${date})"
fi
