//! SidecarSet defaulting (docs/sidecarset.md#9-1-defaulting, Kruise `apis/apps/defaults`), applied to the
//! object as JSON so that fields this binary does not know are left alone. v1alpha1 and v1beta1 default
//! alike.
//!
//! Kruise fills these in before hashing, so the hash (docs/sidecarset.md#8-the-sidecarset-hash) depends on
//! every rule here: a default added or missed changes the bytes. Quirks kept on purpose because the hash
//! depends on them:
//! - startup probes are not defaulted (Kruise's SidecarSet defaulting skips them, unlike a pod's);
//! - an empty `transferEnv[].sourceContainerNameFrom` is left alone (Kruise dereferences it and
//!   would crash; we simply do nothing).

use serde_json::{Map, Value, json};

use super::corev1::VOLUME_SOURCES;
use crate::api::image_ref;
use crate::api::json::object_entry;

/// `0644`, the default mode of secret, configMap, downwardAPI and projected volumes.
const DEFAULT_MODE: i64 = 0o644;

fn is_unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// Set `key` when Go would see its zero value (absent, null, "" or 0).
fn default_zero(obj: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(obj.get(key)) {
        obj.insert(key.to_owned(), value);
    }
}

/// Set a pointer field `key` when it is absent or null (an explicit zero is kept).
fn default_nil(obj: &mut Map<String, Value>, key: &str, value: Value) {
    if obj.get(key).is_none_or(Value::is_null) {
        obj.insert(key.to_owned(), value);
    }
}

/// The existing object under `key` (no creation).
fn existing<'a>(obj: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    obj.get_mut(key)?.as_object_mut()
}

fn each_object<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    obj.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// Apply every default of docs/sidecarset.md#9-1-defaulting to a SidecarSet object (either version).
pub fn apply(sidecarset: &mut Value) {
    let Some(root) = sidecarset.as_object_mut() else { return };
    let Some(spec) = object_entry(root, "spec") else { return };
    if let Some(strategy) = object_entry(spec, "updateStrategy") {
        default_zero(strategy, "type", json!("RollingUpdate"));
        default_nil(strategy, "maxUnavailable", json!(1));
        default_nil(strategy, "partition", json!(0));
    }
    for container in each_object(spec, "initContainers") {
        sidecar_container(container, "AfterAppContainer");
    }
    for container in each_object(spec, "containers") {
        sidecar_container(container, "BeforeAppContainer");
    }
    for volume in each_object(spec, "volumes") {
        self::volume(volume);
    }
    default_nil(spec, "revisionHistoryLimit", json!(10));
    for patch in each_object(spec, "patchPodMetadata") {
        default_zero(patch, "patchPolicy", json!("Retain"));
    }
    if let Some(revision) = existing(spec, "injectionStrategy").and_then(|s| existing(s, "revision")) {
        default_zero(revision, "policy", json!("Always"));
    }
}

fn sidecar_container(c: &mut Map<String, Value>, inject_policy: &str) {
    default_zero(c, "podInjectPolicy", json!(inject_policy));
    if let Some(upgrade) = object_entry(c, "upgradeStrategy") {
        default_zero(upgrade, "upgradeType", json!("ColdUpgrade"));
    }
    if let Some(share) = object_entry(c, "shareVolumePolicy") {
        default_zero(share, "type", json!("disabled"));
    }
    core_container(c, Probes::LivenessAndReadiness);
    for transfer in each_object(c, "transferEnv") {
        if let Some(field_ref) =
            existing(transfer, "sourceContainerNameFrom").and_then(|s| existing(s, "fieldRef"))
        {
            default_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// Which probes [`core_container`] defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probes {
    /// Liveness and readiness only: Kruise's SidecarSet defaulting (the hash depends on it).
    LivenessAndReadiness,
    /// All three, startup included: the API server's defaulting of a Pod.
    All,
}

/// `SetDefaults_Container` plus the per-field defaults under it (ports, env fieldRefs, resource
/// lists rounded to milli-units, probes, lifecycle handlers), as Kruise applies them to a SidecarSet
/// container and the API server to a Pod's containers.
pub fn core_container(c: &mut Map<String, Value>, probes: Probes) {
    if is_unset(c.get("imagePullPolicy")) {
        let image = c.get("image").and_then(Value::as_str).unwrap_or_default();
        let policy = if image_tag_is_latest(image) { "Always" } else { "IfNotPresent" };
        c.insert("imagePullPolicy".into(), json!(policy));
    }
    default_zero(c, "terminationMessagePath", json!("/dev/termination-log"));
    default_zero(c, "terminationMessagePolicy", json!("File"));
    for port in each_object(c, "ports") {
        default_zero(port, "protocol", json!("TCP"));
    }
    for env in each_object(c, "env") {
        if let Some(field_ref) = existing(env, "valueFrom").and_then(|v| existing(v, "fieldRef")) {
            default_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
    if let Some(resources) = existing(c, "resources") {
        for list in ["limits", "requests"] {
            if let Some(list) = existing(resources, list) {
                for q in list.values_mut() {
                    // Rounded up to milli-units and respelled the way Go marshals it; a value that is
                    // not a quantity is left for validation to report.
                    if let Some(text) = crate::api::quantity::go_text(q, true) {
                        *q = Value::String(text);
                    }
                }
            }
        }
    }
    let names: &[&str] = match probes {
        Probes::LivenessAndReadiness => &["livenessProbe", "readinessProbe"],
        Probes::All => &["livenessProbe", "readinessProbe", "startupProbe"],
    };
    for probe in names {
        if let Some(probe) = existing(c, probe) {
            default_zero(probe, "timeoutSeconds", json!(1));
            default_zero(probe, "periodSeconds", json!(10));
            default_zero(probe, "successThreshold", json!(1));
            default_zero(probe, "failureThreshold", json!(3));
            http_get(probe);
        }
    }
    if let Some(lifecycle) = existing(c, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(handler) = existing(lifecycle, hook) {
                http_get(handler);
            }
        }
    }
}

fn http_get(handler: &mut Map<String, Value>) {
    if let Some(get) = existing(handler, "httpGet") {
        default_zero(get, "path", json!("/"));
        default_zero(get, "scheme", json!("HTTP"));
    }
}

/// `SetDefaultPodVolumes` for one volume (the same for a SidecarSet's volumes and a Pod's).
pub fn volume(v: &mut Map<String, Value>) {
    if !VOLUME_SOURCES.iter().any(|s| v.get(*s).is_some_and(|x| !x.is_null())) {
        v.insert("emptyDir".into(), json!({}));
    }
    if let Some(host_path) = existing(v, "hostPath") {
        default_nil(host_path, "type", json!(""));
    }
    for source in ["secret", "configMap"] {
        if let Some(s) = existing(v, source) {
            default_nil(s, "defaultMode", json!(DEFAULT_MODE));
        }
    }
    if let Some(downward) = existing(v, "downwardAPI") {
        default_nil(downward, "defaultMode", json!(DEFAULT_MODE));
        downward_items(downward);
    }
    if let Some(projected) = existing(v, "projected") {
        default_nil(projected, "defaultMode", json!(DEFAULT_MODE));
        for source in each_object(projected, "sources") {
            if let Some(downward) = existing(source, "downwardAPI") {
                downward_items(downward);
            }
            if let Some(token) = existing(source, "serviceAccountToken") {
                default_nil(token, "expirationSeconds", json!(3600));
            }
        }
    }
}

fn downward_items(downward: &mut Map<String, Value>) {
    for item in each_object(downward, "items") {
        if let Some(field_ref) = existing(item, "fieldRef") {
            default_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// `SetDefaults_Container`'s test (`parsers.ParseImageName`): the image parses and its tag is
/// `latest`, or it has neither a tag nor a digest. An image that does not parse gets `IfNotPresent`.
pub fn image_tag_is_latest(image: &str) -> bool {
    image_ref::parse(image).is_some_and(|r| r.tag == "latest" || (r.tag.is_empty() && r.digest.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        for (image, latest) in [
            ("nginx", true),
            ("nginx:latest", true),
            ("nginx:1.25", false),
            ("registry.local:5000/team/nginx", true),
            ("registry.local:5000/team/nginx:v1", false),
            ("nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", false),
            ("nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", true),
            ("", false),
            ("Upper/Case", false),
        ] {
            assert_eq!(image_tag_is_latest(image), latest, "{image}");
        }
    }

    #[test]
    fn defaults_a_bare_sidecarset_like_kruise() {
        let mut s = json!({"metadata": {"name": "s"}, "spec": {
            "containers": [{"name": "dns-f", "image": "dns:1.0"}],
            "initContainers": [{"name": "init", "image": "busybox", "restartPolicy": "Always"}],
            "injectionStrategy": {"revision": {"revisionName": "r1"}},
            "patchPodMetadata": [{"annotations": {"a": "b"}}],
        }});
        apply(&mut s);
        let spec = &s["spec"];
        assert_eq!(
            spec["updateStrategy"],
            json!({"type": "RollingUpdate", "maxUnavailable": 1, "partition": 0})
        );
        assert_eq!(
            spec["containers"][0],
            json!({"name": "dns-f", "image": "dns:1.0", "podInjectPolicy": "BeforeAppContainer",
                   "upgradeStrategy": {"upgradeType": "ColdUpgrade"}, "shareVolumePolicy": {"type": "disabled"},
                   "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
                   "terminationMessagePolicy": "File"})
        );
        assert_eq!(spec["initContainers"][0]["podInjectPolicy"], "AfterAppContainer");
        assert_eq!(spec["initContainers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["revisionHistoryLimit"], 10);
        assert_eq!(spec["patchPodMetadata"][0]["patchPolicy"], "Retain");
        assert_eq!(spec["injectionStrategy"]["revision"]["policy"], "Always");
    }

    #[test]
    fn nested_container_and_volume_defaults() {
        let mut s = json!({"spec": {"containers": [{
            "name": "c", "image": "x:1",
            "ports": [{"containerPort": 80}],
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"limits": {"cpu": "0.5", "memory": "100u"}},
            "livenessProbe": {"httpGet": {"port": 8080}},
            "startupProbe": {"httpGet": {"port": 8080}},
            "lifecycle": {"preStop": {"httpGet": {"port": 1}}},
            "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['x']"}}, "envName": "E"}],
            "unknown": {"kept": true},
        }], "volumes": [
            {"name": "none"},
            {"name": "hp", "hostPath": {"path": "/x"}},
            {"name": "sec", "secret": {"secretName": "s"}},
            {"name": "cm", "configMap": {"name": "c", "defaultMode": 256}},
            {"name": "dw", "downwardAPI": {"items": [{"path": "p", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {"name": "pj", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
        ]}});
        apply(&mut s);
        let c = &s["spec"]["containers"][0];
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["resources"]["limits"], json!({"cpu": "500m", "memory": "1m"}));
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                   "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(
            c["startupProbe"],
            json!({"httpGet": {"port": 8080}}),
            "Kruise does not default startup probes"
        );
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(c["transferEnv"][0]["sourceContainerNameFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["unknown"], json!({"kept": true}));
        let v = &s["spec"]["volumes"];
        assert_eq!(v[0], json!({"name": "none", "emptyDir": {}}));
        assert_eq!(v[1]["hostPath"]["type"], "");
        assert_eq!(v[2]["secret"]["defaultMode"], 420);
        assert_eq!(v[3]["configMap"]["defaultMode"], 256);
        assert_eq!(
            v[4]["downwardAPI"],
            json!({"items": [{"path": "p", "fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}], "defaultMode": 420})
        );
        assert_eq!(v[5]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
        assert_eq!(v[5]["projected"]["defaultMode"], 420);
    }

    #[test]
    fn explicit_values_are_kept_and_defaulting_is_idempotent() {
        let mut s = json!({"spec": {"updateStrategy": {"type": "NotUpdate", "partition": "50%", "maxUnavailable": "20%"},
            "revisionHistoryLimit": 0,
            "containers": [{"name": "c", "image": "x", "imagePullPolicy": "Never", "podInjectPolicy": "AfterAppContainer",
                            "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"},
                            "shareVolumePolicy": {"type": "enabled"}}]}});
        apply(&mut s);
        let once = s.clone();
        apply(&mut s);
        assert_eq!(s, once);
        assert_eq!(
            s["spec"]["updateStrategy"],
            json!({"type": "NotUpdate", "partition": "50%", "maxUnavailable": "20%"})
        );
        assert_eq!(s["spec"]["revisionHistoryLimit"], 0, "a pointer field set to 0 is not defaulted");
        assert_eq!(s["spec"]["containers"][0]["imagePullPolicy"], "Never");
        assert_eq!(s["spec"]["containers"][0]["upgradeStrategy"]["upgradeType"], "HotUpgrade");
        assert_eq!(s["spec"]["containers"][0]["shareVolumePolicy"]["type"], "enabled");
    }
}
