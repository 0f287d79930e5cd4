//! Figures of a process from /proc: resident memory and CPU time, of this
//! process or of a child that holds the cache under test.

/// The process measured.
#[derive(Clone, Copy, Debug)]
pub enum Proc {
    /// This process.
    This,
    /// A child process, by PID.
    Child(u32),
}

impl Proc {
    fn path(self, file: &str) -> String {
        match self {
            Self::This => format!("/proc/self/{file}"),
            Self::Child(pid) => format!("/proc/{pid}/{file}"),
        }
    }

    /// Current resident set size in bytes (VmRSS).
    pub fn rss_bytes(self) -> u64 {
        self.status_kib("VmRSS:") * 1024
    }

    /// Peak resident set size in bytes (VmHWM).
    pub fn peak_rss_bytes(self) -> u64 {
        self.status_kib("VmHWM:") * 1024
    }

    /// Resets the peak resident set size (VmHWM) to the current RSS, so
    /// that a later [`Proc::peak_rss_bytes`] measures one phase. False if
    /// the kernel refused.
    pub fn reset_peak_rss(self) -> bool {
        std::fs::write(self.path("clear_refs"), "5").is_ok()
    }

    fn status_kib(self, field: &str) -> u64 {
        status_kib(&self.path("status"), field)
    }

    /// User + system CPU seconds consumed by the process so far.
    pub fn cpu_seconds(self) -> f64 {
        cpu_seconds_of(&self.path("stat"))
    }
}

/// Current resident set size of this process in bytes (VmRSS).
pub fn rss_bytes() -> u64 {
    Proc::This.rss_bytes()
}

/// Peak resident set size of this process in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    Proc::This.peak_rss_bytes()
}

/// Resets this process's peak resident set size (see [`Proc::reset_peak_rss`]).
pub fn reset_peak_rss() -> bool {
    Proc::This.reset_peak_rss()
}

fn status_kib(path: &str, field: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds consumed by this process so far.
pub fn cpu_seconds() -> f64 {
    Proc::This.cpu_seconds()
}

fn cpu_seconds_of(path: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // `rest` starts at field 3 (state), so field n is at index n - 3.
    (ticks(14 - 3) + ticks(15 - 3)) as f64 / 100.0
}
