//! The service config's JSON read into a `serde_json::Value`, with every key that one object gives
//! twice: C-core refuses such a config, where `serde_json` (as JavaScript and Go) keeps the last
//! value and drops the first without a word, so an operator's first `methodConfig` would vanish.
//! `serde_json` has no option for it (serde-rs/json#762 declined one), so this is its `Value`
//! visitor with the check, anywhere in the document.

use super::error::FieldError;
use super::parse::join;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;

/// The value, and one error per key given more than once in its object (its path), in document
/// order.
pub(super) fn read<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<(Value, Vec<FieldError>), D::Error> {
    let duplicates = RefCell::new(Vec::new());
    let node = Node {
        path: String::new(),
        duplicates: &duplicates,
    };
    let value = node.deserialize(deserializer)?;
    Ok((value, duplicates.into_inner()))
}

/// A value at `path`.
struct Node<'a> {
    path: String,
    duplicates: &'a RefCell<Vec<FieldError>>,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        // As serde_json's own `Value`: a number that is not finite is `null`.
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut values = Vec::new();
        while let Some(value) = items.next_element_seed(Node {
            path: format!("{}[{}]", self.path, values.len()),
            duplicates: self.duplicates,
        })? {
            values.push(value);
        }
        Ok(Value::Array(values))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = entries.next_key::<String>()? {
            let path = join(&self.path, &key);
            let value = entries.next_value_seed(Node {
                path: path.clone(),
                duplicates: self.duplicates,
            })?;
            if object.insert(key, value).is_some() {
                let mut duplicates = self.duplicates.borrow_mut();
                // A key given three times is one error.
                if !duplicates.iter().any(|error| error.path() == path) {
                    duplicates.push(FieldError::new(
                        path,
                        "duplicate key: its object gives it more than once; keep one (C-core \
                         refuses such a config, and a reader that kept the last would drop the \
                         others without a word)",
                    ));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

/// For `Deserialize`: the duplicates as the deserializer's error.
pub(super) fn refuse<E: de::Error>(duplicates: Vec<FieldError>) -> E {
    E::custom(super::ConfigError::new(duplicates))
}
