//! Decoding an object without its `metadata.managedFields`.
//!
//! `managedFields` is the bulk of a typical object's metadata, and
//! k8s-openapi decodes each entry's `fieldsV1` into a `serde_json::Value`
//! tree: for an informer that drops them anyway (the usual transform), that
//! is most of the decoding work and allocation, thrown away at once. The
//! deserializer here skips the field while parsing (serde's `IgnoredAny`:
//! no allocation), and only at `metadata.managedFields`: a field of that
//! name anywhere else (a custom resource's spec, say) is kept.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess,
    SeqAccess, Visitor,
};

/// Decodes `bytes` as `K`, skipping `metadata.managedFields`.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// let json = br#"{"metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]},"data":{"k":"v"}}"#;
/// let cm: ConfigMap = kinformer_wire::prune::from_slice_without_managed_fields(json).unwrap();
/// assert!(cm.metadata.managed_fields.is_none());
/// assert_eq!(cm.metadata.name.as_deref(), Some("a"));
/// ```
pub fn from_slice_without_managed_fields<K: DeserializeOwned>(
    bytes: &[u8],
) -> serde_json::Result<K> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = deserialize_without_managed_fields(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Decodes a `K` from any deserializer, skipping `metadata.managedFields`.
pub fn deserialize_without_managed_fields<'de, K: Deserialize<'de>, D: Deserializer<'de>>(
    de: D,
) -> Result<K, D::Error> {
    K::deserialize(Pruning {
        de,
        level: Level::Object,
    })
}

/// Decodes a `K` from any deserializer, skipping `metadata.managedFields`
/// when asked to.
pub(crate) fn deserialize_object<'de, K: Deserialize<'de>, D: Deserializer<'de>>(
    de: D,
    skip_managed_fields: bool,
) -> Result<K, D::Error> {
    if skip_managed_fields {
        deserialize_without_managed_fields(de)
    } else {
        K::deserialize(de)
    }
}

/// Where in the object the deserializer is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The object itself: its `metadata` is pruned.
    Object,
    /// The object's metadata: `managedFields` is skipped.
    Metadata,
}

struct Pruning<D> {
    de: D,
    level: Level,
}

struct PruningVisitor<V> {
    visitor: V,
    level: Level,
}

struct PruningMap<A> {
    map: A,
    level: Level,
    value_is_metadata: bool,
}

struct PruningSeed<S> {
    seed: S,
    level: Level,
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
                self.de.$method($($arg,)* PruningVisitor { visitor, level: self.level })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Pruning<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_struct(name: &'static str, fields: &'static [&'static str]);
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.visitor.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for PruningVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Pruning {
            de,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_newtype_struct(Pruning {
            de,
            level: self.level,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(PruningMap {
            map,
            level: self.level,
            value_is_metadata: false,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

/// A map key, borrowed from the input when it has no escapes.
pub(crate) enum Key<'de> {
    Borrowed(&'de str),
    Owned(String),
}

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Key::Borrowed(s) => s,
            Key::Owned(s) => s,
        }
    }

    pub(crate) fn into_string(self) -> String {
        match self {
            Key::Borrowed(s) => s.to_owned(),
            Key::Owned(s) => s,
        }
    }
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::Borrowed(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key::Owned(v))
            }
        }
        de.deserialize_str(KeyVisitor)
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for PruningMap<A> {
    type Error = A::Error;

    fn next_key_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<Key<'de>>()? else {
                return Ok(None);
            };
            match (self.level, key.as_str()) {
                (Level::Metadata, "managedFields") => {
                    self.map.next_value::<IgnoredAny>()?;
                    continue;
                }
                (Level::Object, "metadata") => self.value_is_metadata = true,
                _ => self.value_is_metadata = false,
            }
            return match key {
                Key::Borrowed(s) => seed.deserialize(BorrowedStrDeserializer::new(s)).map(Some),
                Key::Owned(s) => seed.deserialize(StringDeserializer::new(s)).map(Some),
            };
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if std::mem::take(&mut self.value_is_metadata) {
            self.map.next_value_seed(PruningSeed {
                seed,
                level: Level::Metadata,
            })
        } else {
            self.map.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for PruningSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Pruning {
            de,
            level: self.level,
        })
    }
}

/// Decodes an object's `metadata`, without its `managedFields` when
/// `skip_managed_fields` is set.
pub(crate) fn metadata_seed(skip_managed_fields: bool) -> MetadataSeed {
    MetadataSeed {
        skip_managed_fields,
    }
}

/// See [`metadata_seed`].
pub(crate) struct MetadataSeed {
    skip_managed_fields: bool,
}

impl<'de> DeserializeSeed<'de> for MetadataSeed {
    type Value = ObjectMeta;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<ObjectMeta, D::Error> {
        if self.skip_managed_fields {
            ObjectMeta::deserialize(Pruning {
                de,
                level: Level::Metadata,
            })
        } else {
            ObjectMeta::deserialize(de)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube_core::DynamicObject;

    const POD: &[u8] = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"n","labels":{"a":"b"},"managedFields":[{"manager":"kubelet","operation":"Update","fieldsV1":{"f:status":{"f:phase":{}}}}],"resourceVersion":"7"},"spec":{"containers":[{"name":"c","image":"i"}]},"status":{"phase":"Running"}}"#;

    #[test]
    fn skips_managed_fields_and_keeps_everything_else() {
        let pruned: Pod = from_slice_without_managed_fields(POD).unwrap();
        let mut full: Pod = serde_json::from_slice(POD).unwrap();
        assert!(full.metadata.managed_fields.is_some());
        full.metadata.managed_fields = None;
        assert_eq!(pruned, full);
    }

    #[test]
    fn keeps_a_managed_fields_key_outside_metadata() {
        let json = br#"{"apiVersion":"x/v1","kind":"X","metadata":{"name":"x","managedFields":[{"manager":"m"}]},"spec":{"managedFields":[1,2]}}"#;
        let obj: DynamicObject = from_slice_without_managed_fields(json).unwrap();
        assert!(obj.metadata.managed_fields.is_none());
        assert_eq!(obj.data["spec"]["managedFields"], serde_json::json!([1, 2]));
    }

    #[test]
    fn escaped_keys_are_recognised() {
        let json = br#"{"metad\u0061ta":{"name":"p","managed\u0046ields":[{"manager":"m"}]}}"#;
        let pod: Pod = from_slice_without_managed_fields(json).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert!(pod.metadata.managed_fields.is_none());
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(
            from_slice_without_managed_fields::<Pod>(br#"{"metadata":{"managedFields":[{]}}"#)
                .is_err()
        );
        assert!(
            from_slice_without_managed_fields::<Pod>(br#"{"metadata":{"name":"p"}} trailing"#)
                .is_err()
        );
    }
}
