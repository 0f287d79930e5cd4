//! A protobuf LIST answer of a metadata-only informer: an enveloped
//! `PartialObjectMetadataList`, its items kept as bytes so that each is
//! decoded on its own, on the decode threads.

use bytes::Bytes;
use kube_core::{PartialObjectMeta, TypeMeta};
use prost::Message;

use super::messages;
use super::object::{Unopened, open_envelope, type_meta};
use crate::error::WireError;

/// One page of a protobuf LIST.
#[derive(Debug)]
pub struct ListPage {
    /// `metadata.resourceVersion` of the list.
    pub resource_version: String,
    /// `metadata.continue`, when more pages follow.
    pub continue_token: Option<String>,
    /// `metadata.remainingItemCount`, when the server sent it.
    pub remaining_item_count: Option<i64>,
    /// The `apiVersion` and `kind` of each item (the list's, less `List`).
    pub item_types: Option<TypeMeta>,
    /// Each item's bytes, for [`decode_list_item`].
    pub items: Vec<Bytes>,
}

/// Opens one enveloped list page.
pub fn decode_list(enveloped: Bytes) -> Result<ListPage, WireError> {
    let (types, raw) = open_envelope(enveloped)?;
    let list = messages::PartialObjectMetadataList::decode(raw)
        .map_err(|e| WireError::MalformedList(format!("protobuf list: {e}")))?;
    let meta = list.metadata.unwrap_or_default();
    let item_types = types.map(type_meta).map(|t| TypeMeta {
        kind: t.kind.strip_suffix("List").unwrap_or(&t.kind).to_string(),
        api_version: t.api_version,
    });
    Ok(ListPage {
        resource_version: meta.resource_version,
        continue_token: (!meta.r#continue.is_empty()).then_some(meta.r#continue),
        remaining_item_count: meta.remaining_item_count,
        item_types,
        items: list.items,
    })
}

/// Decodes one item of a [`ListPage`].
pub fn decode_list_item<K>(
    item: Bytes,
    types: Option<TypeMeta>,
    skip_managed_fields: bool,
) -> Result<PartialObjectMeta<K>, WireError> {
    let len = item.len();
    // Opened before the scope; `types` is copied in it (a part allocated
    // before the scope would be missed by a whole release of the chunk).
    let unopened = Unopened::read_bare(item, types)?;
    kinformer_alloc::with_object_arena(len, || unopened.decode(skip_managed_fields))
}
