//! Which decode thread owns a key.
//!
//! Each key's objects are decoded on one decode thread, chosen from the key
//! alone, so that the thread that allocated an object's versions is known
//! wherever the object is let go of (see [`DecodePool::reclaimer`]). Before
//! decoding, the key is found by a light scan of the raw JSON: the first
//! `"name"` string field after `"metadata"`, and a `"namespace"` string
//! field shortly after it. That is
//! exact for the apiserver's field order (name and namespace lead
//! `metadata`) and for alphabetical order unless a label or annotation is
//! itself called `name` or `namespace`. A scan that finds no key, or a
//! wrong one, only costs locality: decoded batches are put back in arrival
//! order whatever thread decoded each line.
//!
//! [`DecodePool::reclaimer`]: crate::DecodePool::reclaimer

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// FNV-1a over bytes given in pieces (the same as over their concatenation).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn shard(&self, shards: usize) -> usize {
        // FNV's bits are poorly mixed for keys that differ in a digit or
        // two: finish with a 64-bit mixer before the modulo.
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        (h % shards.max(1) as u64) as usize
    }
}

/// The shard of an object key (`namespace/name` or `name`).
pub fn thread_of_key(key: &str, shards: usize) -> usize {
    let mut h = Fnv::new();
    h.write(key.as_bytes());
    h.shard(shards)
}

/// The shard of the object in raw JSON (a watch line or a LIST item): that
/// of its `metadata.namespace` and `metadata.name`, found by a scan of the
/// first `metadata` object; shard 0 when they are not found.
pub(crate) fn thread_of_json(json: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    scan_key(json).map_or(0, |(namespace, name)| {
        thread_of_parts(namespace.unwrap_or_default(), name, shards)
    })
}

/// The shard of the key `namespace/name` (`name` when `namespace` is empty).
fn thread_of_parts(namespace: &[u8], name: &[u8], shards: usize) -> usize {
    let mut h = Fnv::new();
    if !namespace.is_empty() {
        h.write(namespace);
        h.write(b"/");
    }
    h.write(name);
    h.shard(shards)
}

/// The shard of the object in a protobuf watch frame (see
/// [`crate::protobuf`]): that of its `metadata.namespace` and
/// `metadata.name`, read by following the few length-prefixed fields that
/// lead to them; shard 0 when they are not there.
pub(crate) fn thread_of_frame(frame: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    frame_key(frame).map_or(0, |(namespace, name)| {
        thread_of_parts(namespace, name, shards)
    })
}

/// The shard of an item of a protobuf LIST page (a `PartialObjectMetadata`
/// without envelope), as [`thread_of_frame`] finds that of the same object in
/// a watch frame.
pub(crate) fn thread_of_protobuf_item(item: &[u8], shards: usize) -> usize {
    if shards <= 1 {
        return 0;
    }
    item_key(item).map_or(0, |(namespace, name)| {
        thread_of_parts(namespace, name, shards)
    })
}

/// `(namespace, name)` in a watch frame's item.
fn frame_key(frame: &[u8]) -> Option<(&[u8], &[u8])> {
    item_key(frame_item(frame)?)
}

/// The item a watch frame carries: `WatchEvent.object` (2) →
/// `RawExtension.raw` (1) → the `k8s\0` envelope's `raw` (2).
pub(crate) fn frame_item(frame: &[u8]) -> Option<&[u8]> {
    let object = proto_field(frame, 2)?;
    let enveloped = proto_field(object, 1)?;
    let unknown = enveloped.strip_prefix(crate::protobuf::MAGIC.as_slice())?;
    proto_field(unknown, 2)
}

/// `(namespace, name)` of a `PartialObjectMetadata` message: `metadata` (1)
/// → `name` (1), `namespace` (3).
fn item_key(item: &[u8]) -> Option<(&[u8], &[u8])> {
    let meta = proto_field(item, 1)?;
    Some((
        proto_field(meta, 3).unwrap_or_default(),
        proto_field(meta, 1)?,
    ))
}

/// The first length-delimited field numbered `number` in a message.
pub(crate) fn proto_field(mut msg: &[u8], number: u32) -> Option<&[u8]> {
    use prost::encoding::{WireType, decode_key, decode_varint};
    while !msg.is_empty() {
        let (tag, wire) = decode_key(&mut msg).ok()?;
        let len = match wire {
            WireType::Varint => {
                decode_varint(&mut msg).ok()?;
                continue;
            }
            WireType::SixtyFourBit => 8,
            WireType::ThirtyTwoBit => 4,
            WireType::LengthDelimited => usize::try_from(decode_varint(&mut msg).ok()?).ok()?,
            WireType::StartGroup | WireType::EndGroup => return None,
        };
        let value = msg.get(..len)?;
        if tag == number && wire == WireType::LengthDelimited {
            return Some(value);
        }
        msg = &msg[len..];
    }
    None
}

/// `(namespace, name)` of the object: the first `"name"` string field
/// after `"metadata"`, and a `"namespace"` string field shortly after it.
fn scan_key(json: &[u8]) -> Option<(Option<&[u8]>, &[u8])> {
    static METADATA: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"metadata\""));
    static NAME: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"name\""));
    static NAMESPACE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"namespace\""));
    let metadata = json.get(METADATA.find(json)?..)?;
    let (name, name_end) = string_field(metadata, &NAME, 0, usize::MAX)?;
    // `namespace` follows `name` closely in both orders (apiserver: after
    // `generateName`; alphabetical: next). Looking further would find the
    // `namespace` fields in the spec of cluster-scoped objects (a
    // PersistentVolume's `claimRef`, a binding's subjects).
    let namespace = string_field(metadata, &NAMESPACE, name_end, name_end + NAMESPACE_WITHIN);
    Some((namespace.map(|(ns, _)| ns), name))
}

/// How far after `name`'s value the `"namespace"` field may start: past a
/// `generateName` field (a value of at most 63 characters).
const NAMESPACE_WITHIN: usize = 96;

/// The value of the first field found by `field` (a quoted name) from
/// `from` on whose value is a string, if that field starts before
/// `starts_before`; with where the value ends in `json`.
fn string_field<'a>(
    json: &'a [u8],
    field: &Finder<'_>,
    mut from: usize,
    starts_before: usize,
) -> Option<(&'a [u8], usize)> {
    loop {
        let start = from + field.find(json.get(from..)?)?;
        if start >= starts_before {
            return None;
        }
        let at = start + field.needle().len();
        from = at;
        let rest = json.get(at..)?;
        let mut i = skip_ws(rest, 0);
        if rest.get(i) != Some(&b':') {
            continue;
        }
        i = skip_ws(rest, i + 1);
        if rest.get(i) != Some(&b'"') {
            continue;
        }
        let value = rest.get(i + 1..)?;
        let len = memchr::memchr(b'"', value)?;
        return Some((value.get(..len)?, at + i + 1 + len + 1));
    }
}

fn skip_ws(json: &[u8], mut i: usize) -> usize {
    while matches!(json.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protobuf_frame_and_its_key_have_the_same_shard() {
        let body: &[u8] = include_bytes!(
            "../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-watchlist.pb"
        );
        let len = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) as usize;
        let frame = &body[4..4 + len];
        assert_eq!(frame_key(frame), Some((&b"pb"[..], &b"pod-0"[..])));
        for shards in 1..9 {
            assert_eq!(
                thread_of_frame(frame, shards),
                thread_of_key("pb/pod-0", shards)
            );
        }
        // Cut anywhere, a frame yields shard 0 or its own, never a panic.
        for cut in 0..frame.len() {
            let s = thread_of_frame(&frame[..cut], 4);
            assert!(s == 0 || s == thread_of_key("pb/pod-0", 4));
        }
    }

    #[test]
    fn a_protobuf_list_item_and_its_key_have_the_same_shard() {
        let body: &[u8] =
            include_bytes!("../../kinformer-wire/tests/fixtures/protobuf/pod-metadata-list.pb");
        let page = crate::protobuf::decode_list(bytes::Bytes::from_static(body)).unwrap();
        let item = &page.items[0];
        assert_eq!(item_key(item), Some((&b"pb"[..], &b"pod-0"[..])));
        for shards in 1..9 {
            assert_eq!(
                thread_of_protobuf_item(item, shards),
                thread_of_key("pb/pod-0", shards)
            );
        }
    }

    #[test]
    fn a_watch_line_and_its_key_have_the_same_shard() {
        let line = br#"{"type":"MODIFIED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"labels":{"a":"b","c":[1,{"d":"}"}]},"uid":"u-1","name":"web-0","generation":3,"namespace":"prod","managedFields":[{"f":{"f:x":{}}}]},"spec":{}}}"#;
        assert_eq!(scan_key(line), Some((Some(&b"prod"[..]), &b"web-0"[..])));
        for shards in 1..9 {
            assert_eq!(
                thread_of_json(line, shards),
                thread_of_key("prod/web-0", shards)
            );
        }
    }

    #[test]
    fn a_cluster_scoped_object_hashes_its_name() {
        let item = br#"{"metadata": {"name": "node-1", "resourceVersion": "5"}, "spec": {}}"#;
        assert_eq!(scan_key(item), Some((None, &b"node-1"[..])));
        assert_eq!(thread_of_json(item, 7), thread_of_key("node-1", 7));
    }

    #[test]
    fn a_namespace_in_the_spec_of_a_cluster_scoped_object_is_not_taken() {
        let pv = br#"{"kind":"PersistentVolume","apiVersion":"v1","metadata":{"name":"pv-1","uid":"6f1e2d3c-4b5a-4968-8776-000000000001","resourceVersion":"12345","creationTimestamp":"2025-01-01T00:00:00Z"},"spec":{"claimRef":{"namespace":"prod","name":"data"}}}"#;
        assert_eq!(scan_key(pv), Some((None, &b"pv-1"[..])));
    }

    #[test]
    fn json_without_a_key_goes_to_shard_zero() {
        for json in [
            &br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}"#[..],
            br#"{"type":"ERROR","object":{"code":410}}"#,
            br#"{"metadata":{"name":"#,
            br#"{"metadata":{"name":{"x":1}}}"#,
            b"not json",
            b"",
        ] {
            assert_eq!(thread_of_json(json, 4), 0);
        }
    }

    #[test]
    fn keys_spread_over_the_shards() {
        let mut counts = [0usize; 4];
        for i in 0..4000 {
            counts[thread_of_key(&format!("ns-{}/pod-{i}", i % 7), 4)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
    }
}
