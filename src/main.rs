//! The `kruise-admission` binary: one small function per subcommand, in `cli`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kruise_admission::cli;

#[derive(Debug, Parser)]
#[command(name = "kruise-admission", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print install manifests generated from the routing table (webhooks, crds, rbac, chart-table).
    Manifests(cli::manifests::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Manifests(args) => cli::manifests::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
