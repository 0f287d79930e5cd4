//! Realistic object templates: a ~4 KB Pod (labels, annotations, ownerReferences, two managedFields
//! entries, two containers, nodeName, status with conditions) and a small ConfigMap.

use std::sync::OnceLock;

use serde_json::{Value, json};

/// Nodes pods are spread over.
pub const NODES: u64 = 100;

/// The name of the `i`-th namespace of a fill.
pub fn namespace_name(i: usize) -> String {
    format!("ns-{i}")
}

/// A ~4 KB Pod named `name` in `namespace`; `i` varies labels, node and IPs.
///
/// Built by cloning a cached base and setting the varying fields (much cheaper than building it).
pub fn pod(namespace: &str, name: &str, i: u64) -> Value {
    static BASE: OnceLock<Value> = OnceLock::new();
    let mut v = BASE.get_or_init(|| build_pod("ns", "name", 0)).clone();
    let app = format!("app-{}", i % 50);
    let rs = format!("{app}-7d9f8c6b5");
    let image = format!("registry.example.invalid/{app}:1.{}.0", i % 7);
    let ip = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
    let fields: [(&str, Value); 19] = [
        ("/metadata/name", name.into()),
        ("/metadata/namespace", namespace.into()),
        ("/metadata/generateName", format!("{rs}-").into()),
        ("/metadata/labels/app", app.clone().into()),
        ("/metadata/labels/app.kubernetes.io~1name", app.into()),
        (
            "/metadata/labels/tier",
            if i.is_multiple_of(3) {
                "frontend"
            } else {
                "backend"
            }
            .into(),
        ),
        ("/metadata/labels/index", (i % 1000).to_string().into()),
        (
            "/metadata/annotations/kinformer.dev~1seq",
            i.to_string().into(),
        ),
        ("/metadata/ownerReferences/0/name", rs.into()),
        (
            "/metadata/ownerReferences/0/uid",
            format!("6f1e2d3c-4b5a-4968-8776-{:012x}", i % 50).into(),
        ),
        ("/spec/nodeName", format!("node-{}", i % NODES).into()),
        ("/spec/containers/0/image", image.clone().into()),
        ("/spec/containers/0/env/0/value", name.into()),
        ("/spec/containers/0/env/1/value", namespace.into()),
        ("/status/hostIP", format!("192.0.2.{}", i % NODES).into()),
        ("/status/podIP", ip.clone().into()),
        ("/status/podIPs/0/ip", ip.into()),
        ("/status/containerStatuses/0/image", image.into()),
        (
            "/status/containerStatuses/0/containerID",
            format!("containerd://{i:064x}").into(),
        ),
    ];
    for (ptr, val) in fields {
        if let Some(slot) = v.pointer_mut(ptr) {
            *slot = val;
        }
    }
    if let Some(slot) = v.pointer_mut("/status/containerStatuses/1/containerID") {
        *slot = format!("containerd://{:064x}", i + 1).into();
    }
    v
}

fn build_pod(namespace: &str, name: &str, i: u64) -> Value {
    let app = format!("app-{}", i % 50);
    let rs = format!("{app}-7d9f8c6b5");
    let node = format!("node-{}", i % NODES);
    let ip = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
    let ts = "2025-01-01T00:00:00Z";
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "generateName": format!("{rs}-"),
            "labels": {
                "app": app,
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/part-of": "kinformer-loadtest",
                "pod-template-hash": "7d9f8c6b5",
                "tier": if i.is_multiple_of(3) { "frontend" } else { "backend" },
                "index": (i % 1000).to_string()
            },
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": ts,
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
                "kinformer.dev/seq": i.to_string()
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs,
                "uid": format!("6f1e2d3c-4b5a-4968-8776-{:012x}", i % 50),
                "controller": true,
                "blockOwnerDeletion": true
            }],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:tier": {}},
                            "f:ownerReferences": {".": {}, "k:{\"uid\":\"6f1e2d3c\"}": {}}},
                        "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:imagePullPolicy": {}, "f:name": {},
                            "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:protocol": {}}},
                            "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}},
                            "k:{\"name\":\"sidecar\"}": {".": {}, "f:image": {}, "f:name": {}}},
                            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:terminationGracePeriodSeconds": {}}
                    }
                },
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": ts,
                    "fieldsType": "FieldsV1",
                    "subresource": "status",
                    "fieldsV1": {
                        "f:status": {"f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                            "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                            "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                            "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {".": {}, "k:{\"ip\":\"10.0.0.1\"}": {".": {}, "f:ip": {}}}, "f:startTime": {}}
                    }
                }
            ]
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "enableServiceLinks": true,
            "priority": 0,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            ],
            "containers": [
                {
                    "name": "app",
                    "image": format!("registry.example.invalid/{app}:1.{}.0", i % 7),
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["--port=8080", "--log-level=info"],
                    "env": [{"name": "POD_NAME", "value": name}, {"name": "POD_NAMESPACE", "value": namespace}],
                    "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
                    "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}]
                },
                {
                    "name": "sidecar",
                    "image": "registry.example.invalid/envoy:1.30.1",
                    "imagePullPolicy": "IfNotPresent",
                    "resources": {"limits": {"cpu": "200m", "memory": "128Mi"}, "requests": {"cpu": "50m", "memory": "64Mi"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File"
                }
            ],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]
        },
        "status": {
            "phase": "Running",
            "hostIP": format!("192.0.2.{}", i % NODES),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts,
            "qosClass": "Burstable",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": ts},
                {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": ts},
                {"type": "ContainersReady", "status": "True", "lastProbeTime": null, "lastTransitionTime": ts},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": ts}
            ],
            "containerStatuses": [
                {"name": "app", "ready": true, "restartCount": 0, "started": true, "image": format!("registry.example.invalid/{app}:1.{}.0", i % 7),
                    "imageID": "registry.example.invalid/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                    "containerID": format!("containerd://{:064x}", i), "state": {"running": {"startedAt": ts}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "started": true, "image": "registry.example.invalid/envoy:1.30.1",
                    "imageID": "registry.example.invalid/envoy@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210",
                    "containerID": format!("containerd://{:064x}", i + 1), "state": {"running": {"startedAt": ts}}}
            ]
        }
    })
}

/// A small ConfigMap.
pub fn configmap(namespace: &str, name: &str, i: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": format!("app-{}", i % 50)}},
        "data": {"index": i.to_string(), "config.yaml": "key: value\nother: 42\n"}
    })
}

/// An object of the named resource: a Pod or ConfigMap template, else a bare object with a `spec`.
pub fn object(resource: &str, namespace: &str, name: &str, i: u64) -> Value {
    match resource {
        "pods" => pod(namespace, name, i),
        "configmaps" => configmap(namespace, name, i),
        _ => {
            json!({"metadata": {"name": name, "namespace": namespace, "labels": {"app": format!("app-{}", i % 50)}},
            "spec": {"index": i}})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_pod_equals_built_pod() {
        for i in [0, 1, 7, 12345] {
            assert_eq!(
                pod("ns-3", &format!("p-{i}"), i),
                build_pod("ns-3", &format!("p-{i}"), i)
            );
        }
    }

    #[test]
    fn pod_is_about_4k() {
        let len = serde_json::to_vec(&pod("ns-0", "pod-123", 123))
            .unwrap()
            .len();
        assert!((3000..6000).contains(&len), "pod template is {len} bytes");
    }
}
