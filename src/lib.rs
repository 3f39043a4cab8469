//! kruise-admission: an OpenKruise-compatible Kubernetes admission webhook server.
//!
//! `admission` holds the pure decisions; `cluster` the objects they read; `server` and `cli` are
//! the edges (HTTPS, files) that feed them.

pub mod admission;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod deploy;
pub mod server;
