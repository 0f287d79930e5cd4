//! A response as a direct watch reads it from its connection: the head
//! (httparse), then the body by its framing (chunked, sized or to the
//! close). The first two bytes say where the bytes are cut between two
//! reads.
#![no_main]

use kinformer_reflector::fuzzing::direct_response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [a, b, wire @ ..] = data else {
        return;
    };
    let cut = usize::from(u16::from_le_bytes([*a, *b]));
    let _ = direct_response(wire, cut);
});
