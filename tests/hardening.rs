//! Supply-chain and build hardening that no other test would notice going away (issue 17.8):
//! base images pinned by digest, private keys kept out of the Docker build context, the CI warning
//! about a stale offline advisory snapshot, and `forbid(unsafe_code)` on both crate roots.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pinned(image: &str) -> bool {
    image
        .split_once("@sha256:")
        .is_some_and(|(_, digest)| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn every_base_image_and_the_frontend_are_pinned_by_digest() {
    let dockerfile = read("Dockerfile");
    let syntax = dockerfile.lines().next().unwrap_or_default();
    assert!(
        syntax.starts_with("# syntax=") && pinned(syntax),
        "the BuildKit frontend is not pinned: {syntax}"
    );
    let froms: Vec<&str> =
        dockerfile.lines().filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM ")).collect();
    assert!(froms.len() >= 2, "{froms:?}");
    for from in froms {
        let image = from
            .split_whitespace()
            .find(|w| !w.eq_ignore_ascii_case("FROM") && !w.starts_with("--"))
            .unwrap_or_default();
        assert!(pinned(image), "not pinned by digest: {from}");
        assert!(!image.contains('$'), "a build argument would let the tag and digest disagree: {from}");
    }
}

#[test]
fn the_build_context_leaves_out_generated_keys() {
    let ignore = read(".dockerignore");
    let patterns: Vec<&str> =
        ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for wanted in ["certs/", "target/", ".git/"] {
        assert!(patterns.contains(&wanted), ".dockerignore lacks {wanted}: {patterns:?}");
    }
}

fn advisory_age(snapshot_date: &str, now_unix: i64) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot.txt");
    std::fs::write(&snapshot, format!("# rustsec/advisory-db 0123abcd {snapshot_date}\nserde\n")).unwrap();
    let output = Command::new("bash")
        .arg(repo().join(".ci/advisory-age.sh"))
        .arg(&snapshot)
        .env("ADVISORY_NOW", now_unix.to_string())
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "a stale snapshot warns, it does not fail the build");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn ci_warns_loudly_when_the_advisory_snapshot_is_older_than_30_days() {
    let taken = 1_755_757_720; // 2025-08-21T08:28:40+02:00
    let (out, err) = advisory_age("2025-08-21T08:28:40+02:00", taken + 45 * 86_400);
    assert!(out.contains("::warning") && out.contains("45 days old"), "{out}");
    assert!(
        err.contains("WARNING")
            && err.contains("deny/refresh-advisories.sh")
            && err.contains("git add deny/advisories"),
        "{err}"
    );
    let (out, err) = advisory_age("2025-08-21T08:28:40+02:00", taken + 10 * 86_400);
    assert!(out.contains("10 days old") && !out.contains("warning") && err.is_empty(), "{out}{err}");
    // deny.sh runs it on the snapshot path.
    assert!(read(".ci/deny.sh").contains(".ci/advisory-age.sh \"$snapshot/snapshot.txt\""));
}

#[test]
fn both_crate_roots_forbid_unsafe_code() {
    for root in ["src/lib.rs", "src/main.rs"] {
        let text = read(root);
        assert!(
            text.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"),
            "{root} does not forbid unsafe code"
        );
    }
}
