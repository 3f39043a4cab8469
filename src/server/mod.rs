//! The HTTPS admission server: TLS with live certificate reload, the admission router, health and
//! metrics on a second plain-HTTP port, cluster objects reloaded from a folder or kept current from
//! the API server (live mode), graceful drain.
//!
//! [`Server::bind`] validates the certificate and binds both ports (so a misconfiguration fails
//! before anything is served); [`Server::run`] serves until the shutdown future resolves, then
//! stops accepting, lets in-flight requests finish within the grace period and returns.

pub mod app;
pub mod client_auth;
mod coalesce;
pub mod deadline;
pub mod fail_open;
pub mod health;
pub mod listener;
pub mod live_agreement;
pub mod log_summary;
pub mod lookups;
pub mod memory_budget;
pub mod memory_limit;
pub mod metrics;
pub mod reload;
pub mod snapshot_state;
pub mod status_writes;
pub mod tls;
pub mod work_queue;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::admission::pending_decisions::Limits;
use crate::admission::webhooks::{Capability, WEBHOOKS, Webhook};
use crate::admission::{Clock, Settings, SystemClock};
use crate::cluster::live::certs::CertStatusView;
use crate::cluster::live::pod_creations;
use crate::cluster::live::{LiveCluster, LiveLookups, LiveSettings};
use client_auth::{ClientCaFile, ClientVerifier};
use fail_open::FailOpen;
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
    /// The container's memory limit, when the budget is derived from it instead of
    /// `max_in_flight_bytes` (`serve` without `--max-in-flight-bytes`; see `memory_limit`).
    pub memory_limit: Option<u64>,
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
    /// The CA of the embedded certificate in folder mode: the ready line then names a `curl` that
    /// sends the server a review with it (what to try next on a laptop).
    pub try_with_ca: Option<PathBuf>,
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

/// The runtime `serve` runs on. Large reviews are parsed and decided on the blocking pool (so the
/// internal deadline can fire while one runs; cheap ones are decided where they arrive, see
/// `app::Place`); the pool is capped, and [`work_queue`] admits at most `workers` of them, so a
/// burst of huge objects queues (or is shed) instead of starting hundreds of threads, each holding
/// its object and an allocator heap (tokio's default is 512).
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
            memory_limit: None,
            workers: DEFAULT_WORKERS,
            shutdown_grace: Duration::from_secs(25),
            reload_interval: Duration::from_secs(1),
            limits: ConnLimits::default(),
            metrics_limits: ConnLimits::metrics_port(),
            webhooks: WEBHOOKS,
            shadow: false,
            agreement_limits: Limits::default(),
            try_with_ca: None,
        }
    }
}

/// Shadow mode fails open by design: say so loudly at start, export it as a gauge, and start
/// every `{webhook, outcome}` counter at 0 so rates exist from the first scrape.
fn announce_shadow(metrics: &Metrics, webhooks: &[Webhook]) {
    fail_open::announce_fail_open!(
        metrics,
        FailOpen::Shadow,
        shadow = true,
        "SHADOW MODE (--shadow): NOTHING IS ENFORCED. Every review is answered allowed, with no patch: no sidecar is injected, \
         no DaemonSet stamp is applied, no SidecarSet, CloneSet or StatefulSet rule is checked, and delete protection protects \
         nothing. Decisions are only counted (kruise_admission_shadow_decisions_total) and logged (\"shadow decision\"). \
         Run it next to the webhooks that do enforce (kruise-manager's), never instead of them"
    );
    for webhook in webhooks {
        for outcome in crate::admission::shadow::Outcome::ALL {
            metrics.shadow_decisions.with_label_values(&[webhook.name, outcome.as_str()]);
        }
    }
}

/// Serving any client, and capabilities switched off, fail open: say so at start, and set their
/// gauges (0 for what is checked, so an alert has a series to read).
fn announce_unchecked(config: &ServerConfig, client_auth: bool, metrics: &Metrics) {
    if !client_auth {
        fail_open::announce_fail_open!(
            metrics,
            FailOpen::ClientAuthOff,
            "client authentication is off (no --client-ca-file): any caller that reaches the HTTPS port is served, and \
             with the default NetworkPolicy that is every Pod of the cluster. It can send reviews of its own (their answers \
             change nothing in the cluster) and load the server; see docs/RELIABILITY.md. Require the API server's client \
             certificate with --client-ca-file and --allowed-client-name"
        );
    }
    for capability in Capability::ALL {
        metrics.capability_disabled.with_label_values(&[capability.name()]).set(0);
    }
    for &capability in &config.settings.disabled {
        fail_open::announce_fail_open!(
            metrics,
            FailOpen::CapabilityDisabled(capability),
            capability = capability.name(),
            "--disable-capability {}: its webhooks allow every request unchanged (with a warning in the answer); \
             whatever it checks or injects is not checked or injected",
            capability.name()
        );
    }
}

/// Shadow mode in live mode: watch Pod creations and compare each stored Pod with the decision it
/// pairs with; drop decisions past their TTL every few seconds.
fn start_agreement(
    source: &LiveSource,
    limits: &Limits,
    cluster: &Arc<ClusterState>,
    metrics: &Arc<Metrics>,
) -> (Arc<LiveAgreement>, [tokio::task::AbortHandle; 2]) {
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
    (agreement, [watch.abort_handle(), expiry.abort_handle()])
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
        let (cert_files, resolver) = load_certificate(&config, &metrics)?;
        let client_ca = load_client_ca(&config)?;
        announce_unchecked(&config, client_ca.is_some(), &metrics);
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
                Source::Folder(load_folder(&config.cluster_dir, &config.settings, &cluster, &metrics).await?)
            }
            Some(live) => start_live(live, &cluster, &metrics).await?,
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
        let (config, cluster, metrics, resolver) = (self.config, self.cluster, self.metrics, self.resolver);
        // Background tasks, aborted once the server has drained.
        let mut tasks =
            reload_certificates(self.cert_files, &resolver, self.client_ca, &metrics, config.reload_interval);
        let started = keep_cluster_current(self.source, &cluster, &metrics, config.reload_interval);
        tasks.push(started.task);

        let agreement = match (&config.live, config.shadow) {
            (Some(source), true) => {
                let (agreement, agreement_tasks) =
                    start_agreement(source, &config.agreement_limits, &cluster, &metrics);
                tasks.extend(agreement_tasks);
                Some(agreement)
            }
            _ => None,
        };

        let budget = memory_limit::initial(config.max_in_flight_bytes, config.memory_limit);
        let health = Arc::new(Health {
            cluster: cluster.clone(),
            certificate: resolver,
            live: started.live,
            metrics: metrics.clone(),
            cert_status: config.cert_status.clone(),
            draining: false.into(),
            shadow: config.shadow,
        });
        let try_it = config.try_with_ca.as_deref().map(|ca| health::try_command(ca, self.https_addr));
        let readiness =
            tokio::spawn(health::log_readiness(health.clone(), self.https_addr, self.metrics_addr, try_it));
        tasks.push(readiness.abort_handle());
        if let Some(limit) = config.memory_limit {
            let ready = health.clone();
            tasks.push(
                tokio::spawn(memory_limit::follow(Arc::clone(&budget), limit, move || ready.ready().is_ok()))
                    .abort_handle(),
            );
        }
        let health_port = HealthPort::start(self.metrics_listener, &health, config.metrics_limits.clone())?;

        let app = app::router(Arc::new(app::AppState {
            webhooks: config.webhooks,
            cluster,
            lookups: started.lookups,
            settings: config.settings.clone(),
            clock: config.clock.clone(),
            metrics: metrics.clone(),
            max_request_bytes: config.max_request_bytes,
            budget: Arc::clone(&budget),
            queue: work_queue::WorkQueue::new(config.workers, config.webhooks),
            shadow: config.shadow,
            agreement,
            status_writes: status_writes::StatusWrites::default(),
            refusals: log_summary::LogSummary::default(),
            unknown_namespaces: log_summary::LogSummary::default(),
        }));
        let graceful = GracefulShutdown::new();
        let failure = std::sync::Mutex::new(None::<String>);
        let stop = async {
            tokio::select! {
                () = shutdown => {}
                Ok(error) = started.sync_failure => {
                    tracing::error!(%error, "live cluster caches cannot sync; stopping");
                    *failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
                }
            }
        };
        let port = listener::Port::Webhooks(tokio_rustls::TlsAcceptor::from(self.tls));
        listener::accept_until(self.https, port, app, &config.limits, &metrics, &graceful, stop).await;

        health.draining.store(true, Ordering::Relaxed);
        drain(graceful, config.shutdown_grace).await;
        health_port.stop().await;
        for task in tasks {
            task.abort();
        }
        tracing::info!("stopped");
        match failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(error) => Err(anyhow::anyhow!(error)),
            None => Ok(()),
        }
    }
}

/// Reload the serving certificate and the client CA when their files change.
fn reload_certificates(
    cert_files: CertFiles,
    resolver: &Arc<CertResolver>,
    client_ca: Option<(ClientCaFile, Arc<ClientVerifier>)>,
    metrics: &Arc<Metrics>,
    interval: Duration,
) -> Vec<tokio::task::AbortHandle> {
    let mut tasks = vec![
        tokio::spawn(tls::reload_loop(cert_files, resolver.clone(), metrics.clone(), interval))
            .abort_handle(),
    ];
    if let Some((file, verifier)) = client_ca {
        tasks.push(tokio::spawn(client_auth::reload_loop(file, verifier, interval)).abort_handle());
    }
    tasks
}

/// The serving certificate, loaded once to fail early (an error names the flags to fix), and the
/// resolver that serves it.
fn load_certificate(
    config: &ServerConfig,
    metrics: &Metrics,
) -> anyhow::Result<(CertFiles, Arc<CertResolver>)> {
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
    Ok((cert_files, Arc::new(CertResolver::new(key))))
}

/// `--client-ca-file` and the verifier that checks client certificates against it and
/// `--allowed-client-name`; `None` serves any client.
fn load_client_ca(config: &ServerConfig) -> anyhow::Result<Option<(ClientCaFile, Arc<ClientVerifier>)>> {
    let Some(path) = &config.client_ca_file else {
        if !config.allowed_client_names.is_empty() {
            anyhow::bail!(
                "--allowed-client-name needs --client-ca-file: names are only checked on certificates a trusted CA signed"
            );
        }
        return Ok(None);
    };
    let (file, ca) = ClientCaFile::load(path.clone()).context("loading --client-ca-file")?;
    Ok(Some((file, Arc::new(ClientVerifier::new(ca, config.allowed_client_names.clone())))))
}

/// Folder mode: load the cluster folder once (a failure only leaves the server unready).
async fn load_folder(
    dir: &Path,
    settings: &Settings,
    cluster: &Arc<ClusterState>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<ClusterDir> {
    let mut cluster_dir = ClusterDir::new(dir.to_path_buf(), settings.clone());
    let (state, m) = (cluster.clone(), metrics.clone());
    let cluster_dir = tokio::task::spawn_blocking(move || {
        cluster_dir.poll(&state, &m);
        cluster_dir
    })
    .await
    .context("loading the cluster folder")?;
    // The folder stands in for the whole cluster, lookups included: say so once, loudly.
    fail_open::announce_fail_open!(
        metrics,
        FailOpen::FolderLookups,
        dir = %dir.display(),
        lookup_source = LOOKUPS_FROM_FOLDER,
        "folder mode: delete protection's Cascading lookups (a Namespace's pods and PVCs, a CRD's custom resources) \
         and CloneSet pod lookups are answered from the cluster folder, not from the API server; a Cascading \
         Namespace or CRD whose dependents are not in the folder can be deleted. Use --cluster-mode live in a cluster"
    );
    Ok(cluster_dir)
}

/// Live mode: start the watches, each new snapshot published to `cluster` (an unreachable API server
/// or a missing CRD is an error; the sync itself is awaited by [`Server::run`]).
async fn start_live(
    live: &LiveSource,
    cluster: &Arc<ClusterState>,
    metrics: &Arc<Metrics>,
) -> anyhow::Result<Source> {
    let (state, m) = (cluster.clone(), metrics.clone());
    let publish = move |snapshot: Arc<crate::cluster::Snapshot>| {
        m.record_snapshot(&snapshot, snapshot_state::unix_now());
        state.publish(snapshot);
    };
    let started = LiveCluster::start(live.client.clone(), live.settings.clone(), publish).await?;
    tracing::info!(kruise_namespace = %live.settings.kruise_namespace, "live cluster mode: watches started");
    metrics.lookup_source.with_label_values(&[LOOKUPS_FROM_API_SERVER]).set(1);
    Ok(Source::Live {
        cluster: Arc::new(started),
        lookups: LiveLookups::new(live.client.clone(), live.lookup_timeout),
        sync_timeout: live.sync_timeout,
    })
}

/// What [`keep_cluster_current`] started.
struct ClusterTask {
    /// Live mode: the watches, for readiness.
    live: Option<Arc<LiveCluster>>,
    lookups: Lookups,
    /// The folder's reload loop, or the wait for the live caches' first sync.
    task: tokio::task::AbortHandle,
    /// Live mode: why the caches cannot sync, if they cannot (the server then stops).
    sync_failure: tokio::sync::oneshot::Receiver<String>,
}

/// Folder mode: reload the folder on change. Live mode: wait for the caches' first sync, and
/// report a failure to sync through `sync_failure`.
fn keep_cluster_current(
    source: Source,
    cluster: &Arc<ClusterState>,
    metrics: &Arc<Metrics>,
    reload_interval: Duration,
) -> ClusterTask {
    let (sync_failed, sync_failure) = tokio::sync::oneshot::channel::<String>();
    match source {
        Source::Folder(dir) => {
            let task = tokio::spawn(snapshot_state::reload_loop(
                dir,
                cluster.clone(),
                metrics.clone(),
                reload_interval,
            ));
            ClusterTask { live: None, lookups: Lookups::Snapshot, task: task.abort_handle(), sync_failure }
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
            ClusterTask {
                live: Some(live),
                lookups: Lookups::Live(lookups),
                task: task.abort_handle(),
                sync_failure,
            }
        }
    }
}

/// Let in-flight requests finish within `grace`, then close what is left.
async fn drain(graceful: GracefulShutdown, grace: Duration) {
    tracing::info!(
        open_connections = graceful.count(),
        grace_s = grace.as_secs_f64(),
        "shutting down: draining in-flight requests"
    );
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("shutdown grace period over; closing the remaining connections");
    }
}

/// The probe and metrics port, served until [`HealthPort::stop`], on a thread and runtime of its
/// own: reviews under 32 KiB are decided on the main runtime's workers where they arrive, so a
/// burst of them (or a slow one) must not be able to delay the kubelet's probes, and neither can a
/// tenant's connections to the HTTPS port, which live on the main runtime too.
struct HealthPort {
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::sync::oneshot::Receiver<()>,
}

impl HealthPort {
    fn start(listener: TcpListener, health: &Arc<Health>, limits: ConnLimits) -> anyhow::Result<Self> {
        let listener = listener.into_std().context("moving the metrics listener to its thread")?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the probe port's runtime")?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (finished, done) = tokio::sync::oneshot::channel::<()>();
        let health = health.clone();
        std::thread::Builder::new()
            .name("probes".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(error) => {
                            tracing::error!(%error, "the probe and metrics port cannot be served");
                            return;
                        }
                    };
                    let (closing, closed) = tokio::sync::oneshot::channel::<()>();
                    let serving = health::serve(listener, health, limits, async move {
                        let _ = stopped.await;
                        let _ = closing.send(());
                    });
                    // Scrapers keep connections open: once stopping, give them a moment and then
                    // drop the runtime, which closes whatever is left.
                    tokio::select! {
                        () = serving => {}
                        () = async {
                            let _ = closed.await;
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        } => {}
                    }
                });
                drop(runtime);
                let _ = finished.send(());
            })
            .context("starting the probe port's thread")?;
        Ok(HealthPort { stop, done })
    }

    /// Stop accepting and wait for the port to close (at most a second after its last requests).
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(2), self.done).await;
    }
}
