//! The edges: each subcommand turns files, flags or HTTP into calls of the pure decisions.

pub mod dry_run;
pub mod inject;
mod inputs;
mod line_diff;
pub mod manifests;
mod report;
