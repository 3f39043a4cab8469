//! The command line as its users expect it (docs/cli.md): one meaning of the exit status in every
//! subcommand, kubectl's short flags, `--feature-gates`, a deterministic `inject`, `completion`,
//! `--version` with the commit and build date, no colours off a terminal, SidecarSet typos and
//! conflicting fields reported when a cluster folder is loaded, and an offline CLI that never
//! guesses silently (folder SidecarSets admitted as the cluster would store them, a Namespace
//! missing from the folder, `-n` against the manifest, a closed output pipe).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_kruise-admission");
const NOW: &str = "2024-05-01T12:00:00Z";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The binary in the repository root with `args` (and `stdin`, when given).
fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .current_dir(root())
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // A subcommand that exits before reading its input closes the pipe: not this test's concern.
    let _ = pipe.write_all(stdin.unwrap_or_default().as_bytes());
    drop(pipe);
    child.wait_with_output().expect("the binary finishes")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The exit status of `args`, with what it printed on failure to check.
fn code(args: &[&str]) -> (Option<i32>, String) {
    let out = run(args, None);
    (out.status.code(), stderr(&out))
}

const INJECT: [&str; 4] =
    ["inject", "tests/golden/inject/workloads.yaml", "--cluster-dir", "tests/golden/cluster"];

#[test]
fn inject_gives_the_same_bytes_for_the_same_input_and_now_sets_the_time() {
    let first = run(&INJECT, None);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    // A second later the wall clock has moved; the output has not.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = run(&INJECT, None);
    assert_eq!(first.stdout, second.stdout);
    let text = stdout(&first);
    assert!(text.contains(r#"\"updateTimestamp\":\"1970-01-01T00:00:00Z\""#), "{text}");

    let mut with_now = INJECT.to_vec();
    with_now.extend(["--now", NOW]);
    let dated = stdout(&run(&with_now, None));
    assert!(dated.contains(r#"\"updateTimestamp\":\"2024-05-01T12:00:00Z\""#), "{dated}");
    assert_eq!(dated.replace("2024-05-01T12:00:00Z", "1970-01-01T00:00:00Z"), text);

    // The timestamp a template already carries is kept: re-injecting the dated output without
    // --now changes nothing.
    let again = run(&["inject", "-", "--cluster-dir", "tests/golden/cluster"], Some(&dated));
    assert_eq!(stdout(&again), dated);
}

#[test]
fn inject_takes_its_input_as_kubectl_does_and_n_names_the_default_namespace() {
    let positional = run(&INJECT, None);
    let with_f = run(
        &["inject", "-f", "tests/golden/inject/workloads.yaml", "--cluster-dir", "tests/golden/cluster"],
        None,
    );
    assert_eq!(positional.stdout, with_f.stdout);

    // A SidecarSet for namespace shop only.
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_with(
        dir.path(),
        "apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata: {name: shop-agent}\nspec:\n  \
         selector: {matchLabels: {app: web}}\n  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: shop}}\n  \
         containers:\n  - {name: shop-agent, image: agent}\n",
    );
    std::fs::copy(root().join("tests/golden/cluster/namespaces.yaml"), format!("{cluster}/namespaces.yaml"))
        .unwrap();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {app: web}\nspec:\n  containers:\n  - {name: app, image: app}\n";
    let injected = |args: &[&str]| {
        let mut all = vec!["inject", "-", "--cluster-dir", &cluster, "-o", "json"];
        all.extend_from_slice(args);
        let out = run(&all, Some(pod));
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    assert!(!injected(&[]).contains("shop-agent"), "namespace default: not selected");
    assert!(injected(&["-n", "shop"]).contains("shop-agent"));
    assert_eq!(injected(&["-n", "shop"]), injected(&["--namespace", "shop"]));
}

#[test]
fn dry_run_takes_o() {
    let args = ["--cluster-dir", "examples/cluster", "--now", NOW, "examples/reviews/pod-target-node.json"];
    let short = run(&[&["dry-run", "-o", "summary"][..], &args].concat(), None);
    let long = run(&[&["dry-run", "--output", "summary"][..], &args].concat(), None);
    assert_eq!(short.status.code(), Some(0), "{}", stderr(&short));
    assert_eq!(short.stdout, long.stdout);
    assert!(stdout(&short).starts_with("SOURCE"));
}

#[test]
fn every_subcommand_exits_0_1_or_2_alike() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a folder").unwrap();
    let file = file.to_str().unwrap();
    let review = "examples/reviews/pod-target-node.json";
    let denied = "tests/fixtures/recorded/connaisseur-pod-create-malformed-no-object.json";
    // A template log-agent selects whose hash annotation is unreadable: the webhook refuses it.
    let refused = dir.path().join("refused.yaml");
    std::fs::write(
        &refused,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: shop\n  labels: {logging: fluent-bit}\n  \
         annotations: {kruise.io/sidecarset-hash: not-json}\nspec:\n  containers:\n  - {name: app, image: app}\n",
    )
    .unwrap();
    let refused = refused.to_str().unwrap();
    let out = dir.path().join("certs");
    let out = out.to_str().unwrap();
    let unknown_gate = "--feature-gates=NoSuchGate=true";
    // An address in use: serve cannot start.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let cluster = dir.path().join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    let cluster = cluster.to_str().unwrap();

    let cases: &[(&[&str], i32)] = &[
        // dry-run
        (&["dry-run", review], 0),
        (&["dry-run", review, denied], 1),
        (&["dry-run", "/nonexistent.json"], 2),
        (&["dry-run", "--cluster-dir", "/nonexistent", review], 2),
        (&["dry-run", unknown_gate, review], 2),
        (&["dry-run", "-o", "nonsense", review], 2),
        // dry-run's agreement report: a disagreeing Pod is 1, an unreadable stored folder 2
        (
            &[
                "dry-run",
                "--cluster-dir",
                "tests/fixtures/agreement/cluster",
                "--compare",
                "--stored",
                "tests/fixtures/agreement/stored",
                "tests/fixtures/recorded/salesforce-generic-sidecar-injector-pod-create-initcontainers.json",
            ],
            1,
        ),
        (&["dry-run", "--compare", "--stored", "/nonexistent", review], 2),
        (&["dry-run", "--compare", review], 2),
        // inject
        (&["inject", "tests/golden/inject/workloads.yaml"], 0),
        (&["inject", "--cluster-dir", "tests/golden/cluster", refused], 1),
        (&["inject", "/nonexistent.yaml"], 2),
        (&["inject", "--cluster-dir", file, refused], 2),
        (&["inject", unknown_gate, refused], 2),
        (&["inject"], 2),
        // manifests
        (&["manifests", "crds"], 0),
        (&["manifests", "webhooks", "--openkruise"], 2),
        (&["manifests", "webhooks", "--ca-bundle-file", "/nonexistent.pem"], 2),
        (&["manifests", "nonsense"], 2),
        // certs
        (&["certs", "--out", out], 0),
        (&["certs", "--out", file], 2),
        // serve: start-up errors
        (&["serve", "--cluster-dir", "/nonexistent"], 2),
        (&["serve", unknown_gate], 2),
        (&["serve", "--inplace-vertical-scaling", "--feature-gates=InPlaceWorkloadVerticalScaling=false"], 2),
        (&["serve", "--listen", "not-an-address"], 2),
        (
            &[
                "serve",
                "--listen",
                &taken,
                "--metrics-listen",
                "127.0.0.1:0",
                "--cluster-dir",
                cluster,
                "--cert-dir",
                out,
            ],
            2,
        ),
        // completion, and the top level
        (&["completion", "bash"], 0),
        (&["completion", "cmd.exe"], 2),
        (&["no-such-subcommand"], 2),
        (&["--version"], 0),
    ];
    for (args, expected) in cases {
        let (got, err) = code(args);
        assert_eq!(got, Some(*expected), "kruise-admission {}: {err}", args.join(" "));
    }
}

#[test]
fn feature_gates_are_kruises_names_and_an_unknown_one_is_refused_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (got, err) = code(&["dry-run", "--feature-gates=InPlaceWorkloadVerticalScalling=true", "-"]);
    assert_eq!(got, Some(2));
    assert!(
        err.contains("unknown feature gate \"InPlaceWorkloadVerticalScalling\"; did you mean InPlaceWorkloadVerticalScaling?"),
        "{err}"
    );
    // Every gate of kruise-manager is accepted, those with no effect here too.
    let (got, err) = code(&[
        "dry-run",
        "--feature-gates=EnhancedLivenessProbe=true,EnablePodProbeMarkerOnServerless=true",
        "examples/reviews/pod-target-node.json",
    ]);
    assert_eq!(got, Some(0), "{err}");

    // A SidecarSet with patchPodMetadata and no whitelist: refused unless the gate is on, by
    // either spelling.
    let set = serde_json::json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "patcher"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "s", "image": "s"}],
            "patchPodMetadata": [{"annotations": {"example.com/a": "b"}, "patchPolicy": "Retain"}],
        },
    });
    let path = dir.path().join("patcher.json");
    std::fs::write(&path, set.to_string()).unwrap();
    let path = path.to_str().unwrap();
    assert_eq!(code(&["dry-run", path]).0, Some(1));
    assert_eq!(
        code(&["dry-run", "--feature-gates=SidecarSetPatchPodMetadataDefaultsAllowed=true", path]).0,
        Some(0)
    );
    assert_eq!(code(&["dry-run", "--sidecarset-patch-pod-metadata-defaults-allowed", path]).0, Some(0));
}

#[test]
fn version_names_the_commit_and_the_build_date() {
    let out = run(&["--version"], None);
    let line = stdout(&out);
    let rest = line
        .strip_prefix(&format!("kruise-admission {} (commit ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{line}"));
    let (commit, date) =
        rest.trim_end().strip_suffix(')').and_then(|r| r.split_once(", built ")).expect("commit, date");
    // This checkout is a git repository: the commit is HEAD's, the date its commit date (unless
    // SOURCE_DATE_EPOCH was set for the build).
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(root()).output().expect("git runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(commit, git(&["rev-parse", "--short=12", "HEAD"]));
    let parsed =
        time::OffsetDateTime::parse(date, &time::format_description::well_known::Rfc3339).expect(date);
    if std::env::var_os("SOURCE_DATE_EPOCH").is_none() {
        assert_eq!(parsed.unix_timestamp().to_string(), git(&["log", "-1", "--format=%ct"]));
    }
}

#[test]
fn completion_scripts_name_the_subcommands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = run(&["completion", shell], None);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for word in ["dry-run", "inject", "--cluster-dir", "--feature-gates"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    assert!(stdout(&run(&["completion", "bash"], None)).contains("complete -F _kruise__admission"));
}

/// `serve --log-format text` for about two seconds, its stderr a pipe or (through `script`) a
/// terminal; what it wrote there.
fn text_logs(terminal: bool, no_color: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cluster")).unwrap();
    let serve = format!(
        "timeout -s INT 2 {BIN} serve --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 --log-format text \
         --cluster-dir cluster --cert-dir certs"
    );
    let mut command = if terminal {
        let mut c = Command::new("script");
        c.args(["-qec", &serve, "/dev/null"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", &format!("{serve} 2>&1")]);
        c
    };
    command.current_dir(dir.path()).env("RUST_LOG", "info").env_remove("NO_COLOR");
    if let Some(value) = no_color {
        command.env("NO_COLOR", value);
    }
    let out = command.stdin(Stdio::null()).output().expect("the shell runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("ready to serve"), "{text}");
    text
}

#[test]
fn logs_are_coloured_only_on_a_terminal_without_no_color() {
    assert!(!text_logs(false, None).contains('\x1b'), "a redirected stderr gets no ANSI colours");
    assert!(text_logs(true, None).contains("\x1b["), "a terminal gets colours");
    assert!(!text_logs(true, Some("1")).contains('\x1b'), "NO_COLOR=1 turns them off");
    assert!(text_logs(true, Some("")).contains("\x1b["), "an empty NO_COLOR is not set");
}

#[test]
fn a_diff_is_coloured_only_on_a_terminal_without_no_color() {
    let diff = format!(
        "{BIN} dry-run -o diff --cluster-dir tests/golden/cluster --now {NOW} tests/golden/inputs/objects/pods.yaml"
    );
    let on_terminal = |no_color: Option<&str>| {
        let mut command = Command::new("script");
        command.args(["-qec", &diff, "/dev/null"]).current_dir(root()).env_remove("NO_COLOR");
        if let Some(value) = no_color {
            command.env("NO_COLOR", value);
        }
        let out = command.stdin(Stdio::null()).output().expect("script runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(on_terminal(None).contains("\x1b["), "a terminal gets colours");
    let plain = on_terminal(Some("1"));
    assert!(
        plain.contains("+++ tests/golden/inputs/objects/pods.yaml#0") && !plain.contains('\x1b'),
        "{plain}"
    );
}

fn cluster_with(dir: &Path, sidecarset: &str) -> String {
    let cluster = dir.join("cluster");
    std::fs::create_dir(&cluster).unwrap();
    std::fs::write(cluster.join("sidecarset.yaml"), sidecarset).unwrap();
    cluster.display().to_string()
}

#[test]
fn a_sidecarset_typo_and_a_refused_pair_are_reported_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_with(
        dir.path(),
        "apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata:\n  name: log-agent\nspec:\n  selecter:\n    \
         matchLabels: {app: web}\n  updateStrategy:\n    partition: 1\n    selector:\n      matchLabels: {canary: \"true\"}\n  \
         containers:\n  - name: agent\n    image: agent:1\n    imagePullPolicyy: Always\n",
    );
    let file = format!("{cluster}/sidecarset.yaml");
    let expected = [
        format!(
            "{file}: SidecarSet log-agent: unknown field \"spec.selecter\" (did you mean \"spec.selector\"?)"
        ),
        format!(
            "{file}: SidecarSet log-agent: unknown field \"spec.containers[0].imagePullPolicyy\" (did you mean \
             \"spec.containers[0].imagePullPolicy\"?)"
        ),
        format!(
            "{file}: SidecarSet log-agent: spec.updateStrategy.partition and spec.updateStrategy.selector cannot be \
             used together (Kruise refuses this SidecarSet)"
        ),
    ];
    for (prefix, args) in [
        (
            "dry-run: warning: ",
            vec!["dry-run", "--cluster-dir", &cluster, "examples/reviews/pod-target-node.json"],
        ),
        (
            "inject: warning: ",
            vec!["inject", "--cluster-dir", &cluster, "tests/golden/inject/workloads.yaml"],
        ),
    ] {
        let out = run(&args, None);
        let err = stderr(&out);
        for line in &expected {
            assert!(err.contains(&format!("{prefix}{line}\n")), "{prefix}{line}\nnot in:\n{err}");
        }
        // Then the offline commands stop: Kruise would refuse this SidecarSet.
        assert_eq!(out.status.code(), Some(2), "{err}");
        let refused = format!(
            "--cluster-dir {file}: SidecarSet log-agent would be refused (500): [spec.selector: Required value: no \
             selector defined for SidecarSet, updateStrategy: Invalid value:"
        );
        assert!(err.contains(&refused), "{refused}\nnot in:\n{err}");
    }

    // serve logs them as warnings when it reads the folder, then does not load it: the same refusal.
    let serve = crate::common::serve_process::Serve::start(dir.path(), &["--cluster-dir", &cluster]);
    let lines = serve.until("cluster objects cannot be loaded; not ready");
    let logged: Vec<String> = lines
        .iter()
        .filter(|e| e["level"] == "WARN")
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect();
    for line in &expected {
        assert!(logged.contains(line), "{line}\nnot in {logged:#?}");
    }
    let error = lines.last().unwrap()["error"].as_str().unwrap_or_default().to_owned();
    assert!(
        error.contains("SidecarSet log-agent would be refused (500): [spec.selector: Required value"),
        "{error}"
    );
}

/// Two SidecarSets of a folder that can select the same pods and both inject a container named
/// `agent`: Kruise refuses whichever is written next, so the load says so from both sides.
#[test]
fn two_sidecarsets_that_claim_the_same_container_are_reported_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let set = |name: &str| {
        format!(
            "apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata:\n  name: {name}\nspec:\n  selector:\n    \
             matchLabels: {{app: web}}\n  containers:\n  - name: agent\n    image: agent:1\n"
        )
    };
    let cluster = cluster_with(dir.path(), &format!("{}---\n{}", set("logs"), set("metrics")));
    let expected = [
        "SidecarSet logs: spec.containers: Invalid value: \"agent\": container agent already exist in metrics",
        "SidecarSet metrics: spec.containers: Invalid value: \"agent\": container agent already exist in logs",
    ];
    for (prefix, args) in [
        (
            "dry-run: warning: --cluster-dir: ",
            vec!["dry-run", "--cluster-dir", &cluster, "examples/reviews/pod-target-node.json"],
        ),
        (
            "inject: warning: --cluster-dir: ",
            vec!["inject", "--cluster-dir", &cluster, "tests/golden/inject/workloads.yaml"],
        ),
    ] {
        let err = stderr(&run(&args, None));
        for line in expected {
            assert!(err.contains(&format!("{prefix}{line}\n")), "{prefix}{line}\nnot in:\n{err}");
        }
    }
    let serve = crate::common::serve_process::Serve::start(dir.path(), &["--cluster-dir", &cluster]);
    let logged: Vec<String> = serve
        .until("cluster objects loaded")
        .iter()
        .filter(|e| e["level"] == "WARN")
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect();
    for line in expected {
        assert!(logged.iter().any(|l| l == line), "{line}\nnot in {logged:#?}");
    }
}

const WEB_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: web\n  labels: {app: web}\nspec:\n  \
                       containers:\n  - {name: app, image: app}\n";

/// A hand-written SidecarSet (no hash annotations, no defaults) selecting `app: web`, plus `extra`
/// lines under its first container.
fn hand_written(extra: &str) -> String {
    format!(
        "apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata:\n  name: log-agent\nspec:\n  selector:\n    \
         matchLabels: {{app: web}}\n  containers:\n  - name: agent\n    image: agent:1\n{extra}"
    )
}

/// The hash annotations of the first document `dry-run --output patched` admits from `file` (what
/// our SidecarSet mutating webhook stores).
fn stored_hashes(file: &str) -> (String, String) {
    let out = run(&["dry-run", "--output", "patched", file], None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let admitted: serde_json::Value = serde_saphyr::from_str(&stdout(&out)).expect("YAML");
    let hash = |key: &str| admitted["metadata"]["annotations"][key].as_str().expect(key).to_owned();
    (hash("kruise.io/sidecarset-hash"), hash("kruise.io/sidecarset-hash-without-image"))
}

/// A folder SidecarSet without hash annotations: the injected pod records the hashes our
/// SidecarSet webhook would have stored (never `"hash":""`), and stderr says so in one line;
/// `inject --with` gives the same pod from the same SidecarSet layered over no folder.
#[test]
fn a_folder_sidecarset_without_hashes_gets_the_ones_the_webhook_would_store() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_with(dir.path(), &hand_written(""));
    let set = format!("{cluster}/sidecarset.yaml");
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, WEB_POD).unwrap();
    let pod = pod.to_str().unwrap();
    let (hash, without_image) = stored_hashes(&set);
    let injected = run(&["inject", "--cluster-dir", &cluster, pod], None);
    assert_eq!(injected.status.code(), Some(0), "{}", stderr(&injected));
    let text = stdout(&injected);
    for expected in [&hash, &without_image] {
        assert!(text.contains(&format!(r#"\"hash\":\"{expected}\""#)), "{expected} not in:\n{text}");
    }
    assert!(!text.contains(r#"\"hash\":\"\""#), "{text}");
    assert_eq!(
        stderr(&injected),
        "inject: note: --cluster-dir: no kruise.io/sidecarset-hash annotations on SidecarSet log-agent: using the \
         ones Kruise's SidecarSet webhook would store\n"
    );
    let with = run(&["inject", "--with", &set, pod], None);
    assert_eq!(with.status.code(), Some(0), "{}", stderr(&with));
    assert_eq!(stdout(&with), text, "--with admits the SidecarSet as the folder load does");
}

/// A folder SidecarSet Kruise would refuse stops `inject` and `dry-run` (exit 2) with the words
/// `--with` uses for it: an unknown podInjectPolicy (which would otherwise put the sidecar after
/// the app), and no selector at all.
#[test]
fn a_folder_sidecarset_kruise_would_refuse_is_an_error_worded_as_with_words_it() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, WEB_POD).unwrap();
    let pod = pod.to_str().unwrap();
    let no_selector = "apiVersion: apps.kruise.io/v1beta1\nkind: SidecarSet\nmetadata:\n  name: log-agent\nspec:\n  \
                       containers:\n  - {name: agent, image: agent:1}\n";
    for (case, set, refusal) in [
        (
            "policy",
            hand_written("    podInjectPolicy: BeforeAppContainers\n"),
            r#"SidecarSet log-agent would be refused (500): spec.container.podInjectPolicy: Invalid value: "BeforeAppContainers": unsupported pod inject policy"#,
        ),
        (
            "selector",
            no_selector.to_owned(),
            "SidecarSet log-agent would be refused (500): spec.selector: Required value: no selector defined for SidecarSet",
        ),
    ] {
        let case_dir = dir.path().join(case);
        std::fs::create_dir(&case_dir).unwrap();
        let cluster = cluster_with(&case_dir, &set);
        let file = format!("{cluster}/sidecarset.yaml");
        for command in ["inject", "dry-run"] {
            let out = run(&[command, "--cluster-dir", &cluster, pod], None);
            assert_eq!(out.status.code(), Some(2), "{command} {case}: {}", stderr(&out));
            assert!(
                stderr(&out).ends_with(&format!("{command}: --cluster-dir {file}: {refusal}\n")),
                "{command} {case}: {}",
                stderr(&out)
            );
            let with = run(&[command, "--with", &file, pod], None);
            assert_eq!(with.status.code(), Some(2), "{command} --with {case}: {}", stderr(&with));
            assert!(
                stderr(&with).ends_with(&format!("{command}: --with {file}: {refusal}\n")),
                "{command} --with {case}: {}",
                stderr(&with)
            );
        }
    }
}

/// A Pod whose Namespace the folder lacks: the SidecarSets that select namespaces by label are
/// skipped (nothing can say whether it matches), and both commands name them in a warning.
#[test]
fn a_pod_of_a_namespace_missing_from_the_folder_is_warned_about_naming_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_with(
        dir.path(),
        &hand_written("")
            .replace("  containers:", "  namespaceSelector:\n    matchLabels: {team: shop}\n  containers:"),
    );
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, WEB_POD).unwrap();
    let pod = pod.to_str().unwrap();
    let warning = "Namespace web is not in --cluster-dir, so the SidecarSets that select namespaces by label were \
                   skipped: log-agent";
    let injected = run(&["inject", "--cluster-dir", &cluster, pod], None);
    assert_eq!(injected.status.code(), Some(0), "{}", stderr(&injected));
    assert!(
        stderr(&injected).contains(&format!("inject: {pod}#0: Pod web/web: warning: {warning}\n")),
        "{}",
        stderr(&injected)
    );
    let decided = run(&["dry-run", "--cluster-dir", &cluster, "--output", "json", pod], None);
    assert_eq!(decided.status.code(), Some(0), "{}", stderr(&decided));
    let result: serde_json::Value = serde_json::from_str(stdout(&decided).trim()).expect("one JSON line");
    assert_eq!(result["warnings"], serde_json::json!([warning]), "{result}");

    // With the Namespace in the folder the pod is decided, and no warning.
    std::fs::write(
        format!("{cluster}/namespace.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n  labels: {team: shop}\n",
    )
    .unwrap();
    let injected = run(&["inject", "--cluster-dir", &cluster, pod], None);
    assert!(!stderr(&injected).contains("warning"), "{}", stderr(&injected));
    assert!(stdout(&injected).contains("name: agent"), "{}", stdout(&injected));
}

/// `inject -n` that contradicts a manifest's own namespace is refused as kubectl refuses it; a
/// manifest without one, or with the same one, takes it.
#[test]
fn inject_refuses_a_namespace_flag_that_contradicts_the_manifest_as_kubectl_does() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, WEB_POD).unwrap();
    let pod = pod.to_str().unwrap();
    let out = run(&["inject", "-n", "batch", pod], None);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "inject: {pod}: the namespace from the provided object \"web\" does not match the namespace \"batch\". \
             You must pass '--namespace=web' to perform this operation.\n"
        )
    );
    assert!(stdout(&out).is_empty(), "nothing of the file is written: {}", stdout(&out));
    assert_eq!(run(&["inject", "-n", "web", pod], None).status.code(), Some(0));
    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "web"}, "spec": {"containers": []}}]}"#;
    let out = run(&["inject", "--namespace", "batch", "-"], Some(list));
    assert_eq!(out.status.code(), Some(2), "a List's items are checked too: {}", stderr(&out));
}

/// `inject … | head`: when the reader goes away, inject stops quietly with status 0.
#[test]
fn a_closed_output_pipe_ends_inject_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("pods.yaml");
    // About 150 KiB of output, more than a pipe buffer holds: the writes meet the closed pipe.
    std::fs::write(&pods, std::iter::repeat_n(WEB_POD, 1_000).collect::<Vec<_>>().join("---\n")).unwrap();
    let mut child = Command::new(BIN)
        .args(["inject", "--cluster-dir", "tests/golden/cluster", pods.to_str().unwrap()])
        .current_dir(root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut first = [0u8; 64];
    std::io::Read::read_exact(child.stdout.as_mut().expect("piped"), &mut first).expect("some output");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("the binary finishes");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "quietly");
}
