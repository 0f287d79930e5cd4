//! Helpers shared by the factory's tests.
#![allow(dead_code, clippy::unwrap_used)]

use kinformer_sim::{RunningSim, Sim};
use kube::Client;

/// An empty simulator on a loopback port and a client of it (no retries).
pub async fn sim() -> (RunningSim, Client) {
    let sim = Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    (sim, Client::try_from(cfg).unwrap())
}
