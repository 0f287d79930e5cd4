//! One object's JSON (a LIST item), decoded by each decoder: a typed Pod,
//! kube's `PartialObjectMeta` and `DynamicObject`, with `managedFields`
//! skipped and kept.
#![no_main]

use k8s_openapi::api::core::v1::Pod;
use kinformer_wire::object_decode::Decoders;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|item: &[u8]| {
    for skip in [false, true] {
        let _ = Decoders::<Pod>::serde().object(item, skip);
        let _ = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta().object(item, skip);
        let _ = Decoders::<DynamicObject>::dynamic_object().object(item, skip);
    }
});
