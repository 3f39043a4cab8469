//! Connection limits of the plain-HTTP probe and metrics port (`--metrics-listen`), over real TCP
//! on 127.0.0.x: it runs the webhook port's accept loop with its own small limits, so slowloris,
//! silent connections and floods there neither keep `/readyz` from answering another address nor
//! take the file descriptors the webhook port needs (the server is one process).

use crate::common;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use common::client::{Proto, TlsClient, read_until_closed, served_within, try_http_get};
use common::serve_process::{Serve, addr, cluster_folder};
use common::server::TestServer;
use hyper::StatusCode;
use kruise_admission::server::listener::ConnLimits;
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpSocket, TcpStream};

fn loopback(last: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, last])
}

/// A TCP connection from `source` that sends nothing. Connecting gives up after 3 s: the kernel
/// completes connections into the listen queue, so only a server that stopped accepting (its
/// queue full) leaves a connect hanging. Not 1 s: a connect whose first SYN goes unanswered
/// completes only after the kernel's 1 s initial retransmission timeout, and one full-suite run
/// here failed that way (connection 153 of 300, the server still accepting).
async fn silent(to: SocketAddr, source: IpAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(source, 0))?;
    tokio::time::timeout(Duration::from_secs(3), socket.connect(to))
        .await
        .map_err(|_| std::io::ErrorKind::TimedOut)?
}

/// What a flood of silent connections left behind.
struct Flood {
    /// Connections the kernel completed (the server's accept loop kept draining its backlog).
    connected: usize,
    /// Those the server has not closed, at the last look.
    open: Vec<TcpStream>,
    /// Why the flood stopped early, if it did.
    stopped: Option<std::io::Error>,
}

impl Flood {
    /// Forgets the connections the server has closed, so the test holds only the ones the server
    /// holds (CI runs with a low open-file limit: 600 held sockets would exhaust the test's own).
    fn prune(&mut self) {
        let mut byte = [0u8; 1];
        self.open.retain(
            |tcp| matches!(tcp.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        );
    }
}

/// `n` silent connections from `sources` in turn, or fewer when the server stops accepting.
async fn flood(to: SocketAddr, sources: impl Iterator<Item = IpAddr> + Clone, n: usize) -> Flood {
    let mut flood = Flood { connected: 0, open: Vec::new(), stopped: None };
    for source in sources.cycle().take(n) {
        flood.prune();
        match silent(to, source).await {
            Ok(tcp) => {
                flood.connected += 1;
                flood.open.push(tcp);
            }
            Err(e) => {
                flood.stopped = Some(e);
                break;
            }
        }
    }
    flood
}

/// `/readyz` from `source` on a new connection, answered 200 within `limit`?
async fn ready_within(metrics: SocketAddr, source: IpAddr, limit: Duration) -> Result<(), String> {
    match tokio::time::timeout(limit, try_http_get(metrics, Some(source), "/readyz")).await {
        Ok(Ok((StatusCode::OK, _))) => Ok(()),
        Ok(Ok((status, body))) => Err(format!("status {status}: {body}")),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {limit:?}")),
    }
}

/// Before: `axum::serve` had no header timeout (no timer), so both connections stayed open for
/// good. Now HTTP/1.1 starts at the first byte and the header timeout closes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_or_a_silent_connection_on_the_metrics_port_is_closed_at_the_header_timeout() {
    let server =
        TestServer::start_with(|c| c.metrics_limits.header_read_timeout = Duration::from_millis(500)).await;
    let mut quiet = silent(server.metrics, loopback(1)).await.unwrap();
    let mut slow = silent(server.metrics, loopback(1)).await.unwrap();
    let writer = tokio::spawn(async move {
        let header = b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
        for byte in header.iter().chain(std::iter::repeat(&b'a')) {
            if slow.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut quiet, Duration::from_secs(4)).await;
    assert!(closed, "a connection that sends nothing is closed");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "within about the header timeout: {:?}",
        started.elapsed()
    );
    // The slowloris writer stops when its writes fail: the server closed its connection.
    let stopped = tokio::time::timeout(Duration::from_secs(4), writer).await;
    assert!(stopped.is_ok(), "the slowloris connection is still open after 4 s (header timeout 500 ms)");
    ready_within(server.metrics, loopback(1), Duration::from_secs(3))
        .await
        .expect("/readyz after the attack");
    server.stop().await.unwrap();
}

/// Before: every connection was accepted. Now the 9th from one address is closed at once and
/// counted, and another address is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_flooding_the_metrics_port_is_capped_and_another_is_served() {
    let server = TestServer::start().await;
    let per_peer = ConnLimits::metrics_port().max_connections_per_peer;
    let held = flood(server.metrics, [loopback(1)].into_iter(), per_peer).await;
    assert_eq!(held.open.len(), per_peer, "{:?}", held.stopped);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = silent(server.metrics, loopback(1)).await.unwrap();
    let started = Instant::now();
    let (_, closed) = read_until_closed(&mut extra, Duration::from_secs(3)).await;
    assert!(
        closed && started.elapsed() < Duration::from_secs(1),
        "connection {} from 127.0.0.1 is closed at once",
        per_peer + 1
    );
    ready_within(server.metrics, loopback(2), Duration::from_secs(3)).await.expect("/readyz from 127.0.0.2");
    let metrics = try_http_get(server.metrics, Some(loopback(2)), "/metrics").await.unwrap().1;
    assert!(
        metrics.contains(r#"kruise_admission_http_errors_total{reason="metrics_peer_connection_limit"} 1"#),
        "{metrics}"
    );
    drop(held);
    server.stop().await.unwrap();
}

/// The binary with its open-file limit at 160, flooded on the metrics port with 300 silent
/// connections, first from one address, then from 60 addresses. Before: the server ran out of
/// file descriptors, so neither `/readyz` nor the webhook port answered anyone. Now: one address
/// gets 8 connections and another is served on both ports; 60 addresses get 64 in all and the
/// webhook port is served (the total cap is what keeps the descriptors; a probe from yet another
/// address closes an idle one: `idle_connections_from_eight_addresses_cannot_starve_the_probe`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_on_the_metrics_port_cannot_exhaust_the_servers_file_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_folder(dir.path());
    let serve = Serve::start_limited(dir.path(), Some(160), &["--cluster-dir", cluster.to_str().unwrap()]);
    let ready = serve.until("kruise-admission ready to serve").pop().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", serve.child.id())).unwrap();
    assert!(
        limits.lines().any(|l| l.starts_with("Max open files") && l.split_whitespace().nth(3) == Some("160")),
        "{limits}"
    );
    let (https, metrics) = (addr(&ready, "https"), addr(&ready, "metrics"));
    let good = TlsClient::new(https, &std::fs::read(dir.path().join("certs/ca.crt")).unwrap())
        .with_source(loopback(2));
    served_within(&good, Proto::Http2, Duration::from_secs(5)).await.expect("served before the flood");

    let mut one = flood(metrics, [loopback(1)].into_iter(), 300).await;
    assert_eq!(one.connected, 300, "the server kept accepting (and closing) connections: {:?}", one.stopped);
    tokio::time::sleep(Duration::from_millis(300)).await;
    one.prune();
    let per_peer = ConnLimits::metrics_port().max_connections_per_peer;
    assert!(
        (1..=per_peer).contains(&one.open.len()),
        "127.0.0.1 holds {} connections (cap {per_peer})",
        one.open.len()
    );
    ready_within(metrics, loopback(2), Duration::from_secs(3))
        .await
        .expect("/readyz from 127.0.0.2 while 127.0.0.1 floods");
    served_within(&good, Proto::Http2, Duration::from_secs(5))
        .await
        .expect("the webhook port while 127.0.0.1 floods the metrics port");

    let mut many = flood(metrics, (10..70).map(loopback), 300).await;
    assert_eq!(
        many.connected, 300,
        "the server kept accepting (and closing) connections: {:?}",
        many.stopped
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    many.prune();
    // 127.0.0.1's connections were idle: the newcomers closed them to make room.
    one.prune();
    let total = ConnLimits::metrics_port().max_connections;
    assert!(
        one.open.len() + many.open.len() <= total,
        "the flood holds {} connections (cap {total})",
        one.open.len() + many.open.len()
    );
    served_within(&good, Proto::Http2, Duration::from_secs(5))
        .await
        .expect("the webhook port while 60 addresses flood the metrics port");
    drop((one, many));
}

/// Issue 30.2. Before: 8 addresses holding 8 idle connections each took all 64 slots of the probe
/// port, and the kubelet's `/readyz` from a ninth address was refused. Now a new connection
/// arriving when every slot is taken closes an idle one of the address that holds the most, so the
/// probe is answered within 1 s and the port still holds at most 64.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_from_eight_addresses_cannot_starve_the_probe() {
    let server = TestServer::start().await;
    let limits = ConnLimits::metrics_port();
    let mut held = Vec::new();
    for last in 2..=9 {
        let mut flood =
            flood(server.metrics, [loopback(last)].into_iter(), limits.max_connections_per_peer).await;
        assert_eq!(
            flood.open.len(),
            limits.max_connections_per_peer,
            "from 127.0.0.{last}: {:?}",
            flood.stopped
        );
        held.append(&mut flood.open);
    }
    assert_eq!(held.len(), limits.max_connections, "the flood holds every slot");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for probe in 0..3 {
        ready_within(server.metrics, loopback(10), Duration::from_secs(1)).await.unwrap_or_else(|e| {
            panic!("probe {probe} from 127.0.0.10 while 8 addresses hold 64 idle connections: {e}")
        });
    }
    let mut flood = Flood { connected: held.len(), open: held, stopped: None };
    tokio::time::sleep(Duration::from_millis(300)).await;
    flood.prune();
    assert!(flood.open.len() < limits.max_connections, "idle connections were closed to make room");
    drop(flood);
    server.stop().await.unwrap();
}

/// `/readyz` over plain TCP from a thread of its own, outside every runtime: the status line, or
/// why there is none within `within`.
fn probe_from_a_thread(metrics: SocketAddr, within: Duration) -> Result<String, String> {
    use std::io::{Read as _, Write as _};
    std::thread::spawn(move || {
        let mut conn = std::net::TcpStream::connect_timeout(&metrics, within).map_err(|e| e.to_string())?;
        conn.set_read_timeout(Some(within)).map_err(|e| e.to_string())?;
        conn.write_all(b"GET /readyz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            .map_err(|e| e.to_string())?;
        let mut answer = Vec::new();
        conn.read_to_end(&mut answer).map_err(|e| format!("no answer within {within:?}: {e}"))?;
        let text = String::from_utf8_lossy(&answer);
        Ok(text.lines().next().unwrap_or_default().to_owned())
    })
    .join()
    .expect("probe thread")
}

/// Reviews under 32 KiB are decided on the runtime's workers where they arrive. With every one of
/// them held (here by tasks that block their thread, as a burst of slow decisions would), the
/// probe port still answers: it runs on a thread and runtime of its own.
#[test]
fn probes_are_answered_while_every_worker_of_the_serving_runtime_is_busy() {
    let runtime = kruise_admission::server::runtime(kruise_admission::server::DEFAULT_WORKERS).unwrap();
    runtime.block_on(async {
        let server = TestServer::start().await;
        assert_eq!(probe_from_a_thread(server.metrics, Duration::from_secs(5)).unwrap(), "HTTP/1.1 200 OK");
        let workers = tokio::runtime::Handle::current().metrics().num_workers();
        // Each blocking task waits until all of them run, so every worker is held at once.
        let all_held = std::sync::Arc::new(std::sync::Barrier::new(workers + 1));
        let release = std::sync::Arc::new(std::sync::Barrier::new(workers + 1));
        for _ in 0..workers {
            let (all_held, release) = (all_held.clone(), release.clone());
            tokio::spawn(async move {
                all_held.wait();
                release.wait();
            });
        }
        all_held.wait();
        let probed = probe_from_a_thread(server.metrics, Duration::from_secs(1));
        release.wait();
        assert_eq!(probed.unwrap(), "HTTP/1.1 200 OK", "with all {workers} workers held");
        server.stop().await.unwrap();
    });
}
