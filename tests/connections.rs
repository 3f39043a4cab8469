//! Connection limits over real TLS on 127.0.0.1 (issue 17.7): connections per peer address,
//! idle timeout, maximum connection age (graceful: HTTP/2 GOAWAY, HTTP/1.1 `Connection: close`),
//! clients that cancel what they start, and a mixed attack (slowloris, slow bodies, HTTP/2 rapid
//! reset, silent connections) from one address while a well-behaved client on another loopback
//! address (127.0.0.2) keeps being served within its timeout.

use crate::common;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::client::{BOTH, Proto, TlsClient, http_get, read_until_closed, served_within};
use common::h2::{
    self, DATA, END_HEADERS, END_STREAM, HEADERS, NO_ERROR, RST_STREAM, frame, request_headers,
};
use common::server::TestServer;
use hyper::{Method, StatusCode};
use tokio::io::AsyncWriteExt as _;

const SECOND_PEER: [u8; 4] = [127, 0, 0, 2];

fn second_peer() -> IpAddr {
    IpAddr::from(SECOND_PEER)
}

/// The error codes of the GOAWAY frames the server sent in a raw HTTP/2 session, and whether it
/// closed the connection.
async fn h2_session(
    client: &TlsClient,
    steps: Vec<(Vec<u8>, Duration)>,
    listen: Duration,
) -> (Vec<u32>, bool) {
    let (frames, closed) = h2::session(client, steps, listen).await;
    (frames.iter().filter_map(h2::Frame::goaway_code).collect(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_peer_limit_refuses_one_address_not_another() {
    let server = TestServer::start_with(|c| c.limits.max_connections_per_peer = 4).await;
    let first = server.client();
    let second = server.client().with_source(second_peer());
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(first.tcp().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = first.tcp().await.unwrap();
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut extra, Duration::from_secs(3)).await;
    assert!(
        closed && started.elapsed() < Duration::from_secs(1),
        "the 5th connection from 127.0.0.1 is closed at once"
    );
    for proto in BOTH {
        served_within(&second, proto, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("127.0.0.2 over {proto:?}: {e}"));
    }
    let metrics = http_get(server.metrics, "/metrics").await.1;
    assert!(
        metrics.contains(r#"kruise_admission_http_errors_total{reason="peer_connection_limit"} 1"#),
        "{metrics}"
    );
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    served_within(&first, Proto::Http2, Duration::from_secs(5))
        .await
        .expect("127.0.0.1 is served again once its connections closed");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_gracefully_and_busy_ones_are_not() {
    let server = TestServer::start_with(|c| c.limits.idle_timeout = Duration::from_millis(600)).await;
    let client = server.client();
    // HTTP/2 answers pings forever; without an idle timeout it would stay open for good.
    let (codes, closed) = h2_session(&client, vec![], Duration::from_secs(4)).await;
    // hyper's graceful close is two GOAWAYs around a PING round trip, both NO_ERROR.
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == NO_ERROR),
        "an idle HTTP/2 connection gets GOAWAY NO_ERROR: {codes:?}"
    );
    assert!(closed, "and is closed");
    // A connection in use (a request every 200 ms for 2 s) is not idle.
    let mut conn = client.connect(Proto::Http2).await.unwrap();
    for _ in 0..10 {
        let body = Bytes::from(common::good_review("busy").to_string());
        let reply = conn
            .request(Method::POST, "/mutate-pod", Some("application/json"), body)
            .await
            .expect("the busy connection stays open");
        assert_eq!(reply.status, StatusCode::OK);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_recycled_at_their_maximum_age_without_failing_requests() {
    let server = TestServer::start_with(|c| {
        c.limits.max_connection_age = Duration::from_secs(1);
        c.limits.close_grace = Duration::from_secs(10);
    })
    .await;
    let client = server.client();
    let started = Instant::now();
    let (codes, closed) = h2_session(&client, vec![], Duration::from_secs(4)).await;
    assert!(
        !codes.is_empty() && codes.iter().all(|c| *c == NO_ERROR),
        "an aged HTTP/2 connection gets GOAWAY NO_ERROR: {codes:?}"
    );
    assert!(
        closed && started.elapsed() >= Duration::from_millis(900),
        "closed at its age, not before ({:?})",
        started.elapsed()
    );

    // A request in flight when the age passes is answered; HTTP/1.1 says `Connection: close`.
    for proto in BOTH {
        let mut conn = client.connect(proto).await.unwrap();
        let (tx, request) = conn.streamed_post("/mutate-pod");
        let review = common::good_review("aged").to_string().into_bytes();
        let (head, tail) = review.split_at(review.len() / 2);
        let (head, tail) = (Bytes::copy_from_slice(head), Bytes::copy_from_slice(tail));
        let feeder = tokio::spawn(async move {
            tx.send(head).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1600)).await;
            tx.send(tail).await.unwrap();
        });
        let reply = tokio::time::timeout(Duration::from_secs(8), conn.send(request))
            .await
            .expect("answered")
            .expect("not reset");
        feeder.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{proto:?}");
        assert_eq!(reply.json()["response"]["uid"], "aged");
        if proto == Proto::Http1 {
            let connection = reply
                .headers
                .get(hyper::header::CONNECTION)
                .map(|v| v.to_str().unwrap().to_ascii_lowercase());
            assert_eq!(connection.as_deref(), Some("close"), "HTTP/1.1 response past the age");
        }
        let next = tokio::time::timeout(
            Duration::from_secs(3),
            conn.request(
                Method::POST,
                "/mutate-pod",
                Some("application/json"),
                Bytes::from(common::good_review("after").to_string()),
            ),
        )
        .await;
        assert!(!matches!(next, Ok(Ok(_))), "the aged {proto:?} connection takes no new request");
    }
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_cancels_every_request_it_starts_is_disconnected() {
    // Rapid reset of *accepted* streams: each stream waits until the server is serving it, then
    // is reset. hyper's own limit counts only streams reset before they were accepted.
    let server = TestServer::start_with(|c| c.limits.max_cancelled_requests = 10).await;
    let client = server.client();
    let headers = request_headers();
    let body = common::good_review("reset").to_string().into_bytes();
    let mut steps = Vec::new();
    for i in 0..40u32 {
        let id = 2 * i + 1;
        let mut open = frame(HEADERS, END_HEADERS, id, &headers);
        open.extend_from_slice(&frame(DATA, 0, id, &body[..body.len() / 2]));
        steps.push((open, Duration::from_millis(30)));
        steps.push((frame(RST_STREAM, 0, id, &8u32.to_be_bytes()), Duration::ZERO)); // CANCEL
    }
    let (codes, closed) = h2_session(&client, steps, Duration::from_secs(6)).await;
    assert!(
        codes.contains(&NO_ERROR) && closed,
        "GOAWAY and close after 10 cancelled requests: {codes:?}, closed {closed}"
    );
    served_within(&client, Proto::Http2, Duration::from_secs(5)).await.expect("a new connection is served");
    // A stream that ends normally is not a cancellation: 40 complete requests keep the connection.
    let mut conn = client.connect(Proto::Http2).await.unwrap();
    for _ in 0..40 {
        let reply = conn
            .request(
                Method::POST,
                "/mutate-pod",
                Some("application/json"),
                Bytes::from(common::good_review("ok").to_string()),
            )
            .await;
        assert_eq!(reply.expect("connection kept").status, StatusCode::OK);
    }
    server.stop().await.unwrap();
}

/// Slowloris (headers one byte at a time), slow bodies over both protocols, HTTP/2 rapid reset
/// floods and silent TCP connections, all from 127.0.0.1, with the global limit at 256. Before
/// the per-peer limit the attacker took every connection slot and the well-behaved client got
/// nothing; now it is served within its timeout the whole time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_attack_from_one_address_does_not_starve_a_well_behaved_client() {
    let server = TestServer::start_with(|c| c.limits.max_connections = 256).await;
    let attacker = server.client();
    let good = server.client().with_source(second_peer());
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();

    // Slowloris: 20 connections sending a header byte every 200 ms.
    for _ in 0..20 {
        let (attacker, stop) = (attacker.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut tls) = attacker.connect_raw(Proto::Http1).await else { return };
            let header = b"POST /mutate-pod HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
            for byte in header.iter().chain(std::iter::repeat(&b'a')) {
                if stop.load(Ordering::Relaxed) || tls.write_all(&[*byte]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }));
    }
    // Slow bodies: 10 per protocol, a byte every 500 ms.
    for proto in BOTH {
        for _ in 0..10 {
            let (attacker, stop) = (attacker.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let Ok(mut conn) = attacker.connect(proto).await else { return };
                let (tx, request) = conn.streamed_post("/mutate-pod");
                let feeder = async move {
                    for byte in common::good_review("slow").to_string().into_bytes() {
                        if stop.load(Ordering::Relaxed) || tx.send(Bytes::from(vec![byte])).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                };
                let _ = tokio::join!(feeder, conn.send(request));
            }));
        }
    }
    // HTTP/2 rapid reset, connection after connection.
    {
        let (attacker, stop) = (attacker.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let headers = request_headers();
            let mut flood = Vec::new();
            for i in 0..2_000u32 {
                flood.extend_from_slice(&frame(HEADERS, END_HEADERS | END_STREAM, 2 * i + 1, &headers));
                flood.extend_from_slice(&frame(RST_STREAM, 0, 2 * i + 1, &8u32.to_be_bytes()));
            }
            while !stop.load(Ordering::Relaxed) {
                let _ =
                    h2_session(&attacker, vec![(flood.clone(), Duration::ZERO)], Duration::from_millis(500))
                        .await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Silent TCP connections (a TLS handshake that never starts), as many as it can get.
    let silent = Arc::new(AtomicUsize::new(0));
    {
        let (attacker, stop, silent) = (attacker.clone(), stop.clone(), silent.clone());
        tasks.push(tokio::spawn(async move {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) && held.len() < 400 {
                if let Ok(tcp) = attacker.tcp().await {
                    held.push(tcp);
                    silent.fetch_add(1, Ordering::Relaxed);
                }
            }
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The well-behaved client: a new connection every 100 ms for 5 s, each answered in 5 s.
    let started = Instant::now();
    let mut answered = 0;
    let mut i = 0;
    while started.elapsed() < Duration::from_secs(5) {
        let proto = BOTH[i % 2];
        served_within(&good, proto, Duration::from_secs(5))
            .await
            .unwrap_or_else(|e| panic!("request {i} of the good client over {proto:?} under attack: {e}"));
        answered += 1;
        i += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let metrics = http_get(server.metrics, "/metrics").await.1;
    for task in tasks {
        task.abort();
    }
    assert!(answered >= 10, "only {answered} answers in 5 s");
    assert!(
        silent.load(Ordering::Relaxed) >= 256,
        "the attack opened {} silent connections",
        silent.load(Ordering::Relaxed)
    );
    assert!(
        metrics.contains(r#"reason="peer_connection_limit""#),
        "the attacker hit its per-peer limit:\n{metrics}"
    );
    server.stop().await.unwrap();
}
