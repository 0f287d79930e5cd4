//! One walk of an `ObjectMeta` message's bytes before its object is
//! decoded: the lengths of its lists (`ownerReferences`, `finalizers`), so
//! that they are made at their exact length, and where the entries of its
//! two `map<string, string>` fields (`labels`, `annotations`) lie, so that
//! they are read from there.
//!
//! On the wire a map is a repeated entry message, each entry a key
//! (field 1) and a value (field 2). `prost` reads each entry as a nested message,
//! growing two empty strings to size and checking each as UTF-8 byte by
//! byte. An entry in the form every encoder writes (the key, then the
//! value, both length-delimited) is read here directly: each string copied
//! at its exact size after the standard library's UTF-8 check. Any other entry (other fields, other order) is read
//! by `prost`, and so is the whole message when the walk meets what it
//! does not read (groups, a malformed field, a list or map field of
//! another wire type, more than [`MAX_ENTRIES`] entries), so lists and
//! maps are `prost`'s for every input (property tests check it). The walk
//! counts the lists itself, where a `prost` pass would gather their items
//! as slices of the message only to count them.

use std::collections::BTreeMap;

use prost::Message;

use super::messages::{ObjectMetaMaps, StringEntry};

/// An object's `labels` and `annotations`.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Maps {
    /// `metadata.labels` (field 11).
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations` (field 12).
    pub annotations: BTreeMap<String, String>,
}

/// Most map entries whose places a [`Layout`] keeps (an object with more
/// has its maps read by `prost`).
const MAX_ENTRIES: usize = 32;

/// What one walk of an `ObjectMeta` message finds before its object is
/// decoded: the lengths of its lists and where its map entries lie.
pub(crate) struct Layout {
    /// `ownerReferences` (field 13).
    pub owner_references: usize,
    /// `finalizers` (field 14).
    pub finalizers: usize,
    /// Each map entry: its field (11 or 12) and its bytes' start and end.
    entries: [(u8, u32, u32); MAX_ENTRIES],
    len: usize,
}

impl Layout {
    /// The layout of `meta`; `None` when the walk meets what it does not
    /// read (see the module's documentation): `prost` reads that object.
    pub(crate) fn of(meta: &[u8]) -> Option<Layout> {
        let mut layout = Layout {
            owner_references: 0,
            finalizers: 0,
            entries: [(0, 0, 0); MAX_ENTRIES],
            len: 0,
        };
        let mut at = 0;
        while at < meta.len() {
            let (key, rest) = varint(&meta[at..])?;
            let (tag, wire_type) = (key >> 3, key & 7);
            if tag == 0 || key > u64::from(u32::MAX) || (matches!(tag, 11..=14) && wire_type != 2) {
                return None;
            }
            let rest = match wire_type {
                0 => varint(rest)?.1,
                1 => rest.get(8..)?,
                5 => rest.get(4..)?,
                2 => {
                    let (len, rest) = varint(rest)?;
                    let (value, rest) = rest.split_at_checked(usize::try_from(len).ok()?)?;
                    match tag {
                        11 | 12 => {
                            let start = meta.len() - rest.len() - value.len();
                            let slot = layout.entries.get_mut(layout.len)?;
                            *slot = (
                                tag as u8,
                                u32::try_from(start).ok()?,
                                u32::try_from(start + value.len()).ok()?,
                            );
                            layout.len += 1;
                        }
                        13 => layout.owner_references += 1,
                        14 => layout.finalizers += 1,
                        _ => {}
                    }
                    rest
                }
                _ => return None,
            };
            at = meta.len() - rest.len();
        }
        Some(layout)
    }

    /// The maps of `meta`, the message this layout was found in (later
    /// entries replace earlier ones of the same key, as `prost` does).
    pub(crate) fn maps(&self, meta: &[u8]) -> Result<Maps, prost::DecodeError> {
        let mut maps = Maps::default();
        for &(tag, start, end) in &self.entries[..self.len] {
            let entry = meta.get(start as usize..end as usize).unwrap_or_default();
            let (k, v) = match plain_entry(entry) {
                Some(kv) => kv,
                None => {
                    let e = StringEntry::decode(entry)?;
                    (e.key, e.value)
                }
            };
            let map = if tag == 11 {
                &mut maps.labels
            } else {
                &mut maps.annotations
            };
            map.insert(k, v);
        }
        Ok(maps)
    }
}

/// The maps of `meta` as `prost` reads them.
pub(crate) fn maps_by_prost(meta: &[u8]) -> Result<Maps, prost::DecodeError> {
    ObjectMetaMaps::decode(meta).map(|m| Maps {
        labels: m.labels,
        annotations: m.annotations,
    })
}

/// An entry written as key then value, both valid UTF-8, and nothing else;
/// `None` for anything else.
fn plain_entry(entry: &[u8]) -> Option<(String, String)> {
    let (key, rest) = field(entry, 0x0a)?;
    let (value, rest) = field(rest, 0x12)?;
    if !rest.is_empty() {
        return None;
    }
    Some((text(key)?, text(value)?))
}

/// The bytes of a length-delimited field whose key byte is `key` at the
/// start of `buf`, and what follows it.
fn field(buf: &[u8], key: u8) -> Option<(&[u8], &[u8])> {
    let (&first, buf) = buf.split_first()?;
    if first != key {
        return None;
    }
    let (len, buf) = varint(buf)?;
    let len = usize::try_from(len).ok()?;
    (len <= buf.len()).then(|| buf.split_at(len))
}

/// A varint at the start of `buf` (read by `prost`), and what follows it.
fn varint(mut buf: &[u8]) -> Option<(u64, &[u8])> {
    let value = prost::encoding::decode_varint(&mut buf).ok()?;
    Some((value, buf))
}

/// `bytes` as a `String` of its exact length, if valid UTF-8 (the
/// standard library's check, a word at a time over ASCII).
fn text(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::protobuf::messages::ObjectMetaLists;

    /// Both readings of `meta`: `prost`'s and ours (errors as `None`).
    fn both(meta: &[u8]) -> (Option<Maps>, Option<Maps>) {
        let by_prost = maps_by_prost(meta).ok();
        let ours = match Layout::of(meta) {
            Some(layout) => layout.maps(meta).ok(),
            None => maps_by_prost(meta).ok(),
        };
        (by_prost, ours)
    }

    fn owned(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn plain_entries_and_others_read_as_prost_reads_them() {
        let labels = owned(&[
            ("app", "web"),
            ("app.kubernetes.io/name", "web"),
            ("ünïcode", "välue"),
            ("empty", ""),
            ("", "empty key"),
        ]);
        let annotations = owned(&[("a", "b")]);
        let mut meta = ObjectMetaMaps {
            labels: labels.clone(),
            annotations: annotations.clone(),
        }
        .encode_to_vec();
        // Other fields; value first, then key; an unknown field in an
        // entry; an entry without value; a key replaced.
        meta.extend_from_slice(&[0x0a, 1, b'n', 0x38, 9, 0x41, 1, 2, 3, 4, 5, 6, 7, 8]);
        for entry in [
            &[0x12, 1, b'v', 0x0a, 1, b'k'][..],
            &[0x0a, 1, b'u', 0x18, 7, 0x12, 1, b'x'][..],
            &[0x0a, 1, b'n'][..],
            &[0x0a, 3, b'a', b'p', b'p', 0x12, 2, b'd', b'b'][..],
        ] {
            meta.extend_from_slice(&[0x5a, entry.len() as u8]);
            meta.extend_from_slice(entry);
        }
        let (by_prost, ours) = both(&meta);
        let by_prost = by_prost.expect("prost reads it");
        assert_eq!(ours.as_ref(), Some(&by_prost));
        let get = |k: &str| by_prost.labels.get(k).map(String::as_str);
        assert_eq!(
            (get("k"), get("u"), get("n"), get("app")),
            (Some("v"), Some("x"), Some(""), Some("db"))
        );
        assert_eq!(by_prost.labels.len(), labels.len() + 3);
        assert_eq!(by_prost.annotations, annotations);
    }

    #[test]
    fn more_entries_than_a_layout_keeps_are_read_by_prost() {
        let labels: BTreeMap<String, String> = (0..MAX_ENTRIES + 8)
            .map(|i| (format!("k{i}"), format!("v{i}")))
            .collect();
        let meta = ObjectMetaMaps {
            labels: labels.clone(),
            annotations: BTreeMap::new(),
        }
        .encode_to_vec();
        assert!(Layout::of(&meta).is_none());
        let (by_prost, ours) = both(&meta);
        assert_eq!(ours.map(|m| m.labels), Some(labels));
        assert!(by_prost.is_some());
    }

    #[test]
    fn invalid_utf8_and_wrong_wire_types_are_errors_as_with_prost() {
        for meta in [&[0x5a, 6, 0x0a, 1, 0xff, 0x12, 1, b'v'][..], &[0x58, 1][..]] {
            assert_eq!(both(meta), (None, None));
        }
    }

    proptest! {
        #[test]
        fn any_maps_read_back(
            labels in proptest::collection::btree_map(".{0,12}", ".{0,200}", 0..12),
            annotations in proptest::collection::btree_map(".{0,12}", ".{0,200}", 0..4),
        ) {
            let meta = ObjectMetaMaps { labels, annotations }.encode_to_vec();
            let (by_prost, ours) = both(&meta);
            prop_assert!(by_prost.is_some());
            prop_assert_eq!(by_prost, ours);
        }

        #[test]
        fn any_bytes_read_as_prost_reads_them(
            fields in proptest::collection::vec(
                prop_oneof![
                    proptest::collection::vec(any::<u8>(), 0..24),
                    (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..8), proptest::collection::vec(any::<u8>(), 0..8))
                        .prop_map(|(label, k, v)| {
                            let mut e = vec![0x0a, k.len() as u8];
                            e.extend(k);
                            e.push(0x12);
                            e.push(v.len() as u8);
                            e.extend(v);
                            let mut f = vec![if label { 0x5a } else { 0x62 }, e.len() as u8];
                            f.extend(e);
                            f
                        }),
                    (13u8..15, proptest::collection::vec(any::<u8>(), 0..8)).prop_map(|(tag, v)| {
                        let mut f = vec![tag << 3 | 2, v.len() as u8];
                        f.extend(v);
                        f
                    }),
                ],
                0..6,
            )
        ) {
            let meta: Vec<u8> = fields.concat();
            let (by_prost, ours) = both(&meta);
            prop_assert_eq!(by_prost, ours);
            // The lists' lengths, where the walk reads them, are prost's.
            if let Some(layout) = Layout::of(&meta) {
                let lists = ObjectMetaLists::decode(&meta[..]);
                prop_assert!(lists.is_ok());
                let lists = lists.unwrap_or_default();
                prop_assert_eq!(
                    (layout.owner_references, layout.finalizers),
                    (lists.owner_references.len(), lists.finalizers.len())
                );
            }
        }
    }
}
