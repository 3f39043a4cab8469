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

/// The merged value, compact with sorted keys. When the merge changes nothing (the same JSON
/// value), the existing text is kept as it is: Kruise would re-serialise it, but then a webhook
/// re-invoked on its own output (a verbatim first patch) would patch again.
fn merge_json(existing: &str, patch: &str) -> Result<String, String> {
    let original: Value =
        serde_json::from_str(existing).map_err(|e| format!("the existing value is not JSON ({e})"))?;
    let patch: Value = serde_json::from_str(patch).map_err(|e| format!("the patch is not JSON ({e})"))?;
    let mut target = original.clone();
    json_patch::merge(&mut target, &patch); // RFC 7386
    if target == original { Ok(existing.to_owned()) } else { Ok(go_json::sorted_compact(&target)) }
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
        assert!(merge_json("not json", "{}").is_err());
        assert!(merge_json("{}", "{").is_err());
    }
}
