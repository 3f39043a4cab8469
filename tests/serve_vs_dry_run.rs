//! The same review through `serve` (real HTTPS) and through `dry-run --output review` gives the
//! same bytes: both edges call the same decisions, and a difference here means one of them
//! post-processes what the other does not.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use common::client::BOTH;
use common::server::TestServer;
use kruise_admission::admission::FixedClock;
use serde_json::Value;
use time::OffsetDateTime;
use time::macros::datetime;

const NOW: OffsetDateTime = datetime!(2026-07-02 09:56:09 UTC);
const NOW_TEXT: &str = "2026-07-02T09:56:09Z";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn example_reviews() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("examples/reviews"))
        .expect("examples/reviews")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

/// `dry-run --output review` prints one response line per webhook called; these reviews call one.
fn dry_run_review(file: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--output", "review", "--now", NOW_TEXT, "--cluster-dir"])
        .arg(repo().join("examples/cluster"))
        .arg(file)
        .output()
        .expect("run dry-run");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}: one webhook expected, got {stdout}", file.display());
    lines[0].to_owned()
}

#[tokio::test]
async fn serve_and_dry_run_answer_with_the_same_bytes() {
    let server = TestServer::start_with(|config| {
        config.cluster_dir = repo().join("examples/cluster");
        config.clock = Arc::new(FixedClock(NOW));
    })
    .await;
    let client = server.client();
    let mut patched = 0;
    for file in example_reviews() {
        let body = std::fs::read(&file).expect("read review");
        let offline = dry_run_review(&file);
        for proto in BOTH {
            let reply = client.post_json(proto, "/mutate-pod", body.clone()).await;
            assert_eq!(reply.status, 200, "{}", file.display());
            assert_eq!(String::from_utf8_lossy(&reply.body), offline, "{} over {proto:?}", file.display());
        }
        let response: Value = serde_json::from_str(&offline).expect("JSON");
        if response["response"]["patch"].is_string() {
            patched += 1;
        }
    }
    assert!(patched > 0, "at least one example review must produce a patch, or this compares nothing");
    server.stop().await.expect("clean stop");
}
