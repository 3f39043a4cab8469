//! `kruise-admission dry-run`, run as the real binary.

use crate::common;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use base64::Engine as _;
use serde_json::{Value, json};

const NOW: &str = "2024-05-01T12:00:00Z";

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
}

fn dry_run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = binary();
    cmd.arg("dry-run").args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the binary starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin.unwrap_or_default().as_bytes()).expect("stdin accepts the input");
    drop(pipe);
    child.wait_with_output().expect("the binary finishes")
}

fn lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect()
}

fn recorded(name: &str) -> PathBuf {
    common::fixtures_dir().join("recorded").join(name)
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A recorded pod CREATE with our target-node annotation added, so the stamp has work to do.
fn targeted_review(node: &str) -> Value {
    let mut review = read_json(&recorded("kubewarden-policies-pod-create-flexvolume.json"));
    review["request"]["object"]["metadata"]["annotations"] =
        json!({"kruise-admission.dev/target-node": node});
    review
}

fn apply(object: &Value, patch: &Value) -> Value {
    let mut patched = object.clone();
    let patch: json_patch::Patch = serde_json::from_value(patch.clone()).expect("an RFC 6902 patch");
    json_patch::patch(&mut patched, &patch).expect("the patch applies");
    patched
}

#[test]
fn a_targeted_pod_is_stamped_and_the_patch_turns_the_input_into_the_reported_object() {
    let review = targeted_review("node-1");
    let out = dry_run(&["--now", NOW, "-"], Some(&review.to_string()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = lines(&out);
    assert_eq!(lines.len(), 1);
    let line = &lines[0];
    assert_eq!(line["source"], "-");
    assert_eq!(line["uid"], review["request"]["uid"]);
    assert_eq!(line["allowed"], true);
    assert_eq!(line["status"], json!({"code": 200, "message": ""}));
    assert_eq!(line["warnings"], json!([]));
    let object = &line["object"];
    assert_eq!(
        object["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            [0]["matchFields"],
        json!([{"key": "metadata.name", "operator": "In", "values": ["node-1"]}])
    );
    assert_eq!(object["spec"]["tolerations"].as_array().map(Vec::len), Some(6));
    assert_eq!(apply(&review["request"]["object"], &line["patch"]), *object);
    // One webhook called (/mutate-pod); its patch is the whole patch.
    assert_eq!(line["webhooks"], json!([{"path": "/mutate-pod", "allowed": true, "patch": line["patch"]}]));
}

#[test]
fn a_reinvoked_webhook_returns_no_patch() {
    // reinvocationPolicy IfNeeded: the admitted object sent again must come back unchanged.
    for review in [
        targeted_review("node-r"),
        read_json(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples/reviews/daemonset-pod-node-name.json")
                .as_path(),
        ),
    ] {
        let first = &lines(&dry_run(&["--now", NOW, "-"], Some(&review.to_string())))[0];
        assert_ne!(first["patch"], json!([]));
        let mut again = review.clone();
        again["request"]["object"] = first["object"].clone();
        let second = &lines(&dry_run(&["--now", NOW, "-"], Some(&again.to_string())))[0];
        assert_eq!(second["allowed"], true);
        assert_eq!(second["patch"], json!([]), "{}", second["object"]);
        assert_eq!(second["object"], first["object"]);
    }
}

#[test]
fn review_output_is_the_admission_review_serve_sends() {
    for version in ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"] {
        let mut review = targeted_review("node-2");
        review["apiVersion"] = json!(version);
        let text = review.to_string();
        let json_out = lines(&dry_run(&["--now", NOW, "-"], Some(&text)));
        let out = dry_run(&["--now", NOW, "--output", "review", "-"], Some(&text));
        assert_eq!(out.status.code(), Some(0));
        let responses = lines(&out);
        assert_eq!(responses.len(), 1, "one line per webhook called");
        let r = &responses[0];
        assert_eq!(r["apiVersion"], version);
        assert_eq!(r["kind"], "AdmissionReview");
        assert_eq!(r["response"]["uid"], review["request"]["uid"]);
        assert_eq!(r["response"]["allowed"], true);
        assert_eq!(r["response"]["patchType"], "JSONPatch");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(r["response"]["patch"].as_str().unwrap())
            .unwrap();
        let patch: Value = serde_json::from_slice(&raw).unwrap();
        assert_eq!(patch, json_out[0]["patch"]);
    }
}

#[test]
fn an_untouched_pod_has_no_patch_in_either_output() {
    let path = recorded("kubewarden-policies-pod-create-flexvolume.json");
    let path = path.to_str().unwrap();
    let out = dry_run(&["--now", NOW, path], None);
    assert_eq!(out.status.code(), Some(0));
    let line = &lines(&out)[0];
    assert_eq!(line["source"], path);
    assert_eq!(line["patch"], json!([]));
    assert_eq!(line["object"], read_json(Path::new(path))["request"]["object"]);
    let out = dry_run(&["--output", "review", path], None);
    let response = &lines(&out)[0]["response"];
    assert!(response.get("patch").is_none() && response.get("patchType").is_none(), "{response}");
}

#[test]
fn requests_no_webhook_receives_are_allowed_without_calls() {
    let path = recorded("kubewarden-policies-deployment-create.json");
    let out = dry_run(&[path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0));
    let line = &lines(&out)[0];
    assert_eq!(line["allowed"], true);
    assert_eq!(line["webhooks"], json!([]));
    assert_eq!(line["object"], read_json(&path)["request"]["object"]);
    // --output review prints one line per webhook called: none here.
    let out = dry_run(&["--output", "review", path.to_str().unwrap()], None);
    assert!(out.stdout.is_empty());
}

#[test]
fn a_denied_review_exits_1_and_reports_the_status() {
    // A pod CREATE whose object is not a pod: /mutate-pod refuses it with 400.
    let path = recorded("connaisseur-pod-create-malformed-no-object.json");
    let ok = recorded("kubewarden-policies-pod-create-flexvolume.json");
    let out = dry_run(&[ok.to_str().unwrap(), path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let lines = lines(&out);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["allowed"], true);
    assert_eq!(lines[1]["allowed"], false);
    assert_eq!(lines[1]["status"]["code"], 400);
    assert!(!lines[1]["status"]["message"].as_str().unwrap().is_empty());
    assert_eq!(lines[1]["object"], Value::Null);
    assert_eq!(lines[1]["patch"], json!([]));
    assert_eq!(lines[1]["webhooks"][0]["allowed"], false);
}

#[test]
fn an_undecodable_review_is_a_400_denial_like_serve_answers() {
    // No request at all: serve answers HTTP 400 with a JSON error body.
    let broken = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).to_string();
    let out = dry_run(&["-"], Some(&broken));
    assert_eq!(out.status.code(), Some(1));
    let line = &lines(&out)[0];
    assert_eq!(line["allowed"], false);
    assert_eq!(line["uid"], Value::Null);
    assert_eq!(line["status"]["code"], 400);
    assert_eq!(line["webhooks"], json!([]));
    let out = dry_run(&["--output", "review", "-"], Some(&broken));
    assert_eq!(out.status.code(), Some(1));
    let body = &lines(&out)[0];
    assert!(body["error"].as_str().is_some_and(|e| e.contains("no request")), "{body}");

    // A request without a uid cannot be answered inside a review either.
    let path = recorded("connaisseur-broken-request-operation-only.json");
    let out = dry_run(&["--output", "review", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(lines(&out)[0]["error"].as_str().is_some_and(|e| e.contains("uid")));

    // A usable envelope with a bad field (operation "operationValue"): serve answers a 400 denial
    // inside the review, echoing uid and apiVersion.
    let path = recorded("k8s-api-testdata-admissionreview-v1beta1-allfields.json");
    let out = dry_run(&["--output", "review", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let review = &lines(&out)[0];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(review["response"]["uid"], "uidValue");
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 400);
    let out = dry_run(&[path.to_str().unwrap()], None);
    let line = &lines(&out)[0];
    assert_eq!(
        (line["uid"].as_str(), line["allowed"].as_bool(), line["status"]["code"].as_u64()),
        (Some("uidValue"), Some(false), Some(400))
    );
}

#[test]
fn unreadable_inputs_exit_2_naming_the_file_and_document() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\n---\n- not\n- an object\n")
        .unwrap();
    let missing = dir.path().join("missing.json");
    let ok = recorded("kubewarden-policies-pod-create-flexvolume.json");
    let out = dry_run(&[bad.to_str().unwrap(), ok.to_str().unwrap(), missing.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml") && stderr.contains("document 1"), "{stderr}");
    assert!(stderr.contains("missing.json"), "{stderr}");
    // The readable input is still reported.
    assert_eq!(lines(&out).len(), 1);
}

#[test]
fn a_multi_document_yaml_gives_one_line_per_review() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.yaml");
    let a = targeted_review("node-a");
    let mut b = targeted_review("node-b");
    b["request"]["uid"] = json!("second");
    // JSON is YAML: two flow documents.
    std::fs::write(&path, format!("---\n{a}\n---\n{b}\n")).unwrap();
    let out = dry_run(&["--now", NOW, path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = lines(&out);
    let p = path.to_str().unwrap();
    assert_eq!(
        lines.iter().map(|l| l["source"].as_str().unwrap().to_owned()).collect::<Vec<_>>(),
        [format!("{p}#0"), format!("{p}#1")]
    );
    assert_eq!(lines[1]["uid"], "second");
}

#[test]
fn a_hand_written_yaml_v1beta1_review_is_read() {
    let yaml = r#"
apiVersion: admission.k8s.io/v1beta1
kind: AdmissionReview
request:
  uid: yaml-1
  kind: {group: "", version: v1, kind: Pod}
  resource: {group: "", version: v1, resource: pods}
  namespace: default
  operation: CREATE
  object:
    apiVersion: v1
    kind: Pod
    metadata:
      name: agent
      ownerReferences:
        - {apiVersion: apps.kruise.io/v1alpha1, kind: DaemonSet, name: agent, uid: "1", controller: true}
    spec:
      nodeName: worker-9
      containers:
        - {name: agent, image: busybox}
"#;
    let out = dry_run(&["--now", NOW, "--output", "review", "-"], Some(yaml));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let response = &lines(&out)[0];
    assert_eq!(response["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(response["response"]["uid"], "yaml-1");
    let raw = base64::engine::general_purpose::STANDARD
        .decode(response["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: Value = serde_json::from_slice(&raw).unwrap();
    assert!(
        patch.as_array().unwrap().contains(&json!({"op": "remove", "path": "/spec/nodeName"})),
        "{patch}"
    );
}

#[test]
fn the_same_inputs_give_the_same_bytes() {
    let text = targeted_review("node-3").to_string();
    let a = dry_run(&["--now", NOW, "--seed", "7", "-"], Some(&text));
    let b = dry_run(&["--now", NOW, "--seed", "7", "-"], Some(&text));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn bad_flags_and_a_missing_cluster_dir_exit_2() {
    let ok = recorded("kubewarden-policies-pod-create-flexvolume.json");
    let out = dry_run(&["--now", "yesterday", ok.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let out = dry_run(&["--cluster-dir", "/nonexistent/cluster", ok.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/cluster"));
}

#[test]
fn the_example_cluster_and_reviews_work() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cluster = root.join("examples/cluster");
    let mut reviews: Vec<PathBuf> =
        std::fs::read_dir(root.join("examples/reviews")).unwrap().map(|e| e.unwrap().path()).collect();
    reviews.sort();
    assert!(!reviews.is_empty());
    let mut args =
        vec!["--cluster-dir".to_owned(), cluster.display().to_string(), "--now".into(), NOW.into()];
    args.extend(reviews.iter().map(|p| p.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = dry_run(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    for line in lines(&out) {
        let review = read_json(Path::new(line["source"].as_str().unwrap()));
        assert_eq!(apply(&review["request"]["object"], &line["patch"]), line["object"]);
        assert_ne!(line["patch"], json!([]), "every example review shows a stamp: {}", line["source"]);
    }
}
