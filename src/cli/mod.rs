//! The edges: each subcommand turns files, flags or HTTP into calls of the pure decisions.

pub mod dry_run;
mod inputs;
mod line_diff;
pub mod manifests;
mod report;
