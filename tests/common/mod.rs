//! Helpers shared by the integration tests and benches (`#[path = "../tests/common/mod.rs"]`).
#![allow(dead_code)] // each test crate uses a different subset

use std::path::PathBuf;

/// The read-only `shared/` folder with the spec and fixtures: `$KRUISE_SHARED_DIR`, else the
/// repository's sibling `../shared` (how CI lays it out), else `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("KRUISE_SHARED_DIR") {
        return PathBuf::from(dir);
    }
    let sibling = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if sibling.is_dir() {
        return sibling;
    }
    PathBuf::from("/work/shared")
}

/// Every recorded AdmissionReview file, sorted by name.
pub fn recorded_reviews() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(shared_dir().join("fixtures/recorded"))
        .expect("shared/fixtures/recorded must exist (set KRUISE_SHARED_DIR)")
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
pub mod server;
