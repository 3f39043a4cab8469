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
