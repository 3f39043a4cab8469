//! The HTTPS admission server: TLS with live certificate reload, the admission router, health and
//! metrics on a second plain-HTTP port, cluster objects reloaded from a folder or kept current from
//! the API server (live mode), graceful drain.
//!
//! [`Server::bind`] validates the certificate and binds both ports (so a misconfiguration fails
//! before anything is served); [`Server::run`] serves until the shutdown future resolves, then
//! stops accepting, lets in-flight requests finish within the grace period and returns.

pub mod app;
pub mod client_auth;
pub mod deadline;
pub mod health;
pub mod listener;
pub mod live_agreement;
pub mod lookups;
pub mod memory_budget;
pub mod metrics;
pub mod reload;
pub mod snapshot_state;
pub mod tls;
pub mod work_queue;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::admission::pending_decisions::Limits;
use crate::admission::webhooks::{WEBHOOKS, Webhook};
use crate::admission::{Clock, Settings, SystemClock};
use crate::cluster::live::certs::CertStatusView;
use crate::cluster::live::pod_creations;
use crate::cluster::live::{LiveCluster, LiveLookups, LiveSettings};
use client_auth::{ClientCaFile, ClientVerifier};
use health::Health;
use listener::ConnLimits;
use live_agreement::LiveAgreement;
use lookups::Lookups;
use metrics::Metrics;
use snapshot_state::{ClusterDir, ClusterState};
use tls::{CertFiles, CertResolver};

/// Everything `serve` can be told. [`ServerConfig::new`] fills in the defaults `serve` documents,
/// except the addresses: both are ephemeral loopback ports until set.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub metrics_listen: SocketAddr,
    pub tls_cert_file: PathBuf,
    pub tls_key_file: PathBuf,
    /// CA bundle that client certificates must chain to; `None` serves any client.
    pub client_ca_file: Option<PathBuf>,
    /// With `client_ca_file`: only client certificates whose Common Name or a DNS SAN is listed
    /// are accepted; empty accepts any name the CA signed.
    pub allowed_client_names: Vec<String>,
    /// The cluster folder (folder mode, when `live` is `None`).
    pub cluster_dir: PathBuf,
    /// Live mode: watch the API server instead of reading `cluster_dir`.
    pub live: Option<LiveSource>,
    /// `--cert-mode self-managed`: the renewal loop's status (its failures are a metric).
    pub cert_status: Option<CertStatusView>,
    pub settings: Settings,
    pub max_request_bytes: usize,
    /// Bytes of request bodies and of what they decode into, held at once by all requests.
    pub max_in_flight_bytes: usize,
    /// Workers for parsing and deciding (the blocking work of requests).
    pub workers: usize,
    pub shutdown_grace: Duration,
    /// How often the certificate files and the cluster folder are checked for changes.
    pub reload_interval: Duration,
    pub limits: ConnLimits,
    /// Limits of the probe and metrics port ([`ConnLimits::metrics_port`]).
    pub metrics_limits: ConnLimits,
    /// The routing table served; `WEBHOOKS` except in tests that need a misbehaving webhook.
    pub webhooks: &'static [Webhook],
    /// Where decisions read the time (the system clock; tests pin it to compare with `dry-run --now`).
    pub clock: Arc<dyn Clock>,
    /// `--shadow`: every decision is made, counted and logged, none is enforced (every review is
    /// answered allowed, unchanged).
    pub shadow: bool,
    /// `--shadow` in live mode: how many Pod CREATE decisions wait for their stored Pod, and how long.
    pub agreement_limits: Limits,
}

/// The largest body kube-apiserver sends: an AdmissionReview carries `object` and, on UPDATE,
/// `oldObject`. kube-apiserver accepts write bodies up to 3 MiB (`MaxRequestBodyBytes`, in
/// kubernetes `staging/src/k8s.io/apiserver/pkg/server/config.go`: twice etcd's 1.5 MiB request
/// limit, `DefaultMaxRequestBytes` in etcd `server/embed/config.go`, because JSON is larger than
/// the protobuf etcd stores), and what it reads back from etcd was stored within the same limit;
/// so each object is at most about 3 MiB of JSON. Two of them, plus 1 MiB for the envelope
/// (`userInfo`, `options`) and for fields defaulting and earlier mutating webhooks add: 7 MiB.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 7 << 20;

pub use memory_budget::DEFAULT_MAX_IN_FLIGHT_BYTES;
pub use work_queue::DEFAULT_WORKERS;

/// Blocking threads besides the workers, so file reads and the cluster reload never queue behind
/// decisions.
const SPARE_BLOCKING_THREADS: usize = 4;

/// The runtime `serve` runs on. Every parse and decision runs on the blocking pool (so the internal
/// deadline can fire while one runs); the pool is capped, and [`work_queue`] admits at most
/// `workers` of them, so a burst of huge objects queues (or is shed) instead of starting hundreds
/// of threads, each holding its object and an allocator heap (tokio's default is 512).
pub fn runtime(workers: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(workers + SPARE_BLOCKING_THREADS)
        .enable_all()
        .build()
}

/// Where live mode reads the cluster.
#[derive(Clone)]
pub struct LiveSource {
    pub client: kube::Client,
    pub settings: LiveSettings,
    /// The initial sync must finish within this, or the server stops with an error.
    pub sync_timeout: Duration,
    /// Bound on each live lookup; the request's own deadline bounds them as well.
    pub lookup_timeout: Duration,
}

impl LiveSource {
    pub fn new(client: kube::Client, settings: LiveSettings) -> Self {
        LiveSource {
            client,
            settings,
            sync_timeout: Duration::from_secs(60),
            lookup_timeout: Duration::from_secs(5),
        }
    }
}

impl std::fmt::Debug for LiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSource")
            .field("settings", &self.settings)
            .field("sync_timeout", &self.sync_timeout)
            .field("lookup_timeout", &self.lookup_timeout)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    pub fn new(tls_cert_file: PathBuf, tls_key_file: PathBuf, cluster_dir: PathBuf) -> Self {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        ServerConfig {
            listen: loopback,
            metrics_listen: loopback,
            tls_cert_file,
            tls_key_file,
            client_ca_file: None,
            allowed_client_names: Vec::new(),
            cluster_dir,
            live: None,
            cert_status: None,
            settings: Settings::default(),
            clock: Arc::new(SystemClock),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_in_flight_bytes: DEFAULT_MAX_IN_FLIGHT_BYTES,
            workers: DEFAULT_WORKERS,
            shutdown_grace: Duration::from_secs(25),
            reload_interval: Duration::from_secs(1),
            limits: ConnLimits::default(),
            metrics_limits: ConnLimits::metrics_port(),
            webhooks: WEBHOOKS,
            shadow: false,
            agreement_limits: Limits::default(),
        }
    }
}

/// Shadow mode fails open by design: say so loudly at start, export it as a gauge, and start
/// every `{webhook, outcome}` counter at 0 so rates exist from the first scrape.
fn announce_shadow(metrics: &Metrics, webhooks: &[Webhook]) {
    tracing::warn!(
        shadow = true,
        "SHADOW MODE (--shadow): NOTHING IS ENFORCED. Every review is answered allowed, with no patch: no sidecar is injected, \
         no DaemonSet stamp is applied, no SidecarSet, CloneSet or StatefulSet rule is checked, and delete protection protects \
         nothing. Decisions are only counted (kruise_admission_shadow_decisions_total) and logged (\"shadow decision\"). \
         Run it next to the webhooks that do enforce (kruise-manager's), never instead of them"
    );
    metrics.shadow_mode.set(1);
    for webhook in webhooks {
        for outcome in crate::admission::shadow::Outcome::ALL {
            metrics.shadow_decisions.with_label_values(&[webhook.name, outcome.as_str()]);
        }
    }
}

/// Shadow mode in live mode: watch Pod creations and compare each stored Pod with the decision it
/// pairs with; drop decisions past their TTL every few seconds.
fn start_agreement(
    source: &LiveSource,
    limits: &Limits,
    cluster: &Arc<ClusterState>,
    metrics: &Arc<Metrics>,
) -> (Option<Arc<LiveAgreement>>, Vec<tokio::task::JoinHandle<()>>) {
    let agreement = Arc::new(LiveAgreement::new(*limits, metrics.clone()));
    tracing::info!(
        max_pending = limits.max_count,
        max_pending_bytes = limits.max_bytes,
        ttl_s = limits.ttl.as_secs_f64(),
        "shadow agreement: Pod CREATE decisions are compared with the Pods the API server stores \
         (kruise_admission_shadow_agreement_total; needs list and watch on pods cluster-wide)"
    );
    let (stored, cluster) = (agreement.clone(), cluster.clone());
    let watch = pod_creations::start(source.client.clone(), &source.settings, move |pod| {
        stored.stored(pod, cluster.snapshot().as_deref())
    });
    let expiring = agreement.clone();
    let sweep = (limits.ttl / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let expiry = tokio::spawn(async move {
        let mut ticker = tokio::time::interval(sweep);
        loop {
            ticker.tick().await;
            expiring.expire(std::time::Instant::now());
        }
    });
    (Some(agreement), vec![watch, expiry])
}

/// `kruise_admission_lookup_source{source}` values.
pub const LOOKUPS_FROM_FOLDER: &str = "cluster-folder";
pub const LOOKUPS_FROM_API_SERVER: &str = "api-server";

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
    client_ca: Option<(ClientCaFile, Arc<ClientVerifier>)>,
    source: Source,
    cluster: Arc<ClusterState>,
    metrics: Arc<Metrics>,
}

/// Where the snapshot comes from, once started.
enum Source {
    Folder(ClusterDir),
    Live { cluster: Arc<LiveCluster>, lookups: LiveLookups, sync_timeout: Duration },
}

impl Server {
    /// Load the certificate (an error names the flags to fix), load the cluster folder once (a
    /// failure only leaves the server unready) or start the live watches (an unreachable API
    /// server or a missing CRD is an error; the sync itself is awaited by [`Server::run`]), and
    /// bind both ports.
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
        tracing::info!(cert = %config.tls_cert_file.display(), not_after, sha256 = crate::tls_material::fingerprint(&key), "serving certificate loaded");
        let resolver = Arc::new(CertResolver::new(key));
        let client_ca = match &config.client_ca_file {
            Some(path) => {
                let (file, ca) = ClientCaFile::load(path.clone()).context("loading --client-ca-file")?;
                Some((file, Arc::new(ClientVerifier::new(ca, config.allowed_client_names.clone()))))
            }
            None => None,
        };
        if client_ca.is_none() && !config.allowed_client_names.is_empty() {
            anyhow::bail!(
                "--allowed-client-name needs --client-ca-file: names are only checked on certificates a trusted CA signed"
            );
        }
        let verifier = client_ca.as_ref().map(|(file, v)| {
            tracing::info!(client_ca = %file.path.display(), allowed_names = ?config.allowed_client_names, "client certificates required");
            v.clone() as Arc<dyn rustls::server::danger::ClientCertVerifier>
        });
        let tls = Arc::new(
            tls::server_config(resolver.clone(), verifier).context("building the TLS configuration")?,
        );

        let cluster = Arc::new(ClusterState::default());
        let source = match &config.live {
            None => {
                let mut cluster_dir = ClusterDir::new(config.cluster_dir.clone());
                let (state, m) = (cluster.clone(), metrics.clone());
                let cluster_dir = tokio::task::spawn_blocking(move || {
                    cluster_dir.poll(&state, &m);
                    cluster_dir
                })
                .await
                .context("loading the cluster folder")?;
                // The folder stands in for the whole cluster, lookups included: say so once, loudly.
                tracing::warn!(
                    dir = %config.cluster_dir.display(),
                    lookup_source = LOOKUPS_FROM_FOLDER,
                    "folder mode: delete protection's Cascading lookups (a Namespace's pods and PVCs, a CRD's custom resources) \
                     and CloneSet pod lookups are answered from the cluster folder, not from the API server; a Cascading \
                     Namespace or CRD whose dependents are not in the folder can be deleted. Use --cluster-mode live in a cluster"
                );
                metrics.lookup_source.with_label_values(&[LOOKUPS_FROM_FOLDER]).set(1);
                Source::Folder(cluster_dir)
            }
            Some(live) => {
                let (state, m) = (cluster.clone(), metrics.clone());
                let publish = move |snapshot: Arc<crate::cluster::Snapshot>| {
                    m.record_snapshot(&snapshot, snapshot_state::unix_now());
                    state.publish(snapshot);
                };
                let started = LiveCluster::start(live.client.clone(), live.settings.clone(), publish).await?;
                tracing::info!(kruise_namespace = %live.settings.kruise_namespace, "live cluster mode: watches started");
                metrics.lookup_source.with_label_values(&[LOOKUPS_FROM_API_SERVER]).set(1);
                Source::Live {
                    cluster: Arc::new(started),
                    lookups: LiveLookups::new(live.client.clone(), live.lookup_timeout),
                    sync_timeout: live.sync_timeout,
                }
            }
        };

        if config.shadow {
            announce_shadow(&metrics, config.webhooks);
        }

        let https = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding --listen {}", config.listen))?;
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
            client_ca,
            source,
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

    /// Serve until `shutdown` resolves, then drain for at most `shutdown_grace`. In live mode the
    /// server is unready until the caches have synced; when they cannot sync (RBAC refuses a
    /// list, or not within the sync timeout) it shuts down and returns the reason.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> anyhow::Result<()> {
        let Server {
            config,
            https,
            metrics_listener,
            tls,
            resolver,
            cert_files,
            client_ca,
            source,
            cluster,
            metrics,
            https_addr,
            metrics_addr,
        } = self;
        let cert_task = tokio::spawn(tls::reload_loop(
            cert_files,
            resolver.clone(),
            metrics.clone(),
            config.reload_interval,
        ));
        let client_ca_task = client_ca.map(|(file, verifier)| {
            tokio::spawn(client_auth::reload_loop(file, verifier, config.reload_interval))
        });
        let (sync_failed, sync_failure) = tokio::sync::oneshot::channel::<String>();
        let (live, lookups, cluster_task) = match source {
            Source::Folder(dir) => {
                let task = tokio::spawn(snapshot_state::reload_loop(
                    dir,
                    cluster.clone(),
                    metrics.clone(),
                    config.reload_interval,
                ));
                (None, Lookups::Snapshot, task)
            }
            Source::Live { cluster: live, lookups, sync_timeout } => {
                let watched = live.clone();
                let task = tokio::spawn(async move {
                    match watched.wait_synced(sync_timeout).await {
                        Ok(()) => tracing::info!("live cluster caches synced"),
                        Err(error) => {
                            let _ = sync_failed.send(error.to_string());
                        }
                    }
                });
                (Some(live), Lookups::Live(lookups), task)
            }
        };

        let (agreement, agreement_tasks) = match (&config.live, config.shadow) {
            (Some(source), true) => start_agreement(source, &config.agreement_limits, &cluster, &metrics),
            _ => (None, Vec::new()),
        };

        let health = Arc::new(Health {
            cluster: cluster.clone(),
            certificate: resolver.clone(),
            live: live.clone(),
            metrics: metrics.clone(),
            cert_status: config.cert_status.clone(),
            draining: false.into(),
            shadow: config.shadow,
        });
        let readiness_task = tokio::spawn(health::log_readiness(health.clone(), https_addr, metrics_addr));
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
        let mut metrics_task = tokio::spawn(health::serve(
            metrics_listener,
            health.clone(),
            config.metrics_limits.clone(),
            async move {
                let _ = metrics_stopped.await;
            },
        ));

        let app = app::router(Arc::new(app::AppState {
            webhooks: config.webhooks,
            cluster,
            lookups,
            settings: config.settings.clone(),
            clock: config.clock.clone(),
            metrics: metrics.clone(),
            max_request_bytes: config.max_request_bytes,
            budget: memory_budget::MemoryBudget::new(config.max_in_flight_bytes),
            queue: work_queue::WorkQueue::new(config.workers, config.webhooks),
            shadow: config.shadow,
            agreement,
        }));
        let graceful = GracefulShutdown::new();
        let failure = std::sync::Mutex::new(None::<String>);
        let stop = async {
            tokio::select! {
                () = shutdown => {}
                Ok(error) = sync_failure => {
                    tracing::error!(%error, "live cluster caches cannot sync; stopping");
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                }
            }
        };
        let port = listener::Port::Webhooks(tokio_rustls::TlsAcceptor::from(tls));
        listener::accept_until(https, port, app, &config.limits, &metrics, &graceful, stop).await;

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
        readiness_task.abort();
        if let Some(task) = client_ca_task {
            task.abort();
        }
        cluster_task.abort();
        for task in agreement_tasks {
            task.abort();
        }
        tracing::info!("stopped");
        match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(error) => Err(anyhow::anyhow!(error)),
            None => Ok(()),
        }
    }
}
