//! `controllerbench --impl client-go`: client-go's informer, rate-limited
//! workqueue and worker goroutines in the Go harness (`--controller`, see
//! `xtask/clientgo/controller.go`), with the benchmark's no-op reconcile;
//! its tracker lives in the harness and is read through its commands.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::Command;
use std::sync::Arc;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::Deserialize;

use super::{ControllerbenchArgs, Figures, QueueBytes, Reconciled, Running};
use crate::loadtest::LoadtestArgs;
use crate::loadtest::client_go::{ClientGo, ensure_built};
use crate::loadtest::http_source::Server;

/// Workers when `--concurrency` is not given: client-go has no default
/// (each controller picks its own), so kinformer-controller's is used.
pub const DEFAULT_WORKERS: usize = kinformer::controller::DEFAULT_CONCURRENCY;

#[derive(Deserialize)]
struct Status {
    synced: bool,
    reconciles: u64,
    distinct: u64,
}

#[derive(Deserialize)]
struct Finished {
    concurrent: u64,
    reconciles: u64,
    distinct: u64,
}

/// The harness's tracker.
pub struct Remote {
    harness: Arc<ClientGo>,
    truth_sent: parking_lot::Mutex<bool>,
}

impl Remote {
    fn status(&self) -> Status {
        self.harness.request("status").unwrap_or_else(|e| {
            tracing::error!(error = %e, "client-go status");
            Status {
                synced: false,
                reconciles: 0,
                distinct: 0,
            }
        })
    }
}

impl Reconciled for Remote {
    fn distinct(&self) -> u64 {
        self.status().distinct
    }
    fn reconciles(&self) -> u64 {
        self.status().reconciles
    }
    fn start_recording(&self) -> anyhow::Result<()> {
        self.harness.ok("record")
    }
    fn lost(&self, truth: &HashMap<String, String>) -> anyhow::Result<usize> {
        let mut sent = self.truth_sent.lock();
        if !*sent {
            let path = self.harness.scratch_file("truth");
            let mut text = String::new();
            for (k, v) in truth {
                let _ = writeln!(text, "{k} {v}");
            }
            std::fs::write(&path, text)?;
            self.harness.ok(&format!("truth {}", path.display()))?;
            *sent = true;
        }
        #[derive(Deserialize)]
        struct Lost {
            lost: usize,
        }
        Ok(self.harness.request::<Lost>("lost")?.lost)
    }
    fn figures(&self) -> anyhow::Result<Figures> {
        let path = self.harness.scratch_file("latency");
        let f: Finished = self
            .harness
            .request(&format!("finish {}", path.display()))?;
        let mut latency = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3)?;
        for line in std::fs::read_to_string(&path)?.lines() {
            if let Ok(us) = line.parse::<u64>() {
                let _ = latency.record(us.clamp(1, 3_600_000_000));
            }
        }
        Ok(Figures {
            latency,
            concurrent: f.concurrent,
            reconciles: f.reconciles,
            distinct: f.distinct,
        })
    }
}

/// Starts the harness's controller over the load test's simulator (or
/// kubeconfig); its tracker, and the controller as the benchmark drives it.
pub fn start(
    args: &ControllerbenchArgs,
    lt: &LoadtestArgs,
    server: &Server,
) -> anyhow::Result<(Arc<Remote>, Running)> {
    let workers = args.concurrency.unwrap_or(DEFAULT_WORKERS);
    let url = server.sim_url(lt);
    let harness = Arc::new(ClientGo::spawn(
        lt,
        url.as_deref(),
        server.namespace(),
        &[
            "--controller".into(),
            "--workers".into(),
            workers.to_string(),
        ],
    )?);
    harness.start()?;
    let remote = Arc::new(Remote {
        harness: Arc::clone(&harness),
        truth_sent: parking_lot::Mutex::new(false),
    });
    let (all, cache, synced, stop) = (
        Arc::clone(&harness),
        Arc::clone(&harness),
        Arc::clone(&remote),
        Arc::clone(&harness),
    );
    Ok((
        remote,
        Running {
            reconcile_all: Box::new(move || {
                if let Err(e) = all.ok("reconcile-all") {
                    tracing::error!(error = %e, "client-go reconcile-all");
                }
            }),
            cache: Box::new(move || {
                cache.keys_and_versions().unwrap_or_else(|e| {
                    tracing::error!(error = %e, "client-go's keys");
                    Vec::new()
                })
            }),
            synced: Box::new(move || Some(synced.status().synced)),
            stop: Box::new(move |_| {
                stop.shutdown();
                Ok(None)
            }),
            process: harness.process(),
        },
    ))
}

/// RSS growth per key of `n` keys added to an empty workqueue, measured by
/// a fresh harness process of its own.
pub fn queue_bytes(n: usize) -> anyhow::Result<QueueBytes> {
    let out = Command::new(ensure_built()?)
        .args(["--queue-bytes", &n.to_string()])
        .output()
        .context("running the client-go harness's queue measurement")?;
    if !out.status.success() {
        bail!(
            "the client-go queue measurement failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    #[derive(Deserialize)]
    struct Reply {
        per_queued_key: f64,
        per_key_alone: f64,
    }
    let r: Reply = serde_json::from_slice(&out.stdout).context("its reply")?;
    Ok(QueueBytes {
        per_queued_key: r.per_queued_key,
        per_key_alone: r.per_key_alone,
    })
}
