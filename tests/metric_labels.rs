//! Hostile load, issue 17.2: a client cannot grow the metrics. Label values come from the routing
//! table; a kind the table does not name is counted as `other`.

use crate::common;

use common::client::Proto;
use common::server::TestServer;
use hyper::StatusCode;
use serde_json::json;

/// A review `/mutate-pod` denies (400: the spec is not an object), claiming to be of `kind`.
fn denied_review(uid: &str, kind: &str) -> String {
    let mut review = common::good_review(uid);
    review["request"]["kind"] = json!({"group": "", "version": "v1", "kind": kind});
    review["request"]["object"]["spec"] = json!("not a spec");
    review.to_string()
}

/// The number of samples (series) on the metrics page.
fn series(page: &str) -> usize {
    page.lines().filter(|line| !line.is_empty() && !line.starts_with('#')).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_distinct_kinds_leave_the_series_count_unchanged() {
    const KINDS: usize = 10_000;
    const STREAMS: usize = 8;
    let server = TestServer::start().await;
    let client = server.client();
    let conn = client.connect(Proto::Http2).await.unwrap();
    // One denial of a known kind and one of an unknown kind create every series there will be.
    for (uid, kind) in [("warm-pod", "Pod"), ("warm-other", "Kind-warmup")] {
        let reply = client.post_json(Proto::Http2, "/mutate-pod", denied_review(uid, kind)).await;
        assert_eq!(reply.json()["response"]["allowed"], false, "{uid}");
    }
    let before = common::client::http_get(server.metrics, "/metrics").await.1;

    let tasks: Vec<_> = (0..STREAMS)
        .map(|stream| {
            let mut conn = conn.h2_stream().unwrap();
            tokio::spawn(async move {
                for i in (stream..KINDS).step_by(STREAMS) {
                    let body = denied_review(&format!("k{i}"), &format!("Kind{i}"));
                    let reply = conn
                        .request(hyper::Method::POST, "/mutate-pod", Some("application/json"), body.into())
                        .await
                        .unwrap();
                    assert_eq!(reply.status, StatusCode::OK);
                    assert_eq!(reply.json()["response"]["allowed"], false);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }

    let (status, after) = common::client::http_get(server.metrics, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(series(&after), series(&before), "new series appeared:\n{after}");
    assert!(!after.contains("Kind1"), "a client-chosen kind became a label value");
    for expected in [
        r#"kruise_admission_webhook_rejection_count{kind="Pod",name="mpod.kb.io",operation="CREATE",rejection_code="400",type="admit"} 1"#,
        r#"kruise_admission_webhook_rejection_count{kind="other",name="mpod.kb.io",operation="CREATE",rejection_code="400",type="admit"} 10001"#,
    ] {
        assert!(after.contains(expected), "{expected} missing from\n{after}");
    }
    server.stop().await.unwrap();
}
