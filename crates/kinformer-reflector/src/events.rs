//! The ordered decode pipeline between the network and the queue.
//!
//! [`Decoder`] turns raw JSON (watch lines, LIST items) into objects ready
//! for the [`DeltaFifo`]: decoded, transformed and keyed, on a
//! [`DecodePool`] thread when the reflector has one, inline otherwise.
//! [`EventStream`] reads a watch body ahead, hands batches of lines to the
//! pool, and returns the decoded events strictly in arrival order, a
//! decoded batch at a time (which the reflector queues under one lock of
//! the queue).
#![allow(unsafe_code)] // keys decoded objects through `prepare_decoded`

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use bytes::Bytes;
use kinformer_core::panic::caught_panic_message;
use kinformer_core::{DeltaFifo, Prepared};
use kube_core::{Resource, TypeMeta};
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use crate::decode::DecodePool;
use crate::decode_thread::{thread_of_frame, thread_of_json, thread_of_protobuf_item};
use crate::error::ReflectorError;
use crate::event::{WatchEvent, resource_version};
use crate::lines::Lines;
use crate::object_decode::Decoders;
use crate::shard_filter;
use kinformer_wire::shard::{ShardField, ShardSelector};

/// Lines per batch handed to a decode thread.
const BATCH_LINES: usize = 128;
/// Bytes per batch handed to a decode thread.
const BATCH_BYTES: usize = 512 * 1024;

/// A decoded watch event, its object ready for the queue.
#[derive(Debug)]
pub struct DecodedEvent<K> {
    /// The event (objects transformed and keyed).
    pub event: WatchEvent<Prepared<K>>,
    /// The object's resourceVersion as sent (before any transform).
    pub resource_version: Option<String>,
}

/// One watch line's outcome.
pub type Decoded<K> = Result<DecodedEvent<K>, ReflectorError>;

/// Decodes raw objects for one queue, on a pool or inline.
pub struct Decoder<K> {
    fifo: Arc<DeltaFifo<K>>,
    pool: Option<Arc<DecodePool>>,
    skip_managed_fields: bool,
    decoders: Decoders<K>,
    /// Watch lines are protobuf frames.
    framed: bool,
    /// Objects outside this shard are left out (the server did not apply it).
    shard: Option<Arc<ShardSelector>>,
}

impl<K> Clone for Decoder<K> {
    fn clone(&self) -> Self {
        Self {
            fifo: Arc::clone(&self.fifo),
            pool: self.pool.clone(),
            skip_managed_fields: self.skip_managed_fields,
            decoders: self.decoders,
            framed: self.framed,
            shard: self.shard.clone(),
        }
    }
}

/// Results of a batch, in order: ready now, or coming from pool threads.
pub enum Pending<T> {
    /// Decoded inline.
    Ready(Vec<T>),
    /// Being decoded on the pool, split by shard: each part's positions in
    /// the batch and its results.
    InFlight {
        /// Number of inputs in the batch.
        len: usize,
        /// Per shard: the positions of its inputs, and their results.
        parts: Vec<(Vec<u32>, oneshot::Receiver<Vec<T>>)>,
    },
}

impl<T> Pending<T> {
    /// The batch's results in input order (waits for the pool threads).
    pub async fn wait(self) -> Result<Vec<T>, ReflectorError> {
        let (len, mut parts) = match self {
            Pending::Ready(v) => return Ok(v),
            Pending::InFlight { len, parts } => (len, parts),
        };
        // One part holds the whole batch in order.
        if parts.len() == 1
            && let Some((_, rx)) = parts.pop()
        {
            return rx.await.map_err(|_| ReflectorError::DecodeWorkerLost);
        }
        let mut slots: Vec<Option<T>> = (0..len).map(|_| None).collect();
        for (positions, rx) in parts {
            let results = rx.await.map_err(|_| ReflectorError::DecodeWorkerLost)?;
            for (pos, result) in positions.into_iter().zip(results) {
                if let Some(slot) = slots.get_mut(pos as usize) {
                    *slot = Some(result);
                }
            }
        }
        slots
            .into_iter()
            .collect::<Option<Vec<T>>>()
            .ok_or(ReflectorError::DecodeWorkerLost)
    }
}

impl<K> Decoder<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// A decoder feeding `fifo`, using `pool` when given.
    pub fn new(fifo: Arc<DeltaFifo<K>>, pool: Option<Arc<DecodePool>>) -> Self {
        Self {
            fifo,
            pool,
            skip_managed_fields: false,
            decoders: Decoders::serde(),
            framed: false,
            shard: None,
        }
    }

    /// Whether the watch lines handed to [`lines`](Self::lines) are protobuf
    /// frames (see [`Lines::frames`]).
    pub fn framed(mut self, on: bool) -> Self {
        self.framed = on;
        self
    }

    /// Decodes objects with `decoders` (default: [`Decoders::serde`]).
    pub fn decoders(mut self, decoders: Decoders<K>) -> Self {
        self.decoders = decoders;
        self
    }

    /// Skip `metadata.managedFields` while decoding (see [`crate::prune`]).
    pub fn skip_managed_fields(mut self, on: bool) -> Self {
        self.skip_managed_fields = on;
        self
    }

    /// How many batches to keep in flight.
    pub(crate) fn depth(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| 2 * p.size())
    }

    /// Decodes `inputs` with `f`, each on the decode thread of its key's
    /// shard (inline without a pool); results come back in input order.
    ///
    /// A panic while one input is decoded (a poison object) becomes that
    /// input's [`ReflectorError::DecodePanicked`]: the rest of the batch,
    /// the decode thread and the reflector go on. (A panicking transform is
    /// caught by the queue's `prepare` first: `InformerError::TransformPanicked`.)
    fn run<T: Send + 'static>(
        &self,
        inputs: Vec<Bytes>,
        shard_of: fn(&[u8], usize) -> usize,
        f: impl Fn(&DeltaFifo<K>, &Bytes) -> Result<T, ReflectorError> + Send + Sync + Clone + 'static,
    ) -> Pending<Result<T, ReflectorError>> {
        let f = move |fifo: &DeltaFifo<K>, b: &Bytes| {
            catch_unwind(AssertUnwindSafe(|| f(fifo, b))).unwrap_or_else(|p| {
                let msg = caught_panic_message(p);
                tracing::error!(panic = %msg, "decoding an object panicked; skipped");
                Err(ReflectorError::DecodePanicked(msg))
            })
        };
        let Some(pool) = &self.pool else {
            return Pending::Ready(inputs.iter().map(|b| f(&self.fifo, b)).collect());
        };
        let len = inputs.len();
        let mut shards: Vec<(Vec<u32>, Vec<Bytes>)> =
            (0..pool.size()).map(|_| (Vec::new(), Vec::new())).collect();
        for (pos, input) in inputs.into_iter().enumerate() {
            let (positions, part) = &mut shards[shard_of(&input, pool.size())];
            positions.push(pos as u32);
            part.push(input);
        }
        let parts = shards
            .into_iter()
            .enumerate()
            .filter(|(_, (positions, _))| !positions.is_empty())
            .map(|(shard, (positions, part))| {
                let (fifo, f) = (Arc::clone(&self.fifo), f.clone());
                let rx = pool.submit_to(shard, move || {
                    part.iter().map(|b| f(&fifo, b)).collect::<Vec<_>>()
                });
                (positions, rx)
            })
            .collect();
        Pending::InFlight { len, parts }
    }

    /// Leaves objects outside `shard` out (for a server that does not apply
    /// the `shardSelector`): they come back as
    /// [`ReflectorError::OutsideShard`] with their resourceVersion, told
    /// from the raw bytes where they can be (before any decoding),
    /// from the decoded object otherwise.
    pub fn shard(mut self, shard: Option<ShardSelector>) -> Self {
        self.shard = shard.map(Arc::new);
        self
    }

    /// Decodes watch lines (protobuf frames when [`framed`](Self::framed)).
    pub fn lines(&self, lines: Vec<Bytes>) -> Pending<Decoded<K>> {
        let (decode, skip) = (self.decoders, self.skip_managed_fields);
        let shard = self.shard.clone();
        if self.framed {
            return self.run(lines, thread_of_frame, move |fifo, f| {
                if let Some(out) = shard.as_deref().and_then(|s| shard_filter::frame(s, f)) {
                    return Err(outside(&out));
                }
                prepared(
                    fifo,
                    &decode,
                    shard.as_deref(),
                    decode.frame(f.clone(), skip)?,
                )
            });
        }
        self.run(lines, thread_of_json, move |fifo, l| {
            if let Some(out) = shard
                .as_deref()
                .and_then(|s| shard_filter::json_event(s, l))
            {
                return Err(outside(&out));
            }
            prepared(fifo, &decode, shard.as_deref(), decode.event(l, skip)?)
        })
    }

    /// Decodes LIST items (each one object's JSON).
    pub fn items(&self, items: Vec<Bytes>) -> Pending<Result<Prepared<K>, ReflectorError>> {
        let (decode, skip) = (self.decoders, self.skip_managed_fields);
        let shard = self.shard.clone();
        self.run(items, thread_of_json, move |fifo, b| {
            if let Some(out) = shard.as_deref().and_then(|s| shard_filter::json_item(s, b)) {
                return Err(outside(&out));
            }
            decode
                .object(b, skip)
                .map_err(ReflectorError::from)
                .and_then(|o| keyed(fifo, &decode, shard.as_deref(), o))
        })
    }

    /// Decodes the items of a protobuf LIST page (see
    /// [`crate::protobuf::ListPage`]), each of the page's item `types`.
    pub fn protobuf_items(
        &self,
        items: Vec<Bytes>,
        types: Option<TypeMeta>,
    ) -> Pending<Result<Prepared<K>, ReflectorError>> {
        let (decode, skip) = (self.decoders, self.skip_managed_fields);
        let shard = self.shard.clone();
        self.run(items, thread_of_protobuf_item, move |fifo, b| {
            if let Some(out) = shard
                .as_deref()
                .and_then(|s| shard_filter::protobuf_item(s, b))
            {
                return Err(outside(&out));
            }
            decode
                .list_item(b.clone(), types.clone(), skip)
                .map_err(ReflectorError::from)
                .and_then(|o| keyed(fifo, &decode, shard.as_deref(), o))
        })
    }
}

/// The error that leaves out an object its raw bytes put outside the shard.
fn outside(out: &shard_filter::Outside<'_>) -> ReflectorError {
    ReflectorError::OutsideShard {
        resource_version: out
            .resource_version
            .and_then(|rv| std::str::from_utf8(rv).ok())
            .map(str::to_string),
    }
}

/// Keys (and transforms) an object `decoders` just built, through
/// [`DeltaFifo::prepare_decoded`] when they are the wire crate's own, so
/// that the cache's provenance stays decoded only.
fn keyed<K: Resource>(
    fifo: &DeltaFifo<K>,
    decoders: &Decoders<K>,
    shard: Option<&ShardSelector>,
    obj: K,
) -> Result<Prepared<K>, ReflectorError> {
    if let Some(shard) = shard
        && !in_shard(shard, &obj)
    {
        return Err(ReflectorError::OutsideShard {
            resource_version: resource_version(&obj).map(str::to_string),
        });
    }
    Ok(if decoders.builds_fresh_objects() {
        // SAFETY: `obj` is what the wire crate's own decoder returned, just
        // now, from one decode in one object-arena scope; nothing touched it.
        unsafe { fifo.prepare_decoded(obj) }
    } else {
        fifo.prepare(obj)
    }?)
}

/// Whether `obj` belongs to `shard` (its UID or namespace hashed).
fn in_shard<K: Resource>(shard: &ShardSelector, obj: &K) -> bool {
    let meta = obj.meta();
    let value = match shard.field() {
        ShardField::Uid => meta.uid.as_deref(),
        ShardField::Namespace => meta.namespace.as_deref(),
    };
    shard.matches(value.unwrap_or_default())
}

/// A decoded event, its object keyed for the queue.
fn prepared<K: Resource>(
    fifo: &DeltaFifo<K>,
    decoders: &Decoders<K>,
    shard: Option<&ShardSelector>,
    event: WatchEvent<K>,
) -> Decoded<K> {
    let rv = match &event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
            resource_version(o).map(str::to_string)
        }
        WatchEvent::Bookmark {
            resource_version, ..
        } => Some(resource_version.clone()),
        WatchEvent::Error(_) => None,
    };
    let event = match event {
        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)
            if shard.is_some_and(|s| !in_shard(s, &o)) =>
        {
            return Err(ReflectorError::OutsideShard {
                resource_version: rv,
            });
        }
        WatchEvent::Added(o) => WatchEvent::Added(keyed(fifo, decoders, None, o)?),
        WatchEvent::Modified(o) => WatchEvent::Modified(keyed(fifo, decoders, None, o)?),
        WatchEvent::Deleted(o) => WatchEvent::Deleted(keyed(fifo, decoders, None, o)?),
        WatchEvent::Bookmark {
            resource_version,
            initial_events_end,
        } => WatchEvent::Bookmark {
            resource_version,
            initial_events_end,
        },
        WatchEvent::Error(e) => WatchEvent::Error(e),
    };
    Ok(DecodedEvent {
        event,
        resource_version: rv,
    })
}

/// The decoded events of one watch body, in order, read ahead and decoded
/// in parallel batches.
pub struct EventStream<K> {
    lines: Lines,
    decoder: Decoder<K>,
    in_flight: VecDeque<Pending<Decoded<K>>>,
    /// Events handed back by [`put_back`](Self::put_back).
    returned: Vec<Decoded<K>>,
    /// Lines read but not yet handed to the decoders.
    forming: Vec<Bytes>,
    forming_bytes: usize,
    /// How the body ended, once it has (returned after the events before it).
    end: Option<Result<(), ReflectorError>>,
}

impl<K> EventStream<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// Events of `lines`, decoded by `decoder` (as protobuf frames when
    /// `lines` are [framed](Lines::is_framed)).
    pub fn new(lines: Lines, decoder: Decoder<K>) -> Self {
        let framed = lines.is_framed();
        Self {
            lines,
            decoder: decoder.framed(framed),
            in_flight: VecDeque::new(),
            returned: Vec::new(),
            forming: Vec::new(),
            forming_bytes: 0,
            end: None,
        }
    }

    /// The events decoded next, in order: those handed back by
    /// [`put_back`](Self::put_back), else the next batch back from the
    /// decoders (a batch holds at least one line). `Ok(None)` at a clean end
    /// of the body, `Err` when the body failed (after every event that
    /// arrived before the failure).
    pub async fn next_batch(&mut self) -> Result<Option<Vec<Decoded<K>>>, ReflectorError> {
        if !self.returned.is_empty() {
            return Ok(Some(std::mem::take(&mut self.returned)));
        }
        self.read_ahead().await;
        match self.in_flight.pop_front() {
            Some(batch) => Ok(Some(batch.wait().await?)),
            None => match self.end.take() {
                Some(Err(e)) => Err(e),
                Some(Ok(())) | None => Ok(None),
            },
        }
    }

    /// Hands back `events` (taken by [`next_batch`](Self::next_batch) but
    /// not used): the next batch starts with them, in their order.
    pub fn put_back(&mut self, mut events: Vec<Decoded<K>>) {
        events.append(&mut self.returned);
        self.returned = events;
    }

    /// Forms batches of lines and hands them to the decoders. Waits for
    /// the network only when nothing else is pending; when lines stop
    /// arriving while batches are being decoded, the partial batch keeps
    /// growing until the next call, so batches stay large under load and a
    /// lone event is still decoded at once.
    async fn read_ahead(&mut self) {
        while self.in_flight.len() < self.decoder.depth() {
            if self.end.is_some() {
                self.submit();
                break;
            }
            let next = if self.in_flight.is_empty() && self.forming.is_empty() {
                Some(self.lines.next_line().await)
            } else {
                self.lines.try_next_line()
            };
            match next {
                Some(r) => {
                    self.take(r);
                    if self.forming.len() >= BATCH_LINES || self.forming_bytes >= BATCH_BYTES {
                        self.submit();
                    }
                }
                None => {
                    if self.in_flight.is_empty() {
                        self.submit();
                    }
                    break;
                }
            }
        }
    }

    fn submit(&mut self) {
        if self.forming.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.forming);
        self.forming_bytes = 0;
        let pending = self.decoder.lines(batch);
        self.in_flight.push_back(pending);
    }

    fn take(&mut self, r: Result<Option<Bytes>, ReflectorError>) {
        match r {
            Ok(Some(line)) => {
                self.forming_bytes += line.len();
                self.forming.push(line);
            }
            Ok(None) => self.end = Some(Ok(())),
            Err(e) => self.end = Some(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::ConfigMap;
    use kinformer_core::Indexer;

    use super::*;

    /// A batch part whose decode thread went away without answering (its
    /// reply dropped) fails the whole batch with `DecodeWorkerLost`, one
    /// part or several, rather than hanging or dropping inputs silently.
    #[tokio::test]
    async fn a_part_whose_worker_is_lost_fails_the_batch() {
        let (answered, rx_ok) = oneshot::channel::<Vec<u8>>();
        let (lost, rx_lost) = oneshot::channel::<Vec<u8>>();
        answered.send(vec![1]).unwrap();
        drop(lost);
        let two = Pending::InFlight {
            len: 2,
            parts: vec![(vec![0], rx_ok), (vec![1], rx_lost)],
        };
        assert!(matches!(
            two.wait().await,
            Err(ReflectorError::DecodeWorkerLost)
        ));
        let (lost, rx_lost) = oneshot::channel::<Vec<u8>>();
        drop(lost);
        let one = Pending::InFlight {
            len: 1,
            parts: vec![(vec![0], rx_lost)],
        };
        assert!(matches!(
            one.wait().await,
            Err(ReflectorError::DecodeWorkerLost)
        ));
        // A part that answers short of its positions is a lost input too.
        let (short, rx_short) = oneshot::channel::<Vec<u8>>();
        let (full, rx_full) = oneshot::channel::<Vec<u8>>();
        short.send(vec![]).unwrap();
        full.send(vec![2]).unwrap();
        let gap = Pending::InFlight {
            len: 2,
            parts: vec![(vec![0], rx_short), (vec![1], rx_full)],
        };
        assert!(matches!(
            gap.wait().await,
            Err(ReflectorError::DecodeWorkerLost)
        ));
    }

    /// The decode jobs apply the informer's transform (and only when it has
    /// one) to watch lines (`type` first, and `object` first: the two-pass
    /// path) and to LIST items, and refuse a nameless object in a line and
    /// in an item.
    #[tokio::test]
    async fn objects_outside_the_shard_are_left_out_before_they_are_decoded() {
        let shard = ShardSelector::uid_shard(0, 2);
        let uid = |inside: bool| {
            (0..)
                .map(|n: u32| format!("uid-{n}"))
                .find(|u| shard.matches(u) == inside)
                .unwrap()
        };
        let (inside, outside) = (uid(true), uid(false));
        // `data` of a ConfigMap must be a map: these would not decode.
        let object = |uid: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"a","uid":"{uid}","resourceVersion":"5"}},"data":7}}"#
            )
        };
        let fifo = Arc::new(DeltaFifo::new(Indexer::new(Vec::new()), None));
        let decoder = Decoder::<ConfigMap>::new(fifo, None).shard(Some(shard.clone()));
        let items = vec![Bytes::from(object(&outside)), Bytes::from(object(&inside))];
        let decoded = decoder.items(items).wait().await.unwrap();
        assert!(matches!(
            &decoded[0],
            Err(ReflectorError::OutsideShard { resource_version: Some(rv) }) if rv == "5"
        ));
        assert!(matches!(&decoded[1], Err(ReflectorError::Wire(_))));
        let lines = vec![
            Bytes::from(format!(
                r#"{{"type":"MODIFIED","object":{}}}"#,
                object(&outside)
            )),
            Bytes::from(format!(
                r#"{{"type":"MODIFIED","object":{}}}"#,
                object(&inside)
            )),
        ];
        let decoded = decoder.lines(lines).wait().await.unwrap();
        assert!(matches!(
            &decoded[0],
            Err(ReflectorError::OutsideShard { resource_version: Some(rv) }) if rv == "5"
        ));
        assert!(matches!(&decoded[1], Err(ReflectorError::Wire(_))));
    }

    #[tokio::test]
    async fn objects_reach_the_queue_transformed_only_when_it_has_a_transform() {
        let mark: kinformer_core::Transform<ConfigMap> = Arc::new(|mut o: ConfigMap| {
            o.data = Some([("t".to_string(), "y".to_string())].into());
            o
        });
        let object = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","resourceVersion":"3"}}"#;
        let nameless = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"namespace":"n"}}"#;
        for (transform, want) in [(None, None), (Some(mark), Some("y"))] {
            let fifo = Arc::new(DeltaFifo::new(Indexer::new(Vec::new()), transform));
            let decoder = Decoder::<ConfigMap>::new(fifo, None);
            let lines = vec![
                Bytes::from(format!(r#"{{"type":"ADDED","object":{object}}}"#)),
                Bytes::from(format!(r#"{{"object":{object},"type":"MODIFIED"}}"#)),
                Bytes::from(format!(r#"{{"type":"ADDED","object":{nameless}}}"#)),
            ];
            let decoded = decoder.lines(lines).wait().await.unwrap();
            let mut objects = Vec::new();
            for d in &decoded[..2] {
                let d = d.as_ref().unwrap();
                assert_eq!(d.resource_version.as_deref(), Some("3"));
                match &d.event {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                        objects.push((p.key().to_string(), Arc::clone(p.object())));
                    }
                    _ => panic!("an object event"),
                }
            }
            assert!(matches!(
                decoded[2],
                Err(ReflectorError::Wire(
                    kinformer_wire::WireError::MissingName { .. }
                ))
            ));
            let items = vec![Bytes::from(object), Bytes::from(nameless)];
            let items = decoder.items(items).wait().await.unwrap();
            let item = items[0].as_ref().unwrap();
            objects.push((item.key().to_string(), Arc::clone(item.object())));
            assert!(matches!(
                items[1],
                Err(ReflectorError::Wire(
                    kinformer_wire::WireError::MissingName { .. }
                ))
            ));
            for (key, object) in objects {
                assert_eq!(key, "n/a");
                let data = object.data.as_ref();
                assert_eq!(data.map(|d| d["t"].as_str()), want);
            }
        }
    }

    /// `next_batch` returns every event once, in arrival order, in
    /// non-empty batches (events handed back with `put_back` first), then
    /// the body's end; a body cut off mid-line ends in an error after the
    /// events before it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn batches_of_a_watch_body_come_in_order_then_its_end() {
        let line = |i: usize| {
            format!(
                r#"{{"type":"MODIFIED","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"cm-{}","namespace":"ns","resourceVersion":"{i}"}}}}}}"#,
                i % 41
            )
        };
        for cut_off in [false, true] {
            let mut body: String = (0..700).map(|i| line(i) + "\n").collect();
            if cut_off {
                body.push_str(r#"{"type":"MODIFIED","obj"#);
            }
            let lines = Lines::new(
                kube::client::Body::from(body.into_bytes()),
                std::time::Duration::from_secs(5),
            );
            let fifo = Arc::new(DeltaFifo::new(Indexer::new(Vec::new()), None));
            let pool = DecodePool::new(2, "t").unwrap();
            let mut events = EventStream::new(lines, Decoder::<ConfigMap>::new(fifo, Some(pool)));
            let mut rvs = Vec::new();
            let mut hand_back = true;
            let end = loop {
                match events.next_batch().await {
                    Ok(Some(mut batch)) => {
                        assert!(!batch.is_empty());
                        // Events handed back come first in the next batch.
                        if hand_back && batch.len() > 1 {
                            events.put_back(batch.split_off(1));
                            hand_back = false;
                        }
                        for d in batch {
                            rvs.push(d.unwrap().resource_version.unwrap());
                        }
                    }
                    other => break other,
                }
            };
            let want: Vec<String> = (0..700).map(|i| i.to_string()).collect();
            assert_eq!(rvs, want);
            if cut_off {
                assert!(
                    matches!(end, Err(ReflectorError::TruncatedEvent)),
                    "{end:?}"
                );
            } else {
                assert!(matches!(end, Ok(None)), "{end:?}");
            }
        }
    }

    #[tokio::test]
    async fn lines_decoded_on_their_keys_threads_come_back_in_arrival_order() {
        let fifo = Arc::new(DeltaFifo::new(Indexer::new(Default::default()), None));
        let decoder = Decoder::<ConfigMap>::new(fifo, Some(DecodePool::new(3, "t").unwrap()));
        let line = |i: usize| match i % 50 {
            7 => "{not json".to_string(),
            13 => format!(
                r#"{{"type":"BOOKMARK","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"resourceVersion":"{i}"}}}}}}"#
            ),
            _ => format!(
                r#"{{"type":"MODIFIED","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"cm-{}","namespace":"ns-{}","resourceVersion":"{i}"}}}}}}"#,
                i % 37,
                i % 3
            ),
        };
        let lines: Vec<Bytes> = (0..200).map(|i| Bytes::from(line(i))).collect();
        let decoded = decoder.lines(lines).wait().await.unwrap();
        assert_eq!(decoded.len(), 200);
        for (i, d) in decoded.iter().enumerate() {
            if i % 50 == 7 {
                assert!(d.is_err(), "line {i} is malformed");
            } else {
                let rv = d.as_ref().unwrap().resource_version.clone();
                assert_eq!(rv, Some(i.to_string()), "line {i}");
            }
        }
    }
}
