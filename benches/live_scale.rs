//! Live mode at cluster scale: the `serve` binary (release) against the stand-in API server of
//! `tests/fake_apiserver`, filled with NAMESPACES Namespaces, SIDECARSETS SidecarSets (each with a
//! pod selector and a namespaceSelector) and REVISIONS ControllerRevisions per SidecarSet in the
//! Kruise namespace, each holding its SidecarSet's containers as Kruise writes them. It prints:
//!
//! - start to ready (the process spawned until `/readyz` answers 200), and RSS at ready (`VmRSS`)
//!   with the peak so far (`VmHWM`), from `/proc/<pid>/status`;
//! - change to effect: a SidecarSet's image changed in the API server until the first Pod review
//!   that gets the new image (reviews sent back to back);
//! - CPU per watch event (`utime + stime` of `/proc/<pid>/stat` over a burst of events, the burst
//!   ending when its last event is seen by a Pod review): Namespace relabels, then SidecarSet edits;
//! - RSS after the bursts.
//!
//! With WORKLOADS above 0 the cluster also holds what the other `/mutate-pod` steps watch: WORKLOADS
//! Deployments, each with its ReplicaSet, WORKLOADS Jobs and CloneSets, and one PodUnavailableBudget,
//! WorkloadSpread and PersistentPodState per ten workloads, each with the status Kruise's
//! controllers write.
//!
//! Run it at two sizes to see what an event costs against the cluster's size; `LIVE_SCALE_BIN` runs
//! another build of the binary (an older commit's, to compare).
//!
//! `cargo bench --bench live_scale [-- NAMESPACES SIDECARSETS REVISIONS WORKLOADS]` (defaults 10000 2000 10 0)

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/fake_apiserver/mod.rs"]
mod fake_apiserver;

use std::process::Stdio;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::client::{Proto, TlsClient, http_get};
use common::serve_process::{self, Serve, addr};
use fake_apiserver::FakeApiServer;
use hyper::StatusCode;
use serde_json::{Value, json};

const KRUISE_NAMESPACE: &str = "kruise-system";
/// Namespace labels `team: team-<n % TEAMS>`; SidecarSet `i` selects team `i % TEAMS`.
const TEAMS: usize = 50;
/// Events in each burst of the CPU measurement.
const BURST: usize = 500;

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .map_or(default, |a| a.parse().unwrap_or_else(|_| panic!("not a count: {a}")))
}

fn namespace(n: usize, team: usize, rev: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}"),
        "labels": {"kubernetes.io/metadata.name": format!("ns-{n}"), "team": format!("team-{team}"),
                   "env": "prod", "relabelled": rev.to_string()},
        "annotations": {"owner": format!("team-{team}@example.com")}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
}

/// The sidecar of SidecarSet `i` at `image`: a log agent with what such containers carry.
fn containers(i: usize, image: &str) -> Value {
    json!([{"name": format!("agent-{i}"), "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/agent", "--config=/etc/agent/agent.yaml", "--log-level=info"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "AGENT_ENDPOINT", "value": "https://collector.monitoring.svc:4317"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
        "volumeMounts": [{"name": "agent-config", "mountPath": "/etc/agent"}, {"name": "varlog", "mountPath": "/var/log"}],
        "podInjectPolicy": "BeforeAppContainer", "upgradeStrategy": {"upgradeType": "ColdUpgrade"},
        "shareVolumePolicy": {"type": "disabled"}, "transferEnv": [{"sourceContainerName": "app", "envName": "APP_ENV"}]}])
}

fn volumes(i: usize) -> Value {
    json!([{"name": "agent-config", "configMap": {"name": format!("agent-{i}-config")}},
           {"name": "varlog", "hostPath": {"path": "/var/log"}}])
}

fn hash(i: usize, image: &str) -> String {
    format!("{:x}", (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ image.len() as u64)
}

fn sidecarset(i: usize, image: &str, pinned: Option<&str>) -> Value {
    let mut set = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": format!("set-{i}"), "generation": 1,
            "annotations": {"kruise.io/sidecarset-hash": hash(i, image), "kruise.io/sidecarset-hash-without-image": hash(i, "")}},
        "spec": {"selector": {"matchLabels": {"app": format!("app-{i}")}},
            "namespaceSelector": {"matchLabels": {"team": format!("team-{}", i % TEAMS)}},
            "containers": containers(i, image), "volumes": volumes(i),
            "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1}},
        "status": {"observedGeneration": 1, "matchedPods": 0, "updatedPods": 0, "readyPods": 0,
            "latestRevision": revision_name(i, 0)}});
    if let Some(name) = pinned {
        set["spec"]["injectionStrategy"] = json!({"revision": {"revisionName": name, "policy": "Always"}});
    }
    set
}

fn revision_name(set: usize, r: usize) -> String {
    format!("set-{set}-{:08x}", (set * 31 + r) as u32)
}

fn image(set: usize, r: usize) -> String {
    format!("registry.example.com/agents/agent-{set}:1.{r}.0")
}

/// Revision `r` of SidecarSet `set`, as Kruise's controller writes it.
fn controller_revision(set: usize, r: usize) -> Value {
    let image = image(set, r);
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": revision_name(set, r), "namespace": KRUISE_NAMESPACE,
            "labels": {"kruise.io/sidecarset-name": format!("set-{set}"),
                       "apps.kruise.io/sidecarset-custom-version": format!("v{r}")},
            "annotations": {"kruise.io/sidecarset-hash": hash(set, &image), "kruise.io/sidecarset-hash-without-image": hash(set, "")},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "name": format!("set-{set}"),
                "uid": format!("00000000-0000-0000-0000-{set:012}"), "controller": true, "blockOwnerDeletion": true}]},
        "revision": r + 1,
        "data": {"spec": {"$patch": "replace", "containers": containers(set, &image), "volumes": volumes(set),
            "initContainers": [], "imagePullSecrets": []}}})
}

/// A Pod CREATE in `ns-<ns>` that SidecarSet `set` selects (when the namespace is on its team).
fn pod_review(uid: usize, set: usize, ns: usize) -> String {
    let namespace = format!("ns-{ns}");
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("scale-{uid}"), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": namespace, "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
        "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("web-{uid}"), "namespace": namespace,
            "labels": {"app": format!("app-{set}")}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1", "env": [{"name": "APP_ENV", "value": "prod"}]}]}}}})
    .to_string()
}

/// The images a `/mutate-pod` answer adds to `spec.containers`.
fn injected_images(reply: &Value) -> Vec<String> {
    let Some(patch) = reply["response"]["patch"].as_str() else { return Vec::new() };
    let ops: Value =
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(patch).unwrap()).unwrap();
    let mut images = Vec::new();
    for op in ops.as_array().unwrap() {
        if op["path"].as_str().unwrap_or_default().starts_with("/spec/containers") {
            let values = if op["value"].is_array() {
                op["value"].as_array().unwrap().clone()
            } else {
                vec![op["value"].clone()]
            };
            images.extend(values.iter().filter_map(|c| c["image"].as_str().map(str::to_owned)));
        }
    }
    images
}

struct Reviewer {
    client: TlsClient,
    sent: usize,
}

impl Reviewer {
    /// The sidecar images a Pod of SidecarSet `set`'s app in `ns-<ns>` gets now.
    async fn images(&mut self, set: usize, ns: usize) -> Vec<String> {
        self.sent += 1;
        let reply = self
            .client
            .post_json(Proto::Http2, "/mutate-pod?timeout=10s", pod_review(self.sent, set, ns))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
        let reply = reply.json();
        assert_eq!(reply["response"]["allowed"], true, "{reply}");
        injected_images(&reply)
    }

    /// Review until the Pod gets `want`; how long that took.
    async fn until(&mut self, set: usize, ns: usize, want: &str, within: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if self.images(set, ns).await == [want] {
                return start.elapsed();
            }
            assert!(start.elapsed() < within, "set-{set} in ns-{ns} never got {want}");
        }
    }
}

/// `VmRSS` and `VmHWM` of `pid`, in MiB.
fn rss(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/<pid>/status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time `pid` used so far (user + system).
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command (which may hold spaces) start at the last ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_secs_f64(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
}

/// Workload `w` of the pod path: a Deployment and its ReplicaSet, a Job and a CloneSet in `ns-<w %
/// namespaces>`, with the metadata, selector and template a real one has; every tenth also gets a
/// PodUnavailableBudget, a WorkloadSpread (three subsets, statuses as Kruise writes them) and a
/// PersistentPodState recording ten pods.
fn pod_path_objects(w: usize, namespaces: usize) -> Vec<Value> {
    let namespace = format!("ns-{}", w % namespaces);
    let labels = json!({"app": format!("svc-{w}"), "tier": "backend"});
    let template = json!({"metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": format!("registry.example.com/svc-{w}:1.0.0"),
            "ports": [{"containerPort": 8080}], "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}});
    let meta = |kind: &str, name: String, owner: Option<(&str, &str, String)>| {
        let mut meta = json!({"name": name, "namespace": namespace, "uid": format!("{kind}-{w}"), "generation": 3,
            "labels": labels, "annotations": {"deployment.kubernetes.io/revision": "3"}});
        if let Some((api_version, kind, name)) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": name,
                "uid": format!("{kind}-{w}"), "controller": true, "blockOwnerDeletion": true}]);
        }
        meta
    };
    let name = format!("svc-{w}");
    let spec = json!({"replicas": 10, "selector": {"matchLabels": labels}, "template": template});
    let mut objects = vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("Deployment", name.clone(), None), "spec": spec,
            "status": {"replicas": 10, "readyReplicas": 10, "observedGeneration": 3}}),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta("ReplicaSet", format!("{name}-7d9f8c6b5"), Some(("apps/v1", "Deployment", name.clone()))),
            "spec": spec, "status": {"replicas": 10, "readyReplicas": 10}}),
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("Job", format!("{name}-batch"), None),
            "spec": {"parallelism": 4, "completions": 10, "selector": {"matchLabels": labels}, "template": template}}),
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": meta("CloneSet", format!("{name}-clone"), None),
            "spec": spec, "status": {"replicas": 10, "readyReplicas": 10}}),
    ];
    if w.is_multiple_of(10) {
        let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": name});
        objects.push(json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"targetRef": target, "maxUnavailable": "20%"},
            "status": {"totalReplicas": 10, "desiredAvailable": 8, "currentAvailable": 10, "unavailableAllowed": 2, "observedGeneration": 1}}));
        let subsets: Vec<Value> = ["a", "b", "c"].iter().map(|z| json!({"name": format!("zone-{z}"), "maxReplicas": 4,
            "requiredNodeSelectorTerm": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": [format!("zone-{z}")]}]}})).collect();
        let statuses: Vec<Value> = ["a", "b", "c"]
            .iter()
            .map(|z| json!({"name": format!("zone-{z}"), "replicas": 3, "missingReplicas": 1}))
            .collect();
        objects.push(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"targetRef": target, "subsets": subsets},
            "status": {"observedGeneration": 1, "subsetStatuses": statuses}}));
        let states: serde_json::Map<String, Value> = (0..10).map(|p| (format!("{name}-{p}"), json!({"nodeName": format!("node-{p}"),
            "nodeTopologyLabels": {"topology.kubernetes.io/zone": "zone-a", "kubernetes.io/hostname": format!("node-{p}")}}))).collect();
        objects.push(json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name},
                "requiredPersistentTopology": {"nodeTopologyKeys": ["topology.kubernetes.io/zone"]}},
            "status": {"podStates": states}}));
    }
    objects
}

fn seed(api: &FakeApiServer, namespaces: usize, sets: usize, revisions: usize, workloads: usize) {
    for w in 0..workloads {
        for object in pod_path_objects(w, namespaces) {
            api.apply(object);
        }
    }
    api.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KRUISE_NAMESPACE}}));
    for n in 0..namespaces {
        api.apply(namespace(n, n % TEAMS, 0));
    }
    for i in 0..sets {
        // Every tenth SidecarSet pins its third revision (`injectionStrategy.revision`).
        let pinned = (i % 10 == 1).then(|| revision_name(i, 2));
        api.apply(sidecarset(i, &image(i, revisions.saturating_sub(1)), pinned.as_deref()));
        for r in 0..revisions {
            api.apply(controller_revision(i, r));
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (namespaces, sets, revisions, workloads) = (arg(1, 10_000), arg(2, 2_000), arg(3, 10), arg(4, 0));
    assert!(
        namespaces >= TEAMS && sets >= TEAMS && revisions >= 3,
        "at least {TEAMS} namespaces and SidecarSets, 3 revisions"
    );
    let api = if workloads > 0 {
        FakeApiServer::start_with(fake_apiserver::resources_with_pubs()).await
    } else {
        FakeApiServer::start().await
    };
    let seeding = Instant::now();
    seed(&api, namespaces, sets, revisions, workloads);
    println!(
        "cluster: {namespaces} Namespaces, {sets} SidecarSets, {} ControllerRevisions, {workloads} each of Deployments, ReplicaSets, Jobs and CloneSets, {} each of PodUnavailableBudgets, WorkloadSpreads and PersistentPodStates (seeded in {:.1} s)",
        sets * revisions,
        workloads.div_ceil(10),
        seeding.elapsed().as_secs_f64()
    );

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path());
    let mut command = serve_process::command(dir.path(), None);
    if let Some(bin) = std::env::var_os("LIVE_SCALE_BIN") {
        // The same arguments, another program.
        let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
        command = std::process::Command::new(bin);
        command.current_dir(dir.path()).args(args).env("RUST_LOG", "info");
    }
    command
        .args(["--cluster-mode", "live", "--kubeconfig"])
        .arg(&kubeconfig)
        .env("POD_NAMESPACE", "kruise-admission")
        // As the image runs it (Dockerfile): mimalloc gives freed pages back at once.
        .env("MIMALLOC_PURGE_DELAY", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let started = Instant::now();
    let serve = Serve::spawn(&mut command);
    let pid = serve.child.id();
    let listening =
        tokio::task::block_in_place(|| serve.until("kruise-admission ready to serve")).pop().unwrap();
    let (https, metrics) = (addr(&listening, "https"), addr(&listening, "metrics"));
    while http_get(metrics, "/readyz").await.0 != StatusCode::OK {
        assert!(started.elapsed() < Duration::from_secs(120), "not ready after 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = started.elapsed();
    let (rss_ready, hwm_ready) = rss(pid);
    println!(
        "ready: {:.2} s; RSS at ready {rss_ready:.1} MiB (peak {hwm_ready:.1} MiB)",
        ready.as_secs_f64()
    );

    let ca = std::fs::read(dir.path().join("certs/ca.crt")).unwrap();
    let mut reviewer = Reviewer { client: TlsClient::new(https, &ca), sent: 0 };
    let last = revisions - 1;
    assert_eq!(reviewer.images(0, 0).await, [image(0, last)], "set-0 injects its live image");
    assert_eq!(reviewer.images(1, 1).await, [image(1, 2)], "set-1 injects its pinned revision");

    // Change to effect: a new image for set-0, seen by the next Pod reviews.
    let edited = "registry.example.com/agents/agent-0:2.0.0";
    api.apply(sidecarset(0, edited, None));
    let effect = reviewer.until(0, 0, edited, Duration::from_secs(30)).await;
    println!("SidecarSet change to the first Pod review that sees it: {:.3} s", effect.as_secs_f64());

    // Namespace relabels: BURST label changes that move no SidecarSet, then one that moves ns-2
    // onto set-0's team, which the last review waits for.
    let before = cpu(pid);
    let timer = Instant::now();
    for k in 0..BURST - 1 {
        let n = 3 + k % (namespaces - 3);
        api.apply(namespace(n, n % TEAMS, k + 1));
    }
    api.apply(namespace(2, 0, 1));
    reviewer.until(0, 2, edited, Duration::from_secs(60)).await;
    let spent = cpu(pid) - before;
    println!(
        "Namespace events: {BURST} in {:.2} s wall, {:.2} s CPU: {:.0} µs CPU per event",
        timer.elapsed().as_secs_f64(),
        spent.as_secs_f64(),
        spent.as_secs_f64() * 1e6 / BURST as f64
    );

    // SidecarSet edits: BURST new images, the last one on set-0.
    let before = cpu(pid);
    let timer = Instant::now();
    for k in 0..BURST - 1 {
        let i = 2 + k % (sets - 2);
        api.apply(sidecarset(i, &format!("registry.example.com/agents/agent-{i}:3.{k}.0"), None));
    }
    let final_image = "registry.example.com/agents/agent-0:4.0.0";
    api.apply(sidecarset(0, final_image, None));
    reviewer.until(0, 0, final_image, Duration::from_secs(60)).await;
    let spent = cpu(pid) - before;
    println!(
        "SidecarSet events: {BURST} in {:.2} s wall, {:.2} s CPU: {:.0} µs CPU per event",
        timer.elapsed().as_secs_f64(),
        spent.as_secs_f64(),
        spent.as_secs_f64() * 1e6 / BURST as f64
    );
    let (rss_after, hwm_after) = rss(pid);
    println!("RSS after the events {rss_after:.1} MiB (peak {hwm_after:.1} MiB)");
    drop(serve);
}
