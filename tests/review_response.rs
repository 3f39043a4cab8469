//! `review::review_response` writes the AdmissionReview answer straight into bytes (issue 20.3):
//! they must stay the bytes serde_json wrote for the same object built as `Value`s, as it did
//! before (the apiserver reads any member order and spacing, but the golden outputs, recorded
//! answers and whoever diffs them do not). Compared here on every recorded review through every
//! webhook that matches it, on every pod we have through `/mutate-pod` with the example cluster
//! (sidecars injected: large patches), and on hand-made decisions whose strings need escaping.

use crate::common;

use kruise_admission::admission::patch::PatchOp;
use kruise_admission::admission::review::{
    self, AdmissionError, Decision, ReviewVersion, decode_error_decision, decode_review, review_response,
};
use kruise_admission::admission::webhooks;
use kruise_admission::cluster::files::read_documents;
use serde_json::{Map, Value, json};

/// The answer as serde_json writes it from `Value`s: the object `review_response` built before it
/// wrote bytes, kept here as the oracle.
fn as_serde_json_writes_it(version: ReviewVersion, uid: &str, decision: &Decision) -> Vec<u8> {
    use base64::Engine as _;
    let mut response = Map::new();
    response.insert("uid".into(), Value::String(uid.to_owned()));
    response.insert("allowed".into(), Value::Bool(decision.allowed));
    if let Some(status) = &decision.status {
        response.insert(
            "status".into(),
            json!({
                "status": if decision.allowed { "Success" } else { "Failure" },
                "message": status.message,
                "reason": status.reason,
                "code": status.code,
            }),
        );
    }
    if !decision.patch.is_empty() {
        let patch = serde_json::to_vec(&decision.patch).unwrap();
        response.insert("patchType".into(), Value::String("JSONPatch".into()));
        response
            .insert("patch".into(), Value::String(base64::engine::general_purpose::STANDARD.encode(patch)));
    }
    if !decision.warnings.is_empty() {
        response
            .insert("warnings".into(), decision.warnings.iter().map(|w| Value::String(w.clone())).collect());
    }
    serde_json::to_vec(&json!({
        "apiVersion": version.api_version(),
        "kind": "AdmissionReview",
        "response": Value::Object(response),
    }))
    .unwrap()
}

/// What was compared, to show the comparison covered every member.
#[derive(Default, Debug)]
struct Seen {
    answers: usize,
    patches: usize,
    statuses: usize,
    warnings: usize,
}

impl Seen {
    fn check(&mut self, what: &str, version: ReviewVersion, uid: &str, decision: &Decision) {
        let bytes = review_response(version, uid, decision);
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            String::from_utf8_lossy(&as_serde_json_writes_it(version, uid, decision)),
            "{what}"
        );
        self.answers += 1;
        self.patches += usize::from(!decision.patch.is_empty());
        self.statuses += usize::from(decision.status.is_some());
        self.warnings += usize::from(!decision.warnings.is_empty());
    }
}

#[test]
fn the_answer_is_the_text_serde_json_writes_for_every_recorded_review_and_pod() {
    let mut seen = Seen::default();
    common::with_example_and_empty_cluster(|inputs| {
        for path in common::recorded_reviews() {
            let text = std::fs::read_to_string(&path).unwrap();
            let Some(document) = read_documents(&text).ok().and_then(|mut docs| docs.pop()) else { continue };
            let what = path.display().to_string();
            match decode_review(document) {
                Ok(request) => {
                    for webhook in webhooks::matching(&request) {
                        let decision = webhooks::decide(webhook, &request, inputs);
                        seen.check(
                            &format!("{what} {}", webhook.path),
                            request.version,
                            &request.uid,
                            &decision,
                        );
                    }
                }
                Err(error) => {
                    if let Some((version, uid, decision)) = decode_error_decision(&error) {
                        assert_eq!(
                            review::decode_error_response(&error),
                            Some(as_serde_json_writes_it(version, uid, &decision)),
                            "{what}"
                        );
                    }
                }
            }
        }
        let mutate_pod = webhooks::by_path("/mutate-pod").expect("registered");
        for (name, mut pod) in common::workload_template_pods() {
            // Selected by every SidecarSet of the example cluster.
            let labels = pod["metadata"]["labels"].as_object_mut().map(std::mem::take).unwrap_or_default();
            pod["metadata"]["labels"] = json!({"mesh.example.com/inject": "true", "logging": "fluent-bit",
                "mesh.example.com/agent": "enabled", "auth.example.com/token": "refresh"});
            pod["metadata"]["labels"].as_object_mut().unwrap().extend(labels);
            let mut review = common::pod_create_review(&pod, "shop");
            // The older API version's answer, and each pod's own uid.
            review["apiVersion"] = json!("admission.k8s.io/v1beta1");
            review["request"]["uid"] = json!(name);
            let request = decode_review(review).unwrap();
            let decision = webhooks::decide(mutate_pod, &request, inputs);
            seen.check(&name, request.version, &request.uid, &decision);
        }
    });
    println!("{seen:?}");
    assert!(seen.answers > 60 && seen.patches > 20 && seen.statuses > 0 && seen.warnings > 20, "{seen:?}");
}

#[test]
fn the_answer_is_the_text_serde_json_writes_for_strings_that_need_escaping() {
    let odd = "quote \" backslash \\ slash / newline \n tab \t nul \u{0} bell \u{7} del \u{7f} é ✓ 🦀 \u{2028} </script>";
    let patch = vec![
        PatchOp::add("/metadata/annotations/a~1b", json!({"k": odd, "n": [1, -2, 1.5, 1e300, null, true]})),
        PatchOp::Replace { path: format!("/spec/{odd}"), value: json!(odd).into() },
        PatchOp::Remove { path: "/spec/x".into() },
    ];
    let mut seen = Seen::default();
    for version in [ReviewVersion::V1, ReviewVersion::V1Beta1] {
        for uid in ["", "u", odd] {
            for error in [AdmissionError::Forbidden(odd.into()), AdmissionError::Internal(String::new())] {
                seen.check(uid, version, uid, &Decision::deny(&error));
            }
            for patch in [Vec::new(), patch.clone(), patch[..1].to_vec()] {
                for warnings in [Vec::new(), vec![odd.to_owned(), String::new()]] {
                    let decision = Decision { patch: patch.clone(), warnings, ..Decision::allow() };
                    seen.check(uid, version, uid, &decision);
                }
            }
            // Allowed with a status: "Success".
            let mut allowed = Decision::deny(&AdmissionError::BadRequest(odd.into()));
            allowed.allowed = true;
            seen.check(uid, version, uid, &allowed);
        }
    }
    assert!(seen.patches > 0 && seen.statuses > 0 && seen.warnings > 0, "{seen:?}");
}
