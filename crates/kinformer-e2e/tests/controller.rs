//! The example controller against the real kube-apiserver: every case of
//! `kinformer_examples::settings_scenario`, checked on the server.
#![allow(clippy::unwrap_used)]

use kinformer_e2e::{real_client, unique};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real kube-apiserver: run cargo xtask e2e"]
async fn the_settings_controller_creates_restores_and_deletes_configmaps() {
    let client = real_client(false).await.unwrap();
    let stats = kinformer_examples::settings_scenario::run(client, &unique("settings"))
        .await
        .unwrap();
    assert!(stats.succeeded >= 5, "{stats:?}");
}
