//! Our own accept loop, for both ports: TCP → TLS (tokio-rustls) → HTTP/1.1 or HTTP/2 (hyper-util
//! `auto`, chosen by ALPN / the connection preface) → the axum router on the webhook port; TCP →
//! HTTP/1.1 → the health router on the probe and metrics port. Owning the loop is what lets us
//! bound the TLS handshake, bound connections in total and per peer address (past the total, an
//! idle connection gives its place to the newcomer: idle connections cannot keep out the kubelet's
//! probes or the API server), recycle connections (idle timeout, maximum age), drop connections
//! that do not read their answers (send timeout), refuse new connections the moment shutdown
//! starts and drain the rest. Both ports share the process's file descriptors, so both are bounded.
//!
//! Closing a connection is always graceful first: HTTP/2 gets GOAWAY (streams in flight finish,
//! the client opens a new connection for the next request), HTTP/1.1 gets `Connection: close` on
//! the response in flight (or is closed when idle). Only a connection that is still busy after
//! [`ConnLimits::close_grace`] is dropped.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use super::coalesce::Coalesce;
use super::log_summary::LogSummary;
use super::metrics::Metrics;

/// The address a request came from, in its extensions (refusals are logged per peer).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// Per-connection limits against slow, greedy or sticky clients.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for an HTTP/1.1 client to send a request's headers (slowloris). hyper applies it to
    /// an idle keep-alive connection too, so idle HTTP/1.1 connections close after this long.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub h2_max_concurrent_streams: u32,
    /// HTTP/2 PING interval; a peer that does not answer within the same time is dropped.
    pub h2_keep_alive_interval: Duration,
    /// Open connections (TLS handshakes included). An idle HTTP/2 connection that answers pings
    /// would otherwise only be closed by the idle timeout, so without a bound a client could
    /// exhaust file descriptors; past it, new connections are closed at once and counted.
    pub max_connections: usize,
    /// Open connections from one source IP address: one noisy or hostile client cannot take
    /// all of `max_connections` from the others (the API servers, Prometheus).
    pub max_connections_per_peer: usize,
    /// A connection with no request in flight for this long is closed (gracefully).
    pub idle_timeout: Duration,
    /// A connection is closed (gracefully) after about this long, whatever it does, so clients
    /// reconnect and spread over the replicas a rollout or scale-up added. Each connection's age
    /// is jittered by up to a tenth so that one replica's connections do not all recycle at once.
    pub max_connection_age: Duration,
    /// How long a connection being closed (idle, age, too many cancelled requests) may finish
    /// its requests in flight before it is dropped.
    pub close_grace: Duration,
    /// Requests a client may cancel on one connection (HTTP/2 RST_STREAM of a stream already
    /// being served) before the connection is closed gracefully. The
    /// work a cancelled request started may run on; a client that cancels as fast as it sends
    /// (rapid reset of accepted streams) would otherwise pile it up without bound.
    pub max_cancelled_requests: usize,
    /// A connection whose writes have made no progress for this long (the client does not read
    /// its answers) is dropped: what it would not take is freed at once, not after the idle
    /// timeout and the close grace.
    pub send_timeout: Duration,
    /// Serve HTTP/2 besides HTTP/1.1. Without it the connection is HTTP/1.1 from its first byte,
    /// so `header_read_timeout` bounds a connection that sends nothing at all.
    pub http2: bool,
}

/// The apiserver keeps a handful of HTTP/2 connections per replica; thousands leave room for
/// many apiservers and scrapers while staying well inside a container's usual file limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// One apiserver uses one HTTP/2 connection per webhook client (a few more under load); behind a
/// proxy or a NAT every caller shares one address, so the bound stays generous.
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 128;
/// Longer than Go's `http.Transport` idle timeout (90 s, what the apiserver's client uses), so
/// the client normally closes first; this cleans up after clients that never do.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Long enough that reconnecting costs nothing measurable (one handshake per connection per
/// ten minutes), short enough that a rollout is balanced again within minutes.
pub const DEFAULT_MAX_CONNECTION_AGE: Duration = Duration::from_secs(600);
/// The apiserver's largest webhook timeout (30 s): a request in flight when its connection is
/// recycled still gets its answer.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(30);
/// The API server reads an answer as it comes; a peer that takes none of it for this long is not
/// one (a 3 MiB answer over a slow 10 Mbit/s link makes progress every few milliseconds).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP/1.1 connection's read buffer: hyper's default (about 400 KiB) is held by every
/// connection that ever read a large body, uncharged; 96 such connections held 40 MiB. A request's
/// headers must fit in it: the API server's are well under 1 KiB.
const H1_MAX_BUF_SIZE: usize = 64 << 10;

/// Bytes of each HTTP/2 stream's answer polled ahead of the peer's flow-control window. Answers
/// are charged to the memory budget until taken (`app::ChargedAnswer`); this keeps what h2 holds
/// of them per stream to one chunk of that size rather than h2's 400 KiB default.
const H2_MAX_SEND_BUF_SIZE: usize = 64 << 10;

/// HTTP/2 streams a client may reset before the server has accepted them; past it the
/// connection gets GOAWAY ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487). h2's default, set
/// here so that it is a decision of ours and not an accident of a dependency's version.
const H2_MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;
/// Streams the server may reset for protocol errors the client provoked ("MadeYouReset",
/// CVE-2025-8671) before the connection gets GOAWAY; h2's default is 1024.
const H2_MAX_LOCAL_ERROR_RESET_STREAMS: usize = 256;

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            h2_max_concurrent_streams: 256,
            h2_keep_alive_interval: Duration::from_secs(30),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connection_age: DEFAULT_MAX_CONNECTION_AGE,
            close_grace: DEFAULT_CLOSE_GRACE,
            max_cancelled_requests: 100,
            send_timeout: DEFAULT_SEND_TIMEOUT,
            http2: true,
        }
    }
}

impl ConnLimits {
    /// The probe and metrics port: its clients are the kubelet (one short connection per probe)
    /// and a Prometheus or two (one keep-alive connection each), all sending a GET at once. Small
    /// caps keep a flood there from taking the file descriptors the webhook port needs, and the
    /// per-peer cap keeps one flooding address from taking the kubelet's slots.
    pub fn metrics_port() -> Self {
        ConnLimits {
            // The kubelet's probe timeout is 1 s by default; a GET takes no time to send.
            header_read_timeout: Duration::from_secs(5),
            max_connections: 64,
            max_connections_per_peer: 8,
            idle_timeout: Duration::from_secs(30),
            // Prometheus's default scrape timeout.
            close_grace: Duration::from_secs(10),
            // Prometheus and the kubelet speak HTTP/1.1 here; h2c would only add a protocol to attack.
            http2: false,
            ..ConnLimits::default()
        }
    }
}

fn http_builder(limits: &ConnLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(H1_MAX_BUF_SIZE);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.h2_max_concurrent_streams)
        .max_pending_accept_reset_streams(H2_MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(H2_MAX_LOCAL_ERROR_RESET_STREAMS)
        .max_send_buf_size(H2_MAX_SEND_BUF_SIZE)
        .keep_alive_interval(limits.h2_keep_alive_interval)
        .keep_alive_timeout(limits.h2_keep_alive_interval);
    if limits.http2 { builder } else { builder.http1_only() }
}

/// The open connections of one port: how many per source address, and what each is doing, so that
/// a connection arriving when every slot is taken can have an idle one closed (issue 30.2).
#[derive(Default)]
struct OpenConnections(Mutex<Open>);

#[derive(Default)]
struct Open {
    per_peer: HashMap<IpAddr, usize>,
    connections: HashMap<u64, Entry>,
    next_id: u64,
}

/// One open connection: its address, what it is doing, and its place under the total cap (kept
/// here, not by its task, so that an eviction can hand it to the newcomer at once).
struct Entry {
    ip: IpAddr,
    activity: Arc<Activity>,
    permit: Option<OwnedSemaphorePermit>,
}

/// One connection's place in [`OpenConnections`], given back on drop.
struct PeerSlot {
    open: Arc<OpenConnections>,
    ip: IpAddr,
    id: u64,
}

impl OpenConnections {
    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_take(self: &Arc<Self>, ip: IpAddr, max: usize, activity: &Arc<Activity>) -> Option<PeerSlot> {
        let mut open = self.lock();
        let count = open.per_peer.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        let id = open.next_id;
        open.next_id += 1;
        open.connections.insert(id, Entry { ip, activity: activity.clone(), permit: None });
        Some(PeerSlot { open: self.clone(), ip, id })
    }

    /// Tell one idle connection to close (see [`eviction_victim`]) and take its place under the
    /// total cap for the newcomer; `None` when no connection is idle.
    fn evict_idle(&self) -> Option<OwnedSemaphorePermit> {
        let mut open = self.lock();
        let open = &mut *open;
        let candidates = open.connections.iter().filter_map(|(id, entry)| {
            let idle = entry.permit.as_ref().map(|_| entry.activity.idle_for())?;
            (!idle.is_zero()).then(|| (*id, open.per_peer.get(&entry.ip).copied().unwrap_or(0), idle))
        });
        let victim = eviction_victim(candidates)?;
        let entry = open.connections.get_mut(&victim)?;
        entry.activity.evict.notify_one();
        entry.permit.take()
    }
}

impl PeerSlot {
    /// The connection holds `permit` from now on (until it ends or is evicted).
    fn hold(&self, permit: OwnedSemaphorePermit) {
        if let Some(entry) = self.open.lock().connections.get_mut(&self.id) {
            entry.permit = Some(permit);
        }
    }
}

/// Which idle connection `(id, connections of its address, idle for)` to close for a newcomer:
/// one of the address that holds the most (so a flood from a few addresses pays, not the
/// kubelet's single probe connection), the longest idle of those.
fn eviction_victim(candidates: impl Iterator<Item = (u64, usize, Duration)>) -> Option<u64> {
    candidates.max_by_key(|&(_, of_peer, idle)| (of_peer, idle)).map(|(id, _, _)| id)
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        open.connections.remove(&self.id);
        if let Some(count) = open.per_peer.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.per_peer.remove(&self.ip);
            }
        }
    }
}

/// Which port a loop serves: what is spoken on it and how its refusals are counted.
#[derive(Clone)]
pub enum Port {
    /// The webhook port: a TLS handshake (within `handshake_timeout`), then HTTP. Refusals are
    /// `kruise_admission_http_errors_total{reason="connection_limit"|"peer_connection_limit"}`.
    Webhooks(TlsAcceptor),
    /// `/healthz`, `/readyz` and `/metrics`: plain HTTP. Refusals are `metrics_connection_limit`
    /// and `metrics_peer_connection_limit`.
    Metrics,
}

impl Port {
    /// The `http_errors` reasons of a refusal past the total and the per-peer limit.
    fn refusal_reasons(&self) -> (&'static str, &'static str) {
        match self {
            Port::Webhooks(_) => ("connection_limit", "peer_connection_limit"),
            Port::Metrics => ("metrics_connection_limit", "metrics_peer_connection_limit"),
        }
    }
}

/// Accept connections until `shutdown` resolves, then drop the listener (new connections are
/// refused from then on) and start closing the open ones gracefully. Each connection holds a
/// watcher of `graceful`, so the caller can wait for the drain.
pub async fn accept_until(
    listener: TcpListener,
    port: Port,
    app: Router,
    limits: &ConnLimits,
    metrics: &Metrics,
    graceful: &GracefulShutdown,
    shutdown: impl Future<Output = ()>,
) {
    let builder = Arc::new(http_builder(limits));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(OpenConnections::default());
    let (drain, draining) = watch::channel(false);
    let refusals = LogSummary::<Option<IpAddr>>::default();
    let (total_reason, peer_reason) = port.refusal_reasons();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Closing at once (instead of leaving the connection in the backlog) tells the client to
        // try another replica now rather than after its own timeout.
        let activity = Arc::new(Activity::new(limits.max_cancelled_requests));
        let Some(slot) = open.try_take(peer.ip(), limits.max_connections_per_peer, &activity) else {
            metrics.http_error(peer_reason);
            if let Some(suppressed) = refusals.note(Some(peer.ip()), Instant::now()) {
                tracing::warn!(%peer, reason = peer_reason, suppressed, max_connections_per_peer = limits.max_connections_per_peer, "connection refused: too many open connections from this address");
            }
            continue;
        };
        // Every slot taken: an idle connection is closed to make room, so idle connections (which
        // cost a tenant nothing to hold) cannot keep out the kubelet's probes or the API server.
        let Some(permit) = permits.clone().try_acquire_owned().ok().or_else(|| open.evict_idle()) else {
            metrics.http_error(total_reason);
            if let Some(suppressed) = refusals.note(Some(peer.ip()), Instant::now()) {
                tracing::warn!(%peer, reason = total_reason, suppressed, max_connections = limits.max_connections, "connection refused: too many open connections");
            }
            continue;
        };
        slot.hold(permit);
        let connection = Connection {
            tcp,
            peer,
            port: port.clone(),
            builder: builder.clone(),
            app: app.clone(),
            limits: limits.clone(),
            activity,
            draining: draining.clone(),
            _watcher: graceful.watcher(),
        };
        tokio::spawn(async move {
            let _slot = slot;
            connection.serve().await;
        });
    }
    // Dropping the listener refuses new connections; the open ones start closing gracefully.
    drop(listener);
    let _ = drain.send(true);
}

/// One accepted TCP connection and what serving it needs.
struct Connection {
    tcp: TcpStream,
    peer: SocketAddr,
    port: Port,
    builder: Arc<auto::Builder<TokioExecutor>>,
    app: Router,
    limits: ConnLimits,
    activity: Arc<Activity>,
    /// Turns true when the server starts shutting down.
    draining: watch::Receiver<bool>,
    /// Counted by the drain in `Server::run`, which waits until every connection is gone.
    _watcher: Watcher,
}

/// Why a connection is being closed by us.
#[derive(Debug, Clone, Copy)]
enum CloseReason {
    Shutdown,
    Idle,
    MaxAge,
    Cancellations,
    /// Idle while every slot was taken and a new connection came.
    Evicted,
}

impl Connection {
    async fn serve(self) {
        let Connection { tcp, peer, port, builder, app, limits, activity, draining, _watcher } = self;
        // Latency matters more than packet count for small JSON answers.
        let _ = tcp.set_nodelay(true);
        let acceptor = match port {
            Port::Webhooks(acceptor) => acceptor,
            Port::Metrics => {
                let io = watched(tcp, &activity, false);
                return serve_http(io, peer, &builder, app, &limits, activity, draining).await;
            }
        };
        let handshake = tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp));
        // A handshake that has not finished is idle too: it may be closed for a newcomer.
        let tls = tokio::select! {
            handshake = handshake => match handshake {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            },
            () = activity.evict.notified() => {
                tracing::debug!(%peer, "closed during the TLS handshake to make room for a new connection");
                return;
            }
        };
        // HTTP/2 answers are written together ([`Coalesce`]); HTTP/1.1 has one in flight.
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        let io = watched(tls, &activity, h2);
        serve_http(io, peer, &builder, app, &limits, activity, draining).await;
    }
}

/// A connection's I/O as [`serve_http`] takes it: writes watched for a peer that does not read, and
/// with `coalesce` (HTTP/2) answers written together. Held answers are outside [`WriteWatch`]: it
/// sees the writes that wait for the peer, not the deliberate wait before a flush.
fn watched<I>(io: I, activity: &Arc<Activity>, coalesce: bool) -> Coalesce<WriteWatch<I>> {
    Coalesce::new(WriteWatch { inner: io, activity: activity.clone() }, coalesce)
}

/// Serve HTTP on an established connection (plain or after the TLS handshake) until it ends,
/// closing it gracefully when it is idle, too old, cancels too much or the server shuts down.
async fn serve_http<I>(
    io: I,
    peer: SocketAddr,
    builder: &auto::Builder<TokioExecutor>,
    app: Router,
    limits: &ConnLimits,
    activity: Arc<Activity>,
    mut draining: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(Tracked { app, activity: activity.clone(), peer });
    let mut connection = std::pin::pin!(builder.serve_connection(TokioIo::new(io), service));
    let age = tokio::time::sleep(jittered(limits.max_connection_age, peer));
    let mut age = std::pin::pin!(age);
    // Checking idleness and stalled writes a few times per timeout is precise enough and costs
    // one timer.
    let check_every = limits.idle_timeout.min(limits.send_timeout) / 4;
    let mut idle_check = tokio::time::interval(check_every.max(Duration::from_millis(10)));
    idle_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Set once we have asked the connection to close; then only its end (or, except during
    // shutdown, which has its own deadline in `Server::run`, the grace period) is awaited.
    let mut closing: Option<CloseReason> = None;
    let grace_over = tokio::time::sleep(Duration::ZERO);
    let mut grace_over = std::pin::pin!(grace_over);
    loop {
        let reason = tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection closed with an error");
                }
                return;
            }
            () = &mut grace_over, if closing.is_some_and(|r| !matches!(r, CloseReason::Shutdown)) => {
                tracing::debug!(%peer, reason = ?closing, "connection still busy after the close grace period; dropped");
                return;
            }
            Ok(_) = draining.wait_for(|d| *d), if closing.is_none() => CloseReason::Shutdown,
            () = &mut age, if closing.is_none() => CloseReason::MaxAge,
            () = activity.abuse.notified(), if closing.is_none() => CloseReason::Cancellations,
            // Chosen while idle, and its place under the cap already went to a newcomer: closed at
            // once (a request that began meanwhile is closed gracefully, below).
            () = activity.evict.notified(), if closing.is_none() => {
                if activity.in_flight.load(Ordering::Acquire) == 0 {
                    tracing::debug!(%peer, "idle connection closed to make room for a new one");
                    return;
                }
                CloseReason::Evicted
            }
            _ = idle_check.tick() => {
                // Not graceful: a peer that takes nothing would not take a GOAWAY either.
                if activity.write_stalled_for() >= limits.send_timeout {
                    tracing::debug!(%peer, send_timeout_s = limits.send_timeout.as_secs_f64(), "connection dropped: it took none of its answers within the send timeout");
                    return;
                }
                if closing.is_some() || activity.idle_for() < limits.idle_timeout {
                    continue;
                }
                CloseReason::Idle
            }
        };
        match reason {
            CloseReason::Cancellations => {
                tracing::warn!(%peer, max_cancelled_requests = limits.max_cancelled_requests, "closing a connection whose client cancels too many requests")
            }
            _ => tracing::debug!(%peer, ?reason, "closing connection gracefully"),
        }
        // HTTP/2: GOAWAY, streams in flight finish. HTTP/1.1: `Connection: close` on the
        // response in flight, or closed at once when idle.
        connection.as_mut().graceful_shutdown();
        grace_over.as_mut().reset(tokio::time::Instant::now() + limits.close_grace);
        closing = Some(reason);
    }
}

/// `age` shortened by up to a tenth, by a hash of the peer's address and port: deterministic per
/// connection, spread across connections.
fn jittered(age: Duration, peer: SocketAddr) -> Duration {
    use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(peer);
    let tenth = age / 10;
    age - tenth.mul_f64((hash % 1000) as f64 / 1000.0)
}

/// What a connection is doing: requests in flight, when the last one ended, how many the client
/// cancelled.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds since `started` when the last request ended (or the connection opened).
    last_done_ms: AtomicU64,
    cancelled: AtomicUsize,
    max_cancelled: usize,
    /// Notified once when `cancelled` passes `max_cancelled`.
    abuse: Notify,
    /// Notified when this idle connection is to close to make room ([`OpenConnections::evict_idle`]).
    evict: Notify,
    /// Milliseconds since `started` when a write began to wait for the peer, [`NOT_STALLED`]
    /// while writes go through.
    write_stalled_ms: AtomicU64,
}

const NOT_STALLED: u64 = u64::MAX;

impl Activity {
    fn new(max_cancelled: usize) -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_done_ms: AtomicU64::new(0),
            cancelled: AtomicUsize::new(0),
            max_cancelled,
            abuse: Notify::new(),
            evict: Notify::new(),
            write_stalled_ms: AtomicU64::new(NOT_STALLED),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(NOT_STALLED - 1)
    }

    /// How long the write in progress has waited for the peer to take anything.
    fn write_stalled_for(&self) -> Duration {
        match self.write_stalled_ms.load(Ordering::Acquire) {
            NOT_STALLED => Duration::ZERO,
            since => Duration::from_millis(self.now_ms().saturating_sub(since)),
        }
    }

    /// A write returned: stalled (`Pending`) or through.
    fn wrote(&self, stalled: bool) {
        if !stalled {
            self.write_stalled_ms.store(NOT_STALLED, Ordering::Release);
        } else if self.write_stalled_ms.load(Ordering::Acquire) == NOT_STALLED {
            self.write_stalled_ms.store(self.now_ms(), Ordering::Release);
        }
    }

    fn idle_for(&self) -> Duration {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return Duration::ZERO;
        }
        let since_start = Duration::from_millis(self.last_done_ms.load(Ordering::Acquire));
        self.started.elapsed().saturating_sub(since_start)
    }
}

/// One request in flight; ends it on drop. It counts as cancelled when its body broke off
/// (RST_STREAM while the body was being read: the handler answers the error it got) or when it
/// was dropped before [`InFlight::finish`] (hyper drops the handler's future when the client resets
/// the stream or goes away while it runs).
struct InFlight {
    activity: Arc<Activity>,
    body_broken: Arc<AtomicBool>,
    finished: bool,
}

impl InFlight {
    fn start(activity: Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight { activity, body_broken: Arc::default(), finished: false }
    }

    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let a = &self.activity;
        a.last_done_ms.store(a.started.elapsed().as_millis() as u64, Ordering::Release);
        a.in_flight.fetch_sub(1, Ordering::AcqRel);
        let cancelled = !self.finished || self.body_broken.load(Ordering::Acquire);
        if cancelled && a.cancelled.fetch_add(1, Ordering::AcqRel) == a.max_cancelled {
            a.abuse.notify_one();
        }
    }
}

/// The connection's I/O, recording in its [`Activity`] since when a write waits for the peer.
struct WriteWatch<I> {
    inner: I,
    activity: Arc<Activity>,
}

impl<I> WriteWatch<I> {
    fn watched<T>(&self, polled: Poll<T>) -> Poll<T> {
        self.activity.wrote(polled.is_pending());
        polled
    }
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteWatch<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteWatch<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watched(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watched(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watched(polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request body that records in `broken` when reading it fails.
struct WatchedBody {
    inner: Incoming,
    broken: Arc<AtomicBool>,
}

impl hyper::body::Body for WatchedBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Err(_))) = &polled {
            self.broken.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The router, with each request counted in its connection's [`Activity`].
#[derive(Clone)]
struct Tracked {
    app: Router,
    activity: Arc<Activity>,
    peer: SocketAddr,
}

impl tower::Service<Request<Incoming>> for Tracked {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // A Router is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::start(self.activity.clone());
        let broken = in_flight.body_broken.clone();
        let mut request = request.map(|inner| WatchedBody { inner, broken });
        request.extensions_mut().insert(Peer(self.peer));
        let response = tower::ServiceExt::oneshot(self.app.clone(), request);
        Box::pin(async move {
            let response = response.await;
            in_flight.finish();
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_slots_are_counted_per_address_and_given_back() {
        let open = Arc::new(OpenConnections::default());
        let activity = Arc::new(Activity::new(1));
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        let first = open.try_take(a, 2, &activity).unwrap();
        let _second = open.try_take(a, 2, &activity).unwrap();
        assert!(open.try_take(a, 2, &activity).is_none(), "a third from the same address");
        let _other = open.try_take(b, 2, &activity).expect("another address has its own count");
        drop(first);
        assert!(open.try_take(a, 2, &activity).is_some(), "a closed connection frees its slot");
        assert_eq!(open.lock().connections.len(), 2, "the slot taken last was dropped at once");
    }

    #[test]
    fn the_victim_is_the_longest_idle_of_the_address_holding_the_most() {
        let s = Duration::from_secs;
        let candidates = [(1, 1, s(100)), (2, 8, s(5)), (3, 8, s(9)), (4, 2, s(50))];
        assert_eq!(eviction_victim(candidates.into_iter()), Some(3));
        assert_eq!(eviction_victim(std::iter::empty()), None);
    }

    #[test]
    fn only_idle_connections_holding_a_place_are_evicted_and_each_once() {
        let open = Arc::new(OpenConnections::default());
        let places = Arc::new(Semaphore::new(2));
        let busy = Arc::new(Activity::new(1));
        let _request = InFlight::start(busy.clone());
        let busy_slot = open.try_take("127.0.0.1".parse().unwrap(), 8, &busy).unwrap();
        busy_slot.hold(places.clone().try_acquire_owned().unwrap());
        let idle = Arc::new(Activity::new(1));
        let idle_slot = open.try_take("127.0.0.2".parse().unwrap(), 8, &idle).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(open.evict_idle().is_none(), "busy, or not yet holding a place");
        idle_slot.hold(places.clone().try_acquire_owned().unwrap());
        let handed = open.evict_idle().expect("the idle connection's place");
        assert_eq!(places.available_permits(), 0, "handed over, not given back");
        assert!(open.evict_idle().is_none(), "its place is gone: not chosen twice");
        drop((handed, idle_slot, busy_slot));
        assert_eq!(places.available_permits(), 2);
    }

    #[test]
    fn jitter_shortens_by_at_most_a_tenth() {
        let age = Duration::from_secs(600);
        let ages: Vec<Duration> =
            (0..50).map(|port| jittered(age, SocketAddr::from(([10, 0, 0, 1], 40000 + port)))).collect();
        assert!(ages.iter().all(|a| *a <= age && *a >= age - age / 10), "{ages:?}");
        assert!(ages.iter().any(|a| *a != ages[0]), "connections are spread");
    }

    #[test]
    fn cancelled_requests_past_the_limit_notify_once() {
        let activity = Arc::new(Activity::new(2));
        InFlight::start(activity.clone()).finish();
        for _ in 0..2 {
            drop(InFlight::start(activity.clone()));
        }
        assert_eq!(activity.cancelled.load(Ordering::Relaxed), 2);
        // No permit stored yet: the third cancellation stores one.
        drop(InFlight::start(activity.clone()));
        let notified = activity.abuse.notified();
        let mut notified = std::pin::pin!(notified);
        let waker = std::task::Waker::noop();
        assert!(notified.as_mut().poll(&mut Context::from_waker(waker)).is_ready());
        assert_eq!(activity.in_flight.load(Ordering::Relaxed), 0);
    }
}
