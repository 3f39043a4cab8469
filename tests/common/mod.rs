//! Helpers shared by the integration tests and benches (`#[path = "../tests/common/mod.rs"]`).
#![allow(dead_code)] // each test crate uses a different subset

use std::path::PathBuf;

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
