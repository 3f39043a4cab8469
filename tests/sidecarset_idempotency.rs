//! Idempotency over real payloads: every recorded Pod CREATE in `shared/fixtures/recorded/`, run
//! through the example SidecarSets of `examples/cluster/` (as they are, and rewritten so they match
//! every pod), is injected, the patch applies independently, and `/mutate-pod` on its own output
//! yields no patch.

mod common;

use std::path::Path;

use kruise_admission::admission::review::{Operation, decode_review};
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::files::{load_dir, read_documents};
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};

fn example_objects() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster");
    let mut objects = Vec::new();
    for entry in walk(&dir) {
        let text = std::fs::read_to_string(&entry).expect("readable example");
        objects.extend(read_documents(&text).expect("valid example"));
    }
    // The examples load as a folder too (what `serve` and `dry-run` do).
    let (snapshot, warnings) = load_dir(&dir).expect("examples load");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(snapshot.sidecarset_index().len() >= 4, "the example SidecarSets are indexed");
    assert!(snapshot.sidecarset_index().unreadable().is_empty(), "{:?}", snapshot.sidecarset_index().unreadable());
    objects
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("examples dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
    out
}

/// The examples, with selectors that match every pod in every namespace.
fn match_everything(objects: &[Value]) -> Vec<Value> {
    objects
        .iter()
        .cloned()
        .map(|mut o| {
            if o["kind"] == "SidecarSet"
                && let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert(
                    "selector".into(),
                    json!({"matchExpressions": [{"key": "kruise-admission.dev/never-set", "operator": "DoesNotExist"}]}),
                );
                spec.remove("namespace");
                spec.remove("namespaceSelector");
            }
            o
        })
        .collect()
}

fn pod_creates() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for path in common::recorded_reviews() {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        // Malformed captures (no object, no spec) are refused with 400 before injection; not ours.
        let Ok(docs) = read_documents(&text) else { continue };
        for review in docs {
            let Ok(request) = decode_review(review.clone()) else { continue };
            if request.kind.kind == "Pod"
                && request.operation == Operation::Create
                && request.sub_resource.is_empty()
                && request.object.as_ref().is_some_and(|o| o.get("spec").is_some_and(Value::is_object))
            {
                out.push((path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned(), review));
            }
        }
    }
    out
}

fn with_object(review: &Value, object: &Value) -> Value {
    let mut review = review.clone();
    review["request"]["object"] = object.clone();
    review
}

fn run_all(snapshot: &Snapshot, expect_injection: bool) {
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(7);
    let settings = Settings::default();
    let answers = Answers::default();
    let inputs = Inputs { cluster: snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let creates = pod_creates();
    assert!(creates.len() >= 10, "expected the recorded pod creates, found {}", creates.len());
    for (name, review) in creates {
        let request = decode_review(review.clone()).expect("decodes");
        let first = webhooks::run(webhook, &request, &inputs);
        assert!(first.decision.allowed, "{name}: denied {:?}", first.decision.status);
        let mutated = first.mutated.expect("mutated object");
        if expect_injection {
            assert!(!first.decision.patch.is_empty(), "{name}: nothing injected");
            assert!(mutated.pointer("/metadata/annotations/kruise.io~1sidecarset-injected-list").is_some(), "{name}");
        }
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&first.decision.patch).expect("patch json")).expect("patch");
        let mut applied = request.object.clone().expect("object");
        json_patch::patch(&mut applied, &patch).unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
        assert_eq!(applied, mutated, "{name}: patch and mutated object differ");

        let again = decode_review(with_object(&review, &mutated)).expect("decodes");
        let second = webhooks::run(webhook, &again, &inputs);
        assert!(second.decision.allowed, "{name}: second run denied {:?}", second.decision.status);
        assert!(second.decision.patch.is_empty(), "{name}: second run patched {:?}", second.decision.patch);
    }
}

#[test]
fn recorded_pod_creates_with_the_examples_as_they_are() {
    run_all(&Snapshot::from_objects(example_objects()), false);
}

#[test]
fn recorded_pod_creates_with_every_example_matching() {
    run_all(&Snapshot::from_objects(match_everything(&example_objects())), true);
}
