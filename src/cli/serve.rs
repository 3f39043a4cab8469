//! `kruise-admission serve`: flags, logging, the embedded certificate default and signals around
//! [`crate::server::Server`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use super::certs;
use super::settings::DecisionArgs;
use crate::server::{DEFAULT_MAX_REQUEST_BYTES, Server, ServerConfig, deadline};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// HTTPS address for admission reviews.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub listen: SocketAddr,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Serving certificate (PEM chain). Reloaded when the file changes. Without it (and
    /// --tls-key-file) a CA and certificate are generated under --cert-dir.
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Folder of the generated CA and serving certificate (used without --tls-cert-file).
    #[arg(long, default_value = "certs")]
    pub cert_dir: PathBuf,
    /// Extra DNS name for the generated serving certificate (repeatable).
    #[arg(long = "dns-name")]
    pub dns_names: Vec<String>,
    /// Folder of cluster objects (SidecarSets, Namespaces, ...) as YAML/JSON; reloaded on change.
    #[arg(long, default_value = "examples/cluster")]
    pub cluster_dir: PathBuf,
    #[command(flatten)]
    pub decisions: DecisionArgs,
    /// Largest accepted request body, in bytes (larger: HTTP 413).
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// How long in-flight requests may run after SIGTERM/SIGINT (Go duration, e.g. 25s).
    #[arg(long, default_value = "25s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Log line format; the level comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    deadline::parse_go_duration(text).ok_or_else(|| format!("{text:?} is not a duration such as 25s, 500ms or 1m"))
}

pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    init_logging(args.log_format);
    // A panic inside a decision is contained per request (HTTP 500); route its report through the
    // structured log instead of bare stderr text.
    std::panic::set_hook(Box::new(|info| tracing::error!(panic = %info, "panic")));
    let (cert, key) = match (&args.tls_cert_file, &args.tls_key_file) {
        (Some(cert), Some(key)) => (cert.clone(), key.clone()),
        _ => {
            let (paths, report) = certs::ensure(&args.cert_dir, &args.dns_names)?;
            if let Some(why) = &report.ca_created {
                tracing::info!(ca = %paths.ca_cert.display(), reason = %why, "created the embedded CA");
            }
            if let Some(why) = &report.serving_issued {
                tracing::info!(cert = %paths.cert.display(), reason = %why, "issued the embedded serving certificate");
            }
            (paths.cert, paths.key)
        }
    };
    let mut config = ServerConfig::new(cert, key, args.cluster_dir);
    config.listen = args.listen;
    config.metrics_listen = args.metrics_listen;
    config.settings = args.decisions.settings();
    config.max_request_bytes = args.max_request_bytes;
    config.shutdown_grace = args.shutdown_grace;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    runtime.block_on(async move {
        let server = Server::bind(config).await?;
        tracing::info!(https = %server.https_addr(), metrics = %server.metrics_addr(), "kruise-admission ready to serve");
        server.run(shutdown_signal()).await
    })
}

/// SIGTERM (Kubernetes) or SIGINT (Ctrl-C).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received"),
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only SIGINT stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
