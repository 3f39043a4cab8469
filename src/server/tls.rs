//! Serving certificate: loading a PEM pair, a rustls resolver whose key can be swapped while the
//! server runs, and the poller that swaps it when the files change.
//!
//! Kubernetes updates a Secret volume by pointing its `..data` symlink at a new folder, so the
//! files are re-read by path (following symlinks) and compared by content, not by inotify events
//! or mtimes on the link. Each new handshake asks the resolver, so a swap takes effect on the next
//! connection; established connections keep the certificate they negotiated.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::metrics::Metrics;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertError {
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

/// The provider every TLS object of this binary uses (ring, TLS 1.2 and 1.3).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parse a PEM certificate chain and private key into a rustls key, checking that they belong
/// together (a half-written rotation must not replace a good pair).
pub fn certified_key(cert_pem: &[u8], key_pem: &[u8], provider: &CryptoProvider) -> Result<CertifiedKey, CertError> {
    let chain =
        CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>().map_err(|e| CertError::NoCertificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate("empty".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::BadKey(e.to_string()))?;
    let signing_key = provider.key_provider.load_private_key(key).map_err(|e| CertError::BadKey(e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified.keys_match().map_err(|e| CertError::Mismatch(e.to_string()))?;
    Ok(certified)
}

/// The end-entity certificate's notAfter, in Unix seconds.
pub fn not_after(key: &CertifiedKey) -> Result<i64, CertError> {
    let cert = key.end_entity_cert().map_err(|e| CertError::Parse(e.to_string()))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(cert).map_err(|e| CertError::Parse(e.to_string()))?;
    Ok(parsed.validity().not_after.timestamp())
}

/// SHA-256 of the end-entity certificate, hex: what `openssl x509 -fingerprint -sha256` shows,
/// so an operator can tell which certificate is being served.
pub fn fingerprint(key: &CertifiedKey) -> String {
    use sha2::Digest as _;
    let Ok(cert) = key.end_entity_cert() else { return String::new() };
    sha2::Sha256::digest(cert.as_ref()).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// Hands every handshake the current key; [`CertResolver::set`] swaps it without a lock.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
    /// The current certificate's notAfter (Unix seconds), for readiness.
    not_after: AtomicI64,
}

impl CertResolver {
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        let resolver = CertResolver { current: ArcSwap::new(Arc::clone(&key)), not_after: AtomicI64::new(i64::MAX) };
        resolver.set(key);
        resolver
    }

    pub fn set(&self, key: Arc<CertifiedKey>) {
        // Loading already parsed it; a certificate that cannot be parsed has no known end.
        self.not_after.store(not_after(&key).unwrap_or(i64::MAX), Ordering::Relaxed);
        self.current.store(key);
    }

    /// `Err` with the reason when the certificate being served has expired at `now_unix`: the
    /// API server would refuse every handshake, so the replica must not count as ready.
    pub fn check_unexpired(&self, now_unix: i64) -> Result<(), String> {
        let not_after = self.not_after.load(Ordering::Relaxed);
        if now_unix < not_after {
            return Ok(());
        }
        let when = time::OffsetDateTime::from_unix_timestamp(not_after)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_else(|| not_after.to_string());
        Err(format!(
            "the serving certificate expired at {when}; replace the --tls-cert-file/--tls-key-file pair (or let the cert mode renew it)"
        ))
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The rustls server configuration: TLS 1.2 and 1.3 only, ALPN `h2` then `http/1.1`; client
/// certificates required and verified when `client_auth` is given.
pub fn server_config(
    resolver: Arc<CertResolver>,
    client_auth: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_auth {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificate and key files, and what was last read from them.
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    last: Option<(Vec<u8>, Vec<u8>)>,
}

impl CertFiles {
    pub fn new(cert: PathBuf, key: PathBuf) -> Self {
        CertFiles { cert, key, last: None }
    }

    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), CertError> {
        let read = |path: &PathBuf| std::fs::read(path).map_err(|error| CertError::Read { path: path.clone(), error });
        Ok((read(&self.cert)?, read(&self.key)?))
    }

    /// Load the pair for startup: any problem is an error the operator must fix.
    pub fn load(&mut self) -> Result<(Arc<CertifiedKey>, i64), CertError> {
        let (cert, key) = self.read()?;
        let certified = certified_key(&cert, &key, &provider())?;
        let not_after = not_after(&certified)?;
        self.last = Some((cert, key));
        Ok((Arc::new(certified), not_after))
    }

    /// Re-read the files; `Ok(Some(..))` when they changed into a good pair, `Ok(None)` when
    /// nothing changed, `Err` when they changed into something unusable (reported once per
    /// change, not on every poll).
    pub fn poll(&mut self) -> Result<Option<(Arc<CertifiedKey>, i64)>, CertError> {
        let contents = self.read()?;
        if self.last.as_ref() == Some(&contents) {
            return Ok(None);
        }
        let (cert, key) = &contents;
        let result = certified_key(cert, key, &provider()).and_then(|c| {
            let not_after = not_after(&c)?;
            Ok((Arc::new(c), not_after))
        });
        self.last = Some(contents);
        result.map(Some)
    }
}

/// Poll the files every `interval`, swap the resolver's key on a good change, keep the old one
/// (and log) on a bad one.
pub async fn reload_loop(mut files: CertFiles, resolver: Arc<CertResolver>, metrics: Arc<Metrics>, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut read_error_logged = false;
    loop {
        ticker.tick().await;
        // Two small files: cheap, but still file I/O, so off the async worker threads.
        let result = tokio::task::spawn_blocking(move || {
            let r = files.poll();
            (files, r)
        })
        .await;
        let Ok((returned, result)) = result else { return };
        files = returned;
        match result {
            Ok(None) => read_error_logged = false,
            Ok(Some((key, not_after))) => {
                read_error_logged = false;
                let sha256 = fingerprint(&key);
                resolver.set(key);
                metrics.cert_not_after.set(not_after as f64);
                tracing::info!(cert = %files.cert.display(), not_after, sha256, "serving certificate reloaded");
            }
            // A rotation can delete and recreate the files; say so once, not every second.
            Err(e @ CertError::Read { .. }) => {
                if !read_error_logged {
                    tracing::error!(error = %e, "serving certificate not reloaded; keeping the previous one");
                    read_error_logged = true;
                }
            }
            Err(e) => tracing::error!(error = %e, "new serving certificate rejected; keeping the previous one"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &std::path::Path) -> crate::cli::certs::CertPaths {
        let _ = rustls::crypto::ring::default_provider().install_default();
        crate::cli::certs::ensure(dir, &[]).unwrap().0
    }

    #[test]
    fn poll_reports_only_changes_and_rejects_a_mismatched_pair() {
        let dir = tempfile::tempdir().unwrap();
        let paths = pair(dir.path());
        let mut files = CertFiles::new(paths.cert.clone(), paths.key.clone());
        let (first, _) = files.load().unwrap();
        assert!(files.poll().unwrap().is_none(), "unchanged files are not reloaded");

        let (cert, key) = crate::cli::certs::issue_from_ca(&paths, &[]).unwrap();
        std::fs::write(&paths.cert, &cert).unwrap();
        assert!(matches!(files.poll(), Err(CertError::Mismatch(_))), "new certificate with the old key");
        assert!(files.poll().unwrap().is_none(), "the same bad pair is reported once");

        std::fs::write(&paths.key, &key).unwrap();
        let (second, not_after) = files.poll().unwrap().expect("the completed pair is loaded");
        assert_ne!(fingerprint(&first), fingerprint(&second));
        assert!(not_after > time::OffsetDateTime::now_utc().unix_timestamp());
        assert_eq!(fingerprint(&second).len(), 32 * 3 - 1);
    }

    #[test]
    fn an_expired_certificate_is_reported_until_a_valid_one_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let paths = pair(dir.path());
        let (key, not_after) = CertFiles::new(paths.cert.clone(), paths.key.clone()).load().unwrap();
        let resolver = CertResolver::new(key);
        assert!(resolver.check_unexpired(not_after - 1).is_ok());
        let error = resolver.check_unexpired(not_after).unwrap_err();
        assert!(error.contains("serving certificate expired at"), "{error}");
    }

    #[test]
    fn garbage_is_refused_with_a_reason() {
        let provider = provider();
        assert!(matches!(certified_key(b"", b"", &provider), Err(CertError::NoCertificate(_))));
        let dir = tempfile::tempdir().unwrap();
        let paths = pair(dir.path());
        let cert = std::fs::read(&paths.cert).unwrap();
        assert!(matches!(certified_key(&cert, b"not a key", &provider), Err(CertError::BadKey(_))));
    }
}
