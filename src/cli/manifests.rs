//! `kruise-admission manifests webhooks|crds|rbac|chart-table`: print what an operator installs,
//! generated from the routing table (see `deploy`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::ValueEnum;

use crate::deploy::{self, DEFAULT_NAMESPACE, DEFAULT_SERVICE, Target, rbac::RbacOptions};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum What {
    /// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration.
    Webhooks,
    /// The CustomResourceDefinitions in `--crds-dir`.
    Crds,
    /// ClusterRoles, Roles and bindings, annotated with the mode that needs each.
    Rbac,
    /// The webhook table the Helm chart renders from (`charts/kruise-admission/files/webhooks.json`).
    ChartTable,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    pub what: What,
    /// The namespace the server runs in (excluded from every webhook, and the Service's namespace).
    #[arg(long, default_value = DEFAULT_NAMESPACE)]
    pub namespace: String,
    /// The Service in front of the server.
    #[arg(long, default_value = DEFAULT_SERVICE)]
    pub service: String,
    /// A PEM CA certificate to put in every entry's `clientConfig.caBundle` (webhooks; for
    /// certificates you provide yourself).
    #[arg(long)]
    pub ca_bundle_file: Option<PathBuf>,
    /// Where Kruise keeps SidecarSet ControllerRevisions (rbac).
    #[arg(long, default_value = "kruise-system")]
    pub kruise_namespace: String,
    /// The Secret self-managed certificates live in (rbac).
    #[arg(long, default_value = "kruise-admission-tls")]
    pub cert_secret: String,
    /// The folder of CRD YAML files (crds).
    #[arg(long, default_value = "manifests/crds")]
    pub crds_dir: PathBuf,
}

/// Print what `args` asks for; an error goes to stderr with exit code 1.
pub fn run(args: Args) -> ExitCode {
    match print(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn print(args: &Args) -> Result<()> {
    let mut target = Target::new(&args.namespace, &args.service);
    if let Some(file) = &args.ca_bundle_file {
        let pem = std::fs::read(file).with_context(|| format!("reading --ca-bundle-file {}", file.display()))?;
        anyhow::ensure!(
            String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----"),
            "--ca-bundle-file {} holds no PEM certificate",
            file.display()
        );
        target.ca_bundle = Some(pem);
    }
    let text = match args.what {
        What::Webhooks => deploy::webhooks_yaml(&target).context("rendering the webhook configurations")?,
        What::Rbac => {
            let options = RbacOptions { kruise_namespace: args.kruise_namespace.clone(), cert_secret: args.cert_secret.clone() };
            deploy::rbac_yaml(&target, &options).context("rendering the RBAC objects")?
        }
        What::ChartTable => deploy::chart_table_json(),
        What::Crds => crds(&args.crds_dir)?,
    };
    std::io::stdout().lock().write_all(text.as_bytes()).context("writing to stdout")
}

/// Every `*.yaml` file in `dir`, in name order, as one stream. A missing folder prints nothing
/// (and says so on stderr): this build has no CRDs to offer.
fn crds(dir: &Path) -> Result<String> {
    if !dir.is_dir() {
        eprintln!("no CRD folder at {} (pass --crds-dir); nothing to print", dir.display());
        return Ok(String::new());
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    files.sort();
    let mut out = String::new();
    for file in files {
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        if !text.trim_start().starts_with("---") {
            out.push_str("---\n");
        }
        out.push_str(&text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
