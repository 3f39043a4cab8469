//! `/mutate-pod`: every Pod mutation this binary makes, on one copy-on-write draft of the pod. The
//! patch is computed once, afterwards, by the caller (see `webhooks::run`).
//!
//! Kruise's handler (`pkg/webhook/pod/mutating/pod_create_update_handler.go`) runs seven steps on
//! one Pod, each seeing what the previous ones changed; [`mutate`] lists them once, in that order,
//! each a function of (request, pod as the previous steps left it, inputs). WorkloadSpread also
//! returns the status write it intends, for the edge to make. Our own DaemonSet-style stamp runs
//! after Kruise's steps.

pub mod enhanced_liveness;
pub mod launch_priority;
pub mod persistent_pod_state;
pub mod probe_marker;
pub mod readiness_gate;
pub mod related_pub;

use std::collections::BTreeMap;

use serde_json::Value;

use super::draft::{Draft, Node};
use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::sidecarset_rules::selector;
use super::writes::Effects;
use super::{Inputs, daemon, injection, workload_spread};
use crate::api::meta::LabelSelector;
use crate::api::tree::Json;
use crate::cluster::controller_finder::group_of;

/// Kruise's steps, in the order [`mutate`] runs them; the names are the `step` of the agreement
/// with stored Pods (`agreement::compare_pod`, docs/sidecarset.md#13-6-the-other-steps), which
/// compares each step's own fields. Our DaemonSet-style stamp is not one: Kruise has no such step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    ReadinessGate,
    WorkloadSpread,
    SidecarSet,
    LaunchPriority,
    RelatedPub,
    PersistentPodState,
    EnhancedLiveness,
    ProbeMarker,
}

impl Step {
    pub const ALL: [Step; 8] = [
        Step::ReadinessGate,
        Step::WorkloadSpread,
        Step::SidecarSet,
        Step::LaunchPriority,
        Step::RelatedPub,
        Step::PersistentPodState,
        Step::EnhancedLiveness,
        Step::ProbeMarker,
    ];

    /// The step's label: short, fixed, kebab-case.
    pub fn as_str(self) -> &'static str {
        match self {
            Step::ReadinessGate => "readiness-gate",
            Step::WorkloadSpread => "workload-spread",
            Step::SidecarSet => "sidecarset",
            Step::LaunchPriority => "launch-priority",
            Step::RelatedPub => "related-pub",
            Step::PersistentPodState => "persistent-pod-state",
            Step::EnhancedLiveness => "enhanced-liveness",
            Step::ProbeMarker => "probe-marker",
        }
    }
}

/// Mutate a Pod on CREATE. Subresource requests (`pods/binding`, `pods/status`, ...) and other
/// operations pass through unchanged. `pod` is the request's pod, not yet changed.
pub fn mutate<'a>(
    request: &AdmissionRequest,
    pod: &mut Draft<'a>,
    inputs: &Inputs<'a>,
) -> Result<Effects, AdmissionError> {
    if !request.sub_resource.is_empty() || request.operation != Operation::Create {
        return Ok(Effects::default());
    }
    let Draft::Same(original) = *pod else {
        return Err(AdmissionError::Internal("pod mutations start from the request's pod, unchanged".into()));
    };
    check_is_pod(original)?;
    let mut warnings = Vec::new();
    // 1. The KruisePodReady readiness gate (injectPodReadinessGate).
    readiness_gate::inject(pod, inputs)?;
    // 2. WorkloadSpread (workloadSpreadMutatingPod): a subset's patch and the status write that
    //    records the pod in it.
    let spread = workload_spread::assign(request, pod, inputs)?;
    let writes = spread.write.into_iter().collect();
    if !spread.patched {
        // The usual case: steps 3 and on read the request's pod, which steps 1 and 2 left as it
        // was in all they read.
        later_steps(request, original, pod, inputs, &mut warnings)?;
        return Ok(Effects { warnings, writes });
    }
    // Step 2 may have changed labels, annotations and containers, which SidecarSet injection reads
    // from the pod it is given: it is given the pod as step 2 left it, and what they all change is
    // then owned (a copy only for the pods a WorkloadSpread patched).
    let staged = std::mem::replace(pod, Draft::Same(original)).into_json();
    let mut draft = Draft::Same(&staged);
    later_steps(request, &staged, &mut draft, inputs, &mut warnings)?;
    *pod = Draft::New(draft.into_json().into_owned());
    Ok(Effects { warnings, writes })
}

/// Steps 3 to 7 and ours, on `pod`, the draft of `current` (the pod as steps 1 and 2 left it, in
/// all that these steps read before changing it).
fn later_steps<'a>(
    request: &AdmissionRequest,
    current: &'a Json<'a>,
    pod: &mut Draft<'a>,
    inputs: &Inputs<'a>,
    warnings: &mut Vec<String>,
) -> Result<(), AdmissionError> {
    // 3. SidecarSet injection (sidecarsetMutatingPod). It reads the pod's labels, annotations and
    //    containers from `current`.
    injection::inject(request, current, pod, inputs, warnings)?;
    // 4. Container launch priority (containerLaunchPriorityInitialization), after injection so
    //    that sidecars take part.
    launch_priority::initialize(pod, inputs)?;
    // 5. The kruise.io/related-pub annotation (pubMutatingPod), read by Kruise's PUB controller.
    related_pub::annotate(request, pod, inputs)?;
    // 6. PersistentPodState (persistentPodStateMutatingPod): node affinity from the topology
    //    recorded for the pod's name (read after step 4, which may name the pod).
    persistent_pod_state::apply(request, pod, inputs)?;
    // 7. Each behind its own alpha gate, off by default: the enhanced liveness probe
    //    (enhancedLivenessProbeWhenPodCreate, gate EnhancedLivenessProbe), then PodProbeMarker on
    //    serverless pods (podProbeMarkerMutatingPod, gate EnablePodProbeMarkerOnServerless).
    enhanced_liveness::backup(request, pod, inputs)?;
    probe_marker::annotate(request, pod, inputs)?;
    // Ours: DaemonSet-style node pinning and tolerations.
    daemon::stamp(pod, inputs, warnings)
}

/// A Pod is an object whose `metadata` (if present) and `spec` are objects. Anything else cannot
/// have come from the apiserver and is refused with a message that says what is wrong.
fn check_is_pod(pod: &Json<'_>) -> Result<(), AdmissionError> {
    if let Some(kind) = pod.get("kind").and_then(Json::as_str)
        && kind != "Pod"
    {
        return Err(AdmissionError::BadRequest(format!("request.object is a {kind}, not a Pod")));
    }
    if pod.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(AdmissionError::BadRequest("request.object.metadata must be an object".into()));
    }
    match pod.get("spec") {
        Some(Json::Object(_)) => Ok(()),
        Some(_) => Err(AdmissionError::BadRequest("request.object.spec must be an object".into())),
        None => Err(AdmissionError::BadRequest("request.object is not a Pod: it has no spec".into())),
    }
}

/// The pod's controller reference (`metav1.GetControllerOf`: the first owner reference with
/// `controller: true`), as the pod stands after the previous steps. Missing strings read as empty.
pub(crate) struct OwnerRef<'d> {
    pub api_version: &'d str,
    pub kind: &'d str,
    pub name: &'d str,
}

pub(crate) fn controller_ref<'d>(pod: &'d Draft<'_>) -> Option<OwnerRef<'d>> {
    let owners = Node::Draft(pod).get("metadata")?.get("ownerReferences")?.items();
    let controller = owners
        .into_iter()
        .find(|o| o.get("controller").and_then(Node::value).and_then(Json::as_bool) == Some(true))?;
    let field = |key| controller.get(key).and_then(Node::as_str).unwrap_or_default();
    Some(OwnerRef { api_version: field("apiVersion"), kind: field("kind"), name: field("name") })
}

/// The API group of the pod's controller, parsed as `schema.ParseGroupVersion` parses its
/// `apiVersion`: `""` for `v1`, and for a value with two slashes, which Go fails to parse and
/// Kruise ignores.
fn controller_group<'d>(pod: &'d Draft<'_>) -> Option<&'d str> {
    Some(group_of(controller_ref(pod)?.api_version).unwrap_or_default())
}

/// The pod's labels as the previous steps left them (values that are not strings left out).
fn labels_of(pod: &Draft<'_>) -> BTreeMap<String, String> {
    Node::Draft(pod)
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Node::value)
        .and_then(Json::as_object)
        .map(|labels| {
            labels.iter().filter_map(|(k, v)| Some((k.to_string(), v.as_str()?.to_owned()))).collect()
        })
        .unwrap_or_default()
}

/// `util.ValidatedLabelSelectorAsSelector` then `Matches`, with Kruise's "empty matches nothing":
/// a missing, empty or unconvertible (unknown operator) selector selects no pod.
fn selects(selector_value: Option<&Value>, labels: &BTreeMap<String, String>) -> bool {
    let Some(value) = selector_value.filter(|v| !v.is_null()) else { return false };
    let Ok(parsed) = serde_json::from_value::<LabelSelector>(value.clone()) else { return false };
    !parsed.is_empty() && selector::matches(&parsed, labels) == Some(true)
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::admission::{FixedClock, Inputs, SeededRandom, Settings};
    use crate::cluster::{Answers, Snapshot};

    /// Run `f` with an empty cluster, the epoch, seed 0 and `settings`.
    pub(crate) fn with_inputs<R>(settings: &Settings, f: impl FnOnce(&Inputs) -> R) -> R {
        with_cluster(Vec::new(), settings, f)
    }

    /// Run `f` with a cluster of `objects`, the epoch, seed 0 and `settings`.
    pub(crate) fn with_cluster<R>(
        objects: Vec<serde_json::Value>,
        settings: &Settings,
        f: impl FnOnce(&Inputs) -> R,
    ) -> R {
        with_snapshot(&Snapshot::from_objects(objects), settings, f)
    }

    /// Run `f` with `cluster`, the epoch, seed 0 and `settings`.
    pub(crate) fn with_snapshot<R>(
        cluster: &Snapshot,
        settings: &Settings,
        f: impl FnOnce(&Inputs) -> R,
    ) -> R {
        let answers = Answers::default();
        let (clock, random) = (FixedClock(time::OffsetDateTime::UNIX_EPOCH), SeededRandom::new(0));
        f(&Inputs { cluster, answers: &answers, clock: &clock, random: &random, settings })
    }

    /// The Pod of `review` (an AdmissionReview of a Pod CREATE) as `/mutate-pod`'s steps leave it,
    /// with `cluster` and `settings`.
    pub(crate) fn mutated(
        cluster: &Snapshot,
        review: serde_json::Value,
        settings: &Settings,
    ) -> serde_json::Value {
        let request = crate::admission::review::decode_review(review).unwrap();
        with_snapshot(cluster, settings, |inputs| {
            let mut draft = crate::admission::draft::Draft::Same(request.object.as_ref().unwrap());
            super::mutate(&request, &mut draft, inputs).unwrap();
            draft.into_json().into_value()
        })
    }
}
