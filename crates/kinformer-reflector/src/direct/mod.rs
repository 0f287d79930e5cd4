//! Watches read straight from their connections ([`DirectWatch`]), without
//! hyper's client in between.
//!
//! kube-apiserver writes each watch event of 2 KiB or more as a chunk of
//! its own. kube's [`Client`](kube::Client) hands every chunk from hyper's
//! connection task to the body through a one-slot channel: a task switch
//! per chunk, the larger part of the reflector's reading cost in a burst.
//! A [`DirectWatch`] sends each watch request on a connection of its own,
//! with kube's configuration (base URI, authentication, extra headers,
//! TLS), and reads the chunked body itself: every chunk already received
//! is taken in the same poll.
//! LISTs and every other request stay on the [`Client`](kube::Client).

mod body;
mod conn;

use std::sync::Arc;

use http::{Request, Response};
use kube::client::{Body, ConfigExt};
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

pub use body::DirectBody;
use conn::Connect;

use crate::error::ReflectorError;

type WatchService = BoxService<Request<Body>, Response<DirectBody>, BoxError>;

/// Sends watch requests on connections of their own (see the module docs);
/// cheap to clone, one per process is enough.
///
/// ```no_run
/// # async fn doc() -> Result<(), Box<dyn std::error::Error>> {
/// use kinformer_reflector::DirectWatch;
/// let config = kube::Config::infer().await?;
/// let direct = DirectWatch::from_config(&config)?;
/// # drop(direct); Ok(()) }
/// ```
#[derive(Clone)]
pub struct DirectWatch {
    service: Arc<tokio::sync::Mutex<WatchService>>,
}

impl std::fmt::Debug for DirectWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWatch").finish_non_exhaustive()
    }
}

impl DirectWatch {
    /// Watches to `config`'s cluster, authenticated as `config` says. An
    /// `https` cluster needs this crate's `rustls-tls` feature; a proxy is
    /// not supported (use the [`Client`](kube::Client) for those).
    pub fn from_config(config: &kube::Config) -> Result<Self, ReflectorError> {
        if let Some(proxy) = &config.proxy_url {
            return Err(ReflectorError::Unsupported(format!(
                "direct watches through the proxy {proxy}"
            )));
        }
        #[cfg(feature = "rustls-tls")]
        let connector = config
            .rustls_https_connector()
            .map_err(ReflectorError::Transport)?;
        #[cfg(not(feature = "rustls-tls"))]
        let connector = plain_connector(config)?;
        Self::with_connector(config, connector)
    }

    /// As [`from_config`](Self::from_config), connecting with `connector`
    /// (TLS, if any, is the connector's).
    pub fn with_connector<C>(config: &kube::Config, connector: C) -> Result<Self, ReflectorError>
    where
        C: Service<http::Uri> + Clone + Send + 'static,
        C::Response: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
        C::Error: Into<BoxError>,
        C::Future: Send,
    {
        let auth = config.auth_layer().map_err(ReflectorError::Transport)?;
        let headers = config
            .extra_headers_layer()
            .map_err(ReflectorError::Transport)?;
        let connect = Connect::new(connector, config.connect_timeout, config.read_timeout);
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(auth)
            .layer(headers)
            .service(connect);
        Ok(Self {
            service: Arc::new(tokio::sync::Mutex::new(BoxService::new(service))),
        })
    }

    /// Sends `req` (a request without a body) on a new connection.
    pub(crate) async fn send(
        &self,
        req: Request<Body>,
    ) -> Result<Response<DirectBody>, ReflectorError> {
        let answer = {
            let mut service = self.service.lock().await;
            service.ready().await.map_err(transport)?.call(req)
        };
        answer.await.map_err(transport)
    }
}

/// A response read from a connection that delivers `wire` in two reads
/// (cut at `cut`), as a direct watch reads one: its status and body (the
/// fuzz targets' entry, see `crate::fuzzing`).
#[cfg(fuzzing)]
pub(crate) async fn read_response(
    mut wire: bytes::BytesMut,
    cut: usize,
) -> Result<(u16, Vec<u8>), String> {
    use http_body_util::BodyExt;
    use tokio::io::AsyncWriteExt;
    let (client, mut server) = tokio::io::duplex(64 * 1024);
    let rest = wire.split_off(cut.min(wire.len()));
    let writer = tokio::spawn(async move {
        // The reader may stop early (an error): a failed write ends it.
        for part in [wire, rest] {
            if server.write_all(&part).await.is_err() {
                return;
            }
        }
    });
    let answer = async {
        let resp = conn::read_head(Box::new(client))
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok((status, body.to_bytes().to_vec()))
    };
    let out = answer.await;
    writer.abort();
    out
}

fn transport(e: BoxError) -> ReflectorError {
    ReflectorError::Transport(kube::Error::Service(e))
}

/// A plain TCP connector (this build has no TLS: see the `rustls-tls`
/// feature), for an `http` cluster URL only.
#[cfg(not(feature = "rustls-tls"))]
fn plain_connector(
    config: &kube::Config,
) -> Result<hyper_util::client::legacy::connect::HttpConnector, ReflectorError> {
    if config.cluster_url.scheme_str() != Some("http") {
        return Err(ReflectorError::Unsupported(format!(
            "direct watches to {} need the rustls-tls feature",
            config.cluster_url
        )));
    }
    Ok(hyper_util::client::legacy::connect::HttpConnector::new())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// What a direct watch cannot do is refused when it is built, with a
    /// typed error, so that the caller keeps its client's watches.
    #[test]
    fn proxies_and_tls_without_the_feature_are_refused_up_front() {
        let mut config = kube::Config::new("http://127.0.0.1:6443".parse().unwrap());
        assert!(DirectWatch::from_config(&config).is_ok());
        config.proxy_url = Some("http://proxy.test:3128".parse().unwrap());
        let err = DirectWatch::from_config(&config).unwrap_err();
        assert!(matches!(err, ReflectorError::Unsupported(_)), "{err}");
        let https = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        let built = DirectWatch::from_config(&https);
        if cfg!(feature = "rustls-tls") {
            assert!(built.is_ok());
        } else {
            assert!(matches!(built, Err(ReflectorError::Unsupported(_))));
        }
    }
}
