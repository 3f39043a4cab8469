//! Pure admission decisions. Nothing in here touches the network, the filesystem, the system clock
//! or a random source directly: every decision gets an [`Inputs`] with what it may read.

pub mod agreement;
pub mod daemon;
pub mod draft;
pub mod feature_gates;
pub mod generated;
pub mod injection;
pub mod inplace;
pub mod patch;
pub mod pending_decisions;
pub mod pod;
pub mod pod_validation;
pub mod protection;
pub mod pub_budget;
pub mod review;
pub mod review_cost;
pub mod route;
pub mod shadow;
pub mod sidecarset_rules;
pub mod webhooks;
pub mod workload_spread;
pub mod writes;

use time::OffsetDateTime;

use crate::cluster::{Answers, Snapshot};
use webhooks::Capability;

/// Where decisions get the current time from. `dry-run --now` fixes it.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> OffsetDateTime;
}

/// The real clock, truncated to whole seconds as Kubernetes timestamps are.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        let now = OffsetDateTime::now_utc();
        now.replace_nanosecond(0).unwrap_or(now)
    }
}

/// A clock that always answers the same instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub OffsetDateTime);

impl Clock for FixedClock {
    fn now(&self) -> OffsetDateTime {
        self.0
    }
}

/// Uniform draws in `[0, 1)`, for SidecarSet percentage partitions. Injected so tests and
/// `dry-run` are deterministic.
pub trait Random: Send + Sync {
    fn uniform(&self) -> f64;
}

/// The thread-local generator, for `serve`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRandom;

impl Random for ThreadRandom {
    fn uniform(&self) -> f64 {
        rand::random::<f64>()
    }
}

/// A seeded generator (dry-run and tests): the same seed gives the same draws in the same order.
#[derive(Debug)]
pub struct SeededRandom(std::sync::Mutex<rand::rngs::StdRng>);

impl SeededRandom {
    pub fn new(seed: u64) -> Self {
        use rand::SeedableRng as _;
        SeededRandom(std::sync::Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)))
    }
}

impl Random for SeededRandom {
    fn uniform(&self) -> f64 {
        use rand::Rng as _;
        // A poisoned lock only means another draw panicked; the generator state is still usable.
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rng.random::<f64>()
    }
}

/// Operator settings that change decisions. Set from flags; the same for `serve` and `dry-run`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where ControllerRevisions and the `kruise-configuration` ConfigMap live (Kruise's
    /// `POD_NAMESPACE`, default `kruise-system`).
    pub kruise_namespace: String,
    /// Capabilities switched off with `--disable-capability` (everything is on by default,
    /// delete protection included, unlike Kruise's gate). A disabled capability's webhooks allow
    /// everything, so a configuration that still sends to them never blocks a request.
    pub disabled: Vec<Capability>,
    /// `--sidecarset-policy`: what `vsidecarset` does with a SidecarSet that reaches every
    /// namespace and gives host access (a warning by default; [`sidecarset_rules::host_access`]).
    pub sidecarset_policy: sidecarset_rules::host_access::Policy,
    /// Kruise's feature gates (`--feature-gates`, and the flags that are their aliases).
    pub gates: feature_gates::FeatureGates,
}

impl Settings {
    pub fn enabled(&self, capability: Capability) -> bool {
        !self.disabled.contains(&capability)
    }

    /// `InPlaceWorkloadVerticalScaling` (`--inplace-vertical-scaling`; off by default, as in Kruise):
    /// under InPlaceOnly, also admit cpu/memory request and limit changes that keep the pod's QoS
    /// class (docs/workloads.md#2-5-vertical-scaling).
    pub fn inplace_vertical_scaling(&self) -> bool {
        self.gates.enabled(feature_gates::Gate::InPlaceWorkloadVerticalScaling)
    }

    /// `SidecarSetPatchPodMetadataDefaultsAllowed` (default off): admit SidecarSets with
    /// patchPodMetadata when `kruise-configuration` has no whitelist.
    pub fn sidecarset_patch_pod_metadata_defaults_allowed(&self) -> bool {
        self.gates.enabled(feature_gates::Gate::SidecarSetPatchPodMetadataDefaultsAllowed)
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            kruise_namespace: "kruise-system".into(),
            disabled: Vec::new(),
            sidecarset_policy: sidecarset_rules::host_access::Policy::Warn,
            gates: feature_gates::FeatureGates::default(),
        }
    }
}

impl Inputs<'_> {
    /// The clock's time as Kubernetes writes a `metav1.Time`: RFC 3339 in UTC, whole seconds.
    pub fn timestamp(&self) -> Result<String, review::AdmissionError> {
        let now = self.clock.now().to_offset(time::UtcOffset::UTC);
        now.format(time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z"))
            .map_err(|e| review::AdmissionError::Internal(format!("cannot format the current time: {e}")))
    }
}

/// Everything a decision may read.
pub struct Inputs<'a> {
    /// The cached cluster objects (SidecarSets, Namespaces, ControllerRevisions, ...).
    pub cluster: &'a Snapshot,
    /// Answers to the live lookups the webhook asked for before deciding (see `cluster::Query`).
    pub answers: &'a Answers,
    pub clock: &'a dyn Clock,
    pub random: &'a dyn Random,
    pub settings: &'a Settings,
}
