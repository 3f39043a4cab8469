//! A small HTTPS test client: tokio-rustls with a client config that trusts only the given CA
//! (so every test proves the served certificate verifies), on hyper's HTTP/1.1 or HTTP/2 client
//! connections. One [`Conn`] is one TCP+TLS connection, so tests control reuse and can look at
//! the certificate a handshake presented.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body, Frame};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt as _};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

pub type ClientBody = BoxBody<Bytes, Infallible>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Http1,
    Http2,
}

pub const BOTH: [Proto; 2] = [Proto::Http1, Proto::Http2];

impl Proto {
    fn alpn(self) -> &'static [u8] {
        match self {
            Proto::Http1 => b"http/1.1",
            Proto::Http2 => b"h2",
        }
    }
}

/// Connects to one server, trusting one CA.
#[derive(Clone)]
pub struct TlsClient {
    addr: SocketAddr,
    server_name: ServerName<'static>,
    roots: Arc<rustls::RootCertStore>,
    versions: &'static [&'static rustls::SupportedProtocolVersion],
    /// PEM certificate chain and key presented when the server asks for a client certificate.
    client_cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
    /// Local address to connect from (another loopback address is another peer to the server).
    source: Option<std::net::IpAddr>,
}

impl TlsClient {
    /// A client for `addr` that verifies the server as `localhost` against `ca_pem`.
    pub fn new(addr: SocketAddr, ca_pem: &[u8]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(cert.expect("CA PEM parses")).expect("CA certificate is acceptable");
        }
        TlsClient {
            addr,
            server_name: ServerName::try_from("localhost").expect("valid name"),
            roots: Arc::new(roots),
            versions: rustls::DEFAULT_VERSIONS,
            client_cert: None,
            source: None,
        }
    }

    /// Connect from this local address (e.g. 127.0.0.2, which Linux routes on loopback).
    pub fn with_source(mut self, ip: std::net::IpAddr) -> Self {
        self.source = Some(ip);
        self
    }

    /// A plain TCP connection to the server from the configured source address.
    pub async fn tcp(&self) -> std::io::Result<TcpStream> {
        match self.source {
            None => TcpStream::connect(self.addr).await,
            Some(ip) => {
                let socket = tokio::net::TcpSocket::new_v4()?;
                socket.bind(SocketAddr::new(ip, 0))?;
                socket.connect(self.addr).await
            }
        }
    }

    /// Offer only these TLS versions.
    pub fn with_versions(mut self, versions: &'static [&'static rustls::SupportedProtocolVersion]) -> Self {
        self.versions = versions;
        self
    }

    /// Present this client certificate (PEM chain and key).
    pub fn with_client_cert(mut self, cert_pem: &[u8], key_pem: &[u8]) -> Self {
        self.client_cert = Some(Arc::new((cert_pem.to_vec(), key_pem.to_vec())));
        self
    }

    /// Verify the server under another name (e.g. `127.0.0.1`).
    pub fn with_server_name(mut self, name: &str) -> Self {
        self.server_name = ServerName::try_from(name.to_owned()).expect("valid server name");
        self
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A verified TLS stream with nothing spoken on it yet, for tests that write raw bytes
    /// (slow or broken HTTP clients).
    pub async fn connect_raw(&self, proto: Proto) -> std::io::Result<TlsStream<TcpStream>> {
        let builder = rustls::ClientConfig::builder_with_protocol_versions(self.versions)
            .with_root_certificates(self.roots.clone());
        let mut config = match &self.client_cert {
            None => builder.with_no_client_auth(),
            Some(pair) => {
                let chain = CertificateDer::pem_slice_iter(&pair.0)
                    .collect::<Result<Vec<_>, _>>()
                    .expect("client certificate PEM");
                let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(&pair.1).expect("client key PEM");
                builder.with_client_auth_cert(chain, key).map_err(std::io::Error::other)?
            }
        };
        config.alpn_protocols = vec![proto.alpn().to_vec()];
        let tcp = self.tcp().await?;
        // As the apiserver's Go client does; with Nagle on, HTTP/2's separate HEADERS and DATA
        // writes wait for a delayed ACK (~40 ms) on every request.
        tcp.set_nodelay(true)?;
        TlsConnector::from(Arc::new(config)).connect(self.server_name.clone(), tcp).await
    }

    /// A new connection speaking `proto` (offered alone in ALPN, and checked to be the one agreed).
    pub async fn connect(&self, proto: Proto) -> std::io::Result<Conn> {
        let tls = self.connect_raw(proto).await?;
        let (_, session) = tls.get_ref();
        assert_eq!(session.alpn_protocol(), Some(proto.alpn()), "ALPN did not agree on {proto:?}");
        let peer_cert = session
            .peer_certificates()
            .and_then(|c| c.first())
            .cloned()
            .expect("server presented a certificate");
        let io = TokioIo::new(tls);
        let sender = match proto {
            Proto::Http1 => {
                let (sender, conn) =
                    hyper::client::conn::http1::handshake(io).await.map_err(std::io::Error::other)?;
                tokio::spawn(conn);
                Sender::H1(sender)
            }
            Proto::Http2 => {
                let (sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(std::io::Error::other)?;
                tokio::spawn(conn);
                Sender::H2(sender)
            }
        };
        Ok(Conn { sender, proto, authority: format!("localhost:{}", self.addr.port()), peer_cert })
    }

    /// POST `body` as JSON to `path` on a new connection.
    pub async fn post_json(&self, proto: Proto, path: &str, body: impl Into<Bytes>) -> Reply {
        let mut conn = self.connect(proto).await.expect("connect");
        conn.request(Method::POST, path, Some("application/json"), body.into()).await.expect("request")
    }
}

enum Sender {
    H1(hyper::client::conn::http1::SendRequest<ClientBody>),
    H2(hyper::client::conn::http2::SendRequest<ClientBody>),
}

/// One open connection.
pub struct Conn {
    sender: Sender,
    proto: Proto,
    authority: String,
    /// The end-entity certificate the server presented in this connection's handshake.
    pub peer_cert: CertificateDer<'static>,
}

impl Conn {
    /// Another handle on the same HTTP/2 connection, for concurrent streams (`None` for
    /// HTTP/1.1, which has one request at a time).
    pub fn h2_stream(&self) -> Option<Conn> {
        match &self.sender {
            Sender::H2(s) => Some(Conn {
                sender: Sender::H2(s.clone()),
                proto: self.proto,
                authority: self.authority.clone(),
                peer_cert: self.peer_cert.clone(),
            }),
            Sender::H1(_) => None,
        }
    }

    /// A request builder with the URI form each protocol expects (origin-form + Host for
    /// HTTP/1.1, absolute for HTTP/2).
    pub fn builder(&self, method: Method, path: &str) -> hyper::http::request::Builder {
        match self.proto {
            Proto::Http1 => {
                Request::builder().method(method).uri(path).header(hyper::header::HOST, &self.authority)
            }
            Proto::Http2 => {
                Request::builder().method(method).uri(format!("https://{}{}", self.authority, path))
            }
        }
    }

    /// A JSON POST to `path` whose body the test feeds piece by piece through the returned
    /// sender (chunked over HTTP/1.1, DATA frames over HTTP/2): a request held in flight.
    pub fn streamed_post(&self, path: &str) -> (tokio::sync::mpsc::Sender<Bytes>, Request<ClientBody>) {
        let (tx, body) = channel_body();
        let request = self
            .builder(Method::POST, path)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(body)
            .expect("valid request");
        (tx, request)
    }

    /// Send a request and read the whole response.
    pub async fn send(&mut self, request: Request<ClientBody>) -> hyper::Result<Reply> {
        let response = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(request).await?
            }
        };
        let (parts, body) = response.into_parts();
        let body = body.collect().await?.to_bytes();
        Ok(Reply { status: parts.status, headers: parts.headers, body })
    }

    /// A request with a complete body and an optional Content-Type.
    pub async fn request(
        &mut self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Bytes,
    ) -> hyper::Result<Reply> {
        let mut builder = self.builder(method, path);
        if let Some(ct) = content_type {
            builder = builder.header(hyper::header::CONTENT_TYPE, ct);
        }
        self.send(builder.body(full(body)).expect("valid request")).await
    }
}

pub fn full(bytes: impl Into<Bytes>) -> ClientBody {
    Full::new(bytes.into()).boxed()
}

/// A request body the test feeds piece by piece (to hold a request in flight).
pub fn channel_body() -> (tokio::sync::mpsc::Sender<Bytes>, ClientBody) {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    (tx, ChannelBody(rx).boxed())
}

struct ChannelBody(tokio::sync::mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// A whole response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// GET over plain HTTP/1.1 (the metrics port): status and body text.
pub async fn http_get(addr: SocketAddr, path: &str) -> (StatusCode, String) {
    try_http_get(addr, None, path).await.unwrap_or_else(|e| panic!("GET {path} on {addr}: {e}"))
}

/// GET over plain HTTP/1.1 on a new connection from `source` (another loopback address is another
/// peer to the server): status and body text, or what went wrong.
pub async fn try_http_get(
    addr: SocketAddr,
    source: Option<IpAddr>,
    path: &str,
) -> Result<(StatusCode, String), String> {
    let tcp = match source {
        None => TcpStream::connect(addr).await,
        Some(ip) => {
            let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
            socket.bind(SocketAddr::new(ip, 0)).map_err(|e| e.to_string())?;
            socket.connect(addr).await
        }
    }
    .map_err(|e| format!("connect: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, ClientBody>(TokioIo::new(tcp))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let request = Request::get(path)
        .header(hyper::header::HOST, addr.to_string())
        .body(full(Bytes::new()))
        .expect("request");
    let response = sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| format!("body: {e}"))?.to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Read until the peer closes (or `limit` passes); what was read and whether it closed.
pub async fn read_until_closed(stream: &mut (impl AsyncRead + Unpin), limit: Duration) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

/// A good review (`super::good_review`) on a new connection of `client`: answered 200 within `limit`?
pub async fn served_within(client: &TlsClient, proto: Proto, limit: Duration) -> Result<(), String> {
    let attempt = async {
        let mut conn = client.connect(proto).await.map_err(|e| format!("connect: {e}"))?;
        let body = Bytes::from(super::good_review("good").to_string());
        let reply = conn
            .request(Method::POST, "/mutate-pod", Some("application/json"), body)
            .await
            .map_err(|e| format!("request: {e}"))?;
        if reply.status == StatusCode::OK { Ok(()) } else { Err(format!("status {}", reply.status)) }
    };
    tokio::time::timeout(limit, attempt).await.unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}
