//! The pod's share of its subset (`injectWorkloadSpreadIntoPod`): the subset's tolerations, its
//! preferred and required node selector terms, its `patch` (a strategic merge patch of the Pod),
//! and the `apps.kruise.io/matched-workloadspread` annotation that `/validate-pod` and Kruise's
//! controller read back.

use serde_json::{Value, json};

use super::{MATCHED_ANNOTATION, name_of, strategic_merge};
use crate::admission::draft::Draft;
use crate::admission::injection::{annotations_mut, object_mut};
use crate::admission::review::AdmissionError;
use crate::api::go_json;
use crate::api::tree::Json;

/// Patch `pod` with the subset `subset` of `ws`; `uid` is the id the pod was recorded under when it
/// has no name yet. `false` when the spec has no such subset (a status of a subset since removed).
pub fn apply(
    pod: &mut Draft<'_>,
    ws: &Value,
    subset: &str,
    uid: Option<&str>,
) -> Result<bool, AdmissionError> {
    let subsets = ws.pointer("/spec/subsets").and_then(Value::as_array);
    let Some(spec) =
        subsets.and_then(|all| all.iter().find(|s| s.get("name").and_then(Value::as_str) == Some(subset)))
    else {
        return Ok(false);
    };
    let list = |key| spec.get(key).and_then(Value::as_array).filter(|l| !l.is_empty());
    let pod_spec = object_mut(pod, "spec", "the pod")?;
    if let Some(tolerations) = list("tolerations") {
        let slot = pod_spec.value_mut("tolerations");
        if slot.is_null() {
            *slot = Json::Array(Vec::new());
        }
        let Some(items) = slot.as_array_mut() else {
            return Err(AdmissionError::BadRequest("request.object.spec.tolerations must be a list".into()));
        };
        items.extend(tolerations.iter().map(|t| Json::from(t.clone())));
    }
    let current = pod_spec.get("affinity").and_then(Draft::value).filter(|a| !a.is_null());
    let mut affinity = current.map_or_else(|| json!({}), Json::to_value);
    node_affinity(&mut affinity, list("preferredNodeSelectorTerms"), spec.get("requiredNodeSelectorTerm"))?;
    if current.map(Json::to_value).as_ref() != Some(&affinity) {
        pod_spec.insert("affinity", Draft::New(Json::from(affinity)));
    }
    if let Some(patch) = spec.get("patch").filter(|p| !p.is_null()) {
        let before = std::mem::replace(pod, Draft::New(Json::Null)).into_json().into_value();
        let mut after = strategic_merge::apply(&before, patch).map_err(AdmissionError::Internal)?;
        // The API server set `priority` from the old priorityClassName before this webhook: it
        // would refuse the pair, so the priority is cleared and set again on reinvocation.
        let class = |pod: &Value| pod.pointer("/spec/priorityClassName").cloned();
        if class(&after) != class(&before)
            && let Some(spec) = after.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.remove("priority");
        }
        *pod = Draft::New(Json::from(after));
    }
    let (_, name) = name_of(ws);
    let mut annotation = String::from("{\"name\":");
    go_json::write_string(&mut annotation, name);
    annotation.push_str(",\"subset\":");
    go_json::write_string(&mut annotation, subset);
    if let Some(uid) = uid.filter(|u| !u.is_empty()) {
        annotation.push_str(",\"uid\":");
        go_json::write_string(&mut annotation, uid);
    }
    annotation.push('}');
    annotations_mut(pod)?.insert(MATCHED_ANNOTATION, Json::from(annotation));
    Ok(true)
}

/// Kruise always leaves the pod with `affinity.nodeAffinity`; it appends the preferred terms, and
/// the required term becomes the only term of a pod without one, or is ANDed into each of its terms
/// (its expressions and fields appended).
fn node_affinity(
    affinity: &mut Value,
    preferred: Option<&Vec<Value>>,
    required: Option<&Value>,
) -> Result<(), AdmissionError> {
    let malformed = |what: &str| {
        AdmissionError::BadRequest(format!("request.object.spec.affinity{what} must be an object"))
    };
    let Some(affinity) = affinity.as_object_mut() else { return Err(malformed("")) };
    let node = affinity.entry("nodeAffinity").or_insert_with(|| json!({}));
    if node.is_null() {
        *node = json!({});
    }
    let Some(node) = node.as_object_mut() else { return Err(malformed(".nodeAffinity")) };
    if let Some(preferred) = preferred {
        append(node, "preferredDuringSchedulingIgnoredDuringExecution", preferred)?;
    }
    let Some(required) = required.filter(|r| !r.is_null()) else { return Ok(()) };
    let selector = node.entry("requiredDuringSchedulingIgnoredDuringExecution").or_insert_with(|| json!({}));
    if selector.is_null() {
        *selector = json!({});
    }
    let Some(selector) = selector.as_object_mut() else {
        return Err(malformed(".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"));
    };
    let terms = selector.get_mut("nodeSelectorTerms").and_then(Value::as_array_mut).filter(|t| !t.is_empty());
    let Some(terms) = terms else {
        selector.insert("nodeSelectorTerms".into(), json!([required]));
        return Ok(());
    };
    for term in terms {
        let Some(term) = term.as_object_mut() else { return Err(malformed("'s node selector terms")) };
        for key in ["matchExpressions", "matchFields"] {
            if let Some(extra) = required.get(key).and_then(Value::as_array).filter(|e| !e.is_empty()) {
                append(term, key, extra)?;
            }
        }
    }
    Ok(())
}

/// Append `items` to the list at `key` (absent or null: a new list).
fn append(
    object: &mut serde_json::Map<String, Value>,
    key: &str,
    items: &[Value],
) -> Result<(), AdmissionError> {
    let list = object.entry(key).or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return Err(AdmissionError::BadRequest(format!(
            "request.object.spec.affinity: {key} must be a list"
        )));
    };
    list.extend(items.iter().cloned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pod: Value, subset: Value, uid: Option<&str>) -> Value {
        let ws = json!({"metadata": {"name": "ws", "namespace": "ns"}, "spec": {"subsets": [subset]}});
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        assert!(apply(&mut draft, &ws, "a", uid).unwrap());
        draft.into_json().into_value()
    }

    #[test]
    fn a_subset_without_scheduling_terms_still_leaves_node_affinity() {
        let out = run(json!({"spec": {"containers": []}}), json!({"name": "a"}), None);
        assert_eq!(out["spec"]["affinity"], json!({"nodeAffinity": {}}));
        assert_eq!(
            out["metadata"]["annotations"][MATCHED_ANNOTATION],
            json!(r#"{"name":"ws","subset":"a"}"#)
        );
        let out = run(json!({"spec": {}}), json!({"name": "a"}), Some("u-1"));
        assert_eq!(
            out["metadata"]["annotations"][MATCHED_ANNOTATION],
            json!(r#"{"name":"ws","subset":"a","uid":"u-1"}"#)
        );
    }

    #[test]
    fn terms_and_tolerations_are_merged_with_the_pods() {
        let term = |key: &str| json!({"key": key, "operator": "In", "values": ["x"]});
        let pod = json!({"spec": {
        "tolerations": [{"key": "mine", "operator": "Exists"}],
        "affinity": {"podAffinity": {"keep": true}, "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [term("p0")]}}],
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [term("own1")]},
                {"matchFields": [term("own2")]},
            ]}}}}});
        let subset = json!({"name": "a",
            "tolerations": [{"key": "zone", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
            "preferredNodeSelectorTerms": [{"weight": 5, "preference": {"matchExpressions": [term("p1")]}}],
            "requiredNodeSelectorTerm": {"matchExpressions": [term("zone")]}});
        let out = run(pod, subset, None);
        let spec = &out["spec"];
        assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(spec["tolerations"][1]["key"], "zone");
        let node = &spec["affinity"]["nodeAffinity"];
        assert_eq!(spec["affinity"]["podAffinity"], json!({"keep": true}));
        assert_eq!(node["preferredDuringSchedulingIgnoredDuringExecution"][1]["weight"], 5);
        let terms = &node["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"], json!([term("own1"), term("zone")]), "ANDed into each term");
        assert_eq!(terms[1], json!({"matchFields": [term("own2")], "matchExpressions": [term("zone")]}));
        // No terms of its own: the subset's term is the only one.
        let out = run(
            json!({"spec": {}}),
            json!({"name": "a", "requiredNodeSelectorTerm": {"matchFields": [term("f")]}}),
            None,
        );
        assert_eq!(
            out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"],
            json!({"nodeSelectorTerms": [{"matchFields": [term("f")]}]})
        );
    }

    #[test]
    fn the_patch_is_merged_strategically_and_a_new_priority_class_clears_the_priority() {
        let pod = json!({"metadata": {"labels": {"app": "web", "old": "x"}},
            "spec": {"priority": 10, "priorityClassName": "low",
                "containers": [{"name": "main", "image": "nginx", "env": [{"name": "A", "value": "1"}]}, {"name": "side"}]}});
        let subset = json!({"name": "a", "patch": {
            "metadata": {"labels": {"zone": "a", "old": null}},
            "spec": {"priorityClassName": "high", "containers": [{"name": "main", "env": [{"name": "B", "value": "2"}]}]}}});
        let out = run(pod, subset, None);
        assert_eq!(out["metadata"]["labels"], json!({"app": "web", "zone": "a"}));
        assert_eq!(out["spec"]["priorityClassName"], "high");
        assert!(out["spec"].get("priority").is_none());
        assert_eq!(out["spec"]["containers"][0]["image"], "nginx");
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]),
            "a new element first, as apimachinery orders it"
        );
        assert_eq!(out["spec"]["containers"][1], json!({"name": "side"}));
        // The same class keeps the priority.
        let out = run(
            json!({"spec": {"priority": 10, "priorityClassName": "low"}}),
            json!({"name": "a", "patch": {"metadata": {"labels": {"a": "b"}}}}),
            None,
        );
        assert_eq!(out["spec"]["priority"], 10);
    }

    #[test]
    fn a_subset_the_spec_no_longer_has_patches_nothing() {
        let ws = json!({"metadata": {"name": "ws"}, "spec": {"subsets": [{"name": "b"}]}});
        let original = Json::from(json!({"spec": {}}));
        let mut draft = Draft::Same(&original);
        assert!(!apply(&mut draft, &ws, "a", None).unwrap());
        assert_eq!(draft, Draft::Same(&original));
    }
}
