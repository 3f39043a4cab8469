//! Whether the material in a certificate folder can still be used, and if not, why (the reason is
//! reported to the operator, so it names the file).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::KeyPair;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use time::OffsetDateTime;

use super::files::CertPaths;
use super::inspect::{certified_key, key_matches, parse_der, pem_block, provider, roots_from_pem};
use super::issue::{Ca, CaProfile};

/// The CA in `ca.crt`/`ca.key` when both exist, it was made with `profile`, they match and it
/// stays valid beyond `renew_before`; otherwise why not.
pub fn load_ca(
    paths: &CertPaths,
    profile: &'static CaProfile,
    renew_before: Duration,
    now: OffsetDateTime,
) -> Result<Ca, String> {
    if !paths.ca_cert.exists() && !paths.ca_key.exists() {
        return Err("none present".into());
    }
    let cert_pem = std::fs::read(&paths.ca_cert).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let key_pem =
        std::fs::read_to_string(&paths.ca_key).map_err(|e| format!("{}: {e}", paths.ca_key.display()))?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| format!("{}: {e}", paths.ca_key.display()))?;
    let der =
        CertificateDer::from_pem_slice(&cert_pem).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let cert = parse_der(&der).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    if cert.common_names.first().map(String::as_str) != Some(profile.common_name) || !cert.is_ca {
        return Err(format!("{} is not a CA made by kruise-admission", paths.ca_cert.display()));
    }
    if !key_matches(&key, &cert) {
        return Err(format!("{} does not match {}", paths.ca_key.display(), paths.ca_cert.display()));
    }
    check_not_after(cert.not_after, renew_before, now)
        .map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    // Issue from the certificate just checked, whatever else the file holds.
    Ok(Ca { profile, cert_pem: pem_block(&der), key })
}

/// `Ok` when `tls.crt`/`tls.key` match, chain to `ca.crt`, cover every name and stay valid beyond
/// `renew_before` (checked the way a TLS client checks them); otherwise why not.
pub fn check_serving(
    paths: &CertPaths,
    names: &[String],
    renew_before: Duration,
    now: OffsetDateTime,
) -> Result<(), String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let (ca_pem, cert_pem, key_pem) = (read(&paths.ca_cert)?, read(&paths.cert)?, read(&paths.key)?);
    let provider = provider();
    let key = certified_key(&cert_pem, &key_pem, &provider).map_err(|e| e.to_string())?;
    let end_entity = key.cert.first().ok_or("tls.crt holds no certificate")?;
    let roots = roots_from_pem(&ca_pem).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())?;
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(now.unix_timestamp()).unwrap_or(0),
    ));
    for name in names {
        let server_name = ServerName::try_from(name.as_str()).map_err(|e| format!("{name}: {e}"))?;
        verifier
            .verify_server_cert(end_entity, &key.cert[1..], &server_name, &[], at)
            .map_err(|e| format!("{} does not verify for {name}: {e}", paths.cert.display()))?;
    }
    let cert = parse_der(end_entity)?;
    check_not_after(cert.not_after, renew_before, now).map_err(|e| format!("{}: {e}", paths.cert.display()))
}

fn check_not_after(
    not_after: OffsetDateTime,
    renew_before: Duration,
    now: OffsetDateTime,
) -> Result<(), String> {
    if not_after.unix_timestamp() < (now + renew_before).unix_timestamp() {
        return Err(format!("expires within {} days", renew_before.as_secs() / 86_400));
    }
    Ok(())
}
