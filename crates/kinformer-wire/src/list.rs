//! A JSON LIST answer split into its items (slices of the body, no copy),
//! its `resourceVersion` and its `continue` token; each item is then
//! decoded on its own (see [`crate::object_decode::Decoders::object`]).
//! The protobuf form is [`crate::protobuf::list`].

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::WireError;

#[derive(Deserialize)]
struct RawList<'a> {
    #[serde(default)]
    metadata: RawListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize, Default)]
struct RawListMeta {
    #[serde(default, rename = "resourceVersion")]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_: Option<String>,
}

/// One page of a JSON LIST.
#[derive(Debug)]
pub struct JsonListPage {
    /// Each item's JSON, a slice of the page's body.
    pub items: Vec<Bytes>,
    /// `metadata.resourceVersion` of the list (never empty).
    pub resource_version: String,
    /// `metadata.continue`, when more pages follow.
    pub continue_token: Option<String>,
}

/// Splits a JSON LIST answer into its items; a body that is not a list, or
/// a list without `metadata.resourceVersion`, is
/// [`WireError::MalformedList`].
///
/// ```
/// use bytes::Bytes;
/// let body = Bytes::from_static(br#"{"metadata":{"resourceVersion":"7"},"items":[{"metadata":{"name":"a"}}]}"#);
/// let page = kinformer_wire::list::split_page(&body).unwrap();
/// assert_eq!(page.resource_version, "7");
/// assert_eq!(&page.items[0][..], br#"{"metadata":{"name":"a"}}"#);
/// ```
pub fn split_page(body: &Bytes) -> Result<JsonListPage, WireError> {
    let list: RawList<'_> =
        serde_json::from_slice(body).map_err(|e| WireError::MalformedList(e.to_string()))?;
    let base = body.as_ptr() as usize;
    let items = list
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|raw| {
            let s = raw.get();
            let start = s.as_ptr() as usize - base;
            body.slice(start..start + s.len())
        })
        .collect();
    let Some(resource_version) = list.metadata.resource_version.filter(|r| !r.is_empty()) else {
        return Err(WireError::MalformedList(
            "list without metadata.resourceVersion".into(),
        ));
    };
    Ok(JsonListPage {
        items,
        resource_version,
        continue_token: list.metadata.continue_.filter(|c| !c.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_page_slices_items_out_of_the_body() {
        let body = Bytes::from_static(
            br#"{"metadata":{"resourceVersion":"7","continue":"c"},"items":[{"metadata":{"name":"a"}}, {"metadata":{"name":"b"}}]}"#,
        );
        let page = split_page(&body).unwrap();
        assert_eq!(page.resource_version, "7");
        assert_eq!(page.continue_token.as_deref(), Some("c"));
        assert_eq!(page.items.len(), 2);
        assert_eq!(&page.items[1][..], br#"{"metadata":{"name":"b"}}"#);
    }

    #[test]
    fn split_page_refuses_bad_lists() {
        assert!(matches!(
            split_page(&Bytes::from_static(b"[1,2]")),
            Err(WireError::MalformedList(_))
        ));
        assert!(matches!(
            split_page(&Bytes::from_static(br#"{"items":[]}"#)),
            Err(WireError::MalformedList(_))
        ));
    }
}
