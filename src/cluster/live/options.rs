//! The live-mode flags `serve` flattens into its arguments, and the Kubernetes client they describe.

use std::path::PathBuf;
use std::time::Duration;

use super::LiveError;

/// How the serving certificate is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CertMode {
    /// Files given by the operator (cert-manager with cainjector, a mounted Secret, `certs`).
    Provided,
    /// This server keeps a CA and serving certificate in a Secret and patches the caBundle of its
    /// own webhook configurations, like Kruise does.
    SelfManaged,
}

/// Where `serve` reads cluster objects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClusterMode {
    /// A folder of YAML/JSON (`--cluster-dir`); no API server needed.
    Folder,
    /// Watches and lookups against the API server.
    Live,
}

#[derive(Debug, Clone, clap::Args)]
pub struct LiveOptions {
    /// Read cluster objects from a `folder` (--cluster-dir) or `live` from the API server.
    #[arg(long, value_enum, default_value = "folder")]
    pub cluster_mode: ClusterMode,
    /// Kubeconfig to reach the API server; without it the in-cluster service account (or
    /// $KUBECONFIG, ~/.kube/config) is used.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where the serving certificate comes from: `provided` files, or `self-managed` (a CA and
    /// certificate kept in --cert-secret, caBundle patched into the webhook configurations;
    /// needs the API server, whatever --cluster-mode says).
    #[arg(long, value_enum, default_value = "provided")]
    pub cert_mode: CertMode,
    /// Secret (in --namespace) holding the self-managed CA and serving certificate.
    #[arg(long, default_value = "kruise-admission-tls")]
    pub cert_secret: String,
    /// Renew the self-managed serving certificate this long before it expires (e.g. 30d, 12h).
    #[arg(long, default_value = "90d", value_parser = parse_duration)]
    pub cert_renew_before: Duration,
    /// MutatingWebhookConfiguration(s) whose caBundle self-managed mode keeps current.
    #[arg(long = "mutating-webhook-config-name", default_value = "kruise-admission")]
    pub mutating_webhook_configs: Vec<String>,
    /// ValidatingWebhookConfiguration(s) whose caBundle self-managed mode keeps current.
    #[arg(long = "validating-webhook-config-name", default_value = "kruise-admission")]
    pub validating_webhook_configs: Vec<String>,
    /// Turn unready when a cluster watch has failed for longer than this (e.g. 2m).
    #[arg(long, default_value = "2m", value_parser = parse_duration)]
    pub max_cache_staleness: Duration,
    /// The Service in front of this server; the self-managed certificate is issued for
    /// `<service>.<namespace>.svc`.
    #[arg(long, default_value = "kruise-admission")]
    pub service: String,
    /// This server's own namespace (its Service and the certificate Secret).
    #[arg(short = 'n', long, env = "POD_NAMESPACE", default_value = "kruise-admission")]
    pub namespace: String,
}

impl LiveOptions {
    /// The Kubernetes client: from --kubeconfig, else in-cluster or the default kubeconfig.
    pub async fn client(&self) -> Result<kube::Client, LiveError> {
        let config = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| LiveError::Config(format!("--kubeconfig {}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
                    .await
                    .map_err(|e| LiveError::Config(format!("--kubeconfig {}: {e}", path.display())))?
            }
            None => kube::Config::infer().await.map_err(|e| {
                LiveError::Config(format!(
                    "no in-cluster service account and no kubeconfig ({e}); pass --kubeconfig"
                ))
            })?,
        };
        kube::Client::try_from(config).map_err(|e| LiveError::Config(e.to_string()))
    }
}

/// `90s`, `15m`, `12h`, `90d`, `1y` (365 days).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 =
        number.parse().map_err(|_| format!("{text:?}: expected a number followed by s, m, h, d or y"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "y" => 365 * 86_400,
        _ => return Err(format!("{text:?}: unknown unit {unit:?}; use s, m, h, d or y")),
    };
    Ok(Duration::from_secs(n.saturating_mul(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[test]
    fn durations_read_with_units() {
        assert_eq!(parse_duration("90d"), Ok(Duration::from_secs(90 * 86_400)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1y"), Ok(Duration::from_secs(31_536_000)));
        assert!(parse_duration("5").unwrap_err().contains("unknown unit"));
        assert!(parse_duration("d").is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        live: LiveOptions,
    }

    #[test]
    fn flags_parse_with_defaults_matching_the_manifests() {
        let cli = Cli::try_parse_from([
            "x",
            "--cert-mode",
            "self-managed",
            "--validating-webhook-config-name",
            "a",
            "--validating-webhook-config-name",
            "b",
        ])
        .unwrap();
        assert_eq!(cli.live.cert_mode, CertMode::SelfManaged);
        assert_eq!(cli.live.cluster_mode, ClusterMode::Folder);
        assert_eq!(cli.live.validating_webhook_configs, ["a", "b"]);
        assert_eq!(cli.live.mutating_webhook_configs, ["kruise-admission"]);
        assert_eq!(cli.live.max_cache_staleness, Duration::from_secs(120));
    }
}
