//! What `kruise-admission --version` shows besides the version: the commit and the build date.
//!
//! - The commit: `KRUISE_ADMISSION_REVISION` when set (the Dockerfile passes its `REVISION` build
//!   argument, as its build context has no `.git`), else `git rev-parse --short=12 HEAD`, else
//!   `unknown`.
//! - The build date: `SOURCE_DATE_EPOCH` when set (the reproducible-builds convention), else the
//!   commit's date, else `unknown`. Never the wall clock, so the same commit builds the same binary.

use std::process::Command;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

fn main() {
    println!("cargo:rerun-if-env-changed=KRUISE_ADMISSION_REVISION");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // A new commit (HEAD moves, or the branch it names does: a file under refs/heads, or
    // packed-refs) changes both values. Only paths that exist: cargo reruns a build script on
    // every build while one it watches is missing.
    for path in ["HEAD", "packed-refs", "refs/heads"] {
        if let Some(file) =
            git(&["rev-parse", "--git-path", path]).filter(|f| std::path::Path::new(f).exists())
        {
            println!("cargo:rerun-if-changed={file}");
        }
    }

    let revision = std::env::var("KRUISE_ADMISSION_REVISION")
        .ok()
        .map(|r| r.trim().chars().take(12).collect::<String>())
        .filter(|r| !r.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    let epoch = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| git(&["log", "-1", "--format=%ct"]));
    let date = epoch
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| OffsetDateTime::from_unix_timestamp(secs).ok())
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=KRUISE_ADMISSION_REVISION={revision}");
    println!("cargo:rustc-env=KRUISE_ADMISSION_BUILD_DATE={date}");
}

/// `git ARGS` in the package's folder, its trimmed output; `None` outside a checkout or without git.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}
