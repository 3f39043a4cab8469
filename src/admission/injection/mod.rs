//! SidecarSet injection into pods on CREATE (`/mutate-pod`), with Kruise's semantics
//! (docs/sidecarset.md §1–§7, §10) and the README's deliberate differences: SidecarSets in
//! a fixed order (namespace-pinned, then cluster-wide, each by name; §12), a denial naming both SidecarSets when two inject one container name, timestamps
//! from the injected clock and kept when nothing else changes.

pub mod annotations;
pub mod build;
pub mod hotupgrade;
pub mod matching;
pub mod merge;
pub mod metadata;
pub mod resources;
pub mod revision;

use std::collections::HashMap;
use std::sync::Arc;

use self::annotations::{HashEntry, PodAnnotations, upsert};
use self::build::{Built, Chosen, PodContext};
use self::merge::Injected;
use super::Inputs;
use super::draft::{Draft, DraftMap};
use super::review::{AdmissionError, AdmissionRequest};
use crate::api::sidecarset::{HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, SidecarSet};
use crate::api::tree::{Json, Object};

/// Inject the matching SidecarSets into `pod`, the draft of `original` (a CREATE; the caller has
/// gated subresources and other operations). Warnings are for things Kruise only logs.
pub fn inject<'a>(
    request: &AdmissionRequest,
    original: &'a Json<'a>,
    pod: &mut Draft<'a>,
    inputs: &Inputs<'a>,
    warnings: &mut Vec<String>,
) -> Result<(), AdmissionError> {
    let mut matched = selecting(request, original, inputs)?;
    matching::replace_canary_bases(&mut matched);
    if matched.is_empty() {
        return Ok(());
    }
    let index = inputs.cluster.sidecarset_index();
    let sets = matched
        .iter()
        .map(|s| revision::select(s, original, inputs))
        .collect::<Result<Vec<_>, _>>()
        .map_err(AdmissionError::Internal)?;

    // patchPodMetadata first, so transferEnv fieldRefs on annotations see the patched values.
    if sets.iter().any(|s| !s.spec.patch_pod_metadata.is_empty()) {
        let annotations = annotations_mut(pod)?;
        for set in &sets {
            metadata::apply(set, annotations).map_err(AdmissionError::Internal)?;
        }
    }

    // Until `apply`, only the annotations may have changed: the rest is read from the original.
    let annotations = pod.at(&["metadata", "annotations"]);
    let mut state =
        PodAnnotations::read(annotations.and_then(Json::as_object)).map_err(AdmissionError::Internal)?;
    let built = {
        let ctx = PodContext::new(original, annotations, &sets, index);
        sets.iter()
            .map(|s| build::build(s, &ctx, warnings))
            .collect::<Result<Vec<Built>, _>>()
            .map_err(AdmissionError::Internal)?
    };
    if !built.iter().any(Built::injects) {
        return Ok(());
    }
    check_duplicate_names(&built)?;

    let timestamp = inputs.timestamp()?;
    for (set, b) in sets.iter().zip(&built) {
        state.injected.insert(set.name().to_owned());
        if b.injects() {
            record_hashes(&mut state, set, b, &timestamp);
        }
        for name in &b.hot_upgraded {
            state.working_hot.insert(name.clone(), hotupgrade::working_name(name));
            state.hot_upgrade_used = true;
        }
    }
    if state.hot_upgrade_used && state.working_hot_unparsable {
        warnings.push(format!(
            "the pod's annotation {} is not a JSON map of container names; it is replaced",
            crate::api::sidecarset::WORKING_HOTUPGRADE_CONTAINER_ANNOTATION
        ));
    }
    apply(pod, &sets, built, &state)
}

/// The SidecarSets whose selectors match `pod`, in injection order (none for an inactive pod).
fn selecting<'i>(
    request: &AdmissionRequest,
    pod: &Json<'_>,
    inputs: &Inputs<'i>,
) -> Result<Vec<&'i Arc<SidecarSet>>, AdmissionError> {
    if !is_active(pod) {
        return Ok(Vec::new());
    }
    let namespace = pod_namespace(pod, request);
    let candidates = inputs.cluster.sidecarset_index().candidates(&namespace, matching::labels_of(pod));
    if candidates.is_empty() {
        return Ok(candidates);
    }
    let target = matching::PodTarget::new(pod, &namespace, inputs.cluster);
    let mut matched = Vec::with_capacity(candidates.len());
    for set in candidates {
        if matching::matches(set, &target).map_err(AdmissionError::Internal)? {
            matched.push(set);
        }
    }
    Ok(matched)
}

/// `status.phase` Succeeded/Failed or a deletionTimestamp: nothing to inject
/// (docs/sidecarset.md#1-when-injection-runs).
fn is_active(pod: &Json<'_>) -> bool {
    let phase = pod.at(&["status", "phase"]).and_then(Json::as_str);
    !matches!(phase, Some("Succeeded" | "Failed"))
        && pod.at(&["metadata", "deletionTimestamp"]).is_none_or(Json::is_null)
}

/// The pod's namespace, else the request's, else `default` (docs/sidecarset.md#1-when-injection-runs).
fn pod_namespace(pod: &Json<'_>, request: &AdmissionRequest) -> String {
    let ns = pod.at(&["metadata", "namespace"]).and_then(Json::as_str).unwrap_or_default();
    let ns = if ns.is_empty() { request.namespace.as_str() } else { ns };
    if ns.is_empty() { "default".into() } else { ns.into() }
}

/// The object at `key` of `parent`, created empty when absent or null; its entries stay borrowed.
pub(crate) fn object_mut<'d, 'a>(
    parent: &'d mut Draft<'a>,
    key: &str,
    what: &str,
) -> Result<&'d mut DraftMap<'a>, AdmissionError> {
    let Some(map) = parent.object_mut() else {
        return Err(AdmissionError::BadRequest(format!("{what} must be an object")));
    };
    let slot = map.entry_or_insert(key, Draft::New(Json::Object(Object::new())));
    if slot.is_null() {
        *slot = Draft::New(Json::Object(Object::new()));
    }
    slot.object_mut().ok_or_else(|| AdmissionError::BadRequest(format!("{what}.{key} must be an object")))
}

/// The pod's annotations, copied to be written (a few small strings, next to what injection adds).
pub(crate) fn annotations_mut<'d, 'a>(pod: &'d mut Draft<'a>) -> Result<&'d mut Object<'a>, AdmissionError> {
    let metadata = object_mut(pod, "metadata", "the pod")?;
    metadata
        .value_mut("annotations")
        .object_or_new()
        .ok_or_else(|| AdmissionError::BadRequest("the pod's metadata.annotations must be an object".into()))
}

/// Our own denial (docs/sidecarset.md#6-2-merge-rule): two injected containers (init or not) with one name,
/// from two SidecarSets or from one (a SidecarSet the validating webhook would reject, e.g. read from the
/// cluster folder, or a hot-upgrade pair `<name>-1` colliding with a sidecar of that name). The merge
/// replaces by name, so letting both through would also make a re-invocation change the pod.
fn check_duplicate_names(built: &[Built]) -> Result<(), AdmissionError> {
    let all = || built.iter().flat_map(|b| b.init_containers.iter().chain(&b.containers));
    let mut seen = HashMap::with_capacity_and_hasher(all().count(), foldhash::fast::RandomState::default());
    for item in all() {
        let Some(other) = seen.insert(item.name(), item.sidecarset.as_str()) else { continue };
        let why = "a pod cannot have two containers with one name";
        return Err(AdmissionError::Internal(if other == item.sidecarset {
            format!(
                "SidecarSet {other} injects two containers named {:?} into this pod, and {why}; rename one of them (the SidecarSet \
                 validating webhook rejects such a SidecarSet)",
                item.name()
            )
        } else {
            format!(
                "SidecarSets {other} and {} both inject a container named {:?} into this pod, and {why}; rename the container in one \
                 of them or make their selectors disjoint",
                item.sidecarset,
                item.name()
            )
        }));
    }
    Ok(())
}

fn record_hashes(state: &mut PodAnnotations, set: &SidecarSet, built: &Built, timestamp: &str) {
    let annotation = |k: &str| set.metadata.annotations.get(k).cloned().unwrap_or_default();
    let entry = |hash: String, controller_revision: String| HashEntry {
        update_timestamp: Some(timestamp.to_owned()),
        hash,
        sidecar_set_name: set.name().to_owned(),
        sidecar_list: Some(built.sidecar_list.clone()),
        controller_revision,
    };
    upsert(&mut state.hash, set.name(), entry(annotation(HASH_ANNOTATION), set.latest_revision().to_owned()));
    upsert(
        &mut state.hash_without_image,
        set.name(),
        entry(annotation(HASH_WITHOUT_IMAGE_ANNOTATION), String::new()),
    );
}

/// docs/sidecarset.md#6-merging-into-the-pod: merge everything collected into the pod. The pod's own
/// containers, volumes and pull secrets stay borrowed; only what injection adds or replaces is new.
fn apply<'a>(
    pod: &mut Draft<'a>,
    sets: &[Chosen<'a>],
    built: Vec<Built<'a>>,
    state: &PodAnnotations,
) -> Result<(), AdmissionError> {
    let mut init = Vec::new();
    let mut containers = Vec::new();
    let mut volumes = Vec::new();
    let mut hot_names = Vec::new();
    for b in built {
        init.extend(b.init_containers);
        containers.extend(b.containers);
        volumes.extend(b.volumes);
        hot_names.extend(b.hot_upgraded);
    }
    init.sort_by(|a, b| a.name().cmp(b.name()));

    let spec = object_mut(pod, "spec", "the pod")?;
    merge_list(spec, "initContainers", init);
    merge_list(spec, "containers", containers);

    // Injected volumes are few: a scan of the pod's volume names per volume is cheaper than a set
    // of them (the names are read once).
    let mut pod_volumes = spec.take_list("volumes");
    let added = {
        let names: Vec<&str> = pod_volumes.iter().filter_map(name_of).collect();
        let mut added: Vec<Json> = Vec::new();
        for v in volumes {
            let name = build::name_of(&v);
            let new = name
                .is_some_and(|n| !names.contains(&n) && !added.iter().any(|a| build::name_of(a) == Some(n)));
            if new {
                added.push(v);
            }
        }
        added
    };
    pod_volumes.extend(added.into_iter().map(Draft::New));
    spec.put_list("volumes", pod_volumes);

    let mut secrets = spec.take_list("imagePullSecrets");
    let mut seen = std::collections::HashSet::new();
    secrets.retain(|s| seen.insert(s.field("name").and_then(Json::as_str).unwrap_or_default().to_owned()));
    for s in sets.iter().flat_map(|s| &s.spec.image_pull_secrets) {
        if seen.insert(s.name.clone()) {
            secrets.push(Draft::New(
                serde_json::to_value(s).map_err(|e| AdmissionError::Internal(e.to_string()))?.into(),
            ));
        }
    }
    spec.put_list("imagePullSecrets", secrets);

    let annotations = annotations_mut(pod)?;
    state.write(annotations);
    for name in hot_names {
        for (k, v) in hotupgrade::version_annotations(&name) {
            annotations.insert(k, Json::from(String::from(v)));
        }
    }
    Ok(())
}

fn name_of<'d>(item: &'d Draft<'_>) -> Option<&'d str> {
    item.field("name").and_then(Json::as_str)
}

fn merge_list<'a>(spec: &mut DraftMap<'a>, key: &str, injected: Vec<Injected<'a>>) {
    if injected.is_empty() {
        return;
    }
    let current = spec.take_list(key);
    spec.put_list(key, merge::merge(current, injected));
}
