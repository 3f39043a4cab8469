//! The whole pod path, decided (no HTTP): a Pod CREATE of a CloneSet that a WorkloadSpread spreads,
//! a PodUnavailableBudget guards and three SidecarSets inject into (`/mutate-pod`, every step
//! firing, the WorkloadSpread's status write built), and an eviction of one of its Pods
//! (`/validate-pod`: the WorkloadSpread's `deletingPods` and the budget's `disruptedPods` writes).
//! The floor is the same Pod CREATE in an empty cluster (every step looks and finds nothing but the
//! readiness gate),
//! measured in the same run, so the figures read as ratios.
//!
//! `cargo bench --bench pod_path -- --warm-up-time 1 --measurement-time 5`

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::webhooks::{self, Webhook};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};
use time::macros::datetime;

const NAMESPACE: &str = "monitoring";

/// The typical bench pod, owned by the CloneSet `web`.
fn pod() -> Value {
    let mut pod = support::typical_pod();
    pod["metadata"]["namespace"] = json!(NAMESPACE);
    pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "name": "web", "uid": "cs-uid", "controller": true}]);
    pod
}

/// The CloneSet, a WorkloadSpread over it (a full subset, then one with room), a budget selecting
/// its pods, and the three SidecarSets that match the pod.
fn cluster(pod: &Value) -> Vec<Value> {
    let labels = pod["metadata"]["labels"].clone();
    let mut objects = support::matching_sets(pod);
    objects.push(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": NAMESPACE, "uid": "cs-uid"},
        "spec": {"replicas": 10, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}}}}));
    objects.push(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
        "metadata": {"name": "web", "namespace": NAMESPACE, "resourceVersion": "7"},
        "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
            "subsets": [
                {"name": "zone-a", "maxReplicas": 2, "tolerations": [{"key": "zone", "operator": "Equal", "value": "a", "effect": "NoSchedule"}]},
                {"name": "zone-b", "maxReplicas": "50%",
                 "requiredNodeSelectorTerm": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                 "patch": {"metadata": {"labels": {"zone": "b"}}}}]},
        "status": {"observedGeneration": 1, "subsetStatuses": [
            {"name": "zone-a", "replicas": 2, "missingReplicas": 0},
            {"name": "zone-b", "replicas": 1, "missingReplicas": 4}]}}));
    objects.push(json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": NAMESPACE, "resourceVersion": "9"},
        "spec": {"selector": {"matchLabels": labels}, "maxUnavailable": 2},
        "status": {"totalReplicas": 10, "desiredAvailable": 8, "currentAvailable": 10, "unavailableAllowed": 2}}));
    objects
}

/// The pod as the create stored it, Running and Ready: what an eviction reads.
fn stored(created: &Value) -> Value {
    let mut pod = created.clone();
    pod["metadata"]["name"] = json!("web-abcde");
    pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    pod
}

fn eviction() -> AdmissionRequest<'static> {
    decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "evict-bench", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "namespace": NAMESPACE, "name": "web-abcde", "operation": "CREATE",
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-abcde", "namespace": NAMESPACE}}}}))
    .expect("review")
}

fn webhook(path: &str) -> &'static Webhook {
    webhooks::by_path(path).expect("served")
}

/// `request` through `webhook` against `cluster`, its lookups answered from the cluster; returns
/// the decision's patch length and writes, for the checks before timing.
fn decide(webhook: &Webhook, request: &AdmissionRequest, cluster: &Snapshot) -> (bool, usize, usize) {
    let (settings, empty) = (Settings::default(), Answers::default());
    let (clock, random) = (FixedClock(datetime!(2026-12-07 10:00 UTC)), SeededRandom::new(1));
    let inputs = Inputs { cluster, answers: &empty, clock: &clock, random: &random, settings: &settings };
    let answers = Answers::from_snapshot(cluster, &webhooks::queries(webhook, request, &inputs));
    let decision = webhooks::decide(webhook, request, &Inputs { answers: &answers, ..inputs });
    (decision.allowed, decision.patch.len(), decision.writes.len())
}

fn pod_path(c: &mut Criterion) {
    let pod = pod();
    let create = decode_review(support::pod_review(&pod)).expect("review");
    let full = Snapshot::from_objects(cluster(&pod));
    let _ = full.sidecarset_index();
    let empty = Snapshot::default();
    let mutate = webhook("/mutate-pod");
    let (allowed, patched, writes) = decide(mutate, &create, &full);
    assert!(allowed && patched > 0 && writes == 1, "every step fires and the WorkloadSpread write is built");
    let (allowed, patched, writes) = decide(mutate, &create, &empty);
    // Only the readiness gate (the pod's controller is a CloneSet) and no write.
    assert!(
        allowed && patched == 1 && writes == 0,
        "the floor adds the readiness gate only: {patched} {writes}"
    );

    let mutated = webhooks::run_offline(
        mutate,
        &create,
        &Inputs {
            cluster: &full,
            answers: &Answers::default(),
            clock: &FixedClock(datetime!(2026-12-07 10:00 UTC)),
            random: &SeededRandom::new(1),
            settings: &Settings::default(),
        },
    )
    .mutated
    .expect("the mutated pod");
    let mut with_pod = cluster(&pod);
    with_pod.push(stored(&mutated));
    let evict_cluster = Snapshot::from_objects(with_pod);
    let evict = eviction();
    let validate = webhook("/validate-pod");
    let (allowed, _, writes) = decide(validate, &evict, &evict_cluster);
    assert!(
        allowed && writes == 2,
        "the eviction is allowed and writes the WorkloadSpread and the budget: {allowed} {writes}"
    );

    let mut group = c.benchmark_group("pod-path");
    group.bench_function("mutate-pod/floor (empty cluster)", |b| {
        b.iter(|| black_box(decide(mutate, &create, &empty)))
    });
    group.bench_function("mutate-pod/WorkloadSpread+PUB+3 SidecarSets", |b| {
        b.iter(|| black_box(decide(mutate, &create, &full)))
    });
    group.bench_function("validate-pod/eviction (WorkloadSpread+PUB)", |b| {
        b.iter(|| black_box(decide(validate, &evict, &evict_cluster)))
    });
    group.finish();
}

criterion_group!(benches, pod_path);
criterion_main!(benches);
