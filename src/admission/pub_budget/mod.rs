//! PodUnavailableBudget's check of a pod disruption (Kruise's
//! `pubcontrol.PodUnavailableBudgetValidatePod`, `pkg/control/pubcontrol/pub_control_utils.go`):
//! a delete, eviction or disruptive update of a protected pod is allowed only while the budget
//! named by the pod's `kruise.io/related-pub` annotation still allows one more unavailable pod, and
//! is recorded in the budget's status (`unavailableAllowed` decremented, the pod in
//! `disruptedPods` or `unavailablePods`), which Kruise's PUB controller later confirms or expires.
//!
//! The decision does not write: it returns the budget as it would be written ([`StatusWrite`]), on
//! the `resourceVersion` it read; the edge writes it and, on a conflict, decides again on the fresh
//! budget, which then already records the pod when the competing write was ours.

pub mod pod_change;
pub mod pod_state;

use serde_json::{Map, Value, json};

use super::Inputs;
use super::feature_gates::Gate;
use super::pod::related_pub::{PUB_GROUP, PUB_KIND, RELATED_PUB_ANNOTATION};
use super::review::AdmissionError;
use super::writes::{self, Effects, OnFailure, StatusWrite, Target};
use crate::api::tree::Json;

/// The served version of PodUnavailableBudget.
pub const PUB_VERSION: &str = "v1alpha1";
/// `policyv1alpha1.PodPubNoProtectionAnnotation`: `"true"` exempts the pod from every budget.
pub const NO_PROTECT_ANNOTATION: &str = "pub.kruise.io/no-protect";
/// `policyv1alpha1.PubProtectOperationAnnotation` on the budget: the operations it protects,
/// comma-separated (`DELETE,UPDATE,EVICT` when absent or empty).
pub const PROTECT_OPERATIONS_ANNOTATION: &str = "kruise.io/pub-protect-operations";
/// `appspub.PubUnavailablePodLabelPrefix`: a label with this prefix marks the pod unavailable.
pub const UNAVAILABLE_LABEL_PREFIX: &str = "unavailable-pod.kruise.io/";
/// `MaxUnavailablePodSize`: the most pods `disruptedPods` and `unavailablePods` may hold together
/// before further disruptions are refused.
pub const MAX_RECORDED_PODS: usize = 2000;

/// `policyv1alpha1.PubOperation`: what is done to the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Update,
    Delete,
    Evict,
    /// An update that only resizes cpu/memory in place.
    Resize,
}

impl Operation {
    /// The name the protect-operations annotation uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Evict => "EVICT",
            Operation::Resize => "RESIZE",
        }
    }
}

/// The value of the pod's annotation `key`.
fn annotation<'p>(pod: &'p Json, key: &str) -> Option<&'p str> {
    pod.at(&["metadata", "annotations"])?.get(key)?.as_str()
}

/// `appspub.HasUnavailableLabel`.
fn has_unavailable_label(pod: &Json) -> bool {
    pod.at(&["metadata", "labels"])
        .and_then(Json::as_object)
        .is_some_and(|labels| labels.keys().any(|key| key.starts_with(UNAVAILABLE_LABEL_PREFIX)))
}

/// The budget the pod names (`GetPubForPod`): its related-pub annotation, in the pod's namespace.
pub fn related_budget(pod: &Json) -> Option<Target> {
    let name = annotation(pod, RELATED_PUB_ANNOTATION).filter(|n| !n.is_empty())?;
    let namespace = pod.at(&["metadata", "namespace"]).and_then(Json::as_str).unwrap_or_default();
    Some(Target {
        group: PUB_GROUP.into(),
        version: PUB_VERSION.into(),
        kind: PUB_KIND.into(),
        namespace: namespace.into(),
        name: name.into(),
    })
}

/// Allow or refuse `operation` on `pod`, and the budget write that records an allowed one (none for
/// a dry run, whose decision is otherwise the same). Kruise's order: the pod's exemption, its
/// health, its budget, the budget's state and protected operations, then the allowance.
pub fn check(
    pod: &Json,
    operation: Operation,
    dry_run: bool,
    inputs: &Inputs,
) -> Result<Effects, AdmissionError> {
    if annotation(pod, NO_PROTECT_ANNOTATION) == Some("true")
        || !pod_state::is_ready(pod)
        || !pod_state::is_consistent(pod)
    {
        return Ok(Effects::default());
    }
    let Some(target) = related_budget(pod) else { return Ok(Effects::default()) };
    let Some(budget) = writes::current(inputs, &target) else { return Ok(Effects::default()) };
    let status = budget.get("status");
    let number = |key: &str| status.and_then(|s| s.get(key)).and_then(Value::as_i64).unwrap_or(0);
    let pod_name = pod.at(&["metadata", "name"]).and_then(Json::as_str).unwrap_or_default();
    if number("desiredAvailable") == 0 || !protects(&budget, operation, inputs) || records(&budget, pod_name)
    {
        return Ok(Effects::default());
    }
    let recorded = |key: &str| status.and_then(|s| s.get(key)).and_then(Value::as_object).map_or(0, Map::len);
    if number("unavailableAllowed") <= 0 {
        return Err(forbidden(&target.name, "pub unavailable allowed is negative"));
    }
    if recorded("disruptedPods") + recorded("unavailablePods") > MAX_RECORDED_PODS {
        return Err(forbidden(
            &target.name,
            "DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller",
        ));
    }
    if dry_run {
        return Ok(Effects::default());
    }
    let mut object = Value::clone(&budget);
    let status = status_mut(&mut object)
        .ok_or_else(|| AdmissionError::Internal(format!("{PUB_KIND} {} is not an object", target.name)))?;
    status.insert("unavailableAllowed".into(), json!(number("unavailableAllowed") - 1));
    let map = if operation == Operation::Update { "unavailablePods" } else { "disruptedPods" };
    let pods = status.entry(map).or_insert_with(|| json!({}));
    if !pods.is_object() {
        *pods = json!({});
    }
    pods[pod_name] = json!(inputs.timestamp()?);
    Ok(Effects {
        warnings: Vec::new(),
        writes: vec![StatusWrite { target, object, on_failure: OnFailure::Deny }],
    })
}

/// `isNeedPubProtection`: the operations the budget's annotation names (Kruise's three when it is
/// absent or empty); without the `InPlacePodVerticalScaling` gate a resize counts as an update.
fn protects(budget: &Value, operation: Operation, inputs: &Inputs) -> bool {
    let value = budget
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PROTECT_OPERATIONS_ANNOTATION))
        .and_then(Value::as_str);
    let mut operations: Vec<&str> = value.unwrap_or_default().split(',').collect();
    if value.is_none_or(str::is_empty) {
        operations.extend(["DELETE", "UPDATE", "EVICT"]);
    }
    let named = |op: Operation| operations.contains(&op.as_str());
    named(operation)
        || (operation == Operation::Resize
            && named(Operation::Update)
            && !inputs.settings.gates.enabled(Gate::InPlacePodVerticalScaling))
}

/// `isPodRecordedInPub`: the pod is already counted as disrupted or unavailable.
fn records(budget: &Value, pod_name: &str) -> bool {
    ["unavailablePods", "disruptedPods"]
        .iter()
        .any(|map| budget.get("status").and_then(|s| s.get(*map)).and_then(|m| m.get(pod_name)).is_some())
}

/// `errors.NewForbidden(policyv1alpha1.Resource("podunavailablebudget"), name, err)`'s text.
fn forbidden(name: &str, why: &str) -> AdmissionError {
    AdmissionError::Forbidden(format!("podunavailablebudget.policy.kruise.io \"{name}\" is forbidden: {why}"))
}

/// The object's `status`, made an object if it is missing or is not one.
fn status_mut(object: &mut Value) -> Option<&mut Map<String, Value>> {
    let status = object.as_object_mut()?.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    status.as_object_mut()
}
