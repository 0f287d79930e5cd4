//! Splitting a streaming response body into newline-terminated lines, with a
//! client-side idle timeout.
//!
//! The body is drained by a task of its own into a bounded channel: the
//! connection keeps reading while the reflector decodes and queues, instead
//! of one chunk per round trip between the two.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use kube::client::Body;
use tokio::sync::mpsc;

/// Chunks read ahead of the line splitter.
const READ_AHEAD_CHUNKS: usize = 256;

use crate::error::ReflectorError;

/// Yields the lines of a watch body (without the newline; empty lines skipped).
pub struct Lines {
    chunks: mpsc::Receiver<Result<Bytes, String>>,
    /// The task draining the body; aborted (closing the connection's
    /// stream) when the lines are dropped.
    reader: tokio::task::AbortHandle,
    buf: BytesMut,
    idle: Duration,
    done: bool,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
}

impl Lines {
    /// Lines of `body`; waiting longer than `idle` for data is an error.
    /// Must be called within a tokio runtime (the reading task is spawned
    /// on it).
    pub fn new(body: Body, idle: Duration) -> Self {
        let (tx, chunks) = mpsc::channel(READ_AHEAD_CHUNKS);
        let reader = tokio::spawn(read_chunks(body, tx)).abort_handle();
        Self {
            chunks,
            reader,
            buf: BytesMut::new(),
            idle,
            done: false,
            scanned: 0,
        }
    }

    /// The next line; `Ok(None)` at a clean end of stream.
    pub async fn next_line(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        loop {
            if let Some(off) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let pos = self.scanned + off;
                self.scanned = 0;
                let mut line = self.buf.split_to(pos + 1);
                line.truncate(pos);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line.freeze()));
            }
            self.scanned = self.buf.len();
            if self.done {
                if self.buf.iter().all(u8::is_ascii_whitespace) {
                    self.buf.clear();
                    self.scanned = 0;
                    return Ok(None);
                }
                self.buf.clear();
                self.scanned = 0;
                return Err(ReflectorError::TruncatedEvent);
            }
            match tokio::time::timeout(self.idle, self.chunks.recv()).await {
                Err(_) => return Err(ReflectorError::IdleTimeout(self.idle)),
                Ok(None) => self.done = true,
                Ok(Some(Err(e))) => {
                    self.done = true;
                    return Err(ReflectorError::Body(e));
                }
                Ok(Some(Ok(data))) => self.buf.extend_from_slice(&data),
            }
        }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Reads `body` into `tx` until it ends, fails, or the [`Lines`] is dropped.
async fn read_chunks(mut body: Body, tx: mpsc::Sender<Result<Bytes, String>>) {
    loop {
        let item = match body.frame().await {
            None => return,
            Some(Err(e)) => Err(e.to_string()),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(mut data) => Ok(data.copy_to_bytes(data.remaining())),
                Err(_) => continue,
            },
        };
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            return;
        }
    }
}
