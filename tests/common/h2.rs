//! Raw HTTP/2 over the test client's TLS: frames written by hand (what a hostile or unusual client
//! sends) and the server's frames read back, acknowledging its SETTINGS and PINGs as a real client
//! does (hyper's graceful close waits for a PING round trip after its first GOAWAY).

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::client::{Proto, TlsClient};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const END_STREAM: u8 = 1;
pub const ACK: u8 = 1;
pub const END_HEADERS: u8 = 4;
pub const NO_ERROR: u32 = 0;

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// HPACK (static table, literals without indexing) for `<method> https://localhost<path>` with
/// a `content-type`. `method_index`: 3 for POST (`0x83`), 2 for GET.
pub fn headers_for(method_index: u8, path: &str, content_type: &str) -> Vec<u8> {
    let mut h = vec![0x80 | method_index, 0x87, 0x04, path.len() as u8];
    h.extend_from_slice(path.as_bytes());
    h.extend_from_slice(&[0x01, 9]);
    h.extend_from_slice(b"localhost");
    h.extend_from_slice(&[0x0F, 0x10, content_type.len() as u8]);
    h.extend_from_slice(content_type.as_bytes());
    h
}

/// `POST https://localhost/mutate-pod`, `content-type: application/json`.
pub fn request_headers() -> Vec<u8> {
    headers_for(3, "/mutate-pod", "application/json")
}

/// One frame the server sent.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn goaway_code(&self) -> Option<u32> {
        (self.kind == GOAWAY && self.payload.len() >= 8)
            .then(|| u32::from_be_bytes(self.payload[4..8].try_into().unwrap()))
    }

    pub fn rst_code(&self) -> Option<u32> {
        (self.kind == RST_STREAM && self.payload.len() == 4)
            .then(|| u32::from_be_bytes(self.payload[..4].try_into().unwrap()))
    }
}

/// Open a raw HTTP/2 connection, write each step's bytes then wait its pause, and listen for
/// `listen` in all: the server's frames and whether it closed the connection.
pub async fn session(
    client: &TlsClient,
    steps: Vec<(Vec<u8>, Duration)>,
    listen: Duration,
) -> (Vec<Frame>, bool) {
    let Ok(tls) = client.connect_raw(Proto::Http2).await else { return (Vec::new(), true) };
    let (mut reader, mut writer) = tokio::io::split(tls);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer_task = tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                return;
            }
        }
    });
    let mut start = PREFACE.to_vec();
    start.extend_from_slice(&frame(SETTINGS, 0, 0, &[]));
    let _ = tx.send(start);
    let steps_tx = tx.clone();
    let steps_task = tokio::spawn(async move {
        for (bytes, pause) in steps {
            if steps_tx.send(bytes).is_err() {
                return;
            }
            tokio::time::sleep(pause).await;
        }
    });
    let deadline = Instant::now() + listen;
    let (mut pending, mut frames, mut closed) = (Vec::new(), Vec::new(), false);
    let mut buf = [0u8; 16 * 1024];
    while let Ok(read) =
        tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), reader.read(&mut buf)).await
    {
        let n = match read {
            Ok(0) | Err(_) => {
                closed = true;
                break;
            }
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while pending.len() >= 9 {
            let len = u32::from_be_bytes([0, pending[0], pending[1], pending[2]]) as usize;
            if pending.len() < 9 + len {
                break;
            }
            let stream = u32::from_be_bytes(pending[5..9].try_into().unwrap()) & 0x7FFF_FFFF;
            let f =
                Frame { kind: pending[3], flags: pending[4], stream, payload: pending[9..9 + len].to_vec() };
            match f.kind {
                SETTINGS if f.flags & ACK == 0 => drop(tx.send(frame(SETTINGS, ACK, 0, &[]))),
                PING if f.flags & ACK == 0 => drop(tx.send(frame(PING, ACK, 0, &f.payload))),
                _ => {}
            }
            frames.push(f);
            pending.drain(..9 + len);
        }
    }
    steps_task.abort();
    writer_task.abort();
    (frames, closed)
}
