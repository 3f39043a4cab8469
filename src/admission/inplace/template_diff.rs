//! The InPlaceOnly check (docs/workloads.md#2-2-cloneset-inplaceonly): between the old and the new
//! `template.spec`, the only change allowed is a `replace` of `/containers/<N>/image` (anchored, for CloneSet
//! and — a deliberate difference from Kruise — Advanced StatefulSet alike). Template metadata is not part of
//! the diff, so labels and annotations may change freely.
//!
//! The diff is `admission::patch::diff`, linear in the template size (`benches/inplace_diff.rs`),
//! and its operations come in a deterministic order (Kruise's Go diff walks maps in random order,
//! so with several offending changes it may name a different one from run to run).

use serde_json::Value;

use super::defaults;
use super::resources::{QosClass, qos_class, resize_refusal};
use crate::admission::patch::{PatchOp, diff};

/// The first change that cannot be done in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offence {
    /// `add`, `remove` or `replace`.
    pub op: &'static str,
    /// JSON pointer inside `template.spec`, e.g. `/containers/0/imagePullPolicy`.
    pub path: String,
    /// Set for resource changes under vertical scaling: why this one cannot be resized in place.
    pub reason: Option<String>,
}

impl std::fmt::Display for Offence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.op, self.path)?;
        if let Some(reason) = &self.reason {
            write!(f, " ({reason})")?;
        }
        Ok(())
    }
}

fn op_name(op: &PatchOp) -> &'static str {
    match op {
        PatchOp::Add { .. } => "add",
        PatchOp::Remove { .. } => "remove",
        PatchOp::Replace { .. } => "replace",
    }
}

fn op_value(op: &PatchOp) -> Option<Value> {
    match op {
        PatchOp::Add { value, .. } | PatchOp::Replace { value, .. } => Some(value.to_value()),
        PatchOp::Remove { .. } => None,
    }
}

/// `/containers/<digits>/<rest>` → `rest` (with its leading `/`, or empty).
fn container_field(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/containers/")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    Some(&rest[digits..])
}

/// The first change between two pod specs that InPlaceOnly does not allow, or `None` if all of
/// them are in-place. With `vertical_scaling`, cpu/memory request and limit replacements are
/// allowed too, as long as the QoS class of the pod stays the same.
/// [`first_offending_change`] between the two pod specs as Kruise's validators see them: with
/// Kruise's template defaults (`SetDefaultPodSpec`, [`defaults::pod_spec`]) on both. Its mutating
/// webhooks stored the old template defaulted and default the new one before validation, so a
/// field spelled out with its default value (`imagePullPolicy: Always`, `terminationMessagePath:
/// /dev/termination-log`, `restartPolicy: Always`) is no change.
pub fn first_offending_change_defaulted(
    old_spec: &Value,
    new_spec: &Value,
    vertical_scaling: bool,
) -> Option<Offence> {
    let (mut before, mut after) = (old_spec.clone(), new_spec.clone());
    defaults::pod_spec(&mut before);
    defaults::pod_spec(&mut after);
    first_offending_change(&before, &after, vertical_scaling)
}

pub fn first_offending_change(old_spec: &Value, new_spec: &Value, vertical_scaling: bool) -> Option<Offence> {
    let mut first_resize: Option<&PatchOp> = None;
    let ops = diff(old_spec, new_spec);
    for op in &ops {
        let name = op_name(op);
        let field = container_field(op.path());
        if name == "replace" && field == Some("/image") {
            continue;
        }
        if vertical_scaling && let Some(rest) = field.and_then(|f| f.strip_prefix("/resources")) {
            if let Some(reason) = resize_refusal(name, rest, op_value(op).as_ref()) {
                return Some(Offence { op: name, path: op.path().to_owned(), reason: Some(reason) });
            }
            first_resize.get_or_insert(op);
            continue;
        }
        return Some(Offence { op: name, path: op.path().to_owned(), reason: None });
    }
    let resize = first_resize?;
    let (before, after): (QosClass, QosClass) = (qos_class(old_spec), qos_class(new_spec));
    (before != after).then(|| Offence {
        op: op_name(resize),
        path: resize.path().to_owned(),
        reason: Some(format!("changes the pod QoS class from {} to {}", before.as_str(), after.as_str())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(image: &str) -> Value {
        json!({"containers": [{"name": "app", "image": image, "imagePullPolicy": "Always",
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]})
    }

    #[test]
    fn image_replacements_are_in_place() {
        assert_eq!(first_offending_change(&spec("a:1"), &spec("a:2"), false), None);
        assert_eq!(first_offending_change(&spec("a:1"), &spec("a:1"), false), None);
    }

    #[test]
    fn anything_else_is_named() {
        let mut new = spec("a:2");
        new["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        let o = first_offending_change(&spec("a:1"), &new, false).unwrap();
        assert_eq!(o.to_string(), "replace /containers/0/imagePullPolicy");
        let mut new = spec("a:1");
        new["initContainers"] = json!([{"name": "i", "image": "x"}]);
        assert_eq!(
            first_offending_change(&spec("a:1"), &new, false).unwrap().to_string(),
            "add /initContainers"
        );
    }

    #[test]
    fn container_paths_are_anchored() {
        assert_eq!(container_field("/containers/12/image"), Some("/image"));
        assert_eq!(container_field("/initContainers/0/image"), None);
        assert_eq!(container_field("/containers/x/image"), None);
        assert_eq!(container_field("/containers/0/imagePullPolicy"), Some("/imagePullPolicy"));
    }

    #[test]
    fn vertical_scaling_keeps_qos() {
        let mut new = spec("a:1");
        new["containers"][0]["resources"] =
            json!({"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}});
        assert!(first_offending_change(&spec("a:1"), &new, false).is_some());
        assert_eq!(first_offending_change(&spec("a:1"), &new, true), None);
        new["containers"][0]["resources"]["limits"]["cpu"] = json!("3");
        let o = first_offending_change(&spec("a:1"), &new, true).unwrap();
        assert_eq!(
            o.to_string(),
            "replace /containers/0/resources/requests/cpu (changes the pod QoS class from Guaranteed to Burstable)"
        );
    }
}
