//! The SidecarSet hash (§8), needed here only to restore a ControllerRevision that carries no hash
//! annotations (§3). The recipe needs Go's encoding of the SidecarContainer: struct fields in
//! declaration order, map keys sorted, empty optional fields omitted.
//!
//! The field orders below cover the core Container fields and the nested structs SidecarSets use
//! in practice; an unknown nested field is kept and placed after the known ones in key order.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::api::sidecarset::SidecarSetSpec;

/// Go field order of each struct, with the type of each field's value (`""`: leave as is, `"map"`:
/// sort keys). Arrays take the element type.
const TYPES: &[(&str, &[(&str, &str)])] = &[
    (
        "SidecarContainer",
        &[
            ("name", ""),
            ("image", ""),
            ("command", ""),
            ("args", ""),
            ("workingDir", ""),
            ("ports", "ContainerPort"),
            ("envFrom", "EnvFromSource"),
            ("env", "EnvVar"),
            ("resources", "ResourceRequirements"),
            ("resizePolicy", "ResizePolicy"),
            ("restartPolicy", ""),
            ("volumeMounts", "VolumeMount"),
            ("volumeDevices", "VolumeDevice"),
            ("livenessProbe", "Probe"),
            ("readinessProbe", "Probe"),
            ("startupProbe", "Probe"),
            ("lifecycle", "Lifecycle"),
            ("terminationMessagePath", ""),
            ("terminationMessagePolicy", ""),
            ("imagePullPolicy", ""),
            ("securityContext", "SecurityContext"),
            ("stdin", ""),
            ("stdinOnce", ""),
            ("tty", ""),
            ("podInjectPolicy", ""),
            ("upgradeStrategy", "UpgradeStrategy"),
            ("shareVolumePolicy", "ShareVolumePolicy"),
            ("shareVolumeDevicePolicy", "ShareVolumePolicy"),
            ("transferEnv", "TransferEnvVar"),
            ("resourcesPolicy", "ResourcesPolicy"),
        ],
    ),
    ("ContainerPort", &[("name", ""), ("hostPort", ""), ("containerPort", ""), ("protocol", ""), ("hostIP", "")]),
    ("EnvFromSource", &[("prefix", ""), ("configMapRef", "Ref"), ("secretRef", "Ref")]),
    ("Ref", &[("name", ""), ("optional", "")]),
    ("EnvVar", &[("name", ""), ("value", ""), ("valueFrom", "EnvVarSource")]),
    (
        "EnvVarSource",
        &[("fieldRef", "FieldRef"), ("resourceFieldRef", "ResourceFieldRef"), ("configMapKeyRef", "KeyRef"), ("secretKeyRef", "KeyRef")],
    ),
    ("FieldRef", &[("apiVersion", ""), ("fieldPath", "")]),
    ("ResourceFieldRef", &[("containerName", ""), ("resource", ""), ("divisor", "")]),
    ("KeyRef", &[("name", ""), ("key", ""), ("optional", "")]),
    ("ResourceRequirements", &[("limits", "map"), ("requests", "map"), ("claims", "")]),
    ("ResizePolicy", &[("resourceName", ""), ("restartPolicy", "")]),
    (
        "VolumeMount",
        &[
            ("name", ""),
            ("readOnly", ""),
            ("recursiveReadOnly", ""),
            ("mountPath", ""),
            ("subPath", ""),
            ("mountPropagation", ""),
            ("subPathExpr", ""),
        ],
    ),
    ("VolumeDevice", &[("name", ""), ("devicePath", "")]),
    (
        "Probe",
        &[
            ("exec", ""),
            ("httpGet", "HTTPGet"),
            ("tcpSocket", ""),
            ("grpc", ""),
            ("initialDelaySeconds", ""),
            ("timeoutSeconds", ""),
            ("periodSeconds", ""),
            ("successThreshold", ""),
            ("failureThreshold", ""),
            ("terminationGracePeriodSeconds", ""),
        ],
    ),
    ("HTTPGet", &[("path", ""), ("port", ""), ("host", ""), ("scheme", ""), ("httpHeaders", "")]),
    ("Lifecycle", &[("postStart", "Handler"), ("preStop", "Handler"), ("stopSignal", "")]),
    ("Handler", &[("exec", ""), ("httpGet", "HTTPGet"), ("tcpSocket", ""), ("sleep", "")]),
    (
        "SecurityContext",
        &[
            ("capabilities", "Capabilities"),
            ("privileged", ""),
            ("seLinuxOptions", ""),
            ("windowsOptions", ""),
            ("runAsUser", ""),
            ("runAsGroup", ""),
            ("runAsNonRoot", ""),
            ("readOnlyRootFilesystem", ""),
            ("allowPrivilegeEscalation", ""),
            ("procMount", ""),
            ("seccompProfile", ""),
            ("appArmorProfile", ""),
        ],
    ),
    ("Capabilities", &[("add", ""), ("drop", "")]),
    ("UpgradeStrategy", &[("upgradeType", ""), ("hotUpgradeEmptyImage", "")]),
    ("ShareVolumePolicy", &[("type", "")]),
    ("TransferEnvVar", &[("sourceContainerName", ""), ("sourceContainerNameFrom", "NameFrom"), ("envName", ""), ("envNames", "")]),
    ("NameFrom", &[("fieldRef", "FieldRef")]),
    ("ResourcesPolicy", &[("targetContainersMode", ""), ("targetContainersNameRegex", ""), ("resourcesExpr", "ResourcesExpr")]),
    ("ResourcesExpr", &[("limits", "CpuMemory"), ("requests", "CpuMemory")]),
    ("CpuMemory", &[("cpu", ""), ("memory", "")]),
];

/// Fields Go always writes (non-pointer structs without omitempty), `{}` when empty.
const ALWAYS: &[&str] = &["resources", "upgradeStrategy", "shareVolumePolicy"];

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn go_order(value: &Value, type_name: &str) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(|i| go_order(i, type_name)).collect()),
        Value::Object(map) => {
            let fields = TYPES.iter().find(|(t, _)| *t == type_name).map_or(&[][..], |(_, f)| *f);
            let mut out = Map::new();
            for (field, child) in fields {
                match map.get(*field) {
                    Some(v) if !is_empty(v) => {
                        out.insert((*field).into(), go_order(v, child));
                    }
                    _ if type_name == "SidecarContainer" && ALWAYS.contains(field) => {
                        out.insert((*field).into(), Value::Object(Map::new()));
                    }
                    _ => {}
                }
            }
            let mut rest: Vec<(&String, &Value)> =
                map.iter().filter(|(k, v)| !fields.iter().any(|(f, _)| f == k) && !is_empty(v)).collect();
            rest.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in rest {
                out.insert(k.clone(), go_order(v, "map"));
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `(hash, hash-without-image)` of a SidecarSet spec.
pub fn sidecarset_hashes(spec: &SidecarSetSpec) -> Result<(String, String), String> {
    let encode = |without_image: bool| -> Result<String, String> {
        let to_values = |list: &[crate::api::sidecarset::SidecarContainer]| -> Result<Vec<Value>, String> {
            list.iter()
                .map(|c| {
                    let mut v = serde_json::to_value(c).map_err(|e| e.to_string())?;
                    if without_image && let Some(m) = v.as_object_mut() {
                        m.remove("image");
                    }
                    Ok(go_order(&v, "SidecarContainer"))
                })
                .collect()
        };
        let mut doc = Map::new();
        doc.insert("containers".into(), Value::Array(to_values(&spec.containers)?));
        if spec.init_containers.iter().any(|c| c.is_native_sidecar()) {
            doc.insert("initContainers".into(), Value::Array(to_values(&spec.init_containers)?));
        }
        let digest = Sha256::digest(Value::Object(doc).to_string().as_bytes());
        Ok(digest
            .iter()
            .flat_map(|b| [b >> 4, b & 0xf])
            .map(|nibble| {
                let hex = b"0123456789abcdef"[nibble as usize];
                ALPHABET[hex as usize % ALPHABET.len()] as char
            })
            .collect())
    };
    Ok((encode(false)?, encode(true)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> SidecarSetSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn kruise_test_vectors() {
        let plain = spec(json!({"containers": [{"name": "container1", "image": "test-image"}]}));
        let (h, w) = sidecarset_hashes(&plain).unwrap();
        assert_eq!(h, "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78");
        assert_eq!(w, "8wzddb4dvv9c6x8zdc77z4z75987424f457dfv6724ddw6zbdx467wz5x24fc759");

        let with_init = spec(json!({"containers": [{"name": "container1", "image": "test-image"}],
            "initContainers": [{"name": "container1", "image": "test-image"}]}));
        assert_eq!(sidecarset_hashes(&with_init).unwrap().0, h);

        let native = spec(json!({"containers": [{"name": "container1", "image": "test-image"}],
            "initContainers": [{"name": "container1", "image": "test-image", "restartPolicy": "Always"}]}));
        let (h, w) = sidecarset_hashes(&native).unwrap();
        assert_eq!(h, "4xwx4d4844vd4v9x79wb4xbxf4xb29475cc4446v8cz2c2f2f5c5bw448vd42z8w");
        assert_eq!(w, "5725fw8bwbx249bw57v5892c847dzf48bww9zb7c86xb95264fdz26654847b2c8");

        // Field order of the input does not matter: Go's declaration order is used.
        let defaulted =
            spec(json!({"containers": [{"shareVolumePolicy": {"type": "disabled"}, "upgradeStrategy": {"upgradeType": "ColdUpgrade"},
            "podInjectPolicy": "BeforeAppContainer", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File",
            "terminationMessagePath": "/dev/termination-log", "image": "dns:1.0", "name": "dns-f"}]}));
        let (h, w) = sidecarset_hashes(&defaulted).unwrap();
        assert_eq!(h, "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684");
        assert_eq!(w, "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94");
    }
}
