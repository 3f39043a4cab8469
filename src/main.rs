#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};
use kruise_admission::cli::{certs, dry_run, inject, manifests, serve};

/// `--version`: the version, the commit and the build date (build.rs says where each comes from).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("KRUISE_ADMISSION_REVISION"),
    ", built ",
    env!("KRUISE_ADMISSION_BUILD_DATE"),
    ")"
);

/// OpenKruise-compatible Kubernetes admission webhooks: SidecarSet injection, DaemonSet-style
/// scheduling, in-place update rules and delete protection.
///
/// Exit status, for every subcommand: 0 allowed (or done), 1 denied, 2 bad input or usage.
#[derive(Parser)]
#[command(name = "kruise-admission", version = VERSION)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the admission webhooks over HTTPS.
    Serve(Box<serve::ServeArgs>),
    /// Run AdmissionReviews, manifests or an audit log through the webhooks offline and print the decisions.
    DryRun(dry_run::Args),
    /// Apply SidecarSet injection to the pod templates of workload manifests and print them.
    Inject(inject::Args),
    /// Create (or refresh) a CA and serving certificate in a folder.
    Certs(certs::CertsArgs),
    /// Print install manifests generated from the routing table and the API types (webhooks, crds,
    /// rbac, shadow-rbac, openkruise-rbac, chart-table, chart-rbac).
    Manifests(manifests::Args),
    /// Print a shell completion script (e.g. `source <(kruise-admission completion bash)`).
    Completion { shell: clap_complete::Shell },
}

fn main() -> ExitCode {
    no_transparent_huge_pages();
    // One crypto provider for the whole process, before anything builds a TLS configuration.
    // An error only means it is already installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Serve(args) => exit(serve::run(*args)),
        Command::DryRun(args) => dry_run::run(args),
        Command::Inject(args) => inject::run(args),
        Command::Certs(args) => exit(certs::run(&args)),
        Command::Manifests(args) => manifests::run(args),
        Command::Completion { shell } => completion(shell),
    }
}

/// Keep the resident set close to the heap: mimalloc advises transparent huge pages on its arenas
/// (and hosts set to `always` use them unasked), so one touched byte makes 2 MiB resident. For
/// `serve` that was 25.8 MiB idle instead of 18.5, and a growth of 30–38 MiB instead of 20–21 for one
/// 3 MiB review (docs/PERFORMANCE.md "Peak memory for one admitted request"), against a 256Mi limit. The
/// flag covers the whole process from here on; what failing to set it costs is memory, not
/// correctness, so a refusal is ignored.
fn no_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    let _ = rustix::thread::disable_transparent_huge_pages(true);
}

fn completion(shell: clap_complete::Shell) -> ExitCode {
    // Into memory first: clap_complete panics on a failed write, and a closed stdout is bad output.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kruise-admission", &mut script);
    let mut out = std::io::stdout().lock();
    match std::io::Write::write_all(&mut out, &script).and_then(|()| std::io::Write::flush(&mut out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: cannot write the completion script: {error}");
            ExitCode::from(2)
        }
    }
}

/// Errors of `serve` and `certs` end the process with one line naming what to fix, and status 2
/// (bad input: a flag, a file, a folder, an address that cannot be used).
fn exit(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
