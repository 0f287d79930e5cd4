//! The probes router against kinformer-sim: `/metrics` is scraped over
//! HTTP and its series checked; `/readyz` and `/livez` answer as the
//! factory's health says.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::metrics::prometheus_client::registry::Registry;
use kinformer::{EventHandlerFns, SharedInformerFactory};
use kinformer_sim::Sim;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// GETs `path` from `addr`: the status code and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: probes\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).await.unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

/// The value of the series `series` (name and labels, as printed).
fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_readyz_and_livez_are_served() {
    let sim = Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    for i in 0..3 {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("web-{i}"), "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        sim.handle().create("pods", pod).unwrap();
    }
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let factory = SharedInformerFactory::new(kube::Client::try_from(cfg).unwrap());
    let pods = factory.informer::<Pod>();
    pods.add_event_handler(EventHandlerFns::new().on_add(|_: &std::sync::Arc<Pod>, _| {}))
        .unwrap();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = kinformer_examples::probes::router(factory.clone(), Registry::default());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let (status, body) = get(addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("factory not started"), "{body}");

    factory.start().unwrap();
    factory
        .wait_for_cache_sync(Duration::from_secs(15))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    while factory.health().readyz().status != 200 || pods.metrics().handlers[0].delivered < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            factory.health()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(get(addr, "/readyz").await.0, 200);
    assert_eq!(get(addr, "/livez").await.0, 200);

    let (status, metrics) = get(addr, "/metrics").await;
    assert_eq!(status, 200);
    let name = r#"name="/api/v1/pods""#;
    let series = |s: &str| value(&metrics, &s.replace("NAME", name));
    assert_eq!(
        series("reflector_lists_total{NAME}"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        series("kinformer_reflector_watch_list_syncs_total{NAME}"),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        series("kinformer_reflector_lists_completed_total{NAME}"),
        Some(1.0)
    );
    assert_eq!(
        series("informer_queued_items{NAME}"),
        Some(0.0),
        "{metrics}"
    );
    assert_eq!(series("kinformer_informer_cached_objects{NAME}"), Some(3.0));
    assert_eq!(series("kinformer_informer_synced{NAME}"), Some(1.0));
    assert_eq!(series("kinformer_informer_stale{NAME}"), Some(0.0));
    assert_eq!(
        series(r#"kinformer_reflector_phase{NAME,phase="watching"}"#),
        Some(1.0)
    );
    assert_eq!(
        series(r#"kinformer_reflector_phase{NAME,phase="listing"}"#),
        Some(0.0)
    );
    let handler = format!(
        r#"kinformer_handler_delivered_total{{NAME,handler="{}"}}"#,
        pods.metrics().handlers[0].id
    );
    assert_eq!(series(&handler), Some(3.0), "{metrics}");
    assert!(series("reflector_last_resource_version{NAME}").unwrap() > 0.0);
    assert!(
        metrics.contains("# TYPE reflector_watches counter"),
        "{metrics}"
    );
    // The latencies are sampled, the first key queued and the first take
    // of a handler included.
    let applied = series("kinformer_informer_event_to_cache_seconds_count{NAME}").unwrap();
    assert!(applied >= 1.0, "{metrics}");
    let inf = series(r#"kinformer_informer_event_to_cache_seconds_bucket{le="+Inf",NAME}"#);
    assert_eq!(inf, Some(applied), "{metrics}");
    let id = pods.metrics().handlers[0].id;
    let waited = format!(r#"kinformer_handler_wait_seconds_count{{NAME,handler="{id}"}}"#);
    assert!(series(&waited).unwrap_or(0.0) >= 1.0, "{metrics}");
    assert!(metrics.trim_end().ends_with("# EOF"), "{metrics}");

    factory.shutdown().await;
    let (status, body) = get(addr, "/livez").await;
    assert_eq!(status, 503, "{body}");
}
