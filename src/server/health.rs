//! `/healthz`, `/readyz` and `/metrics`, served over plain HTTP on `--metrics-listen` so probes and
//! Prometheus need no client certificate setup.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;

use super::cluster::ClusterState;
use super::metrics::Metrics;
use crate::cluster::live::LiveCluster;

pub struct Health {
    pub cluster: Arc<ClusterState>,
    /// Live mode: the watches, whose sync and staleness gate readiness.
    pub live: Option<Arc<LiveCluster>>,
    pub metrics: Arc<Metrics>,
    /// Set when shutdown starts, so the Service stops sending new requests while we drain.
    pub draining: AtomicBool,
}

impl Health {
    /// Ready when cluster objects are loaded and we are not shutting down; in live mode also
    /// when every watch has synced and none has been failing longer than --max-cache-staleness
    /// (a reconnecting watch keeps serving the last snapshot). The serving certificate is always
    /// loaded: the server does not start without one.
    pub fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Relaxed) {
            return Err("shutting down".into());
        }
        if let Some(live) = &self.live {
            live.readiness()?;
        }
        if !self.cluster.is_loaded() {
            return Err("cluster objects not loaded".into());
        }
        Ok(())
    }
}

pub fn router(health: Arc<Health>) -> Router {
    Router::new().route("/healthz", get(|| async { "ok" })).route("/readyz", get(readyz)).route("/metrics", get(metrics)).with_state(health)
}

async fn readyz(State(health): State<Arc<Health>>) -> impl IntoResponse {
    match health.ready() {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn metrics(State(health): State<Arc<Health>>) -> impl IntoResponse {
    if let Some(live) = &health.live {
        health.metrics.record_live(&live.stats());
    }
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], health.metrics.render())
}
