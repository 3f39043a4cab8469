//! The SidecarSet hash (docs/sidecarset.md#8-the-sidecarset-hash), byte-compatible with Kruise
//! (openkruise/kruise `pkg/control/sidecarcontrol/hash.go`).
//!
//! Kruise hashes `json.Marshal` of its Go `SidecarContainer` structs, so the bytes depend on Go's
//! rules, not on the JSON the user wrote: fields in struct declaration order (`k8s.io/api` v0.32,
//! the version Kruise pins), `omitempty` fields dropped when zero, non-pointer structs always
//! present (`"resources":{}`), fields Go does not know dropped, map keys sorted, quantities in
//! their Go spelling, and `<`, `>`, `&`, U+2028, U+2029 escaped. This module describes those Go
//! types as tables and encodes a `serde_json::Value` through them.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::{go_json, quantity};

/// How Go encodes one field's type.
#[derive(Clone, Copy)]
enum Ty {
    /// `string` and string aliases.
    Str,
    Bool,
    /// `int32`/`int64`.
    Int,
    /// A pointer to a scalar (`*bool`, `*int64`, `*string`): present whenever set, even when zero.
    PtrScalar,
    /// A non-pointer struct: always encoded, `omitempty` has no effect on it.
    Struct(&'static [F]),
    /// A pointer to a struct.
    PtrStruct(&'static [F]),
    StrSlice,
    Slice(&'static [F]),
    /// `ResourceList`: `map[ResourceName]Quantity`, keys sorted.
    ResourceList,
    /// `intstr.IntOrString` (a struct, so never omitted; zero is `0`).
    IntOrString,
    /// `resource.Quantity` (a struct; zero is `"0"`).
    Quantity,
}

/// One struct field. `inline` is an embedded struct whose fields are flattened into the parent.
#[derive(Clone, Copy)]
struct F {
    name: &'static str,
    ty: Ty,
    omit: bool,
    inline: bool,
}

const fn f(name: &'static str, ty: Ty) -> F {
    F { name, ty, omit: true, inline: false }
}

/// A field without `omitempty`.
const fn req(name: &'static str, ty: Ty) -> F {
    F { name, ty, omit: false, inline: false }
}

const fn inline(fields: &'static [F]) -> F {
    F { name: "", ty: Ty::Struct(fields), omit: false, inline: true }
}

use Ty::*;

const LOCAL_OBJECT_REFERENCE: &[F] = &[f("name", Str)];
const CONTAINER_PORT: &[F] =
    &[f("name", Str), f("hostPort", Int), req("containerPort", Int), f("protocol", Str), f("hostIP", Str)];
const ENV_SOURCE_REF: &[F] = &[inline(LOCAL_OBJECT_REFERENCE), f("optional", PtrScalar)];
const ENV_FROM_SOURCE: &[F] = &[
    f("prefix", Str),
    f("configMapRef", PtrStruct(ENV_SOURCE_REF)),
    f("secretRef", PtrStruct(ENV_SOURCE_REF)),
];
const OBJECT_FIELD_SELECTOR: &[F] = &[f("apiVersion", Str), req("fieldPath", Str)];
const RESOURCE_FIELD_SELECTOR: &[F] =
    &[f("containerName", Str), req("resource", Str), f("divisor", Quantity)];
const KEY_SELECTOR: &[F] = &[inline(LOCAL_OBJECT_REFERENCE), req("key", Str), f("optional", PtrScalar)];
const ENV_VAR_SOURCE: &[F] = &[
    f("fieldRef", PtrStruct(OBJECT_FIELD_SELECTOR)),
    f("resourceFieldRef", PtrStruct(RESOURCE_FIELD_SELECTOR)),
    f("configMapKeyRef", PtrStruct(KEY_SELECTOR)),
    f("secretKeyRef", PtrStruct(KEY_SELECTOR)),
];
const ENV_VAR: &[F] = &[req("name", Str), f("value", Str), f("valueFrom", PtrStruct(ENV_VAR_SOURCE))];
const RESOURCE_CLAIM: &[F] = &[req("name", Str), f("request", Str)];
const RESOURCE_REQUIREMENTS: &[F] =
    &[f("limits", ResourceList), f("requests", ResourceList), f("claims", Slice(RESOURCE_CLAIM))];
const RESIZE_POLICY: &[F] = &[req("resourceName", Str), req("restartPolicy", Str)];
const VOLUME_MOUNT: &[F] = &[
    req("name", Str),
    f("readOnly", Bool),
    f("recursiveReadOnly", PtrScalar),
    req("mountPath", Str),
    f("subPath", Str),
    f("mountPropagation", PtrScalar),
    f("subPathExpr", Str),
];
const VOLUME_DEVICE: &[F] = &[req("name", Str), req("devicePath", Str)];
const EXEC_ACTION: &[F] = &[f("command", StrSlice)];
const HTTP_HEADER: &[F] = &[req("name", Str), req("value", Str)];
const HTTP_GET_ACTION: &[F] = &[
    f("path", Str),
    req("port", IntOrString),
    f("host", Str),
    f("scheme", Str),
    f("httpHeaders", Slice(HTTP_HEADER)),
];
const TCP_SOCKET_ACTION: &[F] = &[req("port", IntOrString), f("host", Str)];
const GRPC_ACTION: &[F] = &[req("port", Int), req("service", PtrScalar)];
const PROBE_HANDLER: &[F] = &[
    f("exec", PtrStruct(EXEC_ACTION)),
    f("httpGet", PtrStruct(HTTP_GET_ACTION)),
    f("tcpSocket", PtrStruct(TCP_SOCKET_ACTION)),
    f("grpc", PtrStruct(GRPC_ACTION)),
];
const PROBE: &[F] = &[
    inline(PROBE_HANDLER),
    f("initialDelaySeconds", Int),
    f("timeoutSeconds", Int),
    f("periodSeconds", Int),
    f("successThreshold", Int),
    f("failureThreshold", Int),
    f("terminationGracePeriodSeconds", PtrScalar),
];
const SLEEP_ACTION: &[F] = &[req("seconds", Int)];
const LIFECYCLE_HANDLER: &[F] = &[
    f("exec", PtrStruct(EXEC_ACTION)),
    f("httpGet", PtrStruct(HTTP_GET_ACTION)),
    f("tcpSocket", PtrStruct(TCP_SOCKET_ACTION)),
    f("sleep", PtrStruct(SLEEP_ACTION)),
];
const LIFECYCLE: &[F] =
    &[f("postStart", PtrStruct(LIFECYCLE_HANDLER)), f("preStop", PtrStruct(LIFECYCLE_HANDLER))];
const CAPABILITIES: &[F] = &[f("add", StrSlice), f("drop", StrSlice)];
const SE_LINUX_OPTIONS: &[F] = &[f("user", Str), f("role", Str), f("type", Str), f("level", Str)];
const WINDOWS_OPTIONS: &[F] = &[
    f("gmsaCredentialSpecName", PtrScalar),
    f("gmsaCredentialSpec", PtrScalar),
    f("runAsUserName", PtrScalar),
    f("hostProcess", PtrScalar),
];
const PROFILE: &[F] = &[req("type", Str), f("localhostProfile", PtrScalar)];
const SECURITY_CONTEXT: &[F] = &[
    f("capabilities", PtrStruct(CAPABILITIES)),
    f("privileged", PtrScalar),
    f("seLinuxOptions", PtrStruct(SE_LINUX_OPTIONS)),
    f("windowsOptions", PtrStruct(WINDOWS_OPTIONS)),
    f("runAsUser", PtrScalar),
    f("runAsGroup", PtrScalar),
    f("runAsNonRoot", PtrScalar),
    f("readOnlyRootFilesystem", PtrScalar),
    f("allowPrivilegeEscalation", PtrScalar),
    f("procMount", PtrScalar),
    f("seccompProfile", PtrStruct(PROFILE)),
    f("appArmorProfile", PtrStruct(PROFILE)),
];

/// `k8s.io/api/core/v1.Container` at v0.32, in declaration order.
const CONTAINER: &[F] = &[
    req("name", Str),
    f("image", Str),
    f("command", StrSlice),
    f("args", StrSlice),
    f("workingDir", Str),
    f("ports", Slice(CONTAINER_PORT)),
    f("envFrom", Slice(ENV_FROM_SOURCE)),
    f("env", Slice(ENV_VAR)),
    f("resources", Struct(RESOURCE_REQUIREMENTS)),
    f("resizePolicy", Slice(RESIZE_POLICY)),
    f("restartPolicy", PtrScalar),
    f("volumeMounts", Slice(VOLUME_MOUNT)),
    f("volumeDevices", Slice(VOLUME_DEVICE)),
    f("livenessProbe", PtrStruct(PROBE)),
    f("readinessProbe", PtrStruct(PROBE)),
    f("startupProbe", PtrStruct(PROBE)),
    f("lifecycle", PtrStruct(LIFECYCLE)),
    f("terminationMessagePath", Str),
    f("terminationMessagePolicy", Str),
    f("imagePullPolicy", Str),
    f("securityContext", PtrStruct(SECURITY_CONTEXT)),
    f("stdin", Bool),
    f("stdinOnce", Bool),
    f("tty", Bool),
];

const UPGRADE_STRATEGY: &[F] = &[f("upgradeType", Str), f("hotUpgradeEmptyImage", Str)];
const SHARE_VOLUME_POLICY: &[F] = &[f("type", Str)];
const SOURCE_CONTAINER_NAME_SOURCE: &[F] = &[f("fieldRef", PtrStruct(OBJECT_FIELD_SELECTOR))];
const TRANSFER_ENV_VAR: &[F] = &[
    f("sourceContainerName", Str),
    f("sourceContainerNameFrom", PtrStruct(SOURCE_CONTAINER_NAME_SOURCE)),
    f("envName", Str),
    f("envNames", StrSlice),
];
const RESOURCE_EXPR_VALUES: &[F] = &[f("cpu", Str), f("memory", Str)];
const RESOURCES_EXPR: &[F] =
    &[f("limits", PtrStruct(RESOURCE_EXPR_VALUES)), f("requests", PtrStruct(RESOURCE_EXPR_VALUES))];
const RESOURCES_POLICY: &[F] = &[
    req("targetContainersMode", Str),
    f("targetContainersNameRegex", Str),
    req("resourcesExpr", Struct(RESOURCES_EXPR)),
];

/// Kruise's `SidecarContainer` (v1alpha1 and v1beta1 encode alike).
const SIDECAR_CONTAINER: &[F] = &[
    inline(CONTAINER),
    f("podInjectPolicy", Str),
    f("upgradeStrategy", Struct(UPGRADE_STRATEGY)),
    f("shareVolumePolicy", Struct(SHARE_VOLUME_POLICY)),
    f("shareVolumeDevicePolicy", PtrStruct(SHARE_VOLUME_POLICY)),
    f("transferEnv", Slice(TRANSFER_ENV_VAR)),
    f("resourcesPolicy", PtrStruct(RESOURCES_POLICY)),
];

/// Why a value cannot be encoded: the place and what Go's decoder would have expected there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: expected {expected}")]
pub struct EncodeError {
    pub path: String,
    pub expected: &'static str,
}

struct Encoder {
    out: String,
    path: Vec<String>,
}

impl Encoder {
    fn fail(&self, expected: &'static str) -> EncodeError {
        EncodeError { path: self.path.join(""), expected }
    }

    fn is_empty(v: Option<&Value>, ty: Ty) -> bool {
        let Some(v) = v else { return true };
        match (ty, v) {
            (_, Value::Null) => true,
            (Str, Value::String(s)) => s.is_empty(),
            (Bool, Value::Bool(b)) => !b,
            (Int, Value::Number(n)) => n.as_i64() == Some(0),
            (StrSlice | Slice(_), Value::Array(a)) => a.is_empty(),
            (ResourceList, Value::Object(m)) => m.is_empty(),
            _ => false,
        }
    }

    fn fields(
        &mut self,
        obj: Option<&serde_json::Map<String, Value>>,
        fields: &[F],
        first: &mut bool,
    ) -> Result<(), EncodeError> {
        for field in fields {
            if field.inline {
                if let Struct(inner) = field.ty {
                    self.fields(obj, inner, first)?;
                }
                continue;
            }
            let v = obj.and_then(|o| o.get(field.name));
            let omittable = field.omit && !matches!(field.ty, Struct(_) | IntOrString | Quantity);
            if omittable && Self::is_empty(v, field.ty) {
                continue;
            }
            if !*first {
                self.out.push(',');
            }
            *first = false;
            go_json::write_string(&mut self.out, field.name);
            self.out.push(':');
            self.path.push(format!(".{}", field.name));
            self.value(v.filter(|v| !v.is_null()), field.ty)?;
            self.path.pop();
        }
        Ok(())
    }

    fn object(&mut self, v: Option<&Value>, fields: &[F]) -> Result<(), EncodeError> {
        let obj = match v {
            None => None,
            Some(Value::Object(o)) => Some(o),
            Some(_) => return Err(self.fail("an object")),
        };
        self.out.push('{');
        self.fields(obj, fields, &mut true)?;
        self.out.push('}');
        Ok(())
    }

    fn value(&mut self, v: Option<&Value>, ty: Ty) -> Result<(), EncodeError> {
        match ty {
            Str => match v {
                None => self.out.push_str("\"\""),
                Some(Value::String(s)) => go_json::write_string(&mut self.out, s),
                Some(_) => return Err(self.fail("a string")),
            },
            Bool => match v {
                None => self.out.push_str("false"),
                Some(Value::Bool(b)) => self.out.push_str(if *b { "true" } else { "false" }),
                Some(_) => return Err(self.fail("a boolean")),
            },
            Int => match v {
                None => self.out.push('0'),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => self.out.push_str(&n.to_string()),
                Some(_) => return Err(self.fail("an integer")),
            },
            PtrScalar => match v {
                None => self.out.push_str("null"),
                Some(Value::String(s)) => go_json::write_string(&mut self.out, s),
                Some(Value::Bool(b)) => self.out.push_str(if *b { "true" } else { "false" }),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => self.out.push_str(&n.to_string()),
                Some(_) => return Err(self.fail("a string, boolean or integer")),
            },
            Struct(fields) => self.object(v, fields)?,
            PtrStruct(fields) => match v {
                None => self.out.push_str("null"),
                Some(_) => self.object(v, fields)?,
            },
            StrSlice | Slice(_) => match v {
                None => self.out.push_str("null"),
                Some(Value::Array(items)) => self.array(items, ty)?,
                Some(_) => return Err(self.fail("an array")),
            },
            ResourceList => match v {
                None => self.out.push_str("null"),
                Some(Value::Object(map)) => self.resource_list(map)?,
                Some(_) => return Err(self.fail("an object of quantities")),
            },
            IntOrString => match v {
                None => self.out.push('0'),
                Some(Value::String(s)) => go_json::write_string(&mut self.out, s),
                Some(Value::Number(n)) if n.is_i64() => self.out.push_str(&n.to_string()),
                Some(_) => return Err(self.fail("an integer or a string")),
            },
            Quantity => match v {
                None => self.out.push_str("\"0\""),
                Some(q) => {
                    let text = quantity::go_text(q, false).ok_or_else(|| self.fail("a quantity"))?;
                    go_json::write_string(&mut self.out, &text);
                }
            },
        }
        Ok(())
    }

    /// A Go slice: of strings (`StrSlice`) or of structs (`Slice`).
    fn array(&mut self, items: &[Value], ty: Ty) -> Result<(), EncodeError> {
        self.out.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            self.path.push(format!("[{i}]"));
            match ty {
                Slice(fields) => self.object(Some(item).filter(|v| !v.is_null()), fields)?,
                _ => self.value(Some(item).filter(|v| !v.is_null()), Str)?,
            }
            self.path.pop();
        }
        self.out.push(']');
        Ok(())
    }

    /// A `ResourceList`: a Go map, so its keys in sorted order, each a quantity.
    fn resource_list(&mut self, map: &serde_json::Map<String, Value>) -> Result<(), EncodeError> {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        self.out.push('{');
        for (i, k) in keys.into_iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            go_json::write_string(&mut self.out, k);
            self.out.push(':');
            self.path.push(format!("[{k}]"));
            self.value(map.get(k).filter(|v| !v.is_null()), Quantity)?;
            self.path.pop();
        }
        self.out.push('}');
        Ok(())
    }
}

/// Does this container have `restartPolicy: Always` (a native sidecar)?
pub fn is_native_sidecar(container: &Value) -> bool {
    container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
}

/// The JSON Kruise hashes for a SidecarSet `spec` (docs/sidecarset.md#8-the-sidecarset-hash, steps 1–2). With
/// `without_image`, every container's and init container's image is blanked first.
pub fn canonical_json(spec: &Value, without_image: bool) -> Result<String, EncodeError> {
    let mut enc = Encoder { out: String::with_capacity(512), path: vec!["spec".into()] };
    let blank = |list: Option<&Value>| -> Option<Value> {
        let mut list = list.filter(|v| !v.is_null())?.clone();
        if without_image && let Value::Array(items) = &mut list {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                item.remove("image");
            }
        }
        Some(list)
    };
    let containers = blank(spec.get("containers"));
    let init = blank(spec.get("initContainers"));
    enc.out.push_str("{\"containers\":");
    enc.path.push(".containers".into());
    enc.value(containers.as_ref(), Slice(SIDECAR_CONTAINER))?;
    enc.path.pop();
    let any_native = init.as_ref().and_then(Value::as_array).is_some_and(|a| a.iter().any(is_native_sidecar));
    if any_native {
        enc.out.push_str(",\"initContainers\":");
        enc.path.push(".initContainers".into());
        enc.value(init.as_ref(), Slice(SIDECAR_CONTAINER))?;
        enc.path.pop();
    }
    enc.out.push('}');
    Ok(enc.out)
}

/// Kruise's `rand.SafeEncodeString`: each character c of the hex digest becomes
/// `ALPHANUMS[c mod 27]`.
fn safe_encode(hex: &str) -> String {
    const ALPHANUMS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
    hex.bytes().map(|b| ALPHANUMS[(b % 27) as usize] as char).collect()
}

/// SHA-256 of `data`, hex, then safe-encoded.
pub fn hash_of(data: &str) -> String {
    let digest = Sha256::digest(data.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    safe_encode(&hex)
}

/// The two annotation values: (`kruise.io/sidecarset-hash`, `kruise.io/sidecarset-hash-without-image`).
pub fn sidecarset_hashes(spec: &Value) -> Result<(String, String), EncodeError> {
    Ok((hash_of(&canonical_json(spec, false)?), hash_of(&canonical_json(spec, true)?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The six vectors of Kruise's own hash tests (`pkg/control/sidecarcontrol/hash_test.go`).
    const PLAIN: &str = "w26c4x8fz245642fdv499b464248f974xddx4x55z5dw55bc6x66464fxz77dc78";
    const NATIVE: &str = "4xwx4d4844vd4v9x79wb4xbxf4xb29475cc4446v8cz2c2f2f5c5bw448vd42z8w";
    const PLAIN_NO_IMAGE: &str = "8wzddb4dvv9c6x8zdc77z4z75987424f457dfv6724ddw6zbdx467wz5x24fc759";
    const NATIVE_NO_IMAGE: &str = "5725fw8bwbx249bw57v5892c847dzf48bww9zb7c86xb95264fdz26654847b2c8";

    #[test]
    fn undefaulted_container_vectors() {
        let spec = json!({"containers": [{"name": "container1", "image": "test-image"}]});
        let (h, _) = sidecarset_hashes(&spec).unwrap();
        assert_eq!(h, PLAIN);
    }

    #[test]
    fn ordinary_init_containers_do_not_count() {
        let spec = json!({
            "containers": [{"name": "container1", "image": "test-image"}],
            "initContainers": [{"name": "container1", "image": "test-image"}],
        });
        let (h, without) = sidecarset_hashes(&spec).unwrap();
        assert_eq!(h, PLAIN);
        assert_eq!(without, PLAIN_NO_IMAGE);
    }

    #[test]
    fn native_sidecar_init_containers_count() {
        let spec = json!({
            "containers": [{"name": "container1", "image": "test-image"}],
            "initContainers": [{"name": "container1", "image": "test-image", "restartPolicy": "Always"}],
        });
        let (h, without) = sidecarset_hashes(&spec).unwrap();
        assert_eq!(h, NATIVE);
        assert_eq!(without, NATIVE_NO_IMAGE);
    }

    #[test]
    fn defaulted_vector_and_its_canonical_json() {
        // The stored (defaulted) form of `containers: [{name: dns-f, image: dns:1.0}]`, written in
        // an order Go would not use, with a field Go does not know: neither may change the bytes.
        let spec = json!({"containers": [{
            "shareVolumePolicy": {"type": "disabled"},
            "upgradeStrategy": {"upgradeType": "ColdUpgrade"},
            "podInjectPolicy": "BeforeAppContainer",
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePolicy": "File",
            "terminationMessagePath": "/dev/termination-log",
            "image": "dns:1.0",
            "name": "dns-f",
            "someFutureField": true,
        }]});
        assert_eq!(
            canonical_json(&spec, false).unwrap(),
            r#"{"containers":[{"name":"dns-f","image":"dns:1.0","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","podInjectPolicy":"BeforeAppContainer","upgradeStrategy":{"upgradeType":"ColdUpgrade"},"shareVolumePolicy":{"type":"disabled"}}]}"#
        );
        let (h, without) = sidecarset_hashes(&spec).unwrap();
        assert_eq!(h, "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684");
        assert_eq!(without, "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94");
    }

    #[test]
    fn go_field_rules_for_nested_types() {
        let spec = json!({"containers": [{
            "name": "c",
            "resources": {"requests": {"memory": "128Mi", "cpu": "0.5"}},
            "ports": [{"containerPort": 80}],
            "env": [{"name": "A", "value": ""}, {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}],
            "livenessProbe": {"httpGet": {"path": "/"}, "periodSeconds": 0},
            "readinessProbe": {"grpc": {"port": 9}},
            "securityContext": {"privileged": false},
            "volumeMounts": [{"name": "v", "mountPath": "/a<b>&c", "readOnly": false}],
            "stdin": false,
        }]});
        let json = canonical_json(&spec, false).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"containers":[{"name":"c","ports":[{"containerPort":80}],"env":[{"name":"A"},"#,
                r#"{"name":"B","valueFrom":{"resourceFieldRef":{"resource":"limits.cpu","divisor":"0"}}}],"#,
                r#""resources":{"requests":{"cpu":"500m","memory":"128Mi"}},"#,
                r#""volumeMounts":[{"name":"v","mountPath":"/a\u003cb\u003e\u0026c"}],"#,
                r#""livenessProbe":{"httpGet":{"path":"/","port":0}},"readinessProbe":{"grpc":{"port":9,"service":null}},"#,
                r#""securityContext":{"privileged":false},"upgradeStrategy":{},"shareVolumePolicy":{}}]}"#
            )
        );
    }

    #[test]
    fn no_containers_encodes_null_like_a_nil_go_slice() {
        let spec = json!({"initContainers": [{"name": "i", "restartPolicy": "Always"}]});
        assert_eq!(
            canonical_json(&spec, false).unwrap(),
            r#"{"containers":null,"initContainers":[{"name":"i","resources":{},"restartPolicy":"Always","upgradeStrategy":{},"shareVolumePolicy":{}}]}"#
        );
    }

    #[test]
    fn wrong_types_are_reported_with_their_path() {
        let spec = json!({"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]});
        let err = canonical_json(&spec, false).unwrap_err();
        assert_eq!(err.to_string(), "spec.containers[0].ports[0].containerPort: expected an integer");
    }
}
