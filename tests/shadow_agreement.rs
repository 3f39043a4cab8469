//! Shadow mode's live agreement (issue 19, point 2), on the binary in live mode against the loopback
//! stand-in API server: `serve --shadow` decides recorded Pod CREATE reviews, the Pods kruise-manager
//! stored for them (tests/fixtures/agreement/stored) arrive through the Pod watch, and each pair is
//! counted in `kruise_admission_shadow_agreement_total` (per SidecarSet) and
//! `kruise_admission_shadow_step_agreement_total` (per /mutate-pod step), a disagreement logged with
//! its diff.

use crate::common;
use crate::fake_apiserver;

use std::time::{Duration, Instant};

use common::client::{Proto, TlsClient, http_get};
use common::serve_process::{Serve, addr};
use fake_apiserver::FakeApiServer;
use hyper::StatusCode;
use serde_json::{Value, json};

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(common::fixtures_dir().join(path)).expect("fixture");
    if path.ends_with(".json") {
        serde_json::from_str(&text).expect("JSON")
    } else {
        serde_saphyr::from_str(&text).expect("YAML")
    }
}

/// The value of the sample of `name` with exactly these labels.
fn sample(metrics: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = if labels.is_empty() { format!("{name} ") } else { format!("{name}{{{labels}}} ") };
    metrics.lines().find_map(|line| line.strip_prefix(&prefix)?.parse().ok())
}

async fn wait_for_metrics(
    metrics: std::net::SocketAddr,
    what: &str,
    condition: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = http_get(metrics, "/metrics").await.1;
        if condition(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const AGREEMENT: &str = "kruise_admission_shadow_agreement_total";
const STEPS: &str = "kruise_admission_shadow_step_agreement_total";

/// `kruise_admission_shadow_step_agreement_total` of each step, `(agree, disagree)`.
fn step_counts(metrics: &str) -> Vec<(&'static str, Option<f64>, Option<f64>)> {
    let count =
        |step: &str, result: &str| sample(metrics, STEPS, &format!(r#"result="{result}",step="{step}""#));
    common::STEP_NAMES.iter().map(|s| (*s, count(s, "agree"), count(s, "disagree"))).collect()
}

/// Every step at `agree` but those of `disagree`, which are at `(agree, disagree)`.
fn expected_steps(
    agree: f64,
    disagree: &[(&str, f64, f64)],
) -> Vec<(&'static str, Option<f64>, Option<f64>)> {
    common::STEP_NAMES
        .iter()
        .map(|s| match disagree.iter().find(|d| d.0 == *s) {
            Some(&(_, a, d)) => (*s, Some(a), Some(d)),
            None => (*s, Some(agree), Some(0.0)),
        })
        .collect()
}

/// `serve --shadow` in live mode against `api`, ready, with its Pod watch running.
async fn start(api: &FakeApiServer, dir: &std::path::Path) -> (Serve, TlsClient, std::net::SocketAddr) {
    let kubeconfig = api.write_kubeconfig(dir);
    let serve = Serve::start(
        dir,
        &["--cluster-mode", "live", "--kubeconfig", kubeconfig.to_str().unwrap(), "--shadow"],
    );
    let started = serve.until("kruise-admission ready to serve");
    let ready = started.last().unwrap();
    let client = TlsClient::new(addr(ready, "https"), &std::fs::read(dir.join("certs/ca.crt")).unwrap());
    let metrics = addr(ready, "metrics");
    // Pods stored before the watch runs are never reported: wait for it.
    if !started.iter().any(|e| e["message"] == WATCHING) {
        serve.until(WATCHING);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while http_get(metrics, "/readyz").await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (serve, client, metrics)
}

const WATCHING: &str = "shadow agreement: watching pod creations";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_pods_count_agree_or_disagree_with_our_decisions() {
    let api = FakeApiServer::start().await;
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    // The SidecarSet as kruise-manager admitted it; the stored Pods were injected from it (the
    // keymaker one with an older image).
    api.apply(fixture("agreement/cluster/log-agent.yaml"));
    let dir = tempfile::tempdir().unwrap();
    let (serve, client, metrics) = start(&api, dir.path()).await;

    let cases = [
        (
            "recorded/kubewarden-policies-pod-create-replicaset-owned.json",
            "agreement/stored/agree-kubewarden-controller.yaml",
        ),
        (
            "recorded/salesforce-generic-sidecar-injector-pod-create-initcontainers.json",
            "agreement/stored/disagree-image-keymaker.yaml",
        ),
        ("recorded/openyurt-pod-create.json", "agreement/stored/agree-no-injection-nginx.yaml"),
    ];
    for (review, _) in &cases {
        let reply =
            client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", fixture(review).to_string()).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(reply.json()["response"].get("patch").is_none(), "shadow mode patches nothing");
    }
    // The re-invocation after kruise-manager's injection (the stored Pod as the review's object, no
    // name yet): the first call's decision stays the one compared.
    let mut reinvoked = fixture(cases[1].0);
    let mut injected = fixture(cases[1].1);
    injected["metadata"].as_object_mut().unwrap().remove("name");
    reinvoked["request"]["object"] = injected;
    reinvoked["request"]["uid"] = json!("reinvoked");
    assert_eq!(
        client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", reinvoked.to_string()).await.status,
        StatusCode::OK
    );

    let text = http_get(metrics, "/metrics").await.1;
    assert_eq!(sample(&text, "kruise_admission_shadow_pending_decisions", ""), Some(3.0), "{text}");
    assert_eq!(
        step_counts(&text),
        expected_steps(0.0, &[]),
        "every step's series exists from the start:\n{text}"
    );
    for (_, stored) in &cases {
        api.apply(fixture(stored));
    }
    let text = wait_for_metrics(metrics, "three comparisons", |t| {
        sample(t, "kruise_admission_shadow_pending_decisions", "") == Some(0.0)
    })
    .await;
    assert_eq!(sample(&text, AGREEMENT, r#"result="agree",sidecarset="log-agent""#), Some(1.0), "{text}");
    assert_eq!(sample(&text, AGREEMENT, r#"result="disagree",sidecarset="log-agent""#), Some(1.0), "{text}");
    assert_eq!(sample(&text, AGREEMENT, r#"result="agree",sidecarset="-""#), Some(1.0), "{text}");
    // Every Pod counts once per step; only the SidecarSet step disagrees, on the keymaker Pod.
    assert_eq!(step_counts(&text), expected_steps(3.0, &[("sidecarset", 2.0, 1.0)]), "{text}");
    assert_eq!(
        sample(&text, "kruise_admission_shadow_unmatched_total", r#"reason="evicted""#),
        Some(0.0),
        "{text}"
    );

    let line = serve.until("shadow disagreement").pop().unwrap();
    assert_eq!(line["level"], "WARN");
    assert_eq!(line["pod"], "keymaker/keymaker-keymaker-769579fd65-4tkzm", "{line}");
    assert_eq!(line["step"], "sidecarset", "{line}");
    assert_eq!(line["sidecarset"], "log-agent", "{line}");
    assert_eq!(line["diffs"], 1, "{line}");
    assert_eq!(
        line["diff"],
        r#"spec.containers[log-agent].image: "fluent/fluent-bit:3.2.4" -> "fluent/fluent-bit:3.1.9""#,
        "{line}"
    );

    // A Pod with a SidecarSet the cluster does not have is labelled `other`, whatever its annotations say.
    let mut unknown = fixture(cases[0].0);
    unknown["request"]["object"]["metadata"]["generateName"] = json!("elsewhere-");
    assert_eq!(
        client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", unknown.to_string()).await.status,
        StatusCode::OK
    );
    let mut stored = fixture(cases[0].1);
    stored["metadata"]["generateName"] = json!("elsewhere-");
    stored["metadata"]["name"] = json!("elsewhere-1");
    let annotations = stored["metadata"]["annotations"].as_object_mut().unwrap();
    let list = annotations["kruise.io/sidecarset-injected-list"].as_str().unwrap().to_owned();
    annotations
        .insert("kruise.io/sidecarset-injected-list".into(), json!(format!("{list},made-up {{\"x\"}}")));
    api.apply(stored);
    let text = wait_for_metrics(metrics, "the fourth comparison", |t| {
        sample(t, AGREEMENT, r#"result="disagree",sidecarset="other""#).is_some()
    })
    .await;
    assert_eq!(sample(&text, AGREEMENT, r#"result="disagree",sidecarset="other""#), Some(1.0), "{text}");
    assert_eq!(sample(&text, AGREEMENT, r#"result="agree",sidecarset="log-agent""#), Some(2.0), "{text}");
    assert!(!text.contains("made-up"), "request text never becomes a label");
}

/// A step other than SidecarSet injection is compared too: with a PodUnavailableBudget guarding the
/// Pod, our decision names it in `kruise.io/related-pub`; a stored Pod without it disagrees on that
/// step alone, logged with the step and the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_is_compared_and_counted_on_its_own() {
    let api = FakeApiServer::start_with(fake_apiserver::resources_with_pubs()).await;
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    api.apply(json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "nginx-pub", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"run": "nginx"}}, "maxUnavailable": 1}}));
    let dir = tempfile::tempdir().unwrap();
    let (serve, client, metrics) = start(&api, dir.path()).await;
    let review = fixture("recorded/openyurt-pod-create.json");
    assert_eq!(
        client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", review.to_string()).await.status,
        StatusCode::OK
    );
    api.apply(fixture("agreement/stored/agree-no-injection-nginx.yaml"));
    let text = wait_for_metrics(metrics, "the comparison", |t| {
        sample(t, "kruise_admission_shadow_pending_decisions", "") == Some(0.0)
    })
    .await;
    assert_eq!(step_counts(&text), expected_steps(1.0, &[("related-pub", 0.0, 1.0)]), "{text}");
    assert_eq!(sample(&text, AGREEMENT, r#"result="agree",sidecarset="-""#), Some(1.0), "{text}");
    let line = serve.until("shadow disagreement").pop().unwrap();
    assert_eq!(
        (&line["level"], &line["pod"], &line["step"]),
        (&json!("WARN"), &json!("default/nginx"), &json!("related-pub"))
    );
    assert_eq!(line["diffs"], 1, "{line}");
    assert_eq!(line["diff"], r#"metadata.annotations[kruise.io/related-pub]: "nginx-pub" -> -"#, "{line}");
    assert!(line.get("sidecarset").is_none(), "{line}");
}

/// The watch caches nothing and lists nothing but one Pod: it starts from the current
/// resourceVersion, and after a 410 from the then current one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pod_watch_starts_from_the_current_resource_version_again_after_410() {
    let api = FakeApiServer::start().await;
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    api.apply(fixture("agreement/cluster/log-agent.yaml"));
    // Stored before the server started: never reported, never listed.
    api.apply(fixture("agreement/stored/agree-no-injection-nginx.yaml"));
    let dir = tempfile::tempdir().unwrap();
    let (serve, client, metrics) = start(&api, dir.path()).await;
    let review = fixture("recorded/kubewarden-policies-pod-create-replicaset-owned.json");
    assert_eq!(
        client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", review.to_string()).await.status,
        StatusCode::OK
    );
    // History compacted and the stream cut: re-watching from the last resourceVersion gets 410.
    api.compact();
    api.drop_watches();
    serve.until("shadow agreement: pod watch resourceVersion expired; starting from the current one");
    serve.until(WATCHING);
    api.apply(fixture("agreement/stored/agree-kubewarden-controller.yaml"));
    let text = wait_for_metrics(metrics, "the comparison", |t| {
        sample(t, AGREEMENT, r#"result="agree",sidecarset="log-agent""#) == Some(1.0)
    })
    .await;
    assert_eq!(
        sample(&text, AGREEMENT, r#"result="agree",sidecarset="-""#),
        Some(0.0).filter(|_| false),
        "the nginx Pod was never compared:\n{text}"
    );
    let lists = api.params("list", "pods");
    assert_eq!(lists.len(), 2, "{lists:?}");
    assert!(lists.iter().all(|p| p.get("limit").map(String::as_str) == Some("1")), "{lists:?}");
}

/// Decisions no stored Pod pairs with leave the store, counted: past the TTL as `expired`, beyond
/// the count cap as `evicted` (the in-process server, with small limits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpaired_decisions_expire_or_are_evicted_and_are_counted() {
    use kruise_admission::admission::pending_decisions::Limits;
    use kruise_admission::cluster::live::LiveSettings;
    use kruise_admission::server::LiveSource;
    let api = FakeApiServer::start().await;
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    api.apply(fixture("agreement/cluster/log-agent.yaml"));
    let server = common::server::TestServer::start_with(|c| {
        c.live = Some(LiveSource::new(api.client(), LiveSettings::default()));
        c.shadow = true;
        c.agreement_limits = Limits { max_count: 2, max_bytes: 1 << 20, ttl: Duration::from_millis(500) };
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while http_get(server.metrics, "/readyz").await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let client = server.client();
    // Three named Pods, none ever stored: the first is pushed out by the third, the other two expire.
    for name in ["gone-0", "gone-1", "gone-2"] {
        let mut review = fixture("recorded/openyurt-pod-create.json");
        review["request"]["name"] = json!(name);
        review["request"]["object"]["metadata"]["name"] = json!(name);
        assert_eq!(
            client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", review.to_string()).await.status,
            StatusCode::OK
        );
    }
    let text = wait_for_metrics(server.metrics, "the decisions to expire", |t| {
        sample(t, "kruise_admission_shadow_unmatched_total", r#"reason="expired""#) == Some(2.0)
    })
    .await;
    assert_eq!(
        sample(&text, "kruise_admission_shadow_unmatched_total", r#"reason="evicted""#),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "kruise_admission_shadow_pending_decisions", ""), Some(0.0), "{text}");
    assert!(!text.contains("kruise_admission_shadow_agreement_total{"), "nothing was compared:\n{text}");
    server.stop().await.unwrap();
}

/// Without RBAC for pods the watch says why at each retry and the server still serves; once
/// granted, it starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_pod_watch_is_retried_and_does_not_stop_the_server() {
    let api = FakeApiServer::start().await;
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    api.forbid("list", "pods");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let serve = Serve::start(
        dir.path(),
        &["--cluster-mode", "live", "--kubeconfig", kubeconfig.to_str().unwrap(), "--shadow"],
    );
    let lines = serve.until("shadow agreement: cannot read the pods' resourceVersion; retrying");
    let refused = lines.last().unwrap();
    assert_eq!(refused["level"], "WARN");
    assert!(refused["error"].as_str().unwrap().contains("forbidden"), "{refused}");
    // The ready line may come before or after the refusal.
    let ready = match lines.iter().find(|e| e["message"] == "kruise-admission ready to serve") {
        Some(line) => line.clone(),
        None => serve.until("kruise-admission ready to serve").pop().unwrap(),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while http_get(addr(&ready, "metrics"), "/readyz").await.0 != StatusCode::OK {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.allow("list", "pods");
    serve.until(WATCHING);
    assert!(api.requests("list", "pods") >= 2, "retried");
}
