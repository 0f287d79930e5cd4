//! kinformer-e2e: shared helpers of the end-to-end tests, which run against a real kube-apiserver
//! and etcd started by `cargo xtask e2e` (see docs/testing.md), and of the simulator-fidelity
//! suite, which runs one scenario list against both that server and an in-process kinformer-sim.
//!
//! Every test of this crate is `#[ignore]`d: a plain `cargo test --workspace` builds them but does
//! not run them. `cargo xtask e2e` runs them with `--ignored` and these variables set:
//! - `KINFORMER_E2E_KUBECONFIG`: the kubeconfig of the test user (token, `system:masters`);
//! - `KINFORMER_E2E_ETCD_URL`: etcd's client URL (plain HTTP on 127.0.0.1), e.g. for compaction;
//! - `KINFORMER_E2E_WATCH_LIST`: whether the WatchList feature gate is on (`true`/`false`);
//! - `KINFORMER_E2E_SHARDED_LIST_AND_WATCH`: whether the ShardedListAndWatch gate is on;
//! - `KINFORMER_E2E_APISERVER_LOG`: the kube-apiserver log, named in failure messages;
//! - `KINFORMER_E2E_STATE_DIR`: the state directory of `cargo xtask apiserver`, for the tests that
//!   restart kube-apiserver ([`apiserver`]).
//!
//! Besides requests through the apiserver, tests can change etcd directly ([`etcd_put`],
//! [`etcd_delete`], [`compact_etcd`]), e.g. while kube-apiserver is stopped.

pub mod apiserver;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use kinformer_sim::{RunningSim, SimBuilder};
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

/// Variable naming the real server's kubeconfig.
pub const KUBECONFIG_ENV: &str = "KINFORMER_E2E_KUBECONFIG";
/// Variable naming etcd's client URL.
pub const ETCD_URL_ENV: &str = "KINFORMER_E2E_ETCD_URL";
/// Variable telling whether the WatchList feature gate is on.
pub const WATCH_LIST_ENV: &str = "KINFORMER_E2E_WATCH_LIST";
/// The environment variable saying whether the ShardedListAndWatch gate is on.
pub const SHARDED_LIST_AND_WATCH_ENV: &str = "KINFORMER_E2E_SHARDED_LIST_AND_WATCH";
/// Variable naming the kube-apiserver log.
pub const APISERVER_LOG_ENV: &str = "KINFORMER_E2E_APISERVER_LOG";

/// Default time limit of one request or wait in these tests.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The real server's kubeconfig, from [`KUBECONFIG_ENV`].
pub fn kubeconfig_path() -> anyhow::Result<PathBuf> {
    std::env::var_os(KUBECONFIG_ENV).map(PathBuf::from).with_context(|| {
        format!(
            "{KUBECONFIG_ENV} is not set: these tests need a real kube-apiserver; run them with \
             `cargo xtask e2e` (or `cargo xtask apiserver start` and export the variables that \
             `cargo xtask apiserver env` prints)"
        )
    })
}

/// Whether the real server runs with the WatchList feature gate on (default: yes).
pub fn watch_list_enabled() -> bool {
    std::env::var(WATCH_LIST_ENV).map_or(true, |v| v != "false")
}

/// Whether the server under test applies `shardSelector` (the
/// ShardedListAndWatch gate on; off when the variable is not set).
pub fn sharded_list_and_watch_enabled() -> bool {
    std::env::var(SHARDED_LIST_AND_WATCH_ENV).is_ok_and(|v| v == "true")
}

/// A line pointing at the server's logs, for failure messages.
pub fn log_hint() -> String {
    match std::env::var_os(APISERVER_LOG_ENV) {
        Some(p) => format!("kube-apiserver log: {}", PathBuf::from(p).display()),
        None => "kube-apiserver log: see the state directory of `cargo xtask apiserver`".into(),
    }
}

/// A kube client for the real server. `retries`: kube's default retry of 429/5xx.
pub async fn real_client(retries: bool) -> anyhow::Result<Client> {
    let mut cfg = real_config().await?;
    cfg.default_retry = retries;
    Client::try_from(cfg).context("building the kube client")
}

/// The kube configuration of the real server (from its kubeconfig).
pub async fn real_config() -> anyhow::Result<kube::Config> {
    let path = kubeconfig_path()?;
    let kc = Kubeconfig::read_from(&path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    Ok(kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?)
}

/// Serve `builder`'s sim on 127.0.0.1 and a kube client for it (client retries off).
pub async fn sim_client(builder: SimBuilder) -> anyhow::Result<(RunningSim, Client)> {
    let sim = builder.build().serve(([127, 0, 0, 1], 0).into()).await?;
    let mut cfg = kube::Config::new(sim.base_url().parse()?);
    cfg.default_retry = false;
    let client = Client::try_from(cfg)?;
    Ok((sim, client))
}

/// `prefix-` and 8 random hex digits: names that do not collide between tests or runs.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..8])
}

/// Create namespace `name` (an existing one is fine).
pub async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let r = raw(client, "POST", "/api/v1/namespaces", Some(&body), None).await?;
    match r.status {
        201 | 409 => Ok(()),
        s => bail!("creating namespace {name}: {s} {}", r.text()),
    }
}

/// A response read whole.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: http::HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl RawResponse {
    /// The body as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.body)
            .with_context(|| format!("body is not JSON ({}): {}", self.status, self.text()))
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `Content-Type` header.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }
}

fn request(
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> anyhow::Result<http::Request<kube::client::Body>> {
    let mut req = http::Request::builder().method(method).uri(path);
    let mut has_ct = false;
    for (k, v) in headers {
        has_ct |= k.eq_ignore_ascii_case("content-type");
        req = req.header(*k, *v);
    }
    let bytes = match body {
        Some(v) => {
            if !has_ct {
                req = req.header("content-type", "application/json");
            }
            serde_json::to_vec(v)?
        }
        None => Vec::new(),
    };
    Ok(req.body(kube::client::Body::from(bytes))?)
}

/// One request through `client` (its authentication and TLS), JSON body if any; `accept`
/// overrides the `Accept` header.
pub async fn raw(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
    accept: Option<&str>,
) -> anyhow::Result<RawResponse> {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("accept", a)).into_iter().collect();
    raw_with_headers(client, method, path, body, &headers).await
}

/// Like [`raw`] with arbitrary headers (e.g. a patch content type).
pub async fn raw_with_headers(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> anyhow::Result<RawResponse> {
    let req = request(method, path, body, headers)?;
    let fut = async {
        let resp = client.send(req).await?;
        let (parts, body) = resp.into_parts();
        let body = body.collect().await?.to_bytes();
        anyhow::Ok(RawResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    };
    tokio::time::timeout(TIMEOUT, fut)
        .await
        .with_context(|| format!("{method} {path} timed out"))?
}

/// What a watch request returned: the status, and the events read.
#[derive(Debug, Clone)]
pub struct WatchOutcome {
    /// HTTP status code.
    pub status: u16,
    /// The events (or, for a non-200 answer, the one `Status` body).
    pub events: Vec<Value>,
    /// The same, as the bytes the server sent (without the newline).
    pub lines: Vec<Bytes>,
    /// Whether the server ended the stream (rather than the reader stopping).
    pub ended: bool,
}

/// Open a watch at `path` and read events until `stop` says so for one, the server ends the
/// stream, or `idle` passes without an event.
pub async fn watch(
    client: &Client,
    path: &str,
    accept: Option<&str>,
    idle: Duration,
    mut stop: impl FnMut(&Value) -> bool,
) -> anyhow::Result<WatchOutcome> {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("accept", a)).into_iter().collect();
    let req = request("GET", path, None, &headers)?;
    let resp = tokio::time::timeout(TIMEOUT, client.send(req))
        .await
        .with_context(|| format!("watch {path} timed out"))??;
    let status = resp.status().as_u16();
    let mut body = resp.into_body().into_data_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let mut lines = Vec::new();
    loop {
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            let line = &line[..line.len() - 1];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let v: Value = serde_json::from_slice(line).with_context(|| {
                format!("watch line is not JSON: {}", String::from_utf8_lossy(line))
            })?;
            let done = stop(&v);
            events.push(v);
            lines.push(Bytes::copy_from_slice(line));
            if done {
                return Ok(WatchOutcome {
                    status,
                    events,
                    lines,
                    ended: false,
                });
            }
        }
        match tokio::time::timeout(idle, body.next()).await {
            Err(_) => {
                return Ok(WatchOutcome {
                    status,
                    events,
                    lines,
                    ended: false,
                });
            }
            Ok(None) => {
                if !buf.iter().all(u8::is_ascii_whitespace) {
                    events.push(serde_json::from_slice(&buf).with_context(|| {
                        format!(
                            "trailing body is not JSON: {}",
                            String::from_utf8_lossy(&buf)
                        )
                    })?);
                    lines.push(Bytes::copy_from_slice(&buf));
                }
                return Ok(WatchOutcome {
                    status,
                    events,
                    lines,
                    ended: true,
                });
            }
            Ok(Some(chunk)) => buf.extend_from_slice(&chunk?),
        }
    }
}

/// Open a watch at `path` and read its body frame by frame until `events` line ends have
/// arrived (or `idle` passes without a frame, or the body ends): how many line ends each data
/// frame held. A frame never spans two HTTP chunks, so a count above 1 means events that
/// shared a chunk.
pub async fn watch_frames(
    client: &Client,
    path: &str,
    events: usize,
    idle: Duration,
) -> anyhow::Result<Vec<usize>> {
    let req = request("GET", path, None, &[])?;
    let resp = tokio::time::timeout(TIMEOUT, client.send(req))
        .await
        .with_context(|| format!("watch {path} timed out"))??;
    let mut body = resp.into_body().into_data_stream();
    let mut ends = Vec::new();
    while ends.iter().sum::<usize>() < events {
        match tokio::time::timeout(idle, body.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(frame)) => ends.push(frame?.iter().filter(|b| **b == b'\n').count()),
        }
    }
    Ok(ends)
}

/// A client for etcd's JSON gateway at [`ETCD_URL_ENV`] (plain HTTP).
fn etcd_client() -> anyhow::Result<Client> {
    let url = std::env::var(ETCD_URL_ENV)
        .with_context(|| format!("{ETCD_URL_ENV} is not set: run with `cargo xtask e2e`"))?;
    Ok(Client::try_from(kube::Config::new(url.parse()?))?)
}

/// Standard base64, as etcd's JSON gateway wants keys and values (k8s-openapi's `ByteString`
/// serializes that way).
fn base64(bytes: &[u8]) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(k8s_openapi::ByteString(
        bytes.to_vec(),
    ))?)
}

/// A POST to etcd's JSON gateway; the answer's JSON, or an error naming the status.
async fn etcd_call(path: &str, body: &Value) -> anyhow::Result<Value> {
    let r = raw(&etcd_client()?, "POST", path, Some(body), None).await?;
    if r.status != 200 {
        bail!("etcd {path} failed: {} {}", r.status, r.text());
    }
    r.json()
}

/// etcd's revision in an answer's header (int64 fields are JSON strings in the gateway).
fn header_revision(v: &Value) -> anyhow::Result<u64> {
    v["header"]["revision"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no revision in etcd's answer: {v}"))
}

/// The etcd key of a namespaced object of the core API group, under kube-apiserver's default
/// `--etcd-prefix`: `/registry/<resource>/<namespace>/<name>` (e.g. resource `configmaps`).
pub fn registry_key(resource: &str, namespace: &str, name: &str) -> String {
    format!("/registry/{resource}/{namespace}/{name}")
}

/// Writes `value` at `key` straight into etcd, bypassing kube-apiserver (which reads JSON as well
/// as its own protobuf encoding from storage). Returns etcd's revision after the write: the new
/// object's resourceVersion.
pub async fn etcd_put(key: &str, value: &[u8]) -> anyhow::Result<u64> {
    let body = json!({"key": base64(key.as_bytes())?, "value": base64(value)?});
    header_revision(&etcd_call("/v3/kv/put", &body).await?)
}

/// Deletes `key` straight from etcd, bypassing kube-apiserver. Returns how many keys were deleted
/// (0 or 1).
pub async fn etcd_delete(key: &str) -> anyhow::Result<u64> {
    let body = json!({"key": base64(key.as_bytes())?});
    let v = etcd_call("/v3/kv/deleterange", &body).await?;
    // Zero-valued fields are left out of the answer.
    match &v["deleted"] {
        Value::Null => Ok(0),
        d => d
            .as_str()
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("unexpected deleterange answer: {v}")),
    }
}

/// Compact etcd up to its current revision (through its JSON gateway at [`ETCD_URL_ENV`]), so
/// older resourceVersions are gone from storage. Returns the compacted revision.
pub async fn compact_etcd() -> anyhow::Result<u64> {
    let head = etcd_call("/v3/kv/range", &json!({"key": "AA==", "limit": 1})).await?;
    let rev = header_revision(&head)?;
    let c = json!({"revision": rev.to_string(), "physical": true});
    etcd_call("/v3/kv/compaction", &c)
        .await
        .context("etcd compaction")?;
    Ok(rev)
}
