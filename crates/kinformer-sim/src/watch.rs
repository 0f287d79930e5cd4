//! WATCH: resume from history, initial events, bookmarks, timeouts, selector transitions and
//! watch faults. Each event line is encoded once (at commit) and shared by all watchers.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc};

use crate::faults::{Control, bump, roll};
use crate::history::{Event, EventType};
use crate::metadata::{self, Representation};
use crate::object::StoredObject;
use crate::resource::{ResourceDef, ResourceId};
use crate::selector::Selector;
use crate::state::{SharedRef, WatchChunks};
use crate::status::ApiError;

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Send the current state as `ADDED` events first; `end_bookmark` closes them with the
    /// `k8s.io/initial-events-end` bookmark (`sendInitialEvents=true`).
    Initial {
        /// Whether to send the initial-events-end bookmark.
        end_bookmark: bool,
    },
    /// Only changes after the current resourceVersion.
    Now,
    /// Changes after this resourceVersion, replayed from history.
    From(u64),
}

/// A validated watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The resource.
    pub res: ResourceId,
    /// Its definition.
    pub def: ResourceDef,
    /// Namespace scope, if any.
    pub namespace: Option<String>,
    /// Selector.
    pub selector: Selector,
    /// Full objects or metadata only.
    pub repr: Representation,
    /// Metadata-only events as protobuf frames (see [`crate::protobuf`]).
    pub protobuf: bool,
    /// Starting point.
    pub start: Start,
    /// Send periodic bookmarks.
    pub bookmarks: bool,
    /// When to end the watch.
    pub timeout: Duration,
}

/// The bookmark watch line at `rv`.
pub fn bookmark_line(def: &ResourceDef, repr: Representation, rv: u64, initial_end: bool) -> Bytes {
    let (kind, api_version) = match repr {
        Representation::Full => (def.kind.clone(), def.api_version()),
        Representation::Metadata => (
            "PartialObjectMetadata".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
    };
    // kube-apiserver (1.35+) omits the zero creationTimestamp (`omitzero`).
    let mut md = serde_json::json!({"resourceVersion": rv.to_string()});
    if initial_end {
        md["annotations"] = serde_json::json!({"k8s.io/initial-events-end": "true"});
    }
    let object = serde_json::json!({"kind": kind, "apiVersion": api_version, "metadata": md});
    let mut out = br#"{"type":"BOOKMARK","object":"#.to_vec();
    out.extend_from_slice(&crate::encode::to_vec(&object).unwrap_or_else(|_| b"{}".to_vec()));
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

/// The 410 "too old resource version" error.
pub fn too_old(rv: u64, oldest: u64) -> ApiError {
    ApiError::expired(format!("too old resource version: {rv} ({oldest})"))
}

/// Start a watch; returns the receiving end of the body: each message is a run of body chunks,
/// in order.
pub fn spawn(shared: SharedRef, req: WatchRequest) -> mpsc::Receiver<Vec<Bytes>> {
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        shared
            .counters
            .watches_started
            .fetch_add(1, Ordering::Relaxed);
        shared.counters.watches_open.fetch_add(1, Ordering::Relaxed);
        let protobuf = req.protobuf;
        if protobuf {
            shared.store.protobuf_watch_started();
        }
        let mut w = Watcher {
            shared: shared.clone(),
            req,
            tx,
            last_rv: 0,
        };
        if let Err(Closed) = w.run().await {
            tracing::trace!("watch client went away");
        }
        if protobuf {
            shared.store.protobuf_watch_ended();
        }
        shared.counters.watches_open.fetch_sub(1, Ordering::Relaxed);
    });
    rx
}

/// The client went away or the watch must end.
struct Closed;

struct Watcher {
    shared: SharedRef,
    req: WatchRequest,
    tx: mpsc::Sender<Vec<Bytes>>,
    last_rv: u64,
}

const BATCH: usize = 64 * 1024;

/// kube-apiserver's response writer buffers this many bytes before it writes a chunk: a larger
/// event goes out as a chunk of its own, smaller ones share one up to this size.
const GO_CHUNK: usize = 2048;

impl Watcher {
    async fn send(&self, line: Bytes) -> Result<(), Closed> {
        self.send_chunks(vec![line]).await
    }

    async fn send_chunks(&self, chunks: Vec<Bytes>) -> Result<(), Closed> {
        self.tx.send(chunks).await.map_err(|_| Closed)
    }

    async fn send_error(&self, err: ApiError) -> Result<(), Closed> {
        self.send(self.wire(err.to_watch_line())).await
    }

    /// A JSON watch line as this watch sends it: as is, or as a protobuf frame.
    fn wire(&self, line: Bytes) -> Bytes {
        if self.req.protobuf {
            crate::protobuf::frame_of_line(&line)
        } else {
            line
        }
    }

    fn in_scope(&self, obj: &StoredObject) -> bool {
        self.req
            .namespace
            .as_deref()
            .is_none_or(|ns| !self.req.def.namespaced || obj.meta.namespace == ns)
            && self.req.selector.matches(&obj.meta)
    }

    async fn run(&mut self) -> Result<(), Closed> {
        let shared = self.shared.clone();
        let faults = &shared.faults;
        let mut control = faults.subscribe();
        let mut hold = faults.hold_receiver();
        // Live events queued while the watches are held.
        let mut held = Batch::default();
        if faults.take_expire_next() {
            bump(&faults.counters.watches_expired);
            let rv = shared.store.current_rv();
            return self.send_error(too_old(rv, rv)).await;
        }
        let from = match self.req.start {
            Start::Initial { .. } | Start::Now => None,
            Start::From(rv) => Some(rv),
        };
        let sub = match shared.store.subscribe(self.req.res, from) {
            Ok(s) => s,
            Err(e) => {
                shared
                    .counters
                    .watches_too_old
                    .fetch_add(1, Ordering::Relaxed);
                return self.send_error(too_old(from.unwrap_or(0), e.oldest)).await;
            }
        };
        let mut rx = sub.rx;
        self.last_rv = from.unwrap_or(sub.rv);
        if let (Start::Initial { end_bookmark }, Some(initial)) = (self.req.start, sub.initial) {
            self.send_initial(&initial).await?;
            if end_bookmark {
                self.send(self.wire(bookmark_line(&self.req.def, self.req.repr, sub.rv, true)))
                    .await?;
                shared
                    .counters
                    .bookmarks_sent
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        for ev in &sub.backlog {
            self.replay_event(ev).await?;
        }
        let deadline = tokio::time::Instant::now() + self.req.timeout;
        let mut tick = tokio::time::interval(shared.config.bookmark_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        let mut last_bookmark = self.last_rv;
        loop {
            let holding = *hold.borrow_and_update();
            if !holding && !held.lines.is_empty() {
                self.send_held(std::mem::take(&mut held)).await?;
            }
            tokio::select! {
                biased;
                // A change of the hold is read at the top of the loop.
                Ok(()) = hold.changed() => {}
                c = control.recv() => {
                    match c {
                        Ok(Control::Close(f)) if roll(f) => {
                            bump(&faults.counters.watches_closed);
                            return Ok(());
                        }
                        Ok(Control::Expire(f)) if roll(f) => {
                            bump(&faults.counters.watches_expired);
                            let rv = shared.store.current_rv();
                            return self.send_error(too_old(self.last_rv, rv)).await;
                        }
                        _ => {}
                    }
                }
                ev = rx.recv() => match ev {
                    Ok(ev) => {
                        // Send what is already queued with it as one body chunk (a backlog costs
                        // one write, not one per event); a lone event goes out as the shared line.
                        let mut batch = Batch::default();
                        if let Some(line) = self.on_event(&ev).await? {
                            batch.push(line);
                        }
                        let mut lagged = None;
                        while batch.len < BATCH && batch.lines.len() < MAX_BATCH_EVENTS {
                            match rx.try_recv() {
                                Ok(ev) => {
                                    if let Some(line) = self.on_event(&ev).await? {
                                        batch.push(line);
                                    }
                                }
                                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                                    lagged = Some(n);
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        if holding {
                            held.append(batch);
                        } else {
                            self.send_batch(batch).await?;
                        }
                        if let Some(n) = lagged {
                            return self.lagged(n).await;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(n)) => return self.lagged(n).await,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
                _ = tick.tick(), if self.req.bookmarks && !holding => {
                    if let Some(rv) = shared.store.bookmark_rv(&rx) {
                        let rv = rv.max(self.last_rv);
                        if rv >= last_bookmark {
                            last_bookmark = rv;
                            self.send(self.wire(bookmark_line(&self.req.def, self.req.repr, rv, false))).await?;
                            shared.counters.bookmarks_sent.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => return Ok(()),
                _ = self.tx.closed() => return Err(Closed),
            }
        }
    }

    /// The watcher fell more than the broadcast capacity behind: end it with a 410, like the
    /// watch cache ends a watcher it cannot keep.
    async fn lagged(&self, n: u64) -> Result<(), Closed> {
        self.shared
            .counters
            .watches_lagged
            .fetch_add(1, Ordering::Relaxed);
        tracing::warn!(missed = n, "watcher fell behind; closing it with 410");
        self.send_error(ApiError::expired(format!(
            "watch closed: client too slow, {n} events behind at resource version {}",
            self.last_rv
        )))
        .await
    }

    /// Send a batch of event lines, in one message to the body. With
    /// [`WatchChunks::Apiserver`] they are cut into chunks as kube-apiserver cuts them: a line
    /// of [`GO_CHUNK`] bytes or more is a chunk of its own (its bytes encoded once at commit
    /// and shared by every watcher, not copied), shorter lines share a chunk up to that size;
    /// with [`WatchChunks::Batched`] they are copied into one chunk.
    async fn send_batch(&self, batch: Batch) -> Result<(), Closed> {
        let count = batch.lines.len() as u64;
        if count == 0 {
            return Ok(());
        }
        self.send_chunks(self.cut(batch)).await?;
        self.shared
            .counters
            .events_sent
            .fetch_add(count, Ordering::Relaxed);
        Ok(())
    }

    /// A batch's lines as the body chunks [`WatchChunks`] asks for.
    fn cut(&self, batch: Batch) -> Vec<Bytes> {
        match self.shared.config.watch_chunks {
            WatchChunks::Apiserver => go_chunks(batch.lines),
            WatchChunks::Batched if batch.lines.len() == 1 => batch.lines,
            WatchChunks::Batched => {
                let mut buf = Vec::with_capacity(batch.len);
                for l in &batch.lines {
                    buf.extend_from_slice(l);
                }
                vec![Bytes::from(buf)]
            }
        }
    }

    /// Send the events queued during a hold, as chunks of up to [`BATCH`] bytes.
    async fn send_held(&self, held: Batch) -> Result<(), Closed> {
        let mut chunk = Batch::default();
        for line in held.lines {
            if chunk.len + line.len() > BATCH && !chunk.lines.is_empty() {
                self.send_batch(std::mem::take(&mut chunk)).await?;
            }
            chunk.push(line);
        }
        self.send_batch(chunk).await
    }

    /// Send lines written one after another into `buf` (each ending at one of `ends`, which
    /// is cleared): as one chunk when [`WatchChunks::Batched`], else cut as kube-apiserver
    /// cuts them (slices of `buf`, not copies, for the lines of [`GO_CHUNK`] bytes or more).
    async fn send_lines(&self, buf: Bytes, ends: &mut Vec<usize>) -> Result<(), Closed> {
        let chunks = match self.shared.config.watch_chunks {
            WatchChunks::Batched => vec![buf],
            WatchChunks::Apiserver => {
                let mut start = 0;
                let lines = ends
                    .iter()
                    .map(|&end| {
                        let line = buf.slice(start..end);
                        start = end;
                        line
                    })
                    .collect();
                go_chunks(lines)
            }
        };
        ends.clear();
        self.send_chunks(chunks).await
    }

    async fn send_initial(&self, initial: &crate::store::ObjectMap) -> Result<(), Closed> {
        let (lo, hi) = match self.req.namespace.as_deref() {
            Some(ns) if self.req.def.namespaced => (
                Bound::Included(format!("{ns}/")),
                Bound::Excluded(format!("{ns}0")),
            ),
            _ => (Bound::Unbounded, Bound::Unbounded),
        };
        let mut buf = Vec::with_capacity(BATCH + 8192);
        // Where each line of `buf` ends.
        let mut ends = Vec::new();
        let mut count = 0u64;
        let range = initial.range::<_, str>((
            lo.as_ref().map(String::as_str),
            hi.as_ref().map(String::as_str),
        ));
        let items: Vec<Arc<StoredObject>> = range
            .filter(|(_, o)| self.in_scope(o))
            .map(|(_, o)| o.clone())
            .collect();
        if self.req.protobuf {
            return self.send_initial_frames(items).await;
        }
        for obj in items {
            buf.extend_from_slice(EventType::Added.line_prefix());
            match self.req.repr {
                Representation::Full => buf.extend_from_slice(&obj.bytes),
                Representation::Metadata => metadata::write_partial_stored(&obj, &mut buf),
            }
            buf.extend_from_slice(crate::history::LINE_SUFFIX);
            ends.push(buf.len());
            count += 1;
            if buf.len() >= BATCH {
                let full = std::mem::replace(&mut buf, Vec::with_capacity(BATCH + 8192));
                self.send_lines(Bytes::from(full), &mut ends).await?;
            }
        }
        if !buf.is_empty() {
            self.send_lines(Bytes::from(buf), &mut ends).await?;
        }
        self.shared
            .counters
            .events_sent
            .fetch_add(count, Ordering::Relaxed);
        Ok(())
    }

    /// The initial events of a protobuf WatchList stream: each object's
    /// frame, cut into chunks as events are, [`BATCH`] bytes at a time.
    async fn send_initial_frames(&self, items: Vec<Arc<StoredObject>>) -> Result<(), Closed> {
        let mut frames = Batch::default();
        for obj in items {
            frames.push(crate::protobuf::frame_of_stored(EventType::Added, &obj));
            if frames.len >= BATCH {
                self.send_batch(std::mem::take(&mut frames)).await?;
            }
        }
        self.send_batch(frames).await
    }

    /// Send one event right away (replayed history).
    async fn replay_event(&mut self, ev: &Arc<Event>) -> Result<(), Closed> {
        let mut batch = Batch::default();
        if let Some(line) = self.on_event(ev).await? {
            batch.push(line);
        }
        self.send_batch(batch).await
    }

    /// The line to send for an event, if any (faulty lines are sent here and end the watch).
    async fn on_event(&mut self, ev: &Arc<Event>) -> Result<Option<Bytes>, Closed> {
        if ev.rv <= self.last_rv {
            return Ok(None);
        }
        self.last_rv = ev.rv;
        let cur = self.in_scope(&ev.obj);
        let line = match (ev.ty, ev.prev.as_ref().map(|p| self.in_scope(p))) {
            (EventType::Modified, Some(false)) if cur => self.wire(metadata::typed_line(
                EventType::Added,
                &ev.obj.bytes,
                self.req.repr,
            )),
            (EventType::Modified, Some(true)) if !cur => {
                // Left the selector: DELETED carrying the previous state at this event's RV,
                // as the watch cache does.
                let prev = ev
                    .prev
                    .as_ref()
                    .and_then(|p| crate::object::with_resource_version(&p.bytes, ev.rv));
                let bytes = prev.unwrap_or_else(|| ev.obj.bytes.clone());
                self.wire(metadata::typed_line(
                    EventType::Deleted,
                    &bytes,
                    self.req.repr,
                ))
            }
            _ if !cur => return Ok(None),
            _ => match self.req.repr {
                Representation::Full => ev.line.clone(),
                Representation::Metadata if self.req.protobuf => crate::protobuf::event_frame(ev),
                Representation::Metadata => metadata::event_line(ev),
            },
        };
        let faults = &self.shared.faults;
        let cfg = faults.config();
        if roll(cfg.malformed_line_fraction) {
            bump(&faults.counters.malformed_lines);
            let garbage = if self.req.protobuf {
                crate::protobuf::malformed_frame()
            } else {
                Bytes::from_static(b"{\"type\":\"MODIFIED\",\"object\":{this is not json}\n")
            };
            self.send(garbage).await?;
            return Err(Closed);
        }
        if roll(cfg.truncated_line_fraction) {
            bump(&faults.counters.truncated_lines);
            self.send(line.slice(..line.len() / 2)).await?;
            return Err(Closed);
        }
        Ok(Some(line))
    }
}

/// Event lines gathered to go out as one body chunk.
#[derive(Default)]
struct Batch {
    lines: Vec<Bytes>,
    len: usize,
}

impl Batch {
    fn push(&mut self, line: Bytes) {
        self.len += line.len();
        self.lines.push(line);
    }

    fn append(&mut self, other: Batch) {
        self.len += other.len;
        self.lines.extend(other.lines);
    }
}

/// Most events gathered into one batch.
const MAX_BATCH_EVENTS: usize = 256;

/// Event lines as the body chunks kube-apiserver would write them in (see [`GO_CHUNK`]). A
/// chunk that holds one line is that line's shared bytes; only lines that share a chunk are
/// copied together.
fn go_chunks(lines: Vec<Bytes>) -> Vec<Bytes> {
    let mut chunks = Vec::with_capacity(lines.len());
    // The lines of the chunk being filled, and their length.
    let mut small: Vec<Bytes> = Vec::new();
    let mut small_len = 0;
    for line in lines {
        if line.len() >= GO_CHUNK {
            flush_small(&mut small, &mut chunks);
            small_len = 0;
            chunks.push(line);
            continue;
        }
        if small_len + line.len() > GO_CHUNK {
            flush_small(&mut small, &mut chunks);
            small_len = 0;
        }
        small_len += line.len();
        small.push(line);
    }
    flush_small(&mut small, &mut chunks);
    chunks
}

/// Push the lines gathered for one chunk as that chunk (cleared after).
fn flush_small(small: &mut Vec<Bytes>, chunks: &mut Vec<Bytes>) {
    match small.len() {
        0 => {}
        1 => chunks.extend(small.pop()),
        _ => {
            let mut chunk = Vec::with_capacity(small.iter().map(Bytes::len).sum());
            for line in small.drain(..) {
                chunk.extend_from_slice(&line);
            }
            chunks.push(Bytes::from(chunk));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(n: usize, fill: u8) -> Bytes {
        let mut v = vec![fill; n.saturating_sub(1)];
        v.push(b'\n');
        Bytes::from(v)
    }

    #[test]
    fn large_lines_are_chunks_of_their_own_and_small_ones_share_up_to_go_chunk() {
        let big = line(GO_CHUNK + 10, b'a');
        let lines = vec![
            line(100, b'b'),
            line(900, b'c'),
            big.clone(),
            line(1500, b'd'),
            line(1000, b'e'),
            line(48, b'f'),
            line(GO_CHUNK, b'g'),
        ];
        let chunks = go_chunks(lines.clone());
        let sizes: Vec<usize> = chunks.iter().map(Bytes::len).collect();
        assert_eq!(sizes, vec![1000, GO_CHUNK + 10, 1500, 1048, GO_CHUNK]);
        // A large line, and a small one alone in its chunk, are sent as the shared bytes.
        assert_eq!(chunks[1].as_ptr(), big.as_ptr());
        assert_eq!(chunks[2].as_ptr(), lines[3].as_ptr());
        let joined: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let expected: Vec<u8> = lines.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(joined, expected);
    }
}
