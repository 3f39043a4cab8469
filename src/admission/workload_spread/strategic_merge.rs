//! A strategic merge patch of a Pod (apimachinery's `strategicpatch.StrategicMergePatch` with the
//! Pod's schema), for WorkloadSpread's subset `patch`. Objects merge key by key (`null` removes a
//! key); the lists the Pod's schema marks `patchStrategy: merge` merge their elements by their merge
//! key (a new element goes last, `$patch: delete` removes one) or, for lists of strings, add what
//! is missing; every other list, and any value whose type differs, is replaced.
//!
//! The directives `$retainKeys`, `$setElementOrder` and `$deleteFromPrimitiveList`, and `$patch`
//! other than an element's `delete`, are refused (docs/differences.md#pod-mutations).

use serde_json::{Map, Value};

/// How a list of the Pod merges.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Strategy {
    Replace,
    /// Elements are objects identified by this key.
    MergeBy(&'static str),
    /// Scalars: the patch's values the list lacks are added (`finalizers`).
    Union,
}

/// The strategy of the list at `path` (object keys from the pod's root; list elements add none).
fn strategy(path: &[&str]) -> Strategy {
    const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
    match path {
        ["metadata", "ownerReferences"] => Strategy::MergeBy("uid"),
        ["metadata", "finalizers"] => Strategy::Union,
        ["spec", list] if CONTAINERS.contains(list) => Strategy::MergeBy("name"),
        ["spec", list, field] if CONTAINERS.contains(list) => match *field {
            "ports" => Strategy::MergeBy("containerPort"),
            "env" => Strategy::MergeBy("name"),
            "volumeMounts" => Strategy::MergeBy("mountPath"),
            "volumeDevices" => Strategy::MergeBy("devicePath"),
            _ => Strategy::Replace,
        },
        ["spec", "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims"] => {
            Strategy::MergeBy("name")
        }
        ["spec", "hostAliases"] => Strategy::MergeBy("ip"),
        ["spec", "topologySpreadConstraints"] => Strategy::MergeBy("topologyKey"),
        ["status", "conditions"] => Strategy::MergeBy("type"),
        _ => Strategy::Replace,
    }
}

/// `pod` with `patch` merged into it. A patch that is not an object, or uses a directive this
/// does not support, is an error.
pub fn apply(pod: &Value, patch: &Value) -> Result<Value, String> {
    let Value::Object(patch) = patch else {
        return Err(format!("the subset patch must be an object, not {patch}"));
    };
    let mut out = pod.clone();
    let Value::Object(target) = &mut out else { return Err("the pod is not an object".into()) };
    merge_map(target, patch, &mut Vec::new())?;
    Ok(out)
}

fn merge_map<'p>(
    target: &mut Map<String, Value>,
    patch: &'p Map<String, Value>,
    path: &mut Vec<&'p str>,
) -> Result<(), String> {
    if let Some(directive) = patch.keys().find(|k| k.starts_with('$')) {
        return Err(format!("the strategic merge patch directive {directive:?} is not supported here"));
    }
    for (key, value) in patch {
        if value.is_null() {
            target.remove(key);
            continue;
        }
        let Some(current) = target.get_mut(key) else {
            target.insert(key.clone(), value.clone());
            continue;
        };
        path.push(key);
        match (current, value) {
            (Value::Object(current), Value::Object(value)) => merge_map(current, value, path)?,
            (Value::Array(current), Value::Array(value)) => merge_list(current, value, path)?,
            (current, value) => *current = value.clone(),
        }
        path.pop();
    }
    Ok(())
}

fn merge_list<'p>(
    target: &mut Vec<Value>,
    patch: &'p [Value],
    path: &mut Vec<&'p str>,
) -> Result<(), String> {
    let key = match strategy(path) {
        Strategy::Replace => {
            *target = patch.to_vec();
            return Ok(());
        }
        Strategy::Union => None,
        Strategy::MergeBy(key) => Some(key),
    };
    let identity = |item: &Value| -> Value {
        match key {
            Some(key) => item.get(key).cloned().unwrap_or(Value::Null),
            None => item.clone(),
        }
    };
    let (merged, patch_ids) = match key {
        None => {
            let mut both: Vec<Value> = target.iter().chain(patch).cloned().collect();
            deduplicate_scalars(&mut both);
            (both, patch.to_vec())
        }
        Some(key) => {
            let mut kept = Vec::with_capacity(patch.len());
            for item in patch {
                let Value::Object(fields) = item else {
                    return Err(format!("the patch of {} holds a non-object element", path.join(".")));
                };
                let Some(id) = fields.get(key) else {
                    return Err(format!(
                        "an element of {} does not contain its merge key {key:?}",
                        path.join(".")
                    ));
                };
                match fields.get("$patch") {
                    None => kept.push(fields),
                    Some(directive) if directive == "delete" => target.retain(|t| t.get(key) != Some(id)),
                    Some(directive) => {
                        return Err(format!("the $patch directive {directive} is not supported here"));
                    }
                }
            }
            let mut merged = target.clone();
            for fields in &kept {
                let id = &fields[key];
                match merged.iter_mut().find(|t| t.get(key) == Some(id)) {
                    Some(Value::Object(current)) => merge_map(current, fields, path)?,
                    Some(current) => *current = Value::Object((*fields).clone()),
                    None => merged.push(Value::Object((*fields).clone())),
                }
            }
            (merged, kept.iter().map(|f| f[key].clone()).collect())
        }
    };
    // Kruise's order (`normalizeElementOrder`): the patch's elements in the patch's order, merged
    // with the others in the original's order; an element new to the list comes before the
    // original elements that follow it.
    let server_order: Vec<Value> = target.iter().map(identity).collect();
    let position = |ids: &[Value], item: &Value| ids.iter().position(|id| *id == identity(item));
    let (mut in_patch, server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|item| position(&patch_ids, item).is_some());
    in_patch.sort_by_key(|item| position(&patch_ids, item));
    let mut out = Vec::with_capacity(in_patch.len() + server_only.len());
    let (mut left, mut right) = (server_only.into_iter().peekable(), in_patch.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(&server_order, l), position(&server_order, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    *target = out;
    Ok(())
}

/// `deduplicateScalars`: apimachinery's in-place deduplication, which moves the last element into
/// the place of each duplicate it drops.
fn deduplicate_scalars(items: &mut Vec<Value>) {
    let mut length = items.len().saturating_sub(1);
    let mut i = 0;
    while i < length {
        let mut j = i + 1;
        while j <= length {
            if items[i] == items[j] {
                items[j] = items[length].clone();
                items.truncate(length);
                length -= 1;
            } else {
                j += 1;
            }
        }
        i += 1;
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn objects_merge_and_null_removes() {
        let pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"nodeSelector": {"x": "y"}}});
        let out = apply(
            &pod,
            &json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"nodeSelector": null}}),
        )
        .unwrap();
        assert_eq!(out, json!({"metadata": {"labels": {"a": "1", "c": "3"}}, "spec": {}}));
    }

    #[test]
    fn lists_merge_by_the_pods_merge_keys() {
        let pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {
            "containers": [{"name": "main", "ports": [{"containerPort": 80, "name": "http"}], "args": ["x"]}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "tolerations": [{"key": "k"}]}});
        let patch = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {
            "containers": [{"name": "main", "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 81}], "args": ["y"]},
                           {"name": "new", "image": "busybox"}],
            "volumes": [{"name": "v", "$patch": "delete"}],
            "tolerations": [{"key": "other"}]}});
        let out = apply(&pod, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "main", "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}, {"containerPort": 81}], "args": ["y"]},
                   {"name": "new", "image": "busybox"}])
        );
        assert_eq!(out["spec"]["volumes"], json!([]));
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "other"}]), "no merge strategy: replaced");
    }

    #[test]
    fn new_elements_come_first_as_apimachinery_orders_them() {
        let pod = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "X"}, {"name": "Y"}]}]}, "metadata": {"finalizers": ["f1", "f2"]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "env": [{"name": "Z", "value": "1"}, {"name": "Y", "value": "2"}]}]},
            "metadata": {"finalizers": ["f3", "f1"]}});
        let out = apply(&pod, &patch).unwrap();
        assert_eq!(
            out["spec"]["containers"][0]["env"],
            json!([{"name": "Z", "value": "1"}, {"name": "X"}, {"name": "Y", "value": "2"}])
        );
        let out = apply(&pod, &json!({"spec": {"containers": [{"name": "b"}]}})).unwrap();
        let names: Vec<&str> = out["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b", "a"]);
        assert_eq!(out["metadata"]["finalizers"], json!(["f1", "f2"]), "untouched without a patch for it");
        let out = apply(&pod, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["f3", "f1", "f2"]));
    }

    #[test]
    fn unsupported_directives_and_malformed_patches_are_errors() {
        let pod = json!({"spec": {"containers": [{"name": "a"}]}});
        assert!(apply(&pod, &json!({"spec": {"$retainKeys": ["containers"]}})).is_err());
        assert!(apply(&pod, &json!({"spec": {"containers": [{"image": "x"}]}})).is_err());
        assert!(apply(&pod, &json!({"spec": {"containers": ["a"]}})).is_err());
        assert!(apply(&pod, &json!(["x"])).is_err());
    }
}
