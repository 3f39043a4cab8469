//! A SidecarSet CREATE through `kruise-admission dry-run`: defaulted and hashed by the mutating
//! webhook and validated, in one run; a pod created afterwards (the admitted SidecarSet in the
//! cluster folder) gets the hash entries Kruise writes
//! (docs/sidecarset.md#7-pod-annotations, docs/sidecarset.md#8-the-sidecarset-hash).

use std::process::{Command, Output};

use serde_json::{Value, json};

fn dry_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .arg("dry-run")
        .args(args)
        .output()
        .expect("the binary runs")
}

fn line(output: &Output) -> Value {
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.lines().next().expect("one line per input")).expect("JSON output")
}

fn sidecarset_review(object: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "ss-1", "operation": "CREATE", "name": object["metadata"]["name"],
        "kind": {"group": "apps.kruise.io", "version": "v1beta1", "kind": "SidecarSet"},
        "resource": {"group": "apps.kruise.io", "version": "v1beta1", "resource": "sidecarsets"},
        "object": object}})
}

#[test]
fn sidecarset_create_then_pod_create() {
    let dir = tempfile::tempdir().unwrap();
    let sidecarset = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "sidecarset1"},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "dns-f", "image": "dns:1.0"}]}});
    let review = dir.path().join("sidecarset.json");
    std::fs::write(&review, sidecarset_review(sidecarset).to_string()).unwrap();
    let out = dry_run(&["--now", "2026-07-02T09:56:09Z", review.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = line(&out);
    assert_eq!(result["allowed"], true);
    let paths: Vec<&str> =
        result["webhooks"].as_array().unwrap().iter().map(|w| w["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["/mutate-apps-kruise-io-sidecarset", "/validate-apps-kruise-io-sidecarset"]);
    let admitted = result["object"].clone();
    assert_eq!(
        admitted["metadata"]["annotations"]["kruise.io/sidecarset-hash"],
        "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684"
    );
    assert_eq!(admitted["spec"]["containers"][0]["podInjectPolicy"], "BeforeAppContainer");

    // The admitted SidecarSet is what the cluster stores; a pod created now gets its hash.
    let cluster = dir.path().join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    std::fs::write(cluster.join("sidecarset1.json"), admitted.to_string()).unwrap();
    let pod_review = dir.path().join("pod.json");
    std::fs::write(
        &pod_review,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "pod-1", "operation": "CREATE", "namespace": "default",
            "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "nginx"}},
                       "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}}}})
        .to_string(),
    )
    .unwrap();
    let out = dry_run(&[
        "--now",
        "2026-07-02T09:56:09Z",
        "--cluster-dir",
        cluster.to_str().unwrap(),
        pod_review.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let pod = line(&out)["object"].clone();
    assert_eq!(
        pod["metadata"]["annotations"]["kruise.io/sidecarset-hash"],
        r#"{"sidecarset1":{"updateTimestamp":"2026-07-02T09:56:09Z","hash":"6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684","sidecarSetName":"sidecarset1","sidecarList":["dns-f"]}}"#
    );
}

#[test]
fn an_invalid_sidecarset_is_denied_with_500_and_kruises_message() {
    let dir = tempfile::tempdir().unwrap();
    let sidecarset = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "no-selector"},
        "spec": {"containers": [{"name": "dns-f", "image": "dns:1.0"}]}});
    let review = dir.path().join("sidecarset.json");
    std::fs::write(&review, sidecarset_review(sidecarset).to_string()).unwrap();
    let out = dry_run(&[review.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let result = line(&out);
    assert_eq!(result["allowed"], false);
    assert_eq!(result["status"]["code"], 500);
    assert_eq!(
        result["status"]["message"],
        "spec.selector: Required value: no selector defined for SidecarSet"
    );
}

/// A revision as Kruise's SidecarSet controller records it (`copySidecarSetSpecRevision`): the
/// fields the SidecarSet has none of are `null`. Pinning it injects its containers and records its
/// name, as Kruise does (docs/sidecarset.md#3-revisions).
#[test]
fn revision_recorded_by_kruise_with_null_fields_is_restored() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    let sidecarset = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "log-agent", "annotations": {"kruise.io/sidecarset-hash": "live-hash",
            "kruise.io/sidecarset-hash-without-image": "live-wi"}},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "log-agent", "image": "fluent-bit:2.1", "podInjectPolicy": "BeforeAppContainer",
                "shareVolumePolicy": {"type": "disabled"}, "upgradeStrategy": {"upgradeType": "ColdUpgrade"}}],
            "injectionStrategy": {"revision": {"revisionName": "log-agent-d874c5bfc", "policy": "Always"}}},
        "status": {"latestRevision": "log-agent-6f7c9d8b5"}});
    let revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "log-agent-d874c5bfc", "namespace": "kruise-system",
            "labels": {"kruise.io/sidecarset-name": "log-agent"},
            "annotations": {"kruise.io/sidecarset-hash": "rev-hash", "kruise.io/sidecarset-hash-without-image": "rev-wi"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "name": "log-agent",
                "uid": "0b7c2f4e-1111-2222-3333-444455556666", "controller": true, "blockOwnerDeletion": true}]},
        "revision": 1,
        "data": {"spec": {"$patch": "replace",
            "containers": [{"name": "log-agent", "image": "fluent-bit:2.0", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent", "podInjectPolicy": "BeforeAppContainer",
                "upgradeStrategy": {"upgradeType": "ColdUpgrade"}, "shareVolumePolicy": {"type": "disabled"}}],
            "imagePullSecrets": null, "initContainers": null, "patchPodMetadata": null, "volumes": null}}});
    std::fs::write(cluster.join("sidecarset.json"), sidecarset.to_string()).unwrap();
    std::fs::write(cluster.join("revision.json"), revision.to_string()).unwrap();
    let pod_review = dir.path().join("pod.json");
    std::fs::write(
        &pod_review,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "pod-1", "operation": "CREATE", "namespace": "default",
            "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
                       "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}}}})
        .to_string(),
    )
    .unwrap();
    let out = dry_run(&[
        "--now",
        "2026-07-02T09:56:09Z",
        "--cluster-dir",
        cluster.to_str().unwrap(),
        pod_review.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result = line(&out);
    assert_eq!(result["allowed"], true, "{result}");
    let pod = &result["object"];
    assert_eq!(pod["spec"]["containers"][0]["name"], "log-agent", "{pod}");
    assert_eq!(pod["spec"]["containers"][0]["image"], "fluent-bit:2.0", "{pod}");
    assert!(pod["spec"].get("volumes").is_none() && pod["spec"].get("initContainers").is_none(), "{pod}");
    assert_eq!(
        pod["metadata"]["annotations"]["kruise.io/sidecarset-hash"],
        r#"{"log-agent":{"updateTimestamp":"2026-07-02T09:56:09Z","hash":"rev-hash","sidecarSetName":"log-agent","sidecarList":["log-agent"],"controllerRevision":"log-agent-d874c5bfc"}}"#
    );
}
