//! A persistent hash array mapped trie whose versions share nodes without
//! reference counts.
//!
//! A [`Trie`] is a plain handle (root pointer and length): copying it aliases
//! the nodes. Only the writer changes a trie, and only nodes stamped with the
//! writer's current generation are changed in place; an older node is copied
//! first and the original handed to a [`Garbage`] list, as is every replaced
//! or removed entry. Copying a node is a `memcpy` of its slots: no child's or
//! entry's counter is touched, so an update at a million entries costs a few
//! node copies, not a few hundred cache misses on reference counts.
//!
//! Soundness rests on one rule, kept by [`reclaim`](super::reclaim): a
//! handle is only dereferenced while the garbage of every later change is
//! still alive, and the nodes it reaches are freed exactly once (as garbage,
//! or by [`Trie::free_all`] on the writer's final tree).
#![allow(unsafe_code)]

use std::alloc::Layout;
use std::borrow::Borrow;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ptr::NonNull;

/// Bits of the hash consumed per level: 64 children per node, so a million
/// entries sit about four nodes deep.
const BITS: u32 = 6;
const MASK: u64 = (1 << BITS) - 1;
/// One bit per possible child.
type Bitmap = u64;

/// One stored key and value with the key's hash.
pub(crate) struct Entry<K, V> {
    pub(crate) hash: u64,
    pub(crate) key: K,
    pub(crate) value: V,
}

/// A slot of a node. It has no drop glue: entries are dropped as garbage or
/// by [`Trie::free_all`], never when a node's memory is released.
enum Slot<K, V> {
    Entry(ManuallyDrop<Entry<K, V>>),
    Node(Node<K, V>),
}

/// A node: its header lives in the slot (or handle) pointing to it, its
/// slots in one allocation, so a lookup makes one dependent load per level.
struct Node<K, V> {
    /// The writer generation that allocated `slots`; only a node of the
    /// current generation may change in place.
    generation: u64,
    /// Which of the 64 children exist (unused by a collision node).
    bitmap: Bitmap,
    /// The slots (a boxed slice of `len` slots).
    ptr: NonNull<Slot<K, V>>,
    len: u32,
    /// Set when the hash is used up: the slots are entries with equal hashes.
    collision: bool,
}

impl<K, V> Clone for Node<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for Node<K, V> {}

impl<K, V> Node<K, V> {
    fn new(generation: u64, bitmap: Bitmap, collision: bool, slots: Vec<Slot<K, V>>) -> Self {
        let (ptr, len) = leak(slots);
        Self {
            generation,
            bitmap,
            ptr,
            len,
            collision,
        }
    }

    fn slots(&self) -> &[Slot<K, V>] {
        // SAFETY: the module rule: the slots of a node reachable from a live
        // handle are alive while the handle's owner is borrowed.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }

    /// A bitwise copy of the slots, with `slot` inserted at `insert` and
    /// the slot at `remove` left out (returned), in a new buffer.
    fn copy_slots(
        &self,
        insert: Option<(usize, Slot<K, V>)>,
        remove: Option<usize>,
    ) -> (Buffer<K, V>, Option<Slot<K, V>>) {
        let old = self.slots();
        let len = old.len() + usize::from(insert.is_some()) - usize::from(remove.is_some());
        let buffer = Buffer::allocate(len);
        let (src, dst) = (old.as_ptr(), buffer.0.as_ptr());
        // SAFETY: `Slot` has no drop glue; the copies alias what the
        // original owns until the caller retires or frees the original.
        // `dst` has room for `len` slots and every position below `len` is
        // written once: the positions before `at`, then the inserted slot
        // (or none), then the rest shifted by one either way.
        let removed = unsafe {
            match (insert, remove) {
                (None, None) => {
                    std::ptr::copy_nonoverlapping(src, dst, old.len());
                    None
                }
                (Some((at, slot)), None) => {
                    std::ptr::copy_nonoverlapping(src, dst, at);
                    dst.add(at).write(slot);
                    std::ptr::copy_nonoverlapping(src.add(at), dst.add(at + 1), old.len() - at);
                    None
                }
                (None, Some(at)) => {
                    std::ptr::copy_nonoverlapping(src, dst, at);
                    std::ptr::copy_nonoverlapping(src.add(at + 1), dst.add(at), old.len() - at - 1);
                    Some(std::ptr::read(src.add(at)))
                }
                (Some(_), Some(_)) => unreachable!("a copy inserts or removes, not both"),
            }
        };
        (buffer, removed)
    }

    /// Replaces the slots by `slots` (allocated in `generation`); the old
    /// ones are retired when published, freed when they were this
    /// generation's (no reader can reach them).
    fn replace_slots(&mut self, generation: u64, garbage: &mut Garbage<K, V>, slots: Buffer<K, V>) {
        let old = (self.ptr, self.len);
        (self.ptr, self.len) = slots.into_raw();
        if self.generation == generation {
            // SAFETY: allocated this generation, so never published.
            unsafe { free_slots(old) };
        } else {
            garbage.nodes.push(old);
        }
        self.generation = generation;
    }

    /// The slots for changing in place, copying them first (and retiring the
    /// originals) when they belong to an older generation.
    fn writable(&mut self, generation: u64, garbage: &mut Garbage<K, V>) -> &mut [Slot<K, V>] {
        if self.generation != generation {
            let (copy, _) = self.copy_slots(None, None);
            self.replace_slots(generation, garbage, copy);
        }
        // SAFETY: the writer is the only one changing nodes, and slots of the
        // current generation are reachable by no published version.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len as usize) }
    }

    /// Inserts `slot` at `pos`, in a new allocation.
    fn insert_slot(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        pos: usize,
        slot: Slot<K, V>,
    ) {
        assert!(
            pos <= self.slots().len(),
            "a slot is inserted within its node"
        );
        let (slots, _) = self.copy_slots(Some((pos, slot)), None);
        self.replace_slots(generation, garbage, slots);
    }

    /// Removes the slot at `pos`, in a new allocation.
    fn remove_slot(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        pos: usize,
    ) -> Slot<K, V> {
        assert!(pos < self.slots().len(), "a removed slot is in its node");
        let (slots, slot) = self.copy_slots(None, Some(pos));
        self.replace_slots(generation, garbage, slots);
        slot.unwrap_or_else(|| unreachable!("a removing copy returns the slot"))
    }

    /// The position of `key`'s slot, if this node has one.
    fn find<Q>(&self, shift: u32, hash: u64, key: &Q) -> Option<usize>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        if self.collision {
            return self.slots().iter().position(
                |s| matches!(s, Slot::Entry(e) if e.hash == hash && e.key.borrow() == key),
            );
        }
        let bit = bit_of(hash, shift);
        (self.bitmap & bit != 0).then(|| position(self.bitmap, bit))
    }
}

/// A node's slots in a buffer of exactly their number, written by whoever
/// allocated it before it becomes a node's.
struct Buffer<K, V>(NonNull<Slot<K, V>>, u32);

impl<K, V> Buffer<K, V> {
    /// Room for `len` slots (none allocated for zero).
    fn allocate(len: usize) -> Self {
        let len32 = u32::try_from(len)
            .expect("a node holds at most 64 slots, or one per full-hash collision");
        let ptr = match layout::<K, V>(len) {
            Some(_) => {
                let slots = Box::<[Slot<K, V>]>::new_uninit_slice(len);
                NonNull::from(Box::leak(slots)).cast()
            }
            None => NonNull::dangling(),
        };
        Self(ptr, len32)
    }

    /// The buffer as a node's pointer and length.
    fn into_raw(self) -> (NonNull<Slot<K, V>>, u32) {
        (self.0, self.1)
    }
}

/// The layout of `len` slots (`None` for none).
fn layout<K, V>(len: usize) -> Option<Layout> {
    let layout = Layout::array::<Slot<K, V>>(len).expect("a node's slots fit in memory");
    (layout.size() > 0).then_some(layout)
}

/// `slots` moved into a buffer of their own.
fn leak<K, V>(mut slots: Vec<Slot<K, V>>) -> (NonNull<Slot<K, V>>, u32) {
    let buffer = Buffer::allocate(slots.len());
    // SAFETY: the buffer has room for every slot; the vector forgets them
    // (a bitwise move).
    unsafe {
        std::ptr::copy_nonoverlapping(slots.as_ptr(), buffer.0.as_ptr(), slots.len());
        slots.set_len(0);
    }
    buffer.into_raw()
}

/// Frees a node's slot buffer (the slots are not dropped: `Slot` has no
/// drop glue).
///
/// # Safety
/// `slots` came from a [`Buffer`] and is reachable by nobody any more.
unsafe fn free_slots<K, V>((ptr, len): (NonNull<Slot<K, V>>, u32)) {
    if layout::<K, V>(len as usize).is_some() {
        let slots = std::ptr::slice_from_raw_parts_mut(
            ptr.as_ptr().cast::<MaybeUninit<Slot<K, V>>>(),
            len as usize,
        );
        // SAFETY: the caller's contract; `Buffer::allocate` made this box of
        // `len` slots and leaked it. Dropping `MaybeUninit` slots drops
        // nothing.
        drop(unsafe { Box::from_raw(slots) });
    }
}

/// What a write retired: node slots (freed without touching them) and
/// entries (dropped), to be released once no reader can reach them.
pub(crate) struct Garbage<K, V> {
    nodes: Vec<(NonNull<Slot<K, V>>, u32)>,
    entries: Vec<Entry<K, V>>,
}

impl<K, V> Default for Garbage<K, V> {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            entries: Vec::new(),
        }
    }
}

impl<K, V> Garbage<K, V> {
    /// Takes the retired entries out (the nodes stay, freed on drop).
    pub(crate) fn take_entries(&mut self) -> Vec<Entry<K, V>> {
        std::mem::take(&mut self.entries)
    }

    /// Retires an entry taken out of a writable node.
    pub(crate) fn retire(&mut self, entry: Entry<K, V>) {
        self.entries.push(entry);
    }

    /// The value of the entry retired last.
    pub(crate) fn last_value(&self) -> Option<&V> {
        self.entries.last().map(|e| &e.value)
    }
}

impl<K, V> Drop for Garbage<K, V> {
    fn drop(&mut self) {
        for slots in self.nodes.drain(..) {
            // SAFETY: retired slots are retired once, and garbage is dropped
            // only when no reader holds a version that reaches them.
            unsafe { free_slots(slots) };
        }
    }
}

// SAFETY: garbage owns its nodes' memory and its entries; it is only touched
// by the writer (under its lock) and by whoever drops it.
unsafe impl<K: Send, V: Send> Send for Garbage<K, V> {}
// SAFETY: nothing is read through `&Garbage`.
unsafe impl<K: Sync, V: Sync> Sync for Garbage<K, V> {}

/// A handle on one version of a trie: cheap to copy, owning nothing.
pub(crate) struct Trie<K, V> {
    root: Option<Node<K, V>>,
    len: usize,
}

impl<K, V> Clone for Trie<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K, V> Copy for Trie<K, V> {}

// SAFETY: a handle only reads `K` and `V` through shared references (see the
// module rule for when it may be dereferenced).
unsafe impl<K: Sync, V: Sync> Send for Trie<K, V> {}
// SAFETY: as above.
unsafe impl<K: Sync, V: Sync> Sync for Trie<K, V> {}

impl<K, V> Default for Trie<K, V> {
    fn default() -> Self {
        Self { root: None, len: 0 }
    }
}

/// Asks the CPU to start loading the cache line at `p` for writing, to
/// overlap that miss with others; a no-op on other architectures.
#[inline]
pub(crate) fn prefetch_for_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address,
    // and SSE is part of the x86-64 baseline.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_ET0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[inline(always)]
fn bit_of(hash: u64, shift: u32) -> Bitmap {
    1 << ((hash >> shift) & MASK)
}

#[inline(always)]
fn position(bitmap: Bitmap, bit: Bitmap) -> usize {
    (bitmap & (bit - 1)).count_ones() as usize
}

impl<K, V> Trie<K, V> {
    /// An empty trie.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the trie is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The entry stored under `key` (whose hash is `hash`).
    #[inline]
    pub(crate) fn get<Q>(&self, hash: u64, key: &Q) -> Option<&Entry<K, V>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.get_hinted(hash, key, |_| ())
    }

    /// As [`get`](Self::get), calling `found` with the value of the entry
    /// whose hash matches as soon as its slot is reached, before the key is
    /// compared: the caller can start loading what it touches next while
    /// the comparison waits for the key's bytes.
    ///
    /// A build for x86-64 without POPCNT in its target features (the
    /// default target, `x86-64`) asks the CPU at run time whether it has
    /// the instruction, and walks with it when it has: the rank of a child
    /// is one popcount per level, which the default target emulates in
    /// about ten instructions.
    #[inline]
    pub(crate) fn get_hinted<Q>(
        &self,
        hash: u64,
        key: &Q,
        found: impl FnOnce(&V),
    ) -> Option<&Entry<K, V>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has POPCNT, the one feature the function
            // enables (checked just above).
            return unsafe { self.get_hinted_popcnt(hash, key, found) };
        }
        self.walk(hash, key, found)
    }

    /// [`get_hinted`](Self::get_hinted) compiled with POPCNT.
    #[cfg(all(target_arch = "x86_64", not(target_feature = "popcnt")))]
    #[target_feature(enable = "popcnt")]
    fn get_hinted_popcnt<Q>(
        &self,
        hash: u64,
        key: &Q,
        found: impl FnOnce(&V),
    ) -> Option<&Entry<K, V>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.walk(hash, key, found)
    }

    /// The walk of [`get_hinted`](Self::get_hinted), inlined into each
    /// caller so that it is compiled with the caller's target features.
    #[inline(always)]
    fn walk<Q>(&self, hash: u64, key: &Q, found: impl FnOnce(&V)) -> Option<&Entry<K, V>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let mut node = self.root.as_ref()?;
        let mut shift = 0;
        loop {
            if node.collision {
                let pos = node.find(shift, hash, key)?;
                return match &node.slots()[pos] {
                    Slot::Entry(e) => Some(e),
                    Slot::Node(_) => None,
                };
            }
            let bit = bit_of(hash, shift);
            if node.bitmap & bit == 0 {
                return None;
            }
            // SAFETY: a node has one slot per bit set in its bitmap, in
            // order, so the rank of a set bit is in bounds.
            let slot = unsafe { &*node.ptr.as_ptr().add(position(node.bitmap, bit)) };
            match slot {
                Slot::Node(child) => {
                    node = child;
                    shift += BITS;
                }
                Slot::Entry(e) => {
                    if e.hash != hash {
                        return None;
                    }
                    found(&e.value);
                    return (e.key.borrow() == key).then_some(&**e);
                }
            }
        }
    }

    /// Every entry, in no particular order.
    pub(crate) fn iter(&self) -> Iter<'_, K, V> {
        let mut stack = Vec::with_capacity(8);
        if let Some(root) = &self.root {
            stack.push(root.slots().iter());
        }
        Iter {
            stack,
            remaining: self.len,
        }
    }

    /// Stores `value` under `key`; returns a clone of the replaced value.
    #[cfg(test)]
    pub(crate) fn insert(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: K,
        value: V,
    ) -> Option<V>
    where
        K: Eq,
        V: Clone,
    {
        self.insert_with(generation, garbage, hash, key, |_| value)
            .then(|| garbage.last_value().cloned())
            .flatten()
    }

    /// Stores under `key` the value `make` builds from the one it replaces
    /// (if any). Returns whether a value was replaced (it is then the last
    /// entry of `garbage`).
    pub(crate) fn insert_with(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: K,
        make: impl FnOnce(Option<&V>) -> V,
    ) -> bool
    where
        K: Eq,
    {
        let replaced = match &mut self.root {
            None => {
                let entry = Entry {
                    hash,
                    key,
                    value: make(None),
                };
                let slots = vec![Slot::Entry(ManuallyDrop::new(entry))];
                self.root = Some(Node::new(generation, bit_of(hash, 0), false, slots));
                false
            }
            Some(root) => insert_at(root, 0, generation, garbage, (hash, key, make)),
        };
        if !replaced {
            self.len += 1;
        }
        replaced
    }

    /// Removes `key`; returns a clone of the removed value.
    pub(crate) fn remove<Q>(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: &Q,
    ) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
        V: Clone,
    {
        self.remove_quiet(generation, garbage, hash, key)
            .then(|| garbage.last_value().cloned())
            .flatten()
    }

    /// Removes `key`; returns whether it was present (the removed entry is
    /// then the last entry of `garbage`).
    pub(crate) fn remove_quiet<Q>(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: &Q,
    ) -> bool
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        // Only copy a path when there is something to remove.
        if self.get(hash, key).is_none() {
            return false;
        }
        let Some(root) = self.root.as_mut() else {
            return false;
        };
        let removed = remove_at(root, 0, generation, garbage, hash, key);
        if root.slots().is_empty() {
            // SAFETY: `remove_at` reallocated the root's slots in this
            // generation: no published version reaches them.
            unsafe { free_slots((root.ptr, root.len)) };
            self.root = None;
        }
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Frees every node and drops every entry through `drop_entry`.
    ///
    /// # Safety
    /// Only for the writer's final tree, when no version can reach these
    /// nodes any more, and with no other owner of the entries.
    pub(crate) unsafe fn free_all(self, drop_entry: &mut impl FnMut(Entry<K, V>)) {
        if let Some(root) = self.root {
            // SAFETY: the caller's contract.
            unsafe { free_node(root, drop_entry) }
        }
    }
}

impl<K, V: Nested> Trie<K, V> {
    /// The value under `key` for changing in place, inserted by `make` when
    /// absent. Only for values that are themselves copy-on-write by
    /// generation ([`Nested`]): the published versions keep the old value.
    pub(crate) fn get_or_insert_mut<Q>(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: &Q,
        make: impl FnOnce() -> (K, V),
    ) -> &mut V
    where
        K: Borrow<Q> + Eq,
        Q: Eq + ?Sized,
    {
        if self.get(hash, key).is_none() {
            let (k, v) = make();
            self.insert_with(generation, garbage, hash, k, |_| v);
        }
        self.present_mut(generation, garbage, hash, key)
    }

    /// The value under `key` for changing in place, if present.
    pub(crate) fn get_mut<Q>(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: &Q,
    ) -> Option<&mut V>
    where
        K: Borrow<Q> + Eq,
        Q: Eq + ?Sized,
    {
        self.get(hash, key)?;
        Some(self.present_mut(generation, garbage, hash, key))
    }

    /// The value of a key known to be present, its path made writable.
    fn present_mut<Q>(
        &mut self,
        generation: u64,
        garbage: &mut Garbage<K, V>,
        hash: u64,
        key: &Q,
    ) -> &mut V
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let mut node = self.root.as_mut().expect("the entry is present");
        let mut shift = 0;
        loop {
            let pos = node.find(shift, hash, key).expect("the entry is present");
            match &mut node.writable(generation, garbage)[pos] {
                Slot::Entry(e) => return &mut e.value,
                Slot::Node(child) => {
                    node = child;
                    shift += BITS;
                }
            }
        }
    }
}

/// Values that may be changed in place inside a writable node because they
/// are themselves generation-copy-on-write handles (a nested [`Trie`]):
/// changing the copy never changes what the published versions see.
pub(crate) trait Nested {}
impl<K, V> Nested for Trie<K, V> {}

/// The entry being inserted: its hash and key, and how to build its value
/// from the one it replaces.
type Pending<K, F> = (u64, K, F);

fn new_entry<K, V>((hash, key, make): Pending<K, impl FnOnce(Option<&V>) -> V>) -> Entry<K, V> {
    Entry {
        hash,
        key,
        value: make(None),
    }
}

/// Inserts below `node`; returns whether an entry was replaced.
fn insert_at<K: Eq, V>(
    node: &mut Node<K, V>,
    shift: u32,
    generation: u64,
    garbage: &mut Garbage<K, V>,
    pending: Pending<K, impl FnOnce(Option<&V>) -> V>,
) -> bool {
    let hash = pending.0;
    if node.collision {
        let found = node
            .slots()
            .iter()
            .position(|s| matches!(s, Slot::Entry(e) if e.key == pending.1));
        let Some(pos) = found else {
            let len = node.slots().len();
            let entry = new_entry(pending);
            node.insert_slot(
                generation,
                garbage,
                len,
                Slot::Entry(ManuallyDrop::new(entry)),
            );
            return false;
        };
        let Slot::Entry(e) = &mut node.writable(generation, garbage)[pos] else {
            unreachable!("a collision node holds entries")
        };
        replace_entry(e, pending, garbage);
        return true;
    }
    let bit = bit_of(hash, shift);
    let pos = position(node.bitmap, bit);
    if node.bitmap & bit == 0 {
        node.bitmap |= bit;
        let entry = new_entry(pending);
        node.insert_slot(
            generation,
            garbage,
            pos,
            Slot::Entry(ManuallyDrop::new(entry)),
        );
        return false;
    }
    let slot = &mut node.writable(generation, garbage)[pos];
    match slot {
        Slot::Node(child) => insert_at(child, shift + BITS, generation, garbage, pending),
        Slot::Entry(e) if e.hash == hash && e.key == pending.1 => {
            replace_entry(e, pending, garbage);
            true
        }
        Slot::Entry(e) => {
            // SAFETY: the existing entry moves into a new child; the slot is
            // overwritten right after, so it has one owner again.
            let existing = unsafe { ManuallyDrop::take(e) };
            *slot = Slot::Node(pair(shift + BITS, generation, existing, new_entry(pending)));
            false
        }
    }
}

/// Puts a new value in place of `slot`'s, built from the old one, and
/// retires the old value (readers of older versions may still hold it) with
/// the key just passed in: the stored key stays, so that other tables
/// holding the same shared key keep pointing at the stored one.
fn replace_entry<K, V>(
    slot: &mut ManuallyDrop<Entry<K, V>>,
    (hash, key, make): Pending<K, impl FnOnce(Option<&V>) -> V>,
    garbage: &mut Garbage<K, V>,
) {
    let value = make(Some(&slot.value));
    let old = std::mem::replace(&mut slot.value, value);
    garbage.entries.push(Entry {
        hash,
        key,
        value: old,
    });
}

/// A new subtree at `shift` holding two entries with different keys.
fn pair<K, V>(shift: u32, generation: u64, a: Entry<K, V>, b: Entry<K, V>) -> Node<K, V> {
    if shift >= u64::BITS {
        let slots = vec![
            Slot::Entry(ManuallyDrop::new(a)),
            Slot::Entry(ManuallyDrop::new(b)),
        ];
        return Node::new(generation, 0, true, slots);
    }
    let (bit_a, bit_b) = (bit_of(a.hash, shift), bit_of(b.hash, shift));
    if bit_a == bit_b {
        let child = pair(shift + BITS, generation, a, b);
        return Node::new(generation, bit_a, false, vec![Slot::Node(child)]);
    }
    let (first, second) = if bit_a < bit_b { (a, b) } else { (b, a) };
    let slots = vec![
        Slot::Entry(ManuallyDrop::new(first)),
        Slot::Entry(ManuallyDrop::new(second)),
    ];
    Node::new(generation, bit_a | bit_b, false, slots)
}

/// Removes a key known to be present below `node`. Empty children are
/// dropped and a child left with a single entry is folded into its parent.
/// Returns whether the key was found (its entry is then the last garbage).
fn remove_at<K, V, Q>(
    node: &mut Node<K, V>,
    shift: u32,
    generation: u64,
    garbage: &mut Garbage<K, V>,
    hash: u64,
    key: &Q,
) -> bool
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    let Some(pos) = node.find(shift, hash, key) else {
        return false;
    };
    let bit = if node.collision {
        0
    } else {
        bit_of(hash, shift)
    };
    if let Slot::Entry(_) = &node.slots()[pos] {
        let Slot::Entry(e) = node.remove_slot(generation, garbage, pos) else {
            unreachable!("matched an entry")
        };
        node.bitmap &= !bit;
        garbage.entries.push(ManuallyDrop::into_inner(e));
        return true;
    }
    let Slot::Node(child) = &mut node.writable(generation, garbage)[pos] else {
        unreachable!("matched a node")
    };
    let removed = remove_at(child, shift + BITS, generation, garbage, hash, key);
    // `remove_at` reallocated the child's slots in this generation: no
    // published version reaches them, so they may be reshaped or freed now.
    match child.slots().len() {
        0 => {
            let emptied = (child.ptr, child.len);
            node.remove_slot(generation, garbage, pos);
            node.bitmap &= !bit;
            // SAFETY: see above.
            unsafe { free_slots(emptied) };
        }
        1 if matches!(child.slots()[0], Slot::Entry(_)) => {
            let emptied = (child.ptr, child.len);
            // SAFETY: a bitwise move of the lone entry; its old slots are
            // freed right after without being read again.
            let lone = unsafe { std::ptr::read(&child.slots()[0]) };
            node.writable(generation, garbage)[pos] = lone;
            // SAFETY: see above.
            unsafe { free_slots(emptied) };
        }
        _ => {}
    }
    removed
}

/// # Safety
/// See [`Trie::free_all`].
unsafe fn free_node<K, V>(node: Node<K, V>, drop_entry: &mut impl FnMut(Entry<K, V>)) {
    for i in 0..node.len as usize {
        // SAFETY: the caller's contract: `node` is exclusively ours now, so
        // each slot is moved out once before its buffer is freed.
        match unsafe { std::ptr::read(node.ptr.as_ptr().add(i)) } {
            Slot::Entry(e) => drop_entry(ManuallyDrop::into_inner(e)),
            // SAFETY: as above, for the whole subtree.
            Slot::Node(child) => unsafe { free_node(child, drop_entry) },
        }
    }
    // SAFETY: as above; every slot was moved out.
    unsafe { free_slots((node.ptr, node.len)) };
}

/// Iterator over the entries of a [`Trie`].
pub(crate) struct Iter<'a, K, V> {
    stack: Vec<std::slice::Iter<'a, Slot<K, V>>>,
    remaining: usize,
}

impl<'a, K, V> Iterator for Iter<'a, K, V> {
    type Item = &'a Entry<K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.stack.last_mut()?.next() {
                Some(Slot::Entry(e)) => {
                    self.remaining -= 1;
                    return Some(e);
                }
                Some(Slot::Node(child)) => self.stack.push(child.slots().iter()),
                None => {
                    self.stack.pop();
                }
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<K, V> ExactSizeIterator for Iter<'_, K, V> {}

#[cfg(test)]
mod tests;
