//! Fault injection: configuration, named schedules, one-shot actions and counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};

/// Standing fault configuration; switchable at run time. All fractions are in `0.0..=1.0`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// Extra latency added before answering every API request, in milliseconds.
    pub latency_ms: u64,
    /// Fraction of API requests answered 429 TooManyRequests.
    pub error_429_fraction: f64,
    /// `Retry-After` seconds of injected 429s.
    pub retry_after_seconds: u64,
    /// Fraction of API requests answered 500 InternalError.
    pub error_500_fraction: f64,
    /// Every this many milliseconds, close `close_watches_fraction` of open watches (0 = never).
    pub close_watches_every_ms: u64,
    /// Fraction of watches closed by the periodic close.
    pub close_watches_fraction: f64,
    /// Every this many milliseconds, end every open watch with a 410 Expired ERROR event (0 = never).
    pub expire_watches_every_ms: u64,
    /// Every this many milliseconds, "restart": close all watches and drop the event history (0 = never).
    pub restart_every_ms: u64,
    /// Fraction of watch events replaced by a malformed line (the watch is then closed).
    pub malformed_line_fraction: f64,
    /// Fraction of watch events cut in half without newline (the watch is then closed).
    pub truncated_line_fraction: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            latency_ms: 0,
            error_429_fraction: 0.0,
            retry_after_seconds: 1,
            error_500_fraction: 0.0,
            close_watches_every_ms: 0,
            close_watches_fraction: 0.0,
            expire_watches_every_ms: 0,
            restart_every_ms: 0,
            malformed_line_fraction: 0.0,
            truncated_line_fraction: 0.0,
        }
    }
}

/// Named fault schedules for load tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSchedule;

impl FaultSchedule {
    /// The names [`FaultSchedule::by_name`] knows.
    pub const NAMES: &'static [&'static str] = &[
        "none",
        "flaky-watch",
        "expire",
        "restarts",
        "slow",
        "throttle",
        "chaos",
    ];

    /// A named schedule:
    /// - `none`: no faults;
    /// - `flaky-watch`: close a random 50% of watches every 5 s;
    /// - `expire`: end every watch with a 410 every 7 s;
    /// - `restarts`: restart (close all watches, drop history) every 10 s;
    /// - `slow`: 20 ms latency on every request;
    /// - `throttle`: 429 on 5% of requests;
    /// - `chaos`: 50% watch closes every 5 s, restart every 30 s, 2% 429, 2% 500,
    ///   0.1% malformed and 0.1% truncated event lines.
    pub fn by_name(name: &str) -> Option<FaultConfig> {
        let base = FaultConfig::default();
        Some(match name {
            "none" | "" => base,
            "flaky-watch" => FaultConfig {
                close_watches_every_ms: 5_000,
                close_watches_fraction: 0.5,
                ..base
            },
            "expire" => FaultConfig {
                expire_watches_every_ms: 7_000,
                ..base
            },
            "restarts" => FaultConfig {
                restart_every_ms: 10_000,
                ..base
            },
            "slow" => FaultConfig {
                latency_ms: 20,
                ..base
            },
            "throttle" => FaultConfig {
                error_429_fraction: 0.05,
                ..base
            },
            "chaos" => FaultConfig {
                close_watches_every_ms: 5_000,
                close_watches_fraction: 0.5,
                restart_every_ms: 30_000,
                error_429_fraction: 0.02,
                error_500_fraction: 0.02,
                malformed_line_fraction: 0.001,
                truncated_line_fraction: 0.001,
                ..base
            },
            _ => return None,
        })
    }
}

/// A one-shot fault, triggered through the handle or `POST /__sim/faults/actions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum FaultAction {
    /// Close a fraction of the open watches now.
    CloseWatches {
        /// Fraction of watches closed.
        fraction: f64,
    },
    /// End a fraction of the open watches now with a 410 Expired ERROR event.
    ExpireWatches {
        /// Fraction of watches expired.
        fraction: f64,
    },
    /// Answer the next `count` watch requests with a 410 Expired ERROR event.
    ExpireNextWatches {
        /// How many.
        count: u64,
    },
    /// Close every watch and drop the event history: resumes need a relist.
    Restart,
    /// Stall every watch, open or new: each queues its live events and sends nothing of them (no
    /// bookmarks either) until [`FaultAction::ReleaseWatches`]. A stalled server, and the load
    /// test's in-memory feed: a backlog written as fast as the client reads it.
    HoldWatches,
    /// End [`FaultAction::HoldWatches`]: every watch sends its queued events at once.
    ReleaseWatches,
}

/// A message to every open watch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Control {
    /// Close with this probability.
    Close(f64),
    /// Send a 410 ERROR and close, with this probability.
    Expire(f64),
}

/// Counters of injected faults.
#[derive(Debug, Default)]
pub struct FaultCounters {
    /// Watches closed by a close fault.
    pub watches_closed: AtomicU64,
    /// Watches ended with a forced 410 (open or new).
    pub watches_expired: AtomicU64,
    /// Restarts.
    pub restarts: AtomicU64,
    /// Responses delayed by latency.
    pub delayed: AtomicU64,
    /// Injected 429s.
    pub http_429: AtomicU64,
    /// Injected 500s.
    pub http_500: AtomicU64,
    /// Malformed event lines sent.
    pub malformed_lines: AtomicU64,
    /// Truncated event lines sent.
    pub truncated_lines: AtomicU64,
}

/// A readable copy of [`FaultCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultCounts {
    /// Watches closed by a close fault.
    pub watches_closed: u64,
    /// Watches ended with a forced 410.
    pub watches_expired: u64,
    /// Restarts.
    pub restarts: u64,
    /// Responses delayed by latency.
    pub delayed: u64,
    /// Injected 429s.
    pub http_429: u64,
    /// Injected 500s.
    pub http_500: u64,
    /// Malformed event lines sent.
    pub malformed_lines: u64,
    /// Truncated event lines sent.
    pub truncated_lines: u64,
    /// Sum of all the above.
    pub total: u64,
}

/// Shared fault state: configuration, pending one-shots, watch control channel, counters.
#[derive(Debug)]
pub struct Faults {
    config: RwLock<FaultConfig>,
    expire_next: AtomicU64,
    control: broadcast::Sender<Control>,
    hold: watch::Sender<bool>,
    /// The counters.
    pub counters: FaultCounters,
}

/// Increment a counter.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Whether a random draw falls under `fraction`.
pub fn roll(fraction: f64) -> bool {
    fraction > 0.0 && (fraction >= 1.0 || rand::random::<f64>() < fraction)
}

impl Faults {
    /// Fault state starting with `config`.
    pub fn new(config: FaultConfig) -> Self {
        Self {
            config: RwLock::new(config),
            expire_next: AtomicU64::new(0),
            control: broadcast::channel(64).0,
            hold: watch::Sender::new(false),
            counters: FaultCounters::default(),
        }
    }

    /// The current configuration.
    pub fn config(&self) -> FaultConfig {
        self.config.read().clone()
    }

    /// Replace the configuration.
    pub fn set_config(&self, config: FaultConfig) {
        tracing::info!(?config, "fault configuration changed");
        *self.config.write() = config;
    }

    /// Subscribe to watch control messages.
    pub fn subscribe(&self) -> broadcast::Receiver<Control> {
        self.control.subscribe()
    }

    /// Send a control message to every open watch.
    pub fn broadcast(&self, c: Control) {
        let _ = self.control.send(c);
    }

    /// Hold (`true`) or release (`false`) every watch's events.
    pub fn set_hold(&self, held: bool) {
        tracing::info!(held, "watch hold changed");
        self.hold.send_replace(held);
    }

    /// Follow the hold state (see [`FaultAction::HoldWatches`]).
    pub fn hold_receiver(&self) -> watch::Receiver<bool> {
        self.hold.subscribe()
    }

    /// Arm a forced 410 for the next `n` watches.
    pub fn expire_next_watches(&self, n: u64) {
        self.expire_next.fetch_add(n, Ordering::Relaxed);
    }

    /// Consume one armed forced 410, if any.
    pub fn take_expire_next(&self) -> bool {
        self.expire_next
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
    }

    /// The counters, read.
    pub fn counts(&self) -> FaultCounts {
        let c = &self.counters;
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = FaultCounts {
            watches_closed: r(&c.watches_closed),
            watches_expired: r(&c.watches_expired),
            restarts: r(&c.restarts),
            delayed: r(&c.delayed),
            http_429: r(&c.http_429),
            http_500: r(&c.http_500),
            malformed_lines: r(&c.malformed_lines),
            truncated_lines: r(&c.truncated_lines),
            total: 0,
        };
        out.total = out.watches_closed
            + out.watches_expired
            + out.restarts
            + out.delayed
            + out.http_429
            + out.http_500
            + out.malformed_lines
            + out.truncated_lines;
        out
    }
}

/// How often the periodic fault driver wakes up.
pub const DRIVER_TICK: Duration = Duration::from_millis(50);
