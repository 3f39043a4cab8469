//! Every integration test, built as one test binary. Each file under `tests/` is a module here
//! rather than a crate of its own: 39 binaries each linked the whole crate and its dependencies
//! (minutes of linking and gigabytes of debug executables for every change to `src/`).
//!
//! Run one file's tests with its module name as the filter: `cargo test --test integration serve::`
//! (or `hostile::slow_clients_are_cut_off` for one test). Cargo.toml sets `autotests = false`, so a
//! new `tests/<name>.rs` runs only once it is declared below (or, like `tests/decode_body.rs`, is a
//! `[[test]]` of its own); `every_test_file_is_a_module` fails until it is.
//!
//! The tests share one process and run on parallel threads, so none may change process-wide state
//! another could see: no `std::env::set_var` or `set_current_dir` (give a child process its own
//! environment and directory), the open-file limit only raised through
//! `common::raise_open_file_limit`, and a file that measures the whole process (its resident
//! memory, say) is a test binary of its own (`tests/decode_body.rs`).

// Helpers shared by the test modules (and, for `common`, by benches).
mod common;
mod fake_apiserver;
mod inplace_support;
mod sidecarset_strategies;

mod cli;
mod cli_serve;
mod client_auth;
mod cluster_incremental;
mod connections;
mod doc_links;
mod dry_run;
mod dry_run_agreement;
mod fail_open;
mod golden;
mod hardening;
mod hostile;
mod hostile_load;
mod hostile_logs;
mod http2_refusals;
mod inplace_cloneset;
mod inplace_daemonset;
mod inplace_fixtures;
mod inplace_statefulset;
mod live_certs;
mod live_cluster;
mod live_lookups;
mod manifests;
mod metric_labels;
mod metrics_port;
mod pod_patch_differential;
mod pod_steps;
mod pod_validation;
mod protection;
mod readme;
mod review_response;
mod serve;
mod serve_lifecycle;
mod serve_live;
mod serve_startup;
mod serve_vs_dry_run;
mod shadow;
mod shadow_agreement;
mod sidecarset_admission;
mod sidecarset_conformance;
mod sidecarset_crd;
mod sidecarset_dry_run;
mod sidecarset_idempotency;
mod sidecarset_proptest;

/// `autotests = false` means a test file that is neither declared here nor a `[[test]]` of its
/// own in Cargo.toml is never built: say so instead.
#[test]
fn every_test_file_is_a_module() {
    let root = include_str!("integration.rs");
    let manifest = include_str!("../Cargo.toml");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("tests/") {
        let path = entry.expect("directory entry").path();
        let (Some(stem), Some("rs")) =
            (path.file_stem().and_then(|s| s.to_str()), path.extension().and_then(|e| e.to_str()))
        else {
            continue;
        };
        let own_binary = manifest.contains(&format!("path = \"tests/{stem}.rs\"\n"));
        if !own_binary && !root.contains(&format!("\nmod {stem};\n")) {
            missing.push(format!("tests/{stem}.rs"));
        }
    }
    assert!(
        missing.is_empty(),
        "not in tests/integration.rs nor Cargo.toml, so never built or run: {missing:?}"
    );
}
