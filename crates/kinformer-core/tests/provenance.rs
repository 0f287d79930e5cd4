//! A cache's provenance: which entry points mark it mixed (objects from
//! outside a decoder), and that the decoder's path and the pool's own
//! writes keep it decoded only.
#![allow(clippy::unwrap_used)]
#![allow(unsafe_code)] // prepare_decoded's contract is what is tested

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{DeltaFifo, Indexer, Observed, SharedIndexInformer};

fn started() -> SharedIndexInformer<ConfigMap> {
    let inf = SharedIndexInformer::builder().name("provenance").build();
    inf.start().unwrap();
    inf
}

#[test]
fn objects_from_the_decoder_path_keep_the_cache_decoded_only() {
    let inf = started();
    let fifo = inf.queue();
    let mut session = fifo.begin_replace().unwrap();
    for name in ["a", "b"] {
        // SAFETY: each object is freshly built and untouched, as a decoder's.
        session
            .push([unsafe { fifo.prepare_decoded(cm(name, 1)) }.unwrap()])
            .unwrap();
    }
    session.finish("1").unwrap();
    for v in 2..=3 {
        // SAFETY: as above.
        let p = unsafe { fifo.prepare_decoded(cm("a", v)) }.unwrap();
        fifo.push_observed([(Observed::Updated, p)]).unwrap();
    }
    assert!(inf.wait_synced_blocking(Duration::from_secs(10)));
    let indexer = inf.indexer();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while indexer.get("ns/a").map(|o| rv(&o)) != Some(3) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(indexer.get("ns/a").map(|o| rv(&o)), Some(3));
    assert_eq!(indexer.len(), 2);
    // The pool's writes of those objects did not mark it.
    assert!(indexer.provenance().decoded_only());
}

#[test]
fn add_update_delete_and_replace_mark_the_cache_mixed() {
    type Feed = fn(&DeltaFifo<ConfigMap>);
    let feeds: [(&str, Feed); 5] = [
        ("add", |f| f.add(cm("a", 1)).unwrap()),
        ("update", |f| f.update(cm("a", 1)).unwrap()),
        ("delete", |f| f.delete(cm("a", 1)).unwrap()),
        ("replace", |f| f.replace([cm("a", 1)], "1").unwrap()),
        ("prepare", |f| drop(f.prepare(cm("a", 1)).unwrap())),
    ];
    for (name, feed) in feeds {
        let inf = started();
        assert!(inf.indexer().provenance().decoded_only());
        feed(inf.queue());
        assert!(
            !inf.indexer().provenance().decoded_only(),
            "{name} kept it decoded only"
        );
    }
}

#[test]
fn a_direct_write_to_the_indexer_marks_it_mixed() {
    let indexer: Indexer<ConfigMap> = Indexer::new(Vec::new());
    let provenance = indexer.provenance();
    assert!(provenance.decoded_only());
    indexer.write(|w| drop(w.upsert("ns/a".into(), Arc::new(cm("a", 1)))));
    assert!(!provenance.decoded_only());
}

#[test]
fn a_transform_marks_decoded_objects_mixed() {
    let inf: SharedIndexInformer<ConfigMap> = SharedIndexInformer::builder()
        .transform(|mut c: ConfigMap| {
            c.data = None;
            c
        })
        .build();
    // SAFETY: a freshly built object, untouched.
    drop(unsafe { inf.queue().prepare_decoded(cm("a", 1)) }.unwrap());
    assert!(!inf.indexer().provenance().decoded_only());
}
