//! Objects outside the informer's shard, told from their raw bytes.
//!
//! A server that does not apply the `shardSelector` (the gate off, an older
//! server) sends the whole collection. Each object's hashed field (its UID
//! or namespace) is read from the raw bytes before anything is decoded, so
//! that an object of another shard costs a scan of its `metadata`, not a
//! decode, and a replica's decode CPU and memory still scale with its
//! shard. JSON is scanned with [`kinformer_json_scan::string_members`];
//! protobuf is read by following the length-prefixed fields down to
//! `ObjectMeta`.
//!
//! Only a definite answer leaves an object out. What the scan cannot read
//! (another shape, a string with escapes, a watch event that is not an
//! object's change) is decoded and checked on the decoded object instead,
//! which gives the same answer for every well-formed object.

use kinformer_wire::shard::{ShardField, ShardSelector};

use crate::decode_thread::{frame_item, proto_field};

/// An object found outside the shard.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Outside<'a> {
    /// Its `metadata.resourceVersion`, when found.
    pub(crate) resource_version: Option<&'a [u8]>,
}

/// The member of `metadata` that `shard` hashes.
fn json_field(shard: &ShardSelector) -> &'static [u8] {
    match shard.field() {
        ShardField::Uid => b"uid",
        ShardField::Namespace => b"namespace",
    }
}

/// The verdict on an object whose `metadata` members are `[field, rv]`.
fn judge<'a>(shard: &ShardSelector, [value, rv]: [Option<&'a [u8]>; 2]) -> Option<Outside<'a>> {
    let value = match (value, shard.field()) {
        (Some(v), _) if !v.contains(&b'\\') => v,
        // A cluster-scoped object has no namespace: the empty one's hash.
        (None, ShardField::Namespace) => b"",
        _ => return None,
    };
    (!shard.matches_bytes(value)).then_some(Outside {
        resource_version: rv.filter(|rv| !rv.contains(&b'\\')),
    })
}

/// A LIST item (one object's JSON) outside `shard`.
pub(crate) fn json_item<'a>(shard: &ShardSelector, item: &'a [u8]) -> Option<Outside<'a>> {
    let members = kinformer_json_scan::string_members(
        item,
        &[b"metadata"],
        [json_field(shard), b"resourceVersion"],
    )?;
    judge(shard, members)
}

/// A watch line (`{"type":…,"object":…}`) that adds, modifies or deletes
/// an object outside `shard`.
pub(crate) fn json_event<'a>(shard: &ShardSelector, line: &'a [u8]) -> Option<Outside<'a>> {
    let [kind] = kinformer_json_scan::string_members(line, &[], [b"type"])?;
    if !is_change(kind?) {
        return None;
    }
    let members = kinformer_json_scan::string_members(
        line,
        &[b"object", b"metadata"],
        [json_field(shard), b"resourceVersion"],
    )?;
    judge(shard, members)
}

/// Whether a watch event's type is an object's change (not a bookmark or
/// an error, which always go through).
fn is_change(kind: &[u8]) -> bool {
    matches!(kind, b"ADDED" | b"MODIFIED" | b"DELETED")
}

/// An item of a protobuf LIST page (a message whose field 1 is its
/// `ObjectMeta`) outside `shard`.
pub(crate) fn protobuf_item<'a>(shard: &ShardSelector, item: &'a [u8]) -> Option<Outside<'a>> {
    let meta = proto_field(item, 1)?;
    // ObjectMeta: namespace 3, uid 5, resourceVersion 6.
    let number = match shard.field() {
        ShardField::Uid => 5,
        ShardField::Namespace => 3,
    };
    judge(shard, [proto_field(meta, number), proto_field(meta, 6)])
}

/// A protobuf watch frame that adds, modifies or deletes an object outside
/// `shard`.
pub(crate) fn frame<'a>(shard: &ShardSelector, frame: &'a [u8]) -> Option<Outside<'a>> {
    // WatchEvent: type 1.
    if !is_change(proto_field(frame, 1)?) {
        return None;
    }
    protobuf_item(shard, frame_item(frame)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UID in each half of the hash space.
    fn uids() -> (String, String) {
        let low = ShardSelector::uid_shard(0, 2);
        let uid = |n: u32| format!("00000000-0000-0000-0000-{n:012}");
        let inside = (0..).map(uid).find(|u| low.matches(u)).unwrap();
        let outside = (0..).map(uid).find(|u| !low.matches(u)).unwrap();
        (inside, outside)
    }

    #[test]
    fn json_objects_of_other_shards_are_told_before_decoding() {
        let shard = ShardSelector::uid_shard(0, 2);
        let (inside, outside) = uids();
        let item = |uid: &str| {
            format!(
                r#"{{"metadata":{{"name":"a","ownerReferences":[{{"uid":"{inside}"}}],"uid":"{uid}","resourceVersion":"9"}},"spec":{{}}}}"#
            )
        };
        assert_eq!(json_item(&shard, item(&inside).as_bytes()), None);
        assert_eq!(
            json_item(&shard, item(&outside).as_bytes()),
            Some(Outside {
                resource_version: Some(b"9")
            })
        );
        let line = |kind: &str, uid: &str| format!(r#"{{"type":"{kind}","object":{}}}"#, item(uid));
        for kind in ["ADDED", "MODIFIED", "DELETED"] {
            assert!(json_event(&shard, line(kind, &outside).as_bytes()).is_some());
            assert_eq!(json_event(&shard, line(kind, &inside).as_bytes()), None);
        }
        // Bookmarks and errors always go through; so does what cannot be
        // read without decoding.
        assert_eq!(
            json_event(&shard, line("BOOKMARK", &outside).as_bytes()),
            None
        );
        let escaped = item(&outside).replace(&outside, &format!("\\u0030{}", &outside[1..]));
        assert_eq!(json_item(&shard, escaped.as_bytes()), None);
        assert_eq!(json_item(&shard, br#"{"metadata":{"name":"a"}}"#), None);
        assert_eq!(json_item(&shard, b"[1,2]"), None);
    }

    #[test]
    fn a_namespace_shard_puts_cluster_scoped_objects_where_the_empty_namespace_hashes() {
        let ns = |range| ShardSelector::new(ShardField::Namespace, [range]).unwrap();
        let hash = kinformer_wire::shard::fnv1a64(b"");
        let with_empty = ns(kinformer_wire::shard::ShardRange {
            start: hash,
            end: u128::from(hash) + 1,
        });
        let cluster_scoped = br#"{"metadata":{"name":"node-1","resourceVersion":"3"}}"#;
        assert_eq!(json_item(&with_empty, cluster_scoped), None);
        let without = ns(kinformer_wire::shard::ShardRange {
            start: hash + 1,
            end: 1 << 64,
        });
        assert!(json_item(&without, cluster_scoped).is_some());
    }

    #[test]
    fn protobuf_items_and_frames_of_other_shards_are_told_before_decoding() {
        // ObjectMeta {name 1, uid 5, resourceVersion 6} in an item's field 1.
        let meta = |uid: &str| {
            let mut m = Vec::new();
            prost::encoding::string::encode(1, &"a".to_string(), &mut m);
            prost::encoding::string::encode(5, &uid.to_string(), &mut m);
            prost::encoding::string::encode(6, &"12".to_string(), &mut m);
            m
        };
        let item = |uid: &str| {
            let mut i = Vec::new();
            prost::encoding::bytes::encode(1, &meta(uid), &mut i);
            i
        };
        let frame = |kind: &str, uid: &str| {
            let mut unknown = crate::protobuf::MAGIC.to_vec();
            let mut body = Vec::new();
            prost::encoding::bytes::encode(2, &item(uid), &mut body);
            unknown.extend_from_slice(&body);
            let mut raw = Vec::new();
            prost::encoding::bytes::encode(1, &unknown, &mut raw);
            let mut f = Vec::new();
            prost::encoding::string::encode(1, &kind.to_string(), &mut f);
            prost::encoding::bytes::encode(2, &raw, &mut f);
            f
        };
        let shard = ShardSelector::uid_shard(0, 2);
        let (inside, outside) = uids();
        assert_eq!(protobuf_item(&shard, &item(&inside)), None);
        assert_eq!(
            protobuf_item(&shard, &item(&outside)),
            Some(Outside {
                resource_version: Some(b"12")
            })
        );
        assert!(super::frame(&shard, &frame("MODIFIED", &outside)).is_some());
        assert_eq!(super::frame(&shard, &frame("MODIFIED", &inside)), None);
        assert_eq!(super::frame(&shard, &frame("BOOKMARK", &outside)), None);
        assert_eq!(super::frame(&shard, b"\x0a\x05ADDED"), None);
    }
}
