//! `spec.patchPodMetadata` (docs/sidecarset.md#4-patchpodmetadata): annotations a SidecarSet sets on the pod,
//! per patch policy.

use serde_json::Value;

use crate::api::tree::{Json, Object};

use crate::api::go_json;
use crate::api::sidecarset::SidecarSet;

/// Apply `set`'s patches to the pod's annotations (created if missing). Errors are denials.
pub fn apply(set: &SidecarSet, annotations: &mut Object<'_>) -> Result<(), String> {
    for patch in &set.spec.patch_pod_metadata {
        for (key, value) in &patch.annotations {
            match patch.patch_policy.as_str() {
                "" | "Retain" => {
                    if !annotations.contains_key(key) {
                        annotations.insert(key.clone(), Json::from(value.clone()));
                    }
                }
                "Overwrite" => {
                    annotations.insert(key.clone(), Json::from(value.clone()));
                }
                "MergePatchJson" => {
                    let existing = annotations.get(key).and_then(Json::as_str).filter(|s| !s.is_empty());
                    let merged = match existing {
                        None => value.clone(),
                        Some(existing) => merge_json(existing, value).map_err(|e| {
                            format!(
                                "SidecarSet {} patchPodMetadata (MergePatchJson) cannot merge into the pod's annotation {key}: {e}",
                                set.name()
                            )
                        })?,
                    };
                    annotations.insert(key.clone(), Json::from(merged));
                }
                other => {
                    return Err(format!(
                        "SidecarSet {} patchPodMetadata has an unknown patchPolicy {other:?} (Retain, Overwrite or MergePatchJson)",
                        set.name()
                    ));
                }
            }
        }
    }
    Ok(())
}

/// evanphx/json-patch's `MergePatch` (v4, which Kruise calls): an existing value that is not JSON, or
/// `null`, is "Invalid JSON Document"; a patch that is not JSON, `null` or a scalar is "Invalid JSON
/// Patch"; two objects merge as RFC 7386 says; otherwise (an array patch, or an existing value that
/// is not an object) the result is the patch, with its objects' null members dropped. The result is
/// compact with sorted keys. When the merge changes nothing (the same JSON value), the existing text
/// is kept as it is: Kruise would re-serialise it, but then a webhook re-invoked on its own output (a
/// verbatim first patch) would patch again.
fn merge_json(existing: &str, patch: &str) -> Result<String, String> {
    const BAD_DOCUMENT: &str = "Invalid JSON Document";
    const BAD_PATCH: &str = "Invalid JSON Patch";
    let original: Value = serde_json::from_str(existing).map_err(|_| BAD_DOCUMENT.to_owned())?;
    if original.is_null() {
        return Err(BAD_DOCUMENT.into());
    }
    let patch: Value = serde_json::from_str(patch).map_err(|_| BAD_PATCH.to_owned())?;
    let merged = match (&original, patch) {
        (Value::Object(_), patch @ Value::Object(_)) => {
            let mut target = original.clone();
            json_patch::merge(&mut target, &patch); // RFC 7386
            target
        }
        (_, mut patch @ (Value::Object(_) | Value::Array(_))) => {
            go_json::drop_null_members(&mut patch);
            patch
        }
        _ => return Err(BAD_PATCH.into()),
    };
    if merged == original { Ok(existing.to_owned()) } else { Ok(go_json::sorted_compact(&merged)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_output_is_sorted_and_compact() {
        assert_eq!(
            merge_json(r#"{"z": 1, "a": {"y": 2}}"#, r#"{"b": true}"#).unwrap(),
            r#"{"a":{"y":2},"b":true,"z":1}"#
        );
        assert_eq!(merge_json(r#"{"z": 1, "a": 2}"#, r#"{"a": 2}"#).unwrap(), r#"{"z": 1, "a": 2}"#);
        assert_eq!(merge_json("not json", "{}").unwrap_err(), "Invalid JSON Document");
        assert_eq!(merge_json("null", "{}").unwrap_err(), "Invalid JSON Document");
        assert_eq!(merge_json("{}", "{").unwrap_err(), "Invalid JSON Patch");
    }

    /// evanphx/json-patch's MergePatch, as Kruise runs it: a scalar or null patch is refused; an
    /// array patch, or any patch over a value that is not an object, replaces it (null members
    /// of its objects dropped).
    #[test]
    fn merges_what_evanphx_merges_and_refuses_what_it_refuses() {
        for patch in ["true", "5", r#""s""#, "null"] {
            assert_eq!(merge_json(r#"{"a":1}"#, patch).unwrap_err(), "Invalid JSON Patch", "{patch}");
        }
        assert_eq!(merge_json(r#"{"a":1}"#, r#"[1,null,{"b":null,"c":2}]"#).unwrap(), r#"[1,null,{"c":2}]"#);
        assert_eq!(merge_json("true", r#"{"b":null,"c":{"d":null}}"#).unwrap(), r#"{"c":{}}"#);
        assert_eq!(merge_json("[1]", r#"{"a":1}"#).unwrap(), r#"{"a":1}"#);
    }
}
