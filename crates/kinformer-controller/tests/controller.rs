//! Controller behaviours: triggers and mapping, actions, errors and panics,
//! one reconcile per key, timeouts and shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kinformer_controller::{Action, Controller, ObjectKey, WorkQueue};
use kinformer_core::{OWNER_UID_INDEX, SharedIndexInformer};
use parking_lot::Mutex;

#[derive(Debug)]
struct Failed;

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failed")
    }
}

/// Records each reconcile's key and resource version.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, u64)>>);

impl Seen {
    fn push(&self, o: &ConfigMap) {
        self.0
            .lock()
            .push((o.metadata.name.clone().unwrap(), rv(o)));
    }
    fn names(&self) -> HashSet<String> {
        self.0.lock().iter().map(|(n, _)| n.clone()).collect()
    }
    fn count(&self, name: &str) -> usize {
        self.0.lock().iter().filter(|(n, _)| n == name).count()
    }
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

fn no_policy(_: Arc<ConfigMap>, _: &Failed, _: Arc<Seen>) -> Action {
    Action::backoff()
}

#[tokio::test]
async fn reconciles_every_object_of_the_initial_list_and_live_changes() {
    let cms = informer("cms", (0..50).map(|i| cm(&format!("c{i}"), 1)).collect());
    let seen = Arc::new(Seen::default());
    let controller = Controller::new(&cms);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            Ok::<_, Failed>(Action::await_change())
        },
        no_policy,
        Arc::clone(&seen),
    ));
    until("the initial list", || seen.names().len() == 50).await;
    cms.queue().update(cm("c7", 2)).unwrap();
    until("the live update", || {
        seen.0.lock().contains(&("c7".into(), 2))
    })
    .await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(stats.succeeded, stats.reconciles);
    assert!(stats.reconciles >= 51);
    assert_eq!(stats.panicked + stats.failed + stats.timed_out, 0);
}

#[tokio::test]
async fn owner_mapping_reconciles_the_owner_of_a_changed_child() {
    let cms = informer("owners", vec![cm("a", 1), cm("b", 1)]);
    let secrets: SharedIndexInformer<Secret> =
        informer("children", vec![owned_secret("s", 1, "a")]);
    let seen = Arc::new(Seen::default());
    let controller = Controller::new(&cms).owns(&secrets);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            Ok::<_, Failed>(Action::await_change())
        },
        no_policy,
        Arc::clone(&seen),
    ));
    until("the initial list", || seen.names().len() == 2).await;
    let before_a = seen.count("a");
    let before_b = seen.count("b");
    secrets.queue().update(owned_secret("s", 2, "a")).unwrap();
    until("the owner's reconcile", || seen.count("a") > before_a).await;
    // The child moves to another owner: both are reconciled.
    let before_a = seen.count("a");
    secrets.queue().update(owned_secret("s", 3, "b")).unwrap();
    until("old and new owners", || {
        seen.count("a") > before_a && seen.count("b") > before_b
    })
    .await;
    // An owner reference to an object of no cached primary enqueues nothing.
    let reconciles = handle.stats().reconciles;
    secrets
        .queue()
        .add(owned_secret("orphan", 4, "gone"))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(handle.stats().reconciles, reconciles);
    // The reconcile lists a primary's children through the owner-UID index.
    let children = secrets
        .indexer()
        .by_index(OWNER_UID_INDEX, "uid-b")
        .unwrap();
    assert_eq!(children.len(), 1);
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
}

#[tokio::test]
async fn watches_maps_keys_and_skips_keys_of_missing_objects() {
    let cms = informer("primary", vec![cm("target", 1)]);
    let secrets: SharedIndexInformer<Secret> = informer("watched", vec![]);
    let seen = Arc::new(Seen::default());
    let controller = Controller::new(&cms).watches(&secrets, |s: &Secret| {
        // Each secret names a ConfigMap in a label; some name none that exists.
        s.metadata
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| *k == "for")
            .map(|(_, v)| ObjectKey::new(Some("ns"), v))
            .collect::<Vec<_>>()
    });
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            Ok::<_, Failed>(Action::await_change())
        },
        no_policy,
        Arc::clone(&seen),
    ));
    until("the initial list", || seen.count("target") == 1).await;
    let mut s = owned_secret("s", 2, "nobody");
    s.metadata.labels = Some([("for".to_owned(), "target".to_owned())].into());
    secrets.queue().add(s.clone()).unwrap();
    until("the mapped key", || seen.count("target") == 2).await;
    s.metadata.labels = Some([("for".to_owned(), "does-not-exist".to_owned())].into());
    s.metadata.resource_version = Some("3".into());
    secrets.queue().update(s).unwrap();
    // The update maps the old state (target) and the new (a missing object).
    until("the skip", || handle.stats().skipped_missing == 1).await;
    until("the old state's key", || seen.count("target") == 3).await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(stats.skipped_missing, 1);
    assert_eq!(stats.failed, 0);
}

#[tokio::test]
async fn requeue_after_reconciles_again() {
    let cms = informer("requeue", vec![cm("a", 1)]);
    let seen = Arc::new(Seen::default());
    let controller = Controller::new(&cms);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            Ok::<_, Failed>(Action::requeue(Duration::from_millis(20)))
        },
        no_policy,
        Arc::clone(&seen),
    ));
    until("three reconciles without any change", || {
        seen.count("a") >= 3
    })
    .await;
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
}

#[tokio::test]
async fn errors_back_off_through_the_rate_limiter_and_the_error_policy() {
    let cms = informer("errors", vec![cm("a", 1)]);
    let queue: WorkQueue = WorkQueue::builder()
        .rate_limiter(kinformer_controller::ItemExponential::new(
            Duration::from_millis(1),
            Duration::from_millis(50),
        ))
        .build();
    let attempts = Arc::new(AtomicUsize::new(0));
    let policy_calls = Arc::new(AtomicUsize::new(0));
    let requeues = Arc::new(Mutex::new(Vec::new()));
    let controller = Controller::with_queue(&cms, queue.clone());
    let handle = controller.handle();
    let (p, r, q) = (
        Arc::clone(&policy_calls),
        Arc::clone(&requeues),
        queue.clone(),
    );
    let run = tokio::spawn(controller.run(
        move |o: Arc<ConfigMap>, attempts: Arc<AtomicUsize>| {
            let q = q.clone();
            let r = Arc::clone(&r);
            async move {
                r.lock()
                    .push(q.num_requeues(&ObjectKey::of(o.as_ref()).unwrap()));
                if attempts.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(Failed)
                } else {
                    Ok(Action::await_change())
                }
            }
        },
        move |_, _: &Failed, _| {
            p.fetch_add(1, Ordering::SeqCst);
            Action::backoff()
        },
        Arc::clone(&attempts),
    ));
    until("the success after three failures", || {
        attempts.load(Ordering::SeqCst) == 4
    })
    .await;
    until("the success's forget", || {
        queue.num_requeues(&"ns/a".into()) == 0
    })
    .await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(policy_calls.load(Ordering::SeqCst), 3);
    assert_eq!(stats.failed, 3);
    assert_eq!(stats.succeeded, 1);
    // Each retry came through the rate limiter, counting up.
    assert_eq!(*requeues.lock(), vec![0, 1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_one_reconcile_per_key_at_a_time() {
    let keys = 5;
    let cms = informer(
        "one-per-key",
        (0..keys).map(|i| cm(&format!("k{i}"), 1)).collect(),
    );
    #[derive(Default)]
    struct State {
        running: Mutex<HashSet<String>>,
        overlaps: AtomicU64,
        latest: Mutex<HashMap<String, u64>>,
    }
    let state = Arc::new(State::default());
    let controller = Controller::new(&cms).concurrency(8);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, s: Arc<State>| async move {
            let name = o.metadata.name.clone().unwrap();
            if !s.running.lock().insert(name.clone()) {
                s.overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            s.latest.lock().insert(name.clone(), rv(o.as_ref()));
            s.running.lock().remove(&name);
            Ok::<_, Failed>(Action::await_change())
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::clone(&state),
    ));
    for v in 2..=200u64 {
        for i in 0..keys {
            cms.queue().update(cm(&format!("k{i}"), v)).unwrap();
        }
        if v % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
    // Every key's newest state is reconciled in the end: none is lost.
    until("the newest states", || {
        let latest = state.latest.lock();
        (0..keys).all(|i| latest.get(&format!("k{i}")) == Some(&200))
    })
    .await;
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
    assert_eq!(state.overlaps.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn shutdown_waits_for_the_reconciles_in_flight() {
    let cms = informer("drain", vec![cm("a", 1)]);
    let finished = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let controller = Controller::new(&cms);
    let handle = controller.handle();
    let s = Arc::clone(&started);
    let run = tokio::spawn(controller.run(
        move |_: Arc<ConfigMap>, finished: Arc<AtomicBool>| {
            let s = Arc::clone(&s);
            async move {
                s.store(true, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(200)).await;
                finished.store(true, Ordering::SeqCst);
                Ok::<_, Failed>(Action::await_change())
            }
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::clone(&finished),
    ));
    until("the reconcile's start", || started.load(Ordering::SeqCst)).await;
    handle.shutdown();
    // Taken after the shutdown, this change is not reconciled.
    cms.queue().update(cm("a", 2)).unwrap();
    let stats = within("run", run).await.unwrap().unwrap();
    assert!(
        finished.load(Ordering::SeqCst),
        "run returned before its reconcile finished"
    );
    assert_eq!(stats.cancelled_at_shutdown, 0);
    assert_eq!(stats.reconciles, 1);
}

#[tokio::test]
async fn shutdown_timeout_cancels_a_reconcile_that_never_returns() {
    let cms = informer("stuck", vec![cm("a", 1)]);
    let controller = Controller::new(&cms).shutdown_timeout(Duration::from_millis(100));
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<()>| async move {
            std::future::pending::<()>().await;
            Ok::<_, Failed>(Action::await_change())
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::new(()),
    ));
    until("the reconcile's start", || handle.stats().in_flight == 1).await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(stats.cancelled_at_shutdown, 1);
    assert_eq!(stats.in_flight, 0);
}

#[tokio::test]
async fn reconcile_timeout_cancels_and_retries_with_backoff() {
    let cms = informer("timeout", vec![cm("a", 1)]);
    let attempts = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new(&cms).reconcile_timeout(Duration::from_millis(50));
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, attempts: Arc<AtomicUsize>| async move {
            if attempts.fetch_add(1, Ordering::SeqCst) == 0 {
                std::future::pending::<()>().await;
            }
            Ok::<_, Failed>(Action::await_change())
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::clone(&attempts),
    ));
    until("the retry's success", || handle.stats().succeeded == 1).await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(stats.timed_out, 1);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_panicking_reconcile_is_caught_and_retried() {
    let cms = informer("panics", vec![cm("a", 1), cm("b", 1)]);
    let attempts = Arc::new(AtomicUsize::new(0));
    let controller = Controller::new(&cms);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, attempts: Arc<AtomicUsize>| {
            // A panic while making the future, and one while polling it.
            if o.metadata.name.as_deref() == Some("a")
                && attempts.fetch_add(1, Ordering::SeqCst) == 0
            {
                panic!("reconcile of a panics before its future");
            }
            async move {
                if o.metadata.name.as_deref() == Some("b")
                    && attempts.fetch_add(1, Ordering::SeqCst) < 3
                {
                    panic!("reconcile of b panics");
                }
                Ok::<_, Failed>(Action::await_change())
            }
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::clone(&attempts),
    ));
    until("both succeed", || handle.stats().succeeded == 2).await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert!(stats.panicked >= 2, "{stats:?}");
}

#[tokio::test]
async fn a_panicking_mapper_or_error_policy_does_not_stop_the_controller() {
    let cms = informer("mapper", vec![cm("a", 1)]);
    let secrets: SharedIndexInformer<Secret> = informer("mapped", vec![]);
    let seen = Arc::new(Seen::default());
    let policy_panicked = Arc::new(AtomicBool::new(false));
    let pp = Arc::clone(&policy_panicked);
    let controller = Controller::new(&cms).watches(&secrets, |s: &Secret| {
        assert!(
            s.metadata.name.as_deref() != Some("poison"),
            "mapper panics"
        );
        vec![ObjectKey::new(Some("ns"), "a")]
    });
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            if rv(o.as_ref()) == 2 {
                Err(Failed)
            } else {
                Ok(Action::await_change())
            }
        },
        move |_, _: &Failed, _| {
            if !pp.swap(true, Ordering::SeqCst) {
                panic!("error policy panics");
            }
            Action::await_change()
        },
        Arc::clone(&seen),
    ));
    until("the initial list", || seen.count("a") == 1).await;
    secrets.queue().add(owned_secret("poison", 1, "a")).unwrap();
    until("the mapper's panic", || handle.stats().mapper_panics == 1).await;
    secrets.queue().add(owned_secret("fine", 1, "a")).unwrap();
    until("the mapped key", || seen.count("a") == 2).await;
    // rv 2 fails; the policy panics, the key backs off and fails again; the
    // policy then awaits a change.
    cms.queue().update(cm("a", 2)).unwrap();
    until("the policy's panic and the retry", || {
        handle.stats().failed == 2
    })
    .await;
    handle.shutdown();
    let stats = within("run", run).await.unwrap().unwrap();
    assert_eq!(stats.error_policy_panics, 1);
    assert_eq!(stats.mapper_panics, 1);
}

#[tokio::test]
async fn shutdown_with_delayed_keys_drops_them_and_returns() {
    let cms = informer("delayed", vec![cm("a", 1), cm("b", 1)]);
    let controller = Controller::new(&cms);
    let handle = controller.handle();
    let queue = handle.queue().clone();
    let run = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<()>| async move {
            Ok::<_, Failed>(Action::requeue(Duration::from_secs(3600)))
        },
        |_, _: &Failed, _| Action::backoff(),
        Arc::new(()),
    ));
    until("both reconciled", || handle.stats().succeeded == 2).await;
    handle.shutdown();
    let stats = within("run with delayed keys", run).await.unwrap().unwrap();
    assert_eq!(stats.reconciles, 2);
    assert!(queue.is_shutting_down());
    // A shut down queue takes no new keys.
    queue.add("ns/a".into());
    assert_eq!(queue.len(), 0);
}

#[tokio::test]
async fn reconcile_all_on_a_stream_reconciles_every_key() {
    let cms = informer("all", (0..20).map(|i| cm(&format!("c{i}"), 1)).collect());
    let seen = Arc::new(Seen::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let controller = Controller::new(&cms)
        .reconcile_all_on(tokio_stream::wrappers::UnboundedReceiverStream::new(rx));
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, seen: Arc<Seen>| async move {
            seen.push(&o);
            Ok::<_, Failed>(Action::await_change())
        },
        no_policy,
        Arc::clone(&seen),
    ));
    until("the initial list", || seen.len() == 20).await;
    tx.send(()).unwrap();
    until("the full reconcile", || seen.len() == 40).await;
    assert!((0..20).all(|i| seen.count(&format!("c{i}")) == 2));
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
}

#[tokio::test]
async fn graceful_shutdown_on_a_signal() {
    let cms = informer("signal", vec![cm("a", 1)]);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let controller = Controller::new(&cms).graceful_shutdown_on(rx);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<()>| async move { Ok::<_, Failed>(Action::await_change()) },
        |_, _: &Failed, _| Action::backoff(),
        Arc::new(()),
    ));
    until("the reconcile", || handle.stats().succeeded == 1).await;
    tx.send(()).unwrap();
    within("run", run).await.unwrap().unwrap();
    assert!(handle.is_shutting_down());
}

#[tokio::test]
async fn reconciles_wait_for_every_informer_to_sync() {
    let cms = informer("synced", vec![cm("a", 1)]);
    let unsynced: SharedIndexInformer<Secret> = SharedIndexInformer::builder().name("late").build();
    unsynced.start().unwrap();
    let controller = Controller::new(&cms).owns(&unsynced);
    let handle = controller.handle();
    let run = tokio::spawn(controller.run(
        |_: Arc<ConfigMap>, _: Arc<()>| async move { Ok::<_, Failed>(Action::await_change()) },
        |_, _: &Failed, _| Action::backoff(),
        Arc::new(()),
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(handle.stats().reconciles, 0);
    unsynced.queue().replace(Vec::new(), "1").unwrap();
    until("the reconcile after sync", || handle.stats().succeeded == 1).await;
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
}

#[tokio::test]
async fn run_fails_on_a_shut_down_informer() {
    let cms = informer("down", vec![cm("a", 1)]);
    cms.shutdown();
    let result = Controller::new(&cms)
        .run(
            |_: Arc<ConfigMap>, _: Arc<()>| async move { Ok::<_, Failed>(Action::await_change()) },
            |_, _: &Failed, _| Action::backoff(),
            Arc::new(()),
        )
        .await;
    assert!(
        matches!(
            result,
            Err(kinformer_controller::ControllerError::Informer(_))
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn its_counters_are_exported_with_controller_runtimes_names() {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    let cms = informer("exported", vec![cm("ok", 1), cm("bad", 1)]);
    let controller = Controller::new(&cms).concurrency(3);
    let handle = controller.handle();
    assert_eq!(handle.name(), "configmap");
    let collector = kinformer_controller::ControllerCollector::new();
    collector.add(&handle);
    let mut registry = Registry::default();
    collector.register(&mut registry);
    let run = tokio::spawn(controller.run(
        |o: Arc<ConfigMap>, _: Arc<()>| async move {
            if o.metadata.name.as_deref() == Some("bad") {
                Err(Failed)
            } else {
                Ok(Action::await_change())
            }
        },
        |_, _: &Failed, _| Action::await_change(),
        Arc::new(()),
    ));
    until("both reconciled", || handle.stats().reconciles == 2).await;
    until("both finished", || handle.stats().in_flight == 0).await;
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for line in [
        r#"controller_runtime_reconcile_total{controller="configmap",result="success"} 1"#,
        r#"controller_runtime_reconcile_total{controller="configmap",result="error"} 1"#,
        r#"controller_runtime_reconcile_errors_total{controller="configmap"} 1"#,
        r#"controller_runtime_reconcile_panics_total{controller="configmap"} 0"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="configmap"} 2"#,
        r#"controller_runtime_max_concurrent_reconciles{controller="configmap"} 3"#,
        r#"controller_runtime_active_workers{controller="configmap"} 0"#,
        r#"kinformer_controller_skipped_total{controller="configmap"} 0"#,
        r#"workqueue_adds_total{name="configmap"} 2"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
    }
    handle.shutdown();
    within("run", run).await.unwrap().unwrap();
}
