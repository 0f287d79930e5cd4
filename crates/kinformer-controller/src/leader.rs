//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! rules (`tools/leaderelection`): a candidate takes a lease whose holder
//! has not renewed it for a lease duration *as this candidate observed it*
//! (its own clock, never the holder's timestamps, so clock skew between
//! nodes does not matter), every write carries the resource version read
//! (optimistic concurrency: two candidates can never both succeed), the
//! leader renews every retry period and steps down when it could not renew
//! for the renew deadline, and it releases the lease on shutdown.
//!
//! One [`LeaderElector`] per lease: per-shard leases are several electors.
//!
//! `kube-lease-manager` (kube 5) was considered: it takes leases with
//! server-side apply and whole-second durations, not client-go's
//! resource-version preconditions, renew deadline and retry period, and
//! the simulator serves no server-side apply; `kube-leader-election` is
//! on kube 4. This module is the rules above on `kube::Api<Lease>`.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// client-go's `LeaseDuration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's `RenewDeadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's `RetryPeriod`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Timing of a [`LeaderElector`] (client-go's defaults: 15 s, 10 s, 2 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseTiming {
    /// How long a lease not renewed stays its holder's, as candidates see it.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down
    /// (shorter than the lease duration).
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl Default for LeaseTiming {
    fn default() -> Self {
        Self {
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }
}

impl LeaseTiming {
    /// Sets the lease duration.
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// Sets the renew deadline.
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// Sets the retry period.
    pub fn retry_period(mut self, d: Duration) -> Self {
        self.retry_period = d;
        self
    }
}

/// Why [`LeaderElector::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeadershipEnd {
    /// The shutdown token was cancelled (the lease was released if held).
    Shutdown,
    /// The leader could not renew within the renew deadline, or found the
    /// lease taken: it stepped down (`lead`'s token was cancelled).
    Lost,
    /// `lead` returned on its own (the lease was released).
    Finished,
    /// This candidate stopped wanting the lease while it held it (a shard
    /// lease handed to another replica, see [`ShardLeases`](crate::ShardLeases)):
    /// it released it.
    Yielded,
}

/// Campaigns for one Lease and runs a future while it holds it.
///
/// ```no_run
/// use kinformer_controller::{LeaderElector, LeadershipEnd};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(client: kube::Client) {
/// let elector = LeaderElector::new(client, "kube-system", "my-controller", "pod-a");
/// let shutdown = CancellationToken::new();
/// let end = elector
///     .run(shutdown, |leading: CancellationToken| async move {
///         // Reconcile until `leading` is cancelled (the lease was lost).
///         leading.cancelled().await;
///     })
///     .await;
/// assert_ne!(end, LeadershipEnd::Finished);
/// # }
/// ```
pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timing: LeaseTiming,
    leading: watch::Sender<bool>,
    /// Campaign only while this is true (observe the lease otherwise), and
    /// yield the lease when it turns false.
    wanted: Option<watch::Receiver<bool>>,
}

/// The last lease record seen, and when this candidate saw it change.
struct Observed {
    spec: Option<LeaseSpec>,
    at: Instant,
}

/// One acquire-or-renew attempt's result.
enum Attempt {
    /// This candidate holds the lease (taken or renewed).
    Held,
    /// Another holder's lease, not expired.
    HeldByOther,
    /// The server refused or failed (logged).
    Failed,
}

impl LeaderElector {
    /// A candidate `identity` (unique among candidates: a pod name, say)
    /// for the Lease `name` in `namespace`, with client-go's timing.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.into(),
            identity: identity.into(),
            timing: LeaseTiming::default(),
            leading: watch::Sender::new(false),
            wanted: None,
        }
    }

    /// Campaigns only while `wanted` is true: otherwise it keeps reading
    /// the lease (so that its view of the holder's renewals is current when
    /// it starts to want it) without writing, and while leading it releases
    /// the lease when `wanted` turns false ([`LeadershipEnd::Yielded`]).
    pub(crate) fn only_while(mut self, wanted: watch::Receiver<bool>) -> Self {
        self.wanted = Some(wanted);
        self
    }

    /// Uses `timing` instead of client-go's.
    pub fn timing(mut self, timing: LeaseTiming) -> Self {
        self.timing = timing;
        self
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether this candidate leads now, as a watch (true from the
    /// acquisition until it steps down or releases).
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// Campaigns until this candidate holds the lease, then runs `lead`
    /// with a token that is cancelled when leadership ends (lost, or
    /// `shutdown`), renewing meanwhile. Returns once `lead` has returned:
    /// after a shutdown (the lease released), a loss, or `lead` finishing
    /// on its own (the lease released). Server errors are logged and
    /// retried every retry period; they never end the campaign.
    pub async fn run<F, Fut>(&self, shutdown: CancellationToken, lead: F) -> LeadershipEnd
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut observed = Observed {
            spec: None,
            at: Instant::now(),
        };
        let mut wanted = self.wanted.clone();
        // Campaign.
        let mut first = true;
        loop {
            let now_wanted = is_wanted(&wanted);
            if !first {
                tokio::select! {
                    () = shutdown.cancelled() => return LeadershipEnd::Shutdown,
                    () = tokio::time::sleep(jittered(self.timing.retry_period)) => {}
                    // Wanted from now: try at once.
                    () = becomes(&mut wanted, true), if !now_wanted => {}
                }
            }
            first = false;
            if shutdown.is_cancelled() {
                return LeadershipEnd::Shutdown;
            }
            if !is_wanted(&wanted) {
                self.observe(&mut observed).await;
                continue;
            }
            if let Attempt::Held = self.try_acquire_or_renew(&mut observed).await {
                break;
            }
        }
        tracing::info!(lease = %self.name, identity = %self.identity, "became leader");
        self.leading.send_replace(true);
        let leading = shutdown.child_token();
        let lead = lead(leading.clone());
        tokio::pin!(lead);
        let mut last_renew = Instant::now();
        let end = loop {
            tokio::select! {
                // Shutdown first: it also ends `lead` (whose token is its child).
                biased;
                () = shutdown.cancelled() => break LeadershipEnd::Shutdown,
                () = &mut lead => break LeadershipEnd::Finished,
                () = becomes(&mut wanted, false) => break LeadershipEnd::Yielded,
                () = tokio::time::sleep(self.timing.retry_period) => {}
            }
            match self.try_acquire_or_renew(&mut observed).await {
                Attempt::Held => last_renew = Instant::now(),
                Attempt::HeldByOther => {
                    tracing::warn!(lease = %self.name, holder = ?holder(&observed.spec), "the lease was taken: stepping down");
                    break LeadershipEnd::Lost;
                }
                Attempt::Failed if last_renew.elapsed() >= self.timing.renew_deadline => {
                    tracing::warn!(lease = %self.name, deadline = ?self.timing.renew_deadline, "could not renew within the renew deadline: stepping down");
                    break LeadershipEnd::Lost;
                }
                Attempt::Failed => {}
            }
        };
        // Not leading from here: what `lead` does after its token is
        // cancelled is its wind-down.
        self.leading.send_replace(false);
        leading.cancel();
        if end != LeadershipEnd::Finished {
            lead.await;
        }
        if end != LeadershipEnd::Lost {
            self.release(&observed).await;
        }
        tracing::info!(lease = %self.name, identity = %self.identity, ?end, "leadership ended");
        end
    }

    /// Reads the lease and notes when its record changed, as this
    /// candidate saw it.
    async fn observe(&self, observed: &mut Observed) {
        if let Ok(Some(lease)) = self.read().await
            && lease.spec != observed.spec
        {
            observed.spec = lease.spec;
            observed.at = Instant::now();
        }
    }

    async fn read(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await.inspect_err(|e| {
            tracing::warn!(lease = %self.name, error = %e, "reading the lease failed");
        })
    }

    async fn try_acquire_or_renew(&self, observed: &mut Observed) -> Attempt {
        let now = MicroTime(Timestamp::now());
        let duration_secs =
            i32::try_from(self.timing.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Ok(current) = self.read().await else {
            return Attempt::Failed;
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    observed.spec = created.spec;
                    observed.at = Instant::now();
                    Attempt::Held
                }
                Err(e) => {
                    tracing::debug!(lease = %self.name, error = %e, "creating the lease failed");
                    Attempt::Failed
                }
            };
        };
        if lease.spec != observed.spec {
            observed.spec = lease.spec.clone();
            observed.at = Instant::now();
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let mine = holder == self.identity;
        if !holder.is_empty() && !mine {
            let their_duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.timing.lease_duration, Duration::from_secs);
            if observed.at.elapsed() < their_duration {
                return Attempt::HeldByOther;
            }
        }
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(duration_secs),
            acquire_time: if mine {
                spec.acquire_time.clone()
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(
                spec.lease_transitions.unwrap_or(0) + i32::from(!mine && !holder.is_empty()),
            ),
            ..spec
        });
        // The read's resourceVersion stays in the metadata: a precondition.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                observed.spec = written.spec;
                observed.at = Instant::now();
                Attempt::Held
            }
            Err(e) => {
                tracing::debug!(lease = %self.name, error = %e, "writing the lease failed");
                Attempt::Failed
            }
        }
    }

    /// Gives the lease up if this candidate still holds it: no holder, a
    /// one-second duration (client-go's `ReleaseOnCancel`).
    async fn release(&self, observed: &Observed) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.identity.as_str())
            || lease.spec != observed.spec
        {
            return;
        }
        let now = MicroTime(Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        if let Err(e) = self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(lease = %self.name, error = %e, "releasing the lease failed");
        }
    }
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lease", &self.name)
            .field("identity", &self.identity)
            .field("timing", &self.timing)
            .field("leading", &*self.leading.borrow())
            .finish()
    }
}

fn holder(spec: &Option<LeaseSpec>) -> Option<&str> {
    spec.as_ref()?.holder_identity.as_deref()
}

/// Whether the candidate may campaign now (always, without a gate).
fn is_wanted(wanted: &Option<watch::Receiver<bool>>) -> bool {
    wanted.as_ref().is_none_or(|w| *w.borrow())
}

/// Resolves once the gate is `to` (never without a gate, or once its
/// sender is gone).
async fn becomes(wanted: &mut Option<watch::Receiver<bool>>, to: bool) {
    if let Some(w) = wanted
        && w.wait_for(|v| *v == to).await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

/// `period` stretched by up to 1.2× more, as client-go's `JitterUntil`.
fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + rand::random::<f64>() * 1.2)
}
