//! Live lookups (`LiveLookups::answer`) against the loopback stand-in API server.

use crate::fake_apiserver;

use std::time::Duration;

use fake_apiserver::FakeApiServer;
use kruise_admission::cluster::live::LiveLookups;
use kruise_admission::cluster::{Counted, ListFilter, Query};
use serde_json::{Value, json};

fn list(group: &str, version: &str, kind: &str, namespace: Option<&str>) -> Query {
    Query::List {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: namespace.map(Into::into),
        filter: ListFilter::default(),
    }
}

fn get(group: &str, version: &str, kind: &str, namespace: &str, name: &str) -> Query {
    Query::Get {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

async fn server() -> FakeApiServer {
    let server = FakeApiServer::start().await;
    for (ns, name) in [("shop", "web-0"), ("shop", "web-1"), ("other", "db-0")] {
        server
            .apply(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "status": {"phase": "Running"}}));
    }
    server.apply(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": {"name": "cs", "namespace": "shop"}, "spec": {"replicas": 3}}));
    server
}

#[tokio::test]
async fn lists_and_gets_answer_with_typed_objects() {
    let server = server().await;
    let lookups = LiveLookups::new(server.client(), Duration::from_secs(2));
    let queries = [
        list("", "v1", "Pod", Some("shop")),
        list("", "v1", "Pod", None),
        get("", "v1", "Pod", "other", "db-0"),
        get("", "v1", "Pod", "other", "missing"),
        list("apps.kruise.io", "v1beta1", "CloneSet", Some("shop")),
    ];
    let answers = lookups.answer(&queries).await;
    let names = |q: &Query| -> Vec<String> {
        answers.get(q).unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(names(&queries[0]), ["web-0", "web-1"]);
    assert_eq!(names(&queries[1]).len(), 3);
    assert_eq!(names(&queries[2]), ["db-0"]);
    assert!(names(&queries[3]).is_empty(), "a missing object is an empty answer, not an error");
    let clonesets = answers.get(&queries[4]).unwrap();
    assert_eq!(clonesets[0]["spec"]["replicas"], 3);
    assert_eq!(clonesets[0]["apiVersion"], "apps.kruise.io/v1beta1");
    // List items of built-in types come without apiVersion/kind; decisions still see them.
    let pod = &answers.get(&queries[0]).unwrap()[0];
    assert_eq!((pod["apiVersion"].as_str(), pod["kind"].as_str()), (Some("v1"), Some("Pod")));
    // Answers are not cached: asking again asks the API server again.
    lookups.answer(&queries[..1]).await;
    assert_eq!(server.requests("list", "pods"), 3);
}

#[tokio::test]
async fn failures_are_answers_a_person_can_act_on() {
    let server = server().await;
    server.forbid("list", "persistentvolumeclaims");
    let lookups = LiveLookups::new(server.client(), Duration::from_secs(2));
    let forbidden = list("", "v1", "PersistentVolumeClaim", Some("shop"));
    let unknown = list("example.com", "v1", "Widget", None);
    let answers = lookups.answer(&[forbidden.clone(), unknown.clone()]).await;
    let err = answers.get(&forbidden).unwrap_err();
    assert!(
        err.contains("forbidden") && err.contains("list on persistentvolumeclaims in namespace \"shop\""),
        "{err}"
    );
    let err = answers.get(&unknown).unwrap_err();
    assert!(err.contains("does not serve Widget in example.com/v1"), "{err}");
}

#[tokio::test]
async fn a_slow_api_server_times_out_instead_of_holding_the_request() {
    let server = server().await;
    let lookups = LiveLookups::new(server.client(), Duration::from_millis(300));
    // Discover first, so the timeout hits the lookup itself.
    let query = list("", "v1", "Pod", Some("shop"));
    assert!(lookups.answer(std::slice::from_ref(&query)).await.get(&query).is_ok());
    server.slow_down(Duration::from_secs(5));
    let started = std::time::Instant::now();
    let answers = lookups.answer(std::slice::from_ref(&query)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let err = answers.get(&query).unwrap_err();
    assert!(err.contains("did not answer within 300ms"), "{err}");
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    live: kruise_admission::cluster::live::LiveOptions,
}

#[tokio::test]
async fn the_client_comes_from_kubeconfig() {
    use base64::Engine as _;
    use clap::Parser as _;
    let server = server().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kubeconfig");
    let ca = base64::engine::general_purpose::STANDARD.encode(&server.ca_pem);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\nclusters:\n- name: stand-in\n  cluster:\n    server: https://{}\n    certificate-authority-data: {ca}\nusers:\n- name: webhook\n  user:\n    token: abc\ncontexts:\n- name: test\n  context:\n    cluster: stand-in\n    user: webhook\n",
            server.addr
        ),
    )
    .unwrap();
    let cli =
        Cli::try_parse_from(["serve", "--cluster-mode", "live", "--kubeconfig", path.to_str().unwrap()])
            .unwrap();
    let lookups = LiveLookups::new(cli.live.client().await.unwrap(), Duration::from_secs(2));
    let query = list("", "v1", "Pod", Some("shop"));
    assert_eq!(lookups.answer(std::slice::from_ref(&query)).await.get(&query).unwrap().len(), 2);

    let missing = Cli::try_parse_from(["serve", "--kubeconfig", "/nonexistent/kubeconfig"]).unwrap();
    let err = missing.live.client().await.err().unwrap().to_string();
    assert!(err.contains("--kubeconfig /nonexistent/kubeconfig"), "{err}");
}

fn pod(namespace: &str, name: &str, phase: &str, labels: Value, deleting: bool) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "status": {"phase": phase}});
    if deleting {
        pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        pod["metadata"]["finalizers"] = json!(["example.com/hold"]);
    }
    pod
}

#[tokio::test]
async fn a_list_asks_only_what_the_decision_needs() {
    // Issue 16.2: selectors go to the API server, and "is there one?" reads one object at a time
    // until it finds one, not the whole namespace.
    let server = FakeApiServer::start().await;
    server.apply(pod("busy", "a-terminating", "Running", json!({"app": "web"}), true));
    server.apply(pod("busy", "b-done", "Succeeded", json!({"app": "web"}), false));
    for i in 0..30 {
        server.apply(pod(
            "busy",
            &format!("c-{i:02}"),
            "Running",
            json!({"app": if i % 2 == 0 { "web" } else { "db" }}),
            false,
        ));
    }
    let lookups = LiveLookups::new(server.client(), Duration::from_secs(5));

    let filter = ListFilter {
        fields: "status.phase!=Succeeded,status.phase!=Failed".into(),
        until_one: Some(Counted::ActivePod),
        ..ListFilter::default()
    };
    let any_active = Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("busy".into()),
        filter,
    };
    let answers = lookups.answer(std::slice::from_ref(&any_active)).await;
    let read = answers.get(&any_active).unwrap();
    assert!(read.iter().any(|p| Counted::ActivePod.counts(p)), "an active pod was found");
    assert!(read.len() < 12, "stopped at the first page with an active pod, read {}", read.len());
    let asked = server.params("list", "pods");
    let field = |i: usize, key: &str| asked[i].get(key).cloned().unwrap_or_default();
    // The first page holds one pod (terminating here), the next ten.
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(
        (field(0, "limit"), field(0, "fieldSelector")),
        ("1".into(), "status.phase!=Succeeded,status.phase!=Failed".into())
    );
    assert_eq!(field(1, "limit"), "10");
    assert!(!field(1, "continue").is_empty(), "the second page continues the first");

    let filter = ListFilter { labels: "app=web".into(), ..ListFilter::default() };
    let by_label = Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("busy".into()),
        filter,
    };
    let answers = lookups.answer(std::slice::from_ref(&by_label)).await;
    assert_eq!(
        answers.get(&by_label).unwrap().len(),
        17,
        "15 running, one terminating, one finished pod labelled app=web"
    );
    let asked = server.params("list", "pods");
    assert_eq!(
        (asked[2].get("labelSelector").map(String::as_str), asked[2].get("limit").map(String::as_str)),
        (Some("app=web"), Some("500"))
    );
}

#[tokio::test]
async fn lookups_of_one_request_run_at_most_four_at_a_time() {
    let server = server().await;
    server.slow_down(Duration::from_millis(100));
    let lookups = LiveLookups::new(server.client(), Duration::from_secs(10));
    let queries: Vec<Query> = (0..32).map(|i| get("", "v1", "Pod", "shop", &format!("web-{i}"))).collect();
    let answers = lookups.answer(&queries).await;
    assert!(queries.iter().all(|q| answers.get(q).is_ok()), "every lookup answered");
    assert_eq!(server.requests("get", "pods"), 32);
    let most = server.max_in_flight();
    assert!(
        (2..=kruise_admission::cluster::live::lookup::MAX_CONCURRENT).contains(&most),
        "{most} lookups were in flight at once"
    );
}
