//! DaemonSet-style scheduling stamp.
//!
//! The trigger is ours (docs/workloads.md#5-1-trigger): a Pod names a target node through
//! the `kruise-admission.dev/target-node` annotation, or through `spec.nodeName` when it is owned by
//! a DaemonSet (apps/v1 or apps.kruise.io) or carries `kruise-admission.dev/daemon-scheduling: "true"`.
//!
//! The stamp itself is upstream Kubernetes' (docs/workloads.md#5-2-node-pinning to 5-4; kubernetes/kubernetes
//! `pkg/controller/daemon/util/daemonset_util.go`): `ReplaceDaemonSetPodNodeNameNodeAffinity` (one
//! `matchFields metadata.name In [node]` term replaces every required term), `spec.nodeName` cleared so the
//! scheduler binds the pod, and `AddOrUpdateDaemonPodTolerations`. BroadcastJob pods are pinned without
//! tolerations (Kruise adds none, docs/workloads.md#5-5-broadcastjob); DaemonSet pods that name no node get
//! the tolerations only, as the controller's pod template would carry them.
//!
//! Everything is done on the pod's JSON (a copy-on-write draft: only affinity and tolerations are
//! copied, when the stamp writes them) so that fields this binary does not model survive.

use serde_json::json;

use super::Inputs;
use super::draft::{Draft, DraftMap};
use super::review::AdmissionError;
use crate::api::keys;
use crate::api::tree::{Json, Object};

/// The default daemon tolerations in upstream's order (docs/workloads.md#5-3-default-tolerations); the last
/// one only for hostNetwork pods.
const DEFAULT_TOLERATIONS: [(&str, &str); 6] = [
    (keys::TAINT_NODE_NOT_READY, "NoExecute"),
    (keys::TAINT_NODE_UNREACHABLE, "NoExecute"),
    (keys::TAINT_NODE_DISK_PRESSURE, "NoSchedule"),
    (keys::TAINT_NODE_MEMORY_PRESSURE, "NoSchedule"),
    (keys::TAINT_NODE_PID_PRESSURE, "NoSchedule"),
    (keys::TAINT_NODE_UNSCHEDULABLE, "NoSchedule"),
];
const HOST_NETWORK_TOLERATION: (&str, &str) = (keys::TAINT_NODE_NETWORK_UNAVAILABLE, "NoSchedule");

/// What the trigger decided for one pod.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// Pin to `node`; add the default tolerations unless the pod belongs to a BroadcastJob.
    Pin {
        node: String,
        tolerations: bool,
    },
    /// A DaemonSet pod that names no node: tolerations only.
    TolerationsOnly,
    Nothing,
}

/// Stamp node pinning and daemon tolerations onto a Pod (CREATE; the caller checks the operation
/// and that `spec` is an object). A pod that is already stamped is left exactly as it is.
///
/// The stamp reads nothing but the pod itself; it takes `Inputs` like every pod mutation so that
/// `pod::mutate` composes them the same way.
pub fn stamp(
    pod: &mut Draft<'_>,
    _inputs: &Inputs,
    warnings: &mut Vec<String>,
) -> Result<(), AdmissionError> {
    let plan = plan(pod, warnings);
    if plan == Plan::Nothing {
        return Ok(());
    }
    let Some(spec) = pod.object_mut().and_then(|p| p.get_mut("spec")).and_then(Draft::object_mut) else {
        return Err(AdmissionError::BadRequest("request.object.spec must be an object".into()));
    };
    match plan {
        Plan::Pin { node, tolerations } => {
            pin(spec, &node)?;
            if tolerations {
                add_daemon_tolerations(spec)?;
            }
        }
        Plan::TolerationsOnly => add_daemon_tolerations(spec)?,
        Plan::Nothing => {}
    }
    Ok(())
}

/// The trigger: which node (if any) the pod names, and who owns it.
fn plan(pod: &Draft<'_>, warnings: &mut Vec<String>) -> Plan {
    let annotation =
        |key: &str| pod.at(&["metadata", "annotations"]).and_then(|a| a.get(key)).and_then(Json::as_str);
    let (daemon_owned, broadcast_owned) = owners(pod);
    let target = match annotation(keys::TARGET_NODE_ANNOTATION) {
        Some("") => {
            warnings.push(format!(
                "annotation {} is empty; no node to pin the pod to",
                keys::TARGET_NODE_ANNOTATION
            ));
            None
        }
        other => other,
    };
    let node_name = pod.at(&["spec", "nodeName"]).and_then(Json::as_str).filter(|n| !n.is_empty());
    let opted_in = daemon_owned || annotation(keys::DAEMON_SCHEDULING_ANNOTATION) == Some("true");
    match target.or(node_name.filter(|_| opted_in)) {
        Some(node) => Plan::Pin { node: node.to_owned(), tolerations: !broadcast_owned },
        None if daemon_owned && !broadcast_owned => Plan::TolerationsOnly,
        None => Plan::Nothing,
    }
}

/// (owned by an apps/v1 or apps.kruise.io DaemonSet, owned by an apps.kruise.io BroadcastJob).
fn owners(pod: &Draft<'_>) -> (bool, bool) {
    let refs = pod
        .at(&["metadata", "ownerReferences"])
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (mut daemon, mut broadcast) = (false, false);
    for owner in refs {
        let kind = owner.get("kind").and_then(Json::as_str).unwrap_or_default();
        let api_version = owner.get("apiVersion").and_then(Json::as_str).unwrap_or_default();
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        match (kind, group) {
            ("DaemonSet", keys::APPS_GROUP | keys::KRUISE_APPS_GROUP) => daemon = true,
            ("BroadcastJob", keys::KRUISE_APPS_GROUP) => broadcast = true,
            _ => {}
        }
    }
    (daemon, broadcast)
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity` (docs/workloads.md#5-2-node-pinning), then clear
/// `spec.nodeName`.
fn pin(spec: &mut DraftMap<'_>, node: &str) -> Result<(), AdmissionError> {
    let terms = Json::from(
        json!([{"matchFields": [{"key": keys::NODE_NAME_FIELD, "operator": "In", "values": [node]}]}]),
    );
    let not_object =
        |path: &str| AdmissionError::BadRequest(format!("request.object.{path} must be an object"));
    let affinity = spec.value_mut("affinity").object_or_new().ok_or_else(|| not_object("spec.affinity"))?;
    let node_affinity =
        affinity.object_entry("nodeAffinity").ok_or_else(|| not_object("spec.affinity.nodeAffinity"))?;
    // Only the terms are replaced: podAffinity, podAntiAffinity, preferred terms and any field of
    // the node selector we do not know are kept.
    let required =
        node_affinity.object_entry("requiredDuringSchedulingIgnoredDuringExecution").ok_or_else(|| {
            not_object("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")
        })?;
    required.insert("nodeSelectorTerms", terms);
    spec.remove("nodeName");
    Ok(())
}

/// `AddOrUpdateDaemonPodTolerations` (docs/workloads.md#5-3-default-tolerations): each default in table
/// order, through add-or-update.
fn add_daemon_tolerations(spec: &mut DraftMap<'_>) -> Result<(), AdmissionError> {
    let host_network = spec.get("hostNetwork").and_then(Draft::value).and_then(Json::as_bool) == Some(true);
    let slot = spec.value_mut("tolerations");
    if slot.is_null() {
        *slot = Json::Array(Vec::new());
    }
    let Some(list) = slot.as_array_mut() else {
        return Err(AdmissionError::BadRequest("request.object.spec.tolerations must be an array".into()));
    };
    for (key, effect) in
        DEFAULT_TOLERATIONS.into_iter().chain(host_network.then_some(HOST_NETWORK_TOLERATION))
    {
        add_or_update(list, key, effect)?;
    }
    Ok(())
}

/// `AddOrUpdateTolerationInPodSpec` (docs/workloads.md#5-4-add-or-update) for the default toleration
/// `{key, operator: Exists, effect}`.
fn add_or_update(list: &mut Vec<Json<'_>>, key: &str, effect: &str) -> Result<(), AdmissionError> {
    let mut matching = Vec::new();
    for (index, existing) in list.iter().enumerate() {
        let Some(existing) = existing.as_object() else {
            return Err(AdmissionError::BadRequest(format!(
                "request.object.spec.tolerations[{index}] must be an object"
            )));
        };
        if matches_default(existing, key, effect) {
            // Matching ignores tolerationSeconds; deep equality does not. The first deep-equal
            // entry leaves the whole list as it is.
            if is_unset(existing.get("tolerationSeconds")) {
                return Ok(());
            }
            matching.push(index);
        }
    }
    let wanted = Json::from(json!({"key": key, "operator": "Exists", "effect": effect}));
    if matching.is_empty() {
        list.push(wanted);
        return Ok(());
    }
    for index in matching {
        list[index] = wanted.clone();
    }
    Ok(())
}

/// Key, effect, operator and value equal to the default's (`operator: Exists`, no value). An empty
/// operator means `Equal`, so it never matches the defaults' `Exists`.
fn matches_default(toleration: &Object<'_>, key: &str, effect: &str) -> bool {
    let field = |name: &str| match toleration.get(name) {
        None | Some(Json::Null) => Some(""),
        Some(v) => v.as_str(),
    };
    let operator = match field("operator") {
        Some("") => Some("Equal"),
        other => other,
    };
    field("key") == Some(key)
        && field("effect") == Some(effect)
        && operator == Some("Exists")
        && field("value") == Some("")
}

fn is_unset(value: Option<&Json<'_>>) -> bool {
    value.is_none_or(Json::is_null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::patch::diff;
    use serde_json::Value;

    /// The seven defaults, written out from the table in docs/workloads.md#5-3-default-tolerations.
    fn defaults(host_network: bool) -> Vec<Value> {
        let mut list = vec![
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
        ];
        if host_network {
            list.push(json!({"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}));
        }
        list
    }

    /// The tolerations of a targeted pod that had `user`'s, once stamped.
    fn tolerations_after(user: &[Value]) -> Vec<Value> {
        let out = stamped(pod(targeted("n"), json!({"containers": containers(), "tolerations": user})));
        out["spec"]["tolerations"].as_array().cloned().unwrap_or_default()
    }

    /// `user`'s tolerations first, in order, then every default (no host network).
    fn user_then_defaults(mut user: Vec<Value>) -> Vec<Value> {
        user.extend(defaults(false));
        user
    }

    fn pinned_to(node: &str) -> Value {
        json!({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]})
    }

    fn pod(metadata: Value, spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    }

    fn containers() -> Value {
        json!([{"name": "app", "image": "busybox"}])
    }

    fn targeted(node: &str) -> Value {
        json!({"annotations": {"kruise-admission.dev/target-node": node}})
    }

    fn owned_by(api_version: &str, kind: &str) -> Value {
        json!({"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "1", "controller": true}]})
    }

    fn with_inputs<R>(f: impl FnOnce(&Inputs) -> R) -> R {
        use crate::admission::{FixedClock, SeededRandom, Settings};
        use crate::cluster::{Answers, Snapshot};
        let (cluster, answers, settings) = (Snapshot::default(), Answers::default(), Settings::default());
        let (clock, random) = (FixedClock(time::OffsetDateTime::UNIX_EPOCH), SeededRandom::new(0));
        f(&Inputs {
            cluster: &cluster,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        })
    }

    fn stamp_pod(pod: &mut Value, warnings: &mut Vec<String>) -> Result<(), AdmissionError> {
        let original = Json::from(&*pod);
        let mut draft = Draft::Same(&original);
        with_inputs(|inputs| stamp(&mut draft, inputs, warnings))?;
        let stamped = draft.into_json().into_value();
        *pod = stamped;
        Ok(())
    }

    fn stamped(mut pod: Value) -> Value {
        let mut warnings = Vec::new();
        stamp_pod(&mut pod, &mut warnings).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        pod
    }

    fn required(pod: &Value) -> &Value {
        &pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    }

    // --- Trigger (docs/workloads.md#5-1-trigger) ---

    #[test]
    fn target_node_annotation_pins_a_plain_pod_and_adds_tolerations() {
        let out = stamped(pod(targeted("node-a"), json!({"containers": containers()})));
        assert_eq!(
            out["spec"]["affinity"],
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pinned_to("node-a")}})
        );
        assert_eq!(out["spec"]["tolerations"], Value::Array(defaults(false)));
    }

    #[test]
    fn node_name_on_an_apps_v1_daemonset_pod_is_the_target() {
        let out = stamped(pod(
            owned_by("apps/v1", "DaemonSet"),
            json!({"nodeName": "node-b", "containers": containers()}),
        ));
        assert_eq!(required(&out), &pinned_to("node-b"));
        assert!(out["spec"].get("nodeName").is_none());
        assert_eq!(out["spec"]["tolerations"], Value::Array(defaults(false)));
    }

    #[test]
    fn node_name_on_a_kruise_daemonset_pod_is_the_target() {
        for version in ["apps.kruise.io/v1alpha1", "apps.kruise.io/v1beta1"] {
            let out = stamped(pod(
                owned_by(version, "DaemonSet"),
                json!({"nodeName": "node-c", "containers": containers()}),
            ));
            assert_eq!(required(&out), &pinned_to("node-c"), "{version}");
            assert!(out["spec"].get("nodeName").is_none());
        }
    }

    #[test]
    fn node_name_with_the_opt_in_annotation_is_the_target() {
        let meta = json!({"annotations": {"kruise-admission.dev/daemon-scheduling": "true"}});
        let out = stamped(pod(meta, json!({"nodeName": "node-d", "containers": containers()})));
        assert_eq!(required(&out), &pinned_to("node-d"));
        assert!(out["spec"].get("nodeName").is_none());
        assert_eq!(out["spec"]["tolerations"], Value::Array(defaults(false)));
    }

    #[test]
    fn node_name_alone_does_not_trigger() {
        let cases = [
            json!({}),
            owned_by("apps/v1", "ReplicaSet"),
            owned_by("example.com/v1", "DaemonSet"),
            owned_by("extensions/v1beta1", "DaemonSet"),
            json!({"annotations": {"kruise-admission.dev/daemon-scheduling": "false"}}),
            json!({"annotations": {"kruise-admission.dev/daemon-scheduling": "True"}}),
        ];
        for meta in cases {
            let input = pod(meta.clone(), json!({"nodeName": "node-e", "containers": containers()}));
            assert_eq!(stamped(input.clone()), input, "{meta}");
        }
    }

    #[test]
    fn a_pod_naming_no_node_is_left_alone() {
        let input = pod(json!({"name": "p"}), json!({"containers": containers()}));
        assert_eq!(stamped(input.clone()), input);
    }

    #[test]
    fn an_empty_target_node_annotation_is_ignored_with_a_warning() {
        let input = pod(targeted(""), json!({"containers": containers()}));
        let mut out = input.clone();
        let mut warnings = Vec::new();
        stamp_pod(&mut out, &mut warnings).unwrap();
        assert_eq!(out, input);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("kruise-admission.dev/target-node"));
    }

    #[test]
    fn the_annotation_names_the_node_even_when_node_name_differs() {
        let out = stamped(pod(targeted("node-a"), json!({"nodeName": "node-z", "containers": containers()})));
        assert_eq!(required(&out), &pinned_to("node-a"));
        assert!(out["spec"].get("nodeName").is_none());
    }

    // --- pinning (docs/workloads.md#5-2-node-pinning) ---

    #[test]
    fn affinity_with_only_pod_affinities_keeps_them_and_gains_node_affinity() {
        let pod_affinity = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone", "labelSelector": {}}]});
        let anti = json!({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "host"}}]});
        let spec = json!({"containers": containers(), "affinity": {"podAffinity": pod_affinity, "podAntiAffinity": anti}});
        let out = stamped(pod(targeted("n1"), spec));
        assert_eq!(out["spec"]["affinity"]["podAffinity"], pod_affinity);
        assert_eq!(out["spec"]["affinity"]["podAntiAffinity"], anti);
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"],
            json!({"requiredDuringSchedulingIgnoredDuringExecution": pinned_to("n1")})
        );
    }

    #[test]
    fn preferred_terms_are_kept_when_required_is_set() {
        let preferred = json!([{"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]);
        let spec = json!({"containers": containers(), "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}});
        let out = stamped(pod(targeted("n1"), spec));
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            preferred
        );
        assert_eq!(required(&out), &pinned_to("n1"));
        // An explicit null is the same as absent.
        let spec = json!({"containers": containers(), "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": null, "preferredDuringSchedulingIgnoredDuringExecution": preferred}}});
        let out = stamped(pod(targeted("n1"), spec));
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            preferred
        );
        assert_eq!(required(&out), &pinned_to("n1"));
    }

    #[test]
    fn all_existing_required_terms_are_replaced_by_one_match_fields_term() {
        let terms = json!([
            {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
             "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}]},
            {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["3"]}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other"]}]}
        ]);
        let preferred =
            json!([{"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]);
        let spec = json!({"containers": containers(), "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
            "preferredDuringSchedulingIgnoredDuringExecution": preferred}}});
        let out = stamped(pod(targeted("n2"), spec));
        assert_eq!(required(&out), &pinned_to("n2"));
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            preferred
        );
    }

    #[test]
    fn node_selector_is_left_unchanged_and_node_name_is_removed() {
        let spec = json!({"containers": containers(), "nodeSelector": {"disk": "ssd"}, "nodeName": "n3"});
        let out = stamped(pod(owned_by("apps/v1", "DaemonSet"), spec));
        assert_eq!(out["spec"]["nodeSelector"], json!({"disk": "ssd"}));
        assert!(out["spec"].get("nodeName").is_none());
        // The patch removes nodeName rather than blanking it.
        let input =
            pod(owned_by("apps/v1", "DaemonSet"), json!({"containers": containers(), "nodeName": "n3"}));
        let ops = serde_json::to_value(diff(&input, &stamped(input.clone()))).unwrap();
        assert!(
            ops.as_array().unwrap().contains(&json!({"op": "remove", "path": "/spec/nodeName"})),
            "{ops}"
        );
    }

    #[test]
    fn unknown_fields_survive_the_stamp() {
        let spec = json!({
            "containers": containers(),
            "futureField": {"x": 1},
            "affinity": {"futureAffinity": true, "nodeAffinity": {"futureNode": 2,
                "requiredDuringSchedulingIgnoredDuringExecution": {"futureSelector": "keep", "nodeSelectorTerms": []}}},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "futureTol": 3}]
        });
        let input = pod(targeted("n4"), spec);
        let out = stamped(input.clone());
        assert_eq!(out["spec"]["futureField"], json!({"x": 1}));
        assert_eq!(out["spec"]["affinity"]["futureAffinity"], true);
        assert_eq!(out["spec"]["affinity"]["nodeAffinity"]["futureNode"], 2);
        assert_eq!(required(&out)["futureSelector"], "keep");
        assert_eq!(out["spec"]["tolerations"][0]["futureTol"], 3);
        for op in diff(&input, &out) {
            assert!(!op.path().contains("future"), "{op:?}");
        }
    }

    // --- default tolerations (docs/workloads.md#5-3-default-tolerations) ---

    #[test]
    fn network_unavailable_only_with_host_network() {
        let with = stamped(pod(targeted("n"), json!({"containers": containers(), "hostNetwork": true})));
        assert_eq!(with["spec"]["tolerations"], Value::Array(defaults(true)));
        let without = stamped(pod(targeted("n"), json!({"containers": containers(), "hostNetwork": false})));
        assert_eq!(without["spec"]["tolerations"], Value::Array(defaults(false)));
    }

    #[test]
    fn user_tolerations_come_first_and_defaults_follow_in_table_order() {
        let user =
            vec![json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"})];
        assert_eq!(tolerations_after(&user), user_then_defaults(user));
    }

    // --- add-or-update (docs/workloads.md#5-4-add-or-update) ---

    #[test]
    fn a_deep_equal_toleration_is_left_in_place_and_not_duplicated() {
        let user = vec![
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"key": "x", "operator": "Exists"}),
        ];
        let list = tolerations_after(&user);
        assert_eq!(list.len(), 2 + 5);
        assert_eq!(list[..2], user[..]);
        let rest: Vec<Value> =
            defaults(false).into_iter().filter(|t| t["key"] != "node.kubernetes.io/unschedulable").collect();
        assert_eq!(list[2..], rest[..]);
    }

    #[test]
    fn a_matching_toleration_with_seconds_is_replaced_in_place() {
        let user = vec![
            json!({"key": "a", "operator": "Exists"}),
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
            json!({"key": "b", "operator": "Exists"}),
        ];
        let list = tolerations_after(&user);
        assert_eq!(
            list[1],
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"})
        );
        assert_eq!(list.len(), 3 + 5);
        assert_eq!(list.iter().filter(|t| t["key"] == "node.kubernetes.io/not-ready").count(), 1);
    }

    #[test]
    fn every_matching_toleration_is_replaced() {
        let user = vec![
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}),
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 20}),
        ];
        let list = tolerations_after(&user);
        let t = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"});
        assert_eq!(list[0], t);
        assert_eq!(list[1], t);
        assert_eq!(list.len(), 2 + 5);
    }

    #[test]
    fn a_deep_equal_entry_anywhere_leaves_the_list_unchanged() {
        // The walk stops at the deep-equal entry without keeping any earlier replacement.
        let user = vec![
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}),
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        ];
        let list = tolerations_after(&user);
        assert_eq!(list[..2], user[..]);
        assert_eq!(list.len(), 2 + 5);
    }

    #[test]
    fn tolerations_differing_in_operator_value_or_effect_are_kept_and_the_default_added() {
        let user = vec![
            // operator Equal with an empty value: not the default's Exists.
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Equal", "value": "", "effect": "NoExecute"}),
            // An empty operator means Equal, so it does not match Exists either.
            json!({"key": "node.kubernetes.io/unreachable", "operator": "", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}),
            // Empty effect (matches every effect when tolerating) is not equal to NoSchedule.
            json!({"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}),
            // A value makes it differ too.
            json!({"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "value": "x", "effect": "NoSchedule"}),
        ];
        assert_eq!(tolerations_after(&user), user_then_defaults(user));
    }

    #[test]
    fn a_tolerate_everything_entry_does_not_stop_the_defaults() {
        let user = vec![json!({"operator": "Exists"})];
        assert_eq!(tolerations_after(&user), user_then_defaults(user));
    }

    // --- Owners: BroadcastJob and DaemonSet without a node ---

    #[test]
    fn broadcast_job_pods_are_pinned_without_tolerations() {
        let mut meta = owned_by("apps.kruise.io/v1alpha1", "BroadcastJob");
        meta["annotations"] = json!({"kruise-admission.dev/target-node": "n5"});
        let out = stamped(pod(meta, json!({"containers": containers(), "nodeName": "n5"})));
        assert_eq!(required(&out), &pinned_to("n5"));
        assert!(out["spec"].get("nodeName").is_none());
        assert!(out["spec"].get("tolerations").is_none());

        let mut meta = owned_by("apps.kruise.io/v1alpha1", "BroadcastJob");
        meta["annotations"] = json!({"kruise-admission.dev/daemon-scheduling": "true"});
        let user = json!([{"key": "k", "operator": "Exists"}]);
        let out = stamped(pod(
            meta,
            json!({"containers": containers(), "nodeName": "n6", "tolerations": user.clone()}),
        ));
        assert_eq!(required(&out), &pinned_to("n6"));
        assert_eq!(out["spec"]["tolerations"], user);
    }

    #[test]
    fn node_name_alone_on_a_broadcast_job_pod_does_not_trigger() {
        let input = pod(
            owned_by("apps.kruise.io/v1alpha1", "BroadcastJob"),
            json!({"containers": containers(), "nodeName": "n"}),
        );
        assert_eq!(stamped(input.clone()), input);
    }

    #[test]
    fn daemonset_pods_naming_no_node_get_tolerations_only() {
        let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "role", "operator": "In", "values": ["edge"]}]}]}}});
        for version in ["apps/v1", "apps.kruise.io/v1beta1"] {
            let out = stamped(pod(
                owned_by(version, "DaemonSet"),
                json!({"containers": containers(), "affinity": affinity.clone()}),
            ));
            assert_eq!(out["spec"]["affinity"], affinity);
            assert!(out["spec"].get("nodeName").is_none());
            assert_eq!(out["spec"]["tolerations"], Value::Array(defaults(false)), "{version}");
        }
    }

    // --- Idempotency ---

    #[test]
    fn stamping_a_stamped_pod_changes_nothing() {
        let mut bcj = owned_by("apps.kruise.io/v1alpha1", "BroadcastJob");
        bcj["annotations"] = json!({"kruise-admission.dev/target-node": "n"});
        let cases = [
            pod(targeted("n"), json!({"containers": containers()})),
            pod(
                targeted("n"),
                json!({"containers": containers(), "hostNetwork": true,
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]}),
            ),
            pod(owned_by("apps/v1", "DaemonSet"), json!({"containers": containers(), "nodeName": "n"})),
            pod(owned_by("apps/v1", "DaemonSet"), json!({"containers": containers()})),
            pod(
                json!({"annotations": {"kruise-admission.dev/daemon-scheduling": "true"}}),
                json!({"containers": containers(), "nodeName": "n"}),
            ),
            pod(bcj, json!({"containers": containers()})),
        ];
        for input in cases {
            let once = stamped(input.clone());
            assert_ne!(once, input, "the first stamp must change something");
            let twice = stamped(once.clone());
            assert!(diff(&once, &twice).is_empty(), "{once}");
        }
    }

    // --- Shapes the apiserver would never send ---

    #[test]
    fn wrongly_typed_fields_are_bad_requests() {
        for spec in [
            json!({"containers": containers(), "affinity": "x"}),
            json!({"containers": containers(), "affinity": {"nodeAffinity": []}}),
            json!({"containers": containers(), "tolerations": {}}),
            json!({"containers": containers(), "tolerations": ["x"]}),
        ] {
            let mut p = pod(targeted("n"), spec.clone());
            let err = stamp_pod(&mut p, &mut Vec::new()).unwrap_err();
            assert_eq!(err.code(), 400, "{spec}");
        }
    }
}
