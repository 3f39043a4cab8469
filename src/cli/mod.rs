//! The command-line edges: each subcommand's flags and the little glue between them and the
//! library (`server`, `admission`, `cluster`).

pub mod certs;
pub mod dry_run;
pub mod manifests;
pub mod serve;
pub mod settings;
