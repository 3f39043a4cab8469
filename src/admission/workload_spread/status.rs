//! Choosing a pod's subset and recording it in the WorkloadSpread's status (`acquireSuitableSubset`,
//! `updateSubsetForPod`).
//!
//! The status Kruise reads is the list of `status.versionedSubsetStatuses` for the pod's version
//! (the `pod-template-hash` of a Deployment's pods; one universal version for the other kinds).
//! When that list is missing or empty it is rebuilt from the spec: each subset with `maxReplicas`
//! as its `missingReplicas` (a percent of the workload's replicas, rounded up), `-1` (no limit)
//! without one.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::target::custom_workloads;
use super::{PodFacts, name_of, target_of};
use crate::admission::review::AdmissionError;
use crate::admission::writes::{self, OnFailure, StatusWrite};
use crate::admission::{Inputs, generated};
use crate::api::keys::{APPS_GROUP, KRUISE_APPS_GROUP};
use crate::api::meta::IntOrString;
use crate::cluster::controller_finder::group_of;

/// `VersionIgnored`: the version of pods whose workload has no versioned statuses.
pub const VERSION_IGNORED: &str = "versionIgnored";

/// Where the pod is to be recorded.
#[derive(Debug, Clone, Copy)]
pub enum Record<'s> {
    /// A new pod: in the chosen subset's `creatingPods`.
    Creating,
    /// A pod going away: in `deletingPods` of the subset its annotation names.
    Deleting { subset: &'s str },
}

/// The outcome: the subset chosen (to patch the pod with, on creation), the id a pod without a
/// name was recorded under, and the status write.
#[derive(Debug, Default)]
pub struct Acquired {
    pub subset: Option<String>,
    pub uid: Option<String>,
    pub write: Option<StatusWrite>,
}

/// `acquireSuitableSubset` for `ws`, the WorkloadSpread that governs the pod (creation) or that
/// its annotation names (deletion).
pub fn acquire(
    inputs: &Inputs,
    ws: &Arc<Value>,
    pod: &PodFacts,
    record: Record,
) -> Result<Acquired, AdmissionError> {
    let subsets = subsets_of(ws);
    // One subset without a limit takes every pod, and nothing needs counting.
    if let [only] = subsets
        && only.get("maxReplicas").is_none_or(Value::is_null)
    {
        return Ok(Acquired { subset: Some(text(only, "name").to_owned()), ..Acquired::default() });
    }
    if ws.pointer("/spec/targetRef/kind").and_then(Value::as_str) == Some("StatefulSet") {
        return Ok(Acquired { subset: by_ordinal(ws, subsets, &pod.name), ..Acquired::default() });
    }
    let (namespace, name) = name_of(ws);
    let target = target_of(namespace, name);
    // Gone since it was matched (a fresh read after a conflict): no subset, nothing recorded.
    let Some(current) = writes::current(inputs, &target) else { return Ok(Acquired::default()) };
    let mut object = Value::clone(&current);
    let version = pod_version(pod);
    let mut statuses = versioned(&object, &version);
    if statuses.is_empty() {
        statuses = initial_statuses(inputs, &object)?;
    }
    let Some((index, uid)) = record_in(inputs, &mut statuses, pod, record)? else {
        let subset = match record {
            Record::Creating => recorded_in(&statuses, &pod.name)
                .filter(|_| !pod.name.is_empty())
                .or_else(|| suitable(&statuses))
                .map(|i| text(&statuses[i], "name").to_owned()),
            Record::Deleting { .. } => None,
        };
        return Ok(Acquired { subset, ..Acquired::default() });
    };
    let subset = text(&statuses[index], "name").to_owned();
    set_versioned(&mut object, &version, statuses);
    // Kruise answers a failed write as it answers any error of the webhook that made it.
    let on_failure = match record {
        Record::Creating => OnFailure::Internal,
        Record::Deleting { .. } => OnFailure::BadRequest,
    };
    let write = StatusWrite { target, object, on_failure };
    Ok(Acquired { subset: Some(subset), uid, write: Some(write) })
}

/// Record the pod in `statuses` as `record` says: the index of the subset changed and the id a
/// pod without a name got, or `None` when nothing is to be written (recorded already, no subset
/// with room, a subset without a limit).
fn record_in(
    inputs: &Inputs,
    statuses: &mut [Value],
    pod: &PodFacts,
    record: Record,
) -> Result<Option<(usize, Option<String>)>, AdmissionError> {
    let (index, key, uid, list, step) = match record {
        Record::Creating => {
            if !pod.name.is_empty() && recorded_in(statuses, &pod.name).is_some() {
                return Ok(None);
            }
            let Some(index) = suitable(statuses) else { return Ok(None) };
            // A pod with only a generateName has no name yet: it is recorded under a new UUID,
            // which its annotation carries.
            let uid = pod.name.is_empty().then(|| generated::uuid(inputs.random));
            let key = uid.clone().unwrap_or_else(|| pod.name.clone());
            (index, key, uid, "creatingPods", -1)
        }
        Record::Deleting { subset } => {
            if recorded_in(statuses, &pod.name).is_some() {
                return Ok(None);
            }
            let Some(index) = statuses.iter().position(|s| text(s, "name") == subset) else {
                return Ok(None);
            };
            (index, pod.name.clone(), None, "deletingPods", 1)
        }
    };
    let status = &mut statuses[index];
    let missing = missing_replicas(status);
    if missing == -1 {
        return Ok(None);
    }
    let now = inputs.timestamp()?;
    let Some(fields) = status.as_object_mut() else { return Ok(None) };
    let pods = fields.entry(list).or_insert_with(|| Value::Object(Map::new()));
    if !pods.is_object() {
        *pods = Value::Object(Map::new());
    }
    if let Some(pods) = pods.as_object_mut() {
        pods.insert(key, Value::String(now));
    }
    // Creation takes room from a subset with room; deletion gives it back to a limited subset.
    if missing > 0 || (step > 0 && missing >= 0) {
        fields.insert("missingReplicas".into(), json!(missing + step));
    }
    Ok(Some((index, uid)))
}

/// The subset whose `creatingPods` or `deletingPods` holds `name` (`isPodRecordedInSubset`).
fn recorded_in(statuses: &[Value], name: &str) -> Option<usize> {
    statuses.iter().position(|s| {
        ["creatingPods", "deletingPods"].iter().any(|list| s.get(list).and_then(|p| p.get(name)).is_some())
    })
}

/// `getSuitableSubset`: the first subset not marked unschedulable that has room (or no limit).
fn suitable(statuses: &[Value]) -> Option<usize> {
    statuses.iter().position(|s| {
        let missing = missing_replicas(s);
        !unschedulable(s) && (missing > 0 || missing == -1)
    })
}

/// A `Schedulable` condition with status `False` (Kruise's controller sets it on Adaptive subsets
/// whose pods could not be scheduled).
fn unschedulable(status: &Value) -> bool {
    let conditions =
        status.get("conditions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    conditions.iter().find(|c| text(c, "type") == "Schedulable").is_some_and(|c| text(c, "status") == "False")
}

fn missing_replicas(status: &Value) -> i64 {
    status.get("missingReplicas").and_then(Value::as_i64).unwrap_or(0)
}

/// StatefulSets get their subset by ordinal: with limits 5, 5 and none, ordinals 0–4 go to the first
/// subset, 5–9 to the second, the rest to the third. Subsets marked unschedulable in
/// `status.subsetStatuses` are passed over; a limit is `maxReplicas` read as Go's `IntValue` (a
/// percent counts 0); a name without an ordinal gets no subset.
fn by_ordinal(ws: &Value, subsets: &[Value], pod_name: &str) -> Option<String> {
    let ordinal = ordinal_of(pod_name);
    let statuses = ws.pointer("/status/subsetStatuses").and_then(Value::as_array);
    let mut threshold: i64 = 0;
    for subset in subsets {
        let name = text(subset, "name");
        let status = statuses.and_then(|all| all.iter().find(|s| text(s, "name") == name));
        if status.is_some_and(unschedulable) {
            continue;
        }
        threshold += match max_replicas(subset) {
            None => i64::from(i32::MAX),
            Some(IntOrString::Int(v)) => v,
            Some(IntOrString::String(s)) => s.parse().unwrap_or(0),
        };
        if ordinal < threshold {
            return Some(name.to_owned());
        }
    }
    None
}

/// `getParentNameAndOrdinal`: the number after the last `-` of `name`, or -1.
fn ordinal_of(name: &str) -> i64 {
    // Go's `(.*)-([0-9]+)$`: digits from the last `-` to the end (the parent may be empty).
    let Some((_, digits)) = name.rsplit_once('-') else { return -1 };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return -1;
    }
    digits.parse::<i32>().map_or(-1, i64::from)
}

/// `GetPodVersion`: the pods of a ReplicaSet or Deployment are counted per version (their
/// `pod-template-hash`, else the last part of their `controller-revision-hash`); all other pods
/// share [`VERSION_IGNORED`].
fn pod_version(pod: &PodFacts) -> String {
    let versioned = pod
        .controller
        .as_ref()
        .is_some_and(|o| matches!(o.kind.to_lowercase().as_str(), "deployment" | "replicaset"));
    if !versioned {
        return VERSION_IGNORED.into();
    }
    if let Some(hash) = pod.labels.get("pod-template-hash") {
        return hash.clone();
    }
    match pod.labels.get("controller-revision-hash") {
        Some(hash) => hash.rsplit('-').next().unwrap_or_default().to_owned(),
        None => VERSION_IGNORED.into(),
    }
}

fn versioned(ws: &Value, version: &str) -> Vec<Value> {
    let statuses = ws.pointer("/status/versionedSubsetStatuses").and_then(|v| v.get(version));
    statuses.and_then(Value::as_array).cloned().unwrap_or_default()
}

fn set_versioned(ws: &mut Value, version: &str, statuses: Vec<Value>) {
    let Some(root) = ws.as_object_mut() else { return };
    let status = root.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let by_version = &mut status["versionedSubsetStatuses"];
    if !by_version.is_object() {
        *by_version = json!({});
    }
    by_version[version] = Value::Array(statuses);
}

/// `initializedSubsetStatuses`: one status per subset of the spec, as Kruise writes it.
fn initial_statuses(inputs: &Inputs, ws: &Value) -> Result<Vec<Value>, AdmissionError> {
    let subsets = subsets_of(ws);
    let percent =
        subsets.iter().any(|s| matches!(max_replicas(s), Some(IntOrString::String(p)) if p.ends_with('%')));
    let replicas = if percent { workload_replicas(inputs, ws)? } else { 0 };
    Ok(subsets
        .iter()
        .map(|subset| {
            let missing = match max_replicas(subset) {
                None => -1,
                // A string that is not a percent counts 0 (Kruise ignores the error).
                Some(limit) => limit.scaled(replicas, true).unwrap_or(0),
            };
            json!({"name": text(subset, "name"), "replicas": 0, "missingReplicas": missing})
        })
        .collect())
}

/// `getWorkloadReplicas`: the replicas of the workload `targetRef` names (0 when it does not exist);
/// with `targetFilter.replicasPathList`, the sum of the numbers at those paths.
fn workload_replicas(inputs: &Inputs, ws: &Value) -> Result<i64, AdmissionError> {
    let (namespace, _) = name_of(ws);
    let text_at = |p| ws.pointer(p).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind, name) = (
        text_at("/spec/targetRef/apiVersion"),
        text_at("/spec/targetRef/kind"),
        text_at("/spec/targetRef/name"),
    );
    let Some(group) = group_of(api_version) else { return Ok(0) };
    let Some(workload) = inputs.cluster.get(group, kind, namespace, name) else { return Ok(0) };
    let paths = ws.pointer("/spec/targetFilter/replicasPathList").and_then(Value::as_array);
    if let Some(paths) = paths.filter(|p| !p.is_empty()) {
        let mut sum = 0;
        for path in paths {
            sum += replicas_at(&workload, path.as_str().unwrap_or_default())
                .map_err(AdmissionError::Internal)?;
        }
        return Ok(sum);
    }
    // The API server defaults these to 1 (Kruise would dereference nil).
    let at = |p| workload.pointer(p).and_then(Value::as_i64).unwrap_or(1);
    Ok(match (group, kind) {
        (APPS_GROUP, "Deployment" | "ReplicaSet" | "StatefulSet")
        | (KRUISE_APPS_GROUP, "CloneSet" | "StatefulSet") => at("/spec/replicas"),
        ("batch", "Job") => at("/spec/parallelism"),
        _ => custom_workloads(inputs)
            .iter()
            .find(|w| w.group == group && w.kind == kind)
            .map_or(0, |w| replicas_at(&workload, &w.replicas_path).unwrap_or(0)),
    })
}

/// `GetReplicasFromObject`: the integer at a dot-separated path (list elements by index); an empty
/// path is 0. Kruise's errors, with its messages, for a path that is missing or leads elsewhere.
fn replicas_at(object: &Value, path: &str) -> Result<i64, String> {
    if path.is_empty() {
        return Ok(0);
    }
    let mut at = object;
    for key in path.split('.') {
        at = match at {
            Value::Object(map) => map.get(key).ok_or_else(|| format!("path \"{key}\" not exists"))?,
            Value::Array(items) => {
                let i: i64 = key.parse().map_err(|_| {
                    format!(
                        "strconv.Atoi: parsing {}: invalid syntax",
                        crate::api::field_errors::go_quote(key)
                    )
                })?;
                usize::try_from(i)
                    .ok()
                    .and_then(|i| items.get(i))
                    .ok_or_else(|| format!("index {i} out of range"))?
            }
            _ => return Err("object is not deep enough".into()),
        };
    }
    // int32 in Kruise: a larger count wraps as Go's conversion does.
    at.as_i64().map(|n| i64::from(n as i32)).ok_or_else(|| "object type error".into())
}

fn subsets_of(ws: &Value) -> &[Value] {
    ws.pointer("/spec/subsets").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn max_replicas(subset: &Value) -> Option<IntOrString> {
    subset.get("maxReplicas").filter(|m| !m.is_null()).and_then(|m| serde_json::from_value(m.clone()).ok())
}

fn text<'v>(value: &'v Value, key: &str) -> &'v str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}
