//! The realistic SidecarSets in `tests/sidecarset_admission/*.yaml` (Kruise YAML using every field)
//! are accepted by the generated CRD schema, before and after our defaulting, and admitted by both
//! webhooks. `kubernetes-validate` only warns on custom resources, so the schema is checked here
//! with a small walker of the structural-schema rules the apiserver applies.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use kruise_admission::admission::review::decode_review;
use kruise_admission::admission::webhooks;
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::api::crd::sidecarset_crd;
use kruise_admission::cluster::files::{load_dir, read_documents};
use kruise_admission::cluster::{Answers, Snapshot};

fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sidecarset_admission")
}

fn samples() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(samples_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "the sample SidecarSets are missing");
    files
        .into_iter()
        .flat_map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            read_documents(&std::fs::read_to_string(&p).unwrap())
                .unwrap()
                .into_iter()
                .map(move |d| (name.clone(), d))
        })
        .collect()
}

/// The `openAPIV3Schema` the CRD serves for an object's apiVersion.
fn schema_for(object: &Value) -> Value {
    let version = object["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap().to_owned();
    let crd = sidecarset_crd();
    crd["spec"]["versions"].as_array().unwrap().iter().find(|v| v["name"] == version.as_str()).unwrap()["schema"]["openAPIV3Schema"].clone()
}

/// Schema errors of `value`: wrong types, missing required fields, fields the schema neither
/// lists nor preserves (the apiserver would prune them: data silently lost).
fn check(value: &Value, schema: &Value, path: &str, errs: &mut Vec<String>) {
    if schema.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        if !(value.is_i64() || value.is_string()) {
            errs.push(format!("{path}: must be an integer or a string"));
        }
        return;
    }
    // The apiserver validates `metadata` itself (ObjectMeta); the CRD schema only says "object".
    if path == ".metadata" {
        if !value.is_object() {
            errs.push(format!("{path}: must be an object"));
        }
        return;
    }
    let preserve = schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    match schema.get("type").and_then(Value::as_str) {
        None if preserve => {}
        None => errs.push(format!("{path}: schema without a type")),
        Some("object") => {
            let Some(obj) = value.as_object() else {
                errs.push(format!("{path}: must be an object"));
                return;
            };
            for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                if !obj.contains_key(required.as_str().unwrap()) {
                    errs.push(format!("{path}.{}: required", required.as_str().unwrap()));
                }
            }
            for (k, v) in obj {
                if let Some(prop) = schema.get("properties").and_then(|p| p.get(k)) {
                    check(v, prop, &format!("{path}.{k}"), errs);
                } else if let Some(additional) = schema.get("additionalProperties") {
                    check(v, additional, &format!("{path}.{k}"), errs);
                } else if !preserve {
                    errs.push(format!("{path}.{k}: unknown field (would be pruned)"));
                }
            }
        }
        Some("array") => match value.as_array() {
            Some(items) => {
                for (i, item) in items.iter().enumerate() {
                    check(item, &schema["items"], &format!("{path}[{i}]"), errs);
                }
            }
            None => errs.push(format!("{path}: must be an array")),
        },
        Some("string") if !value.is_string() => errs.push(format!("{path}: must be a string")),
        Some("boolean") if !value.is_boolean() => errs.push(format!("{path}: must be a boolean")),
        Some("integer") => match value.as_i64() {
            None => errs.push(format!("{path}: must be an integer")),
            Some(n) if schema.get("format") == Some(&json!("int32")) && i32::try_from(n).is_err() => {
                errs.push(format!("{path}: out of int32 range"))
            }
            Some(_) => {}
        },
        Some(_) => {}
    }
}

fn schema_errors(object: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    check(object, &schema_for(object), "", &mut errs);
    errs
}

fn call(snapshot: &Snapshot, path: &str, object: &Value) -> webhooks::Outcome<'static> {
    let version = object["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap();
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE",
        "kind": {"group": "apps.kruise.io", "version": version, "kind": "SidecarSet"},
        "resource": {"group": "apps.kruise.io", "version": version, "resource": "sidecarsets"},
        "object": object}});
    let request = decode_review(review).unwrap();
    let answers = Answers::default();
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(7);
    let settings = Settings::default();
    let inputs =
        Inputs { cluster: snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    webhooks::run(webhooks::by_path(path).unwrap(), &request, &inputs).into_owned()
}

#[test]
fn samples_fit_the_crd_schema_before_and_after_defaulting_and_are_admitted() {
    let (cluster, warnings) = load_dir(&samples_dir().join("cluster")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    for (file, object) in samples() {
        assert_eq!(schema_errors(&object), Vec::<String>::new(), "{file} as written");
        let mutated = call(&cluster, "/mutate-apps-kruise-io-sidecarset", &object);
        assert!(mutated.decision.allowed, "{file}: {:?}", mutated.decision.status);
        let stored = mutated.mutated.unwrap();
        assert_eq!(schema_errors(&stored), Vec::<String>::new(), "{file} after defaulting");
        assert!(
            stored["metadata"]["annotations"]["kruise.io/sidecarset-hash"]
                .as_str()
                .is_some_and(|h| h.len() == 64)
        );
        let validated = call(&cluster, "/validate-apps-kruise-io-sidecarset", &stored);
        assert!(validated.decision.allowed, "{file}: {:?}", validated.decision.status);
    }
}

#[test]
fn the_walker_catches_what_the_apiserver_would_reject() {
    let (_, sample) = samples().into_iter().find(|(f, _)| f.starts_with("log-agent")).unwrap();
    let mut bad = sample.clone();
    bad["spec"]["revisionHistoryLimit"] = json!("ten");
    bad["spec"]["selector"]["matchExpressions"][0].as_object_mut().unwrap().remove("operator");
    bad["spec"]["updateStrategy"]["partition"] = json!(true);
    bad["spec"]["containers"][0]["podInjectPolicy"] = json!(1);
    assert_eq!(
        schema_errors(&bad),
        [
            ".spec.selector.matchExpressions[0].operator: required",
            ".spec.containers[0].podInjectPolicy: must be a string",
            ".spec.updateStrategy.partition: must be an integer or a string",
            ".spec.revisionHistoryLimit: must be an integer",
        ]
    );
    // Unknown fields are kept everywhere (the types keep them), so nothing is pruned.
    let mut extra = sample;
    extra["spec"]["futureField"] = json!({"a": 1});
    extra["spec"]["containers"][0]["futureContainerField"] = json!(1);
    assert!(schema_errors(&extra).is_empty());
}
