//! Refused requests that carry a body, over HTTP/2 (what kube-apiserver speaks): the client gets
//! the JSON error response, not a stream reset, also when the body is still being sent when the
//! server decides to refuse (issue 17.8). Raw frames, because hyper's own client ignores the
//! RST_STREAM(NO_ERROR) that followed such a response, while curl reported `Stream error in the
//! HTTP/2 framing layer` for about half of them.

use crate::common;

use std::time::Duration;

use common::h2::{self, DATA, END_HEADERS, END_STREAM, HEADERS, headers_for};
use common::server::TestServer;

/// (HPACK method index, path, content type, what the JSON error says): 404, 415, 405.
const CASES: [(u8, &str, &str, &str); 3] = [
    (3, "/no-such-webhook", "application/json", "no webhook is served"),
    (3, "/mutate-pod", "text/plain", "Content-Type must be application/json"),
    (2, "/mutate-pod", "application/json", "accepts POST only"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_http2_request_still_sending_its_body_gets_the_json_error_not_a_reset() {
    let server = TestServer::start().await;
    let client = server.client();
    let body = common::good_review("refused").to_string().into_bytes();
    let (head, tail) = body.split_at(body.len() / 2);
    for (method, path, content_type, message) in CASES {
        // Headers and 48 KiB of body (within the 64 KiB window); the rest 300 ms later, after the
        // server has decided to refuse.
        let mut start = h2::frame(HEADERS, END_HEADERS, 1, &headers_for(method, path, content_type));
        start.extend_from_slice(&h2::frame(DATA, 0, 1, head));
        for _ in 0..3 {
            start.extend_from_slice(&h2::frame(DATA, 0, 1, &[b' '; 16_000]));
        }
        let steps =
            vec![(start, Duration::from_millis(300)), (h2::frame(DATA, END_STREAM, 1, tail), Duration::ZERO)];
        let (frames, _) = h2::session(&client, steps, Duration::from_secs(2)).await;
        let on_stream: Vec<&h2::Frame> = frames.iter().filter(|f| f.stream == 1).collect();
        // RST_STREAM(NO_ERROR) after the response is legal HTTP/2, but curl reports it as a
        // stream error about half the time: the server must read the body and end the stream.
        let resets: Vec<u32> = on_stream.iter().filter_map(|f| f.rst_code()).collect();
        assert!(resets.is_empty(), "{path} ({content_type}): stream reset with {resets:?}: {on_stream:?}");
        assert!(on_stream.iter().any(|f| f.kind == HEADERS), "{path}: no response: {on_stream:?}");
        let data: Vec<u8> =
            on_stream.iter().filter(|f| f.kind == DATA).flat_map(|f| f.payload.clone()).collect();
        let json: serde_json::Value =
            serde_json::from_slice(&data).unwrap_or_else(|e| panic!("{path}: body not JSON ({e})"));
        assert!(json["error"].as_str().is_some_and(|e| e.contains(message)), "{path}: {json}");
        assert!(
            on_stream.iter().any(|f| f.kind == DATA && f.flags & END_STREAM != 0),
            "{path}: the response ends normally"
        );
    }
    server.stop().await.unwrap();
}
