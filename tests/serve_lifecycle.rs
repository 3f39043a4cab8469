//! `serve` while things change under it: certificate rotation (overwrite and Secret-style symlink
//! swap) with requests in flight, and graceful shutdown.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::client::{BOTH, Proto, TlsClient, channel_body, http_get};
use common::server::TestServer;
use hyper::{Method, StatusCode};
use kruise_admission::cli::certs::{self, CertPaths};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM certificate")
}

/// Replace `path` atomically, as `kubectl cp` or a config-management tool would.
fn replace(path: &Path, contents: &str) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Connect until a handshake presents `expected`, for at most 5 s.
async fn wait_for_cert(client: &TlsClient, expected: &CertificateDer<'_>) -> Duration {
    let started = Instant::now();
    loop {
        let conn = client.connect(Proto::Http1).await.expect("connect");
        if conn.peer_cert == *expected {
            return started.elapsed();
        }
        assert!(started.elapsed() < Duration::from_secs(5), "the new certificate was not served within 5 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Requests on fresh connections, alternating HTTP/1.1 and HTTP/2, until stopped; counts failures.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(client: &TlsClient, workers: usize) -> Load {
        let (stop, ok, failed) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let tasks = (0..workers)
            .map(|w| {
                let (client, stop, ok, failed) = (client.clone(), stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    let mut i = 0usize;
                    while !stop.load(Ordering::Relaxed) {
                        let proto = if (w + i).is_multiple_of(2) { Proto::Http1 } else { Proto::Http2 };
                        let uid = format!("load-{w}-{i}");
                        let result = async {
                            let mut conn = client.connect(proto).await.map_err(|e| e.to_string())?;
                            let body = Bytes::from(common::good_review(&uid).to_string());
                            let reply = conn
                                .request(Method::POST, "/mutate-pod", Some("application/json"), body)
                                .await
                                .map_err(|e| e.to_string())?;
                            if reply.status != StatusCode::OK
                                || reply.json()["response"]["uid"] != uid.as_str()
                            {
                                return Err(format!("status {}", reply.status));
                            }
                            Ok(())
                        }
                        .await;
                        match result {
                            Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                            Err(e) => {
                                eprintln!("request {uid} over {proto:?} failed: {e}");
                                failed.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                        i += 1;
                    }
                })
            })
            .collect();
        Load { stop, ok, failed, tasks }
    }

    async fn finish(self) -> (usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        for task in self.tasks {
            task.await.unwrap();
        }
        (self.ok.load(Ordering::Relaxed), self.failed.load(Ordering::Relaxed))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overwritten_cert_files_are_served_on_the_next_handshake_and_a_bad_pair_is_ignored() {
    let server = TestServer::start().await;
    let client = server.client();
    let original = client.connect(Proto::Http2).await.unwrap().peer_cert;
    let load = Load::start(&client, 3);

    // A key that does not belong to the certificate: rejected, the old pair stays in use.
    let (other_cert, _) = certs::issue_from_ca(&server.certs, &[]).unwrap();
    replace(&server.certs.cert, &other_cert);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        client.connect(Proto::Http1).await.unwrap().peer_cert,
        original,
        "a mismatched pair must not be served"
    );

    // A good pair from the same CA: served from the next handshake on.
    let (new_cert, new_key) = certs::issue_from_ca(&server.certs, &[]).unwrap();
    replace(&server.certs.key, &new_key);
    replace(&server.certs.cert, &new_cert);
    let took = wait_for_cert(&client, &der(&new_cert)).await;
    assert!(took < Duration::from_secs(2), "reload took {took:?}");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let (ok, failed) = load.finish().await;
    assert_eq!(failed, 0, "{failed} requests failed during rotation ({ok} succeeded)");
    assert!(ok > 10, "the load loop made only {ok} requests");
    let metrics = http_get(server.metrics, "/metrics").await.1;
    let new_der = der(&new_cert);
    let (_, parsed) = x509_parser::parse_x509_certificate(&new_der).unwrap();
    let expected = format!(
        "kruise_admission_serving_certificate_not_after_seconds {}",
        parsed.validity().not_after.timestamp()
    );
    assert!(metrics.contains(&expected), "{expected} missing");
    server.stop().await.unwrap();
}

/// Lay out `cert`/`key` the way the kubelet projects a Secret: `tls.crt -> ..data/tls.crt`,
/// `..data -> ..<version>`.
fn secret_volume(dir: &Path, version: &str, cert: &str, key: &str) {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), cert).unwrap();
    std::fs::write(versioned.join("tls.key"), key).unwrap();
    // The kubelet's atomic writer: a new link, renamed over `..data`.
    let tmp_link = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp_link).unwrap();
    std::fs::rename(&tmp_link, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        if !dir.join(name).exists() {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_volume_symlink_swap_is_picked_up_without_failed_requests() {
    let mut paths: Option<CertPaths> = None;
    let server = TestServer::start_with(|config| {
        let certs_dir = config.tls_cert_file.parent().unwrap().to_path_buf();
        let ca = CertPaths::in_dir(&certs_dir);
        let volume = certs_dir.join("secret");
        let (cert, key) = certs::issue_from_ca(&ca, &[]).unwrap();
        secret_volume(&volume, "2026_01_01_v1", &cert, &key);
        config.tls_cert_file = volume.join("tls.crt");
        config.tls_key_file = volume.join("tls.key");
        paths = Some(ca);
    })
    .await;
    let ca = paths.unwrap();
    let volume = ca.cert.parent().unwrap().join("secret");
    let client = server.client();
    let first = client.connect(Proto::Http1).await.unwrap().peer_cert;
    assert_eq!(first.as_ref(), der(&std::fs::read_to_string(volume.join("tls.crt")).unwrap()).as_ref());

    let load = Load::start(&client, 3);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (cert, key) = certs::issue_from_ca(&ca, &[]).unwrap();
    secret_volume(&volume, "2026_01_02_v2", &cert, &key);
    wait_for_cert(&client, &der(&cert)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (ok, failed) = load.finish().await;
    assert_eq!(failed, 0, "{failed} requests failed during rotation ({ok} succeeded)");
    assert!(ok > 10, "the load loop made only {ok} requests");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish_and_refuses_new_connections() {
    let mut server = TestServer::start_with(|c| c.shutdown_grace = Duration::from_secs(10)).await;
    let client = server.client();
    let mut in_flight = Vec::new();
    for proto in BOTH {
        let uid = format!("in-flight-{proto:?}");
        let body = common::good_review(&uid).to_string().into_bytes();
        let (first, second) = body.split_at(body.len() / 2);
        let mut conn = client.connect(proto).await.unwrap();
        let (tx, request_body) = channel_body();
        let request = conn
            .builder(Method::POST, "/mutate-pod")
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(request_body)
            .unwrap();
        tx.send(Bytes::copy_from_slice(first)).await.unwrap();
        let response = tokio::spawn(async move { conn.send(request).await });
        in_flight.push((uid, tx, Bytes::copy_from_slice(second), response));
    }
    // Let both requests reach the handler, which is now waiting for the rest of the body.
    tokio::time::sleep(Duration::from_millis(300)).await;

    server.begin_shutdown();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = tokio::net::TcpStream::connect(server.https).await;
    assert!(refused.is_err(), "a new connection was accepted after shutdown began");
    assert_eq!(
        http_get(server.metrics, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE,
        "not ready while draining"
    );
    assert!(!server.is_finished(), "the server stopped before its in-flight requests were answered");

    for (uid, tx, rest, response) in in_flight {
        tx.send(rest).await.unwrap();
        drop(tx);
        let reply = response.await.unwrap().expect("the in-flight request is answered");
        assert_eq!(reply.status, StatusCode::OK, "{uid}");
        assert_eq!(reply.json()["response"]["uid"], uid.as_str());
    }
    tokio::time::timeout(Duration::from_secs(5), server.join())
        .await
        .expect("drained promptly once requests finished")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_gives_up_on_stuck_requests_after_the_grace_period() {
    let mut server = TestServer::start_with(|c| c.shutdown_grace = Duration::from_millis(500)).await;
    let mut conn = server.client().connect(Proto::Http1).await.unwrap();
    let (tx, request) = conn.streamed_post("/mutate-pod");
    tx.send(Bytes::from_static(b"{\"apiVersion\":")).await.unwrap();
    let _stuck = tokio::spawn(async move { conn.send(request).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    server.begin_shutdown();
    server.join().await.unwrap();
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(450) && took < Duration::from_secs(3), "shutdown took {took:?}");
    drop(tx);
}
