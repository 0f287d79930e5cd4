//! Splitting a streaming response body into newline-terminated lines (or,
//! for a protobuf watch, length-prefixed frames: see [`Lines::frames`]),
//! with a client-side idle timeout.
//!
//! The body is drained by a task of its own into a bounded channel: the
//! connection keeps reading while the reflector decodes and queues, instead
//! of one chunk per round trip between the two. kube-apiserver writes a
//! watch event of 2 KiB or more as a chunk of its own, so the task sends
//! the chunks that are ready together, one message per run of them.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::sync::mpsc;

/// Runs of chunks read ahead of the line splitter.
const READ_AHEAD_RUNS: usize = 256;

/// A run of chunks ends after this many bytes or [`MAX_RUN_CHUNKS`] chunks
/// (or when no more are ready).
const MAX_RUN_BYTES: usize = 64 * 1024;

/// See [`MAX_RUN_BYTES`].
const MAX_RUN_CHUNKS: usize = 64;

/// A run of body chunks, then how the body went on.
type Run = (Vec<Bytes>, Option<Result<(), String>>);

use crate::error::ReflectorError;

/// Yields the lines of a watch body (without the newline; empty lines skipped).
pub struct Lines {
    runs: mpsc::Receiver<Run>,
    /// What is left of the last run received.
    pending: std::vec::IntoIter<Bytes>,
    /// How the body ended, once a run said so.
    ended: Option<Result<(), String>>,
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
    pub fn new<B>(body: B, idle: Duration) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        Self::start(body, idle, false)
    }

    /// As [`new`](Self::new), for a protobuf watch body: each "line" is
    /// one frame (the 4-byte length taken off; see
    /// [`crate::protobuf::next_frame`]).
    pub fn frames<B>(body: B, idle: Duration) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        Self::start(body, idle, true)
    }

    /// Whether these are protobuf frames rather than JSON lines.
    pub fn is_framed(&self) -> bool {
        self.split.framed
    }

    fn start<B>(body: B, idle: Duration, framed: bool) -> Self
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::fmt::Display + Send,
    {
        let (tx, runs) = mpsc::channel(READ_AHEAD_RUNS);
        let reader = tokio::spawn(read_chunks(body, tx)).abort_handle();
        Self {
            runs,
            pending: Vec::new().into_iter(),
            ended: None,
            reader,
            split: Splitter {
                framed,
                ..Splitter::default()
            },
            idle,
            done: false,
        }
    }

    /// The next non-empty line; `None` at a clean end of the body.
    pub async fn next_line(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        loop {
            if let Some(r) = self.try_next_line() {
                return r;
            }
            match tokio::time::timeout(self.idle, self.runs.recv()).await {
                Err(_) => return Err(ReflectorError::IdleTimeout(self.idle)),
                Ok(run) => self.take_run(run),
            }
        }
    }

    /// The next line if one has arrived, without waiting (and without
    /// arming the idle timer): `None` when the body has nothing ready.
    pub fn try_next_line(&mut self) -> Option<Result<Option<Bytes>, ReflectorError>> {
        loop {
            match self.split.next_record() {
                Ok(Some(line)) => return Some(Ok(Some(line))),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            if let Some(chunk) = self.pending.next() {
                self.split.push(chunk);
                continue;
            }
            if self.done {
                return Some(match self.split.finish() {
                    true => Ok(None),
                    false => Err(ReflectorError::TruncatedEvent),
                });
            }
            if let Some(end) = self.ended.take() {
                self.done = true;
                match end {
                    Ok(()) => continue,
                    Err(e) => return Some(Err(ReflectorError::Body(e))),
                }
            }
            match self.runs.try_recv() {
                Ok(run) => self.take_run(Some(run)),
                Err(mpsc::error::TryRecvError::Disconnected) => self.take_run(None),
                Err(mpsc::error::TryRecvError::Empty) => return None,
            }
        }
    }

    /// Takes the next run from the reading task (`None`: the task is gone).
    fn take_run(&mut self, run: Option<Run>) {
        match run {
            None => self.done = true,
            Some((chunks, end)) => {
                self.pending = chunks.into_iter();
                self.ended = end;
            }
        }
    }
}

/// Splits `body`, arriving in chunks cut at `cuts`, into lines (or frames
/// when `framed`) as [`Lines`] does: the number of records before the end
/// or the first error (the fuzz targets' entry, see `crate::fuzzing`).
#[cfg(fuzzing)]
pub(crate) fn split_all(body: &[u8], cuts: &[usize], framed: bool) -> usize {
    let mut split = Splitter {
        framed,
        ..Splitter::default()
    };
    let mut records = 0;
    let mut at = 0;
    for cut in cuts.iter().copied().chain([body.len()]) {
        let cut = cut.clamp(at, body.len());
        split.push(Bytes::copy_from_slice(&body[at..cut]));
        at = cut;
        loop {
            match split.next_record() {
                Ok(Some(_)) => records += 1,
                Ok(None) => break,
                Err(_) => return records,
            }
        }
    }
    split.finish();
    records
}

/// Cuts chunks of a body into lines (or frames). A line that lies within
/// one chunk is a slice of it (no copy), so the chunk's memory lives until
/// its last line is decoded and dropped; only a line that spans chunks is
/// copied together.
#[derive(Default)]
struct Splitter {
    /// Length-prefixed protobuf frames instead of lines.
    framed: bool,
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

    /// The next line or frame of what was pushed.
    fn next_record(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        if self.framed {
            self.next_frame()
        } else {
            Ok(self.next_line())
        }
    }

    /// The next whole frame: a slice of the chunk when it lies within it.
    fn next_frame(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        if self.partial.is_empty()
            && let Some(len) = self.chunk.get(..4)
        {
            let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if len <= crate::protobuf::MAX_FRAME && self.chunk.len() >= 4 + len {
                let mut frame = self.chunk.split_to(4 + len);
                frame.advance(4);
                return Ok(Some(frame));
            }
        }
        let rest = std::mem::take(&mut self.chunk);
        self.partial.extend_from_slice(&rest);
        crate::protobuf::next_frame(&mut self.partial).map_err(ReflectorError::from)
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
        let mut left = self.partial.iter().chain(self.chunk.iter());
        let clean = if self.framed {
            left.next().is_none()
        } else {
            left.all(u8::is_ascii_whitespace)
        };
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

/// Reads `body` into `tx` until it ends, fails, or the [`Lines`] is dropped,
/// one run of chunks at a time (see [`poll_run`]).
async fn read_chunks<B>(mut body: B, tx: mpsc::Sender<Run>)
where
    B: http_body::Body<Data = Bytes> + Send + Unpin,
    B::Error: std::fmt::Display + Send,
{
    loop {
        let mut chunks = Vec::new();
        let end = std::future::poll_fn(|cx| poll_run(&mut body, cx, &mut chunks)).await;
        let ended = end.is_some();
        if tx.send((chunks, end)).await.is_err() || ended {
            return;
        }
    }
}

/// Adds the chunks of `body` that are ready to `chunks`, up to a run's
/// limits; `Pending` only while `chunks` is empty. Ready with how the body
/// ended, if it did. The poll that finds nothing more ready has registered
/// the task's waker, so a run costs one `Pending` poll of the body.
fn poll_run<B>(
    body: &mut B,
    cx: &mut Context<'_>,
    chunks: &mut Vec<Bytes>,
) -> Poll<Option<Result<(), String>>>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut bytes = 0;
    loop {
        let frame = match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Pending if chunks.is_empty() => return Poll::Pending,
            Poll::Pending => return Poll::Ready(None),
            Poll::Ready(None) => return Poll::Ready(Some(Ok(()))),
            Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.to_string()))),
            Poll::Ready(Some(Ok(frame))) => frame,
        };
        if let Ok(mut data) = frame.into_data() {
            bytes += data.remaining();
            chunks.push(data.copy_to_bytes(data.remaining()));
        }
        if bytes >= MAX_RUN_BYTES || chunks.len() >= MAX_RUN_CHUNKS {
            return Poll::Ready(None);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use futures::StreamExt;
    use http_body_util::StreamBody;
    use proptest::prelude::*;
    use tokio_stream::wrappers::ReceiverStream;

    use super::*;

    /// `try_next_line` gives what has arrived and never waits: nothing
    /// before the first chunk, a line once its end is in, nothing for a
    /// line still open, and the clean end once the body has ended.
    #[tokio::test]
    async fn try_next_line_takes_only_what_has_arrived() {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = StreamBody::new(ReceiverStream::new(rx).map(|r| r.map(http_body::Frame::data)));
        let mut lines = Lines::new(body, Duration::from_secs(5));
        assert!(lines.try_next_line().is_none());
        tx.send(Ok(Bytes::from_static(b"a\nb"))).await.unwrap();
        let first = lines.next_line().await.unwrap();
        assert_eq!(first.as_deref(), Some(&b"a"[..]));
        assert!(lines.try_next_line().is_none(), "`b` has no end yet");
        tx.send(Ok(Bytes::from_static(b"\n"))).await.unwrap();
        drop(tx);
        let second = lines.next_line().await.unwrap();
        assert_eq!(second.as_deref(), Some(&b"b"[..]));
        assert!(lines.next_line().await.unwrap().is_none());
        assert!(matches!(lines.try_next_line(), Some(Ok(None))));
    }

    /// The lines that arrived before the body failed come first, then the
    /// failure (the unfinished line is dropped with it).
    #[tokio::test]
    async fn lines_before_a_body_error_come_first() {
        let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let body = StreamBody::new(ReceiverStream::new(rx).map(|r| r.map(http_body::Frame::data)));
        tx.send(Ok(Bytes::from_static(b"a\nb"))).await.unwrap();
        tx.send(Err(std::io::Error::other("reset"))).await.unwrap();
        drop(tx);
        let mut lines = Lines::new(body, Duration::from_secs(5));
        let first = lines.next_line().await.unwrap();
        assert_eq!(first.as_deref(), Some(&b"a"[..]));
        match lines.next_line().await {
            Err(ReflectorError::Body(e)) => assert!(e.contains("reset"), "{e}"),
            other => panic!("the body's error, not {other:?}"),
        }
    }

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

        #[test]
        fn frames_do_not_depend_on_where_chunks_end(
            frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..12),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
            cut_short in any::<bool>(),
        ) {
            let mut body = Vec::new();
            for f in &frames {
                body.extend_from_slice(&(f.len() as u32).to_be_bytes());
                body.extend_from_slice(f);
            }
            if cut_short && !body.is_empty() {
                body.pop();
            }
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(body.len() + 1)).collect();
            at.push(0);
            at.push(body.len());
            at.sort_unstable();
            let mut split = Splitter { framed: true, ..Splitter::default() };
            let mut got = Vec::new();
            for w in at.windows(2) {
                split.push(Bytes::copy_from_slice(&body[w[0]..w[1]]));
                while let Some(frame) = split.next_record().unwrap() {
                    got.push(frame.to_vec());
                }
            }
            let cut = cut_short && !frames.is_empty();
            let whole = if cut { &frames[..frames.len() - 1] } else { &frames[..] };
            prop_assert_eq!(&got[..], whole);
            prop_assert_eq!(split.finish(), !cut);
        }
    }

    /// A frame length above the limit is an error, not a wait for 4 GiB.
    #[tokio::test]
    async fn an_impossible_frame_length_is_an_error() {
        let body = http_body_util::Full::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 1, 2]));
        let mut frames = Lines::frames(body, Duration::from_secs(5));
        assert!(matches!(
            frames.next_line().await,
            Err(ReflectorError::Wire(
                kinformer_wire::WireError::MalformedEvent(_)
            ))
        ));
    }
}
