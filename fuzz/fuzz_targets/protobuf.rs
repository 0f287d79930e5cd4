//! Kubernetes' protobuf encoding: a watch body's length-prefixed frames,
//! each decoded as a metadata-only watch event, and the same bytes as an
//! enveloped LIST page whose items are then decoded.
#![no_main]

use bytes::{Bytes, BytesMut};
use k8s_openapi::api::core::v1::Pod;
use kinformer_wire::protobuf::{
    decode_list, decode_list_item, decode_watch_frame, next_frame,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = next_frame(&mut buf) {
        let _ = decode_watch_frame::<Pod>(frame.clone(), true);
        let _ = decode_watch_frame::<Pod>(frame, false);
    }
    if let Ok(page) = decode_list(Bytes::copy_from_slice(data)) {
        for item in page.items {
            let _ = decode_list_item::<Pod>(item, page.item_types.clone(), true);
        }
    }
});
