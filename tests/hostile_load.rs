//! Hostile load over real TLS on 127.0.0.1 (issue 17, points 1 and 5): bodies whose decoded form
//! would not fit in memory, more bytes in flight than the budget, and a flood of slow requests
//! while ordinary Pod CREATEs must keep being answered, correctly and within their timeout.
//! The memory itself is measured by `benches/request_memory.sh` (RSS of the release server).

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::client::{BOTH, Proto, TlsClient, channel_body, http_get};
use common::server::TestServer;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, StatusCode};
use kruise_admission::admission::Inputs;
use kruise_admission::admission::review::{AdmissionError, AdmissionRequest};
use kruise_admission::admission::review_cost::{SCAN_FROM, worst_case};
use kruise_admission::admission::webhooks::{
    self, Capability, FailurePolicy, Handler, ObjectScope, SideEffects, Webhook,
};
use serde_json::{Value, json};

/// A Pod CREATE the DaemonSet stamp pins to worker-1: answered with a patch that names it.
fn pod_to_pin(uid: &str) -> Value {
    let mut review = common::good_review(uid);
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"kruise-admission.dev/target-node": "worker-1"});
    review
}

/// The answer is the right one for `uid`: allowed, with a patch pinning the pod to worker-1.
fn assert_pinned(reply: &common::client::Reply, uid: &str) {
    use base64::Engine as _;
    assert_eq!(reply.status, StatusCode::OK, "{uid}: {}", String::from_utf8_lossy(&reply.body));
    let answer = reply.json();
    assert_eq!(answer["response"]["uid"], uid);
    assert_eq!(answer["response"]["allowed"], true, "{uid}: {answer}");
    let patch = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("a patch"))
        .unwrap();
    assert!(
        String::from_utf8_lossy(&patch).contains("worker-1"),
        "{uid}: {}",
        String::from_utf8_lossy(&patch)
    );
}

async fn alive(client: &TlsClient, case: &str) {
    for proto in BOTH {
        let reply = client.post_json(proto, "/mutate-pod", pod_to_pin("alive").to_string()).await;
        assert_pinned(&reply, "alive");
        let _ = case;
    }
}

/// The pod review with `filler` (raw JSON) as an unknown field of its spec, padded to `bytes`.
fn pod_with_filler(uid: &str, filler: &str) -> String {
    pod_to_pin(uid).to_string().replacen("\"spec\":{", &format!("\"spec\":{{\"x\":{filler},"), 1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_would_decode_past_the_budget_is_refused_before_decoding() {
    let server = TestServer::start().await;
    let client = server.client();
    // 7 MiB of `0,`: within --max-request-bytes, but some 400 MiB as serde_json values.
    let zeros = format!("[{}0]", "0,".repeat((7 << 20) / 2 - 1024));
    let body = pod_with_filler("zeros", &zeros);
    assert!(body.len() <= kruise_admission::server::DEFAULT_MAX_REQUEST_BYTES);
    for proto in BOTH {
        let reply = client.post_json(proto, "/mutate-pod", body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::PAYLOAD_TOO_LARGE,
            "{proto:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert!(
            reply.json()["error"].as_str().unwrap().contains("--max-in-flight-bytes"),
            "{:?}",
            reply.body
        );
    }
    alive(&client, "after the refused bodies").await;
    let metrics = http_get(server.metrics, "/metrics").await.1;
    assert!(
        metrics.contains(r#"kruise_admission_http_errors_total{reason="too_large_decoded"} 2"#),
        "{metrics}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_beyond_the_in_flight_budget_get_429_with_retry_after() {
    let server = TestServer::start_with(|c| c.max_in_flight_bytes = 3 << 20).await;
    let client = server.client();
    // A client that declares a large body and trickles it holds only what it sent.
    let mut trickler = client.connect(Proto::Http1).await.unwrap();
    let (trickle, body) = channel_body();
    let declared = trickler
        .builder(Method::POST, "/mutate-pod")
        .header(CONTENT_TYPE, "application/json")
        .header(CONTENT_LENGTH, 7 << 20)
        .body(body)
        .unwrap();
    let trickling = tokio::spawn(async move { trickler.send(declared).await });
    trickle.send(Bytes::from_static(b"{ ")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_pinned(
        &client.post_json(Proto::Http2, "/mutate-pod", pod_to_pin("beside").to_string()).await,
        "beside",
    );
    // A holds most of the budget by sending all of its body but the last bytes (whitespace: it
    // decodes to almost nothing, so A alone fits once its body is in). Bodies are held in steps of
    // 256 KiB: the trickler holds one, A's 2.25 MiB body ten, which leaves one step free, too
    // little for B's body. (With 2.5 MiB, A's last bytes took an eleventh step and filled the
    // budget to the byte, so A's decode charge could not fit: a 429 for A on some runs.)
    let held = pod_to_pin("held").to_string().replacen('{', &format!("{{{}", " ".repeat(2304 << 10)), 1);
    let mut a = client.connect(Proto::Http1).await.unwrap();
    let (feed, body) = channel_body();
    let request = a
        .builder(Method::POST, "/mutate-pod")
        .header(CONTENT_TYPE, "application/json")
        .header(CONTENT_LENGTH, held.len())
        .body(body)
        .unwrap();
    let first = tokio::spawn(async move { a.send(request).await });
    let cut = held.len() - 1000;
    feed.send(Bytes::copy_from_slice(&held.as_bytes()[..cut])).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // B needs 600 KiB more for its body alone: refused now, with Retry-After, on both protocols
    // (alone, with its decoded string and working copy, it needs 1.8 MiB: it fits later).
    let other = pod_with_filler("other", &format!("\"{}\"", "b".repeat(600 << 10)));
    for proto in BOTH {
        let reply = client.post_json(proto, "/mutate-pod", other.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::TOO_MANY_REQUESTS,
            "{proto:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()), Some("1"));
    }
    // A finishes and is answered; then B fits.
    feed.send(Bytes::copy_from_slice(&held.as_bytes()[cut..])).await.unwrap();
    drop(feed);
    assert_pinned(&first.await.unwrap().unwrap(), "held");
    assert_pinned(&client.post_json(Proto::Http2, "/mutate-pod", other).await, "other");
    drop(trickle);
    let _ = trickling.await;
    let metrics = http_get(server.metrics, "/metrics").await.1;
    assert!(metrics.contains(r#"kruise_admission_http_errors_total{reason="memory_busy"} 2"#), "{metrics}");
    server.stop().await.unwrap();
}

/// A body under `SCAN_FROM` is charged the worst case for its length without being scanned (issue
/// 20.3). A budget too small for that worst case still serves it: it is then scanned and charged
/// what it takes, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_body_is_served_by_a_budget_smaller_than_its_worst_case() {
    let budget = 288 << 10; // the body is held in steps of 256 KiB
    let server = TestServer::start_with(|c| c.max_in_flight_bytes = budget).await;
    let client = server.client();
    let body = pod_to_pin("small").to_string();
    assert!(body.len() < SCAN_FROM && 2 * worst_case(body.len()) > budget, "{}", body.len());
    for proto in BOTH {
        assert_pinned(&client.post_json(proto, "/mutate-pod", body.clone()).await, "small");
    }
    server.stop().await.unwrap();
}

/// How many slow decisions began.
static SLOW_STARTED: AtomicUsize = AtomicUsize::new(0);

/// A validator that blocks its thread for two seconds, like a pathological input would.
fn slow(
    _: &AdmissionRequest,
    _: &Inputs,
) -> Result<kruise_admission::admission::writes::Effects, AdmissionError> {
    SLOW_STARTED.fetch_add(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(2));
    Ok(Default::default())
}

/// The real `/mutate-pod` entry and a slow test webhook.
fn table() -> &'static [Webhook] {
    let pods = webhooks::by_path("/mutate-pod").expect("registered");
    Box::leak(Box::new([
        Webhook {
            name: pods.name,
            path: pods.path,
            rules: pods.rules,
            handler: pods.handler,
            queries: pods.queries,
            failure_policy: pods.failure_policy,
            scope: pods.scope,
            side_effects: pods.side_effects,
            capability: pods.capability,
        },
        Webhook {
            name: "slow.test",
            path: "/slow",
            rules: &[],
            handler: Handler::Validate(slow),
            queries: None,
            failure_policy: FailurePolicy::Fail,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::WorkloadRules,
        },
    ]))
}

/// 64 slow requests at once (four HTTP/2 connections of 16 streams, each review large enough to
/// be decided on the worker pool) against the runtime `serve` uses; meanwhile 20 Pod CREATEs, one
/// every 100 ms, must each be answered correctly within its 3 s timeout. Before the work queue, the slow ones filled the blocking pool and every CREATE
/// behind them timed out (504); the queued slow ones then ran anyway, long after their 504.
#[test]
fn a_flood_of_slow_requests_does_not_starve_pod_creates() {
    let runtime = kruise_admission::server::runtime(kruise_admission::server::DEFAULT_WORKERS).unwrap();
    runtime.block_on(async {
        let server = TestServer::start_with(|c| c.webhooks = table()).await;
        let client = server.client();
        let mut flood = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let conn = client.connect(Proto::Http2).await.unwrap();
            for i in 0..16 {
                let mut stream = conn.h2_stream().unwrap();
                let body = Bytes::from(common::heavy_review(&format!("slow-{i}")).to_string());
                flood.spawn(async move {
                    stream.request(Method::POST, "/slow?timeout=3s", Some("application/json"), body).await
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut pods = client.connect(Proto::Http2).await.unwrap();
        let mut slowest = Duration::ZERO;
        for i in 0..20 {
            let uid = format!("pod-{i}");
            let started = Instant::now();
            let reply = pods
                .request(
                    Method::POST,
                    "/mutate-pod?timeout=3s",
                    Some("application/json"),
                    pod_to_pin(&uid).to_string().into(),
                )
                .await
                .unwrap();
            let took = started.elapsed();
            assert_pinned(&reply, &uid);
            assert!(took < Duration::from_secs(3), "{uid} took {took:?}, past its timeout");
            slowest = slowest.max(took);
            // The slow decisions hold workers of the pool, never the tasks that answer probes.
            let started = Instant::now();
            assert_eq!(http_get(server.metrics, "/readyz").await.0, StatusCode::OK);
            let probe = started.elapsed();
            assert!(probe < Duration::from_millis(500), "/readyz took {probe:?} during the flood");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!("slowest Pod CREATE during the flood: {slowest:?}");
        // Every slow request got an answer: served, or shed with a status the apiserver understands.
        let mut statuses = std::collections::BTreeMap::new();
        while let Some(result) = flood.join_next().await {
            let reply = result.unwrap().expect("an answer, not a dropped stream");
            assert!(
                [
                    StatusCode::OK,
                    StatusCode::TOO_MANY_REQUESTS,
                    StatusCode::SERVICE_UNAVAILABLE,
                    StatusCode::GATEWAY_TIMEOUT
                ]
                .contains(&reply.status),
                "{reply:?}"
            );
            if reply.status != StatusCode::OK {
                assert!(
                    reply.headers.contains_key(RETRY_AFTER) || reply.status == StatusCode::GATEWAY_TIMEOUT,
                    "{reply:?}"
                );
            }
            *statuses.entry(reply.status.as_u16()).or_insert(0) += 1;
        }
        println!("slow requests answered: {statuses:?}");
        // Shed work never runs: the slow webhook's share of the workers (4 of 8) ran, the rest
        // was refused before starting, and nothing starts after its answer.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let started = SLOW_STARTED.load(Ordering::SeqCst);
        assert!(started <= 8, "{started} slow decisions ran");
        alive(&client, "after the flood").await;
        server.stop().await.unwrap();
    });
}
