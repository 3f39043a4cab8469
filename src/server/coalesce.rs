//! Answers of one HTTP/2 connection written to the socket together.
//!
//! hyper runs each HTTP/2 stream as a task of its own, and the connection's task flushes its frames
//! as soon as a stream hands it an answer: with many reviews in flight on one connection (how the
//! API server calls a webhook under load), every answer was its own TLS record and its own `writev`,
//! and the kernel's loopback or network send path was a fifth of a review's CPU. [`Coalesce`] holds
//! what is written, up to [`HELD_BYTES`] (one TLS record's worth), and on the first flush after a
//! write yields once to the scheduler: the stream tasks that are ready meanwhile finish their
//! answers, and the next flush writes them all in one record and one system call. With nothing else
//! ready, the yield costs one trip through the scheduler.
//!
//! Only HTTP/2 connections are wrapped (ALPN `h2`): an HTTP/1.1 connection has one answer in
//! flight, with nothing to wait for.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The most a connection holds before writing: the largest TLS record's plaintext.
pub const HELD_BYTES: usize = 16 << 10;

pub struct Coalesce<I> {
    inner: I,
    /// Off: every call goes straight to `inner`.
    on: bool,
    held: Vec<u8>,
    /// The current flush has yielded once already.
    yielded: bool,
}

impl<I> Coalesce<I> {
    pub fn new(inner: I, on: bool) -> Self {
        Coalesce { inner, on, held: Vec::new(), yielded: false }
    }
}

impl<I: AsyncWrite + Unpin> Coalesce<I> {
    /// Write everything held to `inner`.
    fn poll_write_held(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while !self.held.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.held))?;
            if n == 0 {
                return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
            }
            self.held.drain(..n);
        }
        // Give the capacity back after a large burst; a connection keeps at most one record's worth.
        if self.held.capacity() > HELD_BYTES {
            self.held = Vec::new();
        }
        Poll::Ready(Ok(()))
    }

    /// Hold `bufs`, after writing out what is held when they would not fit beside it; a record's
    /// worth or more on its own goes straight to `inner`.
    fn poll_hold(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if self.held.len() + total > HELD_BYTES {
            ready!(self.poll_write_held(cx))?;
            if total >= HELD_BYTES {
                return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
            }
        }
        for buf in bufs {
            self.held.extend_from_slice(buf);
        }
        Poll::Ready(Ok(total))
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Coalesce<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Coalesce<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if !self.on {
            return Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        self.poll_hold(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        if !self.on {
            return Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        }
        self.poll_hold(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.on || self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.on && !this.held.is_empty() && !this.yielded {
            // Woken while running, a tokio task goes to the back of the run queue: the tasks
            // already ready run first.
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(this.poll_write_held(cx))?;
        this.yielded = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.poll_write_held(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn writes_wait_for_a_flush_and_go_out_together() {
        let (near, mut far) = tokio::io::duplex(1 << 20);
        let mut io = Coalesce::new(near, true);
        io.write_all(b"one ").await.unwrap();
        io.write_all(b"two").await.unwrap();
        let mut got = [0u8; 16];
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), far.read(&mut got)).await;
        assert!(nothing.is_err(), "nothing is written before a flush");
        io.flush().await.unwrap();
        let n = far.read(&mut got).await.unwrap();
        assert_eq!(&got[..n], b"one two");
    }

    #[tokio::test]
    async fn more_than_a_record_is_written_without_a_flush_and_in_order() {
        let (near, mut far) = tokio::io::duplex(1 << 20);
        let mut io = Coalesce::new(near, true);
        let small = vec![b'a'; 100];
        let large = vec![b'b'; HELD_BYTES * 2];
        io.write_all(&small).await.unwrap();
        io.write_all(&large).await.unwrap();
        io.write_all(b"end").await.unwrap();
        io.shutdown().await.unwrap();
        let mut got = Vec::new();
        far.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, [small, large, b"end".to_vec()].concat());
    }

    #[tokio::test]
    async fn a_slow_reader_holds_back_at_most_one_record() {
        // The far side reads nothing: writes stop once the pipe and one record's worth are full.
        let (near, _far) = tokio::io::duplex(1024);
        let mut io = Coalesce::new(near, true);
        let written: Result<(), _> = tokio::time::timeout(std::time::Duration::from_millis(100), async {
            loop {
                io.write_all(&[0u8; 512]).await.unwrap();
            }
        })
        .await;
        assert!(written.is_err(), "writing never blocked");
        assert!(io.held.len() <= HELD_BYTES, "{} bytes held", io.held.len());
    }
}
