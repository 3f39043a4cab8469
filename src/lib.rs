//! kruise-admission: an OpenKruise-compatible Kubernetes admission webhook server.
//!
//! `admission` holds the pure decisions; `cluster` the objects they read; `server` and `cli` are
//! the edges (HTTPS, files) that feed them. `tls_material` (certificates and keys) sits at the
//! bottom with `api`: any layer may use it, and it uses neither.

// Nothing here needs unsafe code; the few places that would (the allocator, TLS, the runtime)
// live in audited dependencies.
#![forbid(unsafe_code)]
// A function past 80 lines (clippy.toml) is split, or says at an `allow` why it stays whole.
#![warn(clippy::too_many_lines)]

pub mod admission;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod deploy;
pub mod server;
pub mod tls_material;

/// mimalloc for every binary that links this crate (the server, the CLI, tests, benches), so what
/// the benches measure is what `serve` runs. A mutating decision is allocation-bound: it copies and
/// diffs JSON trees of a few thousand nodes, and glibc malloc spent about 60% of `decide`'s
/// instructions (callgrind, docs/PERFORMANCE.md). `--no-default-features` measures without it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
