//! Hot upgrade (docs/sidecarset.md#5-7-hot-upgrade): a sidecar `N` becomes the pair `N-1` (working, the
//! SidecarSet's image) and `N-2` (the empty image), each told its version through annotations.

use serde_json::{Map, Value, json};

use crate::api::sidecarset::{
    SIDECARSET_VERSION_ALT_ENV, SIDECARSET_VERSION_ENV, VERSION_ALT_ANNOTATION_PREFIX,
    VERSION_ANNOTATION_PREFIX,
};

/// The working container's name: the one `working-hotupgrade-container` records for `N`.
pub fn working_name(name: &str) -> String {
    format!("{name}-1")
}

/// `N-1` and `N-2` from the composed container `N` (one copy: `N-2` takes the original).
pub fn pair(container: Map<String, Value>, name: &str, empty_image: &str) -> [Map<String, Value>; 2] {
    let make = |mut c: Map<String, Value>, own: String, image: Option<&str>| {
        c.insert("name".into(), Value::String(own.clone()));
        match image {
            Some("") => {
                c.remove("image");
            }
            Some(image) => {
                c.insert("image".into(), Value::String(image.to_owned()));
            }
            None => {}
        }
        let env = c.entry("env").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(env) = env {
            // Neither fieldRef carries an apiVersion (Kruise writes them that way).
            env.push(json!({"name": SIDECARSET_VERSION_ENV, "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['{VERSION_ANNOTATION_PREFIX}{own}']")}}}));
            env.push(json!({"name": SIDECARSET_VERSION_ALT_ENV, "valueFrom": {"fieldRef": {"fieldPath": format!("metadata.annotations['{VERSION_ALT_ANNOTATION_PREFIX}{own}']")}}}));
        }
        c
    };
    let working = make(container.clone(), working_name(name), None);
    [working, make(container, format!("{name}-2"), Some(empty_image))]
}

/// The four version annotations of a pair: `N-1` is version 1, `N-2` the alternative.
pub fn version_annotations(name: &str) -> [(String, &'static str); 4] {
    [
        (format!("{VERSION_ANNOTATION_PREFIX}{name}-1"), "1"),
        (format!("{VERSION_ALT_ANNOTATION_PREFIX}{name}-1"), "0"),
        (format!("{VERSION_ANNOTATION_PREFIX}{name}-2"), "0"),
        (format!("{VERSION_ALT_ANNOTATION_PREFIX}{name}-2"), "1"),
    ]
}
