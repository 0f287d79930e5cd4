//! [`Compact`]: one object as the compact cache holds it.

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_core::{ObjectMeta, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::codec;
use crate::error::CompactError;

/// Ids of packed objects: unique in the process, never reused, so that a
/// decoded object cached under an id is the decoding of exactly one body.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// An object of type `K` in the compact cache: its metadata decoded (what
/// keys, indexes, label selectors and namespace listers read), the rest
/// packed as compressed bytes ([`codec`](crate::codec)) and decoded on
/// demand with [`decode`](Self::decode).
///
/// A `Compact` is *fresh* (the whole object, decoded) until
/// [`pack`](Self::pack)ed: that is how decoders produce it (its
/// `Deserialize` impl reads a `K`), and the compact informer's transform
/// packs it after the user's transforms ran. `managedFields` are kept in
/// the packed bytes, not in the decoded metadata.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kinformer_compact::Compact;
/// use kube_core::{ObjectMeta, Resource};
///
/// let pod = Pod {
///     metadata: ObjectMeta { name: Some("web-0".into()), namespace: Some("prod".into()), ..Default::default() },
///     ..Default::default()
/// };
/// let packed = Compact::pack(pod.clone()).unwrap();
/// assert!(packed.is_packed());
/// assert_eq!(packed.meta().name.as_deref(), Some("web-0"));
/// assert_eq!(packed.decode().unwrap(), pod);
/// ```
pub struct Compact<K> {
    repr: Repr<K>,
}

// The packed variant is the one cached: its metadata inline saves an
// allocation per object; the fresh one is transient (decoder to transform).
#[allow(clippy::large_enum_variant)]
enum Repr<K> {
    Fresh(Box<K>),
    Packed {
        /// Without `managedFields` (they are in `body`).
        meta: ObjectMeta,
        body: Box<[u8]>,
        id: u64,
    },
}

impl<K: Resource + Serialize + DeserializeOwned> Compact<K> {
    /// Packs `obj`: its metadata stays decoded, the rest is encoded and
    /// compressed.
    pub fn pack(mut obj: K) -> Result<Self, CompactError> {
        Self::pack_from(&mut obj)
    }

    /// Packs a copy of `obj`, which is left as it was (its metadata is
    /// moved out while the rest is encoded, then put back): no copy of the
    /// whole object is made.
    pub fn pack_from(obj: &mut K) -> Result<Self, CompactError> {
        let mut meta = std::mem::take(obj.meta_mut());
        obj.meta_mut().managed_fields = meta.managed_fields.take();
        let encoded = serde_json::to_vec(&*obj);
        // `meta` has no managedFields now: what the packed object keeps.
        let stored = meta.clone();
        meta.managed_fields = obj.meta_mut().managed_fields.take();
        *obj.meta_mut() = meta;
        let encoded = encoded.map_err(|e| CompactError::Encode(e.to_string()))?;
        Ok(Self::from_parts(stored, codec::pack(&encoded)?))
    }

    /// The whole object: decoded from the packed bytes, or a copy of the
    /// fresh one.
    pub fn decode(&self) -> Result<K, CompactError>
    where
        K: Clone,
    {
        match &self.repr {
            Repr::Fresh(obj) => Ok((**obj).clone()),
            Repr::Packed { meta, body, .. } => decode_body(meta, body),
        }
    }

    /// The whole object, by value: a fresh one without a copy.
    pub fn into_object(self) -> Result<K, CompactError> {
        match self.repr {
            Repr::Fresh(obj) => Ok(*obj),
            Repr::Packed { meta, body, .. } => decode_body(&meta, &body),
        }
    }
}

/// Decodes a body and puts `meta` back in.
fn decode_body<K: Resource + DeserializeOwned>(
    meta: &ObjectMeta,
    body: &[u8],
) -> Result<K, CompactError> {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    SCRATCH.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        codec::unpack(body, &mut scratch)?;
        // The reflector's decoder (simd-json): faster than `serde_json`,
        // and it allocates every list at its exact size.
        let mut obj: K = kinformer_wire::json::from_slice(&scratch, false)
            .map_err(|e| CompactError::Decode(e.to_string()))?;
        // A large object leaves no large buffer behind on the thread.
        if scratch.capacity() > 1 << 20 {
            *scratch = Vec::new();
        }
        let managed_fields = obj.meta_mut().managed_fields.take();
        *obj.meta_mut() = ObjectMeta {
            managed_fields,
            ..meta.clone()
        };
        Ok(obj)
    })
}

impl<K> Compact<K> {
    /// A packed object made of its metadata and packed bytes (as
    /// [`packed_bytes`](Self::packed_bytes) returned them), e.g. read back
    /// from storage. The bytes are checked when decoded.
    pub fn from_parts(meta: ObjectMeta, body: Box<[u8]>) -> Self {
        Self {
            repr: Repr::Packed {
                meta,
                body,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            },
        }
    }

    /// An unpacked `Compact` holding `obj` as it is.
    pub fn fresh(obj: K) -> Self {
        Self {
            repr: Repr::Fresh(Box::new(obj)),
        }
    }

    /// Whether the object is packed (else it is fresh).
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Packed { .. })
    }

    /// The id of the packed bytes: unique in the process (`None` while
    /// fresh).
    pub fn id(&self) -> Option<u64> {
        match &self.repr {
            Repr::Fresh(_) => None,
            Repr::Packed { id, .. } => Some(*id),
        }
    }

    /// The size of the packed bytes (`None` while fresh).
    pub fn packed_len(&self) -> Option<usize> {
        match &self.repr {
            Repr::Fresh(_) => None,
            Repr::Packed { body, .. } => Some(body.len()),
        }
    }

    /// The packed bytes (`None` while fresh), e.g. to check how they
    /// compress.
    pub fn packed_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Fresh(_) => None,
            Repr::Packed { body, .. } => Some(body),
        }
    }

    /// The fresh object by value, or the packed `Compact` back.
    #[allow(clippy::result_large_err)] // a move of what was passed in
    pub fn take_fresh(self) -> Result<K, Self> {
        match self.repr {
            Repr::Fresh(obj) => Ok(*obj),
            repr @ Repr::Packed { .. } => Err(Self { repr }),
        }
    }

    /// The fresh object, if not packed.
    pub fn as_fresh(&self) -> Option<&K> {
        match &self.repr {
            Repr::Fresh(obj) => Some(obj),
            Repr::Packed { .. } => None,
        }
    }
}

impl<K: Clone> Clone for Compact<K> {
    fn clone(&self) -> Self {
        let repr = match &self.repr {
            Repr::Fresh(obj) => Repr::Fresh(obj.clone()),
            // The same bytes: the same id.
            Repr::Packed { meta, body, id } => Repr::Packed {
                meta: meta.clone(),
                body: body.clone(),
                id: *id,
            },
        };
        Self { repr }
    }
}

impl<K: fmt::Debug> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Fresh(obj) => f.debug_tuple("Compact::Fresh").field(obj).finish(),
            Repr::Packed { meta, body, id } => f
                .debug_struct("Compact::Packed")
                .field("name", &meta.name)
                .field("namespace", &meta.namespace)
                .field("resource_version", &meta.resource_version)
                .field("bytes", &body.len())
                .field("id", id)
                .finish(),
        }
    }
}

impl<K: Resource> Resource for Compact<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn metadata_api() -> bool {
        K::metadata_api()
    }
    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }
    fn meta(&self) -> &ObjectMeta {
        match &self.repr {
            Repr::Fresh(obj) => obj.meta(),
            Repr::Packed { meta, .. } => meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match &mut self.repr {
            Repr::Fresh(obj) => obj.meta_mut(),
            Repr::Packed { meta, .. } => meta,
        }
    }
}

/// Reads a `K` into a fresh `Compact` (how the reflector's decoders build
/// one; the compact informer packs it afterwards).
impl<'de, K: Deserialize<'de>> Deserialize<'de> for Compact<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(deserializer).map(Self::fresh)
    }
}
