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

pub mod client;
pub mod server;
