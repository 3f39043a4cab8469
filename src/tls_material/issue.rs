//! Issuing a CA and the serving certificates it signs (rcgen; ECDSA P-256 keys, as ring cannot
//! generate RSA).

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, SerialNumber,
};
use time::OffsetDateTime;

/// A CA's lifetime: ten years, as Kruise's.
pub const CA_LIFETIME: Duration = Duration::from_secs(3650 * 86_400);
/// Certificates start an hour in the past, so a peer whose clock lags a little accepts them.
const BACKDATE: time::Duration = time::Duration::hours(1);

/// What sets the certificates of one mode apart. Everything else (key algorithm, key usages,
/// validity start, the CA's lifetime) is the same for both.
#[derive(Debug)]
pub struct CaProfile {
    /// The CA's subject (its only attribute); `certs` recognises a CA it made by it.
    pub common_name: &'static str,
    /// The CA's basicConstraints pathLenConstraint; `None`: unconstrained.
    pub path_len: Option<u8>,
    /// Serial numbers of 16 random bytes; otherwise rcgen's default, the first 20 bytes of the
    /// SHA-256 of the certificate's public key.
    pub random_serials: bool,
    /// Serving certificates carry an authorityKeyIdentifier extension naming the CA's key.
    pub authority_key_id: bool,
}

/// The embedded CA of `serve` and `kruise-admission certs`.
pub const EMBEDDED: CaProfile = CaProfile {
    common_name: "kruise-admission-ca",
    path_len: Some(0),
    random_serials: true,
    authority_key_id: true,
};

/// The CA of `--cert-mode self-managed`, shaped like the one Kruise keeps in its Secret.
pub const SELF_MANAGED: CaProfile = CaProfile {
    common_name: "kruise-admission-webhook-ca",
    path_len: None,
    random_serials: false,
    authority_key_id: false,
};

/// Issuing failed at `step` (rcgen's error is the source).
#[derive(Debug, thiserror::Error)]
#[error("{step}")]
pub struct IssueError {
    pub step: &'static str,
    #[source]
    pub source: rcgen::Error,
}

fn at(step: &'static str) -> impl FnOnce(rcgen::Error) -> IssueError {
    move |source| IssueError { step, source }
}

/// A CA: its certificate (PEM) and key.
#[derive(Debug)]
pub struct Ca {
    pub profile: &'static CaProfile,
    pub cert_pem: String,
    pub key: KeyPair,
}

impl Ca {
    /// A new self-signed CA, valid from now (backdated an hour) for [`CA_LIFETIME`].
    pub fn new(profile: &'static CaProfile, now: OffsetDateTime) -> Result<Ca, IssueError> {
        let key = KeyPair::generate().map_err(at("generating the CA key"))?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, profile.common_name);
        params.distinguished_name = dn;
        params.is_ca =
            IsCa::Ca(profile.path_len.map_or(BasicConstraints::Unconstrained, BasicConstraints::Constrained));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params.not_before = now - BACKDATE;
        params.not_after = now + CA_LIFETIME;
        params.serial_number = profile.serial();
        let cert = params.self_signed(&key).map_err(at("signing the CA certificate"))?;
        Ok(Ca { profile, cert_pem: cert.pem(), key })
    }

    /// A new serving certificate and key (PEM) for `names` (DNS names or IP addresses), with
    /// subject `common_name`, valid from now (backdated an hour) for `lifetime`.
    pub fn issue_serving(
        &self,
        names: &[String],
        common_name: &str,
        lifetime: Duration,
        now: OffsetDateTime,
    ) -> Result<(String, String), IssueError> {
        // The issuer's subject and key identifier come from the CA certificate itself, so a CA
        // made elsewhere (a Secret's) signs certificates that chain to it.
        let issuer =
            Issuer::from_ca_cert_pem(&self.cert_pem, &self.key).map_err(at("parsing the CA certificate"))?;
        let key = KeyPair::generate().map_err(at("generating the serving key"))?;
        let mut params = CertificateParams::new(names.to_vec()).map_err(at("serving certificate names"))?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = self.profile.authority_key_id;
        params.not_before = now - BACKDATE;
        params.not_after = now + lifetime;
        params.serial_number = self.profile.serial();
        let cert = params.signed_by(&key, &issuer).map_err(at("signing the serving certificate"))?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

impl CaProfile {
    fn serial(&self) -> Option<SerialNumber> {
        self.random_serials.then(|| {
            // 16 random bytes with the top bit clear, so the DER integer stays positive.
            let mut bytes: [u8; 16] = rand::random();
            bytes[0] &= 0x7f;
            SerialNumber::from_slice(&bytes)
        })
    }
}

#[cfg(test)]
mod tests {
    use x509_parser::extensions::ParsedExtension;

    use super::*;

    /// The two modes share this code but not every field; each keeps the certificates it issued
    /// before they did (a change here changes what operators see in their certificates).
    #[test]
    fn each_profile_issues_the_fields_it_always_had() {
        let now = OffsetDateTime::now_utc();
        for (profile, path_len, random_serials, aki) in
            [(&EMBEDDED, Some(0), true, true), (&SELF_MANAGED, None, false, false)]
        {
            let ca = Ca::new(profile, now).unwrap();
            let names = ["a.svc".to_owned(), "127.0.0.1".to_owned()];
            let (cert_pem, _) = ca.issue_serving(&names, "a.svc", Duration::from_secs(86_400), now).unwrap();
            let ca_der = x509_parser::pem::parse_x509_pem(ca.cert_pem.as_bytes()).unwrap().1.contents;
            let cert_der = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap().1.contents;
            let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
            let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();

            assert_eq!(ca_cert.subject().to_string(), format!("CN={}", profile.common_name));
            let constraints = ca_cert.basic_constraints().unwrap().unwrap().value;
            assert!(constraints.ca);
            assert_eq!(constraints.path_len_constraint, path_len);
            let lifetime = |c: &x509_parser::certificate::X509Certificate<'_>| {
                c.validity().not_after.timestamp() - c.validity().not_before.timestamp()
            };
            assert_eq!(lifetime(&ca_cert), 3650 * 86_400 + 3600);
            assert_eq!(lifetime(&cert), 86_400 + 3600);
            assert_eq!(cert.issuer(), ca_cert.subject());
            assert_eq!(cert.subject().to_string(), "CN=a.svc");
            assert!(cert.extended_key_usage().unwrap().unwrap().value.server_auth);
            let has_aki = cert
                .iter_extensions()
                .any(|e| matches!(e.parsed_extension(), ParsedExtension::AuthorityKeyIdentifier(_)));
            assert_eq!(has_aki, aki, "{}", profile.common_name);
            // 16 random bytes, or 20 bytes of the public key's SHA-256 (a leading zero byte is
            // dropped from the DER integer, hence the ranges).
            for c in [&ca_cert, &cert] {
                let serial_len = c.raw_serial().len();
                assert_eq!(
                    serial_len <= 16,
                    random_serials,
                    "{} serial of {serial_len} bytes",
                    profile.common_name
                );
            }
            for c in [&ca_cert, &cert] {
                assert_eq!(
                    c.public_key().algorithm.algorithm,
                    x509_parser::oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY
                );
            }
        }
    }
}
