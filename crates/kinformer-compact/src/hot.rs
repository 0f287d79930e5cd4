//! [`HotSet`]: the bounded set of recently decoded objects.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_core::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::compact::Compact;
use crate::error::CompactError;

/// How many decoded objects a compact informer keeps by default: about
/// 35 MB of typed Pods of 34 KB. Enough for the handlers, which find each
/// new object here (the informer put it there when it packed it) while
/// their backlog is shorter than this; a reader of an object that changed
/// long ago decodes it.
pub const DEFAULT_HOT_CAPACITY: usize = 1024;

/// The share of the set for objects read more than once.
const HOT_SHARE: f64 = 0.5;

/// Recently decoded objects of one compact cache, by the id of their packed
/// bytes (a CLOCK-Pro cache of the `quick_cache` crate: reads take a shard's
/// read lock, never the writer's). The informer puts each object it packs
/// here as well, so the handlers and the readers of a recent change find it
/// decoded.
pub struct HotSet<K> {
    cache: quick_cache::sync::Cache<u64, Arc<K>>,
    counters: HotCounters,
}

#[derive(Default)]
struct HotCounters {
    hits: AtomicU64,
    decodes: AtomicU64,
    failures: AtomicU64,
    pack_failures: AtomicU64,
}

/// Counters of a [`HotSet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HotStats {
    /// Objects found decoded.
    pub hits: u64,
    /// Objects decoded from their packed bytes.
    pub decodes: u64,
    /// Decodes that failed (corrupt bytes; logged).
    pub decode_failures: u64,
    /// Objects the informer could not pack and cached whole (logged).
    pub pack_failures: u64,
}

impl<K> HotSet<K> {
    /// A set of at most `capacity` decoded objects (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // CLOCK-Pro admits a new object as cold and keeps a small cold part
        // by default (3%): the objects the informer has just packed, which
        // its handlers are about to read, would be gone before they are
        // read. Half the set is for them.
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(capacity)
            .weight_capacity(capacity as u64)
            .hot_allocation(HOT_SHARE)
            .build();
        let cache = match options {
            Ok(options) => quick_cache::sync::Cache::with_options(
                options,
                quick_cache::UnitWeighter,
                quick_cache::DefaultHashBuilder::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            Err(error) => {
                tracing::warn!(%error, "hot set options refused; quick_cache's defaults");
                quick_cache::sync::Cache::new(capacity)
            }
        };
        Self {
            cache,
            counters: HotCounters::default(),
        }
    }

    /// Keeps `obj`, the decoding of the packed bytes with id `id`.
    pub fn insert(&self, id: u64, obj: Arc<K>) {
        self.cache.insert(id, obj);
    }

    /// Counts an object that could not be packed.
    pub(crate) fn count_pack_failure(&self) {
        self.counters.pack_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// How many decoded objects are kept now.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters.
    pub fn stats(&self) -> HotStats {
        let c = &self.counters;
        HotStats {
            hits: c.hits.load(Ordering::Relaxed),
            decodes: c.decodes.load(Ordering::Relaxed),
            decode_failures: c.failures.load(Ordering::Relaxed),
            pack_failures: c.pack_failures.load(Ordering::Relaxed),
        }
    }
}

impl<K: Resource + Clone + Serialize + DeserializeOwned> HotSet<K> {
    /// The whole object of `compact`: from this set, else decoded (and
    /// kept).
    pub fn try_get(&self, compact: &Compact<K>) -> Result<Arc<K>, CompactError> {
        let Some(id) = compact.id() else {
            // Fresh (never packed): a copy, not kept (it has no id).
            return compact.decode().map(Arc::new);
        };
        if let Some(obj) = self.cache.get(&id) {
            self.counters.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(obj);
        }
        self.counters.decodes.fetch_add(1, Ordering::Relaxed);
        match compact.decode() {
            Ok(obj) => {
                let obj = Arc::new(obj);
                self.cache.insert(id, Arc::clone(&obj));
                Ok(obj)
            }
            Err(e) => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// [`try_get`](Self::try_get), with a failure logged (and counted) and
    /// answered with `None`.
    pub fn get(&self, compact: &Compact<K>) -> Option<Arc<K>> {
        match self.try_get(compact) {
            Ok(obj) => Some(obj),
            Err(error) => {
                tracing::error!(
                    %error,
                    name = compact.meta().name.as_deref().unwrap_or(""),
                    namespace = compact.meta().namespace.as_deref().unwrap_or(""),
                    "compact cache: an object does not decode"
                );
                None
            }
        }
    }
}
