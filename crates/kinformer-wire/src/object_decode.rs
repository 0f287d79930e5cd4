//! How a reflector turns JSON into objects of its type.
//!
//! Most types decode through their own `Deserialize` impl
//! ([`SerdeDecode`], with `metadata.managedFields` pruned on request). A
//! type whose derived impl does needless work gets a decoder of its own:
//! kube's `PartialObjectMeta` ([`PartialObjectMetaDecode`], see
//! [`crate::partial_meta`]) and `DynamicObject` ([`DynamicObjectDecode`],
//! see [`crate::dynamic_object`]). [`Decoders`] holds the chosen decoder's entry
//! points as plain function pointers, so the reflector and its decode
//! pipeline stay generic over the object type alone.

use kube_core::DynamicObject;
use kube_core::{PartialObjectMeta, Resource, TypeMeta};
use serde::de::{DeserializeOwned, DeserializeSeed, Deserializer};

use crate::dynamic_object::DynamicObjectSeed;
use crate::error::WireError;
use crate::event::{WatchEvent, check_name, decode_event_as, decode_object_as};
use crate::partial_meta::PartialObjectMetaSeed;

/// Decodes one object of type `K` from any deserializer.
pub trait ObjectDecode<K> {
    /// Decodes `K`, leaving out `metadata.managedFields` when
    /// `skip_managed_fields` is set.
    fn deserialize<'de, D: Deserializer<'de>>(
        de: D,
        skip_managed_fields: bool,
    ) -> Result<K, D::Error>;
}

/// `K`'s own `Deserialize` impl (pruned by [`crate::prune`] on request).
pub struct SerdeDecode;

impl<K: DeserializeOwned> ObjectDecode<K> for SerdeDecode {
    fn deserialize<'de, D: Deserializer<'de>>(
        de: D,
        skip_managed_fields: bool,
    ) -> Result<K, D::Error> {
        crate::prune::deserialize_object(de, skip_managed_fields)
    }
}

/// kube's `PartialObjectMeta` read member by member, without the buffering
/// of its derived impl (see [`crate::partial_meta`]); same result.
pub struct PartialObjectMetaDecode;

impl<K> ObjectDecode<PartialObjectMeta<K>> for PartialObjectMetaDecode {
    fn deserialize<'de, D: Deserializer<'de>>(
        de: D,
        skip_managed_fields: bool,
    ) -> Result<PartialObjectMeta<K>, D::Error> {
        PartialObjectMetaSeed::new(skip_managed_fields).deserialize(de)
    }
}

/// kube's `DynamicObject` with each member decoded once, straight into
/// its place (see [`crate::dynamic_object`]); same result as its derived
/// impl.
pub struct DynamicObjectDecode;

impl ObjectDecode<DynamicObject> for DynamicObjectDecode {
    fn deserialize<'de, D: Deserializer<'de>>(
        de: D,
        skip_managed_fields: bool,
    ) -> Result<DynamicObject, D::Error> {
        DynamicObjectSeed::new(skip_managed_fields).deserialize(de)
    }
}

/// Decodes one watch line (the flag: skip `metadata.managedFields`).
pub type EventFn<K> = fn(&[u8], bool) -> Result<WatchEvent<K>, WireError>;
/// Decodes one object's JSON, a LIST item (the flag as for [`EventFn`]).
pub type ObjectFn<K> = fn(&[u8], bool) -> Result<K, WireError>;
/// Decodes one protobuf watch frame (the flag as for [`EventFn`]).
pub type FrameFn<K> = fn(bytes::Bytes, bool) -> Result<WatchEvent<K>, WireError>;
/// Decodes one item of a protobuf LIST page, of the page's item types (the
/// flag as for [`EventFn`]), and checks it has a name.
pub type ListItemFn<K> = fn(bytes::Bytes, Option<TypeMeta>, bool) -> Result<K, WireError>;

/// The decode functions a reflector of `K` uses: [`Decoders::serde`] by
/// default, [`Decoders::partial_object_meta`] for metadata-only informers,
/// [`Decoders::dynamic_object`] for dynamic ones.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use kube_core::PartialObjectMeta;
/// use kinformer_wire::object_decode::Decoders;
///
/// let d = Decoders::<PartialObjectMeta<Pod>>::partial_object_meta();
/// let line = br#"{"type":"ADDED","object":{"apiVersion":"meta.k8s.io/v1","kind":"PartialObjectMetadata","metadata":{"name":"a","resourceVersion":"3"}}}"#;
/// assert!(d.event(line, true).is_ok());
/// assert!(Decoders::<Pod>::serde().object(b"{}", false).is_err()); // no name
/// ```
pub struct Decoders<K> {
    event: EventFn<K>,
    object: ObjectFn<K>,
    /// Protobuf watch frames, for the types that have a protobuf decoder.
    frame: Option<FrameFn<K>>,
    /// Protobuf LIST items, for the same types.
    list_item: Option<ListItemFn<K>>,
    /// Whether these are this crate's decoders of the type (see
    /// [`builds_fresh_objects`](Decoders::builds_fresh_objects)).
    fresh: bool,
}

impl<K> Clone for Decoders<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Decoders<K> {}

impl<K> std::fmt::Debug for Decoders<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoders").finish_non_exhaustive()
    }
}

impl<K: Resource + DeserializeOwned> Decoders<K> {
    /// Through `K`'s own `Deserialize` impl.
    pub fn serde() -> Self {
        Self {
            fresh: true,
            ..Self::with::<SerdeDecode>()
        }
    }

    /// Through the decoder `D`.
    pub fn with<D: ObjectDecode<K>>() -> Self {
        Self {
            event: decode_event_as::<K, D>,
            object: decode_object_as::<K, D>,
            frame: None,
            list_item: None,
            fresh: false,
        }
    }

    /// Decodes one watch line.
    pub fn event(
        &self,
        line: &[u8],
        skip_managed_fields: bool,
    ) -> Result<WatchEvent<K>, WireError> {
        (self.event)(line, skip_managed_fields)
    }

    /// Decodes one object (a LIST item) and checks it has a name.
    pub fn object(&self, bytes: &[u8], skip_managed_fields: bool) -> Result<K, WireError> {
        (self.object)(bytes, skip_managed_fields)
    }
}

impl<K> Decoders<K> {
    /// Whether these are this crate's own decoders ([`serde`](Decoders::serde),
    /// [`partial_object_meta`](Decoders::partial_object_meta),
    /// [`dynamic_object`](Decoders::dynamic_object)), which build each
    /// object from the input in one `kinformer_alloc::with_object_arena`
    /// scope, through `K`'s `Deserialize` at most. False for a decoder of
    /// one's own ([`with`](Decoders::with)), whatever it does.
    pub fn builds_fresh_objects(&self) -> bool {
        self.fresh
    }

    /// Whether watch events and LIST items of `K` can be read in the
    /// protobuf encoding.
    pub fn has_protobuf(&self) -> bool {
        self.frame.is_some() && self.list_item.is_some()
    }

    /// Decodes one protobuf watch frame (an error for a type without a
    /// protobuf decoder: see [`has_protobuf`](Self::has_protobuf)).
    pub fn frame(
        &self,
        frame: bytes::Bytes,
        skip_managed_fields: bool,
    ) -> Result<WatchEvent<K>, WireError> {
        match self.frame {
            Some(f) => f(frame, skip_managed_fields),
            None => Err(WireError::DecodeObject(
                "a protobuf watch frame for a type without a protobuf decoder".into(),
            )),
        }
    }

    /// Decodes one item of a protobuf LIST page (an error for a type
    /// without a protobuf decoder).
    pub fn list_item(
        &self,
        item: bytes::Bytes,
        types: Option<TypeMeta>,
        skip_managed_fields: bool,
    ) -> Result<K, WireError> {
        match self.list_item {
            Some(f) => f(item, types, skip_managed_fields),
            None => Err(WireError::DecodeObject(
                "a protobuf LIST item for a type without a protobuf decoder".into(),
            )),
        }
    }
}

impl<K> Decoders<PartialObjectMeta<K>>
where
    PartialObjectMeta<K>: Resource + DeserializeOwned,
{
    /// Through [`PartialObjectMetaDecode`]; protobuf watch frames through
    /// [`crate::protobuf::decode_watch_frame`], protobuf LIST items through
    /// [`crate::protobuf::decode_list_item`].
    pub fn partial_object_meta() -> Self {
        Self {
            frame: Some(crate::protobuf::decode_watch_frame::<K>),
            list_item: Some(protobuf_list_item::<K>),
            fresh: true,
            ..Self::with::<PartialObjectMetaDecode>()
        }
    }
}

/// A protobuf LIST item that must have a name, as a JSON one must.
fn protobuf_list_item<K>(
    item: bytes::Bytes,
    types: Option<TypeMeta>,
    skip_managed_fields: bool,
) -> Result<PartialObjectMeta<K>, WireError>
where
    PartialObjectMeta<K>: Resource,
{
    check_name(crate::protobuf::decode_list_item(
        item,
        types,
        skip_managed_fields,
    )?)
}

impl Decoders<DynamicObject> {
    /// Through [`DynamicObjectDecode`].
    pub fn dynamic_object() -> Self {
        Self {
            fresh: true,
            ..Self::with::<DynamicObjectDecode>()
        }
    }
}
