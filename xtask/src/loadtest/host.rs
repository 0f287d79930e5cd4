//! The hypervisor under this VM, as the guest sees it: CPU time it takes
//! from the guest's CPUs (`steal` in /proc/stat), and the guest's free page
//! reporting, which hands freed memory back to it.
//!
//! On this project's VMs the guest reports freed memory in passes about
//! 2 s apart, a few hundred MB each, and the host's work on each pass is
//! stolen from the guest's CPUs (~60–120 ms of CPU time). The previous load
//! test's exit frees its whole cache and the simulator's, so for some
//! 20 s afterwards every run measured the host taking back the previous
//! run's memory: the handler lag's p99 spikes came with those passes.
//! [`settle`] waits for that to end before a run starts.

use std::time::{Duration, Instant};

/// This kernel's count of memory reported to the host so far (not in
/// every kernel: upstream page reporting exports no counter).
const REPORTED_KIB: &str = "/sys/module/page_reporting/parameters/reported_kib";

/// How long the host must leave the guest alone before a run starts: a
/// little over one reporting interval (2 s).
const QUIET: Duration = Duration::from_secs(3);

/// Reported memory that counts as the host at work; passes that find a few
/// MB cost nothing measurable.
const REPORTED_WORK_KIB: u64 = 32 * 1024;

/// Steal ticks (1/100 s) in one 100 ms poll that count as the host at work:
/// a reporting pass takes 5–9, an otherwise idle host 0–1.
const STEAL_WORK_TICKS: u64 = 3;

/// Counts the CPU time the hypervisor takes from this VM's CPUs from the
/// moment it is started.
pub struct StealMeter(Option<u64>);

impl StealMeter {
    /// Starts counting.
    pub fn start() -> Self {
        Self(steal_ticks())
    }

    /// CPU seconds taken since [`StealMeter::start`], all CPUs together
    /// (`None` where /proc/stat has no steal column).
    pub fn seconds(&self) -> Option<f64> {
        let (now, then) = (steal_ticks()?, self.0?);
        Some(now.saturating_sub(then) as f64 / 100.0)
    }
}

fn steal_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?;
    // cpu user nice system idle iowait irq softirq steal ...
    cpu.split_whitespace().nth(8)?.parse().ok()
}

fn reported_kib() -> Option<u64> {
    std::fs::read_to_string(REPORTED_KIB)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The host's counters at one moment (`None`: not exported here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    reported_kib: Option<u64>,
    steal_ticks: Option<u64>,
}

impl Sample {
    fn now() -> Self {
        Self {
            reported_kib: reported_kib(),
            steal_ticks: steal_ticks(),
        }
    }

    /// Whether the host worked on this VM between `before` and `self`.
    fn host_worked_since(&self, before: &Self) -> bool {
        let grew = |now: Option<u64>, then: Option<u64>, by: u64| matches!((now, then), (Some(n), Some(t)) if n.saturating_sub(t) >= by);
        grew(self.reported_kib, before.reported_kib, REPORTED_WORK_KIB)
            || grew(self.steal_ticks, before.steal_ticks, STEAL_WORK_TICKS)
    }
}

/// What [`settle`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Settled {
    /// Time spent waiting.
    pub waited: Duration,
    /// False when `max` ran out with the host still at work.
    pub quiet: bool,
}

/// Waits (up to `max`) until the host has neither taken back freed memory
/// nor stolen CPU time for [`QUIET`], and says on stderr how long that
/// took. Returns at once when `max` is zero.
pub fn settle(max: Duration) -> Settled {
    let settled = wait_until_quiet(max);
    if settled.waited > QUIET {
        eprintln!(
            "waited {:.1} s for the host to stop taking back freed memory and CPU time{}",
            settled.waited.as_secs_f64(),
            if settled.quiet { "" } else { " (it still was)" }
        );
    }
    settled
}

fn wait_until_quiet(max: Duration) -> Settled {
    let start = Instant::now();
    if max.is_zero() {
        return Settled {
            waited: Duration::ZERO,
            quiet: true,
        };
    }
    let mut last_work = start;
    let mut before = Sample::now();
    while last_work.elapsed() < QUIET {
        if start.elapsed() >= max {
            return Settled {
                waited: start.elapsed(),
                quiet: false,
            };
        }
        std::thread::sleep(Duration::from_millis(100));
        let now = Sample::now();
        if now.host_worked_since(&before) {
            last_work = Instant::now();
        }
        before = now;
    }
    Settled {
        waited: start.elapsed(),
        quiet: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settle_with_no_time_returns_at_once() {
        let s = settle(Duration::ZERO);
        assert!(s.quiet);
        assert!(s.waited < Duration::from_secs(1));
    }

    #[test]
    fn steal_is_read_where_the_kernel_has_it() {
        // Every Linux since 2.6.11 has the column.
        let meter = StealMeter::start();
        let stolen = meter.seconds().expect("steal column in /proc/stat");
        assert!(stolen >= 0.0);
    }

    #[test]
    fn reporting_or_steal_past_their_thresholds_is_the_host_at_work() {
        let at = |kib, ticks| Sample {
            reported_kib: kib,
            steal_ticks: ticks,
        };
        let before = at(Some(1_000), Some(50));
        assert!(!at(Some(1_000), Some(50)).host_worked_since(&before));
        assert!(!at(Some(1_000 + REPORTED_WORK_KIB - 1), Some(52)).host_worked_since(&before));
        assert!(at(Some(1_000 + REPORTED_WORK_KIB), Some(50)).host_worked_since(&before));
        assert!(at(Some(1_000), Some(50 + STEAL_WORK_TICKS)).host_worked_since(&before));
        // A counter this kernel does not export never counts.
        let bare = at(None, Some(50));
        assert!(!at(None, Some(51)).host_worked_since(&bare));
        assert!(at(None, Some(53)).host_worked_since(&bare));
    }
}
