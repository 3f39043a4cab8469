use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kruise_admission::cli;

/// OpenKruise-compatible Kubernetes admission webhooks: SidecarSet injection, DaemonSet-style
/// scheduling, in-place update rules and delete protection.
#[derive(Debug, Parser)]
#[command(name = "kruise-admission", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run AdmissionReview files through the webhooks offline and print the decisions.
    DryRun(cli::dry_run::Args),
    /// Apply SidecarSet injection to the pod templates of workload manifests and print them.
    Inject(cli::inject::Args),
    /// Print install manifests generated from the routing table (webhooks, crds, rbac, chart-table).
    Manifests(cli::manifests::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::DryRun(args) => cli::dry_run::run(args),
        Command::Inject(args) => cli::inject::run(args),
        Command::Manifests(args) => cli::manifests::run(args),
    }
}
