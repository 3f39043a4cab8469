//! What one SidecarSet contributes to a pod (§5): its init containers and containers composed with
//! shared mounts, transferred env and `IS_INJECTED`, the volumes they reference, its pull secrets.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::hotupgrade;
use super::index::SidecarSetIndex;
use super::merge::Injected;
use super::resources;
use crate::api::sidecarset::{IS_INJECTED_ENV, SidecarContainer, SidecarSet, TransferEnvVar};

/// What the pod offers to every SidecarSet built for it, computed once per pod.
pub struct PodContext<'a> {
    pub pod: &'a Value,
    /// Mounts of the app containers (not earlier sidecars), container then mount order.
    shared_mounts: Vec<Value>,
    /// Env vars the shared mounts' `subPathExpr` refer to, from the same app container.
    subpath_env: Vec<Value>,
    shared_devices: Vec<Value>,
    /// Every container and init container name of every injected SidecarSet, and the `-1`/`-2`
    /// pair names of its hot-upgrade ones (resourcesPolicy: none of them is a target, so a
    /// re-invocation that finds the pair in the pod computes the same resources).
    sidecar_names: HashSet<String>,
    pod_volumes: HashSet<&'a str>,
    index: &'a SidecarSetIndex,
}

/// The `$(NAME)` references of a `subPathExpr` (Kruise's `\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`).
fn subpath_vars(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        rest = &rest[start + 2..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))).unwrap_or(rest.len());
        let name = &rest[..end];
        if rest[end..].starts_with(')') && name.chars().next().is_some_and(|c| !c.is_ascii_digit()) {
            out.push(name);
        }
    }
    out
}

fn name_of(v: &Value) -> Option<&str> {
    v.get("name")?.as_str()
}

fn list<'v>(v: &'v Value, key: &str) -> &'v [Value] {
    v.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn is_earlier_sidecar(container: &Value) -> bool {
    list(container, "env").iter().any(|e| name_of(e) == Some(IS_INJECTED_ENV) && e.get("value").and_then(Value::as_str) == Some("true"))
}

impl<'a> PodContext<'a> {
    pub fn new(pod: &'a Value, sets: &'a [Arc<SidecarSet>], index: &'a SidecarSetIndex) -> Self {
        let spec = pod.get("spec").unwrap_or(&Value::Null);
        // A container this injection replaces in place is not an app container either (Kruise
        // would share its mounts once, then skip it as IS_INJECTED on a re-invocation; skipping it
        // from the start keeps the webhook idempotent).
        let sidecars = || sets.iter().flat_map(|s| s.spec.init_containers.iter().chain(&s.spec.containers));
        let hot_pairs = sidecars().filter(|c| c.is_hot_upgrade()).flat_map(|c| [format!("{}-1", c.name), format!("{}-2", c.name)]);
        let sidecar_names: HashSet<String> = sidecars().map(|c| c.name.clone()).chain(hot_pairs).collect();
        let replaced = |c: &Value| name_of(c).is_some_and(|n| sidecar_names.contains(n));
        let apps: Vec<&Value> = list(spec, "containers").iter().filter(|c| !is_earlier_sidecar(c) && !replaced(c)).collect();
        let mut shared_mounts = Vec::new();
        let mut subpath_env = Vec::new();
        for app in &apps {
            for mount in list(app, "volumeMounts") {
                shared_mounts.push(mount.clone());
                let Some(expr) = mount.get("subPathExpr").and_then(Value::as_str) else { continue };
                for var_name in subpath_vars(expr) {
                    if let Some(var) = list(app, "env").iter().find(|e| name_of(e) == Some(var_name)) {
                        subpath_env.push(var.clone());
                    }
                }
            }
        }
        let shared_devices = apps.iter().flat_map(|a| list(a, "volumeDevices")).cloned().collect();
        let pod_volumes = list(spec, "volumes").iter().filter_map(name_of).collect();
        PodContext { pod, shared_mounts, subpath_env, shared_devices, sidecar_names, pod_volumes, index }
    }
}

/// One SidecarSet's contribution.
#[derive(Debug, Default)]
pub struct Built {
    pub init_containers: Vec<Injected>,
    pub containers: Vec<Injected>,
    pub volumes: Vec<Value>,
    /// Container names plus native-sidecar init container names, sorted.
    pub sidecar_list: Vec<String>,
    /// Sidecar names emitted as hot-upgrade pairs.
    pub hot_upgraded: Vec<String>,
}

impl Built {
    /// Any container or init container: the SidecarSet gets hash entries.
    pub fn injects(&self) -> bool {
        !self.init_containers.is_empty() || !self.containers.is_empty()
    }
}

pub fn build(set: &SidecarSet, ctx: &PodContext, warnings: &mut Vec<String>) -> Result<Built, String> {
    let mut built = Built::default();
    for sidecar in &set.spec.init_containers {
        let native = sidecar.is_native_sidecar();
        if native {
            built.sidecar_list.push(sidecar.name.clone());
        }
        let composed = compose(set, sidecar, ctx, &mut built.volumes, warnings)?;
        let before = sidecar.pod_inject_policy == SidecarContainer::BEFORE_APP_CONTAINER;
        emit(set, sidecar, composed, native && sidecar.is_hot_upgrade(), before, &mut built.init_containers, &mut built.hot_upgraded);
    }
    for sidecar in &set.spec.containers {
        built.sidecar_list.push(sidecar.name.clone());
        let composed = compose(set, sidecar, ctx, &mut built.volumes, warnings)?;
        let before = sidecar.pod_inject_policy == SidecarContainer::BEFORE_APP_CONTAINER;
        emit(set, sidecar, composed, sidecar.is_hot_upgrade(), before, &mut built.containers, &mut built.hot_upgraded);
    }
    built.sidecar_list.sort();
    Ok(built)
}

fn emit(
    set: &SidecarSet,
    sidecar: &SidecarContainer,
    composed: Map<String, Value>,
    hot: bool,
    before: bool,
    out: &mut Vec<Injected>,
    hot_names: &mut Vec<String>,
) {
    let sidecarset = set.name().to_owned();
    if hot {
        let empty_image = sidecar.upgrade_strategy.as_ref().map_or("", |u| u.hot_upgrade_empty_image.as_str());
        for c in hotupgrade::pair(&composed, &sidecar.name, empty_image) {
            out.push(Injected { container: Value::Object(c), before, sidecarset: sidecarset.clone() });
        }
        hot_names.push(sidecar.name.clone());
    } else {
        out.push(Injected { container: Value::Object(composed), before, sidecarset });
    }
}

/// §5.1 steps 2–5 for one sidecar.
fn compose(
    set: &SidecarSet,
    sidecar: &SidecarContainer,
    ctx: &PodContext,
    volumes: &mut Vec<Value>,
    warnings: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut c = sidecar.core_container();
    if let Some(policy) = &sidecar.resources_policy {
        let compiled = ctx.index.name_regex(&policy.target_containers_name_regex);
        let computed = resources::compute(set, &sidecar.name, policy, compiled, ctx.pod, &ctx.sidecar_names)?;
        c.insert("resources".into(), computed);
    }

    // Volumes the sidecar's own mounts and devices reference, from the SidecarSet's declarations.
    let own_mounts: Vec<Value> = c.get("volumeMounts").and_then(Value::as_array).cloned().unwrap_or_default();
    let own_devices: Vec<Value> = c.get("volumeDevices").and_then(Value::as_array).cloned().unwrap_or_default();
    for reference in own_mounts.iter().chain(&own_devices).filter_map(name_of) {
        match set.spec.volumes.iter().find(|v| name_of(v) == Some(reference)) {
            Some(volume) => volumes.push(volume.clone()),
            None if ctx.pod_volumes.contains(reference) => {}
            None => warnings.push(format!(
                "SidecarSet {}: container {} mounts volume {reference:?}, which neither the SidecarSet nor the pod declares",
                set.name(),
                sidecar.name
            )),
        }
    }

    // Mounts: own, then shared ones whose mountPath is free (earlier shared entries win).
    let (mut mounts, mut devices) = (own_mounts, own_devices);
    let path = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let mut used: HashSet<String> =
        mounts.iter().filter_map(|m| path(m, "mountPath")).chain(devices.iter().filter_map(|d| path(d, "devicePath"))).collect();
    if sidecar.shares_volumes() {
        for m in &ctx.shared_mounts {
            if let Some(p) = path(m, "mountPath")
                && used.insert(p)
            {
                mounts.push(m.clone());
            }
        }
    }
    if sidecar.shares_volume_devices() {
        for d in &ctx.shared_devices {
            if let Some(p) = path(d, "devicePath")
                && used.insert(p)
            {
                devices.push(d.clone());
            }
        }
    }

    // Env: own, IS_INJECTED, then transferred and subPathExpr env where the name is free.
    let mut env: Vec<Value> = c.get("env").and_then(Value::as_array).cloned().unwrap_or_default();
    env.push(json!({"name": IS_INJECTED_ENV, "value": "true"}));
    let mut extra = transferred_env(set, sidecar, ctx, warnings);
    if sidecar.shares_volumes() {
        extra.extend(ctx.subpath_env.iter().cloned());
    }
    let mut names: HashSet<String> = env.iter().filter_map(name_of).map(str::to_owned).collect();
    for var in extra {
        if let Some(n) = name_of(&var)
            && names.insert(n.to_owned())
        {
            env.push(var);
        }
    }

    c.insert("env".into(), Value::Array(env));
    set_list(&mut c, "volumeMounts", mounts);
    set_list(&mut c, "volumeDevices", devices);
    Ok(c)
}

fn set_list(c: &mut Map<String, Value>, key: &str, items: Vec<Value>) {
    if items.is_empty() {
        c.remove(key);
    } else {
        c.insert(key.into(), Value::Array(items));
    }
}

/// §5.5: env vars copied from a pod container named directly or through a label/annotation.
fn transferred_env(set: &SidecarSet, sidecar: &SidecarContainer, ctx: &PodContext, warnings: &mut Vec<String>) -> Vec<Value> {
    let containers = ctx.pod.pointer("/spec/containers").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let mut out = Vec::new();
    for entry in &sidecar.transfer_env {
        let Some(source) = source_name(entry, ctx.pod) else {
            warnings.push(format!(
                "SidecarSet {}: container {} transferEnv sourceContainerNameFrom.fieldRef must be metadata.labels['<key>'] or \
                 metadata.annotations['<key>']; the entry is skipped",
                set.name(),
                sidecar.name
            ));
            continue;
        };
        let Some(container) = containers.iter().find(|c| name_of(c) == Some(source.as_str())) else {
            warnings.push(format!(
                "SidecarSet {}: container {} transferEnv source container {source:?} is not in the pod; its env is not transferred",
                set.name(),
                sidecar.name
            ));
            continue;
        };
        let mut env_names: Vec<&str> = entry.env_names.iter().map(String::as_str).collect();
        if !entry.env_name.is_empty() {
            env_names.push(&entry.env_name);
        }
        env_names.sort_unstable();
        env_names.dedup();
        for name in env_names {
            match list(container, "env").iter().find(|e| name_of(e) == Some(name)) {
                Some(var) => out.push(var.clone()),
                None => warnings.push(format!(
                    "SidecarSet {}: container {} transferEnv: container {source:?} has no env var {name:?}",
                    set.name(),
                    sidecar.name
                )),
            }
        }
    }
    out
}

/// The source container's name, or `None` for an unsupported fieldPath.
fn source_name(entry: &TransferEnvVar, pod: &Value) -> Option<String> {
    let Some(field_ref) = entry.source_container_name_from.as_ref().and_then(|f| f.field_ref.as_ref()) else {
        return Some(entry.source_container_name.clone());
    };
    let path = field_ref.field_path.as_str();
    let (map, rest) = if let Some(rest) = path.strip_prefix("metadata.labels") {
        ("labels", rest)
    } else {
        ("annotations", path.strip_prefix("metadata.annotations")?)
    };
    let key = rest.strip_prefix("['")?.strip_suffix("']")?;
    Some(pod.pointer(&format!("/metadata/{map}")).and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subpath_references() {
        assert_eq!(subpath_vars("logs/$(POD_NAME)/$(a.b-c)"), ["POD_NAME", "a.b-c"]);
        assert_eq!(subpath_vars("$(1x) $(ok"), Vec::<&str>::new());
        assert!(subpath_vars("plain").is_empty());
    }
}
