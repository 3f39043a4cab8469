//! `kruise-admission serve`: flags, logging, the certificate (embedded default, provided files or
//! self-managed), the cluster mode (folder or live) and signals around [`crate::server::Server`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use tracing_subscriber::fmt::format::JsonFields;

use super::certs;
use super::connections::ConnectionArgs;
use super::log_json::JsonLine;
use super::log_output::{self, BatchedLog, FlushOnDrop};
use super::settings::DecisionArgs;
use crate::cluster::live::certs::{CertHandle, CertManager, CertSettings};
use crate::cluster::live::{CertMode, ClusterMode, LiveOptions, LiveSettings};
use crate::server::{DEFAULT_MAX_REQUEST_BYTES, DEFAULT_WORKERS, LiveSource, Server, ServerConfig, deadline};
use crate::tls_material::{TLS_CRT, TLS_KEY};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// HTTPS address for admission reviews. Loopback by default (a laptop); the chart, the
    /// manifests and the image pass `--listen=0.0.0.0:9443`.
    #[arg(long, default_value = "127.0.0.1:9443")]
    pub listen: SocketAddr,
    /// Plain-HTTP address for /healthz, /readyz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub metrics_listen: SocketAddr,
    /// Serving certificate (PEM chain). Reloaded when the file changes. Without it (and
    /// --tls-key-file) a CA and certificate are generated under --cert-dir (or, with
    /// --cert-mode self-managed, kept there from the --cert-secret Secret).
    #[arg(long, requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key of --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,
    /// Require client certificates signed by a CA in this PEM bundle (the apiserver presents one
    /// when its admission configuration names a kubeconfig with a client certificate). Reloaded
    /// when the file changes. Without it any client is served.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// With --client-ca-file: accept only client certificates whose Common Name or a DNS SAN is
    /// this name (repeatable; compared exactly). Without it any certificate the CA signed is served.
    #[arg(long = "allowed-client-name", value_name = "NAME", requires = "client_ca_file")]
    pub allowed_client_names: Vec<String>,
    /// Folder of the generated or self-managed CA and serving certificate (used without
    /// --tls-cert-file; must be writable).
    #[arg(long, default_value = "certs")]
    pub cert_dir: PathBuf,
    /// Extra DNS name for the generated serving certificate (repeatable).
    #[arg(long = "dns-name")]
    pub dns_names: Vec<String>,
    /// Folder of cluster objects (SidecarSets, Namespaces, ...) as YAML/JSON; reloaded on change
    /// (--cluster-mode folder). The default is the repository's example folder, relative to the
    /// working directory.
    #[arg(long, default_value = DEFAULT_CLUSTER_DIR)]
    pub cluster_dir: PathBuf,
    #[command(flatten)]
    pub decisions: DecisionArgs,
    /// Shadow mode: decide every review as usual but enforce nothing. Every review is answered
    /// allowed with no patch (delete protection included); each decision is counted in
    /// kruise_admission_shadow_decisions_total{webhook, outcome} (would-patch, would-deny, no-op)
    /// and logged ("shadow decision"). For running next to kruise-manager, with the webhook
    /// configurations of `manifests webhooks --shadow`.
    #[arg(long)]
    pub shadow: bool,
    #[command(flatten)]
    pub live: LiveOptions,
    /// Largest accepted request body, in bytes (larger: HTTP 413). The default is what
    /// kube-apiserver can send: two objects at its 3 MiB body limit plus 1 MiB of envelope.
    #[arg(long, default_value_t = DEFAULT_MAX_REQUEST_BYTES)]
    pub max_request_bytes: usize,
    /// Bytes of request bodies and of the values they decode into, held at once by all requests;
    /// beyond it HTTP 429 with Retry-After (a request that alone needs more: 413). Without it: what
    /// the container's memory limit leaves after the caches (docs/operations.md#sizing), or
    /// 167772160 (160 MiB) where there is no limit.
    #[arg(long)]
    pub max_in_flight_bytes: Option<usize>,
    #[command(flatten)]
    pub connections: ConnectionArgs,
    /// How long in-flight requests may run after SIGTERM/SIGINT (Go duration, e.g. 25s).
    #[arg(long, default_value = "25s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Log line format; the level comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Json)]
    pub log_format: LogFormat,
}

/// `--cluster-dir`'s default: the example objects of the repository, for `cargo run -- serve`.
pub const DEFAULT_CLUSTER_DIR: &str = "examples/cluster";

/// Folder mode needs its folder at start: without it the server could never turn ready, and
/// would only say so as a readiness reason. One error instead, naming the ways out.
fn check_cluster_dir(args: &ServeArgs) -> anyhow::Result<()> {
    if args.live.cluster_mode != ClusterMode::Folder || args.cluster_dir.is_dir() {
        return Ok(());
    }
    let dir = args.cluster_dir.display();
    let cwd = std::env::current_dir().map_or_else(|_| "?".into(), |d| d.display().to_string());
    if args.cluster_dir == std::path::Path::new(DEFAULT_CLUSTER_DIR) {
        anyhow::bail!(
            "no cluster folder: --cluster-dir defaults to {dir}, the repository's example objects, and {cwd} has none; \
             run from the repository, pass --cluster-dir DIR (an empty folder is an empty cluster), or watch a cluster with --cluster-mode live"
        )
    }
    anyhow::bail!(
        "--cluster-dir {dir} is not a folder (working directory {cwd}); create it (an empty folder is an empty cluster) or use --cluster-mode live"
    )
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    deadline::parse_go_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 25s, 500ms or 1m"))
}

/// The log filter without RUST_LOG: INFO, except the Kubernetes client library's line per failed
/// request ("failed with error client error (SendRequest)", at ERROR) and per watch stream cut
/// off ("eof in poll", WARN). Live mode reports each failure itself with what it was doing and
/// what to fix: an outage as one WARN per watch when it starts, a summary per minute and an INFO
/// when it ends; a failed lookup in the answer. The library's lines would only repeat it, one per
/// request, at ERROR, for a condition that is expected now and then and heals by itself
/// (docs/operations.md#api-server-faults).
pub const DEFAULT_LOG_FILTER: &str = "info,kube_client::client=error,kube_client::client::builder=off";

/// Log to stderr in batches ([`log_output`]); the returned guard writes out what is left when
/// `serve` returns.
pub fn init_logging(format: LogFormat) -> anyhow::Result<FlushOnDrop> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let log = BatchedLog::new(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log.clone())
        .with_ansi(super::colour::wanted(&std::io::stderr()));
    let _ = match format {
        LogFormat::Json => builder.fmt_fields(JsonFields::new()).event_format(JsonLine).try_init(),
        LogFormat::Text => builder.fmt_fields(escaped_fields()).try_init(),
    };
    log.flush_every(log_output::BATCH_INTERVAL).context("starting the log flush thread")?;
    Ok(FlushOnDrop(log))
}

/// `--log-format text`'s fields, `name=value` separated by spaces, the message bare (as
/// tracing-subscriber writes them). Its own formatter writes a `%` value as it is (it escapes ANSI
/// sequences only), so a newline in a uid or a name started a log line of the caller's choosing
/// (issue 30.4). Here every field goes through [`escape_controls`]. JSON logs escape by design.
fn escaped_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let text = format!("{value:?}");
        let text = escape_controls(&text);
        match field.name() {
            "message" => writer.write_str(&text),
            name => write!(writer, "{name}={text}"),
        }
    })
    .delimited(" ")
}

/// `text` with every control character, and the Unicode line and paragraph separators some
/// viewers break lines at, written as Rust escapes them (`\n`, `\u{1b}`); the rest as it is.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    let escaped = |c: char| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}');
    if !text.contains(escaped) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out.into()
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let _log = init_logging(args.log_format)?;
    let settings = args.decisions.settings().map_err(anyhow::Error::msg)?;
    check_cluster_dir(&args)?;
    // A panic inside a decision is contained per request (HTTP 500); route its report through the
    // structured log instead of bare stderr text.
    std::panic::set_hook(Box::new(|info| tracing::error!(panic = %info, "panic")));
    // docs/RELIABILITY.md has the soak's RSS with the capped blocking pool.
    let runtime = crate::server::runtime(DEFAULT_WORKERS).context("starting the async runtime")?;
    runtime.block_on(async move {
        // Both live mode and self-managed certificates talk to the API server.
        let client = match (args.live.cluster_mode, args.live.cert_mode) {
            (ClusterMode::Folder, CertMode::Provided) => None,
            _ => Some(args.live.client().await?),
        };
        // Self-managed files are written before the server loads them; the handle keeps them renewed.
        let (cert, key, cert_sync, embedded_ca) = serving_certificate(&args, client.as_ref()).await?;
        let mut config = ServerConfig::new(cert, key, args.cluster_dir.clone());
        // On a laptop (folder mode, the embedded certificate) the ready line says what to try.
        if args.live.cluster_mode == ClusterMode::Folder {
            config.try_with_ca = embedded_ca;
        }
        config.cert_status = cert_sync.as_ref().map(CertHandle::status_view);
        config.listen = args.listen;
        config.metrics_listen = args.metrics_listen;
        config.settings = settings;
        config.max_request_bytes = args.max_request_bytes;
        match args.max_in_flight_bytes {
            Some(bytes) => config.max_in_flight_bytes = bytes,
            None => config.memory_limit = crate::server::memory_limit::container_limit(),
        }
        args.connections.apply(&mut config.limits);
        config.client_ca_file = args.client_ca_file.clone();
        config.allowed_client_names = args.allowed_client_names.clone();
        config.shutdown_grace = args.shutdown_grace;
        config.shadow = args.shadow;
        if let (ClusterMode::Live, Some(client)) = (args.live.cluster_mode, client) {
            let settings = LiveSettings {
                kruise_namespace: args.decisions.kruise_namespace.clone(),
                max_cache_staleness: args.live.max_cache_staleness,
                ..LiveSettings::default()
            };
            config.live = Some(LiveSource::new(client, settings));
        }
        // Readiness and its log lines ("kruise-admission ready to serve", "not ready yet", with
        // the addresses) come from the server, as /readyz sees it.
        Server::bind(config).await?.run(shutdown_signal()).await
    })
}

/// The certificate and key files to serve, by `--cert-mode`; for self-managed, also the handle
/// of the background renewal (dropping it stops renewing); for the embedded certificate, its CA.
async fn serving_certificate(
    args: &ServeArgs,
    client: Option<&kube::Client>,
) -> anyhow::Result<(PathBuf, PathBuf, Option<CertHandle>, Option<PathBuf>)> {
    match (args.live.cert_mode, client, &args.tls_cert_file, &args.tls_key_file) {
        (CertMode::SelfManaged, _, Some(_), _) => {
            anyhow::bail!(
                "--cert-mode self-managed writes its own certificate under --cert-dir; drop --tls-cert-file and --tls-key-file"
            )
        }
        (CertMode::SelfManaged, client, None, _) => {
            // `certs::ensure` would make a second, local CA; the Secret's is the only one.
            let client = match client {
                Some(client) => client.clone(),
                None => args.live.client().await?,
            };
            let settings = CertSettings::from_options(&args.live, args.cert_dir.clone());
            let handle = CertManager::new(client, settings).start(Duration::from_secs(60)).await?;
            tracing::info!(secret = %args.live.cert_secret, namespace = %args.live.namespace, dir = %args.cert_dir.display(), "self-managed certificate in place");
            Ok((args.cert_dir.join(TLS_CRT), args.cert_dir.join(TLS_KEY), Some(handle), None))
        }
        (_, _, Some(cert), Some(key)) => Ok((cert.clone(), key.clone(), None, None)),
        _ => {
            let (paths, report) = certs::ensure(&args.cert_dir, &args.dns_names)?;
            if let Some(why) = &report.ca_created {
                tracing::info!(ca = %paths.ca_cert.display(), reason = %why, "created the embedded CA");
            }
            if let Some(why) = &report.serving_issued {
                tracing::info!(cert = %paths.cert.display(), reason = %why, "issued the embedded serving certificate");
            }
            Ok((paths.cert, paths.key, None, Some(paths.ca_cert)))
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_log_filter_parses_and_leaves_out_only_the_client_request_failures() {
        let filter = tracing_subscriber::EnvFilter::try_new(DEFAULT_LOG_FILTER).unwrap();
        let text = filter.to_string();
        for directive in ["kube_client::client::builder=off", "kube_client::client=error", "info"] {
            assert!(text.contains(directive), "{text}");
        }
    }

    #[test]
    fn control_characters_are_escaped_and_nothing_else() {
        assert_eq!(escape_controls("plain é 名前"), "plain é 名前");
        assert_eq!(
            escape_controls("a\nb\r\u{1b}]0;x\u{7}\u{85}\u{2028}"),
            r"a\nb\r\u{1b}]0;x\u{7}\u{85}\u{2028}"
        );
    }
}
