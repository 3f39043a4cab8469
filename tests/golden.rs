//! Golden-file tests of `dry-run` (every input kind in every output, `--with`/`--compare`) and of
//! `inject` (every workload kind). The binary runs inside `tests/golden/` with relative paths so
//! the outputs name stable sources; `UPDATE_GOLDEN=1 cargo test --test integration golden::`
//! rewrites `tests/golden/expected/`, whose changes must then be read like code in review.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const NOW: &str = "2024-05-01T12:00:00Z";

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(args)
        .current_dir(golden_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    pipe.write_all(stdin.unwrap_or_default().as_bytes()).expect("stdin accepts the input");
    drop(pipe);
    child.wait_with_output().expect("the binary finishes")
}

/// Compare `actual` with `expected/<name>`, or rewrite it when `UPDATE_GOLDEN=1`.
fn check_golden(name: &str, actual: &str) {
    let path = golden_dir().join("expected").join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("a parent folder")).expect("expected/ is writable");
        std::fs::write(&path, actual).expect("the golden file is writable");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `UPDATE_GOLDEN=1 cargo test --test integration golden::` and review the result",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(e, a)| e != a)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the output at line {}:\nexpected: {:?}\nactual:   {:?}\n(UPDATE_GOLDEN=1 rewrites it)",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("output is UTF-8")
}

fn dry_run_args<'a>(output: &'a str, inputs: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["dry-run", "--cluster-dir", "cluster", "--now", NOW, "--output", output];
    args.extend_from_slice(inputs);
    args
}

/// (golden name, inputs, exit status): recorded reviews (JSON and a YAML v1beta1 one), bare
/// objects (multi-document YAML and a JSON List) and an audit log in the real event shape.
const INPUT_KINDS: &[(&str, &[&str], i32)] = &[
    ("reviews", &["inputs/reviews"], 1),
    ("objects", &["inputs/objects"], 0),
    ("audit", &["inputs/audit/audit.log"], 1),
];

const OUTPUTS: &[(&str, &str)] =
    &[("json", "jsonl"), ("review", "jsonl"), ("summary", "txt"), ("patched", "yaml"), ("diff", "diff")];

#[test]
fn every_input_kind_in_every_output() {
    for (name, inputs, status) in INPUT_KINDS {
        for (output, ext) in OUTPUTS {
            let out = run(&dry_run_args(output, inputs), None);
            assert_eq!(
                out.status.code(),
                Some(*status),
                "{name} --output {output}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            check_golden(&format!("dry-run/{name}.{output}.{ext}"), &stdout(&out));
        }
    }
}

#[test]
fn skipped_audit_events_are_counted_on_stderr_when_stdout_is_machine_readable() {
    let out = run(&dry_run_args("json", &["inputs/audit/audit.log"]), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("8 audit events skipped"), "{stderr}");
}

#[test]
fn standard_input_reads_like_a_file() {
    let text = std::fs::read_to_string(golden_dir().join("inputs/objects/pods.yaml")).unwrap();
    let from_stdin = run(&dry_run_args("summary", &["-"]), Some(&text));
    let from_file = run(&dry_run_args("summary", &["inputs/objects/pods.yaml"]), None);
    assert_eq!(from_stdin.status.code(), Some(0));
    // Same table, only the source column (and its padding) differs.
    let squash =
        |s: String, source: &str| s.replace(source, "SRC").split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squash(stdout(&from_stdin), "-#"), squash(stdout(&from_file), "inputs/objects/pods.yaml#"));
}

#[test]
fn with_replaces_the_folders_sidecarset() {
    let mut args = dry_run_args("patched", &["inputs/objects/pods.yaml"]);
    args.extend(["--with", "with/log-agent-v2.yaml"]);
    let out = run(&args, None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    check_golden("dry-run/objects.with.patched.yaml", &stdout(&out));
}

#[test]
fn compare_shows_what_the_with_objects_change() {
    for (output, ext) in [("summary", "txt"), ("diff", "diff"), ("json", "jsonl")] {
        let mut args = dry_run_args(output, &["inputs/reviews", "inputs/objects", "inputs/audit/audit.log"]);
        args.extend(["--with", "with/log-agent-v2.yaml", "--compare"]);
        let out = run(&args, None);
        // The protected namespace deletions are refused either way.
        assert_eq!(
            out.status.code(),
            Some(1),
            "--compare --output {output}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        check_golden(&format!("compare/compare.{output}.{ext}"), &stdout(&out));
    }
}

#[test]
fn inject_every_workload_kind() {
    let out = run(&["inject", "-f", "inject/workloads.yaml", "--cluster-dir", "cluster", "--now", NOW], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    check_golden("inject/workloads.yaml", &stdout(&out));
    // A List keeps its shape; unknown fields and status survive; JSON output.
    let out = run(
        &["inject", "-o", "json", "-f", "inject/list.json", "--cluster-dir", "cluster", "--now", NOW],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    check_golden("inject/list.jsonl", &stdout(&out));
}

#[test]
fn inject_without_a_cluster_leaves_manifests_as_they_were() {
    let out = run(&["inject", "-o", "json", "-f", "inject/workloads.yaml"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(golden_dir().join("inject/workloads.yaml")).unwrap();
    let input: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let output: Vec<serde_json::Value> =
        stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(output, input);
}

#[test]
fn inject_writes_no_scheduling_stamp() {
    let out = run(
        &["inject", "-o", "json", "-f", "inject/workloads.yaml", "--cluster-dir", "cluster", "--now", NOW],
        None,
    );
    let pod: serde_json::Value =
        serde_json::from_str(stdout(&out).lines().next().expect("the Pod comes first")).unwrap();
    assert_eq!(pod["metadata"]["annotations"]["kruise-admission.dev/target-node"], "worker-1");
    assert_eq!(pod["spec"].get("affinity"), None);
    assert_eq!(pod["spec"].get("tolerations"), None);
    assert_eq!(pod["spec"]["containers"][1]["name"], "fluent-bit");
}

/// Exit 2 for anything unreadable, naming the file, the document and what was expected; the
/// readable inputs are still reported.
#[test]
fn unreadable_inputs_name_the_file_the_document_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let log = write(
        "broken.log",
        "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"ResponseComplete\",\"verb\":\"get\"}\n{\"kind\":\n",
    );
    let shapeless = write("shapeless.yaml", "metadata:\n  name: x\n");
    let no_ref = write(
        "noref.json",
        "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"ResponseComplete\",\"verb\":\"create\"}",
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    let out = run(
        &dry_run_args("summary", &[&log, &shapeless, &no_ref, &missing, "inputs/objects/pods.yaml"]),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for expected in [
        format!("{log}: document 1: invalid JSON"),
        format!(
            "{shapeless}: document 0: expected an AdmissionReview, an audit.k8s.io/v1 Event or a Kubernetes object"
        ),
        format!("{no_ref}: document 0: the audit event has no objectRef"),
        format!("{missing}: cannot read"),
    ] {
        assert!(stderr.contains(&expected), "missing {expected:?} in:\n{stderr}");
    }
    assert!(stdout(&out).contains("inputs/objects/pods.yaml#1"), "readable inputs are still reported");

    let out = run(&["inject", "-f", &shapeless, "-f", "inject/list.json"], None);
    assert_eq!(out.status.code(), Some(0), "a manifest without a template is passed through");
    let bad = write("bad.yaml", "apiVersion: v1\nkind: Pod\n---\n- a list\n");
    let out = run(&["inject", "-f", &bad], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("{bad}: document 1 is not an object: expected a Kubernetes manifest"))
    );
}

#[test]
fn flags_that_do_not_fit_exit_2() {
    let out = run(
        &dry_run_args("review", &["--with", "with/log-agent-v2.yaml", "--compare", "inputs/objects"]),
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--compare reports with --output summary, diff or json")
    );
    let out = run(&dry_run_args("summary", &["--compare", "inputs/objects"]), None);
    assert_eq!(out.status.code(), Some(2), "--compare needs --with");
    let out = run(&dry_run_args("summary", &["--with", "with/missing.yaml", "inputs/objects"]), None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("with/missing.yaml"));
}

/// Already-injected templates are not injected twice: inject's output, injected again, is the same.
#[test]
fn inject_is_idempotent() {
    let args = ["inject", "-o", "json", "-f", "-", "--cluster-dir", "cluster", "--now", NOW];
    let text = std::fs::read_to_string(golden_dir().join("inject/workloads.yaml")).unwrap();
    let once = run(&args, Some(&text));
    assert_eq!(once.status.code(), Some(0), "{}", String::from_utf8_lossy(&once.stderr));
    // A later clock: an unchanged injection keeps its recorded updateTimestamp.
    let later =
        ["inject", "-o", "json", "-f", "-", "--cluster-dir", "cluster", "--now", "2024-06-01T00:00:00Z"];
    let twice = run(&later, Some(&stdout(&once)));
    assert_eq!(twice.status.code(), Some(0));
    assert_eq!(stdout(&twice), stdout(&once));
}

/// Pipes see no progress indicator and no colour: stderr stays empty, the diff is plain text.
#[test]
fn pipes_get_plain_output() {
    let out = run(&dry_run_args("diff", &["inputs/objects", "inputs/reviews"]), None);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!stdout(&out).contains('\x1b'));
}
