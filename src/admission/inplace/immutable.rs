//! Field immutability on UPDATE (docs/workloads.md#3-1-immutable-fields): everything in `spec` except a
//! kind's mutable fields must stay the same, compared like `equality.Semantic.DeepEqual` on the typed object,
//! where a missing field, `null`, `""`, `[]` and `{}` are all the zero value. Plus
//! `ValidateObjectMetaUpdate`'s immutable metadata.

use std::borrow::Cow;

use crate::api::field_errors::{self, FieldError};
use crate::api::tree::{Json, Lookup, Object};

/// The zero value of a field, as Go's typed decoding sees it.
fn is_zero(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::String(s) => s.is_empty(),
        Json::Array(a) => a.is_empty(),
        Json::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Semantic equality: zero values equal absent ones at every depth, and an object whose fields
/// are all zero equals an absent one (a Go struct field that was never set).
pub fn semantic_eq(a: &Json, b: &Json) -> bool {
    static EMPTY: std::sync::LazyLock<Object<'static>> = std::sync::LazyLock::new(Object::new);
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => objects_eq(x, y),
        (Json::Object(x), Json::Null) | (Json::Null, Json::Object(x)) => objects_eq(x, &EMPTY),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(p, q))
        }
        _ if is_zero(a) && is_zero(b) => true,
        _ => a == b,
    }
}

/// Each side's keys looked up in the other: hashed once when an object is large (a request sends
/// its objects, so their size is the sender's choice).
fn objects_eq(x: &Object, y: &Object) -> bool {
    let (in_x, in_y) = (x.lookup(), y.lookup());
    x.iter().all(|(k, v)| semantic_eq(v, in_y.get(k).unwrap_or(&Json::Null)))
        && y.iter().filter(|(k, _)| in_x.get(k).is_none()).all(|(_, v)| semantic_eq(&Json::Null, v))
}

/// Does anything in `spec` other than `mutable` differ between old and new? `defaults` are
/// string fields Kruise's mutating webhook fills in (which this binary does not serve): an unset
/// value on either side counts as its default, so spelling the default out is no change.
/// Walks the specs in place: no copy of the (large) template is made.
pub fn spec_changed_outside(old: &Json, new: &Json, mutable: &[&str], defaults: &[(&str, &str)]) -> bool {
    let (old_spec, new_spec) =
        (old.get("spec").and_then(Json::as_object), new.get("spec").and_then(Json::as_object));
    let keys = old_spec.into_iter().chain(new_spec).flat_map(|m| m.keys()).filter(|k| !mutable.contains(k));
    let (in_old, in_new) = (old_spec.map(Object::lookup), new_spec.map(Object::lookup));
    keys.into_iter().any(|key| {
        !semantic_eq(&field(in_old.as_ref(), key, defaults), &field(in_new.as_ref(), key, defaults))
    })
}

static NULL: Json = Json::Null;

fn field<'a>(spec: Option<&Lookup<'a, 'a>>, key: &str, defaults: &[(&str, &str)]) -> Cow<'a, Json<'a>> {
    let value = spec.and_then(|m| m.get(key)).unwrap_or(&NULL);
    match defaults.iter().find(|(k, _)| *k == key) {
        Some((_, default)) if is_zero(value) => Cow::Owned(Json::from((*default).to_owned())),
        _ => Cow::Borrowed(value),
    }
}

/// `ValidateObjectMetaUpdate`: name, namespace, uid and creationTimestamp never change.
pub fn metadata_update(old: &Json, new: &Json) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for key in ["name", "namespace", "uid", "creationTimestamp"] {
        let before = old.at(&["metadata", key]).unwrap_or(&Json::Null);
        let after = new.at(&["metadata", key]).unwrap_or(&Json::Null);
        // The apiserver fills uid and creationTimestamp in on the stored object; only a different
        // value (not a missing one on a hand-made request) is a change.
        if before != after && (key == "name" || !is_zero(before) && !is_zero(after)) {
            errors.push(field_errors::invalid_shown(
                format!("metadata.{key}"),
                field_errors::show(&after.to_value()),
                "field is immutable",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' objects as the trees a request carries.
    macro_rules! json {
        ($($t:tt)+) => {
            Json::from(serde_json::json!($($t)+))
        };
    }

    #[test]
    fn zero_values_equal_missing_ones() {
        assert!(semantic_eq(&json!({"a": null, "b": [], "c": {"d": ""}}), &json!({})));
        assert!(!semantic_eq(&json!({"a": 0}), &json!({})));
        assert!(!semantic_eq(&json!({"a": [1]}), &json!({"a": [2]})));
    }

    #[test]
    fn only_listed_fields_may_change() {
        let old = json!({"spec": {"replicas": 1, "selector": {"matchLabels": {"a": "1"}}}});
        let scaled = json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"a": "1"}}}});
        let reselected = json!({"spec": {"replicas": 1, "selector": {"matchLabels": {"a": "2"}}}});
        assert!(!spec_changed_outside(&old, &scaled, &["replicas"], &[]));
        assert!(spec_changed_outside(&old, &reselected, &["replicas"], &[]));
        let defaulted =
            json!({"spec": {"replicas": 1, "selector": {"matchLabels": {"a": "1"}}, "policy": "P"}});
        assert!(!spec_changed_outside(&old, &defaulted, &["replicas"], &[("policy", "P")]));
        assert!(spec_changed_outside(&old, &defaulted, &["replicas"], &[]));
    }

    #[test]
    fn immutable_metadata() {
        let old = json!({"metadata": {"name": "a", "uid": "1"}});
        assert!(
            metadata_update(&old, &json!({"metadata": {"name": "a", "uid": "1", "labels": {"x": "y"}}}))
                .is_empty()
        );
        let errs = metadata_update(&old, &json!({"metadata": {"name": "b", "uid": "2"}}));
        assert_eq!(errs[0].to_string(), r#"metadata.name: Invalid value: "b": field is immutable"#);
        assert_eq!(errs.len(), 2);
    }
}
