//! The HTTPS admission server: TLS with live certificate reload, the admission router, health and
//! metrics on a second plain-HTTP port, cluster objects reloaded from a folder, graceful drain.
//!
//! [`Server::bind`] validates the certificate and binds both ports (so a misconfiguration fails
//! before anything is served); [`Server::run`] serves until the shutdown future resolves, then
//! stops accepting, lets in-flight requests finish within the grace period and returns.

pub mod app;
pub mod cluster;
pub mod deadline;
pub mod health;
pub mod listener;
pub mod metrics;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::admission::webhooks::{WEBHOOKS, Webhook};
use crate::admission::{Clock, Settings, SystemClock};
use cluster::{ClusterDir, ClusterState};
use health::Health;
use listener::ConnLimits;
use metrics::Metrics;
use tls::{CertFiles, CertResolver};

/// Everything `serve` can be told. [`ServerConfig::new`] fills in the defaults `serve` documents,
/// except the addresses: both are ephemeral loopback ports until set.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub tls_cert_file: PathBuf,
    pub tls_key_file: PathBuf,
    pub cluster_dir: PathBuf,
    pub settings: Settings,
    pub max_request_bytes: usize,
    pub shutdown_grace: Duration,
    /// How often the certificate files and the cluster folder are checked for changes.
    pub reload_interval: Duration,
    pub limits: ConnLimits,
    /// The routing table served; `WEBHOOKS` except in tests that need a misbehaving webhook.
    pub webhooks: &'static [Webhook],
    /// Where decisions read the time (the system clock; tests pin it to compare with `dry-run --now`).
    pub clock: Arc<dyn Clock>,
}

pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 << 20;

impl ServerConfig {
    pub fn new(tls_cert_file: PathBuf, tls_key_file: PathBuf, cluster_dir: PathBuf) -> Self {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        ServerConfig {
            listen: loopback,
            metrics_listen: loopback,
            tls_cert_file,
            tls_key_file,
            cluster_dir,
            settings: Settings::default(),
            clock: Arc::new(SystemClock),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            shutdown_grace: Duration::from_secs(25),
            reload_interval: Duration::from_secs(1),
            limits: ConnLimits::default(),
            webhooks: WEBHOOKS,
        }
    }
}

/// A bound, not yet running server.
pub struct Server {
    config: ServerConfig,
    https: TcpListener,
    metrics_listener: TcpListener,
    https_addr: SocketAddr,
    metrics_addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    resolver: Arc<CertResolver>,
    cert_files: CertFiles,
    cluster_dir: ClusterDir,
    cluster: Arc<ClusterState>,
    metrics: Arc<Metrics>,
}

impl Server {
    /// Load the certificate (an error names the flags to fix), load the cluster folder once (a
    /// failure only leaves the server unready) and bind both ports.
    pub async fn bind(config: ServerConfig) -> anyhow::Result<Server> {
        let metrics = Arc::new(Metrics::new().context("registering metrics")?);
        let mut cert_files = CertFiles::new(config.tls_cert_file.clone(), config.tls_key_file.clone());
        let (key, not_after) = cert_files.load().with_context(|| {
            format!(
                "loading the serving certificate (--tls-cert-file {}, --tls-key-file {})",
                config.tls_cert_file.display(),
                config.tls_key_file.display()
            )
        })?;
        metrics.cert_not_after.set(not_after as f64);
        tracing::info!(cert = %config.tls_cert_file.display(), not_after, sha256 = tls::fingerprint(&key), "serving certificate loaded");
        let resolver = Arc::new(CertResolver::new(key));
        let tls = Arc::new(tls::server_config(resolver.clone()).context("building the TLS configuration")?);

        let cluster = Arc::new(ClusterState::default());
        let mut cluster_dir = ClusterDir::new(config.cluster_dir.clone());
        let (state, m) = (cluster.clone(), metrics.clone());
        let cluster_dir = tokio::task::spawn_blocking(move || {
            cluster_dir.poll(&state, &m);
            cluster_dir
        })
        .await
        .context("loading the cluster folder")?;

        let https = TcpListener::bind(config.listen).await.with_context(|| format!("binding --listen {}", config.listen))?;
        let metrics_listener = TcpListener::bind(config.metrics_listen)
            .await
            .with_context(|| format!("binding --metrics-listen {}", config.metrics_listen))?;
        Ok(Server {
            https_addr: https.local_addr()?,
            metrics_addr: metrics_listener.local_addr()?,
            config,
            https,
            metrics_listener,
            tls,
            resolver,
            cert_files,
            cluster_dir,
            cluster,
            metrics,
        })
    }

    /// The bound HTTPS address (the real port when `listen` asked for port 0).
    pub fn https_addr(&self) -> SocketAddr {
        self.https_addr
    }

    /// The bound address of `/healthz`, `/readyz` and `/metrics`.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_addr
    }

    /// Serve until `shutdown` resolves, then drain for at most `shutdown_grace`.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
        let Server { config, https, metrics_listener, tls, resolver, cert_files, cluster_dir, cluster, metrics, .. } = self;
        let cert_task = tokio::spawn(tls::reload_loop(cert_files, resolver, metrics.clone(), config.reload_interval));
        let cluster_task = tokio::spawn(cluster::reload_loop(cluster_dir, cluster.clone(), metrics.clone(), config.reload_interval));

        let health = Arc::new(Health { cluster: cluster.clone(), metrics: metrics.clone(), draining: false.into() });
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics_server = axum::serve(metrics_listener, health::router(health.clone()))
            .with_graceful_shutdown(async move {
                let _ = metrics_stopped.await;
            })
            .into_future();
        let mut metrics_task = tokio::spawn(metrics_server);

        let app = app::router(Arc::new(app::AppState {
            webhooks: config.webhooks,
            cluster,
            settings: config.settings.clone(),
            clock: config.clock.clone(),
            metrics,
            max_request_bytes: config.max_request_bytes,
        }));
        let graceful = GracefulShutdown::new();
        listener::accept_until(https, tokio_rustls::TlsAcceptor::from(tls), app, &config.limits, &graceful, shutdown).await;

        health.draining.store(true, Ordering::Relaxed);
        let open = graceful.count();
        tracing::info!(
            open_connections = open,
            grace_s = config.shutdown_grace.as_secs_f64(),
            "shutting down: draining in-flight requests"
        );
        if tokio::time::timeout(config.shutdown_grace, graceful.shutdown()).await.is_err() {
            tracing::warn!("shutdown grace period over; closing the remaining connections");
        }
        let _ = stop_metrics.send(());
        // Scrapers keep connections open; do not let them hold up the exit.
        if tokio::time::timeout(Duration::from_secs(1), &mut metrics_task).await.is_err() {
            metrics_task.abort();
        }
        cert_task.abort();
        cluster_task.abort();
        tracing::info!("stopped");
        Ok(())
    }
}
