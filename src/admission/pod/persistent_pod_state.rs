//! Step 6 of `/mutate-pod`: PersistentPodState (Kruise's `persistentPodStateMutatingPod`,
//! `pkg/webhook/pod/mutating/persistent_pod_state.go`). A PersistentPodState records, per pod name
//! of a StatefulSet-like workload, the topology labels of the node the pod last ran on; a pod
//! recreated under that name is steered back there: the required topology keys become
//! `nodeSelector` entries, each preferred term a `PreferredSchedulingTerm`, and the pod is marked
//! with `kruise.io/injected-persistent-pod-state`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::controller_ref;
use crate::admission::Inputs;
use crate::admission::draft::{Draft, Node};
use crate::admission::injection::{annotations_mut, object_mut};
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::api::keys::KRUISE_APPS_GROUP;
use crate::api::tree::Json;
use crate::cluster::controller_finder::{CustomWorkloads, group_of};

/// `mutating.InjectedPersistentPodStateKey`: the name of the PersistentPodState applied.
pub const INJECTED_ANNOTATION: &str = "kruise.io/injected-persistent-pod-state";
/// PersistentPodStates: `apps.kruise.io/v1alpha1`, namespaced.
pub const PPS_KIND: &str = "PersistentPodState";

/// Steer the pod to the topology its PersistentPodState recorded for its name. Runs on CREATE of
/// `pods` only (the caller checks the operation and subresource). The custom-workload whitelist of
/// `kruise-configuration` is read first, for every pod: one Go cannot read fails the request (500),
/// as it fails Kruise's. Then the pod's controller must be a StatefulSet (either group) or a
/// whitelisted kind; its PersistentPodState is the first, in name order, of the pod's namespace
/// that is not being deleted and whose `targetRef` names the controller (group, not version; kind;
/// name). Nothing happens unless that one records topology labels for the pod's name and one of
/// them, or a preferred term, applies. A preferred term the pod has already is not added twice
/// (docs/differences.md#pod-mutations).
pub fn apply(request: &AdmissionRequest, pod: &mut Draft<'_>, inputs: &Inputs) -> Result<(), AdmissionError> {
    if request.resource.resource != "pods" {
        return Ok(());
    }
    let whitelist = CustomWorkloads::read(inputs.cluster, &inputs.settings.kruise_namespace)
        .map_err(|e| AdmissionError::Internal(e.to_string()))?;
    let Some(owner) = controller_ref(pod) else { return Ok(()) };
    let Some(group) = group_of(owner.api_version) else { return Ok(()) };
    if !whitelist.accepts(group, owner.kind) {
        return Ok(());
    }
    let metadata = Node::Draft(pod).get("metadata");
    let field = |key| metadata.and_then(|m| m.get(key)).and_then(Node::as_str).unwrap_or_default();
    // Kruise's handler fills an empty metadata.namespace from the request.
    let namespace = Some(field("namespace")).filter(|ns| !ns.is_empty()).unwrap_or(&request.namespace);
    let Some(state) = select(inputs, namespace, group, owner.kind, owner.name) else { return Ok(()) };
    let Some(labels) = state
        .pointer("/status/podStates")
        .and_then(|states| states.get(field("name")))
        .and_then(|s| s.get("nodeTopologyLabels"))
        .and_then(Value::as_object)
        .filter(|labels| !labels.is_empty())
    else {
        return Ok(());
    };
    let (required, preferred) = node_affinity(state.get("spec").unwrap_or(&Value::Null), labels);
    if required.is_empty() && preferred.is_empty() {
        return Ok(());
    }
    let name = state.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
    annotations_mut(pod)?.insert(INJECTED_ANNOTATION, Json::from(name));
    let spec = object_mut(pod, "spec", "the pod")?;
    if !required.is_empty() {
        let selector = spec.value_mut("nodeSelector").object_or_new().ok_or_else(|| {
            AdmissionError::BadRequest("request.object.spec.nodeSelector must be an object".into())
        })?;
        for (key, value) in required {
            selector.insert(key, Json::from(value));
        }
    }
    if !preferred.is_empty() {
        let not_object =
            || AdmissionError::BadRequest("request.object.spec.affinity must be an object".into());
        let affinity = spec.value_mut("affinity").object_or_new().ok_or_else(not_object)?;
        let affinity = affinity.object_entry("nodeAffinity").ok_or_else(|| {
            AdmissionError::BadRequest("request.object.spec.affinity.nodeAffinity must be an object".into())
        })?;
        let terms = affinity.entry_or_insert("preferredDuringSchedulingIgnoredDuringExecution", Json::Null);
        if terms.is_null() {
            *terms = Json::Array(Vec::new());
        }
        let Some(terms) = terms.as_array_mut() else {
            return Err(AdmissionError::BadRequest(
                "request.object.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution must be a list"
                    .into(),
            ));
        };
        // Kruise appends on every call; a term the pod has already is not added again, so a
        // re-invoked webhook (reinvocationPolicy IfNeeded) changes nothing.
        let present: Vec<Value> = terms.iter().map(Json::to_value).collect();
        for term in preferred {
            if !present.contains(&term) {
                terms.push(Json::from(term));
            }
        }
    }
    Ok(())
}

/// `SelectorPersistentPodState`: the first PersistentPodState of `namespace`, in name order, not
/// being deleted, whose `targetRef` is the controller (`util.IsReferenceEqual`: an apiVersion Go
/// cannot parse matches nothing). Kruise lists from its informer, whose order is a map's, so with
/// two for one workload it may take either; name order is one of its orders, and the one we promise.
fn select(inputs: &Inputs, namespace: &str, group: &str, kind: &str, name: &str) -> Option<Arc<Value>> {
    inputs.cluster.list(KRUISE_APPS_GROUP, PPS_KIND, Some(namespace)).find(|pps| {
        let deleting = pps.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
        let target = |key: &str| {
            pps.pointer("/spec/targetRef")
                .and_then(|t| t.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        !deleting
            && group_of(target("apiVersion")) == Some(group)
            && target("kind") == kind
            && target("name") == name
    })
}

/// `createNodeAffinity`: the required keys the pod's state has a label for, as nodeSelector
/// entries (in the order listed; a repeated key once), and one `PreferredSchedulingTerm` per
/// preferred term, with an `In` expression per key the state has a label for (a term with none
/// still counts, with an empty preference, as in Kruise).
fn node_affinity(spec: &Value, labels: &Map<String, Value>) -> (Vec<(String, String)>, Vec<Value>) {
    let keys = |term: Option<&Value>| -> Vec<(String, String)> {
        term.and_then(|t| t.get("nodeTopologyKeys"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter_map(|key| Some((key.to_owned(), labels.get(key)?.as_str()?.to_owned())))
            .collect()
    };
    let mut required: Vec<(String, String)> = Vec::new();
    for (key, value) in keys(spec.get("requiredPersistentTopology").filter(|t| !t.is_null())) {
        match required.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => required.push((key, value)),
        }
    }
    let preferred = spec
        .get("preferredPersistentTopology")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|term| {
            let expressions: Vec<Value> = keys(term.get("preference"))
                .into_iter()
                .map(|(key, value)| json!({"key": key, "operator": "In", "values": [value]}))
                .collect();
            let weight = term.get("weight").and_then(Value::as_i64).unwrap_or(0);
            let preference =
                if expressions.is_empty() { json!({}) } else { json!({"matchExpressions": expressions}) };
            json!({"weight": weight, "preference": preference})
        })
        .collect();
    (required, preferred)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Settings;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::pod::tests::with_cluster;
    use crate::admission::review::decode_review;
    use crate::cluster::controller_finder::STATEFULSET_LIKE_WHITELIST_KEY;
    use crate::cluster::live::KRUISE_CONFIGMAP;

    fn request(resource: &str) -> AdmissionRequest<'static> {
        decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": resource}, "namespace": "ns",
            "operation": "CREATE", "object": {"spec": {}}}}))
        .unwrap()
    }

    fn pod(api_version: &str, kind: &str, name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": [
            {"apiVersion": api_version, "kind": kind, "name": "web", "uid": "x", "controller": true}]},
            "spec": {"containers": [{"name": "app"}]}})
    }

    fn sts_pod() -> Value {
        pod("apps/v1", "StatefulSet", "web-0")
    }

    /// A PersistentPodState for apps/v1 StatefulSet `web` with `spec` (targetRef added), recording
    /// zone and host for `web-0`.
    fn pps(name: &str, mut spec: Value) -> Value {
        spec["targetRef"] = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"});
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec,
            "status": {"podStates": {"web-0": {"nodeName": "n1", "nodeTopologyLabels": {"zone": "z1", "host": "n1"}}}}})
    }

    fn required(keys: &[&str]) -> Value {
        json!({"requiredPersistentTopology": {"nodeTopologyKeys": keys}})
    }

    fn run_on(resource: &str, cluster: Vec<Value>, pod: Value) -> Result<Value, AdmissionError> {
        let settings = Settings { gates: FeatureGates::from_flags(&[]), ..Settings::default() };
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        with_cluster(cluster, &settings, |inputs| apply(&request(resource), &mut draft, inputs))?;
        Ok(draft.into_json().into_value())
    }

    fn run(cluster: Vec<Value>, pod: Value) -> Value {
        run_on("pods", cluster, pod).unwrap()
    }

    fn whitelist(text: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": KRUISE_CONFIGMAP, "namespace": "kruise-system"},
            "data": {STATEFULSET_LIKE_WHITELIST_KEY: text}})
    }

    #[test]
    fn required_keys_become_node_selector_entries() {
        let mut p = sts_pod();
        p["spec"]["nodeSelector"] = json!({"disk": "ssd", "zone": "old"});
        let out = run(vec![pps("state", required(&["zone", "rack", "zone"]))], p);
        assert_eq!(out["spec"]["nodeSelector"], json!({"disk": "ssd", "zone": "z1"}));
        assert_eq!(out["metadata"]["annotations"][INJECTED_ANNOTATION], json!("state"));
        assert_eq!(out["spec"]["affinity"], Value::Null);
        let out = run(vec![pps("state", required(&["host"]))], sts_pod());
        assert_eq!(out["spec"]["nodeSelector"], json!({"host": "n1"}));
    }

    #[test]
    fn preferred_terms_are_appended_even_without_a_label() {
        let spec = json!({"preferredPersistentTopology": [
            {"weight": 100, "preference": {"nodeTopologyKeys": ["zone", "host"]}},
            {"weight": 10, "preference": {"nodeTopologyKeys": ["rack"]}},
        ]});
        let mut p = sts_pod();
        p["spec"]["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}});
        let out = run(vec![pps("state", spec)], p);
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            json!([
                {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}},
                {"weight": 100, "preference": {"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["z1"]},
                    {"key": "host", "operator": "In", "values": ["n1"]}]}},
                {"weight": 10, "preference": {}},
            ])
        );
        assert_eq!(out["spec"]["nodeSelector"], Value::Null, "no required topology");
        assert_eq!(out["metadata"]["annotations"][INJECTED_ANNOTATION], json!("state"));
        // Run again on its own result (a re-invoked webhook): nothing more is added.
        let spec = json!({"preferredPersistentTopology": [
            {"weight": 100, "preference": {"nodeTopologyKeys": ["zone", "host"]}},
            {"weight": 10, "preference": {"nodeTopologyKeys": ["rack"]}},
        ]});
        assert_eq!(run(vec![pps("state", spec)], out.clone()), out);
        // Only a term without labels still marks the pod.
        let spec = json!({"preferredPersistentTopology": [{"weight": 5, "preference": {"nodeTopologyKeys": ["rack"]}}]});
        let out = run(vec![pps("state", spec)], sts_pod());
        assert_eq!(
            out["spec"]["affinity"],
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "preference": {}}]}})
        );
    }

    #[test]
    fn nothing_applies_without_a_recorded_state_or_matching_keys() {
        let untouched = |cluster: Vec<Value>, p: Value| assert_eq!(run(cluster, p.clone()), p);
        // No label for any required key, and no preferred term.
        untouched(vec![pps("state", required(&["rack"]))], sts_pod());
        untouched(vec![pps("state", json!({}))], sts_pod());
        // Another pod name; no states at all; empty labels.
        untouched(vec![pps("state", required(&["zone"]))], pod("apps/v1", "StatefulSet", "web-1"));
        let mut empty = pps("state", required(&["zone"]));
        empty["status"] = json!({"podStates": {}});
        untouched(vec![empty], sts_pod());
        let mut no_labels = pps("state", required(&["zone"]));
        no_labels["status"]["podStates"]["web-0"] = json!({"nodeName": "n1"});
        untouched(vec![no_labels], sts_pod());
        // Another namespace.
        let mut elsewhere = pps("state", required(&["zone"]));
        elsewhere["metadata"]["namespace"] = json!("other");
        untouched(vec![elsewhere], sts_pod());
        // Not a pod CREATE of `pods`; no controller.
        let p = sts_pod();
        assert_eq!(run_on("pods/status", vec![pps("state", required(&["zone"]))], p.clone()).unwrap(), p);
        let mut orphan = sts_pod();
        orphan["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        untouched(vec![pps("state", required(&["zone"]))], orphan);
    }

    #[test]
    fn the_first_live_state_of_the_workload_by_name_is_used() {
        let mut deleting = pps("a-deleting", required(&["zone"]));
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        let mut other_workload = pps("b-other", required(&["zone"]));
        other_workload["spec"]["targetRef"]["name"] = json!("db");
        let mut empty = pps("d-empty", required(&["zone"]));
        empty["status"] = json!({});
        let cluster = vec![pps("c-state", required(&["host"])), deleting, other_workload, empty];
        let out = run(cluster, sts_pod());
        assert_eq!(out["metadata"]["annotations"][INJECTED_ANNOTATION], json!("c-state"));
        assert_eq!(out["spec"]["nodeSelector"], json!({"host": "n1"}));
        // The first match decides even when it records nothing for the pod.
        let mut first = pps("a-first", required(&["zone"]));
        first["status"] = json!({"podStates": {"web-1": {"nodeTopologyLabels": {"zone": "z2"}}}});
        let out = run(vec![first, pps("b-second", required(&["zone"]))], sts_pod());
        assert_eq!(out, sts_pod());
        // Any version of the group matches; another group, or an apiVersion Go cannot parse, does not.
        let mut beta = pps("state", required(&["zone"]));
        beta["spec"]["targetRef"]["apiVersion"] = json!("apps/v1beta2");
        assert_eq!(run(vec![beta], sts_pod())["spec"]["nodeSelector"], json!({"zone": "z1"}));
        for api_version in ["apps.kruise.io/v1beta1", "apps/v1/x"] {
            let mut other = pps("state", required(&["zone"]));
            other["spec"]["targetRef"]["apiVersion"] = json!(api_version);
            assert_eq!(run(vec![other], sts_pod()), sts_pod(), "{api_version}");
        }
    }

    #[test]
    fn statefulsets_always_other_kinds_when_whitelisted() {
        let state = |api_version: &str, kind: &str| {
            let mut s = pps("state", required(&["zone"]));
            s["spec"]["targetRef"] = json!({"apiVersion": api_version, "kind": kind, "name": "web"});
            s
        };
        let kruise_sts = pod("apps.kruise.io/v1beta1", "StatefulSet", "web-0");
        let out = run(vec![state("apps.kruise.io/v1alpha1", "StatefulSet")], kruise_sts);
        assert_eq!(out["spec"]["nodeSelector"], json!({"zone": "z1"}));
        for (api_version, kind) in [("apps.kruise.io/v1alpha1", "CloneSet"), ("game.io/v1", "GameSet")] {
            let p = pod(api_version, kind, "web-0");
            assert_eq!(run(vec![state(api_version, kind)], p.clone()), p, "{kind} is not whitelisted");
            let listed = whitelist(
                r#"{"workloads": [{"Group": "game.io", "Version": "v1", "Kind": "GameSet"},
                {"group": "apps.kruise.io", "kind": "CloneSet"}]}"#,
            );
            let out = run(vec![state(api_version, kind), listed], p);
            assert_eq!(out["metadata"]["annotations"][INJECTED_ANNOTATION], json!("state"), "{kind}");
        }
    }

    #[test]
    fn an_unreadable_whitelist_fails_every_pod() {
        let p = json!({"metadata": {"name": "solo", "namespace": "ns"}, "spec": {}});
        let err = run_on("pods", vec![whitelist(r#"{"workloads": {}}"#)], p).unwrap_err();
        assert!(matches!(err, AdmissionError::Internal(_)), "{err}");
        assert!(err.to_string().contains(STATEFULSET_LIKE_WHITELIST_KEY), "{err}");
        // Not read for other resources.
        assert!(run_on("pods/status", vec![whitelist("{")], sts_pod()).is_ok());
    }

    #[test]
    fn malformed_pod_fields_are_refused() {
        let mut p = sts_pod();
        p["spec"]["nodeSelector"] = json!("x");
        let err = run_on("pods", vec![pps("state", required(&["zone"]))], p).unwrap_err();
        assert!(err.to_string().contains("nodeSelector must be an object"), "{err}");
        let mut p = sts_pod();
        p["spec"]["affinity"] =
            json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": 1}});
        let spec = json!({"preferredPersistentTopology": [{"weight": 5, "preference": {"nodeTopologyKeys": ["zone"]}}]});
        let err = run_on("pods", vec![pps("state", spec)], p).unwrap_err();
        assert!(err.to_string().contains("must be a list"), "{err}");
    }
}
