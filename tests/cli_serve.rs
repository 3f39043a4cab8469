//! The `kruise-admission` binary itself: `certs`, and `serve` on the embedded default from start
//! to SIGTERM.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::client::{Proto, TlsClient, http_get};
use common::serve_process::{BIN, Serve, addr, cluster_folder};
use hyper::StatusCode;

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
    let cluster = cluster_folder(dir.path());
    // Every log line must be one JSON object (`Serve` fails the test on any other).
    let mut serve =
        Serve::start(dir.path(), &["--cluster-dir", cluster.to_str().unwrap(), "--shutdown-grace", "5s"]);
    let ready = serve.until("kruise-admission ready to serve").pop().unwrap();
    let (https, metrics) = (addr(&ready, "https"), addr(&ready, "metrics"));
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
    // The ready line says what to try: a curl of the repository's example review, trusting the
    // embedded CA. What it sends is answered with the DaemonSet-style stamp.
    assert_eq!(
        ready["try"],
        format!(
            "curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data \
             @examples/reviews/pod-target-node.json https://localhost:{}/mutate-pod",
            https.port()
        )
    );
    let example = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reviews/pod-target-node.json"),
    )
    .unwrap();
    let tried = client.post_json(Proto::Http1, "/mutate-pod", example).await;
    assert_eq!(tried.status, StatusCode::OK);
    let response = &tried.json()["response"];
    assert!(response["allowed"] == true && response["patch"].is_string(), "{response}");
    assert_eq!(http_get(metrics, "/readyz").await.0, StatusCode::OK);

    // One structured line for the first request.
    let logged = serve.until("admission review").pop().unwrap();
    for field in ["uid", "kind", "object", "operation", "path", "allowed", "code", "patch_ops", "latency_us"]
    {
        assert!(logged.get(field).is_some(), "{field} missing from {logged}");
    }
    assert_eq!(logged["uid"], reply.json()["response"]["uid"]);

    let child = &mut serve.child;
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

/// On a laptop the HTTPS port listens on loopback only (client authentication is off by default);
/// the chart, the manifests and the image pass `--listen=0.0.0.0:9443`.
#[test]
fn serve_listens_on_loopback_by_default() {
    use clap::{Args as _, FromArgMatches as _};
    use kruise_admission::cli::serve::ServeArgs;
    let matches = ServeArgs::augment_args(clap::Command::new("serve")).get_matches_from(["serve"]);
    let args = ServeArgs::from_arg_matches(&matches).expect("the defaults parse");
    assert_eq!(args.listen, "127.0.0.1:9443".parse().unwrap());
}
