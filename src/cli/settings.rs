//! The flags that change decisions, shared by `serve`, `dry-run` and `inject` so all decide alike.

use crate::admission::Settings;
use crate::admission::feature_gates::{FeatureGates, Gate};
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
    /// Kruise's feature gates, as kruise-manager v1.9.1 takes them: `Name=bool` pairs separated by
    /// commas (repeatable). Every gate name of Kruise is accepted, with Kruise's default (delete
    /// protection aside); docs/cli.md says which ones change a decision here.
    #[arg(long = "feature-gates", value_name = "NAME=BOOL,...", value_parser = parse_gates)]
    pub feature_gates: Vec<Vec<(Gate, bool)>>,
    /// Same as `--feature-gates=InPlaceWorkloadVerticalScaling=true`: under InPlaceOnly, also admit
    /// cpu/memory request and limit changes that keep the pod's QoS class.
    #[arg(long)]
    pub inplace_vertical_scaling: bool,
    /// Same as `--feature-gates=SidecarSetPatchPodMetadataDefaultsAllowed=true`: admit SidecarSets
    /// with patchPodMetadata when `kruise-configuration` holds no whitelist.
    #[arg(long)]
    pub sidecarset_patch_pod_metadata_defaults_allowed: bool,
    /// What SidecarSet validation does with a SidecarSet without a namespaceSelector (so it reaches
    /// every namespace) whose sidecars get host access (privileged, added capabilities, privilege
    /// escalation, hostPath volumes): `warn` admits it with a warning per finding, `deny` refuses it.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = Policy::Warn)]
    pub sidecarset_policy: Policy,
}

/// One `--feature-gates` value: `Name=bool` pairs separated by commas, with the booleans Go's
/// `strconv.ParseBool` reads (as kruise-manager's flag does).
fn parse_gates(text: &str) -> Result<Vec<(Gate, bool)>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) =
                pair.split_once('=').ok_or_else(|| format!("{pair:?} is not Name=true or Name=false"))?;
            let gate = Gate::named(name.trim()).ok_or_else(|| unknown_gate(name.trim()))?;
            let value = match value.trim() {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                other => return Err(format!("{name}={other}: the value is not a boolean (true or false)")),
            };
            Ok((gate, value))
        })
        .collect()
}

/// The message for a name kruise-manager does not know, naming the gate it is closest to.
fn unknown_gate(name: &str) -> String {
    let closest = Gate::ALL.into_iter().min_by_key(|g| edit_distance(name, g.name())).map(Gate::name);
    let hint = closest.map(|c| format!("did you mean {c}? ")).unwrap_or_default();
    format!("unknown feature gate {name:?}; {hint}(docs/cli.md lists the gates of kruise-manager v1.9.1)")
}

/// Levenshtein distance, ASCII case-insensitive (a misspelt gate name is short).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.to_ascii_lowercase().into_bytes(), b.to_ascii_lowercase().into_bytes());
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The flags that are aliases of a gate: the flag, its gate, and the value it sets.
const ALIASES: [(&str, Gate, bool); 3] = [
    ("--inplace-vertical-scaling", Gate::InPlaceWorkloadVerticalScaling, true),
    (
        "--sidecarset-patch-pod-metadata-defaults-allowed",
        Gate::SidecarSetPatchPodMetadataDefaultsAllowed,
        true,
    ),
    ("--disable-delete-protection", Gate::ResourcesDeletionProtection, false),
];

impl DecisionArgs {
    fn alias_given(&self, gate: Gate) -> bool {
        match gate {
            Gate::InPlaceWorkloadVerticalScaling => self.inplace_vertical_scaling,
            Gate::SidecarSetPatchPodMetadataDefaultsAllowed => {
                self.sidecarset_patch_pod_metadata_defaults_allowed
            }
            Gate::ResourcesDeletionProtection => self.disable_delete_protection,
            _ => false,
        }
    }

    /// The gates: the `--feature-gates` entries, with each alias flag as an entry for its gate
    /// when no entry names that gate. An alias beside an entry that says the opposite is an error.
    fn gates(&self) -> Result<FeatureGates, String> {
        let mut set: Vec<(Gate, bool)> = self.feature_gates.iter().flatten().copied().collect();
        for (flag, gate, value) in ALIASES {
            if !self.alias_given(gate) {
                continue;
            }
            match set.iter().rev().find(|(g, _)| *g == gate) {
                Some(&(_, named)) if named != value => {
                    return Err(format!(
                        "{flag} contradicts --feature-gates={gate}={named}; give one of them"
                    ));
                }
                Some(_) => {}
                None => set.push((gate, value)),
            }
        }
        Ok(FeatureGates::from_flags(&set))
    }

    /// The settings these flags mean; an error (a usage error, exit 2) when they contradict each other.
    pub fn settings(&self) -> Result<Settings, String> {
        let gates = self.gates()?;
        let mut disabled = self.disabled.clone();
        // Kruise's gates that switch a whole webhook off switch off the capability that serves it.
        if !gates.enabled(Gate::ResourcesDeletionProtection) {
            disabled.push(Capability::DeleteProtection);
        }
        if !gates.enabled(Gate::PodWebhook) {
            disabled.extend([Capability::PodMutation, Capability::PodValidation]);
        }
        disabled.sort_by_key(|c| c.name());
        disabled.dedup();
        Ok(Settings {
            kruise_namespace: self.kruise_namespace.clone(),
            disabled,
            sidecarset_policy: self.sidecarset_policy,
            gates,
        })
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
            let s =
                Cli::parse_from(["x", "--disable-capability", capability.name()]).args.settings().unwrap();
            assert!(!s.enabled(capability), "{}", capability.name());
        }
    }

    #[test]
    fn flags_become_settings() {
        let s = Cli::parse_from(["x"]).args.settings().unwrap();
        assert!(Capability::ALL.iter().all(|&c| s.enabled(c)));
        assert_eq!(s.kruise_namespace, "kruise-system");
        assert!(!s.sidecarset_patch_pod_metadata_defaults_allowed());
        assert!(
            Cli::parse_from(["x", "--sidecarset-patch-pod-metadata-defaults-allowed"])
                .args
                .settings()
                .unwrap()
                .sidecarset_patch_pod_metadata_defaults_allowed()
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
        .settings()
        .unwrap();
        assert!(!s.enabled(Capability::PodMutation));
        assert!(!s.enabled(Capability::DeleteProtection));
        assert!(s.enabled(Capability::WorkloadRules));
        assert_eq!(s.kruise_namespace, "k");
        assert!(!s.inplace_vertical_scaling());
        assert!(
            Cli::parse_from(["x", "--inplace-vertical-scaling"])
                .args
                .settings()
                .unwrap()
                .inplace_vertical_scaling()
        );
    }

    #[test]
    fn feature_gates_set_what_their_aliases_set() {
        let gates = |args: &[&str]| {
            let mut argv = vec!["x"];
            argv.extend_from_slice(args);
            Cli::try_parse_from(argv).map_err(|e| e.to_string()).and_then(|c| c.args.settings())
        };
        let s = gates(&[
            "--feature-gates=InPlaceWorkloadVerticalScaling=true,SidecarSetPatchPodMetadataDefaultsAllowed=True",
        ])
        .unwrap();
        assert!(s.inplace_vertical_scaling() && s.sidecarset_patch_pod_metadata_defaults_allowed());
        assert!(s.enabled(Capability::DeleteProtection));
        let s = gates(&[
            "--feature-gates",
            "ResourcesDeletionProtection=false",
            "--feature-gates=InPlaceWorkloadVerticalScaling=1",
        ])
        .unwrap();
        assert!(!s.enabled(Capability::DeleteProtection) && s.inplace_vertical_scaling());
        // The last entry for a gate wins; an alias agreeing with it is fine.
        let s = gates(&[
            "--feature-gates=InPlaceWorkloadVerticalScaling=true,InPlaceWorkloadVerticalScaling=false",
        ])
        .unwrap();
        assert!(!s.inplace_vertical_scaling());
        assert!(
            gates(&["--inplace-vertical-scaling", "--feature-gates=InPlaceWorkloadVerticalScaling=true"])
                .is_ok()
        );

        let unknown = gates(&["--feature-gates=PodWebhok=false"]).unwrap_err();
        assert!(
            unknown.contains("unknown feature gate \"PodWebhok\"; did you mean PodWebhook?"),
            "{unknown}"
        );
        let unknown = gates(&["--feature-gates=enhancedlivenessprobe=true"]).unwrap_err();
        assert!(unknown.contains("did you mean EnhancedLivenessProbe?"), "names are exact: {unknown}");
        // Every Kruise gate is accepted; the ones with no effect here change nothing.
        for gate in Gate::ALL {
            let s = gates(&[&format!("--feature-gates={gate}=true")]).unwrap();
            assert!(s.gates.enabled(gate) || gate == Gate::AllAlpha || gate == Gate::AllBeta, "{gate}");
        }
        let s = gates(&["--feature-gates=EnhancedLivenessProbe=true,EnablePodProbeMarkerOnServerless=false"])
            .unwrap();
        assert!(s.gates.enabled(Gate::EnhancedLivenessProbe));
        assert!(Capability::ALL.iter().all(|&c| s.enabled(c)));
        // PodWebhook=false is kruise-manager without pod webhooks: pod mutation and validation off,
        // and the gates that need it forced off, whatever the flags say.
        let s = gates(&["--feature-gates=PodWebhook=false,KruisePodReadinessGate=true"]).unwrap();
        assert!(!s.enabled(Capability::PodMutation) && !s.gates.enabled(Gate::KruisePodReadinessGate));
        assert!(!s.enabled(Capability::PodValidation));
        let s = gates(&["--feature-gates=AllAlpha=true"]).unwrap();
        assert!(s.inplace_vertical_scaling() && s.sidecarset_patch_pod_metadata_defaults_allowed());
        assert!(
            gates(&["--feature-gates=InPlaceWorkloadVerticalScaling"]).unwrap_err().contains("not Name=true")
        );
        assert!(
            gates(&["--feature-gates=InPlaceWorkloadVerticalScaling=yes"])
                .unwrap_err()
                .contains("not a boolean")
        );
        let contradiction =
            gates(&["--disable-delete-protection", "--feature-gates=ResourcesDeletionProtection=true"])
                .unwrap_err();
        assert!(contradiction.contains("--disable-delete-protection contradicts"), "{contradiction}");
    }
}
