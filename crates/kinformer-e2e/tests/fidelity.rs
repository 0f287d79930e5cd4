//! Simulator fidelity: one scenario list, run against the real kube-apiserver (through the
//! kubeconfig `cargo xtask e2e` provides) and against an in-process kinformer-sim; what a client
//! sees is normalized (no timestamps, uids, exact resourceVersions or numbers in messages) and
//! must be equal. Differences that cannot be fixed in the sim are listed in docs/testing.md and
//! normalized away here, each with its reason.

#![allow(clippy::unwrap_used, missing_docs)]

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;
use kinformer_e2e::{
    RawResponse, compact_etcd, ensure_namespace, log_hint, raw, raw_with_headers, real_client,
    sim_client, unique, watch, watch_frames, watch_list_enabled,
};
use kinformer_sim::{FaultAction, ResourceDef, RunningSim, Sim};
use kube::Client;
use serde_json::{Map, Value, json};

const META_ACCEPT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const META_LIST_ACCEPT: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// One server under test, with a fresh namespace.
struct Side {
    name: &'static str,
    client: Client,
    ns: String,
    sim: Option<RunningSim>,
}

impl Side {
    async fn real() -> Self {
        let client = real_client(false).await.unwrap();
        let ns = unique("fidelity");
        ensure_namespace(&client, &ns).await.unwrap();
        Self {
            name: "kube-apiserver",
            client,
            ns,
            sim: None,
        }
    }

    async fn sim() -> Self {
        let secrets = ResourceDef::new("", "v1", "secrets", "Secret", true);
        let (sim, client) = sim_client(Sim::builder().stamp_commit_time(false).resource(secrets))
            .await
            .unwrap();
        let ns = unique("fidelity");
        ensure_namespace(&client, &ns).await.unwrap();
        Self {
            name: "kinformer-sim",
            client,
            ns,
            sim: Some(sim),
        }
    }

    /// `/api/v1/namespaces/{ns}/{resource}`.
    fn path(&self, resource: &str) -> String {
        format!("/api/v1/namespaces/{}/{resource}", self.ns)
    }

    async fn req(&self, method: &str, path: &str, body: Option<&Value>) -> RawResponse {
        raw(&self.client, method, path, body, None).await.unwrap()
    }

    async fn req_accept(&self, method: &str, path: &str, accept: &str) -> RawResponse {
        raw(&self.client, method, path, None, Some(accept))
            .await
            .unwrap()
    }

    /// Make every resourceVersion before now unusable for LIST (and continue tokens): etcd
    /// compaction on the real server, a "restart" (history dropped) on the sim.
    async fn expire_history(&self) {
        match &self.sim {
            Some(sim) => sim.handle().trigger(FaultAction::Restart),
            None => {
                compact_etcd().await.unwrap();
            }
        }
    }

    async fn create_cm(&self, name: &str, labels: Value) -> RawResponse {
        self.req("POST", &self.path("configmaps"), Some(&cm(name, labels)))
            .await
    }
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

/// Run `scenario` on both servers and require equal observations.
async fn compare<F>(name: &str, scenario: F)
where
    F: for<'a> Fn(&'a Side) -> BoxFuture<'a, Value>,
{
    let real = Side::real().await;
    let sim = Side::sim().await;
    let a = rank_rvs(placeholder(scenario(&real).await, &real.ns));
    let b = rank_rvs(placeholder(scenario(&sim).await, &sim.ns));
    if a != b {
        let mut diff = Vec::new();
        diff_paths(&a, &b, String::new(), &mut diff);
        panic!(
            "scenario {name}: kinformer-sim differs from kube-apiserver at:\n{}\n\
             --- {} ---\n{}\n--- {} ---\n{}\n{}",
            diff.join("\n"),
            real.name,
            pretty(&a),
            sim.name,
            pretty(&b),
            log_hint()
        );
    }
}

/// The JSON paths where `a` (real) and `b` (sim) differ, with both values.
fn diff_paths(a: &Value, b: &Value, path: String, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                diff_paths(va, vb, format!("{path}/{k}"), out);
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                diff_paths(va, vb, format!("{path}/{i}"), out);
            }
        }
        _ if a != b => out.push(format!("  {path}: real {a} | sim {b}")),
        _ => {}
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// The test namespace's name replaced by `<ns>` in every string.
fn placeholder(v: Value, ns: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace(ns, "<ns>")),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| placeholder(x, ns)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k, placeholder(x, ns)))
                .collect(),
        ),
        other => other,
    }
}

/// Replace every `"RV:<n>"` string by `"RV#k"`, k its rank among the distinct values: relations
/// between resourceVersions stay, their values go.
fn rank_rvs(v: Value) -> Value {
    fn collect(v: &Value, out: &mut BTreeSet<u64>) {
        match v {
            Value::String(s) => {
                if let Some(n) = s.strip_prefix("RV:").and_then(|n| n.parse().ok()) {
                    out.insert(n);
                }
            }
            Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
            Value::Object(o) => o.values().for_each(|x| collect(x, out)),
            _ => {}
        }
    }
    fn replace(v: Value, ranks: &[u64]) -> Value {
        match v {
            Value::String(s) => match s.strip_prefix("RV:").and_then(|n| n.parse::<u64>().ok()) {
                Some(n) => Value::String(format!(
                    "RV#{}",
                    ranks.iter().position(|r| *r == n).unwrap_or(0) + 1
                )),
                None => Value::String(s),
            },
            Value::Array(a) => Value::Array(a.into_iter().map(|x| replace(x, ranks)).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, x)| (k, replace(x, ranks))).collect())
            }
            other => other,
        }
    }
    let mut set = BTreeSet::new();
    collect(&v, &mut set);
    let ranks: Vec<u64> = set.into_iter().collect();
    replace(v, &ranks)
}

/// A resourceVersion, marked for [`rank_rvs`].
fn rv_mark(v: &Value) -> Value {
    match v.as_str() {
        Some(s) if !s.is_empty() => Value::String(format!("RV:{s}")),
        _ => v.clone(),
    }
}

/// Digits replaced by `N`: messages compared without their numbers.
fn no_digits(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last_digit = false;
    for c in s.chars() {
        if c.is_ascii_digit() {
            if !last_digit {
                out.push('N');
            }
            last_digit = true;
        } else {
            out.push(c);
            last_digit = false;
        }
    }
    out
}

/// A `Status` body, normalized: messages without numbers, causes without their prose.
fn status(v: &Value) -> Value {
    let mut out = Map::new();
    for k in ["kind", "apiVersion", "status", "reason", "code"] {
        if let Some(x) = v.get(k) {
            out.insert(k.into(), x.clone());
        }
    }
    if let Some(m) = v.get("message").and_then(Value::as_str) {
        // What follows these markers is a decoder's own prose (Go's vs Rust's).
        let m = ["json parse error:", "continue key is not valid:"]
            .iter()
            .find_map(|mark| m.find(mark).map(|i| &m[..i + mark.len()]))
            .unwrap_or(m);
        out.insert("message".into(), no_digits(m).into());
    }
    if let Some(md) = v.get("metadata").and_then(Value::as_object) {
        let keys: Vec<&String> = md.keys().collect();
        out.insert("metadata-keys".into(), json!(keys));
    }
    if let Some(d) = v.get("details").and_then(Value::as_object) {
        let mut dd = Map::new();
        for (k, x) in d {
            match k.as_str() {
                "causes" => {
                    let causes: Vec<Value> = x
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| json!({"reason": c.get("reason"), "field": c.get("field")}))
                        .collect();
                    dd.insert("causes".into(), Value::Array(causes));
                }
                "uid" => {
                    dd.insert("uid".into(), "<uid>".into());
                }
                _ => {
                    dd.insert(k.clone(), x.clone());
                }
            }
        }
        out.insert("details".into(), Value::Object(dd));
    }
    Value::Object(out)
}

/// An answer expected to be a `Status`: code, content type and normalized body.
fn status_answer(r: &RawResponse) -> Value {
    json!({
        "http": r.status,
        "content-type": r.content_type(),
        "body": r.json().map(|v| status(&v)).unwrap_or_else(|_| json!({"not-json": r.text()})),
    })
}

/// An object's shape: kind, apiVersion, metadata keys and the stable metadata values.
fn shape(v: &Value) -> Value {
    let md = v.get("metadata").cloned().unwrap_or(Value::Null);
    // managedFields: the sim does no server-side field management (docs/testing.md).
    let mut md_keys: Vec<String> = md
        .as_object()
        .map(|m| {
            m.keys()
                .filter(|k| *k != "managedFields")
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    md_keys.sort();
    let mut top: Vec<String> = v
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    top.sort();
    json!({
        "keys": top,
        "kind": v.get("kind"),
        "apiVersion": v.get("apiVersion"),
        "metadata-keys": md_keys,
        "name": md.get("name"),
        "namespace": md.get("namespace"),
        "labels": md.get("labels"),
        "annotations": md.get("annotations"),
        "resourceVersion": md.get("resourceVersion").map(rv_mark),
        "data": v.get("data"),
    })
}

/// The order of the members in `bytes` as sent: their names, with the members of a `metadata`,
/// `object` or `items` member nested (`{"metadata": [..]}`); an array gives the orders of its
/// elements. `managedFields` is left out (the sim does no field management: docs/testing.md).
fn order(bytes: &[u8]) -> Value {
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    struct Order(Value);
    struct OrderVisitor;
    impl<'de> Deserialize<'de> for Order {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(OrderVisitor)
        }
    }
    impl<'de> Visitor<'de> for OrderVisitor {
        type Value = Order;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Order, A::Error> {
            let mut names = Vec::new();
            while let Some(name) = map.next_key::<String>()? {
                if ["metadata", "object", "items"].contains(&name.as_str()) {
                    let Order(inner) = map.next_value()?;
                    names.push(json!({ name: inner }));
                } else {
                    map.next_value::<IgnoredAny>()?;
                    if name != "managedFields" {
                        names.push(json!(name));
                    }
                }
            }
            Ok(Order(Value::Array(names)))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Order, A::Error> {
            let mut elements = Vec::new();
            while let Some(Order(e)) = seq.next_element()? {
                elements.push(e);
            }
            Ok(Order(Value::Array(elements)))
        }
        fn visit_str<E>(self, _: &str) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
        fn visit_unit<E>(self) -> Result<Order, E> {
            Ok(Order(Value::Null))
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Order::deserialize(&mut de).map_or_else(|e| json!(format!("not JSON: {e}")), |o| o.0)
}

/// A list page's shape: envelope, continue/remaining and the items' names (and shapes).
fn list_shape(r: &RawResponse) -> Value {
    if r.status != 200 {
        return status_answer(r);
    }
    let v = r.json().unwrap();
    let md = &v["metadata"];
    let items: Vec<Value> = v["items"].as_array().cloned().unwrap_or_default();
    json!({
        "http": r.status,
        "kind": v.get("kind"),
        "apiVersion": v.get("apiVersion"),
        "metadata-keys": md.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()),
        "resourceVersion": md.get("resourceVersion").map(rv_mark),
        "has-continue": md.get("continue").and_then(Value::as_str).is_some_and(|c| !c.is_empty()),
        "remainingItemCount": md.get("remainingItemCount"),
        "names": items.iter().map(|i| i["metadata"]["name"].clone()).collect::<Vec<_>>(),
        "item-shapes": items.iter().map(shape).collect::<Vec<_>>(),
    })
}

fn continue_of(r: &RawResponse) -> String {
    r.json().unwrap()["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn rv_of(r: &RawResponse) -> String {
    r.json().unwrap()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// A watch event, normalized: type and the object's shape (or normalized Status).
fn event(e: &Value) -> Value {
    let obj = &e["object"];
    let body = if e["type"] == "ERROR" {
        status(obj)
    } else {
        shape(obj)
    };
    json!({"type": e["type"], "object": body})
}

fn enc(s: &str) -> String {
    s.replace('%', "%25")
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D")
        .replace(',', "%2C")
        .replace('!', "%21")
}

macro_rules! fidelity {
    ($(#[$m:meta])* $name:ident, |$side:ident| $body:block) => {
        $(#[$m])*
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        #[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
        async fn $name() {
            async fn scenario($side: &Side) -> Value $body
            compare(stringify!($name), |s| Box::pin(scenario(s))).await;
        }
    };
}

fidelity!(
    /// Watch events of 2 KiB or more come as HTTP chunks of their own (kube-apiserver's response
    /// writer buffers 2 KiB before it writes a chunk), also when they are replayed back to back:
    /// what the simulator's default `--watch-chunks apiserver` copies (a client pays per chunk).
    large_watch_events_are_chunks_of_their_own,
    |s| {
        let cms = s.path("configmaps");
        let list = s.req("GET", &cms, None).await.json().unwrap();
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        for i in 0..4 {
            let mut c = cm(&format!("big-{i}"), json!({}));
            c["data"] = json!({"k": "x".repeat(3000)});
            assert_eq!(s.req("POST", &cms, Some(&c)).await.status, 201);
        }
        let frames = watch_frames(
            &s.client,
            &format!("{cms}?watch=true&resourceVersion={rv}"),
            4,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(frames.iter().max(), Some(&1), "{}: {frames:?}", s.name);
        json!({
            "events": frames.iter().sum::<usize>(),
            "most events ending in one frame": frames.iter().max(),
        })
    }
);

fidelity!(
    /// 404s: a missing object (GET, PUT, DELETE), an unknown resource.
    not_found,
    |s| {
        let cms = s.path("configmaps");
        let get = s.req("GET", &format!("{cms}/missing"), None).await;
        let put = s
            .req("PUT", &format!("{cms}/missing"), Some(&cm("missing", json!({}))))
            .await;
        let del = s.req("DELETE", &format!("{cms}/missing"), None).await;
        let unknown = s.req("GET", &s.path("foos"), None).await;
        let unknown_group = s.req("GET", "/apis/nope.example.com/v1/foos", None).await;
        json!({
            "get": status_answer(&get),
            "put": status_answer(&put),
            "delete": status_answer(&del),
            "unknown-resource": status_answer(&unknown),
            "unknown-group": status_answer(&unknown_group),
        })
    }
);

fidelity!(
    /// 409s: create twice, stale PUT, stale delete precondition; the objects written.
    conflicts,
    |s| {
        let cms = s.path("configmaps");
        let a = format!("{cms}/a");
        let created = s.create_cm("a", json!({"x": "1"})).await;
        let again = s.create_cm("a", json!({"x": "1"})).await;
        let mut obj = created.json().unwrap();
        let stale = obj.clone();
        obj["data"]["k"] = json!("v2");
        let updated = s.req("PUT", &a, Some(&obj)).await;
        let mut stale_put = stale.clone();
        stale_put["data"]["k"] = json!("v3");
        let conflict = s.req("PUT", &a, Some(&stale_put)).await;
        let mut unconditional = stale.clone();
        unconditional["metadata"]["resourceVersion"] = json!("");
        unconditional["data"]["k"] = json!("v4");
        let forced = s.req("PUT", &a, Some(&unconditional)).await;
        let stale_rv = stale["metadata"]["resourceVersion"].clone();
        let del_opts = json!({"apiVersion": "v1", "kind": "DeleteOptions",
            "preconditions": {"resourceVersion": stale_rv}});
        let stale_delete = s.req("DELETE", &a, Some(&del_opts)).await;
        let deleted = s.req("DELETE", &a, None).await;
        json!({
            "create": {"http": created.status, "object": shape(&created.json().unwrap())},
            "create-again": status_answer(&again),
            "update": {"http": updated.status, "object": shape(&updated.json().unwrap())},
            "stale-update": status_answer(&conflict),
            "unconditional-update": {"http": forced.status, "object": shape(&forced.json().unwrap())},
            "stale-delete": status_answer(&stale_delete),
            "delete": {"http": deleted.status, "object": shape(&deleted.json().unwrap())},
        })
    }
);

fidelity!(
    /// 400/415/422: invalid names, missing names, namespace mismatch, bad JSON, bad media type.
    invalid_writes,
    |s| {
        let cms = s.path("configmaps");
        let bad_name = s.create_cm("Bad_Name", json!({})).await;
        let no_name = s
            .req("POST", &cms, Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})))
            .await;
        let mut other_ns = cm("c", json!({}));
        other_ns["metadata"]["namespace"] = json!("elsewhere");
        let mismatch = s.req("POST", &cms, Some(&other_ns)).await;
        let not_json = raw_with_headers(
            &s.client,
            "POST",
            &cms,
            Some(&json!("not an object")),
            &[],
        )
        .await
        .unwrap();
        let media = raw_with_headers(
            &s.client,
            "POST",
            &cms,
            Some(&cm("m", json!({}))),
            &[("content-type", "text/plain")],
        )
        .await
        .unwrap();
        json!({
            "bad-name": status_answer(&bad_name),
            "no-name": status_answer(&no_name),
            "namespace-mismatch": status_answer(&mismatch),
            "not-an-object": status_answer(&not_json),
            "media-type": status_answer(&media),
        })
    }
);

fidelity!(
    /// 405s: verbs a path does not serve.
    method_not_allowed,
    |s| {
        let cms = s.path("configmaps");
        let put_collection = s.req("PUT", &cms, Some(&cm("x", json!({})))).await;
        let post_object = s.req("POST", &format!("{cms}/x"), Some(&cm("x", json!({})))).await;
        let post_all_namespaces = s
            .req("POST", "/api/v1/configmaps", Some(&cm("x", json!({}))))
            .await;
        json!({
            "put-collection": status_answer(&put_collection),
            "post-object": status_answer(&post_object),
            "post-all-namespaces": status_answer(&post_all_namespaces),
        })
    }
);

fidelity!(
    /// Bad LIST/WATCH parameters.
    invalid_list_params,
    |s| {
        let cms = s.path("configmaps");
        let mut out = Map::new();
        for q in [
            "watch=true&sendInitialEvents=true",
            "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
            "watch=true&resourceVersionMatch=NotOlderThan",
            "watch=true&resourceVersionMatch=Exact&sendInitialEvents=false",
        ] {
            if q.contains("sendInitialEvents") && !watch_list_enabled() {
                // With the WatchList gate off the real server forbids sendInitialEvents (422);
                // the sim always serves it (docs/testing.md).
                continue;
            }
            let w = watch(
                &s.client,
                &format!("{cms}?{q}"),
                None,
                Duration::from_secs(2),
                |_| true,
            )
            .await
            .unwrap();
            out.insert(
                q.into(),
                json!({"http": w.status, "events": w.events.iter().map(|e| if w.status == 200 { event(e) } else { status(e) }).collect::<Vec<_>>()}),
            );
        }
        for q in [
            "resourceVersion=abc",
            "limit=abc",
            "resourceVersionMatch=Exact",
            "resourceVersionMatch=Bogus&resourceVersion=1",
            "resourceVersionMatch=Exact&resourceVersion=0",
            "continue=garbage!",
            "sendInitialEvents=true",
        ] {
            let r = s.req("GET", &format!("{cms}?{q}"), None).await;
            out.insert(q.into(), status_answer(&r));
        }
        Value::Object(out)
    }
);

fidelity!(
    /// `limit`/`continue`: page sizes, remainingItemCount, the first page's resourceVersion on
    /// every page, a write between pages not showing, selectors dropping remainingItemCount.
    list_paging,
    |s| {
        let cms = s.path("configmaps");
        for i in 0..5 {
            let r = s
                .create_cm(&format!("c{i}"), json!({"parity": if i % 2 == 0 { "even" } else { "odd" }}))
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
        let p1 = s.req("GET", &format!("{cms}?limit=2"), None).await;
        s.create_cm("c9", json!({"parity": "odd"})).await;
        let t1 = continue_of(&p1);
        let p2 = s.req("GET", &format!("{cms}?limit=2&continue={}", enc(&t1)), None).await;
        let t2 = continue_of(&p2);
        let p3 = s.req("GET", &format!("{cms}?limit=2&continue={}", enc(&t2)), None).await;
        let fresh = s.req("GET", &cms, None).await;
        let sel = s
            .req("GET", &format!("{cms}?limit=2&labelSelector={}", enc("parity=even")), None)
            .await;
        let sel2 = s
            .req(
                "GET",
                &format!("{cms}?limit=2&labelSelector={}&continue={}", enc("parity=even"), enc(&continue_of(&sel))),
                None,
            )
            .await;
        let rv0 = s.req("GET", &format!("{cms}?limit=2&resourceVersion=0"), None).await;
        let exact = s
            .req(
                "GET",
                &format!("{cms}?limit=2&resourceVersion={}&resourceVersionMatch=Exact", rv_of(&p1)),
                None,
            )
            .await;
        let continue_with_rv = s
            .req("GET", &format!("{cms}?limit=2&continue={}&resourceVersion=5", enc(&t1)), None)
            .await;
        json!({
            "page1": list_shape(&p1),
            "page2": list_shape(&p2),
            "page3": list_shape(&p3),
            "fresh": list_shape(&fresh),
            "selector-page1": list_shape(&sel),
            "selector-page2": list_shape(&sel2),
            "rv0-limit": list_shape(&rv0),
            "exact-rv-page1": list_shape(&exact),
            "continue-with-rv": status_answer(&continue_with_rv),
        })
    }
);

fidelity!(
    /// 410: LIST at a compacted resourceVersion, an expired continue token (HTTP, with the token
    /// of an inconsistent continuation), a watch from a compacted resourceVersion (ERROR event).
    /// On secrets, which the harness serves without watch cache so etcd compaction reaches
    /// them at once; messages are not compared (etcd's wording vs the watch cache's, which the
    /// sim follows: docs/testing.md).
    too_old_resource_versions,
    |s| {
        let secrets = s.path("secrets");
        // `data` and `type` given: the sim does not default or convert `stringData`.
        let secret = |n: &str| json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": n}, "data": {"k": "dg=="}, "type": "Opaque"});
        for i in 0..3 {
            let r = s.req("POST", &secrets, Some(&secret(&format!("o{i}")))).await;
            assert_eq!(r.status, 201, "{}", r.text());
        }
        let first = s.req("GET", &format!("{secrets}?limit=1"), None).await;
        let old_rv = rv_of(&first);
        let token = continue_of(&first);
        // Two writes, so the first one after the list's resourceVersion is compacted too.
        s.req("POST", &secrets, Some(&secret("later"))).await;
        s.req("POST", &secrets, Some(&secret("later2"))).await;
        s.expire_history().await;
        let exact = s
            .req(
                "GET",
                &format!("{secrets}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
                None,
            )
            .await;
        let cont = s.req("GET", &format!("{secrets}?limit=1&continue={}", enc(&token)), None).await;
        // The continue token handed back with the 410 continues at the latest state.
        let cont_body = cont.json().unwrap_or(Value::Null);
        let fallback = match cont_body["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => {
                let r = s.req("GET", &format!("{secrets}?limit=10&continue={}", enc(t)), None).await;
                list_shape(&r)
            }
            _ => Value::Null,
        };
        let w = watch(
            &s.client,
            &format!("{secrets}?watch=true&resourceVersion={old_rv}"),
            None,
            Duration::from_secs(5),
            |e| e["type"] == "ERROR",
        )
        .await
        .unwrap();
        let no_message = |mut v: Value| {
            if let Some(o) = v.pointer_mut("/body").and_then(Value::as_object_mut) {
                o.remove("message");
            }
            if let Some(o) = v.pointer_mut("/object").and_then(Value::as_object_mut) {
                o.remove("message");
            }
            v
        };
        json!({
            "list-exact-compacted": no_message(status_answer(&exact)),
            "expired-continue": no_message(status_answer(&cont)),
            "inconsistent-continue": fallback,
            "watch-too-old": {
                "http": w.status,
                "events": w.events.iter().map(|e| no_message(event(e))).collect::<Vec<_>>(),
                "ended": w.ended,
            },
        })
    }
);

fidelity!(
    /// Streaming list (`sendInitialEvents=true`): initial ADDED events, then the bookmark with the
    /// `k8s.io/initial-events-end` annotation and nothing but apiVersion, kind and
    /// metadata.resourceVersion (+ that annotation); also metadata-only.
    watch_list_bookmark,
    |s| {
        if !watch_list_enabled() {
            // The real server forbids sendInitialEvents with the WatchList gate off (422); the sim
            // always serves it. Nothing to compare.
            return json!("skipped: WatchList is off");
        }
        let cms = s.path("configmaps");
        for n in ["b1", "b2"] {
            s.create_cm(n, json!({})).await;
        }
        let list_rv = rv_of(&s.req("GET", &cms, None).await);
        let q = "watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        let full = watch(&s.client, &format!("{cms}?{q}"), None, Duration::from_secs(10), |e| {
            e["type"] == "BOOKMARK"
        })
        .await
        .unwrap();
        let meta = watch(
            &s.client,
            &format!("{cms}?{q}"),
            Some(META_ACCEPT),
            Duration::from_secs(10),
            |e| e["type"] == "BOOKMARK",
        )
        .await
        .unwrap();
        let with_rv = watch(
            &s.client,
            &format!("{cms}?{q}&resourceVersion={list_rv}"),
            None,
            Duration::from_secs(10),
            |e| e["type"] == "BOOKMARK",
        )
        .await
        .unwrap();
        // A bookmark's RV is the server's newest, which any write anywhere in the
        // cluster moves (kube-apiserver's own leases, the other e2e tests): only its
        // relation to the list's RV is compared, not its rank among the objects'.
        let relative = |e: &Value| {
            let mut e = e.clone();
            if e["type"] == "BOOKMARK"
                && let Some(rv) = e.pointer_mut("/object/metadata/resourceVersion")
            {
                let n: u64 = rv.as_str().unwrap_or("0").parse().unwrap_or(0);
                let l: u64 = list_rv.parse().unwrap_or(0);
                *rv = json!(if n >= l { "at-or-after-list-rv" } else { "before-list-rv" });
            }
            e
        };
        let raw_bookmark = |w: &kinformer_e2e::WatchOutcome| {
            w.events.last().map_or(Value::Null, relative)
        };
        let events = |w: &kinformer_e2e::WatchOutcome| {
            w.events.iter().map(|e| event(&relative(e))).collect::<Vec<_>>()
        };
        json!({
            "full": {"http": full.status, "events": events(&full)},
            "full-bookmark-exact": raw_bookmark(&full),
            "metadata": {"http": meta.status, "events": events(&meta)},
            "metadata-bookmark-exact": raw_bookmark(&meta),
            "from-list-rv": {"http": with_rv.status, "events": events(&with_rv)},
        })
    }
);

fidelity!(
    /// Watch replay from a resourceVersion: ADDED/MODIFIED/DELETED in commit order with the
    /// resourceVersions the writes returned; the DELETE answer's RV is the DELETED event's.
    resource_version_ordering,
    |s| {
        let cms = s.path("configmaps");
        let start_rv = rv_of(&s.req("GET", &cms, None).await);
        let a = s.create_cm("a", json!({})).await.json().unwrap();
        let b = s.create_cm("b", json!({})).await.json().unwrap();
        let mut a2 = a.clone();
        a2["data"]["k"] = json!("v2");
        let a2 = s.req("PUT", &format!("{cms}/a"), Some(&a2)).await.json().unwrap();
        let b2 = raw_with_headers(
            &s.client,
            "PATCH",
            &format!("{cms}/b"),
            Some(&json!({"metadata": {"labels": {"p": "1"}}})),
            &[("content-type", "application/merge-patch+json")],
        )
        .await
        .unwrap()
        .json()
        .unwrap();
        let del = s.req("DELETE", &format!("{cms}/a"), None).await.json().unwrap();
        let list = s.req("GET", &cms, None).await;
        let get_b = s.req("GET", &format!("{cms}/b"), None).await.json().unwrap();
        let w = watch(
            &s.client,
            &format!("{cms}?watch=true&resourceVersion={start_rv}"),
            None,
            Duration::from_secs(5),
            |e| e["type"] == "DELETED",
        )
        .await
        .unwrap();
        let rvs: Vec<u64> = [&a, &b, &a2, &b2]
            .iter()
            .map(|o| o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap())
            .collect();
        let list_rv: u64 = rv_of(&list).parse().unwrap();
        json!({
            "writes": [shape(&a), shape(&b), shape(&a2), shape(&b2), shape(&del)],
            "write-rvs-increase": rvs.windows(2).all(|w| w[0] < w[1]),
            "list-rv-at-or-after-last-write": list_rv >= rvs[3],
            "list": list_shape(&list),
            "get-b": shape(&get_b),
            "watch": {"http": w.status, "events": w.events.iter().map(event).collect::<Vec<_>>()},
        })
    }
);

fidelity!(
    /// The order of members as sent, which clients that scan the bytes before parsing rely on:
    /// an object's top level and `metadata` in GET, LIST (and the list's own, with `continue`
    /// and `remainingItemCount`), a watch line and the metadata-only forms, and the streaming
    /// list's bookmark.
    member_order,
    |s| {
        let cms = s.path("configmaps");
        for name in ["o1", "o2"] {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"b": "2", "a": "1"}, "annotations": {"n": "v"}},
                "data": {"k": "v"}});
            s.req("POST", &cms, Some(&body)).await;
        }
        let get = s.req("GET", &format!("{cms}/o1"), None).await;
        let page = s.req("GET", &format!("{cms}?limit=1"), None).await;
        let meta_get = s.req_accept("GET", &format!("{cms}/o1"), META_ACCEPT).await;
        let meta_list = s.req_accept("GET", &cms, META_LIST_ACCEPT).await;
        let from_zero = format!("{cms}?watch=true&resourceVersion=0");
        let watch_lines = |accept| {
            watch(
                &s.client,
                &from_zero,
                accept,
                Duration::from_secs(3),
                |e| e["object"]["metadata"]["name"] == "o2",
            )
        };
        let w = watch_lines(None).await.unwrap();
        let meta_w = watch_lines(Some(META_ACCEPT)).await.unwrap();
        let bookmark = if watch_list_enabled() {
            let q = "watch=true&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
            let w = watch(&s.client, &format!("{cms}?{q}"), None, Duration::from_secs(10), |e| {
                e["type"] == "BOOKMARK"
            })
            .await
            .unwrap();
            w.lines.last().map_or(Value::Null, |l| order(l))
        } else {
            json!("skipped: WatchList is off")
        };
        json!({
            "get": order(&get.body),
            "list-page": order(&page.body),
            "metadata-get": order(&meta_get.body),
            "metadata-list": order(&meta_list.body),
            "watch": w.lines.iter().map(|l| order(l)).collect::<Vec<_>>(),
            "metadata-watch": meta_w.lines.iter().map(|l| order(l)).collect::<Vec<_>>(),
            "bookmark": bookmark,
        })
    }
);

fidelity!(
    /// Metadata-only answers for GET, LIST and WATCH, and the mismatched `as=` forms.
    metadata_only,
    |s| {
        let cms = s.path("configmaps");
        s.create_cm("m1", json!({"l": "v"})).await;
        let get = s.req_accept("GET", &format!("{cms}/m1"), META_ACCEPT).await;
        let list = s.req_accept("GET", &cms, META_LIST_ACCEPT).await;
        let list_as_object = s.req_accept("GET", &cms, META_ACCEPT).await;
        let get_as_list = s.req_accept("GET", &format!("{cms}/m1"), META_LIST_ACCEPT).await;
        let w = watch(
            &s.client,
            &format!("{cms}?watch=true&resourceVersion=0"),
            Some(META_ACCEPT),
            Duration::from_secs(3),
            |e| e["type"] == "ADDED",
        )
        .await
        .unwrap();
        let one = |r: &RawResponse| {
            if r.status == 200 {
                json!({"http": 200, "object": shape(&r.json().unwrap())})
            } else {
                status_answer(r)
            }
        };
        json!({
            "get": one(&get),
            "list": list_shape(&list),
            "list-with-object-accept": if list_as_object.status == 200 { list_shape(&list_as_object) } else { status_answer(&list_as_object) },
            "get-with-list-accept": one(&get_as_list),
            "watch": {"http": w.status, "events": w.events.iter().map(event).collect::<Vec<_>>()},
        })
    }
);
