//! The Kubernetes API surface: path parsing, verb dispatch, HTTP-level faults.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use serde_json::Value;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::faults::{bump, roll};
use crate::list::{self, object_body};
use crate::metadata::Representation;
use crate::params::{ListParams, parse_rv};
use crate::resource::{ResourceDef, ResourceId};
use crate::selector::Selector;
use crate::state::SharedRef;
use crate::status::{ApiError, Reason};
use crate::watch::{self, Start, WatchRequest};

/// Largest request body accepted.
const MAX_BODY: usize = 64 << 20;

/// What a resource path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A collection, optionally in a namespace.
    Collection {
        /// The resource.
        res: ResourceId,
        /// The namespace from the path.
        namespace: Option<String>,
    },
    /// One object.
    Object {
        /// The resource.
        res: ResourceId,
        /// The namespace from the path (empty for cluster-scoped).
        namespace: String,
        /// The name.
        name: String,
    },
}

/// Parse `/api/v1/...` or `/apis/{group}/{version}/...` into a target; `Ok(None)` for discovery paths.
pub fn parse_path(shared: &SharedRef, path: &str) -> Result<Option<Target>, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] | ["apis"] | ["api", _] | ["apis", _] | ["apis", _, _] => return Ok(None),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(ApiError::unknown_resource()),
    };
    let reg = shared.store.registry();
    let find = |plural: &str| {
        reg.find(group, version, plural)
            .ok_or_else(ApiError::unknown_resource)
    };
    let namespaced = |res: ResourceId| reg.get(res).is_some_and(|d| d.namespaced);
    let target = match rest {
        [plural] => Target::Collection {
            res: find(plural)?,
            namespace: None,
        },
        ["namespaces", ns, plural] => {
            let res = find(plural)?;
            if !namespaced(res) {
                return Err(ApiError::unknown_resource());
            }
            Target::Collection {
                res,
                namespace: Some(ns.to_string()),
            }
        }
        ["namespaces", ns, plural, name] => {
            let res = find(plural)?;
            if !namespaced(res) {
                return Err(ApiError::unknown_resource());
            }
            Target::Object {
                res,
                namespace: ns.to_string(),
                name: name.to_string(),
            }
        }
        [plural, name] => {
            let res = find(plural)?;
            if namespaced(res) {
                return Err(ApiError::unknown_resource());
            }
            Target::Object {
                res,
                namespace: String::new(),
                name: name.to_string(),
            }
        }
        _ => return Err(ApiError::unknown_resource()),
    };
    Ok(Some(target))
}

/// The fallback handler for every Kubernetes API path.
pub async fn api(State(shared): State<SharedRef>, req: Request) -> Response {
    shared.counters.requests.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = http_faults(&shared).await {
        return e.into_response();
    }
    let path = req.uri().path().to_string();
    if unserved_group_version(&shared, &path) {
        // kube-apiserver's fallthrough for groups it does not serve: a plain-text 404.
        let mut resp = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        return resp;
    }
    match parse_path(&shared, &path) {
        Ok(None) => crate::discovery::handle(&shared, &req),
        Ok(Some(target)) => dispatch(shared, target, req)
            .await
            .unwrap_or_else(IntoResponse::into_response),
        Err(e) => e.into_response(),
    }
}

/// Whether kube-apiserver would answer `path` with its plain-text 404: resources of a group/version
/// nothing is served in, and paths outside `/api` and `/apis` (the core group's `/api/...` always
/// answers with a `Status`).
fn unserved_group_version(shared: &SharedRef, path: &str) -> bool {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version) = match segs.as_slice() {
        ["api", ..] | ["apis"] | ["apis", _] | ["apis", _, _] => return false,
        ["apis", g, v, _, ..] => (*g, *v),
        _ => return true,
    };
    !shared
        .store
        .registry()
        .defs()
        .iter()
        .any(|d| d.group == group && d.version == version)
}

/// Latency, 429 and 500 faults, applied before any API request is handled.
async fn http_faults(shared: &SharedRef) -> Result<(), ApiError> {
    let cfg = shared.faults.config();
    let c = &shared.faults.counters;
    if cfg.latency_ms > 0 {
        bump(&c.delayed);
        tokio::time::sleep(Duration::from_millis(cfg.latency_ms)).await;
    }
    if roll(cfg.error_429_fraction) {
        bump(&c.http_429);
        return Err(ApiError::too_many_requests(cfg.retry_after_seconds));
    }
    if roll(cfg.error_500_fraction) {
        bump(&c.http_500);
        return Err(ApiError::internal("injected fault"));
    }
    Ok(())
}

fn json_response(code: StatusCode, body: Bytes) -> Response {
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Drop empty `metadata.labels`/`metadata.annotations`: typed objects omit empty maps.
fn drop_empty_metadata_maps(v: &mut Value) {
    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in ["labels", "annotations"] {
            if md
                .get(k)
                .and_then(Value::as_object)
                .is_some_and(|m| m.is_empty())
            {
                md.remove(k);
            }
        }
    }
}

/// A write body that is not a JSON object, rejected like the apiserver's decoder does.
fn require_object(v: &Value, kind: &str) -> Result<(), ApiError> {
    if v.is_object() {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; \
             json parse error: cannot unmarshal {} into an object",
            match v {
                Value::Null => "null",
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            }
        )))
    }
}

async fn read_json(req: Request) -> Result<(Value, String), ApiError> {
    let ct = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
        .await
        .map_err(|e| ApiError::bad_request(format!("unable to read request body: {e}")))?;
    let v = serde_json::from_slice(&body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    Ok((v, ct))
}

fn check_json_content_type(ct: &str) -> Result<(), ApiError> {
    if ct.is_empty() || ct.starts_with("application/json") || ct == "*/*" {
        Ok(())
    } else {
        Err(ApiError::new(
            Reason::UnsupportedMediaType,
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml, application/vnd.kubernetes.protobuf",
        ))
    }
}

async fn dispatch(shared: SharedRef, target: Target, req: Request) -> Result<Response, ApiError> {
    let repr = Representation::from_headers(req.headers());
    let protobuf = crate::protobuf::wants_protobuf(req.headers());
    let method = req.method().clone();
    if method == Method::GET {
        let def = shared.store.registry().get(match &target {
            Target::Collection { res, .. } | Target::Object { res, .. } => *res,
        });
        let is_watch = req
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        if let (Some(def), false) = (def, is_watch) {
            let is_list = matches!(target, Target::Collection { .. });
            crate::metadata::check_accept(req.headers(), is_list, &def.kind, def.group.is_empty())?;
        }
    }
    match target {
        Target::Collection { res, namespace } => match method {
            Method::GET => {
                let p = ListParams::from_query(req.uri().query())?;
                if p.watch {
                    watch_collection(shared, res, namespace, p, repr, protobuf).await
                } else {
                    list_collection(shared, res, namespace, p, repr, protobuf).await
                }
            }
            Method::POST => {
                let def = shared
                    .store
                    .registry()
                    .get(res)
                    .cloned()
                    .ok_or_else(ApiError::unknown_resource)?;
                if def.namespaced && namespace.is_none() {
                    return Err(ApiError::method_not_allowed());
                }
                let (mut v, ct) = read_json(req).await?;
                check_json_content_type(&ct)?;
                require_object(&v, &def.kind)?;
                drop_empty_metadata_maps(&mut v);
                if def.group.is_empty() && def.plural == "namespaces" {
                    // The NamespaceLifecycle defaults: the immutable name label.
                    let name = v
                        .pointer("/metadata/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                        let labels = md
                            .entry("labels")
                            .or_insert_with(|| Value::Object(Default::default()));
                        if let Some(l) = labels.as_object_mut() {
                            l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
                        }
                    }
                }
                let obj = shared.store.create(res, namespace.as_deref(), v)?;
                shared.count_write();
                Ok(json_response(StatusCode::CREATED, object_body(&obj, repr)))
            }
            _ => Err(ApiError::method_not_allowed()),
        },
        Target::Object {
            res,
            namespace,
            name,
        } => {
            let def = shared
                .store
                .registry()
                .get(res)
                .cloned()
                .ok_or_else(ApiError::unknown_resource)?;
            match method {
                Method::GET => {
                    let q = req.uri().query().unwrap_or("");
                    if q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1") {
                        // Legacy single-object watch: a collection watch with a name field selector.
                        let mut p = ListParams::from_query(req.uri().query())?;
                        let f = format!("metadata.name={name}");
                        p.field_selector = Some(match p.field_selector.take() {
                            Some(s) if !s.is_empty() => format!("{s},{f}"),
                            _ => f,
                        });
                        let ns = (!namespace.is_empty()).then_some(namespace);
                        return watch_collection(shared, res, ns, p, repr, protobuf).await;
                    }
                    let obj = shared
                        .store
                        .get(res, &namespace, &name)
                        .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, &name))?;
                    Ok(json_response(StatusCode::OK, object_body(&obj, repr)))
                }
                Method::PUT => {
                    let (mut v, ct) = read_json(req).await?;
                    check_json_content_type(&ct)?;
                    require_object(&v, &def.kind)?;
                    drop_empty_metadata_maps(&mut v);
                    let ns = (!namespace.is_empty()).then_some(namespace.as_str());
                    let obj = shared.store.update(res, ns, Some(&name), v)?;
                    shared.count_write();
                    Ok(json_response(StatusCode::OK, object_body(&obj, repr)))
                }
                Method::PATCH => {
                    let (v, ct) = read_json(req).await?;
                    let ct = ct.split(';').next().unwrap_or("").trim().to_string();
                    if ct != "application/merge-patch+json"
                        && ct != "application/strategic-merge-patch+json"
                    {
                        return Err(ApiError::new(
                            Reason::UnsupportedMediaType,
                            format!(
                                "the body of the request was in an unknown format - accepted media types include: application/merge-patch+json, application/strategic-merge-patch+json ({ct})"
                            ),
                        ));
                    }
                    let obj = shared.store.patch(res, &namespace, &name, &v)?;
                    shared.count_write();
                    Ok(json_response(StatusCode::OK, object_body(&obj, repr)))
                }
                Method::DELETE => {
                    let body = axum::body::to_bytes(req.into_body(), MAX_BODY)
                        .await
                        .map_err(|e| {
                            ApiError::bad_request(format!("unable to read request body: {e}"))
                        })?;
                    let precondition = if body.is_empty() {
                        None
                    } else {
                        let opts: Value = serde_json::from_slice(&body).map_err(|e| {
                            ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}"))
                        })?;
                        let rv = opts
                            .get("preconditions")
                            .and_then(|p| p.get("resourceVersion"))
                            .and_then(Value::as_str);
                        parse_rv(rv)?
                    };
                    if let (Some(wanted), Some(cur)) =
                        (precondition, shared.store.get(res, &namespace, &name))
                        && wanted != cur.meta.rv
                    {
                        return Err(ApiError::precondition_failed(
                            &def.kind,
                            &def.group,
                            &name,
                            wanted,
                            cur.meta.rv,
                        ));
                    }
                    let obj = shared.store.delete(res, &namespace, &name, precondition)?;
                    shared.count_write();
                    if def.returns_deleted_object() {
                        Ok(json_response(StatusCode::OK, object_body(&obj, repr)))
                    } else {
                        Ok(json_response(
                            StatusCode::OK,
                            crate::status::delete_success(
                                &def.plural,
                                &def.group,
                                &name,
                                &obj.meta.uid,
                            ),
                        ))
                    }
                }
                _ => Err(ApiError::method_not_allowed()),
            }
        }
    }
}

/// The resource's definition and the request's label/field selectors, as
/// LIST and WATCH both need them.
fn resource_and_selector(
    shared: &SharedRef,
    res: ResourceId,
    p: &ListParams,
) -> Result<(ResourceDef, Selector), ApiError> {
    let def = shared
        .store
        .registry()
        .get(res)
        .cloned()
        .ok_or_else(ApiError::unknown_resource)?;
    let shard = p
        .shard_selector
        .as_deref()
        .filter(|_| shared.config.sharded_list_and_watch);
    let sel = Selector::parse(
        p.label_selector.as_deref(),
        p.field_selector.as_deref(),
        def.supports_node_name(),
    )?
    .with_shard(shard)?;
    Ok((def, sel))
}

async fn list_collection(
    shared: SharedRef,
    res: ResourceId,
    namespace: Option<String>,
    p: ListParams,
    repr: Representation,
    protobuf: bool,
) -> Result<Response, ApiError> {
    let (def, sel) = resource_and_selector(&shared, res, &p)?;
    let (snap, tok) = list::choose_snapshot(&shared.store, res, &p).await?;
    // resourceVersion=0 is served whole from the watch cache: kube-apiserver ignores `limit`.
    let limit = if p.continue_token.is_none() && p.resource_version.as_deref() == Some("0") {
        None
    } else {
        p.limit
    };
    let page = list::page(
        &shared.store,
        &def,
        &snap,
        namespace.as_deref(),
        &sel,
        limit,
        tok.as_ref(),
    );
    shared.counters.lists.fetch_add(1, Ordering::Relaxed);
    shared
        .counters
        .list_items
        .fetch_add(page.items.len() as u64, Ordering::Relaxed);
    if protobuf && repr == Representation::Metadata {
        let mut resp = Response::new(Body::from(crate::protobuf::list_body(&page)));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(crate::protobuf::CONTENT_TYPE),
        );
        return Ok(resp);
    }
    let stream = list::body_stream(&def, page, repr);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

async fn watch_collection(
    shared: SharedRef,
    res: ResourceId,
    namespace: Option<String>,
    p: ListParams,
    repr: Representation,
    protobuf: bool,
) -> Result<Response, ApiError> {
    let (def, selector) = resource_and_selector(&shared, res, &p)?;
    let rv = parse_rv(p.resource_version.as_deref())?;
    if let Some(rv) = rv.filter(|rv| *rv > 0) {
        // Like the watch cache: wait (up to 3 s) for a resourceVersion not reached yet.
        list::wait_for_rv(&shared.store, rv).await?;
    }
    let start = match (p.send_initial_events, rv) {
        (Some(true), _) => Start::Initial {
            end_bookmark: p.allow_bookmarks,
        },
        (Some(false), None | Some(0)) => Start::Now,
        (None, None | Some(0)) => Start::Initial {
            end_bookmark: false,
        },
        (_, Some(rv)) => Start::From(rv),
    };
    let timeout = p
        .timeout_seconds
        .map_or(shared.config.default_watch_timeout, Duration::from_secs);
    let protobuf = protobuf && repr == Representation::Metadata;
    let req = WatchRequest {
        res,
        def,
        namespace,
        selector,
        repr,
        protobuf,
        start,
        bookmarks: p.allow_bookmarks,
        timeout,
    };
    let rx = watch::spawn(shared, req);
    // Each message is a run of chunks; each chunk is a frame of its own.
    let stream = futures::StreamExt::flat_map(ReceiverStream::new(rx), futures::stream::iter)
        .map(Ok::<Bytes, std::io::Error>);
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if protobuf {
            crate::protobuf::WATCH_CONTENT_TYPE
        } else {
            "application/json"
        }),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
