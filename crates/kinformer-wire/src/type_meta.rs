//! An object's `apiVersion` and `kind` read the way kube's derived impls
//! read a flattened `Option<TypeMeta>`, for the decoders that replace those
//! impls ([`crate::partial_meta`], [`crate::dynamic_object`]).
//!
//! serde's derive gathers the members first and then decodes `TypeMeta`
//! from them in document order: each `apiVersion` or `kind` member is taken
//! until the first one that fails (a value that is not a string, or a
//! member seen twice); `TypeMeta` is then `None`, and the members after the
//! failure are left to the other flattened fields. Without a failure it is
//! `Some` when both members were seen.

use std::fmt;

use kube_core::TypeMeta;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// `apiVersion` and `kind` as read so far.
#[derive(Default)]
pub(crate) struct TypeMetaMembers {
    api_version: Option<String>,
    kind: Option<String>,
    failed: bool,
}

/// Which `TypeMeta` member a key names.
#[derive(Clone, Copy)]
pub(crate) enum TypeMetaField {
    ApiVersion,
    Kind,
}

impl TypeMetaField {
    /// The member `key` names, if any.
    pub(crate) fn of(key: &str) -> Option<Self> {
        match key {
            "apiVersion" => Some(TypeMetaField::ApiVersion),
            "kind" => Some(TypeMetaField::Kind),
            _ => None,
        }
    }
}

impl TypeMetaMembers {
    /// Whether the next `apiVersion` or `kind` member is still taken into
    /// `TypeMeta` (no member has failed yet).
    pub(crate) fn taking(&self) -> bool {
        !self.failed
    }

    /// Takes one member's value.
    pub(crate) fn take(&mut self, field: TypeMetaField, value: StringOrOther) {
        let slot = match field {
            TypeMetaField::ApiVersion => &mut self.api_version,
            TypeMetaField::Kind => &mut self.kind,
        };
        match value {
            StringOrOther::String(s) if slot.is_none() && !self.failed => *slot = Some(s),
            _ => self.failed = true,
        }
    }

    /// The object's `types`.
    pub(crate) fn finish(self) -> Option<TypeMeta> {
        match (self.failed, self.api_version, self.kind) {
            (false, Some(api_version), Some(kind)) => Some(TypeMeta { api_version, kind }),
            _ => None,
        }
    }
}

/// A member's value: a string, or anything else (consumed and dropped).
pub(crate) enum StringOrOther {
    String(String),
    Other,
}

impl<'de> de::Deserialize<'de> for StringOrOther {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_any(StringOrOtherVisitor)
    }
}

struct StringOrOtherVisitor;

impl<'de> Visitor<'de> for StringOrOtherVisitor {
    type Value = StringOrOther;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<StringOrOther, E> {
        Ok(StringOrOther::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<StringOrOther, E> {
        Ok(StringOrOther::String(v))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_none<E: de::Error>(self) -> Result<StringOrOther, E> {
        Ok(StringOrOther::Other)
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<StringOrOther, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringOrOther, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(StringOrOther::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringOrOther, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(StringOrOther::Other)
    }
}
