//! A minimal blocking HTTP/1.1 client (rustls with ring for HTTPS) for readiness checks and the few
//! bootstrap requests `start` makes; everything else talks to the server through kube.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use rustls::pki_types::{CertificateDer, ServerName};

/// A response: status code and body.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// Body (de-chunked), lossily decoded.
    pub body: String,
}

/// An HTTPS endpoint on loopback, trusted through one CA, with a bearer token.
#[derive(Clone)]
pub struct Endpoint {
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    token: String,
}

impl Endpoint {
    /// `127.0.0.1:port`, trusting the CA certificate `ca_der`.
    pub fn new(port: u16, ca_der: &[u8], token: &str) -> anyhow::Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca_der.to_vec()))
            .context("adding the CA certificate")?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Self {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            config: Arc::new(config),
            token: token.to_string(),
        })
    }

    /// One request; `body` is sent as JSON.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<Response> {
        let tcp = connect(self.addr)?;
        let name = ServerName::try_from("127.0.0.1")?.to_owned();
        let conn = rustls::ClientConnection::new(self.config.clone(), name)?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let head = request_head(method, path, self.addr, Some(&self.token), body);
        tls.write_all(head.as_bytes())?;
        tls.flush()?;
        parse_response(&read_all(&mut tls)?)
    }
}

/// A plain-HTTP GET on loopback (etcd's `/health`).
pub fn plain_get(port: u16, path: &str) -> anyhow::Result<Response> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut tcp = connect(addr)?;
    tcp.write_all(request_head("GET", path, addr, None, None).as_bytes())?;
    parse_response(&read_all(&mut tcp)?)
}

fn connect(addr: SocketAddr) -> anyhow::Result<TcpStream> {
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_read_timeout(Some(Duration::from_secs(20)))?;
    tcp.set_write_timeout(Some(Duration::from_secs(20)))?;
    Ok(tcp)
}

fn request_head(
    method: &str,
    path: &str,
    addr: SocketAddr,
    token: Option<&str>,
    body: Option<&str>,
) -> String {
    let mut s = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if let Some(t) = token {
        s.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || method != "GET" {
        s.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    s.push_str("\r\n");
    s.push_str(body);
    s
}

/// Read until the peer closes; a TLS close without `close_notify` after data is accepted.
fn read_all(r: &mut impl Read) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {
                return Ok(out);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

fn parse_response(raw: &[u8]) -> anyhow::Result<Response> {
    let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        bail!("malformed HTTP response ({} bytes)", raw.len());
    };
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok())
        .context("malformed HTTP status line")?;
    let chunked = lines.any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let mut body = &raw[split + 4..];
    let bytes = if chunked {
        let mut out = Vec::new();
        while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
            let size_str = String::from_utf8_lossy(&body[..eol]);
            let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16)
                .context("malformed chunk size")?;
            body = &body[eol + 2..];
            if size == 0 || body.len() < size {
                break;
            }
            out.extend_from_slice(&body[..size]);
            body = body.get(size + 2..).unwrap_or_default();
        }
        out
    } else {
        body.to_vec()
    };
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chunked_and_plain() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        let r = parse_response(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_str()), (404, "abcde"));
    }
}
