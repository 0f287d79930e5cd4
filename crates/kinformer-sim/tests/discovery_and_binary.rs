//! Discovery, /version, CRD-like resources via `DynamicObject`, and the `kinformer-sim` binary.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kinformer_sim::{ResourceDef, Sim};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::discovery::{Discovery, Scope};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_builtin_and_registered_resources() {
    let widget = ResourceDef::new("example.com", "v1", "widgets", "Widget", true);
    let (_sim, client) = start(Sim::builder().resource(widget)).await;
    let version = within(client.apiserver_version()).await.unwrap();
    assert_eq!(version.major, "1");
    for aggregated in [false, true] {
        let d = Discovery::new(client.clone());
        let d = if aggregated {
            within(d.run_aggregated()).await.unwrap()
        } else {
            within(d.run()).await.unwrap()
        };
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let (ar, caps) = d.resolve_gvk(&gvk).expect("widget discovered");
        assert_eq!(ar.plural, "widgets");
        assert_eq!(caps.scope, Scope::Namespaced);
        let (pods, _) = d
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
            .expect("pods discovered");
        assert_eq!(pods.plural, "pods");
        let (nodes, caps) = d
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Node"))
            .expect("nodes discovered");
        assert_eq!(
            (nodes.plural.as_str(), caps.scope),
            ("nodes", Scope::Cluster)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemaless_resource_round_trips_as_dynamic_object() {
    let widget = ResourceDef::new("example.com", "v1", "widgets", "Widget", true);
    let (_sim, client) = start(Sim::builder().resource(widget)).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let mut obj = DynamicObject::new("w1", &ar);
    obj.data = json!({"spec": {"size": 3}});
    within(api.create(&PostParams::default(), &obj))
        .await
        .unwrap();
    let list = within(api.list(&ListParams::default())).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].data["spec"]["size"], 3);
    assert_eq!(list.items[0].types.as_ref().unwrap().kind, "Widget");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_fills_prints_listening_line_and_serves() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kinformer-sim"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--objects",
            "50",
            "--namespaces",
            "5",
            "--faults",
            "none",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    });
    let line = within(line).await.unwrap();
    let url = line
        .trim()
        .strip_prefix("LISTENING ")
        .unwrap_or_else(|| panic!("bad line {line:?}"))
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let pods: Api<Pod> = Api::all(client);
    let list = within(pods.list(&ListParams::default())).await.unwrap();
    assert_eq!(list.items.len(), 50);
    let body = serde_json::to_vec(&list.items[0]).unwrap().len();
    assert!(body > 3000, "template pods are ~4 KB, got {body}");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn background_sim_serves_for_non_async_callers() {
    use std::io::{Read, Write};
    let bg = kinformer_sim::RunningSim::start_in_background(
        Sim::builder().build(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    assert_eq!(bg.handle().fill("pods", 10, 2).unwrap(), 10);
    let mut conn = std::net::TcpStream::connect(bg.addr()).unwrap();
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        conn,
        "GET /api/v1/pods?limit=3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.contains("\"remainingItemCount\":7"), "{resp}");
    assert!(bg.base_url().starts_with("http://127.0.0.1:"));
    bg.shutdown();
}
