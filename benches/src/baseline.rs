//! The stores the Indexer is measured against.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use kinformer_core::ObjectKey;
use parking_lot::{Mutex, RwLock};

type Hasher = foldhash::fast::RandomState;

/// kube-rs's shape: one `RwLock` over a `HashMap` of `Arc`s.
pub struct RwLockStore<K>(pub RwLock<HashMap<ObjectKey, Arc<K>, Hasher>>);

impl<K> Default for RwLockStore<K> {
    fn default() -> Self {
        Self(RwLock::new(HashMap::default()))
    }
}

impl<K> RwLockStore<K> {
    /// Reads one object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.0.read().get(key).cloned()
    }
    /// Writes one object.
    pub fn upsert(&self, key: ObjectKey, obj: Arc<K>) {
        self.0.write().insert(key, obj);
    }
}

/// The Indexer's previous design: a persistent hash trie with reference-
/// counted nodes (imbl), arc-swapped after each batch. Kept to measure the
/// current trie against it in the same run.
pub struct ImblStore<K> {
    current: ArcSwap<ImblMap<K>>,
    writer: Mutex<ImblMap<K>>,
}

type ImblMap<K> =
    imbl::GenericHashMap<ObjectKey, Arc<K>, Hasher, imbl::shared_ptr::DefaultSharedPtr>;

impl<K> Default for ImblStore<K> {
    fn default() -> Self {
        let map = imbl::GenericHashMap::with_hasher(Hasher::default());
        Self {
            current: ArcSwap::from_pointee(map.clone()),
            writer: Mutex::new(map),
        }
    }
}

impl<K> ImblStore<K> {
    /// Applies a batch to the master trie, then publishes a clone of it.
    pub fn write_batch(&self, batch: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let mut master = self.writer.lock();
        for (k, o) in batch {
            master.insert(k, o);
        }
        self.current.store(Arc::new(master.clone()));
    }
    /// Reads one object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.current.load().get(key).cloned()
    }
}

/// Naive copy-on-write: clone the whole map for every published batch.
pub struct FullCloneStore<K> {
    current: ArcSwap<HashMap<ObjectKey, Arc<K>, Hasher>>,
    writer: Mutex<()>,
}

impl<K> Default for FullCloneStore<K> {
    fn default() -> Self {
        Self {
            current: ArcSwap::from_pointee(HashMap::default()),
            writer: Mutex::new(()),
        }
    }
}

impl<K> FullCloneStore<K> {
    /// Applies a batch by cloning the map, then publishes it.
    pub fn write_batch(&self, batch: impl IntoIterator<Item = (ObjectKey, Arc<K>)>) {
        let _w = self.writer.lock();
        let mut map = HashMap::clone(&self.current.load());
        map.extend(batch);
        self.current.store(Arc::new(map));
    }
    /// Reads one object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.current.load().get(key).cloned()
    }
}

/// Many small maps, each arc-swapped on its own: a write clones one shard.
/// Reads of one key are lock-free, but a list is not one consistent snapshot.
pub struct ShardedStore<K> {
    shards: Vec<ArcSwap<HashMap<ObjectKey, Arc<K>, Hasher>>>,
    writer: Mutex<()>,
    hasher: Hasher,
}

impl<K> ShardedStore<K> {
    /// A store of `shards` shards.
    pub fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards)
                .map(|_| ArcSwap::from_pointee(HashMap::default()))
                .collect(),
            writer: Mutex::new(()),
            hasher: Hasher::default(),
        }
    }

    fn shard(&self, key: &str) -> &ArcSwap<HashMap<ObjectKey, Arc<K>, Hasher>> {
        use std::hash::BuildHasher;
        let h = self.hasher.hash_one(key) as usize;
        &self.shards[h % self.shards.len()]
    }

    /// Writes one object (clones its shard).
    pub fn upsert(&self, key: ObjectKey, obj: Arc<K>) {
        let _w = self.writer.lock();
        let shard = self.shard(key.as_str());
        let mut map = HashMap::clone(&shard.load());
        map.insert(key, obj);
        shard.store(Arc::new(map));
    }

    /// Reads one object.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.shard(key).load().get(key).cloned()
    }
}
