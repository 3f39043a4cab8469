//! The command-line edges: each subcommand's flags and the little glue between them and the
//! library (`server`, `admission`, `cluster`).

mod agreement;
pub mod certs;
mod cluster_folder;
mod colour;
pub mod connections;
pub mod dry_run;
pub mod inject;
mod inputs;
mod line_diff;
mod log_json;
pub mod log_output;
pub mod manifests;
mod report;
pub mod serve;
pub mod settings;
