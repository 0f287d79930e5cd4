//! `cargo xtask apiserver stop`: end kube-apiserver, then etcd, by the PIDs `start` recorded.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::state::{Proc, State};

/// Stop the server recorded in `dir` (nothing to do when none is recorded).
pub fn stop(dir: &Path) -> anyhow::Result<()> {
    let Ok(st) = State::load(dir) else {
        eprintln!("no kube-apiserver recorded in {}", dir.display());
        return Ok(());
    };
    stop_state(&st);
    Ok(())
}

/// Stop both processes of `st` and remove the PID files.
pub fn stop_state(st: &State) {
    for (name, p) in [("kube-apiserver", &st.apiserver), ("etcd", &st.etcd)] {
        match stop_proc(p) {
            Ok(true) => eprintln!("stopped {name} (pid {})", p.pid),
            Ok(false) => {}
            Err(e) => eprintln!("could not stop {name} (pid {}): {e}", p.pid),
        }
    }
    for f in ["kube-apiserver.pid", "etcd.pid", "state.json"] {
        let _ = std::fs::remove_file(st.dir.join(f));
    }
}

/// Whether `pid` is a live (not zombie) process running `p.binary`.
pub fn is_running(p: &Proc) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", p.pid)).unwrap_or_default();
    // The state follows the parenthesized command name.
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|s| s.split_whitespace().next());
    if matches!(state, None | Some("Z" | "X")) {
        return false;
    }
    let exe = std::fs::read_link(format!("/proc/{}/exe", p.pid));
    let want = std::fs::canonicalize(&p.binary).unwrap_or_else(|_| p.binary.clone());
    exe.is_ok_and(|e| e == want)
}

fn signal(pid: u32, sig: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill {sig} {pid}: {status}");
    Ok(())
}

/// SIGTERM, wait up to 20 s, then SIGKILL. `Ok(false)` when it was not running.
pub fn stop_proc(p: &Proc) -> anyhow::Result<bool> {
    if !is_running(p) {
        return Ok(false);
    }
    signal(p.pid, "-TERM")?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if !is_running(p) {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(p.pid, "-KILL")?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && is_running(p) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(true)
}
