//! What is wrong with a hand-written SidecarSet before any webhook reads it: fields that no schema
//! knows (a typo such as `spec.selecter`, named with its path and the nearest known name), and the
//! pairs of fields Kruise's validation refuses together. A folder of cluster objects is loaded
//! without the API server's schema check, so without this a typo'd field is silently ignored
//! and shows up later as some other error ("spec.selector: Required value").
//!
//! The known fields are those of the SidecarSet CRD this binary generates (`crd.rs`); where the
//! CRD keeps a core Kubernetes object as it is (a sidecar's Container fields, a Volume, the
//! metadata), the field names of the k8s-openapi type. Inside those core objects nothing deeper is
//! checked.

use k8s_openapi::api::core::v1::{Container, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{self, DeserializeOwned, Visitor};
use serde_json::Value;

use super::crd::sidecarset_schema;
use super::sidecarset::SidecarSet;

/// Every finding for one SidecarSet object, each a sentence that starts with the field's path.
pub fn findings(object: &Value) -> Vec<String> {
    let version = object.get("apiVersion").and_then(Value::as_str).and_then(|a| a.rsplit_once('/'));
    let Some(schema) = version.and_then(|(_, v)| sidecarset_schema(v)) else { return Vec::new() };
    let mut out = Vec::new();
    unknown_fields(object, schema, "", "", &mut out);
    match SidecarSet::from_value(object) {
        Ok(set) => out.extend(conflicting_pairs(&set)),
        Err(e) => out.push(e),
    }
    out
}

/// Fields of `value` that `schema` (at `path`; `shape` is the path without list indices) does not
/// list, then the same for each listed field.
fn unknown_fields(value: &Value, schema: &Value, path: &str, shape: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let core = core_fields(shape);
            if properties.is_none() && core.is_empty() {
                return; // a map (labels) or a value kept as it is
            }
            let listed = |name: &str| properties.and_then(|p| p.get(name));
            for (name, field) in fields {
                let (field_path, field_shape) = (join(path, name), join(shape, name));
                if let Some(field_schema) = listed(name) {
                    unknown_fields(field, field_schema, &field_path, &field_shape, out);
                } else if !core.contains(&name.as_str()) {
                    let known = properties.into_iter().flat_map(|p| p.keys().map(String::as_str));
                    out.push(match nearest(name, known.chain(core.iter().copied())) {
                        Some(near) => {
                            format!("unknown field \"{field_path}\" (did you mean \"{}\"?)", join(path, near))
                        }
                        None => format!("unknown field \"{field_path}\""),
                    });
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_fields(item, item_schema, &format!("{path}[{i}]"), &format!("{shape}[]"), out);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_owned() } else { format!("{path}.{name}") }
}

/// The fields of the core object the CRD keeps verbatim at `shape`, besides those it lists.
fn core_fields(shape: &str) -> &'static [&'static str] {
    match shape {
        "metadata" => field_names::<ObjectMeta>(),
        "spec.containers[]" | "spec.initContainers[]" => field_names::<Container>(),
        "spec.volumes[]" => field_names::<Volume>(),
        _ => &[],
    }
}

/// The known name closest to `name`, when it is close enough to be a typo of it: at most one edit
/// (a transposition counts as one) per three characters, and at least one allowed.
fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let allowed = (name.chars().count() / 3).max(1);
    known
        .map(|k| (strsim::damerau_levenshtein(&name.to_lowercase(), &k.to_lowercase()), k))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// The field names a k8s-openapi type's `Deserialize` lists (it passes them to
/// `deserialize_struct`), read once by a deserializer that only records them.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Names(Option<&'static [&'static str]>);
    impl<'de> de::Deserializer<'de> for &mut Names {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only the field names are read"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = Some(fields);
            Err(de::Error::custom("only the field names are read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut names = Names(None);
    let _ = T::deserialize(&mut names);
    names.0.unwrap_or(&[])
}

/// The pairs of fields Kruise's SidecarSet validation refuses together, with their paths.
pub fn conflicting_pairs(set: &SidecarSet) -> Vec<String> {
    let mut out = Vec::new();
    // An empty type is defaulted to RollingUpdate, where the rule applies.
    if let Some(s) = &set.spec.update_strategy
        && matches!(s.type_.as_str(), "" | "RollingUpdate")
        && s.partition_and_selector()
    {
        out.push(
            "spec.updateStrategy.partition and spec.updateStrategy.selector cannot be used together \
             (Kruise refuses this SidecarSet)"
                .to_owned(),
        );
    }
    let lists = [("initContainers", &set.spec.init_containers), ("containers", &set.spec.containers)];
    for (list, containers) in lists {
        for (i, _) in containers.iter().enumerate().filter(|(_, c)| c.resources_policy_with_resources()) {
            out.push(format!(
                "spec.{list}[{i}].resourcesPolicy and spec.{list}[{i}].resources cannot be configured together \
                 (Kruise refuses this SidecarSet)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sidecarset(spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"}, "spec": spec})
    }

    #[test]
    fn a_typo_is_named_with_its_path_and_the_nearest_field() {
        let found = findings(&sidecarset(json!({
            "selecter": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "a", "image": "x", "imagePulPolicy": "Always", "podInjectPolicy": "BeforeAppContainer"}],
            "updateStrategy": {"type": "RollingUpdate", "maxUnavalable": 1},
            "volumes": [{"name": "v", "emptyDir": {}, "hostpath": {}}],
            "zzzz": 1,
        })));
        assert_eq!(
            found,
            [
                r#"unknown field "spec.selecter" (did you mean "spec.selector"?)"#,
                r#"unknown field "spec.containers[0].imagePulPolicy" (did you mean "spec.containers[0].imagePullPolicy"?)"#,
                r#"unknown field "spec.updateStrategy.maxUnavalable" (did you mean "spec.updateStrategy.maxUnavailable"?)"#,
                r#"unknown field "spec.volumes[0].hostpath" (did you mean "spec.volumes[0].hostPath"?)"#,
                r#"unknown field "spec.zzzz""#,
            ]
        );
        let mut object = sidecarset(json!({"selector": {}}));
        object["metadata"]["lables"] = json!({});
        assert_eq!(
            findings(&object),
            [r#"unknown field "metadata.lables" (did you mean "metadata.labels"?)"#]
        );
    }

    #[test]
    fn known_fields_of_both_versions_pass() {
        let spec = json!({
            "selector": {"matchLabels": {"any-key": "v"}, "matchExpressions": [{"key": "k", "operator": "Exists"}]},
            "containers": [{
                "name": "a", "image": "x", "env": [{"name": "E", "value": "1"}], "securityContext": {"privileged": false},
                "shareVolumePolicy": {"type": "enabled"}, "upgradeStrategy": {"upgradeType": "ColdUpgrade"},
                "transferEnv": [{"sourceContainerName": "app", "envName": "E"}],
            }],
            "volumes": [{"name": "v", "configMap": {"name": "c"}}],
            "updateStrategy": {"type": "RollingUpdate", "partition": 1, "priorityStrategy": {"weightPriority": []}},
            "patchPodMetadata": [{"annotations": {"a": "b"}, "patchPolicy": "Retain"}],
        });
        let mut object = sidecarset(spec.clone());
        object["metadata"] =
            json!({"name": "s", "labels": {"a": "b"}, "annotations": {}, "resourceVersion": "1"});
        object["status"] = json!({"matchedPods": 1, "observedGeneration": 1});
        assert_eq!(findings(&object), Vec::<String>::new());
        let mut v1alpha1 = sidecarset(spec);
        v1alpha1["apiVersion"] = json!("apps.kruise.io/v1alpha1");
        v1alpha1["spec"]["namespace"] = json!("shop");
        assert_eq!(findings(&v1alpha1), Vec::<String>::new());
        // In v1beta1 `spec.namespace` is gone.
        v1alpha1["apiVersion"] = json!("apps.kruise.io/v1beta1");
        assert!(findings(&v1alpha1)[0].starts_with(r#"unknown field "spec.namespace""#));
    }

    #[test]
    fn pairs_kruise_refuses_are_reported() {
        let found = findings(&sidecarset(json!({
            "selector": {"matchLabels": {"a": "b"}},
            "updateStrategy": {"partition": "10%", "selector": {"matchLabels": {"canary": "true"}}},
            "containers": [
                {"name": "ok", "image": "x"},
                {"name": "a", "image": "x", "resources": {"limits": {"cpu": "1"}},
                 "resourcesPolicy": {"targetContainersNameRegex": ".*", "resourcesExpr": {"limits": {"cpu": "50%"}}}},
            ],
        })));
        assert_eq!(
            found,
            [
                "spec.updateStrategy.partition and spec.updateStrategy.selector cannot be used together (Kruise refuses this SidecarSet)",
                "spec.containers[1].resourcesPolicy and spec.containers[1].resources cannot be configured together (Kruise refuses this SidecarSet)",
            ]
        );
        // A zero partition is no partition; NotUpdate has no such rule.
        let fine =
            |strategy: Value| findings(&sidecarset(json!({"selector": {}, "updateStrategy": strategy})));
        assert!(fine(json!({"partition": 0, "selector": {}})).is_empty());
        assert!(fine(json!({"type": "NotUpdate", "partition": 2, "selector": {}})).is_empty());
    }

    #[test]
    fn an_unreadable_sidecarset_is_reported() {
        let found = findings(&sidecarset(json!({"containers": "not a list"})));
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("SidecarSet s cannot be read"), "{found:?}");
    }

    #[test]
    fn core_field_names_come_from_k8s_openapi() {
        assert!(field_names::<Container>().contains(&"imagePullPolicy"));
        assert!(field_names::<Volume>().contains(&"persistentVolumeClaim"));
        assert!(field_names::<ObjectMeta>().contains(&"ownerReferences"));
    }
}
