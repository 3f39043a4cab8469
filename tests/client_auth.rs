//! `--client-ca-file`: client certificates required and verified, both ways, and the CA file
//! reloaded when it changes.

use crate::common;

use std::time::Duration;

use common::client::{BOTH, Proto, TlsClient};
use common::serve_process;
use common::server::TestServer;
use hyper::StatusCode;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA (PEM certificate) and a client certificate it signed (PEM certificate and key).
struct ClientPki {
    ca_pem: String,
    client_cert: String,
    client_key: String,
}

/// A client CA.
struct Ca {
    pem: String,
    params: CertificateParams,
    key: KeyPair,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, format!("{name} client CA"));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let pem = params.clone().self_signed(&key).unwrap().pem();
    Ca { pem, params, key }
}

/// A client certificate signed by `ca` with Common Name `cn` (none when `None`) and DNS SANs `dns`.
fn client_cert(ca: &Ca, cn: Option<&str>, dns: &[&str]) -> ClientPki {
    let issuer = Issuer::new(ca.params.clone(), &ca.key);
    let key = KeyPair::generate().unwrap();
    let mut client = CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
    client.distinguished_name = rcgen::DistinguishedName::new();
    if let Some(cn) = cn {
        client.distinguished_name.push(DnType::CommonName, cn);
    }
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let client_cert = client.signed_by(&key, &issuer).unwrap().pem();
    ClientPki { ca_pem: ca.pem.clone(), client_cert, client_key: key.serialize_pem() }
}

fn pki(name: &str) -> ClientPki {
    client_cert(&ca(name), Some("kube-apiserver"), &[])
}

/// Whether a good review over `proto` is answered (false: the handshake or the request failed).
async fn served(client: &TlsClient, proto: Proto) -> bool {
    let attempt = async {
        let mut conn = client.connect(proto).await.ok()?;
        let body = bytes::Bytes::from(common_review());
        conn.request(hyper::Method::POST, "/mutate-pod", Some("application/json"), body).await.ok()
    };
    match tokio::time::timeout(Duration::from_secs(5), attempt).await {
        Ok(Some(reply)) => reply.status == StatusCode::OK,
        _ => false,
    }
}

fn common_review() -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "ca", "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "namespace": "default", "object": {"metadata": {"name": "p"}, "spec": {"containers": []}}}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_verified() {
    let (right, wrong) = (pki("right"), pki("wrong"));
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &right.ca_pem).unwrap();
    let server = TestServer::start_with(|c| c.client_ca_file = Some(ca_file.clone())).await;
    let anonymous = server.client();
    let with_right =
        server.client().with_client_cert(right.client_cert.as_bytes(), right.client_key.as_bytes());
    let with_wrong =
        server.client().with_client_cert(wrong.client_cert.as_bytes(), wrong.client_key.as_bytes());
    // The server's own serving certificate is not a client certificate of the right CA either.
    let serving = server.client().with_client_cert(
        &std::fs::read(&server.certs.cert).unwrap(),
        &std::fs::read(&server.certs.key).unwrap(),
    );
    for proto in BOTH {
        assert!(!served(&anonymous, proto).await, "no client certificate must be refused ({proto:?})");
        assert!(
            !served(&with_wrong, proto).await,
            "a certificate from another CA must be refused ({proto:?})"
        );
        assert!(
            !served(&serving, proto).await,
            "a certificate from the serving CA must be refused ({proto:?})"
        );
        assert!(
            served(&with_right, proto).await,
            "a certificate from the configured CA is served ({proto:?})"
        );
    }

    // Rotate the client CA: the other CA's clients are served, the old ones refused.
    std::fs::write(&ca_file, &wrong.ca_pem).unwrap();
    let mut swapped = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if served(&with_wrong, Proto::Http2).await {
            swapped = true;
            break;
        }
    }
    assert!(swapped, "the new client CA was not picked up");
    assert!(!served(&with_right, Proto::Http1).await, "the old CA's client is refused after the rotation");
    // A broken CA file keeps the previous CAs.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(served(&with_wrong, Proto::Http1).await, "a broken CA file must not lock clients out");
    server.stop().await.unwrap();
}

/// How a raw HTTP/1.1 request on a TLS connection with `client`'s certificate ends: `Ok(status
/// line)` when answered, `Err(error)` when the TLS layer refused it (TLS 1.3 sends the client
/// certificate after the client considers the handshake done, so the server's alert shows on
/// the first read).
async fn raw_exchange(client: &TlsClient) -> Result<String, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let attempt = async {
        let mut tls = client.connect_raw(Proto::Http1).await.map_err(|e| e.to_string())?;
        tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        tls.read_to_end(&mut answer).await.map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&answer).into_owned();
        if text.is_empty() {
            Err("closed without an answer".to_owned())
        } else {
            Ok(text.lines().next().unwrap_or_default().to_owned())
        }
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .unwrap_or_else(|_| Err("timed out".to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_client_names_pin_the_certificate_subject_at_the_handshake() {
    let authority = ca("cluster");
    let apiserver = client_cert(&authority, Some("kube-apiserver"), &[]);
    let by_san = client_cert(&authority, None, &["apiserver.kube-system.svc"]);
    let kubelet = client_cert(&authority, Some("system:node:worker-1"), &["worker-1"]);
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &authority.pem).unwrap();
    let server = TestServer::start_with(|c| {
        c.client_ca_file = Some(ca_file.clone());
        c.allowed_client_names = vec!["kube-apiserver".into(), "apiserver.kube-system.svc".into()];
    })
    .await;
    let with =
        |p: &ClientPki| server.client().with_client_cert(p.client_cert.as_bytes(), p.client_key.as_bytes());
    for proto in BOTH {
        assert!(!served(&server.client(), proto).await, "no client certificate is refused ({proto:?})");
        assert!(served(&with(&apiserver), proto).await, "a listed Common Name is served ({proto:?})");
        assert!(served(&with(&by_san), proto).await, "a listed DNS SAN is served ({proto:?})");
        assert!(
            !served(&with(&kubelet), proto).await,
            "an unlisted name from the same CA is refused ({proto:?})"
        );
    }
    // Refused by the TLS layer (a fatal alert), not answered with an HTTP error.
    for (who, client) in [("anonymous", server.client()), ("unlisted", with(&kubelet))] {
        let outcome = raw_exchange(&client).await;
        let error = outcome.expect_err(who);
        assert!(error.contains("alert"), "{who}: expected a TLS alert, got {error}");
    }
    assert!(
        raw_exchange(&with(&apiserver)).await.is_ok_and(|line| line.starts_with("HTTP/1.1 ")),
        "the listed client gets an HTTP answer"
    );

    // Rotating the client CA keeps the pinning: the new CA's listed name is served, its
    // unlisted name and the old CA's listed name are refused.
    let rotated = ca("rotated");
    let new_apiserver = client_cert(&rotated, Some("kube-apiserver"), &[]);
    let new_kubelet = client_cert(&rotated, Some("system:node:worker-2"), &[]);
    std::fs::write(&ca_file, &rotated.pem).unwrap();
    let mut swapped = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if served(&with(&new_apiserver), Proto::Http2).await {
            swapped = true;
            break;
        }
    }
    assert!(swapped, "the new client CA was not picked up");
    for proto in BOTH {
        assert!(!served(&with(&new_kubelet), proto).await, "unlisted name of the new CA ({proto:?})");
        assert!(!served(&with(&apiserver), proto).await, "listed name of the old CA ({proto:?})");
        assert!(served(&with(&new_apiserver), proto).await, "listed name of the new CA ({proto:?})");
    }
    server.stop().await.unwrap();
}

#[test]
fn allowed_client_name_without_a_client_ca_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let output = serve_process::command(dir.path(), None)
        .args(["--allowed-client-name", "kube-apiserver", "--cert-dir"])
        .arg(dir.path().join("certs"))
        .arg("--cluster-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--client-ca-file"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_any_client_is_served() {
    let other = pki("other");
    let server = TestServer::start().await;
    for proto in BOTH {
        assert!(served(&server.client(), proto).await);
        let with_cert =
            server.client().with_client_cert(other.client_cert.as_bytes(), other.client_key.as_bytes());
        assert!(
            served(&with_cert, proto).await,
            "an unsolicited client certificate is not needed and not checked"
        );
    }
    server.stop().await.unwrap();
}

#[test]
fn serve_refuses_to_start_with_an_unreadable_client_ca_and_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let output = serve_process::command(dir.path(), None)
        .arg("--cert-dir")
        .arg(dir.path().join("certs"))
        .arg("--cluster-dir")
        .arg(dir.path())
        .arg("--client-ca-file")
        .arg(dir.path().join("missing-ca.crt"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--client-ca-file") && stderr.contains("missing-ca.crt"), "{stderr}");
}
