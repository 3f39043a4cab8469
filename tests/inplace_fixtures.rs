//! Real manifests: every Deployment, DaemonSet and StatefulSet in `tests/fixtures/workloads`,
//! turned into its Kruise counterpart, is admitted on CREATE; under InPlaceOnly an image bump of
//! every container is admitted and a pull-policy change is refused, naming container 0's field.

use crate::common;
use crate::inplace_support;

use inplace_support::{Expect, World, check, review, run};
use kruise_admission::cluster::files::read_documents;
use serde_json::{Value, json};

fn workloads() -> Vec<Value> {
    let dir = common::fixtures_dir().join("workloads");
    let mut files: Vec<_> =
        std::fs::read_dir(&dir).expect("fixtures/workloads").map(|e| e.expect("entry").path()).collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let Ok(docs) = read_documents(&text) else { continue };
        out.extend(docs.into_iter().filter(|d| {
            matches!(d.get("kind").and_then(Value::as_str), Some("Deployment" | "DaemonSet" | "StatefulSet"))
                && d.pointer("/spec/template/spec").is_some()
        }));
    }
    out
}

fn kruise(workload: &Value, kind: &str, strategy: Value) -> Value {
    let mut spec = json!({"selector": workload["spec"]["selector"], "template": workload["spec"]["template"], "updateStrategy": strategy});
    if kind != "DaemonSet" {
        spec["replicas"] = json!(2);
    }
    json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": kind,
           "metadata": {"name": workload["metadata"]["name"], "namespace": "fixtures", "uid": "u"}, "spec": spec})
}

fn with_images_bumped(object: &Value) -> Value {
    let mut new = object.clone();
    for c in
        new.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut).into_iter().flatten()
    {
        let image = c["image"].as_str().unwrap_or("img").to_owned();
        c["image"] = json!(format!("{image}-next"));
    }
    new
}

fn with_pull_policy_changed(object: &Value) -> Value {
    let mut new = object.clone();
    let c = &mut new["spec"]["template"]["spec"]["containers"][0];
    c["imagePullPolicy"] = json!(if c["imagePullPolicy"] == "Never" { "Always" } else { "Never" });
    new
}

#[test]
fn real_workloads_as_kruise_workloads() {
    let world = World::default();
    let all = workloads();
    assert!(all.len() >= 10, "expected the fixture workloads, found {}", all.len());
    for w in &all {
        let name = format!(
            "{}/{}",
            w["kind"].as_str().unwrap_or("?"),
            w["metadata"]["name"].as_str().unwrap_or("?")
        );
        if w["kind"] == "DaemonSet" {
            let ds = kruise(
                w,
                "DaemonSet",
                json!({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 1}}),
            );
            check(
                &format!("{name} create"),
                &run(
                    "/validate-apps-kruise-io-daemonset",
                    review("daemonsets", "DaemonSet", "v1beta1", "CREATE", &ds, None),
                    &world,
                ),
                &Expect::Allowed,
            );
            continue;
        }
        let cs = with_version(
            kruise(w, "CloneSet", json!({"type": "InPlaceOnly", "maxUnavailable": 1})),
            "v1alpha1",
        );
        let path = "/validate-apps-kruise-io-v1alpha1-cloneset";
        let decide = |op: &str, new: &Value, old: Option<&Value>| {
            run(path, review("clonesets", "CloneSet", "v1alpha1", op, new, old), &world)
        };
        check(&format!("{name} create"), &decide("CREATE", &cs, None), &Expect::Allowed);
        check(
            &format!("{name} image bump"),
            &decide("UPDATE", &with_images_bumped(&cs), Some(&cs)),
            &Expect::Allowed,
        );
        check(
            &format!("{name} pull policy"),
            &decide("UPDATE", &with_pull_policy_changed(&cs), Some(&cs)),
            &Expect::Denied(
                422,
                &[
                    "only allowed to update images in spec for InPlaceOnly, but found ",
                    " /containers/0/imagePullPolicy",
                ],
            ),
        );
    }
}

fn with_version(mut object: Value, version: &str) -> Value {
    object["apiVersion"] = json!(format!("apps.kruise.io/{version}"));
    object
}
