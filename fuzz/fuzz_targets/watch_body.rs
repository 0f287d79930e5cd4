//! A watch body cut into lines (JSON) or length-prefixed frames
//! (protobuf) as its chunks arrive: the first byte picks the framing and
//! the next two where the body is cut into chunks.
#![no_main]

use kinformer_reflector::fuzzing::split_records;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [mode, a, b, body @ ..] = data else {
        return;
    };
    let cuts = [usize::from(*a), usize::from(*a) + usize::from(*b)];
    let _ = split_records(body, &cuts, mode & 1 == 1);
});
