//! LIST: consistent snapshots, `limit`/`continue` paging and streamed page assembly from
//! pre-encoded object bytes (objects are never re-serialized).

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::metadata::{Representation, write_partial_stored};
use crate::object::StoredObject;
use crate::params::{ListParams, RvMatch, parse_rv};
use crate::resource::{ResourceDef, ResourceId};
use crate::selector::Selector;
use crate::status::{ApiError, Cause, Details, Reason};
use crate::store::{Snapshot, Store};

/// The decoded form of an opaque `continue` token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Token version, like the apiserver's.
    pub v: String,
    /// The list's resourceVersion.
    pub rv: u64,
    /// The last key returned; the next page starts after it.
    pub start: String,
    /// Items returned so far (for `remainingItemCount`).
    #[serde(default)]
    pub n: u64,
    /// Total items in scope at `rv` (for `remainingItemCount`); absent with selectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t: Option<u64>,
    /// Continue at the latest state instead of `rv` (the token handed back with an expired
    /// continue's 410; kube-apiserver encodes it as resourceVersion -1).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub latest: bool,
}

impl ContinueToken {
    /// Encode as base64 URL-safe JSON.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Decode; a malformed token is a 400.
    pub fn decode(s: &str) -> Result<Self, ApiError> {
        let bad = |why: String| {
            ApiError::bad_request(format!(
                "invalid continue token: continue key is not valid: {why}"
            ))
        };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s.trim_end_matches('='))
            .map_err(|e| bad(e.to_string()))?;
        let t: ContinueToken = serde_json::from_slice(&raw).map_err(|e| bad(e.to_string()))?;
        if t.v != "meta.k8s.io/v1" {
            return Err(bad(
                "incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
            ));
        }
        Ok(t)
    }
}

/// One page of a list: the items and the list metadata.
#[derive(Debug, Clone)]
pub struct Page {
    /// The list's resourceVersion.
    pub rv: u64,
    /// The matching objects of this page.
    pub items: Vec<Arc<StoredObject>>,
    /// The token for the next page, if any.
    pub continue_token: Option<String>,
    /// Items after this page, when known (no selector).
    pub remaining: Option<u64>,
    /// The shard selector applied, echoed as `metadata.shardInfo.selector`.
    pub shard: Option<String>,
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. \
    You can start a new list without the continue parameter, or use the continue token in this response to retrieve \
    the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that \
    were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

/// The 504 the apiserver answers when asked for a resourceVersion it has not reached.
pub fn too_large_rv(rv: u64, current: u64) -> ApiError {
    ApiError::new(
        Reason::Timeout,
        format!("Too large resource version: {rv}, current: {current}"),
    )
    .with_details(Details {
        causes: vec![Cause {
            reason: Some("ResourceVersionTooLarge".into()),
            message: "Too large resource version".into(),
            field: None,
        }],
        retry_after_seconds: Some(1),
        ..Details::default()
    })
}

/// Wait (up to 3 s, like the watch cache) until the store reaches `rv`.
pub async fn wait_for_rv(store: &Store, rv: u64) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let current = store.current_rv();
        if current >= rv {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(too_large_rv(rv, current));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Choose the snapshot a LIST reads from, per `resourceVersion`, `resourceVersionMatch` and `continue`.
pub async fn choose_snapshot(
    store: &Store,
    res: ResourceId,
    p: &ListParams,
) -> Result<(Snapshot, Option<ContinueToken>), ApiError> {
    if let Some(tok) = &p.continue_token {
        let tok = ContinueToken::decode(tok)?;
        if tok.latest {
            return Ok((store.snapshot(res), Some(tok)));
        }
        let snap = store.find_snapshot(res, tok.rv).ok_or_else(|| {
            // Like kube-apiserver: the 410 carries a token continuing (inconsistently) at the
            // latest state.
            let inconsistent = ContinueToken {
                latest: true,
                t: None,
                ..tok.clone()
            };
            ApiError::expired(EXPIRED_CONTINUE).with_continue(inconsistent.encode())
        })?;
        return Ok((snap, Some(tok)));
    }
    match (parse_rv(p.resource_version.as_deref())?, p.rv_match) {
        (None | Some(0), _) => Ok((store.snapshot(res), None)),
        (Some(rv), Some(RvMatch::Exact)) => {
            wait_for_rv(store, rv).await?;
            let snap = store.find_snapshot(res, rv).ok_or_else(|| {
                ApiError::expired(format!(
                    "too old resource version: {rv} ({})",
                    store.current_rv()
                ))
            })?;
            Ok((snap, None))
        }
        (Some(rv), _) => {
            wait_for_rv(store, rv).await?;
            Ok((store.snapshot(res), None))
        }
    }
}

/// Compute one page from a snapshot.
pub fn page(
    store: &Store,
    def: &ResourceDef,
    snap: &Snapshot,
    namespace: Option<&str>,
    sel: &Selector,
    limit: Option<usize>,
    tok: Option<&ContinueToken>,
) -> Page {
    let (lo, hi) = scope_bounds(def, namespace);
    let start = match tok {
        Some(t) => Bound::Excluded(t.start.as_str()),
        None => lo.as_ref().map(String::as_str),
    };
    let end = hi.as_ref().map(String::as_str);
    let mut items = Vec::with_capacity(limit.unwrap_or(0).min(1 << 16));
    let mut more = false;
    for (_, obj) in snap.objects.range::<_, str>((start, end)) {
        if !sel.matches(&obj.meta) {
            continue;
        }
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        items.push(obj.clone());
    }
    let (continue_token, remaining) = match (more, items.last()) {
        (true, Some(last)) => {
            let total = if sel.is_empty() {
                Some(tok.and_then(|t| t.t).unwrap_or_else(|| {
                    match namespace {
                        None => snap.objects.len() as u64,
                        Some(_) => snap
                            .objects
                            .range::<_, str>((lo.as_ref().map(String::as_str), end))
                            .count() as u64,
                    }
                }))
            } else {
                None
            };
            let n = tok.map_or(0, |t| t.n) + items.len() as u64;
            let next = ContinueToken {
                v: "meta.k8s.io/v1".into(),
                rv: snap.rv,
                start: last.meta.key().to_string(),
                n,
                t: total,
                latest: false,
            };
            store.remember_snapshot(snap);
            (Some(next.encode()), total.map(|t| t.saturating_sub(n)))
        }
        _ => (None, None),
    };
    Page {
        rv: snap.rv,
        items,
        continue_token,
        remaining,
        shard: sel.shard.as_ref().map(ToString::to_string),
    }
}

/// Key bounds of a namespace's objects (`ns/` .. `ns0`), or everything.
fn scope_bounds(def: &ResourceDef, namespace: Option<&str>) -> (Bound<String>, Bound<String>) {
    match namespace {
        Some(ns) if def.namespaced => (
            Bound::Included(format!("{ns}/")),
            Bound::Excluded(format!("{ns}0")),
        ),
        _ => (Bound::Unbounded, Bound::Unbounded),
    }
}

/// The list envelope before the items: `{"kind":..,"apiVersion":..,"metadata":{..},"items":[`.
fn envelope_head(def: &ResourceDef, page: &Page, repr: Representation) -> Vec<u8> {
    let (kind, api_version) = match repr {
        Representation::Full => (def.list_kind(), def.api_version()),
        Representation::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
    };
    let mut md = serde_json::Map::new();
    md.insert("resourceVersion".into(), page.rv.to_string().into());
    if let Some(c) = &page.continue_token {
        md.insert("continue".into(), c.clone().into());
    }
    if let Some(r) = page.remaining {
        md.insert("remainingItemCount".into(), r.into());
    }
    if let Some(selector) = &page.shard {
        md.insert(
            "shardInfo".into(),
            serde_json::json!({ "selector": selector }),
        );
    }
    let head = serde_json::json!({"kind": kind, "apiVersion": api_version, "metadata": md});
    let mut out = crate::encode::to_vec(&head).unwrap_or_else(|_| b"{}".to_vec());
    out.pop(); // drop the closing brace
    out.extend_from_slice(br#","items":["#);
    out
}

const CHUNK: usize = 256 * 1024;

/// The page as a stream of body chunks of about 256 KiB: envelope, then concatenated object bytes.
pub fn body_stream(
    def: &ResourceDef,
    page: Page,
    repr: Representation,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    let head = envelope_head(def, &page, repr);
    // Built-in (core) kinds' list items carry no apiVersion/kind, as kube-apiserver's; custom
    // resources' (unstructured) items keep theirs.
    let strip_types = def.group.is_empty();
    let items = page.items;
    futures::stream::unfold(
        (Some(head), 0usize, items),
        move |(head, mut i, items)| async move {
            let first = head.is_some();
            let mut buf = head.unwrap_or_else(|| Vec::with_capacity(CHUNK + 8192));
            if !first && i > items.len() {
                return None;
            }
            while i < items.len() && buf.len() < CHUNK {
                if i > 0 {
                    buf.push(b',');
                }
                match repr {
                    Representation::Full if strip_types => {
                        crate::metadata::write_without_type_meta(&items[i].bytes, &mut buf)
                    }
                    Representation::Full => buf.extend_from_slice(&items[i].bytes),
                    Representation::Metadata => write_partial_stored(&items[i], &mut buf),
                }
                i += 1;
            }
            if i == items.len() {
                buf.extend_from_slice(b"]}");
                i += 1;
            }
            Some((Ok(Bytes::from(buf)), (None, i, items)))
        },
    )
}

/// A single object in the requested representation.
pub fn object_body(obj: &StoredObject, repr: Representation) -> Bytes {
    match repr {
        Representation::Full => obj.bytes.clone(),
        Representation::Metadata => crate::metadata::partial(&obj.bytes),
    }
}
