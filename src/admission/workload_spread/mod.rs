//! WorkloadSpread (Kruise's `pkg/util/workloadspread`): step 2 of `/mutate-pod`, which spreads a
//! workload's new pods over the subsets of the WorkloadSpread that targets it, and the deletion
//! accounting `/validate-pod` runs before its PodUnavailableBudget check.
//!
//! On a Pod CREATE the pod is given a subset ([`status`]: the first subset of the versioned status
//! with room, or by ordinal for StatefulSets), patched with it ([`patch`]) and recorded in the
//! subset's `creatingPods`; on a deletion or eviction it is recorded in `deletingPods`. Kruise's
//! controller later reconciles both lists with the pods it sees. The records are status writes
//! ([`StatusWrite`], `on_failure: Internal`: Kruise answers 500 when its update fails) built from
//! [`writes::current`], so a decision re-run after a conflicting write reads the fresh
//! WorkloadSpread and, when it records the pod already, does not record it twice.

pub mod patch;
pub mod status;
pub mod strategic_merge;
pub mod target;

use std::collections::BTreeMap;

use serde_json::Value;

use super::draft::{Draft, Node};
use super::feature_gates::Gate;
use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::writes::{self, StatusWrite, Target};
use super::{Inputs, pod};
use crate::api::keys::KRUISE_APPS_GROUP;
use crate::api::tree::Json;
use crate::cluster::controller_finder;

/// WorkloadSpreads: `apps.kruise.io/v1alpha1`.
pub const WS_GROUP: &str = KRUISE_APPS_GROUP;
pub const WS_VERSION: &str = "v1alpha1";
pub const WS_KIND: &str = "WorkloadSpread";
/// `MatchedWorkloadSpreadSubsetAnnotations`: `{"name": <WorkloadSpread>, "subset": <subset>}`, with
/// `"uid"` for a pod recorded before it had a name.
pub const MATCHED_ANNOTATION: &str = "apps.kruise.io/matched-workloadspread";

/// What step 2 did: whether it patched the pod, and the status write that records it.
#[derive(Debug, Default)]
pub struct Assignment {
    pub patched: bool,
    pub write: Option<StatusWrite>,
}

/// Step 2 (`workloadSpreadMutatingPod`, gate `WorkloadSpread`): on a CREATE of `pods` that is not a
/// dry run, give an active pod of a workload that a WorkloadSpread targets one of its subsets.
/// Kruise skips the whole step on a dry run (no patch, no record). The caller checks the operation
/// and subresource.
///
/// A pod that carries the `matched-workloadspread` annotation already is left alone: it is the
/// webhook called again (`reinvocationPolicy: IfNeeded`) on a pod this step gave a subset, which
/// Kruise would give the subset's tolerations and node terms a second time, and record a second
/// time when the pod has no name yet (docs/differences.md#pod-mutations).
pub fn assign(
    request: &AdmissionRequest,
    pod: &mut Draft<'_>,
    inputs: &Inputs,
) -> Result<Assignment, AdmissionError> {
    if !inputs.settings.gates.enabled(Gate::WorkloadSpread)
        || request.resource.resource != "pods"
        || writes::is_dry_run(request)
    {
        return Ok(Assignment::default());
    }
    // Most clusters have no WorkloadSpread: nothing of the pod is read then.
    if inputs.cluster.entries(WS_GROUP, WS_KIND).next().is_none() {
        return Ok(Assignment::default());
    }
    let facts = PodFacts::read(pod, &request.namespace);
    if !facts.active || matched_annotation(pod).is_some() {
        return Ok(Assignment::default());
    }
    let Some(owner) = &facts.controller else { return Ok(Assignment::default()) };
    let Some(ws) = target::governing(inputs, owner, &facts)? else { return Ok(Assignment::default()) };
    let chosen = status::acquire(inputs, &ws, &facts, status::Record::Creating)?;
    let patched = match &chosen.subset {
        Some(subset) => patch::apply(pod, &ws, subset, chosen.uid.as_deref())?,
        None => false,
    };
    Ok(Assignment { patched, write: chosen.write })
}

/// `/validate-pod`'s accounting (`HandlePodDeletion`, gate `WorkloadSpread`; the caller checks the
/// gate): a DELETE of a pod (`pod` is the old object) or a `pods/eviction` CREATE (`pod` is the pod
/// as stored) records a pod that a WorkloadSpread gave a subset in that subset's `deletingPods`
/// (unless it is recorded there or in `creatingPods` already). Dry runs (the API server's, or an
/// Eviction's own `deleteOptions.dryRun`) record nothing (a dry-run DELETE is not even looked at),
/// nor do other operations and subresources, and pods without the annotation, inactive or without
/// a controller. An unparsable annotation, or a
/// WorkloadSpread that no longer exists, is no error. Kruise's `/validate-pod` answers its errors
/// (a `replicasPathList` path that is missing) with 400, and so does a failed write.
pub fn deletion(
    request: &AdmissionRequest,
    pod: &Json<'_>,
    inputs: &Inputs,
) -> Result<Option<StatusWrite>, AdmissionError> {
    let is_deletion = match request.operation {
        Operation::Delete => request.sub_resource.is_empty(),
        Operation::Create => request.sub_resource == "eviction",
        _ => false,
    };
    // Kruise skips a dry-run DELETE, but not a dry-run eviction (it never reads that the eviction
    // is one): that is decided alike, errors included, and writes nothing.
    let dry_run = writes::is_dry_run(request);
    if !is_deletion || (dry_run && request.operation == Operation::Delete) {
        return Ok(None);
    }
    let draft = Draft::Same(pod);
    let facts = PodFacts::read(&draft, &request.namespace);
    let annotation = Node::Draft(&draft)
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(MATCHED_ANNOTATION))
        .and_then(Node::as_str);
    let Some(matched) = annotation.filter(|a| !a.is_empty()).and_then(Matched::parse) else {
        return Ok(None);
    };
    if !facts.active || facts.controller.is_none() {
        return Ok(None);
    }
    let target = target_of(&facts.namespace, &matched.name);
    let Some(ws) = writes::current(inputs, &target) else { return Ok(None) };
    let acquired = status::acquire(inputs, &ws, &facts, status::Record::Deleting { subset: &matched.subset })
        .map_err(|e| AdmissionError::BadRequest(e.to_string()))?;
    Ok(acquired.write.filter(|_| !dry_run))
}

/// The pod's `matched-workloadspread` annotation, when it has a non-empty one.
fn matched_annotation<'d>(pod: &'d Draft<'_>) -> Option<&'d str> {
    let annotations = Node::Draft(pod).get("metadata")?.get("annotations")?;
    annotations.get(MATCHED_ANNOTATION)?.as_str().filter(|a| !a.is_empty())
}

/// The status write's target: the WorkloadSpread `namespace/name`.
fn target_of(namespace: &str, name: &str) -> Target {
    Target {
        group: WS_GROUP.into(),
        version: WS_VERSION.into(),
        kind: WS_KIND.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The WorkloadSpread's `metadata.name` and `metadata.namespace`.
fn name_of(ws: &Value) -> (&str, &str) {
    let text = |p| ws.pointer(p).and_then(Value::as_str).unwrap_or_default();
    (text("/metadata/namespace"), text("/metadata/name"))
}

/// What the decisions read of the pod, as the earlier steps left it.
#[derive(Debug)]
pub struct PodFacts {
    /// The pod's namespace, else the request's (Kruise's handler fills it in).
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `metav1.GetControllerOf`: (apiVersion, kind, name).
    pub controller: Option<Owner>,
    /// `IsPodActive`: not Succeeded or Failed, and no deletionTimestamp.
    pub active: bool,
}

/// An owner reference: what walking up from the pod to its workload reads.
#[derive(Debug, Clone)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

impl Owner {
    /// The controller reference (`controller: true`) of an object's `metadata.ownerReferences`.
    pub fn controller_of(object: &Value) -> Option<Owner> {
        let owners = object.pointer("/metadata/ownerReferences")?.as_array()?;
        let owner = owners.iter().find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?;
        let text = |key| owner.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        Some(Owner { api_version: text("apiVersion"), kind: text("kind"), name: text("name") })
    }
}

impl PodFacts {
    pub fn read(pod: &Draft<'_>, request_namespace: &str) -> PodFacts {
        let root = Node::Draft(pod);
        let metadata = root.get("metadata");
        let text = |key| metadata.and_then(|m| m.get(key)).and_then(Node::as_str).unwrap_or_default();
        let namespace = match text("namespace") {
            "" => request_namespace,
            ns => ns,
        };
        let labels = metadata
            .and_then(|m| m.get("labels"))
            .and_then(Node::value)
            .and_then(Json::as_object)
            .map(|l| l.iter().filter_map(|(k, v)| Some((k.to_owned(), v.as_str()?.to_owned()))).collect())
            .unwrap_or_default();
        let phase = root.get("status").and_then(|s| s.get("phase")).and_then(Node::as_str);
        let deleting = metadata
            .and_then(|m| m.get("deletionTimestamp"))
            .and_then(Node::value)
            .is_some_and(|t| !t.is_null());
        let controller = pod::controller_ref(pod).map(|r| Owner {
            api_version: r.api_version.to_owned(),
            kind: r.kind.to_owned(),
            name: r.name.to_owned(),
        });
        PodFacts {
            namespace: namespace.to_owned(),
            name: text("name").to_owned(),
            labels,
            controller,
            active: !matches!(phase, Some("Succeeded" | "Failed")) && !deleting,
        }
    }
}

/// The annotation as Kruise reads it back (`encoding/json`: keys in any case, unknown keys
/// ignored); `None` for text that is not such an object, or `null`.
#[derive(Debug, PartialEq)]
struct Matched {
    name: String,
    subset: String,
}

impl Matched {
    fn parse(text: &str) -> Option<Matched> {
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else { return None };
        let text = |key| match controller_finder::field(&object, key) {
            None | Some(Value::Null) => Some(String::new()),
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => None,
        };
        let matched = Matched { name: text("name")?, subset: text("subset")? };
        text("uid")?;
        Some(matched)
    }
}

#[cfg(test)]
mod tests;
