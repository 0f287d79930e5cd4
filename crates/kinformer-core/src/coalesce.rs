//! Two-slot coalescing: how the pending entries of one key (deltas in the
//! FIFO, notifications in a handler's queue) stay bounded whatever the event
//! rate.

/// An entry that can be coalesced: either a removal or a change.
pub trait Coalesce: Sized {
    /// Whether this entry removes the object.
    fn is_removal(&self) -> bool;
    /// Merges two consecutive entries that are both removals or both changes.
    fn merge(older: Self, newer: Self) -> Self;
    /// Whether this change is the consumer's first sight of the object (a
    /// handler's `on_add`), so that a removal following it removes nothing
    /// the consumer has seen. `false` when that is not known.
    fn is_first_sighting(&self) -> bool {
        false
    }
}

/// The pending entries of one key, never more than two: at most one removal
/// and one change, in arrival order.
///
/// Rules, applied as each entry arrives (`C` = change, `R` = removal):
/// - `C + C' → merge(C, C')`, `R + R' → merge(R, R')`,
/// - `C + R → [C, R]`, `R + C → [R, C]`,
/// - `[C, R] + C' → [R, C']` (the intermediate state was never applied),
///   or `[C']` when `C` was the consumer's [first
///   sighting](Coalesce::is_first_sighting): a removal of an object it was
///   never shown would be an orphan,
/// - `[R, C] + R' → [R]` (the re-created object came and went while queued).
#[derive(Debug, Clone)]
pub struct Coalesced<T> {
    first: Option<T>,
    second: Option<T>,
}

impl<T: Coalesce> Coalesced<T> {
    /// A list holding one entry.
    pub fn new(entry: T) -> Self {
        Self {
            first: Some(entry),
            second: None,
        }
    }

    /// Adds an entry, coalescing by the rules above. Returns how many
    /// entries the push folded away (0 to 2): entries merged into another,
    /// or dropped with the intermediate states they described, which the
    /// consumer will never see on their own.
    pub fn push(&mut self, entry: T) -> usize {
        let before = self.len();
        self.push_entry(entry);
        before + 1 - self.len()
    }

    fn push_entry(&mut self, entry: T) {
        let (Some(first), second) = (self.first.take(), self.second.take()) else {
            self.first = Some(entry);
            return;
        };
        let (first, second) = match (first.is_removal(), second, entry.is_removal()) {
            (a, None, b) if a == b => (T::merge(first, entry), None),
            (_, None, _) => (first, Some(entry)),
            // [C, R] + C' → [C'] when C was the first sighting
            (false, Some(_), false) if first.is_first_sighting() => (entry, None),
            // [C, R] + C' → [R, C']
            (false, Some(second), false) => (second, Some(entry)),
            // [C, R] + R' or [R, C] + C'
            (_, Some(second), _) if second.is_removal() == entry.is_removal() => {
                (first, Some(T::merge(second, entry)))
            }
            // [R, C] + R' → [R]
            (_, Some(_), _) => (first, None),
        };
        self.first = Some(first);
        self.second = second;
    }

    /// The newest entry.
    pub fn newest(&self) -> Option<&T> {
        self.second.as_ref().or(self.first.as_ref())
    }

    /// Number of entries held (0 to 2).
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + usize::from(self.second.is_some())
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(self.second.iter())
    }
}

impl<T> IntoIterator for Coalesced<T> {
    type Item = T;
    type IntoIter = std::iter::Chain<std::option::IntoIter<T>, std::option::IntoIter<T>>;

    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.second)
    }
}
