//! The LIST path of the [`Reflector`]: paged LISTs streamed into a
//! [`kinformer_core::ReplaceSession`], each page decoded on the decode pool
//! while the next one is fetched, with client-go's choice of
//! resourceVersion and its fallbacks.

use std::collections::VecDeque;

use bytes::Bytes;
use kinformer_core::Prepared;
use kube_core::{Resource, TypeMeta};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::error::ReflectorError;
use crate::events::Pending;
use crate::metrics::bump;
use crate::reflector::{Reflector, State, Stop, answered_within, is_protobuf, or_stop};
use crate::transport::{read_body, send};
use kinformer_wire::WireError;

/// Items per decode batch of a LIST page (the decoder spreads a batch
/// over the decode threads by key).
const LIST_CHUNK: usize = 512;

/// One LIST page: its items as raw JSON or protobuf (slices of the
/// response body).
struct Page {
    items: Vec<Bytes>,
    format: ItemFormat,
    resource_version: String,
    continue_: Option<String>,
}

/// How a page's items are encoded.
enum ItemFormat {
    Json,
    /// Protobuf `PartialObjectMetadata` messages, with the page's item types.
    Protobuf(Option<TypeMeta>),
}

type Items<K> = Pending<Result<Prepared<K>, ReflectorError>>;

impl<K> Reflector<K>
where
    K: Resource + DeserializeOwned + Send + Sync + 'static,
{
    /// A full LIST into the queue, with client-go's choice of
    /// resourceVersion and its retry at `""` after Expired / TooLarge.
    pub(crate) async fn list(
        &self,
        st: &mut State,
        token: &CancellationToken,
    ) -> Result<Result<(), ReflectorError>, Stop> {
        let mut rv = st.relist_rv();
        let (list_rv, n) = loop {
            // client-go's rule: a LIST at an exact resourceVersion with a
            // limit is served from etcd at that revision (possibly stale
            // after a restart); without one, from the watch cache. So page
            // only at "0"/"" or when the server showed it pages anyway.
            let limit = if st.paginated_result || rv.is_empty() || rv == "0" {
                self.config.page_size
            } else {
                0
            };
            match self.list_at(&rv, limit, token).await? {
                Ok((list_rv, n, paginated)) => {
                    if paginated && rv == "0" {
                        st.paginated_result = true;
                    }
                    break (list_rv, n);
                }
                Err(e)
                    if (e.is_expired() || e.is_too_large_resource_version()) && !rv.is_empty() =>
                {
                    self.report(&e);
                    st.rv_unavailable = true;
                    rv = st.relist_rv();
                }
                Err(e) => return Ok(Err(e)),
            }
        };
        st.rv_unavailable = false;
        self.set_rv(st, &list_rv);
        self.count_sync(st);
        tracing::debug!(reflector = %self.name, objects = n, rv = %list_rv, "listed");
        Ok(Ok(()))
    }

    /// A LIST at `rv` (paged by `limit`, 0 = unpaged) streamed into one
    /// replace session; an expired `continue` token restarts as one unpaged
    /// LIST at `""`. Returns the list's resourceVersion, the number of
    /// objects listed and whether the server paginated the answer.
    async fn list_at(
        &self,
        rv: &str,
        limit: u32,
        token: &CancellationToken,
    ) -> Result<Result<(String, usize, bool), ReflectorError>, Stop> {
        let mut session = self.fifo.begin_replace().map_err(|_| Stop)?;
        let mut pending: VecDeque<Items<K>> = VecDeque::new();
        let mut cont: Option<String> = None;
        let mut limit = limit;
        let mut paginated = false;
        let mut rv = rv.to_string();
        loop {
            let page = match self.list_page(&rv, limit, cont.as_deref(), token).await? {
                Ok(p) => p,
                Err(e) if cont.is_some() && e.is_expired() => {
                    self.report(&e);
                    tracing::info!(reflector = %self.name, "continue token expired; listing in full");
                    pending.clear();
                    // The pages queued so far stay (real states); the new
                    // session decides the tombstones.
                    session = self.fifo.begin_replace().map_err(|_| Stop)?;
                    cont = None;
                    limit = 0;
                    rv.clear();
                    continue;
                }
                Err(e) => return Ok(Err(e)),
            };
            // Earlier pages were decoded while this one was fetched: queue
            // them, then hand this page to the decoders.
            if let Err(e) = self
                .queue_pending(&mut session, &mut pending, 0, token)
                .await?
            {
                return Ok(Err(e));
            }
            // This page goes to the decoders in chunks, only a few in
            // flight: a server that answers unpaged (from its watch cache,
            // or after an expired continue token) sends the whole list as
            // one page, and decoding all of it before queueing any would
            // hold a second copy of the cache (a 100k typed relist peaked
            // at 2.06× steady state that way).
            let decoder = self.decoder();
            let mut items = page.items.into_iter();
            loop {
                let chunk: Vec<_> = items.by_ref().take(LIST_CHUNK).collect();
                if chunk.is_empty() {
                    break;
                }
                let keep = decoder.depth().saturating_sub(1);
                if let Err(e) = self
                    .queue_pending(&mut session, &mut pending, keep, token)
                    .await?
                {
                    return Ok(Err(e));
                }
                pending.push_back(match &page.format {
                    ItemFormat::Json => decoder.items(chunk),
                    ItemFormat::Protobuf(types) => decoder.protobuf_items(chunk, types.clone()),
                });
            }
            match page.continue_ {
                Some(c) if limit > 0 => {
                    paginated = true;
                    cont = Some(c);
                }
                _ => {
                    if let Err(e) = self
                        .queue_pending(&mut session, &mut pending, 0, token)
                        .await?
                    {
                        return Ok(Err(e));
                    }
                    let n = session.len();
                    self.apply(session.finish(&page.resource_version))?;
                    return Ok(Ok((page.resource_version, n, paginated)));
                }
            }
        }
    }

    /// Queues the oldest decoded batches of `pending` until at most `keep`
    /// are left in flight.
    async fn queue_pending(
        &self,
        session: &mut kinformer_core::ReplaceSession<'_, K>,
        pending: &mut VecDeque<Items<K>>,
        keep: usize,
        token: &CancellationToken,
    ) -> Result<Result<(), ReflectorError>, Stop> {
        while pending.len() > keep
            && let Some(batch) = pending.pop_front()
        {
            if let Err(e) = self.queue_items(session, batch, token).await? {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    async fn queue_items(
        &self,
        session: &mut kinformer_core::ReplaceSession<'_, K>,
        batch: Items<K>,
        token: &CancellationToken,
    ) -> Result<Result<(), ReflectorError>, Stop> {
        let results = match batch.wait().await {
            Ok(r) => r,
            // The objects of this batch are missing from the list; its
            // tombstones would be wrong, so the list must not finish: it
            // fails, and is tried again after a backoff.
            Err(e) => return Ok(Err(e)),
        };
        let mut ok = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Ok(p) => ok.push(p),
                Err(e) => self.skip(&e),
            }
        }
        self.wait_for_room(token).await?;
        self.apply(session.push(ok)).map(Ok)
    }

    async fn list_page(
        &self,
        rv: &str,
        limit: u32,
        cont: Option<&str>,
        token: &CancellationToken,
    ) -> Result<Result<Page, ReflectorError>, Stop> {
        let req = match self
            .target
            .list_request_as(rv, limit, cont, self.asks_protobuf())
        {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        bump(&self.counters().list_requests);
        tracing::debug!(reflector = %self.name, rv, limit, continued = cont.is_some(), "list");
        // No answer within the list timeout, or a body that stops arriving
        // within the idle timeout, abandons the page (and with it this LIST).
        let (head, idle) = (self.config.list_timeout, self.config.idle_timeout);
        let resp = match answered_within(token, head, send(&self.client, req)).await? {
            Ok(r) => r,
            Err(e) => return Ok(Err(e)),
        };
        let protobuf = is_protobuf(&resp);
        let body = match or_stop(token, read_body(resp, idle)).await? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        if protobuf {
            bump(&self.counters().protobuf_list_pages);
            return Ok(protobuf_page(body));
        }
        Ok(json_page(&body))
    }
}

/// Opens a protobuf LIST page (its items slices of `body`, no copy).
fn protobuf_page(body: Bytes) -> Result<Page, ReflectorError> {
    let page = kinformer_wire::protobuf::decode_list(body)?;
    if page.resource_version.is_empty() {
        return Err(
            WireError::MalformedList("list without metadata.resourceVersion".into()).into(),
        );
    }
    Ok(Page {
        items: page.items,
        format: ItemFormat::Protobuf(page.item_types),
        resource_version: page.resource_version,
        continue_: page.continue_token,
    })
}

/// Splits a JSON LIST page into its items (slices of `body`, no copy).
fn json_page(body: &Bytes) -> Result<Page, ReflectorError> {
    let page = kinformer_wire::list::split_page(body)?;
    Ok(Page {
        items: page.items,
        format: ItemFormat::Json,
        resource_version: page.resource_version,
        continue_: page.continue_token,
    })
}
