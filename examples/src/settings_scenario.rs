//! Drives a cluster through every case of the
//! [`namespace_settings`](crate::namespace_settings) controller and checks
//! each outcome on the server: the test of the example, run against the
//! simulator (`examples/tests`) and against kube-apiserver (the e2e suite).

use std::future::Future;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kinformer::SharedInformerFactory;
use kinformer::controller::ControllerStats;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::namespace_settings::{CONFIGMAP, ENABLED, LABEL, SettingsController};

/// How long one outcome may take to show on the server.
const OUTCOME: Duration = Duration::from_secs(30);

/// Retries `check` until it answers `Some`, for at most [`OUTCOME`].
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + OUTCOME;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn namespace(name: &str, labelled: bool) -> anyhow::Result<Namespace> {
    let labels = if labelled {
        json!({LABEL: ENABLED})
    } else {
        json!({})
    };
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}}),
    )?)
}

async fn settings(client: &kube::Client, ns: &str) -> anyhow::Result<Option<ConfigMap>> {
    Ok(Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(CONFIGMAP)
        .await?)
}

fn names_namespace(cm: &ConfigMap, ns: &str) -> bool {
    cm.data
        .as_ref()
        .and_then(|d| d.get("namespace"))
        .map(String::as_str)
        == Some(ns)
}

/// Creates two namespaces named after `prefix` (one labelled), runs the
/// controller on `client` and checks, step by step: the labelled namespace
/// gets its ConfigMap and the other none; an edit is undone; a delete is
/// undone; labelling the second creates its ConfigMap; unlabelling the
/// first deletes its ConfigMap; a shutdown returns the counters.
pub async fn run(client: kube::Client, prefix: &str) -> anyhow::Result<ControllerStats> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let (a, b) = (format!("{prefix}-a"), format!("{prefix}-b"));
    namespaces
        .create(&PostParams::default(), &namespace(&a, true)?)
        .await?;
    namespaces
        .create(&PostParams::default(), &namespace(&b, false)?)
        .await?;

    let factory = SharedInformerFactory::new(client.clone());
    let controller = SettingsController::new(&factory, client.clone())?;
    let handle = controller.handle();
    factory.start()?;
    let running = tokio::spawn(controller.run());

    let first = eventually("the labelled namespace's ConfigMap", || async {
        Ok(settings(&client, &a)
            .await?
            .filter(|cm| names_namespace(cm, &a)))
    })
    .await?;
    if settings(&client, &b).await?.is_some() {
        bail!("an unlabelled namespace got a ConfigMap");
    }

    let api_a: Api<ConfigMap> = Api::namespaced(client.clone(), &a);
    let edit = Patch::Merge(json!({"data": {"namespace": "someone-else"}}));
    api_a
        .patch(CONFIGMAP, &PatchParams::default(), &edit)
        .await?;
    eventually("the edit undone", || async {
        let cm = settings(&client, &a).await?;
        Ok(cm
            .filter(|cm| names_namespace(cm, &a))
            .filter(|cm| cm.metadata.resource_version != first.metadata.resource_version))
    })
    .await?;

    api_a.delete(CONFIGMAP, &DeleteParams::default()).await?;
    eventually("the delete undone", || async {
        let cm = settings(&client, &a).await?;
        Ok(cm.filter(|cm| cm.metadata.uid != first.metadata.uid))
    })
    .await?;

    let label = Patch::Merge(json!({"metadata": {"labels": {LABEL: ENABLED}}}));
    namespaces
        .patch(&b, &PatchParams::default(), &label)
        .await?;
    eventually("the newly labelled namespace's ConfigMap", || async {
        Ok(settings(&client, &b)
            .await?
            .filter(|cm| names_namespace(cm, &b)))
    })
    .await?;

    let unlabel = Patch::Merge(json!({"metadata": {"labels": {LABEL: null}}}));
    namespaces
        .patch(&a, &PatchParams::default(), &unlabel)
        .await?;
    eventually("the unlabelled namespace's ConfigMap deleted", || async {
        Ok(settings(&client, &a).await?.is_none().then_some(()))
    })
    .await?;

    handle.shutdown();
    let stats = tokio::time::timeout(OUTCOME, running)
        .await
        .context("the controller's shutdown")???;
    factory.shutdown().await;
    if stats.panicked > 0 || stats.timed_out > 0 {
        bail!("reconciles panicked or timed out: {stats:?}");
    }
    Ok(stats)
}
