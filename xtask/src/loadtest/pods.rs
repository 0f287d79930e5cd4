//! A realistic ~4 KB Pod (labels, annotations, owner, two managedFields
//! entries, two containers, status with conditions), stamped per object.

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// Annotation carrying the source's commit time (ns since the Unix epoch).
pub const COMMIT_ANNOTATION: &str = "kinformer.dev/commit-unix-nanos";

/// Number of namespaces objects are spread over.
pub const NAMESPACES: usize = 20;

/// The template every object is cloned from.
pub fn template() -> anyhow::Result<Pod> {
    let fields = |manager: &str| {
        json!({
            "manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2026-11-01T10:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}},
                "f:ownerReferences": {".": {}, "k:{\"uid\":\"5f0c7d1e-1111-2222-3333-444455556666\"}": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {}}, "f:resources": {}}}}}
        })
    };
    let container = |name: &str, image: &str| {
        json!({
            "name": name, "image": image, "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10},
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
        })
    };
    let condition = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": "2026-11-01T10:00:05Z"});
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "template", "namespace": "ns-0", "uid": "00000000-0000-0000-0000-000000000000",
            "resourceVersion": "1", "creationTimestamp": "2026-11-01T10:00:00Z", "generateName": "web-7d4b9c8f6-",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6", "tier": "frontend", "env": "prod"},
            "annotations": {"kubernetes.io/psp": "restricted", "prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d4b9c8f6",
                "uid": "5f0c7d1e-1111-2222-3333-444455556666", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [fields("kube-controller-manager"), fields("kubelet")]
        },
        "spec": {
            "containers": [container("app", "registry.example/web:1.2.3"), container("sidecar", "registry.example/proxy:0.9")],
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "nodeName": "node-0", "serviceAccountName": "default", "restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.244.0.10", "startTime": "2026-11-01T10:00:01Z", "qosClass": "Burstable",
            "conditions": [condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "image": "registry.example/web:1.2.3", "imageID": "sha256:0123456789abcdef", "started": true,
                 "containerID": "containerd://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "state": {"running": {"startedAt": "2026-11-01T10:00:03Z"}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "image": "registry.example/proxy:0.9", "imageID": "sha256:fedcba9876543210", "started": true,
                 "containerID": "containerd://bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", "state": {"running": {"startedAt": "2026-11-01T10:00:03Z"}}}
            ]
        }
    });
    Ok(serde_json::from_value(pod)?)
}

/// Object `i` of the set: name, namespace, node, resourceVersion and commit
/// time stamped on a clone of the template.
pub fn stamp(template: &Pod, i: usize, rv: u64, commit_unix_nanos: u128) -> Pod {
    let mut pod = template.clone();
    let meta = &mut pod.metadata;
    meta.name = Some(name(i));
    meta.namespace = Some(namespace(i));
    meta.resource_version = Some(rv.to_string());
    meta.uid = Some(format!("00000000-0000-4000-8000-{i:012}"));
    meta.annotations
        .get_or_insert_default()
        .insert(COMMIT_ANNOTATION.into(), commit_unix_nanos.to_string());
    if let Some(spec) = pod.spec.as_mut() {
        spec.node_name = Some(format!("node-{}", i % 100));
    }
    pod
}

/// The name of object `i`.
pub fn name(i: usize) -> String {
    format!("web-7d4b9c8f6-{i:08}")
}

/// The namespace of object `i`.
pub fn namespace(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

/// The cache key of object `i`.
pub fn key(i: usize) -> String {
    format!("{}/{}", namespace(i), name(i))
}
