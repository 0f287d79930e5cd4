//! Exhaustive interleavings of the concurrency claims of the DeltaFIFO and of
//! the Indexer's publish path, plus a short real-thread stress test.
//!
//! loom cannot model crossbeam-channel or arc-swap, so the interleavings are
//! enumerated at the granularity of the public operations (each of which is
//! atomic under the FIFO's mutex, or under the Indexer's writer lock for a
//! published batch). For the Indexer, the writer is additionally paused
//! *inside* its write batch, between single upserts, so readers run while a
//! half-applied batch is held by the writer.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kinformer_core::{
    DeletedObject, Delta, DeltaFifo, IndexFn, Indexer, LABEL_INDEX, NAMESPACE_INDEX, ObjectKey,
    Popped, ReplaceSession, ResourceEventHandler, SharedIndexInformer, Snapshot, builtin_indexers,
    label_value,
};

// ---------------------------------------------------------------------------
// The enumerator
// ---------------------------------------------------------------------------

/// A closed system of actors, each advancing one atomic step at a time.
trait System {
    /// Number of actors.
    fn actors(&self) -> usize;
    /// Whether `actor` has a step left.
    fn runnable(&self, actor: usize) -> bool;
    /// Runs one step of `actor` and checks the invariants.
    fn step(&mut self, actor: usize);
    /// Called once no actor can run: final checks.
    fn finish(self);
}

/// Runs every interleaving of the actors of the systems `fresh` builds:
/// a depth-first search over which actor advances next. The systems hold
/// real, non-cloneable objects, so each schedule is replayed from a fresh
/// system (stateless search). Returns how many complete schedules ran.
fn explore<S: System>(mut fresh: impl FnMut() -> S) -> usize {
    explore_runs(|prefix| replay(fresh(), prefix))
}

/// One complete schedule: the actor run at each step, and the actors that
/// could run there.
struct Run {
    schedule: Vec<usize>,
    choices: Vec<Vec<usize>>,
}

/// Replays `prefix` on `sys`, then runs the lowest runnable actor until none
/// is left, and finishes the system.
fn replay<S: System>(mut sys: S, prefix: &[usize]) -> Run {
    let n = sys.actors();
    let enabled = |sys: &S| (0..n).filter(|&a| sys.runnable(a)).collect::<Vec<_>>();
    let mut schedule = Vec::new();
    let mut choices: Vec<Vec<usize>> = Vec::new();
    for &a in prefix {
        let en = enabled(&sys);
        assert!(
            en.contains(&a),
            "schedule {prefix:?} not replayable: actor {a} cannot run at step {}",
            schedule.len()
        );
        choices.push(en);
        sys.step(a);
        schedule.push(a);
    }
    loop {
        let en = enabled(&sys);
        let Some(&a) = en.first() else { break };
        choices.push(en);
        sys.step(a);
        schedule.push(a);
    }
    sys.finish();
    Run { schedule, choices }
}

/// The search of [`explore`], over any way of replaying a prefix: `run`
/// builds a fresh system (and whatever it borrows), replays the prefix on it
/// with [`replay`] and drops it all again.
fn explore_runs(mut run: impl FnMut(&[usize]) -> Run) -> usize {
    let mut prefix: Vec<usize> = Vec::new();
    let mut count = 0;
    loop {
        let Run { schedule, choices } = run(&prefix);
        count += 1;
        // Backtrack to the deepest step with an untried alternative.
        let next = (0..schedule.len()).rev().find_map(|d| {
            choices[d]
                .iter()
                .find(|&&a| a > schedule[d])
                .map(|&a| (d, a))
        });
        match next {
            Some((d, a)) => {
                prefix = schedule[..d].to_vec();
                prefix.push(a);
            }
            None => return count,
        }
    }
}

#[test]
fn enumerator_visits_every_interleaving_once() {
    // Two actors with 2 and 3 steps: C(5, 2) = 10 interleavings.
    struct Two {
        left: [usize; 2],
        trace: Vec<usize>,
        seen: Arc<parking_lot::Mutex<BTreeSet<Vec<usize>>>>,
    }
    impl System for Two {
        fn actors(&self) -> usize {
            2
        }
        fn runnable(&self, a: usize) -> bool {
            self.left[a] > 0
        }
        fn step(&mut self, a: usize) {
            self.left[a] -= 1;
            self.trace.push(a);
        }
        fn finish(self) {
            assert!(self.seen.lock().insert(self.trace), "schedule run twice");
        }
    }
    let seen = Arc::new(parking_lot::Mutex::new(BTreeSet::new()));
    let n = explore(|| Two {
        left: [2, 3],
        trace: Vec::new(),
        seen: Arc::clone(&seen),
    });
    assert_eq!(n, 10);
    assert_eq!(seen.lock().len(), 10);
}

// ---------------------------------------------------------------------------
// DeltaFIFO: one producer, two consumers
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Produce {
    Add(&'static str, u64),
    Update(&'static str, u64),
    Delete(&'static str, u64),
    /// A whole list in one step (`DeltaFifo::replace`).
    Replace(Vec<(&'static str, u64)>),
    Resync,
    /// `begin_replace`: a streaming list opens (the queue's first list if
    /// nothing populated it yet, else a relist; both queued as they arrive).
    BeginRelist,
    /// The open list delivers one object (`ReplaceSession::push`).
    RelistPush(&'static str, u64),
    /// The open list reports a deletion (`ReplaceSession::delete`).
    RelistDelete(&'static str, u64),
    /// The open list ends (`ReplaceSession::finish`): tombstones.
    RelistFinish,
    /// The open list breaks off (the session is dropped): no tombstones.
    RelistAbandon,
}

#[derive(Clone, Copy)]
enum Stage {
    Popped,
    Applied,
}

struct Consumer {
    batch: usize,
    pops_left: usize,
    held: Option<(Vec<Popped<ConfigMap>>, Stage)>,
}

/// What a consumer applied last to a key.
#[derive(Clone, Copy, Debug)]
struct LastApplied {
    rv: u64,
    deleted: bool,
}

/// How a world's queue starts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    /// The seed is in the cache only; the queue was never populated, so the
    /// script's first list is the first list.
    Cached,
    /// The seed was listed by a first `replace` and fully processed: the
    /// queue is synced and empty, and every list of the script is a relist.
    Synced,
}

/// The model of a streaming list in progress.
#[derive(Debug)]
struct OpenList {
    /// The queue's first list (its items count towards `has_synced`).
    first: bool,
    /// key → resource version of what the list delivered so far (a key the
    /// list then reported deleted is no longer listed).
    listed: BTreeMap<String, u64>,
}

/// One producer and its consumers around a FIFO the world borrows (a
/// streaming list's [`ReplaceSession`] borrows the FIFO too, so the FIFO
/// lives outside the world: see [`explore_fifo_from`]).
struct FifoWorld<'f> {
    fifo: &'f DeltaFifo<ConfigMap>,
    cache: Indexer<ConfigMap>,
    script: Vec<Produce>,
    pc: usize,
    /// The streaming list in progress, and its model.
    session: Option<(ReplaceSession<'f, ConfigMap>, OpenList)>,
    /// The producer's truth: key → resource version.
    truth: BTreeMap<String, u64>,
    consumers: Vec<Consumer>,
    /// key → consumer holding it.
    holders: HashMap<String, usize>,
    applied: HashMap<String, LastApplied>,
    /// Whether the producer populated the queue (has_synced's precondition).
    populated: bool,
    /// Keys with a first-list delta queued and not yet popped (the FIFO's
    /// per-key `is_in_initial_list` flag).
    initial_pending: BTreeSet<String>,
    /// Keys popped with that flag and not yet done.
    initial_held: BTreeSet<String>,
    /// key → tombstones finished lists owe it that no consumer applied yet.
    tombstones_due: BTreeMap<String, usize>,
    trace: Vec<String>,
}

impl<'f> FifoWorld<'f> {
    fn new(
        fifo: &'f DeltaFifo<ConfigMap>,
        cache: Indexer<ConfigMap>,
        start: Start,
        seed: &[(&str, u64)],
        script: &[Produce],
        batches: &[(usize, usize)],
    ) -> Self {
        let seeded: Vec<ConfigMap> = seed.iter().map(|&(n, rv)| cm(n, rv)).collect();
        if !seeded.is_empty() {
            seed_cache(&cache, &seeded);
        }
        if start == Start::Synced {
            // The first list delivers exactly what is cached: popping its
            // deltas without applying them is applying them.
            fifo.replace(seeded, "1").unwrap();
            while pop_now(fifo).is_some() {}
            assert!(fifo.has_synced() && fifo.tracked_keys() == 0);
            assert_eq!(fifo.stats().tombstones, 0);
        }
        Self {
            fifo,
            cache,
            script: script.to_vec(),
            pc: 0,
            session: None,
            truth: seed
                .iter()
                .map(|&(n, rv)| (key(n).to_string(), rv))
                .collect(),
            consumers: batches
                .iter()
                .map(|&(batch, pops)| Consumer {
                    batch,
                    pops_left: pops,
                    held: None,
                })
                .collect(),
            holders: HashMap::new(),
            applied: seed
                .iter()
                .map(|&(n, rv)| {
                    let last = LastApplied { rv, deleted: false };
                    (key(n).to_string(), last)
                })
                .collect(),
            populated: start == Start::Synced,
            initial_pending: BTreeSet::new(),
            initial_held: BTreeSet::new(),
            tombstones_due: BTreeMap::new(),
            trace: Vec::new(),
        }
    }

    fn ctx(&self) -> String {
        format!("trace: {:#?}", self.trace)
    }

    fn open_list(&mut self) -> (&mut ReplaceSession<'f, ConfigMap>, &mut OpenList) {
        let (session, open) = self.session.as_mut().expect("no list is open");
        (session, open)
    }

    fn produce(&mut self) {
        let op = self.script[self.pc].clone();
        self.pc += 1;
        self.trace.push(format!("producer {op:?}"));
        match op {
            Produce::Add(n, rv) => {
                self.fifo.add(cm(n, rv)).unwrap();
                self.truth.insert(key(n).to_string(), rv);
            }
            Produce::Update(n, rv) => {
                self.fifo.update(cm(n, rv)).unwrap();
                self.truth.insert(key(n).to_string(), rv);
            }
            Produce::Delete(n, rv) => {
                self.fifo.delete(cm(n, rv)).unwrap();
                self.truth.remove(key(n).as_str());
            }
            Produce::Replace(list) => {
                let listed: BTreeMap<String, u64> = list
                    .iter()
                    .map(|&(n, rv)| (key(n).to_string(), rv))
                    .collect();
                let tombstones_before = self.fifo.stats().tombstones;
                self.fifo
                    .replace(list.iter().map(|&(n, rv)| cm(n, rv)), "100")
                    .unwrap();
                let first = !self.populated;
                if first {
                    self.initial_pending.extend(listed.keys().cloned());
                }
                self.list_finished(first, false, listed, tombstones_before);
            }
            Produce::Resync => {
                self.fifo.resync();
                return;
            }
            Produce::BeginRelist => {
                assert!(self.session.is_none(), "a list is already open");
                let session = self.fifo.begin_replace().unwrap();
                let open = OpenList {
                    first: !self.populated,
                    listed: BTreeMap::new(),
                };
                self.session = Some((session, open));
                return;
            }
            Produce::RelistPush(n, rv) => {
                let prepared = self.fifo.prepare(cm(n, rv)).unwrap();
                let (session, open) = self.open_list();
                session.push([prepared]).unwrap();
                let first = open.first;
                open.listed.insert(key(n).to_string(), rv);
                // A list queues what it lists at once.
                self.truth.insert(key(n).to_string(), rv);
                if first {
                    self.initial_pending.insert(key(n).to_string());
                }
                return;
            }
            Produce::RelistDelete(n, rv) => {
                let prepared = self.fifo.prepare(cm(n, rv)).unwrap();
                let (session, open) = self.open_list();
                session.delete(prepared).unwrap();
                let first = open.first;
                open.listed.remove(key(n).as_str());
                self.truth.remove(key(n).as_str());
                if first {
                    self.initial_pending.insert(key(n).to_string());
                }
                return;
            }
            Produce::RelistFinish => {
                let (session, open) = self.session.take().expect("no list is open");
                let tombstones_before = self.fifo.stats().tombstones;
                session.finish("100").unwrap();
                self.list_finished(open.first, true, open.listed, tombstones_before);
            }
            Produce::RelistAbandon => {
                let (session, _) = self.session.take().expect("no list is open");
                let stats = self.fifo.stats();
                drop(session);
                // Nothing is tombstoned, and what the list queued stays
                // queued (the truth already has it); the queue stays
                // unpopulated if it was.
                assert_eq!(self.fifo.stats(), stats, "abandon; {}", self.ctx());
                return;
            }
        }
        self.populated = true;
    }

    /// The model of the end of a list: every key the producer knows of that
    /// the list lacks is tombstoned (once), the others are kept. `streamed`:
    /// the list's items were queued (and modelled) as they arrived.
    fn list_finished(
        &mut self,
        first: bool,
        streamed: bool,
        listed: BTreeMap<String, u64>,
        tombstones_before: u64,
    ) {
        let gone: BTreeSet<String> = self
            .truth
            .keys()
            .filter(|k| !listed.contains_key(*k))
            .cloned()
            .collect();
        assert_eq!(
            self.fifo.stats().tombstones - tombstones_before,
            gone.len() as u64,
            "tombstones of the list (expected for {gone:?}); {}",
            self.ctx()
        );
        for k in &gone {
            *self.tombstones_due.entry(k.clone()).or_default() += 1;
        }
        if first {
            // The first list's tombstones count towards has_synced.
            self.initial_pending.extend(gone.iter().cloned());
        }
        if first && !streamed {
            // `replace` queued the whole list now.
            self.truth = listed;
        } else {
            // The items were queued as they came (the truth has them, and
            // any change since).
            self.truth.retain(|k, _| listed.contains_key(k));
        }
    }

    fn consume(&mut self, c: usize) {
        match self.consumers[c].held.take() {
            None => {
                self.consumers[c].pops_left -= 1;
                let popped = self.fifo.try_pop_batch(self.consumers[c].batch);
                self.trace.push(format!(
                    "consumer {c} pops {:?}",
                    popped
                        .iter()
                        .map(|p| (p.key.to_string(), p.deltas.iter().map(shape).collect()))
                        .collect::<Vec<(String, Vec<Shape>)>>()
                ));
                for p in &popped {
                    let k = p.key.to_string();
                    if let Some(other) = self.holders.insert(k.clone(), c) {
                        panic!("{k} popped by {c} while held by {other}; {}", self.ctx());
                    }
                    let initial = self.initial_pending.remove(&k);
                    if initial {
                        self.initial_held.insert(k.clone());
                    }
                    assert_eq!(
                        p.is_in_initial_list,
                        initial,
                        "is_in_initial_list of {k}; {}",
                        self.ctx()
                    );
                    assert!(!p.deltas.is_empty() && p.deltas.len() <= 2);
                }
                if !popped.is_empty() {
                    self.consumers[c].held = Some((popped, Stage::Popped));
                }
            }
            Some((popped, Stage::Popped)) => {
                self.trace.push(format!("consumer {c} applies"));
                self.apply(&popped);
                self.consumers[c].held = Some((popped, Stage::Applied));
            }
            Some((popped, Stage::Applied)) => {
                self.trace.push(format!("consumer {c} done"));
                self.fifo
                    .done(popped.iter().map(|p| (&p.key, p.is_in_initial_list)));
                for p in &popped {
                    self.holders.remove(p.key.as_str());
                    if p.is_in_initial_list {
                        self.initial_held.remove(p.key.as_str());
                    }
                }
            }
        }
    }

    /// Applies popped deltas to the cache, checking per-key order, and that
    /// every tombstone is owed by a finished list and deletes the state the
    /// cache holds.
    fn apply(&mut self, popped: &[Popped<ConfigMap>]) {
        let mut violations = Vec::new();
        self.cache.write(|w| {
            for p in popped {
                let k = p.key.to_string();
                for d in p.deltas.iter() {
                    let r = rv(d.object());
                    let last = self.applied.get(&k).copied();
                    match d {
                        Delta::Deleted(del) => {
                            if let DeletedObject::Unknown(t) = del {
                                assert_eq!(t.key, p.key);
                                match self.tombstones_due.get_mut(&k) {
                                    Some(due) if *due > 0 => *due -= 1,
                                    _ => violations.push(format!("{k}: tombstone not owed")),
                                }
                                // It carries the newest state, applied before it.
                                let cached = w.get(&k).map(|o| rv(o));
                                if cached != Some(r) {
                                    violations.push(format!(
                                        "{k}: tombstone of {r} over cached {cached:?}"
                                    ));
                                }
                            }
                            if last.is_some_and(|l| r < l.rv) {
                                violations.push(format!("{k}: delete at {r} after {last:?}"));
                            }
                            w.remove(&p.key);
                            self.applied.insert(
                                k.clone(),
                                LastApplied {
                                    rv: r,
                                    deleted: true,
                                },
                            );
                        }
                        Delta::Sync(_) => {
                            // A resync re-delivers exactly what is cached.
                            let cached = w.get(&k).map(|o| rv(o));
                            if cached != Some(r) {
                                violations.push(format!("{k}: sync {r} over cached {cached:?}"));
                            }
                            w.upsert(p.key.clone(), Arc::clone(d.object()));
                        }
                        _ => {
                            let stale = last.is_some_and(|l| r < l.rv || (l.deleted && r == l.rv));
                            if stale {
                                violations
                                    .push(format!("{k}: {:?} at {r} after {last:?}", d.kind()));
                            }
                            w.upsert(p.key.clone(), Arc::clone(d.object()));
                            self.applied.insert(
                                k.clone(),
                                LastApplied {
                                    rv: r,
                                    deleted: false,
                                },
                            );
                        }
                    }
                }
            }
        });
        assert!(violations.is_empty(), "{violations:?}; {}", self.ctx());
    }

    fn check_synced(&self) {
        let expected =
            self.populated && self.initial_pending.is_empty() && self.initial_held.is_empty();
        assert_eq!(
            self.fifo.has_synced(),
            expected,
            "has_synced (initial keys left: {:?} queued, {:?} held); {}",
            self.initial_pending,
            self.initial_held,
            self.ctx()
        );
    }
}

impl System for FifoWorld<'_> {
    fn actors(&self) -> usize {
        1 + self.consumers.len()
    }

    fn runnable(&self, actor: usize) -> bool {
        match actor {
            0 => self.pc < self.script.len(),
            c => {
                let c = &self.consumers[c - 1];
                c.held.is_some() || c.pops_left > 0
            }
        }
    }

    fn step(&mut self, actor: usize) {
        match actor {
            0 => self.produce(),
            c => self.consume(c - 1),
        }
        self.check_synced();
    }

    fn finish(mut self) {
        assert!(self.session.is_none(), "the script left a list open");
        // Everything the scripts left behind is drained by one more consumer.
        let drainer = self.consumers.len();
        self.consumers.push(Consumer {
            batch: 4,
            pops_left: usize::MAX,
            held: None,
        });
        loop {
            self.consume(drainer);
            if self.consumers[drainer].held.is_none() {
                break;
            }
            self.consume(drainer);
            self.consume(drainer);
            self.check_synced();
        }
        assert_eq!(self.fifo.tracked_keys(), 0, "{}", self.ctx());
        assert!(self.holders.is_empty());
        let cache: BTreeMap<String, u64> = self
            .cache
            .snapshot()
            .iter()
            .map(|(k, o)| (k.to_string(), rv(o)))
            .collect();
        assert_eq!(cache, self.truth, "final cache vs truth; {}", self.ctx());
        assert_eq!(self.fifo.has_synced(), self.populated, "{}", self.ctx());
        // Every tombstone a list owed was applied exactly once.
        self.tombstones_due.retain(|_, due| *due > 0);
        assert!(
            self.tombstones_due.is_empty(),
            "tombstones never applied: {:?}; {}",
            self.tombstones_due,
            self.ctx()
        );
    }
}

/// Explores one FIFO scenario; returns the number of interleavings.
fn explore_fifo(seed: &[(&str, u64)], script: &[Produce], consumers: &[(usize, usize)]) -> usize {
    explore_fifo_from(Start::Cached, seed, script, consumers)
}

/// Explores one FIFO scenario from a queue that listed `seed` and synced.
fn explore_fifo_synced(
    seed: &[(&str, u64)],
    script: &[Produce],
    consumers: &[(usize, usize)],
) -> usize {
    explore_fifo_from(Start::Synced, seed, script, consumers)
}

/// Each schedule gets a fresh FIFO, owned here and borrowed by its world
/// (and by the world's open [`ReplaceSession`]); both are dropped before the
/// next schedule, so nothing accumulates across schedules.
fn explore_fifo_from(
    start: Start,
    seed: &[(&str, u64)],
    script: &[Produce],
    consumers: &[(usize, usize)],
) -> usize {
    explore_runs(|prefix| {
        let (fifo, cache) = fifo();
        replay(
            FifoWorld::new(&fifo, cache, start, seed, script, consumers),
            prefix,
        )
    })
}

use Produce::*;

// Every scenario enqueues at most one *new* key per hash-ordered loop
// (`resync`, the tombstones of `replace` or of a streaming list's `finish`;
// a streaming list's own objects are queued in arrival order): the FIFO
// walks hash maps with a
// random seed, so two new keys would enter the line in an order that changes
// from one replay to the next, and the search relies on replays being
// deterministic (`explore` fails loudly if one is not).

#[test]
fn fifo_one_key_churn() {
    // Both consumers compete for one key while it is added, changed, deleted
    // and re-created: never held twice, applied in order, no stale re-add.
    let n = explore_fifo(
        &[],
        &[Add("a", 1), Update("a", 2), Delete("a", 3), Add("a", 4)],
        &[(1, 2), (1, 2)],
    );
    eprintln!("fifo_one_key_churn: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_replace_tombstones_a_cached_key() {
    // `a` is cached, and its update is queued, in flight or applied when the
    // relist drops it: the tombstone always carries the newest state and
    // is applied after it.
    let n = explore_fifo(
        &[("a", 1)],
        &[Update("a", 2), Replace(vec![("c", 3)]), Update("c", 4)],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_replace_tombstones_a_cached_key: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_replace_tombstones_a_queued_key() {
    // `b` was only ever queued (or in flight) when the relist drops it;
    // then the relisted `c` is deleted again.
    let n = explore_fifo(
        &[],
        &[Add("b", 1), Replace(vec![("c", 2)]), Delete("c", 3)],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_replace_tombstones_a_queued_key: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_has_synced_after_first_replace_with_deletions() {
    // A resync before the first list, a first list that tombstones a cached
    // key, then changes: has_synced turns true exactly when every item of the
    // first list (tombstone included) is done.
    let n = explore_fifo(
        &[("g", 1)],
        &[Resync, Replace(vec![("a", 2), ("b", 3)]), Update("a", 4)],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_has_synced: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_update_resync_race_and_relist() {
    // Resyncs racing an update never re-apply a stale state; a relist
    // listing the unchanged object keeps it and tombstones `b`.
    let n = explore_fifo(
        &[("a", 1)],
        &[
            Resync,
            Update("a", 2),
            Resync,
            Add("b", 3),
            Replace(vec![("a", 2)]),
        ],
        &[(1, 2), (1, 1)],
    );
    eprintln!("fifo_update_resync_race: {n} interleavings");
    assert!(n > 1000);
}

// Streaming lists: a `ReplaceSession` whose steps interleave with the
// consumers. A relist queues each object as it arrives, so consumers apply
// the list while it streams; its tombstones come at `finish`.

#[test]
fn fifo_streaming_relist_between_pops() {
    // Synced on {a, b}; a relist streams a (changed) and c (new): consumers
    // apply a and c before the list ends, b is tombstoned once at the end,
    // from the cache, and never a listed key.
    let n = explore_fifo_synced(
        &[("a", 1), ("b", 1)],
        &[
            BeginRelist,
            RelistPush("a", 2),
            RelistPush("c", 3),
            RelistFinish,
        ],
        &[(1, 2), (2, 2)],
    );
    eprintln!("fifo_streaming_relist_between_pops: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_streaming_relist_with_watch_changes() {
    // While the relist streams, a listed key changes and another listed key
    // is deleted (queued, in flight or applied at `finish`): neither is
    // tombstoned, the change and the delete win, unlisted b is tombstoned.
    let n = explore_fifo_synced(
        &[("a", 1), ("b", 1)],
        &[
            BeginRelist,
            RelistPush("a", 2),
            RelistPush("c", 3),
            Update("a", 4),
            Delete("c", 5),
            RelistFinish,
        ],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_streaming_relist_with_watch_changes: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_streaming_relist_abandoned_then_relisted() {
    // A relist that lists only c breaks off: a is not tombstoned, c stays
    // queued. The next relist lists only a (changed): c, queued, in flight
    // or cached by then, is tombstoned once.
    let n = explore_fifo_synced(
        &[("a", 1)],
        &[
            BeginRelist,
            RelistPush("c", 2),
            RelistAbandon,
            BeginRelist,
            RelistPush("a", 3),
            RelistFinish,
        ],
        &[(1, 2), (1, 1)],
    );
    eprintln!("fifo_streaming_relist_abandoned_then_relisted: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_streaming_relist_reports_a_deletion() {
    // The relist reports b deleted (a WatchList may) before listing a: b gets
    // its final delete and no tombstone; then b is re-created.
    let n = explore_fifo_synced(
        &[("a", 1), ("b", 1)],
        &[
            BeginRelist,
            RelistDelete("b", 2),
            RelistPush("a", 3),
            RelistFinish,
            Add("b", 4),
        ],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_streaming_relist_reports_a_deletion: {n} interleavings");
    assert!(n > 1000);
}

#[test]
fn fifo_streaming_first_list_is_applied_as_it_arrives() {
    // The queue's first list streams while consumers poll and apply it;
    // has_synced stays false until it finished and every item of it is done;
    // b, listed then deleted, is delivered deleted after its add; the cached
    // g is tombstoned as part of the initial list.
    let n = explore_fifo(
        &[("g", 1)],
        &[
            BeginRelist,
            RelistPush("a", 2),
            RelistPush("b", 3),
            RelistDelete("b", 4),
            RelistFinish,
            Update("a", 5),
        ],
        &[(1, 2), (2, 1)],
    );
    eprintln!("fifo_streaming_first_list_is_applied_as_it_arrives: {n} interleavings");
    assert!(n > 1000);
}

// ---------------------------------------------------------------------------
// Indexer publish path: a writer paused inside its batches, two readers
// ---------------------------------------------------------------------------

const TIER_INDEX: &str = "tier";

fn tier_index() -> IndexFn<ConfigMap> {
    IndexFn::new(|o: &ConfigMap| {
        o.metadata
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| *k == "tier")
            .map(|(_, v)| v.clone())
            .collect()
    })
}

/// The values of `obj` in the index `name`, computed independently.
fn index_values_of(name: &str, obj: &ConfigMap) -> BTreeSet<String> {
    let labels = obj.metadata.labels.iter().flatten();
    match name {
        NAMESPACE_INDEX => obj.metadata.namespace.iter().cloned().collect(),
        LABEL_INDEX => labels.map(|(k, v)| label_value(k, v)).collect(),
        TIER_INDEX => labels
            .filter(|(k, _)| *k == "tier")
            .map(|(_, v)| v.clone())
            .collect(),
        _ => BTreeSet::new(), // owner-uid: no owners in these objects
    }
}

#[derive(Debug, Clone)]
enum WriteOp {
    Upsert(Box<ConfigMap>),
    Remove(&'static str),
}

#[derive(Debug, Clone)]
enum WriterStep {
    /// A batch: its single writes are separate steps, then one publish step.
    Batch(Vec<WriteOp>),
    /// `add_indexers` (one step: it publishes atomically).
    AddTierIndex,
}

#[derive(Debug, Clone)]
enum ReadOp {
    Snapshot,
    Get(&'static str),
    ByIndex(&'static str, &'static str),
}

enum ReadResult {
    Snapshot(Arc<Snapshot<ConfigMap>>),
    Get(Option<u64>),
    ByIndex(BTreeSet<String>),
}

/// One published state: objects (key → object) and index names.
#[derive(Clone)]
struct Published {
    objects: BTreeMap<String, ConfigMap>,
    indexes: BTreeSet<String>,
}

const STEP_TIMEOUT: Duration = Duration::from_secs(20);

struct IndexWorld {
    indexer: Indexer<ConfigMap>,
    writer_go: Option<mpsc::Sender<()>>,
    writer_ack: mpsc::Receiver<Option<u64>>,
    writer_thread: Option<std::thread::JoinHandle<()>>,
    writer_steps_left: usize,
    reader_req: Option<mpsc::Sender<ReadOp>>,
    reader_resp: mpsc::Receiver<ReadResult>,
    reader_thread: Option<std::thread::JoinHandle<()>>,
    reader_scripts: Vec<Vec<ReadOp>>,
    reader_pc: Vec<usize>,
    reader_last_seq: Vec<u64>,
    /// Expected state by sequence number.
    published: BTreeMap<u64, Published>,
    /// Sequence numbers in publish order (the writer's script).
    upcoming: Vec<u64>,
    current: u64,
    trace: Vec<String>,
}

fn ns_cm(ns: &str, name: &str, rv: u64, tier: &str) -> ConfigMap {
    cm_in(ns, name, rv, &[("tier", tier), ("app", "x")])
}

impl IndexWorld {
    fn new(seed: &[ConfigMap], writer: &[WriterStep], readers: &[Vec<ReadOp>]) -> Self {
        let indexer = Indexer::new(builtin_indexers());
        seed_cache(&indexer, seed);
        let mut state = Published {
            objects: seed
                .iter()
                .map(|o| (ObjectKey::of(o).unwrap().to_string(), o.clone()))
                .collect(),
            indexes: indexer.snapshot().index_names().into_iter().collect(),
        };
        let current = indexer.snapshot().seq();
        let mut published = BTreeMap::from([(current, state.clone())]);
        let mut upcoming = Vec::new();
        let mut steps = 0;
        for (i, s) in writer.iter().enumerate() {
            match s {
                WriterStep::Batch(ops) => {
                    steps += ops.len() + 1;
                    for op in ops {
                        match op {
                            WriteOp::Upsert(o) => {
                                let k = ObjectKey::of(&**o).unwrap().to_string();
                                state.objects.insert(k, (**o).clone());
                            }
                            WriteOp::Remove(k) => {
                                state.objects.remove(*k);
                            }
                        }
                    }
                }
                WriterStep::AddTierIndex => {
                    steps += 1;
                    state.indexes.insert(TIER_INDEX.to_string());
                }
            }
            let seq = current + 1 + i as u64;
            published.insert(seq, state.clone());
            upcoming.push(seq);
        }

        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (ack_tx, ack_rx) = mpsc::channel::<Option<u64>>();
        let w_indexer = indexer.clone();
        let script = writer.to_vec();
        let writer_thread = std::thread::spawn(move || {
            for s in script {
                let seq = match s {
                    WriterStep::Batch(ops) => {
                        let ((), seq) = w_indexer.write(|w| {
                            for op in ops {
                                if go_rx.recv().is_err() {
                                    return;
                                }
                                match op {
                                    WriteOp::Upsert(o) => {
                                        w.upsert(ObjectKey::of(&*o).unwrap(), Arc::new(*o));
                                    }
                                    WriteOp::Remove(k) => {
                                        w.remove(&ObjectKey::parse(k));
                                    }
                                }
                                // Paused here, lock held, batch half applied.
                                let _ = ack_tx.send(None);
                            }
                            // The publish step.
                            let _ = go_rx.recv();
                        });
                        seq
                    }
                    WriterStep::AddTierIndex => {
                        if go_rx.recv().is_err() {
                            return;
                        }
                        w_indexer
                            .add_indexers(vec![(TIER_INDEX.to_string(), tier_index())])
                            .unwrap();
                        w_indexer.snapshot().seq()
                    }
                };
                if ack_tx.send(Some(seq)).is_err() {
                    return;
                }
            }
        });

        let (req_tx, req_rx) = mpsc::channel::<ReadOp>();
        let (resp_tx, resp_rx) = mpsc::channel::<ReadResult>();
        let r_indexer = indexer.clone();
        let reader_thread = std::thread::spawn(move || {
            for op in req_rx {
                let result = match op {
                    ReadOp::Snapshot => ReadResult::Snapshot(r_indexer.snapshot()),
                    ReadOp::Get(k) => ReadResult::Get(r_indexer.get(k).map(|o| rv(&o))),
                    ReadOp::ByIndex(name, value) => ReadResult::ByIndex(
                        r_indexer
                            .by_index(name, value)
                            .unwrap()
                            .iter()
                            .map(|o| ObjectKey::of(&**o).unwrap().to_string())
                            .collect(),
                    ),
                };
                if resp_tx.send(result).is_err() {
                    return;
                }
            }
        });

        Self {
            indexer,
            writer_go: Some(go_tx),
            writer_ack: ack_rx,
            writer_thread: Some(writer_thread),
            writer_steps_left: steps,
            reader_req: Some(req_tx),
            reader_resp: resp_rx,
            reader_thread: Some(reader_thread),
            reader_pc: vec![0; readers.len()],
            reader_last_seq: vec![0; readers.len()],
            reader_scripts: readers.to_vec(),
            published,
            upcoming,
            current,
            trace: Vec::new(),
        }
    }

    fn expected(&self) -> &Published {
        &self.published[&self.current]
    }

    fn write_step(&mut self) {
        self.writer_steps_left -= 1;
        self.writer_go.as_ref().unwrap().send(()).unwrap();
        let ack = self
            .writer_ack
            .recv_timeout(STEP_TIMEOUT)
            .expect("writer step did not complete");
        self.trace.push(format!("writer step → {ack:?}"));
        if let Some(seq) = ack {
            let want = self.upcoming.remove(0);
            assert_eq!(seq, want, "publish sequence numbers; {:?}", self.trace);
            assert!(seq > self.current);
            self.current = seq;
        }
    }

    fn read_step(&mut self, r: usize) {
        let op = self.reader_scripts[r][self.reader_pc[r]].clone();
        self.reader_pc[r] += 1;
        self.reader_req.as_ref().unwrap().send(op.clone()).unwrap();
        // A read that waited for the paused writer would never answer.
        let result = self
            .reader_resp
            .recv_timeout(STEP_TIMEOUT)
            .expect("a read blocked behind a writer");
        self.trace.push(format!("reader {r} {op:?}"));
        let ctx = format!(
            "reader {r} {op:?} at seq {}; {:?}",
            self.current, self.trace
        );
        let want = &self.expected().clone();
        match result {
            ReadResult::Snapshot(snap) => {
                assert!(
                    snap.seq() >= self.reader_last_seq[r],
                    "seq went backwards; {ctx}"
                );
                self.reader_last_seq[r] = snap.seq();
                // Steps are sequential: the snapshot is the last published one.
                assert_eq!(snap.seq(), self.current, "{ctx}");
                check_snapshot(&snap, want, &ctx);
            }
            ReadResult::Get(got) => {
                let k = match op {
                    ReadOp::Get(k) => k,
                    _ => unreachable!(),
                };
                assert_eq!(got, want.objects.get(k).map(rv), "{ctx}");
            }
            ReadResult::ByIndex(got) => {
                let (name, value) = match op {
                    ReadOp::ByIndex(n, v) => (n, v),
                    _ => unreachable!(),
                };
                let expect: BTreeSet<String> = want
                    .objects
                    .iter()
                    .filter(|(_, o)| index_values_of(name, o).contains(value))
                    .map(|(k, _)| k.clone())
                    .collect();
                assert_eq!(got, expect, "{ctx}");
            }
        }
    }
}

/// A snapshot is internally consistent and is exactly the expected state.
fn check_snapshot(snap: &Snapshot<ConfigMap>, want: &Published, ctx: &str) {
    let objects: BTreeMap<String, u64> = snap.iter().map(|(k, o)| (k.to_string(), rv(o))).collect();
    let expect: BTreeMap<String, u64> = want
        .objects
        .iter()
        .map(|(k, o)| (k.clone(), rv(o)))
        .collect();
    assert_eq!(objects, expect, "snapshot objects; {ctx}");
    let names: BTreeSet<String> = snap.index_names().into_iter().collect();
    assert_eq!(names, want.indexes, "index names; {ctx}");
    for name in &names {
        // Every key filed under a value exists and has that value.
        let values = snap.index_values(name).unwrap();
        for value in &values {
            let keys = snap.index_keys(name, value).unwrap();
            assert!(!keys.is_empty(), "empty set kept for {name}={value}; {ctx}");
            for k in keys {
                let obj = snap
                    .get(k.as_str())
                    .unwrap_or_else(|| panic!("{name}={value} names missing {k}; {ctx}"));
                assert!(
                    index_values_of(name, obj).contains(value),
                    "{k} filed under {name}={value} wrongly; {ctx}"
                );
            }
        }
        // Every object is filed under each of its values.
        for (k, obj) in snap.iter() {
            for v in index_values_of(name, obj) {
                let keys = snap.index_keys(name, &v).unwrap();
                assert!(keys.contains(k), "{k} missing from {name}={v}; {ctx}");
            }
        }
    }
}

impl System for IndexWorld {
    fn actors(&self) -> usize {
        1 + self.reader_scripts.len()
    }

    fn runnable(&self, actor: usize) -> bool {
        match actor {
            0 => self.writer_steps_left > 0,
            r => self.reader_pc[r - 1] < self.reader_scripts[r - 1].len(),
        }
    }

    fn step(&mut self, actor: usize) {
        match actor {
            0 => self.write_step(),
            r => self.read_step(r - 1),
        }
    }

    fn finish(mut self) {
        assert!(self.upcoming.is_empty());
        drop(self.writer_go.take());
        drop(self.reader_req.take());
        self.writer_thread.take().unwrap().join().unwrap();
        self.reader_thread.take().unwrap().join().unwrap();
        let last = self.indexer.snapshot();
        check_snapshot(&last, self.expected(), "final");
    }
}

#[test]
fn indexer_readers_never_see_a_partial_batch() {
    let seed = [ns_cm("ns-a", "a", 1, "web"), ns_cm("ns-b", "b", 1, "db")];
    let writer = [
        // Relabel a, delete b: tier=db moves from b to a.
        WriterStep::Batch(vec![
            WriteOp::Upsert(Box::new(ns_cm("ns-a", "a", 2, "db"))),
            WriteOp::Remove("ns-b/b"),
        ]),
        WriterStep::AddTierIndex,
        // Re-create b, delete a: namespace ns-a and tier=db become empty.
        WriterStep::Batch(vec![
            WriteOp::Upsert(Box::new(ns_cm("ns-b", "b", 3, "web"))),
            WriteOp::Remove("ns-a/a"),
        ]),
    ];
    let readers = [
        vec![ReadOp::Get("ns-a/a"), ReadOp::Snapshot],
        vec![ReadOp::ByIndex(LABEL_INDEX, "tier=db"), ReadOp::Snapshot],
    ];
    let n = explore(|| IndexWorld::new(&seed, &writer, &readers));
    eprintln!("indexer_readers_never_see_a_partial_batch: {n} interleavings");
    // 7 writer steps, 2 + 2 reader steps: 11! / (7! 2! 2!) = 1980.
    assert_eq!(n, 1980);
}

// ---------------------------------------------------------------------------
// Real threads
// ---------------------------------------------------------------------------

/// Per-key order as a handler sees it; violations are counted (a handler
/// panic would be caught by its registration).
struct OrderChecker {
    view: Arc<parking_lot::Mutex<HashMap<String, u64>>>,
    last: HashMap<String, u64>,
    violations: Arc<AtomicU64>,
}

impl OrderChecker {
    fn see(&mut self, key: String, rv: u64, present: bool) {
        let last = self.last.entry(key.clone()).or_insert(0);
        if rv < *last {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        *last = rv;
        let mut view = self.view.lock();
        if present {
            view.insert(key, rv);
        } else {
            view.remove(&key);
        }
    }
}

impl ResourceEventHandler<ConfigMap> for OrderChecker {
    fn on_add(&mut self, obj: &Arc<ConfigMap>, _: bool) {
        self.see(ObjectKey::of(&**obj).unwrap().to_string(), rv(obj), true);
    }
    fn on_update(&mut self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let k = ObjectKey::of(&**new).unwrap().to_string();
        if self.view.lock().get(&k) != Some(&rv(old)) {
            self.violations.fetch_add(1, Ordering::Relaxed);
        }
        self.see(k, rv(new), true);
    }
    fn on_delete(&mut self, obj: &DeletedObject<ConfigMap>) {
        let o = obj.object();
        self.see(ObjectKey::of(&**o).unwrap().to_string(), rv(o), false);
    }
}

#[test]
fn stress_two_producers_two_pool_threads() {
    const OPS: u64 = 20_000;
    const KEYS: u64 = 64;
    let inf = SharedIndexInformer::<ConfigMap>::builder()
        .name("stress")
        .threads(2)
        .indexers(builtin_indexers())
        .build();
    let view = Arc::new(parking_lot::Mutex::new(HashMap::new()));
    let violations = Arc::new(AtomicU64::new(0));
    inf.add_event_handler(OrderChecker {
        view: Arc::clone(&view),
        last: HashMap::new(),
        violations: Arc::clone(&violations),
    })
    .unwrap();
    let history = History::default();
    inf.add_event_handler(history.handler()).unwrap();
    inf.start().unwrap();

    let producers: Vec<_> = (0..2u64)
        .map(|p| {
            let q = Arc::clone(inf.queue());
            std::thread::spawn(move || {
                // xorshift: deterministic per producer.
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (p + 1);
                let mut truth: BTreeMap<String, u64> = BTreeMap::new();
                for rv in 1..=OPS {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let name = format!("p{p}-{}", x % KEYS);
                    let k = key(&name).to_string();
                    let tier = ["web", "db"][(rv % 2) as usize];
                    let obj = cm_labels(&name, rv, &[("tier", tier)]);
                    match (x >> 32) % 10 {
                        0..=2 if truth.contains_key(&k) => {
                            q.delete(obj).unwrap();
                            truth.remove(&k);
                        }
                        0..=4 => {
                            q.add(obj).unwrap();
                            truth.insert(k, rv);
                        }
                        _ => {
                            q.update(obj).unwrap();
                            truth.insert(k, rv);
                        }
                    }
                }
                truth
            })
        })
        .collect();

    // A reader checks snapshots while the pool writes.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (indexer, stop) = (inf.indexer(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut last_seq = 0;
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let snap = indexer.snapshot();
                assert!(snap.seq() >= last_seq, "seq went backwards");
                last_seq = snap.seq();
                let mut tiers = 0;
                for tier in ["tier=web", "tier=db"] {
                    for k in snap.index_keys(LABEL_INDEX, tier).unwrap() {
                        let o = snap.get(k.as_str()).expect("indexed key missing");
                        assert_eq!(
                            label_value("tier", &o.metadata.labels.as_ref().unwrap()["tier"]),
                            tier
                        );
                        tiers += 1;
                    }
                }
                let objects = snap
                    .keys()
                    .filter(|k| k.namespace() != Some(FENCE_NAMESPACE))
                    .count();
                assert_eq!(tiers, objects, "label index out of step with objects");
                reads += 1;
            }
            reads
        })
    };

    let mut truth = BTreeMap::new();
    for p in producers {
        truth.extend(p.join().unwrap());
    }
    drain(&inf, &[&history], u64::MAX - 1);
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().unwrap();
    assert!(reads > 0);

    let cache: BTreeMap<String, u64> = inf
        .indexer()
        .snapshot()
        .iter()
        .map(|(k, o)| (k.to_string(), rv(o)))
        .collect();
    assert_eq!(cache, truth, "cache vs producers' truth");
    let seen: BTreeMap<String, u64> = view
        .lock()
        .iter()
        .filter(|(k, _)| !k.starts_with(FENCE_NAMESPACE))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    assert_eq!(seen, truth, "handler's view vs truth");
    assert_eq!(violations.load(Ordering::Relaxed), 0, "per-key order");
    assert_eq!(inf.metrics().handler_panics, 0);
    inf.shutdown();
}
