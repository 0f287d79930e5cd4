//! A JSON LIST response split into its items, resourceVersion and
//! continue token; each item then decoded as a metadata-only Pod.
#![no_main]

use k8s_openapi::api::core::v1::Pod;
use kinformer_reflector::fuzzing::split_list_page;
use kinformer_reflector::object_decode::Decoders;
use kube::core::PartialObjectMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(items) = split_list_page(body) {
        for item in items {
            let _ = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta().object(&item, true);
        }
    }
});
