//! What a Pod UPDATE does to the pod's availability (Kruise's `PubControl.IsPodUnavailableChanged`
//! and `CanResizeInplace`): only a spec change or a new `unavailable-pod.kruise.io/` label can make
//! a pod unavailable, and a change of cpu/memory alone may be a resize the kubelet applies in place.

use serde_json::Value;

use super::has_unavailable_label;
use crate::admission::inplace::resources::{Quantity, qos_class};
use crate::api::tree::Json;

/// `IsPodUnavailableChanged`: the spec changed, or the update adds the first unavailable label.
pub fn makes_unavailable(old: &Json, new: &Json) -> bool {
    spec(old) != spec(new) || adds_unavailable_label(old, new)
}

fn adds_unavailable_label(old: &Json, new: &Json) -> bool {
    !has_unavailable_label(old) && has_unavailable_label(new)
}

/// The spec as a value; a missing spec reads as the empty one, as Go's zero `PodSpec`.
fn spec(pod: &Json) -> Value {
    pod.get("spec").filter(|s| !s.is_null()).map_or_else(|| Value::Object(Default::default()), Json::to_value)
}

/// `CanResizeInplace`: nothing but container resources changed, on a pod that is not a static one,
/// keeping its QoS class, and every changed resource is cpu or memory with no resize policy asking
/// to restart the container.
pub fn can_resize_in_place(old: &Json, new: &Json) -> bool {
    if adds_unavailable_label(old, new) {
        return false;
    }
    let (old_spec, new_spec) = (spec(old), spec(new));
    if without_resources(&old_spec) != without_resources(&new_spec) || is_static(old) || is_static(new) {
        return false;
    }
    qos_class(&old_spec) == qos_class(&new_spec) && resources_resizable(&old_spec, &new_spec)
}

/// The spec with every container's `resources` cleared (init containers keep theirs).
fn without_resources(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(containers) = spec.get_mut("containers").and_then(Value::as_array_mut) {
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            container.remove("resources");
        }
    }
    spec
}

/// `kubelettypes.IsStaticPod`: a `kubernetes.io/config.source` annotation other than `api`.
fn is_static(pod: &Json) -> bool {
    super::annotation(pod, "kubernetes.io/config.source").is_some_and(|source| source != "api")
}

/// `canInplaceUpdateResources`: the same containers by name; each request or limit that changed
/// (appeared, went or took another value) is cpu or memory, and its `resizePolicy` is absent,
/// `NotRequired` or empty.
fn resources_resizable(old_spec: &Value, new_spec: &Value) -> bool {
    let containers =
        |spec: &Value| spec.get("containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let (old_containers, new_containers) = (containers(old_spec), containers(new_spec));
    if old_containers.len() != new_containers.len() {
        return false;
    }
    let name = |c: &Value| c.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
    new_containers.iter().all(|new| {
        // The last container of a name, as Kruise's map keeps it.
        let Some(old) = old_containers.iter().rev().find(|o| name(o) == name(new)) else { return false };
        let list = |c: &Value, kind: &str| {
            c.get("resources").and_then(|r| r.get(kind)).and_then(Value::as_object).cloned()
        };
        let kinds = ["requests", "limits"];
        let mut names: Vec<String> = kinds
            .iter()
            .flat_map(|kind| [list(old, kind), list(new, kind)])
            .flatten()
            .flat_map(|m| m.keys().cloned().collect::<Vec<_>>())
            .collect();
        names.sort();
        names.dedup();
        let policies = new.get("resizePolicy").and_then(Value::as_array).cloned().unwrap_or_default();
        names.iter().all(|resource| {
            let changed = kinds.iter().any(|kind| {
                let quantity = |c: &Value| list(c, kind).and_then(|m| m.get(resource).cloned());
                match (quantity(old), quantity(new)) {
                    (None, None) => false,
                    (Some(a), Some(b)) => !same_quantity(&a, &b),
                    _ => true,
                }
            });
            if !changed {
                return true;
            }
            // The last policy of a resource, as Kruise's map keeps it.
            let policy = policies
                .iter()
                .rev()
                .find(|p| p.get("resourceName").and_then(Value::as_str) == Some(resource))
                .map(|p| p.get("restartPolicy").and_then(Value::as_str).unwrap_or_default());
            matches!(resource.as_str(), "cpu" | "memory") && matches!(policy, None | Some("" | "NotRequired"))
        })
    })
}

/// `resource.Quantity.Equal`: by value (`1` and `1000m` are equal).
fn same_quantity(a: &Value, b: &Value) -> bool {
    match (Quantity::parse(a), Quantity::parse(b)) {
        (Some(a), Some(b)) => a == b,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(resources: Value) -> Value {
        json!({"metadata": {"annotations": {}}, "spec": {"containers": [{"name": "app", "image": "nginx", "resources": resources}]}})
    }

    fn resized(old: &Value, new: &Value) -> bool {
        can_resize_in_place(&Json::from(old), &Json::from(new))
    }

    #[test]
    fn only_spec_changes_and_new_unavailable_labels_make_a_pod_unavailable() {
        let old = pod(json!({}));
        let changed = |f: &dyn Fn(&mut Value)| {
            let mut new = old.clone();
            f(&mut new);
            makes_unavailable(&Json::from(&old), &Json::from(&new))
        };
        assert!(!changed(&|_| {}));
        assert!(!changed(&|p| p["metadata"]["annotations"]["a"] = json!("b")));
        assert!(changed(&|p| p["spec"]["containers"][0]["image"] = json!("nginx:2")));
        assert!(changed(&|p| p["metadata"]["labels"] = json!({"unavailable-pod.kruise.io/a": "x"})));
        let mut marked = old.clone();
        marked["metadata"]["labels"] = json!({"unavailable-pod.kruise.io/a": "x"});
        let mut more = marked.clone();
        more["metadata"]["labels"]["unavailable-pod.kruise.io/b"] = json!("y");
        assert!(!makes_unavailable(&Json::from(&marked), &Json::from(&more)), "only the first label counts");
    }

    #[test]
    fn a_cpu_or_memory_change_keeping_the_qos_class_resizes_in_place() {
        let old = pod(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}));
        assert!(resized(&old, &pod(json!({"requests": {"cpu": "1000m"}, "limits": {"cpu": "3"}}))));
        assert!(resized(
            &old,
            &pod(json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2"}}))
        ));
        // Guaranteed to Burstable, another resource, or another change besides.
        let guaranteed =
            pod(json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}));
        assert!(!resized(
            &guaranteed,
            &pod(json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}))
        ));
        assert!(!resized(
            &old,
            &pod(json!({"requests": {"cpu": "1", "ephemeral-storage": "1Gi"}, "limits": {"cpu": "2"}}))
        ));
        let mut image = pod(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}));
        image["spec"]["containers"][0]["image"] = json!("nginx:2");
        assert!(!resized(&old, &image));
        // A resize policy that restarts the container, or a static pod.
        let mut restart = pod(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}));
        restart["spec"]["containers"][0]["resizePolicy"] =
            json!([{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]);
        assert!(!resized(&old, &restart));
        let mut not_required = restart.clone();
        not_required["spec"]["containers"][0]["resizePolicy"][0]["restartPolicy"] = json!("NotRequired");
        assert!(!resized(&old, &not_required), "the policy is part of the spec: another change");
        let mut static_pod = pod(json!({"requests": {"cpu": "1"}, "limits": {"cpu": "3"}}));
        static_pod["metadata"]["annotations"]["kubernetes.io/config.source"] = json!("file");
        assert!(!resized(&old, &static_pod));
        static_pod["metadata"]["annotations"]["kubernetes.io/config.source"] = json!("api");
        assert!(resized(&old, &static_pod));
    }
}
