//! The `kruise-admission serve` binary as a child process, with its JSON log lines.

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_kruise-admission");

/// A `serve` process and its JSON log lines; killed when dropped.
pub struct Serve {
    pub child: Child,
    lines: mpsc::Receiver<Value>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// `serve` on loopback ports in `dir`, with `args` after the addresses.
    pub fn start(dir: &Path, args: &[&str]) -> Serve {
        Self::spawn(command(dir, None).args(args))
    }

    /// As [`Serve::start`], with the process's open-file limit (`ulimit -n`) lowered to
    /// `max_open_files` when given, so a test can show what exhausts it.
    pub fn start_limited(dir: &Path, max_open_files: Option<u32>, args: &[&str]) -> Serve {
        Self::spawn(command(dir, max_open_files).args(args))
    }

    /// Start `command` (one from [`command`], with whatever else the test needs) and read its
    /// stderr as JSON log lines.
    pub fn spawn(command: &mut Command) -> Serve {
        let mut child = command.stderr(Stdio::piped()).spawn().expect("start serve");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let event = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("log line is not JSON ({e}): {line}"));
                if send.send(event).is_err() {
                    return;
                }
            }
        });
        Serve { child, lines }
    }

    /// Log lines up to and including the first whose message is `message`.
    pub fn until(&self, message: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let event = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no {message:?} in {seen:#?}"));
            let done = event["message"] == message;
            seen.push(event);
            if done {
                return seen;
            }
        }
    }
}

/// `serve` listening on 127.0.0.1 (ephemeral ports), logging JSON at `info`, run in `dir`; with the
/// open-file limit (`ulimit -n`) lowered to `max_open_files` when given. Callers add the rest.
pub fn command(dir: &Path, max_open_files: Option<u32>) -> Command {
    super::raise_open_file_limit();
    let mut command = match max_open_files {
        None => Command::new(BIN),
        Some(n) => {
            // `exec` keeps the pid: killing the child kills the server.
            let mut sh = Command::new("sh");
            sh.args(["-c", r#"ulimit -n "$0" && exec "$@""#, &n.to_string(), BIN]);
            sh
        }
    };
    command
        .current_dir(dir)
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--log-format", "json"])
        .env("RUST_LOG", "info");
    command
}

/// A cluster folder `dir/cluster` holding the `default` Namespace, for `--cluster-dir`.
pub fn cluster_folder(dir: &Path) -> PathBuf {
    let cluster = dir.join("cluster");
    std::fs::create_dir(&cluster).expect("cluster folder");
    std::fs::write(cluster.join("ns.yaml"), "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n")
        .expect("write the Namespace");
    cluster
}

/// An address field of a log line (`https`, `metrics`).
pub fn addr(event: &Value, field: &str) -> SocketAddr {
    event[field].as_str().unwrap_or_else(|| panic!("{field} missing from {event}")).parse().expect("address")
}
