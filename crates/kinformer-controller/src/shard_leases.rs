//! Per-shard leases: N replicas share M shards of the work, each shard
//! owned through a Lease of its own, so that a dead replica's shards move to
//! the living ones and a new replica takes its share.
//!
//! Each replica keeps a member Lease, `{group}-member-{identity}`, renewed
//! like a leader's. Every retry period it lists the group's member leases
//! and counts as alive those renewed within a lease duration *as it
//! observed them* (its own clock, as an elector judges expiry). From the
//! sorted live members every replica computes the same assignment of
//! shards (rendezvous hashing of each shard over the members, capped at
//! ⌈M / members⌉ shards a member, so the shares are even and a change of
//! members moves few shards), and campaigns for the Lease of each shard
//! assigned to it, `{group}-shard-{i}`, with a [`LeaderElector`]. The
//! electors of the other shards keep reading their leases without writing,
//! so that when a shard comes to a replica its view of the old holder's
//! renewals is current: a dead replica's shard is taken about a lease
//! duration after its last renewal. A replica that holds a shard assigned
//! elsewhere releases it, and the new owner takes it within a retry
//! period.
//!
//! Two replicas whose views of the members differ for a moment may both
//! want a shard; its Lease lets one hold it. [`ShardLeases::owned`] is the
//! set of shards this replica holds now: resharding an informer to them
//! (`SharedInformerFactory::reshard` with [`ShardLeases::selector`]) makes
//! the controller's cache, and so its reconciles, follow the leases.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{Api, ListParams};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use kinformer_wire::shard::ShardSelector;

use crate::leader::{LeaderElector, LeadershipEnd, LeaseTiming};

/// One replica's share of M shards, each owned through its own Lease.
///
/// ```no_run
/// use kinformer_controller::ShardLeases;
/// use tokio_util::sync::CancellationToken;
///
/// # async fn run(client: kube::Client) {
/// let leases = ShardLeases::new(client, "kube-system", "my-controller", "pod-a", 8);
/// let mut owned = leases.owned();
/// let shutdown = CancellationToken::new();
/// tokio::spawn(async move {
///     while owned.changed().await.is_ok() {
///         let shards = owned.borrow().clone();
///         println!("this replica owns shards {shards:?}");
///     }
/// });
/// leases.run(shutdown).await;
/// # }
/// ```
pub struct ShardLeases {
    api: Api<Lease>,
    client: kube::Client,
    namespace: String,
    group: String,
    identity: String,
    shards: u32,
    timing: LeaseTiming,
    owned: watch::Sender<BTreeSet<u32>>,
}

impl ShardLeases {
    /// Replica `identity` (unique in the group, and usable in a Lease
    /// name: a pod name, say) of the group `group`, sharing `shards` shards
    /// (at least 1) through Leases in `namespace`, with client-go's timing.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        group: impl Into<String>,
        identity: impl Into<String>,
        shards: u32,
    ) -> Self {
        Self {
            api: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.to_owned(),
            group: group.into(),
            identity: identity.into(),
            shards: shards.max(1),
            timing: LeaseTiming::default(),
            owned: watch::Sender::new(BTreeSet::new()),
        }
    }

    /// Uses `timing` for the member and shard leases instead of client-go's.
    pub fn timing(mut self, timing: LeaseTiming) -> Self {
        self.timing = timing;
        self
    }

    /// The shards this replica holds the Leases of now, as a watch.
    pub fn owned(&self) -> watch::Receiver<BTreeSet<u32>> {
        self.owned.subscribe()
    }

    /// The number of shards.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// The name of shard `shard`'s Lease.
    pub fn shard_lease_name(&self, shard: u32) -> String {
        format!("{}-shard-{shard}", self.group)
    }

    /// The UID ranges of `owned` shards of `shards`, merged, for
    /// `SharedInformerFactory::reshard`. `None` when none is owned: then
    /// leave the informer where it is, or stop it (a reshard to `None`
    /// would cache the whole collection).
    pub fn selector(owned: &BTreeSet<u32>, shards: u32) -> Option<ShardSelector> {
        owned
            .iter()
            .map(|&i| ShardSelector::uid_shard(i, shards))
            .reduce(|a, b| a.union(&b).unwrap_or(a))
    }

    fn member_prefix(&self) -> String {
        format!("{}-member-", self.group)
    }

    /// Keeps this replica's member Lease, follows the group's members and
    /// campaigns for the shards assigned to this replica, until `shutdown`
    /// is cancelled; then releases every Lease it holds.
    pub async fn run(&self, shutdown: CancellationToken) {
        let wanted: Vec<watch::Sender<bool>> = (0..self.shards)
            .map(|_| watch::Sender::new(false))
            .collect();
        let member = LeaderElector::new(
            self.client.clone(),
            &self.namespace,
            format!("{}{}", self.member_prefix(), self.identity),
            self.identity.clone(),
        )
        .timing(self.timing);
        let membership = member.run(shutdown.clone(), |held| async move {
            held.cancelled().await;
        });
        let electors = wanted.iter().zip(0..).map(|(w, shard)| {
            let elector = LeaderElector::new(
                self.client.clone(),
                &self.namespace,
                self.shard_lease_name(shard),
                self.identity.clone(),
            )
            .timing(self.timing)
            .only_while(w.subscribe());
            self.hold(elector, shard, shutdown.clone())
        });
        tokio::join!(
            membership,
            futures::future::join_all(electors),
            self.follow_members(&wanted, &shutdown),
        );
    }

    /// Campaigns for one shard again and again until shutdown, marking it
    /// owned while its Lease is held.
    async fn hold(&self, elector: LeaderElector, shard: u32, shutdown: CancellationToken) {
        loop {
            let end = elector
                .run(shutdown.clone(), |held| async move {
                    self.owned.send_modify(|o| {
                        o.insert(shard);
                    });
                    tracing::info!(group = %self.group, identity = %self.identity, shard, "shard taken");
                    held.cancelled().await;
                    self.owned.send_modify(|o| {
                        o.remove(&shard);
                    });
                })
                .await;
            if end == LeadershipEnd::Shutdown || shutdown.is_cancelled() {
                return;
            }
            tracing::info!(group = %self.group, identity = %self.identity, shard, ?end, "shard given up");
        }
    }

    /// Every retry period: the live members, the assignment, and which
    /// shards this replica campaigns for.
    async fn follow_members(&self, wanted: &[watch::Sender<bool>], shutdown: &CancellationToken) {
        let prefix = self.member_prefix();
        let mut seen: HashMap<String, (Option<LeaseSpec>, Instant)> = HashMap::new();
        loop {
            match self.api.list(&ListParams::default()).await {
                Ok(list) => {
                    let now = Instant::now();
                    let mut members = BTreeSet::from([self.identity.clone()]);
                    let mut present = BTreeSet::new();
                    for lease in list.items {
                        let Some(name) = lease.metadata.name.as_deref() else {
                            continue;
                        };
                        let Some(who) = name.strip_prefix(&prefix) else {
                            continue;
                        };
                        present.insert(who.to_owned());
                        let entry = seen
                            .entry(who.to_owned())
                            .or_insert_with(|| (lease.spec.clone(), now));
                        if entry.0 != lease.spec {
                            *entry = (lease.spec.clone(), now);
                        }
                        let held = lease
                            .spec
                            .as_ref()
                            .and_then(|s| s.holder_identity.as_deref())
                            .is_some_and(|h| !h.is_empty());
                        if held && entry.1.elapsed() < self.timing.lease_duration {
                            members.insert(who.to_owned());
                        }
                    }
                    seen.retain(|who, _| present.contains(who));
                    let members: Vec<String> = members.into_iter().collect();
                    let assignment = assign(self.shards, &members);
                    for (w, owner) in wanted.iter().zip(&assignment) {
                        w.send_if_modified(|v| {
                            let mine = members[*owner] == self.identity;
                            std::mem::replace(v, mine) != mine
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(group = %self.group, error = %e, "listing the member leases failed");
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(self.timing.retry_period) => {}
            }
        }
    }
}

impl std::fmt::Debug for ShardLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardLeases")
            .field("group", &self.group)
            .field("identity", &self.identity)
            .field("shards", &self.shards)
            .field("owned", &*self.owned.borrow())
            .finish()
    }
}

/// Which member (an index into `members`, sorted) owns each shard:
/// rendezvous hashing, each shard to the member of highest weight that
/// does not already have ⌈shards / members⌉.
fn assign(shards: u32, members: &[String]) -> Vec<usize> {
    let n = members.len().max(1);
    let cap = (shards as usize).div_ceil(n);
    let mut load = vec![0usize; n];
    (0..shards)
        .map(|shard| {
            let mut ranked: Vec<usize> = (0..members.len()).collect();
            ranked.sort_by_key(|&m| std::cmp::Reverse(weight(&members[m], shard)));
            let owner = ranked
                .into_iter()
                .find(|&m| load[m] < cap)
                .unwrap_or_default();
            if let Some(l) = load.get_mut(owner) {
                *l += 1;
            }
            owner
        })
        .collect()
}

/// A member's weight for a shard: 64-bit FNV-1a of both, mixed (the same
/// in every replica, whatever its build).
fn weight(member: &str, shard: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain([0]).chain(shard.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("replica-{i}")).collect()
    }

    #[test]
    fn shares_are_even_and_a_change_of_members_moves_few_shards() {
        for n in 1..6 {
            let a = assign(12, &members(n));
            let cap = 12usize.div_ceil(n);
            for m in 0..n {
                assert!(a.iter().filter(|&&o| o == m).count() <= cap);
            }
            assert!(a.iter().all(|&o| o < n));
        }
        // Three replicas of six shards; replica-1 dies.
        let three = members(3);
        let before = assign(6, &three);
        let two = vec![three[0].clone(), three[2].clone()];
        let after = assign(6, &two);
        let kept = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| three[**b] == two[**a])
            .count();
        let dead = before.iter().filter(|&&o| o == 1).count();
        // The dead one's shards move; of the others, few do.
        assert!(kept >= 6 - dead - 1, "{before:?} {after:?}");
    }

    #[test]
    fn every_replica_computes_the_same_assignment() {
        let m = members(4);
        assert_eq!(assign(16, &m), assign(16, &m.clone()));
        assert_eq!(weight("a", 1), weight("a", 1));
        assert_ne!(weight("a", 1), weight("a", 2));
    }

    #[test]
    fn the_selector_of_owned_shards_merges_their_ranges() {
        assert_eq!(ShardLeases::selector(&BTreeSet::new(), 4), None);
        let s = ShardLeases::selector(&BTreeSet::from([1, 2]), 4).unwrap();
        assert_eq!(s.ranges().len(), 1);
        assert!(s.ranges()[0].start == 1 << 62);
    }
}
