//! The embedded certificate authority: what `serve` uses when no `--tls-cert-file` is given, and
//! what `kruise-admission certs` writes for an operator.
//!
//! A folder holds `ca.crt`/`ca.key` (the CA, put into the webhook configuration's `caBundle`) and
//! `tls.crt`/`tls.key` (the serving pair). Existing files are reused when they still verify; only
//! what is missing, expired soon or no longer covers the requested names is made again, so the CA
//! (and with it every `caBundle` already installed) survives a re-run. Issuing, checking and
//! writing the material is `tls_material`'s; this module decides what the folder needs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use rcgen::KeyPair;
use time::OffsetDateTime;

pub use crate::tls_material::CertPaths;
use crate::tls_material::{self as material, Ca, EMBEDDED, replace_file};

const SERVING_LIFETIME: Duration = Duration::from_secs(365 * 86_400);
/// A certificate that expires within this window is renewed rather than reused.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 86_400);

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

    let ca = match material::load_ca(&paths, &EMBEDDED, RENEW_BEFORE, now) {
        Ok(ca) => ca,
        Err(why) => {
            let ca = Ca::new(&EMBEDDED, now)?;
            replace_file(&paths.ca_key, ca.key.serialize_pem().as_bytes(), true)?;
            replace_file(&paths.ca_cert, ca.cert_pem.as_bytes(), false)?;
            report.ca_created = Some(why);
            report.serving_issued = Some("new CA".into());
            ca
        }
    };
    if report.serving_issued.is_none()
        && let Err(why) = material::check_serving(&paths, &names, RENEW_BEFORE, now)
    {
        report.serving_issued = Some(why);
    }
    if report.serving_issued.is_some() {
        let (cert_pem, key_pem) = issue_serving(&ca, &names, now)?;
        replace_file(&paths.key, key_pem.as_bytes(), true)?;
        replace_file(&paths.cert, cert_pem.as_bytes(), false)?;
    }
    Ok((paths, report))
}

/// A new serving certificate and key (PEM) for `dns_names` (plus localhost and 127.0.0.1), signed
/// by the CA in `paths`. Used for rotation; nothing is written.
pub fn issue_from_ca(paths: &CertPaths, dns_names: &[String]) -> anyhow::Result<(String, String)> {
    let key_pem = std::fs::read_to_string(&paths.ca_key)
        .with_context(|| format!("reading {}", paths.ca_key.display()))?;
    let key = KeyPair::from_pem(&key_pem).with_context(|| format!("parsing {}", paths.ca_key.display()))?;
    let cert_pem = std::fs::read_to_string(&paths.ca_cert)
        .with_context(|| format!("reading {}", paths.ca_cert.display()))?;
    issue_serving(
        &Ca { profile: &EMBEDDED, cert_pem, key },
        &serving_names(dns_names),
        OffsetDateTime::now_utc(),
    )
}

/// Signed by `ca`; the subject is the last of `names` (the last `--dns-name`, else `127.0.0.1`).
fn issue_serving(ca: &Ca, names: &[String], now: OffsetDateTime) -> anyhow::Result<(String, String)> {
    Ok(ca.issue_serving(names, names.last().map_or("localhost", String::as_str), SERVING_LIFETIME, now)?)
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

    fn assert_keys_owner_only(paths: &CertPaths) {
        use std::os::unix::fs::PermissionsExt as _;
        for key in [&paths.ca_key, &paths.key] {
            assert_eq!(
                std::fs::metadata(key).unwrap().permissions().mode() & 0o777,
                0o600,
                "{}",
                key.display()
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn private_keys_are_owner_only() {
        install_provider();
        let dir = tempfile::tempdir().unwrap();
        let (paths, _) = ensure(dir.path(), &[]).unwrap();
        assert_keys_owner_only(&paths);
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
        assert_keys_owner_only(&paths);
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
        let names = serving_names(&["webhook.kruise-system.svc".into()]);
        material::check_serving(&paths, &names, RENEW_BEFORE, OffsetDateTime::now_utc()).unwrap();
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
