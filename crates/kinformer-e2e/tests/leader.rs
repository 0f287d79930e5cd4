//! Leader election (`kinformer::controller::LeaderElector`) on a Lease,
//! each scenario against kinformer-sim and against the real kube-apiserver:
//! one leader among three candidates, never two at once, takeover after a
//! crash within the lease duration, fast takeover after a release, and
//! stepping down when the lease is taken; on the simulator also when the
//! server goes away and when it never answers.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kinformer::CancellationToken;
use kinformer::controller::{LeaderElector, LeadershipEnd, LeaseTiming};
use kinformer_e2e::{real_client, sim_client, unique};
use kinformer_sim::{RunningSim, Sim};
use kube::api::{Api, Patch, PatchParams};
use parking_lot::Mutex;
use tokio::time::Instant;

const LEASE: Duration = Duration::from_millis(1000);

fn timing() -> LeaseTiming {
    LeaseTiming::default()
        .lease_duration(LEASE)
        .renew_deadline(Duration::from_millis(700))
        .retry_period(Duration::from_millis(100))
}

async fn sim() -> (RunningSim, kube::Client) {
    sim_client(Sim::builder()).await.unwrap()
}

/// What the candidates' `lead` futures record.
#[derive(Default)]
struct Record {
    /// Candidates leading now; never more than one.
    leading: AtomicUsize,
    most_at_once: AtomicUsize,
    /// (identity, start) of each term.
    terms: Mutex<Vec<(String, Instant)>>,
}

impl Record {
    fn start(&self, who: &str) {
        let now = self.leading.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_at_once.fetch_max(now, Ordering::SeqCst);
        self.terms.lock().push((who.to_owned(), Instant::now()));
    }
    fn stop(&self) {
        self.leading.fetch_sub(1, Ordering::SeqCst);
    }
    fn leader(&self) -> Option<String> {
        self.terms.lock().last().map(|(w, _)| w.clone())
    }
}

/// Starts candidate `who` for Lease `lease`; returns its shutdown token and
/// its task.
fn candidate(
    client: &kube::Client,
    lease: &str,
    who: &str,
    record: &Arc<Record>,
) -> (CancellationToken, tokio::task::JoinHandle<LeadershipEnd>) {
    let elector = LeaderElector::new(client.clone(), "default", lease, who).timing(timing());
    let shutdown = CancellationToken::new();
    let (record, who, token) = (Arc::clone(record), who.to_owned(), shutdown.clone());
    let task = tokio::spawn(async move {
        elector
            .run(token, |leading| async move {
                record.start(&who);
                leading.cancelled().await;
                record.stop();
            })
            .await
    });
    (shutdown, task)
}

async fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    start.elapsed()
}

async fn one_leader_then_takeover_after_a_crash_and_after_a_release(client: kube::Client) {
    let lease = unique("lease");
    let record = Arc::new(Record::default());
    let mut candidates: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|w| (w.to_string(), candidate(&client, &lease, w, &record)))
        .collect();
    until("a first leader", Duration::from_secs(5), || {
        record.leader().is_some()
    })
    .await;
    tokio::time::sleep(LEASE * 2).await;
    assert_eq!(
        record.terms.lock().len(),
        1,
        "leadership moved with nobody gone"
    );

    // Crash: the leader's task is aborted, its lease left to expire.
    let first = record.leader().unwrap();
    let at = candidates.iter().position(|(w, _)| *w == first).unwrap();
    let (_, (_, task)) = candidates.remove(at);
    task.abort();
    let _ = task.await;
    record.stop();
    let crashed = Instant::now();
    until(
        "a takeover after the crash",
        LEASE + Duration::from_secs(2),
        || record.leader().as_deref() != Some(first.as_str()),
    )
    .await;
    let (second, started) = record.terms.lock().last().cloned().unwrap();
    let failover = started.duration_since(crashed);
    println!("failover after a crash: {failover:?} (lease {LEASE:?})");
    assert!(failover <= LEASE + Duration::from_secs(2));

    // Release: the leader shuts down gracefully; the last candidate takes
    // the released lease within a few retry periods, not a lease duration.
    let at = candidates.iter().position(|(w, _)| *w == second).unwrap();
    let (_, (shutdown, task)) = candidates.remove(at);
    shutdown.cancel();
    assert_eq!(task.await.unwrap(), LeadershipEnd::Shutdown);
    let took = until(
        "a takeover after the release",
        LEASE + Duration::from_secs(2),
        || record.leader().as_deref() != Some(second.as_str()),
    )
    .await;
    println!("takeover after a release: {took:?}");
    assert!(took < LEASE, "took {took:?} after a release");
    assert_eq!(
        record.most_at_once.load(Ordering::SeqCst),
        1,
        "two leaders at once"
    );
    for (_, (shutdown, task)) in candidates {
        shutdown.cancel();
        task.await.unwrap();
    }
}

async fn the_leader_steps_down_when_its_lease_is_taken(client: kube::Client) {
    let lease = unique("lease");
    let record = Arc::new(Record::default());
    let (shutdown, task) = candidate(&client, &lease, "a", &record);
    until("leadership", Duration::from_secs(5), || {
        record.leader().is_some()
    })
    .await;
    // Someone else writes itself in as the holder (a split brain, or an
    // operator): the leader sees it on its next renew and steps down.
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let takeover = Patch::Merge(serde_json::json!({"spec": {"holderIdentity": "intruder"}}));
    leases
        .patch(&lease, &PatchParams::default(), &takeover)
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(end, LeadershipEnd::Lost);
    assert_eq!(record.leading.load(Ordering::SeqCst), 0);
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_an_unreachable_server_never_makes_a_leader_and_shutdown_ends_the_campaign() {
    // A port nobody listens on.
    let cfg = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(cfg).unwrap();
    let record = Arc::new(Record::default());
    let (shutdown, task) = candidate(&client, "the-lease", "a", &record);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(record.leader().is_none());
    shutdown.cancel();
    let end = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(end, LeadershipEnd::Shutdown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_the_leader_steps_down_when_it_cannot_renew_within_the_deadline() {
    let (sim, client) = sim().await;
    let record = Arc::new(Record::default());
    let (shutdown, task) = candidate(&client, "the-lease", "a", &record);
    until("leadership", Duration::from_secs(5), || {
        record.leader().is_some()
    })
    .await;
    // The server goes away: every renew fails, and the leader steps down
    // once the renew deadline has passed, before the lease would expire.
    drop(sim);
    let gone = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(end, LeadershipEnd::Lost);
    let took = gone.elapsed();
    assert!(
        took >= Duration::from_millis(500),
        "stepped down after {took:?}"
    );
    assert!(
        took <= LEASE + Duration::from_millis(500),
        "stepped down after {took:?}"
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_one_leader_then_takeover_after_a_crash_and_after_a_release() {
    let (_sim, client) = sim().await;
    one_leader_then_takeover_after_a_crash_and_after_a_release(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_the_leader_steps_down_when_its_lease_is_taken() {
    let (_sim, client) = sim().await;
    the_leader_steps_down_when_its_lease_is_taken(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_one_leader_then_takeover_after_a_crash_and_after_a_release() {
    let client = real_client(false).await.unwrap();
    one_leader_then_takeover_after_a_crash_and_after_a_release(client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn real_the_leader_steps_down_when_its_lease_is_taken() {
    let client = real_client(false).await.unwrap();
    the_leader_steps_down_when_its_lease_is_taken(client).await;
}
