//! `/validate-pod` through both edges: `dry-run -o json` lists the PodUnavailableBudget write an
//! allowed deletion or eviction would make (none for a refusal or a dry run), and the real HTTPS
//! server answers every review as `dry-run` does.

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::client::BOTH;
use common::server::TestServer;
use kruise_admission::admission::FixedClock;
use serde_json::{Value, json};
use time::macros::datetime;

const NOW: &str = "2026-07-02T09:56:09Z";

/// The budget `web` of namespace `shop`, allowing `allowed` more unavailable pods.
fn budget(allowed: i64) -> Value {
    json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "41"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
        "status": {"observedGeneration": 1, "desiredAvailable": 2, "currentAvailable": 3, "totalReplicas": 3,
            "unavailableAllowed": allowed, "disruptedPods": {"web-9": "2026-07-02T09:00:00Z"}}})
}

/// A ready pod the budget guards (the related-pub annotation /mutate-pod put there).
fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop", "labels": {"app": "web"},
            "annotations": {"kruise.io/related-pub": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A cluster folder with namespace `shop`, the budget and the pods `web-0` and `web-1`.
fn cluster(dir: &Path, allowed: i64) -> PathBuf {
    let cluster = dir.join("cluster");
    std::fs::create_dir_all(&cluster).unwrap();
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        budget(allowed), pod("web-0"), pod("web-1")]});
    std::fs::write(cluster.join("objects.json"), objects.to_string()).unwrap();
    cluster
}

fn review(operation: &str, sub_resource: &str, object: Value, old: Value, dry_run: bool) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "3f1c", "kind": {"group": if sub_resource.is_empty() { "" } else { "policy" }, "version": "v1",
            "kind": if sub_resource.is_empty() { "Pod" } else { "Eviction" }},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": sub_resource,
        "namespace": "shop", "name": "web-0", "operation": operation, "userInfo": {"username": "alice"},
        "object": object, "oldObject": old, "dryRun": dry_run}})
}

fn delete(dry_run: bool) -> Value {
    review("DELETE", "", Value::Null, pod("web-0"), dry_run)
}

fn eviction(delete_options: Value) -> Value {
    let eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "shop"}, "deleteOptions": delete_options});
    review("CREATE", "eviction", eviction, Value::Null, false)
}

/// `dry-run` on one review: its exit code and its one output line.
fn dry_run(cluster: &Path, output: &str, review: &Value) -> (Option<i32>, Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--now", NOW, "--output", output, "--cluster-dir"])
        .arg(cluster)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child.stdin.take().unwrap().write_all(review.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), serde_json::from_str(lines[0]).expect("JSON"))
}

#[test]
fn dry_run_lists_the_budget_write_of_an_allowed_deletion() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path(), 1);
    for request in [delete(false), eviction(Value::Null)] {
        let (code, line) = dry_run(&cluster, "json", &request);
        assert_eq!((code, &line["allowed"]), (Some(0), &json!(true)), "{line}");
        let writes = line["writes"].as_array().expect("writes");
        assert_eq!(writes.len(), 1, "{line}");
        let write = &writes[0];
        assert_eq!(
            (&write["verb"], &write["subresource"], &write["apiVersion"], &write["kind"]),
            (
                &json!("update"),
                &json!("status"),
                &json!("policy.kruise.io/v1alpha1"),
                &json!("PodUnavailableBudget")
            )
        );
        assert_eq!((&write["namespace"], &write["name"]), (&json!("shop"), &json!("web")));
        let mut expected = budget(1);
        expected["status"]["unavailableAllowed"] = json!(0);
        expected["status"]["disruptedPods"]["web-0"] = json!(NOW);
        assert_eq!(write["object"], expected, "the budget as read, its status recording web-0");
    }
}

#[test]
fn refusals_and_dry_runs_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let spent = cluster(dir.path(), 0);
    for request in [delete(false), eviction(json!({"dryRun": ["All"]}))] {
        let (code, line) = dry_run(&spent, "json", &request);
        assert_eq!(code, Some(1), "{line}");
        assert_eq!(line["status"]["code"], 403);
        assert_eq!(
            line["status"]["message"],
            "podunavailablebudget.policy.kruise.io \"web\" is forbidden: pub unavailable allowed is negative"
        );
        assert_eq!(line["writes"], json!([]));
    }
    let other = tempfile::tempdir().unwrap();
    let open = cluster(other.path(), 1);
    // The API server's dryRun, and kubectl drain --dry-run=server (the Eviction's own options).
    for request in [delete(true), eviction(json!({"dryRun": ["All"]}))] {
        let (code, line) = dry_run(&open, "json", &request);
        assert_eq!((code, &line["allowed"], &line["writes"]), (Some(0), &json!(true), &json!([])), "{line}");
    }
    // The eviction of a pod the cluster does not have.
    let mut missing = eviction(Value::Null);
    missing["request"]["name"] = json!("web-7");
    let (code, line) = dry_run(&open, "json", &missing);
    assert_eq!((code, &line["status"]["code"]), (Some(1), &json!(400)), "{line}");
    assert_eq!(line["status"]["message"], "pods \"web-7\" not found");
}

#[tokio::test]
async fn serve_answers_as_dry_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let open = cluster(&dir.path().join("open"), 1);
    let spent = cluster(&dir.path().join("spent"), 0);
    for cluster_dir in [open, spent] {
        let server = TestServer::start_with(|config| {
            config.cluster_dir = cluster_dir.clone();
            config.clock = Arc::new(FixedClock(datetime!(2026-07-02 09:56:09 UTC)));
        })
        .await;
        let client = server.client();
        for request in [delete(false), eviction(Value::Null), delete(true)] {
            let (_, offline) = dry_run(&cluster_dir, "review", &request);
            for proto in BOTH {
                let reply = client.post_json(proto, "/validate-pod", request.to_string()).await;
                assert_eq!(reply.status, 200);
                let online: Value = serde_json::from_slice(&reply.body).unwrap();
                assert_eq!(online, offline, "over {proto:?}");
            }
        }
        server.stop().await.expect("clean stop");
    }
}
