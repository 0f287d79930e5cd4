//! Object arenas: an opt-in global allocator for processes that hold very
//! many decoded objects.
//!
//! A decoded Kubernetes object is some tens of small heap blocks (strings,
//! maps, vectors). Under a stream of updates each one replaces an object
//! decoded long ago, whose blocks are cold: freeing them, and reusing them
//! through the allocator's free lists, is a cache miss per block. With
//! [`ObjectArenas`] installed as the global allocator, everything allocated
//! inside [`with_object_arena`] (the reflector wraps each decode in it) is
//! bumped into one chunk sized for that kind of object; freeing a part only
//! counts it down, and the chunk is reused whole once its last part is gone.
//!
//! - [`class`]: the chunk sizes.
//! - [`count`]: a chunk's count of live parts (the lock-free part, with a
//!   loom model).
//! - [`region`]: the reserved address range the chunks are cut from.
//! - [`scope`]: the per-thread decode scope and the size estimates.
//! - [`global`]: [`ObjectArenas`], the `GlobalAlloc` that ties them together.
//! - [`spare`]: new chunks kept ready by a keeper thread, so that decode
//!   threads seldom wait for the kernel's pages.
//! - [`whole`]: an object's chunk given back at once instead of its parts
//!   freed one by one.
//!
//! Without [`ObjectArenas`] installed, [`with_object_arena`] only runs its
//! closure.

pub mod class;
pub mod count;
#[cfg(not(loom))]
pub mod global;
#[cfg(not(loom))]
pub mod region;
#[cfg(not(loom))]
pub mod scope;
#[cfg(not(loom))]
pub mod spare;
#[cfg(not(loom))]
pub mod whole;

#[cfg(not(loom))]
pub use global::ObjectArenas;
#[cfg(not(loom))]
pub use scope::{set_enabled, with_object_arena};
#[cfg(not(loom))]
pub use spare::top_up_spare_chunks;
#[cfg(not(loom))]
pub use whole::release_whole;
