//! Inputs shared by the benches and the load-test tool (`#[path = "support/mod.rs"]`): realistic
//! pods built from `tests/fixtures/workloads/`, SidecarSet fleets of any size of which 3 match the
//! pod, and AdmissionReviews around them.
#![allow(dead_code)] // each bench uses a different subset

use std::path::{Path, PathBuf};

use kruise_admission::cluster::Snapshot;
use kruise_admission::cluster::files::read_documents;
use serde_json::{Value, json};

/// The committed fixtures (same folder as `tests/common/mod.rs::fixtures_dir`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A Pod as the apiserver would send it for `template` (a workload's `spec.template`).
fn pod_of(template: &Value, generate_name: &str, namespace: &str) -> Value {
    let mut metadata = template.get("metadata").cloned().unwrap_or_else(|| json!({}));
    metadata["generateName"] = json!(generate_name);
    metadata["namespace"] = json!(namespace);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
}

/// Every pod template of every workload fixture, as `(file:name, pod)`.
pub fn workload_pods() -> Vec<(String, Value)> {
    let dir = fixtures_dir().join("workloads");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/workloads")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut pods = Vec::new();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(path).expect("readable fixture");
        let Ok(docs) = read_documents(&text) else { continue };
        for doc in docs {
            let template = &doc["spec"]["template"];
            if template["spec"].is_object() {
                let name = format!(
                    "{}:{}",
                    path.file_name().unwrap_or_default().to_string_lossy(),
                    doc["metadata"]["name"].as_str().unwrap_or("")
                );
                pods.push((name, pod_of(template, "bench-", "monitoring")));
            }
        }
    }
    pods
}

fn size(v: &Value) -> usize {
    serde_json::to_vec(v).map_or(0, |b| b.len())
}

/// The smallest pod template of the fixtures.
pub fn small_pod() -> Value {
    workload_pods().into_iter().min_by_key(|(_, p)| size(p)).expect("a workload").1
}

/// The kube-prometheus Grafana pod: a typical application pod (3 containers, 10 volumes).
pub fn typical_pod() -> Value {
    let (_, pod) = workload_pods()
        .into_iter()
        .find(|(n, _)| n == "kube-prometheus-grafana-deployment.yaml:grafana")
        .expect("the Grafana fixture");
    pod
}

/// The largest pod template of the fixtures.
pub fn largest_pod() -> Value {
    workload_pods().into_iter().max_by_key(|(_, p)| size(p)).expect("a workload").1
}

/// The typical pod with 2,000 env vars on its first container and 200 extra ConfigMap volumes
/// (the shape that took Istio 2.13 s before its patch fix).
pub fn synthetic_pod() -> Value {
    let mut pod = typical_pod();
    let env: Vec<Value> =
        (0..2000).map(|i| json!({"name": format!("VAR_{i:04}"), "value": format!("value-{i}")})).collect();
    pod["spec"]["containers"][0]["env"] = Value::Array(env);
    let volumes = pod["spec"]["volumes"].as_array_mut().expect("Grafana has volumes");
    volumes.extend(
        (0..200)
            .map(|i| json!({"name": format!("cfg-{i:03}"), "configMap": {"name": format!("cfg-{i:03}")}})),
    );
    pod
}

/// The pods the benches run on, by name.
pub const POD_NAMES: [&str; 4] = ["small", "typical", "largest", "env2000"];

/// One of [`POD_NAMES`].
pub fn pod(name: &str) -> Option<Value> {
    match name {
        "small" => Some(small_pod()),
        "typical" => Some(typical_pod()),
        "largest" => Some(largest_pod()),
        "env2000" => Some(synthetic_pod()),
        _ => None,
    }
}

/// Every pod of [`POD_NAMES`], by name.
pub fn pods() -> Vec<(&'static str, Value)> {
    POD_NAMES.iter().filter_map(|n| Some((*n, pod(n)?))).collect()
}

/// Three SidecarSets that match `pod` (the example log agent, envoy-style proxy and hot-upgrade
/// agent, pointed at the pod's labels).
pub fn matching_sets(pod: &Value) -> Vec<Value> {
    let labels = pod["metadata"]["labels"].clone();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster/sidecarsets");
    ["log-agent.yaml", "envoy-proxy.yaml", "mesh-agent-hot-upgrade.yaml"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f)).expect("example SidecarSet");
            let mut set = read_documents(&text).expect("YAML").remove(0);
            set["spec"]["selector"] = json!({"matchLabels": labels});
            if let Some(spec) = set["spec"].as_object_mut() {
                spec.remove("namespaceSelector");
            }
            set
        })
        .collect()
}

/// The names `matching_sets` injects, as the injected-list annotation spells them.
pub const INJECTED_LIST: &str = "envoy-proxy,log-agent,mesh-agent";

/// A SidecarSet that matches no bench pod, spread as real fleets are: most select other apps by
/// label, some are pinned to other namespaces, and 1% use only an `Exists` expression (filed under
/// that label key since 2026-12-02; before, in the index's fallback list, checked for every pod).
pub fn other_set(i: usize) -> Value {
    let (selector, namespace_selector) = match i % 100 {
        0 => (json!({"matchExpressions": [{"key": format!("team-{i}"), "operator": "Exists"}]}), Value::Null),
        1..=20 => (
            json!({"matchLabels": {"app": format!("svc-{i}")}}),
            json!({"matchLabels": {"kubernetes.io/metadata.name": format!("ns-{}", i % 50)}}),
        ),
        _ => (
            json!({"matchLabels": {"app.kubernetes.io/name": format!("svc-{i}"), "tier": "backend"}}),
            Value::Null,
        ),
    };
    let mut spec =
        json!({"selector": selector, "containers": [{"name": format!("agent-{i}"), "image": "agent:1"}]});
    if !namespace_selector.is_null() {
        spec["namespaceSelector"] = namespace_selector;
    }
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": format!("other-{i:05}")}, "spec": spec})
}

/// `total` SidecarSets of which 3 match `pod` (none when `total` is 0).
pub fn fleet(pod: &Value, total: usize) -> Vec<Value> {
    if total == 0 {
        return Vec::new();
    }
    let mut sets = matching_sets(pod);
    sets.extend((3..total).map(other_set));
    sets
}

/// A snapshot of [`fleet`], its SidecarSet index built (as publishing a snapshot does).
pub fn snapshot(pod: &Value, total: usize) -> Snapshot {
    let snapshot = Snapshot::from_objects(fleet(pod, total));
    let _ = snapshot.sidecarset_index();
    snapshot
}

/// A v1 AdmissionReview creating `pod`.
pub fn pod_review(pod: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "0b7c5a4e-bench", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "monitoring", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"}, "object": pod, "oldObject": null}})
}

/// A v1 AdmissionReview creating the example envoy SidecarSet (for SidecarSet admission).
pub fn sidecarset_review() -> Value {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster/sidecarsets/envoy-proxy.yaml"),
    )
    .expect("example SidecarSet");
    let mut set = read_documents(&text).expect("YAML").remove(0);
    if let Some(annotations) = set["metadata"].get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.retain(|k, _| !k.starts_with("kruise.io/sidecarset-hash"));
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "5c1e-bench", "kind": {"group": "apps.kruise.io", "version": "v1beta1", "kind": "SidecarSet"},
        "resource": {"group": "apps.kruise.io", "version": "v1beta1", "resource": "sidecarsets"}, "operation": "CREATE",
        "name": set["metadata"]["name"], "object": set}})
}
