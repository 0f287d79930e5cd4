//! The load test's progress bars (indicatif), hidden with `--quiet`: the
//! simulator's fill, the initial sync and the churn.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// A bar of `len` steps named `msg` (hidden when `quiet`).
pub fn bar(quiet: bool, len: u64, msg: &'static str) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{bar:40}] {pos}/{len} {elapsed_precise} {per_sec}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(msg);
    pb
}

/// A spinner named `msg` with the time elapsed, for a step whose progress
/// cannot be counted (hidden when `quiet`).
pub fn spinner(quiet: bool, msg: String) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed_precise}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg);
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// Moves a bar of milliseconds along with the clock until dropped (for a
/// step that blocks the thread that started it, as the churn does).
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    bar: ProgressBar,
}

impl Ticker {
    /// Starts moving `bar` (its length in milliseconds).
    pub fn start(bar: ProgressBar) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, pb) = (Arc::clone(&stop), bar.clone());
        let thread = (!bar.is_hidden()).then(|| {
            std::thread::spawn(move || {
                let start = Instant::now();
                while !flag.load(Ordering::Relaxed) {
                    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                    pb.set_position(ms.min(pb.length().unwrap_or(ms)));
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        });
        Self { stop, thread, bar }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.bar.finish();
    }
}
