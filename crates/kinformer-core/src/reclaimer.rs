//! Where the objects the informer lets go of are freed.
//!
//! A replaced or deleted object usually lives until its handler thread has
//! delivered the notification that carries it, and that thread then frees
//! it: every one of the object's allocations is freed by a thread other
//! than the one that made them, which costs most allocators an atomic
//! operation per block and keeps the freed memory away from the thread that
//! allocates next. A producer that knows where objects were allocated (the
//! reflector decodes each key's objects on one thread) installs a
//! [`Reclaimer`] with [`SharedIndexInformer::set_reclaimer`]. Handler
//! threads hand it, once per batch of notifications delivered, the objects
//! nothing else references any more; so does the Indexer for the objects a
//! write batch replaced or removed, once no snapshot reaches them (when no
//! handler holds them longer).
//!
//! [`SharedIndexInformer::set_reclaimer`]: crate::SharedIndexInformer::set_reclaimer

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock};

use crate::delta::DeletedObject;
use crate::handler::Notification;
use crate::key::ObjectKey;
use crate::panic::caught_panic_message;

/// Takes objects the informer no longer references, to drop them where the
/// caller chooses (typically on the thread that allocated them).
///
/// ```
/// use std::sync::Arc;
/// use kinformer_core::{ObjectKey, Reclaimer};
///
/// /// Drops everything on the calling thread (what happens without one).
/// struct DropHere;
/// impl<K> Reclaimer<K> for DropHere {
///     fn reclaim(&self, objects: Vec<(ObjectKey, Arc<K>)>) {
///         drop(objects);
///     }
/// }
/// let r: Arc<dyn Reclaimer<String>> = Arc::new(DropHere);
/// r.reclaim(vec![(ObjectKey::parse("ns/a"), Arc::new("a".to_string()))]);
/// ```
pub trait Reclaimer<K>: Send + Sync {
    /// Takes the objects (each with its key, and each the last reference to
    /// its object); the implementation drops them, on any thread.
    fn reclaim(&self, objects: Vec<(ObjectKey, Arc<K>)>);
}

/// The informer's reclaimer, set at most once and shared by the Indexer and
/// every handler registration.
pub(crate) type ReclaimerSlot<K> = Arc<OnceLock<Arc<dyn Reclaimer<K>>>>;

/// Collects the objects nothing else references (from delivered
/// notifications, or retired from the cache), and hands them to the
/// reclaimer in one call when dropped.
pub(crate) struct LastReferences<'a, K> {
    reclaimer: &'a dyn Reclaimer<K>,
    objects: Vec<(ObjectKey, Arc<K>)>,
}

impl<'a, K> LastReferences<'a, K> {
    pub(crate) fn new(reclaimer: &'a dyn Reclaimer<K>) -> Self {
        Self {
            reclaimer,
            objects: Vec::new(),
        }
    }

    /// Takes the notification's objects: the last references go to the
    /// reclaimer, the others are simply released.
    pub(crate) fn take(&mut self, key: &ObjectKey, note: Notification<K>) {
        match note {
            Notification::Add { obj, .. } => self.object(key, obj),
            Notification::Update { old, new, .. } => {
                self.object(key, old);
                self.object(key, new);
            }
            Notification::Delete(DeletedObject::Final(obj)) => self.object(key, obj),
            Notification::Delete(DeletedObject::Unknown(t)) => self.object(key, t.last_known),
        }
    }

    fn object(&mut self, key: &ObjectKey, obj: Arc<K>) {
        if is_last(&obj) {
            self.objects.push((key.clone(), obj));
        }
    }

    /// Takes an object retired from the cache with its key.
    pub(crate) fn entry(&mut self, key: ObjectKey, obj: Arc<K>) {
        if is_last(&obj) {
            self.objects.push((key, obj));
        }
    }
}

/// Whether `obj` is the last reference: only this thread holds it, and
/// nobody can clone it from here on, so it is freed wherever it is dropped.
fn is_last<K>(obj: &Arc<K>) -> bool {
    Arc::strong_count(obj) == 1 && Arc::weak_count(obj) == 0
}

impl<K> Drop for LastReferences<'_, K> {
    fn drop(&mut self) {
        if self.objects.is_empty() {
            return;
        }
        let (reclaimer, objects) = (self.reclaimer, std::mem::take(&mut self.objects));
        // A panicking reclaimer must not take down a handler thread (or
        // abort a drop already unwinding): what it held is dropped here.
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| reclaimer.reclaim(objects))) {
            tracing::error!(
                panic = %caught_panic_message(panic),
                "reclaimer panicked; its objects were dropped in place"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use parking_lot::Mutex;

    use super::*;
    use crate::delta::DeletedFinalStateUnknown;

    #[derive(Default)]
    struct Collect(Mutex<Vec<(String, u32)>>);

    impl Reclaimer<u32> for Collect {
        fn reclaim(&self, objects: Vec<(ObjectKey, Arc<u32>)>) {
            let mut seen = self.0.lock();
            for (key, obj) in objects {
                // Only last references are handed over; a panic here would
                // be caught, so a shared one is recorded as a value of 0.
                let value = if Arc::strong_count(&obj) == 1 {
                    *obj
                } else {
                    0
                };
                seen.push((key.to_string(), value));
            }
        }
    }

    #[test]
    fn only_last_references_are_handed_over_in_one_call_per_batch() {
        let collect = Collect::default();
        let cached = Arc::new(2u32);
        let kept = Arc::new(5u32);
        let (a, b, c) = (
            ObjectKey::parse("ns/a"),
            ObjectKey::parse("ns/b"),
            ObjectKey::parse("ns/c"),
        );
        {
            let mut garbage = LastReferences::new(&collect);
            // Replaced: the old version is the last reference, the new one
            // is still cached.
            garbage.take(
                &a,
                Notification::Update {
                    old: Arc::new(1),
                    new: Arc::clone(&cached),
                    is_resync: false,
                },
            );
            // Someone else still holds this one.
            garbage.take(
                &b,
                Notification::Add {
                    obj: Arc::clone(&kept),
                    is_in_initial_list: false,
                },
            );
            garbage.take(&b, Notification::Delete(DeletedObject::Final(Arc::new(3))));
            garbage.take(
                &c,
                Notification::Delete(DeletedObject::Unknown(DeletedFinalStateUnknown {
                    key: c.clone(),
                    last_known: Arc::new(4),
                })),
            );
            assert!(
                collect.0.lock().is_empty(),
                "handed over when the batch ends"
            );
        }
        assert_eq!(
            *collect.0.lock(),
            vec![("ns/a".into(), 1), ("ns/b".into(), 3), ("ns/c".into(), 4)]
        );
        assert_eq!(
            (Arc::strong_count(&cached), Arc::strong_count(&kept)),
            (1, 1)
        );
    }

    #[test]
    fn a_panicking_reclaimer_is_caught_and_its_objects_dropped() {
        use std::sync::atomic::{AtomicUsize, Ordering};

        /// Counts its drops.
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        struct Panics;
        impl Reclaimer<Counted> for Panics {
            fn reclaim(&self, _: Vec<(ObjectKey, Arc<Counted>)>) {
                panic!("reclaimer bug");
            }
        }
        let drops = Arc::new(AtomicUsize::new(0));
        {
            let mut last = LastReferences::new(&Panics);
            last.entry(ObjectKey::parse("a"), Arc::new(Counted(Arc::clone(&drops))));
            last.entry(ObjectKey::parse("b"), Arc::new(Counted(Arc::clone(&drops))));
        }
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_batch_without_last_references_makes_no_call() {
        // Counts calls (a panic would be caught by `LastReferences`).
        #[derive(Default)]
        struct Calls(Mutex<usize>);
        impl Reclaimer<u32> for Calls {
            fn reclaim(&self, _: Vec<(ObjectKey, Arc<u32>)>) {
                *self.0.lock() += 1;
            }
        }
        let calls = Calls::default();
        let held = Arc::new(1u32);
        {
            let mut garbage = LastReferences::new(&calls);
            garbage.take(
                &ObjectKey::parse("a"),
                Notification::Add {
                    obj: Arc::clone(&held),
                    is_in_initial_list: true,
                },
            );
        }
        assert_eq!(*calls.0.lock(), 0);
        {
            let mut garbage = LastReferences::new(&calls);
            garbage.entry(ObjectKey::parse("b"), Arc::new(2));
        }
        assert_eq!(*calls.0.lock(), 1, "one object handed over: one call");
    }
}
