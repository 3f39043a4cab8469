//! Start the real server on 127.0.0.1 (ephemeral ports) with a generated CA, for integration tests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kruise_admission::cli::certs::{self, CertPaths};
use kruise_admission::server::{Server, ServerConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::client::TlsClient;

pub struct TestServer {
    pub https: SocketAddr,
    pub metrics: SocketAddr,
    pub certs: CertPaths,
    pub cluster_dir: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<anyhow::Result<()>>>,
    // Last, so the folder outlives the server task.
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Start with a fresh CA and a cluster folder holding the `default` Namespace; `configure`
    /// may change anything else. Reloads are polled every 100 ms to keep tests quick.
    pub async fn start_with(configure: impl FnOnce(&mut ServerConfig)) -> Self {
        super::raise_open_file_limit();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("temporary folder");
        let (paths, _) = certs::ensure(&dir.path().join("certs"), &[]).expect("generate certificates");
        let cluster_dir = dir.path().join("cluster");
        std::fs::create_dir(&cluster_dir).expect("cluster folder");
        std::fs::write(
            cluster_dir.join("namespaces.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n",
        )
        .expect("write");
        let mut config = ServerConfig::new(paths.cert.clone(), paths.key.clone(), cluster_dir.clone());
        config.reload_interval = Duration::from_millis(100);
        configure(&mut config);
        let server = Server::bind(config).await.expect("server binds");
        let (https, metrics) = (server.https_addr(), server.metrics_addr());
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        TestServer {
            https,
            metrics,
            certs: paths,
            cluster_dir,
            shutdown: Some(tx),
            handle: Some(handle),
            _dir: dir,
        }
    }

    /// A client that trusts this server's CA.
    pub fn client(&self) -> TlsClient {
        let ca = std::fs::read(&self.certs.ca_cert).expect("read ca.crt");
        TlsClient::new(self.https, &ca)
    }

    /// Start the shutdown (stop accepting, drain) without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Shut down and wait until the server task returns.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.begin_shutdown();
        match self.handle.take() {
            Some(handle) => handle.await?,
            None => Ok(()),
        }
    }

    /// Whether the server task has returned (after a shutdown it waits for in-flight requests).
    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Wait for a shutdown started with [`TestServer::begin_shutdown`] to finish.
    pub async fn join(&mut self) -> anyhow::Result<()> {
        match self.handle.take() {
            Some(handle) => handle.await?,
            None => Ok(()),
        }
    }
}
