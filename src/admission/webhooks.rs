//! The one routing table: which paths this binary serves, which requests each webhook receives,
//! and what runs for it. `serve` routes HTTP paths from it, `dry-run` picks the webhooks the
//! apiserver would call from it, and the webhook configurations are generated from it, so the three
//! cannot disagree.

use serde_json::Value;

use super::draft::Draft;
use super::patch::{diff_draft, diff_json};
use super::review::{AdmissionError, AdmissionRequest, Decision, Operation};
use super::writes::Effects;
use super::{Inputs, inplace, pod, pod_validation, protection, sidecarset_rules};
use crate::api::tree::Json;
use crate::cluster::{Answers, Query};

// The table's entry types live in `route.rs`; callers name them through the table.
pub use super::route::{
    Capability, FailurePolicy, Handler, ObjectScope, Rule, SideEffects, Webhook, WebhookKind,
};
use super::route::{Mutator, Validator};

const CREATE: &[Operation] = &[Operation::Create];
const DELETE: &[Operation] = &[Operation::Delete];
const CREATE_UPDATE: &[Operation] = &[Operation::Create, Operation::Update];
const UPDATE_DELETE: &[Operation] = &[Operation::Update, Operation::Delete];
const CREATE_UPDATE_DELETE: &[Operation] = &[Operation::Create, Operation::Update, Operation::Delete];
const KRUISE: &[&str] = &["apps.kruise.io"];
const KRUISE_VERSIONS: &[&str] = &["v1alpha1", "v1beta1"];

/// Kruise registers CloneSet and Advanced StatefulSet validation with DELETE on one path: DELETE is
/// delete protection, everything else the workload rules.
fn workload_or_delete(
    request: &AdmissionRequest,
    inputs: &Inputs,
    validate: Validator,
) -> Result<Effects, AdmissionError> {
    match request.operation {
        Operation::Delete => protection::check_delete(request, inputs),
        _ => validate(request, inputs),
    }
}

fn validate_cloneset(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    workload_or_delete(request, inputs, inplace::cloneset::validate)
}

fn validate_statefulset(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    workload_or_delete(request, inputs, inplace::statefulset::validate)
}

/// SidecarSet admission (mutating and validating): both served versions, CREATE and UPDATE.
const SIDECARSET_RULES: &[Rule] = &[Rule {
    groups: KRUISE,
    versions: sidecarset_rules::VERSIONS,
    resources: &["sidecarsets"],
    kind: "SidecarSet",
    operations: CREATE_UPDATE,
}];

/// Every webhook this binary serves.
pub static WEBHOOKS: &[Webhook] = &[
    Webhook {
        name: "mpod.kb.io",
        path: "/mutate-pod",
        rules: &[Rule {
            groups: &[""],
            versions: &["v1"],
            resources: &["pods"],
            kind: "Pod",
            operations: CREATE,
        }],
        handler: Handler::Mutate(pod::mutate),
        queries: None,
        failure_policy: FailurePolicy::Ignore,
        scope: ObjectScope::All,
        side_effects: SideEffects::NoneOnDryRun,
        capability: Capability::PodMutation,
    },
    // Kruise registers this path twice, `vpod.kb.io` for pods and `vpodeviction.kb.io` for
    // evictions; one entry with both rules keeps one name per path (denials name no webhook).
    Webhook {
        name: "vpod.kb.io",
        path: "/validate-pod",
        rules: &[
            Rule {
                groups: &[""],
                versions: &["v1"],
                resources: &["pods"],
                kind: "Pod",
                operations: UPDATE_DELETE,
            },
            Rule {
                groups: &[""],
                versions: &["v1"],
                resources: &["pods/eviction"],
                kind: "Eviction",
                operations: CREATE,
            },
        ],
        handler: Handler::Validate(pod_validation::validate),
        queries: Some(pod_validation::queries),
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::NoneOnDryRun,
        capability: Capability::PodValidation,
    },
    Webhook {
        name: "msidecarset.kb.io",
        path: "/mutate-apps-kruise-io-sidecarset",
        rules: SIDECARSET_RULES,
        handler: Handler::Mutate(sidecarset_rules::mutate),
        queries: None,
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::None,
        capability: Capability::SidecarSetAdmission,
    },
    Webhook {
        name: "vsidecarset.kb.io",
        path: "/validate-apps-kruise-io-sidecarset",
        rules: SIDECARSET_RULES,
        handler: Handler::Validate(sidecarset_rules::validate),
        queries: None,
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::None,
        capability: Capability::SidecarSetAdmission,
    },
    // Delete protection (docs/workloads.md#4-5-webhook-wiring): DELETE only. CloneSet and Advanced
    // StatefulSet DELETE arrive on their in-place validators, which call `protection::check_delete`.
    protection::webhook(
        "vnamespace.kb.io",
        "/validate-namespace",
        &[Rule {
            groups: &[""],
            versions: &["v1"],
            resources: &["namespaces"],
            kind: "Namespace",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vcustomresourcedefinition.kb.io",
        "/validate-customresourcedefinition",
        &[Rule {
            groups: &["apiextensions.k8s.io"],
            versions: &["v1", "v1beta1"],
            resources: &["customresourcedefinitions"],
            kind: "CustomResourceDefinition",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vbuiltindeployment.kb.io",
        "/validate-apps-deployment",
        &[Rule {
            groups: &["apps"],
            versions: &["v1"],
            resources: &["deployments"],
            kind: "Deployment",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vbuiltinreplicaset.kb.io",
        "/validate-apps-replicaset",
        &[Rule {
            groups: &["apps"],
            versions: &["v1"],
            resources: &["replicasets"],
            kind: "ReplicaSet",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vbuiltinstatefulset.kb.io",
        "/validate-apps-statefulset",
        &[Rule {
            groups: &["apps"],
            versions: &["v1"],
            resources: &["statefulsets"],
            kind: "StatefulSet",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vservice.kb.io",
        "/validate-service",
        &[Rule {
            groups: &[""],
            versions: &["v1"],
            resources: &["services"],
            kind: "Service",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    protection::webhook(
        "vingress.kb.io",
        "/validate-ingress",
        &[Rule {
            groups: &["networking.k8s.io"],
            versions: &["v1", "v1beta1"],
            resources: &["ingresses"],
            kind: "Ingress",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    // Kruise's UnitedDeployment validator also checks CREATE and UPDATE; this binary only protects
    // deletions, so it registers DELETE and, like the other protection-only entries, only for
    // labelled objects. Widen both if UnitedDeployment validation is ever added.
    protection::webhook(
        "vuniteddeployment.kb.io",
        "/validate-apps-kruise-io-v1alpha1-uniteddeployment",
        &[Rule {
            groups: KRUISE,
            versions: KRUISE_VERSIONS,
            resources: &["uniteddeployments"],
            kind: "UnitedDeployment",
            operations: DELETE,
        }],
        ObjectScope::DeleteProtected,
    ),
    Webhook {
        name: "vcloneset.kb.io",
        path: "/validate-apps-kruise-io-v1alpha1-cloneset",
        rules: &[Rule {
            groups: KRUISE,
            versions: KRUISE_VERSIONS,
            resources: &["clonesets"],
            kind: "CloneSet",
            operations: CREATE_UPDATE_DELETE,
        }],
        handler: Handler::Validate(validate_cloneset),
        queries: Some(inplace::cloneset::queries),
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::None,
        capability: Capability::WorkloadRules,
    },
    Webhook {
        name: "vstatefulset.kb.io",
        path: "/validate-apps-kruise-io-statefulset",
        rules: &[Rule {
            groups: KRUISE,
            versions: KRUISE_VERSIONS,
            resources: &["statefulsets"],
            kind: "StatefulSet",
            operations: CREATE_UPDATE_DELETE,
        }],
        handler: Handler::Validate(validate_statefulset),
        queries: None,
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::None,
        capability: Capability::WorkloadRules,
    },
    Webhook {
        name: "vdaemonset.kb.io",
        path: "/validate-apps-kruise-io-daemonset",
        rules: &[Rule {
            groups: KRUISE,
            versions: KRUISE_VERSIONS,
            resources: &["daemonsets"],
            kind: "DaemonSet",
            operations: CREATE_UPDATE,
        }],
        handler: Handler::Validate(inplace::daemonset::validate),
        queries: None,
        failure_policy: FailurePolicy::Fail,
        scope: ObjectScope::All,
        side_effects: SideEffects::None,
        capability: Capability::WorkloadRules,
    },
];

pub fn by_path(path: &str) -> Option<&'static Webhook> {
    WEBHOOKS.iter().find(|w| w.path == path)
}

/// The webhooks the apiserver would call for `request`, mutating ones first (the apiserver runs
/// all mutating admission before validating admission), each group in table order.
pub fn matching<'r>(request: &'r AdmissionRequest<'_>) -> impl Iterator<Item = &'static Webhook> + 'r {
    let of = move |kind| WEBHOOKS.iter().filter(move |w| w.kind() == kind && w.matches(request));
    of(WebhookKind::Mutating).chain(of(WebhookKind::Validating))
}

/// The outcome of one webhook call: the decision and, for mutating webhooks, the object after it.
pub struct Outcome<'a> {
    pub decision: Decision<'a>,
    pub mutated: Option<Value>,
}

impl Outcome<'_> {
    /// The outcome with its patch's borrowed strings copied, to keep past the request.
    pub fn into_owned(self) -> Outcome<'static> {
        Outcome { decision: self.decision.into_owned(), mutated: self.mutated }
    }
}

/// The lookups `webhook` asks for before it decides `request` (none for most webhooks): the first
/// of a decision's two steps. The edge answers them (from the snapshot, or from the API server in
/// live mode) and passes the answers to [`run`] or [`decide`] in `inputs.answers`; `inputs.answers`
/// is not read here.
pub fn queries(webhook: &Webhook, request: &AdmissionRequest, inputs: &Inputs) -> Vec<Query> {
    webhook.queries.map(|queries| queries(request, inputs)).unwrap_or_default()
}

/// A whole decision offline (`dry-run`, `inject`, tests): [`queries`] answered from the snapshot
/// in `inputs.cluster`, then [`run`]; what `serve` does in folder mode. Owned: the answers it
/// decided on are its own.
pub fn run_offline(webhook: &Webhook, request: &AdmissionRequest<'_>, inputs: &Inputs) -> Outcome<'static> {
    let answers = Answers::from_snapshot(inputs.cluster, &queries(webhook, request, inputs));
    run(webhook, request, &Inputs { answers: &answers, ..*inputs }).into_owned()
}

/// The calls the API server makes for one request, offline ([`run_offline`] each): the webhooks of
/// `chain` in order (mutating ones first, as [`matching`] orders them), each mutating webhook seeing
/// the previous one's object and validating ones the final object; a mutating denial ends the
/// chain, validating webhooks all run (the API server calls them in parallel). `request.object`
/// ends as the object after the mutating calls; `each` sees every call's decision.
pub fn run_chain_offline(
    chain: &[&Webhook],
    request: &mut AdmissionRequest<'_>,
    inputs: &Inputs,
    mut each: impl FnMut(&Webhook, &AdmissionRequest<'_>, Decision<'static>),
) {
    for webhook in chain {
        let outcome = run_offline(webhook, request, inputs);
        if let Some(mutated) = outcome.mutated {
            request.object = Some(Json::from(mutated));
        }
        let stop = !outcome.decision.allowed && webhook.kind() == WebhookKind::Mutating;
        each(webhook, request, outcome.decision);
        if stop {
            break;
        }
    }
}

/// Run `webhook` on `request`. Pure: everything it reads is in `inputs`.
pub fn run<'a>(webhook: &Webhook, request: &'a AdmissionRequest<'_>, inputs: &Inputs<'a>) -> Outcome<'a> {
    run_with(webhook, request, inputs, true)
}

/// The decision alone, what `serve` answers: like [`run`], but an object a mutator's pre-check
/// leaves unchanged is not even copied.
pub fn decide<'a>(webhook: &Webhook, request: &'a AdmissionRequest<'_>, inputs: &Inputs<'a>) -> Decision<'a> {
    run_with(webhook, request, inputs, false).decision
}

fn run_with<'a>(
    webhook: &Webhook,
    request: &'a AdmissionRequest<'_>,
    inputs: &Inputs<'a>,
    want_object: bool,
) -> Outcome<'a> {
    if !inputs.settings.enabled(webhook.capability) {
        let warning = format!(
            "{} is disabled on this server (--disable-capability {}); allowed unchanged",
            webhook.name,
            webhook.capability.name()
        );
        return Outcome {
            decision: Decision { warnings: vec![warning], ..Decision::allow() },
            mutated: None,
        };
    }
    let mut outcome =
        match webhook.handler {
            Handler::Mutate(mutate) => run_mutator(mutate, request, inputs, want_object),
            Handler::Validate(validate) => {
                Outcome {
                    decision: Decision::from_result(validate(request, inputs).map(
                        |Effects { warnings, writes }| Decision { warnings, writes, ..Decision::allow() },
                    )),
                    mutated: None,
                }
            }
        };
    if !request.decode_warnings.is_empty() {
        let mut warnings = request.decode_warnings.clone();
        warnings.append(&mut outcome.decision.warnings);
        outcome.decision.warnings = warnings;
    }
    outcome
}

/// `want_object`: return the mutated object too (`dry-run`, tests), and diff that; otherwise the
/// patch is diffed from the draft, whose borrowed parts are skipped and whose new values are moved
/// into the patch.
fn run_mutator<'a>(
    mutate: Mutator,
    request: &'a AdmissionRequest<'_>,
    inputs: &Inputs<'a>,
    want_object: bool,
) -> Outcome<'a> {
    let Some(original) = request.object.as_ref() else {
        return if request.operation == Operation::Delete {
            Outcome { decision: Decision::allow(), mutated: None }
        } else {
            let err = AdmissionError::BadRequest(format!(
                "request.object is required for {}",
                request.operation.as_str()
            ));
            Outcome { decision: Decision::deny(&err), mutated: None }
        };
    };
    let mut draft = Draft::Same(original);
    match mutate(request, &mut draft, inputs) {
        Ok(Effects { warnings, writes }) => {
            let (patch, mutated) = if want_object {
                let object = draft.into_json();
                (diff_json(original, &object), Some(object.into_value()))
            } else {
                (diff_draft(original, draft), None)
            };
            Outcome { decision: Decision { warnings, patch, writes, ..Decision::allow() }, mutated }
        }
        Err(err) => Outcome { decision: Decision::deny(&err), mutated: None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_unique_and_rooted() {
        let mut seen = std::collections::HashSet::new();
        for w in WEBHOOKS {
            assert!(w.path.starts_with('/'), "{}", w.path);
            assert!(seen.insert(w.path), "duplicate path {}", w.path);
            assert!(by_path(w.path).is_some());
        }
    }
}
