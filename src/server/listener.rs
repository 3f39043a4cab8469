//! Our own accept loop: TCP → TLS (tokio-rustls) → HTTP/1.1 or HTTP/2 (hyper-util `auto`, chosen
//! by ALPN / the connection preface) → the axum router. Owning the loop is what lets us bound the
//! TLS handshake, refuse new connections the moment shutdown starts and drain the rest.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

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
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            h2_max_concurrent_streams: 256,
            h2_keep_alive_interval: Duration::from_secs(30),
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
    graceful: &GracefulShutdown,
    shutdown: impl Future<Output = ()>,
) {
    let builder = Arc::new(http_builder(limits));
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
        // Latency matters more than packet count for small JSON answers.
        let _ = tcp.set_nodelay(true);
        let (acceptor, builder, app, watcher) = (acceptor.clone(), builder.clone(), app.clone(), graceful.watcher());
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
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
