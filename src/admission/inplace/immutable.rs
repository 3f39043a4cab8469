//! Field immutability on UPDATE (docs/workloads.md#3-1-immutable-fields): everything in `spec` except a
//! kind's mutable fields must stay the same, compared like `equality.Semantic.DeepEqual` on the typed object,
//! where a missing field, `null`, `""`, `[]` and `{}` are all the zero value. Plus
//! `ValidateObjectMetaUpdate`'s immutable metadata.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::api::field_errors::{self, FieldError};

/// The zero value of a field, as Go's typed decoding sees it.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Semantic equality: zero values equal absent ones at every depth, and an object whose fields
/// are all zero equals an absent one (a Go struct field that was never set).
pub fn semantic_eq(a: &Value, b: &Value) -> bool {
    static EMPTY: std::sync::LazyLock<serde_json::Map<String, Value>> =
        std::sync::LazyLock::new(serde_json::Map::new);
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => objects_eq(x, y),
        (Value::Object(x), Value::Null) | (Value::Null, Value::Object(x)) => objects_eq(x, &EMPTY),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| semantic_eq(p, q))
        }
        _ if is_zero(a) && is_zero(b) => true,
        _ => a == b,
    }
}

fn objects_eq(x: &serde_json::Map<String, Value>, y: &serde_json::Map<String, Value>) -> bool {
    x.iter().all(|(k, v)| semantic_eq(v, y.get(k).unwrap_or(&Value::Null)))
        && y.iter().filter(|(k, _)| !x.contains_key(*k)).all(|(_, v)| semantic_eq(&Value::Null, v))
}

/// Does anything in `spec` other than `mutable` differ between old and new? `defaults` are
/// string fields Kruise's mutating webhook fills in (which this binary does not serve): an unset
/// value on either side counts as its default, so spelling the default out is no change.
/// Walks the specs in place: no copy of the (large) template is made.
pub fn spec_changed_outside(old: &Value, new: &Value, mutable: &[&str], defaults: &[(&str, &str)]) -> bool {
    let (old_spec, new_spec) =
        (old.get("spec").and_then(Value::as_object), new.get("spec").and_then(Value::as_object));
    let keys = old_spec
        .into_iter()
        .chain(new_spec)
        .flat_map(|m| m.keys())
        .filter(|k| !mutable.contains(&k.as_str()));
    keys.into_iter().any(|key| !semantic_eq(&field(old_spec, key, defaults), &field(new_spec, key, defaults)))
}

static NULL: Value = Value::Null;

fn field<'a>(spec: Option<&'a Map<String, Value>>, key: &str, defaults: &[(&str, &str)]) -> Cow<'a, Value> {
    let value = spec.and_then(|m| m.get(key)).unwrap_or(&NULL);
    match defaults.iter().find(|(k, _)| *k == key) {
        Some((_, default)) if is_zero(value) => Cow::Owned(Value::String((*default).to_owned())),
        _ => Cow::Borrowed(value),
    }
}

/// `ValidateObjectMetaUpdate`: name, namespace, uid and creationTimestamp never change.
pub fn metadata_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for key in ["name", "namespace", "uid", "creationTimestamp"] {
        let before = old.pointer(&format!("/metadata/{key}")).unwrap_or(&Value::Null);
        let after = new.pointer(&format!("/metadata/{key}")).unwrap_or(&Value::Null);
        // The apiserver fills uid and creationTimestamp in on the stored object; only a different
        // value (not a missing one on a hand-made request) is a change.
        if before != after && (key == "name" || !is_zero(before) && !is_zero(after)) {
            errors.push(field_errors::invalid_shown(
                format!("metadata.{key}"),
                field_errors::show(after),
                "field is immutable",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
