//! The in-memory object store: one global resourceVersion counter, per-resource object maps,
//! event histories and broadcast channels, and list snapshots for consistent paging.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::history::{Event, EventType, History, LINE_SUFFIX, TooOld};
use crate::object::{
    ObjMeta, PreEncoded, StoredObject, merge_patch, now_rfc3339, now_unix_nanos, object_key,
    validate_name, with_metadata,
};
use crate::resource::{Registry, ResourceDef, ResourceId};
use crate::restamp::{Splice, splice_line};
use crate::status::ApiError;

/// The annotation holding the commit wall-clock time in Unix nanoseconds.
pub const COMMIT_ANNOTATION: &str = "kinformer.dev/commit-unix-nanos";

/// A persistent (copy-on-write) map of one resource's objects, keyed `namespace/name`.
pub type ObjectMap = imbl::OrdMap<Arc<str>, Arc<StoredObject>>;

/// Store tuning.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Events retained per resource for watch resumption.
    pub history: usize,
    /// Events buffered per resource for live watchers before a slow one is cut off.
    pub broadcast_capacity: usize,
    /// Stamp [`COMMIT_ANNOTATION`] on every write.
    pub stamp_commit_time: bool,
    /// List snapshots kept for `continue` tokens.
    pub max_snapshots: usize,
    /// Transcode every committed object's metadata to protobuf at commit
    /// (see [`crate::protobuf::stored_message`]), so that a protobuf LIST or
    /// WatchList stream costs the sim what a JSON one does (a copy of bytes
    /// it holds) instead of a transcoding per object. Otherwise an object is
    /// transcoded when first asked for in protobuf.
    pub protobuf_on_commit: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            history: 100_000,
            broadcast_capacity: 65_536,
            stamp_commit_time: true,
            max_snapshots: 32,
            protobuf_on_commit: false,
        }
    }
}

/// A consistent view of one resource at one resourceVersion.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The resource.
    pub res: ResourceId,
    /// The resourceVersion of the view.
    pub rv: u64,
    /// The objects.
    pub objects: ObjectMap,
}

/// A new watch's starting point: live receiver plus what to replay first.
#[derive(Debug)]
pub struct Subscription {
    /// Live events committed after `rv`.
    pub rx: broadcast::Receiver<Arc<Event>>,
    /// Retained events to replay first (resume from a resourceVersion).
    pub backlog: Vec<Arc<Event>>,
    /// The state to send as initial `ADDED` events, when asked for.
    pub initial: Option<ObjectMap>,
    /// The global resourceVersion at subscription.
    pub rv: u64,
}

struct ResState {
    objects: ObjectMap,
    history: History,
    tx: broadcast::Sender<Arc<Event>>,
}

struct Inner {
    rv: u64,
    res: Vec<ResState>,
    /// Reused encoding buffer.
    scratch: Vec<u8>,
}

/// The in-memory store.
pub struct Store {
    registry: Registry,
    cfg: StoreConfig,
    inner: RwLock<Inner>,
    snapshots: Mutex<Vec<Snapshot>>,
    /// Open protobuf watches: while there are any, each event's protobuf
    /// frame is built at commit, like its JSON line, not by the watchers.
    protobuf_watches: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("rv", &self.current_rv())
            .finish_non_exhaustive()
    }
}

/// An object prepared outside the lock, ready to commit.
struct Prepared {
    obj: Map<String, Value>,
    meta: ObjMeta,
}

impl Store {
    /// A protobuf watch opened (see [`crate::protobuf`]); paired with
    /// [`protobuf_watch_ended`](Self::protobuf_watch_ended).
    pub fn protobuf_watch_started(&self) {
        self.protobuf_watches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A protobuf watch ended.
    pub fn protobuf_watch_ended(&self) {
        self.protobuf_watches
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// An empty store serving `registry`.
    pub fn new(registry: Registry, cfg: StoreConfig) -> Self {
        let res = registry
            .defs()
            .iter()
            .map(|_| ResState {
                objects: ObjectMap::new(),
                history: History::new(cfg.history),
                tx: broadcast::channel(cfg.broadcast_capacity.max(16)).0,
            })
            .collect();
        Self {
            registry,
            cfg,
            inner: RwLock::new(Inner {
                rv: 1,
                res,
                scratch: Vec::new(),
            }),
            snapshots: Mutex::new(Vec::new()),
            protobuf_watches: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The served resources.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn def(&self, res: ResourceId) -> Result<&ResourceDef, ApiError> {
        self.registry
            .get(res)
            .ok_or_else(ApiError::unknown_resource)
    }

    /// The latest committed resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    /// Number of objects of a resource.
    pub fn len(&self, res: ResourceId) -> usize {
        self.inner
            .read()
            .res
            .get(res)
            .map_or(0, |s| s.objects.len())
    }

    /// Whether a resource has no objects.
    pub fn is_empty(&self, res: ResourceId) -> bool {
        self.len(res) == 0
    }

    /// One object by namespace and name.
    pub fn get(&self, res: ResourceId, namespace: &str, name: &str) -> Option<Arc<StoredObject>> {
        let key = object_key(namespace, name);
        self.inner.read().res.get(res)?.objects.get(&key).cloned()
    }

    /// The current state of a resource (O(1): the map is persistent).
    pub fn snapshot(&self, res: ResourceId) -> Snapshot {
        let inner = self.inner.read();
        let objects = inner
            .res
            .get(res)
            .map(|s| s.objects.clone())
            .unwrap_or_default();
        Snapshot {
            res,
            rv: inner.rv,
            objects,
        }
    }

    /// The oldest resourceVersion a watch or continue token of `res` may still use.
    pub fn compacted_rv(&self, res: ResourceId) -> u64 {
        self.inner
            .read()
            .res
            .get(res)
            .map_or(0, |s| s.history.compacted_rv())
    }

    /// Keep a snapshot for later `continue` pages.
    pub fn remember_snapshot(&self, snap: &Snapshot) {
        let mut snaps = self.snapshots.lock();
        if snaps.iter().any(|s| s.res == snap.res && s.rv == snap.rv) {
            return;
        }
        if snaps.len() >= self.cfg.max_snapshots.max(1) {
            snaps.remove(0);
        }
        snaps.push(snap.clone());
    }

    /// A remembered snapshot, unless evicted or older than the history window.
    pub fn find_snapshot(&self, res: ResourceId, rv: u64) -> Option<Snapshot> {
        if rv < self.compacted_rv(res) {
            return None;
        }
        let current = self.snapshot(res);
        if current.rv == rv {
            return Some(current);
        }
        self.snapshots
            .lock()
            .iter()
            .find(|s| s.res == res && s.rv == rv)
            .cloned()
    }

    /// Subscribe to a resource's events. `from`: `None` → start at now with the current state as
    /// initial events; `Some(rv)` → replay retained events after `rv`, then live ones.
    pub fn subscribe(&self, res: ResourceId, from: Option<u64>) -> Result<Subscription, TooOld> {
        let inner = self.inner.read();
        let Some(st) = inner.res.get(res) else {
            return Err(TooOld { oldest: inner.rv });
        };
        let rx = st.tx.subscribe();
        match from {
            None => Ok(Subscription {
                rx,
                backlog: Vec::new(),
                initial: Some(st.objects.clone()),
                rv: inner.rv,
            }),
            Some(rv) => Ok(Subscription {
                rx,
                backlog: st.history.since(rv)?,
                initial: None,
                rv: inner.rv,
            }),
        }
    }

    /// The global resourceVersion, if `rx` has already received every event of its resource up to it
    /// (so a bookmark at that resourceVersion skips nothing).
    pub fn bookmark_rv(&self, rx: &broadcast::Receiver<Arc<Event>>) -> Option<u64> {
        let inner = self.inner.read();
        rx.is_empty().then_some(inner.rv)
    }

    /// "Restart": drop every resource's event history and close every live watch (their channel ends).
    pub fn restart(&self) {
        let mut inner = self.inner.write();
        let rv = inner.rv;
        for st in &mut inner.res {
            st.history.reset(rv);
            st.tx = broadcast::channel(self.cfg.broadcast_capacity.max(16)).0;
        }
        drop(inner);
        self.snapshots.lock().clear();
    }

    fn prepare_create(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        value: Value,
    ) -> Result<Prepared, ApiError> {
        let Value::Object(mut obj) = value else {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        };
        obj.insert("apiVersion".into(), Value::String(def.api_version()));
        obj.insert("kind".into(), Value::String(def.kind.clone()));
        let (name, body_ns) = with_metadata(&mut obj, |md| {
            let s = |k: &str| {
                md.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            (s("name"), s("namespace"))
        });
        let name = if name.is_empty() {
            with_metadata(&mut obj, |md| {
                md.get("generateName")
                    .and_then(Value::as_str)
                    .map(generate_name)
            })
            .unwrap_or_default()
        } else {
            name
        };
        let ns = namespace_for(def, namespace, &body_ns, &name)?;
        validate_name(&name)
            .map_err(|m| ApiError::invalid(&def.kind, &def.group, &name, "metadata.name", m))?;
        with_metadata(&mut obj, |md| {
            md.insert("name".into(), Value::String(name.clone()));
            if def.namespaced {
                md.insert("namespace".into(), Value::String(ns.clone()));
            } else {
                md.remove("namespace");
            }
            md.insert(
                "uid".into(),
                Value::String(uuid::Uuid::new_v4().to_string()),
            );
            md.insert("creationTimestamp".into(), Value::String(now_rfc3339()));
            if def.tracks_generation() {
                md.insert("generation".into(), Value::from(1));
            } else {
                md.remove("generation");
            }
            md.remove("resourceVersion");
        });
        let v = Value::Object(obj);
        let meta = ObjMeta::from_value(&v);
        let Value::Object(obj) = v else {
            return Err(ApiError::internal("object vanished"));
        };
        Ok(Prepared { obj, meta })
    }

    /// Create an object (`namespace` from the URL, if any). 409 when it exists.
    pub fn create(
        &self,
        res: ResourceId,
        namespace: Option<&str>,
        value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let def = self.def(res)?;
        let p = self.prepare_create(def, namespace, value)?;
        let mut inner = self.inner.write();
        self.commit_create(&mut inner, res, def, p)
    }

    /// Create many objects, taking the lock once per batch. Returns how many were created;
    /// objects that fail (e.g. already exist) are skipped and counted in the error list.
    pub fn create_many(&self, res: ResourceId, values: Vec<Value>) -> (usize, Vec<ApiError>) {
        let Ok(def) = self.def(res) else {
            return (0, vec![ApiError::unknown_resource()]);
        };
        let mut errors = Vec::new();
        let mut created = 0;
        let mut prepared = Vec::with_capacity(values.len());
        for v in values {
            match self.prepare_create(def, None, v) {
                Ok(p) => prepared.push(p),
                Err(e) => errors.push(e),
            }
        }
        for chunk in prepared.chunks_mut(512) {
            let mut inner = self.inner.write();
            for p in chunk {
                let p = Prepared {
                    obj: std::mem::take(&mut p.obj),
                    meta: std::mem::take(&mut p.meta),
                };
                match self.commit_create(&mut inner, res, def, p) {
                    Ok(_) => created += 1,
                    Err(e) => errors.push(e),
                }
            }
        }
        (created, errors)
    }

    /// Whether writes are stamped with [`COMMIT_ANNOTATION`].
    pub fn stamps_commit_time(&self) -> bool {
        self.cfg.stamp_commit_time
    }

    /// Create many pre-encoded objects (the bulk-fill fast path), taking the lock once per 512:
    /// only the resourceVersion and commit time are stamped under the lock. Objects that already
    /// exist are skipped and reported.
    pub fn create_encoded_many(
        &self,
        res: ResourceId,
        objects: Vec<PreEncoded>,
    ) -> (usize, Vec<ApiError>) {
        let Ok(def) = self.def(res) else {
            return (0, vec![ApiError::unknown_resource()]);
        };
        let mut errors = Vec::new();
        let mut created = 0;
        let mut objects = objects.into_iter().peekable();
        while objects.peek().is_some() {
            let mut inner = self.inner.write();
            for pre in objects.by_ref().take(512) {
                let key = pre.meta.key();
                let exists = inner
                    .res
                    .get(res)
                    .is_some_and(|s| s.objects.contains_key(&key));
                if exists {
                    errors.push(ApiError::already_exists(
                        &def.plural,
                        &def.group,
                        &pre.meta.name,
                    ));
                    continue;
                }
                match self.commit_encoded(&mut inner, res, key, pre) {
                    Ok(()) => created += 1,
                    Err(e) => errors.push(e),
                }
            }
        }
        (created, errors)
    }

    /// Stamp the resourceVersion and commit time into a pre-encoded object and commit it as ADDED.
    fn commit_encoded(
        &self,
        inner: &mut Inner,
        res: ResourceId,
        key: Arc<str>,
        pre: PreEncoded,
    ) -> Result<(), ApiError> {
        let PreEncoded {
            bytes,
            rv_at,
            commit_at,
            metadata_at,
            mut meta,
        } = pre;
        let rv = inner.rv + 1;
        let rv_s = rv.to_string();
        let commit_s = commit_at.map(|_| now_unix_nanos().to_string());
        let mut edits = [Splice {
            start: rv_at,
            end: rv_at,
            value: rv_s.as_bytes(),
        }; 2];
        let mut n = 1;
        if let (Some(at), Some(c)) = (commit_at, commit_s.as_deref()) {
            edits[1] = Splice {
                start: at,
                end: at,
                value: c.as_bytes(),
            };
            n = 2;
        }
        let ty = EventType::Added;
        let mut line = Vec::new();
        let done = splice_line(
            &mut line,
            ty.line_prefix(),
            &bytes,
            &mut edits[..n],
            LINE_SUFFIX,
            metadata_at,
        )
        .ok_or_else(|| ApiError::internal("a pre-encoded object's stamps are out of place"))?;
        meta.rv = rv;
        let line = Bytes::from(line);
        let stored = StoredObject::located(line.slice(done.object), meta, done.kept);
        self.apply(inner, res, ty, key, line, stored, None)
            .map(|_| ())
    }

    fn commit_create(
        &self,
        inner: &mut Inner,
        res: ResourceId,
        def: &ResourceDef,
        p: Prepared,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let key = p.meta.key();
        let exists = inner
            .res
            .get(res)
            .is_some_and(|s| s.objects.contains_key(&key));
        if exists {
            return Err(ApiError::already_exists(
                &def.plural,
                &def.group,
                &p.meta.name,
            ));
        }
        self.commit(inner, res, EventType::Added, p, None)
            .map(|e| e.obj.clone())
    }

    /// Replace an object. A non-empty `metadata.resourceVersion` in `value` is a precondition (409).
    pub fn update(
        &self,
        res: ResourceId,
        namespace: Option<&str>,
        name: Option<&str>,
        value: Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let def = self.def(res)?;
        let Value::Object(mut obj) = value else {
            return Err(ApiError::bad_request(
                "the body of the request was not a JSON object",
            ));
        };
        obj.insert("apiVersion".into(), Value::String(def.api_version()));
        obj.insert("kind".into(), Value::String(def.kind.clone()));
        let v = Value::Object(obj);
        let mut meta = ObjMeta::from_value(&v);
        let Value::Object(mut obj) = v else {
            return Err(ApiError::internal("object vanished"));
        };
        if let Some(url_name) = name {
            if meta.name.is_empty() {
                meta.name = url_name.to_string();
                with_metadata(&mut obj, |md| {
                    md.insert("name".into(), Value::String(url_name.to_string()))
                });
            } else if meta.name != url_name {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({url_name})",
                    meta.name
                )));
            }
        }
        let ns = namespace_for(def, namespace, &meta.namespace, &meta.name)?;
        meta.namespace = ns.clone();
        if def.namespaced {
            with_metadata(&mut obj, |md| {
                md.insert("namespace".into(), Value::String(ns))
            });
        }
        let precondition = precondition_rv(&obj)?;
        let mut inner = self.inner.write();
        let key = meta.key();
        let old = inner
            .res
            .get(res)
            .and_then(|s| s.objects.get(&key))
            .cloned();
        let Some(old) = old else {
            return Err(ApiError::not_found(&def.plural, &def.group, &meta.name));
        };
        if precondition.is_some_and(|rv| rv != old.meta.rv) {
            return Err(ApiError::conflict(&def.plural, &def.group, &meta.name));
        }
        let changed = crate::object::spec_changed(&old.bytes, obj.get("spec"));
        let generation = old.meta.generation + i64::from(changed);
        with_metadata(&mut obj, |md| {
            md.insert("uid".into(), Value::String(old.meta.uid.clone()));
            md.insert(
                "creationTimestamp".into(),
                Value::String(old.meta.created.clone()),
            );
            if def.tracks_generation() {
                md.insert("generation".into(), Value::from(generation));
            } else {
                md.remove("generation");
            }
        });
        meta.uid = old.meta.uid.clone();
        meta.created = old.meta.created.clone();
        meta.generation = generation;
        let ev = self.commit(
            &mut inner,
            res,
            EventType::Modified,
            Prepared { obj, meta },
            Some(old),
        )?;
        Ok(ev.obj.clone())
    }

    /// Commit a `Modified` (or `Deleted`) event for an object whose only change is its stamps: the
    /// next resourceVersion and, when on, the commit time ([`crate::restamp`]; no JSON value, no
    /// re-encoding). `None` when the object is gone, `ty` is `Added`, or the object does not hold
    /// its stamps in the form the store writes them; the caller then takes the general
    /// [`Store::update`] or [`Store::delete`] path.
    pub fn restamp(
        &self,
        res: ResourceId,
        namespace: &str,
        name: &str,
        ty: EventType,
    ) -> Option<Arc<StoredObject>> {
        if ty == EventType::Added {
            return None;
        }
        let key = object_key(namespace, name);
        let mut inner = self.inner.write();
        let old = inner.res.get(res)?.objects.get(&key)?.clone();
        let rv = inner.rv + 1;
        let commit = self
            .cfg
            .stamp_commit_time
            .then(|| now_unix_nanos().to_string());
        let mut line = Vec::new();
        let done = crate::restamp::restamp_line(
            &mut line,
            ty.line_prefix(),
            &old,
            &rv.to_string(),
            commit.as_deref(),
            LINE_SUFFIX,
        )?;
        let mut meta = old.meta.clone();
        meta.rv = rv;
        let line = Bytes::from(line);
        let stored = StoredObject::located(line.slice(done.object), meta, done.kept);
        let ev = self
            .apply(&mut inner, res, ty, key, line, stored, Some(old))
            .ok()?;
        Some(ev.obj.clone())
    }

    /// Apply a JSON merge patch (retrying internally on concurrent writes, like the apiserver).
    pub fn patch(
        &self,
        res: ResourceId,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let def = self.def(res)?;
        if !patch.is_object() {
            return Err(ApiError::bad_request("the patch was not a JSON object"));
        }
        let user_rv = patch
            .get("metadata")
            .and_then(|m| m.get("resourceVersion"))
            .is_some();
        for _ in 0..16 {
            let Some(cur) = self.get(res, namespace, name) else {
                return Err(ApiError::not_found(&def.plural, &def.group, name));
            };
            let mut v = cur
                .to_value()
                .map_err(|e| ApiError::internal(e.to_string()))?;
            merge_patch(&mut v, patch);
            if !user_rv && let Some(Value::Object(md)) = v.get_mut("metadata") {
                md.insert(
                    "resourceVersion".into(),
                    Value::String(cur.meta.rv.to_string()),
                );
            }
            match self.update(res, Some(namespace), Some(name), v) {
                Err(e) if e.reason == crate::status::Reason::Conflict && !user_rv => continue,
                other => return other,
            }
        }
        Err(ApiError::conflict(&def.plural, &def.group, name))
    }

    /// Delete an object; returns its last state (with the deletion's resourceVersion).
    pub fn delete(
        &self,
        res: ResourceId,
        namespace: &str,
        name: &str,
        precondition: Option<u64>,
    ) -> Result<Arc<StoredObject>, ApiError> {
        let def = self.def(res)?;
        let key = object_key(namespace, name);
        let mut inner = self.inner.write();
        let old = inner
            .res
            .get(res)
            .and_then(|s| s.objects.get(&key))
            .cloned();
        let Some(old) = old else {
            return Err(ApiError::not_found(&def.plural, &def.group, name));
        };
        if precondition.is_some_and(|rv| rv != old.meta.rv) {
            return Err(ApiError::conflict(&def.plural, &def.group, name));
        }
        let Ok(Value::Object(obj)) = old.to_value() else {
            return Err(ApiError::internal("stored object is not a JSON object"));
        };
        let ev = self.commit(
            &mut inner,
            res,
            EventType::Deleted,
            Prepared {
                obj,
                meta: old.meta.clone(),
            },
            Some(old),
        )?;
        Ok(ev.obj.clone())
    }

    /// Assign the next resourceVersion, encode once, apply, record and broadcast.
    fn commit(
        &self,
        inner: &mut Inner,
        res: ResourceId,
        ty: EventType,
        p: Prepared,
        prev: Option<Arc<StoredObject>>,
    ) -> Result<Arc<Event>, ApiError> {
        let Prepared { mut obj, mut meta } = p;
        let rv = inner.rv + 1;
        with_metadata(&mut obj, |md| {
            md.insert("resourceVersion".into(), Value::String(rv.to_string()))
        });
        if self.cfg.stamp_commit_time {
            crate::object::set_annotation(
                &mut obj,
                COMMIT_ANNOTATION,
                now_unix_nanos().to_string(),
            );
        }
        let prefix = ty.line_prefix();
        let mut buf = std::mem::take(&mut inner.scratch);
        buf.clear();
        buf.extend_from_slice(prefix);
        let encoded = crate::encode::write(&mut buf, &obj);
        let end = buf.len();
        buf.extend_from_slice(LINE_SUFFIX);
        // Copy into an exactly-sized buffer: objects live long, the scratch's slack must not.
        let line = Bytes::copy_from_slice(&buf);
        inner.scratch = buf;
        encoded.map_err(|e| ApiError::internal(e.to_string()))?;
        meta.rv = rv;
        let key = meta.key();
        let stored = StoredObject::new(line.slice(prefix.len()..end), meta);
        self.apply(inner, res, ty, key, line, stored, prev)
    }

    /// Record a committed change encoded as the watch `line` (`stored` is the object, a slice of
    /// it): advance the resourceVersion, update the map, the history and the live watchers.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &self,
        inner: &mut Inner,
        res: ResourceId,
        ty: EventType,
        key: Arc<str>,
        line: Bytes,
        stored: StoredObject,
        prev: Option<Arc<StoredObject>>,
    ) -> Result<Arc<Event>, ApiError> {
        let rv = stored.meta.rv;
        let stored = Arc::new(stored);
        let ev = Arc::new(Event {
            rv,
            ty,
            obj: stored.clone(),
            prev,
            line,
            meta_line: OnceLock::new(),
            meta_frame: OnceLock::new(),
        });
        if self
            .protobuf_watches
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
        {
            // Also the object's message (the frame's tail).
            crate::protobuf::event_frame(&ev);
        } else if self.cfg.protobuf_on_commit && ty != EventType::Deleted {
            crate::protobuf::stored_message(&ev.obj);
        }
        // The replaced version is rarely sent again (a replayed event has its frame, or builds
        // it anew): a million of them in the history would otherwise hold their messages.
        if let Some(prev) = &ev.prev {
            prev.protobuf_message.forget();
        }
        let Some(st) = inner.res.get_mut(res) else {
            return Err(ApiError::unknown_resource());
        };
        inner.rv = rv;
        match ty {
            EventType::Deleted => {
                st.objects.remove(&key);
            }
            _ => {
                st.objects.insert(key, stored);
            }
        }
        st.history.push(ev.clone());
        // No receivers is fine.
        let _ = st.tx.send(ev.clone());
        Ok(ev)
    }
}

/// The effective namespace of a write: the URL's, checked against the body's.
fn namespace_for(
    def: &ResourceDef,
    url_ns: Option<&str>,
    body_ns: &str,
    name: &str,
) -> Result<String, ApiError> {
    if !def.namespaced {
        return Ok(String::new());
    }
    match url_ns {
        Some(u) if !body_ns.is_empty() && body_ns != u => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        Some(u) => Ok(u.to_string()),
        None if body_ns.is_empty() => Err(ApiError::invalid(
            &def.kind,
            &def.group,
            name,
            "metadata.namespace",
            "Required value",
        )),
        None => Ok(body_ns.to_string()),
    }
}

/// A non-empty `metadata.resourceVersion` in a write body, parsed.
fn precondition_rv(obj: &Map<String, Value>) -> Result<Option<u64>, ApiError> {
    match obj
        .get("metadata")
        .and_then(|m| m.get("resourceVersion"))
        .and_then(Value::as_str)
    {
        None | Some("") => Ok(None),
        Some(s) => s.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!("invalid resourceVersion in object: \"{s}\""))
        }),
    }
}

fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("{prefix}{suffix}")
}
