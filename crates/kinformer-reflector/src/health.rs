//! What a reflector is doing now, for health checks: its [`Phase`] and
//! since when, the age of its last event and bookmark, its last error, the
//! relists it began and why, and whether its task is still running (a
//! reflector that returned or panicked shows as [`Phase::Stopped`]).
//!
//! Written by the reflector at each change of phase, once per batch of
//! events and once per error; read with [`MetricsHandle::status`]
//! (cheap: a few atomics and two short locks).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::error::ReflectorError;
use crate::metrics::MetricsHandle;

/// What a reflector is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Its task has not run yet.
    NotStarted,
    /// Listing (a LIST or a WatchList's initial events): the first sync or
    /// a relist.
    Listing,
    /// Watching: the cache follows the server.
    Watching,
    /// Waiting before the next attempt after an error.
    BackingOff,
    /// Its task returned (shutdown, the queue closed) or panicked: see
    /// [`ReflectorStatus::stopped`]. The cache no longer follows the
    /// server.
    Stopped,
}

impl Phase {
    /// Every phase, in the order above.
    pub const ALL: [Phase; 5] = [
        Phase::NotStarted,
        Phase::Listing,
        Phase::Watching,
        Phase::BackingOff,
        Phase::Stopped,
    ];

    /// A short label for logs, metrics and health bodies.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::NotStarted => "not_started",
            Phase::Listing => "listing",
            Phase::Watching => "watching",
            Phase::BackingOff => "backing_off",
            Phase::Stopped => "stopped",
        }
    }
}

/// A reflector's state at one moment (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReflectorStatus {
    /// What it is doing.
    pub phase: Phase,
    /// How long it has been in this phase.
    pub phase_age: Duration,
    /// How long the cache has not followed the server: since the
    /// reflector last stopped watching (or since it started, before its
    /// first watch); `None` while it watches. Unlike `phase_age`, not reset
    /// by a reflector that goes back and forth between listing and backing
    /// off.
    pub not_watching_for: Option<Duration>,
    /// How long ago it last queued a watch event (`None`: never).
    pub last_event_age: Option<Duration>,
    /// How long ago it last received a bookmark (`None`: never).
    pub last_bookmark_age: Option<Duration>,
    /// The last error it reported (its [`ReflectorError::kind`] and
    /// message) and how long ago.
    pub last_error: Option<(&'static str, String, Duration)>,
    /// Relists begun, by the kind of the error that led to each.
    pub relists_by_reason: Vec<(&'static str, u64)>,
    /// Errors reported, by [`ReflectorError::kind`].
    pub errors_by_kind: Vec<(&'static str, u64)>,
    /// Why it stopped, once [`Phase::Stopped`]: `"shutdown"`, `"queue
    /// closed"`, or `"panicked"` (the panic's message is in the log, from
    /// the panic hook and the task's join).
    pub stopped: Option<String>,
}

impl ReflectorStatus {
    /// Whether its task has stopped because of a panic.
    pub fn panicked(&self) -> bool {
        self.stopped
            .as_deref()
            .is_some_and(|s| s.starts_with("panicked"))
    }
}

/// The moment every timestamp counts from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Now, as nanoseconds since [`epoch`] plus one (0 means "never").
fn stamp() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

/// The age of a [`stamp`] (`None` for 0, "never").
fn age(stamp: u64, now: u64) -> Option<Duration> {
    (stamp != 0).then(|| Duration::from_nanos(now.saturating_sub(stamp)))
}

/// The reflector's side of its status.
#[derive(Debug, Default)]
pub(crate) struct Health {
    phase: AtomicU8,
    phase_since: AtomicU64,
    not_watching_since: AtomicU64,
    last_event: AtomicU64,
    last_bookmark: AtomicU64,
    last_error: Mutex<Option<(&'static str, String, u64)>>,
    relists_by_reason: Mutex<Vec<(&'static str, u64)>>,
    errors_by_kind: Mutex<Vec<(&'static str, u64)>>,
    stopped: Mutex<Option<String>>,
}

/// Adds one to `label`'s count.
fn tally(counts: &Mutex<Vec<(&'static str, u64)>>, label: &'static str) {
    let mut counts = counts.lock();
    match counts.iter_mut().find(|(l, _)| *l == label) {
        Some((_, n)) => *n += 1,
        None => counts.push((label, 1)),
    }
}

impl Health {
    pub(crate) fn set_phase(&self, phase: Phase) {
        let index = Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0) as u8;
        let old = self.phase.swap(index, Ordering::Relaxed);
        if old == index {
            return;
        }
        let now = stamp();
        self.phase_since.store(now, Ordering::Relaxed);
        let watching = Phase::ALL.iter().position(|p| *p == Phase::Watching);
        let was_watching = Some(usize::from(old)) == watching;
        if phase != Phase::Watching
            && (was_watching || self.not_watching_since.load(Ordering::Relaxed) == 0)
        {
            self.not_watching_since.store(now, Ordering::Relaxed);
        }
    }

    pub(crate) fn event_seen(&self) {
        self.last_event.store(stamp(), Ordering::Relaxed);
    }

    pub(crate) fn bookmark_seen(&self) {
        self.last_bookmark.store(stamp(), Ordering::Relaxed);
    }

    pub(crate) fn error_seen(&self, e: &ReflectorError) {
        *self.last_error.lock() = Some((e.kind(), e.to_string(), stamp()));
        tally(&self.errors_by_kind, e.kind());
    }

    /// A relist begins: counted under the kind of the last error.
    pub(crate) fn relist_begun(&self) {
        let reason = self.last_error.lock().as_ref().map_or("unknown", |e| e.0);
        tally(&self.relists_by_reason, reason);
    }

    pub(crate) fn stop(&self, why: String) {
        *self.stopped.lock() = Some(why);
        self.set_phase(Phase::Stopped);
    }

    pub(crate) fn status(&self) -> ReflectorStatus {
        let now = stamp();
        let phase = Phase::ALL
            .get(usize::from(self.phase.load(Ordering::Relaxed)))
            .copied()
            .unwrap_or(Phase::NotStarted);
        ReflectorStatus {
            phase,
            // Never set while not started: the age since the epoch.
            phase_age: age(self.phase_since.load(Ordering::Relaxed), now)
                .unwrap_or_else(|| epoch().elapsed()),
            not_watching_for: match phase {
                Phase::Watching => None,
                _ => Some(
                    age(self.not_watching_since.load(Ordering::Relaxed), now)
                        .unwrap_or_else(|| epoch().elapsed()),
                ),
            },
            last_event_age: age(self.last_event.load(Ordering::Relaxed), now),
            last_bookmark_age: age(self.last_bookmark.load(Ordering::Relaxed), now),
            last_error: self
                .last_error
                .lock()
                .as_ref()
                .map(|(kind, msg, at)| (*kind, msg.clone(), age(*at, now).unwrap_or_default())),
            relists_by_reason: self.relists_by_reason.lock().clone(),
            errors_by_kind: self.errors_by_kind.lock().clone(),
            stopped: self.stopped.lock().clone(),
        }
    }
}

impl MetricsHandle {
    /// The reflector's current status (see [`crate::health`]).
    pub fn status(&self) -> ReflectorStatus {
        self.0.health.status()
    }
}

/// Marks the reflector stopped when dropped: when its run returns, when
/// its task is aborted, and while a panic unwinds it.
pub(crate) struct StopGuard<'a> {
    pub(crate) health: &'a Health,
    /// Why, when it returns normally.
    pub(crate) why: &'static str,
}

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        let why = if std::thread::panicking() {
            "panicked".to_string()
        } else {
            self.why.to_string()
        };
        self.health.stop(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_ages_and_reasons_are_read_back() {
        let h = Health::default();
        assert_eq!(h.status().phase, Phase::NotStarted);
        assert_eq!(h.status().last_event_age, None);
        h.set_phase(Phase::Listing);
        std::thread::sleep(Duration::from_millis(20));
        let s = h.status();
        assert_eq!(s.phase, Phase::Listing);
        assert!(s.phase_age >= Duration::from_millis(20), "{s:?}");
        h.set_phase(Phase::Listing);
        assert!(
            h.status().phase_age >= Duration::from_millis(20),
            "same phase: same start"
        );
        h.set_phase(Phase::BackingOff);
        h.set_phase(Phase::Listing);
        let s = h.status();
        assert!(s.phase_age < Duration::from_millis(20), "{s:?}");
        let behind = s.not_watching_for.unwrap_or_default();
        assert!(behind >= Duration::from_millis(20), "{s:?}");
        h.set_phase(Phase::Watching);
        assert_eq!(h.status().not_watching_for, None);
        std::thread::sleep(Duration::from_millis(5));
        h.set_phase(Phase::BackingOff);
        let behind = h.status().not_watching_for.unwrap_or_default();
        assert!(
            behind < Duration::from_millis(20),
            "counted from the watch's end"
        );
        h.event_seen();
        h.relist_begun();
        h.error_seen(&ReflectorError::TruncatedEvent);
        h.relist_begun();
        h.relist_begun();
        let s = h.status();
        assert!(s.last_event_age.is_some());
        assert_eq!(s.last_bookmark_age, None);
        assert_eq!(
            s.relists_by_reason,
            vec![("unknown", 1), ("truncated_event", 2)]
        );
        assert_eq!(s.errors_by_kind, vec![("truncated_event", 1)]);
        assert_eq!(s.last_error.as_ref().map(|e| e.0), Some("truncated_event"));
        h.stop("shutdown".into());
        assert_eq!(h.status().phase, Phase::Stopped);
        assert!(!h.status().panicked());
    }

    #[test]
    fn a_guard_dropped_by_a_panic_says_so() {
        let h = Health::default();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _guard = StopGuard {
                health: &h,
                why: "shutdown",
            };
            panic!("boom");
        }));
        assert!(caught.is_err());
        let s = h.status();
        assert_eq!(s.phase, Phase::Stopped);
        assert!(s.panicked(), "{s:?}");
    }
}
