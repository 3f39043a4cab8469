//! The whole request path in-process, bytes in → bytes out: the axum router of `serve`
//! (`server::app::router`) driven with `tower::ServiceExt::oneshot`, so one iteration is method and
//! media-type checks, reading the body, one parse, decode, decide (on the blocking pool, as served),
//! the response's serialisation, metrics and the log call. TLS and sockets are left out (the load
//! bench `benches/load.sh` measures those).
//!
//! `cargo bench --bench request -- --warm-up-time 1 --measurement-time 3`

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header::CONTENT_TYPE};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt as _;
use kruise_admission::admission::webhooks::WEBHOOKS;
use kruise_admission::admission::{Settings, SystemClock};
use kruise_admission::cluster::Snapshot;
use kruise_admission::server::app::{AppState, router};
use kruise_admission::server::lookups::Lookups;
use kruise_admission::server::memory_budget::MemoryBudget;
use kruise_admission::server::metrics::Metrics;
use kruise_admission::server::snapshot_state::ClusterState;
use kruise_admission::server::work_queue::WorkQueue;
use kruise_admission::server::{DEFAULT_MAX_IN_FLIGHT_BYTES, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_WORKERS};
use serde_json::Value;
use tower::ServiceExt as _;

fn app(snapshot: Snapshot) -> Router {
    let cluster = Arc::new(ClusterState::default());
    cluster.publish(Arc::new(snapshot));
    router(Arc::new(AppState {
        webhooks: WEBHOOKS,
        cluster,
        settings: Settings::default(),
        clock: Arc::new(SystemClock),
        metrics: Arc::new(Metrics::new().expect("metrics")),
        max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        lookups: Lookups::Snapshot,
        budget: MemoryBudget::new(DEFAULT_MAX_IN_FLIGHT_BYTES),
        queue: WorkQueue::new(DEFAULT_WORKERS, WEBHOOKS),
        shadow: false,
        agreement: None,
        status_writes: Default::default(),
        refusals: Default::default(),
        unknown_namespaces: Default::default(),
    }))
}

/// POST `body` to `path` and return the response body.
async fn post(app: &Router, path: &str, body: &bytes::Bytes) -> bytes::Bytes {
    let request = Request::post(path)
        .header(CONTENT_TYPE, "application/json")
        .body(Body::from(body.clone()))
        .expect("request");
    let response = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    response.into_body().collect().await.expect("body").to_bytes()
}

fn whole_path(c: &mut Criterion) {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("request");
    for (name, pod) in support::pods() {
        let body = bytes::Bytes::from(serde_json::to_vec(&support::pod_review(&pod)).expect("JSON"));
        for total in [0usize, 1_000] {
            let app = app(support::snapshot(&pod, total));
            let answer: Value = serde_json::from_slice(&runtime.block_on(post(&app, "/mutate-pod", &body)))
                .expect("a review");
            assert_eq!(answer["response"]["allowed"], true);
            assert_eq!(answer["response"]["patchType"].is_string(), total > 0, "{answer}");
            group.bench_with_input(BenchmarkId::new(format!("mutate-pod/{name}"), total), &app, |b, app| {
                b.iter(|| black_box(runtime.block_on(post(app, "/mutate-pod", &body))))
            });
        }
    }
    let app = app(Snapshot::default());
    let body = bytes::Bytes::from(serde_json::to_vec(&support::sidecarset_review()).expect("JSON"));
    let answer: Value =
        serde_json::from_slice(&runtime.block_on(post(&app, "/mutate-apps-kruise-io-sidecarset", &body)))
            .expect("review");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    group.bench_function("mutate-sidecarset", |b| {
        b.iter(|| black_box(runtime.block_on(post(&app, "/mutate-apps-kruise-io-sidecarset", &body))))
    });
    group.finish();
}

criterion_group!(benches, whole_path);
criterion_main!(benches);
