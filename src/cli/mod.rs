//! The edges of each subcommand: flags in, files and stdout out.

pub mod manifests;
