//! SidecarSet parsing, and what reads the parsed SidecarSets: arbitrary text read as YAML/JSON
//! documents (the cluster folder's reader), each document
//! - read as a SidecarSet (v1alpha1 or v1beta1); what was read writes back and reads back the same;
//! - sent as a SidecarSet CREATE through the SidecarSet mutating and validating webhooks;
//!
//! then all documents loaded with the example Namespaces into a snapshot, its SidecarSet index
//! built, and `/mutate-pod` run on fixed pods against it: injection from hostile SidecarSets.
//! Every webhook call is checked by `check_webhook` (patch applies to the reported object,
//! re-invocation gives no patch, the pre-check agrees with the mutator, ...).
#![no_main]

use std::sync::OnceLock;

use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::webhooks::{self, Webhook};
use kruise_admission::api::sidecarset::SidecarSet;
use kruise_admission::api::tree::Json;
use kruise_admission::cluster::{Snapshot, files};
use kruise_admission_fuzz::{check_webhook, settings};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// The objects of `examples/cluster` except its SidecarSets (Namespaces, the Kruise configuration).
fn base_objects() -> &'static [Value] {
    static OBJECTS: OnceLock<Vec<Value>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
        let (objects, _) = files::load_objects(&dir).unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        objects
            .into_iter()
            .map(|(_, o)| o)
            .filter(|o| o.get("kind").and_then(Value::as_str) != Some("SidecarSet"))
            .collect()
    })
}

fn webhook(path: &str) -> &'static Webhook {
    webhooks::by_path(path).unwrap_or_else(|| panic!("no webhook at {path}"))
}

fn review(
    kind: Value,
    resource: Value,
    namespace: &str,
    object: &Value,
) -> Option<AdmissionRequest<'static>> {
    decode_review(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz", "kind": kind, "resource": resource, "namespace": namespace, "operation": "CREATE",
            "userInfo": {"username": "fuzz"}, "object": object
        }
    }))
    .ok()
}

/// Pods the example SidecarSets (the seeds) select: every label they look for, containers with
/// the volume mounts and env that sharing and env transfer read, in a selected namespace.
fn pods() -> &'static [AdmissionRequest<'static>] {
    static PODS: OnceLock<Vec<AdmissionRequest<'static>>> = OnceLock::new();
    PODS.get_or_init(|| {
        let labels = json!({
            "app": "web", "mesh.example.com/inject": "true", "mesh.example.com/agent": "hot",
            "logging": "fluent-bit", "auth.example.com/token": "refresh"
        });
        let pod = |namespace: &str, extra: Value| {
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": "web-", "namespace": namespace, "labels": labels, "annotations": extra},
                "spec": {
                    "containers": [{
                        "name": "app", "image": "nginx:1.27",
                        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}, {"name": "MODE", "value": "x"}],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}
                    }],
                    "initContainers": [{"name": "init", "image": "busybox"}],
                    "volumes": [{"name": "data", "emptyDir": {}}]
                }
            })
        };
        let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
        let resource = json!({"group": "", "version": "v1", "resource": "pods"});
        [pod("shop", json!({})), pod("default", json!({"kruise-admission.dev/target-node": "worker-1"}))]
            .iter()
            .filter_map(|p| review(kind.clone(), resource.clone(), p["metadata"]["namespace"].as_str().unwrap_or(""), p))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(documents) = files::read_documents(text) else { return };
    let settings = settings(data.len() as u8);
    let cluster = Snapshot::from_objects(base_objects().iter().cloned());
    for document in documents.iter().filter(|d| d.is_object()) {
        if let Ok(sidecarset) = SidecarSet::from_value(document) {
            let written = serde_json::to_value(&sidecarset)
                .unwrap_or_else(|e| panic!("a parsed SidecarSet does not serialize: {e}"));
            let read = SidecarSet::from_value(&written)
                .unwrap_or_else(|e| panic!("a written SidecarSet does not read back: {e}"));
            assert_eq!(read, sidecarset, "a SidecarSet changed when written and read back");
        }
        let version = match document.get("apiVersion").and_then(Value::as_str) {
            Some("apps.kruise.io/v1alpha1") => "v1alpha1",
            _ => "v1beta1",
        };
        let kind = json!({"group": "apps.kruise.io", "version": version, "kind": "SidecarSet"});
        let resource = json!({"group": "apps.kruise.io", "version": version, "resource": "sidecarsets"});
        if let Some(request) = review(kind, resource, "", document) {
            let mutated =
                check_webhook(webhook("/mutate-apps-kruise-io-sidecarset"), &request, &cluster, &settings);
            let mut validated = request;
            if let Some(mutated) = mutated {
                validated.object = Some(Json::from(mutated));
            }
            check_webhook(webhook("/validate-apps-kruise-io-sidecarset"), &validated, &cluster, &settings);
        }
    }

    // Every document goes into the cluster, as the cluster folder would load it (a SidecarSet whose
    // name the apiserver would refuse is unreadable there: see valid_name in the index).
    let cluster = Snapshot::from_objects(base_objects().iter().cloned().chain(documents));
    let _ = cluster.sidecarset_index();
    for pod in pods() {
        check_webhook(webhook("/mutate-pod"), pod, &cluster, &settings);
    }
});
