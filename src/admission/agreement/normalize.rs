//! What the API server does to a Pod after the mutating webhooks, applied to both sides before they
//! are compared (docs/sidecarset.md#13-2-api-server-defaults): the ServiceAccount plugin's token
//! mount, `SetDefaults_Pod` for containers and volumes, and what storage cannot keep.

use serde_json::{Map, Value, json};

use super::{list, name_of, spec_list};
use crate::admission::pod::launch_priority::BARRIER_ENV;
use crate::admission::sidecarset_rules::defaults::{self, Probes};
use crate::api::json::{at, field, object_entry};
use crate::api::quantity;

/// Where the ServiceAccount admission plugin mounts the API token, and the prefix of the volume it
/// adds (`kube-api-access-<random>`).
pub(super) const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// A container as the API server stores it: the `token` volume mounted, `SetDefaults_Pod`, then
/// [`tidy`].
pub(super) fn normalized_container(container: &Value, pod: &Value, token: Option<&str>) -> Value {
    let mut c = container.clone();
    if let Value::Object(m) = &mut c {
        if let Some(token) = token {
            mount_token(m, token);
        }
        defaults::core_container(m, Probes::All);
        requests_from_limits(m);
        unnamed_launch_barrier(m);
        if at(pod, &["spec", "hostNetwork"]).and_then(Value::as_bool) == Some(true) {
            host_network_ports(m);
        }
    }
    tidy(&mut c, false);
    c
}

/// Launch priority's barrier env names the pod's ConfigMap after the pod; a pod created with only
/// `generateName` is named by each side with a random suffix of its own, so the name is not
/// compared (the priority, its key, is).
fn unnamed_launch_barrier(c: &mut Map<String, Value>) {
    let Some(Value::Array(env)) = c.get_mut("env") else { return };
    for var in env.iter_mut().filter(|v| field(v, "name").and_then(Value::as_str) == Some(BARRIER_ENV)) {
        if let Some(Value::Object(reference)) = var.pointer_mut("/valueFrom/configMapKeyRef") {
            reference.remove("name");
        }
    }
}

pub(super) fn normalized_volume(volume: &Value) -> Value {
    let mut v = volume.clone();
    if let Value::Object(m) = &mut v {
        defaults::volume(m);
    }
    tidy(&mut v, false);
    v
}

/// The ServiceAccount admission plugin, re-run by the API server after a webhook changed the Pod:
/// when the Pod has the token volume, every container without a mount at the token path gets one.
/// The mount at the token path is put last on both sides: where it lands depends on when the plugin
/// ran (a sidecar sharing the app's mounts got it among them, or it was appended on re-run), not on
/// injection.
fn mount_token(c: &mut Map<String, Value>, volume: &str) {
    let mounts = c.entry("volumeMounts").or_insert_with(|| Value::Array(Vec::new()));
    if mounts.is_null() {
        *mounts = Value::Array(Vec::new());
    }
    let Value::Array(mounts) = mounts else { return };
    let at_token_path = |m: &Value| field(m, "mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH);
    let token = match mounts.iter().position(at_token_path) {
        Some(i) => mounts.remove(i),
        None => json!({"name": volume, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}),
    };
    mounts.push(token);
}

/// The volume the ServiceAccount plugin mounts: `kube-api-access-<random>` (a projected token,
/// Kubernetes 1.22 and later), or before that a secret volume `<account>-token-<random>` that the
/// Pod's containers mount at the token path.
pub(super) fn token_volume(pod: &Value) -> Option<&str> {
    let volumes = spec_list(pod, "volumes");
    if let Some(projected) = volumes.iter().filter_map(name_of).find(|n| n.starts_with(TOKEN_VOLUME_PREFIX)) {
        return Some(projected);
    }
    let secret =
        |name: &str| volumes.iter().any(|v| name_of(v) == Some(name) && field(v, "secret").is_some());
    ["initContainers", "containers"]
        .into_iter()
        .flat_map(|key| spec_list(pod, key))
        .flat_map(|c| list(c, "volumeMounts"))
        .filter(|m| field(m, "mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
        .filter_map(name_of)
        .find(|n| n.contains("-token-") && secret(n))
}

/// `SetDefaults_Pod`: a resource with a limit and no request gets the limit as its request.
fn requests_from_limits(c: &mut Map<String, Value>) {
    let Some(Value::Object(resources)) = c.get_mut("resources") else { return };
    let Some(Value::Object(limits)) = resources.get("limits").cloned() else { return };
    if let Some(requests) = object_entry(resources, "requests") {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// `SetDefaults_PodSpec` with `hostNetwork: true`: a port without a hostPort gets its containerPort.
fn host_network_ports(c: &mut Map<String, Value>) {
    for port in c
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if port.get("hostPort").is_none_or(|h| h.is_null() || h.as_i64() == Some(0))
            && let Some(container_port) = port.get("containerPort").cloned()
        {
            port.insert("hostPort".into(), container_port);
        }
    }
}

/// Pointer fields whose zero value means something and is stored as written (a file mode of 0, no
/// storage class); every field under `securityContext` is a pointer too (`runAsUser: 0` is root).
const POINTER_ZEROES: &[&str] = &["defaultMode", "mode", "storageClassName"];

/// Drop what cannot tell two stored Pods apart: `null`, empty lists, an empty `resources` or
/// resource list, the Go zero value (`""`, `false`, `0`) of a non-pointer field, a zero `divisor`
/// (Go writes an unset one as `"0"`), and `resizePolicy` entries that say `NotRequired` (what an
/// absent entry means).
pub(super) fn tidy(value: &mut Value, in_pointer_struct: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                tidy(child, in_pointer_struct || key == "securityContext");
            }
            map.retain(|key, child| {
                let zero_scalar = matches!(child, Value::String(s) if s.is_empty())
                    || *child == Value::Bool(false)
                    || child.as_f64() == Some(0.0);
                let empty = match child {
                    Value::Null => true,
                    Value::Array(items) => items.is_empty(),
                    Value::Object(m) => {
                        m.is_empty() && matches!(key.as_str(), "resources" | "limits" | "requests")
                    }
                    _ => false,
                };
                let keeps_zero = in_pointer_struct || POINTER_ZEROES.contains(&key.as_str());
                let zero_divisor =
                    key == "divisor" && quantity::from_value(child).and_then(|q| q.nanos()) == Some(0);
                !(empty || (zero_scalar && !keeps_zero) || zero_divisor)
            });
            if let Some(Value::Array(policies)) = map.get_mut("resizePolicy") {
                policies.retain(|p| field(p, "restartPolicy").and_then(Value::as_str) != Some("NotRequired"));
                if policies.is_empty() {
                    map.remove("resizePolicy");
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| tidy(v, in_pointer_struct)),
        _ => {}
    }
}
