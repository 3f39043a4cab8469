//! `serve` in live cluster mode: the real `Server` (and the real binary) against the loopback
//! stand-in API server (`fake_apiserver`; there is no real API server on these machines).
//! Readiness follows the sync and the watches' health, decisions follow the API server within a
//! second, lookups go to the API server, a failed start is one error line and a non-zero exit,
//! and self-managed certificates come from the Secret and land in the webhook configurations.

use crate::common;
use crate::fake_apiserver;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::client::{Proto, TlsClient, http_get};
use common::serve_process::{self, Serve, addr};
use common::server::TestServer;
use fake_apiserver::{FakeApiServer, resources};
use hyper::StatusCode;
use kruise_admission::cluster::live::LiveSettings;
use kruise_admission::cluster::live::certs::{CertManager, CertSettings};
use kruise_admission::server::{LiveSource, Server, ServerConfig};
use serde_json::{Value, json};

fn live_source(api: &FakeApiServer, max_cache_staleness: Duration) -> LiveSource {
    let settings = LiveSettings {
        kruise_namespace: "kruise-system".into(),
        max_cache_staleness,
        coalesce: Duration::from_millis(10),
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        watch_timeout: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(2),
        probe_interval: Duration::from_millis(100),
    };
    LiveSource {
        client: api.client(),
        settings,
        sync_timeout: Duration::from_secs(10),
        lookup_timeout: Duration::from_secs(2),
    }
}

fn seed(api: &FakeApiServer) {
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"policy.kruise.io/delete-protection": "Cascading"}}}));
}

async fn wait_for(what: &str, within: Duration, mut condition: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition().await {
        assert!(Instant::now() < deadline, "timed out after {within:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn readyz(server: &TestServer) -> (StatusCode, String) {
    http_get(server.metrics, "/readyz").await
}

/// A DELETE of the Cascading-protected namespace `shop`, as the apiserver sends it.
fn namespace_delete(uid: &str) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "resource": {"group": "", "version": "v1", "resource": "namespaces"}, "name": "shop", "operation": "DELETE",
        "userInfo": {"username": "admin"},
        "oldObject": {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "shop", "labels": {"policy.kruise.io/delete-protection": "Cascading"}}, "status": {"phase": "Active"}}}})
    .to_string()
}

fn pod_create(uid: &str) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "shop", "operation": "CREATE",
        "userInfo": {"username": "admin"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "shop", "labels": {"app": "web"}},
                   "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}}}})
    .to_string()
}

fn sidecarset(image: &str) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "proxy", "generation": 1},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "proxy", "image": image}]}})
}

fn running_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "shop"}, "spec": {}, "status": {"phase": "Running"}})
}

/// The images of the containers a `/mutate-pod` answer adds (from its JSON Patch).
fn injected_images(reply: &Value) -> Vec<String> {
    let Some(patch) = reply["response"]["patch"].as_str() else { return Vec::new() };
    let ops: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
    let mut images = Vec::new();
    for op in ops.as_array().unwrap() {
        let path = op["path"].as_str().unwrap_or_default();
        if path.starts_with("/spec/containers") {
            let values = if op["value"].is_array() {
                op["value"].as_array().unwrap().clone()
            } else {
                vec![op["value"].clone()]
            };
            images.extend(
                values
                    .iter()
                    .filter_map(|c| c["image"].as_str().map(str::to_owned))
                    .filter(|i| i != "nginx:1"),
            );
        }
    }
    images
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_is_unready_until_synced_and_decides_from_the_api_server() {
    let api = FakeApiServer::start().await;
    seed(&api);
    // A slow API server keeps the initial lists (not discovery) pending, so the unready window is observable.
    api.slow_down(Duration::from_millis(1500));
    let server = TestServer::start_with(|c| c.live = Some(live_source(&api, Duration::from_secs(60)))).await;
    let (status, why) = readyz(&server).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "ready before the caches synced: {why}");
    assert!(why.contains("cluster caches have not synced"), "{why}");
    api.slow_down(Duration::ZERO);
    wait_for("readiness after the sync", Duration::from_secs(5), async || {
        readyz(&server).await.0 == StatusCode::OK
    })
    .await;
    let client = server.client();

    // Lookups: a running pod in `shop`, listed live, makes the Cascading namespace undeletable.
    api.apply(running_pod("db-0"));
    let reply = client
        .post_json(Proto::Http2, "/validate-namespace?timeout=10s", namespace_delete("d1"))
        .await
        .json();
    assert_eq!(reply["response"]["allowed"], false, "{reply}");
    assert_eq!(reply["response"]["status"]["code"], 403, "{reply}");
    // No cache in between: once the pod is gone the very next request is allowed.
    api.delete("", "pods", "shop", "db-0");
    let reply = client
        .post_json(Proto::Http2, "/validate-namespace?timeout=10s", namespace_delete("d2"))
        .await
        .json();
    assert_eq!(reply["response"]["allowed"], true, "{reply}");

    // Watches: a SidecarSet added in the API server is injected within a second.
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p1")).await.json();
    assert!(injected_images(&reply).is_empty(), "nothing to inject yet: {reply}");
    api.apply(sidecarset("envoy:1"));
    let started = Instant::now();
    wait_for("the SidecarSet to be injected", Duration::from_secs(1), async || {
        injected_images(
            &client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p2")).await.json(),
        ) == ["envoy:1"]
    })
    .await;
    let took = started.elapsed();

    // A dropped watch connection: still ready, and changes still arrive after the reconnect.
    api.drop_watches();
    for _ in 0..5 {
        assert_eq!(
            readyz(&server).await.0,
            StatusCode::OK,
            "a reconnecting watch keeps serving the last snapshot"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.apply(sidecarset("envoy:2"));
    wait_for("the changed SidecarSet after a reconnect", Duration::from_secs(2), async || {
        injected_images(
            &client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p3")).await.json(),
        ) == ["envoy:2"]
    })
    .await;
    api.delete("apps.kruise.io", "sidecarsets", "", "proxy");
    wait_for("the deleted SidecarSet to stop injecting", Duration::from_secs(1), async || {
        injected_images(
            &client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p4")).await.json(),
        )
        .is_empty()
    })
    .await;

    let (_, metrics) = http_get(server.metrics, "/metrics").await;
    for line in [
        "kruise_admission_cluster_watch_synced{kind=\"SidecarSet\"} 1",
        "kruise_admission_cluster_watch_failing_seconds{kind=\"Namespace\"} 0",
        "kruise_admission_cluster_objects{kind=\"Namespace\"} 2",
        "kruise_admission_cluster_watch_relists_total{kind=\"ConfigMap\"} 0",
        // Lookups (delete protection, CloneSet pods) ask the API server, not a folder.
        "kruise_admission_lookup_source{source=\"api-server\"} 1",
        // The stand-in serves no PodUnavailableBudgets nor WorkloadSpreads: /mutate-pod's
        // related-pub and WorkloadSpread steps say they are skipped.
        "kruise_admission_pod_step_skipped{step=\"related-pub\"} 1",
        "kruise_admission_pod_step_skipped{step=\"workloadspread\"} 1",
        // Nor PersistentPodStates or PodProbeMarkers: steps 6 and 7b.
        "kruise_admission_pod_step_skipped{step=\"persistent-pod-state\"} 1",
        "kruise_admission_pod_step_skipped{step=\"pod-probe-marker\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing from\n{metrics}");
    }
    let reconnects: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("kruise_admission_cluster_watch_reconnects_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(reconnects >= 1, "the dropped watches are counted\n{metrics}");
    server.stop().await.unwrap();
    eprintln!("SidecarSet added → injected in {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_failing_longer_than_max_cache_staleness_turns_readiness_off_until_it_recovers() {
    let api = FakeApiServer::start().await;
    seed(&api);
    let server =
        TestServer::start_with(|c| c.live = Some(live_source(&api, Duration::from_millis(700)))).await;
    wait_for("readiness", Duration::from_secs(5), async || readyz(&server).await.0 == StatusCode::OK).await;
    api.forbid("watch", "namespaces");
    api.forbid("list", "namespaces");
    api.drop_watches();
    // Within the staleness allowance the last snapshot is still served.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(readyz(&server).await.0, StatusCode::OK);
    wait_for("unreadiness past --max-cache-staleness", Duration::from_secs(3), async || {
        let (status, why) = readyz(&server).await;
        status == StatusCode::SERVICE_UNAVAILABLE && why.contains("Namespace watch has been failing")
    })
    .await;
    // Requests are still answered from the last snapshot; only readiness reports the staleness.
    let reply = server.client().post_json(Proto::Http1, "/mutate-pod?timeout=10s", pod_create("p")).await;
    assert_eq!(reply.status, StatusCode::OK);
    api.allow("watch", "namespaces");
    api.allow("list", "namespaces");
    wait_for("readiness after recovery", Duration::from_secs(5), async || {
        readyz(&server).await.0 == StatusCode::OK
    })
    .await;
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookups_are_bounded_by_the_request_deadline() {
    let api = FakeApiServer::start().await;
    seed(&api);
    let server = TestServer::start_with(|c| {
        let mut live = live_source(&api, Duration::from_secs(60));
        live.lookup_timeout = Duration::from_secs(30);
        c.live = Some(live);
    })
    .await;
    wait_for("readiness", Duration::from_secs(5), async || readyz(&server).await.0 == StatusCode::OK).await;
    api.slow_down(Duration::from_secs(5));
    let started = Instant::now();
    let reply = server
        .client()
        .post_json(Proto::Http1, "/validate-namespace?timeout=1s", namespace_delete("slow"))
        .await;
    let took = started.elapsed();
    // Answered inside the 900 ms internal deadline, as a denial saying why (not a 504).
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert_eq!(reply.status, StatusCode::OK);
    let review = reply.json();
    assert_eq!(review["response"]["allowed"], false, "{review}");
    let message = review["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("did not answer within the request deadline"), "{message}");
    api.slow_down(Duration::ZERO);
    server.stop().await.unwrap();
}

fn config_for(api: &FakeApiServer, dir: &Path) -> ServerConfig {
    let (paths, _) = kruise_admission::cli::certs::ensure(&dir.join("certs"), &[]).unwrap();
    let mut config = ServerConfig::new(paths.cert, paths.key, dir.join("unused"));
    config.live = Some(live_source(api, Duration::from_secs(60)));
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_fails_the_start_and_a_refused_list_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let bare = FakeApiServer::start_with(resources(&[])).await;
    let err = Server::bind(config_for(&bare, dir.path())).await.err().expect("no SidecarSet CRD: bind fails");
    assert!(format!("{err:#}").contains("install OpenKruise's CRD sidecarsets.apps.kruise.io"), "{err:#}");

    // A required kind refused (Namespaces): the server stops and says why. (The Kruise namespace's
    // kinds are optional: refused, they are cached as empty; tests/live_cluster.rs.)
    let api = FakeApiServer::start().await;
    seed(&api);
    api.forbid("list", "namespaces");
    let server = Server::bind(config_for(&api, dir.path())).await.unwrap();
    let run = tokio::time::timeout(Duration::from_secs(5), server.run(std::future::pending())).await;
    let err = run.expect("the server stops by itself").expect_err("and says why");
    let text = format!("{err:#}");
    assert!(text.contains("forbidden") && text.contains("namespaces"), "{text}");
}

fn kubeconfig(dir: &Path, server: &str, ca_pem: &str) -> std::path::PathBuf {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: stand-in\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: webhook\n  user:\n    token: abc\ncontexts:\n- name: test\n  context:\n    cluster: stand-in\n    user: webhook\n"
        ),
    )
    .unwrap();
    path
}

/// The binary in live mode against `kubeconfig`'s API server, in the namespace a Deployment
/// would give it.
fn serve(kubeconfig: &Path, dir: &Path, extra: &[&str]) -> Command {
    let mut command = serve_process::command(dir, None);
    command
        .args(["--cluster-mode", "live", "--kubeconfig"])
        .arg(kubeconfig)
        .args(extra)
        .env("POD_NAMESPACE", "kruise-admission")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Run `serve` expecting it to fail; returns its `error:` lines (exactly what an operator reads).
async fn failed_start(kubeconfig: &Path, dir: &Path) -> Vec<String> {
    let mut command = serve(kubeconfig, dir, &[]);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .filter(|l| l.starts_with("error:"))
        .map(str::to_owned)
        .collect();
    eprintln!("{lines:?}");
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_fails_fast_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let bare = FakeApiServer::start_with(resources(&[])).await;
    let lines =
        failed_start(&kubeconfig(dir.path(), &format!("https://{}", bare.addr), &bare.ca_pem), dir.path())
            .await;
    assert!(lines.len() == 1 && lines[0].contains("install OpenKruise's CRD"), "{lines:?}");

    let api = FakeApiServer::start().await;
    seed(&api);
    api.forbid("list", "namespaces");
    let lines =
        failed_start(&kubeconfig(dir.path(), &format!("https://{}", api.addr), &api.ca_pem), dir.path())
            .await;
    assert!(
        lines.len() == 1 && lines[0].contains("forbidden") && lines[0].contains("namespaces"),
        "{lines:?}"
    );

    // Nothing listens on the port of a server that was just dropped.
    let gone = FakeApiServer::start().await;
    let (addr, ca) = (gone.addr, gone.ca_pem.clone());
    drop(gone);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lines = failed_start(&kubeconfig(dir.path(), &format!("https://{addr}"), &ca), dir.path()).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn self_managed_certificates_come_from_the_secret_and_reach_the_webhook_configurations() {
    let dir = tempfile::tempdir().unwrap();
    let api = FakeApiServer::start().await;
    seed(&api);
    let webhook = |name: &str, path: &str| {
        json!({"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"namespace": "kruise-admission", "name": "kruise-admission", "path": path}}})
    };
    api.apply(
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kruise-admission"}, "webhooks": [webhook("mpod.kb.io", "/mutate-pod")]}),
    );
    api.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "kruise-admission"}, "webhooks": [webhook("vnamespace.kb.io", "/validate-namespace")]}));
    // Another replica got there first: the Secret already holds the CA every replica must use.
    let first = CertManager::new(
        api.client(),
        CertSettings {
            namespace: "kruise-admission".into(),
            secret_name: "kruise-admission-tls".into(),
            service: "kruise-admission".into(),
            renew_before: Duration::from_secs(90 * 86_400),
            cert_dir: dir.path().join("first-replica"),
            mutating_configs: Vec::new(),
            validating_configs: Vec::new(),
        },
    );
    first.sync_once().await.unwrap();
    let secret_ca = |api: &FakeApiServer| {
        let secret =
            api.get("", "secrets", "kruise-admission", "kruise-admission-tls").expect("the Secret exists");
        base64::engine::general_purpose::STANDARD.decode(secret["data"]["ca.crt"].as_str().unwrap()).unwrap()
    };
    let ca = secret_ca(&api);
    let secret_writes = api.writes("secrets");
    let config = kubeconfig(dir.path(), &format!("https://{}", api.addr), &api.ca_pem);
    let certs = dir.path().join("tls");
    let mut command =
        serve(&config, dir.path(), &["--cert-mode", "self-managed", "--cert-dir", certs.to_str().unwrap()]);
    let serve = Serve::spawn(&mut command);
    // Waiting blocks this thread; the stand-in API server must go on answering the server's start.
    let ready = tokio::task::block_in_place(|| serve.until("kruise-admission ready to serve")).pop().unwrap();
    let (https, metrics) = (addr(&ready, "https"), addr(&ready, "metrics"));

    assert_eq!(secret_ca(&api), ca, "the server uses the Secret's CA, it does not make its own");
    assert_eq!(api.writes("secrets"), secret_writes, "a valid Secret is not rewritten");
    for plural in ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"] {
        let configuration = api.get("admissionregistration.k8s.io", plural, "", "kruise-admission").unwrap();
        let bundle = configuration["webhooks"][0]["clientConfig"]["caBundle"].as_str().expect("caBundle set");
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(bundle).unwrap(), ca, "{plural}");
    }
    let mut ready = false;
    for _ in 0..100 {
        if http_get(metrics, "/readyz").await.0 == StatusCode::OK {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "self-managed live server never became ready");
    // The server presents a certificate the Secret's CA vouches for, under the Service's name.
    let client = TlsClient::new(https, &ca).with_server_name("kruise-admission.kruise-admission.svc");
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("tls")).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["response"]["allowed"], true);
    assert!(std::fs::read(certs.join("tls.crt")).is_ok_and(|c| !c.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_label_added_in_the_api_server_changes_injection_within_a_second() {
    let api = FakeApiServer::start().await;
    seed(&api);
    let mut meshed = sidecarset("envoy:1");
    meshed["spec"]["namespaceSelector"] = json!({"matchLabels": {"mesh": "on"}});
    api.apply(meshed);
    let server = TestServer::start_with(|c| c.live = Some(live_source(&api, Duration::from_secs(60)))).await;
    wait_for("readiness", Duration::from_secs(5), async || readyz(&server).await.0 == StatusCode::OK).await;
    let client = server.client();
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("n1")).await.json();
    assert!(injected_images(&reply).is_empty(), "namespace shop is not labelled mesh=on yet: {reply}");
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"policy.kruise.io/delete-protection": "Cascading", "mesh": "on"}}}));
    wait_for("the namespace label to select the SidecarSet", Duration::from_secs(1), async || {
        injected_images(
            &client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("n2")).await.json(),
        ) == ["envoy:1"]
    })
    .await;
    server.stop().await.unwrap();
}

/// Where PodUnavailableBudgets are served, `/mutate-pod` names the one guarding the pod, read from
/// the watches: a PUB created in the API server is on the next pods within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_annotates_the_related_pub_from_the_watches() {
    let api = FakeApiServer::start_with(fake_apiserver::resources_with_pubs()).await;
    seed(&api);
    let server = TestServer::start_with(|c| c.live = Some(live_source(&api, Duration::from_secs(60)))).await;
    wait_for("readiness after the sync", Duration::from_secs(5), async || {
        readyz(&server).await.0 == StatusCode::OK
    })
    .await;
    let client = server.client();
    let related = |reply: &Value| -> Option<Value> {
        let patch = reply["response"]["patch"].as_str()?;
        let ops: Value =
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap())
                .unwrap();
        ops.as_array()?.iter().find_map(|op| match op["path"].as_str()? {
            "/metadata/annotations" => op["value"].get("kruise.io/related-pub").cloned(),
            "/metadata/annotations/kruise.io~1related-pub" => Some(op["value"].clone()),
            _ => None,
        })
    };
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p1")).await.json();
    assert_eq!(related(&reply), None, "no PUB yet: {reply}");
    api.apply(json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
        "metadata": {"name": "web", "namespace": "shop"}, "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1}}));
    wait_for("the PUB to reach the snapshot", Duration::from_secs(1), async || {
        let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_create("p2")).await.json();
        related(&reply) == Some(json!("web"))
    })
    .await;
    let (_, metrics) = http_get(server.metrics, "/metrics").await;
    assert!(!metrics.contains("kruise_admission_pod_step_skipped{"), "{metrics}");
    assert!(
        metrics.contains("kruise_admission_cluster_watch_synced{kind=\"PodUnavailableBudget\"} 1"),
        "{metrics}"
    );
}

/// Where WorkloadSpreads are served, `/mutate-pod` gives a Job's pod the subset of the
/// WorkloadSpread that targets the Job, read from the watches; the Job itself is watched too (a
/// WorkloadSpread of the namespace that targets another workload reads it, and Kruise fails the
/// request when it does not exist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_spreads_pods_from_the_watched_workloadspreads_and_jobs() {
    let api = FakeApiServer::start_with(fake_apiserver::resources_with_pubs()).await;
    seed(&api);
    api.apply(json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "batch-1", "namespace": "shop", "uid": "j1"}, "spec": {"parallelism": 2, "template": {}}}));
    let spread = |name: &str, target: Value| {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
            "metadata": {"name": name, "namespace": "shop", "managedFields": [{"manager": "kubectl"}]},
            "spec": {"targetRef": target, "subsets": [{"name": "spot", "tolerations": [{"key": "spot", "operator": "Exists"}]}]}})
    };
    api.apply(spread(
        "a-other",
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "other"}),
    ));
    let server = TestServer::start_with(|c| c.live = Some(live_source(&api, Duration::from_secs(60)))).await;
    wait_for("readiness after the sync", Duration::from_secs(5), async || {
        readyz(&server).await.0 == StatusCode::OK
    })
    .await;
    let client = server.client();
    let job_pod = |uid: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "shop", "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch-1-x", "namespace": "shop",
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "batch-1", "uid": "j1", "controller": true}]},
                "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}})
        .to_string()
    };
    let matched = |reply: &Value| -> bool {
        reply["response"]["patch"].as_str().is_some_and(|patch| {
            let ops = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
            String::from_utf8_lossy(&ops).contains("matched-workloadspread")
        })
    };
    // The Job is read (and found): no WorkloadSpread targets it, the pod is allowed unchanged.
    let reply = client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", job_pod("w1")).await.json();
    assert_eq!(reply["response"]["allowed"], json!(true), "{reply}");
    assert!(!matched(&reply), "{reply}");
    api.apply(spread("b-job", json!({"apiVersion": "batch/v1", "kind": "Job", "name": "batch-1"})));
    wait_for("the WorkloadSpread to reach the snapshot", Duration::from_secs(1), async || {
        matched(&client.post_json(Proto::Http2, "/mutate-pod?timeout=10s", job_pod("w2")).await.json())
    })
    .await;
    let (_, metrics) = http_get(server.metrics, "/metrics").await;
    for kind in ["WorkloadSpread", "Job"] {
        let line = format!("kruise_admission_cluster_watch_synced{{kind=\"{kind}\"}} 1");
        assert!(metrics.contains(&line), "{line} missing from\n{metrics}");
    }
    server.stop().await.unwrap();
}
