//! Watch events and the bounded event history used to resume watches.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::object::StoredObject;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }

    /// `{"type":"ADDED","object":` — the bytes before the object in a watch line.
    pub fn line_prefix(self) -> &'static [u8] {
        match self {
            EventType::Added => br#"{"type":"ADDED","object":"#,
            EventType::Modified => br#"{"type":"MODIFIED","object":"#,
            EventType::Deleted => br#"{"type":"DELETED","object":"#,
        }
    }
}

/// The bytes after the object in a watch line.
pub const LINE_SUFFIX: &[u8] = b"}\n";

/// Build a watch line `{"type":..,"object":OBJ}\n` around already-encoded object bytes.
pub fn watch_line(ty: EventType, obj: &[u8]) -> Bytes {
    let prefix = ty.line_prefix();
    let mut v = Vec::with_capacity(prefix.len() + obj.len() + LINE_SUFFIX.len());
    v.extend_from_slice(prefix);
    v.extend_from_slice(obj);
    v.extend_from_slice(LINE_SUFFIX);
    Bytes::from(v)
}

/// One committed change, encoded once and shared by every watcher and the history.
#[derive(Debug)]
pub struct Event {
    /// The resourceVersion of the change.
    pub rv: u64,
    /// Event type.
    pub ty: EventType,
    /// The object after the change (for `DELETED`: the last state, with the deletion's resourceVersion).
    pub obj: Arc<StoredObject>,
    /// The object before the change, for `MODIFIED`; used for selector transitions.
    pub prev: Option<Arc<StoredObject>>,
    /// The full watch line, newline-terminated; `obj.bytes` is a slice of it.
    pub line: Bytes,
    /// The metadata-only line, built on first use.
    pub meta_line: OnceLock<Bytes>,
    /// The metadata-only line as a protobuf frame, built on first use.
    pub meta_frame: OnceLock<Bytes>,
}

/// The bounded history of one resource's events.
#[derive(Debug)]
pub struct History {
    events: VecDeque<Arc<Event>>,
    capacity: usize,
    compacted_rv: u64,
}

/// Resuming from a resourceVersion older than the retained window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest resourceVersion a watch can resume from.
    pub oldest: u64,
}

impl History {
    /// An empty history holding at most `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Self {
            events: VecDeque::new(),
            capacity: capacity.max(1),
            compacted_rv: 0,
        }
    }

    /// Append an event, evicting the oldest when full.
    pub fn push(&mut self, ev: Arc<Event>) {
        if self.events.len() >= self.capacity
            && let Some(old) = self.events.pop_front()
        {
            self.compacted_rv = old.rv;
        }
        self.events.push_back(ev);
    }

    /// Events with rv strictly greater than `rv`, or `TooOld` when some were evicted.
    pub fn since(&self, rv: u64) -> Result<Vec<Arc<Event>>, TooOld> {
        if rv < self.compacted_rv {
            return Err(TooOld {
                oldest: self.compacted_rv,
            });
        }
        let start = self.events.partition_point(|e| e.rv <= rv);
        Ok(self.events.range(start..).cloned().collect())
    }

    /// The oldest resourceVersion from which a resume is still possible.
    pub fn compacted_rv(&self) -> u64 {
        self.compacted_rv
    }

    /// Drop every event; resumes from before `rv` become impossible ("restart").
    pub fn reset(&mut self, rv: u64) {
        self.events.clear();
        self.compacted_rv = rv;
    }

    /// Number of retained events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether no event is retained.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}
