//! Issue 30.4: a caller can neither forge log lines nor flood the log. The `serve` binary runs as a
//! child process (its log is its stderr); every request goes to 127.0.0.x.

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::client::{Proto, TlsClient};
use common::serve_process::{BIN, Serve, addr, cluster_folder};
use hyper::{Method, StatusCode};
use serde_json::json;

/// A `serve --log-format text` process and its stderr lines; killed when dropped.
struct TextServe {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for TextServe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TextServe {
    fn start(dir: &std::path::Path) -> TextServe {
        let cluster = cluster_folder(dir);
        // `serve_process::command`'s flags, but text logs.
        let mut child = Command::new(BIN)
            .current_dir(dir)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "127.0.0.1:0",
                "--log-format",
                "text",
            ])
            .args(["--cluster-dir", cluster.to_str().unwrap()])
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve");
        let stderr = child.stderr.take().expect("stderr");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            // Split on '\n' only: a forged line is whatever follows a raw newline.
            for line in BufReader::new(stderr).split(b'\n').map_while(Result::ok) {
                if send.send(String::from_utf8_lossy(&line).into_owned()).is_err() {
                    return;
                }
            }
        });
        TextServe { child, lines }
    }

    /// Lines up to and including the first that contains `text`.
    fn until(&self, text: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no line with {text:?} in {seen:#?}"));
            let done = line.contains(text);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

/// The value of `key=` in a text log line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    let at = line.find(&format!("{key}=")).unwrap_or_else(|| panic!("no {key}= in {line}"));
    line[at + key.len() + 1..].split_whitespace().next().unwrap_or_default()
}

/// Before: `--log-format text` wrote a request's uid and name as they came, so a newline in them
/// started a line of the caller's choosing (2 reviews gave 4 forged lines), and terminal escapes
/// went to the operator's terminal. Now every control character of a field is escaped: each
/// review is one line, and no line but the server's own starts with the forged text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_escape_what_the_request_controls() {
    let dir = tempfile::tempdir().unwrap();
    let serve = TextServe::start(dir.path());
    let ready = serve.until("kruise-admission ready to serve").pop().unwrap();
    let https = field(&ready, "https").parse().expect("address");
    let client = TlsClient::new(https, &std::fs::read(dir.path().join("certs/ca.crt")).unwrap());
    let forged =
        "\n2026-01-01T00:00:00.000000Z  INFO kruise_admission: FORGED allowed=true\r\x1b]0;owned\x07";
    for i in 0..2 {
        let mut review = common::good_review(&format!("u{i}{forged}"));
        review["request"]["name"] = json!(format!("p{i}{forged}"));
        review["request"]["object"]["metadata"]["name"] = json!(format!("p{i}{forged}"));
        let reply = client.post_json(Proto::Http1, "/mutate-pod", review.to_string()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", String::from_utf8_lossy(&reply.body));
    }
    let mut lines = serve.until("u0");
    lines.extend(serve.until("u1"));
    // A last, ordinary review: every line the two wrote is read by the time its line comes.
    let reply = client.post_json(Proto::Http1, "/mutate-pod", common::good_review("last").to_string()).await;
    assert_eq!(reply.status, StatusCode::OK);
    lines.extend(serve.until("uid=last"));
    let forged_lines: Vec<&String> = lines.iter().filter(|l| l.starts_with("2026-01-01")).collect();
    assert!(forged_lines.is_empty(), "forged lines: {forged_lines:#?}");
    for line in &lines {
        assert!(!line.chars().any(|c| c.is_control()), "a control character reached the log: {line:?}");
    }
    let reviews: Vec<&String> = lines.iter().filter(|l| l.contains("FORGED")).collect();
    assert_eq!(reviews.len(), 2, "one line per review: {lines:#?}");
    assert!(reviews[0].contains(r"u0\n2026-01-01"), "{}", reviews[0]);
}

/// Before: every refused request was a WARN line, so a caller could write as many lines as it sent
/// requests. Now refusals are summarised per peer: the first of an interval is logged, the rest
/// only counted (in the peer's next line and in `kruise_admission_http_errors_total`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_summarised_per_peer() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_folder(dir.path());
    let serve = Serve::start(dir.path(), &["--cluster-dir", cluster.to_str().unwrap()]);
    let ready = serve.until("kruise-admission ready to serve").pop().unwrap();
    let ca = std::fs::read(dir.path().join("certs/ca.crt")).unwrap();
    let client = TlsClient::new(addr(&ready, "https"), &ca).with_source([127, 0, 0, 21].into());
    let mut conn = client.connect(Proto::Http1).await.unwrap();
    let started = Instant::now();
    let mut sent = 0;
    while sent < 200 && started.elapsed() < Duration::from_secs(5) {
        let reply = conn.request(Method::GET, "/mutate-pod", None, bytes::Bytes::new()).await.unwrap();
        assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
        sent += 1;
    }
    let good = client.post_json(Proto::Http1, "/mutate-pod", common::good_review("after").to_string()).await;
    assert_eq!(good.status, StatusCode::OK);
    let lines = serve.until("admission review");
    let refused = lines.iter().filter(|l| l["message"] == "request refused").count();
    assert!(sent >= 20, "only {sent} refusals sent");
    assert!(refused <= 2, "{refused} WARN lines for {sent} refusals");
}
