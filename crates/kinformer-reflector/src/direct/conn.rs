//! Sending one request on a connection of its own and reading its answer's
//! head: the HTTP/1.1 exchange under a [`DirectBody`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use http::{HeaderName, HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body as _;
use hyper_util::rt::TokioIo;
use kube::client::Body;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::{BoxError, Service};

use super::body::{Chunk, DirectBody, Framing, Io};

/// The longest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The most header fields a response head may have.
const MAX_HEADERS: usize = 100;

/// A service that answers each request over a new connection from `C`.
#[derive(Clone)]
pub(crate) struct Connect<C> {
    connector: C,
    /// How long connecting may take.
    connect_timeout: Option<Duration>,
    /// How long the answer's head may take once the request is sent.
    head_timeout: Option<Duration>,
}

impl<C> Connect<C> {
    pub(crate) fn new(
        connector: C,
        connect_timeout: Option<Duration>,
        head_timeout: Option<Duration>,
    ) -> Self {
        Self {
            connector,
            connect_timeout,
            head_timeout,
        }
    }
}

type Answer = Pin<Box<dyn Future<Output = Result<Response<DirectBody>, BoxError>> + Send>>;

impl<C> Service<Request<Body>> for Connect<C>
where
    C: Service<Uri> + Clone + Send + 'static,
    C::Response: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    C::Error: Into<BoxError>,
    C::Future: Send,
{
    type Response = Response<DirectBody>;
    type Error = BoxError;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.connector.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<Body>) -> Answer {
        // The connector that was made ready answers this call; the clone
        // waits for the next.
        let ready = self.connector.clone();
        let mut connector = std::mem::replace(&mut self.connector, ready);
        let (connect_timeout, head_timeout) = (self.connect_timeout, self.head_timeout);
        Box::pin(async move {
            let head = request_head(&req)?;
            let io = within(
                connect_timeout,
                connector.call(req.uri().clone()),
                "connect",
            )
            .await?;
            let mut io: Box<dyn Io> = Box::new(TokioIo::new(io.map_err(Into::into)?));
            io.write_all(&head).await?;
            io.flush().await?;
            within(head_timeout, read_head(io), "the response's head").await?
        })
    }
}

/// `f`'s output, or an error naming `what` after `timeout`.
async fn within<F: Future>(
    timeout: Option<Duration>,
    f: F,
    what: &str,
) -> Result<F::Output, BoxError> {
    match timeout {
        None => Ok(f.await),
        Some(t) => tokio::time::timeout(t, f)
            .await
            .map_err(|_| format!("{what} took longer than {t:?}").into()),
    }
}

/// The request's head on the wire (origin form, with `Host`). Only requests
/// without a body are sent this way.
fn request_head(req: &Request<Body>) -> Result<Vec<u8>, BoxError> {
    if req.body().size_hint().exact() != Some(0) {
        return Err("a direct request has no body".into());
    }
    let uri = req.uri();
    let authority = uri
        .authority()
        .ok_or("a direct request needs an absolute URI")?;
    let target = uri.path_and_query().map_or("/", |p| p.as_str());
    let mut head = Vec::with_capacity(256 + target.len());
    head.extend_from_slice(req.method().as_str().as_bytes());
    head.extend_from_slice(b" ");
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    if !req.headers().contains_key(http::header::HOST) {
        field(&mut head, b"host", authority.as_str().as_bytes());
    }
    if !req.headers().contains_key(http::header::USER_AGENT) {
        let agent = concat!("kinformer/", env!("CARGO_PKG_VERSION"));
        field(&mut head, b"user-agent", agent.as_bytes());
    }
    // `HeaderValue` has no CR or LF, so no field can end the head early.
    for (name, value) in req.headers() {
        field(&mut head, name.as_str().as_bytes(), value.as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    Ok(head)
}

fn field(head: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    head.extend_from_slice(name);
    head.extend_from_slice(b": ");
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n");
}

/// Reads the answer's head from `io`; the body is what follows on it.
pub(super) async fn read_head(mut io: Box<dyn Io>) -> Result<Response<DirectBody>, BoxError> {
    let mut buf = BytesMut::with_capacity(8 * 1024);
    loop {
        if io.read_buf(&mut buf).await? == 0 {
            return Err("the connection closed before the response's head".into());
        }
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut fields);
        match parsed.parse(&buf)? {
            httparse::Status::Partial if buf.len() > MAX_HEAD => {
                return Err("response head too long".into());
            }
            httparse::Status::Partial => continue,
            httparse::Status::Complete(len) => {
                let (parts, framing) = head_parts(&parsed)?;
                buf.advance(len);
                let body = DirectBody::new(io, buf, framing);
                return Ok(Response::from_parts(parts, body));
            }
        }
    }
}

/// The status and headers of a parsed head, and how its body is framed.
fn head_parts(
    parsed: &httparse::Response<'_, '_>,
) -> Result<(http::response::Parts, Framing), BoxError> {
    let status = StatusCode::from_u16(parsed.code.ok_or("a response head without a status")?)?;
    let (mut parts, ()) = Response::new(()).into_parts();
    parts.status = status;
    for h in parsed.headers.iter() {
        parts.headers.append(
            HeaderName::from_bytes(h.name.as_bytes())?,
            HeaderValue::from_bytes(h.value)?,
        );
    }
    let framing = framing(status, &parts.headers)?;
    Ok((parts, framing))
}

/// RFC 9112 section 6.3: how a response's body ends.
fn framing(status: StatusCode, headers: &http::HeaderMap) -> Result<Framing, BoxError> {
    if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Length(0));
    }
    if let Some(te) = headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .next_back()
    {
        let chunked = te
            .to_str()
            .ok()
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
        return Ok(match chunked {
            true => Framing::Chunked(Chunk::Size),
            false => Framing::Close,
        });
    }
    match headers.get(http::header::CONTENT_LENGTH) {
        Some(v) => Ok(Framing::Length(v.to_str()?.trim().parse()?)),
        None => Ok(Framing::Close),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use http_body_util::BodyExt;

    use super::*;

    fn head_of(fields: &[(&str, &str)], status: u16) -> Result<Framing, BoxError> {
        let mut h = http::HeaderMap::new();
        for (n, v) in fields {
            h.append(HeaderName::from_bytes(n.as_bytes())?, v.parse()?);
        }
        framing(StatusCode::from_u16(status)?, &h)
    }

    #[test]
    fn bodies_are_framed_as_rfc_9112_says() {
        let chunked = Framing::Chunked(Chunk::Size);
        assert_eq!(
            head_of(&[("transfer-encoding", "chunked")], 200).unwrap(),
            chunked
        );
        assert_eq!(
            head_of(&[("transfer-encoding", "gzip, chunked")], 200).unwrap(),
            chunked
        );
        assert_eq!(
            head_of(&[("transfer-encoding", "gzip")], 200).unwrap(),
            Framing::Close
        );
        let both = [("content-length", "4"), ("transfer-encoding", "chunked")];
        assert_eq!(head_of(&both, 200).unwrap(), chunked);
        assert_eq!(
            head_of(&[("content-length", "12")], 410).unwrap(),
            Framing::Length(12)
        );
        assert_eq!(
            head_of(&[("content-length", "12")], 204).unwrap(),
            Framing::Length(0)
        );
        assert_eq!(head_of(&[], 200).unwrap(), Framing::Close);
        assert!(head_of(&[("content-length", "x")], 200).is_err());
    }

    #[test]
    fn the_request_head_is_in_origin_form_with_its_host() {
        let req = Request::get("http://example.test:8080/api/v1/pods?watch=1")
            .header("authorization", "Bearer t")
            .body(Body::empty())
            .unwrap();
        let head = String::from_utf8(request_head(&req).unwrap()).unwrap();
        assert!(
            head.starts_with("GET /api/v1/pods?watch=1 HTTP/1.1\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nhost: example.test:8080\r\n"), "{head}");
        assert!(head.contains("\r\nauthorization: Bearer t\r\n"), "{head}");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        let relative = Request::get("/api").body(Body::empty()).unwrap();
        assert!(request_head(&relative).is_err());
        let with_body = Request::post("http://h/api")
            .body(Body::from(b"x".to_vec()))
            .unwrap();
        assert!(request_head(&with_body).is_err());
    }

    /// A head cut anywhere is read whole; the bytes after it start the body.
    #[tokio::test]
    async fn the_head_is_read_then_the_body_follows() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
        for cut in [1, 20, wire.len() - 8, wire.len()] {
            let (client, mut server) = tokio::io::duplex(1024);
            server.write_all(&wire[..cut]).await.unwrap();
            let rest = wire[cut..].to_vec();
            let writer = tokio::spawn(async move {
                tokio::task::yield_now().await;
                server.write_all(&rest).await.unwrap();
                server
            });
            let resp = read_head(Box::new(client)).await.unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(resp.headers()["content-type"], "application/json");
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(&body[..], b"hello");
            drop(writer.await.unwrap());
        }
    }

    #[tokio::test]
    async fn a_head_that_is_not_http_or_never_ends_is_an_error() {
        for wire in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nx: y\r\n",
        ] {
            let (client, mut server) = tokio::io::duplex(1024);
            server.write_all(wire).await.unwrap();
            drop(server);
            assert!(read_head(Box::new(client)).await.is_err());
        }
    }
}
