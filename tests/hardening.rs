//! Supply-chain and build hardening that no other test would notice going away (issue 17.8):
//! base images pinned by digest, private keys kept out of the Docker build context, the Dockerfile
//! making the image .ci/image.sh makes (both from image.env), the CI warning about a stale offline
//! advisory snapshot, and `forbid(unsafe_code)` on both crate roots.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn pinned(image: &str) -> bool {
    image
        .split_once("@sha256:")
        .is_some_and(|(_, digest)| digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn every_pulled_base_image_and_the_frontend_are_pinned_by_digest() {
    let dockerfile = read("Dockerfile");
    let syntax = dockerfile.lines().next().unwrap_or_default();
    assert!(
        syntax.starts_with("# syntax=") && pinned(syntax),
        "the BuildKit frontend is not pinned: {syntax}"
    );
    let froms: Vec<&str> =
        dockerfile.lines().filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM ")).collect();
    assert!(froms.len() >= 2, "{froms:?}");
    for from in froms {
        let image = from
            .split_whitespace()
            .find(|w| !w.eq_ignore_ascii_case("FROM") && !w.starts_with("--"))
            .unwrap_or_default();
        if image == "scratch" {
            continue; // the empty image: nothing is pulled
        }
        assert!(pinned(image), "not pinned by digest: {from}");
        assert!(!image.contains('$'), "a build argument would let the tag and digest disagree: {from}");
    }
}

#[test]
fn the_build_context_leaves_out_generated_keys() {
    let ignore = read(".dockerignore");
    let patterns: Vec<&str> =
        ignore.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).collect();
    for wanted in ["certs/", "target/", ".git/"] {
        assert!(patterns.contains(&wanted), ".dockerignore lacks {wanted}: {patterns:?}");
    }
}

/// image.env: `KEY="value"` lines (what .ci/image.sh sources), `\"` for a quote inside.
fn image_env() -> std::collections::HashMap<String, String> {
    read("image.env")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|line| {
            let (key, value) =
                line.split_once('=').unwrap_or_else(|| panic!("image.env: not KEY=\"value\": {line}"));
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or_else(|| panic!("image.env: {key}'s value is not in double quotes"));
            (key.to_owned(), value.replace("\\\"", "\""))
        })
        .collect()
}

/// The Dockerfile's instructions, continuation lines joined, comments and blank lines left out.
fn dockerfile_instructions() -> Vec<String> {
    let text = read("Dockerfile");
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                instructions.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
                current.clear();
            }
        }
    }
    instructions
}

fn json_array(words: &[&str]) -> String {
    format!("[{}]", words.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(", "))
}

#[test]
fn the_dockerfile_makes_the_image_of_image_env_as_ci_image_sh_does() {
    let env = image_env();
    let value = |key: &str| env.get(key).unwrap_or_else(|| panic!("image.env has no {key}")).as_str();
    let instructions = dockerfile_instructions();
    let last_from = instructions.iter().rposition(|i| i.starts_with("FROM ")).expect("a FROM");
    let (build, last) = instructions.split_at(last_from);
    let cmd: Vec<&str> = value("IMAGE_CMD").split(' ').collect();
    let expected = [
        "FROM --platform=linux/amd64 scratch".to_owned(),
        "COPY --from=build /out/rootfs/ /".to_owned(),
        format!("COPY --from=build --chown={} /out/certs/ {}/", value("IMAGE_USER"), value("IMAGE_CERT_DIR")),
        format!("ENV {}", value("IMAGE_ENV")),
        format!("USER {}", value("IMAGE_USER")),
        format!("WORKDIR {}", value("IMAGE_WORKDIR")),
        format!("VOLUME {}", json_array(&[value("IMAGE_CERT_DIR")])),
        format!("EXPOSE {}", value("IMAGE_PORTS")),
        format!("ENTRYPOINT {}", json_array(&[value("IMAGE_BINARY")])),
        format!("CMD {}", json_array(&cmd)),
        format!("ARG VERSION={}", env!("CARGO_PKG_VERSION")),
        "ARG REVISION=unknown".to_owned(),
        format!(
            "LABEL org.opencontainers.image.source=\"{}\" org.opencontainers.image.version=\"${{VERSION}}\" \
             org.opencontainers.image.revision=\"${{REVISION}}\" org.opencontainers.image.licenses=\"{}\"",
            value("IMAGE_SOURCE"),
            env!("CARGO_PKG_LICENSE")
        ),
    ];
    assert_eq!(last, expected, "the Dockerfile's final stage, against what image.env and Cargo.toml say");

    // The build stage: the same target and RUSTFLAGS, and the two trees at image.env's paths.
    let build = build.join("\n");
    let target = value("IMAGE_TARGET");
    for wanted in [
        format!("ENV RUSTFLAGS=\"{}\"", value("IMAGE_RUSTFLAGS").replace('"', "\\\"")),
        format!("cargo build --release --locked --target {target} --bin kruise-admission"),
        format!(
            "install -D -m 0755 target/{target}/release/kruise-admission /out/rootfs{}",
            value("IMAGE_BINARY")
        ),
        format!("install -d -m 0755 /out/rootfs{} /out/certs", value("IMAGE_CLUSTER_DIR")),
    ] {
        assert!(build.contains(&wanted), "the Dockerfile's build stage lacks {wanted:?}:\n{build}");
    }

    // The install files run it as that user and mount those folders.
    let uid = value("IMAGE_USER").split_once(':').map(|(u, _)| u).unwrap_or_default();
    for file in ["charts/kruise-admission/templates/deployment.yaml", "manifests/deployment.yaml"] {
        let text = read(file);
        for wanted in [
            format!("runAsUser: {uid}"),
            format!("--cert-dir={}", value("IMAGE_CERT_DIR")),
            format!("mountPath: {}", value("IMAGE_CERT_DIR")),
        ] {
            assert!(text.contains(&wanted), "{file} lacks {wanted:?}");
        }
    }
    assert!(
        read("charts/kruise-admission/templates/deployment.yaml")
            .contains(&format!("--cluster-dir={}", value("IMAGE_CLUSTER_DIR"))),
        "the chart mounts its cluster folder elsewhere"
    );

    // .ci/image.sh builds from image.env rather than from values of its own.
    let script = read(".ci/image.sh");
    for wanted in
        [". ./image.env", "RUSTFLAGS=\"$IMAGE_RUSTFLAGS\"", "--user \"$IMAGE_USER\"", "--env \"$IMAGE_ENV\""]
    {
        assert!(script.contains(wanted), ".ci/image.sh lacks {wanted:?}");
    }
}

fn advisory_age(snapshot_date: &str, now_unix: i64) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot.txt");
    std::fs::write(&snapshot, format!("# rustsec/advisory-db 0123abcd {snapshot_date}\nserde\n")).unwrap();
    let output = Command::new("bash")
        .arg(repo().join(".ci/advisory-age.sh"))
        .arg(&snapshot)
        .env("ADVISORY_NOW", now_unix.to_string())
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "a stale snapshot warns, it does not fail the build");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn ci_warns_loudly_when_the_advisory_snapshot_is_older_than_30_days() {
    let taken = 1_755_757_720; // 2025-08-21T08:28:40+02:00
    let (out, err) = advisory_age("2025-08-21T08:28:40+02:00", taken + 45 * 86_400);
    assert!(out.contains("::warning") && out.contains("45 days old"), "{out}");
    assert!(
        err.contains("WARNING")
            && err.contains("deny/refresh-advisories.sh")
            && err.contains("git add deny/advisories"),
        "{err}"
    );
    let (out, err) = advisory_age("2025-08-21T08:28:40+02:00", taken + 10 * 86_400);
    assert!(out.contains("10 days old") && !out.contains("warning") && err.is_empty(), "{out}{err}");
    // deny.sh runs it on the snapshot path.
    assert!(read(".ci/deny.sh").contains(".ci/advisory-age.sh \"$snapshot/snapshot.txt\""));
}

#[test]
fn both_crate_roots_forbid_unsafe_code() {
    for root in ["src/lib.rs", "src/main.rs"] {
        let text = read(root);
        assert!(
            text.lines().any(|l| l.trim() == "#![forbid(unsafe_code)]"),
            "{root} does not forbid unsafe code"
        );
    }
}
