//! The SidecarSet CustomResourceDefinition, generated from the Rust types (`schemars`) so the
//! schema cannot drift from what the webhooks read. `manifests/components/sidecarset-crd/apps.kruise.io_sidecarsets.yaml`
//! is this function's output, checked in; a test fails when they differ.
//!
//! Versions: v1alpha1 and v1beta1 are both served, v1beta1 is stored, like Kruise since v1.9.0
//! (its CRD marks v1beta1 `storage: true`). Keeping Kruise's storage version means objects written
//! by Kruise and by us are interchangeable in etcd. There is no conversion webhook
//! (`strategy: None`): the only v1alpha1-only field, `spec.namespace`, is mapped to a
//! `namespaceSelector` by the SidecarSet mutating webhook, so a v1alpha1 object stored as v1beta1
//! keeps its meaning.
//!
//! The schemars output is turned into a structural schema: `$ref`s inlined, `null` alternatives of
//! optional fields dropped (the apiserver prunes nulls), objects that keep unknown fields (every
//! struct here, the embedded core Container, Volumes) marked `x-kubernetes-preserve-unknown-fields`,
//! `metadata` reduced to `type: object`, and Kruise's two CRD defaults added.

use std::sync::LazyLock;

use schemars::JsonSchema;
use serde_json::{Map, Value, json};

use super::sidecarset::{SidecarSet, v1alpha1};

/// Where the generated CRD is checked in, relative to the repository root.
pub const SIDECARSET_CRD_PATH: &str = "manifests/components/sidecarset-crd/apps.kruise.io_sidecarsets.yaml";

/// The structural `openAPIV3Schema` of a type.
pub fn structural_schema<T: JsonSchema>() -> Value {
    let root = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    let defs = root.get("$defs").cloned().unwrap_or(Value::Null);
    let mut schema = structural(&root, &defs);
    if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut)
        && props.contains_key("metadata")
    {
        props.insert("metadata".into(), json!({"type": "object"}));
    }
    schema
}

fn structural(node: &Value, defs: &Value) -> Value {
    match node {
        // `true` (any value): serde_json::Value fields.
        Value::Bool(true) => json!({"x-kubernetes-preserve-unknown-fields": true}),
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                let name = r.rsplit('/').next().unwrap_or_default();
                return described(structural(&defs[name], defs), map);
            }
            if let Some(inner) = optional_inner(map) {
                return described(structural(inner, defs), map);
            }
            structural_object(map, defs)
        }
        other => other.clone(),
    }
}

/// `inner` with the description of the schema `map` that stood for it.
fn described(mut inner: Value, map: &Map<String, Value>) -> Value {
    if let (Some(desc), Some(obj)) = (map.get("description"), inner.as_object_mut()) {
        obj.insert("description".into(), desc.clone());
    }
    inner
}

/// `Option<T>` as `anyOf: [T, {type: null}]`: T.
fn optional_inner(map: &Map<String, Value>) -> Option<&Value> {
    let any = map.get("anyOf").and_then(Value::as_array)?;
    let non_null: Vec<&Value> = any.iter().filter(|s| s.get("type") != Some(&json!("null"))).collect();
    match non_null.as_slice() {
        [only] => Some(only),
        _ => None,
    }
}

/// A schema object, keyword by keyword, then marked to keep unknown fields where serde keeps them.
fn structural_object(map: &Map<String, Value>, defs: &Value) -> Value {
    let mut out = Map::new();
    for (k, v) in map {
        structural_keyword(&mut out, k, v, defs);
    }
    // An object with listed properties but no additionalProperties keyword keeps unknown
    // fields in serde (no deny_unknown_fields): say so, or the apiserver would prune them.
    if out.get("type") == Some(&json!("object"))
        && out.contains_key("properties")
        && !map.contains_key("additionalProperties")
    {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
    }
    // No type at all (an optional `serde_json::Value`): any value, kept as is.
    if !out.contains_key("type") && !out.contains_key("x-kubernetes-int-or-string") {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
    }
    Value::Object(out)
}

/// One keyword of a schema object into `out`: dropped, simplified (`type: [t, "null"]` -> `t`) or
/// made structural in turn.
fn structural_keyword(out: &mut Map<String, Value>, k: &str, v: &Value, defs: &Value) {
    match k {
        "$schema" | "$defs" | "title" | "default" => {}
        "type" => {
            let t = match v {
                Value::Array(types) => types.iter().find(|t| *t != "null").cloned().unwrap_or(Value::Null),
                other => other.clone(),
            };
            out.insert("type".into(), t);
        }
        "format" if !matches!(v.as_str(), Some("int32" | "int64")) => {}
        "minimum" | "maximum" => {}
        "properties" => {
            let props = v
                .as_object()
                .map(|p| p.iter().map(|(name, s)| (name.clone(), structural(s, defs))).collect());
            out.insert(k.into(), props.map(Value::Object).unwrap_or(Value::Null));
        }
        "items" => {
            out.insert(k.into(), structural(v, defs));
        }
        "additionalProperties" => match v {
            // Flattened `extra` maps: the object keeps fields it does not list.
            Value::Bool(true) => {
                out.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
            }
            Value::Bool(false) => {}
            schema => {
                out.insert(k.into(), structural(schema, defs));
            }
        },
        _ => {
            out.insert(k.into(), v.clone());
        }
    }
}

/// Add Kruise's CRD defaults at `path` (property names) inside a version schema.
fn set_default(schema: &mut Value, path: &[&str], default: Value) {
    let mut node = schema;
    for step in path {
        let next = if *step == "[]" {
            node.get_mut("items")
        } else {
            node.get_mut("properties").and_then(|p| p.get_mut(*step))
        };
        match next {
            Some(n) => node = n,
            None => return,
        }
    }
    if let Some(obj) = node.as_object_mut() {
        obj.insert("default".into(), default);
    }
}

/// Volumes are core `Volume` objects kept verbatim: objects, with any fields.
fn volumes_are_objects(schema: &mut Value) {
    if let Some(items) =
        schema.pointer_mut("/properties/spec/properties/volumes/items").and_then(Value::as_object_mut)
    {
        items.insert("type".into(), json!("object"));
    }
}

fn with_kruise_defaults(mut schema: Value) -> Value {
    volumes_are_objects(&mut schema);
    for list in ["containers", "initContainers"] {
        set_default(
            &mut schema,
            &["spec", list, "[]", "resourcesPolicy", "targetContainersNameRegex"],
            json!(".*"),
        );
    }
    set_default(&mut schema, &["spec", "injectionStrategy", "revision", "policy"], json!("Always"));
    schema
}

fn printer_columns() -> Value {
    json!([
        {"description": "The number of pods matched.", "jsonPath": ".status.matchedPods", "name": "MATCHED", "type": "integer"},
        {"description": "The number of pods matched and updated.", "jsonPath": ".status.updatedPods", "name": "UPDATED", "type": "integer"},
        {"description": "The number of pods matched and ready.", "jsonPath": ".status.readyPods", "name": "READY", "type": "integer"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "AGE", "type": "date"},
    ])
}

fn version(name: &str, storage: bool, schema: Value) -> Value {
    json!({
        "name": name,
        "served": true,
        "storage": storage,
        "schema": {"openAPIV3Schema": with_kruise_defaults(schema)},
        "subresources": {"status": {}},
        "additionalPrinterColumns": printer_columns(),
    })
}

/// The SidecarSet CRD object.
pub fn sidecarset_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "sidecarsets.apps.kruise.io"},
        "spec": {
            "group": "apps.kruise.io",
            "names": {"kind": "SidecarSet", "listKind": "SidecarSetList", "plural": "sidecarsets", "singular": "sidecarset"},
            "scope": "Cluster",
            "conversion": {"strategy": "None"},
            "versions": [
                version("v1alpha1", false, structural_schema::<v1alpha1::SidecarSet>()),
                version("v1beta1", true, structural_schema::<SidecarSet>()),
            ],
        }
    })
}

/// The `openAPIV3Schema` of a served version (`v1alpha1` or `v1beta1`), as the CRD holds it.
pub fn sidecarset_schema(version: &str) -> Option<&'static Value> {
    static CRD: LazyLock<Value> = LazyLock::new(sidecarset_crd);
    CRD.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
}

/// The CRD as the checked-in YAML file.
pub fn sidecarset_crd_yaml() -> String {
    let body = serde_saphyr::to_string(&sidecarset_crd()).unwrap_or_default();
    format!("---\n# Generated by kruise_admission::api::crd::sidecarset_crd_yaml; do not edit.\n{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node has a type unless it preserves unknown fields or is int-or-string, and no node
    /// mixes `properties` with `additionalProperties` (the structural-schema rules).
    fn assert_structural(node: &Value, path: &str) {
        let Some(obj) = node.as_object() else { panic!("{path}: schema must be an object") };
        let exempt = obj.contains_key("x-kubernetes-preserve-unknown-fields")
            || obj.contains_key("x-kubernetes-int-or-string");
        assert!(obj.contains_key("type") || exempt, "{path}: no type");
        assert!(
            !(obj.contains_key("properties") && obj.contains_key("additionalProperties")),
            "{path}: properties with additionalProperties"
        );
        for forbidden in ["$ref", "anyOf", "oneOf", "allOf"] {
            assert!(!obj.contains_key(forbidden), "{path}: {forbidden}");
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                assert_structural(v, &format!("{path}.{k}"));
            }
        }
        for k in ["items", "additionalProperties"] {
            if let Some(v) = obj.get(k).filter(|v| v.is_object()) {
                assert_structural(v, &format!("{path}[{k}]"));
            }
        }
    }

    #[test]
    fn both_versions_are_structural_and_v1beta1_is_stored() {
        let crd = sidecarset_crd();
        let versions = crd["spec"]["versions"].as_array().unwrap();
        assert_eq!(
            versions
                .iter()
                .map(|v| (v["name"].as_str().unwrap(), v["storage"].as_bool().unwrap()))
                .collect::<Vec<_>>(),
            [("v1alpha1", false), ("v1beta1", true)]
        );
        for v in versions {
            let schema = &v["schema"]["openAPIV3Schema"];
            assert_structural(schema, v["name"].as_str().unwrap());
            let spec = &schema["properties"]["spec"]["properties"];
            assert_eq!(
                spec["containers"]["items"]["x-kubernetes-preserve-unknown-fields"], true,
                "embedded core Container"
            );
            assert_eq!(
                spec["volumes"]["items"]["x-kubernetes-preserve-unknown-fields"], true,
                "embedded core Volume"
            );
            assert_eq!(
                spec["containers"]["items"]["properties"]["resourcesPolicy"]["properties"]["targetContainersNameRegex"]
                    ["default"],
                ".*"
            );
            assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
        }
        let alpha = &versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        let beta = &versions[1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
        assert!(alpha.get("namespace").is_some() && beta.get("namespace").is_none());
        assert!(beta.get("customVersion").is_some());
    }

    #[test]
    fn checked_in_crd_matches_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(SIDECARSET_CRD_PATH);
        let generated = sidecarset_crd_yaml();
        if std::env::var_os("KRUISE_REGENERATE_CRDS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{} is out of date with the SidecarSet types; regenerate it with\n    KRUISE_REGENERATE_CRDS=1 cargo test --lib api::crd\nand commit the result",
            SIDECARSET_CRD_PATH
        );
    }
}
