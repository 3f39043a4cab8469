//! Agreement between our decision on a Pod CREATE and the Pod actually stored
//! (docs/sidecarset.md#13-agreement-with-stored-pods): for each SidecarSet that either side injected,
//! and for each step of `/mutate-pod` ([`Step`]), `agree` or `disagree` with a field-level diff.
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

mod diff;
mod normalize;
mod pairing;
mod steps;

pub use pairing::StoredPods;
pub use steps::SpreadLookup;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use self::diff::{Ctx, diff};
use self::normalize::{normalized_container, normalized_volume, token_volume};
use super::injection::annotations::{HashEntries, parse_hash_map};
use super::pod::Step;
use crate::api::json::{at, field};
use crate::api::sidecarset::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, INJECTED_LIST_ANNOTATION, SidecarSet,
    VERSION_ALT_ANNOTATION_PREFIX, VERSION_ANNOTATION_PREFIX, WORKING_HOTUPGRADE_CONTAINER_ANNOTATION,
};

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

/// What the comparison reads of the cluster the decision was made against.
pub struct Lookups<'a> {
    /// A SidecarSet by name (see [`compare`]).
    pub sidecarset: &'a dyn Fn(&str) -> Option<Arc<SidecarSet>>,
    /// A WorkloadSpread by namespace and name: what the subset a Pod was given contributes.
    pub workload_spread: SpreadLookup<'a>,
}

/// The verdict for one step of `/mutate-pod` on one Pod: it agrees when there is no diff, also
/// when neither side did anything for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepAgreement {
    pub step: Step,
    pub diffs: Vec<FieldDiff>,
}

impl StepAgreement {
    pub fn agrees(&self) -> bool {
        self.diffs.is_empty()
    }
}

/// One Pod's verdicts: per SidecarSet ([`compare`]) and per step, every step in [`Step::ALL`]'s
/// order. The SidecarSet step's diffs are those of its SidecarSets, in name order.
#[derive(Debug, Clone, PartialEq)]
pub struct PodAgreement {
    pub sidecarsets: Vec<SidecarSetAgreement>,
    pub steps: Vec<StepAgreement>,
}

impl PodAgreement {
    pub fn agrees(&self) -> bool {
        self.steps.iter().all(StepAgreement::agrees)
    }
}

/// Compare `ours` with `stored` per SidecarSet and per step (docs/sidecarset.md#13-6-the-other-steps).
pub fn compare_pod(original: &Value, ours: &Value, stored: &Value, lookups: &Lookups) -> PodAgreement {
    let sidecarsets = compare(original, ours, stored, lookups.sidecarset);
    let steps = Step::ALL
        .into_iter()
        .map(|step| {
            let diffs = match step {
                Step::SidecarSet => sidecarsets.iter().flat_map(|s| s.diffs.iter().cloned()).collect(),
                _ => steps::compare_step(step, original, ours, stored, lookups.workload_spread),
            };
            StepAgreement { step, diffs }
        })
        .collect();
    PodAgreement { sidecarsets, steps }
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
            working_hot: annotation(WORKING_HOTUPGRADE_CONTAINER_ANNOTATION)
                .and_then(|w| serde_json::from_str(w).ok())
                .unwrap_or_default(),
        }
    }

    /// Every SidecarSet this Pod records: the injected list and the hash map.
    fn injected(&self) -> impl Iterator<Item = &str> {
        self.injected_list.iter().chain(self.hash.keys()).map(String::as_str)
    }

    /// The sidecars `set` injected into this Pod by its own record (the hash entry's sidecar list),
    /// and the container names they became: the name itself, plus the hot-upgrade pair of a sidecar
    /// the working-container annotation lists.
    fn recorded_sidecars(
        &self,
        set: &str,
        sidecars: &mut BTreeSet<String>,
        containers: &mut BTreeSet<String>,
    ) {
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

fn compare_set(
    name: &str,
    set: Option<&SidecarSet>,
    original: &Value,
    ours: &Side,
    stored: &Side,
    out: &mut Vec<FieldDiff>,
) {
    let (sidecars, containers) = sidecar_names(name, set, ours, stored);
    // The ServiceAccount token volume is the Pod's, never injection's. Ours names it, or else the
    // stored Pod does: an audit log records the request before the ServiceAccount plugin ran.
    let token = token_volume(ours.pod).or_else(|| token_volume(stored.pod));
    let referenced_volumes = compare_containers(&containers, original, ours, stored, token, out);
    compare_volumes(&referenced_volumes, original, ours, stored, token, out);
    if let Some(set) = set {
        compare_pull_secrets(set, original, ours, stored, out);
    }
    compare_annotations(name, set, &sidecars, &containers, ours, stored, out);
}

/// The sidecar names of SidecarSet `name` (as the SidecarSet spells them) and every container name
/// they become (hot-upgrade pairs), from the SidecarSet and from what either Pod records.
fn sidecar_names(
    name: &str,
    set: Option<&SidecarSet>,
    ours: &Side,
    stored: &Side,
) -> (BTreeSet<String>, BTreeSet<String>) {
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
    (sidecars, containers)
}

/// Compare each of `containers` (and its position) in both Pods; the volumes they mount.
fn compare_containers(
    containers: &BTreeSet<String>,
    original: &Value,
    ours: &Side,
    stored: &Side,
    token: Option<&str>,
    out: &mut Vec<FieldDiff>,
) -> BTreeSet<String> {
    let normalized = |c: &Value, side: &Side| normalized_container(c, side.pod, token);
    let mut referenced_volumes = BTreeSet::new();
    for key in ["initContainers", "containers"] {
        let original_list = spec_list(original, key);
        for container in containers {
            let (a, b) = (
                by_name(spec_list(ours.pod, key), container),
                by_name(spec_list(stored.pod, key), container),
            );
            for c in a.into_iter().chain(b) {
                for mount in list(c, "volumeMounts").iter().chain(list(c, "volumeDevices")) {
                    referenced_volumes.extend(name_of(mount).map(str::to_owned));
                }
            }
            let path = child(&format!("spec.{key}"), container);
            match (a, b) {
                (None, None) => {}
                (Some(a), Some(b)) => {
                    diff(
                        &path,
                        "",
                        Some(&normalized(a, ours)),
                        Some(&normalized(b, stored)),
                        Ctx::default(),
                        out,
                    );
                    let (pa, pb) = (
                        position(ours.pod, key, container, original_list),
                        position(stored.pod, key, container, original_list),
                    );
                    if pa != pb {
                        out.push(FieldDiff {
                            path: format!("{path}#position"),
                            ours: json!(pa),
                            stored: json!(pb),
                        });
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
    referenced_volumes
}

/// Volumes the sidecars use that the Pod did not have before: the ones injection adds (docs/sidecarset.md#6-4-volumes).
fn compare_volumes(
    referenced: &BTreeSet<String>,
    original: &Value,
    ours: &Side,
    stored: &Side,
    token: Option<&str>,
    out: &mut Vec<FieldDiff>,
) {
    let own_volumes: HashSet<&str> = spec_list(original, "volumes").iter().filter_map(name_of).collect();
    for volume in referenced.iter().filter(|v| !own_volumes.contains(v.as_str()) && token != Some(v.as_str()))
    {
        let pick = |side: &Side| by_name(spec_list(side.pod, "volumes"), volume).map(normalized_volume);
        diff(
            &child("spec.volumes", volume),
            "",
            pick(ours).as_ref(),
            pick(stored).as_ref(),
            Ctx::default(),
            out,
        );
    }
}

/// The SidecarSet's image pull secrets the Pod did not have before.
fn compare_pull_secrets(
    set: &SidecarSet,
    original: &Value,
    ours: &Side,
    stored: &Side,
    out: &mut Vec<FieldDiff>,
) {
    let own: HashSet<&str> = spec_list(original, "imagePullSecrets").iter().filter_map(name_of).collect();
    for secret in set.spec.image_pull_secrets.iter().map(|s| s.name.as_str()).filter(|s| !own.contains(s)) {
        let pick = |side: &Side| by_name(spec_list(side.pod, "imagePullSecrets"), secret).cloned();
        diff(
            &child("spec.imagePullSecrets", secret),
            "",
            pick(ours).as_ref(),
            pick(stored).as_ref(),
            Ctx::default(),
            out,
        );
    }
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
        diff(
            &child(&child(base, key), name),
            "",
            entry(in_ours).as_ref(),
            entry(in_stored).as_ref(),
            Ctx::default(),
            out,
        );
    }
    let (a, b) = (ours.injected_list.contains(name), stored.injected_list.contains(name));
    if a != b {
        out.push(FieldDiff {
            path: child(&child(base, INJECTED_LIST_ANNOTATION), name),
            ours: json!(a),
            stored: json!(b),
        });
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
        .flat_map(|c| {
            [format!("{VERSION_ANNOTATION_PREFIX}{c}"), format!("{VERSION_ALT_ANNOTATION_PREFIX}{c}")]
        })
        .collect();
    if let Some(set) = set {
        keys.extend(set.spec.patch_pod_metadata.iter().flat_map(|p| p.annotations.keys().cloned()));
    }
    for key in keys {
        diff(
            &child(base, &key),
            "",
            annotations(ours.pod).get(&key),
            annotations(stored.pod).get(&key),
            Ctx::default(),
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::normalize::TOKEN_MOUNT_PATH;
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

    const HASH: &str = r#"{"log-agent":{"updateTimestamp":"2024-05-01T12:00:00Z","hash":"h1","sidecarSetName":"log-agent","sidecarList":["log-agent"]}}"#;

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
        pod["spec"]["volumes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "agent-config", "configMap": {"name": "agent"}}));
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
        pod["spec"]["volumes"][1] =
            json!({"name": "agent-config", "configMap": {"name": "agent", "defaultMode": 420}});
        pod["spec"]["volumes"][0]["projected"]["defaultMode"] = json!(420);
        pod["spec"]["volumes"][0]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] =
            json!(3607);
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
        assert_eq!(
            diffs(&pod),
            [("spec.containers[log-agent].image".to_owned(), image("3.2.4"), image("3.1.0"))]
        );
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
                (
                    "spec.containers[log-agent].env[EXTRA]".to_owned(),
                    Value::Null,
                    json!({"name": "EXTRA", "value": "1"})
                ),
                (
                    "spec.containers[log-agent].ports[2020/TCP]".to_owned(),
                    json!({"containerPort": 2020, "protocol": "TCP"}),
                    Value::Null
                ),
                (
                    "spec.containers[log-agent].ports[2020/UDP]".to_owned(),
                    Value::Null,
                    json!({"containerPort": 2020, "protocol": "UDP"})
                ),
                (
                    "spec.containers[log-agent].volumeMounts[/etc/agent].readOnly".to_owned(),
                    Value::Null,
                    json!(true)
                ),
            ]
        );
    }

    #[test]
    fn env_in_another_order_disagrees() {
        let mut pod = stored();
        pod["spec"]["containers"][1]["env"].as_array_mut().unwrap().reverse();
        assert_eq!(
            diffs(&pod),
            [(
                "spec.containers[log-agent].env#order".to_owned(),
                json!(["NODE", "IS_INJECTED"]),
                json!(["IS_INJECTED", "NODE"])
            )]
        );
    }

    #[test]
    fn quantities_compare_by_value_and_pointer_zeroes_count() {
        let mut pod = stored();
        pod["spec"]["containers"][1]["resources"]["limits"]["memory"] = json!("134217728");
        pod["spec"]["containers"][1]["securityContext"] = json!({"runAsUser": 0});
        assert_eq!(
            diffs(&pod),
            [("spec.containers[log-agent].securityContext".to_owned(), Value::Null, json!({"runAsUser": 0}))]
        );
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
            [(
                "spec.containers[log-agent]#position".to_owned(),
                json!("after the pod's containers"),
                json!("before the pod's containers")
            )]
        );
    }

    /// Launch priority's barrier env names a generated pod name each side drew on its own: its key
    /// is compared, the ConfigMap's name is not.
    #[test]
    fn launch_barriers_compare_by_priority_not_by_pod_name() {
        let with_barrier = |pod: &Value, name: &str, key: &str| {
            let mut pod = pod.clone();
            let sidecar = &mut pod["spec"]["containers"][1];
            sidecar["env"].as_array_mut().unwrap().push(json!({"name": "KRUISE_CONTAINER_BARRIER",
                "valueFrom": {"configMapKeyRef": {"name": format!("{name}-barrier"), "key": key}}}));
            pod
        };
        let ours = with_barrier(&ours(), "web-7d9f-bcdfg", "p_-1");
        let same = with_barrier(&stored(), "web-7d9f-k2x4q", "p_-1");
        assert!(compare(&original(), &ours, &same, &lookup).iter().all(SidecarSetAgreement::agrees));
        let other = with_barrier(&stored(), "web-7d9f-k2x4q", "p_0");
        assert!(!compare(&original(), &ours, &other, &lookup)[0].agrees());
    }

    #[test]
    fn hash_entries_compare_without_the_timestamp() {
        let mut pod = stored();
        let changed =
            pod["metadata"]["annotations"][HASH_ANNOTATION].as_str().unwrap().replace("\"h1\"", "\"h9\"");
        pod["metadata"]["annotations"][HASH_ANNOTATION] = json!(changed);
        assert_eq!(
            diffs(&pod),
            [(
                "metadata.annotations[kruise.io/sidecarset-hash][log-agent].hash".to_owned(),
                json!("h1"),
                json!("h9")
            )]
        );
    }

    #[test]
    fn a_sidecarset_only_the_stored_pod_records_is_attributed_from_its_annotations() {
        // Unknown to the cluster folder: its containers come from the stored Pod's hash entry.
        let mut pod = stored();
        let hash = r#"{"tracer":{"updateTimestamp":null,"hash":"t","sidecarSetName":"tracer","sidecarList":["tracer"]}}"#;
        pod["metadata"]["annotations"][HASH_ANNOTATION] =
            json!(HASH.replace("}}", &format!("}},{}", &hash[1..])).replace("}}}", "}}"));
        pod["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "tracer", "image": "tracer:1"}));
        let result = verdict(&pod);
        assert_eq!(
            result.iter().map(|r| (r.name.as_str(), r.agrees())).collect::<Vec<_>>(),
            [("log-agent", true), ("tracer", false)]
        );
        let paths: Vec<&str> = result[1].diffs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            ["spec.containers[tracer]", "metadata.annotations[kruise.io/sidecarset-hash][tracer]"]
        );
    }

    /// A `web` Pod in `shop` injected by two SidecarSets, `mesh` (init containers, a native and a
    /// hot-upgrade sidecar, a volume, a pull secret, an annotation) and `logs` (a container and its
    /// volume): the cluster, the Pod as sent and as injected.
    fn injected_by_mesh_and_logs() -> (crate::cluster::Snapshot, Value, Value) {
        use crate::admission::Settings;
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
        let ours = crate::admission::pod::tests::mutated(&cluster, review, &Settings::default());
        (cluster, original, ours)
    }

    /// What injection wrote: each `(list or "annotations", name)` that `ours` has and `original`
    /// has not, or has otherwise.
    fn pieces_written(original: &Value, ours: &Value) -> Vec<(&'static str, String)> {
        let mut pieces = Vec::new();
        for key in ["initContainers", "containers", "volumes", "imagePullSecrets"] {
            for item in spec_list(ours, key) {
                let name = name_of(item).unwrap().to_owned();
                if by_name(spec_list(original, key), &name) != Some(item) {
                    pieces.push((key, name));
                }
            }
        }
        for (key, value) in annotations(ours) {
            if annotations(original).get(key) != Some(value) {
                pieces.push(("annotations", key.clone()));
            }
        }
        pieces
    }

    /// Everything real injection writes is attributed: removing any one piece of it from the stored
    /// Pod (a container, init container, volume, pull secret or annotation it added or changed) makes
    /// the SidecarSet that wrote it disagree, and nothing else.
    #[test]
    fn every_piece_injection_writes_is_attributed_to_its_sidecarset() {
        let (cluster, original, ours) = injected_by_mesh_and_logs();
        let lookup = |name: &str| {
            let object =
                cluster.get(crate::api::sidecarset::GROUP, crate::api::sidecarset::KIND, "", name)?;
            SidecarSet::from_value(&object).ok().map(Arc::new)
        };
        let verdicts = |stored: &Value| -> Vec<(String, bool)> {
            compare(&original, &ours, stored, &lookup)
                .into_iter()
                .map(|r| (r.name.clone(), r.agrees()))
                .collect()
        };
        assert_eq!(verdicts(&ours), [("logs".to_owned(), true), ("mesh".to_owned(), true)]);

        // Each piece and the SidecarSet that owns it.
        let owner = |piece: &str| match piece {
            "shipper" | "shipper-state" => "logs",
            _ if piece.contains("sidecarset-hash") || piece.ends_with("injected-list") => "both",
            _ => "mesh",
        };
        let pieces = pieces_written(&original, &ours);
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
        let diffs: Vec<(&str, &Value, &Value)> =
            result[0].diffs.iter().map(|d| (d.path.as_str(), &d.ours, &d.stored)).collect();
        let path =
            "spec.containers[log-agent].volumeMounts[/var/run/secrets/kubernetes.io/serviceaccount].readOnly";
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
        assert_eq!(
            token_volume(&legacy(json!({"secretName": "default-token-hn7nn"}))),
            Some("default-token-hn7nn")
        );
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
        let mut take = |namespace: &str, name: &str, original: Value| {
            stored.take(namespace, name, &original).map(|(label, _)| label)
        };
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
