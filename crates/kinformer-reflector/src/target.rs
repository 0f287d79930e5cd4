//! What a reflector lists and watches, and the LIST/WATCH requests for it.

use std::time::Duration;

use kube::client::Body;
use kube_core::Resource;

use crate::error::ReflectorError;
use kinformer_wire::shard::ShardSelector;

const JSON: &str = "application/json";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// Protobuf first, JSON when the server has no protobuf for the resource.
const METADATA_PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// The same for a LIST.
const METADATA_LIST_PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// The collection a reflector lists and watches: URL path, selectors, and
/// whether the server should send metadata only (`PartialObjectMetadata`).
///
/// ```
/// use kinformer_reflector::ListWatchTarget;
/// use k8s_openapi::api::core::v1::Pod;
/// let t = ListWatchTarget::of::<Pod>(&(), Some("prod")).labels("app=web");
/// assert_eq!(t.url_path(), "/api/v1/namespaces/prod/pods");
/// assert_eq!(t.label_selector(), Some("app=web"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ListWatchTarget {
    url_path: String,
    metadata_only: bool,
    label_selector: Option<String>,
    field_selector: Option<String>,
    shard: Option<ShardSelector>,
}

impl ListWatchTarget {
    /// The collection of `K` in `namespace` (all namespaces when `None`).
    pub fn of<K: Resource>(dt: &K::DynamicType, namespace: Option<&str>) -> Self {
        Self::new(K::url_path(dt, namespace))
    }

    /// A collection by URL path, e.g. `/api/v1/pods`.
    pub fn new(url_path: impl Into<String>) -> Self {
        Self {
            url_path: url_path.into(),
            metadata_only: false,
            label_selector: None,
            field_selector: None,
            shard: None,
        }
    }

    /// Restricts to objects matching a label selector (`app=web,tier!=db`).
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Lists and watches only `shard` (KEP-5866's `shardSelector`). A
    /// server that does not apply it sends everything; the reflector then
    /// leaves the objects outside the shard out of the cache.
    pub fn shard(mut self, shard: ShardSelector) -> Self {
        self.shard = Some(shard);
        self
    }

    /// The same collection in `shard` (`None`: all of it).
    pub fn with_shard(mut self, shard: Option<ShardSelector>) -> Self {
        self.shard = shard;
        self
    }

    /// The shard, if any.
    pub fn shard_selector(&self) -> Option<&ShardSelector> {
        self.shard.as_ref()
    }

    /// Restricts to objects matching a field selector (`spec.nodeName=n1`).
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into()).filter(|s| !s.is_empty());
        self
    }

    /// Asks for `PartialObjectMetadata` instead of full objects.
    pub fn metadata_only(mut self, on: bool) -> Self {
        self.metadata_only = on;
        self
    }

    /// The URL path.
    pub fn url_path(&self) -> &str {
        &self.url_path
    }

    /// The label selector.
    pub fn label_selector(&self) -> Option<&str> {
        self.label_selector.as_deref()
    }

    /// The field selector.
    pub fn field_selector(&self) -> Option<&str> {
        self.field_selector.as_deref()
    }

    /// Whether only metadata is requested.
    pub fn is_metadata_only(&self) -> bool {
        self.metadata_only
    }

    fn query(&self) -> form_urlencoded::Serializer<'static, String> {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if let Some(l) = &self.label_selector {
            q.append_pair("labelSelector", l);
        }
        if let Some(f) = &self.field_selector {
            q.append_pair("fieldSelector", f);
        }
        if let Some(s) = &self.shard {
            q.append_pair("shardSelector", &s.to_string());
        }
        q
    }

    fn build(
        &self,
        query: String,
        accept: &str,
        watch: bool,
    ) -> Result<http::Request<Body>, ReflectorError> {
        let mut b = http::Request::get(format!("{}?{}", self.url_path, query))
            .header(http::header::ACCEPT, accept);
        if watch {
            // One gzip member per event is not decoded by every client stack.
            b = b.header(http::header::ACCEPT_ENCODING, "identity");
        }
        b.body(Body::empty())
            .map_err(|e| ReflectorError::Request(e.to_string()))
    }

    /// A LIST request: at `resource_version` ("" = most recent, omitted), one
    /// page of `limit` objects (0 = unpaged), continuing `continue_token`.
    pub fn list_request(
        &self,
        resource_version: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<http::Request<Body>, ReflectorError> {
        self.list_request_as(resource_version, limit, continue_token, false)
    }

    /// [`list_request`](Self::list_request), asking for the protobuf
    /// encoding when `protobuf` is set and only metadata is requested
    /// (JSON stays acceptable).
    pub fn list_request_as(
        &self,
        resource_version: &str,
        limit: u32,
        continue_token: Option<&str>,
        protobuf: bool,
    ) -> Result<http::Request<Body>, ReflectorError> {
        let mut q = self.query();
        if limit > 0 {
            q.append_pair("limit", &limit.to_string());
        }
        match continue_token {
            Some(c) => {
                q.append_pair("continue", c);
            }
            None if !resource_version.is_empty() => {
                q.append_pair("resourceVersion", resource_version);
            }
            None => {}
        }
        let accept = match (self.metadata_only, protobuf) {
            (true, true) => METADATA_LIST_PROTOBUF_OR_JSON,
            (true, false) => METADATA_LIST,
            (false, _) => JSON,
        };
        self.build(q.finish(), accept, false)
    }

    /// A WATCH request from `resource_version` with bookmarks and a server
    /// timeout; `watch_list` asks for the initial state as events
    /// (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`).
    pub fn watch_request(
        &self,
        resource_version: &str,
        timeout: Duration,
        watch_list: bool,
    ) -> Result<http::Request<Body>, ReflectorError> {
        self.watch_request_as(resource_version, timeout, watch_list, false)
    }

    /// [`watch_request`](Self::watch_request), asking for the protobuf
    /// encoding when `protobuf` is set and only metadata is requested
    /// (JSON stays acceptable: a server without it answers in JSON).
    pub fn watch_request_as(
        &self,
        resource_version: &str,
        timeout: Duration,
        watch_list: bool,
        protobuf: bool,
    ) -> Result<http::Request<Body>, ReflectorError> {
        let mut q = self.query();
        q.append_pair("watch", "true");
        q.append_pair("allowWatchBookmarks", "true");
        q.append_pair("timeoutSeconds", &timeout.as_secs().max(1).to_string());
        if !resource_version.is_empty() {
            q.append_pair("resourceVersion", resource_version);
        }
        if watch_list {
            q.append_pair("sendInitialEvents", "true");
            q.append_pair("resourceVersionMatch", "NotOlderThan");
        }
        let accept = match (self.metadata_only, protobuf) {
            (true, true) => METADATA_PROTOBUF_OR_JSON,
            (true, false) => METADATA,
            (false, _) => JSON,
        };
        self.build(q.finish(), accept, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_sends_rv_zero_with_limit_and_drops_rv_with_continue() {
        let t = ListWatchTarget::new("/api/v1/pods").labels("a=b");
        let r = t
            .list_request("0", 500, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.uri().to_string(),
            "/api/v1/pods?labelSelector=a%3Db&limit=500&resourceVersion=0"
        );
        let r = t
            .list_request("7", 500, Some("tok"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.uri().to_string(),
            "/api/v1/pods?labelSelector=a%3Db&limit=500&continue=tok"
        );
    }

    #[test]
    fn watch_list_request_has_streaming_parameters() {
        let t = ListWatchTarget::new("/api/v1/pods").metadata_only(true);
        let r = t
            .watch_request("", Duration::from_secs(300), true)
            .unwrap_or_else(|e| panic!("{e}"));
        let q = r.uri().query().unwrap_or_default().to_string();
        assert!(q.contains("sendInitialEvents=true"), "{q}");
        assert!(q.contains("resourceVersionMatch=NotOlderThan"), "{q}");
        assert!(q.contains("allowWatchBookmarks=true"), "{q}");
        assert!(!q.contains("resourceVersion="), "{q}");
        assert_eq!(r.headers()[http::header::ACCEPT], METADATA);
    }
}
