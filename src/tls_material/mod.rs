//! Certificate material: issuing a CA and serving certificates (rcgen), reading them back and
//! checking them (x509-parser, rustls), and writing them to disk with private keys readable by
//! the owner only.
//!
//! Both certificate modes use it: the embedded default that `serve` and `kruise-admission certs`
//! keep in a folder (`cli::certs`), and `--cert-mode self-managed`, which keeps the material in a
//! Secret (`cluster::live::certs`); the server loads and reloads what they write
//! (`server::tls`, `server::client_auth`). So it sits at the bottom of the layers, beside `api`:
//! it imports nothing from this crate, only rcgen, x509-parser and rustls, and every layer above
//! may use it. What stays with the callers is where the material lives (a folder and its report,
//! a Secret and its optimistic updates) and how it is served (the rustls resolver, file polling).

mod check;
mod files;
mod inspect;
mod issue;

pub use check::{check_serving, load_ca};
pub use files::{
    CA_CRT, CA_KEY, CertPaths, TLS_CRT, TLS_KEY, create_new_with_mode, replace_file, write_files,
};
pub use inspect::{
    PairError, ParsedCert, certified_key, fingerprint, key_matches, not_after, parse_der, parse_pem,
    pem_block, provider, roots_from_pem,
};
pub use issue::{CA_LIFETIME, Ca, CaProfile, EMBEDDED, IssueError, SELF_MANAGED};

/// A CA and a serving pair for `localhost` it signed (PEM), for tests.
#[cfg(test)]
pub(crate) fn test_pair() -> (Ca, String, String) {
    let ca = Ca::new(&EMBEDDED, time::OffsetDateTime::now_utc()).unwrap();
    let (cert, key) = test_serving(&ca);
    (ca, cert, key)
}

/// Another serving pair for `localhost` from `ca` (PEM), for tests.
#[cfg(test)]
pub(crate) fn test_serving(ca: &Ca) -> (String, String) {
    let names = ["localhost".to_owned(), "127.0.0.1".to_owned()];
    ca.issue_serving(
        &names,
        "127.0.0.1",
        std::time::Duration::from_secs(365 * 86_400),
        time::OffsetDateTime::now_utc(),
    )
    .unwrap()
}
