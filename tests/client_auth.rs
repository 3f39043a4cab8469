//! `--client-ca-file`: client certificates required and verified, both ways, and the CA file
//! reloaded when it changes.

mod common;

use std::time::Duration;

use common::client::{BOTH, Proto, TlsClient};
use common::server::TestServer;
use hyper::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// A CA (PEM certificate) and a client certificate it signed (PEM certificate and key).
struct ClientPki {
    ca_pem: String,
    client_cert: String,
    client_key: String,
}

fn pki(name: &str) -> ClientPki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::default();
    ca.distinguished_name.push(DnType::CommonName, format!("{name} client CA"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca.clone().self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::new(ca, &ca_key);
    let key = KeyPair::generate().unwrap();
    let mut client = CertificateParams::default();
    client.distinguished_name.push(DnType::CommonName, "kube-apiserver");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let client_cert = client.signed_by(&key, &issuer).unwrap().pem();
    ClientPki { ca_pem, client_cert, client_key: key.serialize_pem() }
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
    let with_right = server.client().with_client_cert(right.client_cert.as_bytes(), right.client_key.as_bytes());
    let with_wrong = server.client().with_client_cert(wrong.client_cert.as_bytes(), wrong.client_key.as_bytes());
    // The server's own serving certificate is not a client certificate of the right CA either.
    let serving = server.client().with_client_cert(&std::fs::read(&server.certs.cert).unwrap(), &std::fs::read(&server.certs.key).unwrap());
    for proto in BOTH {
        assert!(!served(&anonymous, proto).await, "no client certificate must be refused ({proto:?})");
        assert!(!served(&with_wrong, proto).await, "a certificate from another CA must be refused ({proto:?})");
        assert!(!served(&serving, proto).await, "a certificate from the serving CA must be refused ({proto:?})");
        assert!(served(&with_right, proto).await, "a certificate from the configured CA is served ({proto:?})");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_flag_any_client_is_served() {
    let other = pki("other");
    let server = TestServer::start().await;
    for proto in BOTH {
        assert!(served(&server.client(), proto).await);
        let with_cert = server.client().with_client_cert(other.client_cert.as_bytes(), other.client_key.as_bytes());
        assert!(served(&with_cert, proto).await, "an unsolicited client certificate is not needed and not checked");
    }
    server.stop().await.unwrap();
}

#[test]
fn serve_refuses_to_start_with_an_unreadable_client_ca_and_names_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--cert-dir"])
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
