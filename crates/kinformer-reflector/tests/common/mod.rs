//! Test helpers: a scripted fake API server, a recording kube client, a
//! reflector harness over a real informer.

#![allow(dead_code, missing_docs, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{DeletedObject, EventHandlerFns, SharedIndexInformer};
use kinformer_reflector::{
    BackoffConfig, CancellationToken, DecodePool, Decoders, DirectWatch, ListWatchTarget,
    MetricsHandle, Reflector, ReflectorConfig, ReflectorError,
};
use kube::Client;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;

pub const TIMEOUT: Duration = Duration::from_secs(15);

/// Fail instead of hanging.
pub async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(TIMEOUT, f).await.expect("timed out")
}

/// Polls `cond` every 10 ms until true; panics after `TIMEOUT`.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `(name, resourceVersion)` pairs as [`Harness::cache`] returns them.
pub fn kv(v: &[(&str, u64)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(n, rv)| (n.to_string(), rv.to_string()))
        .collect()
}

pub fn pod(name: &str, rv: u64) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": rv.to_string()},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

pub fn list(rv: u64, items: Vec<Value>, cont: Option<&str>) -> Value {
    let mut md = json!({"resourceVersion": rv.to_string()});
    if let Some(c) = cont {
        md["continue"] = json!(c);
    }
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": md, "items": items})
}

pub fn event(ty: &str, obj: Value) -> String {
    json!({"type": ty, "object": obj}).to_string()
}

pub fn bookmark(rv: u64, end: bool) -> String {
    let mut md = json!({"resourceVersion": rv.to_string()});
    if end {
        md["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event(
        "BOOKMARK",
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": md}),
    )
}

pub fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": format!("injected {code}"), "reason": reason, "code": code})
}

pub fn error_event(code: u16, reason: &str) -> String {
    event("ERROR", status(code, reason))
}

/// A scripted answer.
pub enum Reply {
    /// An error status.
    Status(u16, Value),
    /// A 200 JSON body.
    Json(Value),
    /// A 200 streamed body of these exact chunks (no newline added), then end.
    Raw(Vec<String>),
    /// No answer at all: the request is accepted and its response head
    /// never sent (the connection stays open).
    NoAnswer,
    /// A 200 streamed body: each line (a newline added) after `every`,
    /// then the stream stays open.
    Paced { lines: Vec<String>, every: Duration },
    /// A watch stream: `before`, then wait for `gate` (if any), then `after`;
    /// then end, or stay open if `hang`.
    Stream {
        before: Vec<String>,
        gate: Option<Arc<Notify>>,
        after: Vec<String>,
        hang: bool,
    },
}

impl Reply {
    pub fn lines(lines: Vec<String>) -> Self {
        Reply::Stream {
            before: lines,
            gate: None,
            after: vec![],
            hang: false,
        }
    }
    pub fn lines_then_hang(lines: Vec<String>) -> Self {
        Reply::Stream {
            before: lines,
            gate: None,
            after: vec![],
            hang: true,
        }
    }
}

/// A request the fake received: path and decoded query pairs.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub query: Vec<(String, String)>,
}

impl Seen {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
    pub fn is_watch(&self) -> bool {
        self.param("watch") == Some("true")
    }
}

#[derive(Default)]
pub struct Script {
    pub lists: Mutex<VecDeque<Reply>>,
    pub watches: Mutex<VecDeque<Reply>>,
    pub seen: Mutex<Vec<Seen>>,
}

impl Script {
    pub fn list(&self, r: Reply) -> &Self {
        self.lists.lock().push_back(r);
        self
    }
    pub fn watch(&self, r: Reply) -> &Self {
        self.watches.lock().push_back(r);
        self
    }
    pub fn seen_lists(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .iter()
            .filter(|s| !s.is_watch())
            .cloned()
            .collect()
    }
    pub fn seen_watches(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .iter()
            .filter(|s| s.is_watch())
            .cloned()
            .collect()
    }
    /// The `resourceVersion` of every LIST ("" when absent).
    pub fn list_rvs(&self) -> Vec<String> {
        self.seen_lists()
            .iter()
            .map(|s| s.param("resourceVersion").unwrap_or("").to_string())
            .collect()
    }
}

async fn handle(State(script): State<Arc<Script>>, req: Request) -> Response {
    let query: Vec<(String, String)> = form_urlencoded_pairs(req.uri().query().unwrap_or(""));
    let seen = Seen {
        path: req.uri().path().to_string(),
        query,
    };
    let is_watch = seen.is_watch();
    script.seen.lock().push(seen);
    let reply = if is_watch {
        script.watches.lock().pop_front()
    } else {
        script.lists.lock().pop_front()
    };
    let reply = reply.unwrap_or(if is_watch {
        Reply::lines_then_hang(vec![])
    } else {
        Reply::Status(500, status(500, "InternalError"))
    });
    match reply {
        Reply::NoAnswer => std::future::pending().await,
        Reply::Paced { lines, every } => {
            let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
            tokio::spawn(async move {
                for l in lines {
                    tokio::time::sleep(every).await;
                    if tx.send(Ok(Bytes::from(format!("{l}\n")))).await.is_err() {
                        return;
                    }
                }
                tx.closed().await;
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(ReceiverStream::new(rx)))
                .unwrap()
        }
        Reply::Status(code, body) => Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        Reply::Json(body) => Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        Reply::Raw(chunks) => {
            let chunks: Vec<Result<Bytes, Infallible>> =
                chunks.into_iter().map(|c| Ok(Bytes::from(c))).collect();
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(tokio_stream::iter(chunks)))
                .unwrap()
        }
        Reply::Stream {
            before,
            gate,
            after,
            hang,
        } => {
            let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
            tokio::spawn(async move {
                for l in before {
                    if tx.send(Ok(Bytes::from(format!("{l}\n")))).await.is_err() {
                        return;
                    }
                }
                if let Some(g) = gate {
                    g.notified().await;
                }
                for l in after {
                    if tx.send(Ok(Bytes::from(format!("{l}\n")))).await.is_err() {
                        return;
                    }
                }
                if hang {
                    tx.closed().await;
                }
            });
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(ReceiverStream::new(rx)))
                .unwrap()
        }
    }
}

fn form_urlencoded_pairs(q: &str) -> Vec<(String, String)> {
    let uri: http::Uri = format!("/?{q}").parse().unwrap();
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default()
}

/// Serves `script` on 127.0.0.1:0 (or `addr`).
pub async fn fake_server_at(script: Arc<Script>, addr: SocketAddr) -> SocketAddr {
    let app = axum::Router::new().fallback(handle).with_state(script);
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    local
}

pub async fn fake_server(script: Arc<Script>) -> SocketAddr {
    fake_server_at(script, "127.0.0.1:0".parse().unwrap()).await
}

/// Serves `script` on 127.0.0.1:0 until it has answered one LIST: that
/// answer closes its connection, and before it is sent the server stops
/// listening, so the next connection to the address is refused.
pub async fn fake_server_closing_after_first_list(script: Arc<Script>) -> SocketAddr {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    let stop = Arc::new(Mutex::new(Some((stop_tx, closed_rx))));
    let close_after_list = move |req: Request, next: axum::middleware::Next| {
        let stop = Arc::clone(&stop);
        async move {
            let is_list = !is_watch_request(&req);
            let mut resp = next.run(req).await;
            if is_list {
                resp.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
                let stopping = stop.lock().take();
                if let Some((stop_tx, closed_rx)) = stopping {
                    let _ = stop_tx.send(());
                    // The listener is closed before the client can read the
                    // answer and connect again.
                    let _ = closed_rx.await;
                }
            }
            resp
        }
    };
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(script)
        .layer(axum::middleware::from_fn(close_after_list));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tokio::select! {
            _ = axum::serve(listener, app) => {}
            _ = stop_rx => {}
        }
        // The serve future, and with it the listener, is dropped here;
        // connections already accepted live on in their own tasks.
        let _ = closed_tx.send(());
    });
    local
}

fn is_watch_request(req: &Request) -> bool {
    Seen {
        path: String::new(),
        query: form_urlencoded_pairs(req.uri().query().unwrap_or("")),
    }
    .is_watch()
}

/// A kube client for `http://addr` without client-side retries.
pub fn client(addr: SocketAddr) -> Client {
    let mut cfg = kube::Config::new(format!("http://{addr}").parse().unwrap());
    cfg.default_retry = false;
    Client::try_from(cfg).unwrap()
}

/// Fast settings for tests.
pub fn fast(watch_list: bool) -> ReflectorConfig {
    ReflectorConfig::default().watch_list(watch_list).backoff(
        BackoffConfig::default()
            .initial(Duration::from_millis(20))
            .max(Duration::from_millis(200))
            .jitter(0.0),
    )
}

/// What handlers observed.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen2 {
    Add(String, String, bool),
    Update(String, String),
    Delete(String, bool),
}

fn name_rv(p: &Pod) -> (String, String) {
    (
        p.metadata.name.clone().unwrap_or_default(),
        p.metadata.resource_version.clone().unwrap_or_default(),
    )
}

/// A started informer, a running reflector, the handler's history and the errors.
pub struct Harness {
    pub informer: SharedIndexInformer<Pod>,
    pub events: Arc<Mutex<Vec<Seen2>>>,
    pub errors: Arc<Mutex<Vec<String>>>,
    pub metrics: MetricsHandle,
    pub token: CancellationToken,
    pub task: tokio::task::JoinHandle<()>,
}

impl Harness {
    pub fn start(client: Client, config: ReflectorConfig) -> Self {
        Self::start_target(client, config, ListWatchTarget::of::<Pod>(&(), None))
    }

    pub fn start_target(client: Client, config: ReflectorConfig, target: ListWatchTarget) -> Self {
        Self::start_full(client, config, target, None, None)
    }

    /// As [`Harness::start`], its watches sent through `direct`.
    pub fn start_direct(client: Client, config: ReflectorConfig, direct: DirectWatch) -> Self {
        let target = ListWatchTarget::of::<Pod>(&(), None);
        Self::start_full(client, config, target, None, Some(direct))
    }

    /// As [`Harness::start`], decoding on `pool`'s threads.
    pub fn start_pooled(client: Client, config: ReflectorConfig, pool: Arc<DecodePool>) -> Self {
        Self::start_full(
            client,
            config,
            ListWatchTarget::of::<Pod>(&(), None),
            Some(pool),
            None,
        )
    }

    /// As [`Harness::start`], decoding with `decoders`, on `pool`'s
    /// threads when given.
    pub fn start_decoding(
        client: Client,
        config: ReflectorConfig,
        pool: Option<Arc<DecodePool>>,
        decoders: Decoders<Pod>,
    ) -> Self {
        let target = ListWatchTarget::of::<Pod>(&(), None);
        Self::start_with(client, config, target, pool, None, decoders)
    }

    fn start_full(
        client: Client,
        config: ReflectorConfig,
        target: ListWatchTarget,
        pool: Option<Arc<DecodePool>>,
        direct: Option<DirectWatch>,
    ) -> Self {
        Self::start_with(client, config, target, pool, direct, Decoders::serde())
    }

    fn start_with(
        client: Client,
        config: ReflectorConfig,
        target: ListWatchTarget,
        pool: Option<Arc<DecodePool>>,
        direct: Option<DirectWatch>,
        decoders: Decoders<Pod>,
    ) -> Self {
        let informer = SharedIndexInformer::<Pod>::builder().threads(1).build();
        let events = Arc::new(Mutex::new(Vec::new()));
        let (a, u, d) = (events.clone(), events.clone(), events.clone());
        informer
            .add_event_handler(
                EventHandlerFns::new()
                    .on_add(move |p: &Arc<Pod>, initial| {
                        let (n, rv) = name_rv(p);
                        a.lock().push(Seen2::Add(n, rv, initial));
                    })
                    .on_update(move |_old: &Arc<Pod>, new: &Arc<Pod>| {
                        let (n, rv) = name_rv(new);
                        u.lock().push(Seen2::Update(n, rv));
                    })
                    .on_delete(move |obj: &DeletedObject<Pod>| {
                        let (n, _) = name_rv(obj.object());
                        d.lock().push(Seen2::Delete(n, obj.is_tombstone()));
                    }),
            )
            .unwrap();
        informer.start().unwrap();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let errs = errors.clone();
        let mut reflector =
            Reflector::new(client, target, Arc::clone(informer.queue())).decoders(decoders);
        if let Some(pool) = pool {
            reflector = reflector.decode_pool(pool);
        }
        if let Some(direct) = direct {
            reflector = reflector.direct_watches(direct);
        }
        let reflector = reflector
            .config(config)
            .on_watch_error(move |e: &ReflectorError| {
                errs.lock().push(format!("{}: {e}", e.kind()))
            });
        let metrics = reflector.metrics();
        let token = CancellationToken::new();
        let task = tokio::spawn(reflector.run(token.clone()));
        Self {
            informer,
            events,
            errors,
            metrics,
            token,
            task,
        }
    }

    /// Names of the cached pods with their resourceVersions, sorted.
    pub fn cache(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = self
            .informer
            .indexer()
            .list()
            .iter()
            .map(|p| name_rv(p))
            .collect();
        v.sort();
        v
    }

    pub fn has_error(&self, kind: &str) -> bool {
        self.errors.lock().iter().any(|e| e.starts_with(kind))
    }

    /// Stops the reflector (must end promptly) and the informer.
    pub async fn stop(self) {
        self.token.cancel();
        within(self.task).await.unwrap();
        self.informer.shutdown();
    }
}
