//! A JSON LIST response split into its items, resourceVersion and
//! continue token; each item then decoded as a metadata-only Pod.
#![no_main]

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;
use kinformer_wire::list::split_page;
use kinformer_wire::object_decode::Decoders;
use kube::core::PartialObjectMeta;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Ok(page) = split_page(&Bytes::copy_from_slice(body)) {
        for item in page.items {
            let _ = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta().object(&item, true);
        }
    }
});
