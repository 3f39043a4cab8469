//! The SidecarSet injection decision on a realistic pod (the kube-prometheus Grafana pod template
//! from `shared/fixtures/workloads/`) with 10, 1,000 and 10,000 SidecarSets, of which 3 match
//! (the example log agent, envoy-style proxy and hot-upgrade agent, pointed at the pod). The rest
//! are spread as real fleets are: most select other apps by label, some are pinned to other
//! namespaces, and 1% use only matchExpressions (the index's fallback bucket, checked for every pod).
//!
//! `cargo bench --bench inject -- --warm-up-time 1 --measurement-time 3`

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::path::Path;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kruise_admission::admission::review::decode_review;
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::files::read_documents;
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};

fn grafana_pod() -> Value {
    let path = common::shared_dir().join("fixtures/workloads/kube-prometheus-grafana-deployment.yaml");
    let text = std::fs::read_to_string(&path).expect("the Grafana workload fixture");
    let deployment = read_documents(&text).expect("YAML").into_iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let template = &deployment["spec"]["template"];
    let mut metadata = template["metadata"].clone();
    metadata["generateName"] = json!("grafana-7d9c8b6f5-");
    metadata["namespace"] = json!("monitoring");
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]})
}

fn matching_sets(pod: &Value) -> Vec<Value> {
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

fn other_set(i: usize) -> Value {
    let (selector, namespace_selector) = match i % 100 {
        0 => (json!({"matchExpressions": [{"key": format!("team-{i}"), "operator": "Exists"}]}), Value::Null),
        1..=20 => (
            json!({"matchLabels": {"app": format!("svc-{i}")}}),
            json!({"matchLabels": {"kubernetes.io/metadata.name": format!("ns-{}", i % 50)}}),
        ),
        _ => (json!({"matchLabels": {"app.kubernetes.io/name": format!("svc-{i}"), "tier": "backend"}}), Value::Null),
    };
    let mut spec = json!({"selector": selector, "containers": [{"name": format!("agent-{i}"), "image": "agent:1"}]});
    if !namespace_selector.is_null() {
        spec["namespaceSelector"] = namespace_selector;
    }
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": format!("other-{i:05}")}, "spec": spec})
}

fn bench(c: &mut Criterion) {
    let pod = grafana_pod();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "bench", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "monitoring", "operation": "CREATE", "object": pod}});
    let request = decode_review(review).expect("review");
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(1);
    let settings = Settings::default();
    let answers = Answers::default();

    let mut group = c.benchmark_group("mutate-pod");
    for total in [10usize, 1_000, 10_000] {
        let mut objects = matching_sets(&pod);
        objects.extend((3..total).map(other_set));
        let snapshot = Snapshot::from_objects(objects);
        let _ = snapshot.sidecarset_index(); // built once per snapshot, not per request
        let inputs = Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
        let check = webhooks::run(webhook, &request, &inputs);
        assert!(check.decision.allowed, "{:?}", check.decision.status);
        let injected = check.mutated.as_ref().and_then(|p| p.pointer("/metadata/annotations/kruise.io~1sidecarset-injected-list")).cloned();
        assert_eq!(injected, Some(json!("envoy-proxy,log-agent,mesh-agent")));
        group.bench_with_input(BenchmarkId::from_parameter(total), &inputs, |b, inputs| {
            b.iter(|| black_box(webhooks::run(webhook, black_box(&request), inputs)))
        });
    }
    // The same pod when none of 10,000 SidecarSets matches: the cost of finding candidates alone.
    let snapshot = Snapshot::from_objects((3..10_000).map(other_set));
    let _ = snapshot.sidecarset_index();
    let inputs = Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    assert!(webhooks::run(webhook, &request, &inputs).decision.patch.is_empty());
    group.bench_function("10000-none-match", |b| b.iter(|| black_box(webhooks::run(webhook, black_box(&request), &inputs))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
