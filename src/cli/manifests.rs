//! `kruise-admission manifests webhooks|crds|rbac|shadow-rbac|openkruise-rbac|chart-table|chart-rbac`: print what an operator installs,
//! generated from the routing table (see `deploy`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::ValueEnum;

use crate::deploy::{self, DEFAULT_NAMESPACE, DEFAULT_SERVICE, Registration, Target, rbac::RbacOptions};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum What {
    /// The MutatingWebhookConfiguration and ValidatingWebhookConfiguration.
    Webhooks,
    /// The CustomResourceDefinitions, generated from the API types (what `manifests/components/sidecarset-crd/` holds).
    Crds,
    /// ClusterRoles, Roles and bindings, annotated with the mode that needs each.
    Rbac,
    /// What `serve --shadow` in live mode needs besides `rbac` (its Pod-creation watch;
    /// `manifests/components/shadow/rbac.yaml`). `rbac --shadow` includes it.
    ShadowRbac,
    /// What live mode needs besides `rbac` on a cluster that runs OpenKruise: the Role in the Kruise
    /// namespace (`manifests/components/openkruise/rbac.yaml`). `rbac --openkruise` includes it.
    OpenkruiseRbac,
    /// The webhook table the Helm chart renders from (`charts/kruise-admission/files/webhooks.json`).
    ChartTable,
    /// The RBAC objects the Helm chart renders from, with placeholders for release values
    /// (`charts/kruise-admission/files/rbac.json`).
    ChartRbac,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    pub what: What,
    /// The namespace the server runs in (excluded from every webhook, and the Service's namespace).
    #[arg(short = 'n', long, default_value = DEFAULT_NAMESPACE)]
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
    /// Shadow registration, for `serve --shadow` next to kruise-manager (webhooks: both
    /// configurations named kruise-admission-shadow, entries `<name>.shadow.kruise-admission.dev`,
    /// failurePolicy Ignore, timeoutSeconds 2; rbac: self-managed certificates patch those
    /// configurations, and the Pod watch of the live agreement is granted).
    #[arg(long)]
    pub shadow: bool,
    /// rbac: include the Role in the Kruise namespace (ControllerRevisions, kruise-configuration),
    /// which only a cluster that runs OpenKruise has.
    #[arg(long)]
    pub openkruise: bool,
}

/// Print what `args` asks for; an error (a flag that does not apply, an unreadable file) goes to
/// stderr with exit status 2, as bad input does in every subcommand.
pub fn run(args: Args) -> ExitCode {
    match print(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn print(args: &Args) -> Result<()> {
    let mut target = Target::new(&args.namespace, &args.service);
    if let Some(file) = &args.ca_bundle_file {
        let pem =
            std::fs::read(file).with_context(|| format!("reading --ca-bundle-file {}", file.display()))?;
        anyhow::ensure!(
            String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----"),
            "--ca-bundle-file {} holds no PEM certificate",
            file.display()
        );
        target.ca_bundle = Some(pem);
    }
    let registration = if args.shadow { Registration::Shadow } else { Registration::Enforcing };
    anyhow::ensure!(
        !args.openkruise || args.what == What::Rbac,
        "--openkruise applies to `manifests rbac` only (the chart has its own value, kruiseNamespaceRole)"
    );
    anyhow::ensure!(
        !args.shadow || matches!(args.what, What::Webhooks | What::Rbac | What::ShadowRbac),
        "--shadow applies to `manifests webhooks` and `manifests rbac` only (the chart has its own value, shadow.enabled)"
    );
    let text = match args.what {
        What::Webhooks => {
            deploy::webhooks_yaml(&target, registration).context("rendering the webhook configurations")?
        }
        What::Rbac | What::ShadowRbac | What::OpenkruiseRbac => {
            let options = RbacOptions {
                kruise_namespace: args.kruise_namespace.clone(),
                cert_secret: args.cert_secret.clone(),
                webhook_configurations: registration.configuration_name().to_owned(),
                shadow: args.shadow,
                openkruise: args.openkruise,
                ..RbacOptions::default()
            };
            match args.what {
                What::ShadowRbac => deploy::shadow_rbac_yaml(&target, &options),
                What::OpenkruiseRbac => deploy::openkruise_rbac_yaml(&target, &options),
                _ => deploy::rbac_yaml(&target, &options),
            }
            .context("rendering the RBAC objects")?
        }
        What::ChartTable => deploy::chart_table_json(),
        What::ChartRbac => deploy::chart_rbac_json(),
        What::Crds => crate::api::crd::sidecarset_crd_yaml(),
    };
    std::io::stdout().lock().write_all(text.as_bytes()).context("writing to stdout")
}
