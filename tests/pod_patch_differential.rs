//! `/mutate-pod` patches, byte for byte, against the ones recorded in
//! `tests/golden/expected/pod-patches.txt`, which were written by the copy-and-diff engine (the pod
//! cloned into a mutable `Value`, mutated, diffed) before copy-on-write replaced it (issue 20).
//!
//! Cases: every pod we have (recorded reviews, workload templates, edge cases), each against no
//! SidecarSet, the examples' cluster, and the examples' SidecarSets made to select every pod, with
//! and without a DaemonSet-style target node; then 1,500 generated pods and SidecarSets (a
//! deterministic proptest stream) in shapes the fixtures lack: no metadata, null annotations,
//! volumes or init containers, sidecars replacing app containers, hot upgrade, resourcesPolicy,
//! duplicate pull secrets, tolerations, affinity and nodeName for the stamp, shuffled key orders.
//!
//! Per case the file keeps a SHA-256 of the decision as `serve` answers it (allowed, status,
//! warnings, the patch as serialised JSON) and of the mutated pod `dry-run` shows (keys in order).
//! `UPDATE_POD_PATCHES=1 cargo test --test integration pod_patch_differential::` rewrites the
//! file; a change to it is a change of behaviour and must be explained in review.

use crate::common;

use std::fmt::Write as _;
use std::path::Path;

use crate::sidecarset_strategies::{self, Parts};
use kruise_admission::admission::review::Decision;
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::files::load_objects;
use kruise_admission::cluster::{Answers, Snapshot};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

const GENERATED_CASES: usize = 1500;

/// The decision's bytes as `serve` writes them, and the mutated pod's.
fn digest(decision: &Decision, mutated: Option<&Value>) -> String {
    let mut text = format!("{}\n{:?}\n{:?}\n", decision.allowed, decision.status, decision.warnings);
    text.push_str(&serde_json::to_string(&decision.patch).expect("a patch serialises"));
    text.push('\n');
    text.push_str(&mutated.map(Value::to_string).unwrap_or_default());
    let hash = Sha256::digest(text.as_bytes());
    hash.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

struct World {
    snapshot: Snapshot,
    label: &'static str,
}

/// The examples' SidecarSets with selectors that select every pod (and no namespace selector).
fn select_everything(objects: &[Value]) -> Vec<Value> {
    objects
        .iter()
        .cloned()
        .map(|mut o| {
            if o["kind"] == "SidecarSet" {
                o["spec"]["selector"] =
                    json!({"matchExpressions": [{"key": "never-set", "operator": "DoesNotExist"}]});
                if let Some(spec) = o["spec"].as_object_mut() {
                    spec.remove("namespaceSelector");
                }
            }
            o
        })
        .collect()
}

fn fixture_worlds() -> Vec<World> {
    let (examples, _) =
        load_objects(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster")).expect("examples");
    let examples: Vec<_> = examples.into_iter().map(|(_, object)| object).collect();
    vec![
        World { snapshot: Snapshot::default(), label: "empty" },
        World { snapshot: Snapshot::from_objects(examples.clone()), label: "examples" },
        World { snapshot: Snapshot::from_objects(select_everything(&examples)), label: "select-all" },
    ]
}

/// Every pod we have: recorded pod reviews, workload templates in two namespaces, edge cases; each
/// also with a target node, so the DaemonSet-style stamp runs after injection.
fn fixture_pods() -> Vec<(String, Value, String)> {
    let mut out = Vec::new();
    for (path, request) in common::recorded_pod_reviews() {
        let name = path.file_name().expect("a file name").to_string_lossy().into_owned();
        out.push((name, request.object.expect("a pod").into_value(), request.namespace));
    }
    for (name, pod) in common::workload_template_pods() {
        for ns in ["shop", "default"] {
            out.push((format!("{name}/{ns}"), pod.clone(), ns.to_owned()));
        }
    }
    let edge = [
        json!({"metadata": {"annotations": {"kruise-admission.dev/target-node": ""}}, "spec": {"containers": []}}),
        json!({"spec": {"containers": [{"name": "app"}], "nodeName": "n"}}),
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "1"}]}, "spec": {}}),
        json!({"metadata": {"annotations": {"kruise-admission.dev/daemon-scheduling": "true"}}, "spec": {"nodeName": "n2"}}),
        json!({"metadata": {"annotations": null, "labels": {"app": "shop"}}, "spec": {"containers": [{"name": "app"}], "volumes": null}}),
        json!({"metadata": {}, "spec": []}),
        json!({"kind": "Service", "metadata": {}, "spec": {}}),
        json!({"metadata": {"name": "no-spec"}}),
        json!({"metadata": "x", "spec": {}}),
        json!({"metadata": {"annotations": []}, "spec": {"containers": [{"name": "app"}]}}),
        json!({"metadata": {"annotations": {"kruise-admission.dev/target-node": "n"}}, "spec": {"affinity": 3}}),
    ];
    out.extend(edge.into_iter().enumerate().map(|(i, pod)| (format!("edge-{i}"), pod, "shop".to_owned())));
    let targeted: Vec<_> = out
        .iter()
        .filter_map(|(name, pod, ns)| {
            let mut pod = pod.clone();
            let metadata = pod.as_object_mut()?.entry("metadata").or_insert_with(|| json!({}));
            let annotations = metadata.as_object_mut()?.entry("annotations").or_insert_with(|| json!({}));
            annotations.as_object_mut()?.insert("kruise-admission.dev/target-node".into(), json!("node-1"));
            Some((format!("{name}+target-node"), pod, ns.clone()))
        })
        .collect();
    out.extend(targeted);
    out
}

// ---- Generated pods and SidecarSets ----

/// A map with its keys in a generated order (the diff pairs keys by position, so order matters).
fn shuffled(entries: Vec<(&'static str, Option<Value>)>) -> impl Strategy<Value = Value> {
    let present: Vec<(&'static str, Value)> =
        entries.into_iter().filter_map(|(k, v)| Some((k, v?))).collect();
    Just(present)
        .prop_shuffle()
        .prop_map(|kv| Value::Object(kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Map<_, _>>()))
}

fn maybe<T: std::fmt::Debug + Clone + 'static>(
    s: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(0.6, s)
}

fn env_var() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["POD_NAME", "MODE", "LEVEL", "IS_INJECTED"]),
        prop::sample::select(vec!["true", "x"]),
    )
        .prop_map(|(name, value)| json!({"name": name, "value": value}))
}

fn mount() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["logs", "data", "cache", "missing"]),
        prop::sample::select(vec!["/logs", "/data", "/cache", "/x"]),
        any::<bool>(),
    )
        .prop_map(|(name, path, expr)| {
            let mut m = json!({"name": name, "mountPath": path});
            if expr {
                m["subPathExpr"] = json!("$(POD_NAME)");
            }
            m
        })
}

fn resources() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({})),
        Just(json!({"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m"}})),
        Just(json!({"requests": {"memory": "1Gi"}})),
    ]
}

fn pod_container(name: &'static str) -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(env_var(), 0..3),
        prop::collection::vec(mount(), 0..3),
        maybe(resources()),
        maybe(Just(json!("Always"))),
    )
        .prop_flat_map(move |(env, mounts, resources, restart)| {
            shuffled(vec![
                ("name", Some(json!(name))),
                ("image", Some(json!("app:1"))),
                ("env", (!env.is_empty()).then(|| Value::Array(env))),
                ("volumeMounts", (!mounts.is_empty()).then(|| Value::Array(mounts))),
                ("resources", resources),
                ("restartPolicy", restart),
            ])
        })
}

fn containers(names: Vec<&'static str>) -> impl Strategy<Value = Value> {
    names.into_iter().map(pod_container).collect::<Vec<_>>().prop_map(Value::Array)
}

fn list_or_null(list: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![2 => Just(None), 1 => Just(Some(Value::Null)), 3 => list.prop_map(Some)]
}

fn annotations() -> impl Strategy<Value = Option<Value>> {
    let keys = vec![
        "team",
        "note",
        "kruise.io/sidecarset-injected-list",
        "kruise.io/sidecarset-hash",
        "kruise.io/sidecarset-working-hotupgrade-container",
        "kruise-admission.dev/target-node",
        "kruise-admission.dev/daemon-scheduling",
        "kruise.io/inject",
    ];
    let value = |key: &str| -> Value {
        match key {
            "note" => json!("{\"a\":1}"),
            "kruise.io/sidecarset-hash" => json!("{\"set-0\":\"h0\"}"),
            "kruise.io/sidecarset-working-hotupgrade-container" => json!("not json"),
            "kruise-admission.dev/target-node" => json!("node-7"),
            "kruise-admission.dev/daemon-scheduling" => json!("true"),
            "kruise.io/sidecarset-injected-list" => json!("set-1"),
            _ => json!("v"),
        }
    };
    list_or_null(prop::sample::subsequence(keys, 0..4).prop_shuffle().prop_map(move |ks| {
        Value::Object(ks.into_iter().map(|k| (k.to_owned(), value(k))).collect::<Map<_, _>>())
    }))
}

fn owner() -> impl Strategy<Value = Option<Value>> {
    maybe(
        prop::sample::select(vec![
            ("apps/v1", "DaemonSet"),
            ("apps.kruise.io/v1alpha1", "BroadcastJob"),
            ("apps/v1", "ReplicaSet"),
        ])
        .prop_map(
            |(v, k)| json!([{"apiVersion": v, "kind": k, "name": "o", "uid": "1", "controller": true}]),
        ),
    )
}

fn metadata() -> impl Strategy<Value = Option<Value>> {
    (prop::sample::select(vec!["a", "b"]), annotations(), owner(), any::<bool>()).prop_flat_map(
        |(app, annotations, owners, present)| {
            let m = shuffled(vec![
                ("name", Some(json!("p"))),
                ("labels", Some(json!({"app": app}))),
                ("annotations", annotations),
                ("ownerReferences", owners),
            ]);
            prop_oneof![4 => m.prop_map(Some), (if present { 0 } else { 1 }) => Just(None)]
        },
    )
}

fn tolerations() -> impl Strategy<Value = Value> {
    prop::sample::subsequence(
        vec![
            json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
            json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}),
            json!({"key": "user", "operator": "Exists"}),
        ],
        0..3,
    )
    .prop_map(Value::Array)
}

fn pod() -> impl Strategy<Value = Value> {
    let names =
        prop::sample::subsequence(vec!["app", "web", "proxy", "s0-c0", "s1-c1", "s0-c1-1", "agent"], 1..4)
            .prop_shuffle();
    let init_names = prop::sample::subsequence(vec!["init", "s0-c0", "s1-c0"], 0..2);
    (
        names.prop_flat_map(containers),
        list_or_null(init_names.prop_flat_map(containers)),
        list_or_null(Just(json!([{"name": "logs", "emptyDir": {}}, {"name": "data", "emptyDir": {}}]))),
        list_or_null(Just(json!([{"name": "regcred"}, {"name": "regcred"}, {"name": "other"}]))),
        (maybe(Just(json!("node-2"))), maybe(Just(json!(true))), list_or_null(tolerations())),
        list_or_null(Just(json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}, "podAffinity": {}}))),
        metadata(),
        maybe(Just(json!({"phase": "Pending"}))),
    )
        .prop_flat_map(|(containers, init, volumes, secrets, (node, host_network, tolerations), affinity, metadata, status)| {
            let spec = shuffled(vec![
                ("containers", Some(containers)),
                ("initContainers", init),
                ("volumes", volumes),
                ("imagePullSecrets", secrets),
                ("nodeName", node),
                ("hostNetwork", host_network),
                ("tolerations", tolerations),
                ("affinity", affinity),
                ("dnsPolicy", Some(json!("ClusterFirst"))),
            ]);
            (spec, Just((metadata, status)))
        })
        .prop_flat_map(|(spec, (metadata, status))| {
            shuffled(vec![
                ("apiVersion", Some(json!("v1"))),
                ("kind", Some(json!("Pod"))),
                ("metadata", metadata),
                ("spec", Some(spec)),
                ("status", status),
            ])
        })
}

/// The SidecarSets of this test: possibly without sidecars, with every optional part.
fn sidecarset(i: usize) -> impl Strategy<Value = Value> {
    let parts = Parts { min_sidecars: 0, target_node: true, resources_and_devices: true };
    sidecarset_strategies::sidecarset(i, mount().boxed(), parts)
}

fn generated() -> impl Strategy<Value = (Value, Vec<Value>)> {
    (pod(), (0usize..4).prop_flat_map(|n| (0..n).map(sidecarset).collect::<Vec<_>>()))
}

/// Each case's name and digest, in a fixed order.
fn outcomes() -> Vec<(String, String)> {
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let (settings, answers) = (Settings::default(), Answers::default());
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let mut out = Vec::new();
    let mut decide = |name: String, snapshot: &Snapshot, pod: &Value, namespace: &str| {
        let request = common::pod_create(pod, namespace);
        // Seeded the same for both calls: a partition draw must not differ between them.
        let (first, second) = (SeededRandom::new(7), SeededRandom::new(7));
        let inputs = |random| Inputs {
            cluster: snapshot,
            answers: &answers,
            clock: &clock,
            random,
            settings: &settings,
        };
        let served = webhooks::decide(webhook, &request, &inputs(&first));
        let outcome = webhooks::run(webhook, &request, &inputs(&second));
        assert_eq!(served, outcome.decision, "{name}: decide and run disagree");
        out.push((name, digest(&served, outcome.mutated.as_ref())));
    };
    let pods = fixture_pods();
    for world in fixture_worlds() {
        for (name, pod, namespace) in &pods {
            decide(format!("{}/{name}", world.label), &world.snapshot, pod, namespace);
        }
    }
    let mut runner =
        TestRunner::new_with_rng(Config::default(), TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let strategy = generated();
    for i in 0..GENERATED_CASES {
        let (pod, sets) = strategy.new_tree(&mut runner).expect("a case").current();
        decide(format!("generated-{i}"), &Snapshot::from_objects(sets), &pod, "default");
    }
    out
}

#[test]
fn pod_patches_are_the_recorded_ones() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/expected/pod-patches.txt");
    let actual: String = outcomes().into_iter().map(|(name, digest)| format!("{digest} {name}\n")).collect();
    if std::env::var_os("UPDATE_POD_PATCHES").is_some_and(|v| v == "1") {
        std::fs::write(&path, &actual).expect("writable");
        return;
    }
    let expected = std::fs::read_to_string(&path).expect("tests/golden/expected/pod-patches.txt");
    let differing: Vec<_> =
        expected.lines().zip(actual.lines()).filter(|(e, a)| e != a).map(|(_, a)| a.to_owned()).collect();
    assert!(
        differing.is_empty() && expected.lines().count() == actual.lines().count(),
        "{} of {} cases differ from the recorded patches (first: {:?})",
        differing.len(),
        expected.lines().count(),
        differing.first()
    );
}

/// The generated stream covers what it is there for (or the comparison above proves little).
#[test]
fn generated_cases_exercise_injection_and_the_stamp() {
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let (settings, answers, random) = (Settings::default(), Answers::default(), SeededRandom::new(7));
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let mut runner =
        TestRunner::new_with_rng(Config::default(), TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let strategy = generated();
    let (mut injected, mut stamped, mut denied, mut untouched) = (0, 0, 0, 0);
    for _ in 0..GENERATED_CASES {
        let (pod, sets) = strategy.new_tree(&mut runner).expect("a case").current();
        let snapshot = Snapshot::from_objects(sets);
        let inputs = Inputs {
            cluster: &snapshot,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let request = common::pod_create(&pod, "default");
        let decision = webhooks::decide(webhook, &request, &inputs);
        let paths: Vec<&str> = decision.patch.iter().map(|op| op.path()).collect();
        injected += usize::from(paths.iter().any(|p| p.starts_with("/spec/containers")));
        stamped += usize::from(
            paths.iter().any(|p| p.starts_with("/spec/tolerations") || p.starts_with("/spec/affinity")),
        );
        denied += usize::from(!decision.allowed);
        untouched += usize::from(decision.allowed && paths.is_empty());
    }
    let n = GENERATED_CASES / 10;
    assert!(
        injected > n && stamped > n && untouched > n / 2 && denied > 0,
        "{injected} {stamped} {denied} {untouched}"
    );
}
