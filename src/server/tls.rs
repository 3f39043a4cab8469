//! Serving certificate: a rustls resolver whose key can be swapped while the server runs, and the
//! poller that swaps it when the files change (see `reload`). Parsing and checking the PEM pair is
//! `tls_material`'s.
//!
//! Each new handshake asks the resolver, so a swap takes effect on the next connection;
//! established connections keep the certificate they negotiated.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::metrics::Metrics;
use super::reload::{self, Watched};
use crate::tls_material::{PairError, certified_key, fingerprint, not_after, provider};

/// Hands every handshake the current key; [`CertResolver::set`] swaps it without a lock.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
    /// The current certificate's notAfter (Unix seconds), for readiness.
    not_after: AtomicI64,
}

impl CertResolver {
    pub fn new(key: Arc<CertifiedKey>) -> Self {
        let resolver =
            CertResolver { current: ArcSwap::new(Arc::clone(&key)), not_after: AtomicI64::new(i64::MAX) };
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

    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), PairError> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|error| PairError::Read { path: path.clone(), error })
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }

    /// Load the pair for startup: any problem is an error the operator must fix.
    pub fn load(&mut self) -> Result<(Arc<CertifiedKey>, i64), PairError> {
        let (cert, key) = self.read()?;
        let certified = certified_key(&cert, &key, &provider())?;
        let not_after = not_after(&certified)?;
        self.last = Some((cert, key));
        Ok((Arc::new(certified), not_after))
    }
}

impl Watched for CertFiles {
    type Loaded = (Arc<CertifiedKey>, i64);
    type Error = PairError;
    const WHAT: &'static str = "serving certificate";

    fn poll(&mut self) -> Result<Option<Self::Loaded>, PairError> {
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

    fn is_read_error(error: &PairError) -> bool {
        matches!(error, PairError::Read { .. })
    }
}

/// Poll the files every `interval`, swap the resolver's key on a good change, keep the old one
/// (and log) on a bad one.
pub async fn reload_loop(
    files: CertFiles,
    resolver: Arc<CertResolver>,
    metrics: Arc<Metrics>,
    interval: Duration,
) {
    reload::reload_loop(files, interval, |files, (key, not_after)| {
        let sha256 = fingerprint(&key);
        resolver.set(key);
        metrics.cert_not_after.set(not_after as f64);
        tracing::info!(cert = %files.cert.display(), not_after, sha256, "serving certificate reloaded");
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CA, and a serving pair from it written to `dir`: the CA and the (cert, key) paths.
    fn pair(dir: &std::path::Path) -> (crate::tls_material::Ca, PathBuf, PathBuf) {
        let (ca, cert, key) = crate::tls_material::test_pair();
        let paths = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&paths.0, cert).unwrap();
        std::fs::write(&paths.1, key).unwrap();
        (ca, paths.0, paths.1)
    }

    #[test]
    fn poll_reports_only_changes_and_rejects_a_mismatched_pair() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert_path, key_path) = pair(dir.path());
        let mut files = CertFiles::new(cert_path.clone(), key_path.clone());
        let (first, _) = files.load().unwrap();
        assert!(files.poll().unwrap().is_none(), "unchanged files are not reloaded");

        let (cert, key) = crate::tls_material::test_serving(&ca);
        std::fs::write(&cert_path, &cert).unwrap();
        assert!(matches!(files.poll(), Err(PairError::Mismatch(_))), "new certificate with the old key");
        assert!(files.poll().unwrap().is_none(), "the same bad pair is reported once");

        std::fs::write(&key_path, &key).unwrap();
        let (second, not_after) = files.poll().unwrap().expect("the completed pair is loaded");
        assert_ne!(fingerprint(&first), fingerprint(&second));
        assert!(not_after > time::OffsetDateTime::now_utc().unix_timestamp());
        assert_eq!(fingerprint(&second).len(), 32 * 3 - 1);
    }

    #[test]
    fn an_expired_certificate_is_reported_until_a_valid_one_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let (_, cert_path, key_path) = pair(dir.path());
        let (key, not_after) = CertFiles::new(cert_path, key_path).load().unwrap();
        let resolver = CertResolver::new(key);
        assert!(resolver.check_unexpired(not_after - 1).is_ok());
        let error = resolver.check_unexpired(not_after).unwrap_err();
        assert!(error.contains("serving certificate expired at"), "{error}");
    }
}
