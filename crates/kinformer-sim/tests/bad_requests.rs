//! Bad input is answered with the kube-apiserver `Status` shape and code, and the sim keeps serving.

mod common;

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kinformer_sim::Sim;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_body_is_400() {
    let (_sim, client) = start(Sim::builder()).await;
    let (code, _, body) = raw(
        &client,
        "POST",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        None,
        "{not json",
    )
    .await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
    let (code, _, body) = raw(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/pods/x",
        Some("application/merge-patch+json"),
        None,
        "[",
    )
    .await;
    assert_eq!(code, 400, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_resource_and_missing_object_are_404() {
    let (_sim, client) = start(Sim::builder()).await;
    for path in ["/api/v1/widgets", "/api/v1/namespaces/default/nodes"] {
        let (code, _, body) = raw(&client, "GET", path, None, None, "").await;
        assert_eq!(code, 404, "{path}");
        let v = assert_status(&body, 404, "NotFound");
        assert_eq!(
            v["message"],
            "the server could not find the requested resource"
        );
    }
    // Outside `/api`, kube-apiserver's fallthrough answers in plain text.
    for path in ["/apis/example.com/v1/things", "/nonsense"] {
        let (code, headers, body) = raw(&client, "GET", path, None, None, "").await;
        assert_eq!(code, 404, "{path}");
        assert_eq!(body, "404 page not found\n", "{path}");
        assert_eq!(
            headers["content-type"], "text/plain; charset=utf-8",
            "{path}"
        );
    }
    let (_, _, body) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods/missing",
        None,
        None,
        "",
    )
    .await;
    let v = assert_status(&body, 404, "NotFound");
    assert_eq!(v["message"], "pods \"missing\" not found");
    assert_eq!(v["details"], json!({"name": "missing", "kind": "pods"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_method_is_405() {
    let (_sim, client) = start(Sim::builder()).await;
    let (code, _, body) = raw(
        &client,
        "PUT",
        "/api/v1/namespaces/default/pods",
        Some("application/json"),
        None,
        "{}",
    )
    .await;
    assert_eq!(code, 405);
    assert_status(&body, 405, "MethodNotAllowed");
    let (code, _, _) = raw(
        &client,
        "POST",
        "/api/v1/pods",
        Some("application/json"),
        None,
        "{}",
    )
    .await;
    assert_eq!(code, 405);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_selectors_are_400() {
    let (_sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    for lp in [
        ListParams::default().labels("app in (a"),
        ListParams::default().labels("a b"),
        ListParams::default().fields("status.phase=Running"),
    ] {
        let status = api_err(within(api.list(&lp)).await.unwrap_err());
        assert_eq!(
            (status.code, status.reason.as_str()),
            (400, "BadRequest"),
            "{lp:?}"
        );
    }
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/configmaps?fieldSelector=spec.nodeName%3Dx",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_resource_version_and_list_options() {
    let (_sim, client) = start(Sim::builder()).await;
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/pods?resourceVersion=abc",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/pods?watch=true&resourceVersion=abc",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 400, "{body}");
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/pods?resourceVersionMatch=Exact",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 422);
    assert_status(&body, 422, "Invalid");
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/pods?resourceVersion=999999&resourceVersionMatch=Exact",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 504, "{body}");
    assert_status(&body, 504, "Timeout");
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/pods?watch=true&resourceVersion=999999",
        None,
        None,
        "",
    )
    .await;
    assert_eq!(code, 504, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_errors_409_and_422_then_keeps_serving() {
    let (_sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let p = typed(pod("default", "dup", json!({}), "n"));
    within(api.create(&PostParams::default(), &p))
        .await
        .unwrap();
    let status = api_err(
        within(api.create(&PostParams::default(), &p))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status.code, status.reason.as_str()),
        (409, "AlreadyExists")
    );
    let bad = typed(pod("default", "Not_Valid", json!({}), "n"));
    let status = api_err(
        within(api.create(&PostParams::default(), &bad))
            .await
            .unwrap_err(),
    );
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let other_ns = typed(pod("elsewhere", "x", json!({}), "n"));
    let status = api_err(
        within(api.create(&PostParams::default(), &other_ns))
            .await
            .unwrap_err(),
    );
    assert_eq!(status.code, 400);
    assert_eq!(
        within(api.list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_shard_selector_is_a_500_without_a_reason_as_kube_apiserver_answers() {
    let (_sim, client) = start(Sim::builder()).await;
    // As kube-apiserver v1.37 with ShardedListAndWatch answers (checked by
    // hand against it): the parser's message, code 500, no `reason`.
    let q = "shardRange(object.metadata.uid%2C%20%270x0%27%2C%20%270x8000000000000000%27)";
    for watch in ["", "&watch=true"] {
        let path = format!("/api/v1/namespaces/default/configmaps?shardSelector={q}{watch}");
        let (code, _, body) = raw(&client, "GET", &path, None, None, "").await;
        assert_eq!(code, 500, "{path}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            v["message"],
            "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)"
        );
        assert!(v.get("reason").is_none(), "{v}");
    }
}
