//! A metadata-only reflector asked for protobuf: it reads the protobuf
//! WatchList stream and LIST page kube-apiserver v1.37.2 wrote
//! (`kinformer-wire`'s `tests/fixtures/protobuf/`), pages of protobuf LISTs and watches from
//! kinformer-sim, and still reads a server that answers in JSON.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use common::{TIMEOUT, client, eventually, fast};
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::SharedIndexInformer;
use kinformer_reflector::{CancellationToken, Decoders, ListWatchTarget, Reflector};
use kube_core::PartialObjectMeta;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const WATCH_PB: &[u8] =
    include_bytes!("../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-watchlist.pb");
const WATCH_JSON: &[u8] =
    include_bytes!("../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-watch.json");

/// What the fake answers a watch with, and the `Accept` headers it saw.
struct Fake {
    protobuf: bool,
    accepts: Mutex<Vec<String>>,
}

async fn watch(State(fake): State<Arc<Fake>>, req: Request) -> Response {
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    fake.accepts.lock().push(accept);
    let (body, content_type): (Bytes, &str) = if fake.protobuf {
        (
            Bytes::from_static(WATCH_PB),
            "application/vnd.kubernetes.protobuf;stream=watch",
        )
    } else {
        // The same Pod's event in JSON, then the initial-events-end bookmark.
        let mut b = WATCH_JSON.trim_ascii_end().to_vec();
        b.extend_from_slice(b"\n{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"75\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n");
        (b.into(), "application/json")
    };
    // Frames cut into small chunks, so that they span chunk ends; then the
    // stream stays open.
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    tokio::spawn(async move {
        for piece in body.chunks(100) {
            if tx.send(Ok(Bytes::copy_from_slice(piece))).await.is_err() {
                return;
            }
        }
        tx.closed().await;
    });
    Response::builder()
        .header("content-type", content_type)
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .unwrap()
}

/// Serves `app` on 127.0.0.1:0.
async fn serve(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// A started metadata-only informer and a reflector for it against `addr`,
/// asking for protobuf watches.
fn metadata_informer(
    addr: std::net::SocketAddr,
    config: kinformer_reflector::ReflectorConfig,
) -> (
    SharedIndexInformer<PartialObjectMeta<Pod>>,
    Reflector<PartialObjectMeta<Pod>>,
) {
    let informer = SharedIndexInformer::<PartialObjectMeta<Pod>>::builder()
        .threads(1)
        .build();
    informer.start().unwrap();
    let target = ListWatchTarget::of::<Pod>(&(), None).metadata_only(true);
    let reflector = Reflector::new(client(addr), target, Arc::clone(informer.queue()))
        .decoders(Decoders::partial_object_meta())
        .config(config.protobuf(true));
    (informer, reflector)
}

async fn sync_pod_0(protobuf_answer: bool) -> (Vec<String>, u64) {
    let fake = Arc::new(Fake {
        protobuf: protobuf_answer,
        accepts: Mutex::new(Vec::new()),
    });
    let addr = serve(
        axum::Router::new()
            .route("/api/v1/pods", axum::routing::get(watch))
            .with_state(fake.clone()),
    )
    .await;
    let (informer, reflector) = metadata_informer(addr, fast(true).skip_managed_fields(true));
    let metrics = reflector.metrics();
    let token = CancellationToken::new();
    let task = tokio::spawn(reflector.run(token.clone()));
    eventually("pod-0 cached at resourceVersion 75", || {
        informer.has_synced()
            && informer.indexer().get("pb/pod-0").is_some_and(|p| {
                p.metadata.resource_version.as_deref() == Some("75")
                    && p.metadata.annotations.as_ref().unwrap()["kinformer.dev/seq"] == "1"
                    && p.metadata.managed_fields.is_none()
            })
    })
    .await;
    token.cancel();
    tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
    informer.shutdown();
    let accepts = fake.accepts.lock().clone();
    (accepts, metrics.get().protobuf_watches)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_watch_list_stream_syncs_the_cache() {
    let (accepts, protobuf_watches) = sync_pod_0(true).await;
    assert_eq!(protobuf_watches, 1);
    assert!(
        accepts[0].starts_with("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata"),
        "{accepts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_json_is_read_as_json() {
    let (accepts, protobuf_watches) = sync_pod_0(false).await;
    assert_eq!(protobuf_watches, 0);
    assert!(accepts[0].contains("application/json"), "{accepts:?}");
}

/// Against kinformer-sim, which answers metadata-only watches in protobuf:
/// a WatchList sync, then deletes and updates, and the cache ends equal to
/// the sim's objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_watch_against_the_sim_follows_churn() {
    let m = sync_and_churn_against_the_sim(fast(true)).await;
    assert_eq!(
        (m.watch_list_syncs, m.lists, m.protobuf_list_pages),
        (1, 1, 0)
    );
}

/// The same over a LIST asked for in pages of 7: the sim answers it in
/// protobuf, and whole (one page) at resourceVersion "0", as
/// kube-apiserver's watch cache does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_list_against_the_sim_follows_churn() {
    let m = sync_and_churn_against_the_sim(fast(false).page_size(7)).await;
    assert_eq!((m.watch_list_syncs, m.lists), (0, 1));
    assert_eq!((m.list_requests, m.protobuf_list_pages), (1, 1), "{m:?}");
}

/// kinformer-sim with 50 Pods, `default/p-00` to `default/p-49`.
async fn sim_with_50_pods() -> kinformer_sim::RunningSim {
    let sim = kinformer_sim::Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let pod = |name: String| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "a"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    for i in 0..50 {
        sim.handle()
            .create("pods", pod(format!("p-{i:02}")))
            .unwrap();
    }
    sim
}

/// The sim's protobuf LIST pages follow `limit` and `continue` as its JSON
/// ones do: 50 Pods in 8 pages of at most 7, every item once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sim_pages_protobuf_lists() {
    use http_body_util::BodyExt;
    use kinformer_reflector::protobuf::{decode_list, decode_list_item};
    let sim = sim_with_50_pods().await;
    let client = client(sim.addr());
    let target = ListWatchTarget::of::<Pod>(&(), None).metadata_only(true);
    let (mut listed, mut pages, mut remaining) = (Vec::new(), 0, Vec::new());
    let mut cont: Option<String> = None;
    loop {
        let req = target
            .list_request_as("", 7, cont.as_deref(), true)
            .unwrap();
        let body = client.send(req).await.unwrap().into_body();
        let page = decode_list(body.collect().await.unwrap().to_bytes()).unwrap();
        pages += 1;
        remaining.push(page.remaining_item_count);
        for item in page.items {
            let m = decode_list_item::<Pod>(item, page.item_types.clone(), true).unwrap();
            assert_eq!(m.types.as_ref().unwrap().kind, "PartialObjectMetadata");
            let m = m.metadata;
            listed.push((
                format!("default/{}", m.name.unwrap()),
                m.resource_version.unwrap().parse::<u64>().unwrap(),
            ));
        }
        match page.continue_token {
            Some(c) => cont = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, 8);
    assert_eq!(remaining[0], Some(43));
    assert_eq!(listed, sim.handle().keys_and_versions("pods").unwrap().1);
}

/// 50 Pods in kinformer-sim, a protobuf metadata informer synced over
/// `config`, then 10 deletes and 10 patches: the cache must end equal to
/// the sim's objects, every event read from protobuf frames.
async fn sync_and_churn_against_the_sim(
    config: kinformer_reflector::ReflectorConfig,
) -> kinformer_reflector::ReflectorMetrics {
    let sim = sim_with_50_pods().await;
    let (informer, reflector) = metadata_informer(sim.addr(), config);
    let metrics = reflector.metrics();
    let token = CancellationToken::new();
    let task = tokio::spawn(reflector.run(token.clone()));
    eventually("synced", || informer.has_synced()).await;
    for i in 0..10 {
        let h = sim.handle();
        h.delete("pods", "default", &format!("p-{i:02}")).unwrap();
        let labels = serde_json::json!({"metadata": {"labels": {"x": "y"}}});
        h.patch("pods", "default", &format!("p-{:02}", 49 - i), &labels)
            .unwrap();
    }
    let cache = || {
        let mut v: Vec<(String, u64)> = informer
            .indexer()
            .list()
            .iter()
            .map(|p| {
                let m = &p.metadata;
                let rv = m
                    .resource_version
                    .as_deref()
                    .unwrap_or("0")
                    .parse()
                    .unwrap();
                (
                    format!("default/{}", m.name.clone().unwrap_or_default()),
                    rv,
                )
            })
            .collect();
        v.sort();
        v
    };
    eventually("cache matches the sim", || {
        cache() == sim.handle().keys_and_versions("pods").unwrap().1
    })
    .await;
    let patched = informer.indexer().get("default/p-49").unwrap();
    assert_eq!(patched.metadata.labels.as_ref().unwrap()["x"], "y");
    let m = metrics.get();
    assert_eq!(sim.handle().stats().lists, m.list_requests);
    assert_eq!(m.decode_errors, 0);
    assert!(m.protobuf_watches >= 1, "{m:?}");
    token.cancel();
    tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
    informer.shutdown();
    m
}

const LIST_PB: &[u8] =
    include_bytes!("../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-list.pb");

/// LISTs answered with kube-apiserver's protobuf page, watches left open
/// and silent; the `Accept` headers of the LISTs.
async fn protobuf_list(State(accepts): State<Arc<Mutex<Vec<String>>>>, req: Request) -> Response {
    if req.uri().query().unwrap_or_default().contains("watch=true") {
        return Response::builder()
            .header(
                "content-type",
                "application/vnd.kubernetes.protobuf;stream=watch",
            )
            .body(Body::from_stream(tokio_stream::pending::<
                Result<Bytes, Infallible>,
            >()))
            .unwrap();
    }
    let accept = req.headers().get(http::header::ACCEPT).unwrap();
    accepts.lock().push(accept.to_str().unwrap().to_string());
    Response::builder()
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .body(Body::from(LIST_PB))
        .unwrap()
}

/// Without WatchList, the LIST is asked for in protobuf first, and the page
/// kube-apiserver wrote is cached as its JSON form decodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_list_page_from_kube_apiserver_syncs_the_cache() {
    let accepts = Arc::new(Mutex::new(Vec::new()));
    let addr = serve(
        axum::Router::new()
            .route("/api/v1/pods", axum::routing::get(protobuf_list))
            .with_state(accepts.clone()),
    )
    .await;
    let (informer, reflector) = metadata_informer(addr, fast(false));
    let metrics = reflector.metrics();
    let token = CancellationToken::new();
    let task = tokio::spawn(reflector.run(token.clone()));
    eventually("synced", || informer.has_synced()).await;
    let json: serde_json::Value = serde_json::from_slice(LIST_JSON).unwrap();
    let expected: PartialObjectMeta<Pod> =
        serde_json::from_value(json["items"][0].clone()).unwrap();
    let cached = informer.indexer().get("pb/pod-0").unwrap();
    assert_eq!(cached.metadata, expected.metadata);
    assert!(cached.metadata.managed_fields.is_some());
    let m = metrics.get();
    assert_eq!((m.lists, m.protobuf_list_pages), (1, 1));
    assert!(
        accepts.lock()[0]
            .starts_with("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList"),
        "{accepts:?}"
    );
    token.cancel();
    tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
    informer.shutdown();
}

const LIST_JSON: &[u8] =
    include_bytes!("../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-list.json");

/// Watches seen; the first is answered 410 with a protobuf `Status`.
async fn expired_then_stream(State(watches): State<Arc<Mutex<u32>>>, req: Request) -> Response {
    use tokio_stream::StreamExt;
    let is_watch = req.uri().query().unwrap_or_default().contains("watch=true");
    if !is_watch {
        return Response::builder()
            .header("content-type", "application/json")
            .body(Body::from(LIST_JSON))
            .unwrap();
    }
    let first = {
        let mut n = watches.lock();
        *n += 1;
        *n == 1
    };
    if first {
        let status = kinformer_reflector::protobuf::encode_status(410, "Expired", "too old", 0);
        return Response::builder()
            .status(410)
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(Body::from(status))
            .unwrap();
    }
    Response::builder()
        .header(
            "content-type",
            "application/vnd.kubernetes.protobuf;stream=watch",
        )
        .body(Body::from_stream(
            tokio_stream::iter([Ok::<_, Infallible>(Bytes::from_static(WATCH_PB))])
                .chain(tokio_stream::pending()),
        ))
        .unwrap()
}

/// An error answered in protobuf is read as the `Status` it is: a 410 on
/// the WatchList request is `Expired`, and the reflector lists instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_status_answer_is_read_as_the_error_it_is() {
    let watches = Arc::new(Mutex::new(0u32));
    let addr = serve(
        axum::Router::new()
            .route("/api/v1/pods", axum::routing::get(expired_then_stream))
            .with_state(watches.clone()),
    )
    .await;
    let errors = Arc::new(Mutex::new(Vec::new()));
    let errs = errors.clone();
    let (informer, reflector) = metadata_informer(addr, fast(true));
    let reflector = reflector.on_watch_error(move |e: &kinformer_reflector::ReflectorError| {
        errs.lock().push((e.code(), e.is_expired(), e.to_string()))
    });
    let token = CancellationToken::new();
    let task = tokio::spawn(reflector.run(token.clone()));
    eventually("pod-0 at resourceVersion 75", || {
        informer
            .indexer()
            .get("pb/pod-0")
            .is_some_and(|p| p.metadata.resource_version.as_deref() == Some("75"))
    })
    .await;
    let first = errors.lock().first().cloned().unwrap();
    // Reason and message come from the protobuf `Status`, not the HTTP line.
    assert_eq!(
        first,
        (
            Some(410),
            true,
            "API error 410 Expired: too old".to_string()
        )
    );
    assert!(*watches.lock() >= 2);
    token.cancel();
    tokio::time::timeout(TIMEOUT, task).await.unwrap().unwrap();
    informer.shutdown();
}
