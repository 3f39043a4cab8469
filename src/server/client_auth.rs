//! Client-certificate authentication (`--client-ca-file`): every connection must present a
//! certificate chaining to one of the CAs in the file, as the apiserver does when its admission
//! configuration names a client certificate. The CA file is re-read like the serving certificate,
//! so rotating the apiserver's client CA needs no restart.
//!
//! A CA often signs more than the apiserver's certificate (a cluster CA signs every kubelet's and
//! controller's client certificate), so `--allowed-client-name` can pin the subjects: the chain must
//! verify AND the certificate's Common Name or one of its DNS SANs must be listed. Either check
//! failing refuses the TLS handshake, before any HTTP is read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::reload::{self, Watched};
use crate::tls_material::{parse_der, provider, roots_from_pem};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientCaError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("{0} holds no usable PEM CA certificate")]
    Empty(PathBuf),
    #[error("{path}: {error}")]
    Invalid { path: PathBuf, error: String },
}

/// A verifier for the CAs in `pem`: client certificates are required (mandatory auth).
fn verifier(path: &std::path::Path, pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, ClientCaError> {
    let invalid = |error: String| ClientCaError::Invalid { path: path.to_owned(), error };
    let roots = roots_from_pem(pem).map_err(invalid)?;
    if roots.is_empty() {
        return Err(ClientCaError::Empty(path.to_owned()));
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        // The hints would have to outlive a CA swap (the trait lends them by reference). An empty
        // list is valid TLS; Go's client (the apiserver) then sends its one certificate anyway.
        .clear_root_hint_subjects()
        .build()
        .map_err(|e| invalid(e.to_string()))
}

/// The server's client-certificate check: the chain must verify against the current CA file
/// (swapped by [`ClientVerifier::set`] when it changes) and, when names are pinned, the
/// certificate's Common Name or a DNS SAN must be one of them (compared exactly, as Kubernetes
/// compares user names).
#[derive(Debug)]
pub struct ClientVerifier {
    current: ArcSwap<Arc<dyn ClientCertVerifier>>,
    /// Empty: any certificate the CA signed.
    allowed: Vec<String>,
}

impl ClientVerifier {
    pub fn new(ca: Arc<dyn ClientCertVerifier>, allowed: Vec<String>) -> Self {
        ClientVerifier { current: ArcSwap::from_pointee(ca), allowed }
    }

    pub fn set(&self, verifier: Arc<dyn ClientCertVerifier>) {
        self.current.store(Arc::new(verifier));
    }
}

/// The names a client certificate presents: its subject Common Names and DNS SANs (`None` when
/// the certificate cannot be parsed; the chain check has already accepted it, so that is rare).
fn presented_names(end_entity: &CertificateDer<'_>) -> Option<Vec<String>> {
    let cert = parse_der(end_entity.as_ref()).ok()?;
    Some(cert.common_names.into_iter().chain(cert.dns_names).collect())
}

impl ClientCertVerifier for ClientVerifier {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self.current.load().verify_client_cert(end_entity, intermediates, now)?;
        if self.allowed.is_empty() {
            return Ok(verified);
        }
        let presented = presented_names(end_entity).unwrap_or_default();
        if presented.iter().any(|name| self.allowed.contains(name)) {
            return Ok(verified);
        }
        // Only a holder of a certificate from the trusted CA gets here, so this cannot be flooded
        // by strangers; the names tell the operator which --allowed-client-name is missing.
        tracing::warn!(?presented, allowed = ?self.allowed, "client certificate refused: no allowed name (--allowed-client-name)");
        Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current.load().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.current.load().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current.load().supported_verify_schemes()
    }
}

/// The CA file and what was last read from it.
pub struct ClientCaFile {
    pub path: PathBuf,
    last: Vec<u8>,
}

impl ClientCaFile {
    /// Read the file for startup: any problem is an error naming `--client-ca-file`. Returns the
    /// verifier for its CAs, for [`ClientVerifier::new`].
    pub fn load(path: PathBuf) -> Result<(ClientCaFile, Arc<dyn ClientCertVerifier>), ClientCaError> {
        let pem = std::fs::read(&path).map_err(|error| ClientCaError::Read { path: path.clone(), error })?;
        let current = verifier(&path, &pem)?;
        Ok((ClientCaFile { path, last: pem }, current))
    }
}

impl Watched for ClientCaFile {
    type Loaded = Arc<dyn ClientCertVerifier>;
    type Error = ClientCaError;
    const WHAT: &'static str = "client CA";

    fn poll(&mut self) -> Result<Option<Self::Loaded>, ClientCaError> {
        let pem = std::fs::read(&self.path)
            .map_err(|error| ClientCaError::Read { path: self.path.clone(), error })?;
        if pem == self.last {
            return Ok(None);
        }
        let result = verifier(&self.path, &pem);
        self.last = pem;
        result.map(Some)
    }

    fn is_read_error(error: &ClientCaError) -> bool {
        matches!(error, ClientCaError::Read { .. })
    }
}

/// Re-read the CA file every `interval`; keep the previous CAs when the new file is unusable.
pub async fn reload_loop(file: ClientCaFile, verifier: Arc<ClientVerifier>, interval: Duration) {
    reload::reload_loop(file, interval, |file, new| {
        verifier.set(new);
        tracing::info!(client_ca = %file.path.display(), "client CA reloaded");
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unusable_files_are_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.crt");
        assert!(matches!(ClientCaFile::load(path.clone()), Err(ClientCaError::Read { .. })));
        std::fs::write(&path, "not PEM").unwrap();
        let error = ClientCaFile::load(path.clone()).err().unwrap();
        assert!(matches!(error, ClientCaError::Empty(_)) && error.to_string().contains("ca.crt"), "{error}");
    }

    #[test]
    fn poll_reports_changes_once() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let ca_cert = dir.path().join("ca.crt");
        std::fs::write(&ca_cert, crate::tls_material::test_pair().0.cert_pem).unwrap();
        let (mut file, _) = ClientCaFile::load(ca_cert.clone()).unwrap();
        assert!(file.poll().unwrap().is_none());
        std::fs::write(&ca_cert, "garbage").unwrap();
        assert!(file.poll().is_err());
        assert!(file.poll().unwrap().is_none(), "the same bad file is reported once");
        std::fs::write(&ca_cert, crate::tls_material::test_pair().0.cert_pem).unwrap();
        assert!(file.poll().unwrap().is_some());
    }
}
