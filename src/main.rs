use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kruise_admission::cli::{certs, serve};

/// OpenKruise-compatible Kubernetes admission webhook server.
#[derive(Parser)]
#[command(name = "kruise-admission", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the admission webhooks over HTTPS.
    Serve(serve::ServeArgs),
    /// Create (or refresh) a CA and serving certificate in a folder.
    Certs(certs::CertsArgs),
}

fn main() -> ExitCode {
    // One crypto provider for the whole process, before anything builds a TLS configuration.
    // An error only means it is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Serve(args) => run_serve(args),
        Command::Certs(args) => run_certs(&args),
    }
}

fn run_serve(args: serve::ServeArgs) -> ExitCode {
    exit(serve::run(args))
}

fn run_certs(args: &certs::CertsArgs) -> ExitCode {
    exit(certs::run(args))
}

fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
