//! One JSON watch event line, decoded as a typed Pod, as kube's
//! `PartialObjectMeta` and as a `DynamicObject`, with `managedFields`
//! skipped and kept.
#![no_main]

use k8s_openapi::api::core::v1::Pod;
use kinformer_wire::object_decode::Decoders;
use kube::api::DynamicObject;
use kube::core::PartialObjectMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|line: &[u8]| {
    for skip in [false, true] {
        let _ = Decoders::<Pod>::serde().event(line, skip);
        let _ = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta().event(line, skip);
        let _ = Decoders::<DynamicObject>::dynamic_object().event(line, skip);
    }
});
