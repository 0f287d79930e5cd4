//! The per-thread decode scope: while [`with_object_arena`] runs, this
//! thread's allocations (that [`crate::ObjectArenas`] is asked for) are
//! bumped into a chunk of their own, sized from what the previous objects
//! of the same kind took per byte of input.
//!
//! An object that outgrows its chunk continues in another; a part too large
//! or too aligned for a chunk, and anything allocated outside a scope, is
//! left to the wrapped allocator. Growing a buffer that was allocated
//! outside the scope keeps it outside, so a long-lived buffer never ends up
//! holding a chunk.
#![allow(unsafe_code)] // closing a chunk reads its header

use std::any::type_name;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::class::{CLASSES, MIN_CHUNK, class_for};
use crate::region::{HEADER, REGION};

/// Parts larger than this are left to the wrapped allocator.
pub const MAX_PART: usize = 32 * 1024;

/// Parts aligned to more than this are left to the wrapped allocator (a
/// chunk's parts start at most 64-aligned).
pub const MAX_ALIGN: usize = 64;

/// The kinds of object whose sizes a thread remembers.
const KINDS: usize = 8;

/// Bytes per input byte assumed for a kind not seen yet, in sixteenths.
const FIRST_RATIO: u32 = 8 * 16;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns the scopes on or off for the whole process (on by default; off,
/// [`with_object_arena`] only runs its closure). For comparisons in one
/// binary.
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// This thread's scope and open chunk.
struct Bump {
    /// Inside a scope.
    active: Cell<bool>,
    /// The open chunk's header (0: none), its next free byte and its end.
    chunk: Cell<usize>,
    cur: Cell<usize>,
    end: Cell<usize>,
    /// Parts put in the open chunk.
    parts: Cell<usize>,
    /// The last part put in the open chunk (0: none), which can grow in
    /// place.
    last: Cell<usize>,
    /// Bytes the object is expected to take, and bytes taken so far.
    want: Cell<usize>,
    used: Cell<usize>,
    /// Chunks opened in this scope, and whether any part of it went to the
    /// wrapped allocator: an object in one chunk with nothing elsewhere is
    /// recorded whole at the close (see [`crate::whole`]).
    opened: Cell<usize>,
    spilled: Cell<bool>,
    /// Per kind of object (the address of its type's name): bytes taken
    /// per input byte, in sixteenths.
    ratios: Cell<[(usize, u32); KINDS]>,
    next_kind: Cell<usize>,
}

impl Bump {
    const fn new() -> Self {
        Self {
            active: Cell::new(false),
            chunk: Cell::new(0),
            cur: Cell::new(0),
            end: Cell::new(0),
            parts: Cell::new(0),
            last: Cell::new(0),
            want: Cell::new(0),
            used: Cell::new(0),
            opened: Cell::new(0),
            spilled: Cell::new(false),
            ratios: Cell::new([(0, 0); KINDS]),
            next_kind: Cell::new(0),
        }
    }

    fn ratio(&self, kind: usize) -> u32 {
        self.ratios
            .get()
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(FIRST_RATIO, |&(_, r)| r)
    }

    /// Moves the kind's ratio a quarter of the way to what this object took.
    fn learn(&self, kind: usize, input_len: usize, used: usize) {
        let sample = (used.saturating_mul(16) / input_len.max(1)).min(u32::MAX as usize) as u32;
        let mut ratios = self.ratios.get();
        if let Some(slot) = ratios.iter_mut().find(|(k, _)| *k == kind) {
            slot.1 = ((u64::from(slot.1) * 3 + u64::from(sample)) / 4) as u32;
        } else {
            let i = self.next_kind.get() % KINDS;
            ratios[i] = (kind, sample);
            self.next_kind.set(i + 1);
        }
        self.ratios.set(ratios);
    }

    /// Closes the open chunk, if any; `whole` when the scope ends with its
    /// object's every part in this chunk.
    fn close(&self, whole: bool) {
        let chunk = self.chunk.replace(0);
        self.last.set(0);
        if chunk != 0 {
            // SAFETY: the open chunk came from `REGION.take` and its header
            // lives until its count reaches zero, which only this close can
            // now bring about or allow.
            let header = unsafe { &*(chunk as *const crate::region::Header) };
            let live = header.live.close_counting(self.parts.replace(0));
            if live == 0 {
                // SAFETY: the count reached zero: nothing of it is live.
                unsafe { REGION.give_back(chunk) };
            } else if whole {
                // The live parts are the object's, which no other thread
                // has yet: nothing else reads or writes the header now.
                header.whole.store(live, Ordering::Relaxed);
            }
        }
    }

    fn alloc(&self, size: usize, align: usize) -> Option<*mut u8> {
        if !self.active.get() {
            return None;
        }
        if size > MAX_PART || align > MAX_ALIGN {
            self.spilled.set(true);
            return None;
        }
        if self.chunk.get() == 0 || align_up(self.cur.get(), align) + size > self.end.get() {
            // Opening a chunk allocates nothing (`Region::take` only locks
            // a free list or reserves the range with `mmap`), so this
            // cannot re-enter the allocator.
            if self.open(size + align).is_none() {
                self.spilled.set(true);
                return None;
            }
        }
        let start = align_up(self.cur.get(), align);
        let end = start + size;
        debug_assert!(end <= self.end.get(), "a part past its chunk's end");
        self.used.set(self.used.get() + (end - self.cur.get()));
        self.cur.set(end);
        self.parts.set(self.parts.get() + 1);
        self.last.set(start);
        Some(start as *mut u8)
    }

    /// Closes the open chunk and opens one for the rest of the object
    /// (at least `needed` bytes of parts).
    fn open(&self, needed: usize) -> Option<()> {
        self.close(false);
        self.opened.set(self.opened.get() + 1);
        let (want, used) = (self.want.get(), self.used.get());
        let rest = if want > used + needed {
            want - used
        } else {
            // Past the estimate: a quarter of what it took so far more.
            needed.max(used / 4).max(MIN_CHUNK)
        };
        let class = class_for(rest + HEADER).unwrap_or(CLASSES - 1);
        let (chunk, size) = REGION.take(class, HEADER + needed)?;
        self.chunk.set(chunk);
        self.cur.set(chunk + HEADER);
        self.end.set(chunk + size);
        self.used.set(used + HEADER);
        Some(())
    }

    fn resize_last(&self, part: usize, new_size: usize) -> bool {
        if !self.active.get() || part == 0 || part != self.last.get() {
            return false;
        }
        let end = part + new_size;
        if end > self.end.get() {
            return false;
        }
        // `used` counts the part's bytes, so this cannot go below zero.
        self.used.set(self.used.get() + end - self.cur.get());
        self.cur.set(end);
        true
    }
}

fn align_up(addr: usize, align: usize) -> usize {
    (addr + align - 1) & !(align - 1)
}

thread_local! {
    static BUMP: Bump = const { Bump::new() };
}

/// A part for `size` bytes aligned to `align` from this thread's open
/// scope; `None` outside a scope, or when the part does not suit a chunk.
pub(crate) fn alloc(size: usize, align: usize) -> Option<*mut u8> {
    BUMP.try_with(|b| b.alloc(size, align)).ok().flatten()
}

/// A buffer from outside the arenas was grown or shrunk (it stays with the
/// wrapped allocator): inside a scope, the object may end up holding it,
/// so the scope's object is no longer whole.
pub(crate) fn note_outside_realloc() {
    let _ = BUMP.try_with(|b| {
        if b.active.get() {
            b.spilled.set(true);
        }
    });
}

/// Grows or shrinks in place the part at `part` to `new_size` bytes, when
/// it is the last one put in this thread's open chunk and fits.
pub(crate) fn resize_last(part: usize, new_size: usize) -> bool {
    BUMP.try_with(|b| b.resize_last(part, new_size))
        .unwrap_or(false)
}

/// `value` copied into chunks sized for what it holds now, when `part` (the
/// address of one of its parts, e.g. its name's buffer) lies in the object
/// arenas; otherwise `value` itself, unchanged. `part` is only compared
/// with the arenas' range, never read.
///
/// For an object that a transform shrank after its decode (dropping its
/// `managedFields`, say): the parts it freed are counted down, but their
/// space is reused only with the whole chunk, which the parts it kept
/// still hold, so the object would pin the memory of everything it was
/// decoded with. The copy is packed by a scope of its own kind (sized from
/// the copies before it); dropping the original gives its chunk back.
/// Call it outside a decode scope (inside one, the copy would share the
/// scope's chunk).
///
/// ```
/// let kept = kinformer_alloc::scope::rehome(String::from("web-1"), std::ptr::null());
/// assert_eq!(kept, "web-1");
/// ```
pub fn rehome<T: Clone>(value: T, part: *const u8) -> T {
    /// A copy of a `T`: a scope kind (and size estimate) of its own, apart
    /// from `T`'s decodes.
    struct Rehomed<T>(T);
    if !REGION.contains(part as usize) {
        return value;
    }
    // An input length of 1: the kind's estimate learns the copy's bytes.
    let copy = with_object_arena(1, || Rehomed(value.clone()));
    drop(value);
    copy.0
}

/// Runs `f` with this thread's allocations bumped into chunks sized for an
/// object of type `T` decoded from `input_len` bytes (when
/// [`crate::ObjectArenas`] is the global allocator; otherwise it only runs
/// `f`). Meant for the decode of one object: whatever `f` allocates and
/// keeps shares the object's chunks, and holds them until it is freed.
///
/// Scopes do not nest: inside one, another only runs its closure.
///
/// ```
/// let label = kinformer_alloc::with_object_arena::<String>(5, || "hello".to_string());
/// assert_eq!(label, "hello");
/// ```
pub fn with_object_arena<T>(input_len: usize, f: impl FnOnce() -> T) -> T {
    if !ENABLED.load(Ordering::Relaxed) {
        return f();
    }
    let kind = type_name::<T>().as_ptr() as usize;
    let opened = BUMP
        .try_with(|b| {
            if b.active.get() {
                return false;
            }
            let want = (b.ratio(kind) as usize).saturating_mul(input_len) / 16;
            // A small margin: rounding up to a class adds up to 1/8 more,
            // and the rare object that outgrows its chunk continues in a
            // second one. With 1/16, a 1M metadata-only sync's objects went
            // 31% to one class and 69% to the next, 1/8 larger.
            b.want.set(want + want / 64);
            b.used.set(0);
            b.opened.set(0);
            b.spilled.set(false);
            b.active.set(true);
            true
        })
        .unwrap_or(false);
    if !opened {
        return f();
    }
    /// Ends the scope, also when `f` panics.
    struct End {
        kind: usize,
        input_len: usize,
    }
    impl Drop for End {
        fn drop(&mut self) {
            let _ = BUMP.try_with(|b| {
                b.close(b.opened.get() == 1 && !b.spilled.get());
                b.active.set(false);
                let used = b.used.get();
                if used > 0 {
                    b.learn(self.kind, self.input_len, used);
                }
            });
        }
    }
    let _end = End { kind, input_len };
    f()
}
