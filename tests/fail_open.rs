//! Issue 30.5: every state in which the server lets through what it would otherwise check says so,
//! at start as a WARN and on `/metrics` as a gauge, and each request it lets through that way is
//! counted. Servers on 127.0.0.1 only.

use crate::common;

use common::client::{Proto, http_get};
use common::serve_process::{Serve, addr, cluster_folder};
use common::server::TestServer;
use hyper::StatusCode;
use serde_json::json;

/// Before: only shadow mode and folder-mode lookups said so; serving any client (no
/// `--client-ca-file`) and `--disable-capability` were silent at start. Now each is a WARN with a
/// `fail_open` field, and a gauge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fail_open_state_is_a_warn_at_start_and_a_gauge() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_folder(dir.path());
    let serve = Serve::start(
        dir.path(),
        &["--cluster-dir", cluster.to_str().unwrap(), "--shadow", "--disable-capability", "workload-rules"],
    );
    let lines = serve.until("kruise-admission ready to serve");
    let metrics = addr(lines.last().unwrap(), "metrics");
    let mut states: Vec<&str> =
        lines.iter().filter(|l| l["level"] == "WARN").filter_map(|l| l["fail_open"].as_str()).collect();
    states.sort_unstable();
    assert_eq!(
        states,
        ["capability-disabled", "client-auth-off", "folder-lookups", "shadow"],
        "WARN lines with fail_open: {lines:#?}"
    );
    let (status, text) = http_get(metrics, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    for gauge in [
        "kruise_admission_client_auth_disabled 1",
        r#"kruise_admission_capability_disabled{capability="workload-rules"} 1"#,
        r#"kruise_admission_capability_disabled{capability="pod-mutation"} 0"#,
        r#"kruise_admission_lookup_source{source="cluster-folder"} 1"#,
        "kruise_admission_shadow_mode 1",
    ] {
        assert!(text.contains(gauge), "{gauge} missing from\n{text}");
    }
}

/// A SidecarSet that selects its namespaces by label, and a Pod it would match.
const SIDECARSET: &str = r#"
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: by-label}
spec:
  namespaceSelector: {matchLabels: {team: a}}
  selector: {matchLabels: {app: web}}
  containers: [{name: side, image: busybox}]
"#;

/// Before: a Pod whose Namespace the cluster snapshot did not hold yet silently skipped every
/// SidecarSet with a namespaceSelector, and a DELETE without `oldObject` was allowed uncounted.
/// Now both are counted (and the first is a WARN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_unknown_namespaces_and_deletes_without_old_object_are_counted() {
    let server = TestServer::start().await;
    std::fs::write(server.cluster_dir.join("sidecarset.yaml"), SIDECARSET).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let client = server.client();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "p", "namespace": "newborn", "labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let review = common::pod_create_review(&pod, "newborn");
    let reply = client.post_json(Proto::Http1, "/mutate-pod", review.to_string()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    // A Pod of a known namespace is not counted.
    let reply = client.post_json(Proto::Http1, "/mutate-pod", common::good_review("known").to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    let delete = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "d1", "operation": "DELETE", "namespace": "default", "name": "web",
        "kind": {"group": "apps.kruise.io", "version": "v1alpha1", "kind": "CloneSet"},
        "resource": {"group": "apps.kruise.io", "version": "v1alpha1", "resource": "clonesets"}}});
    let reply = client
        .post_json(Proto::Http1, "/validate-apps-kruise-io-v1alpha1-cloneset", delete.to_string())
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["response"]["allowed"], true);
    let (_, text) = http_get(server.metrics, "/metrics").await;
    for counter in [
        r#"kruise_admission_pod_namespace_unknown_total{name="mpod.kb.io"} 1"#,
        r#"kruise_admission_delete_without_old_object_total{name="vcloneset.kb.io"} 1"#,
    ] {
        assert!(text.contains(counter), "{counter} missing from\n{text}");
    }
    server.stop().await.unwrap();
}
