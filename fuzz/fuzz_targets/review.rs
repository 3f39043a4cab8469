//! Review decoding, routing and every webhook's decision, on arbitrary bytes, as `serve` sees
//! them: bytes → JSON → `decode_review` (and `decode_review_body`, which must agree) → the routing table → each webhook of `WEBHOOKS` (a client
//! can post any review to any path), against the cluster in `examples/cluster` plus a few objects
//! the lookups find. Properties: see `check_webhook`; the routing table agrees with itself
//! (`matching` lists only webhooks whose rules match, mutating ones first; `by_path` finds each);
//! an undecodable review is answered or refused without panicking.
#![no_main]

use std::sync::OnceLock;

use kruise_admission::admission::review::{self, decode_review};
use kruise_admission::admission::review_cost::review_cost;
use kruise_admission::admission::webhooks::{self, WEBHOOKS, WebhookKind};
use kruise_admission::cluster::{Snapshot, files};
use kruise_admission_fuzz::{check_webhook, settings};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

/// `examples/cluster`, plus what the lookups of delete protection and CloneSet validation read:
/// active and finished pods, a Bound PVC and custom resources, in namespaces the seeds name.
fn cluster() -> &'static Snapshot {
    static CLUSTER: OnceLock<Snapshot> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
        let (objects, _) = files::load_objects(&dir).unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        let mut objects: Vec<Value> = objects.into_iter().map(|(_, o)| o).collect();
        for namespace in ["default", "shop"] {
            for (name, phase) in [("web-0", "Running"), ("web-1", "Pending"), ("job-0", "Succeeded")] {
                objects.push(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx"}]},
                    "status": {"phase": phase}
                }));
            }
            objects.push(json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "data", "namespace": namespace},
                "spec": {"accessModes": ["ReadWriteOnce"]},
                "status": {"phase": "Bound"}
            }));
            objects.push(json!({
                "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
                "metadata": {"name": "web", "namespace": namespace},
                "spec": {"endpoints": [{"port": "http"}]}
            }));
        }
        Snapshot::from_objects(objects)
    })
}

fuzz_target!(|data: &[u8]| {
    // `serve` decodes straight from the body, building only the parts `review_cost` selected;
    // on any bytes it must give the answer of the whole-document parse `dry-run` uses.
    let whole = serde_json::from_slice::<Value>(data).map(decode_review);
    let streamed = review::decode_review_body(data, review_cost(data).parts());
    assert_eq!(
        format!("{:?}", streamed.as_ref().map_err(ToString::to_string)),
        format!("{:?}", whole.as_ref().map_err(ToString::to_string)),
        "decode_review_body differs from serde_json::from_slice + decode_review"
    );
    let Ok(decoded) = whole else { return };
    let request = match decoded {
        Ok(request) => request,
        Err(error) => {
            if let (Some(response), Some((_, uid))) =
                (review::decode_error_response(&error), &error.answerable)
            {
                let response: Value = serde_json::from_slice(&response).expect("the response is JSON");
                assert_eq!(response.pointer("/response/uid").and_then(Value::as_str), Some(uid.as_str()));
            }
            return;
        }
    };

    let matching: Vec<_> = webhooks::matching(&request).collect();
    assert!(
        matching.iter().all(|w| w.matches(&request)),
        "matching() lists a webhook whose rules do not match"
    );
    assert!(
        matching
            .windows(2)
            .all(|p| !(p[0].kind() == WebhookKind::Validating && p[1].kind() == WebhookKind::Mutating)),
        "matching() puts a validating webhook before a mutating one"
    );
    assert_eq!(matching.len(), WEBHOOKS.iter().filter(|w| w.matches(&request)).count());

    let settings = settings(data.len() as u8);
    for webhook in WEBHOOKS {
        assert!(webhooks::by_path(webhook.path).is_some_and(|w| std::ptr::eq(w, webhook)));
        check_webhook(webhook, &request, cluster(), &settings);
    }
});
