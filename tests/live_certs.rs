//! `--cert-mode self-managed` against the loopback stand-in API server (`fake_apiserver`): one CA
//! for all replicas, renewal, files a TLS client accepts, and caBundle patching that writes only
//! when something differs.

mod fake_apiserver;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use fake_apiserver::{FakeApiServer, pem_to_der};
use kruise_admission::cluster::live::certs::{CertManager, CertSettings};
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

fn install_configs(server: &FakeApiServer) {
    server.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kruise-mutating-webhook-configuration", "annotations": {"template": ""}},
        "webhooks": [webhook("mpod.kb.io", "/mutate-pod"), webhook("msidecarset.kb.io", "/mutate-apps-kruise-io-sidecarset")]}));
    server.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "kruise-validating-webhook-configuration"},
        "webhooks": [webhook("vnamespace.kb.io", "/validate-namespace")]}));
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
            out.push(String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).unwrap()).unwrap());
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
    let server_config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(vec![cert.into()], key).unwrap();
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await;
    install_configs(&server);
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = CertManager::new(server.client(), settings(dir_a.path()));
    let b = CertManager::new(server.client(), settings(dir_b.path()));
    let (ra, rb) = tokio::join!(a.sync_once(), b.sync_once());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    // Both raced to create; exactly one create landed (the other got AlreadyExists and read it).
    assert_eq!(server.requests("create", "secrets"), 2, "both replicas found no Secret and tried to create it");
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await;
    install_configs(&server);
    let dir = tempfile::tempdir().unwrap();
    let manager = CertManager::new(server.client(), settings(dir.path()));
    let first = manager.sync_once().await.unwrap();
    assert_eq!(first.configs_patched, 2);
    assert!(first.secret_written && first.files_written);
    let ca = secret_text(&server, "ca.crt");
    assert_eq!(ca_bundles(&server), vec![ca.clone(); 3]);
    let mutating =
        server.get("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "kruise-mutating-webhook-configuration").unwrap();
    assert_eq!(mutating["webhooks"][1]["futureField"]["kept"], true, "fields this binary does not know survive");
    assert_eq!(mutating["webhooks"][1]["clientConfig"]["service"]["path"], "/mutate-apps-kruise-io-sidecarset");

    let writes =
        (server.writes("secrets"), server.writes("mutatingwebhookconfigurations"), server.writes("validatingwebhookconfigurations"));
    let second = manager.sync_once().await.unwrap();
    assert_eq!((second.secret_written, second.files_written, second.configs_patched), (false, false, 0));
    assert_eq!(
        (server.writes("secrets"), server.writes("mutatingwebhookconfigurations"), server.writes("validatingwebhookconfigurations")),
        writes,
        "a second run makes no write"
    );

    // Someone resets a caBundle (e.g. a helm upgrade): the next sync puts it back, once.
    let mut validating = server
        .get("admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "kruise-validating-webhook-configuration")
        .unwrap();
    validating["webhooks"][0]["clientConfig"].as_object_mut().unwrap().remove("caBundle");
    server.apply(validating);
    assert_eq!(manager.sync_once().await.unwrap().configs_patched, 1);
    assert_eq!(ca_bundles(&server), vec![ca; 3]);
}

#[tokio::test]
async fn an_expiring_serving_certificate_is_renewed_with_the_same_ca() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await;
    install_configs(&server);
    let dir = tempfile::tempdir().unwrap();
    let manager = CertManager::new(server.client(), settings(dir.path()));
    manager.sync_once().await.unwrap();
    let ca = secret_text(&server, "ca.crt");
    // Replace the serving certificate with one from the same CA that expires in 10 days, inside
    // the 30-day --cert-renew-before window.
    let ca_key = rcgen::KeyPair::from_pem(&secret_text(&server, "ca.key")).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["kruise-webhook-service.kruise-system.svc".to_string()]).unwrap();
    params.not_after = time::OffsetDateTime::now_utc() + time::Duration::days(10);
    let short = params.signed_by(&key, &issuer).unwrap().pem();
    let mut secret = server.get("", "secrets", NS, SECRET).unwrap();
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    secret["data"]["tls.crt"] = json!(b64(&short));
    secret["data"]["tls.key"] = json!(b64(&key.serialize_pem()));
    server.apply(secret);
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
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = FakeApiServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let err = CertManager::new(server.client(), settings(dir.path())).start(Duration::from_secs(30)).await.err().unwrap();
    assert!(err.message.contains("MutatingWebhookConfiguration \"kruise-mutating-webhook-configuration\" does not exist"), "{err}");
    assert!(err.message.contains("--mutating-webhook-config-name"), "{err}");

    server.forbid("get", "secrets");
    let started = std::time::Instant::now();
    let err = CertManager::new(server.client(), settings(dir.path())).start(Duration::from_secs(30)).await.err().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5), "forbidden is not retried until the deadline");
    assert!(
        err.message.contains("forbidden") && err.message.contains("get on secrets (kruise-admission-certs) in namespace \"kruise-system\""),
        "{err}"
    );

    server.allow("get", "secrets");
    install_configs(&server);
    let handle = CertManager::new(server.client(), settings(dir.path())).start(Duration::from_secs(30)).await.unwrap();
    let status = handle.status();
    assert!(status.not_after.is_some() && status.last_error.is_none());
}
