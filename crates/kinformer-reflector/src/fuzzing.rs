//! Entry points for the fuzz targets in `fuzz/` into parsers that are not
//! public: built only with `--cfg fuzzing`, which `cargo fuzz` sets. Each
//! takes raw bytes and must return (an error is fine) without panicking,
//! hanging or growing without bound.

use bytes::BytesMut;

/// Watch body bytes cut into lines (or protobuf frames when `framed`) as
/// they arrive in the chunks `body` is cut into at `cuts`: how many
/// records came out before the end or the first error.
pub fn split_records(body: &[u8], cuts: &[usize], framed: bool) -> usize {
    crate::lines::split_all(body, cuts, framed)
}

/// A response as a direct watch reads it from its connection (`wire`
/// arriving in two reads, cut at `cut`): its status and body, or the
/// error. Runs on a runtime of its own thread.
pub fn direct_response(wire: &[u8], cut: usize) -> Result<(u16, Vec<u8>), String> {
    thread_local! {
        static RUNTIME: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok();
    }
    let wire = BytesMut::from(wire);
    RUNTIME.with(|rt| match rt {
        Some(rt) => rt.block_on(crate::direct::read_response(wire, cut)),
        None => Err("no runtime".into()),
    })
}
