//! Read-your-writes: waiting for the cache to reach a resource version.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kinformer_controller::{ControllerError, ObjectKey, Observed, VersionWaiter};

#[tokio::test]
async fn returns_at_once_when_the_cache_is_already_there() {
    let cms = informer("there", vec![cm("a", 7)]);
    let waiter = VersionWaiter::new(&cms).unwrap();
    let key = ObjectKey::new(Some("ns"), "a");
    let got = within("wait", waiter.wait_for(&key, "5", T)).await.unwrap();
    assert!(matches!(got, Observed::Present(o) if rv(o.as_ref()) == 7));
    assert_eq!(waiter.waiting(), 0);
}

#[tokio::test]
async fn returns_once_the_cache_reaches_the_version() {
    let cms = informer("reach", vec![cm("a", 1)]);
    let waiter = Arc::new(VersionWaiter::new(&cms).unwrap());
    let key = ObjectKey::new(Some("ns"), "a");
    let w = Arc::clone(&waiter);
    let k = key.clone();
    let wait = tokio::spawn(async move { w.wait_for(&k, "10", T).await });
    until("the waiter", || waiter.waiting() == 1).await;
    // Older versions do not satisfy it; a newer one does.
    cms.queue().update(cm("a", 9)).unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(waiter.waiting(), 1);
    cms.queue().update(cm("a", 11)).unwrap();
    let got = within("wait", wait).await.unwrap().unwrap();
    assert!(matches!(got, Observed::Present(o) if rv(o.as_ref()) == 11));
}

#[tokio::test]
async fn a_new_object_and_a_delete_are_observed() {
    let cms = informer("create", vec![]);
    let waiter = Arc::new(VersionWaiter::new(&cms).unwrap());
    let key = ObjectKey::new(Some("ns"), "new");
    let (w, k) = (Arc::clone(&waiter), key.clone());
    let created = tokio::spawn(async move { w.wait_for(&k, "3", T).await });
    until("the waiter", || waiter.waiting() == 1).await;
    cms.queue().add(cm("new", 3)).unwrap();
    assert!(matches!(
        within("create", created).await.unwrap().unwrap(),
        Observed::Present(_)
    ));

    let (w, k) = (Arc::clone(&waiter), key.clone());
    let deleted = tokio::spawn(async move { w.wait_for(&k, "5", T).await });
    until("the waiter", || waiter.waiting() == 1).await;
    cms.queue().delete(cm("new", 5)).unwrap();
    assert!(matches!(
        within("delete", deleted).await.unwrap().unwrap(),
        Observed::Deleted
    ));
}

#[tokio::test]
async fn times_out_with_a_typed_error_and_forgets_the_waiter() {
    let cms = informer("late", vec![cm("a", 1)]);
    let waiter = VersionWaiter::new(&cms).unwrap();
    let key = ObjectKey::new(Some("ns"), "a");
    let err = waiter
        .wait_for(&key, "100", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ControllerError::WaitTimeout { resource_version, .. } if resource_version == "100"),
        "{err}"
    );
    assert_eq!(waiter.waiting(), 0);
}

#[tokio::test]
async fn opaque_versions_must_match_exactly() {
    let cms = informer("opaque", vec![]);
    let waiter = Arc::new(VersionWaiter::new(&cms).unwrap());
    let mut obj = cm("a", 0);
    obj.metadata.resource_version = Some("abc".into());
    cms.queue().add(obj.clone()).unwrap();
    let key = ObjectKey::new(Some("ns"), "a");
    until("the cache", || cms.indexer().get("ns/a").is_some()).await;
    assert!(
        waiter
            .wait_for(&key, "abd", Duration::from_millis(30))
            .await
            .is_err(),
        "a different opaque version was taken as reached"
    );
    assert!(matches!(
        waiter.wait_for(&key, "abc", T).await.unwrap(),
        Observed::Present(_)
    ));
}
