//! Releasing an object's chunk at once instead of freeing its parts.
//!
//! Dropping an object decoded long ago walks its whole tree (every map
//! node, string and vector) only to count each part down in a chunk that
//! the object has to itself. When a decode scope ends with every part of
//! its object in one chunk and none anywhere else, the chunk's header
//! records how many parts were live at the close. An owner that has the
//! object by value can then give the chunk back in one step, if none of
//! those parts was freed since, and forget the object instead of dropping
//! it.
#![allow(unsafe_code)] // reads a chunk header, hands the chunk back

use std::sync::atomic::Ordering;

use crate::region::REGION;

/// Gives back, in one step, the chunk that holds `part` when that chunk
/// was recorded as holding one whole object and all of the object's parts
/// are still live. Returns true when it did: the caller must then forget
/// the object (`std::mem::forget`), never drop it or read it again.
/// Returns false, changing nothing, for memory outside the arenas, a chunk
/// shared by objects, or an object that has lost a part since its decode.
///
/// # Safety
/// `part` is a heap part (e.g. its name's buffer) of an object the caller
/// owns by value, that was decoded in one [`crate::with_object_arena`]
/// scope and not changed since other than by dropping parts (never by
/// moving one out), and that owns every heap part it points to alone (no
/// `Arc`, `Rc` or other shared buffer whose other owners could outlive it)
/// and has no `Drop` with effects beyond freeing memory: true of
/// k8s-openapi's types, `serde_json::Value` and kube's `DynamicObject` and
/// `PartialObjectMeta`.
///
/// ```
/// let name = String::from("web-0"); // outside the arenas
/// // SAFETY: `name` is owned here, owns its one buffer and was not changed.
/// assert!(!unsafe { kinformer_alloc::release_whole(name.as_ptr()) });
/// drop(name); // not released: dropped as usual
/// ```
pub unsafe fn release_whole(part: *const u8) -> bool {
    let Some((chunk, _)) = REGION.chunk_span(part as usize) else {
        return false;
    };
    // SAFETY: the part is live (the caller owns its object), so its chunk's
    // header is written and stays until the count reaches zero.
    let header = unsafe { &*(chunk as *const crate::region::Header) };
    let whole = header.whole.load(Ordering::Relaxed);
    if !header.live.release_all(whole) {
        return false;
    }
    // SAFETY: the count reached zero, and the caller forgets the object
    // whose parts those were: nothing of the chunk is live.
    unsafe { REGION.give_back(chunk) };
    true
}
