//! Serde's own view of a struct's fields, so lists of field names are derived, never kept by
//! hand: [`serde_fields`] gives the names `#[derive(Deserialize)]` knows, and [`TopLevel`] reads
//! a JSON object into such a struct field by field, naming the top-level field at fault (the
//! scenario's errors say `` `tp`: invalid type ... ``, not just serde's message).

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::fmt;

/// The field names serde's derive gives a struct (in declaration order, after renames), read
/// by asking `T` to deserialize itself from a probe that only records the list. Empty for a
/// type that is not a struct.
pub fn serde_fields<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

struct FieldProbe<'a>(&'a mut &'static [&'static str]);

impl<'de> Deserializer<'de> for FieldProbe<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Why a field of a [`TopLevel`] object does not read: the top-level field and serde's
/// message (`missing (required)` for an absent required field).
#[derive(Debug)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

impl de::Error for FieldError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        FieldError {
            field: String::new(),
            message: msg.to_string(),
        }
    }

    fn missing_field(field: &'static str) -> Self {
        FieldError {
            field: field.to_string(),
            message: "missing (required)".into(),
        }
    }
}

/// A JSON object read as a struct whose field names are `fields`: members are offered in the
/// order of `fields` (so the first bad field in declaration order is the one reported), `null`
/// members are absent, and each member's error names it. Unknown members must be refused
/// before (they are not offered).
pub struct TopLevel<'a> {
    pub obj: &'a Map<String, Value>,
    pub fields: &'static [&'static str],
}

impl<'de> Deserializer<'de> for TopLevel<'de> {
    type Error = FieldError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, FieldError> {
        visitor.visit_map(Members {
            obj: self.obj,
            fields: self.fields.iter(),
            current: None,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

struct Members<'de> {
    obj: &'de Map<String, Value>,
    fields: std::slice::Iter<'static, &'static str>,
    current: Option<(&'static str, &'de Value)>,
}

impl<'de> MapAccess<'de> for Members<'de> {
    type Error = FieldError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, FieldError> {
        for &name in self.fields.by_ref() {
            match self.obj.get(name) {
                None | Some(Value::Null) => continue,
                Some(v) => {
                    self.current = Some((name, v));
                    let key: de::value::StrDeserializer<'_, FieldError> = name.into_deserializer();
                    return seed.deserialize(key).map(Some);
                }
            }
        }
        Ok(None)
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, FieldError> {
        let Some((name, v)) = self.current.take() else {
            return Err(de::Error::custom("value without a key"));
        };
        seed.deserialize(v).map_err(|e| FieldError {
            field: name.to_string(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct S {
        a: u32,
        #[serde(default, rename = "bee")]
        b: Option<String>,
        #[serde(default)]
        c: Vec<u32>,
    }

    #[test]
    fn the_field_list_is_serdes_own_after_renames() {
        assert_eq!(serde_fields::<S>(), ["a", "bee", "c"]);
        assert!(serde_fields::<u32>().is_empty());
    }

    #[test]
    fn members_read_by_name_null_is_absent_and_errors_name_the_field() {
        let read = |j: &str| {
            let v: Value = serde_json::from_str(j).unwrap();
            S::deserialize(TopLevel {
                obj: v.as_object().unwrap(),
                fields: serde_fields::<S>(),
            })
        };
        assert_eq!(
            read(r#"{"a": 1, "bee": null, "c": [2]}"#).unwrap(),
            S {
                a: 1,
                b: None,
                c: vec![2]
            }
        );
        let e = read(r#"{"a": 1, "c": "x"}"#).unwrap_err();
        assert_eq!(e.field, "c");
        assert!(e.message.contains("invalid type"), "{}", e.message);
        let e = read(r#"{"bee": "y"}"#).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.message.as_str()),
            ("a", "missing (required)")
        );
    }
}
