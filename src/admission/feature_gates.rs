//! Kruise v1.9.1's feature gates (`pkg/features/kruise_features.go`): every name kruise-manager's
//! `--feature-gates` accepts, its stage and default, the `AllAlpha` / `AllBeta` toggles of
//! Kubernetes' gate library, and the adjustments kruise-manager makes after parsing its flags
//! (`SetDefaultFeatureGates`). The flags are parsed at the edge (`cli::settings`); decisions read
//! the result from `Settings::gates`. docs/cli.md lists what each gate does here.

/// A gate's stage, which decides what `AllAlpha` / `AllBeta` switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
}

/// Every gate name kruise-manager v1.9.1 accepts, in Kruise's declaration order; the two toggles last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    KruiseDaemon,
    PodWebhook,
    CloneSetShortHash,
    KruisePodReadinessGate,
    PreDownloadImageForInPlaceUpdate,
    CloneSetPartitionRollback,
    ResourcesDeletionProtection,
    PodUnavailableBudgetDeleteGate,
    PodUnavailableBudgetUpdateGate,
    WorkloadSpread,
    DaemonWatchingPod,
    TemplateNoDefaults,
    InPlaceUpdateEnvFromMetadata,
    StatefulSetAutoDeletePVC,
    SidecarSetPatchPodMetadataDefaultsAllowed,
    SidecarTerminator,
    PodProbeMarkerGate,
    PreDownloadImageForDaemonSetUpdate,
    CloneSetEventHandlerOptimization,
    PreparingUpdateAsUpdate,
    ImagePullJobGate,
    ResourceDistributionGate,
    DeletionProtectionForCRDCascadingGate,
    EnhancedLivenessProbe,
    RecreatePodWhenChangeVCTInCloneSetGate,
    StatefulSetStartOrdinal,
    PodIndexLabel,
    EnableExternalCerts,
    StatefulSetAutoResizePVCGate,
    ForceDeleteTimeoutExpectationGate,
    InPlaceWorkloadVerticalScaling,
    EnablePodProbeMarkerOnServerless,
    EnableSortSidecarContainerByName,
    InPlacePodVerticalScaling,
    /// Sets every alpha gate that no flag names.
    AllAlpha,
    /// Sets every beta gate that no flag names.
    AllBeta,
}

use Gate::*;
use Stage::{Alpha, Beta};

/// (gate, Kruise's default, stage), indexed by `Gate as usize`.
const SPECS: [(Gate, bool, Stage); 36] = [
    (KruiseDaemon, true, Beta),
    (PodWebhook, true, Beta),
    (CloneSetShortHash, false, Alpha),
    (KruisePodReadinessGate, false, Alpha),
    (PreDownloadImageForInPlaceUpdate, false, Alpha),
    (CloneSetPartitionRollback, false, Alpha),
    (ResourcesDeletionProtection, false, Beta),
    (PodUnavailableBudgetDeleteGate, true, Beta),
    (PodUnavailableBudgetUpdateGate, false, Alpha),
    (WorkloadSpread, true, Beta),
    (DaemonWatchingPod, true, Beta),
    (TemplateNoDefaults, false, Alpha),
    (InPlaceUpdateEnvFromMetadata, true, Beta),
    (StatefulSetAutoDeletePVC, true, Beta),
    (SidecarSetPatchPodMetadataDefaultsAllowed, false, Alpha),
    (SidecarTerminator, false, Alpha),
    (PodProbeMarkerGate, true, Beta),
    (PreDownloadImageForDaemonSetUpdate, false, Alpha),
    (CloneSetEventHandlerOptimization, false, Alpha),
    (PreparingUpdateAsUpdate, false, Alpha),
    (ImagePullJobGate, false, Alpha),
    (ResourceDistributionGate, false, Alpha),
    (DeletionProtectionForCRDCascadingGate, false, Alpha),
    (EnhancedLivenessProbe, false, Alpha),
    (RecreatePodWhenChangeVCTInCloneSetGate, false, Alpha),
    (StatefulSetStartOrdinal, false, Alpha),
    (PodIndexLabel, true, Beta),
    (EnableExternalCerts, false, Alpha),
    (StatefulSetAutoResizePVCGate, false, Alpha),
    (ForceDeleteTimeoutExpectationGate, false, Alpha),
    (InPlaceWorkloadVerticalScaling, false, Alpha),
    (EnablePodProbeMarkerOnServerless, false, Alpha),
    (EnableSortSidecarContainerByName, false, Alpha),
    (InPlacePodVerticalScaling, false, Alpha),
    (AllAlpha, false, Alpha),
    (AllBeta, false, Beta),
];

impl Gate {
    pub const ALL: [Gate; 36] = {
        let mut all = [AllAlpha; 36];
        let mut i = 0;
        while i < SPECS.len() {
            all[i] = SPECS[i].0;
            i += 1;
        }
        all
    };

    /// The name `--feature-gates` takes (Kruise's `featuregate.Feature` string).
    pub fn name(self) -> &'static str {
        match self {
            KruiseDaemon => "KruiseDaemon",
            PodWebhook => "PodWebhook",
            CloneSetShortHash => "CloneSetShortHash",
            KruisePodReadinessGate => "KruisePodReadinessGate",
            PreDownloadImageForInPlaceUpdate => "PreDownloadImageForInPlaceUpdate",
            CloneSetPartitionRollback => "CloneSetPartitionRollback",
            ResourcesDeletionProtection => "ResourcesDeletionProtection",
            PodUnavailableBudgetDeleteGate => "PodUnavailableBudgetDeleteGate",
            PodUnavailableBudgetUpdateGate => "PodUnavailableBudgetUpdateGate",
            WorkloadSpread => "WorkloadSpread",
            DaemonWatchingPod => "DaemonWatchingPod",
            TemplateNoDefaults => "TemplateNoDefaults",
            InPlaceUpdateEnvFromMetadata => "InPlaceUpdateEnvFromMetadata",
            StatefulSetAutoDeletePVC => "StatefulSetAutoDeletePVC",
            SidecarSetPatchPodMetadataDefaultsAllowed => "SidecarSetPatchPodMetadataDefaultsAllowed",
            SidecarTerminator => "SidecarTerminator",
            PodProbeMarkerGate => "PodProbeMarkerGate",
            PreDownloadImageForDaemonSetUpdate => "PreDownloadImageForDaemonSetUpdate",
            CloneSetEventHandlerOptimization => "CloneSetEventHandlerOptimization",
            PreparingUpdateAsUpdate => "PreparingUpdateAsUpdate",
            ImagePullJobGate => "ImagePullJobGate",
            ResourceDistributionGate => "ResourceDistributionGate",
            DeletionProtectionForCRDCascadingGate => "DeletionProtectionForCRDCascadingGate",
            EnhancedLivenessProbe => "EnhancedLivenessProbe",
            RecreatePodWhenChangeVCTInCloneSetGate => "RecreatePodWhenChangeVCTInCloneSetGate",
            StatefulSetStartOrdinal => "StatefulSetStartOrdinal",
            PodIndexLabel => "PodIndexLabel",
            EnableExternalCerts => "EnableExternalCerts",
            StatefulSetAutoResizePVCGate => "StatefulSetAutoResizePVCGate",
            ForceDeleteTimeoutExpectationGate => "ForceDeleteTimeoutExpectationGate",
            InPlaceWorkloadVerticalScaling => "InPlaceWorkloadVerticalScaling",
            EnablePodProbeMarkerOnServerless => "EnablePodProbeMarkerOnServerless",
            EnableSortSidecarContainerByName => "EnableSortSidecarContainerByName",
            InPlacePodVerticalScaling => "InPlacePodVerticalScaling",
            AllAlpha => "AllAlpha",
            AllBeta => "AllBeta",
        }
    }

    /// The gate `--feature-gates` calls `name` (exact, as Kruise's flag matches it).
    pub fn named(name: &str) -> Option<Gate> {
        Gate::ALL.into_iter().find(|g| g.name() == name)
    }

    pub fn stage(self) -> Stage {
        SPECS[self as usize].2
    }

    /// Kruise's default.
    pub fn kruise_default(self) -> bool {
        SPECS[self as usize].1
    }

    /// The default here: Kruise's, except delete protection, which is on (every capability is on
    /// by default; docs/differences.md#delete-protection).
    pub fn default(self) -> bool {
        self == ResourcesDeletionProtection || self.kruise_default()
    }
}

impl std::fmt::Display for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The value of every gate, as kruise-manager would have them after its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates([bool; 36]);

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates::from_flags(&[])
    }
}

impl FeatureGates {
    /// The gates after `--feature-gates` entries `set` (in flag order; the last entry for a gate
    /// wins), the way kruise-manager computes them: a gate a flag names takes that value; else
    /// `AllAlpha` / `AllBeta`, when given, set the gates of their stage; else the default. Then
    /// `SetDefaultFeatureGates`: gates that need the pod webhook, kruise-daemon or delete protection
    /// go off without them, and pre-downloading images turns image pull jobs on.
    pub fn from_flags(set: &[(Gate, bool)]) -> FeatureGates {
        let named = |gate: Gate| set.iter().rev().find(|(g, _)| *g == gate).map(|(_, v)| *v);
        let mut values = [false; 36];
        for gate in Gate::ALL {
            let toggle = match gate {
                AllAlpha | AllBeta => None,
                _ => named(if gate.stage() == Alpha { AllAlpha } else { AllBeta }),
            };
            values[gate as usize] = named(gate).or(toggle).unwrap_or(gate.default());
        }
        let mut gates = FeatureGates(values);
        if !gates.enabled(PodWebhook) {
            gates.switch_off(&[
                KruisePodReadinessGate,
                PodUnavailableBudgetDeleteGate,
                PodUnavailableBudgetUpdateGate,
                WorkloadSpread,
                SidecarSetPatchPodMetadataDefaultsAllowed,
                EnhancedLivenessProbe,
                EnablePodProbeMarkerOnServerless,
            ]);
        }
        if !gates.enabled(KruiseDaemon) {
            gates.switch_off(&[
                PreDownloadImageForInPlaceUpdate,
                DaemonWatchingPod,
                InPlaceUpdateEnvFromMetadata,
                PreDownloadImageForDaemonSetUpdate,
                PodProbeMarkerGate,
                SidecarTerminator,
                ImagePullJobGate,
                EnhancedLivenessProbe,
            ]);
        }
        if gates.enabled(PreDownloadImageForInPlaceUpdate)
            || gates.enabled(PreDownloadImageForDaemonSetUpdate)
        {
            gates.0[ImagePullJobGate as usize] = true;
        }
        if !gates.enabled(ResourcesDeletionProtection) {
            gates.switch_off(&[DeletionProtectionForCRDCascadingGate]);
        }
        gates
    }

    pub fn enabled(&self, gate: Gate) -> bool {
        self.0[gate as usize]
    }

    fn switch_off(&mut self, gates: &[Gate]) {
        for &gate in gates {
            self.0[gate as usize] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_indexed_by_the_enum() {
        for (i, (gate, _, _)) in SPECS.iter().enumerate() {
            assert_eq!(*gate as usize, i, "{gate}");
            assert_eq!(Gate::named(gate.name()), Some(*gate));
        }
        assert_eq!(Gate::named("podwebhook"), None, "names are exact");
    }

    /// Every gate Kruise declares, read from Kruise's own source when it is on this machine.
    #[test]
    #[ignore = "needs OpenKruise v1.9.1's source under /root/go/pkg/mod"]
    fn every_gate_of_kruise_is_known_with_its_default() {
        let path = "/root/go/pkg/mod/github.com/openkruise/kruise@v1.9.1/pkg/features/kruise_features.go";
        let source = std::fs::read_to_string(path).unwrap();
        // `Ident featuregate.Feature = "Name"` (or `Ident = "Name"`), then `Ident: {Default: .., PreRelease: ..}`.
        let declared = source.lines().filter_map(|l| {
            let (declaration, name) = l.trim().split_once(" = \"")?;
            Some((declaration.split(' ').next()?, name.strip_suffix('"')?))
        });
        let mut count = 0;
        for (ident, name) in declared {
            let gate = Gate::named(name).unwrap_or_else(|| panic!("{name} is not known here"));
            let spec = source
                .lines()
                .find_map(|l| l.trim().strip_prefix(&format!("{ident}:")))
                .unwrap_or_else(|| panic!("no default for {ident}"));
            let expected = format!(
                "{{Default: {}, PreRelease: featuregate.{:?}}},",
                gate.kruise_default(),
                gate.stage()
            );
            assert_eq!(spec.trim(), expected, "{name}");
            count += 1;
        }
        assert_eq!(count, Gate::ALL.len() - 2, "every Kruise gate, plus AllAlpha and AllBeta");
    }

    /// docs/cli.md says what each gate does here.
    #[test]
    fn every_gate_is_documented() {
        let doc = include_str!("../../docs/cli.md");
        for gate in Gate::ALL {
            assert!(doc.contains(&format!("`{gate}`")), "docs/cli.md does not name {gate}");
        }
    }

    #[test]
    fn defaults_are_kruises_but_delete_protection() {
        let gates = FeatureGates::default();
        for gate in Gate::ALL {
            let expected = gate.kruise_default() || gate == ResourcesDeletionProtection;
            assert_eq!(gates.enabled(gate), expected, "{gate}");
        }
        assert!(gates.enabled(PodUnavailableBudgetDeleteGate) && gates.enabled(WorkloadSpread));
        assert!(!gates.enabled(KruisePodReadinessGate) && !gates.enabled(PodUnavailableBudgetUpdateGate));
    }

    #[test]
    fn named_gates_win_over_toggles_and_the_last_entry_wins() {
        let gates = FeatureGates::from_flags(&[(KruisePodReadinessGate, false), (AllAlpha, true)]);
        assert!(!gates.enabled(KruisePodReadinessGate), "named before AllAlpha still wins");
        assert!(gates.enabled(PodUnavailableBudgetUpdateGate) && gates.enabled(EnhancedLivenessProbe));
        assert!(gates.enabled(WorkloadSpread), "beta gates untouched by AllAlpha");
        let gates = FeatureGates::from_flags(&[(AllBeta, false), (PodWebhook, true)]);
        assert!(!gates.enabled(WorkloadSpread) && !gates.enabled(ResourcesDeletionProtection));
        assert!(gates.enabled(PodWebhook));
        let gates = FeatureGates::from_flags(&[(WorkloadSpread, false), (WorkloadSpread, true)]);
        assert!(gates.enabled(WorkloadSpread));
    }

    #[test]
    fn set_default_feature_gates_adjustments() {
        let gates = FeatureGates::from_flags(&[
            (PodWebhook, false),
            (KruisePodReadinessGate, true),
            (PodUnavailableBudgetUpdateGate, true),
        ]);
        for gate in [
            KruisePodReadinessGate,
            PodUnavailableBudgetDeleteGate,
            PodUnavailableBudgetUpdateGate,
            WorkloadSpread,
            SidecarSetPatchPodMetadataDefaultsAllowed,
        ] {
            assert!(!gates.enabled(gate), "{gate} needs the pod webhook");
        }
        let gates =
            FeatureGates::from_flags(&[(KruiseDaemon, false), (PreDownloadImageForInPlaceUpdate, true)]);
        assert!(!gates.enabled(PreDownloadImageForInPlaceUpdate) && !gates.enabled(ImagePullJobGate));
        assert!(!gates.enabled(PodProbeMarkerGate) && !gates.enabled(InPlaceUpdateEnvFromMetadata));
        let gates = FeatureGates::from_flags(&[
            (PreDownloadImageForDaemonSetUpdate, true),
            (ImagePullJobGate, false),
        ]);
        assert!(gates.enabled(ImagePullJobGate), "pre-downloading forces image pull jobs on");
        let gates = FeatureGates::from_flags(&[
            (ResourcesDeletionProtection, false),
            (DeletionProtectionForCRDCascadingGate, true),
        ]);
        assert!(!gates.enabled(DeletionProtectionForCRDCascadingGate));
    }
}
