//! What one SidecarSet contributes to a pod (docs/sidecarset.md#5-what-each-sidecarset-contributes): its init
//! containers and containers composed with shared mounts, transferred env and `IS_INJECTED`, the volumes they
//! reference, its pull secrets.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::hotupgrade;
use super::merge::Injected;
use super::resources;
use crate::api::sidecarset::{IS_INJECTED_ENV, SidecarContainer, SidecarSet, TransferEnvVar};
use crate::api::tree::{Json, Object};
use crate::cluster::sidecarset_index::SidecarSetIndex;

/// A SidecarSet to inject: the snapshot's, borrowed for as long as the decision (the patch then
/// borrows its prepared containers and volumes instead of copying their strings), or a revision
/// restored for this pod (`revision::select`), whose trees are copied.
pub type Chosen<'a> = Cow<'a, Arc<SidecarSet>>;

/// Where a sidecar is declared in its SidecarSet.
#[derive(Clone, Copy)]
enum Slot {
    Init(usize),
    Container(usize),
}

impl Slot {
    fn of(self, set: &SidecarSet) -> &SidecarContainer {
        match self {
            Slot::Init(i) => &set.spec.init_containers[i],
            Slot::Container(i) => &set.spec.containers[i],
        }
    }
}

/// The prepared core of the sidecar at `slot` for one pod: borrowed when the snapshot holds the
/// set, else copied.
fn core<'a>(set: &Chosen<'a>, slot: Slot) -> Object<'a> {
    match set {
        Cow::Borrowed(shared) => {
            let shared: &'a SidecarSet = shared;
            slot.of(shared).core_object().borrowed()
        }
        Cow::Owned(restored) => slot.of(restored).core_object().clone(),
    }
}

/// The SidecarSet's volume named `name`, prepared like [`core`].
fn volume<'a>(set: &Chosen<'a>, name: &str) -> Option<Json<'a>> {
    let find = |s: &SidecarSet| s.spec.volume_trees().iter().position(|v| name_of(v) == Some(name));
    match set {
        Cow::Borrowed(shared) => {
            let shared: &'a SidecarSet = shared;
            find(shared).map(|i| shared.spec.volume_trees()[i].borrowed())
        }
        Cow::Owned(restored) => find(restored).map(|i| restored.spec.volume_trees()[i].clone()),
    }
}

/// What the pod offers to every SidecarSet built for it, computed once per pod.
/// `'a` is the request's pod, which what is built may borrow from; `'p` the rest (the draft's
/// annotations, the SidecarSets), read while building.
pub struct PodContext<'p, 'a> {
    /// The pod as the request has it (injection has changed nothing but annotations yet).
    pub pod: &'a Json<'a>,
    /// The pod's `metadata.annotations` now, after `patchPodMetadata`.
    annotations: Option<&'p Json<'a>>,
    /// Mounts of the app containers (not earlier sidecars), container then mount order, the first
    /// of each `mountPath` (later ones with the same path are never shared).
    shared_mounts: Vec<&'a Json<'a>>,
    /// Env vars the shared mounts' `subPathExpr` refer to, from the same app container.
    subpath_env: Vec<&'a Json<'a>>,
    /// Likewise for `volumeDevices`, the first of each `devicePath`.
    shared_devices: Vec<&'a Json<'a>>,
    /// Every container and init container name of every injected SidecarSet, and the `-1`/`-2`
    /// pair names of its hot-upgrade ones (resourcesPolicy: none of them is a target, so a
    /// re-invocation that finds the pair in the pod computes the same resources). A list: as many
    /// as the matching SidecarSets declare (not the request), searched by scanning.
    sidecar_names: Vec<String>,
    pod_volumes: &'a [Json<'a>],
    index: &'p SidecarSetIndex,
}

/// The `$(NAME)` references of a `subPathExpr` (Kruise's `\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`).
fn subpath_vars(expr: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(start) = rest.find("$(") {
        rest = &rest[start + 2..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        if rest[end..].starts_with(')') && name.chars().next().is_some_and(|c| !c.is_ascii_digit()) {
            out.push(name);
        }
    }
    out
}

pub(super) fn name_of<'v>(v: &'v Json<'_>) -> Option<&'v str> {
    str_field(v, "name")
}

fn list<'v, 'a>(v: &'v Json<'a>, key: &str) -> &'v [Json<'a>] {
    v.get(key).and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn is_earlier_sidecar(container: &Json<'_>) -> bool {
    list(container, "env")
        .iter()
        .any(|e| name_of(e) == Some(IS_INJECTED_ENV) && e.get("value").and_then(Json::as_str) == Some("true"))
}

/// The first of `items` for each value of their string field `key`, in their order (items without
/// it are left out). The keys come from the request: they are hashed with foldhash seeded at random
/// per process (SipHash, or sorting them, cost two to five times as much for a pod's few dozen mounts).
fn first_of_each<'v, 'a>(items: impl Iterator<Item = &'v Json<'a>>, key: &str) -> Vec<&'v Json<'a>> {
    let keyed: Vec<(&str, &'v Json<'a>)> = items.filter_map(|v| Some((str_field(v, key)?, v))).collect();
    // Sized up front: growing it rehashed every key several times.
    let mut seen = HashSet::with_capacity_and_hasher(keyed.len(), foldhash::fast::RandomState::default());
    keyed.into_iter().filter_map(|(k, v)| seen.insert(k).then_some(v)).collect()
}

impl<'p, 'a> PodContext<'p, 'a> {
    pub fn new(
        pod: &'a Json<'a>,
        annotations: Option<&'p Json<'a>>,
        sets: &[Chosen<'_>],
        index: &'p SidecarSetIndex,
    ) -> Self {
        let spec = &pod["spec"];
        let sidecars = || sets.iter().flat_map(|s| s.spec.init_containers.iter().chain(&s.spec.containers));
        let hot_pairs =
            sidecars().filter(|c| c.is_hot_upgrade()).flat_map(|c| hotupgrade::pair_names(&c.name));
        let sidecar_names: Vec<String> = sidecars().map(|c| c.name.clone()).chain(hot_pairs).collect();
        // As in Kruise, only the IS_INJECTED marker makes a container a sidecar: an app container
        // named like a sidecar (which the sidecar replaces in place) still shares its mounts. A
        // re-invocation no longer sees it; `keep_earlier_injection` keeps what it gave.
        let apps: Vec<&Json<'a>> =
            list(spec, "containers").iter().filter(|c| !is_earlier_sidecar(c)).collect();
        let shared_mounts = first_of_each(apps.iter().flat_map(|a| list(a, "volumeMounts")), "mountPath");
        let mut subpath_env = Vec::new();
        for app in &apps {
            // The app's env by name (the first of each), built once if a mount needs it: a search per
            // mount would be mounts × env. Names come from the request: foldhash, seeded per process.
            let mut env: Option<HashMap<&str, &Json<'a>, foldhash::fast::RandomState>> = None;
            for mount in list(app, "volumeMounts") {
                let Some(expr) = str_field(mount, "subPathExpr") else { continue };
                let env = env.get_or_insert_with(|| {
                    let vars = list(app, "env");
                    let mut by_name = HashMap::with_capacity_and_hasher(vars.len(), Default::default());
                    for var in vars {
                        if let Some(name) = name_of(var) {
                            by_name.entry(name).or_insert(var);
                        }
                    }
                    by_name
                });
                subpath_env.extend(subpath_vars(expr).into_iter().filter_map(|name| env.get(name).copied()));
            }
        }
        let shared_devices = first_of_each(apps.iter().flat_map(|a| list(a, "volumeDevices")), "devicePath");
        let pod_volumes = list(spec, "volumes");
        PodContext {
            pod,
            annotations,
            shared_mounts,
            subpath_env,
            shared_devices,
            sidecar_names,
            pod_volumes,
            index,
        }
    }
}

/// A re-invocation rebuilds every sidecar from the pod as it is now, where an app container a sidecar
/// replaced in place is gone (the sidecar took its place and carries IS_INJECTED), so the mounts,
/// devices and env it shared would be dropped. When the pod already holds this container from an
/// earlier injection and every mount, device and env var rebuilt now is already in it (by mount or
/// device path, by env name), the earlier lists are kept as they are: a re-invocation then changes
/// nothing.
fn keep_earlier_injection<'a>(injected: &mut Injected<'a>, pod: &'a Json<'a>) {
    let spec = &pod["spec"];
    let name = injected.name();
    let earlier = list(spec, "containers")
        .iter()
        .chain(list(spec, "initContainers"))
        .find(|c| name_of(c) == Some(name) && is_earlier_sidecar(c));
    let (Some(earlier), Json::Object(container)) = (earlier, &mut injected.container) else { return };
    for (key, id) in [("volumeMounts", "mountPath"), ("volumeDevices", "devicePath"), ("env", "name")] {
        let before = list(earlier, key);
        let ids: HashSet<&str> = before.iter().filter_map(|item| str_field(item, id)).collect();
        let now = container.get(key).and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
        // By key only: with the replaced container gone, another app container may now be the first
        // with a mount path, so the rebuilt entry can differ in value from the one shared before.
        let contained = now.iter().all(|item| str_field(item, id).is_some_and(|k| ids.contains(k)));
        if contained && !before.is_empty() {
            container.insert(key, Json::Array(before.iter().map(Json::borrowed).collect()));
        }
    }
}

/// One SidecarSet's contribution.
#[derive(Debug, Default)]
pub struct Built<'a> {
    pub init_containers: Vec<Injected<'a>>,
    pub containers: Vec<Injected<'a>>,
    pub volumes: Vec<Json<'a>>,
    /// Container names plus native-sidecar init container names, sorted.
    pub sidecar_list: Vec<String>,
    /// Sidecar names emitted as hot-upgrade pairs.
    pub hot_upgraded: Vec<String>,
}

impl Built<'_> {
    /// Any container or init container: the SidecarSet gets hash entries.
    pub fn injects(&self) -> bool {
        !self.init_containers.is_empty() || !self.containers.is_empty()
    }
}

pub fn build<'a>(
    chosen: &Chosen<'a>,
    ctx: &PodContext<'_, 'a>,
    warnings: &mut Vec<String>,
) -> Result<Built<'a>, String> {
    let set: &SidecarSet = chosen;
    let mut built = Built::default();
    for (i, sidecar) in set.spec.init_containers.iter().enumerate() {
        let native = sidecar.is_native_sidecar();
        if native {
            built.sidecar_list.push(sidecar.name.clone());
        }
        let composed = compose(chosen, Slot::Init(i), ctx, &mut built.volumes, warnings)?;
        let before = sidecar.pod_inject_policy == SidecarContainer::BEFORE_APP_CONTAINER;
        emit(
            set,
            sidecar,
            composed,
            native && sidecar.is_hot_upgrade(),
            before,
            &mut built.init_containers,
            &mut built.hot_upgraded,
        );
    }
    for (i, sidecar) in set.spec.containers.iter().enumerate() {
        built.sidecar_list.push(sidecar.name.clone());
        let composed = compose(chosen, Slot::Container(i), ctx, &mut built.volumes, warnings)?;
        let before = sidecar.pod_inject_policy == SidecarContainer::BEFORE_APP_CONTAINER;
        emit(
            set,
            sidecar,
            composed,
            sidecar.is_hot_upgrade(),
            before,
            &mut built.containers,
            &mut built.hot_upgraded,
        );
    }
    for injected in built.init_containers.iter_mut().chain(&mut built.containers) {
        keep_earlier_injection(injected, ctx.pod);
    }
    built.sidecar_list.sort();
    Ok(built)
}

fn emit<'a>(
    set: &SidecarSet,
    sidecar: &SidecarContainer,
    composed: Object<'a>,
    hot: bool,
    before: bool,
    out: &mut Vec<Injected<'a>>,
    hot_names: &mut Vec<String>,
) {
    let sidecarset = set.name().to_owned();
    if hot {
        let empty_image =
            sidecar.upgrade_strategy.as_ref().map_or("", |u| u.hot_upgrade_empty_image.as_str());
        for c in hotupgrade::pair(composed, &sidecar.name, empty_image) {
            out.push(Injected { container: Json::Object(c), before, sidecarset: sidecarset.clone() });
        }
        hot_names.push(sidecar.name.clone());
    } else {
        out.push(Injected { container: Json::Object(composed), before, sidecarset });
    }
}

/// docs/sidecarset.md#5-1-init-containers steps 2–5 for one sidecar.
fn compose<'a>(
    chosen: &Chosen<'a>,
    slot: Slot,
    ctx: &PodContext<'_, 'a>,
    volumes: &mut Vec<Json<'a>>,
    warnings: &mut Vec<String>,
) -> Result<Object<'a>, String> {
    let (set, sidecar): (&SidecarSet, _) = (chosen, slot.of(chosen));
    let mut c = core(chosen, slot);
    if let Some(policy) = &sidecar.resources_policy {
        let compiled = ctx.index.name_regex(&policy.target_containers_name_regex);
        let computed = resources::compute(set, &sidecar.name, policy, compiled, ctx.pod, &ctx.sidecar_names)?;
        c.insert("resources", computed);
    }

    // Volumes the sidecar's own mounts and devices reference, from the SidecarSet's declarations.
    let mut mounts = c.take_list("volumeMounts");
    let mut devices = c.take_list("volumeDevices");
    for reference in mounts.iter().chain(&devices).filter_map(name_of) {
        match volume(chosen, reference) {
            Some(volume) => volumes.push(volume),
            None if ctx.pod_volumes.iter().any(|v| name_of(v) == Some(reference)) => {}
            None => warnings.push(format!(
                "SidecarSet {}: container {} mounts volume {reference:?}, which neither the SidecarSet nor the pod declares",
                set.name(),
                sidecar.name
            )),
        }
    }

    // Mounts: own, then shared ones whose path is free (earlier shared entries win: the context
    // keeps the first of each path). Mount and device paths are one namespace: a shared device
    // whose path a mount uses is not shared either. The sidecar's own paths are few, so a list.
    let (shared_mounts, shared_devices): (Vec<&'a Json<'a>>, Vec<&'a Json<'a>>) = {
        let own: Vec<&str> = mounts
            .iter()
            .filter_map(|m| str_field(m, "mountPath"))
            .chain(devices.iter().filter_map(|d| str_field(d, "devicePath")))
            .collect();
        let free = |v: &Json<'_>, key: &str| str_field(v, key).is_some_and(|p| !own.contains(&p));
        let shared_mounts: Vec<&Json<'a>> = if sidecar.shares_volumes() {
            ctx.shared_mounts.iter().copied().filter(|m| free(m, "mountPath")).collect()
        } else {
            Vec::new()
        };
        let shared_devices = if sidecar.shares_volume_devices() && !ctx.shared_devices.is_empty() {
            // As many paths as the pod has mounts: sorted and searched, not scanned per device.
            let mut mount_paths: Vec<&str> =
                shared_mounts.iter().filter_map(|m| str_field(m, "mountPath")).collect();
            mount_paths.sort_unstable();
            let taken_by_mount = |d: &Json<'_>| {
                str_field(d, "devicePath").is_some_and(|p| mount_paths.binary_search(&p).is_ok())
            };
            ctx.shared_devices
                .iter()
                .copied()
                .filter(|d| free(d, "devicePath") && !taken_by_mount(d))
                .collect()
        } else {
            Vec::new()
        };
        (shared_mounts, shared_devices)
    };
    mounts.extend(shared_mounts.into_iter().map(Json::borrowed));
    devices.extend(shared_devices.into_iter().map(Json::borrowed));

    // Env: own, IS_INJECTED, then transferred and subPathExpr env where the name is free.
    let mut env = c.take_list("env");
    env.push(is_injected_env());
    let mut extra = transferred_env(set, sidecar, ctx, warnings);
    if sidecar.shares_volumes() {
        extra.extend(ctx.subpath_env.iter().copied());
    }
    if !extra.is_empty() {
        let mut names: HashSet<&str> = env.iter().filter_map(name_of).collect();
        let extra: Vec<Json<'a>> = extra
            .into_iter()
            .filter(|var| name_of(var).is_some_and(|n| names.insert(n)))
            .map(Json::borrowed)
            .collect();
        env.extend(extra);
    }

    c.insert("env", Json::Array(env));
    set_list(&mut c, "volumeMounts", mounts);
    set_list(&mut c, "volumeDevices", devices);
    Ok(c)
}

/// `{"name": "IS_INJECTED", "value": "true"}`, built as a tree: the same for every sidecar.
fn is_injected_env() -> Json<'static> {
    Json::Object(Object::from_iter([("name", Json::from(IS_INJECTED_ENV)), ("value", Json::from("true"))]))
}

fn str_field<'v>(v: &'v Json<'_>, key: &str) -> Option<&'v str> {
    v.get(key)?.as_str()
}

fn set_list<'a>(c: &mut Object<'a>, key: &str, items: Vec<Json<'a>>) {
    if items.is_empty() {
        c.remove(key);
    } else {
        c.insert(key.to_owned(), Json::Array(items));
    }
}

/// docs/sidecarset.md#5-5-transferenv: env vars copied from a pod container named directly or through a
/// label/annotation.
fn transferred_env<'a>(
    set: &SidecarSet,
    sidecar: &SidecarContainer,
    ctx: &PodContext<'_, 'a>,
    warnings: &mut Vec<String>,
) -> Vec<&'a Json<'a>> {
    let containers = list(&ctx.pod["spec"], "containers");
    let mut out = Vec::new();
    for entry in &sidecar.transfer_env {
        let Some(source) = source_name(entry, ctx) else {
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
                Some(var) => out.push(var),
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
fn source_name(entry: &TransferEnvVar, ctx: &PodContext<'_, '_>) -> Option<String> {
    let Some(field_ref) = entry.source_container_name_from.as_ref().and_then(|f| f.field_ref.as_ref()) else {
        return Some(entry.source_container_name.clone());
    };
    let path = field_ref.field_path.as_str();
    let (map, rest) = if let Some(rest) = path.strip_prefix("metadata.labels") {
        (ctx.pod.at(&["metadata", "labels"]), rest)
    } else {
        (ctx.annotations, path.strip_prefix("metadata.annotations")?)
    };
    let key = rest.strip_prefix("['")?.strip_suffix("']")?;
    Some(map.and_then(|m| m.get(key)).and_then(Json::as_str).unwrap_or_default().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/sidecarset.md#5-3-composition: own mounts, then each shared mount whose mountPath is used by no
    /// mount or device of the sidecar, earlier shared entries winning; devices likewise against devices and
    /// mounts.
    #[test]
    fn shared_mounts_and_devices_are_compared_by_path() {
        let pod = serde_json::json!({"spec": {"containers": [
            {"name": "a", "volumeMounts": [{"name": "v1", "mountPath": "/data"}, {"name": "v2", "mountPath": "/own"}],
             "volumeDevices": [{"name": "d1", "devicePath": "/dev/x"}]},
            {"name": "b", "volumeMounts": [{"name": "v3", "mountPath": "/data"}, {"name": "v4", "mountPath": "/dev/y"}],
             "volumeDevices": [{"name": "d2", "devicePath": "/dev/x"}, {"name": "d3", "devicePath": "/dev/y"}, {"name": "d4", "devicePath": "/dev/z"}]}
        ], "volumes": [{"name": "v1"}, {"name": "v2"}, {"name": "v3"}, {"name": "v4"}, {"name": "own"}]}});
        let pod = Json::from(pod);
        let set =
            SidecarSet::from_value(&serde_json::json!({"metadata": {"name": "s"}, "spec": {"containers": [{
            "name": "side", "image": "i", "volumeMounts": [{"name": "own", "mountPath": "/own"}],
            "volumeDevices": [{"name": "own", "devicePath": "/dev/z"}],
            "shareVolumePolicy": {"type": "enabled"}, "shareVolumeDevicePolicy": {"type": "enabled"}}]}}))
            .unwrap();
        let set = Arc::new(set);
        let sets = [Cow::Borrowed(&set)];
        let index = SidecarSetIndex::build(&crate::cluster::Snapshot::default());
        let ctx = PodContext::new(&pod, None, &sets, &index);
        let built = build(&sets[0], &ctx, &mut Vec::new()).unwrap();
        let c = &built.containers[0].container;
        let names = |key: &str| {
            c[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        // /data from a (not b's v3), /own is the sidecar's, /dev/y from b's mount.
        assert_eq!(names("volumeMounts"), ["own", "v1", "v4"]);
        // /dev/x from a (not b's d2); /dev/y is a mount now; /dev/z is the sidecar's.
        assert_eq!(names("volumeDevices"), ["own", "d1"]);
    }

    /// Issue 16.4: only IS_INJECTED marks a sidecar. An app container named like a sidecar shares
    /// its mounts (deduplicated by path) and the subPathExpr env they use, and a re-invocation on the
    /// injected pod, where that container is gone, rebuilds the same sidecars.
    #[test]
    fn an_app_container_named_like_a_sidecar_still_shares_its_mounts() {
        let pod = serde_json::json!({"spec": {"containers": [
            {"name": "app", "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            {"name": "proxy", "env": [{"name": "POD", "value": "p"}],
             "volumeMounts": [{"name": "logs", "mountPath": "/logs", "subPathExpr": "$(POD)"}, {"name": "data2", "mountPath": "/data"}]}
        ]}});
        let pod = Json::from(pod);
        let set =
            SidecarSet::from_value(&serde_json::json!({"metadata": {"name": "s"}, "spec": {"containers": [
            {"name": "proxy", "image": "proxy:2", "shareVolumePolicy": {"type": "enabled"}},
            {"name": "agent", "image": "agent:1", "shareVolumePolicy": {"type": "enabled"}}]}}))
            .unwrap();
        let set = Arc::new(set);
        let sets = [Cow::Borrowed(&set)];
        let index = SidecarSetIndex::build(&crate::cluster::Snapshot::default());
        let built = build(&sets[0], &PodContext::new(&pod, None, &sets, &index), &mut Vec::new()).unwrap();
        let mounts = |c: &Json| {
            c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        let env = |c: &Json| {
            c["env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        for injected in &built.containers {
            // /data from app (first of its path), /logs from the replaced proxy, with the POD env its subPathExpr reads.
            assert_eq!(mounts(&injected.container), ["data", "logs"], "{}", injected.name());
            assert_eq!(env(&injected.container), ["IS_INJECTED", "POD"], "{}", injected.name());
        }
        // Re-invocation: the pod as the first injection left it.
        let containers = super::super::merge::merge(
            pod["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(crate::admission::draft::Draft::Same)
                .collect(),
            built.containers.clone(),
        );
        let containers: Vec<Json> =
            containers.into_iter().map(crate::admission::draft::Draft::into_json).collect();
        let injected_pod =
            Json::from(serde_json::json!({"spec": {"containers": Json::Array(containers).into_value()}}));
        let again =
            build(&sets[0], &PodContext::new(&injected_pod, None, &sets, &index), &mut Vec::new()).unwrap();
        for (first, second) in built.containers.iter().zip(&again.containers) {
            assert_eq!(first.container, second.container, "{} changed on re-invocation", first.name());
        }
    }

    #[test]
    fn subpath_references() {
        assert_eq!(subpath_vars("logs/$(POD_NAME)/$(a.b-c)"), ["POD_NAME", "a.b-c"]);
        assert_eq!(subpath_vars("$(1x) $(ok"), Vec::<&str>::new());
        assert!(subpath_vars("plain").is_empty());
    }
}
