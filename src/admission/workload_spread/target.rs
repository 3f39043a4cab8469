//! Which WorkloadSpread governs a new pod (`HandlePodCreation`): one of the pod's namespace whose
//! `targetRef` is the pod's controller or, walking up controller references through the kinds
//! WorkloadSpread follows, an owner of it (a ReplicaSet's Deployment), and whose `targetFilter`
//! selects the pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Owner, PodFacts, WS_GROUP, WS_KIND};
use crate::admission::Inputs;
use crate::admission::review::AdmissionError;
use crate::admission::sidecarset_rules::selector;
use crate::api::keys::{APPS_GROUP, KRUISE_APPS_GROUP};
use crate::api::meta::LabelSelector;
use crate::cluster::controller_finder::{field, group_of};
use crate::cluster::live::KRUISE_CONFIGMAP;

/// The `kruise-configuration` key of the custom workloads WorkloadSpread follows
/// (`configuration.WSWatchCustomWorkloadWhiteList`).
pub const WHITELIST_KEY: &str = "WorkloadSpread_Watch_Custom_Workload_WhiteList";

/// The built-in kinds WorkloadSpread follows, by group (Kruise's `workloads`).
const BUILT_IN: [(&str, &str); 6] = [
    (APPS_GROUP, "Deployment"),
    (KRUISE_APPS_GROUP, "CloneSet"),
    (APPS_GROUP, "ReplicaSet"),
    ("batch", "Job"),
    (APPS_GROUP, "StatefulSet"),
    (KRUISE_APPS_GROUP, "StatefulSet"),
];

/// The first WorkloadSpread, in name order, of the pod's namespace that governs the pod (`owner`
/// is its controller reference). An owner on the way up that does not exist fails the request as
/// it fails Kruise's (500, the API's not-found message), unless an earlier WorkloadSpread matched.
pub fn governing(
    inputs: &Inputs<'_>,
    owner: &Owner,
    pod: &PodFacts,
) -> Result<Option<Arc<Value>>, AdmissionError> {
    // matchReference: a controller of another kind, or an apiVersion Go cannot parse, is no workload.
    if !group_of(&owner.api_version).is_some_and(|group| follows(inputs, group, &owner.kind)) {
        return Ok(None);
    }
    for ws in inputs.cluster.list(WS_GROUP, WS_KIND, Some(&pod.namespace)) {
        let deleting = ws.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let Some(target) = ws.pointer("/spec/targetRef").filter(|t| t.is_object()) else { continue };
        if deleting {
            continue;
        }
        match refers_to(inputs, target, owner.clone(), &pod.namespace) {
            Err(Walk::NotFound(message)) => return Err(AdmissionError::Internal(message)),
            // Kruise logs an unparsable apiVersion and goes on with the next WorkloadSpread.
            Err(Walk::Unparsable) | Ok(false) => continue,
            Ok(true) => {}
        }
        if selects(ws.pointer("/spec/targetFilter"), &pod.labels) == Some(true) {
            return Ok(Some(ws));
        }
    }
    Ok(None)
}

/// Why the walk up the owners stopped without an answer.
enum Walk {
    /// An apiVersion Go cannot parse.
    Unparsable,
    /// An owner to read does not exist: the API's message for it.
    NotFound(String),
}

/// `isReferenceEqual`: `target` names `owner` (group, not version; kind; name), or an owner of it
/// further up, reached through the kinds WorkloadSpread follows.
fn refers_to(inputs: &Inputs, target: &Value, mut owner: Owner, namespace: &str) -> Result<bool, Walk> {
    let text = |key| target.get(key).and_then(Value::as_str).unwrap_or_default();
    let target_group = group_of(text("apiVersion")).ok_or(Walk::Unparsable)?;
    loop {
        let group = group_of(&owner.api_version).ok_or(Walk::Unparsable)?;
        if group == target_group && owner.kind == text("kind") && owner.name == text("name") {
            return Ok(true);
        }
        if !follows(inputs, group, &owner.kind) {
            return Ok(false);
        }
        let Some(object) = inputs.cluster.get(group, &owner.kind, namespace, &owner.name) else {
            // A custom workload of the whitelist may simply not be cached (live mode watches the
            // built-in kinds only): its absence ends the walk without a match.
            if !built_in(group, &owner.kind) {
                return Ok(false);
            }
            return Err(Walk::NotFound(not_found(group, &owner.kind, &owner.name)));
        };
        match Owner::controller_of(&object) {
            Some(next) => owner = next,
            None => return Ok(false),
        }
    }
}

/// The API server's not-found message: `deployments.apps "web" not found`. The resource is the
/// kind in lower case made plural as the REST mapper guesses it.
pub fn not_found(group: &str, kind: &str, name: &str) -> String {
    let lower = kind.to_lowercase();
    let resource = if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    };
    let resource = if group.is_empty() { resource } else { format!("{resource}.{group}") };
    format!("{resource} {name:?} not found")
}

/// Whether WorkloadSpread follows pods of `group`/`kind`: the built-in kinds, and the kinds and
/// subresource kinds of `kruise-configuration`'s whitelist.
pub fn follows(inputs: &Inputs, group: &str, kind: &str) -> bool {
    built_in(group, kind)
        || custom_workloads(inputs).iter().any(|w| {
            (w.group == group && w.kind == kind)
                || w.sub_resources.iter().any(|(g, k)| g == group && k == kind)
        })
}

fn built_in(group: &str, kind: &str) -> bool {
    BUILT_IN.iter().any(|(g, k)| *g == group && *k == kind)
}

/// One custom workload of the whitelist.
#[derive(Debug, Default, PartialEq)]
pub struct CustomWorkload {
    pub group: String,
    pub kind: String,
    /// (group, kind) of its sub-resources, e.g. the ReplicaSet-like kind its pods belong to.
    pub sub_resources: Vec<(String, String)>,
    /// Where its replicas are (`spec.replicas`), dot-separated.
    pub replicas_path: String,
}

/// The whitelist of `kruise-configuration` (`{"workloads": [{"Group", "Version", "Kind",
/// "subResources": [...], "replicasPath"}]}`, keys in any case). A whitelist that does not parse
/// lists nothing (Kruise then follows the built-in kinds only).
pub fn custom_workloads(inputs: &Inputs) -> Vec<CustomWorkload> {
    let configmap = inputs.cluster.get("", "ConfigMap", &inputs.settings.kruise_namespace, KRUISE_CONFIGMAP);
    let text = configmap.as_ref().and_then(|c| c.get("data")?.get(WHITELIST_KEY)?.as_str());
    text.and_then(|t| parse_whitelist(t).ok()).unwrap_or_default()
}

fn parse_whitelist(text: &str) -> Result<Vec<CustomWorkload>, ()> {
    let object = match serde_json::from_str::<Value>(text).map_err(drop)? {
        Value::Null => return Ok(Vec::new()),
        Value::Object(object) => object,
        _ => return Err(()),
    };
    let list = |object: &serde_json::Map<String, Value>, key| match field(object, key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(()),
    };
    let text = |object: &serde_json::Map<String, Value>, key| match field(object, key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(()),
    };
    let as_object = |item: &Value| match item {
        Value::Null => Ok(serde_json::Map::new()),
        Value::Object(o) => Ok(o.clone()),
        _ => Err(()),
    };
    let mut out = Vec::new();
    for item in list(&object, "workloads")? {
        let item = as_object(&item)?;
        let mut sub_resources = Vec::new();
        for sub in list(&item, "subResources")? {
            let sub = as_object(&sub)?;
            text(&sub, "version")?;
            sub_resources.push((text(&sub, "group")?, text(&sub, "kind")?));
        }
        text(&item, "version")?;
        out.push(CustomWorkload {
            group: text(&item, "group")?,
            kind: text(&item, "kind")?,
            sub_resources,
            replicas_path: text(&item, "replicasPath")?,
        });
    }
    Ok(out)
}

/// `IsPodSelected`: no `targetFilter` selects every pod; a filter without a selector none, an empty
/// selector all. `None`: the selector cannot be used (Kruise logs it and skips the WorkloadSpread).
fn selects(filter: Option<&Value>, labels: &BTreeMap<String, String>) -> Option<bool> {
    let Some(filter) = filter.filter(|f| !f.is_null()) else { return Some(true) };
    let Some(value) = filter.get("selector").filter(|s| !s.is_null()) else { return Some(false) };
    let parsed: LabelSelector = serde_json::from_value(value.clone()).ok()?;
    selector::matches(&parsed, labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_messages_name_the_resource_as_the_api_does() {
        assert_eq!(not_found("apps", "ReplicaSet", "web-1"), r#"replicasets.apps "web-1" not found"#);
        assert_eq!(not_found("batch", "Job", "j"), r#"jobs.batch "j" not found"#);
        assert_eq!(not_found("x.io", "Policy", "p"), r#"policies.x.io "p" not found"#);
        assert_eq!(not_found("x.io", "Status", "s"), r#"statuses.x.io "s" not found"#);
    }

    #[test]
    fn the_whitelist_reads_keys_in_any_case() {
        let text = r#"{"workloads": [{"Group": "x.io", "version": "v1", "KIND": "Game",
            "subResources": [{"group": "x.io", "kind": "GameSet"}], "replicasPath": "spec.size"}]}"#;
        let parsed = parse_whitelist(text).unwrap();
        assert_eq!(
            parsed,
            vec![CustomWorkload {
                group: "x.io".into(),
                kind: "Game".into(),
                sub_resources: vec![("x.io".into(), "GameSet".into())],
                replicas_path: "spec.size".into(),
            }]
        );
        assert!(parse_whitelist(r#"{"workloads": [{"group": 1}]}"#).is_err());
        assert_eq!(parse_whitelist("null"), Ok(Vec::new()));
    }

    #[test]
    fn target_filters_select_as_kruise_does() {
        let labels: BTreeMap<String, String> = [("app".to_owned(), "web".to_owned())].into();
        assert_eq!(selects(None, &labels), Some(true));
        assert_eq!(selects(Some(&serde_json::json!({})), &labels), Some(false), "no selector: nothing");
        assert_eq!(
            selects(Some(&serde_json::json!({"selector": {}})), &labels),
            Some(true),
            "empty: everything"
        );
        let by = |op: &str| serde_json::json!({"selector": {"matchExpressions": [{"key": "app", "operator": op, "values": ["web"]}]}});
        assert_eq!(selects(Some(&by("In")), &labels), Some(true));
        assert_eq!(selects(Some(&by("NotIn")), &labels), Some(false));
        assert_eq!(selects(Some(&by("Is")), &labels), None);
    }
}
