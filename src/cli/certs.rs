//! The embedded certificate authority: what `serve` uses when no `--tls-cert-file` is given, and
//! what `kruise-admission certs` writes for an operator.
//!
//! A folder holds `ca.crt`/`ca.key` (the CA, put into the webhook configuration's `caBundle`) and
//! `tls.crt`/`tls.key` (the serving pair). Existing files are reused when they still verify; only
//! what is missing, expired soon or no longer covers the requested names is made again, so the CA
//! (and with it every `caBundle` already installed) survives a re-run.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
};
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use time::{Duration, OffsetDateTime};

use crate::cluster::live::certs::create_new_with_mode;

pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";

/// The CA's subject; a CA in the folder with another subject was not made here and is replaced.
const CA_COMMON_NAME: &str = "kruise-admission-ca";
const CA_LIFETIME: Duration = Duration::days(3650);
const SERVING_LIFETIME: Duration = Duration::days(365);
/// A certificate that expires within this window is renewed rather than reused.
const RENEW_BEFORE: Duration = Duration::days(30);

/// `kruise-admission certs`: create or refresh the embedded CA and serving certificate.
#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Folder for ca.crt, ca.key, tls.crt and tls.key.
    #[arg(long, default_value = "certs")]
    pub out: PathBuf,
    /// Extra DNS name for the serving certificate (repeatable), e.g. the webhook Service's
    /// `NAME.NAMESPACE.svc`. `localhost` and `127.0.0.1` are always included.
    #[arg(long = "dns-name")]
    pub dns_names: Vec<String>,
}

/// Where the four files of a certificate folder live.
#[derive(Debug, Clone)]
pub struct CertPaths {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertPaths {
    pub fn in_dir(dir: &Path) -> Self {
        CertPaths { ca_cert: dir.join(CA_CERT), ca_key: dir.join(CA_KEY), cert: dir.join(TLS_CERT), key: dir.join(TLS_KEY) }
    }
}

/// What [`ensure`] did, with the reason for anything it (re)created.
#[derive(Debug, Default)]
pub struct Report {
    pub ca_created: Option<String>,
    pub serving_issued: Option<String>,
}

pub fn run(args: &CertsArgs) -> anyhow::Result<()> {
    let (paths, report) = ensure(&args.out, &args.dns_names)?;
    match &report.ca_created {
        Some(why) => println!("created CA {} ({why})", paths.ca_cert.display()),
        None => println!("reused CA {}", paths.ca_cert.display()),
    }
    match &report.serving_issued {
        Some(why) => println!("issued serving certificate {} ({why})", paths.cert.display()),
        None => println!("reused serving certificate {}", paths.cert.display()),
    }
    Ok(())
}

/// The names the serving certificate must cover: `localhost`, `127.0.0.1`, then `extra` in order,
/// without duplicates.
pub fn serving_names(extra: &[String]) -> Vec<String> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    for n in extra {
        if !names.contains(n) {
            names.push(n.clone());
        }
    }
    names
}

/// Make sure `dir` holds a usable CA and a serving certificate for [`serving_names`]`(dns_names)`.
pub fn ensure(dir: &Path, dns_names: &[String]) -> anyhow::Result<(CertPaths, Report)> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating certificate folder {}", dir.display()))?;
    let paths = CertPaths::in_dir(dir);
    let names = serving_names(dns_names);
    let now = OffsetDateTime::now_utc();
    let mut report = Report::default();

    let ca_key = match load_ca(&paths, now) {
        Ok(key) => key,
        Err(why) => {
            let (cert_pem, key) = new_ca(now)?;
            write_file(&paths.ca_key, key.serialize_pem().as_bytes(), true)?;
            write_file(&paths.ca_cert, cert_pem.as_bytes(), false)?;
            report.ca_created = Some(why);
            report.serving_issued = Some("new CA".into());
            key
        }
    };
    if report.serving_issued.is_none()
        && let Err(why) = check_serving(&paths, &names, now)
    {
        report.serving_issued = Some(why);
    }
    if report.serving_issued.is_some() {
        let (cert_pem, key_pem) = issue_serving(&ca_key, &names, now)?;
        write_file(&paths.key, key_pem.as_bytes(), true)?;
        write_file(&paths.cert, cert_pem.as_bytes(), false)?;
    }
    Ok((paths, report))
}

/// A new serving certificate and key (PEM) for `dns_names` (plus localhost and 127.0.0.1), signed
/// by the CA in `paths`. Used for rotation; nothing is written.
pub fn issue_from_ca(paths: &CertPaths, dns_names: &[String]) -> anyhow::Result<(String, String)> {
    let key_pem = std::fs::read_to_string(&paths.ca_key).with_context(|| format!("reading {}", paths.ca_key.display()))?;
    let key = KeyPair::from_pem(&key_pem).with_context(|| format!("parsing {}", paths.ca_key.display()))?;
    issue_serving(&key, &serving_names(dns_names), OffsetDateTime::now_utc())
}

fn ca_distinguished_name() -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    dn
}

fn ca_params(now: OffsetDateTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = ca_distinguished_name();
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.not_before = now - Duration::hours(1);
    params.not_after = now + CA_LIFETIME;
    params.serial_number = Some(random_serial());
    params
}

fn new_ca(now: OffsetDateTime) -> anyhow::Result<(String, KeyPair)> {
    let key = KeyPair::generate().context("generating the CA key")?;
    let cert = ca_params(now).self_signed(&key).context("signing the CA certificate")?;
    Ok((cert.pem(), key))
}

fn issue_serving(ca_key: &KeyPair, names: &[String], now: OffsetDateTime) -> anyhow::Result<(String, String)> {
    // The issuer is our CA rebuilt from its fixed subject and its key: that is all a signature and
    // the issuer/authority-key-id fields need.
    let issuer = Issuer::new(ca_params(now), ca_key);
    let key = KeyPair::generate().context("generating the serving key")?;
    let mut params = CertificateParams::new(names.to_vec()).context("serving certificate names")?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, names.last().map_or("localhost", String::as_str));
    params.distinguished_name = dn;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = now - Duration::hours(1);
    params.not_after = now + SERVING_LIFETIME;
    params.serial_number = Some(random_serial());
    let cert = params.signed_by(&key, &issuer).context("signing the serving certificate")?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// 16 random bytes with the top bit clear, so the DER integer stays positive.
fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

/// The CA key when `ca.crt`/`ca.key` exist, were made here, match and stay valid long enough;
/// otherwise why not.
fn load_ca(paths: &CertPaths, now: OffsetDateTime) -> Result<KeyPair, String> {
    if !paths.ca_cert.exists() && !paths.ca_key.exists() {
        return Err("none present".into());
    }
    let cert_pem = std::fs::read(&paths.ca_cert).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let key_pem = std::fs::read_to_string(&paths.ca_key).map_err(|e| format!("{}: {e}", paths.ca_key.display()))?;
    let key = KeyPair::from_pem(&key_pem).map_err(|e| format!("{}: {e}", paths.ca_key.display()))?;
    let der = CertificateDer::from_pem_slice(&cert_pem).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    let subject_cn = cert.subject().iter_common_name().next().and_then(|cn| cn.as_str().ok());
    if subject_cn != Some(CA_COMMON_NAME) || !cert.is_ca() {
        return Err(format!("{} is not a CA made by kruise-admission", paths.ca_cert.display()));
    }
    if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
        return Err(format!("{} does not match {}", paths.ca_key.display(), paths.ca_cert.display()));
    }
    check_not_after(cert.validity().not_after.timestamp(), now).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    Ok(key)
}

/// `Ok` when `tls.crt`/`tls.key` match, chain to `ca.crt`, cover every name and stay valid long
/// enough (checked the way a TLS client checks them); otherwise why not.
fn check_serving(paths: &CertPaths, names: &[String], now: OffsetDateTime) -> Result<(), String> {
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let (ca_pem, cert_pem, key_pem) = (read(&paths.ca_cert)?, read(&paths.cert)?, read(&paths.key)?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = crate::server::tls::certified_key(&cert_pem, &key_pem, &provider).map_err(|e| e.to_string())?;
    let end_entity = key.cert.first().ok_or("tls.crt holds no certificate")?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&ca_pem) {
        let ca = ca.map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
        roots.add(ca).map_err(|e| format!("{}: {e}", paths.ca_cert.display()))?;
    }
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(|e| e.to_string())?;
    let at = UnixTime::since_unix_epoch(std::time::Duration::from_secs(u64::try_from(now.unix_timestamp()).unwrap_or(0)));
    for name in names {
        let server_name = ServerName::try_from(name.as_str()).map_err(|e| format!("{name}: {e}"))?;
        verifier
            .verify_server_cert(end_entity, &key.cert[1..], &server_name, &[], at)
            .map_err(|e| format!("{} does not verify for {name}: {e}", paths.cert.display()))?;
    }
    let (_, cert) = x509_parser::parse_x509_certificate(end_entity).map_err(|e| e.to_string())?;
    check_not_after(cert.validity().not_after.timestamp(), now).map_err(|e| format!("{}: {e}", paths.cert.display()))
}

fn check_not_after(not_after: i64, now: OffsetDateTime) -> Result<(), String> {
    if not_after < (now + RENEW_BEFORE).unix_timestamp() {
        return Err(format!("expires within {} days", RENEW_BEFORE.whole_days()));
    }
    Ok(())
}

/// Write through a temporary file and a rename, so a server polling the folder never reads half a
/// file. Private keys are created readable by the owner only.
fn write_file(path: &Path, contents: &[u8], private: bool) -> anyhow::Result<()> {
    let Some(dir) = path.parent() else { bail!("{} has no parent folder", path.display()) };
    let tmp = dir.join(format!(".{}.tmp", path.file_name().map_or_else(Default::default, |n| n.to_string_lossy())));
    // A leftover temporary file (an earlier run killed mid-write) would keep its old mode if
    // opened again: remove it so the file is created, with its mode, from the start.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e).with_context(|| format!("removing {}", tmp.display())),
        _ => {}
    }
    let mode = if private { 0o600 } else { 0o644 };
    let mut file = create_new_with_mode(&tmp, mode).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(contents).with_context(|| format!("writing {}", tmp.display()))?;
    file.sync_all().with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install_provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    #[test]
    fn creates_once_then_reuses() {
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        let (paths, first) = ensure(dir.path(), &[]).unwrap();
        assert!(first.ca_created.is_some() && first.serving_issued.is_some());
        let ca = std::fs::read(&paths.ca_cert).unwrap();
        let cert = std::fs::read(&paths.cert).unwrap();
        let (_, second) = ensure(dir.path(), &[]).unwrap();
        assert!(second.ca_created.is_none() && second.serving_issued.is_none(), "{second:?}");
        assert_eq!(std::fs::read(&paths.ca_cert).unwrap(), ca);
        assert_eq!(std::fs::read(&paths.cert).unwrap(), cert);
    }

    #[cfg(unix)]
    #[test]
    fn private_keys_are_owner_only() {
        use std::os::unix::fs::PermissionsExt as _;
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = ensure(dir.path(), &[]).unwrap();
        for key in [&paths.ca_key, &paths.key] {
            assert_eq!(std::fs::metadata(key).unwrap().permissions().mode() & 0o777, 0o600, "{}", key.display());
        }
    }

    /// A temporary file left by a run killed mid-write (world-readable, say) must not lend its
    /// mode to the next key written through it.
    #[test]
    fn a_leftover_temporary_file_does_not_make_a_key_readable() {
        use std::os::unix::fs::PermissionsExt as _;
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        for name in [".ca.key.tmp", ".tls.key.tmp"] {
            let tmp = dir.path().join(name);
            std::fs::write(&tmp, "stale").unwrap();
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let (paths, _) = ensure(dir.path(), &[]).unwrap();
        for key in [&paths.ca_key, &paths.key] {
            assert_eq!(std::fs::metadata(key).unwrap().permissions().mode() & 0o777, 0o600, "{}", key.display());
        }
    }

    #[test]
    fn a_new_dns_name_reissues_the_serving_cert_but_keeps_the_ca() {
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = ensure(dir.path(), &[]).unwrap();
        let ca = std::fs::read(&paths.ca_cert).unwrap();
        let (_, report) = ensure(dir.path(), &["webhook.kruise-system.svc".into()]).unwrap();
        assert!(report.ca_created.is_none());
        assert!(report.serving_issued.unwrap().contains("webhook.kruise-system.svc"));
        assert_eq!(std::fs::read(&paths.ca_cert).unwrap(), ca);
        // The reissued certificate verifies for the new name against the old CA.
        check_serving(&paths, &serving_names(&["webhook.kruise-system.svc".into()]), OffsetDateTime::now_utc()).unwrap();
    }

    #[test]
    fn a_broken_serving_pair_or_foreign_ca_is_replaced() {
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = ensure(dir.path(), &[]).unwrap();
        std::fs::write(&paths.key, "garbage").unwrap();
        let (_, report) = ensure(dir.path(), &[]).unwrap();
        assert!(report.ca_created.is_none() && report.serving_issued.is_some());
        std::fs::write(&paths.ca_key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
        let (_, report) = ensure(dir.path(), &[]).unwrap();
        assert!(report.ca_created.unwrap().contains("does not match"));
    }

    #[test]
    fn names_always_include_localhost_and_loopback_once() {
        assert_eq!(serving_names(&["a.svc".into(), "localhost".into()]), ["localhost", "127.0.0.1", "a.svc"]);
    }
}
