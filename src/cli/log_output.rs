//! Where `serve`'s log lines go: standard error, INFO and below in batches, WARN and ERROR at once.
//!
//! An unbuffered stderr costs one `write` per line, and with a line per review that system call
//! was a fifth of a review's CPU at 10 SidecarSets (and, in a Pod, a wake-up of the container
//! runtime's log reader per line). INFO and below are appended to a buffer instead, written when it
//! reaches [`BATCH_BYTES`], by a thread every [`BATCH_INTERVAL`], and when the server exits. A WARN or
//! ERROR line is written at once, after whatever was buffered before it, so lines keep their order and
//! the lines that need attention are never late: a process killed outright loses at most the last
//! [`BATCH_INTERVAL`] of INFO lines.

use std::io::{self, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// How much INFO output is held before it is written.
pub const BATCH_BYTES: usize = 64 << 10;
/// How long an INFO line may wait in the buffer.
pub const BATCH_INTERVAL: Duration = Duration::from_millis(100);

/// The buffered lines and where they go, under one lock: whoever writes out holds it, so two
/// threads cannot write their batches in the wrong order.
struct Batch {
    held: Vec<u8>,
    sink: Box<dyn Write + Send>,
}

impl Batch {
    fn write_out(&mut self, then: &[u8]) {
        if !self.held.is_empty() {
            // A log that cannot be written has nowhere to report it: the line is dropped, as
            // tracing-subscriber's own writer does.
            let _ = self.sink.write_all(&self.held);
            self.held.clear();
        }
        if !then.is_empty() {
            let _ = self.sink.write_all(then);
        }
        let _ = self.sink.flush();
    }
}

/// The [`MakeWriter`] of `serve`'s subscriber; clones share one buffer.
#[derive(Clone)]
pub struct BatchedLog {
    batch: Arc<Mutex<Batch>>,
}

impl BatchedLog {
    /// Lines for `sink`; nothing writes the buffer out on a timer until [`BatchedLog::flush_every`].
    pub fn new(sink: impl Write + Send + 'static) -> Self {
        let batch = Batch { held: Vec::with_capacity(BATCH_BYTES), sink: Box::new(sink) };
        BatchedLog { batch: Arc::new(Mutex::new(batch)) }
    }

    /// Write out what is buffered.
    pub fn flush(&self) {
        self.lock().write_out(&[]);
    }

    /// A thread that writes the buffer out every `interval`, for the life of the process.
    pub fn flush_every(&self, interval: Duration) -> io::Result<()> {
        let log = self.clone();
        std::thread::Builder::new().name("log-flush".into()).spawn(move || {
            loop {
                std::thread::sleep(interval);
                log.flush();
            }
        })?;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Batch> {
        // A panic while the lock was held left at worst a partly written buffer: keep logging.
        self.batch.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One event's writer: tracing-subscriber formats a whole line, then writes it here.
pub struct LineWriter<'a> {
    log: &'a BatchedLog,
    at_once: bool,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut batch = self.log.lock();
        if self.at_once || batch.held.len() + bytes.len() > BATCH_BYTES {
            batch.write_out(bytes);
        } else {
            batch.held.extend_from_slice(bytes);
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for BatchedLog {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { log: self, at_once: true }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Self::Writer {
        // `Level` orders by verbosity: WARN and ERROR are the least verbose.
        LineWriter { log: self, at_once: *meta.level() <= Level::WARN }
    }
}

/// Writes the buffer out when `serve` returns, however it returns.
pub struct FlushOnDrop(pub BatchedLog);

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        self.0.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink the test can read.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn logged(log: &BatchedLog, body: impl FnOnce()) {
        let subscriber =
            tracing_subscriber::fmt().with_writer(log.clone()).with_ansi(false).without_time().finish();
        tracing::subscriber::with_default(subscriber, body);
    }

    #[test]
    fn info_lines_wait_for_a_flush_and_a_warning_writes_them_first() {
        let sink = Shared::default();
        let log = BatchedLog::new(sink.clone());
        logged(&log, || {
            tracing::info!("first");
            tracing::info!("second");
        });
        assert_eq!(sink.text(), "", "INFO lines are held");
        logged(&log, || tracing::warn!("third"));
        let text = sink.text();
        let order: Vec<_> = ["first", "second", "third"].iter().map(|m| text.find(m).unwrap()).collect();
        assert!(order.is_sorted(), "{text}");
        logged(&log, || tracing::info!("fourth"));
        assert!(!sink.text().contains("fourth"));
        log.flush();
        assert!(sink.text().contains("fourth"));
    }

    #[test]
    fn a_full_buffer_is_written_without_waiting() {
        let sink = Shared::default();
        let log = BatchedLog::new(sink.clone());
        let long = "x".repeat(1000);
        logged(&log, || {
            for _ in 0..(BATCH_BYTES / 1000 + 1) {
                tracing::info!(%long, "line");
            }
        });
        let written = sink.text().lines().count();
        assert!(written >= BATCH_BYTES / 1100, "{written} lines written");
    }

    #[test]
    fn the_timer_and_the_drop_write_the_buffer_out() {
        let sink = Shared::default();
        let log = BatchedLog::new(sink.clone());
        log.flush_every(Duration::from_millis(10)).unwrap();
        logged(&log, || tracing::info!("timed"));
        let waited = std::time::Instant::now();
        while !sink.text().contains("timed") {
            assert!(waited.elapsed() < Duration::from_secs(10), "the timer never wrote the line out");
            std::thread::sleep(Duration::from_millis(5));
        }
        let sink = Shared::default();
        let log = BatchedLog::new(sink.clone());
        logged(&log, || tracing::info!("dropped"));
        drop(FlushOnDrop(log));
        assert!(sink.text().contains("dropped"));
    }
}
