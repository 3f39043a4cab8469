//! Hostile inputs over real TLS on 127.0.0.1: malformed JSON, wrong types, huge and deep bodies,
//! broken HTTP, old TLS versions, slow and abrupt clients, idle-connection and HTTP/2 stream
//! floods, objects at etcd's size limit. Every case states what the client must get AND checks
//! afterwards that the server still answers a good review over HTTP/1.1 and HTTP/2.
//!
//! The panic → 500 and deadline → 504 cases live in `serve.rs` (they need a test routing table).

use crate::common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::client::{BOTH, Proto, TlsClient, http_get, read_until_closed};
use common::h2::{END_HEADERS, GOAWAY, HEADERS, PING, PREFACE, RST_STREAM, SETTINGS, frame, request_headers};
use common::server::TestServer;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// The check after every case: a good review over a new HTTP/1.1 and a new HTTP/2 connection.
async fn alive(client: &TlsClient, case: &str) {
    for proto in BOTH {
        let attempt = tokio::time::timeout(
            Duration::from_secs(10),
            client.post_json(proto, "/mutate-pod", common::good_review("alive").to_string()),
        );
        let reply =
            attempt.await.unwrap_or_else(|_| panic!("after {case}: no answer over {proto:?} within 10 s"));
        assert_eq!(
            reply.status,
            StatusCode::OK,
            "after {case} over {proto:?}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.json()["response"]["uid"], "alive", "after {case}");
    }
}

/// What a body sent as `application/json` must get.
#[derive(Debug, Clone)]
enum Expect {
    /// HTTP status with a JSON `{"error": ...}` body.
    Http(StatusCode),
    /// HTTP 200, a well-formed review answering `uid`, allowed or denied with this code.
    Review { uid: &'static str, allowed: bool, code: Option<u16> },
}

const OK: Expect = Expect::Review { uid: "h1", allowed: true, code: None };
const BAD: Expect = Expect::Http(StatusCode::BAD_REQUEST);

fn with(edit: impl Fn(&mut Value)) -> Vec<u8> {
    let mut review = common::good_review("h1");
    edit(&mut review);
    review.to_string().into_bytes()
}

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// The good review with `raw` spliced in as `request.object.spec.x` (unknown fields survive).
fn with_raw_spec_field(raw: &str) -> Vec<u8> {
    let text = common::good_review("h1").to_string();
    text.replacen("\"spec\":{", &format!("\"spec\":{{\"x\":{raw},"), 1).into_bytes()
}

fn body_cases() -> Vec<(&'static str, Vec<u8>, Expect)> {
    let good = common::good_review("h1").to_string().into_bytes();
    let mut invalid_utf8_in_string = with(|r| r["request"]["object"]["metadata"]["name"] = json!("pXXp"));
    let at = invalid_utf8_in_string.windows(4).position(|w| w == b"pXXp").expect("marker") + 1;
    invalid_utf8_in_string[at] = 0xC3; // a lead byte followed by ASCII: invalid UTF-8
    invalid_utf8_in_string[at + 1] = 0x28;
    let mut bom = vec![0xEF, 0xBB, 0xBF];
    bom.extend_from_slice(&good);
    let dup = |a: &str, b: &str| {
        String::from_utf8(good.clone())
            .unwrap()
            .replacen("\"uid\":\"h1\"", &format!("\"uid\":\"{a}\",\"uid\":\"{b}\""), 1)
            .into_bytes()
    };
    vec![
        ("truncated JSON (half a review)", good[..good.len() / 2].to_vec(), BAD),
        ("truncated JSON (one byte)", b"{".to_vec(), BAD),
        ("truncated JSON (last brace missing)", good[..good.len() - 1].to_vec(), BAD),
        ("trailing garbage after the review", [good.clone(), b"garbage".to_vec()].concat(), BAD),
        ("two reviews back to back", [good.clone(), good.clone()].concat(), BAD),
        ("NaN literal", with_raw_spec_field("NaN"), BAD),
        ("single-quoted strings", b"{'apiVersion': 'admission.k8s.io/v1'}".to_vec(), BAD),
        ("JSON with comments", [b"// hi\n".to_vec(), good.clone()].concat(), BAD),
        ("UTF-8 byte order mark", bom, BAD),
        ("invalid UTF-8 inside a string", invalid_utf8_in_string, BAD),
        (
            "invalid UTF-8 outside strings",
            [good[..1].to_vec(), vec![0xFF, 0xFE], good[1..].to_vec()].concat(),
            BAD,
        ),
        ("lone UTF-16 surrogate escape", with_raw_spec_field(r#""\ud800""#), BAD),
        ("raw control character in a string", with_raw_spec_field("\"a\u{1}b\""), BAD),
        ("number beyond f64 (1e400)", with_raw_spec_field("1e400"), BAD),
        // Escaped NUL is valid JSON; the pod is answered (the apiserver validates names itself).
        (
            "escaped NUL in the pod name",
            with(|r| r["request"]["object"]["metadata"]["name"] = json!("p\u{0}")),
            OK,
        ),
        ("10,000-deep nesting", with_raw_spec_field(&nested(10_000)), BAD),
        ("1,000,000-deep nesting", with_raw_spec_field(&nested(1_000_000)), BAD),
        // serde_json's limit is 128 levels in total; 100 inside spec.x stays below it.
        ("100-deep nesting inside an unknown field", with_raw_spec_field(&nested(100)), OK),
        // serde_json keeps the LAST of duplicate keys (as Go's encoding/json does): the answer
        // carries the second uid. Asserted so a change of parser cannot flip it silently.
        (
            "duplicate uid keys: the last wins",
            dup("first", "second"),
            Expect::Review { uid: "second", allowed: true, code: None },
        ),
        ("empty body", Vec::new(), BAD),
        ("JSON null", b"null".to_vec(), BAD),
        ("JSON array", b"[1,2]".to_vec(), BAD),
        ("request is an array", with(|r| r["request"] = json!([])), BAD),
        ("request.uid a number", with(|r| r["request"]["uid"] = json!(42)), BAD),
        ("request.uid null", with(|r| r["request"]["uid"] = Value::Null), BAD),
        ("request.uid empty", with(|r| r["request"]["uid"] = json!("")), BAD),
        (
            "request.kind a string",
            with(|r| r["request"]["kind"] = json!("Pod")),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "request.operation a number",
            with(|r| r["request"]["operation"] = json!(1)),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "request.object a number",
            with(|r| r["request"]["object"] = json!(7)),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        // Nothing applies to this pod (no SidecarSet, no target node), so its containers are never
        // read: allowed unchanged, and the apiserver's own validation rejects the pod afterwards.
        (
            "containers an object, nothing to inject",
            with(|r| r["request"]["object"]["spec"]["containers"] = json!({"name": "c"})),
            OK,
        ),
        // The DaemonSet stamp does read the affinity and tolerations: wrong types there are a 400 denial.
        (
            "affinity a string on a pod to pin",
            with(|r| {
                r["request"]["object"]["metadata"]["annotations"] =
                    json!({"kruise-admission.dev/target-node": "worker-1"});
                r["request"]["object"]["spec"]["affinity"] = json!("anywhere");
            }),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "tolerations an object on a pod to pin",
            with(|r| {
                r["request"]["object"]["metadata"]["annotations"] =
                    json!({"kruise-admission.dev/target-node": "worker-1"});
                r["request"]["object"]["spec"]["tolerations"] = json!({"key": "k"});
            }),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "metadata a string",
            with(|r| r["request"]["object"]["metadata"] = json!("m")),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        ("wrong apiVersion", with(|r| r["apiVersion"] = json!("admission.k8s.io/v9")), BAD),
    ]
}

/// Issue 30.3. Before: a 1 MiB uid was answered with a 1 MiB review (it is echoed), and a 1 MiB
/// name, namespace or kind went into the log line. Now an oversized uid is an HTTP 400 that does
/// not echo it, any other identity field a 400 denial that does not echo it; no answer carries a
/// megabyte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_identity_fields_get_a_short_answer() {
    let server = TestServer::start().await;
    let client = server.client();
    let huge = "u".repeat(1 << 20);
    let cases: Vec<(&str, Vec<u8>, Expect)> = vec![
        ("a 1 MiB uid", with(|r| r["request"]["uid"] = json!(huge)), BAD),
        (
            "a 1 MiB name",
            with(|r| r["request"]["name"] = json!(huge)),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "a 1 MiB namespace",
            with(|r| r["request"]["namespace"] = json!(huge)),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
        (
            "a 1 MiB kind",
            with(|r| r["request"]["kind"]["kind"] = json!(huge)),
            Expect::Review { uid: "h1", allowed: false, code: Some(400) },
        ),
    ];
    for (name, body, expect) in cases {
        for proto in BOTH {
            let reply = client.post_json(proto, "/mutate-pod", body.clone()).await;
            assert!(reply.body.len() < 1024, "{name} over {proto:?}: a {} byte answer", reply.body.len());
            match expect {
                Expect::Http(status) => assert_eq!(reply.status, status, "{name}"),
                Expect::Review { uid, code, .. } => {
                    let answer = reply.json();
                    assert_eq!(answer["response"]["uid"], uid, "{name}");
                    assert_eq!(answer["response"]["status"]["code"], json!(code), "{name}: {answer}");
                }
            }
        }
    }
    alive(&client, "oversized identity fields").await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_bodies_get_their_expected_answer() {
    let server = TestServer::start().await;
    let client = server.client();
    let cases = body_cases();
    for (name, body, expect) in &cases {
        for proto in BOTH {
            let mut conn = client.connect(proto).await.unwrap();
            let started = Instant::now();
            let reply = conn
                .request(Method::POST, "/mutate-pod", Some("application/json"), Bytes::from(body.clone()))
                .await
                .unwrap();
            assert!(started.elapsed() < Duration::from_secs(5), "{name}: took {:?}", started.elapsed());
            let text = String::from_utf8_lossy(&reply.body);
            match expect {
                Expect::Http(status) => {
                    assert_eq!(reply.status, *status, "{name} over {proto:?}: {text}");
                    assert!(
                        reply.json()["error"].as_str().is_some_and(|e| !e.is_empty()),
                        "{name}: JSON error body"
                    );
                }
                Expect::Review { uid, allowed, code } => {
                    assert_eq!(reply.status, StatusCode::OK, "{name} over {proto:?}: {text}");
                    let review = reply.json();
                    assert_eq!(review["response"]["uid"], *uid, "{name}: {text}");
                    assert_eq!(review["response"]["allowed"], *allowed, "{name}: {text}");
                    if let Some(code) = code {
                        assert_eq!(review["response"]["status"]["code"], *code, "{name}: {text}");
                    }
                }
            }
        }
        alive(&client, name).await;
    }
    assert!(cases.len() >= 30);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_methods_media_types_and_paths() {
    let server = TestServer::start().await;
    let client = server.client();
    let body = common::good_review("h1").to_string();
    let cases: &[(&str, Method, &str, Option<&str>, StatusCode)] = &[
        ("GET instead of POST", Method::GET, "/mutate-pod", None, StatusCode::METHOD_NOT_ALLOWED),
        (
            "DELETE instead of POST",
            Method::DELETE,
            "/mutate-pod",
            Some("application/json"),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        ("OPTIONS", Method::OPTIONS, "/mutate-pod", None, StatusCode::METHOD_NOT_ALLOWED),
        ("text/plain", Method::POST, "/mutate-pod", Some("text/plain"), StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (
            "application/yaml",
            Method::POST,
            "/mutate-pod",
            Some("application/yaml"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "application/jsonx",
            Method::POST,
            "/mutate-pod",
            Some("application/jsonx"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        ("no content type", Method::POST, "/mutate-pod", None, StatusCode::UNSUPPORTED_MEDIA_TYPE),
        (
            "json with charset",
            Method::POST,
            "/mutate-pod",
            Some("application/json; charset=utf-8"),
            StatusCode::OK,
        ),
        ("unknown path", Method::POST, "/mutate-nothing", Some("application/json"), StatusCode::NOT_FOUND),
        ("trailing slash", Method::POST, "/mutate-pod/", Some("application/json"), StatusCode::NOT_FOUND),
        ("dot-dot path", Method::POST, "/x/../mutate-pod", Some("application/json"), StatusCode::NOT_FOUND),
    ];
    for (name, method, path, content_type, status) in cases {
        for proto in BOTH {
            let mut conn = client.connect(proto).await.unwrap();
            let reply =
                conn.request(method.clone(), path, *content_type, Bytes::from(body.clone())).await.unwrap();
            assert_eq!(
                reply.status,
                *status,
                "{name} over {proto:?}: {}",
                String::from_utf8_lossy(&reply.body)
            );
            if *status == StatusCode::METHOD_NOT_ALLOWED {
                assert_eq!(reply.headers["allow"], "POST", "{name}");
            }
        }
        alive(&client, name).await;
    }
    server.stop().await.unwrap();
}

/// Raw HTTP/1.1 bytes over TLS: the status line answered (or `None` when the connection was
/// closed without an HTTP answer).
async fn raw_http1(client: &TlsClient, request: &[u8]) -> Option<u16> {
    let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
    let _ = tls.write_all(request).await;
    let (out, _) = read_until_closed(&mut tls, Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&out);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_http1_framing() {
    let server = TestServer::start().await;
    let client = server.client();
    let body = common::good_review("h1").to_string();
    let many_headers: String = (0..1000).map(|i| format!("x-h{i}: v\r\n")).collect();
    let cases: Vec<(&str, String, Option<u16>)> = vec![
        // Request smuggling: both framings at once is refused, never answered twice.
        (
            "Content-Length and chunked together",
            "POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\nGET /mutate-pod HTTP/1.1\r\nHost: l\r\n\r\n".into(),
            Some(400),
        ),
        (
            "two different Content-Lengths",
            "POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Length: 3\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd".into(),
            Some(400),
        ),
        ("a header line without a colon", "POST /mutate-pod HTTP/1.1\r\nHost l\r\nConnection: close\r\n\r\n".into(), Some(400)),
        ("1,000 headers", format!("POST /mutate-pod HTTP/1.1\r\nHost: l\r\n{many_headers}Connection: close\r\n\r\n"), Some(431)),
        ("a 1 MiB header", format!("GET /mutate-pod HTTP/1.1\r\nHost: l\r\nx-big: {}\r\n\r\n", "a".repeat(1 << 20)), Some(431)),
        ("not HTTP at all", "HELLO\r\n\r\n".into(), Some(400)),
        // A declared 100 GB body is refused from its headers, before a byte of it is read.
        (
            "Content-Length of 100 GB",
            "POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\nConnection: close\r\n\r\n{".into(),
            Some(413),
        ),
        (
            "HTTP/1.0 request",
            format!("POST /mutate-pod HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()),
            None, // checked separately below: answered with an HTTP/1.0 status line
        ),
    ];
    for (name, request, expected) in &cases {
        if expected.is_some() {
            assert_eq!(raw_http1(&client, request.as_bytes()).await, *expected, "{name}");
        } else {
            let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
            tls.write_all(request.as_bytes()).await.unwrap();
            let (out, closed) = read_until_closed(&mut tls, Duration::from_secs(5)).await;
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.0 200") && text.contains("\"uid\":\"h1\""), "{name}: {text}");
            assert!(closed, "{name}: HTTP/1.0 without keep-alive is closed after the answer");
        }
        alive(&client, name).await;
    }

    // Two pipelined requests in one write: two answers, in order.
    let one = |uid: &str| {
        let b = common::good_review(uid).to_string();
        format!(
            "POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )
    };
    let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
    tls.write_all(
        format!("{}{}", one("first"), one("second").replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n"))
            .as_bytes(),
    )
    .await
    .unwrap();
    let (out, _) = read_until_closed(&mut tls, Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&out);
    let (a, b) = (text.find("\"uid\":\"first\""), text.find("\"uid\":\"second\""));
    assert!(a.is_some() && b.is_some() && a < b, "pipelined answers: {text}");
    alive(&client, "pipelined requests").await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_body_is_refused_without_being_read() {
    let server = TestServer::start().await;
    let client = server.client();
    const TOTAL: usize = 100 << 20;
    for proto in BOTH {
        // Streamed without a Content-Length (chunked / HTTP/2 DATA frames): the server must answer
        // 413 after at most its limit plus the drain budget, long before the client is done.
        let mut conn = client.connect(proto).await.unwrap();
        let (tx, request) = conn.streamed_post("/mutate-pod");
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = sent.clone();
        let feeder = tokio::spawn(async move {
            let chunk = Bytes::from(vec![b' '; 256 * 1024]);
            while counter.load(std::sync::atomic::Ordering::Relaxed) < TOTAL {
                if tx.send(chunk.clone()).await.is_err() {
                    break;
                }
                counter.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
        let reply = tokio::time::timeout(Duration::from_secs(30), conn.send(request))
            .await
            .expect("an answer within 30 s");
        let at_answer = sent.load(std::sync::atomic::Ordering::Relaxed);
        match reply {
            Ok(reply) => assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{proto:?}"),
            // HTTP/1.1 has no way to refuse the rest of a body but to close: when the drain
            // budget (2 s) runs out before a slow client stops writing, the client can see the
            // close before it reads the 413. The server still answered 413 (the metric below).
            Err(error) => assert!(proto == Proto::Http1, "{proto:?}: {error}"),
        }
        // Limit 8 MiB + drain budget 16 MiB + socket and channel buffers.
        assert!(at_answer < 40 << 20, "{proto:?}: {at_answer} bytes were taken before the 413");
        feeder.abort();
        alive(&client, "100 MB streamed body").await;
    }
    let metrics = http_get(server.metrics, "/metrics").await.1;
    assert!(metrics.contains(r#"kruise_admission_http_errors_total{reason="too_large"} 2"#), "{metrics}");
    server.stop().await.unwrap();
}

/// A pod with a DaemonSet target-node annotation (so the answer carries a patch) grown to `bytes`
/// with environment variables.
fn etcd_sized_pod(uid: &str, bytes: usize) -> Value {
    let mut review = common::good_review(uid);
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"kruise-admission.dev/target-node": "worker-1"});
    let env: Vec<Value> =
        (0..bytes / 100).map(|i| json!({"name": format!("VAR_{i:06}"), "value": "v".repeat(70)})).collect();
    review["request"]["object"]["spec"]["containers"][0]["env"] = Value::Array(env);
    review
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_at_the_etcd_limit_are_answered_correctly_and_quickly() {
    let server = TestServer::start().await;
    let client = server.client();
    const ETCD_LIMIT: usize = 1536 * 1024;
    let cases = [
        ("1.5 MiB of environment variables", etcd_sized_pod("big-env", ETCD_LIMIT)),
        ("1.5 MiB annotation", {
            let mut r = etcd_sized_pod("big-annotation", 0);
            r["request"]["object"]["metadata"]["annotations"]["blob"] = json!("a".repeat(ETCD_LIMIT));
            r
        }),
    ];
    for (name, review) in cases {
        let body = review.to_string();
        assert!(body.len() >= ETCD_LIMIT, "{name}: {} bytes", body.len());
        for proto in BOTH {
            let started = Instant::now();
            let reply = client.post_json(proto, "/mutate-pod", body.clone()).await;
            let took = started.elapsed();
            assert_eq!(reply.status, StatusCode::OK, "{name}");
            let answer = reply.json();
            assert_eq!(answer["response"]["uid"], review["request"]["uid"], "{name}");
            assert_eq!(answer["response"]["allowed"], true, "{name}");
            // The DaemonSet stamp applies: the patch pins the pod to worker-1, whatever the size.
            let patch = base64_patch(&answer);
            assert!(patch.to_string().contains("worker-1"), "{name}: {patch}");
            // Debug build on a shared 2-core machine: generous, but far below the 10 s apiserver timeout.
            assert!(took < Duration::from_secs(5), "{name} over {proto:?} took {took:?}");
        }
        alive(&client, name).await;
    }
    server.stop().await.unwrap();
}

fn base64_patch(answer: &Value) -> Value {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(answer["response"]["patch"].as_str().expect("a patch"))
        .expect("base64");
    serde_json::from_slice(&raw).expect("patch is JSON")
}

/// A TLS 1.0/1.1-style ClientHello, built by hand: `version` in the record and the hello, a few
/// CBC cipher suites of that era, no extensions (so no supported_versions for TLS 1.3).
fn old_client_hello(version: [u8; 2]) -> Vec<u8> {
    let mut hello = Vec::new();
    hello.extend_from_slice(&version);
    hello.extend_from_slice(&[7u8; 32]); // random
    hello.push(0); // no session id
    let suites: [u16; 3] = [0x002F, 0x0035, 0xC013];
    hello.extend_from_slice(&((suites.len() * 2) as u16).to_be_bytes());
    for s in suites {
        hello.extend_from_slice(&s.to_be_bytes());
    }
    hello.extend_from_slice(&[1, 0]); // compression: null
    let mut handshake = vec![1u8]; // ClientHello
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);
    let mut record = vec![0x16, version[0], version[1]];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_tls_and_plain_http_are_refused_at_the_handshake() {
    let server = TestServer::start().await;
    let client = server.client();
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("TLS 1.0 ClientHello", old_client_hello([3, 1])),
        ("TLS 1.1 ClientHello", old_client_hello([3, 2])),
        ("SSL 3.0 ClientHello", old_client_hello([3, 0])),
        (
            "plain HTTP on the TLS port",
            b"POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Length: 2\r\n\r\n{}".to_vec(),
        ),
        (
            "random bytes on the TLS port",
            (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
        ),
        ("a TLS record header claiming 16 MB", vec![0x16, 3, 3, 0xFF, 0xFF]),
    ];
    for (name, bytes) in &cases {
        let mut tcp = TcpStream::connect(server.https).await.unwrap();
        let _ = tcp.write_all(bytes).await;
        let (out, closed) = read_until_closed(&mut tcp, Duration::from_secs(12)).await;
        assert!(closed, "{name}: the connection must be closed");
        // Never a ServerHello (handshake record 0x16) and never HTTP: at most a TLS alert (0x15).
        assert!(out.is_empty() || out[0] == 0x15, "{name}: answered {:02x?}", &out[..out.len().min(16)]);
        alive(&client, name).await;
    }
    // The same client with TLS 1.2 or 1.3 still works (a modern hello on the same port).
    static ONLY_TLS12: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS12];
    let tls = client.clone().with_versions(ONLY_TLS12).connect_raw(Proto::Http1).await;
    assert!(tls.is_ok());
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off() {
    let server = TestServer::start_with(|c| {
        c.limits.header_read_timeout = Duration::from_millis(500);
        c.limits.handshake_timeout = Duration::from_millis(500);
    })
    .await;
    let client = server.client();

    // Slowloris: one header byte every 100 ms never completes the headers in time.
    let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
    let started = Instant::now();
    let header =
        b"POST /mutate-pod HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Slow: ";
    let mut cut_off = false;
    for byte in header.iter().chain(std::iter::repeat(&b'a')).take(100) {
        if tls.write_all(&[*byte]).await.is_err() || tls.flush().await.is_err() {
            cut_off = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !cut_off {
        let (_, closed) = read_until_closed(&mut tls, Duration::from_secs(2)).await;
        cut_off = closed;
    }
    assert!(
        cut_off && started.elapsed() < Duration::from_secs(10),
        "slowloris held the connection {:?}",
        started.elapsed()
    );
    alive(&client, "slowloris headers").await;

    // Slow handshake: a TCP connection that never says anything.
    let mut tcp = TcpStream::connect(server.https).await.unwrap();
    let (_, closed) = read_until_closed(&mut tcp, Duration::from_secs(3)).await;
    assert!(closed, "a silent TCP connection is closed after the handshake timeout");
    // A handshake started and stalled half-way (ClientHello sent, nothing after).
    let mut tcp = TcpStream::connect(server.https).await.unwrap();
    let hello = {
        // A real TLS 1.3 ClientHello is whatever rustls sends first; take it from a client whose
        // connection we never continue.
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let mut conn =
            rustls::ClientConnection::new(std::sync::Arc::new(config), "localhost".try_into().unwrap())
                .unwrap();
        let mut out = Vec::new();
        conn.write_tls(&mut out).unwrap();
        out
    };
    tcp.write_all(&hello).await.unwrap();
    let (_, closed) = read_until_closed(&mut tcp, Duration::from_secs(3)).await;
    assert!(closed, "a stalled handshake is closed after the handshake timeout");
    alive(&client, "slow handshake").await;

    // Slow body, both protocols: headers complete, then one byte a second. The internal deadline
    // (here ?timeout=2s → 1.8 s) cuts it off with a 504.
    for proto in BOTH {
        let mut conn = client.connect(proto).await.unwrap();
        let (tx, request) = conn.streamed_post("/mutate-pod?timeout=2s");
        let feeder = tokio::spawn(async move {
            for byte in common::good_review("slow").to_string().into_bytes() {
                if tx.send(Bytes::from(vec![byte])).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let started = Instant::now();
        let reply = tokio::time::timeout(Duration::from_secs(10), conn.send(request))
            .await
            .expect("answered")
            .unwrap();
        assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT, "slow body over {proto:?}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        feeder.abort();
        alive(&client, "slow body").await;
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abrupt_disconnects_mid_request() {
    let server = TestServer::start().await;
    let client = server.client();
    let body = common::good_review("cut").to_string();
    let head = format!(
        "POST /mutate-pod HTTP/1.1\r\nHost: l\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let cuts: Vec<(&str, String)> = vec![
        ("disconnect mid-headers", head[..head.len() / 2].to_owned()),
        ("disconnect mid-body", format!("{head}{}", &body[..body.len() / 2])),
        ("disconnect before reading the answer", format!("{head}{body}")),
    ];
    for (name, bytes) in &cuts {
        for _ in 0..20 {
            let mut tls = client.connect_raw(Proto::Http1).await.unwrap();
            tls.write_all(bytes.as_bytes()).await.unwrap();
            drop(tls);
        }
        alive(&client, name).await;
    }
    // TCP reset (SO_LINGER 0) in the middle of a TLS record.
    for _ in 0..20 {
        let tls = client.connect_raw(Proto::Http1).await.unwrap();
        let (tcp, _) = tls.into_inner();
        tcp.set_zero_linger().ok();
        let mut tcp = tcp;
        let _ = tcp.write_all(&[0x17, 3, 3, 0x40, 0x00, 1, 2, 3]).await;
        drop(tcp);
    }
    alive(&client, "TCP reset mid-record").await;
    // HTTP/2: the connection dropped while 10 streams wait for their bodies.
    let conn = client.connect(Proto::Http2).await.unwrap();
    let mut senders = Vec::new();
    for _ in 0..10 {
        let mut stream = conn.h2_stream().unwrap();
        let (tx, request) = stream.streamed_post("/mutate-pod");
        tx.send(Bytes::from(body_prefix())).await.unwrap();
        senders.push(tx);
        tokio::spawn(async move {
            let _ = stream.send(request).await;
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(conn);
    drop(senders);
    alive(&client, "HTTP/2 connection dropped with streams open").await;
    let metrics = http_get(server.metrics, "/healthz").await;
    assert_eq!(metrics.0, StatusCode::OK);
    server.stop().await.unwrap();
}

fn body_prefix() -> Vec<u8> {
    common::good_review("h2cut").to_string().as_bytes()[..40].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections_do_not_block_service() {
    // Each connection is two descriptors in this process (client and server end).
    common::raise_open_file_limit();
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    assert!(
        limit.is_none_or(|n| n >= 8192),
        "this test needs 8192 open files; raise the hard limit (`ulimit -Hn`), now {limit:?}"
    );
    let server = TestServer::start_with(|c| {
        c.limits.handshake_timeout = Duration::from_secs(60);
        // All 2,000 come from 127.0.0.1; this test is about the total, not the per-peer bound.
        c.limits.max_connections_per_peer = 4096;
    })
    .await;
    let client = server.client();
    let mut idle_tcp = Vec::new();
    for _ in 0..1_700 {
        idle_tcp.push(TcpStream::connect(server.https).await.unwrap());
    }
    let mut idle_tls = Vec::new();
    for i in 0..300 {
        let proto = if i % 2 == 0 { Proto::Http1 } else { Proto::Http2 };
        idle_tls.push(client.connect(proto).await.unwrap());
    }
    let started = Instant::now();
    alive(&client, "2,000 idle connections").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "good reviews took {:?} with 2,000 idle connections",
        started.elapsed()
    );
    // The idle TLS connections still work too.
    let reply = idle_tls[1]
        .request(
            Method::POST,
            "/mutate-pod",
            Some("application/json"),
            Bytes::from(common::good_review("idle").to_string()),
        )
        .await;
    assert_eq!(reply.unwrap().status, StatusCode::OK);
    drop(idle_tcp);
    drop(idle_tls);
    alive(&client, "2,000 idle connections closed").await;
    server.stop().await.unwrap();
}

/// Past the total, a new connection closes an idle one (issue 30.2: idle connections cost a
/// tenant nothing to hold) and is served; the total stays at the cap. A newcomer with no idle
/// connection to close is refused at once and counted (`listener::tests` covers which are idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_close_an_idle_one_and_stay_within_it() {
    let server = TestServer::start_with(|c| c.limits.max_connections = 50).await;
    let client = server.client();
    let mut held = Vec::new();
    for _ in 0..50 {
        held.push(TcpStream::connect(server.https).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    alive(&client, "50 idle connections at the limit of 50").await;
    assert!(started.elapsed() < Duration::from_secs(5), "served past the limit: {:?}", started.elapsed());
    let mut closed = 0;
    for tcp in &mut held {
        if read_until_closed(tcp, Duration::from_millis(20)).await.1 {
            closed += 1;
        }
    }
    assert!(closed >= 1, "an idle connection was closed to make room");
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    alive(&client, "connection limit reached and released").await;
    server.stop().await.unwrap();
}

// ---- HTTP/2 frames by hand: floods a well-behaved client library would never send ----

// Frames, HPACK and the constants are `common::h2`'s.
const CONTINUATION: u8 = 9;

/// Frame types the server sent, in order (parsed from the raw stream).
fn frame_types(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while rest.len() >= 9 {
        let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
        if rest.len() < 9 + len {
            break;
        }
        out.push((rest[3], rest[9..9 + len].to_vec()));
        rest = &rest[9 + len..];
    }
    out
}

async fn h2_raw(client: &TlsClient, frames: &[u8], listen: Duration) -> (Vec<(u8, Vec<u8>)>, bool) {
    let mut tls = client.connect_raw(Proto::Http2).await.unwrap();
    let mut all = PREFACE.to_vec();
    all.extend_from_slice(&frame(SETTINGS, 0, 0, &[]));
    all.extend_from_slice(frames);
    let (mut reader, mut writer) = tokio::io::split(&mut tls);
    let write = async {
        let _ = writer.write_all(&all).await;
        let _ = writer.flush().await;
    };
    let read = read_until_closed(&mut reader, listen);
    let ((), (out, closed)) = tokio::join!(write, read);
    (frame_types(&out), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_floods() {
    let server = TestServer::start().await;
    let client = server.client();
    let headers = request_headers();

    // Rapid reset (CVE-2023-44487): 10,000 streams opened and cancelled at once.
    let mut flood = Vec::new();
    for i in 0..10_000u32 {
        let id = 2 * i + 1;
        flood.extend_from_slice(&frame(HEADERS, END_HEADERS, id, &headers));
        flood.extend_from_slice(&frame(RST_STREAM, 0, id, &8u32.to_be_bytes())); // CANCEL
    }
    let (frames, closed) = h2_raw(&client, &flood, Duration::from_secs(10)).await;
    let goaway = frames.iter().find(|(t, _)| *t == GOAWAY);
    // hyper/h2 answer a reset flood with GOAWAY ENHANCE_YOUR_CALM (0xb) and close.
    assert!(closed, "rapid reset: connection closed");
    let code = goaway.map(|(_, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
    assert_eq!(code, Some(0xb), "rapid reset: GOAWAY ENHANCE_YOUR_CALM");
    alive(&client, "HTTP/2 rapid reset flood").await;

    // 10,000 streams opened without bodies, far past the 256 concurrent streams allowed: the
    // excess is refused (RST_STREAM REFUSED_STREAM or GOAWAY), nothing is queued without bound.
    let mut flood = Vec::new();
    for i in 0..10_000u32 {
        flood.extend_from_slice(&frame(HEADERS, END_HEADERS, 2 * i + 1, &headers));
    }
    let (frames, _) = h2_raw(&client, &flood, Duration::from_secs(5)).await;
    let refused = frames.iter().filter(|(t, p)| *t == RST_STREAM && p == &7u32.to_be_bytes()).count();
    let goaway = frames.iter().any(|(t, _)| *t == GOAWAY);
    assert!(refused > 0 || goaway, "stream flood: no stream refused and no GOAWAY");
    alive(&client, "HTTP/2 10,000-stream flood").await;

    // CONTINUATION flood (CVE-2024-27316 family): one header block that never ends.
    let mut flood = frame(HEADERS, 0, 1, &headers);
    let junk = {
        let mut h = vec![0x00, 5];
        h.extend_from_slice(b"x-pad");
        h.push(0x7F); // 127 + varint
        h.push(0x81);
        h.push(0x7F); // 127 + 1 + 127*128 = 16384
        h.extend_from_slice(&[b'a'; 16384]);
        h
    };
    for _ in 0..1_000 {
        flood.extend_from_slice(&frame(CONTINUATION, 0, 1, &junk[..junk.len().min(16000)]));
    }
    let (_, closed) = h2_raw(&client, &flood, Duration::from_secs(10)).await;
    assert!(closed, "CONTINUATION flood: connection closed");
    alive(&client, "HTTP/2 CONTINUATION flood").await;

    // PING flood: answered or cut off, never a crash.
    let mut flood = Vec::new();
    for i in 0..10_000u64 {
        flood.extend_from_slice(&frame(PING, 0, 0, &i.to_be_bytes()));
    }
    let _ = h2_raw(&client, &flood, Duration::from_secs(3)).await;
    alive(&client, "HTTP/2 PING flood").await;

    // A SETTINGS frame with an invalid value (initial window above 2^31-1): protocol error.
    let bad_settings = frame(SETTINGS, 0, 0, &[0, 4, 0xFF, 0xFF, 0xFF, 0xFF]);
    let (frames, closed) = h2_raw(&client, &bad_settings, Duration::from_secs(5)).await;
    assert!(closed && frames.iter().any(|(t, _)| *t == GOAWAY), "invalid SETTINGS: GOAWAY and close");
    alive(&client, "HTTP/2 invalid SETTINGS").await;
    server.stop().await.unwrap();
}
