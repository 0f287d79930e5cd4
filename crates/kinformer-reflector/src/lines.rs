//! Splitting a streaming response body into newline-terminated lines, with a
//! client-side idle timeout.

use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::BodyExt;
use kube::client::Body;

use crate::error::ReflectorError;

/// Yields the lines of a watch body (without the newline; empty lines skipped).
pub struct Lines {
    body: Body,
    buf: BytesMut,
    idle: Duration,
    done: bool,
    /// Bytes of `buf` already searched for a newline.
    scanned: usize,
}

impl Lines {
    /// Lines of `body`; waiting longer than `idle` for data is an error.
    pub fn new(body: Body, idle: Duration) -> Self {
        Self {
            body,
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
            match tokio::time::timeout(self.idle, self.body.frame()).await {
                Err(_) => return Err(ReflectorError::IdleTimeout(self.idle)),
                Ok(None) => self.done = true,
                Ok(Some(Err(e))) => {
                    self.done = true;
                    return Err(ReflectorError::Body(e.to_string()));
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(mut data) = frame.into_data() {
                        while data.has_remaining() {
                            let chunk = data.chunk();
                            let n = chunk.len();
                            self.buf.extend_from_slice(chunk);
                            data.advance(n);
                        }
                    }
                }
            }
        }
    }
}
