//! serde for [`config`](crate::config) (feature `serde`): a map of a configuration read into a
//! [`Read`], one value into a [`Setting`], and settings written back. The runtime's types and the
//! admission gate's (in `retry-overload`) share it, so that every map is read the same way.

use crate::config::{self, Read, Scalar, Section};
use crate::{Key, Setting, duration};
use serde_core::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_core::ser::{SerializeMap, Serializer};
use serde_core::{Deserialize, Serialize};
use std::fmt;

/// Any value, handed to the grammar as it came: numbers, strings and booleans as they are, a
/// list or a table as what it is, for the message.
impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Scalar, D::Error> {
        deserializer.deserialize_any(AnyVisitor)
    }
}

struct AnyVisitor;

impl<'de> Visitor<'de> for AnyVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, a string or a boolean")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar::Signed(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar::Unsigned(v))
    }

    // Past 64 bits: the digits, which every count refuses as too large.
    fn visit_i128<E>(self, v: i128) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_string()))
    }

    fn visit_u128<E>(self, v: u128) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_string()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
        Ok(Scalar::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar::Str(v.to_owned()))
    }

    fn visit_unit<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("nothing"))
    }

    fn visit_none<E>(self) -> Result<Scalar, E> {
        Ok(Scalar::Other("nothing"))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Scalar, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("a list"))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other("a table"))
    }
}

/// Reads a map of `section` with the grammar: each key and value, then the rules across keys.
/// The error is the grammar's message ([`ConfigError`](config::ConfigError)), which the format
/// places (TOML adds the table's position).
pub fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
    section: &'static Section,
) -> Result<Read, D::Error> {
    struct Map(&'static Section);

    impl<'de> Visitor<'de> for Map {
        type Value = Read;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "the settings of a {}, as `key = value` pairs",
                self.0.what
            )
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Read, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry::<String, Scalar>()? {
                entries.push(entry);
            }
            config::read(self.0, entries).map_err(de::Error::custom)
        }
    }

    deserializer.deserialize_map(Map(section))
}

/// Reads an admission gate's map ([`read_gate`](config::read_gate)): its mode's word, and its
/// settings.
pub fn deserialize_gate<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(&'static str, Read), D::Error> {
    struct Map;

    impl<'de> Visitor<'de> for Map {
        type Value = (&'static str, Read);

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the settings of an admission gate, as `key = value` pairs")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::new();
            while let Some(entry) = map.next_entry::<String, Scalar>()? {
                entries.push(entry);
            }
            config::read_gate(entries).map_err(de::Error::custom)
        }
    }

    deserializer.deserialize_map(Map)
}

/// Reads one value of `key` alone: a per-attempt `timeout = "2s"`.
pub fn deserialize_one<'de, D: Deserializer<'de>>(
    deserializer: D,
    key: &'static Key,
) -> Result<Setting, D::Error> {
    let value = Scalar::deserialize(deserializer)?;
    config::read_one(key, &value).map_err(de::Error::custom)
}

/// A value to write back.
#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    /// A count: `3`.
    Count(u32),
    /// `true` or `false`.
    Bool(bool),
    /// A number: `0.5`.
    Number(f64),
    /// A word, a name or a duration: `"full"`.
    Text(String),
}

impl Written {
    /// A duration, in the largest unit in which it is whole: `"90s"`.
    pub fn duration(nanos: u64) -> Written {
        Written::Text(duration::format(nanos))
    }
}

impl Serialize for Written {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Written::Count(n) => serializer.serialize_u32(*n),
            Written::Bool(b) => serializer.serialize_bool(*b),
            Written::Number(n) => serializer.serialize_f64(*n),
            Written::Text(text) => serializer.serialize_str(text),
        }
    }
}

/// Writes `entries` as a map, in their order.
pub fn serialize<S: Serializer>(
    serializer: S,
    entries: &[(&str, Written)],
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(entries.len()))?;
    for (key, value) in entries {
        map.serialize_entry(key, value)?;
    }
    map.end()
}
