//! Decoding one object's JSON into its Rust type, with [`simd_json`].
//!
//! Two reasons over `serde_json` (measured in `cargo bench -p
//! kinformer-benches --bench decode`):
//! - speed: simd-json finds the document's structure with SIMD first, then
//!   hands serde a tape of tokens;
//! - exact sizes: the tape knows how long every array and object is, so
//!   serde allocates each list at its exact size. Decoding with `serde_json`
//!   grows lists by doubling and leaves the slack in the cached object.
//!
//! simd-json parses in place, so the bytes are first copied into a buffer
//! kept per thread (with simd-json's own buffers); when `managedFields` is
//! skipped, the copy leaves it out (see the private module
//! `managed_fields`). Its parser has no nesting limit, so before anything is deserialized the
//! brackets of the parsed bytes are counted 64 bytes at a time
//! ([`kinformer_json_scan::NestingCheck`]): deeper than [`MAX_DEPTH`] is an
//! error, as with `serde_json`.

use std::cell::RefCell;
use std::ops::Range;

use serde::de::DeserializeOwned;
use simd_json::Buffers;

use crate::managed_fields::{Shape, managed_fields_member};
use crate::object_decode::{ObjectDecode, SerdeDecode};

/// Deepest nesting of arrays and objects accepted (`serde_json`'s limit).
pub const MAX_DEPTH: usize = kinformer_json_scan::MAX_DEPTH;

/// Scratch buffers above this size are released after use rather than kept
/// for the thread's next object.
const KEEP_BYTES: usize = 4 << 20;

/// Why an object's JSON could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON, or not the expected shape.
    #[error(transparent)]
    Syntax(#[from] simd_json::Error),
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    #[error("JSON nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

#[derive(Default)]
struct Scratch {
    input: Vec<u8>,
    buffers: Buffers,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Decodes `bytes` as `K`, optionally skipping `metadata.managedFields`
/// while decoding (see [`crate::prune`]).
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let json = br#"{"metadata":{"name":"a","managedFields":[{"manager":"m"}]},"data":{"k":"v"}}"#;
/// let whole: ConfigMap = kinformer_wire::json::from_slice(json, false).unwrap();
/// assert!(whole.metadata.managed_fields.is_some());
/// let pruned: ConfigMap = kinformer_wire::json::from_slice(json, true).unwrap();
/// assert!(pruned.metadata.managed_fields.is_none());
/// assert!(kinformer_wire::json::from_slice::<ConfigMap>(b"{\"data\":", false).is_err());
/// ```
pub fn from_slice<K: DeserializeOwned>(
    bytes: &[u8],
    skip_managed_fields: bool,
) -> Result<K, JsonError> {
    from_slice_as::<K, SerdeDecode>(bytes, skip_managed_fields)
}

/// [`from_slice`], the object decoded by `D` (see [`crate::object_decode`]).
pub fn from_slice_as<K, D: ObjectDecode<K>>(
    bytes: &[u8],
    skip_managed_fields: bool,
) -> Result<K, JsonError> {
    let skip = skip_managed_fields.then_some(Shape::Object);
    with_document(bytes, skip, |de, len| {
        object_in_arena::<_, K, D>(de, skip_managed_fields, len)
    })
}

/// Decodes one object, pruned or whole (see [`crate::prune`]). Its parts go
/// into chunks of their own when the process runs
/// `kinformer_alloc::ObjectArenas`, sized from the objects of type `K`
/// decoded before it and `input_len`, the length of its JSON.
///
/// Only the object goes in: anything else decoded from a document (a watch
/// line's type, a bookmark, an error's status) would teach the size
/// estimate a size no object has, and the objects after it would then be
/// cut from chunk classes none used before, whose first pages the kernel
/// must supply (a load test saw ~25 ms of a decode thread at each bookmark).
/// List items and watch events of one type share the estimate.
pub(crate) fn object_in_arena<'de, De, K, D>(
    de: De,
    skip_managed_fields: bool,
    input_len: usize,
) -> Result<K, De::Error>
where
    De: serde::Deserializer<'de>,
    D: ObjectDecode<K>,
{
    kinformer_alloc::with_object_arena(input_len, || D::deserialize(de, skip_managed_fields))
}

/// Parses `bytes` (checking the nesting depth) and hands the deserializer
/// and the length of the parsed JSON to `f`, with the per-thread buffers.
/// With `skip_managed_fields`, the bytes hold that shape and its
/// `metadata.managedFields` is left out of the parse where it can be found.
pub(crate) fn with_document<T, F>(
    bytes: &[u8],
    skip_managed_fields: Option<Shape>,
    f: F,
) -> Result<T, JsonError>
where
    F: for<'de> FnOnce(&mut simd_json::Deserializer<'de>, usize) -> Result<T, simd_json::Error>,
{
    let cut = skip_managed_fields.and_then(|shape| managed_fields_member(bytes, shape));
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => {
            let Scratch { input, buffers } = &mut *scratch;
            let decoded = parse(bytes, cut, input, buffers, f);
            if input.capacity() > KEEP_BYTES {
                *scratch = Scratch::default();
            }
            decoded
        }
        // Only reached if a `Deserialize` impl decodes JSON itself.
        Err(_) => parse(bytes, cut, &mut Vec::new(), &mut Buffers::default(), f),
    })
}

fn parse<T, F>(
    bytes: &[u8],
    cut: Option<Range<usize>>,
    input: &mut Vec<u8>,
    buffers: &mut Buffers,
    f: F,
) -> Result<T, JsonError>
where
    F: for<'de> FnOnce(&mut simd_json::Deserializer<'de>, usize) -> Result<T, simd_json::Error>,
{
    input.clear();
    let cut = cut.unwrap_or(bytes.len()..bytes.len());
    input.extend_from_slice(bytes.get(..cut.start).unwrap_or(bytes));
    input.extend_from_slice(bytes.get(cut.end..).unwrap_or_default());
    let len = input.len();
    let mut de = simd_json::Deserializer::from_slice_with_buffers(input, buffers)?;
    if nests_too_deep(bytes, &cut) {
        return Err(JsonError::TooDeep);
    }
    Ok(f(&mut de, len)?)
}

/// Whether the document parsed, `bytes` without `cut`, nests deeper than
/// [`MAX_DEPTH`]. The parse rewrites strings in place, so the brackets are
/// counted in `bytes`; the cut is a whole member, so both pieces end
/// outside strings.
fn nests_too_deep(bytes: &[u8], cut: &Range<usize>) -> bool {
    let mut check = kinformer_json_scan::NestingCheck::new(MAX_DEPTH);
    check.feed(bytes.get(..cut.start).unwrap_or(bytes));
    check.feed(bytes.get(cut.end..).unwrap_or_default());
    check.exceeded()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::DynamicObject;
    use kube_core::PartialObjectMeta;

    fn template_pod() -> Vec<u8> {
        crate::testing::POD.as_bytes().to_vec()
    }

    #[test]
    fn a_typed_pod_decodes_as_serde_json_decodes_it() {
        let bytes = template_pod();
        let ours: Pod = from_slice(&bytes, false).unwrap();
        let reference: Pod = serde_json::from_slice(&bytes).unwrap();
        assert!(ours.metadata.managed_fields.is_some());
        assert_eq!(ours, reference);

        let pruned: Pod = from_slice(&bytes, true).unwrap();
        let mut expected = reference;
        expected.metadata.managed_fields = None;
        assert_eq!(pruned, expected);
    }

    #[test]
    fn lists_are_allocated_at_their_exact_length() {
        let bytes = template_pod();
        let pod: Pod = from_slice(&bytes, false).unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers.capacity(), spec.containers.len());
        let fields = pod.metadata.managed_fields.unwrap();
        assert_eq!(fields.capacity(), fields.len());
        // What the test guards against: `serde_json` leaves slack here.
        let grown: Pod = serde_json::from_slice(&bytes).unwrap();
        let grown = grown.metadata.managed_fields.unwrap();
        assert!(grown.capacity() > grown.len());
    }

    #[test]
    fn dynamic_and_metadata_only_objects_decode_as_with_serde_json() {
        let json = br#"{"apiVersion":"x.dev/v1","kind":"X","metadata":{"name":"x","namespace":"n","labels":{"a":"b"}},"spec":{"int":-5,"big":18446744073709551615,"float":1.5e3,"esc":"q\"\\\u00e9\ud83d\ude00","nested":[[1,[2,{"k":null}]],true],"empty":{}}}"#;
        let ours: DynamicObject = from_slice(json, false).unwrap();
        let reference: DynamicObject = serde_json::from_slice(json).unwrap();
        assert_eq!(ours.data, reference.data);
        assert_eq!(ours.metadata, reference.metadata);
        let meta: PartialObjectMeta<Pod> = from_slice(&template_pod(), true).unwrap();
        assert_eq!(meta.metadata.name.as_deref(), Some("pod-0"));
        assert!(meta.metadata.managed_fields.is_none());
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let bad: [&[u8]; 8] = [
            b"",
            b"{",
            br#"{"metadata":{"name":"p"}} trailing"#,
            br#"{"metadata":{"name":5}}"#,
            br#"{"metadata":{"name":"\x"}}"#,
            b"{\"metadata\":{\"name\":\"\xff\xfe\"}}",
            br#"{"metadata":{"managedFields":[{]}}"#,
            br#"[1,2,3]"#,
        ];
        for json in bad {
            assert!(
                from_slice::<Pod>(json, false).is_err(),
                "{:?}",
                String::from_utf8_lossy(json)
            );
            assert!(from_slice::<Pod>(json, true).is_err());
        }
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        let nested = |n: usize| {
            format!(
                r#"{{"apiVersion":"x/v1","kind":"X","metadata":{{"name":"x"}},"spec":{}0{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        // The object and `spec`'s arrays: 1 + n levels.
        let ok: DynamicObject = from_slice(nested(MAX_DEPTH - 1).as_bytes(), false).unwrap();
        assert_eq!(ok.metadata.name.as_deref(), Some("x"));
        assert!(matches!(
            from_slice::<DynamicObject>(nested(MAX_DEPTH).as_bytes(), false),
            Err(JsonError::TooDeep)
        ));
        assert!(matches!(
            from_slice::<DynamicObject>(nested(100_000).as_bytes(), false),
            Err(JsonError::TooDeep)
        ));
        // Brackets inside strings do not count.
        let brackets = format!(
            r#"{{"apiVersion":"x/v1","kind":"X","metadata":{{"name":"{}"}}}}"#,
            "[{".repeat(500)
        );
        assert!(from_slice::<DynamicObject>(brackets.as_bytes(), false).is_ok());
    }

    #[test]
    fn nesting_is_counted_in_the_bytes_left_after_the_cut() {
        // `managedFields` (cut before the parse) holds more brackets than
        // the limit; what follows it is counted at its place in the bytes.
        let nested = |n: usize| {
            format!(
                r#"{{"apiVersion":"x/v1","kind":"X","metadata":{{"name":"x","managedFields":[{}]}},"spec":{}0{}}}"#,
                "{}".repeat(300),
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        let ok: DynamicObject = from_slice(nested(MAX_DEPTH - 1).as_bytes(), true).unwrap();
        assert_eq!(ok.metadata.managed_fields, None);
        assert!(matches!(
            from_slice::<DynamicObject>(nested(MAX_DEPTH).as_bytes(), true),
            Err(JsonError::TooDeep)
        ));
    }

    #[test]
    fn large_objects_do_not_stay_in_the_scratch_buffer() {
        let big = format!(
            r#"{{"apiVersion":"x/v1","kind":"X","metadata":{{"name":"x"}},"spec":"{}"}}"#,
            "a".repeat(KEEP_BYTES + 1)
        );
        let _: DynamicObject = from_slice(big.as_bytes(), false).unwrap();
        SCRATCH.with(|s| assert!(s.borrow().input.capacity() <= KEEP_BYTES));
    }
}
