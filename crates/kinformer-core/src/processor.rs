//! The processor pool's work: pop deltas, apply them to the Indexer as one
//! published batch, then hand the resulting notifications to every handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use arc_swap::ArcSwap;
use kube_core::Resource;

use crate::delta::{Delta, Deltas};
use crate::fifo::{DeltaFifo, ObjectDigest, Popped};
use crate::handler::Notification;
use crate::indexer::{EarlyDigest, Indexer, WriteBatch};
use crate::key::ObjectKey;
use crate::latency::{Histogram, Samples};
use crate::reclaimer::ReclaimerSlot;
use crate::registration::Registration;
use crate::synced::SyncSignal;

#[derive(Default)]
pub(crate) struct ProcessorCounters {
    pub(crate) deltas: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) unknown_deletes: AtomicU64,
    /// From a key's oldest delta queued to the cache holding it (sampled).
    pub(crate) event_to_cache: Histogram,
}

/// What the pool threads share.
pub(crate) struct Pipeline<K> {
    pub(crate) fifo: Arc<DeltaFifo<K>>,
    pub(crate) indexer: Indexer<K>,
    pub(crate) registrations: ArcSwap<Vec<Arc<Registration<K>>>>,
    pub(crate) reclaimer: ReclaimerSlot<K>,
    pub(crate) synced: Arc<AtomicBool>,
    /// The queue's [`SyncSignal`], also notified by the registrations
    /// (their last initial notification) and at shutdown.
    pub(crate) signal: Arc<SyncSignal>,
    pub(crate) counters: ProcessorCounters,
}

impl<K: Resource + Send + Sync + 'static> Pipeline<K> {
    /// One pool thread: runs until the FIFO is closed.
    pub(crate) fn run_worker(&self, batch_size: usize) {
        while let Some(batch) = self.fifo.pop_batch(batch_size) {
            self.process(batch);
            if self.fifo.is_empty() {
                self.indexer.release_unheld();
            }
        }
    }

    /// Applies one batch: cache first, then handlers, then releases the keys.
    pub(crate) fn process(&self, batch: Vec<Popped<K>>) {
        let mut notes = Vec::with_capacity(batch.len());
        let mut keys = Vec::with_capacity(batch.len());
        // The sampled keys' queue times (most batches have none).
        let mut queued = Vec::new();
        let mut tally = Tally::default();
        let ((), seq) = self.indexer.apply_batch(|w| {
            for popped in batch {
                Self::apply(
                    w,
                    &popped.key,
                    popped.deltas,
                    popped.is_in_initial_list,
                    popped.digest,
                    &mut notes,
                    &mut tally,
                );
                keys.push((popped.key, popped.is_in_initial_list));
                queued.extend(popped.queued_at);
            }
        });
        let c = &self.counters;
        if !queued.is_empty() {
            let published = Instant::now();
            let mut waits = Samples::default();
            for at in queued {
                waits.record(published.saturating_duration_since(at), 1);
            }
            c.event_to_cache.add(&waits);
        }
        c.deltas.fetch_add(tally.deltas, Ordering::Relaxed);
        c.unknown_deletes
            .fetch_add(tally.unknown_deletes, Ordering::Relaxed);
        let regs = self.registrations.load();
        let mut due = regs
            .iter()
            .filter(|reg| reg.start_seq.load(Ordering::SeqCst) < seq)
            .peekable();
        while let Some(reg) = due.next() {
            if due.peek().is_some() {
                reg.push(notes.iter().map(|(k, n)| (k.clone(), n.clone())));
            } else {
                // The last registration takes the notifications themselves.
                reg.push(notes.drain(..));
            }
        }
        c.batches.fetch_add(1, Ordering::Relaxed);
        self.fifo
            .done(keys.iter().map(|(k, initial)| (k, *initial)));
        if !self.synced.load(Ordering::Relaxed) && self.fifo.has_synced() {
            self.synced.store(true, Ordering::SeqCst);
        }
    }

    /// Applies the deltas of one key, turning each into a notification
    /// (the delta's object moves into it); `digest` is the newest object's
    /// (see [`Popped`]).
    fn apply(
        w: &mut WriteBatch<'_, K>,
        key: &ObjectKey,
        deltas: Deltas<K>,
        is_in_initial_list: bool,
        digest: Option<ObjectDigest>,
        notes: &mut Vec<(ObjectKey, Notification<K>)>,
        tally: &mut Tally,
    ) {
        let stored = |w: &mut WriteBatch<'_, K>, o: Arc<K>, how| {
            let early = digest.and_then(|d| d.of_object(&o));
            upserted(w, key, o, how, is_in_initial_list, early)
        };
        for delta in deltas {
            tally.deltas += 1;
            let note = match delta {
                Delta::Deleted(d) => {
                    if w.remove(key).is_none() {
                        // No handler was shown this object (as client-go's
                        // DeltaFIFO drops a delete of an unknown key).
                        tally.unknown_deletes += 1;
                        tracing::debug!(key = %key, "delete of a key that is not cached");
                        continue;
                    }
                    Notification::Delete(d)
                }
                Delta::Added(o) | Delta::Updated(o) => stored(w, o, Upsert::Change),
                Delta::Replaced(o) => stored(w, o, Upsert::Replaced),
                Delta::Sync(o) => stored(w, o, Upsert::Sync),
            };
            notes.push((key.clone(), note));
        }
    }
}

/// Counts of one batch, added to the shared counters once.
#[derive(Default)]
struct Tally {
    deltas: u64,
    unknown_deletes: u64,
}

/// Why an object is being stored.
enum Upsert {
    /// A change seen by the producer.
    Change,
    /// Listed by a relist: a resync when its resource version is unchanged.
    Replaced,
    /// A periodic resync.
    Sync,
}

/// Stores `obj` and says what handlers hear of it.
fn upserted<K: Resource>(
    w: &mut WriteBatch<'_, K>,
    key: &ObjectKey,
    obj: Arc<K>,
    how: Upsert,
    is_in_initial_list: bool,
    early: Option<EarlyDigest>,
) -> Notification<K> {
    match w.upsert_digested(key.clone(), Arc::clone(&obj), early) {
        Some(old) => {
            let is_resync = match how {
                Upsert::Change => false,
                Upsert::Replaced => same_resource_version(&*old, &*obj),
                Upsert::Sync => true,
            };
            Notification::Update {
                old,
                new: obj,
                is_resync,
            }
        }
        None => Notification::Add {
            obj,
            is_in_initial_list,
        },
    }
}

fn same_resource_version<K: Resource>(a: &K, b: &K) -> bool {
    let (a, b) = (&a.meta().resource_version, &b.meta().resource_version);
    a.is_some() && a == b
}
