//! The `kruise-admission` binary itself: `certs`, and `serve` on the embedded default from start
//! to SIGTERM.

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::client::{Proto, TlsClient, http_get};
use hyper::StatusCode;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kruise-admission");

/// Stops the server this test started if an assertion fails before its SIGTERM.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn certs_creates_the_files_once_and_then_reuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = || {
        Command::new(BIN)
            .args(["certs", "--out"])
            .arg(&out)
            .args(["--dns-name", "webhook.kruise-system.svc"])
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert!(String::from_utf8_lossy(&first.stdout).contains("created CA"));
    for name in ["ca.crt", "ca.key", "tls.crt", "tls.key"] {
        assert!(out.join(name).is_file(), "{name} missing");
    }
    let ca = std::fs::read(out.join("ca.crt")).unwrap();
    let second = run();
    assert!(second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("reused CA"),
        "{}",
        String::from_utf8_lossy(&second.stdout)
    );
    assert_eq!(std::fs::read(out.join("ca.crt")).unwrap(), ca);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_on_the_embedded_default_answers_and_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    std::fs::write(cluster.join("ns.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n")
        .unwrap();
    let mut child = KillOnDrop(
        Command::new(BIN)
            .current_dir(dir.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cluster-dir"])
            .arg(&cluster)
            .args(["--log-format", "json", "--shutdown-grace", "5s"])
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let child = &mut child.0;
    // The JSON log says where it listens; every line must be one JSON object.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = loop {
        let line = lines.next().expect("serve exited before it was ready").unwrap();
        let event: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
        if event["message"] == "kruise-admission ready to serve" {
            break event;
        }
    };
    let https: std::net::SocketAddr = ready["https"].as_str().unwrap().parse().unwrap();
    let metrics: std::net::SocketAddr = ready["metrics"].as_str().unwrap().parse().unwrap();
    // The embedded default: certs/ under the working directory, keys private.
    #[cfg(unix)]
    for key in ["ca.key", "tls.key"] {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(dir.path().join("certs").join(key)).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let client = TlsClient::new(https, &std::fs::read(dir.path().join("certs/ca.crt")).unwrap());
    let review = std::fs::read(common::fixtures_dir().join("recorded/kube-rs-pod-create-gke.json")).unwrap();
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", review).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(http_get(metrics, "/readyz").await.0, StatusCode::OK);

    // One structured line for that request.
    let logged = loop {
        let line = lines.next().expect("log ended").unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        if event["message"] == "admission review" {
            break event;
        }
    };
    for field in ["uid", "kind", "object", "operation", "path", "allowed", "code", "patch_ops", "latency_us"]
    {
        assert!(logged.get(field).is_some(), "{field} missing from {logged}");
    }
    assert_eq!(logged["uid"], reply.json()["response"]["uid"]);

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(std::time::Instant::now() < deadline, "serve did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit}");
}
