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
    split: Splitter,
    idle: Duration,
    done: bool,
}

impl Lines {
    /// Starts draining `body`; each [`next_line`](Self::next_line) waits at
    /// most `idle` for more bytes (longer is an error). Must be called
    /// within a tokio runtime (the reading task is spawned on it).
    pub fn new(body: Body, idle: Duration) -> Self {
        let (tx, chunks) = mpsc::channel(READ_AHEAD_CHUNKS);
        let reader = tokio::spawn(read_chunks(body, tx)).abort_handle();
        Self {
            chunks,
            reader,
            split: Splitter::default(),
            idle,
            done: false,
        }
    }

    /// The next non-empty line; `None` at a clean end of the body.
    pub async fn next_line(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        loop {
            if let Some(line) = self.split.next_line() {
                return Ok(Some(line));
            }
            if self.done {
                return match self.split.finish() {
                    true => Ok(None),
                    false => Err(ReflectorError::TruncatedEvent),
                };
            }
            match tokio::time::timeout(self.idle, self.chunks.recv()).await {
                Err(_) => return Err(ReflectorError::IdleTimeout(self.idle)),
                Ok(None) => self.done = true,
                Ok(Some(Err(e))) => {
                    self.done = true;
                    return Err(ReflectorError::Body(e));
                }
                Ok(Some(Ok(data))) => self.split.push(data),
            }
        }
    }
}

/// Cuts chunks of a body into lines. A line that lies within one chunk is
/// a slice of it (no copy), so the chunk's memory lives until its last
/// line is decoded and dropped; only a line that spans chunks is copied
/// together.
#[derive(Default)]
struct Splitter {
    /// The start of a line whose end has not arrived.
    partial: BytesMut,
    /// What is left of the last chunk pushed.
    chunk: Bytes,
}

impl Splitter {
    fn push(&mut self, chunk: Bytes) {
        let rest = std::mem::replace(&mut self.chunk, chunk);
        self.partial.extend_from_slice(&rest);
    }

    /// The next non-empty line of what was pushed.
    fn next_line(&mut self) -> Option<Bytes> {
        loop {
            let Some(at) = memchr::memchr(b'\n', &self.chunk) else {
                // No end here: keep the start for the next chunk.
                let rest = std::mem::take(&mut self.chunk);
                self.partial.extend_from_slice(&rest);
                return None;
            };
            let mut line = self.chunk.split_to(at + 1);
            line.truncate(at);
            if !self.partial.is_empty() {
                self.partial.extend_from_slice(&line);
                line = self.partial.split().freeze();
            }
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Some(line);
            }
        }
    }

    /// At the body's end: whether all that was left is whitespace (else an
    /// event was cut off). Clears what was left.
    fn finish(&mut self) -> bool {
        let clean = self
            .partial
            .iter()
            .chain(self.chunk.iter())
            .all(u8::is_ascii_whitespace);
        self.partial.clear();
        self.chunk.clear();
        clean
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn lines_do_not_depend_on_where_chunks_end(
            body in prop::collection::vec(prop::sample::select(b"ab \n{}".to_vec()), 0..200),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            at.push(0);
            at.push(body.len());
            at.sort_unstable();
            let mut split = Splitter::default();
            let mut got = Vec::new();
            for w in at.windows(2) {
                split.push(Bytes::copy_from_slice(&body[w[0]..w[1]]));
                while let Some(line) = split.next_line() {
                    got.push(line.to_vec());
                }
            }
            let expected: Vec<Vec<u8>> = body
                .split(|&b| b == b'\n')
                .map(<[u8]>::to_vec)
                .collect();
            // The last piece has no newline: it is what `finish` judges.
            let (tail, whole) = expected.split_last().unwrap();
            let whole: Vec<Vec<u8>> = whole
                .iter()
                .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
                .cloned()
                .collect();
            prop_assert_eq!(got, whole);
            prop_assert_eq!(split.finish(), tail.iter().all(u8::is_ascii_whitespace));
        }
    }
}
