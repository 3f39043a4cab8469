//! Shadow mode (issue 19, point 1), on the binary over real HTTPS: `serve --shadow` decides
//! recorded reviews as usual but answers every one allowed and unchanged, counting and logging
//! what it would have done; the same reviews without `--shadow` are still patched and denied,
//! so the test fails if the switch is ignored in either direction.

use crate::common;

use std::path::Path;

use base64::Engine as _;
use common::client::{Proto, TlsClient, http_get};
use common::serve_process::{Serve, addr};
use hyper::StatusCode;
use serde_json::{Value, json};

/// A SidecarSet that selects the recorded GKE pod (`app: echo-server`), so its CREATE is injected.
const SIDECARSET: &str = "apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: echo-agent
spec:
  selector:
    matchLabels:
      app: echo-server
  containers:
    - name: echo-agent
      image: busybox:1.36
      command: [sleep, '3600']
";

fn recorded(name: &str) -> Value {
    let text =
        std::fs::read_to_string(common::fixtures_dir().join("recorded").join(name)).expect("recorded review");
    serde_json::from_str(&text).expect("JSON")
}

/// One review, where it is sent, and what it is.
struct Case {
    name: &'static str,
    path: &'static str,
    review: Value,
    /// The routing table's name of the webhook (the metric's `webhook` label).
    webhook: &'static str,
    outcome: &'static str,
}

fn cases() -> Vec<Case> {
    // The recorded Deployment DELETE, labelled for delete protection: denied 403.
    let mut protected = recorded("kubewarden-policies-deployment-delete.json");
    protected["request"]["oldObject"]["metadata"]["labels"] =
        json!({"policy.kruise.io/delete-protection": "Always"});
    // A review with a uid but an operation no API server sends: answered inside the review with a
    // 400 denial (the decode-error path, not a webhook's decision).
    let mut bad_operation = common::good_review("bad-operation");
    bad_operation["request"]["operation"] = json!("PATCH");
    vec![
        Case {
            name: "injecting pod CREATE",
            path: "/mutate-pod",
            review: recorded("kube-rs-pod-create-gke.json"),
            webhook: "mpod.kb.io",
            outcome: "would-patch",
        },
        Case {
            name: "protected Deployment DELETE",
            path: "/validate-apps-deployment",
            review: protected,
            webhook: "vbuiltindeployment.kb.io",
            outcome: "would-deny",
        },
        Case {
            name: "pod CREATE without object",
            path: "/mutate-pod",
            review: recorded("connaisseur-pod-create-malformed-no-object.json"),
            webhook: "mpod.kb.io",
            outcome: "would-deny",
        },
        Case {
            name: "undecodable operation",
            path: "/mutate-pod",
            review: bad_operation,
            webhook: "mpod.kb.io",
            outcome: "would-deny",
        },
        Case {
            name: "pod CREATE nothing selects",
            path: "/mutate-pod",
            review: recorded("kubewarden-policies-pod-create-flexvolume.json"),
            webhook: "mpod.kb.io",
            outcome: "no-op",
        },
    ]
}

fn start(dir: &Path, shadow: bool) -> (Serve, TlsClient, std::net::SocketAddr) {
    let cluster = dir.join("cluster");
    std::fs::create_dir_all(&cluster).unwrap();
    std::fs::write(cluster.join("sidecarset.yaml"), SIDECARSET).unwrap();
    let mut args = vec!["--cluster-dir", "cluster"];
    if shadow {
        args.push("--shadow");
    }
    let serve = Serve::start(dir, &args);
    let started = serve.until("kruise-admission ready to serve");
    let warned = started.iter().any(|e| {
        e["level"] == "WARN"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("SHADOW MODE") && m.contains("delete protection"))
    });
    assert_eq!(warned, shadow, "the loud start-up WARN is there exactly with --shadow: {started:#?}");
    let ready = started.last().unwrap();
    assert_eq!(ready["shadow"], shadow, "{ready}");
    let ca = std::fs::read(dir.join("certs/ca.crt")).unwrap();
    (serve, TlsClient::new(addr(ready, "https"), &ca), addr(ready, "metrics"))
}

/// The value of the sample of `name` whose labels include all of `labels`.
fn sample(metrics: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (label_text, value) = rest.rsplit_once(' ')?;
        if !(label_text.is_empty() || label_text.starts_with('{')) {
            return None;
        }
        labels
            .iter()
            .all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\"")))
            .then(|| value.parse().unwrap())
    })
}

fn decoded_patch(response: &Value) -> Vec<String> {
    let Some(patch) = response["patch"].as_str() else { return Vec::new() };
    let ops: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
    ops.as_array()
        .unwrap()
        .iter()
        .map(|op| format!("{} {}", op["op"].as_str().unwrap(), op["path"].as_str().unwrap()))
        .collect()
}

#[tokio::test]
async fn shadow_answers_allowed_unchanged_and_counts_what_it_would_have_done() {
    let dir = tempfile::tempdir().unwrap();
    let (serve, client, metrics) = start(dir.path(), true);
    let mut patched_paths = Vec::new();
    for case in cases() {
        let reply = client.post_json(Proto::Http1, case.path, case.review.to_string()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", case.name);
        let review = reply.json();
        let response = &review["response"];
        assert_eq!(response["uid"], case.review["request"]["uid"], "{}: uid echoed", case.name);
        assert_eq!(review["apiVersion"], case.review["apiVersion"], "{}", case.name);
        // Allowed, and nothing else: no patch, no status, no warnings.
        assert_eq!(
            response,
            &json!({"uid": case.review["request"]["uid"], "allowed": true}),
            "{}",
            case.name
        );

        // One structured line per decision, after the usual one, saying what it would have done.
        let lines = serve.until("shadow decision");
        let usual = lines
            .iter()
            .rev()
            .find(|e| e["message"] == "admission review")
            .expect("the usual review line comes first");
        let line = lines.last().unwrap();
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["webhook"], case.webhook, "{}: {line}", case.name);
        assert_eq!(line["outcome"], case.outcome, "{}: {line}", case.name);
        assert_eq!(line["uid"], case.review["request"]["uid"], "{}", case.name);
        // The usual line and the metrics describe the decision, as without --shadow.
        assert_eq!(usual["allowed"], case.outcome != "would-deny", "{}: {usual}", case.name);
        match case.outcome {
            "would-patch" => {
                let patch = line["patch"].as_str().unwrap().to_owned();
                // Before the pod's container: the folder's SidecarSet is admitted with Kruise's default
                // `podInjectPolicy: BeforeAppContainer`.
                assert!(patch.contains("add /spec/containers/0"), "{patch}");
                assert!(
                    patch.contains("add /metadata/annotations/kruise.io~1sidecarset-injected-list"),
                    "{patch}"
                );
                assert_eq!(line["patch_ops"], usual["patch_ops"]);
                patched_paths.push(patch);
            }
            "would-deny" => {
                let reason = line["reason"].as_str().unwrap();
                assert!(reason.starts_with(&format!("{} ", usual["code"])), "{}: {reason}", case.name);
            }
            _ => assert!(line.get("patch").is_none() && line.get("reason").is_none(), "{line}"),
        }
    }
    assert_eq!(patched_paths.len(), 1);

    let (status, ready) = http_get(metrics, "/readyz").await;
    assert_eq!((status, ready.as_str()), (StatusCode::OK, kruise_admission::server::health::SHADOW_READY));
    let text = http_get(metrics, "/metrics").await.1;
    let shadow = "kruise_admission_shadow_decisions_total";
    assert_eq!(sample(&text, "kruise_admission_shadow_mode", &[]), Some(1.0));
    assert_eq!(
        sample(&text, shadow, &[("webhook", "mpod.kb.io"), ("outcome", "would-patch")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, shadow, &[("webhook", "mpod.kb.io"), ("outcome", "would-deny")]),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, shadow, &[("webhook", "mpod.kb.io"), ("outcome", "no-op")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, shadow, &[("webhook", "vbuiltindeployment.kb.io"), ("outcome", "would-deny")]),
        Some(1.0),
        "{text}"
    );
    // Every webhook's counters exist from the start (at 0), so rates work from the first scrape.
    assert_eq!(
        sample(&text, shadow, &[("webhook", "vnamespace.kb.io"), ("outcome", "would-deny")]),
        Some(0.0),
        "{text}"
    );
    // The decision's own metrics are what they would be without --shadow: the denial is counted.
    let rejections = "kruise_admission_webhook_rejection_count";
    assert_eq!(
        sample(&text, rejections, &[("name", "vbuiltindeployment.kb.io"), ("rejection_code", "403")]),
        Some(1.0),
        "{text}"
    );
}

/// The same reviews without `--shadow`: patched and denied, and nothing counted as shadow.
#[tokio::test]
async fn without_shadow_the_same_reviews_are_patched_and_denied() {
    let dir = tempfile::tempdir().unwrap();
    let (_serve, client, metrics) = start(dir.path(), false);
    for case in cases() {
        let reply = client.post_json(Proto::Http1, case.path, case.review.to_string()).await;
        let response = &reply.json()["response"];
        match case.outcome {
            "would-patch" => {
                assert_eq!(response["allowed"], true, "{}", case.name);
                let ops = decoded_patch(response);
                assert!(ops.contains(&"add /spec/containers/0".to_owned()), "{}: {ops:?}", case.name);
            }
            "would-deny" => {
                assert_eq!(response["allowed"], false, "{}: {response}", case.name);
                assert!(response["status"]["code"].as_u64().unwrap() >= 400, "{response}");
            }
            _ => {
                assert_eq!(response["allowed"], true, "{}", case.name);
                assert!(response.get("patch").is_none(), "{}: {response}", case.name);
            }
        }
    }
    assert_eq!(http_get(metrics, "/readyz").await, (StatusCode::OK, "ok".to_owned()));
    let text = http_get(metrics, "/metrics").await.1;
    assert_eq!(sample(&text, "kruise_admission_shadow_mode", &[]), Some(0.0));
    assert_eq!(
        sample(&text, "kruise_admission_shadow_decisions_total", &[]),
        None,
        "no shadow counters without --shadow:\n{text}"
    );
}
