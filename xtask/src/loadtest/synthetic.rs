//! The synthetic source: an in-process generator feeding the core's
//! DeltaFIFO directly (no HTTP, no decoding), so the figures are those of
//! the queue, the pool, the cache and the handlers alone.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::bail;
use indicatif::ProgressBar;
use k8s_openapi::api::core::v1::Pod;
use kinformer_core::{HandlerRegistration, SharedIndexInformer, builtin_indexers};
use rand::Rng;

use super::host;
use super::measure::{LagHandler, LagStats, Readers, compare, now_unix_nanos, wait_for};
use super::pods::{self, key, stamp};
use super::process::{cpu_seconds, peak_rss_bytes, rss_bytes};
use super::{LoadtestArgs, Report, TransformArg};

struct Under {
    informer: SharedIndexInformer<Pod>,
    handlers: Vec<(Arc<LagStats>, HandlerRegistration<Pod>)>,
}

fn bar(args: &LoadtestArgs, len: u64, msg: &'static str) -> ProgressBar {
    super::progress::bar(args.quiet, len, msg)
}

#[derive(Clone, Copy)]
enum Op {
    Create,
    Update,
    Delete,
}

/// The live objects of the generator, with O(1) random pick and removal.
struct Live {
    ids: Vec<usize>,
    pos: HashMap<usize, usize>,
}

impl Live {
    fn insert(&mut self, id: usize) {
        self.pos.insert(id, self.ids.len());
        self.ids.push(id);
    }
    fn remove_at(&mut self, i: usize) -> usize {
        let id = self.ids.swap_remove(i);
        self.pos.remove(&id);
        if let Some(moved) = self.ids.get(i) {
            self.pos.insert(*moved, i);
        }
        id
    }
}

/// Runs the synthetic load test.
pub fn run(args: &LoadtestArgs) -> anyhow::Result<Report> {
    if args.compact {
        anyhow::bail!("--compact needs a factory: use the simulator or a kubeconfig source");
    }
    let template = pods::template()?;
    let rss_before = rss_bytes();
    let cpu_before = cpu_seconds();
    let under: Vec<Under> = (0..args.informers.max(1))
        .map(|i| build(args, i))
        .collect::<anyhow::Result<_>>()?;

    // Fill: generate the objects (not timed as sync).
    let n = args.objects;
    let fill = bar(args, n as u64, "fill");
    let mut truth: HashMap<String, String> = HashMap::with_capacity(n);
    let mut objects = Vec::with_capacity(n);
    let mut rv: u64 = 1;
    for i in 0..n {
        rv += 1;
        objects.push(stamp(&template, i, rv, now_unix_nanos()));
        truth.insert(key(i), rv.to_string());
        if i.is_multiple_of(4096) {
            fill.set_position(i as u64);
        }
    }
    fill.finish();

    // Initial sync: one replace per informer, until every handler synced.
    let settled = host::settle(args.settle_max());
    let sync = bar(args, n as u64, "sync");
    let t0 = Instant::now();
    let sync_steal = host::StealMeter::start();
    for (i, u) in under.iter().enumerate() {
        let list = if i + 1 == under.len() {
            std::mem::take(&mut objects)
        } else {
            objects.clone()
        };
        u.informer.queue().replace(list, &rv.to_string())?;
    }
    let synced = wait_for(Duration::from_secs(600), || {
        sync.set_position(
            under[0]
                .handlers
                .first()
                .map_or(0, |h| h.0.events.load(Ordering::Relaxed)),
        );
        under
            .iter()
            .all(|u| u.informer.has_synced() && u.handlers.iter().all(|(_, r)| r.has_synced()))
    });
    let initial_sync_seconds = t0.elapsed().as_secs_f64();
    let stolen_sync_seconds = sync_steal.seconds();
    sync.finish();
    if !synced {
        bail!("initial sync did not finish within 600 s");
    }
    let steady_rss = rss_bytes();

    // Churn while readers query the cache.
    for u in &under {
        for (s, _) in &u.handlers {
            s.start_recording(args.lag_warmup());
        }
    }
    let indexer = under[0].informer.indexer();
    let keys = indexer
        .list_keys()
        .into_iter()
        .take(100_000)
        .map(|k| k.to_string())
        .collect();
    let readers = Readers::start(args.readers, keys, move |k| indexer.get(k).is_some());
    let duration = args.churn_duration();
    let churn = bar(args, duration.as_millis() as u64, "churn ms");
    let mut live = Live {
        ids: (0..n).collect(),
        pos: (0..n).map(|i| (i, i)).collect(),
    };
    let mut next_id = n;
    let mut rng = rand::rng();
    let mut changes: u64 = 0;
    let start = Instant::now();
    let churn_steal = host::StealMeter::start();
    while start.elapsed() < duration {
        for _ in 0..256 {
            rv += 1;
            let roll: u32 = rng.random_range(0..100);
            let (id, op) = if roll < 10 || live.ids.is_empty() {
                let id = next_id;
                next_id += 1;
                live.insert(id);
                (id, Op::Create)
            } else if roll < 20 {
                let at = rng.random_range(0..live.ids.len());
                (live.remove_at(at), Op::Delete)
            } else {
                (live.ids[rng.random_range(0..live.ids.len())], Op::Update)
            };
            let mut obj = Some(stamp(&template, id, rv, now_unix_nanos()));
            match op {
                Op::Delete => truth.remove(&key(id)),
                Op::Create | Op::Update => truth.insert(key(id), rv.to_string()),
            };
            for (i, u) in under.iter().enumerate() {
                let Some(o) = (if i + 1 == under.len() {
                    obj.take()
                } else {
                    obj.clone()
                }) else {
                    break;
                };
                let q = u.informer.queue();
                match op {
                    Op::Create => q.add(o)?,
                    Op::Update => q.update(o)?,
                    Op::Delete => q.delete(o)?,
                }
            }
            changes += 1;
        }
        if args.churn > 0 {
            let due = Duration::from_secs_f64(changes as f64 / args.churn as f64);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        churn.set_position(start.elapsed().as_millis() as u64);
    }
    churn.finish();
    let drained = wait_for(Duration::from_secs(300), || {
        under.iter().all(|u| {
            let m = u.informer.metrics();
            m.queue_depth == 0
                && u.informer.queue().tracked_keys() == 0
                && m.handlers.iter().all(|h| h.backlog == 0)
        })
    });
    let churn_seconds = start.elapsed().as_secs_f64();
    let stolen_churn_seconds = churn_steal.seconds();
    let reads = readers.stop();
    if !drained {
        bail!("the pipeline did not drain within 300 s after churn");
    }

    let first = &under[0].handlers[0].0;
    let recorded = first.recorded.load(Ordering::Relaxed);
    let lag = first.lag.lock().figures();
    let peak_rss = peak_rss_bytes();
    let mismatches: usize = under
        .iter()
        .map(|u| {
            let snapshot = u.informer.indexer().snapshot();
            let pairs = snapshot
                .iter()
                .map(|(k, o)| (k.as_str(), o.metadata.resource_version.as_deref()));
            compare(pairs, &truth)
        })
        .sum();
    let handler_panics = under
        .iter()
        .map(|u| u.informer.metrics().handler_panics)
        .sum();
    for u in &under {
        u.informer.shutdown();
    }
    Ok(Report {
        source: "synthetic".into(),
        implementation: "kinformer".into(),
        object_arenas: args.object_arenas,
        kind: args.kind.clone(),
        objects: n,
        sim_history: None,
        sim_watch_chunks: None,
        encoding: None,
        watch_transport: None,
        informers: under.len(),
        handlers: args.handlers,
        settle_seconds: settled.waited.as_secs_f64(),
        settled: settled.quiet,
        stolen_sync_seconds,
        stolen_churn_seconds,
        initial_sync_seconds,
        changes_made: changes,
        burst: false,
        updates_per_second: recorded as f64 / churn_seconds,
        lag_p50_us: lag.p50_us,
        lag_p99_us: lag.p99_us,
        lag_warmup_seconds: args.lag_warmup().as_secs_f64(),
        lag_worst_per_tick_us: lag.worst_per_tick_us,
        reads_per_second: reads as f64 / churn_seconds,
        peak_rss_bytes: peak_rss,
        peak_rss_with_check_bytes: peak_rss_bytes(),
        rss_before_bytes: rss_before,
        steady_rss_bytes: steady_rss,
        relist_rss_before_bytes: None,
        relist_peak_rss_bytes: None,
        relist_peak_ratio: None,
        bytes_per_object: steady_rss.saturating_sub(rss_before) / n.max(1) as u64,
        cpu_seconds: cpu_seconds() - cpu_before,
        relists: 0,
        watch_restarts: 0,
        faults_injected: 0,
        handler_panics,
        deltas_per_batch: None,
        cache_matches_source: mismatches == 0,
        compact: false,
        get_cold_p50_ns: None,
        get_cold_p99_ns: None,
        get_hot_p50_ns: None,
    })
}

fn build(args: &LoadtestArgs, index: usize) -> anyhow::Result<Under> {
    let mut b = SharedIndexInformer::<Pod>::builder()
        .name(format!("loadtest-{index}"))
        .indexers(builtin_indexers());
    if let Some(t) = args.threads {
        b = b.threads(t);
    }
    if args.transform != TransformArg::None {
        b = b.transform(|mut p: Pod| {
            p.metadata.managed_fields = None;
            p
        });
    }
    let informer = b.build();
    let handlers = (0..args.handlers.max(1))
        .map(|_| {
            let stats = LagStats::new()?;
            let reg = informer.add_event_handler(LagHandler(Arc::clone(&stats)))?;
            Ok((stats, reg))
        })
        .collect::<anyhow::Result<_>>()?;
    informer.start()?;
    Ok(Under { informer, handlers })
}
