//! Spare chunks: a few new chunks, their pages already supplied by the
//! kernel, kept on the free lists so that a decode thread rarely has to cut
//! a new chunk itself.
//!
//! A thread that cuts a new chunk waits while the kernel supplies (and
//! zeroes) its pages: with transparent huge pages, a whole 2 MiB page at
//! the first touch. On some virtual machines that costs several
//! microseconds per 4 KiB page (one load test measured ~25 ms of a decode
//! thread for one such fault, in mid-churn), and every event queued behind
//! that thread waits with it. This happens right after a sync, when every
//! chunk holds a live object, and later whenever a size class's free list
//! runs dry. A [`SpareKeeper`] thread tops the free lists up in the
//! background instead; [`SpareKeeper::wake`] has it do so at once (after a
//! sync). The memory stays with the process: chunks are never
//! returned.

use std::io;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::region::REGION;

/// Spare chunks per thousand chunks cut, in each size class.
pub const SPARE_PER_MILLE: usize = 10;

/// Bytes of chunks one call of [`top_up_spare_chunks`] cuts at most (one
/// transparent huge page): a keeper checks for its stop between calls.
pub const TOP_UP_STEP: usize = 2 << 20;

/// How often a [`SpareKeeper`] looks at the free lists when not woken.
pub const KEEP_INTERVAL: Duration = Duration::from_millis(50);

/// Cuts and touches up to [`TOP_UP_STEP`] bytes of new chunks toward
/// [`SPARE_PER_MILLE`] free chunks per thousand cut in each size class;
/// returns whether more is wanted (call again). Does nothing unless
/// [`crate::ObjectArenas`] is the global allocator and has handed out
/// chunks.
///
/// ```
/// // Without the arenas in use there is nothing to top up.
/// assert!(!kinformer_alloc::top_up_spare_chunks());
/// ```
pub fn top_up_spare_chunks() -> bool {
    REGION.top_up(SPARE_PER_MILLE, TOP_UP_STEP)
}

/// A thread that keeps the spare chunks topped up: every
/// [`KEEP_INTERVAL`], and at once when woken. Dropping it stops and joins
/// the thread. Without [`crate::ObjectArenas`] as the global allocator each
/// look finds nothing to do.
///
/// ```
/// let keeper = kinformer_alloc::spare::SpareKeeper::start("spares").unwrap();
/// keeper.wake();
/// drop(keeper); // joins the thread
/// ```
pub struct SpareKeeper {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
}

/// What the owner tells the keeper thread.
#[derive(Default)]
struct Signal {
    state: Mutex<Orders>,
    changed: Condvar,
}

#[derive(Default)]
struct Orders {
    woken: bool,
    stop: bool,
}

impl Signal {
    fn update(&self, f: impl FnOnce(&mut Orders)) {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_one();
    }

    fn stopped(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop
    }

    /// Waits until woken, stopped or [`KEEP_INTERVAL`] passed; returns
    /// whether to go on.
    fn wait(&self) -> bool {
        let orders = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut orders, _) = self
            .changed
            .wait_timeout_while(orders, KEEP_INTERVAL, |o| !o.woken && !o.stop)
            .unwrap_or_else(PoisonError::into_inner);
        orders.woken = false;
        !orders.stop
    }
}

impl SpareKeeper {
    /// Starts the keeper thread, named `name`.
    pub fn start(name: &str) -> io::Result<Self> {
        let signal = Arc::new(Signal::default());
        let mine = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || keep(&mine))?;
        Ok(Self {
            signal,
            thread: Some(thread),
        })
    }

    /// Has the keeper top up now rather than at its next look.
    pub fn wake(&self) {
        self.signal.update(|o| o.woken = true);
    }
}

fn keep(signal: &Signal) {
    loop {
        while top_up_spare_chunks() {
            if signal.stopped() {
                return;
            }
        }
        if !signal.wait() {
            return;
        }
    }
}

impl Drop for SpareKeeper {
    fn drop(&mut self) {
        self.signal.update(|o| o.stop = true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for SpareKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpareKeeper").finish_non_exhaustive()
    }
}
