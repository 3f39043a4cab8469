//! `/healthz`, `/readyz` and `/metrics`, served over plain HTTP on `--metrics-listen` so probes and
//! Prometheus need no client certificate setup.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::listener::{self, ConnLimits, Port};
use super::metrics::Metrics;
use super::snapshot_state::ClusterState;
use super::tls::CertResolver;
use crate::cluster::live::LiveCluster;
use crate::cluster::live::certs::CertStatusView;

pub struct Health {
    pub cluster: Arc<ClusterState>,
    /// The serving certificate: an expired one makes the server unready until a valid one loads.
    pub certificate: Arc<CertResolver>,
    /// Live mode: the watches, whose sync and staleness gate readiness.
    pub live: Option<Arc<LiveCluster>>,
    pub metrics: Arc<Metrics>,
    /// `--cert-mode self-managed`: the renewal loop's status, for its metrics.
    pub cert_status: Option<CertStatusView>,
    /// Set when shutdown starts, so the Service stops sending new requests while we drain.
    pub draining: AtomicBool,
    /// `--shadow`: `/readyz` says so in its body (the status code is the probe's as usual).
    pub shadow: bool,
}

impl Health {
    /// Ready when cluster objects are loaded, the serving certificate has not expired and we are
    /// not shutting down; in live mode also when every watch has synced and none has been failing
    /// longer than --max-cache-staleness (a reconnecting watch keeps serving the last snapshot).
    /// A certificate is always loaded: the server does not start without one.
    pub fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Relaxed) {
            return Err("shutting down".into());
        }
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.certificate.check_unexpired(i64::try_from(now).unwrap_or(i64::MAX))?;
        if let Some(live) = &self.live {
            live.readiness()?;
        }
        if !self.cluster.is_loaded() {
            return Err("cluster objects not loaded".into());
        }
        Ok(())
    }
}

/// The `/readyz` body of a ready server in shadow mode.
pub const SHADOW_READY: &str = "ok (shadow mode: nothing is enforced)";

/// How often [`log_readiness`] looks at readiness (cheap: a few atomics and short locks).
const READINESS_LOG_INTERVAL: Duration = Duration::from_millis(200);

/// Log readiness as `/readyz` answers it, so the log never claims more than the probe sees: the
/// first state (`"kruise-admission ready to serve"` with both addresses, or `"not ready yet"` with
/// the reason), then every change (`"not ready"` as a warning, `"ready to serve"` again).
/// Shutting down is logged by the drain itself, not here. With `try_it`, the ready line carries it
/// (`try`). Runs until aborted.
pub async fn log_readiness(
    health: Arc<Health>,
    https: SocketAddr,
    metrics: SocketAddr,
    try_it: Option<String>,
) {
    let mut last: Option<Result<(), String>> = None;
    let mut ticker = tokio::time::interval(READINESS_LOG_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        if health.draining.load(Ordering::Relaxed) {
            return;
        }
        let now = health.ready();
        let changed = match (&last, &now) {
            (None, _) => true,
            (Some(Ok(())), Ok(())) => false,
            (Some(Err(_)), Err(_)) => false,
            _ => true,
        };
        if changed {
            match (&last, &now) {
                (_, Ok(())) => match &try_it {
                    Some(command) => tracing::info!(
                        https = %https, metrics = %metrics, shadow = health.shadow, r#try = %command,
                        "kruise-admission ready to serve"
                    ),
                    None => tracing::info!(
                        https = %https, metrics = %metrics, shadow = health.shadow,
                        "kruise-admission ready to serve"
                    ),
                },
                (None, Err(reason)) => {
                    tracing::info!(https = %https, metrics = %metrics, %reason, "not ready yet")
                }
                (Some(_), Err(reason)) => tracing::warn!(%reason, "not ready"),
            }
        }
        last = Some(now);
    }
}

/// The `curl` that sends the server listening on `https` a review (the repository's
/// `examples/reviews/pod-target-node.json`, relative to the working directory as the embedded
/// default's cluster folder is), trusting `ca`. The embedded certificate is for `localhost` and
/// `127.0.0.1`, so an unspecified or loopback address is called `localhost`.
pub fn try_command(ca: &std::path::Path, https: SocketAddr) -> String {
    let host = if https.ip().is_unspecified() || https.ip().is_loopback() {
        format!("localhost:{}", https.port())
    } else {
        https.to_string()
    };
    format!(
        "curl --cacert {} -H 'Content-Type: application/json' --data @examples/reviews/pod-target-node.json \
         https://{host}/mutate-pod",
        ca.display()
    )
}

/// Serve the probe and metrics port until `stop` resolves, through the same accept loop as the
/// webhook port (its limits: [`ConnLimits::metrics_port`]), then close its connections
/// gracefully and wait for them.
pub async fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    limits: ConnLimits,
    stop: impl Future<Output = ()> + Send,
) {
    let metrics = health.metrics.clone();
    let graceful = GracefulShutdown::new();
    listener::accept_until(listener, Port::Metrics, router(health), &limits, &metrics, &graceful, stop).await;
    graceful.shutdown().await;
}

pub fn router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(health)
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    match health.ready() {
        Ok(()) if health.shadow => (StatusCode::OK, SHADOW_READY.to_owned()),
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn metrics(State(health): State<Arc<Health>>) -> impl IntoResponse {
    if let Some(live) = &health.live {
        health.metrics.record_live(&live.stats());
    }
    if let Some(status) = &health.cert_status {
        health.metrics.record_cert_status(&status.get());
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], health.metrics.render())
}
