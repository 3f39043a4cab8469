//! Kruise's `/mutate-pod` steps (the `KruisePodReady` readiness gate, container launch priority,
//! the related PUB, PersistentPodState, the probe steps) through both edges, the real HTTPS server and `dry-run`: in Kruise's order (launch priority
//! sees the injected sidecar), switched by Kruise's gates, idempotent, and keeping fields this
//! binary does not know.

use crate::common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use common::client::BOTH;
use common::server::TestServer;
use kruise_admission::admission::FixedClock;
use serde_json::{Value, json};
use time::macros::datetime;

const NOW: &str = "2026-07-02T09:56:09Z";

// As the cluster stores it (defaults and hash annotations, what `dry-run -o patched` of the
// hand-written SidecarSet prints); both `serve --cluster-dir` and `dry-run` keep such a SidecarSet as
// it is, and admit a hand-written one ([`HAND_WRITTEN`]) first.
const SIDECARSET: &str = "\
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata:
  name: logger
  annotations:
    kruise.io/sidecarset-hash: v74454b9v25ccc9v27z654fzz4czxf8w67b2b4dc8458c4f54d649f7v4c6v69ff
    kruise.io/sidecarset-hash-without-image: 54wdczcvf9fwd2bcvz4xw79dc4wzvb882244vbb4w2b6wwxv8b9zddf2752f7x99
spec:
  selector:
    matchLabels:
      app: web
  containers:
  - name: logger
    image: busybox:1.36
    podInjectPolicy: BeforeAppContainer
    upgradeStrategy:
      upgradeType: ColdUpgrade
    shareVolumePolicy:
      type: disabled
    imagePullPolicy: IfNotPresent
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
  updateStrategy:
    type: RollingUpdate
    maxUnavailable: 1
    partition: 0
  revisionHistoryLimit: 10
";

/// A cluster folder: the `default` Namespace and a SidecarSet for `app: web` pods.
fn cluster(dir: &Path) -> std::path::PathBuf {
    let cluster = dir.join("cluster");
    std::fs::create_dir_all(&cluster).unwrap();
    std::fs::write(
        cluster.join("namespaces.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n",
    )
    .unwrap();
    std::fs::write(cluster.join("sidecarset.yaml"), SIDECARSET).unwrap();
    cluster
}

/// A CloneSet's pod that launches its containers in order, with fields no Kubernetes has.
fn cloneset_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "web-0", "namespace": "default", "labels": {"app": "web"},
            "annotations": {"apps.kruise.io/container-launch-priority": "Ordered"},
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web",
                                  "uid": "c1", "controller": true, "blockOwnerDeletion": true}],
            "futureMetadata": {"kept": 1},
        },
        "spec": {
            "containers": [
                {"name": "app", "image": "nginx", "env": [{"name": "A", "value": "1"}], "futureContainerField": [1, 2]},
                {"name": "worker", "image": "busybox"},
            ],
            "futureSpecField": {"x": "y"},
        },
    })
}

fn review(pod: &Value) -> Value {
    common::pod_create_review(pod, "default")
}

fn dry_run(cluster: &Path, args: &[&str], review: &Value) -> Vec<Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--now", NOW, "--cluster-dir"])
        .arg(cluster)
        .args(args)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child.stdin.take().unwrap().write_all(review.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).expect("JSON")).collect()
}

/// The one line `dry-run` prints for one review.
fn decided(cluster: &Path, args: &[&str], pod: &Value) -> Value {
    let mut lines = dry_run(cluster, args, &review(pod));
    assert_eq!(lines.len(), 1);
    lines.remove(0)
}

fn apply(object: &Value, patch: &Value) -> Value {
    let mut patched = object.clone();
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).expect("an RFC 6902 patch");
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    patched
}

fn barrier(pod: &str, key: &str) -> Value {
    json!({"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": format!("{pod}-barrier"), "key": key}}})
}

/// The webhook run again on what it admitted (reinvocationPolicy IfNeeded) changes nothing.
fn assert_idempotent(cluster: &Path, args: &[&str], object: &Value) {
    let again = decided(cluster, args, object);
    assert_eq!(again["patch"], json!([]), "{}", again["object"]);
}

#[test]
fn steps_run_in_kruises_order_and_keep_unknown_fields() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    let pod = cloneset_pod();
    let line = decided(&cluster, &[], &pod);
    assert_eq!(line["allowed"], true, "{line}");
    let object = &line["object"];
    assert_eq!(apply(&pod, &line["patch"]), *object);
    assert_eq!(object["spec"]["readinessGates"], json!([{"conditionType": "KruisePodReady"}]));
    // The sidecar goes first (BeforeAppContainer) and, injected before launch priority runs, takes p_0.
    let containers = object["spec"]["containers"].as_array().unwrap();
    let names: Vec<&str> = containers.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["logger", "app", "worker"]);
    assert_eq!(containers[0]["env"].as_array().unwrap().last(), Some(&barrier("web-0", "p_0")));
    assert_eq!(containers[1]["env"], json!([{"name": "A", "value": "1"}, barrier("web-0", "p_-1")]));
    assert_eq!(containers[2]["env"], json!([barrier("web-0", "p_-2")]));
    // Unknown fields survive.
    assert_eq!(object["metadata"]["futureMetadata"], json!({"kept": 1}));
    assert_eq!(object["spec"]["futureSpecField"], json!({"x": "y"}));
    assert_eq!(containers[1]["futureContainerField"], json!([1, 2]));
    assert_idempotent(&cluster, &[], object);
}

#[test]
fn a_generated_name_comes_from_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    let mut pod = cloneset_pod();
    let metadata = pod["metadata"].as_object_mut().unwrap();
    metadata.remove("name");
    metadata.insert("generateName".into(), json!("web-"));
    let named = |seed: &str| decided(&cluster, &["--seed", seed], &pod)["object"].clone();
    let object = named("11");
    let name = object["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("web-") && name.len() == 9, "{name}");
    assert_eq!(object["spec"]["containers"][2]["env"], json!([barrier(name, "p_-2")]));
    assert_eq!(named("11"), object, "the same seed names the pod the same");
    assert_ne!(named("12")["metadata"]["name"], object["metadata"]["name"]);
    assert_idempotent(&cluster, &[], &object);
}

#[test]
fn the_readiness_gate_follows_kruises_gates() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "d-1", "namespace": "default",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "d", "uid": "r1", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    });
    assert_eq!(decided(&cluster, &[], &pod)["patch"], json!([]), "not a Kruise workload's pod");
    let on = ["--feature-gates=KruisePodReadinessGate=true"];
    let line = decided(&cluster, &on, &pod);
    assert_eq!(line["object"]["spec"]["readinessGates"], json!([{"conditionType": "KruisePodReady"}]));
    assert_idempotent(&cluster, &on, &line["object"]);
    // Kruise without its pod webhook: nothing at all, whatever the other gates say.
    let off =
        decided(&cluster, &["--feature-gates=PodWebhook=false,KruisePodReadinessGate=true"], &cloneset_pod());
    assert_eq!(off["patch"], json!([]));
    assert!(off["warnings"][0].as_str().unwrap().contains("disabled"), "{off}");
    // Gates that act on steps not made here are accepted.
    let other = decided(
        &cluster,
        &["--feature-gates=WorkloadSpread=false,EnhancedLivenessProbe=true,AllBeta=true"],
        &pod,
    );
    assert_eq!(other["patch"], json!([]));
}

#[tokio::test]
async fn serve_answers_as_dry_run_does() {
    assert_serve_answers_as_dry_run(None, &[cloneset_pod()]).await;
}

/// A SidecarSet written by hand: no defaults, no hash annotations.
const HAND_WRITTEN: &str = "\
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata: {name: tracer}
spec:
  selector: {matchLabels: {app: web}}
  containers: [{name: tracer, image: 'tracer:1'}]
";

/// A hand-written SidecarSet in the folder is admitted by `serve` as by `dry-run`: Kruise's defaults
/// and the hashes its webhook would store, which the injected pod records.
#[tokio::test]
async fn serve_admits_a_hand_written_sidecarset_as_dry_run_does() {
    assert_serve_answers_as_dry_run(Some(("tracer.yaml", HAND_WRITTEN)), &[cloneset_pod()]).await;
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = cluster(dir.path());
    std::fs::write(cluster_dir.join("tracer.yaml"), HAND_WRITTEN).unwrap();
    let patched = apply(&cloneset_pod(), &decided(&cluster_dir, &[], &cloneset_pod())["patch"]);
    let hashes: Value = serde_json::from_str(
        patched["metadata"]["annotations"]["kruise.io/sidecarset-hash"].as_str().unwrap(),
    )
    .unwrap();
    assert!(hashes["tracer"]["hash"].as_str().is_some_and(|h| h.len() > 20), "{hashes}");
}

/// `serve` over a cluster folder (plus `extra`, a file name and its text, when given) answers each
/// pod's review, over both protocols, exactly as `dry-run --output review` does on that folder,
/// with a patch.
async fn assert_serve_answers_as_dry_run(extra: Option<(&str, &str)>, pods: &[Value]) {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = cluster(dir.path());
    if let Some((file, text)) = extra {
        std::fs::write(cluster_dir.join(file), text).unwrap();
    }
    let server = TestServer::start_with(|config| {
        config.cluster_dir = cluster_dir.clone();
        config.clock = Arc::new(FixedClock(datetime!(2026-07-02 09:56:09 UTC)));
    })
    .await;
    let client = server.client();
    for pod in pods {
        let review = review(pod);
        let offline = dry_run(&cluster_dir, &["--output", "review"], &review);
        assert_eq!(offline.len(), 1);
        assert!(offline[0]["response"]["patch"].is_string(), "{}", offline[0]);
        for proto in BOTH {
            let reply = client.post_json(proto, "/mutate-pod", review.to_string()).await;
            assert_eq!(reply.status, 200);
            let online: Value = serde_json::from_slice(&reply.body).unwrap();
            assert_eq!(online, offline[0], "over {proto:?}");
        }
    }
    server.stop().await.expect("clean stop");
}

/// Every combination of what the two steps read (owner, launch annotation, priority envs, name or
/// generateName, number of containers, the readiness gate's feature gate), through the routing
/// table: the patch turns the pod into the object shown, a second call on that object returns no
/// patch, and fields nobody knows are still there.
#[test]
fn every_combination_is_idempotent_and_keeps_unknown_fields() {
    use kruise_admission::admission::feature_gates::{FeatureGates, Gate};
    use kruise_admission::admission::review::decode_review;
    use kruise_admission::admission::webhooks;
    use kruise_admission::admission::{Inputs, SeededRandom, Settings};
    use kruise_admission::cluster::{Answers, Snapshot};

    let owners = [
        None,
        Some(("apps.kruise.io/v1alpha1", "CloneSet", true)),
        Some(("apps.kruise.io/v1beta1", "StatefulSet", false)),
        Some(("apps/v1", "ReplicaSet", true)),
    ];
    let annotations = [None, Some("Ordered"), Some("ordered")];
    let priorities: [&[Option<&str>]; 4] = [
        &[],
        &[Some("1"), None, Some("3")],
        &[Some("2"), Some("2"), Some("2")],
        &[None, Some("-1"), Some("0")],
    ];
    let (cluster, answers) = (Snapshot::default(), Answers::default());
    let clock = FixedClock(datetime!(2026-07-02 09:56:09 UTC));
    let webhook = webhooks::by_path("/mutate-pod").unwrap();
    let mut changed = 0;
    for gate in [false, true] {
        let settings = Settings {
            gates: FeatureGates::from_flags(&[(Gate::KruisePodReadinessGate, gate)]),
            ..Settings::default()
        };
        let random = SeededRandom::new(3);
        let inputs = Inputs {
            cluster: &cluster,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let run = |pod: &Value| {
            let request = decode_review(review(pod)).unwrap();
            let outcome = webhooks::run(webhook, &request, &inputs).into_owned();
            assert!(outcome.decision.allowed, "{:?} for {pod}", outcome.decision.status);
            let patch = serde_json::to_value(&outcome.decision.patch).unwrap();
            (patch, outcome.mutated.unwrap())
        };
        for owner in owners {
            for annotation in annotations {
                for envs in priorities {
                    for count in 0..=3 {
                        for named in [true, false] {
                            let containers: Vec<Value> = (0..count)
                                .map(|i| {
                                    let mut c =
                                        json!({"name": format!("c{i}"), "image": "busybox", "x-unknown": i});
                                    if let Some(Some(p)) = envs.get(i) {
                                        c["env"] = json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": p}]);
                                    }
                                    c
                                })
                                .collect();
                            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"namespace": "default", "x-unknown": {"a": 1}},
                                "spec": {"containers": containers, "x-unknown": [1]}});
                            let metadata = pod["metadata"].as_object_mut().unwrap();
                            if named {
                                metadata.insert("name".into(), json!("p-0"));
                            } else {
                                metadata.insert("generateName".into(), json!("p-"));
                            }
                            if let Some((api_version, kind, controller)) = owner {
                                metadata.insert(
                                    "ownerReferences".into(),
                                    json!([{"apiVersion": api_version,
                                    "kind": kind, "name": "w", "uid": "u1", "controller": controller}]),
                                );
                            }
                            if let Some(value) = annotation {
                                metadata.insert(
                                    "annotations".into(),
                                    json!({"apps.kruise.io/container-launch-priority": value}),
                                );
                            }
                            let (patch, mutated) = run(&pod);
                            assert_eq!(apply(&pod, &patch), mutated);
                            assert_eq!(mutated["metadata"]["x-unknown"], json!({"a": 1}));
                            assert_eq!(mutated["spec"]["x-unknown"], json!([1]));
                            let (again, _) = run(&mutated);
                            assert_eq!(again, json!([]), "re-invoked on {mutated}");
                            changed += usize::from(patch != json!([]));
                        }
                    }
                }
            }
        }
    }
    // 768 pods; some of each kind are changed, so the checks above are not vacuous.
    assert!(changed > 200, "{changed}");
}

/// A Deployment's ReplicaSet, a PUB naming the Deployment and one selecting `app: web` pods.
const PUBS: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: shop, namespace: default, uid: d1}
spec: {replicas: 3, selector: {matchLabels: {app: shop}}}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: shop-7d4
  namespace: default
  uid: r1
  ownerReferences: [{apiVersion: apps/v1, kind: Deployment, name: shop, uid: d1, controller: true}]
spec: {replicas: 3, selector: {matchLabels: {app: shop}}}
---
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: shop-pub, namespace: default}
spec:
  targetRef: {apiVersion: apps/v1, kind: Deployment, name: shop}
  maxUnavailable: 1
---
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata: {name: web-pub, namespace: default}
spec:
  selector: {matchLabels: {app: web}}
  maxUnavailable: 25%
";

/// A pod of the `shop` Deployment (through its ReplicaSet).
fn shop_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "shop-7d4-x", "namespace": "default", "labels": {"app": "shop"}, "futureMetadata": 1,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "shop-7d4", "uid": "r1", "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    })
}

#[test]
fn the_related_pub_annotation_names_the_pub_by_target_ref_or_selector() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    std::fs::write(cluster.join("pubs.yaml"), PUBS).unwrap();
    let related = |line: &Value| line["object"]["metadata"]["annotations"]["kruise.io/related-pub"].clone();
    // The ReplicaSet's pod belongs to the Deployment the PUB names.
    let line = decided(&cluster, &[], &shop_pod());
    assert_eq!(related(&line), json!("shop-pub"), "{line}");
    assert_eq!(apply(&shop_pod(), &line["patch"]), line["object"]);
    assert_eq!(line["object"]["metadata"]["futureMetadata"], json!(1));
    assert_idempotent(&cluster, &[], &line["object"]);
    // The web pod is selected (and gets its sidecar too; the annotation comes after injection's).
    let line = decided(&cluster, &[], &cloneset_pod());
    assert_eq!(related(&line), json!("web-pub"), "{line}");
    assert_idempotent(&cluster, &[], &line["object"]);
    // Both PUB gates off: no annotation.
    let off = decided(&cluster, &["--feature-gates=PodUnavailableBudgetDeleteGate=false"], &shop_pod());
    assert_eq!(off["patch"], json!([]));
    let update = "--feature-gates=PodUnavailableBudgetDeleteGate=false,PodUnavailableBudgetUpdateGate=true";
    assert_eq!(related(&decided(&cluster, &[update], &shop_pod())), json!("shop-pub"));
}

#[tokio::test]
async fn serve_annotates_the_related_pub_as_dry_run_does() {
    assert_serve_answers_as_dry_run(Some(("pubs.yaml", PUBS)), &[shop_pod(), cloneset_pod()]).await;
}

/// A StatefulSet's PersistentPodState recording `db-0`'s zone and host, and a PodProbeMarker for
/// `app: db` pods.
const STATES: &str = "\
apiVersion: apps.kruise.io/v1alpha1
kind: PersistentPodState
metadata: {name: db, namespace: default}
spec:
  targetRef: {apiVersion: apps/v1, kind: StatefulSet, name: db}
  requiredPersistentTopology: {nodeTopologyKeys: [topology.kubernetes.io/zone]}
  preferredPersistentTopology:
  - {weight: 100, preference: {nodeTopologyKeys: [kubernetes.io/hostname]}}
status:
  podStates:
    db-0: {nodeName: node-1, nodeTopologyLabels: {topology.kubernetes.io/zone: zone-a, kubernetes.io/hostname: node-1}}
---
apiVersion: apps.kruise.io/v1alpha1
kind: PodProbeMarker
metadata: {name: db-idle, namespace: default}
spec:
  selector: {matchLabels: {app: db}}
  probes:
  - name: idle
    containerName: db
    podConditionType: game.io/idle
    probe: {exec: {command: [/idle.sh]}, periodSeconds: 5}
    markerPolicy: [{state: Succeeded, labels: {idle: 'true'}}]
";

/// A pod of the `db` StatefulSet, recreated under a name its PersistentPodState recorded.
fn db_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"},
                     "annotations": {"apps.kruise.io/using-enhanced-liveness": "true"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s1", "controller": true}]},
        "spec": {"nodeSelector": {"disk": "ssd"},
                 "containers": [{"name": "db", "image": "postgres", "livenessProbe": {"tcpSocket": {"port": 5432}}}]},
    })
}

#[test]
fn a_persistent_pod_state_steers_the_pod_and_the_probe_steps_follow_their_gates() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    std::fs::write(cluster.join("states.yaml"), STATES).unwrap();
    let line = decided(&cluster, &[], &db_pod());
    let object = &line["object"];
    assert_eq!(apply(&db_pod(), &line["patch"]), *object);
    assert_eq!(object["metadata"]["annotations"]["kruise.io/injected-persistent-pod-state"], json!("db"));
    assert_eq!(
        object["spec"]["nodeSelector"],
        json!({"disk": "ssd", "topology.kubernetes.io/zone": "zone-a"})
    );
    assert_eq!(
        object["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
        json!([{"weight": 100, "preference": {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}}])
    );
    // The alpha gates are off: the liveness probe stays, no probe annotations.
    assert_eq!(object["spec"]["containers"][0]["livenessProbe"], json!({"tcpSocket": {"port": 5432}}));
    assert!(object["metadata"]["annotations"].get("kruise.io/podprobe").is_none(), "{object}");
    assert_idempotent(&cluster, &[], object);

    // The enhanced liveness probe needs a Kruise workload's pod: a StatefulSet's keeps its probe.
    let gates = "--feature-gates=EnhancedLivenessProbe=true,EnablePodProbeMarkerOnServerless=true";
    let line = decided(&cluster, &[gates], &db_pod());
    let annotations = &line["object"]["metadata"]["annotations"];
    assert_eq!(
        annotations["kruise.io/podprobe"],
        json!(
            r#"[{"name":"idle","containerName":"db","probe":{"exec":{"command":["/idle.sh"]},"periodSeconds":5},"podConditionType":"game.io/idle"}]"#
        )
    );
    assert_eq!(annotations["kruise.io/podprobemarker-list"], json!("db-idle"));
    assert!(annotations.get("apps.kruise.io/container-probe-context").is_none(), "{annotations}");
    assert_idempotent(&cluster, &[gates], &line["object"]);
    let mut advanced = db_pod();
    advanced["metadata"]["ownerReferences"][0]["apiVersion"] = json!("apps.kruise.io/v1beta1");
    let line = decided(&cluster, &[gates], &advanced);
    let object = &line["object"];
    assert_eq!(
        object["metadata"]["annotations"]["apps.kruise.io/container-probe-context"],
        json!(r#"[{"name":"db","livenessProbe":{"tcpSocket":{"port":5432}}}]"#)
    );
    assert!(object["spec"]["containers"][0].get("livenessProbe").is_none(), "{object}");
    // The PersistentPodState names the apps/v1 StatefulSet: not this one's.
    assert!(object["metadata"]["annotations"].get("kruise.io/injected-persistent-pod-state").is_none());
    assert_idempotent(&cluster, &[gates], object);
}

#[tokio::test]
async fn serve_applies_the_persistent_pod_state_as_dry_run_does() {
    assert_serve_answers_as_dry_run(Some(("states.yaml", STATES)), &[db_pod()]).await;
}

/// A WorkloadSpread over the `web` CloneSet: subset `zone-a` holds one pod and patches a label
/// and a toleration in; `zone-b` takes the rest.
const WORKLOADSPREAD: &str = "\
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: web-spread
  namespace: default
  resourceVersion: \"41\"
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: web
  subsets:
  - name: zone-a
    maxReplicas: 1
    requiredNodeSelectorTerm:
      matchExpressions:
      - {key: topology.kubernetes.io/zone, operator: In, values: [zone-a]}
    tolerations:
    - {key: zone-a-only, operator: Exists, effect: NoSchedule}
    patch:
      metadata:
        labels:
          topology.example/zone: zone-a
  - name: zone-b
";

#[test]
fn a_workloadspread_subset_patches_the_pod_and_dry_run_lists_the_status_write() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster(dir.path());
    std::fs::write(cluster.join("workloadspread.yaml"), WORKLOADSPREAD).unwrap();
    let line = decided(&cluster, &[], &cloneset_pod());
    let pod = &line["object"];
    assert_eq!(apply(&cloneset_pod(), &line["patch"]), *pod);
    assert_eq!(
        pod["metadata"]["annotations"]["apps.kruise.io/matched-workloadspread"],
        json!(r#"{"name":"web-spread","subset":"zone-a"}"#)
    );
    assert_eq!(pod["metadata"]["labels"]["topology.example/zone"], json!("zone-a"));
    assert_eq!(
        pod["spec"]["tolerations"],
        json!([{"key": "zone-a-only", "operator": "Exists", "effect": "NoSchedule"}])
    );
    assert_eq!(
        pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchExpressions"][0]["values"],
        json!(["zone-a"])
    );
    assert_eq!(pod["metadata"]["futureMetadata"], json!({"kept": 1}), "unknown fields survive the patch");
    // The sidecar is still injected and the launch barrier still follows it.
    assert_eq!(pod["spec"]["containers"][0]["name"], json!("logger"));
    assert_eq!(
        line["writes"],
        json!([{
            "verb": "update", "subresource": "status", "apiVersion": "apps.kruise.io/v1alpha1",
            "kind": "WorkloadSpread", "namespace": "default", "name": "web-spread",
            "object": {
                "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
                "metadata": {"name": "web-spread", "namespace": "default", "resourceVersion": "41"},
                "spec": workloadspread_spec(),
                "status": {"versionedSubsetStatuses": {"versionIgnored": [
                    {"name": "zone-a", "replicas": 0, "missingReplicas": 0, "creatingPods": {"web-0": NOW}},
                    {"name": "zone-b", "replicas": 0, "missingReplicas": -1},
                ]}},
            },
        }])
    );
    // Called again on what it admitted: the subset is not given twice, nothing recorded again.
    assert_idempotent(&cluster, &[], pod);
    assert_eq!(decided(&cluster, &[], pod)["writes"], json!([]));
    // A dry-run request: no patch from the step, no write.
    let mut dry = review(&cloneset_pod());
    dry["request"]["dryRun"] = json!(true);
    let lines = dry_run(&cluster, &[], &dry);
    assert_eq!(lines[0]["writes"], json!([]));
    assert!(
        lines[0]["object"]["metadata"]["annotations"].get("apps.kruise.io/matched-workloadspread").is_none()
    );
}

/// The WorkloadSpread's spec as the folder has it.
fn workloadspread_spec() -> Value {
    let objects = kruise_admission::cluster::files::read_documents(WORKLOADSPREAD).unwrap();
    objects[0]["spec"].clone()
}
