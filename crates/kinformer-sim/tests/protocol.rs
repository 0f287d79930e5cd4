//! Protocol tests: kube's own client against an in-process sim.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kinformer_sim::{COMMIT_ANNOTATION, Sim, WatchChunks};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_with_limit_and_continue_is_consistent() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 25);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let first = within(api.list(&ListParams::default().limit(10)))
        .await
        .unwrap();
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let list_rv = first.metadata.resource_version.clone().unwrap();
    // A write after the first page must not show up in later pages (snapshot at the list RV).
    sim.handle()
        .create("pods", pod("default", "p-999", json!({}), "n"))
        .unwrap();
    let mut names: Vec<String> = first
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    let mut token = first.metadata.continue_.clone();
    let mut pages = 1;
    while let Some(t) = token.filter(|t| !t.is_empty()) {
        let page = within(api.list(&ListParams::default().limit(10).continue_token(&t)))
            .await
            .unwrap();
        assert_eq!(
            page.metadata.resource_version.as_deref(),
            Some(list_rv.as_str())
        );
        names.extend(page.items.iter().map(|p| p.metadata.name.clone().unwrap()));
        token = page.metadata.continue_;
        pages += 1;
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> = (0..25).map(|i| format!("p-{i:03}")).collect();
    assert_eq!(names, expected);
    // A fresh unpaged list sees the new pod.
    assert_eq!(
        within(api.list(&ListParams::default()))
            .await
            .unwrap()
            .items
            .len(),
        26
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_token_expires_with_410() {
    let (sim, client) = start(Sim::builder().history(5)).await;
    fill(&sim, "default", 6);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let first = within(api.list(&ListParams::default().limit(2)))
        .await
        .unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    for i in 0..10 {
        sim.handle()
            .create("pods", pod("default", &format!("x-{i}"), json!({}), "n"))
            .unwrap();
    }
    let err = within(api.list(&ListParams::default().limit(2).continue_token(&token)))
        .await
        .unwrap_err();
    let status = api_err(err);
    assert_eq!(status.code, 410);
    assert_eq!(status.reason, "Expired");
    // Garbage tokens are a 400.
    let err = within(api.list(&ListParams::default().limit(2).continue_token("garbage!")))
        .await
        .unwrap_err();
    assert_eq!(api_err(err).code, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_rv_then_watch_from_it_gets_only_later_events() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 5);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let list = within(api.list(&ListParams::default())).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    assert_eq!(rv.parse::<u64>().unwrap(), sim.handle().current_rv());
    let created = sim
        .handle()
        .create("pods", pod("default", "later", json!({}), "n"))
        .unwrap();
    sim.handle().delete("pods", "default", "p-000").unwrap();
    let mut stream = within(api.watch(&WatchParams::default().disable_bookmarks(), &rv))
        .await
        .unwrap()
        .boxed();
    match within(stream.try_next()).await.unwrap().unwrap() {
        WatchEvent::Added(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("later"));
            assert_eq!(
                p.metadata.resource_version.unwrap().parse::<u64>().unwrap(),
                created.meta.rv
            );
        }
        other => panic!("expected ADDED later, got {other:?}"),
    }
    match within(stream.try_next()).await.unwrap().unwrap() {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("p-000"));
            assert!(p.metadata.resource_version.unwrap().parse::<u64>().unwrap() > created.meta.rv);
        }
        other => panic!("expected DELETED p-000, got {other:?}"),
    }
    // Resource versions are one counter across resources.
    let ns = sim
        .handle()
        .create("namespaces", json!({"metadata": {"name": "other"}}))
        .unwrap();
    assert_eq!(ns.meta.rv, sim.handle().current_rv());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_too_old_rv_gets_410_error_event() {
    let (sim, client) = start(Sim::builder().history(3)).await;
    let old = sim.handle().current_rv();
    fill(&sim, "default", 10);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let mut stream = within(api.watch(&WatchParams::default(), &old.to_string()))
        .await
        .unwrap()
        .boxed();
    match within(stream.try_next()).await.unwrap().unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
            assert!(
                e.message.contains("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert_eq!(sim.handle().stats().watches_too_old, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_arrive_periodically() {
    let (sim, client) = start(Sim::builder().bookmark_interval(Duration::from_millis(100))).await;
    fill(&sim, "default", 2);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let rv = sim.handle().current_rv();
    let mut stream = within(api.watch(&WatchParams::default(), &rv.to_string()))
        .await
        .unwrap()
        .boxed();
    // Other resources' writes advance the global RV; the bookmark must carry it.
    sim.handle()
        .create(
            "configmaps",
            json!({"metadata": {"name": "cm", "namespace": "default"}}),
        )
        .unwrap();
    let want = sim.handle().current_rv();
    let mut seen = 0;
    while seen < 2 {
        match within(stream.try_next()).await.unwrap().unwrap() {
            WatchEvent::Bookmark(b) => {
                let brv: u64 = b.metadata.resource_version.parse().unwrap();
                assert!(brv >= rv);
                if brv == want {
                    seen += 1;
                }
                assert!(
                    !b.metadata
                        .annotations
                        .contains_key("k8s.io/initial-events-end")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(sim.handle().stats().bookmarks_sent >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors_filter_list_and_watch() {
    let (sim, client) = start(Sim::builder()).await;
    let h = sim.handle();
    let mk = |name: &str, app: &str, tier: Option<&str>, node: &str| {
        let labels = match tier {
            Some(t) => json!({"app": app, "tier": t}),
            None => json!({"app": app}),
        };
        h.create("pods", pod("default", name, labels, node))
            .unwrap();
    };
    mk("a1", "a", Some("fe"), "node-1");
    mk("a2", "a", Some("be"), "node-2");
    mk("b1", "b", None, "node-1");
    mk("c1", "c", Some("fe"), "node-1");
    h.create("pods", pod("other", "a3", json!({"app": "a"}), "node-1"))
        .unwrap();
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let names = |l: kube::api::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let lp = ListParams::default().labels("app in (a,b),tier!=be");
    assert_eq!(names(within(api.list(&lp)).await.unwrap()), ["a1", "b1"]);
    assert_eq!(
        names(
            within(api.list(&ListParams::default().labels("!tier")))
                .await
                .unwrap()
        ),
        ["b1"]
    );
    assert_eq!(
        names(
            within(api.list(&ListParams::default().labels("app=a,tier")))
                .await
                .unwrap()
        ),
        ["a1", "a2"]
    );
    let lp = ListParams::default().fields("spec.nodeName=node-1,metadata.name!=c1");
    assert_eq!(names(within(api.list(&lp)).await.unwrap()), ["a1", "b1"]);
    let all: Api<Pod> = Api::all(client);
    let lp = ListParams::default().fields("metadata.namespace=other");
    assert_eq!(names(within(all.list(&lp)).await.unwrap()), ["a3"]);

    // Watch with a selector: non-matching writes are invisible, leaving the selector is a DELETED.
    let rv = h.current_rv().to_string();
    let wp = WatchParams::default().labels("app=a").disable_bookmarks();
    let mut stream = within(api.watch(&wp, &rv)).await.unwrap().boxed();
    h.create("pods", pod("default", "b2", json!({"app": "b"}), "node-1"))
        .unwrap();
    h.create("pods", pod("default", "a4", json!({"app": "a"}), "node-1"))
        .unwrap();
    h.patch(
        "pods",
        "default",
        "a1",
        &json!({"metadata": {"labels": {"app": "z"}}}),
    )
    .unwrap();
    h.patch(
        "pods",
        "default",
        "b1",
        &json!({"metadata": {"labels": {"app": "a"}}}),
    )
    .unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let ev = within(stream.try_next()).await.unwrap().unwrap();
        got.push(match ev {
            WatchEvent::Added(p) => format!("ADDED {}", p.metadata.name.unwrap()),
            WatchEvent::Deleted(p) => {
                // The previous state (still matching) at the new resourceVersion.
                assert_eq!(p.metadata.labels.as_ref().unwrap()["app"], "a");
                assert_eq!(
                    p.metadata.resource_version.as_deref(),
                    h.get("pods", "default", "a1")
                        .unwrap()
                        .map(|o| o.meta.rv.to_string())
                        .as_deref()
                );
                format!("DELETED {}", p.metadata.name.unwrap())
            }
            WatchEvent::Modified(p) => format!("MODIFIED {}", p.metadata.name.unwrap()),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(got, ["ADDED a4", "DELETED a1", "ADDED b1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_initial_events_streams_all_objects_then_annotated_bookmark() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 30);
    let api: Api<Pod> = Api::namespaced(client, "default");
    // Raw: 30 ADDED, then the bookmark with the initial-events-end annotation at the current RV.
    let wp = WatchParams::streaming_lists();
    let mut stream = within(api.watch(&wp, "0")).await.unwrap().boxed();
    for _ in 0..30 {
        assert!(matches!(
            within(stream.try_next()).await.unwrap().unwrap(),
            WatchEvent::Added(_)
        ));
    }
    match within(stream.try_next()).await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                b.metadata
                    .annotations
                    .get("k8s.io/initial-events-end")
                    .map(String::as_str),
                Some("true")
            );
            assert_eq!(
                b.metadata.resource_version,
                sim.handle().current_rv().to_string()
            );
        }
        other => panic!("expected the end bookmark, got {other:?}"),
    }
    // kube's watcher in streaming-list mode: InitApply for each object, then InitDone.
    let mut events = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut applied = 0;
    loop {
        match within(events.try_next()).await.unwrap().unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(_) => applied += 1,
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(applied, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_only_list_and_watch() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 3);
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = within(api.list_metadata(&ListParams::default()))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 3);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("p-000"));
    assert_eq!(list.items[0].metadata.labels.as_ref().unwrap()["app"], "a");
    // On the wire: PartialObjectMetadataList with PartialObjectMetadata items and no spec.
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods?limit=2",
        None,
        Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"),
        "",
    )
    .await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(v["items"].as_array().unwrap().len(), 2);
    assert_eq!(v["items"][0]["kind"], "PartialObjectMetadata");
    assert!(v["items"][0].get("spec").is_none() && v["items"][0].get("status").is_none());
    assert!(v["metadata"]["continue"].is_string());

    let rv = sim.handle().current_rv().to_string();
    let mut stream = within(api.watch_metadata(&WatchParams::default(), &rv))
        .await
        .unwrap()
        .boxed();
    sim.handle()
        .patch(
            "pods",
            "default",
            "p-001",
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .unwrap();
    match within(stream.try_next()).await.unwrap().unwrap() {
        WatchEvent::Modified(m) => {
            assert_eq!(m.metadata.name.as_deref(), Some("p-001"));
            assert_eq!(m.metadata.labels.unwrap()["x"], "y");
            assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
        }
        other => panic!("unexpected {other:?}"),
    }
    let (code, _, body) = raw(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods/p-002",
        None,
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"),
        "",
    )
    .await;
    assert_eq!(code, 200);
    assert!(
        body.starts_with(r#"{"kind":"PartialObjectMetadata""#) && !body.contains("\"spec\""),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_put_gets_409_conflict() {
    let (sim, client) = start(Sim::builder()).await;
    fill(&sim, "default", 1);
    let api: Api<Pod> = Api::namespaced(client, "default");
    let original = within(api.get("p-000")).await.unwrap();
    let mut fresh = original.clone();
    fresh
        .metadata
        .labels
        .get_or_insert_default()
        .insert("v".into(), "1".into());
    let updated = within(api.replace("p-000", &PostParams::default(), &fresh))
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        original.metadata.resource_version
    );
    let err = within(api.replace("p-000", &PostParams::default(), &original))
        .await
        .unwrap_err();
    let status = api_err(err);
    assert_eq!(status.code, 409);
    assert_eq!(status.reason, "Conflict");
    assert!(
        status.message.contains("the object has been modified"),
        "{}",
        status.message
    );
    // The stored object is still the successful update.
    let now = within(api.get("p-000")).await.unwrap();
    assert_eq!(
        now.metadata.resource_version,
        updated.metadata.resource_version
    );
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_set_server_fields_and_commit_stamp() {
    let (_sim, client) = start(Sim::builder()).await;
    let api: Api<Pod> = Api::namespaced(client, "default");
    let created = within(api.create(
        &PostParams::default(),
        &typed(pod("default", "w", json!({"a": "1"}), "n1")),
    ))
    .await
    .unwrap();
    let md = &created.metadata;
    assert!(!md.uid.as_deref().unwrap_or("").is_empty());
    assert!(md.creation_timestamp.is_some());
    assert_eq!(md.generation, Some(1));
    let stamp: u128 = md.annotations.as_ref().unwrap()[COMMIT_ANNOTATION]
        .parse()
        .unwrap();
    assert!(stamp > 1_600_000_000_000_000_000);
    let err = within(api.create(
        &PostParams::default(),
        &typed(pod("default", "w", json!({}), "n1")),
    ))
    .await
    .unwrap_err();
    assert_eq!(api_err(err).reason, "AlreadyExists");

    // Metadata-only change keeps the generation; a spec change bumps it.
    let p = within(api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"b": "2"}}})),
    ))
    .await
    .unwrap();
    assert_eq!(p.metadata.generation, Some(1));
    assert_eq!(p.metadata.uid, created.metadata.uid);
    assert_eq!(p.metadata.labels.as_ref().unwrap().len(), 2);
    let p = within(api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"nodeName": "n2"}})),
    ))
    .await
    .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("n2"));

    let deleted = within(api.delete("w", &DeleteParams::default()))
        .await
        .unwrap();
    let obj = deleted.left().expect("the deleted object");
    assert!(
        obj.metadata
            .resource_version
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > p.metadata.resource_version.unwrap().parse::<u64>().unwrap()
    );
    let status = api_err(within(api.get("w")).await.unwrap_err());
    assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_and_reflector_store_equal_the_sim_after_churn() {
    let (sim, client) = start(Sim::builder().bookmark_interval(Duration::from_millis(200))).await;
    sim.handle().fill("pods", 200, 4).unwrap();
    let api: Api<Pod> = Api::all(client);
    let (reader, writer) = reflector::store::<Pod>();
    let stream = reflector(
        writer,
        watcher(api, watcher::Config::default().page_size(50)),
    )
    .applied_objects();
    let driver = tokio::spawn(async move {
        let mut s = stream.boxed();
        while let Some(r) = s.next().await {
            r.unwrap();
        }
    });
    within(reader.wait_until_ready()).await.unwrap();
    let churn = sim
        .handle()
        .churn(kinformer_sim::ChurnConfig {
            kind: "pods".into(),
            rate_per_sec: Some(2000),
            duration: Duration::from_millis(800),
            namespaces: 4,
            ..Default::default()
        })
        .unwrap();
    let report = tokio::task::spawn_blocking(move || churn.join())
        .await
        .unwrap();
    assert!(report.total() > 100, "{report:?}");
    assert!(
        report.updates > 0 && report.creates > 0 && report.deletes > 0,
        "{report:?}"
    );
    let (_, want) = sim.handle().keys_and_versions("pods").unwrap();
    let want: BTreeMap<String, u64> = want.into_iter().collect();
    let mut got = BTreeMap::new();
    for _ in 0..200 {
        got = reader
            .state()
            .iter()
            .map(|p| {
                let key = format!(
                    "{}/{}",
                    p.metadata.namespace.as_deref().unwrap(),
                    p.metadata.name.as_deref().unwrap()
                );
                (
                    key,
                    p.metadata
                        .resource_version
                        .as_deref()
                        .unwrap()
                        .parse::<u64>()
                        .unwrap(),
                )
            })
            .collect();
        if got == want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
    driver.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_churn_updates_distinct_objects_by_restamping_them() {
    let (sim, client) = start(Sim::builder()).await;
    sim.handle().fill("pods", 200, 4).unwrap();
    let (_, before) = sim.handle().keys_and_versions("pods").unwrap();
    let before: BTreeMap<String, u64> = before.into_iter().collect();
    let churn = sim
        .handle()
        .churn(kinformer_sim::ChurnConfig {
            kind: "pods".into(),
            rate_per_sec: None,
            duration: Duration::from_secs(60),
            updates: 1,
            creates: 0,
            deletes: 0,
            max_writes: Some(150),
            round_robin: true,
            ..Default::default()
        })
        .unwrap();
    let report = tokio::task::spawn_blocking(move || churn.join())
        .await
        .unwrap();
    assert_eq!((report.updates, report.errors), (150, 0), "{report:?}");
    let (_, after) = sim.handle().keys_and_versions("pods").unwrap();
    let changed: Vec<&String> = after
        .iter()
        .filter(|(k, rv)| before.get(k) != Some(rv))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed.len(), 150, "each update went to another object");
    // The restamped object is the old one with a new resourceVersion and commit time.
    let (ns, name) = changed[0].split_once('/').unwrap();
    let api: Api<Pod> = Api::namespaced(client, ns);
    let pod = within(api.get(name)).await.unwrap();
    let rv: u64 = pod
        .metadata
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv > before[changed[0].as_str()]);
    let stamp = &pod.metadata.annotations.as_ref().unwrap()[COMMIT_ANNOTATION];
    assert!(stamp.parse::<u128>().is_ok(), "{stamp}");
    assert_eq!(pod.metadata.generation, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_events_arrive_whole_and_in_order_however_they_are_chunked() {
    for chunks in [WatchChunks::Apiserver, WatchChunks::Batched] {
        let (sim, client) = start(Sim::builder().watch_chunks(chunks)).await;
        let api: Api<Pod> = Api::namespaced(client, "default");
        let list = within(api.list(&ListParams::default())).await.unwrap();
        let rv = list.metadata.resource_version.unwrap();
        let mut stream = within(api.watch(&WatchParams::default().disable_bookmarks(), &rv))
            .await
            .unwrap()
            .boxed();
        // Events below and above kube-apiserver's 2 KiB chunk, committed back to
        // back so that the simulator sends them together.
        let names: Vec<String> = (0..40).map(|i| format!("p-{i:02}")).collect();
        let pods = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let mut p = pod("default", name, json!({}), "n");
                let pad = if i % 3 == 0 { 3000 } else { 10 };
                p["metadata"]["annotations"] = json!({"pad": "x".repeat(pad)});
                p
            })
            .collect();
        assert_eq!(sim.handle().create_many("pods", pods).unwrap(), names.len());
        for name in &names {
            match within(stream.try_next()).await.unwrap().unwrap() {
                WatchEvent::Added(p) => {
                    assert_eq!(p.metadata.name.as_ref(), Some(name), "{chunks:?}");
                    let pad = &p.metadata.annotations.unwrap()["pad"];
                    assert!(pad.len() == 3000 || pad.len() == 10, "{chunks:?}");
                }
                other => panic!("{chunks:?}: expected ADDED {name}, got {other:?}"),
            }
        }
        // The same objects as a WatchList's initial events.
        let mut initial = within(api.watch(&WatchParams::streaming_lists(), "0"))
            .await
            .unwrap()
            .boxed();
        for name in &names {
            match within(initial.try_next()).await.unwrap().unwrap() {
                WatchEvent::Added(p) => {
                    assert_eq!(p.metadata.name.as_ref(), Some(name), "{chunks:?}")
                }
                other => panic!("{chunks:?}: expected initial ADDED {name}, got {other:?}"),
            }
        }
        match within(initial.try_next()).await.unwrap().unwrap() {
            WatchEvent::Bookmark(b) => assert!(
                b.metadata
                    .annotations
                    .contains_key("k8s.io/initial-events-end"),
                "{chunks:?}"
            ),
            other => panic!("{chunks:?}: expected the end bookmark, got {other:?}"),
        }
    }
}
