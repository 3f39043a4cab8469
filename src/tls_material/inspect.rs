//! Reading certificates back: the fields the checks compare (x509-parser), key matching, PEM
//! blocks, and the rustls objects built from PEM (a served pair, a set of trusted CAs).

use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use rcgen::{KeyPair, PublicKeyData as _};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use time::OffsetDateTime;
use x509_parser::extensions::GeneralName;

/// What the checks read from a certificate.
#[derive(Debug, Clone)]
pub struct ParsedCert {
    pub der: Vec<u8>,
    /// Subject and issuer, DER: a certificate was issued by a CA when its issuer is the CA's subject.
    pub subject: Vec<u8>,
    pub issuer: Vec<u8>,
    /// SubjectPublicKeyInfo, DER.
    pub spki: Vec<u8>,
    /// The subject's Common Names that are text, in order.
    pub common_names: Vec<String>,
    /// The DNS names among the subjectAltNames.
    pub dns_names: Vec<String>,
    pub is_ca: bool,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

/// One DER certificate; the error is x509-parser's, as text.
pub fn parse_der(der: &[u8]) -> Result<ParsedCert, String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    let dns_names = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some((*d).to_owned()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(ParsedCert {
        der: der.to_vec(),
        subject: cert.subject().as_raw().to_vec(),
        issuer: cert.issuer().as_raw().to_vec(),
        spki: cert.public_key().raw.to_vec(),
        common_names: cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok().map(str::to_owned))
            .collect(),
        dns_names,
        is_ca: cert.is_ca(),
        not_before: cert.validity().not_before.to_datetime(),
        not_after: cert.validity().not_after.to_datetime(),
    })
}

/// Every certificate in a PEM bundle that parses, in order.
pub fn parse_pem(pem: &str) -> Vec<ParsedCert> {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .filter_map(|p| parse_der(&p.contents).ok())
        .collect()
}

/// Whether `key` is the private half of `cert`'s public key.
pub fn key_matches(key: &KeyPair, cert: &ParsedCert) -> bool {
    key.subject_public_key_info() == cert.spki
}

/// A DER certificate as a PEM block.
pub fn pem_block(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// The provider every TLS object of this binary uses (ring, TLS 1.2 and 1.3).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The CAs of a PEM bundle as trust anchors (possibly none: the caller decides whether that is
/// an error).
pub fn roots_from_pem(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots.add(cert.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    }
    Ok(roots)
}

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PairError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("the certificate file holds no PEM certificate ({0})")]
    NoCertificate(String),
    #[error("the key file holds no usable PEM private key ({0})")]
    BadKey(String),
    #[error("the private key does not belong to the certificate ({0})")]
    Mismatch(String),
    #[error("the certificate cannot be parsed: {0}")]
    Parse(String),
}

/// Parse a PEM certificate chain and private key into a rustls key, checking that they belong
/// together (a half-written rotation must not replace a good pair).
pub fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, PairError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PairError::NoCertificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(PairError::NoCertificate("empty".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| PairError::BadKey(e.to_string()))?;
    let signing_key =
        provider.key_provider.load_private_key(key).map_err(|e| PairError::BadKey(e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match().map_err(|e| PairError::Mismatch(e.to_string()))?;
    Ok(certified)
}

/// The end-entity certificate's notAfter, in Unix seconds.
pub fn not_after(key: &CertifiedKey) -> Result<i64, PairError> {
    let cert = key.end_entity_cert().map_err(|e| PairError::Parse(e.to_string()))?;
    Ok(parse_der(cert).map_err(PairError::Parse)?.not_after.unix_timestamp())
}

/// SHA-256 of the end-entity certificate, hex: what `openssl x509 -fingerprint -sha256` shows,
/// so an operator can tell which certificate is being served.
pub fn fingerprint(key: &CertifiedKey) -> String {
    use sha2::Digest as _;
    let Ok(cert) = key.end_entity_cert() else { return String::new() };
    sha2::Sha256::digest(cert.as_ref()).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let provider = provider();
        assert!(matches!(certified_key(b"", b"", &provider), Err(PairError::NoCertificate(_))));
        let (_, cert, _) = crate::tls_material::test_pair();
        assert!(matches!(certified_key(cert.as_bytes(), b"not a key", &provider), Err(PairError::BadKey(_))));
    }
}
