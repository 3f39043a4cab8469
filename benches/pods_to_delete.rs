//! CloneSet `scaleStrategy.podsToDelete` is compared in linear time (issue 17.3): an UPDATE whose
//! old and new lists each hold 25,000, 50,000, 100,000 and 200,000 names, none shared, so every
//! new name is looked for in the old list. The webhook's `queries` (what a request asks the API
//! server) and its decision (the names read back from one list of the CloneSet's pods, here
//! answered empty, so every name is refused and the first hundred are reported) are timed apart.
//! Linear means each doubling about doubles the time; the old code (a `Vec::contains` per name)
//! took about 53 s for 200,000 names.
//!
//! `cargo bench --bench pods_to_delete -- --warm-up-time 1 --measurement-time 5`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::webhooks::{self, Webhook};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};
use time::macros::datetime;

fn cloneset(names: Vec<String>) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "uid": "cs-uid"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}},
            "scaleStrategy": {"podsToDelete": names},
            "updateStrategy": {"type": "ReCreate", "maxUnavailable": 1}
        }
    })
}

fn update(n: usize) -> AdmissionRequest<'static> {
    let names = |prefix: &str| (0..n).map(|i| format!("{prefix}-{i:06}")).collect::<Vec<_>>();
    decode_review(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "operation": "UPDATE", "namespace": "shop", "name": "web",
            "kind": {"group": "apps.kruise.io", "version": "v1alpha1", "kind": "CloneSet"},
            "resource": {"group": "apps.kruise.io", "version": "v1alpha1", "resource": "clonesets"},
            "object": cloneset(names("new")), "oldObject": cloneset(names("old"))
        }
    }))
    .expect("a well-formed review")
}

fn bench(c: &mut Criterion) {
    let webhook: &Webhook =
        webhooks::by_path("/validate-apps-kruise-io-v1alpha1-cloneset").expect("registered");
    let snapshot = Snapshot::from_objects([]);
    let (clock, random, settings) =
        (FixedClock(datetime!(2026-01-01 00:00 UTC)), SeededRandom::new(1), Settings::default());
    let mut group = c.benchmark_group("pods_to_delete");
    group.sample_size(10);
    for n in [25_000, 50_000, 100_000, 200_000] {
        let request = update(n);
        group.throughput(Throughput::Elements(n as u64));
        let none = Answers::default();
        let probe = Inputs {
            cluster: &snapshot,
            answers: &none,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let queries = (webhook.queries.expect("the CloneSet webhook has lookups"))(&request, &probe);
        assert_eq!(queries.len(), 1, "{n} new names must cost one list");
        group.bench_with_input(BenchmarkId::new("queries", n), &request, |b, request| {
            b.iter(|| black_box((webhook.queries.expect("lookups"))(request, &probe)))
        });
        let answers = Answers::from_snapshot(&snapshot, &queries);
        let inputs = Inputs {
            cluster: &snapshot,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let decision = webhooks::decide(webhook, &request, &inputs);
        assert!(!decision.allowed, "no pod exists, so every name is refused");
        group.bench_with_input(BenchmarkId::new("decide", n), &request, |b, request| {
            b.iter(|| black_box(webhooks::decide(webhook, request, &inputs)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
