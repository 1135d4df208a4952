//! Captures a plugin's stdout/stderr: keeps the first bytes, drops (and counts) the rest, never
//! fails the writer — a chatty plugin must not turn into a failing one.

use bytes::Bytes;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

/// A bounded in-memory sink shared by the stream handles the guest opens.
#[derive(Clone)]
pub struct Captured {
    inner: Arc<Mutex<Inner>>,
}

struct Inner {
    buf: Vec<u8>,
    cap: usize,
    dropped: usize,
}

impl Captured {
    /// A sink keeping at most `cap` bytes.
    pub fn new(cap: usize) -> Self {
        Captured { inner: Arc::new(Mutex::new(Inner { buf: Vec::new(), cap, dropped: 0 })) }
    }

    fn push(&self, bytes: &[u8]) {
        if let Ok(mut i) = self.inner.lock() {
            let room = i.cap.saturating_sub(i.buf.len());
            let take = room.min(bytes.len());
            i.buf.extend_from_slice(&bytes[..take]);
            i.dropped += bytes.len() - take;
        }
    }

    /// What was kept (lossy UTF-8) and how many bytes were dropped.
    pub fn take(&self) -> (String, usize) {
        match self.inner.lock() {
            Ok(mut i) => {
                let s = String::from_utf8_lossy(&i.buf).into_owned();
                i.buf.clear();
                (s, std::mem::take(&mut i.dropped))
            }
            Err(_) => (String::new(), 0),
        }
    }
}

impl IsTerminal for Captured {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Captured {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl Pollable for Captured {
    async fn ready(&mut self) {}
}

impl OutputStream for Captured {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

impl tokio::io::AsyncWrite for Captured {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
