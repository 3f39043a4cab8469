//! `--cert-mode self-managed` against the loopback stand-in API server (`fake_apiserver`): one CA
//! for all replicas, renewal, files a TLS client accepts, caBundle patching that writes only when
//! something differs, and failed renewals (counted, retried with backoff, the certificate in use
//! kept); a reset caBundle seen by the watch and repaired at once, spaced out when it keeps being
//! reset. Also, for every cert mode: an expired serving certificate makes `/readyz` fail.

use crate::common;
use crate::fake_apiserver;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use common::client::http_get;
use common::server::TestServer;
use fake_apiserver::{FakeApiServer, pem_to_der};
use hyper::StatusCode;
use kruise_admission::cluster::live::certs::{CertManager, CertSettings, CertTiming};
use serde_json::{Value, json};

const NS: &str = "kruise-system";
const SECRET: &str = "kruise-admission-certs";

fn settings(dir: &Path) -> CertSettings {
    CertSettings {
        namespace: NS.into(),
        secret_name: SECRET.into(),
        service: "kruise-webhook-service".into(),
        renew_before: Duration::from_secs(30 * 86_400),
        cert_dir: dir.to_path_buf(),
        mutating_configs: vec!["kruise-mutating-webhook-configuration".into()],
        validating_configs: vec!["kruise-validating-webhook-configuration".into()],
    }
}

fn webhook(name: &str, path: &str) -> Value {
    json!({"name": name, "admissionReviewVersions": ["v1", "v1beta1"], "sideEffects": "None", "failurePolicy": "Fail",
           "clientConfig": {"service": {"namespace": NS, "name": "kruise-webhook-service", "path": path}},
           "futureField": {"kept": true}})
}

/// The stand-in API server (which also installs rustls' crypto provider) holding the two webhook
/// configurations whose caBundle the manager keeps.
async fn api_with_configs() -> FakeApiServer {
    let server = FakeApiServer::start().await;
    install_configs(&server);
    server
}

fn install_configs(server: &FakeApiServer) {
    server.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kruise-mutating-webhook-configuration", "annotations": {"template": ""}},
        "webhooks": [webhook("mpod.kb.io", "/mutate-pod"), webhook("msidecarset.kb.io", "/mutate-apps-kruise-io-sidecarset")]}));
    server.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "kruise-validating-webhook-configuration"},
        "webhooks": [webhook("vnamespace.kb.io", "/validate-namespace")]}),
    );
}

fn secret_text(server: &FakeApiServer, key: &str) -> String {
    let secret = server.get("", "secrets", NS, SECRET).expect("the Secret exists");
    let b64 = secret["data"][key].as_str().unwrap_or_else(|| panic!("Secret has {key}"));
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap()
}

fn ca_bundles(server: &FakeApiServer) -> Vec<String> {
    let mut out = Vec::new();
    for (plural, name) in [
        ("mutatingwebhookconfigurations", "kruise-mutating-webhook-configuration"),
        ("validatingwebhookconfigurations", "kruise-validating-webhook-configuration"),
    ] {
        let config = server.get("admissionregistration.k8s.io", plural, "", name).unwrap();
        for w in config["webhooks"].as_array().unwrap() {
            let b64 = w["clientConfig"]["caBundle"].as_str().unwrap_or_default();
            out.push(
                String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap(),
            );
        }
    }
    out
}

/// A TLS handshake (in memory) between a server presenting `dir`'s tls.crt/tls.key and a client
/// that trusts only `ca_pem`, for the Service's DNS name: what kube-apiserver does.
async fn handshake(dir: &Path, ca_pem: &str) -> Result<(), String> {
    let cert = pem_to_der(&std::fs::read_to_string(dir.join("tls.crt")).unwrap());
    let key_pem = std::fs::read_to_string(dir.join("tls.key")).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(pem_to_der(&key_pem).into());
    let server_config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.into()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for block in ca_pem.split_inclusive("-----END CERTIFICATE-----\n").filter(|b| b.contains("BEGIN")) {
        roots.add(pem_to_der(block).into()).unwrap();
    }
    let client_config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server_config));
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config));
    let name = rustls::pki_types::ServerName::try_from("kruise-webhook-service.kruise-system.svc").unwrap();
    let (server, client) = tokio::join!(acceptor.accept(a), connector.connect(name, b));
    client.map_err(|e| e.to_string())?;
    server.map_err(|e| e.to_string())?;
    Ok(())
}

#[tokio::test]
async fn two_replicas_sharing_one_secret_end_up_with_one_ca() {
    let server = api_with_configs().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = CertManager::new(server.client(), settings(dir_a.path()));
    let b = CertManager::new(server.client(), settings(dir_b.path()));
    let (ra, rb) = tokio::join!(a.sync_once(), b.sync_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // Both raced to create; exactly one create landed (the other got AlreadyExists and read it).
    assert_eq!(
        server.requests("create", "secrets"),
        2,
        "both replicas found no Secret and tried to create it"
    );
    assert!(ra.secret_written ^ rb.secret_written, "exactly one replica wrote the Secret: {ra:?} {rb:?}");
    let ca = secret_text(&server, "ca.crt");
    for dir in [dir_a.path(), dir_b.path()] {
        assert_eq!(std::fs::read_to_string(dir.join("ca.crt")).unwrap(), ca);
        assert_eq!(std::fs::read_to_string(dir.join("tls.crt")).unwrap(), secret_text(&server, "tls.crt"));
        handshake(dir, &ca).await.unwrap();
    }
    assert!(ca_bundles(&server).iter().all(|b| *b == ca), "every webhook trusts the one CA");
    // A third replica starting later adopts the same material without writing.
    let dir_c = tempfile::tempdir().unwrap();
    let rc = CertManager::new(server.client(), settings(dir_c.path())).sync_once().await.unwrap();
    assert!(!rc.secret_written && rc.configs_patched == 0);
    assert_eq!(std::fs::read_to_string(dir_c.path().join("ca.crt")).unwrap(), ca);
}

#[tokio::test]
async fn ca_bundle_patching_is_idempotent_and_keeps_other_fields() {
    let server = api_with_configs().await;
    let dir = tempfile::tempdir().unwrap();
    let manager = CertManager::new(server.client(), settings(dir.path()));
    let first = manager.sync_once().await.unwrap();
    assert_eq!(first.configs_patched, 2);
    assert!(first.secret_written && first.files_written);
    let ca = secret_text(&server, "ca.crt");
    assert_eq!(ca_bundles(&server), vec![ca.clone(); 3]);
    let mutating = server
        .get(
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            "",
            "kruise-mutating-webhook-configuration",
        )
        .unwrap();
    assert_eq!(
        mutating["webhooks"][1]["futureField"]["kept"], true,
        "fields this binary does not know survive"
    );
    assert_eq!(
        mutating["webhooks"][1]["clientConfig"]["service"]["path"],
        "/mutate-apps-kruise-io-sidecarset"
    );

    let writes = (
        server.writes("secrets"),
        server.writes("mutatingwebhookconfigurations"),
        server.writes("validatingwebhookconfigurations"),
    );
    let second = manager.sync_once().await.unwrap();
    assert_eq!((second.secret_written, second.files_written, second.configs_patched), (false, false, 0));
    assert_eq!(
        (
            server.writes("secrets"),
            server.writes("mutatingwebhookconfigurations"),
            server.writes("validatingwebhookconfigurations")
        ),
        writes,
        "a second run makes no write"
    );

    // Someone resets a caBundle (e.g. a helm upgrade): the next sync puts it back, once.
    let mut validating = server
        .get(
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            "",
            "kruise-validating-webhook-configuration",
        )
        .unwrap();
    validating["webhooks"][0]["clientConfig"].as_object_mut().unwrap().remove("caBundle");
    server.apply(validating);
    assert_eq!(manager.sync_once().await.unwrap().configs_patched, 1);
    assert_eq!(ca_bundles(&server), vec![ca; 3]);
}

/// Replace the Secret's serving certificate with one from the same CA that expires in 10 days,
/// inside the 30-day --cert-renew-before window; returns it.
fn store_expiring_serving_cert(server: &FakeApiServer) -> String {
    let ca_key = rcgen::KeyPair::from_pem(&secret_text(server, "ca.key")).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&secret_text(server, "ca.crt"), ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(vec!["kruise-webhook-service.kruise-system.svc".to_string()]).unwrap();
    params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(10);
    let short = params.signed_by(&key, &issuer).unwrap().pem();
    let mut secret = server.get("", "secrets", NS, SECRET).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    secret["data"]["tls.crt"] = json!(b64(&short));
    secret["data"]["tls.key"] = json!(b64(&key.serialize_pem()));
    server.apply(secret);
    short
}

#[tokio::test]
async fn an_expiring_serving_certificate_is_renewed_with_the_same_ca() {
    let server = api_with_configs().await;
    let dir = tempfile::tempdir().unwrap();
    let manager = CertManager::new(server.client(), settings(dir.path()));
    manager.sync_once().await.unwrap();
    let ca = secret_text(&server, "ca.crt");
    let short = store_expiring_serving_cert(&server);
    let configs_before = server.writes("mutatingwebhookconfigurations");

    let outcome = manager.sync_once().await.unwrap();
    assert!(outcome.secret_written && outcome.files_written);
    assert_ne!(secret_text(&server, "tls.crt"), short);
    assert_eq!(secret_text(&server, "ca.crt"), ca, "the CA is kept");
    assert_eq!(outcome.configs_patched, 0, "same CA, so no caBundle change");
    assert_eq!(server.writes("mutatingwebhookconfigurations"), configs_before);
    assert!(outcome.not_after > time::OffsetDateTime::now_utc() + time::Duration::days(300));
    handshake(dir.path(), &ca).await.unwrap();
}

#[tokio::test]
async fn start_fails_fast_on_missing_configurations_and_forbidden_secrets() {
    let server = FakeApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let err = CertManager::new(server.client(), settings(dir.path()))
        .start(Duration::from_secs(30))
        .await
        .err()
        .unwrap();
    assert!(
        err.message.contains(
            "MutatingWebhookConfiguration \"kruise-mutating-webhook-configuration\" does not exist"
        ),
        "{err}"
    );
    assert!(err.message.contains("--mutating-webhook-config-name"), "{err}");

    server.forbid("get", "secrets");
    let started = std::time::Instant::now();
    let err = CertManager::new(server.client(), settings(dir.path()))
        .start(Duration::from_secs(30))
        .await
        .err()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "forbidden is not retried until the deadline");
    assert!(
        err.message.contains("forbidden")
            && err.message.contains("get on secrets (kruise-admission-certs) in namespace \"kruise-system\""),
        "{err}"
    );

    server.allow("get", "secrets");
    install_configs(&server);
    let handle =
        CertManager::new(server.client(), settings(dir.path())).start(Duration::from_secs(30)).await.unwrap();
    let status = handle.status();
    assert!(status.not_after.is_some() && status.last_error.is_none());
}

/// The value of an unlabelled sample in a Prometheus text page.
fn sample(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test]
async fn a_failed_renewal_is_counted_and_retried_with_backoff_and_keeps_the_certificate_in_use() {
    let server = api_with_configs().await;
    let dir = tempfile::tempdir().unwrap();
    let timing = CertTiming {
        resync: Duration::from_millis(100),
        retry_min: Duration::from_millis(200),
        retry_max: Duration::from_millis(800),
    };
    let handle = CertManager::new(server.client(), settings(dir.path()))
        .with_timing(timing)
        .start(Duration::from_secs(30))
        .await
        .unwrap();
    let ca = secret_text(&server, "ca.crt");
    let in_use = std::fs::read_to_string(dir.path().join("tls.crt")).unwrap();
    // A server whose /metrics shows the loop's status, as `serve --cert-mode self-managed` wires it.
    let status = handle.status_view();
    let web = TestServer::start_with(move |config| config.cert_status = Some(status)).await;

    // The stored certificate now needs renewing, and the API server refuses Secret writes.
    server.forbid("update", "secrets");
    let updates_before = server.requests("update", "secrets");
    store_expiring_serving_cert(&server);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = server.requests("update", "secrets") - updates_before;
    let status = handle.status();
    // Without backoff (every 100 ms) this would be about 20; with 200, 400, 800, 800 ms about 4.
    assert!((2..=6).contains(&attempts), "renewal retried with backoff: {attempts} attempts in 2 s");
    assert!(status.failures >= 2, "{status:?}");
    let error = status.last_error.clone().unwrap_or_default();
    assert!(
        error.contains("forbidden") && error.contains("update on secrets (kruise-admission-certs)"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(),
        in_use,
        "the valid certificate in use is kept"
    );
    handshake(dir.path(), &ca).await.unwrap();
    let (code, page) = http_get(web.metrics, "/metrics").await;
    assert_eq!(code, StatusCode::OK);
    let counted = sample(&page, "kruise_admission_certificate_renewal_failures_total").unwrap_or_default();
    assert!(counted >= 2.0, "failures counted in the metric: {counted}");

    // Writes allowed again: the next retry renews, with the same CA.
    server.allow("update", "secrets");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(dir.path().join("tls.crt")).unwrap() == in_use {
        assert!(std::time::Instant::now() < deadline, "renewed once the Secret can be written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(std::fs::read_to_string(dir.path().join("tls.crt")).unwrap(), secret_text(&server, "tls.crt"));
    handshake(dir.path(), &ca).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(handle.status().last_error.is_none());
    web.stop().await.unwrap();
}

/// Poll `/readyz` until it answers `code`, for at most 5 s; returns the body.
async fn wait_readyz(addr: std::net::SocketAddr, code: StatusCode) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (status, body) = http_get(addr, "/readyz").await;
        if status == code {
            return body;
        }
        assert!(std::time::Instant::now() < deadline, "/readyz stayed {status} ({body}), expected {code}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_expired_serving_certificate_makes_the_server_unready_until_a_valid_one_loads() {
    let web = TestServer::start().await;
    wait_readyz(web.metrics, StatusCode::OK).await;

    // The files are replaced by a pair that expired yesterday (e.g. a rotation that never ran).
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = time::OffsetDateTime::now_utc() - time::Duration::days(30);
    params.not_after = time::OffsetDateTime::now_utc() - time::Duration::days(1);
    let expired = params.self_signed(&key).unwrap();
    std::fs::write(&web.certs.key, key.serialize_pem()).unwrap();
    std::fs::write(&web.certs.cert, expired.pem()).unwrap();
    let why = wait_readyz(web.metrics, StatusCode::SERVICE_UNAVAILABLE).await;
    assert!(why.contains("serving certificate expired at"), "{why}");

    let (cert, key) = kruise_admission::cli::certs::issue_from_ca(&web.certs, &[]).unwrap();
    std::fs::write(&web.certs.key, key).unwrap();
    std::fs::write(&web.certs.cert, cert).unwrap();
    assert_eq!(wait_readyz(web.metrics, StatusCode::OK).await, "ok");
    web.stop().await.unwrap();
}

/// Replace the Secret's CA with one that expires in 100 days (less than the serving certificate's
/// year, so every replica must replace it) and a serving certificate it signed; returns the CA.
fn store_expiring_ca(server: &FakeApiServer) -> String {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(rcgen::DnType::CommonName, "kruise-admission-webhook-ca");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature];
    ca.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(100);
    let ca_pem = ca.clone().self_signed(&ca_key).unwrap().pem();
    let issuer = rcgen::Issuer::new(ca, &ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["kruise-webhook-service.kruise-system.svc".to_string()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap().pem();
    let mut secret = server.get("", "secrets", NS, SECRET).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    secret["data"] = json!({"ca.crt": b64(&ca_pem), "ca.key": b64(&ca_key.serialize_pem()),
                            "tls.crt": b64(&cert), "tls.key": b64(&key.serialize_pem())});
    server.apply(secret);
    ca_pem
}

#[tokio::test]
async fn two_replicas_rotating_the_ca_at_once_converge_on_one_ca() {
    let server = api_with_configs().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = CertManager::new(server.client(), settings(dir_a.path()));
    let b = CertManager::new(server.client(), settings(dir_b.path()));
    a.sync_once().await.unwrap();
    b.sync_once().await.unwrap();
    let old_ca = store_expiring_ca(&server);
    // Both read the expiring CA before either writes (reads are slowed down), both make a new CA
    // and both replace the Secret with the resourceVersion they read: one must get 409 Conflict,
    // read again and adopt the winner's CA instead of writing its own over it.
    server.slow_down(Duration::from_millis(300));
    let updates_before = server.requests("update", "secrets");
    let (ra, rb) = tokio::join!(a.sync_once(), b.sync_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    server.slow_down(Duration::ZERO);
    assert_eq!(
        server.requests("update", "secrets") - updates_before,
        2,
        "both replicas tried to replace the expiring CA"
    );
    assert!(ra.secret_written ^ rb.secret_written, "exactly one replacement landed: {ra:?} {rb:?}");
    let bundle = secret_text(&server, "ca.crt");
    let new_ca = bundle.split_inclusive("-----END CERTIFICATE-----\n").next().unwrap().to_owned();
    assert_ne!(new_ca, old_ca, "the CA was replaced");
    assert!(bundle.contains(old_ca.trim()), "the old CA stays trusted until it expires");
    for dir in [dir_a.path(), dir_b.path()] {
        assert_eq!(
            std::fs::read_to_string(dir.join("ca.crt")).unwrap(),
            bundle,
            "both replicas serve from one CA"
        );
        assert_eq!(std::fs::read_to_string(dir.join("tls.crt")).unwrap(), secret_text(&server, "tls.crt"));
        handshake(dir, &new_ca).await.unwrap();
    }
    assert!(ca_bundles(&server).iter().all(|b| *b == bundle), "every webhook trusts the one CA bundle");
    // And the next round changes nothing anywhere.
    let (ra, rb) = tokio::join!(a.sync_once(), b.sync_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert!(!ra.secret_written && !rb.secret_written && ra.configs_patched + rb.configs_patched == 0);
}

#[tokio::test]
async fn an_absurd_cert_renew_before_is_a_clear_startup_error() {
    let server = api_with_configs().await;
    let dir = tempfile::tempdir().unwrap();
    let day = 86_400;
    // 999999999d overflows the date arithmetic; 20 years outlives the 10-year CA (every sync
    // would make a new CA); u64::MAX seconds is what the duration parser saturates to; zero
    // would renew only after expiry.
    for seconds in [999_999_999 * day, 20 * 365 * day, u64::MAX, 0] {
        let mut s = settings(dir.path());
        s.renew_before = Duration::from_secs(seconds);
        let started = CertManager::new(server.client(), s).start(Duration::from_secs(5)).await;
        let error = started.err().unwrap_or_else(|| panic!("renew_before {seconds}s was accepted"));
        assert!(
            error.message.contains("--cert-renew-before") && error.message.contains("at most"),
            "{error}"
        );
    }
    assert_eq!(server.writes("secrets"), 0, "nothing was written");
    // Through the binary: the same message, exit code 1, no panic.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args([
            "serve",
            "--cert-mode",
            "self-managed",
            "--cert-renew-before",
            "999999999d",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--metrics-listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(server.write_kubeconfig(dir.path()))
        .arg("--cert-dir")
        .arg(dir.path().join("certs"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && output.status.code().is_some(),
        "exits with an error code, not a signal: {stderr}"
    );
    assert!(
        stderr.contains("--cert-renew-before") && stderr.contains("at most") && !stderr.contains("panic"),
        "{stderr}"
    );
}

const MUTATING: (&str, &str) = ("mutatingwebhookconfigurations", "kruise-mutating-webhook-configuration");

fn mutating_config(server: &FakeApiServer) -> Value {
    server.get("admissionregistration.k8s.io", MUTATING.0, "", MUTATING.1).unwrap()
}

/// Reset the mutating configuration's caBundles as a `helm upgrade` would: the first webhook's to
/// another CA, the second's removed. Returns the resourceVersion it was stored with.
fn reset_ca_bundles(server: &FakeApiServer) -> u64 {
    let mut config = mutating_config(server);
    let other = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    config["webhooks"][0]["clientConfig"]["caBundle"] =
        json!(base64::engine::general_purpose::STANDARD.encode(other));
    config["webhooks"][1]["clientConfig"].as_object_mut().unwrap().remove("caBundle");
    let stored = server.apply(config);
    stored["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_reset_ca_bundle_is_repaired_within_two_seconds_once_across_replicas() {
    let server = api_with_configs().await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The default timing: the periodic check comes only after a minute.
    let a = CertManager::new(server.client(), settings(dir_a.path()))
        .start(Duration::from_secs(30))
        .await
        .unwrap();
    let b = CertManager::new(server.client(), settings(dir_b.path()))
        .start(Duration::from_secs(30))
        .await
        .unwrap();
    let ca = secret_text(&server, "ca.crt");
    let status = a.status_view();
    let web = TestServer::start_with(move |config| config.cert_status = Some(status)).await;
    // Both replicas watch each configuration by name, which is what lets RBAC grant it by name.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while server.requests("watch", MUTATING.0) < 2
        || server.requests("watch", "validatingwebhookconfigurations") < 2
    {
        assert!(std::time::Instant::now() < deadline, "both replicas watch both configurations");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for verb in ["list", "watch"] {
        for plural in [MUTATING.0, "validatingwebhookconfigurations"] {
            for params in server.params(verb, plural) {
                let name =
                    if plural == MUTATING.0 { MUTATING.1 } else { "kruise-validating-webhook-configuration" };
                assert_eq!(
                    params.get("fieldSelector"),
                    Some(&format!("metadata.name={name}")),
                    "{verb} {plural}"
                );
            }
        }
    }

    let reset_at = std::time::Instant::now();
    let reset_rv = reset_ca_bundles(&server);
    while ca_bundles(&server).iter().any(|b| *b != ca) {
        assert!(
            reset_at.elapsed() < Duration::from_secs(2),
            "caBundle still wrong after 2 s: {:?}",
            ca_bundles(&server)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let repaired_in = reset_at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rv: u64 = mutating_config(&server)["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        rv,
        reset_rv + 1,
        "exactly one repair landed (the other replica got a conflict or found it done)"
    );
    assert_eq!(mutating_config(&server)["webhooks"][1]["futureField"]["kept"], true, "other fields kept");
    let repairs = a.status().ca_bundle_repairs + b.status().ca_bundle_repairs;
    assert_eq!(repairs, 1, "one repair counted across the replicas (repaired in {repaired_in:?})");
    let (_, page) = http_get(web.metrics, "/metrics").await;
    assert_eq!(
        sample(&page, "kruise_admission_ca_bundle_repairs_total"),
        Some(a.status().ca_bundle_repairs as f64),
        "the metric follows the replica's count"
    );
    // The replicas' own writes, seen by their watches, start no further syncs.
    let secret_reads = server.requests("get", "secrets");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.requests("get", "secrets"), secret_reads, "no sync without drift");
    web.stop().await.unwrap();
}

#[tokio::test]
async fn a_ca_bundle_reset_over_and_over_gets_repairs_spaced_out() {
    let server = api_with_configs().await;
    let dir = tempfile::tempdir().unwrap();
    let handle =
        CertManager::new(server.client(), settings(dir.path())).start(Duration::from_secs(30)).await.unwrap();
    let ca = secret_text(&server, "ca.crt");
    // Something (a GitOps tool without an ignore rule) resets it every 100 ms for 4 s.
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        if ca_bundles(&server).iter().all(|b| *b == ca) {
            reset_ca_bundles(&server);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let repairs = handle.status().ca_bundle_repairs;
    // Immediate, immediate, then 1 s, 2 s apart: 4 in 4 s; without pacing about 40.
    assert!((3..=6).contains(&repairs), "{repairs} repairs in 4 s of resets every 100 ms");
}
