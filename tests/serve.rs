//! `serve` over real HTTPS on 127.0.0.1, with a client that verifies the generated CA: every
//! recorded review over HTTP/1.1 and HTTP/2, the body limit, a table of malformed inputs, health
//! and metrics.

use crate::common;

use base64::Engine as _;
use bytes::Bytes;
use common::client::{BOTH, Proto, TlsClient, http_get};
use common::server::TestServer;
use hyper::{Method, StatusCode};
use kruise_admission::cluster::files::read_documents;
use serde_json::{Value, json};

async fn assert_still_serving(client: &TlsClient, proto: Proto) {
    let reply = client.post_json(proto, "/mutate-pod", common::good_review("after").to_string()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    assert_eq!(reply.json()["response"]["uid"], "after");
}

/// The protocol invariants of an AdmissionReview response to `sent`.
fn assert_well_formed(name: &str, sent: &Value, reply: &Value) {
    assert_eq!(reply["apiVersion"], sent["apiVersion"], "{name}: apiVersion echoed");
    assert_eq!(reply["kind"], "AdmissionReview", "{name}");
    let response = &reply["response"];
    assert_eq!(response["uid"], sent["request"]["uid"], "{name}: uid echoed");
    assert!(response["allowed"].is_boolean(), "{name}: allowed is a boolean");
    match response.get("patch") {
        None => assert!(response.get("patchType").is_none(), "{name}: patchType without patch"),
        Some(patch) => {
            assert_eq!(response["patchType"], "JSONPatch", "{name}");
            let raw = base64::engine::general_purpose::STANDARD
                .decode(patch.as_str().expect("patch is a string"))
                .expect("base64");
            let ops: Value = serde_json::from_slice(&raw).expect("patch is JSON");
            assert!(ops.as_array().is_some_and(|a| !a.is_empty()), "{name}: a patch is a non-empty array");
        }
    }
    if response["allowed"] == false {
        assert!(
            response["status"]["code"].is_u64() && response["status"]["message"].is_string(),
            "{name}: denial has code and message"
        );
    }
}

/// Reviews the apiserver could never have sent: no request, or no usable uid to answer under.
fn is_unanswerable(review: &Value) -> bool {
    review["request"]["uid"].as_str().is_none_or(str::is_empty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recorded_review_gets_a_well_formed_answer_over_http1_and_http2() {
    let server = TestServer::start().await;
    let client = server.client();
    let (mut answered, mut refused) = (0, 0);
    for path in common::recorded_reviews() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let sent = read_documents(&text).unwrap().into_iter().next().unwrap();
        let body = serde_json::to_vec(&sent).unwrap();
        for proto in BOTH {
            let mut conn = client.connect(proto).await.unwrap();
            let reply = conn
                .request(
                    Method::POST,
                    "/mutate-pod?timeout=10s",
                    Some("application/json"),
                    Bytes::from(body.clone()),
                )
                .await
                .unwrap();
            if is_unanswerable(&sent) {
                assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{name} over {proto:?}");
                assert!(
                    reply.json()["error"].as_str().is_some_and(|e| !e.is_empty()),
                    "{name}: JSON error body"
                );
                refused += 1;
            } else {
                assert_eq!(
                    reply.status,
                    StatusCode::OK,
                    "{name} over {proto:?}: {}",
                    String::from_utf8_lossy(&reply.body)
                );
                assert_eq!(reply.headers["content-type"], "application/json");
                assert_well_formed(&name, &sent, &reply.json());
                answered += 1;
            }
            // The same connection keeps working after every answer, good or bad.
            let again = conn.request(
                Method::POST,
                "/mutate-pod",
                Some("application/json"),
                Bytes::from(common::good_review("again").to_string()),
            );
            assert_eq!(
                again.await.unwrap().status,
                StatusCode::OK,
                "{name} over {proto:?}: connection reusable"
            );
        }
    }
    assert!(answered >= 100 && refused >= 2, "answered {answered}, refused {refused}");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_certificate_verifies_for_localhost_and_127_0_0_1() {
    let server = TestServer::start().await;
    for name in ["localhost", "127.0.0.1"] {
        let client = server.client().with_server_name(name);
        client.connect(Proto::Http2).await.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let wrong = server.client().with_server_name("example.com");
    assert!(wrong.connect(Proto::Http1).await.is_err(), "a name outside the SANs must not verify");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_limit_answers_413_and_the_server_keeps_serving() {
    let server = TestServer::start_with(|c| c.max_request_bytes = 64 * 1024).await;
    let client = server.client();
    let mut big = common::good_review("big");
    big["request"]["object"]["metadata"]["annotations"] = json!({"filler": "x".repeat(80 * 1024)});
    for proto in BOTH {
        let reply = client.post_json(proto, "/mutate-pod", big.to_string()).await;
        assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{proto:?}");
        assert!(reply.json()["error"].as_str().unwrap().contains("65536"));
        // Without a Content-Length (chunked HTTP/1.1, or HTTP/2 data frames) the limit holds too.
        let mut conn = client.connect(proto).await.unwrap();
        let (tx, request) = conn.streamed_post("/mutate-pod");
        let feeder = tokio::spawn(async move {
            for chunk in big.to_string().into_bytes().chunks(16 * 1024) {
                if tx.send(Bytes::copy_from_slice(chunk)).await.is_err() {
                    break;
                }
            }
        });
        assert_eq!(
            conn.send(request).await.unwrap().status,
            StatusCode::PAYLOAD_TOO_LARGE,
            "{proto:?} streamed"
        );
        feeder.await.unwrap();
        assert_still_serving(&client, proto).await;
        big = common::good_review("big");
        big["request"]["object"]["metadata"]["annotations"] = json!({"filler": "x".repeat(80 * 1024)});
    }
    server.stop().await.unwrap();
}

/// What a malformed input must get.
#[derive(Debug)]
enum Expect {
    /// HTTP status with a JSON `{"error": ...}` body.
    HttpError(StatusCode),
    /// HTTP 200 with a denial (allowed=false, status.code) inside a well-formed review.
    Denied(u16),
}

/// name, method, path, Content-Type, body, expected answer.
type Case = (&'static str, Method, &'static str, Option<&'static str>, Vec<u8>, Expect);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_inputs_get_their_expected_answer() {
    let server = TestServer::start().await;
    let client = server.client();
    let with = |edit: &dyn Fn(&mut Value)| {
        let mut review = common::good_review("m1");
        edit(&mut review);
        review.to_string().into_bytes()
    };
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes();
    let cases: Vec<Case> = vec![
        (
            "not JSON",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            b"{not json".to_vec(),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "empty body",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            Vec::new(),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "JSON array",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            b"[1,2]".to_vec(),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "JSON string",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            b"\"review\"".to_vec(),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "wrong kind",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["kind"] = json!("TokenReview")),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "wrong apiVersion",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["apiVersion"] = json!("admission.k8s.io/v2")),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "no request",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| {
                r.as_object_mut().unwrap().remove("request");
            }),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "request.uid a number",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["request"]["uid"] = json!(42)),
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "request.object a string",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["request"]["object"] = json!("a pod")),
            Expect::Denied(400),
        ),
        (
            "request.operation unknown",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["request"]["operation"] = json!("PATCH")),
            Expect::Denied(400),
        ),
        (
            "pod spec an array",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            with(&|r| r["request"]["object"]["spec"] = json!([])),
            Expect::Denied(400),
        ),
        (
            "deeply nested JSON",
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            deep,
            Expect::HttpError(StatusCode::BAD_REQUEST),
        ),
        (
            "GET",
            Method::GET,
            "/mutate-pod",
            None,
            Vec::new(),
            Expect::HttpError(StatusCode::METHOD_NOT_ALLOWED),
        ),
        (
            "PUT",
            Method::PUT,
            "/mutate-pod",
            Some("application/json"),
            with(&|_| {}),
            Expect::HttpError(StatusCode::METHOD_NOT_ALLOWED),
        ),
        (
            "text/plain",
            Method::POST,
            "/mutate-pod",
            Some("text/plain"),
            with(&|_| {}),
            Expect::HttpError(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ),
        (
            "no content type",
            Method::POST,
            "/mutate-pod",
            None,
            with(&|_| {}),
            Expect::HttpError(StatusCode::UNSUPPORTED_MEDIA_TYPE),
        ),
        (
            "unknown path",
            Method::POST,
            "/mutate-nothing",
            Some("application/json"),
            with(&|_| {}),
            Expect::HttpError(StatusCode::NOT_FOUND),
        ),
        (
            "health on the HTTPS port",
            Method::GET,
            "/healthz",
            None,
            Vec::new(),
            Expect::HttpError(StatusCode::NOT_FOUND),
        ),
    ];
    for (name, method, path, content_type, body, expect) in cases {
        for proto in BOTH {
            let mut conn = client.connect(proto).await.unwrap();
            let reply =
                conn.request(method.clone(), path, content_type, Bytes::from(body.clone())).await.unwrap();
            match &expect {
                Expect::HttpError(status) => {
                    assert_eq!(
                        reply.status,
                        *status,
                        "{name} over {proto:?}: {}",
                        String::from_utf8_lossy(&reply.body)
                    );
                    assert!(
                        reply.json()["error"].as_str().is_some_and(|e| !e.is_empty()),
                        "{name}: JSON error body"
                    );
                }
                Expect::Denied(code) => {
                    assert_eq!(
                        reply.status,
                        StatusCode::OK,
                        "{name} over {proto:?}: {}",
                        String::from_utf8_lossy(&reply.body)
                    );
                    let review = reply.json();
                    assert_eq!(review["response"]["uid"], "m1", "{name}");
                    assert_eq!(review["response"]["allowed"], false, "{name}");
                    assert_eq!(review["response"]["status"]["code"], *code, "{name}");
                }
            }
            assert_still_serving(&client, proto).await;
        }
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_strings_within_the_limit_are_answered() {
    let server = TestServer::start().await;
    let client = server.client();
    let mut review = common::good_review("huge");
    review["request"]["object"]["metadata"]["name"] = json!("n".repeat(5 << 20));
    for proto in BOTH {
        let reply = client.post_json(proto, "/mutate-pod", review.to_string()).await;
        assert_eq!(reply.status, StatusCode::OK, "{proto:?}");
        assert_eq!(reply.json()["response"]["uid"], "huge");
        assert_still_serving(&client, proto).await;
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let server = TestServer::start().await;
    assert_eq!(http_get(server.metrics, "/healthz").await, (StatusCode::OK, "ok".into()));
    assert_eq!(http_get(server.metrics, "/readyz").await, (StatusCode::OK, "ok".into()));

    let client = server.client();
    let reply =
        client.post_json(Proto::Http2, "/mutate-pod", common::good_review("metrics").to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let mut bad = common::good_review("denied");
    bad["request"]["object"]["spec"] = json!("not a spec");
    assert_eq!(
        client.post_json(Proto::Http1, "/mutate-pod", bad.to_string()).await.json()["response"]["allowed"],
        false
    );
    assert_eq!(client.post_json(Proto::Http1, "/nowhere", "{}").await.status, StatusCode::NOT_FOUND);

    let (status, text) = http_get(server.metrics, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for expected in [
        r#"kruise_admission_webhook_request_total{code="200",name="mpod.kb.io",operation="CREATE",rejected="false",type="admit"} 1"#,
        r#"kruise_admission_webhook_request_total{code="400",name="mpod.kb.io",operation="CREATE",rejected="true",type="admit"} 1"#,
        r#"kruise_admission_webhook_admission_duration_seconds_bucket{name="mpod.kb.io",operation="CREATE",rejected="false",type="admit",le="0.0001"}"#,
        r#"kruise_admission_webhook_rejection_count{kind="Pod",name="mpod.kb.io",operation="CREATE",rejection_code="400",type="admit"} 1"#,
        r#"kruise_admission_webhook_patch_operations_count{name="mpod.kb.io"} 1"#,
        r#"kruise_admission_http_errors_total{reason="not_found"} 1"#,
        "kruise_admission_serving_certificate_not_after_seconds ",
        r#"kruise_admission_build_info{version=""#,
        r#"kruise_admission_cluster_objects{kind="Namespace"} 1"#,
        "kruise_admission_cluster_snapshot_timestamp_seconds ",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_cluster_objects_load_then_reloaded_on_change() {
    let server = TestServer::start_with(|c| c.cluster_dir = c.cluster_dir.join("missing")).await;
    let (status, text) = http_get(server.metrics, "/readyz").await;
    assert_eq!((status, text.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "cluster objects not loaded"));
    let reply = server
        .client()
        .post_json(Proto::Http1, "/mutate-pod", common::good_review("early").to_string())
        .await;
    assert_eq!(reply.status, StatusCode::SERVICE_UNAVAILABLE);

    let folder = server.cluster_dir.join("missing");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(
        folder.join("ns.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n",
    )
    .unwrap();
    let mut waited = 0;
    while http_get(server.metrics, "/readyz").await.0 != StatusCode::OK {
        assert!(waited < 50, "not ready 5 s after the folder appeared");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        waited += 1;
    }
    assert!(
        http_get(server.metrics, "/metrics")
            .await
            .1
            .contains(r#"kruise_admission_cluster_objects{kind="Namespace"} 2"#)
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_disconnected() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let server = TestServer::start_with(|c| {
        c.limits.header_read_timeout = std::time::Duration::from_millis(300);
        c.limits.handshake_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let client = server.client();

    // Slowloris: headers started, never finished.
    let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
    tls.write_all(b"POST /mutate-pod HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(3), tls.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection stayed open with unfinished headers");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "closed before the header timeout");

    // A TCP client that never starts the TLS handshake.
    let mut tcp = tokio::net::TcpStream::connect(server.https).await.unwrap();
    let read = tokio::time::timeout(std::time::Duration::from_secs(3), tcp.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the connection stayed open without a handshake");

    assert_still_serving(&client, Proto::Http1).await;
    server.stop().await.unwrap();
}

static ONLY_TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
static ONLY_TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_1_2_and_1_3_are_both_accepted() {
    let server = TestServer::start().await;
    for (versions, expected) in
        [(ONLY_TLS12, rustls::ProtocolVersion::TLSv1_2), (ONLY_TLS13, rustls::ProtocolVersion::TLSv1_3)]
    {
        let tls = server.client().with_versions(versions).connect_raw(Proto::Http2).await.unwrap();
        assert_eq!(tls.get_ref().1.protocol_version(), Some(expected));
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_http2_streams_on_one_connection() {
    let server = TestServer::start().await;
    let conn = server.client().connect(Proto::Http2).await.unwrap();
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let mut stream = conn.h2_stream().unwrap();
            tokio::spawn(async move {
                let uid = format!("stream-{i}");
                let body = Bytes::from(common::good_review(&uid).to_string());
                let reply = stream
                    .request(Method::POST, "/mutate-pod", Some("application/json"), body)
                    .await
                    .unwrap();
                assert_eq!(reply.status, StatusCode::OK);
                assert_eq!(reply.json()["response"]["uid"], uid.as_str());
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    server.stop().await.unwrap();
}

mod misbehaving {
    use kruise_admission::admission::Inputs;
    use kruise_admission::admission::draft::Draft;
    use kruise_admission::admission::review::{AdmissionError, AdmissionRequest};
    use kruise_admission::admission::webhooks::{
        Capability, FailurePolicy, Handler, ObjectScope, SideEffects, Webhook,
    };

    fn panics(
        _: &AdmissionRequest,
        _: &mut Draft<'_>,
        _: &Inputs,
    ) -> Result<kruise_admission::admission::writes::Effects, AdmissionError> {
        panic!("deliberate test panic")
    }

    fn sleeps(
        _: &AdmissionRequest,
        _: &Inputs,
    ) -> Result<kruise_admission::admission::writes::Effects, AdmissionError> {
        std::thread::sleep(std::time::Duration::from_millis(3000));
        Ok(Default::default())
    }

    /// A table with a webhook that panics and one that is too slow.
    pub static WEBHOOKS: &[Webhook] = &[
        Webhook {
            name: "panic.test",
            path: "/panic",
            rules: &[],
            handler: Handler::Mutate(panics),
            queries: None,
            failure_policy: FailurePolicy::Ignore,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::PodMutation,
        },
        Webhook {
            name: "slow.test",
            path: "/slow",
            rules: &[],
            handler: Handler::Validate(sleeps),
            queries: None,
            failure_policy: FailurePolicy::Fail,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::WorkloadRules,
        },
    ];
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_or_slow_decision_gets_500_or_504_and_the_connection_keeps_working() {
    let server = TestServer::start_with(|c| c.webhooks = misbehaving::WEBHOOKS).await;
    let client = server.client();
    for proto in BOTH {
        let mut conn = client.connect(proto).await.unwrap();
        let body = Bytes::from(common::good_review("p").to_string());
        let reply =
            conn.request(Method::POST, "/panic", Some("application/json"), body.clone()).await.unwrap();
        assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR, "{proto:?}");
        assert!(reply.json()["error"].as_str().is_some_and(|e| e.contains("see the server log")));

        // A large review: decided on the worker pool, where the deadline can answer while it runs.
        let heavy = Bytes::from(common::heavy_review("slow").to_string());
        let started = std::time::Instant::now();
        let reply =
            conn.request(Method::POST, "/slow?timeout=1s", Some("application/json"), heavy).await.unwrap();
        let took = started.elapsed();
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT, "{proto:?}");
        assert!(
            took >= std::time::Duration::from_millis(850) && took < std::time::Duration::from_millis(2500),
            "504 after {took:?}"
        );

        // The same connection still answers.
        let reply = conn.request(Method::POST, "/panic", Some("text/plain"), body).await.unwrap();
        assert_eq!(reply.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let metrics = http_get(server.metrics, "/metrics").await.1;
    assert!(metrics.contains(r#"kruise_admission_http_errors_total{reason="panic"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"kruise_admission_http_errors_total{reason="timeout"} 2"#), "{metrics}");
    server.stop().await.unwrap();
}
