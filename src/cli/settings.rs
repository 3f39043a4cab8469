//! The flags that change decisions, shared by `serve` and `dry-run` so both decide alike.

use crate::admission::Settings;
use crate::admission::sidecarset_rules::host_access::Policy;
use crate::admission::webhooks::Capability;

#[derive(Debug, Clone, clap::Args)]
pub struct DecisionArgs {
    /// Namespace of Kruise's ControllerRevisions and `kruise-configuration` ConfigMap (Kruise's
    /// POD_NAMESPACE).
    #[arg(long, value_name = "NS", default_value = "kruise-system")]
    pub kruise_namespace: String,
    /// Switch a capability off (repeatable). Its webhooks then allow every request unchanged,
    /// with a warning, so a webhook configuration that still calls them never blocks anything.
    #[arg(long = "disable-capability", value_enum, value_name = "CAPABILITY")]
    pub disabled: Vec<Capability>,
    /// Same as `--disable-capability delete-protection`.
    #[arg(long)]
    pub disable_delete_protection: bool,
    /// Under InPlaceOnly, also admit cpu/memory request and limit changes that keep the pod's QoS
    /// class (Kruise's InPlaceWorkloadVerticalScaling gate).
    #[arg(long)]
    pub inplace_vertical_scaling: bool,
    /// Kruise's `SidecarSetPatchPodMetadataDefaultsAllowed` gate: admit SidecarSets with
    /// patchPodMetadata when `kruise-configuration` holds no whitelist.
    #[arg(long)]
    pub sidecarset_patch_pod_metadata_defaults_allowed: bool,
    /// What SidecarSet validation does with a SidecarSet without a namespaceSelector (so it reaches
    /// every namespace) whose sidecars get host access (privileged, added capabilities, privilege
    /// escalation, hostPath volumes): `warn` admits it with a warning per finding, `deny` refuses it.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = Policy::Warn)]
    pub sidecarset_policy: Policy,
}

impl DecisionArgs {
    pub fn settings(&self) -> Settings {
        let mut disabled = self.disabled.clone();
        if self.disable_delete_protection {
            disabled.push(Capability::DeleteProtection);
        }
        disabled.sort_by_key(|c| c.name());
        disabled.dedup();
        Settings {
            kruise_namespace: self.kruise_namespace.clone(),
            disabled,
            inplace_vertical_scaling: self.inplace_vertical_scaling,
            sidecarset_patch_pod_metadata_defaults_allowed: self
                .sidecarset_patch_pod_metadata_defaults_allowed,
            sidecarset_policy: self.sidecarset_policy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: DecisionArgs,
    }

    /// The chart renders `--disable-capability=<Capability::name()>`; every such value must parse.
    #[test]
    fn every_capability_name_is_a_flag_value() {
        for capability in Capability::ALL {
            let s = Cli::parse_from(["x", "--disable-capability", capability.name()]).args.settings();
            assert!(!s.enabled(capability), "{}", capability.name());
        }
    }

    #[test]
    fn flags_become_settings() {
        let s = Cli::parse_from(["x"]).args.settings();
        assert!(Capability::ALL.iter().all(|&c| s.enabled(c)));
        assert_eq!(s.kruise_namespace, "kruise-system");
        assert!(!s.sidecarset_patch_pod_metadata_defaults_allowed);
        assert!(
            Cli::parse_from(["x", "--sidecarset-patch-pod-metadata-defaults-allowed"])
                .args
                .settings()
                .sidecarset_patch_pod_metadata_defaults_allowed
        );
        let s = Cli::parse_from([
            "x",
            "--disable-capability",
            "pod-mutation",
            "--disable-delete-protection",
            "--kruise-namespace",
            "k",
        ])
        .args
        .settings();
        assert!(!s.enabled(Capability::PodMutation));
        assert!(!s.enabled(Capability::DeleteProtection));
        assert!(s.enabled(Capability::WorkloadRules));
        assert_eq!(s.kruise_namespace, "k");
        assert!(!s.inplace_vertical_scaling);
        assert!(
            Cli::parse_from(["x", "--inplace-vertical-scaling"]).args.settings().inplace_vertical_scaling
        );
    }
}
