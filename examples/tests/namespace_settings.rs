//! The example controller against kinformer-sim: every case of
//! `kinformer_examples::settings_scenario`, checked on the server.
#![allow(clippy::unwrap_used)]

use kinformer_sim::Sim;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_settings_controller_creates_restores_and_deletes_configmaps() {
    let sim = Sim::builder()
        .build()
        .serve("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut cfg = kube::Config::new(sim.base_url().parse().unwrap());
    cfg.default_retry = false;
    let client = kube::Client::try_from(cfg).unwrap();
    let stats = kinformer_examples::settings_scenario::run(client, "settings")
        .await
        .unwrap();
    // Two creates, the restore of an edit and of a delete, and a delete at
    // least, each a reconcile.
    assert!(stats.succeeded >= 5, "{stats:?}");
}
