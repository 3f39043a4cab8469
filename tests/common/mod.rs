//! Helpers shared by the integration tests and benches (`#[path = "../tests/common/mod.rs"]`).
#![allow(dead_code)] // each test crate uses a different subset

use std::path::PathBuf;

use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::files::{load_dir, read_documents};
use kruise_admission::cluster::{Answers, Snapshot};

/// The public fixtures committed with the tests (`tests/fixtures/`, provenance and licences in its
/// `SOURCES.md`): `recorded/` AdmissionReviews and `workloads/` manifests.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every recorded AdmissionReview file, sorted by name.
pub fn recorded_reviews() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir().join("recorded"))
        .expect("tests/fixtures/recorded is part of the repository")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "yaml")))
        .collect();
    files.sort();
    files
}

/// Every recorded review (the last document of its file) that is about a Pod and carries one,
/// with its file.
pub fn recorded_pod_reviews() -> Vec<(PathBuf, AdmissionRequest<'static>)> {
    let mut out = Vec::new();
    for path in recorded_reviews() {
        let text = std::fs::read_to_string(&path).expect("readable");
        let Ok(mut docs) = read_documents(&text) else { continue };
        let Some(doc) = docs.pop() else { continue };
        if let Ok(request) = decode_review(doc)
            && request.kind.kind == "Pod"
            && request.object.is_some()
        {
            out.push((path, request));
        }
    }
    out
}

/// The pod template of every workload in `tests/fixtures/workloads/` as a Pod, named
/// `<file>#<document index>`, files in name order.
pub fn workload_template_pods() -> Vec<(String, serde_json::Value)> {
    let dir = fixtures_dir().join("workloads");
    let mut files: Vec<_> =
        std::fs::read_dir(dir).expect("workloads").map(|e| e.expect("entry").path()).collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let Ok(docs) = read_documents(&std::fs::read_to_string(&path).expect("readable")) else { continue };
        let file = path.file_name().expect("a file name").to_string_lossy().into_owned();
        for (i, doc) in docs.iter().enumerate().filter(|(_, d)| d["spec"]["template"]["spec"].is_object()) {
            let template = &doc["spec"]["template"];
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": template["metadata"], "spec": template["spec"]});
            out.push((format!("{file}#{i}"), pod));
        }
    }
    out
}

/// The `step` label values of the per-step shadow agreement, in `/mutate-pod`'s order: what the
/// live metric and `dry-run --compare` are expected to name.
pub const STEP_NAMES: [&str; 8] = [
    "readiness-gate",
    "workload-spread",
    "sidecarset",
    "launch-priority",
    "related-pub",
    "persistent-pod-state",
    "enhanced-liveness",
    "probe-marker",
];

/// An `admission.k8s.io/v1` CREATE review of `pod` in `namespace`, uid `u`.
pub fn pod_create_review(pod: &serde_json::Value, namespace: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": namespace, "operation": "CREATE", "object": pod}})
}

/// [`pod_create_review`], decoded.
pub fn pod_create(pod: &serde_json::Value, namespace: &str) -> AdmissionRequest<'static> {
    decode_review(pod_create_review(pod, namespace)).expect("review")
}

/// Run `decide` with the inputs of the examples' cluster (`examples/cluster`), then with those of an
/// empty cluster: a fixed clock and seed, default settings, no lookups answered.
pub fn with_example_and_empty_cluster(mut decide: impl FnMut(&Inputs)) {
    let (examples, _) =
        load_dir(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/cluster")).expect("examples");
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let (random, settings, answers) = (SeededRandom::new(7), Settings::default(), Answers::default());
    for snapshot in [&examples, &Snapshot::default()] {
        decide(&Inputs {
            cluster: snapshot,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        });
    }
}

/// A plain pod CREATE review the server must answer with 200 and `allowed`: the "still serving?"
/// probe of the server tests.
pub fn good_review(uid: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
        }
    })
}

/// [`good_review`] padded with an annotation past `review_cost::SCAN_FROM`: a review the server
/// decides on its worker pool, where the internal deadline and the work queue apply (a smaller one
/// is decided inline, where it arrived).
pub fn heavy_review(uid: &str) -> serde_json::Value {
    let mut review = good_review(uid);
    review["request"]["object"]["metadata"]["annotations"] = serde_json::json!({
        "filler": "x".repeat(kruise_admission::admission::review_cost::SCAN_FROM)
    });
    review
}

pub mod client;
pub mod h2;
pub mod serve_process;
pub mod server;

/// Raises this test process's soft open-file limit to its hard limit, once. Tests that flood a
/// server hold both ends of hundreds of connections in one process (the in-process server's too),
/// and a soft limit of 512 or 1024 (CI's, many distributions') is smaller than the hard one.
pub fn raise_open_file_limit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current < limit.maximum || limit.maximum.is_none() {
            limit.current = limit.maximum;
            if let Err(e) = setrlimit(Resource::Nofile, limit) {
                eprintln!("could not raise the open-file limit: {e}");
            }
        }
    });
}
