//! The processor pool's work: pop deltas, apply them to the Indexer as one
//! published batch, then hand the resulting notifications to every handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwap;
use kube_core::Resource;

use crate::delta::Delta;
use crate::fifo::{DeltaFifo, Popped};
use crate::handler::Notification;
use crate::indexer::{Indexer, WriteBatch};
use crate::key::ObjectKey;
use crate::registration::Registration;

#[derive(Default)]
pub(crate) struct ProcessorCounters {
    pub(crate) deltas: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) unknown_deletes: AtomicU64,
}

/// What the pool threads share.
pub(crate) struct Pipeline<K> {
    pub(crate) fifo: Arc<DeltaFifo<K>>,
    pub(crate) indexer: Indexer<K>,
    pub(crate) registrations: ArcSwap<Vec<Arc<Registration<K>>>>,
    pub(crate) synced: Arc<AtomicBool>,
    pub(crate) counters: ProcessorCounters,
}

impl<K: Resource + Send + Sync + 'static> Pipeline<K> {
    /// One pool thread: runs until the FIFO is closed.
    pub(crate) fn run_worker(&self, batch_size: usize) {
        while let Some(batch) = self.fifo.pop_batch(batch_size) {
            self.process(batch);
        }
    }

    /// Applies one batch: cache first, then handlers, then releases the keys.
    pub(crate) fn process(&self, batch: Vec<Popped<K>>) {
        let mut notes = Vec::with_capacity(batch.len());
        let ((), seq) = self.indexer.write(|w| {
            for popped in &batch {
                self.apply(w, popped, &mut notes);
            }
        });
        let regs = self.registrations.load();
        for reg in regs.iter() {
            if reg.start_seq.load(Ordering::SeqCst) < seq {
                reg.push(&notes);
            }
        }
        self.counters.batches.fetch_add(1, Ordering::Relaxed);
        self.fifo
            .done(batch.iter().map(|p| (&p.key, p.is_in_initial_list)));
        if !self.synced.load(Ordering::Relaxed) && self.fifo.has_synced() {
            self.synced.store(true, Ordering::SeqCst);
        }
    }

    fn apply(
        &self,
        w: &mut WriteBatch<'_, K>,
        popped: &Popped<K>,
        notes: &mut Vec<(ObjectKey, Notification<K>)>,
    ) {
        let key = &popped.key;
        for delta in popped.deltas.iter() {
            self.counters.deltas.fetch_add(1, Ordering::Relaxed);
            let note = match delta {
                Delta::Deleted(d) => {
                    if w.remove(key).is_none() {
                        self.counters
                            .unknown_deletes
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(key = %key, "delete of a key that is not cached");
                    }
                    Notification::Delete(d.clone())
                }
                Delta::Added(o) | Delta::Updated(o) | Delta::Replaced(o) | Delta::Sync(o) => {
                    match w.upsert(key.clone(), Arc::clone(o)) {
                        Some(old) => {
                            let is_resync = match delta {
                                Delta::Sync(_) => true,
                                Delta::Replaced(_) => same_resource_version(&*old, &**o),
                                _ => false,
                            };
                            Notification::Update {
                                old,
                                new: Arc::clone(o),
                                is_resync,
                            }
                        }
                        None => Notification::Add {
                            obj: Arc::clone(o),
                            is_in_initial_list: popped.is_in_initial_list,
                        },
                    }
                }
            };
            notes.push((key.clone(), note));
        }
    }
}

fn same_resource_version<K: Resource>(a: &K, b: &K) -> bool {
    let (a, b) = (&a.meta().resource_version, &b.meta().resource_version);
    a.is_some() && a == b
}
