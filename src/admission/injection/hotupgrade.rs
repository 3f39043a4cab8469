//! Hot upgrade (docs/sidecarset.md#5-7-hot-upgrade): a sidecar `N` becomes the pair `N-1` (working, the
//! SidecarSet's image) and `N-2` (the empty image), each told its version through annotations.

use crate::api::tree::{Json, Object};

use crate::api::sidecarset::{
    SIDECARSET_VERSION_ALT_ENV, SIDECARSET_VERSION_ENV, VERSION_ALT_ANNOTATION_PREFIX,
    VERSION_ANNOTATION_PREFIX,
};

/// The working container's name: the one `working-hotupgrade-container` records for `N`.
pub fn working_name(name: &str) -> String {
    [name, "-1"].concat()
}

/// The pair's names for `N`: the working `N-1` ([`working_name`]) and the spare `N-2`.
pub fn pair_names(name: &str) -> [String; 2] {
    [working_name(name), [name, "-2"].concat()]
}

/// `N-1` and `N-2` from the composed container `N` (one copy: `N-2` takes the original).
pub fn pair<'a>(container: Object<'a>, name: &str, empty_image: &str) -> [Object<'a>; 2] {
    let make = |mut c: Object<'a>, own: String, image: Option<&str>| {
        c.insert("name", Json::from(own.clone()));
        match image {
            Some("") => {
                c.remove("image");
            }
            Some(image) => {
                c.insert("image", Json::from(image.to_owned()));
            }
            None => {}
        }
        if let Json::Array(env) = c.entry_or_insert("env", Json::Array(Vec::new())) {
            env.push(annotation_env(SIDECARSET_VERSION_ENV, VERSION_ANNOTATION_PREFIX, &own));
            env.push(annotation_env(SIDECARSET_VERSION_ALT_ENV, VERSION_ALT_ANNOTATION_PREFIX, &own));
        }
        c
    };
    let [working, spare] = pair_names(name);
    [make(container.clone(), working, None), make(container, spare, Some(empty_image))]
}

/// `{"name": NAME, "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['PREFIXcontainer']"}}}`,
/// built as a tree. Neither fieldRef carries an apiVersion (Kruise writes them that way).
fn annotation_env(name: &'static str, prefix: &str, container: &str) -> Json<'static> {
    let object = |key: &'static str, value: Json<'static>| Json::Object(Object::from_iter([(key, value)]));
    // `concat`, not `format!`: these are built for every hot-upgrade sidecar of every pod.
    let path = Json::from(["metadata.annotations['", prefix, container, "']"].concat());
    Json::Object(Object::from_iter([
        ("name", Json::from(name)),
        ("valueFrom", object("fieldRef", object("fieldPath", path))),
    ]))
}

/// The four version annotations of a pair: `N-1` is version 1, `N-2` the alternative.
pub fn version_annotations(name: &str) -> [(String, &'static str); 4] {
    [
        ([VERSION_ANNOTATION_PREFIX, name, "-1"].concat(), "1"),
        ([VERSION_ALT_ANNOTATION_PREFIX, name, "-1"].concat(), "0"),
        ([VERSION_ANNOTATION_PREFIX, name, "-2"].concat(), "0"),
        ([VERSION_ALT_ANNOTATION_PREFIX, name, "-2"].concat(), "1"),
    ]
}
