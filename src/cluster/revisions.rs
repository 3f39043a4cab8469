//! ControllerRevisions as decisions read them: Kruise keeps ten or more per SidecarSet, each holding
//! a copy of that SidecarSet's containers, so in a large cluster they outweigh everything else a
//! snapshot caches. Decisions read only a revision's name, the two labels and the number that
//! `injectionStrategy.revision` selects it by, its two hash annotations, and `data.spec` when it is
//! restored onto a SidecarSet (docs/sidecarset.md#3-revisions). A [`Revision`] keeps just that,
//! with `data.spec` as compact JSON text (a tenth of its decoded tree) parsed only when restored.

use serde_json::Value;

use crate::api::go_json;
use crate::api::sidecarset::{
    CUSTOM_VERSION_LABEL, HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, REVISION_SIDECARSET_NAME_LABEL,
};

/// API group and kind of the objects kept as [`Revision`]s.
pub const GROUP: &str = "apps";
pub const KIND: &str = "ControllerRevision";

/// What decisions read of one ControllerRevision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub name: Box<str>,
    /// Label `kruise.io/sidecarset-name`: the SidecarSet it is a revision of.
    pub sidecarset: Option<Box<str>>,
    /// Label `apps.kruise.io/sidecarset-custom-version`.
    pub custom_version: Option<Box<str>>,
    /// `revision` (0 when absent, as Kruise orders them).
    pub revision: i64,
    /// Annotations `kruise.io/sidecarset-hash` and `kruise.io/sidecarset-hash-without-image`.
    pub hash: Option<Box<str>>,
    pub hash_without_image: Option<Box<str>>,
    /// `data.spec` without its `$patch` directive and its `null` members, as JSON text.
    spec: Option<Box<str>>,
}

impl Revision {
    /// The parts of a ControllerRevision object decisions read.
    pub fn of(object: &Value) -> Revision {
        let text = |pointer: &str, key: &str| {
            object.pointer(pointer).and_then(|m| m.get(key)).and_then(Value::as_str).map(Box::from)
        };
        let spec = object.pointer("/data/spec").map(|spec| {
            let mut spec = spec.clone();
            if let Some(m) = spec.as_object_mut() {
                m.remove("$patch");
            }
            // Kruise's SidecarSet controller records `volumes`, `initContainers`,
            // `imagePullSecrets` and `patchPodMetadata` as `null` when the SidecarSet has none;
            // Kruise restores the revision by decoding into its Go types, where null is absent.
            go_json::drop_null_members(&mut spec);
            spec.to_string().into_boxed_str()
        });
        Revision {
            name: text("/metadata", "name").unwrap_or_default(),
            sidecarset: text("/metadata/labels", REVISION_SIDECARSET_NAME_LABEL),
            custom_version: text("/metadata/labels", CUSTOM_VERSION_LABEL),
            revision: object.get("revision").and_then(Value::as_i64).unwrap_or(0),
            hash: text("/metadata/annotations", HASH_ANNOTATION),
            hash_without_image: text("/metadata/annotations", HASH_WITHOUT_IMAGE_ANNOTATION),
            spec,
        }
    }

    /// `data.spec` (without `$patch`), or `None` when the revision has none.
    pub fn spec(&self) -> Option<Value> {
        // The text was written from a `Value` by `of`, so it parses back to the same tree.
        self.spec.as_deref().map(|text| serde_json::from_str(text).unwrap_or(Value::Null))
    }

    /// Whether it is a revision of SidecarSet `set` labelled with custom version `version`.
    pub fn is_custom_version(&self, set: &str, version: &str) -> bool {
        self.sidecarset.as_deref() == Some(set) && self.custom_version.as_deref() == Some(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_what_decisions_read_and_restores_the_spec() {
        let object = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "proxy-1", "namespace": "kruise-system", "uid": "u", "resourceVersion": "7",
                "labels": {REVISION_SIDECARSET_NAME_LABEL: "proxy", CUSTOM_VERSION_LABEL: "v1", "other": "x"},
                "annotations": {HASH_ANNOTATION: "h", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "ownerReferences": [{"kind": "SidecarSet", "name": "proxy"}]},
            "revision": 3,
            "data": {"spec": {"$patch": "replace", "containers": [{"name": "c", "image": "i:1"}]}}});
        let revision = Revision::of(&object);
        assert_eq!(&*revision.name, "proxy-1");
        assert!(revision.is_custom_version("proxy", "v1"));
        assert!(!revision.is_custom_version("proxy", "v2") && !revision.is_custom_version("other", "v1"));
        assert_eq!(revision.revision, 3);
        assert_eq!((revision.hash.as_deref(), revision.hash_without_image.as_deref()), (Some("h"), None));
        assert_eq!(revision.spec(), Some(json!({"containers": [{"name": "c", "image": "i:1"}]})));
        // As Kruise's controller records it: the fields the SidecarSet lacks are `null`.
        let recorded = Revision::of(&json!({"kind": "ControllerRevision", "metadata": {"name": "r"},
            "data": {"spec": {"$patch": "replace", "containers": [{"name": "c", "image": "i:2", "env": null}],
                "imagePullSecrets": null, "initContainers": null, "patchPodMetadata": null, "volumes": null}}}));
        assert_eq!(recorded.spec(), Some(json!({"containers": [{"name": "c", "image": "i:2"}]})));
        let bare = Revision::of(&json!({"kind": "ControllerRevision", "metadata": {"name": "r"}}));
        assert_eq!((bare.revision, bare.spec(), bare.sidecarset), (0, None, None));
    }
}
