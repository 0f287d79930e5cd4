//! Realistic object templates: a ~4 KB Pod (labels, annotations, ownerReferences, two managedFields
//! entries, two containers, nodeName, status with conditions) and a small ConfigMap.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::object::{ObjMeta, PreEncoded, set_annotation, with_metadata};
use crate::store::COMMIT_ANNOTATION;

/// Nodes pods are spread over.
pub const NODES: u64 = 100;

/// The name of the `i`-th namespace of a fill.
pub fn namespace_name(i: usize) -> String {
    format!("ns-{i}")
}

/// The per-object string fields of the Pod template: JSON pointer and value for the `i`-th Pod.
fn pod_fields(namespace: &str, name: &str, i: u64) -> [(&'static str, String); POD_FIELDS] {
    let app = format!("app-{}", i % 50);
    let rs = format!("{app}-7d9f8c6b5");
    let image = format!("registry.example.invalid/{app}:1.{}.0", i % 7);
    let ip = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
    let tier = if i.is_multiple_of(3) {
        "frontend"
    } else {
        "backend"
    };
    [
        ("/metadata/name", name.to_string()),
        ("/metadata/namespace", namespace.to_string()),
        ("/metadata/generateName", format!("{rs}-")),
        ("/metadata/labels/app", app.clone()),
        ("/metadata/labels/app.kubernetes.io~1name", app),
        ("/metadata/labels/tier", tier.to_string()),
        ("/metadata/labels/index", (i % 1000).to_string()),
        ("/metadata/annotations/kinformer.dev~1seq", i.to_string()),
        ("/metadata/ownerReferences/0/name", rs),
        (
            "/metadata/ownerReferences/0/uid",
            format!("6f1e2d3c-4b5a-4968-8776-{:012x}", i % 50),
        ),
        ("/spec/nodeName", format!("node-{}", i % NODES)),
        ("/spec/containers/0/image", image.clone()),
        ("/spec/containers/0/env/0/value", name.to_string()),
        ("/spec/containers/0/env/1/value", namespace.to_string()),
        ("/status/hostIP", format!("192.0.2.{}", i % NODES)),
        ("/status/podIP", ip.clone()),
        ("/status/podIPs/0/ip", ip),
        ("/status/containerStatuses/0/image", image),
        (
            "/status/containerStatuses/0/containerID",
            format!("containerd://{i:064x}"),
        ),
        (
            "/status/containerStatuses/1/containerID",
            format!("containerd://{:064x}", i + 1),
        ),
    ]
}

/// Number of per-object fields of the Pod template.
const POD_FIELDS: usize = 20;

/// The cached base Pod every template Pod is derived from.
fn base_pod() -> &'static Value {
    static BASE: OnceLock<Value> = OnceLock::new();
    BASE.get_or_init(|| build_pod("ns", "name", 0))
}

/// A ~4 KB Pod named `name` in `namespace`; `i` varies labels, node and IPs.
///
/// Built by cloning a cached base and setting the varying fields (much cheaper than building it).
pub fn pod(namespace: &str, name: &str, i: u64) -> Value {
    let mut v = base_pod().clone();
    for (ptr, val) in pod_fields(namespace, name, i) {
        if let Some(slot) = v.pointer_mut(ptr) {
            *slot = Value::String(val);
        }
    }
    v
}

/// A placeholder marking slot `k` in the encoded template (a plain DNS-label-like string, so it
/// encodes verbatim and occurs nowhere else).
fn marker(k: usize) -> String {
    format!("zqkinformerslot{k:02}qz")
}

/// What goes into one cut of a [`PodTemplate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The `k`-th entry of [`pod_fields`].
    Field(usize),
    /// `metadata.uid`.
    Uid,
    /// `metadata.creationTimestamp`.
    Created,
    /// `metadata.resourceVersion`, stamped at commit.
    Rv,
    /// The commit-time annotation, stamped at commit.
    Commit,
}

/// The template Pod pre-encoded exactly as the store encodes a created Pod (`apiVersion`, `kind`,
/// `uid`, `creationTimestamp`, `generation`, `resourceVersion` and, when on, the commit-time
/// annotation), cut at every per-object string. Filling stamps the per-object values between the
/// cuts instead of building and encoding a JSON value per Pod.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    /// Literal bytes; `segments[k]` precedes `slots[k]`; one more segment than slots.
    segments: Vec<Vec<u8>>,
    slots: Vec<Slot>,
    /// Labels of the base Pod (the varying ones are overwritten per object).
    labels: BTreeMap<String, String>,
    /// Upper bound of the stamped values' total length, for one allocation per object.
    len_hint: usize,
}

impl PodTemplate {
    /// Build the template; `stamp_commit_time` mirrors the store's setting.
    pub fn new(stamp_commit_time: bool) -> Self {
        let mut v = base_pod().clone();
        for (k, (ptr, _)) in pod_fields("ns", "name", 0).iter().enumerate() {
            if let Some(slot) = v.pointer_mut(ptr) {
                *slot = Value::String(marker(k));
            }
        }
        let Value::Object(mut obj) = v else {
            return Self::empty();
        };
        // The same steps as the store's create: type, identity, then resourceVersion and stamp.
        obj.insert("apiVersion".into(), Value::String("v1".into()));
        obj.insert("kind".into(), Value::String("Pod".into()));
        let uid_at = POD_FIELDS;
        let (created_at, rv_at, commit_at) = (uid_at + 1, uid_at + 2, uid_at + 3);
        with_metadata(&mut obj, |md| {
            md.insert("uid".into(), Value::String(marker(uid_at)));
            md.insert(
                "creationTimestamp".into(),
                Value::String(marker(created_at)),
            );
            md.insert("generation".into(), Value::from(1));
            md.insert("resourceVersion".into(), Value::String(marker(rv_at)));
        });
        if stamp_commit_time {
            set_annotation(&mut obj, COMMIT_ANNOTATION, marker(commit_at));
        }
        let labels = ObjMeta::from_value(&Value::Object(obj.clone())).labels;
        let mut encoded = Vec::new();
        if crate::encode::write(&mut encoded, &obj).is_err() {
            return Self::empty();
        }
        // Find every marker, in byte order.
        let mut cuts: Vec<(usize, usize, Slot)> = Vec::new();
        for k in 0..=commit_at {
            let m = marker(k);
            let slot = match k {
                k if k < POD_FIELDS => Slot::Field(k),
                k if k == uid_at => Slot::Uid,
                k if k == created_at => Slot::Created,
                k if k == rv_at => Slot::Rv,
                _ => Slot::Commit,
            };
            let mut from = 0;
            while let Some(pos) = find(&encoded[from..], m.as_bytes()) {
                cuts.push((from + pos, m.len(), slot));
                from += pos + m.len();
            }
        }
        cuts.sort_unstable_by_key(|c| c.0);
        let mut segments = Vec::with_capacity(cuts.len() + 1);
        let mut slots = Vec::with_capacity(cuts.len());
        let mut last = 0;
        for (pos, len, slot) in cuts {
            segments.push(encoded[last..pos].to_vec());
            slots.push(slot);
            last = pos + len;
        }
        segments.push(encoded[last..].to_vec());
        let len_hint = segments.iter().map(Vec::len).sum::<usize>() + slots.len() * 72;
        Self {
            segments,
            slots,
            labels,
            len_hint,
        }
    }

    fn empty() -> Self {
        Self {
            segments: vec![b"{}".to_vec()],
            slots: Vec::new(),
            labels: BTreeMap::new(),
            len_hint: 2,
        }
    }

    /// The `i`-th Pod `namespace/name`, encoded, with its resourceVersion (and commit time) left
    /// for the store to stamp at commit.
    pub fn stamp(
        &self,
        namespace: &str,
        name: &str,
        i: u64,
        uid: &str,
        created: &str,
    ) -> PreEncoded {
        let fields = pod_fields(namespace, name, i);
        let mut bytes = Vec::with_capacity(self.len_hint);
        let (mut rv_at, mut commit_at) = (None, None);
        for (seg, slot) in self.segments.iter().zip(&self.slots) {
            bytes.extend_from_slice(seg);
            match *slot {
                Slot::Field(k) => push_json_str(&mut bytes, &fields[k].1),
                Slot::Uid => push_json_str(&mut bytes, uid),
                Slot::Created => push_json_str(&mut bytes, created),
                Slot::Rv => rv_at = Some(bytes.len()),
                Slot::Commit => commit_at = Some(bytes.len()),
            }
        }
        if let Some(last) = self.segments.last() {
            bytes.extend_from_slice(last);
        }
        let mut labels = self.labels.clone();
        let mut node_name = None;
        for (ptr, val) in fields {
            if let Some(key) = ptr.strip_prefix("/metadata/labels/") {
                labels.insert(key.replace("~1", "/").replace("~0", "~"), val);
            } else if ptr == "/spec/nodeName" {
                node_name = Some(val);
            }
        }
        PreEncoded {
            rv_at: rv_at.unwrap_or(0),
            commit_at,
            metadata_at: crate::object::metadata_range(&bytes),
            bytes,
            meta: ObjMeta {
                namespace: namespace.to_string(),
                name: name.to_string(),
                labels,
                node_name,
                rv: 0,
                uid: uid.to_string(),
                generation: 1,
                created: created.to_string(),
            },
        }
    }
}

/// Append the JSON string contents of `s` (without quotes), escaping only when needed.
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.extend_from_slice(s.as_bytes());
    } else if let Ok(q) = serde_json::to_string(s) {
        out.extend_from_slice(&q.as_bytes()[1..q.len() - 1]);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
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

    fn normalized(mut v: Value) -> Value {
        let md = v.get_mut("metadata").unwrap();
        md["uid"] = Value::Null;
        md["creationTimestamp"] = Value::Null;
        let commit = &mut md["annotations"][COMMIT_ANNOTATION];
        assert!(commit.as_str().unwrap().parse::<u128>().unwrap() > 0);
        *commit = Value::Null;
        v
    }

    #[test]
    fn stamped_template_equals_created_pod() {
        use crate::resource::{Registry, ResourceDef};
        use crate::store::{Store, StoreConfig};
        let slow = Store::new(
            Registry::new(ResourceDef::builtins()),
            StoreConfig::default(),
        );
        let fast = Store::new(
            Registry::new(ResourceDef::builtins()),
            StoreConfig::default(),
        );
        let res = slow.registry().find("", "v1", "pods").unwrap();
        let template = PodTemplate::new(true);
        for i in [0u64, 1, 7, 12345, 1 << 20] {
            let (ns, name) = (format!("ns-{}", i % 3), format!("pod-{i}"));
            let a = slow.create(res, None, pod(&ns, &name, i)).unwrap();
            let pre = template.stamp(
                &ns,
                &name,
                i,
                "0f0e0d0c-0b0a-4908-8706-050403020100",
                "2025-01-02T03:04:05Z",
            );
            assert_eq!(fast.create_encoded_many(res, vec![pre]).0, 1);
            let b = fast.get(res, &ns, &name).unwrap();
            assert_eq!(a.meta.rv, b.meta.rv);
            let bv = b.to_value().unwrap();
            assert_eq!(
                bv["metadata"]["uid"],
                "0f0e0d0c-0b0a-4908-8706-050403020100"
            );
            assert_eq!(bv["metadata"]["resourceVersion"], a.meta.rv.to_string());
            assert_eq!(normalized(a.to_value().unwrap()), normalized(bv.clone()));
            assert_eq!(ObjMeta::from_value(&bv), b.meta);
            assert_eq!(
                a.bytes.len(),
                b.bytes.len() + 36 - a.meta.uid.len() + 20 - a.meta.created.len()
            );
            // The watch line is the same shape.
            let ev = fast.subscribe(res, Some(a.meta.rv - 1)).unwrap().backlog;
            assert!(ev[0].line.starts_with(br#"{"type":"ADDED","object":{"#));
            assert!(ev[0].line.ends_with(b"}}\n"));
        }
        // Existing objects are skipped.
        let pre = template.stamp("ns-0", "pod-0", 0, "u", "t");
        assert_eq!(fast.create_encoded_many(res, vec![pre]).0, 0);
    }

    #[test]
    fn template_without_commit_stamp() {
        let t = PodTemplate::new(false);
        let pre = t.stamp("ns-1", "p", 3, "u", "t");
        assert!(pre.commit_at.is_none());
        let s = String::from_utf8(pre.bytes).unwrap();
        assert!(!s.contains(COMMIT_ANNOTATION));
        assert!(s[..pre.rv_at].ends_with(r#""resourceVersion":""#));
    }

    #[test]
    fn pod_is_about_4k() {
        let len = serde_json::to_vec(&pod("ns-0", "pod-123", 123))
            .unwrap()
            .len();
        assert!((3000..6000).contains(&len), "pod template is {len} bytes");
    }
}
