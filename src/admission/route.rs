//! What one entry of the routing table (`webhooks.rs`) is: its rules, its handler, its failure
//! policy and capability. Kept apart from the table so the handlers' modules (protection builds
//! its own entries) can use these types without importing the table that names them.

use super::Inputs;
use super::draft::Draft;
use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::writes::Effects;
use crate::cluster::Query;

/// The metrics' `kind` label for a request whose kind no rule of its webhook names.
pub const OTHER_KIND: &str = "other";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    Mutating,
    Validating,
}

/// One rule of a webhook registration (admissionregistration.k8s.io/v1 `rules[]`).
#[derive(Debug)]
pub struct Rule {
    pub groups: &'static [&'static str],
    pub versions: &'static [&'static str],
    /// `pods`, or `pods/eviction` for a subresource.
    pub resources: &'static [&'static str],
    /// The kind of the objects `resources` names. Metrics label requests with it, and only with
    /// it: the `kind` a request claims is never a label value (see [`Webhook::metric_kind`]).
    pub kind: &'static str,
    pub operations: &'static [Operation],
}

/// A mutator changes its draft of the object (copy-on-write: what it does not write stays the
/// request's) and returns warnings; the patch is diffed afterwards.
/// What the mutator writes into the draft may borrow from the cluster snapshot in `Inputs` as well
/// as from the request (both outlive the decision).
pub type Mutator =
    for<'a> fn(&AdmissionRequest, &mut Draft<'a>, &Inputs<'a>) -> Result<Effects, AdmissionError>;
/// A validator allows (with warnings) or refuses with an error.
pub type Validator = fn(&AdmissionRequest, &Inputs) -> Result<Effects, AdmissionError>;
/// The live lookups a validator needs answered before it decides (none for most).
pub type Queries = fn(&AdmissionRequest, &Inputs) -> Vec<Query>;

#[derive(Debug, Clone, Copy)]
pub enum Handler {
    Mutate(Mutator),
    Validate(Validator),
}

/// What the apiserver does when the webhook cannot be reached (never applies to a denial).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Pods: a webhook that is down must never block the cluster.
    Ignore,
    /// Protection and in-place rules: letting a request through unchecked defeats their purpose.
    Fail,
}

/// Which objects the registration sends (besides the namespace exclusions every entry gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectScope {
    All,
    /// Only objects labelled `policy.kruise.io/delete-protection` (the protection-only webhooks).
    DeleteProtected,
}

/// What calling the webhook does besides answering (`sideEffects` of the registration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideEffects {
    None,
    /// It writes other objects' status (PodUnavailableBudget, WorkloadSpread), except for a dry-run
    /// request: the API server may then send it dry-run requests too.
    NoneOnDryRun,
}

impl SideEffects {
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffects::None => "None",
            SideEffects::NoneOnDryRun => "NoneOnDryRun",
        }
    }
}

/// A capability an operator can switch off as a whole (its webhook entries and its server logic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Capability {
    /// `/mutate-pod`: SidecarSet injection and the DaemonSet-style stamp.
    PodMutation,
    /// `/validate-pod`: PodUnavailableBudget's check of Pod deletions, evictions and updates.
    PodValidation,
    /// SidecarSet defaulting, hashing and validation.
    #[value(name = "sidecarset-admission")]
    SidecarSetAdmission,
    /// In-place-only rules on CloneSet, Advanced StatefulSet and Advanced DaemonSet.
    WorkloadRules,
    /// `policy.kruise.io/delete-protection`.
    DeleteProtection,
}

impl Capability {
    /// Every capability, in the order the chart lists them.
    pub const ALL: [Capability; 5] = [
        Capability::PodMutation,
        Capability::PodValidation,
        Capability::SidecarSetAdmission,
        Capability::WorkloadRules,
        Capability::DeleteProtection,
    ];

    /// The name flags (`--disable-capability`) and chart values use.
    pub fn name(self) -> &'static str {
        match self {
            Capability::PodMutation => "pod-mutation",
            Capability::PodValidation => "pod-validation",
            Capability::SidecarSetAdmission => "sidecarset-admission",
            Capability::WorkloadRules => "workload-rules",
            Capability::DeleteProtection => "delete-protection",
        }
    }
}

#[derive(Debug)]
pub struct Webhook {
    /// The name in the webhook configuration; Kruise's names, so denials read the same.
    pub name: &'static str,
    pub path: &'static str,
    pub rules: &'static [Rule],
    pub handler: Handler,
    pub queries: Option<Queries>,
    pub failure_policy: FailurePolicy,
    pub scope: ObjectScope,
    pub side_effects: SideEffects,
    pub capability: Capability,
}

impl Webhook {
    /// The metrics' `kind` label for a request that claims `kind`: the kind of one of this
    /// webhook's rules, or [`OTHER_KIND`]. The label set stays bounded by this table whatever
    /// clients send.
    pub fn metric_kind(&self, kind: &str) -> &'static str {
        self.rules.iter().map(|rule| rule.kind).find(|known| *known == kind).unwrap_or(OTHER_KIND)
    }

    pub fn kind(&self) -> WebhookKind {
        match self.handler {
            Handler::Mutate(_) => WebhookKind::Mutating,
            Handler::Validate(_) => WebhookKind::Validating,
        }
    }

    /// Would the apiserver send `request` to this webhook? Matches group, version, resource
    /// (with subresource) and operation like `rules[]` with `matchPolicy: Exact`.
    pub fn matches(&self, request: &AdmissionRequest) -> bool {
        // `pods` matches the main resource only, `pods/eviction` that subresource only.
        let names_request = |rule_resource: &&str| match rule_resource.split_once('/') {
            None => request.sub_resource.is_empty() && *rule_resource == request.resource.resource,
            Some((resource, sub)) => resource == request.resource.resource && sub == request.sub_resource,
        };
        self.rules.iter().any(|rule| {
            rule.groups.contains(&request.resource.group.as_str())
                && rule.versions.contains(&request.resource.version.as_str())
                && rule.resources.iter().any(names_request)
                && rule.operations.contains(&request.operation)
        })
    }
}
