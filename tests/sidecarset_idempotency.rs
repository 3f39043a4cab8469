//! Idempotency over real payloads: every recorded Pod CREATE in `tests/fixtures/recorded/`, run
//! through the example SidecarSets of `examples/cluster/` (as they are, and rewritten so they match
//! every pod), is injected, the patch applies independently, and `/mutate-pod` on its own output
//! yields no patch.

use crate::common;

use std::path::Path;

use kruise_admission::admission::review::{Operation, decode_review};
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::api::tree::Json;
use kruise_admission::cluster::files::{load_dir, read_documents};
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};

fn example_objects() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster");
    let mut objects = Vec::new();
    for entry in walk(&dir) {
        let text = std::fs::read_to_string(&entry).expect("readable example");
        objects.extend(read_documents(&text).expect("valid example"));
    }
    // The examples load as a folder too (what `serve` and `dry-run` do).
    let (snapshot, warnings) = load_dir(&dir).expect("examples load");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(snapshot.sidecarset_index().len() >= 4, "the example SidecarSets are indexed");
    assert!(
        snapshot.sidecarset_index().unreadable().is_empty(),
        "{:?}",
        snapshot.sidecarset_index().unreadable()
    );
    objects
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("examples dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
    out
}

/// The examples, with selectors that match every pod in every namespace.
fn match_everything(objects: &[Value]) -> Vec<Value> {
    objects
        .iter()
        .cloned()
        .map(|mut o| {
            if o["kind"] == "SidecarSet"
                && let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert(
                    "selector".into(),
                    json!({"matchExpressions": [{"key": "kruise-admission.dev/never-set", "operator": "DoesNotExist"}]}),
                );
                spec.remove("namespace");
                spec.remove("namespaceSelector");
            }
            o
        })
        .collect()
}

fn pod_creates() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for path in common::recorded_reviews() {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        // Malformed captures (no object, no spec) are refused with 400 before injection; not ours.
        let Ok(docs) = read_documents(&text) else { continue };
        for review in docs {
            let Ok(request) = decode_review(review.clone()) else { continue };
            if request.kind.kind == "Pod"
                && request.operation == Operation::Create
                && request.sub_resource.is_empty()
                && request.object.as_ref().is_some_and(|o| o.get("spec").is_some_and(Json::is_object))
            {
                out.push((path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned(), review));
            }
        }
    }
    out
}

fn with_object(review: &Value, object: &Value) -> Value {
    let mut review = review.clone();
    review["request"]["object"] = object.clone();
    review
}

fn run_all(snapshot: &Snapshot, expect_injection: bool) {
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(7);
    let settings = Settings::default();
    let answers = Answers::default();
    let inputs =
        Inputs { cluster: snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let creates = pod_creates();
    assert!(creates.len() >= 10, "expected the recorded pod creates, found {}", creates.len());
    for (name, review) in creates {
        let request = decode_review(review.clone()).expect("decodes");
        let first = webhooks::run(webhook, &request, &inputs);
        assert!(first.decision.allowed, "{name}: denied {:?}", first.decision.status);
        let mutated = first.mutated.expect("mutated object");
        if expect_injection {
            assert!(!first.decision.patch.is_empty(), "{name}: nothing injected");
            assert!(
                mutated.pointer("/metadata/annotations/kruise.io~1sidecarset-injected-list").is_some(),
                "{name}"
            );
        }
        let patch: json_patch::Patch =
            serde_json::from_value(serde_json::to_value(&first.decision.patch).expect("patch json"))
                .expect("patch");
        let mut applied = request.object.as_ref().map(Json::to_value).expect("object");
        json_patch::patch(&mut applied, &patch)
            .unwrap_or_else(|e| panic!("{name}: patch does not apply: {e}"));
        assert_eq!(applied, mutated, "{name}: patch and mutated object differ");

        let again = decode_review(with_object(&review, &mutated)).expect("decodes");
        let second = webhooks::run(webhook, &again, &inputs);
        assert!(second.decision.allowed, "{name}: second run denied {:?}", second.decision.status);
        assert!(second.decision.patch.is_empty(), "{name}: second run patched {:?}", second.decision.patch);
    }
}

#[test]
fn recorded_pod_creates_with_the_examples_as_they_are() {
    run_all(&Snapshot::from_objects(example_objects()), false);
}

#[test]
fn recorded_pod_creates_with_every_example_matching() {
    run_all(&Snapshot::from_objects(match_everything(&example_objects())), true);
}

/// The examples' hash annotations are what Kruise's SidecarSet webhook writes
/// (docs/sidecarset.md#8-the-sidecarset-hash), so editing an example's containers without updating its hashes
/// fails here.
#[test]
fn example_hash_annotations_follow_the_recipe() {
    use kruise_admission::admission::sidecarset_rules::hash::sidecarset_hashes;
    use kruise_admission::api::sidecarset::SidecarSet;
    let mut checked = 0;
    for object in example_objects().iter().filter(|o| o["kind"] == "SidecarSet") {
        let set = SidecarSet::from_value(object).expect("example SidecarSet");
        let (hash, without_image) = sidecarset_hashes(&object["spec"]).expect("hashes");
        assert_eq!(set.metadata.annotations.get("kruise.io/sidecarset-hash"), Some(&hash), "{}", set.name());
        assert_eq!(
            set.metadata.annotations.get("kruise.io/sidecarset-hash-without-image"),
            Some(&without_image),
            "{}",
            set.name()
        );
        checked += 1;
    }
    assert_eq!(checked, 4);
}

/// The four examples on the pod they are written for (namespace shop, all opt-in labels): what
/// each one contributes, per docs/sidecarset.md#5-what-each-sidecarset-contributes.
#[test]
fn examples_inject_into_the_pod_they_are_written_for() {
    let snapshot = Snapshot::from_objects(example_objects());
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(7);
    let settings = Settings::default();
    let answers = Answers::default();
    let inputs =
        Inputs { cluster: &snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "shop-api-", "namespace": "shop", "labels": {
            "app": "shop-api", "logging": "fluent-bit", "mesh.example.com/inject": "true", "mesh.example.com/agent": "enabled",
            "auth.example.com/token": "refresh", "mesh.example.com/main-container": "shop-api"}},
        "spec": {"containers": [{"name": "shop-api", "image": "shop/api:1.4.2",
            "env": [{"name": "APP_NAME", "value": "shop-api"}, {"name": "APP_VERSION", "value": "1.4.2"}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "512Mi"}},
            "volumeMounts": [{"name": "app-logs", "mountPath": "/var/log/shop"}]}],
            "volumes": [{"name": "app-logs", "emptyDir": {}}]}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "shop", "operation": "CREATE", "object": pod}});
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let request = decode_review(review.clone()).expect("review");
    let outcome = webhooks::run(webhook, &request, &inputs);
    assert!(outcome.decision.allowed, "{:?}", outcome.decision.status);
    assert!(outcome.decision.warnings.is_empty(), "{:?}", outcome.decision.warnings);
    let pod = outcome.mutated.expect("mutated");
    let names = |key: &str| -> Vec<String> {
        pod["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    // Init containers sorted by name; envoy before the app; the others after it, in SidecarSet name order.
    assert_eq!(names("initContainers"), ["token-refresher", "wait-for-config"]);
    assert_eq!(names("containers"), ["envoy", "shop-api", "fluent-bit", "mesh-agent-1", "mesh-agent-2"]);
    assert_eq!(
        names("volumes"),
        ["app-logs", "envoy-config", "fluent-bit-config", "fluent-bit-state", "auth-token"]
    );
    assert_eq!(pod["spec"]["imagePullSecrets"], json!([{"name": "mesh-registry"}]));

    let envoy = &pod["spec"]["containers"][0];
    let env: Vec<&str> = envoy["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| e["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(env, ["ENVOY_LOG_LEVEL", "IS_INJECTED", "APP_NAME", "APP_VERSION"]);
    // limits: max(1*25%, 100m), max(1Gi*25%, 128Mi); requests: max(500m*10%, 50m), 64Mi.
    assert_eq!(
        envoy["resources"],
        json!({"limits": {"cpu": "250m", "memory": "256Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}})
    );
    assert!(envoy.get("transferEnv").is_none() && envoy.get("podInjectPolicy").is_none());

    let fluent_bit = &pod["spec"]["containers"][2];
    let mounts: Vec<&str> = fluent_bit["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["mountPath"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(mounts, ["/fluent-bit/etc", "/var/fluent-bit/state", "/var/log/shop"]);
    assert_eq!(pod["spec"]["containers"][4]["image"], "registry.example.com/empty:1.0");

    let annotations = &pod["metadata"]["annotations"];
    assert_eq!(
        annotations["kruise.io/sidecarset-injected-list"],
        "envoy-proxy,log-agent,mesh-agent,token-refresher"
    );
    assert_eq!(
        annotations["kruise.io/sidecarset-working-hotupgrade-container"],
        r#"{"mesh-agent":"mesh-agent-1"}"#
    );
    assert_eq!(annotations["auth.example.com/token-path"], "/var/run/auth/token");
    let hashes: Value =
        serde_json::from_str(annotations["kruise.io/sidecarset-hash"].as_str().unwrap_or_default())
            .expect("hash map");
    assert_eq!(hashes["token-refresher"]["sidecarList"], json!(["token-refresher"]));
    assert_eq!(hashes["mesh-agent"]["sidecarList"], json!(["mesh-agent"]));

    // Fed back (reinvocationPolicy: IfNeeded): no patch. The hot-upgrade pair mesh-agent-1/-2 is in the pod
    // now and must not count as an envoy resourcesPolicy target (docs/sidecarset.md#5-6-resources-policy:
    // containers of injected SidecarSets never do); counted, they raised envoy's summed limits on every
    // re-invocation. Found by the fuzz target `review`.
    let request = decode_review(with_object(&review, &pod)).expect("review");
    let again = webhooks::run(webhook, &request, &inputs);
    assert!(again.decision.allowed, "{:?}", again.decision.status);
    assert_eq!(again.decision.patch, vec![], "a re-invocation patched again");
}

/// The example SidecarSets are written as Kruise stores them: our own SidecarSet webhooks admit
/// each one, against the rest of the example cluster, without changing anything (already
/// defaulted, already hashed). An example edited into something Kruise would refuse fails here.
#[test]
fn examples_pass_sidecarset_admission_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(root.join("examples/cluster/sidecarsets"))
        .expect("examples")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--output", "json", "--cluster-dir"])
        .arg(root.join("examples/cluster"))
        .args(&files)
        .output()
        .expect("run dry-run");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(stdout.lines().count(), files.len(), "{stdout}");
    for line in stdout.lines() {
        let result: Value = serde_json::from_str(line).expect("JSON");
        assert_eq!(result["allowed"], true, "{}: {}", result["source"], result["status"]);
        assert_eq!(
            result["patch"],
            serde_json::json!([]),
            "{}: defaulting or hashing would change it",
            result["source"]
        );
    }
    assert!(out.status.success());
}
