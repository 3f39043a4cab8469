//! The InPlaceOnly diff is linear in the template size: the largest workload in
//! `tests/fixtures/workloads` (by pod-template size), converted to an InPlaceOnly CloneSet, timed
//! at 1×, 2× and 4× its template (containers, init containers and volumes duplicated under new
//! names), for an update that changes every container's image (allowed, so the whole template is
//! walked). Linear means the 2× and 4× times are about 2 and 4 times the 1× time.
//!
//! `cargo bench --bench inplace_diff -- --warm-up-time 1 --measurement-time 3`

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kruise_admission::admission::inplace::template_diff::first_offending_change;
use kruise_admission::admission::review::decode_review;
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::files::read_documents;
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};
use time::macros::datetime;

const WORKLOAD_KINDS: [&str; 5] = ["Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "CloneSet"];

/// `(file, name, pod template)` of the workload with the largest pod template.
fn largest_workload() -> (String, String, Value) {
    let dir = common::fixtures_dir().join("workloads");
    let mut best: Option<(usize, String, String, Value)> = None;
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).expect("fixtures/workloads").map(|e| e.expect("entry").path()).collect();
    files.sort();
    for path in files {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let Ok(docs) = read_documents(&text) else { continue };
        for doc in docs {
            let kind = doc.get("kind").and_then(Value::as_str).unwrap_or_default();
            let Some(template) = doc.pointer("/spec/template").filter(|_| WORKLOAD_KINDS.contains(&kind))
            else {
                continue;
            };
            let size = template.to_string().len();
            if best.as_ref().is_none_or(|b| size > b.0) {
                let name = format!(
                    "{kind}/{}",
                    doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("?")
                );
                let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                best = Some((size, file, name, template.clone()));
            }
        }
    }
    let (_, file, name, template) = best.expect("a workload with a pod template");
    (file, name, template)
}

/// The template with its named lists repeated `factor` times (copies renamed `-copyN`).
fn scaled(template: &Value, factor: usize) -> Value {
    let mut t = template.clone();
    for key in ["containers", "initContainers", "volumes"] {
        let Some(items) = t.pointer_mut(&format!("/spec/{key}")).and_then(Value::as_array_mut) else {
            continue;
        };
        let originals = items.clone();
        for copy in 1..factor {
            for item in &originals {
                let mut item = item.clone();
                if let Some(name) = item.get("name").and_then(Value::as_str) {
                    item["name"] = json!(format!("{name}-copy{copy}"));
                }
                items.push(item);
            }
        }
    }
    t
}

fn cloneset(template: Value) -> Value {
    let labels = template.pointer("/metadata/labels").cloned().unwrap_or_else(|| json!({"app": "bench"}));
    json!({
        "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "bench", "namespace": "default", "uid": "u"},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": template,
                 "updateStrategy": {"type": "InPlaceOnly", "maxUnavailable": 1}}
    })
}

/// The same CloneSet with every container image bumped: an allowed InPlaceOnly update.
fn bumped(cs: &Value) -> Value {
    let mut new = cs.clone();
    if let Some(containers) = new.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut)
    {
        for c in containers {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("img");
            c["image"] = json!(format!("{image}-next"));
        }
    }
    new
}

fn bench(c: &mut Criterion) {
    let (file, name, template) = largest_workload();
    eprintln!("largest workload: {name} in {file}");
    let settings = Settings::default();
    let snapshot = Snapshot::default();
    let answers = Answers::default();
    let clock = FixedClock(datetime!(2026-01-01 00:00 UTC));
    let random = SeededRandom::new(1);
    let inputs =
        Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let webhook = webhooks::by_path("/validate-apps-kruise-io-v1alpha1-cloneset").expect("registered");

    let mut diff_group = c.benchmark_group("inplace_diff");
    let mut cases = Vec::new();
    for factor in [1usize, 2, 4] {
        let old = cloneset(scaled(&template, factor));
        let new = bumped(&old);
        let bytes = old["spec"]["template"]["spec"].to_string().len();
        assert_eq!(
            first_offending_change(&old["spec"]["template"]["spec"], &new["spec"]["template"]["spec"], false),
            None
        );
        diff_group.throughput(Throughput::Bytes(bytes as u64));
        diff_group.bench_with_input(
            BenchmarkId::new("first_offending_change", format!("{factor}x_{bytes}B")),
            &(&old, &new),
            |b, (old, new)| {
                b.iter(|| {
                    first_offending_change(
                        black_box(&old["spec"]["template"]["spec"]),
                        black_box(&new["spec"]["template"]["spec"]),
                        false,
                    )
                })
            },
        );
        cases.push((factor, bytes, old, new));
    }
    diff_group.finish();

    let mut run_group = c.benchmark_group("vcloneset_update");
    for (factor, bytes, old, new) in &cases {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "apps.kruise.io", "version": "v1alpha1", "kind": "CloneSet"},
            "resource": {"group": "apps.kruise.io", "version": "v1alpha1", "resource": "clonesets"},
            "name": "bench", "namespace": "default", "operation": "UPDATE", "object": new, "oldObject": old}});
        let request = decode_review(review).expect("review");
        assert!(webhooks::run(webhook, &request, &inputs).decision.allowed);
        run_group.throughput(Throughput::Bytes(*bytes as u64));
        run_group.bench_with_input(
            BenchmarkId::new("webhooks_run", format!("{factor}x_{bytes}B")),
            &request,
            |b, request| b.iter(|| webhooks::run(webhook, black_box(request), &inputs)),
        );
    }
    run_group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
