//! Agreement between our decision on a Pod CREATE and the Pod actually stored
//! (docs/sidecarset.md#13-agreement-with-stored-pods): for each SidecarSet that either side injected,
//! `agree` or `disagree` with a field-level diff.
//!
//! "Ours" is the Pod of the review with our patch applied; "stored" is the Pod as the API server
//! persisted it after kruise-manager's injection. Only what injection owns is compared, attributed to
//! SidecarSets the way injection writes it (docs/sidecarset.md#5-what-each-sidecarset-contributes,
//! docs/sidecarset.md#7-pod-annotations); everything else of the stored Pod (uid, name, status,
//! managedFields, nodeName, other webhooks' work) is not looked at.
//!
//! Both sides first go through what the API server does to a Pod after the mutating webhooks, so
//! that a default it adds is not a disagreement: the ServiceAccount admission plugin, re-run because
//! a webhook changed the Pod, mounts the token into the new containers; `SetDefaults_Pod` fills in
//! container and volume defaults; values that cannot survive storage (Go zero values of non-pointer
//! fields, empty lists and maps, `null`) are dropped; quantities compare by value.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::sidecarset::annotations::{HashEntries, parse_hash_map};
use super::sidecarset_admission::defaults::{self, Probes};
use crate::api::quantity;
use crate::api::sidecarset::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, INJECTED_LIST_ANNOTATION, SidecarSet, VERSION_ALT_ANNOTATION_PREFIX,
    VERSION_ANNOTATION_PREFIX, WORKING_HOTUPGRADE_CONTAINER_ANNOTATION,
};
use crate::api::{at, field};

/// One field where the two Pods differ. `ours` or `stored` is `null` when the field is absent on
/// that side (after normalisation, so a `null` in a Pod never shows up here as a value).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldDiff {
    pub path: String,
    pub ours: Value,
    pub stored: Value,
}

/// The verdict for one SidecarSet on one Pod: it agrees when there is no diff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SidecarSetAgreement {
    pub name: String,
    pub diffs: Vec<FieldDiff>,
}

impl SidecarSetAgreement {
    pub fn agrees(&self) -> bool {
        self.diffs.is_empty()
    }
}

/// Where the ServiceAccount admission plugin mounts the API token, and the prefix of the volume it
/// adds (`kube-api-access-<random>`).
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// Compare `ours` (the review's Pod, `original`, with our patch applied) with `stored`, for every
/// SidecarSet either side records as injected, in name order. `lookup` finds a SidecarSet by name
/// (from the cluster the decision read); for one it does not find, attribution relies on the Pods'
/// annotations alone, which do not name ordinary init containers, pull secrets or patchPodMetadata
/// keys.
pub fn compare(
    original: &Value,
    ours: &Value,
    stored: &Value,
    lookup: &dyn Fn(&str) -> Option<Arc<SidecarSet>>,
) -> Vec<SidecarSetAgreement> {
    let ours = Side::new(ours);
    let stored = Side::new(stored);
    let involved: BTreeSet<&str> = ours.injected().chain(stored.injected()).collect();
    involved
        .into_iter()
        .map(|name| {
            let set = lookup(name);
            let mut diffs = Vec::new();
            compare_set(name, set.as_deref(), original, &ours, &stored, &mut diffs);
            SidecarSetAgreement { name: name.to_owned(), diffs }
        })
        .collect()
}

/// One Pod with its Kruise annotations parsed once.
struct Side<'a> {
    pod: &'a Value,
    hash: HashEntries,
    hash_without_image: HashEntries,
    injected_list: BTreeSet<String>,
    working_hot: BTreeMap<String, String>,
}

impl<'a> Side<'a> {
    fn new(pod: &'a Value) -> Self {
        let annotation = |key: &str| annotations(pod).get(key).and_then(Value::as_str);
        // An annotation that does not parse records nothing: the other side's entries then show up
        // as missing here, which is the disagreement to report.
        let hash_map = |key: &str| parse_hash_map(key, annotation(key)).unwrap_or_default();
        Side {
            pod,
            hash: hash_map(HASH_ANNOTATION),
            hash_without_image: hash_map(HASH_WITHOUT_IMAGE_ANNOTATION),
            injected_list: annotation(INJECTED_LIST_ANNOTATION)
                .map(|l| l.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
            working_hot: annotation(WORKING_HOTUPGRADE_CONTAINER_ANNOTATION).and_then(|w| serde_json::from_str(w).ok()).unwrap_or_default(),
        }
    }

    /// Every SidecarSet this Pod records: the injected list and the hash map.
    fn injected(&self) -> impl Iterator<Item = &str> {
        self.injected_list.iter().chain(self.hash.keys()).map(String::as_str)
    }

    /// The sidecars `set` injected into this Pod by its own record (the hash entry's sidecar list),
    /// and the container names they became: the name itself, plus the hot-upgrade pair of a sidecar
    /// the working-container annotation lists.
    fn recorded_sidecars(&self, set: &str, sidecars: &mut BTreeSet<String>, containers: &mut BTreeSet<String>) {
        for listed in self.hash.get(set).and_then(|e| e.sidecar_list.as_ref()).into_iter().flatten() {
            sidecars.insert(listed.clone());
            containers.insert(listed.clone());
            if self.working_hot.contains_key(listed) {
                containers.extend(hot_pair(listed));
            }
        }
    }
}

fn hot_pair(name: &str) -> [String; 2] {
    [format!("{name}-1"), format!("{name}-2")]
}

fn annotations(pod: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
    at(pod, &["metadata", "annotations"]).and_then(Value::as_object).unwrap_or(&EMPTY)
}

fn list<'v>(v: &'v Value, key: &str) -> &'v [Value] {
    field(v, key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn name_of(v: &Value) -> Option<&str> {
    field(v, "name").and_then(Value::as_str)
}

fn spec_list<'v>(pod: &'v Value, key: &str) -> &'v [Value] {
    pod.get("spec").map_or(&[], |spec| list(spec, key))
}

fn by_name<'v>(items: &'v [Value], name: &str) -> Option<&'v Value> {
    items.iter().find(|i| name_of(i) == Some(name))
}

/// `[key]` for a map key or a list entry's identity; keys are written as they are.
fn child(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

fn compare_set(name: &str, set: Option<&SidecarSet>, original: &Value, ours: &Side, stored: &Side, out: &mut Vec<FieldDiff>) {
    // The sidecar names (as the SidecarSet spells them) and every container name they become.
    let mut sidecars = BTreeSet::new();
    let mut containers = BTreeSet::new();
    if let Some(set) = set {
        for c in set.spec.init_containers.iter().chain(&set.spec.containers) {
            sidecars.insert(c.name.clone());
            containers.insert(c.name.clone());
            if c.is_hot_upgrade() {
                containers.extend(hot_pair(&c.name));
            }
        }
    }
    for side in [ours, stored] {
        side.recorded_sidecars(name, &mut sidecars, &mut containers);
    }

    // The ServiceAccount token volume is the Pod's, never injection's. Ours names it, or else the
    // stored Pod does: an audit log records the request before the ServiceAccount plugin ran.
    let token = token_volume(ours.pod).or_else(|| token_volume(stored.pod));
    let normalized = |c: &Value, side: &Side| normalized_container(c, side.pod, token);
    let mut referenced_volumes = BTreeSet::new();
    for key in ["initContainers", "containers"] {
        let original_list = spec_list(original, key);
        for container in &containers {
            let (a, b) = (by_name(spec_list(ours.pod, key), container), by_name(spec_list(stored.pod, key), container));
            for c in a.into_iter().chain(b) {
                for mount in list(c, "volumeMounts").iter().chain(list(c, "volumeDevices")) {
                    referenced_volumes.extend(name_of(mount).map(str::to_owned));
                }
            }
            let path = child(&format!("spec.{key}"), container);
            match (a, b) {
                (None, None) => {}
                (Some(a), Some(b)) => {
                    diff(&path, "", Some(&normalized(a, ours)), Some(&normalized(b, stored)), Ctx::default(), out);
                    let (pa, pb) = (position(ours.pod, key, container, original_list), position(stored.pod, key, container, original_list));
                    if pa != pb {
                        out.push(FieldDiff { path: format!("{path}#position"), ours: json!(pa), stored: json!(pb) });
                    }
                }
                (a, b) => out.push(FieldDiff {
                    path,
                    ours: a.map_or(Value::Null, |c| normalized(c, ours)),
                    stored: b.map_or(Value::Null, |c| normalized(c, stored)),
                }),
            }
        }
    }

    // Volumes the sidecars use that the Pod did not have before: the ones injection adds (§6.4).
    let own_volumes: HashSet<&str> = spec_list(original, "volumes").iter().filter_map(name_of).collect();
    for volume in referenced_volumes.iter().filter(|v| !own_volumes.contains(v.as_str()) && token != Some(v.as_str())) {
        let pick = |side: &Side| by_name(spec_list(side.pod, "volumes"), volume).map(normalized_volume);
        diff(&child("spec.volumes", volume), "", pick(ours).as_ref(), pick(stored).as_ref(), Ctx::default(), out);
    }

    if let Some(set) = set {
        let own: HashSet<&str> = spec_list(original, "imagePullSecrets").iter().filter_map(name_of).collect();
        for secret in set.spec.image_pull_secrets.iter().map(|s| s.name.as_str()).filter(|s| !own.contains(s)) {
            let pick = |side: &Side| by_name(spec_list(side.pod, "imagePullSecrets"), secret).cloned();
            diff(&child("spec.imagePullSecrets", secret), "", pick(ours).as_ref(), pick(stored).as_ref(), Ctx::default(), out);
        }
    }

    compare_annotations(name, set, &sidecars, &containers, ours, stored, out);
}

/// Where a sidecar sits against the Pod's own containers of that list (docs/sidecarset.md#6-2-merge-rule).
fn position(pod: &Value, key: &str, name: &str, original: &[Value]) -> &'static str {
    if by_name(original, name).is_some() {
        return "in place of the pod's container";
    }
    let items = spec_list(pod, key);
    let index = items.iter().position(|c| name_of(c) == Some(name));
    let first_own = items.iter().position(|c| name_of(c).is_some_and(|n| by_name(original, n).is_some()));
    match (index, first_own) {
        (Some(i), Some(first)) if i < first => "before the pod's containers",
        _ => "after the pod's containers",
    }
}

fn compare_annotations(
    name: &str,
    set: Option<&SidecarSet>,
    sidecars: &BTreeSet<String>,
    containers: &BTreeSet<String>,
    ours: &Side,
    stored: &Side,
    out: &mut Vec<FieldDiff>,
) {
    let base = "metadata.annotations";
    // Hash entries without `updateTimestamp`: it is the time of injection, never the same twice.
    let maps = [
        (HASH_ANNOTATION, &ours.hash, &stored.hash),
        (HASH_WITHOUT_IMAGE_ANNOTATION, &ours.hash_without_image, &stored.hash_without_image),
    ];
    for (key, in_ours, in_stored) in maps {
        let entry = |map: &HashEntries| {
            map.get(name).map(|e| {
                let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                if let Value::Object(m) = &mut v {
                    m.shift_remove("updateTimestamp");
                }
                v
            })
        };
        diff(&child(&child(base, key), name), "", entry(in_ours).as_ref(), entry(in_stored).as_ref(), Ctx::default(), out);
    }
    let (a, b) = (ours.injected_list.contains(name), stored.injected_list.contains(name));
    if a != b {
        out.push(FieldDiff { path: child(&child(base, INJECTED_LIST_ANNOTATION), name), ours: json!(a), stored: json!(b) });
    }
    for sidecar in sidecars {
        let (a, b) = (ours.working_hot.get(sidecar), stored.working_hot.get(sidecar));
        if a != b {
            out.push(FieldDiff {
                path: child(&child(base, WORKING_HOTUPGRADE_CONTAINER_ANNOTATION), sidecar),
                ours: json!(a),
                stored: json!(b),
            });
        }
    }
    let mut keys: BTreeSet<String> = containers
        .iter()
        .flat_map(|c| [format!("{VERSION_ANNOTATION_PREFIX}{c}"), format!("{VERSION_ALT_ANNOTATION_PREFIX}{c}")])
        .collect();
    if let Some(set) = set {
        keys.extend(set.spec.patch_pod_metadata.iter().flat_map(|p| p.annotations.keys().cloned()));
    }
    for key in keys {
        diff(&child(base, &key), "", annotations(ours.pod).get(&key), annotations(stored.pod).get(&key), Ctx::default(), out);
    }
}

/// A container as the API server stores it: the `token` volume mounted, `SetDefaults_Pod`, then
/// [`tidy`].
fn normalized_container(container: &Value, pod: &Value, token: Option<&str>) -> Value {
    let mut c = container.clone();
    if let Value::Object(m) = &mut c {
        if let Some(token) = token {
            mount_token(m, token);
        }
        defaults::core_container(m, Probes::All);
        requests_from_limits(m);
        if at(pod, &["spec", "hostNetwork"]).and_then(Value::as_bool) == Some(true) {
            host_network_ports(m);
        }
    }
    tidy(&mut c, false);
    c
}

fn normalized_volume(volume: &Value) -> Value {
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
fn token_volume(pod: &Value) -> Option<&str> {
    let volumes = spec_list(pod, "volumes");
    if let Some(projected) = volumes.iter().filter_map(name_of).find(|n| n.starts_with(TOKEN_VOLUME_PREFIX)) {
        return Some(projected);
    }
    let secret = |name: &str| volumes.iter().any(|v| name_of(v) == Some(name) && field(v, "secret").is_some());
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
    let requests = resources.entry("requests").or_insert_with(|| Value::Object(Map::new()));
    if requests.is_null() {
        *requests = Value::Object(Map::new());
    }
    if let Value::Object(requests) = requests {
        for (k, v) in limits {
            requests.entry(k).or_insert(v);
        }
    }
}

/// `SetDefaults_PodSpec` with `hostNetwork: true`: a port without a hostPort gets its containerPort.
fn host_network_ports(c: &mut Map<String, Value>) {
    for port in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut) {
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
fn tidy(value: &mut Value, in_pointer_struct: bool) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                tidy(child, in_pointer_struct || key == "securityContext");
            }
            map.retain(|key, child| {
                let zero_scalar =
                    matches!(child, Value::String(s) if s.is_empty()) || *child == Value::Bool(false) || child.as_f64() == Some(0.0);
                let empty = match child {
                    Value::Null => true,
                    Value::Array(items) => items.is_empty(),
                    Value::Object(m) => m.is_empty() && matches!(key.as_str(), "resources" | "limits" | "requests"),
                    _ => false,
                };
                let keeps_zero = in_pointer_struct || POINTER_ZEROES.contains(&key.as_str());
                let zero_divisor = key == "divisor" && quantity::from_value(child).and_then(|q| q.nanos()) == Some(0);
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

/// What the diff knows about where it is.
#[derive(Debug, Clone, Copy, Default)]
struct Ctx {
    /// Inside a resource list: values are quantities, compared by value.
    quantities: bool,
}

/// The identity of an entry of the list under `key`, for lists Kubernetes merges by a key.
fn entry_key(key: &str, entry: &Value) -> Option<String> {
    let text = |k: &str| field(entry, k).and_then(Value::as_str).map(str::to_owned);
    match key {
        "env" | "imagePullSecrets" | "containers" | "initContainers" | "volumes" => text("name"),
        "volumeMounts" => text("mountPath"),
        "volumeDevices" => text("devicePath"),
        "resizePolicy" => text("resourceName"),
        "items" => text("path"),
        "ports" => {
            let port = field(entry, "containerPort")?;
            Some(format!("{port}/{}", text("protocol").unwrap_or_else(|| "TCP".into())))
        }
        _ => None,
    }
}

/// Entries of a keyed list by key, `None` when some entry has no key or two share one (the list
/// is then compared as a whole).
fn keyed<'v>(key: &str, items: &'v [Value]) -> Option<Vec<(String, &'v Value)>> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let k = entry_key(key, item)?;
        if !seen.insert(k.clone()) {
            return None;
        }
        out.push((k, item));
    }
    Some(out)
}

fn same_scalar(a: &Value, b: &Value, ctx: Ctx) -> bool {
    if ctx.quantities
        && let (Some(x), Some(y)) = (quantity::from_value(a), quantity::from_value(b))
    {
        return x.nanos().is_some() && x.nanos() == y.nanos();
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Push a [`FieldDiff`] for every leaf where `ours` and `stored` differ; both are normalised.
/// `name` is the field the values are under (it tells a keyed list, e.g. `env` by name).
fn diff(path: &str, name: &str, ours: Option<&Value>, stored: Option<&Value>, ctx: Ctx, out: &mut Vec<FieldDiff>) {
    match (ours, stored) {
        (None, None) => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                let inner = Ctx { quantities: matches!(key.as_str(), "limits" | "requests") };
                let sub = if is_identifier(key) { format!("{path}.{key}") } else { child(path, key) };
                let ctx = if ctx.quantities || matches!(key.as_str(), "sizeLimit" | "divisor") { Ctx { quantities: true } } else { inner };
                diff(&sub, key, a.get(key), b.get(key), ctx, out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            match (keyed(name, a), keyed(name, b)) {
                (Some(ka), Some(kb)) => {
                    let index_b: HashMap<&str, &Value> = kb.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                    let index_a: HashMap<&str, &Value> = ka.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                    for (k, v) in &ka {
                        diff(&child(path, k), "", Some(v), index_b.get(k.as_str()).copied(), ctx, out);
                    }
                    for (k, v) in kb.iter().filter(|(k, _)| !index_a.contains_key(k.as_str())) {
                        diff(&child(path, k), "", None, Some(v), ctx, out);
                    }
                    // Same entries in another order (env order decides `$(VAR)` expansion).
                    fn order<'k>(of: &'k [(String, &Value)], other: &HashMap<&str, &Value>) -> Vec<&'k str> {
                        of.iter().map(|(k, _)| k.as_str()).filter(|k| other.contains_key(k)).collect()
                    }
                    let (oa, ob) = (order(&ka, &index_b), order(&kb, &index_a));
                    if oa != ob {
                        out.push(FieldDiff { path: format!("{path}#order"), ours: json!(oa), stored: json!(ob) });
                    }
                }
                _ => {
                    let same = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equivalent(x, y, ctx));
                    if !same {
                        out.push(FieldDiff { path: path.to_owned(), ours: Value::Array(a.clone()), stored: Value::Array(b.clone()) });
                    }
                }
            }
        }
        (Some(a), Some(b)) if same_scalar(a, b, ctx) => {}
        (a, b) => out.push(FieldDiff {
            path: path.to_owned(),
            ours: a.cloned().unwrap_or(Value::Null),
            stored: b.cloned().unwrap_or(Value::Null),
        }),
    }
}

fn equivalent(a: &Value, b: &Value, ctx: Ctx) -> bool {
    let mut found = Vec::new();
    diff("", "", Some(a), Some(b), ctx, &mut found);
    found.is_empty()
}

fn is_identifier(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Stored Pods waiting to be paired with the reviews of their CREATE
/// (docs/sidecarset.md#13-3-pairing-reviews-with-stored-pods), each used once. Reviews that name
/// their Pod pair by namespace and name; a review with only `generateName` pairs with the oldest
/// unused Pod of that namespace and `generateName` that has the same controller and the review's
/// own containers and init containers (by name).
#[derive(Debug)]
pub struct StoredPods<T> {
    /// In creation order (creationTimestamp, then name); `None` once paired.
    pods: Vec<Option<(T, Value)>>,
    by_name: HashMap<(String, String), Vec<usize>>,
    by_generate_name: HashMap<(String, String), Vec<usize>>,
}

fn text<'v>(pod: &'v Value, keys: &[&str]) -> &'v str {
    at(pod, keys).and_then(Value::as_str).unwrap_or_default()
}

/// The uid of the Pod's controller (the ownerReference with `controller: true`), if any.
fn controller_uid(pod: &Value) -> Option<&str> {
    at(pod, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| field(o, "controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| field(o, "uid")?.as_str())
}

/// The review's containers and init containers are all in the stored Pod (a sidecar may have
/// replaced one in place, so names, not content).
fn has_containers_of(stored: &Value, original: &Value) -> bool {
    ["containers", "initContainers"].into_iter().all(|key| {
        let names: HashSet<&str> = spec_list(stored, key).iter().filter_map(name_of).collect();
        spec_list(original, key).iter().filter_map(name_of).all(|n| names.contains(n))
    })
}

impl<T> StoredPods<T> {
    /// Index `pods` (each with a label of where it came from, e.g. `file#index`); objects that are
    /// not Pods are left out.
    pub fn new(pods: impl IntoIterator<Item = (T, Value)>) -> Self {
        let mut pods: Vec<(T, Value)> = pods.into_iter().filter(|(_, p)| text(p, &["kind"]) == "Pod").collect();
        pods.sort_by(|(_, a), (_, b)| {
            let key = |p: &Value| (text(p, &["metadata", "creationTimestamp"]).to_owned(), text(p, &["metadata", "name"]).to_owned());
            key(a).cmp(&key(b))
        });
        let mut index = StoredPods { pods: Vec::with_capacity(pods.len()), by_name: HashMap::new(), by_generate_name: HashMap::new() };
        for (i, (label, pod)) in pods.into_iter().enumerate() {
            let namespace = text(&pod, &["metadata", "namespace"]).to_owned();
            index.by_name.entry((namespace.clone(), text(&pod, &["metadata", "name"]).to_owned())).or_default().push(i);
            let generate_name = text(&pod, &["metadata", "generateName"]);
            if !generate_name.is_empty() {
                index.by_generate_name.entry((namespace, generate_name.to_owned())).or_default().push(i);
            }
            index.pods.push(Some((label, pod)));
        }
        index
    }

    /// The stored Pod for the CREATE of `original` in `namespace` (the review's `name`, else the
    /// object's), removed from the unpaired ones.
    pub fn take(&mut self, namespace: &str, name: &str, original: &Value) -> Option<(T, Value)> {
        let name = if name.is_empty() { text(original, &["metadata", "name"]) } else { name };
        let candidates = if name.is_empty() {
            let generate_name = text(original, &["metadata", "generateName"]);
            if generate_name.is_empty() {
                return None;
            }
            self.by_generate_name.get(&(namespace.to_owned(), generate_name.to_owned()))?
        } else {
            self.by_name.get(&(namespace.to_owned(), name.to_owned()))?
        };
        let by_name = !name.is_empty();
        let pods = &self.pods;
        let found = candidates.iter().copied().find(|&i| {
            pods[i].as_ref().is_some_and(|(_, stored)| {
                by_name || (controller_uid(stored) == controller_uid(original) && has_containers_of(stored, original))
            })
        })?;
        self.pods[found].take()
    }

    /// The stored Pods no review was paired with, in creation order.
    pub fn unpaired(&self) -> impl Iterator<Item = &(T, Value)> {
        self.pods.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An undefaulted SidecarSet, as a user's repository holds it.
    fn log_agent() -> Arc<SidecarSet> {
        let set = json!({"metadata": {"name": "log-agent"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "log-agent", "image": "fluent/fluent-bit:3.2.4",
                "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                "ports": [{"containerPort": 2020}],
                "resources": {"limits": {"memory": "128Mi", "cpu": "0.1"}},
                "readinessProbe": {"httpGet": {"port": 2020}},
                "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent", "readOnly": false}]}],
            "volumes": [{"name": "agent-config", "configMap": {"name": "agent"}}],
            "imagePullSecrets": [{"name": "registry"}]}});
        Arc::new(SidecarSet::from_value(&set).unwrap())
    }

    fn lookup(name: &str) -> Option<Arc<SidecarSet>> {
        (name == "log-agent").then(log_agent)
    }

    fn original() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-7d9f-", "namespace": "shop", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "shop:1",
                        "volumeMounts": [{"name": "kube-api-access-x1", "mountPath": TOKEN_MOUNT_PATH, "readOnly": true}]}],
                     "volumes": [{"name": "kube-api-access-x1", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]}})
    }

    const HASH: &str =
        r#"{"log-agent":{"updateTimestamp":"2024-05-01T12:00:00Z","hash":"h1","sidecarSetName":"log-agent","sidecarList":["log-agent"]}}"#;

    /// The original with the log agent injected as injection writes it (no API server defaults).
    fn ours() -> Value {
        let mut pod = original();
        let sidecar = json!({"name": "log-agent", "image": "fluent/fluent-bit:3.2.4",
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}, {"name": "IS_INJECTED", "value": "true"}],
            "ports": [{"containerPort": 2020}],
            "resources": {"limits": {"memory": "128Mi", "cpu": "0.1"}},
            "readinessProbe": {"httpGet": {"port": 2020}},
            "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent", "readOnly": false}]});
        pod["spec"]["containers"].as_array_mut().unwrap().push(sidecar);
        pod["spec"]["volumes"].as_array_mut().unwrap().push(json!({"name": "agent-config", "configMap": {"name": "agent"}}));
        pod["spec"]["imagePullSecrets"] = json!([{"name": "registry"}]);
        pod["metadata"]["annotations"] = json!({
            HASH_ANNOTATION: HASH, HASH_WITHOUT_IMAGE_ANNOTATION: HASH.replace("h1", "h2"), INJECTED_LIST_ANNOTATION: "log-agent"});
        pod
    }

    /// The same Pod as kruise-manager and the API server store it: injected at another time, then
    /// defaulted, token-mounted, named and run.
    fn stored() -> Value {
        let mut pod = ours();
        let hash = HASH.replace("2024-05-01T12:00:00Z", "2024-05-01T12:00:07Z");
        pod["metadata"]["annotations"][HASH_ANNOTATION] = json!(hash);
        pod["metadata"]["annotations"][HASH_WITHOUT_IMAGE_ANNOTATION] = json!(hash.replace("h1", "h2"));
        let meta = pod["metadata"].as_object_mut().unwrap();
        for (k, v) in [
            ("name", json!("web-7d9f-k2x4q")),
            ("uid", json!("0b7f")),
            ("resourceVersion", json!("812")),
            ("creationTimestamp", json!("2024-05-01T12:00:07Z")),
            ("managedFields", json!([{"manager": "kube-controller-manager"}])),
        ] {
            meta.insert(k.into(), v);
        }
        pod["spec"]["nodeName"] = json!("node-1");
        pod["status"] = json!({"phase": "Running", "podIP": "10.0.0.7"});
        pod["spec"]["containers"][0] = json!({"name": "app", "image": "shop:1", "imagePullPolicy": "IfNotPresent", "resources": {},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "volumeMounts": [{"name": "kube-api-access-x1", "mountPath": TOKEN_MOUNT_PATH, "readOnly": true}]});
        pod["spec"]["containers"][1] = json!({"name": "log-agent", "image": "fluent/fluent-bit:3.2.4",
            "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}}, {"name": "IS_INJECTED", "value": "true"}],
            "ports": [{"containerPort": 2020, "protocol": "TCP"}],
            "resources": {"limits": {"memory": "128Mi", "cpu": "100m"}, "requests": {"memory": "128Mi", "cpu": "100m"}},
            "readinessProbe": {"httpGet": {"port": 2020, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
                               "successThreshold": 1, "failureThreshold": 3},
            "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}, {"resourceName": "memory", "restartPolicy": "NotRequired"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
            "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent"},
                             {"name": "kube-api-access-x1", "mountPath": TOKEN_MOUNT_PATH, "readOnly": true}]});
        pod["spec"]["volumes"][1] = json!({"name": "agent-config", "configMap": {"name": "agent", "defaultMode": 420}});
        pod["spec"]["volumes"][0]["projected"]["defaultMode"] = json!(420);
        pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = json!(3607);
        pod
    }

    fn verdict(stored: &Value) -> Vec<SidecarSetAgreement> {
        compare(&original(), &ours(), stored, &lookup)
    }

    fn diffs(stored: &Value) -> Vec<(String, Value, Value)> {
        let result = verdict(stored);
        assert_eq!(result.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["log-agent"]);
        result[0].diffs.iter().map(|d| (d.path.clone(), d.ours.clone(), d.stored.clone())).collect()
    }

    #[test]
    fn a_pod_stored_as_kruise_and_the_api_server_store_it_agrees() {
        let result = verdict(&stored());
        assert_eq!(result.len(), 1);
        assert!(result[0].agrees(), "{:#?}", result[0].diffs);
    }

    #[test]
    fn a_different_sidecar_image_disagrees_on_that_field_only() {
        let mut pod = stored();
        pod["spec"]["containers"][1]["image"] = json!("fluent/fluent-bit:3.1.0");
        let image = |i: &str| json!(format!("fluent/fluent-bit:{i}"));
        assert_eq!(diffs(&pod), [("spec.containers[log-agent].image".to_owned(), image("3.2.4"), image("3.1.0"))]);
    }

    #[test]
    fn a_missing_volume_disagrees_with_the_volume_as_ours() {
        let mut pod = stored();
        pod["spec"]["volumes"].as_array_mut().unwrap().remove(1);
        let ours = json!({"name": "agent-config", "configMap": {"name": "agent", "defaultMode": 420}});
        assert_eq!(diffs(&pod), [("spec.volumes[agent-config]".to_owned(), ours, Value::Null)]);
    }

    #[test]
    fn a_volume_a_sidecar_uses_that_the_pod_had_is_not_the_sidecarsets() {
        // The token volume is the Pod's own: a difference in it is not attributed to the SidecarSet.
        let mut pod = stored();
        pod["spec"]["volumes"][0]["projected"]["defaultMode"] = json!(256);
        assert!(verdict(&pod)[0].agrees());
    }

    #[test]
    fn env_mounts_and_ports_compare_by_their_keys() {
        let mut pod = stored();
        let sidecar = &mut pod["spec"]["containers"][1];
        sidecar["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] = json!("metadata.name");
        sidecar["env"].as_array_mut().unwrap().push(json!({"name": "EXTRA", "value": "1"}));
        sidecar["volumeMounts"][0]["readOnly"] = json!(true);
        sidecar["ports"][0]["protocol"] = json!("UDP");
        assert_eq!(
            diffs(&pod),
            [
                (
                    "spec.containers[log-agent].env[NODE].valueFrom.fieldRef.fieldPath".to_owned(),
                    json!("spec.nodeName"),
                    json!("metadata.name")
                ),
                ("spec.containers[log-agent].env[EXTRA]".to_owned(), Value::Null, json!({"name": "EXTRA", "value": "1"})),
                ("spec.containers[log-agent].ports[2020/TCP]".to_owned(), json!({"containerPort": 2020, "protocol": "TCP"}), Value::Null),
                ("spec.containers[log-agent].ports[2020/UDP]".to_owned(), Value::Null, json!({"containerPort": 2020, "protocol": "UDP"})),
                ("spec.containers[log-agent].volumeMounts[/etc/agent].readOnly".to_owned(), Value::Null, json!(true)),
            ]
        );
    }

    #[test]
    fn env_in_another_order_disagrees() {
        let mut pod = stored();
        pod["spec"]["containers"][1]["env"].as_array_mut().unwrap().reverse();
        assert_eq!(
            diffs(&pod),
            [("spec.containers[log-agent].env#order".to_owned(), json!(["NODE", "IS_INJECTED"]), json!(["IS_INJECTED", "NODE"]))]
        );
    }

    #[test]
    fn quantities_compare_by_value_and_pointer_zeroes_count() {
        let mut pod = stored();
        pod["spec"]["containers"][1]["resources"]["limits"]["memory"] = json!("134217728");
        pod["spec"]["containers"][1]["securityContext"] = json!({"runAsUser": 0});
        assert_eq!(diffs(&pod), [("spec.containers[log-agent].securityContext".to_owned(), Value::Null, json!({"runAsUser": 0}))]);
        pod["spec"]["containers"][1]["resources"]["requests"]["cpu"] = json!("200m");
        assert_eq!(diffs(&pod)[0].0, "spec.containers[log-agent].resources.requests.cpu");
    }

    #[test]
    fn a_sidecarset_kruise_did_not_inject_disagrees_on_everything_it_owns() {
        let mut pod = stored();
        pod["spec"]["containers"].as_array_mut().unwrap().truncate(1);
        pod["spec"]["volumes"].as_array_mut().unwrap().truncate(1);
        pod["spec"].as_object_mut().unwrap().remove("imagePullSecrets");
        pod["metadata"]["annotations"] = json!({});
        let paths: Vec<String> = diffs(&pod).into_iter().map(|d| d.0).collect();
        assert_eq!(
            paths,
            [
                "spec.containers[log-agent]",
                "spec.volumes[agent-config]",
                "spec.imagePullSecrets[registry]",
                "metadata.annotations[kruise.io/sidecarset-hash][log-agent]",
                "metadata.annotations[kruise.io/sidecarset-hash-without-image][log-agent]",
                "metadata.annotations[kruise.io/sidecarset-injected-list][log-agent]",
            ]
        );
    }

    #[test]
    fn a_sidecar_placed_elsewhere_disagrees_on_its_position() {
        let mut pod = stored();
        pod["spec"]["containers"].as_array_mut().unwrap().reverse();
        assert_eq!(
            diffs(&pod),
            [("spec.containers[log-agent]#position".to_owned(), json!("after the pod's containers"), json!("before the pod's containers"))]
        );
    }

    #[test]
    fn hash_entries_compare_without_the_timestamp() {
        let mut pod = stored();
        let changed = pod["metadata"]["annotations"][HASH_ANNOTATION].as_str().unwrap().replace("\"h1\"", "\"h9\"");
        pod["metadata"]["annotations"][HASH_ANNOTATION] = json!(changed);
        assert_eq!(diffs(&pod), [("metadata.annotations[kruise.io/sidecarset-hash][log-agent].hash".to_owned(), json!("h1"), json!("h9"))]);
    }

    #[test]
    fn a_sidecarset_only_the_stored_pod_records_is_attributed_from_its_annotations() {
        // Unknown to the cluster folder: its containers come from the stored Pod's hash entry.
        let mut pod = stored();
        let hash = r#"{"tracer":{"updateTimestamp":null,"hash":"t","sidecarSetName":"tracer","sidecarList":["tracer"]}}"#;
        pod["metadata"]["annotations"][HASH_ANNOTATION] = json!(HASH.replace("}}", &format!("}},{}", &hash[1..])).replace("}}}", "}}"));
        pod["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "tracer", "image": "tracer:1"}));
        let result = verdict(&pod);
        assert_eq!(result.iter().map(|r| (r.name.as_str(), r.agrees())).collect::<Vec<_>>(), [("log-agent", true), ("tracer", false)]);
        let paths: Vec<&str> = result[1].diffs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["spec.containers[tracer]", "metadata.annotations[kruise.io/sidecarset-hash][tracer]"]);
    }

    /// Everything real injection writes is attributed: removing any one piece of it from the stored
    /// Pod (a container, init container, volume, pull secret or annotation it added or changed) makes
    /// the SidecarSet that wrote it disagree, and nothing else.
    #[test]
    fn every_piece_injection_writes_is_attributed_to_its_sidecarset() {
        use crate::admission::{FixedClock, Inputs, SeededRandom, Settings};
        let mesh = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "mesh"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "initContainers": [{"name": "init-net", "image": "net:1"},
                               {"name": "agent", "image": "agent:1", "restartPolicy": "Always",
                                "volumeMounts": [{"name": "agent-sock", "mountPath": "/sock"}]}],
            "containers": [{"name": "proxy", "image": "proxy:1", "podInjectPolicy": "BeforeAppContainer",
                            "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}],
            "volumes": [{"name": "agent-sock", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "mesh-registry"}],
            "patchPodMetadata": [{"annotations": {"mesh.example/enabled": "true"}}]}});
        let logs = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "logs"}, "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "shipper", "image": "shipper:1", "shareVolumePolicy": {"type": "enabled"},
                            "volumeMounts": [{"name": "shipper-state", "mountPath": "/state"}]}],
            "volumes": [{"name": "shipper-state", "emptyDir": {}}]}});
        let cluster = crate::cluster::Snapshot::from_objects([mesh, logs]);
        let original = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}, "annotations": {"team": "shop"}},
            "spec": {"containers": [{"name": "app", "image": "shop:1", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                     "volumes": [{"name": "data", "emptyDir": {}}]}});
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop", "operation": "CREATE", "userInfo": {"username": "u"}, "object": original}});
        let request = crate::admission::review::decode_review(review).unwrap();
        let (answers, settings, random) = (Default::default(), Settings::default(), SeededRandom::new(0));
        let clock = FixedClock(time::OffsetDateTime::UNIX_EPOCH);
        let inputs = Inputs { cluster: &cluster, answers: &answers, clock: &clock, random: &random, settings: &settings };
        let mut ours = original.clone();
        crate::admission::pod::mutate(&request, &mut ours, &inputs).unwrap();
        let lookup = |name: &str| {
            let object = cluster.get(crate::api::sidecarset::GROUP, crate::api::sidecarset::KIND, "", name)?;
            SidecarSet::from_value(object).ok().map(Arc::new)
        };
        let verdicts = |stored: &Value| -> Vec<(String, bool)> {
            compare(&original, &ours, stored, &lookup).into_iter().map(|r| (r.name.clone(), r.agrees())).collect()
        };
        assert_eq!(verdicts(&ours), [("logs".to_owned(), true), ("mesh".to_owned(), true)]);

        // Each piece and the SidecarSet that owns it.
        let owner = |piece: &str| match piece {
            "shipper" | "shipper-state" => "logs",
            _ if piece.contains("sidecarset-hash") || piece.ends_with("injected-list") => "both",
            _ => "mesh",
        };
        let mut pieces = Vec::new();
        for key in ["initContainers", "containers", "volumes", "imagePullSecrets"] {
            for item in spec_list(&ours, key) {
                let name = name_of(item).unwrap().to_owned();
                if by_name(spec_list(&original, key), &name) != Some(item) {
                    pieces.push((key, name));
                }
            }
        }
        for (key, value) in annotations(&ours) {
            if annotations(&original).get(key) != Some(value) {
                pieces.push(("annotations", key.clone()));
            }
        }
        let mut names: Vec<&str> = pieces.iter().map(|(_, n)| n.as_str()).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            [
                "agent",
                "agent-sock",
                "init-net",
                "kruise.io/sidecarset-hash",
                "kruise.io/sidecarset-hash-without-image",
                "kruise.io/sidecarset-injected-list",
                "kruise.io/sidecarset-working-hotupgrade-container",
                "mesh-registry",
                "mesh.example/enabled",
                "proxy-1",
                "proxy-2",
                "shipper",
                "shipper-state",
                "version.sidecarset.kruise.io/proxy-1",
                "version.sidecarset.kruise.io/proxy-2",
                "versionalt.sidecarset.kruise.io/proxy-1",
                "versionalt.sidecarset.kruise.io/proxy-2"
            ],
            "what injection wrote"
        );
        for (key, name) in pieces {
            let mut stored = ours.clone();
            if key == "annotations" {
                stored["metadata"]["annotations"].as_object_mut().unwrap().remove(&name);
            } else {
                stored["spec"][key].as_array_mut().unwrap().retain(|i| name_of(i) != Some(name.as_str()));
            }
            let expected = match owner(&name) {
                "both" => vec![("logs".to_owned(), false), ("mesh".to_owned(), false)],
                "logs" => vec![("logs".to_owned(), false), ("mesh".to_owned(), true)],
                _ => vec![("logs".to_owned(), true), ("mesh".to_owned(), false)],
            };
            assert_eq!(verdicts(&stored), expected, "without {key} {name}");
        }
    }

    /// An audit log records the request before the ServiceAccount plugin ran: the review's Pod and
    /// ours have no token volume, the stored Pod has it on every container. Not a disagreement, and
    /// the token volume is not the SidecarSet's.
    #[test]
    fn a_token_only_the_stored_pod_has_is_the_api_servers() {
        let strip = |mut pod: Value| {
            pod["spec"]["volumes"].as_array_mut().unwrap().remove(0);
            pod["spec"]["containers"][0].as_object_mut().unwrap().remove("volumeMounts");
            pod
        };
        let result = compare(&strip(original()), &strip(ours()), &stored(), &lookup);
        assert!(result[0].agrees(), "{:#?}", result[0].diffs);
        // The mount is compared, not ignored: a stored one unlike the plugin's disagrees.
        let mut writable = stored();
        writable["spec"]["containers"][1]["volumeMounts"][1]["readOnly"] = json!(false);
        let result = compare(&strip(original()), &strip(ours()), &writable, &lookup);
        let diffs: Vec<(&str, &Value, &Value)> = result[0].diffs.iter().map(|d| (d.path.as_str(), &d.ours, &d.stored)).collect();
        let path = "spec.containers[log-agent].volumeMounts[/var/run/secrets/kubernetes.io/serviceaccount].readOnly";
        assert_eq!(diffs, [(path, &json!(true), &Value::Null)]);
    }

    /// A sidecar sharing the app's mounts: Kruise saw the token mount among the app's (the plugin ran
    /// before webhooks), our decision on an audit log's request did not. Its place is not compared.
    #[test]
    fn the_token_mount_is_compared_wherever_it_sits() {
        let mut pod = stored();
        let mounts = pod["spec"]["containers"][1]["volumeMounts"].as_array_mut().unwrap();
        mounts.reverse();
        assert_eq!(mounts[0]["mountPath"], TOKEN_MOUNT_PATH);
        assert!(verdict(&pod)[0].agrees(), "{:#?}", verdict(&pod)[0].diffs);
    }

    #[test]
    fn the_token_volume_is_the_projected_one_or_a_mounted_secret_token() {
        assert_eq!(token_volume(&original()), Some("kube-api-access-x1"));
        let legacy = |source: Value| {
            json!({"spec": {"containers": [{"name": "app", "volumeMounts": [{"name": "default-token-hn7nn", "mountPath": TOKEN_MOUNT_PATH}]}],
                            "volumes": [{"name": "default-token-hn7nn", "secret": source}]}})
        };
        assert_eq!(token_volume(&legacy(json!({"secretName": "default-token-hn7nn"}))), Some("default-token-hn7nn"));
        // Not a secret: the user's own volume at that path, which the plugin would not add anywhere.
        let mut own = legacy(json!(null));
        own["spec"]["volumes"][0] = json!({"name": "default-token-hn7nn", "configMap": {"name": "x"}});
        assert_eq!(token_volume(&own), None);
        assert_eq!(token_volume(&json!({"spec": {"containers": [{"name": "app"}]}})), None);
    }

    #[test]
    fn reviews_pair_by_name_or_by_generate_name_controller_and_containers() {
        let pod = |name: &str, created: &str, owner: &str, containers: &[&str]| {
            let containers: Vec<Value> = containers.iter().map(|c| json!({"name": c})).collect();
            json!({"kind": "Pod", "metadata": {"name": name, "generateName": "web-", "namespace": "shop", "creationTimestamp": created,
                "ownerReferences": [{"uid": owner, "controller": true}]}, "spec": {"containers": containers}})
        };
        let mut stored = StoredPods::new([
            ("c", pod("web-c", "2024-05-01T12:00:03Z", "rs-1", &["app", "log-agent"])),
            ("a", pod("web-a", "2024-05-01T12:00:01Z", "rs-2", &["app", "log-agent"])),
            ("b", pod("web-b", "2024-05-01T12:00:02Z", "rs-1", &["app", "log-agent"])),
            ("d", pod("web-d", "2024-05-01T12:00:04Z", "rs-1", &["other"])),
            ("e", json!({"kind": "Service", "metadata": {"name": "web-e", "namespace": "shop"}})),
        ]);
        let review = |owner: &str, containers: &[&str]| {
            let mut p = pod("", "", owner, containers);
            p["metadata"].as_object_mut().unwrap().remove("name");
            p
        };
        let mut take = |namespace: &str, name: &str, original: Value| stored.take(namespace, name, &original).map(|(label, _)| label);
        // The oldest unused Pod of the same controller with the review's containers, then the next.
        assert_eq!(take("shop", "", review("rs-1", &["app"])), Some("b"));
        assert_eq!(take("shop", "", review("rs-1", &["app"])), Some("c"));
        assert_eq!(take("shop", "", review("rs-1", &["app"])), None, "web-d has other containers");
        assert_eq!(take("other", "", review("rs-2", &["app"])), None, "another namespace");
        // By name (the request's, else the object's), whatever the rest.
        assert_eq!(take("shop", "web-d", review("rs-9", &["x"])), Some("d"));
        assert_eq!(take("shop", "", pod("web-a", "", "rs-9", &[])), Some("a"));
        assert_eq!(take("shop", "web-e", review("rs-1", &[])), None, "not a Pod");
        assert_eq!(stored.unpaired().count(), 0);
    }
}
