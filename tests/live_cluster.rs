//! Live cluster mode against the loopback stand-in API server (`fake_apiserver`): the snapshot
//! follows watches, readiness follows sync and staleness, reconnects and 410s are survived.

use crate::fake_apiserver;

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use fake_apiserver::FakeApiServer;
use kruise_admission::api::tree::Json;
use kruise_admission::cluster::Snapshot;
use kruise_admission::cluster::live::{LiveCluster, LiveError, LiveSettings};
use serde_json::{Value, json};

fn settings() -> LiveSettings {
    LiveSettings {
        kruise_namespace: "kruise-system".into(),
        max_cache_staleness: Duration::from_secs(60),
        coalesce: Duration::from_millis(20),
        backoff_min: Duration::from_millis(50),
        backoff_max: Duration::from_millis(200),
        watch_timeout: Duration::from_secs(3),
        idle_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(2),
        probe_interval: Duration::from_millis(100),
    }
}

fn sidecarset(name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": name, "generation": 1, "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {}}]},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "proxy", "image": image}]},
    })
}

fn seed(server: &FakeApiServer) {
    server.apply(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "shop", "labels": {"env": "prod"}, "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}));
    server.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kruise-system"}}));
    server.apply(json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "sidecar-abc", "namespace": "kruise-system", "labels": {"kruise.io/sidecarset-name": "sidecar"}},
        "data": {"spec": {"containers": []}}, "revision": 1}));
    server.apply(json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "elsewhere", "namespace": "default"}, "revision": 1}));
    server.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kruise-configuration", "namespace": "kruise-system"}, "data": {"SidecarSet_PatchPodMetadata_WhiteList": "{}"}}));
    server.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "kruise-system"}, "data": {}}));
    server.apply(sidecarset("sidecar", "envoy:1"));
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn image(snapshot: &Snapshot, name: &str) -> Option<String> {
    snapshot
        .get("apps.kruise.io", "SidecarSet", "", name)
        .map(|s| s["spec"]["containers"][0]["image"].as_str().unwrap().to_owned())
}

/// Publish into an `ArcSwap`, as `serve` does.
fn publisher(target: &Arc<ArcSwap<Snapshot>>) -> impl Fn(Arc<Snapshot>) + Send + Sync + 'static {
    let target = Arc::clone(target);
    move |snapshot| target.store(snapshot)
}

async fn started(server: &FakeApiServer) -> (LiveCluster, Arc<ArcSwap<Snapshot>>) {
    let target = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let live = LiveCluster::start(server.client(), settings(), publisher(&target)).await.unwrap();
    live.wait_synced(Duration::from_secs(5)).await.unwrap();
    (live, target)
}

#[tokio::test]
async fn initial_sync_gates_readiness_and_fills_the_snapshot() {
    let server = FakeApiServer::start().await;
    seed(&server);
    // Hold back the Namespace list (a kind every install can read): nothing may be published,
    // readiness must say why.
    server.forbid("list", "namespaces");
    let target = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let live = LiveCluster::start(server.client(), settings(), publisher(&target)).await.unwrap();
    wait_for("the other kinds to list", || {
        server.requests("list", "namespaces") >= 1 && server.requests("watch", "controllerrevisions") >= 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!live.synced());
    let why = live.readiness().unwrap_err();
    assert!(why.contains("Namespace") && why.contains("forbidden"), "{why}");
    assert!(target.load().is_empty(), "a half-synced cache must not be published");
    // RBAC refusal on the initial list of a required kind is a start-up error for serve.
    let err = live.wait_synced(Duration::from_secs(5)).await.unwrap_err();
    assert!(err.to_string().contains("list on namespaces"), "{err}");

    // The watch keeps retrying (with backoff) and heals once RBAC allows the list.
    server.allow("list", "namespaces");
    wait_for("the retried list", || live.synced()).await;
    assert_eq!(live.readiness(), Ok(()));
    let snapshot = target.load();
    assert_eq!(image(&snapshot, "sidecar").as_deref(), Some("envoy:1"));
    let sidecarset = snapshot.get("apps.kruise.io", "SidecarSet", "", "sidecar").unwrap();
    assert_eq!(sidecarset["spec"]["selector"]["matchLabels"]["app"], "web", "SidecarSets are kept whole");
    assert!(sidecarset["metadata"].get("managedFields").is_none(), "managedFields are dropped");
    // Namespaces: labels kept, everything else dropped.
    let ns = snapshot.get("", "Namespace", "", "shop").unwrap();
    assert_eq!(ns["metadata"]["labels"]["env"], "prod");
    assert_eq!(ns["apiVersion"], "v1", "list items come without apiVersion; the cache sets it");
    assert!(ns.get("status").is_none() && ns["metadata"].get("annotations").is_none());
    // Only the Kruise namespace's revisions and only the kruise-configuration ConfigMap.
    let revision =
        snapshot.revision("kruise-system", "sidecar-abc").expect("the Kruise namespace's revision");
    assert_eq!(revision.sidecarset.as_deref(), Some("sidecar"), "revisions keep what decisions read");
    assert_eq!(revision.spec(), Some(json!({"containers": []})));
    assert!(snapshot.revision("default", "elsewhere").is_none());
    assert!(snapshot.get("", "ConfigMap", "kruise-system", "kruise-configuration").is_some());
    assert!(snapshot.get("", "ConfigMap", "kruise-system", "other").is_none());
    let stats = live.stats();
    let count = |kind: &str| stats.kinds.iter().find(|k| k.kind == kind).unwrap().objects;
    assert_eq!(
        (count("SidecarSet"), count("Namespace"), count("ControllerRevision"), count("ConfigMap")),
        (1, 2, 1, 1)
    );
    assert!(stats.snapshot_built_at.is_some());
}

/// Without OpenKruise's namespace (or without the Role in it), the Kruise namespace's
/// ControllerRevisions and ConfigMap are forbidden: the caches sync with them empty, the server is
/// ready, stats say which kinds are unreadable, and a later grant fills them in.
#[tokio::test]
async fn the_kruise_namespace_unreadable_is_cached_as_empty_until_a_grant() {
    let server = FakeApiServer::start().await;
    seed(&server);
    server.forbid("list", "controllerrevisions");
    server.forbid("list", "configmaps");
    let (live, target) = started(&server).await;
    assert_eq!(live.readiness(), Ok(()));
    let unreadable = |live: &LiveCluster| -> Vec<String> {
        live.stats().kinds.into_iter().filter(|k| k.unreadable).map(|k| k.kind).collect()
    };
    assert_eq!(unreadable(&live), ["ControllerRevision", "ConfigMap"]);
    let snapshot = target.load();
    assert_eq!(image(&snapshot, "sidecar").as_deref(), Some("envoy:1"), "SidecarSets are served");
    assert!(snapshot.revision("kruise-system", "sidecar-abc").is_none());

    server.allow("list", "controllerrevisions");
    server.allow("list", "configmaps");
    wait_for("the granted kinds to fill in", || {
        target.load().revision("kruise-system", "sidecar-abc").is_some()
            && target.load().get("", "ConfigMap", "kruise-system", "kruise-configuration").is_some()
    })
    .await;
    assert!(unreadable(&live).is_empty());
    assert_eq!(live.readiness(), Ok(()));
}

#[tokio::test]
async fn sidecarset_changes_reach_the_snapshot_within_a_second() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let (_live, target) = started(&server).await;
    let within_a_second = |what: &'static str, check: Box<dyn Fn(&Snapshot) -> bool>| {
        let target = Arc::clone(&target);
        async move {
            let start = Instant::now();
            wait_for(what, || check(&target.load())).await;
            assert!(start.elapsed() < Duration::from_secs(1), "{what} took {:?}", start.elapsed());
        }
    };
    server.apply(sidecarset("added", "log-agent:2"));
    within_a_second("an added SidecarSet", Box::new(|s| image(s, "added").as_deref() == Some("log-agent:2")))
        .await;
    server.apply(sidecarset("sidecar", "envoy:2"));
    within_a_second("a changed SidecarSet", Box::new(|s| image(s, "sidecar").as_deref() == Some("envoy:2")))
        .await;
    server.delete("apps.kruise.io", "sidecarsets", "", "added");
    within_a_second(
        "a deleted SidecarSet",
        Box::new(|s| image(s, "added").is_none() && image(s, "sidecar").is_some()),
    )
    .await;
}

#[tokio::test]
async fn a_burst_of_changes_is_coalesced_and_readers_see_whole_snapshots() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let (_live, target) = started(&server).await;
    let before = Arc::clone(&target.load_full());
    for i in 0..50 {
        server.apply(sidecarset(&format!("burst-{i:02}"), "x:1"));
    }
    wait_for("the whole burst", || target.load().list("apps.kruise.io", "SidecarSet", None).count() == 51)
        .await;
    // A snapshot a reader already holds never changes under it.
    assert_eq!(before.list("apps.kruise.io", "SidecarSet", None).count(), 1);
}

#[tokio::test]
async fn a_dropped_watch_reconnects_and_keeps_serving() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let (live, target) = started(&server).await;
    let watches = server.requests("watch", "sidecarsets");
    server.drop_watches();
    // While the watch is down the last snapshot is still there and readiness holds.
    assert_eq!(image(&target.load(), "sidecar").as_deref(), Some("envoy:1"));
    assert_eq!(live.readiness(), Ok(()));
    wait_for("a new watch", || server.requests("watch", "sidecarsets") > watches).await;
    assert_eq!(
        server.requests("list", "sidecarsets"),
        1,
        "a dropped connection resumes the watch; no relist"
    );
    server.apply(sidecarset("after-drop", "y:1"));
    wait_for("an event on the new watch", || image(&target.load(), "after-drop").is_some()).await;
    let stats = live.stats();
    let sidecarsets = stats.kinds.iter().find(|k| k.kind == "SidecarSet").unwrap();
    assert!(sidecarsets.reconnects >= 1, "{sidecarsets:?}");
    assert_eq!(live.readiness(), Ok(()));
}

#[tokio::test]
async fn a_stale_resource_version_relists() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let (live, target) = started(&server).await;
    // Make the cache's resourceVersion too old, change things, and cut the watch: the re-watch
    // gets 410 Gone and must relist to see the changes (including a deletion it never saw).
    server.compact();
    server.drop_watches();
    server.apply(sidecarset("while-away", "z:1"));
    server.delete("apps.kruise.io", "sidecarsets", "", "sidecar");
    server.compact();
    wait_for("the relist", || server.requests("list", "sidecarsets") >= 2).await;
    wait_for("the relisted snapshot", || {
        let s = target.load();
        image(&s, "while-away").is_some() && image(&s, "sidecar").is_none()
    })
    .await;
    assert!(live.stats().kinds.iter().find(|k| k.kind == "SidecarSet").unwrap().relists >= 1);
    assert_eq!(live.readiness(), Ok(()));
}

#[tokio::test]
async fn a_change_decodes_only_the_changed_sidecarset_and_a_relist_none() {
    let server = FakeApiServer::start().await;
    seed(&server);
    server.apply(sidecarset("another", "agent:1"));
    let (live, target) = started(&server).await;
    let labels = Json::from(json!({"app": "web"}));
    let candidates = |s: &Snapshot| -> Vec<Arc<_>> {
        s.sidecarset_index().candidates("shop", labels.as_object()).into_iter().cloned().collect()
    };
    let before = candidates(&target.load());
    assert_eq!(before.iter().map(|s| s.name()).collect::<Vec<_>>(), ["another", "sidecar"]);

    server.apply(sidecarset("sidecar", "envoy:2"));
    wait_for("the change", || image(&target.load(), "sidecar").as_deref() == Some("envoy:2")).await;
    let after = candidates(&target.load());
    assert!(Arc::ptr_eq(&before[0], &after[0]), "the unchanged SidecarSet is shared, not decoded again");
    assert_eq!(after[1].spec.containers[0].container["image"], "envoy:2");

    // A relist that finds nothing new re-reads every object (and publishes a new snapshot), but
    // decodes none of them again.
    let published = target.load_full();
    server.compact();
    server.drop_watches();
    server.compact();
    wait_for("the relist", || {
        live.stats().kinds.iter().find(|k| k.kind == "SidecarSet").unwrap().relists >= 1
    })
    .await;
    wait_for("the SidecarSet list", || server.requests("list", "sidecarsets") >= 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!Arc::ptr_eq(&target.load_full(), &published), "the relist published a new snapshot");
    let relisted = candidates(&target.load());
    assert!(
        relisted.iter().zip(&after).all(|(a, b)| Arc::ptr_eq(a, b)),
        "equal objects after a relist are not refiled"
    );
}

#[tokio::test]
async fn a_watch_that_cannot_recover_turns_unready_after_the_staleness_limit() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let target = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let live = LiveCluster::start(
        server.client(),
        LiveSettings { max_cache_staleness: Duration::from_millis(300), ..settings() },
        publisher(&target),
    )
    .await
    .unwrap();
    live.wait_synced(Duration::from_secs(5)).await.unwrap();
    server.forbid("watch", "namespaces");
    server.forbid("list", "namespaces");
    server.drop_watches();
    wait_for("the watch to fail", || {
        live.stats().kinds.iter().any(|k| k.kind == "Namespace" && k.failing_for.is_some())
    })
    .await;
    assert_eq!(live.readiness(), Ok(()), "a short failure is tolerated");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let why = live.readiness().unwrap_err();
    assert!(why.contains("Namespace watch has been failing") && why.contains("forbidden"), "{why}");
    // Still serving the last snapshot.
    assert!(target.load().get("", "Namespace", "", "shop").is_some());
    server.allow("watch", "namespaces");
    server.allow("list", "namespaces");
    wait_for("recovery", || live.readiness().is_ok()).await;
}

#[tokio::test]
async fn v1alpha1_only_clusters_are_watched_at_v1alpha1() {
    let server = FakeApiServer::start_with(fake_apiserver::resources(&["v1alpha1"])).await;
    server.apply(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "old"}, "spec": {}}));
    let (_live, target) = started(&server).await;
    let snapshot = target.load();
    assert_eq!(
        snapshot.get("apps.kruise.io", "SidecarSet", "", "old").unwrap()["apiVersion"],
        "apps.kruise.io/v1alpha1"
    );
}

#[tokio::test]
async fn start_fails_fast_without_the_crd_or_the_api_server() {
    let server = FakeApiServer::start_with(fake_apiserver::resources(&[])).await;
    let target = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let err = LiveCluster::start(server.client(), settings(), publisher(&target)).await.err().unwrap();
    assert!(matches!(err, LiveError::MissingCrd(_)), "{err}");
    assert!(err.to_string().contains("sidecarsets.apps.kruise.io"), "{err}");

    let client = server.client();
    drop(server);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = LiveCluster::start(client, settings(), publisher(&target)).await.err().unwrap();
    assert!(err.to_string().contains("cannot reach the API server"), "{err}");
}

#[tokio::test]
async fn a_list_that_never_answers_counts_as_a_failing_watch() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let target = Arc::new(ArcSwap::from_pointee(Snapshot::default()));
    let fast = LiveSettings { request_timeout: Duration::from_millis(300), ..settings() };
    let live = LiveCluster::start(server.client(), fast, publisher(&target)).await.unwrap();
    live.wait_synced(Duration::from_secs(5)).await.unwrap();
    // Force a relist against an API server that accepts the request and does not answer.
    server.slow_down(Duration::from_secs(30));
    server.compact();
    server.drop_watches();
    wait_for("the hanging relist to be noticed", || {
        live.stats().kinds.iter().any(|k| {
            k.last_error.as_deref().is_some_and(|e| e.contains("did not answer")) && k.failing_for.is_some()
        })
    })
    .await;
    assert!(
        target.load().get("apps.kruise.io", "SidecarSet", "", "sidecar").is_some(),
        "the last snapshot is still served"
    );
}

#[tokio::test]
async fn pubs_and_the_workloads_the_finder_reads_are_watched_where_pubs_are_served() {
    use kruise_admission::cluster::controller_finder::{ControllerRef, find};
    let server = FakeApiServer::start_with(fake_apiserver::resources_with_pubs()).await;
    seed(&server);
    let template = json!({"metadata": {"labels": {"app": "shop"}}, "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
    server.apply(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "namespace": "shop", "annotations": {"big": "x"}},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "shop"}}, "template": template}}));
    let deployment_uid =
        server.get("apps", "deployments", "shop", "shop").unwrap()["metadata"]["uid"].clone();
    server.apply(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "shop-1", "namespace": "shop",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop", "uid": deployment_uid, "controller": true}]},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "shop"}}, "template": template}}));
    server.apply(json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}}, "template": template}}));
    server.apply(json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget", "metadata": {"name": "shop", "namespace": "shop"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}, "maxUnavailable": 1}}));
    server.apply(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState", "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "db"}},
        "status": {"podStates": {"db-0": {"nodeName": "n1", "nodeTopologyLabels": {"zone": "z1"}}}}}));
    let (live, target) = started(&server).await;
    let snapshot = target.load();
    assert!(snapshot.get("policy.kruise.io", "PodUnavailableBudget", "shop", "shop").is_some());
    // PersistentPodStates are kept as far as step 6 reads them: no node name.
    let state = snapshot.get("apps.kruise.io", "PersistentPodState", "shop", "db").unwrap();
    assert_eq!(state["status"], json!({"podStates": {"db-0": {"nodeTopologyLabels": {"zone": "z1"}}}}));
    // Workloads are kept as far as the finder reads them: no template, no annotations.
    let deployment = snapshot.get("apps", "Deployment", "shop", "shop").unwrap();
    assert_eq!(deployment["spec"], json!({"replicas": 3, "selector": {"matchLabels": {"app": "shop"}}}));
    assert!(deployment["metadata"].get("annotations").is_none(), "{deployment}");
    let reference = ControllerRef { api_version: "apps/v1", kind: "ReplicaSet", name: "shop-1", uid: "" };
    let found = find(&snapshot, "kruise-system", reference, "shop").unwrap().unwrap();
    assert_eq!((found.kind.as_str(), found.name.as_str(), found.replicas), ("Deployment", "shop", 3));
    let reference =
        ControllerRef { api_version: "apps.kruise.io/v1beta1", kind: "StatefulSet", name: "db", uid: "" };
    assert_eq!(find(&snapshot, "kruise-system", reference, "shop").unwrap().unwrap().replicas, 2);
    let kinds: Vec<String> = live.stats().kinds.into_iter().map(|k| k.kind).collect();
    for kind in [
        "PodUnavailableBudget",
        "Deployment",
        "ReplicaSet",
        "StatefulSet",
        "CloneSet",
        "StatefulSet.apps.kruise.io",
        "WorkloadSpread",
        "Job",
        "PersistentPodState",
        "PodProbeMarker",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }
    assert!(live.stats().skipped_steps.is_empty());
}

#[tokio::test]
async fn without_pubs_and_workloadspreads_their_steps_are_skipped_and_no_workload_is_watched() {
    let server = FakeApiServer::start().await;
    seed(&server);
    let (live, _target) = started(&server).await;
    let stats = live.stats();
    // Nor are WorkloadSpreads, PersistentPodStates or PodProbeMarkers served: their steps are skipped too.
    assert_eq!(
        stats.skipped_steps,
        ["related-pub", "workloadspread", "persistent-pod-state", "pod-probe-marker"]
    );
    let kinds: Vec<String> = stats.kinds.into_iter().map(|k| k.kind).collect();
    assert_eq!(kinds, ["SidecarSet", "Namespace", "ControllerRevision", "ConfigMap"]);
}
