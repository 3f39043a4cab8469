//! `kruise-admission dry-run --compare --stored`, run as the real binary: recorded Pod CREATE reviews
//! against the Pods stored for them (tests/fixtures/agreement/, provenance in tests/fixtures/SOURCES.md).

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

const NOW: &str = "2026-12-01T10:00:00Z";
const AGREE: &str = "kubewarden-policies-pod-create-replicaset-owned.json";
const NO_INJECTION: &str = "openyurt-pod-create.json";
const OTHER_IMAGE: &str = "salesforce-generic-sidecar-injector-pod-create-initcontainers.json";
const NO_VOLUME: &str = "connaisseur-pod-create-replicaset-owned.json";
const NOT_STORED: &str = "kube-rs-pod-create-gke.json";
const NOT_A_CREATE: &str = "kubewarden-policies-pod-delete.json";

fn agreement_dir() -> PathBuf {
    common::fixtures_dir().join("agreement")
}

fn recorded(name: &str) -> String {
    common::fixtures_dir().join("recorded").join(name).display().to_string()
}

fn compare(output: &str, reviews: &[&str], extra: &[&str]) -> Output {
    let dir = agreement_dir();
    let (cluster, stored) =
        (dir.join("cluster").display().to_string(), dir.join("stored").display().to_string());
    let mut args = vec![
        "dry-run",
        "--cluster-dir",
        &cluster,
        "--now",
        NOW,
        "--compare",
        "--stored",
        &stored,
        "--output",
        output,
    ];
    args.extend_from_slice(extra);
    let reviews: Vec<String> = reviews.iter().map(|r| recorded(r)).collect();
    Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(&args)
        .args(&reviews)
        .output()
        .expect("the binary runs")
}

fn report(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("one JSON document ({e}): {text}"))
}

fn pod<'r>(report: &'r Value, review: &str) -> &'r Value {
    let source = recorded(review);
    report["pods"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["source"] == source.as_str())
        .unwrap_or_else(|| panic!("{review} is reported"))
}

#[test]
fn stored_as_kruise_stores_it_agrees_and_another_image_or_a_missing_volume_disagrees() {
    let out = compare("json", &[AGREE, NO_INJECTION, OTHER_IMAGE, NO_VOLUME], &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a disagreement fails the run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = report(&out);

    // The Pod kruise-manager injected and the API server defaulted (pull policy, probe and env
    // defaults, requests from limits, the token mount on the sidecar, resizePolicy), named, ran.
    let agree = pod(&report, AGREE);
    assert_eq!(agree["result"], "agree", "{agree:#}");
    assert_eq!(
        agree["stored"], "kubewarden/kubewarden-controller-767df6d6b-q8lxz",
        "paired by generateName, controller and containers"
    );
    assert_eq!(agree["sidecarsets"], json!([{"name": "log-agent", "result": "agree", "diffs": []}]));
    let none = pod(&report, NO_INJECTION);
    assert_eq!(
        (&none["result"], &none["sidecarsets"]),
        (&json!("agree"), &json!([])),
        "neither side injected: {none:#}"
    );

    let image = pod(&report, OTHER_IMAGE);
    assert_eq!(image["result"], "disagree");
    assert_eq!(
        image["sidecarsets"],
        json!([{"name": "log-agent", "result": "disagree", "diffs": [
            {"path": "spec.containers[log-agent].image", "ours": "fluent/fluent-bit:3.2.4", "stored": "fluent/fluent-bit:3.1.9"}]}])
    );
    let volume = pod(&report, NO_VOLUME);
    assert_eq!(
        volume["sidecarsets"][0]["diffs"],
        json!([
            {"path": "spec.containers[log-agent].volumeMounts[/fluent-bit/etc]",
             "ours": {"name": "log-agent-config", "mountPath": "/fluent-bit/etc", "readOnly": true}, "stored": null},
            {"path": "spec.volumes[log-agent-config]",
             "ours": {"name": "log-agent-config", "configMap": {"name": "log-agent-config", "defaultMode": 420}}, "stored": null},
        ])
    );

    assert_eq!(
        report["sidecarsets"],
        json!([{"name": "log-agent", "agree": 1, "disagree": 2, "fields": [
            {"path": "spec.containers[log-agent].image", "disagree": 1},
            {"path": "spec.containers[log-agent].volumeMounts[/fluent-bit/etc]", "disagree": 1},
            {"path": "spec.volumes[log-agent-config]", "disagree": 1},
        ]}])
    );
    // Per step: only the SidecarSet step disagrees, with the SidecarSets' fields; every Pod compared
    // counts once for each step.
    let steps = report["steps"].as_array().unwrap();
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(names, common::STEP_NAMES);
    for step in steps {
        let expected = if step["step"] == "sidecarset" { (2, 2) } else { (4, 0) };
        assert_eq!((step["agree"].as_u64().unwrap(), step["disagree"].as_u64().unwrap()), expected, "{step}");
    }
    assert_eq!(steps[2]["fields"], report["sidecarsets"][0]["fields"]);
    assert_eq!(
        image["steps"][2],
        json!({"step": "sidecarset", "result": "disagree", "diffs": image["sidecarsets"][0]["diffs"]})
    );
    assert_eq!(image["steps"][0], json!({"step": "readiness-gate", "result": "agree", "diffs": []}));
    assert_eq!(
        report["totals"],
        json!({"podCreates": 4, "agree": 2, "disagree": 2, "denied": 0, "unmatched": 0, "otherReviews": 0, "storedUnpaired": 0})
    );
}

#[test]
fn only_agreeing_pods_exit_zero_and_the_table_says_so() {
    let out = compare("summary", &[AGREE, NO_INJECTION], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["SIDECARSET", "AGREE", "DISAGREE"]);
    assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["log-agent", "1", "0"]);
    assert!(!text.contains("FIELD"), "no field disagrees: {text}");
    assert_eq!(
        lines.last().copied(),
        Some(
            "2 Pod CREATE reviews: 2 agree (1 with no injection on either side), 0 disagree, 0 denied by us but stored, 0 unmatched; \
             0 other reviews not compared; 2 stored Pods paired with no review"
        )
    );
}

#[test]
fn the_table_lists_each_disagreeing_field_with_both_values() {
    let out = compare("summary", &[OTHER_IMAGE, NOT_STORED, NOT_A_CREATE], &[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("{needle}: {text}"))
    };
    assert_eq!(row("log-agent   spec")[..], ["log-agent", "spec.containers[log-agent].image", "1"]);
    let image = row(&recorded(OTHER_IMAGE));
    assert_eq!(
        image[image.len() - 6..],
        [
            "disagree",
            "sidecarset",
            "log-agent",
            "spec.containers[log-agent].image",
            "fluent/fluent-bit:3.2.4",
            "fluent/fluent-bit:3.1.9"
        ]
    );
    assert_eq!(row(&recorded(NOT_STORED))[3..], ["-", "unmatched", "-", "-", "-", "-", "-"]);
    assert!(text.ends_with("1 other reviews not compared; 3 stored Pods paired with no review\n"), "{text}");
}

#[test]
fn a_review_without_a_stored_pod_is_unmatched_not_agreement() {
    let out = compare("json", &[NOT_STORED, NOT_A_CREATE], &[]);
    assert_eq!(out.status.code(), Some(1), "no evidence is not agreement");
    let report = report(&out);
    assert_eq!(pod(&report, NOT_STORED)["result"], "unmatched");
    assert_eq!(report["totals"]["unmatched"], 1);
    assert_eq!(report["totals"]["agree"], 0);
    assert_eq!(report["totals"]["otherReviews"], 1, "the DELETE is not compared");
    let out = compare("json", &[NOT_A_CREATE], &[]);
    assert_eq!(out.status.code(), Some(1), "no Pod CREATE compared is no evidence either");
    assert_eq!(self::report(&out)["totals"]["podCreates"], 0);
}

#[test]
fn flags_that_do_not_fit_are_refused() {
    for (extra, output, expected) in [
        (&[][..], "diff", "--compare --stored reports with --output summary or json"),
        (&["--with", "x.yaml"][..], "json", "cannot be used with"),
    ] {
        let out = compare(output, &[AGREE], extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(expected),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--stored", "x", &recorded(AGREE)])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2), "--stored needs --compare");
    let dir = agreement_dir().join("cluster").display().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args([
            "dry-run",
            "--cluster-dir",
            &dir,
            "--compare",
            "--stored",
            "/nonexistent/stored",
            &recorded(AGREE),
        ])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot load --stored"));
}

/// A step other than SidecarSet injection: with a PodUnavailableBudget guarding the nginx Pod, our
/// decision names it in `kruise.io/related-pub`, which the Pod stored without Kruise's PUB step
/// lacks. That step alone disagrees, in the JSON and in the table.
#[test]
fn a_step_other_than_injection_disagrees_on_its_own_fields() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pub.yaml"),
        "apiVersion: policy.kruise.io/v1alpha1\nkind: PodUnavailableBudget\nmetadata: {name: nginx-pub, namespace: default}\n\
         spec: {selector: {matchLabels: {run: nginx}}, maxUnavailable: 1}\n",
    )
    .unwrap();
    let stored = agreement_dir().join("stored/agree-no-injection-nginx.yaml").display().to_string();
    let run = |output: &str| {
        Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
            .args([
                "dry-run",
                "--cluster-dir",
                dir.path().to_str().unwrap(),
                "--compare",
                "--stored",
                &stored,
            ])
            .args(["--output", output, &recorded(NO_INJECTION)])
            .output()
            .expect("the binary runs")
    };
    let out = run("json");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = report(&out);
    let nginx = pod(&report, NO_INJECTION);
    assert_eq!((&nginx["result"], &nginx["sidecarsets"]), (&json!("disagree"), &json!([])));
    let diff =
        json!({"path": "metadata.annotations[kruise.io/related-pub]", "ours": "nginx-pub", "stored": null});
    assert_eq!(nginx["steps"][4], json!({"step": "related-pub", "result": "disagree", "diffs": [diff]}));
    let disagreeing: Vec<&Value> =
        report["steps"].as_array().unwrap().iter().filter(|s| s["disagree"] != 0).collect();
    assert_eq!(
        disagreeing,
        [&json!({"step": "related-pub", "agree": 0, "disagree": 1,
                 "fields": [{"path": "metadata.annotations[kruise.io/related-pub]", "disagree": 1}]})]
    );

    let out = run("summary");
    let text = String::from_utf8_lossy(&out.stdout);
    let row = |needle: &str| {
        text.lines().find(|l| l.contains(needle)).map(|l| l.split_whitespace().collect::<Vec<_>>())
    };
    assert_eq!(row("related-pub ").unwrap(), ["related-pub", "0", "1"], "{text}");
    assert_eq!(
        row("related-pub  metadata").unwrap(),
        ["related-pub", "metadata.annotations[kruise.io/related-pub]", "1"],
        "{text}"
    );
    let nginx = row(&recorded(NO_INJECTION)).unwrap();
    assert_eq!(
        nginx[nginx.len() - 6..],
        ["disagree", "related-pub", "-", "metadata.annotations[kruise.io/related-pub]", "nginx-pub", "-"]
    );
}

/// An audit log holds both sides: each Pod create's request (replayed) and its `responseObject`
/// (the Pod as stored). The golden log's cluster had no kruise-manager, so the cart Pod our log-agent
/// SidecarSet selects was stored without it: every piece of the injection is a disagreement; the
/// debug Pod nobody injects agrees.
#[test]
fn an_audit_log_is_its_own_stored_side() {
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let (cluster, log) = (
        golden.join("cluster").display().to_string(),
        golden.join("inputs/audit/audit.log").display().to_string(),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--cluster-dir", &cluster, "--compare", "--stored", &log, &log])
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report = report(&out);
    let pods = report["pods"].as_array().unwrap();
    let by_source = |n: usize| {
        pods.iter().find(|p| p["source"] == format!("{log}#{n}").as_str()).unwrap_or_else(|| panic!("#{n}"))
    };
    let cart = by_source(1);
    assert_eq!((&cart["result"], &cart["stored"]), (&json!("disagree"), &json!("shop/cart-6c9f8d7b5-x2x8q")));
    let paths: Vec<&str> = cart["sidecarsets"][0]["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "spec.containers[fluent-bit]",
            "spec.volumes[fluent-bit-config]",
            "spec.volumes[fluent-bit-state]",
            "metadata.annotations[kruise.io/sidecarset-hash][log-agent]",
            "metadata.annotations[kruise.io/sidecarset-hash-without-image][log-agent]",
            "metadata.annotations[kruise.io/sidecarset-injected-list][log-agent]",
        ]
    );
    assert!(
        cart["sidecarsets"][0]["diffs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["stored"].is_null() || d["stored"] == false)
    );
    assert_eq!(by_source(6)["result"], "agree", "the debug Pod: no injection on either side");
    assert_eq!(report["totals"]["podCreates"], 2);
    assert_eq!(report["totals"]["storedUnpaired"], 0);
}
