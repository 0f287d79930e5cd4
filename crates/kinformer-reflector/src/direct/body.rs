//! A response body read straight from its connection: chunked, sized, or
//! until the server closes it.
//!
//! Each poll takes what the connection's buffer already holds (one chunk's
//! data at a time, cut out of the buffer without a copy) and reads the
//! socket only when the buffer has nothing left, 64 KiB at a time.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes, BytesMut};
use http_body::Frame;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::error::ReflectorError;

/// Free space the buffer is given before a read of the socket.
const READ_SIZE: usize = 64 * 1024;
/// A read waits for at least this much free space (else the buffer grows).
const MIN_READ: usize = 16 * 1024;
/// The longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// A connection the body is read from (TCP or TLS).
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A body that could not be read to its end: a [`ReflectorError::Body`]
/// saying why (the connection failed, the chunked encoding is malformed, or
/// the server closed the connection before the body's end).
fn body_error(why: impl std::fmt::Display) -> ReflectorError {
    ReflectorError::Body(why.to_string())
}

/// How the body's end is found (RFC 9112, section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `Transfer-Encoding: chunked`, in this state.
    Chunked(Chunk),
    /// `Content-Length`: this many bytes are left.
    Length(u64),
    /// Until the server closes the connection.
    Close,
    /// The body has ended (or failed).
    Done,
}

/// Where a chunked body's reader is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chunk {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes left.
    Data(u64),
    /// Before the CRLF that ends a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines up to an empty one.
    Trailers,
}

/// The body of a response read by a [`DirectWatch`](super::DirectWatch):
/// it owns its connection, which closes when the body is dropped.
pub struct DirectBody {
    io: Box<dyn Io>,
    buf: BytesMut,
    framing: Framing,
}

impl std::fmt::Debug for DirectBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectBody")
            .field("buffered", &self.buf.len())
            .field("framing", &self.framing)
            .finish_non_exhaustive()
    }
}

impl DirectBody {
    /// A body framed by `framing` whose first bytes (read with the
    /// response's head) are `buf`, the rest coming from `io`.
    pub(crate) fn new(io: Box<dyn Io>, buf: BytesMut, framing: Framing) -> Self {
        Self { io, buf, framing }
    }

    /// The next data the buffer holds; `None` when more bytes are needed
    /// (or the body has ended).
    fn decode(&mut self) -> Result<Option<Bytes>, ReflectorError> {
        loop {
            match self.framing {
                Framing::Done => return Ok(None),
                Framing::Close => {
                    return Ok((!self.buf.is_empty()).then(|| self.buf.split().freeze()));
                }
                Framing::Length(left) => {
                    if left == 0 {
                        self.framing = Framing::Done;
                        return Ok(None);
                    }
                    let Some(data) = take(&mut self.buf, left) else {
                        return Ok(None);
                    };
                    self.framing = Framing::Length(left - data.len() as u64);
                    return Ok(Some(data));
                }
                Framing::Chunked(state) => match self.chunked(state)? {
                    Step::Data(data) => return Ok(Some(data)),
                    Step::Next(next) => self.framing = next,
                    Step::More => return Ok(None),
                },
            }
        }
    }

    /// One step of the chunked decoding from `state`.
    fn chunked(&mut self, state: Chunk) -> Result<Step, ReflectorError> {
        Ok(match state {
            Chunk::Size => match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete((used, size))) => {
                    self.buf.advance(used);
                    Step::Next(Framing::Chunked(match size {
                        0 => Chunk::Trailers,
                        n => Chunk::Data(n),
                    }))
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_LINE => {
                    return Err(body_error(
                        "malformed chunked body: chunk-size line too long",
                    ));
                }
                Ok(httparse::Status::Partial) => Step::More,
                Err(httparse::InvalidChunkSize) => {
                    return Err(body_error("malformed chunked body: invalid chunk size"));
                }
            },
            Chunk::Data(left) => match take(&mut self.buf, left) {
                Some(data) => {
                    let left = left - data.len() as u64;
                    self.framing = Framing::Chunked(match left {
                        0 => Chunk::DataEnd,
                        n => Chunk::Data(n),
                    });
                    Step::Data(data)
                }
                None => Step::More,
            },
            Chunk::DataEnd => match self.buf.get(..2) {
                None => Step::More,
                Some(b"\r\n") => {
                    self.buf.advance(2);
                    Step::Next(Framing::Chunked(Chunk::Size))
                }
                Some(_) => {
                    return Err(body_error(
                        "malformed chunked body: chunk data without its CRLF",
                    ));
                }
            },
            Chunk::Trailers => match memchr::memmem::find(&self.buf, b"\r\n") {
                // The empty line ends the body; trailer fields are skipped.
                Some(0) => {
                    self.buf.advance(2);
                    Step::Next(Framing::Done)
                }
                Some(end) => {
                    self.buf.advance(end + 2);
                    Step::Next(Framing::Chunked(Chunk::Trailers))
                }
                None if self.buf.len() > MAX_LINE => {
                    return Err(body_error("malformed chunked body: trailer line too long"));
                }
                None => Step::More,
            },
        })
    }
}

/// What one step of the chunked decoding found.
enum Step {
    Data(Bytes),
    Next(Framing),
    More,
}

/// Up to `left` bytes from the front of `buf`, without a copy; `None` when
/// it is empty.
fn take(buf: &mut BytesMut, left: u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
    Some(buf.split_to(n).freeze())
}

impl http_body::Body for DirectBody {
    type Data = Bytes;
    type Error = ReflectorError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ReflectorError>>> {
        let this = self.get_mut();
        loop {
            match this.decode() {
                Ok(Some(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Ok(None) if this.framing == Framing::Done => return Poll::Ready(None),
                Ok(None) => {}
                Err(e) => {
                    this.framing = Framing::Done;
                    return Poll::Ready(Some(Err(e)));
                }
            }
            if this.buf.capacity() - this.buf.len() < MIN_READ {
                this.buf.reserve(READ_SIZE);
            }
            let read = ready!(tokio_util::io::poll_read_buf(
                Pin::new(&mut this.io),
                cx,
                &mut this.buf
            ));
            match read {
                Ok(0) if this.framing == Framing::Close => {
                    this.framing = Framing::Done;
                    return Poll::Ready(None);
                }
                Ok(0) => {
                    this.framing = Framing::Done;
                    return Poll::Ready(Some(Err(body_error(
                        "connection closed before the end of the body",
                    ))));
                }
                Ok(_) => {}
                Err(e) => {
                    this.framing = Framing::Done;
                    return Poll::Ready(Some(Err(body_error(format_args!(
                        "reading the connection: {e}"
                    )))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.framing == Framing::Done
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use http_body_util::BodyExt;
    use proptest::prelude::*;
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// `wire` written to a body of `framing` in pieces cut at `cuts`; what
    /// the body reads (its data, or its error).
    async fn read(wire: Vec<u8>, cuts: Vec<usize>, framing: Framing) -> Result<Vec<u8>, String> {
        let (client, mut server) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            let mut at = 0;
            for cut in cuts.into_iter().chain([wire.len()]) {
                let cut = cut.clamp(at, wire.len());
                server.write_all(&wire[at..cut]).await.unwrap();
                server.flush().await.unwrap();
                at = cut;
            }
        });
        let body = DirectBody::new(Box::new(client), BytesMut::new(), framing);
        let out = body.collect().await.map(|c| c.to_bytes().to_vec());
        writer.await.unwrap();
        out.map_err(|e| e.to_string())
    }

    fn chunked(pieces: &[&[u8]]) -> Vec<u8> {
        let mut wire = Vec::new();
        for p in pieces {
            wire.extend_from_slice(format!("{:x}\r\n", p.len()).as_bytes());
            wire.extend_from_slice(p);
            wire.extend_from_slice(b"\r\n");
        }
        wire.extend_from_slice(b"0\r\n\r\n");
        wire
    }

    const START: Framing = Framing::Chunked(Chunk::Size);

    proptest! {
        /// A chunked body's data comes out whole and in order however the
        /// connection cuts its bytes.
        #[test]
        fn chunked_data_whole_however_the_reads_fall(
            pieces in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..300), 0..12),
            cuts in proptest::collection::vec(0usize..4000, 0..10),
        ) {
            let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            let mut cuts = cuts;
            cuts.sort_unstable();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(read(chunked(&refs), cuts, START)).unwrap();
            prop_assert_eq!(got, pieces.concat());
        }
    }

    #[tokio::test]
    async fn chunk_extensions_and_trailers_are_skipped() {
        let wire = b"3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nx-trailer: y\r\n\r\n".to_vec();
        assert_eq!(read(wire, vec![5, 11], START).await.unwrap(), b"abcde");
    }

    #[tokio::test]
    async fn sized_and_close_delimited_bodies() {
        let wire = b"hello world".to_vec();
        assert_eq!(
            read(wire.clone(), vec![3], Framing::Length(5))
                .await
                .unwrap(),
            b"hello"
        );
        assert_eq!(
            read(wire.clone(), vec![3], Framing::Close).await.unwrap(),
            wire
        );
        assert_eq!(
            read(Vec::new(), vec![], Framing::Length(0)).await.unwrap(),
            b""
        );
    }

    /// Bad framing is an error, never data made up or a hang.
    #[tokio::test]
    async fn malformed_or_cut_bodies_are_errors() {
        let cases: [(&[u8], Framing, &str); 5] = [
            (b"zz\r\nab\r\n", START, "invalid chunk size"),
            (b"2\r\nabXX0\r\n\r\n", START, "without its CRLF"),
            (b"5\r\nab", START, "closed before the end"),
            (b"abc", Framing::Length(10), "closed before the end"),
            (b"3\r\nabc\r\n", START, "closed before the end"),
        ];
        for (wire, framing, want) in cases {
            let err = read(wire.to_vec(), vec![], framing).await.unwrap_err();
            assert!(err.contains(want), "{wire:?}: {err}");
        }
        let long = [b"1;".to_vec(), b"x".repeat(MAX_LINE + 10)].concat();
        let err = read(long, vec![], START).await.unwrap_err();
        assert!(err.contains("too long"), "{err}");
    }
}
