//! Our own accept loop: TCP → TLS (tokio-rustls) → HTTP/1.1 or HTTP/2 (hyper-util `auto`, chosen
//! by ALPN / the connection preface) → the axum router. Owning the loop is what lets us bound the
//! TLS handshake, refuse new connections the moment shutdown starts and drain the rest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use super::metrics::Metrics;

/// Per-connection limits against slow or greedy clients.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Time for a client to finish the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time for an HTTP/1.1 client to send a request's headers (slowloris).
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub h2_max_concurrent_streams: u32,
    /// HTTP/2 PING interval; a peer that does not answer within the same time is dropped.
    pub h2_keep_alive_interval: Duration,
    /// Open connections (TLS handshakes included). An idle HTTP/2 connection that answers pings
    /// is never closed by the server, so without a bound a client could exhaust file
    /// descriptors; past it, new connections are closed at once and counted.
    pub max_connections: usize,
}

/// The apiserver keeps a handful of HTTP/2 connections per replica; thousands leave room for
/// many apiservers and scrapers while staying well inside a container's usual file limit.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            h2_max_concurrent_streams: 256,
            h2_keep_alive_interval: Duration::from_secs(30),
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

fn http_builder(limits: &ConnLimits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).keep_alive(true).header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.h2_max_concurrent_streams)
        .keep_alive_interval(limits.h2_keep_alive_interval)
        .keep_alive_timeout(limits.h2_keep_alive_interval);
    builder
}

/// Accept connections until `shutdown` resolves, then drop the listener (new connections are
/// refused from then on). Each connection is registered with `graceful` so the caller can drain.
pub async fn accept_until(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    limits: &ConnLimits,
    metrics: &Metrics,
    graceful: &GracefulShutdown,
    shutdown: impl Future<Output = ()>,
) {
    let builder = Arc::new(http_builder(limits));
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut last_refusal_logged: Option<Instant> = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            biased;
            () = &mut shutdown => return,
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
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics.http_error("connection_limit");
            if last_refusal_logged.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
                tracing::warn!(%peer, max_connections = limits.max_connections, "connection refused: too many open connections");
                last_refusal_logged = Some(Instant::now());
            }
            drop(tcp);
            continue;
        };
        // Latency matters more than packet count for small JSON answers.
        let _ = tcp.set_nodelay(true);
        let (acceptor, builder, app, watcher) = (acceptor.clone(), builder.clone(), app.clone(), graceful.watcher());
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let connection = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
            if let Err(error) = watcher.watch(connection).await {
                tracing::debug!(%peer, %error, "connection closed with an error");
            }
        });
    }
}
