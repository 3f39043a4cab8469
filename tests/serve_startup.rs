//! What `serve` says at start, checked on the binary (issue 16, points 2 and 7): readiness and its
//! log lines agree, folder mode says loudly that delete protection's lookups come from the folder,
//! and a missing default folder is one clear error.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::client::http_get;
use common::serve_process::{BIN, Serve, addr, cluster_folder};
use hyper::StatusCode;
use serde_json::Value;

fn errors(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["level"] == "ERROR").collect()
}

/// Run `command` to its end, within 10 s (a server that starts serving instead is killed and fails
/// the test).
fn exited(command: &mut Command) -> std::process::Output {
    let mut child = command
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run serve");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("serve kept running instead of exiting:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// Outside the repository the default `--cluster-dir examples/cluster` does not exist: one error
/// line naming the flag and the ways out, exit code 2, and no claim of being ready.
#[test]
fn a_missing_default_cluster_folder_is_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = exited(Command::new(BIN).current_dir(dir.path()).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
    ]));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one message, got:\n{stderr}");
    for expected in ["error: no cluster folder", "--cluster-dir", "examples/cluster", "--cluster-mode live"] {
        assert!(lines[0].contains(expected), "{expected:?} missing from {stderr}");
    }
    assert!(!dir.path().join("certs").exists(), "nothing is created before the folder is checked");

    // A folder given explicitly that is not there: the same, naming it.
    let out = exited(
        Command::new(BIN)
            .current_dir(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
            .args(["--cluster-dir", "nowhere"]),
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--cluster-dir nowhere is not a folder"), "{stderr}");
}

/// Folder mode on the embedded default: a WARN at start saying that delete protection's lookups
/// are answered from the folder (before "ready to serve"), the lookup-source gauge, no ERROR, and
/// /readyz already 200 when "ready to serve" is logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_mode_says_that_lookups_come_from_the_folder_and_logs_ready_only_when_ready() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_folder(dir.path());
    let serve = Serve::start(dir.path(), &["--cluster-dir", cluster.to_str().unwrap()]);
    let events = serve.until("kruise-admission ready to serve");
    let ready = events.last().unwrap();
    assert_eq!(http_get(addr(ready, "metrics"), "/readyz").await, (StatusCode::OK, "ok".to_owned()));
    assert!(errors(&events).is_empty(), "errors before ready: {:#?}", errors(&events));
    let warning = events
        .iter()
        .find(|e| e["level"] == "WARN" && e["lookup_source"] == "cluster-folder")
        .unwrap_or_else(|| panic!("no folder-lookup warning in {events:#?}"));
    let message = warning["message"].as_str().unwrap();
    for expected in
        ["delete protection", "Cascading", "cluster folder", "can be deleted", "--cluster-mode live"]
    {
        assert!(message.contains(expected), "{expected:?} missing from {message}");
    }
    let metrics = http_get(addr(ready, "metrics"), "/metrics").await.1;
    assert!(metrics.contains("kruise_admission_lookup_source{source=\"cluster-folder\"} 1"), "{metrics}");
    assert!(!metrics.contains("source=\"api-server\""), "{metrics}");
}

/// A folder that cannot be loaded: the log says "not ready yet" with the reason /readyz gives (and
/// never "ready to serve"); once the folder is fixed, "ready to serve" comes with /readyz 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_log_lines_follow_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    std::fs::write(cluster.join("broken.yaml"), "{ not yaml: [").unwrap();
    let serve = Serve::start(dir.path(), &["--cluster-dir", cluster.to_str().unwrap()]);
    let events = serve.until("not ready yet");
    assert!(!events.iter().any(|e| e["message"] == "kruise-admission ready to serve"), "{events:#?}");
    let waiting = events.last().unwrap();
    let metrics = addr(waiting, "metrics");
    let (status, reason) = http_get(metrics, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(waiting["reason"], reason.as_str());

    std::fs::write(cluster.join("broken.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: fixed}\n")
        .unwrap();
    let events = serve.until("kruise-admission ready to serve");
    assert!(errors(&events).is_empty(), "{events:#?}");
    assert_eq!(http_get(metrics, "/readyz").await.0, StatusCode::OK);
}
