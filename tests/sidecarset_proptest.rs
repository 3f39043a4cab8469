//! No data loss: random pods carrying unknown fields at every level, random SidecarSets. The patch
//! only touches what injection owns (containers and init containers it injects, added volumes and
//! pull secrets, its annotations), every other field (known or not) survives unchanged, the patch
//! applies independently to give the mutated pod, and a second run yields no patch.

use std::collections::BTreeSet;

use crate::sidecarset_strategies::{self, Parts};
use kruise_admission::admission::review::decode_review;
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn extra() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        any::<i32>().prop_map(Value::from),
        "[a-z]{0,6}".prop_map(Value::from),
        Just(json!({"nested": {"deep": [1, "x", {"k": true}]}})),
    ]
}

fn env_var() -> impl Strategy<Value = Value> {
    (prop::sample::select(vec!["POD_NAME", "MODE", "LEVEL", "IS_INJECTED"]), "[a-z]{1,4}", extra())
        .prop_map(|(name, value, x)| json!({"name": name, "value": value, "x-future-env": x}))
}

fn mount() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["logs", "data", "cache"]),
        prop::sample::select(vec!["/logs", "/data", "/cache", "/x"]),
        any::<bool>(),
        extra(),
    )
        .prop_map(|(name, path, expr, x)| {
            let mut m = json!({"name": name, "mountPath": path, "x-future-mount": x});
            if expr {
                m["subPathExpr"] = json!("$(POD_NAME)");
            }
            m
        })
}

fn pod_container(name: String) -> impl Strategy<Value = Value> {
    (prop::collection::vec(env_var(), 0..3), prop::collection::vec(mount(), 0..3), extra()).prop_map(move |(env, mounts, x)| {
        json!({"name": name, "image": "app:1", "env": env, "volumeMounts": mounts, "x-future-container": x, "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}})
    })
}

fn pod() -> impl Strategy<Value = Value> {
    (
        prop::sample::subsequence(vec!["app", "web", "proxy", "s0-c0", "s1-c1", "s0-c1-1"], 1..4),
        prop::sample::select(vec!["a", "b"]),
        extra(),
        extra(),
        extra(),
        prop::collection::btree_map(prop::sample::select(vec!["team", "note", "kruise.io/sidecarset-injected-list"]), "[a-z]{1,5}", 0..3),
        any::<bool>(),
    )
        .prop_flat_map(|(names, app, top, meta, spec, annotations, secrets)| {
            let containers: Vec<_> = names.into_iter().map(|n| pod_container(n.to_owned())).collect();
            (containers, Just((app, top, meta, spec, annotations, secrets)))
        })
        .prop_map(|(containers, (app, top, meta, spec, annotations, secrets))| {
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod", "x-future-top": top,
                "metadata": {"name": "p", "namespace": "default", "labels": {"app": app}, "x-future-meta": meta, "annotations": annotations},
                "spec": {
                    "containers": containers,
                    "volumes": [{"name": "logs", "emptyDir": {}, "x-future-volume": 1}, {"name": "data", "emptyDir": {}}],
                    "x-future-spec": spec,
                    "dnsPolicy": "ClusterFirst"
                },
                "status": {"phase": "Pending", "x-future-status": 2}
            });
            if secrets {
                pod["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}, {"name": "regcred"}]);
            }
            pod
        })
}

/// The SidecarSets of this test: any number of sidecars but at least one, mounts with unknown fields.
fn sidecarset(i: usize) -> impl Strategy<Value = Value> {
    let parts = Parts { min_sidecars: 1, target_node: false, resources_and_devices: false };
    sidecarset_strategies::sidecarset(i, mount().boxed(), parts)
}

fn sidecarsets() -> impl Strategy<Value = Vec<Value>> {
    (1usize..4).prop_flat_map(|n| (0..n).map(sidecarset).collect::<Vec<_>>())
}

fn names(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("name")?.as_str().map(str::to_owned))
        .collect()
}

fn review(pod: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "default", "operation": "CREATE", "object": pod}})
}

/// Everything in `original` that injection does not own must be in `mutated` unchanged.
fn check_preserved(
    original: &Value,
    mutated: &Value,
    injected_names: &BTreeSet<String>,
    owned_annotations: &BTreeSet<String>,
) -> Result<(), String> {
    let (o, m) = (original.as_object().ok_or("pod")?, mutated.as_object().ok_or("pod")?);
    for (k, v) in o {
        if k != "metadata" && k != "spec" && m.get(k) != Some(v) {
            return Err(format!("top-level {k} changed"));
        }
    }
    let (om, mm) = (&o["metadata"], &m["metadata"]);
    for (k, v) in om.as_object().ok_or("metadata")? {
        if k != "annotations" && mm.get(k) != Some(v) {
            return Err(format!("metadata.{k} changed"));
        }
    }
    for (k, v) in om.get("annotations").and_then(Value::as_object).into_iter().flatten() {
        if !owned_annotations.contains(k) && mm.pointer("/annotations").and_then(|a| a.get(k)) != Some(v) {
            return Err(format!("annotation {k} changed"));
        }
    }
    let (os, ms) = (&o["spec"], &m["spec"]);
    for (k, v) in os.as_object().ok_or("spec")? {
        match k.as_str() {
            "containers" | "initContainers" => {
                let kept: Vec<&Value> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| !injected_names.contains(c["name"].as_str().unwrap_or("")))
                    .collect();
                let now: Vec<&Value> = ms[k]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| kept.iter().any(|k| k["name"] == c["name"]))
                    .collect();
                if kept != now {
                    return Err(format!("spec.{k}: a container injection does not own changed or moved"));
                }
            }
            "volumes" => {
                let before = v.as_array().ok_or("volumes")?;
                if ms[k].as_array().map(|a| &a[..before.len().min(a.len())]) != Some(&before[..]) {
                    return Err("spec.volumes: an existing volume changed".into());
                }
            }
            "imagePullSecrets" => {
                for s in v.as_array().into_iter().flatten() {
                    if !ms[k].as_array().is_some_and(|a| a.contains(s)) {
                        return Err("spec.imagePullSecrets lost an entry".into());
                    }
                }
            }
            _ if ms.get(k) != Some(v) => return Err(format!("spec.{k} changed")),
            _ => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn injection_touches_only_what_it_owns(pod in pod(), sets in sidecarsets()) {
        let snapshot = Snapshot::from_objects(sets.clone());
        let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
        let random = SeededRandom::new(1);
        let settings = Settings::default();
        let answers = Answers::default();
        let inputs = Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
        let webhook = webhooks::by_path("/mutate-pod").expect("registered");
        let request = decode_review(review(&pod)).expect("review");
        let outcome = webhooks::run(webhook, &request, &inputs);
        // The one denial these inputs can earn: MergePatchJson into a pod annotation that is not JSON.
        let message = outcome.decision.status.as_ref().map(|s| s.message.clone()).unwrap_or_default();
        prop_assume!(!message.contains("MergePatchJson"));
        prop_assert!(outcome.decision.allowed, "denied: {:?}", outcome.decision.status);
        let mutated = outcome.mutated.clone().expect("mutated");

        for op in &outcome.decision.patch {
            let p = op.path();
            prop_assert!(["/metadata/annotations", "/spec/containers", "/spec/initContainers", "/spec/volumes", "/spec/imagePullSecrets"]
                .iter().any(|prefix| p == *prefix || p.starts_with(&format!("{prefix}/"))), "patch touches {p}");
        }
        let patch: json_patch::Patch = serde_json::from_value(serde_json::to_value(&outcome.decision.patch).expect("json")).expect("patch");
        let mut applied = pod.clone();
        json_patch::patch(&mut applied, &patch).expect("applies");
        prop_assert_eq!(&applied, &mutated);

        let mut injected = BTreeSet::new();
        let mut owned: BTreeSet<String> = ["kruise.io/sidecarset-hash", "kruise.io/sidecarset-hash-without-image", "kruise.io/sidecarset-injected-list",
            "kruise.io/sidecarset-working-hotupgrade-container", "note"].iter().map(|s| s.to_string()).collect();
        for set in &sets {
            for n in names(set.pointer("/spec/containers")).into_iter().chain(names(set.pointer("/spec/initContainers"))) {
                for suffix in ["", "-1", "-2"] {
                    injected.insert(format!("{n}{suffix}"));
                    owned.insert(format!("version.sidecarset.kruise.io/{n}{suffix}"));
                    owned.insert(format!("versionalt.sidecarset.kruise.io/{n}{suffix}"));
                }
            }
        }
        if let Err(e) = check_preserved(&pod, &mutated, &injected, &owned) {
            prop_assert!(false, "{}", e);
        }
        // Unknown fields of every level are still there.
        prop_assert_eq!(mutated.get("x-future-top"), pod.get("x-future-top"));
        prop_assert_eq!(mutated.pointer("/status/x-future-status"), Some(&json!(2)));
        prop_assert_eq!(mutated.pointer("/spec/volumes/0/x-future-volume"), Some(&json!(1)));

        let request = decode_review(review(&mutated)).expect("review");
        let again = webhooks::run(webhook, &request, &inputs);
        prop_assert!(again.decision.allowed);
        prop_assert!(again.decision.patch.is_empty(), "second run patched: {:?}", again.decision.patch);
    }
}

#[test]
fn extra_fields_of_sidecars_reach_the_pod() {
    // The SidecarSet's own unknown container fields are copied verbatim (they belong to the sidecar).
    let set = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, "containers": [{"name": "c", "image": "i", "x-future": {"a": 1}}]}});
    let snapshot = Snapshot::from_objects([set]);
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(1);
    let settings = Settings::default();
    let answers = Answers::default();
    let inputs =
        Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "a"}}, "spec": {"containers": [{"name": "app"}]}});
    let request = decode_review(review(&pod)).expect("review");
    let outcome = webhooks::run(webhooks::by_path("/mutate-pod").expect("registered"), &request, &inputs);
    let mutated = outcome.mutated.expect("mutated");
    let c: &Map<String, Value> =
        mutated.pointer("/spec/containers/1").and_then(Value::as_object).expect("sidecar");
    assert_eq!(c.get("x-future"), Some(&json!({"a": 1})));
}
