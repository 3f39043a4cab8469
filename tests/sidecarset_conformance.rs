//! SidecarSet injection conformance: data-driven cases in `tests/sidecarset/cases/*.yaml`, each an
//! input pod plus the cluster objects (SidecarSets, Namespaces, ControllerRevisions) and the
//! expected outcome, written from docs/sidecarset.md. Every case also checks:
//! - the JSON patch, applied by an independent RFC 6902 implementation (`json-patch`), gives the
//!   mutated pod;
//! - running `/mutate-pod` again on its own output yields no patch (idempotency).
//!
//! Each case's original pod, patch and expected pod are written to
//! `target/sidecarset-conformance/<case>.json` for `tests/sidecarset/check_external.py`
//! (kubernetes-validate --strict and the Python `jsonpatch` applier).
//!
//! Case format:
//! ```yaml
//! section: "5.3"            # the docs/sidecarset.md section it is written from
//! description: ...
//! now: 2026-07-02T09:56:09Z # the injected clock (default shown)
//! random: 0.5               # every uniform draw (default 0.5)
//! strictSchema: false       # the pod carries unknown fields on purpose (kubernetes-validate without --strict)
//! namespace: default        # request.namespace
//! operation: CREATE         # request.operation; subResource: binding for a subresource
//! objects: [...]            # cluster objects
//! pod: {...}
//! expect:
//!   pod: {...}              # the whole pod after mutation
//!   unchanged: true         # or: no patch at all
//!   denied: {code: 500, message: [substrings]}
//!   warnings: [substrings]  # each must appear in some warning
//! ```

use std::path::{Path, PathBuf};

use kruise_admission::admission::review::{AdmissionRequest, decode_review};
use kruise_admission::admission::webhooks::{self, Outcome};
use kruise_admission::admission::{FixedClock, Inputs, Random, Settings};
use kruise_admission::cluster::files::read_documents;
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::{Value, json};

struct FixedRandom(f64);

impl Random for FixedRandom {
    fn uniform(&self) -> f64 {
        self.0
    }
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sidecarset/cases");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("cases dir").map(|e| e.expect("entry").path()).collect();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    files
}

fn request_for(case: &Value, pod: &Value) -> AdmissionRequest<'static> {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "00000000-0000-0000-0000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": case.get("subResource").cloned().unwrap_or(json!("")),
            "namespace": case.get("namespace").cloned().unwrap_or(json!("default")),
            "operation": case.get("operation").cloned().unwrap_or(json!("CREATE")),
            "dryRun": case.get("dryRun").cloned().unwrap_or(json!(false)),
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod,
            "oldObject": case.get("oldPod").cloned().unwrap_or(Value::Null),
        }
    });
    decode_review(review).expect("a well-formed review")
}

fn run(case: &Value, snapshot: &Snapshot, pod: &Value) -> Outcome<'static> {
    let now = case.get("now").and_then(Value::as_str).unwrap_or("2026-07-02T09:56:09Z");
    let now = time::OffsetDateTime::parse(now, &time::format_description::well_known::Rfc3339)
        .expect("now is RFC 3339");
    let clock = FixedClock(now);
    let random = FixedRandom(case.get("random").and_then(Value::as_f64).unwrap_or(0.5));
    let settings = Settings::default();
    let answers = Answers::default();
    let inputs =
        Inputs { cluster: snapshot, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let webhook = webhooks::by_path("/mutate-pod").expect("/mutate-pod is registered");
    webhooks::run(webhook, &request_for(case, pod), &inputs).into_owned()
}

fn check_case(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let case = read_documents(&text)?.into_iter().next().ok_or("empty case")?;
    let pod = case.get("pod").cloned().ok_or("case has no pod")?;
    let objects = case.get("objects").and_then(Value::as_array).cloned().unwrap_or_default();
    let snapshot = Snapshot::from_objects(objects);
    let expect = case.get("expect").ok_or("case has no expect")?;
    let outcome = run(&case, &snapshot, &pod);
    let decision = &outcome.decision;

    for w in expect.get("warnings").and_then(Value::as_array).into_iter().flatten() {
        let w = w.as_str().unwrap_or_default();
        if !decision.warnings.iter().any(|x| x.contains(w)) {
            return Err(format!("no warning contains {w:?}; warnings: {:?}", decision.warnings));
        }
    }
    if expect.get("warnings").is_none() && !decision.warnings.is_empty() && expect.get("denied").is_none() {
        return Err(format!("unexpected warnings: {:?}", decision.warnings));
    }

    if let Some(denied) = expect.get("denied") {
        let status = decision
            .status
            .as_ref()
            .ok_or_else(|| format!("expected a denial, got allowed with patch {:?}", decision.patch))?;
        if decision.allowed {
            return Err("expected a denial".into());
        }
        let code = denied.get("code").and_then(Value::as_u64).unwrap_or(500);
        if u64::from(status.code) != code {
            return Err(format!("expected code {code}, got {} ({})", status.code, status.message));
        }
        for m in denied.get("message").and_then(Value::as_array).into_iter().flatten() {
            let m = m.as_str().unwrap_or_default();
            if !status.message.contains(m) {
                return Err(format!("denial message {:?} lacks {m:?}", status.message));
            }
        }
        return Ok(());
    }
    if !decision.allowed {
        return Err(format!("denied: {:?}", decision.status));
    }
    let mutated = outcome.mutated.clone().ok_or("no mutated object")?;

    // The patch, applied independently, must give the mutated pod.
    let patch_json = serde_json::to_value(&decision.patch).map_err(|e| e.to_string())?;
    let patch: json_patch::Patch =
        serde_json::from_value(patch_json.clone()).map_err(|e| format!("patch does not parse: {e}"))?;
    let mut applied = pod.clone();
    json_patch::patch(&mut applied, &patch).map_err(|e| format!("patch does not apply: {e}"))?;
    if applied != mutated {
        return Err("the patch applied to the pod differs from the mutated pod".into());
    }

    if expect.get("unchanged").and_then(Value::as_bool) == Some(true) && !decision.patch.is_empty() {
        return Err(format!("expected no patch, got {patch_json}"));
    }
    if let Some(expected) = expect.get("pod")
        && &mutated != expected
    {
        return Err(format!(
            "mutated pod differs from the expected one\n--- got\n{}\n--- expected\n{}",
            serde_json::to_string_pretty(&mutated).unwrap_or_default(),
            serde_json::to_string_pretty(expected).unwrap_or_default()
        ));
    }

    // Idempotency: the webhook on its own output changes nothing.
    let again = run(&case, &snapshot, &mutated);
    if !again.decision.allowed || !again.decision.patch.is_empty() {
        return Err(format!(
            "second run is not a no-op: {:?} {:?}",
            again.decision.status, again.decision.patch
        ));
    }

    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../sidecarset-conformance");
    std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
    let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("case");
    let strict = case.get("strictSchema").and_then(Value::as_bool).unwrap_or(true);
    let record = json!({"case": name, "strict": strict, "pod": pod, "patch": patch_json, "mutated": mutated});
    std::fs::write(
        out_dir.join(format!("{name}.json")),
        serde_json::to_vec_pretty(&record).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn conformance_cases() {
    let files = cases();
    let mut failures = Vec::new();
    for path in &files {
        if let Err(e) = check_case(path) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    assert!(files.len() >= 25, "expected the conformance cases, found {}", files.len());
}

#[test]
fn every_numbered_section_has_a_case() {
    let mut covered = std::collections::BTreeSet::new();
    for path in cases() {
        let text = std::fs::read_to_string(&path).expect("readable case");
        let case = read_documents(&text).expect("valid case").remove(0);
        let section =
            case.get("section").and_then(Value::as_str).expect("every case names its section").to_owned();
        covered.insert(section.split('.').next().unwrap_or_default().to_owned());
    }
    for n in 1..=12 {
        assert!(covered.contains(&n.to_string()), "no case for section {n}");
    }
}
