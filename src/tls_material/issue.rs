//! Issuing a CA and the serving certificates it signs (rcgen; ECDSA P-256 keys, as ring cannot
//! generate RSA).

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SerialNumber,
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
pub const EMBEDDED: CaProfile =
    CaProfile { common_name: "kruise-admission-ca", path_len: Some(0), random_serials: true, authority_key_id: true };

/// The CA of `--cert-mode self-managed`, shaped like the one Kruise keeps in its Secret.
pub const SELF_MANAGED: CaProfile =
    CaProfile { common_name: "kruise-admission-webhook-ca", path_len: None, random_serials: false, authority_key_id: false };

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
        params.is_ca = IsCa::Ca(profile.path_len.map_or(BasicConstraints::Unconstrained, BasicConstraints::Constrained));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
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
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, &self.key).map_err(at("parsing the CA certificate"))?;
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
