//! A watch line (`{"type":..,"object":{..}}`) read in one pass: `type`
//! first (the apiserver writes it first), then `object` decoded straight
//! into what that type calls for. [`crate::event`] turns the result into a
//! [`WatchEvent`](crate::WatchEvent).

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor,
};

use crate::event::BookmarkObject;
use crate::object_decode::ObjectDecode;
use crate::status::StatusBody;

/// The event types that carry an object of the watched kind.
pub(crate) enum ObjectEvent {
    Added,
    Modified,
    Deleted,
}

/// What one line held.
pub(crate) enum Line<K> {
    /// `ADDED`, `MODIFIED` or `DELETED` with its object.
    Object(ObjectEvent, K),
    /// `BOOKMARK`.
    Bookmark(BookmarkObject),
    /// `ERROR`, with its status if it could be read.
    Error(Option<StatusBody>),
    /// A type this reflector does not know.
    Unknown(String),
    /// A type that needs an object, without one.
    MissingObject(String),
    /// `object` came before `type`: the caller decodes the line another way.
    ObjectFirst,
}

/// Reads one line of `line_len` bytes (as parsed); `in_object` is set
/// while the object is being decoded, so that a failure there can be told
/// from a malformed line.
/// `D` decodes the object (see [`crate::object_decode`]).
pub(crate) struct LineSeed<'a, K, D> {
    pub(crate) skip_managed_fields: bool,
    pub(crate) line_len: usize,
    pub(crate) in_object: &'a Cell<bool>,
    pub(crate) object: PhantomData<fn() -> (K, D)>,
}

impl<'de, K: DeserializeOwned, D: ObjectDecode<K>> DeserializeSeed<'de> for LineSeed<'_, K, D> {
    type Value = Line<K>;

    fn deserialize<De: Deserializer<'de>>(self, de: De) -> Result<Line<K>, De::Error> {
        de.deserialize_map(self)
    }
}

impl<'de, K: DeserializeOwned, D: ObjectDecode<K>> Visitor<'de> for LineSeed<'_, K, D> {
    type Value = Line<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a watch event object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line<K>, A::Error> {
        let mut ty: Option<String> = None;
        let mut line = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => ty = Some(map.next_value()?),
                Field::Object => {
                    let Some(ty) = ty.as_deref() else {
                        return Ok(Line::ObjectFirst);
                    };
                    line = Some(self.object(ty, &mut map)?);
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        match (line, ty) {
            (Some(line), _) => Ok(line),
            (None, Some(ty)) => Ok(match ty.as_str() {
                "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" => Line::MissingObject(ty),
                "ERROR" => Line::Error(None),
                _ => Line::Unknown(ty),
            }),
            (None, None) => Err(de::Error::missing_field("type")),
        }
    }
}

impl<K: DeserializeOwned, D: ObjectDecode<K>> LineSeed<'_, K, D> {
    /// Decodes the `object` value as an event of type `ty` calls for.
    fn object<'de, A: MapAccess<'de>>(&self, ty: &str, map: &mut A) -> Result<Line<K>, A::Error> {
        let kind = match ty {
            "ADDED" => ObjectEvent::Added,
            "MODIFIED" => ObjectEvent::Modified,
            "DELETED" => ObjectEvent::Deleted,
            "BOOKMARK" => return Ok(Line::Bookmark(map.next_value()?)),
            "ERROR" => {
                let status = map.next_value::<serde_json::Value>()?;
                return Ok(Line::Error(serde_json::from_value(status).ok()));
            }
            other => {
                map.next_value::<IgnoredAny>()?;
                return Ok(Line::Unknown(other.to_string()));
            }
        };
        self.in_object.set(true);
        let obj = map.next_value_seed(ObjectSeed::<K, D> {
            skip_managed_fields: self.skip_managed_fields,
            input_len: self.line_len.saturating_sub(FRAME_BYTES + ty.len()),
            object: PhantomData,
        })?;
        self.in_object.set(false);
        Ok(Line::Object(kind, obj))
    }
}

/// The bytes of a line around its type and object, as the apiserver writes
/// it: `{"type":"` and `","object":` before the object, `}` after it. What
/// is left of a line's length is its object's, the size the object arena is
/// given (an estimate for a line written another way).
const FRAME_BYTES: usize = r#"{"type":"","object":}"#.len();

/// Decodes the object itself, pruned or whole, into an object arena sized
/// for `input_len` bytes of JSON.
struct ObjectSeed<K, D> {
    skip_managed_fields: bool,
    input_len: usize,
    object: PhantomData<fn() -> (K, D)>,
}

impl<'de, K, D: ObjectDecode<K>> DeserializeSeed<'de> for ObjectSeed<K, D> {
    type Value = K;

    fn deserialize<De: Deserializer<'de>>(self, de: De) -> Result<K, De::Error> {
        crate::json::object_in_arena::<De, K, D>(de, self.skip_managed_fields, self.input_len)
    }
}

/// A key of the line.
enum Field {
    Type,
    Object,
    Other,
}

impl<'de> de::Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a watch event field")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "type" => Field::Type,
                    "object" => Field::Object,
                    _ => Field::Other,
                })
            }
        }
        de.deserialize_identifier(FieldVisitor)
    }
}
