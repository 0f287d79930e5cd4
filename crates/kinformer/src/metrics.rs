//! Prometheus exposition of a factory's informers, through the official
//! [`prometheus_client`] crate (OpenMetrics text): register the factory's
//! collector once ([`SharedInformerFactory::register_metrics`]), and each
//! scrape reads every informer's counters at that moment (nothing is
//! recorded on the hot path beyond the counters the informers keep anyway).
//!
//! Every series has the label `name`, the informer's name. Where client-go
//! has a metric for the same thing its name is used, so that dashboards
//! built for client-go's reflectors and informers work:
//!
//! | series | type | what |
//! | --- | --- | --- |
//! | `reflector_lists_total` | counter | full lists begun (LIST or WatchList) |
//! | `reflector_watches_total` | counter | WATCH requests sent |
//! | `reflector_short_watches_total` | counter | watches that closed at once without an event |
//! | `reflector_last_resource_version` | gauge | the last resourceVersion seen (when numeric) |
//! | `informer_queued_items` | gauge | keys waiting in the queue |
//! | `kinformer_reflector_lists_completed_total` | counter | full lists completed |
//! | `kinformer_reflector_watch_list_syncs_total` | counter | syncs done through a WatchList stream |
//! | `kinformer_reflector_relists_total` | counter | relists begun, by `reason` (the error kind that led to it) |
//! | `kinformer_reflector_errors_total` | counter | errors, by `kind` |
//! | `kinformer_reflector_events_total` | counter | watch events queued |
//! | `kinformer_reflector_bookmarks_total` | counter | bookmarks received |
//! | `kinformer_reflector_decode_errors_total` | counter | objects skipped as undecodable or unkeyable |
//! | `kinformer_reflector_shard_filtered_total` | counter | objects outside the informer's shard that the server sent anyway, left out |
//! | `kinformer_reflector_phase` | gauge | 1 for the reflector's current `phase`, 0 for the others |
//! | `kinformer_reflector_seconds_since_last_event` | gauge | age of the last watch event or bookmark |
//! | `kinformer_informer_synced` | gauge | 1 once the cache has synced |
//! | `kinformer_informer_stale` | gauge | 1 while the cache is stale (see [`crate::health`]) |
//! | `kinformer_informer_cached_objects` | gauge | objects in the cache |
//! | `kinformer_informer_deltas_total` | counter | deltas accepted by the queue |
//! | `kinformer_informer_merged_deltas_total` | counter | deltas folded into a later one of their key |
//! | `kinformer_informer_deltas_applied_total` | counter | deltas applied to the cache |
//! | `kinformer_handler_backlog` | gauge | a handler's undelivered notifications, by `handler` |
//! | `kinformer_handler_lag_seconds` | gauge | how long its oldest undelivered notification has waited |
//! | `kinformer_handler_delivered_total` | counter | notifications delivered |
//! | `kinformer_handler_merged_total` | counter | notifications folded into a later one while it lagged |
//! | `kinformer_handler_panics_total` | counter | handler calls that panicked |
//! | `kinformer_informer_event_to_cache_seconds` | histogram | from a key's oldest delta queued to the cache holding it |
//! | `kinformer_handler_wait_seconds` | histogram | from the cache's update to a handler taking the notification up (its lag), by `handler` |
//!
//! The two histograms are an event's way from the reflector to a handler,
//! stage by stage. Both are sampled (one key in
//! [`SAMPLE_EVERY`](kinformer_core::latency::SAMPLE_EVERY) entering the
//! queue, one take in as many of a handler's thread), so their `_count` is
//! a number of samples; the event counters above count every event.
//!
//! ```
//! use prometheus_client::registry::Registry;
//! # fn serve(factory: &kinformer::SharedInformerFactory) -> Result<(), std::fmt::Error> {
//! let mut registry = Registry::default();
//! factory.register_metrics(&mut registry);
//! let mut body = String::new();
//! prometheus_client::encoding::text::encode(&mut body, &registry)?;
//! // Answer GET /metrics with `body`, as kinformer::metrics::CONTENT_TYPE.
//! # Ok(()) }
//! ```
//!
//! [`SharedInformerFactory::register_metrics`]: crate::SharedInformerFactory::register_metrics

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, NoLabelSet,
};
use prometheus_client::metrics::MetricType;

use kinformer_reflector::Phase;
/// The crate the collector is written for (its `Registry` is the one to
/// register with).
pub use prometheus_client;

use crate::SharedInformerFactory;
use crate::factory::Observation;

/// The content type of the text [`prometheus_client::encoding::text::encode`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Reads a factory's informers at each scrape (see the module docs).
#[derive(Clone)]
pub struct FactoryCollector {
    factory: SharedInformerFactory,
}

impl std::fmt::Debug for FactoryCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactoryCollector").finish_non_exhaustive()
    }
}

impl FactoryCollector {
    /// A collector of `factory`'s informers (it keeps the factory alive).
    pub fn new(factory: SharedInformerFactory) -> Self {
        Self { factory }
    }
}

/// One series: its labels beyond `name`, and its value.
type Row<V> = (Vec<(&'static str, String)>, V);

/// Writes one metric family.
fn family<V>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    counter: bool,
    rows: Vec<Row<V>>,
) -> Result<(), std::fmt::Error>
where
    V: EncodeCounterValue + EncodeGaugeValue,
{
    let ty = if counter {
        MetricType::Counter
    } else {
        MetricType::Gauge
    };
    let mut metric = encoder.encode_descriptor(name, help, None, ty)?;
    for (labels, value) in rows {
        let mut series = metric.encode_family(&labels)?;
        if counter {
            series.encode_counter::<NoLabelSet, _, u64>(&value, None)?;
        } else {
            series.encode_gauge(&value)?;
        }
    }
    Ok(())
}

/// Writes one histogram family (`rows`' buckets cumulative, as
/// [`kinformer_core::LatencyHistogram`] has them).
fn histograms(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<Row<kinformer_core::LatencyHistogram>>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        // The encoder takes each bucket's own count, and the +Inf bucket.
        let mut below = 0;
        let mut buckets = Vec::with_capacity(h.buckets.len() + 1);
        for (bound, cumulative) in &h.buckets {
            buckets.push((*bound, cumulative - below));
            below = *cumulative;
        }
        buckets.push((f64::INFINITY, h.count.saturating_sub(below)));
        metric
            .encode_family(&labels)?
            .encode_histogram::<NoLabelSet>(h.sum_seconds, h.count, &buckets, None)?;
    }
    Ok(())
}

/// One row per informer.
fn per_informer<V>(obs: &[Observation], value: impl Fn(&Observation) -> V) -> Vec<Row<V>> {
    obs.iter()
        .map(|o| (vec![("name", o.health.name.clone())], value(o)))
        .collect()
}

/// One row per informer and label of a tally.
fn per_label(
    obs: &[Observation],
    label: &'static str,
    tally: impl Fn(&Observation) -> &[(&'static str, u64)],
) -> Vec<Row<u64>> {
    obs.iter()
        .flat_map(|o| {
            tally(o).iter().map(|(l, n)| {
                (
                    vec![("name", o.health.name.clone()), (label, l.to_string())],
                    *n,
                )
            })
        })
        .collect()
}

/// One row per handler.
fn per_handler<V>(
    obs: &[Observation],
    value: impl Fn(&kinformer_core::HandlerStats) -> V,
) -> Vec<Row<V>> {
    obs.iter()
        .flat_map(|o| {
            o.informer.handlers.iter().map(|h| {
                let labels = vec![
                    ("name", o.health.name.clone()),
                    ("handler", h.id.to_string()),
                ];
                (labels, value(h))
            })
        })
        .collect()
}

impl Collector for FactoryCollector {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let obs = self.factory.observe();
        let o = obs.as_slice();
        let e = &mut e;
        family(
            e,
            "reflector_lists",
            "Full lists begun (LIST or WatchList).",
            true,
            per_informer(o, |o| o.reflector.lists_started),
        )?;
        family(
            e,
            "kinformer_reflector_watch_list_syncs",
            "Syncs done through a WatchList stream.",
            true,
            per_informer(o, |o| o.reflector.watch_list_syncs),
        )?;
        family(
            e,
            "reflector_watches",
            "WATCH requests sent.",
            true,
            per_informer(o, |o| o.reflector.watches),
        )?;
        family(
            e,
            "reflector_short_watches",
            "Watches that closed at once without an event.",
            true,
            per_informer(o, |o| {
                o.health
                    .reflector
                    .errors_by_kind
                    .iter()
                    .find(|(k, _)| *k == "very_short_watch")
                    .map_or(0, |(_, n)| *n)
            }),
        )?;
        family(
            e,
            "reflector_last_resource_version",
            "The last resourceVersion seen, when numeric.",
            false,
            per_informer(o, |o| {
                o.reflector
                    .last_resource_version
                    .parse::<f64>()
                    .unwrap_or(0.0)
            }),
        )?;
        family(
            e,
            "informer_queued_items",
            "Keys waiting in the queue.",
            false,
            per_informer(o, |o| o.informer.queue_depth as u64),
        )?;
        family(
            e,
            "kinformer_reflector_lists_completed",
            "Full lists completed (LIST or WatchList).",
            true,
            per_informer(o, |o| o.reflector.lists),
        )?;
        family(
            e,
            "kinformer_reflector_relists",
            "Relists begun, by the kind of the error that led to each.",
            true,
            per_label(o, "reason", |o| &o.health.reflector.relists_by_reason),
        )?;
        family(
            e,
            "kinformer_reflector_errors",
            "Errors reported, by kind.",
            true,
            per_label(o, "kind", |o| &o.health.reflector.errors_by_kind),
        )?;
        family(
            e,
            "kinformer_reflector_events",
            "Watch events queued (ADDED, MODIFIED, DELETED).",
            true,
            per_informer(o, |o| o.reflector.events),
        )?;
        family(
            e,
            "kinformer_reflector_bookmarks",
            "Bookmarks received.",
            true,
            per_informer(o, |o| o.reflector.bookmarks),
        )?;
        family(
            e,
            "kinformer_reflector_decode_errors",
            "Objects skipped as undecodable or unkeyable.",
            true,
            per_informer(o, |o| o.reflector.decode_errors),
        )?;
        family(
            e,
            "kinformer_reflector_shard_filtered",
            "Objects outside the informer's shard that the server sent anyway (it did not apply the shardSelector), left out of the cache.",
            true,
            per_informer(o, |o| o.reflector.shard_filtered),
        )?;
        let phases = o
            .iter()
            .flat_map(|o| {
                Phase::ALL.iter().map(|p| {
                    let labels = vec![
                        ("name", o.health.name.clone()),
                        ("phase", p.as_str().to_string()),
                    ];
                    (labels, u64::from(o.health.reflector.phase == *p))
                })
            })
            .collect();
        family(
            e,
            "kinformer_reflector_phase",
            "1 for the reflector's current phase.",
            false,
            phases,
        )?;
        family(
            e,
            "kinformer_reflector_seconds_since_last_event",
            "Seconds since the last watch event or bookmark (-1: none yet).",
            false,
            per_informer(o, |o| {
                let s = &o.health.reflector;
                [s.last_event_age, s.last_bookmark_age]
                    .into_iter()
                    .flatten()
                    .min()
                    .map_or(-1.0, |d| d.as_secs_f64())
            }),
        )?;
        family(
            e,
            "kinformer_informer_synced",
            "1 once the cache has synced.",
            false,
            per_informer(o, |o| u64::from(o.health.synced)),
        )?;
        family(
            e,
            "kinformer_informer_stale",
            "1 while the cache is stale.",
            false,
            per_informer(o, |o| u64::from(o.health.stale)),
        )?;
        family(
            e,
            "kinformer_informer_cached_objects",
            "Objects in the cache.",
            false,
            per_informer(o, |o| o.cached as u64),
        )?;
        family(
            e,
            "kinformer_informer_deltas",
            "Deltas accepted by the queue.",
            true,
            per_informer(o, |o| o.informer.fifo.enqueued),
        )?;
        family(
            e,
            "kinformer_informer_merged_deltas",
            "Deltas folded into a later delta of their key.",
            true,
            per_informer(o, |o| o.informer.fifo.merged),
        )?;
        family(
            e,
            "kinformer_informer_deltas_applied",
            "Deltas applied to the cache.",
            true,
            per_informer(o, |o| o.informer.deltas_processed),
        )?;
        family(
            e,
            "kinformer_handler_backlog",
            "Undelivered notifications of a handler.",
            false,
            per_handler(o, |h| h.backlog as u64),
        )?;
        family(
            e,
            "kinformer_handler_lag_seconds",
            "How long a handler's oldest undelivered notification has waited.",
            false,
            per_handler(o, |h| h.oldest_pending_age.map_or(0.0, |d| d.as_secs_f64())),
        )?;
        family(
            e,
            "kinformer_handler_delivered",
            "Notifications delivered to a handler.",
            true,
            per_handler(o, |h| h.delivered),
        )?;
        family(
            e,
            "kinformer_handler_merged",
            "Notifications folded into a later one while the handler lagged.",
            true,
            per_handler(o, |h| h.merged),
        )?;
        family(
            e,
            "kinformer_handler_panics",
            "Handler calls that panicked.",
            true,
            per_handler(o, |h| h.panics),
        )?;
        histograms(
            e,
            "kinformer_informer_event_to_cache_seconds",
            "From a key's oldest delta queued to the cache holding it (sampled).",
            per_informer(o, |o| o.informer.event_to_cache.clone()),
        )?;
        histograms(
            e,
            "kinformer_handler_wait_seconds",
            "From the cache's update to a handler taking the notification up (sampled).",
            per_handler(o, |h| h.wait.clone()),
        )?;
        Ok(())
    }
}
