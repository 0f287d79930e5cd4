//! In-process write load: fill a resource with template objects, and churn it (updates, creates,
//! deletes at a set rate or flat out) on a thread of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::EventType;
use crate::object::set_annotation;
use crate::resource::{ResourceDef, ResourceId};
use crate::state::SharedRef;
use crate::status::ApiError;
use crate::template;

/// What to churn and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChurnConfig {
    /// Resource (plural or kind), e.g. `pods`.
    pub kind: String,
    /// Writes per second; `None` is flat out.
    pub rate_per_sec: Option<u64>,
    /// How long to churn.
    #[serde(with = "millis", rename = "duration_ms")]
    pub duration: Duration,
    /// Relative weight of updates.
    pub updates: u32,
    /// Relative weight of creates.
    pub creates: u32,
    /// Relative weight of deletes.
    pub deletes: u32,
    /// Namespaces new objects are spread over.
    pub namespaces: usize,
    /// Stop after this many committed writes (or at `duration`, whichever comes first).
    pub max_writes: Option<u64>,
    /// Updates visit the objects in turn, in a shuffled order, instead of drawing one at random:
    /// up to one update per object touches distinct objects only.
    pub round_robin: bool,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        Self {
            kind: "pods".into(),
            rate_per_sec: Some(1000),
            duration: Duration::from_secs(10),
            updates: 8,
            creates: 1,
            deletes: 1,
            namespaces: 10,
            max_writes: None,
            round_robin: false,
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// What a churn run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChurnReport {
    /// Updates committed.
    pub updates: u64,
    /// Creates committed.
    pub creates: u64,
    /// Deletes committed.
    pub deletes: u64,
    /// Writes that failed (e.g. lost a race).
    pub errors: u64,
    /// Wall-clock seconds.
    pub elapsed_seconds: f64,
}

impl ChurnReport {
    /// Committed writes.
    pub fn total(&self) -> u64 {
        self.updates + self.creates + self.deletes
    }
}

/// A running churn; `join` waits for its report, `stop` ends it early.
#[derive(Debug)]
pub struct ChurnTask {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<ChurnReport>>,
}

impl ChurnTask {
    /// Ask the churn to stop early.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether it has finished.
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Wait for the report (blocking).
    pub fn join(mut self) -> ChurnReport {
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

/// Start churning on a new thread.
pub fn start(shared: SharedRef, res: ResourceId, cfg: ChurnConfig) -> std::io::Result<ChurnTask> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("sim-churn".into())
        .spawn(move || run(&shared, res, &cfg, &flag))?;
    Ok(ChurnTask {
        stop,
        thread: Some(thread),
    })
}

fn run(shared: &SharedRef, res: ResourceId, cfg: &ChurnConfig, stop: &AtomicBool) -> ChurnReport {
    let Some(def) = shared.store.registry().get(res).cloned() else {
        return ChurnReport::default();
    };
    let snap = shared.store.snapshot(res);
    let mut keys: Vec<(String, String)> = snap
        .objects
        .values()
        .map(|o| (o.meta.namespace.clone(), o.meta.name.clone()))
        .collect();
    drop(snap);
    let mut rng = rand::rng();
    let mut report = ChurnReport::default();
    let weights = [cfg.updates, cfg.creates, cfg.deletes];
    let total_weight: u32 = weights.iter().sum::<u32>().max(1);
    let start = Instant::now();
    let run_id = rng.random::<u32>();
    let mut seq: u64 = 0;
    let namespaces = cfg.namespaces.max(1);
    let pods =
        is_core_pods(&def).then(|| template::PodTemplate::new(shared.store.stamps_commit_time()));
    if cfg.round_robin {
        keys.shuffle(&mut rng);
    }
    let mut turn = 0usize;
    let max_writes = cfg.max_writes.unwrap_or(u64::MAX);
    while start.elapsed() < cfg.duration
        && !stop.load(Ordering::Relaxed)
        && report.total() < max_writes
    {
        if let Some(rate) = cfg.rate_per_sec.filter(|r| *r > 0) {
            let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
            if seq >= due {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
        }
        seq += 1;
        let draw = rng.random_range(0..total_weight);
        let op = if draw < weights[0] {
            0
        } else if draw < weights[0] + weights[1] {
            1
        } else {
            2
        };
        let result: Result<(), ApiError> = match op {
            0 if !keys.is_empty() => {
                let at = if cfg.round_robin {
                    turn += 1;
                    (turn - 1) % keys.len()
                } else {
                    rng.random_range(0..keys.len())
                };
                let (ns, name) = &keys[at];
                update_one(shared, res, ns, name, seq).map(|()| report.updates += 1)
            }
            2 if !keys.is_empty() => {
                let (ns, name) = keys.swap_remove(rng.random_range(0..keys.len()));
                delete_one(shared, res, &ns, &name).map(|()| report.deletes += 1)
            }
            _ => {
                let ns = if def.namespaced {
                    template::namespace_name(seq as usize % namespaces)
                } else {
                    String::new()
                };
                let name = format!("churn-{run_id:08x}-{seq}");
                create_one(shared, res, &def, pods.as_ref(), &ns, &name, seq).map(|()| {
                    keys.push((ns, name));
                    report.creates += 1;
                })
            }
        };
        match result {
            Ok(()) => shared.count_write(),
            Err(_) => report.errors += 1,
        }
    }
    report.elapsed_seconds = start.elapsed().as_secs_f64();
    tracing::info!(?report, "churn finished");
    report
}

fn update_one(
    shared: &SharedRef,
    res: ResourceId,
    ns: &str,
    name: &str,
    seq: u64,
) -> Result<(), ApiError> {
    if restamped(shared, res, ns, name, EventType::Modified) {
        return Ok(());
    }
    let Some(cur) = shared.store.get(res, ns, name) else {
        return Err(ApiError::not_found("", "", name));
    };
    let Ok(Value::Object(mut obj)) = cur.to_value() else {
        return Err(ApiError::internal("stored object is not a JSON object"));
    };
    set_annotation(&mut obj, "kinformer.dev/churn-seq", seq.to_string());
    if let Some(Value::Object(status)) = obj.get_mut("status") {
        status.insert("observedSeq".into(), Value::from(seq));
    }
    shared
        .store
        .update(res, None, None, Value::Object(obj))
        .map(|_| ())
}

/// Whether `def` is the core Pod resource, which has a pre-encoded template.
fn is_core_pods(def: &ResourceDef) -> bool {
    def.group.is_empty() && def.plural == "pods"
}

/// Create one template object: Pods stamped into the pre-encoded template, others built and
/// encoded.
fn create_one(
    shared: &SharedRef,
    res: ResourceId,
    def: &ResourceDef,
    pods: Option<&template::PodTemplate>,
    ns: &str,
    name: &str,
    seq: u64,
) -> Result<(), ApiError> {
    let Some(pods) = pods else {
        let v = template::object(&def.plural, ns, name, seq);
        return shared.store.create(res, None, v).map(|_| ());
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let pre = pods.stamp(ns, name, seq, &uid, &crate::object::now_rfc3339());
    let (_, mut errors) = shared.store.create_encoded_many(res, vec![pre]);
    errors.pop().map_or(Ok(()), Err)
}

/// Delete one object; a stamped object's DELETED line is spliced from its stored bytes.
fn delete_one(shared: &SharedRef, res: ResourceId, ns: &str, name: &str) -> Result<(), ApiError> {
    if restamped(shared, res, ns, name, EventType::Deleted) {
        return Ok(());
    }
    shared.store.delete(res, ns, name, None).map(|_| ())
}

/// The fast path of an update or delete: a template object carries its stamps, so the new
/// version is the stored bytes with new stamps spliced in (no decoding, editing and re-encoding).
/// False when the store does not stamp or the object does not carry them.
fn restamped(shared: &SharedRef, res: ResourceId, ns: &str, name: &str, ty: EventType) -> bool {
    shared.store.stamps_commit_time() && shared.store.restamp(res, ns, name, ty).is_some()
}

/// Fill a resource with `objects` template objects spread over `namespaces` namespaces (creating the
/// Namespace objects too), using up to `threads` threads. Returns how many were created.
pub fn fill(
    shared: &SharedRef,
    res: ResourceId,
    objects: usize,
    namespaces: usize,
    threads: usize,
) -> usize {
    let Some(def) = shared.store.registry().get(res).cloned() else {
        return 0;
    };
    let namespaces = namespaces.max(1);
    if def.namespaced
        && let Some(ns_res) = shared.store.registry().find("", "v1", "namespaces")
    {
        let nss: Vec<Value> = (0..namespaces)
            .map(|i| serde_json::json!({"metadata": {"name": template::namespace_name(i)}}))
            .filter(|v| {
                let name = v["metadata"]["name"].as_str().unwrap_or_default();
                shared.store.get(ns_res, "", name).is_none()
            })
            .collect();
        shared.store.create_many(ns_res, nss);
    }
    let base = shared.store.len(res);
    let threads = threads.clamp(1, 16);
    // Pods: stamp the per-object fields into the pre-encoded template (no JSON value per object).
    let template =
        is_core_pods(&def).then(|| template::PodTemplate::new(shared.store.stamps_commit_time()));
    let per = objects.div_ceil(threads);
    let created = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (def, created, template) = (&def, &created, &template);
            s.spawn(move || {
                let lo = t * per;
                let hi = ((t + 1) * per).min(objects);
                let mut i = lo;
                let mut rng = rand::rng();
                while i < hi {
                    let end = (i + 1024).min(hi);
                    if let Some(template) = template {
                        let created_at = crate::object::now_rfc3339();
                        let batch: Vec<_> = (i..end)
                            .map(|j| {
                                let n = (base + j) as u64;
                                let ns = template::namespace_name(j % namespaces);
                                let uid = uuid::Builder::from_random_bytes(rng.random())
                                    .into_uuid()
                                    .to_string();
                                let name = format!("{}-{n}", def.singular);
                                template.stamp(&ns, &name, n, &uid, &created_at)
                            })
                            .collect();
                        let (c, _) = shared.store.create_encoded_many(res, batch);
                        created.fetch_add(c, Ordering::Relaxed);
                        i = end;
                        continue;
                    }
                    let batch: Vec<Value> = (i..end)
                        .map(|j| {
                            let n = (base + j) as u64;
                            let ns = if def.namespaced {
                                template::namespace_name(j % namespaces)
                            } else {
                                String::new()
                            };
                            template::object(&def.plural, &ns, &format!("{}-{n}", def.singular), n)
                        })
                        .collect();
                    let (c, _) = shared.store.create_many(res, batch);
                    created.fetch_add(c, Ordering::Relaxed);
                    i = end;
                }
            });
        }
    });
    let n = created.into_inner();
    shared
        .counters
        .writes
        .fetch_add(n as u64, Ordering::Relaxed);
    n
}
