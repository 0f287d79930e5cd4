//! Metrics, after client-go's `metrics_test.go`.
#![allow(clippy::unwrap_used)]

use std::thread;
use std::time::Duration;

use kinformer_controller::{WorkQueue, WorkQueueCollector};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

const NAMES: [&str; 7] = [
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "workqueue_retries_total",
];

#[test]
fn counts() {
    let queue: WorkQueue<&str> = WorkQueue::builder().name("test").build();
    queue.add("a");
    queue.add("a"); // already dirty: not an add
    queue.add("b");
    let m = queue.metrics();
    assert_eq!(m.name, "test");
    assert_eq!((m.depth, m.adds_total, m.processing), (2, 2, 0));

    let a = queue.get().unwrap();
    thread::sleep(Duration::from_millis(20));
    let m = queue.metrics();
    assert_eq!((m.depth, m.processing), (1, 1));
    assert_eq!(m.queue_duration.count, 1);
    assert!(m.unfinished_work_seconds >= 0.02, "{m:?}");
    assert!(m.longest_running_processor_seconds >= 0.02, "{m:?}");

    queue.add("a"); // dirty while processing: counted
    queue.done(&a);
    let m = queue.metrics();
    assert_eq!((m.depth, m.adds_total, m.processing), (2, 3, 0));
    assert_eq!(m.work_duration.count, 1);
    assert!(m.work_duration.sum_seconds >= 0.02, "{m:?}");
    assert_eq!(m.unfinished_work_seconds, 0.0);
    assert_eq!(m.longest_running_processor_seconds, 0.0);

    queue.add_after("c", Duration::from_secs(30));
    queue.add_rate_limited("d");
    let m = queue.metrics();
    assert_eq!(m.retries_total, 2);
    assert!(m.delayed >= 1);
}

#[test]
fn registry_encodes_the_names() {
    let queue: WorkQueue<u32> = WorkQueue::builder().name("pods").build();
    let mut registry = Registry::default();
    queue.register(&mut registry);
    queue.add(1);
    queue.add(2);
    let one = queue.get().unwrap();
    queue.done(&one);
    queue.add_after(3, Duration::from_secs(30));

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for name in NAMES {
        assert!(
            text.contains(&format!("{name}{{name=\"pods\"}}"))
                || text.contains(&format!("{name}_count{{name=\"pods\"}}")),
            "{name} missing:\n{text}"
        );
    }
    assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#), "{text}");
    assert!(
        text.contains(r#"workqueue_adds_total{name="pods"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_retries_total{name="pods"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_work_duration_seconds_bucket{le="+Inf",name="pods"} 1"#)
            || text.contains(r#"workqueue_work_duration_seconds_bucket{name="pods",le="+Inf"} 1"#),
        "{text}"
    );
    assert!(
        text.contains("# TYPE workqueue_queue_duration_seconds histogram"),
        "{text}"
    );
    assert!(text.contains("# TYPE workqueue_adds counter"), "{text}");
}

#[test]
fn one_collector_exports_several_queues_as_one_family_each() {
    let pods: WorkQueue<u32> = WorkQueue::builder().name("pods").build();
    let nodes: WorkQueue<String> = WorkQueue::builder().name("nodes").build();
    let collector = WorkQueueCollector::new();
    let mut registry = Registry::default();
    collector.register(&mut registry);
    collector.add(&pods);
    collector.add(&nodes);
    pods.add(1);
    nodes.add("n1".into());
    nodes.add("n2".into());

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for name in NAMES {
        let family = name.trim_end_matches("_total");
        assert_eq!(
            text.matches(&format!("# TYPE {family} ")).count(),
            1,
            "{family}:\n{text}"
        );
    }
    assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#), "{text}");
    assert!(
        text.contains(r#"workqueue_depth{name="nodes"} 2"#),
        "{text}"
    );

    // A dropped queue is no longer exported.
    drop(nodes);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(!text.contains(r#"name="nodes""#), "{text}");
    assert!(text.contains(r#"workqueue_depth{name="pods"} 1"#), "{text}");
}
