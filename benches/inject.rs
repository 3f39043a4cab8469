//! `decide` for `/mutate-pod` (the pure decision the server answers: `webhooks::decide`, i.e. pre-check, copy, injection, stamp and
//! diff) on realistic pods built from `tests/fixtures/workloads/` (the smallest template, the
//! kube-prometheus Grafana pod, the largest template, and the Grafana pod with 2,000 env vars and
//! 200 more volumes) against 0, 10, 1,000 and 10,000 SidecarSets of which 3 match; and the
//! SidecarSet admission mutation (defaults + the two Kruise hashes).
//!
//! `cargo bench --bench inject -- --warm-up-time 1 --measurement-time 3`

#[path = "support/mod.rs"]
mod support;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::webhooks::{self, Webhook};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::json;

/// The fixed inputs every decision here reads besides the snapshot.
struct Fixed {
    clock: FixedClock,
    random: SeededRandom,
    settings: Settings,
    answers: Answers,
}

impl Fixed {
    fn new() -> Self {
        Fixed {
            clock: FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC)),
            random: SeededRandom::new(1),
            settings: Settings::default(),
            answers: Answers::default(),
        }
    }

    fn inputs<'a>(&'a self, cluster: &'a Snapshot) -> Inputs<'a> {
        Inputs {
            cluster,
            answers: &self.answers,
            clock: &self.clock,
            random: &self.random,
            settings: &self.settings,
        }
    }
}

fn check_injects(webhook: &Webhook, request: &AdmissionRequest, inputs: &Inputs, total: usize) {
    let outcome = webhooks::run(webhook, request, inputs);
    assert!(outcome.decision.allowed, "{:?}", outcome.decision.status);
    let injected = outcome
        .mutated
        .as_ref()
        .and_then(|p| p.pointer("/metadata/annotations/kruise.io~1sidecarset-injected-list"))
        .cloned();
    let expected = (total > 0).then(|| json!(support::INJECTED_LIST));
    assert_eq!(injected, expected, "{total} SidecarSets");
}

fn mutate_pod(c: &mut Criterion) {
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let fixed = Fixed::new();
    let mut group = c.benchmark_group("mutate-pod");
    for (name, pod) in support::pods() {
        let request = decode_review(support::pod_review(&pod)).expect("review");
        for total in [0usize, 10, 1_000, 10_000] {
            let snapshot = support::snapshot(&pod, total);
            let inputs = fixed.inputs(&snapshot);
            check_injects(webhook, &request, &inputs, total);
            group.bench_with_input(BenchmarkId::new(name, total), &inputs, |b, inputs| {
                b.iter(|| black_box(webhooks::decide(webhook, black_box(&request), inputs)))
            });
        }
    }
    // The typical pod when none of 10,000 SidecarSets matches: the cost of finding candidates alone.
    let pod = support::typical_pod();
    let request = decode_review(support::pod_review(&pod)).expect("review");
    let snapshot = Snapshot::from_objects((3..10_000).map(support::other_set));
    let _ = snapshot.sidecarset_index();
    let inputs = fixed.inputs(&snapshot);
    assert!(webhooks::run(webhook, &request, &inputs).decision.patch.is_empty());
    group.bench_function("typical/10000-none-match", |b| {
        b.iter(|| black_box(webhooks::decide(webhook, black_box(&request), &inputs)))
    });
    group.finish();
}

fn sidecarset_admission(c: &mut Criterion) {
    let webhook = webhooks::by_path("/mutate-apps-kruise-io-sidecarset").expect("registered");
    let fixed = Fixed::new();
    let snapshot = Snapshot::default();
    let inputs = fixed.inputs(&snapshot);
    let request = decode_review(support::sidecarset_review()).expect("review");
    let outcome = webhooks::run(webhook, &request, &inputs);
    assert!(outcome.decision.allowed && !outcome.decision.patch.is_empty(), "{:?}", outcome.decision.status);
    c.bench_function("sidecarset-admission/mutate", |b| {
        b.iter(|| black_box(webhooks::decide(webhook, black_box(&request), &inputs)))
    });
}

criterion_group!(benches, mutate_pod, sidecarset_admission);
criterion_main!(benches);
