//! Decoding a `serde_json::Value` with every array and object allocated at its final length
//! (issue 17.1: the decoded object is most of what one review costs).
//!
//! `Value::deserialize` grows vectors by doubling: an array keeps up to twice the slots it uses,
//! and an object of two members (an environment variable, a port, a volume mount) gets room for
//! three index-map entries, all of it in pages the neighbouring values make resident. Here the
//! elements and members of the containers still open wait on two stacks shared by the whole
//! document, and each container is allocated once, at its length, when it closes (an array of
//! more than [`LARGE_ARRAY`] elements excepted, see `visit_seq`). The value is the one `Value::deserialize` builds (same members in the same
//! order, the last of duplicate keys wins in the first one's place, same numbers); the parser and
//! its errors and nesting limit are the deserializer's.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// A stack that grew past this many entries is given back once it empties, rather than held
/// until the whole document is decoded.
const KEEP_CAPACITY: usize = 1024;
/// From this many elements on, an array grows in a vector of its own (see `visit_seq`).
const LARGE_ARRAY: usize = 1024;

/// Decode one value as [`Value::deserialize`] would, without slack.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    Exact { stacks: &mut Stacks::default() }.deserialize(deserializer)
}

/// The members and elements of the containers being decoded, innermost last.
#[derive(Default)]
struct Stacks {
    elements: Vec<Value>,
    members: Vec<(String, Value)>,
}

struct Exact<'s> {
    stacks: &'s mut Stacks,
}

impl<'de> DeserializeSeed<'de> for Exact<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// Give a large stack's memory back once nothing waits on it.
fn release_if_empty<T>(stack: &mut Vec<T>) {
    if stack.is_empty() && stack.capacity() > KEEP_CAPACITY {
        *stack = Vec::new();
    }
}

impl<'de> Visitor<'de> for Exact<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let start = self.stacks.elements.len();
        // A large array moves to a vector of its own and grows there, as serde_json's would: its
        // slack past the last element is never written, so it is not resident, and a final copy
        // would double its resident size while both exist.
        let mut own = Vec::new();
        while let Some(element) = seq.next_element_seed(Exact { stacks: &mut *self.stacks })? {
            if !own.is_empty() {
                own.push(element);
                continue;
            }
            self.stacks.elements.push(element);
            if self.stacks.elements.len() - start == LARGE_ARRAY {
                own.reserve_exact(2 * LARGE_ARRAY);
                own.extend(self.stacks.elements.drain(start..));
            }
        }
        if own.is_empty() {
            // A drain knows its length: the vector is allocated once, at that length.
            own = self.stacks.elements.drain(start..).collect();
        }
        release_if_empty(&mut self.stacks.elements);
        Ok(Value::Array(own))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let start = self.stacks.members.len();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Exact { stacks: &mut *self.stacks })?;
            self.stacks.members.push((key, value));
        }
        let mut object = Map::with_capacity(self.stacks.members.len() - start);
        for (key, value) in self.stacks.members.drain(start..) {
            object.insert(key, value);
        }
        release_if_empty(&mut self.stacks.members);
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> (Result<Value, String>, Result<Value, String>) {
        let exact = deserialize(&mut serde_json::Deserializer::from_str(text)).map_err(|e| e.to_string());
        let plain = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
        (exact, plain)
    }

    #[test]
    fn builds_the_value_serde_json_builds() {
        for text in [
            "null",
            "true",
            "-7",
            "18446744073709551615",
            "1.5e3",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            r#"{"b":1,"a":[1,[2,[3,{}]],{"x":null}],"c":{"d":{"e":"f"}}}"#,
            r#"{"a":1,"b":2,"a":3}"#,
            r#"[{"a":1,"a":{"b":[]}},[],[[]]]"#,
            "[1,",
            r#"{"a":}"#,
            "{\"a\":1]",
        ] {
            let (exact, plain) = both(text);
            assert_eq!(exact, plain, "{text}");
            if let (Ok(exact), Ok(plain)) = (&exact, &plain) {
                // Equality of maps ignores order; the text does not.
                assert_eq!(exact.to_string(), plain.to_string(), "{text}");
            }
        }
    }

    #[test]
    fn containers_are_allocated_at_their_length() {
        let many = format!("[{}]", vec![r#"{"name":"A","value":"b"}"#; 3000].join(","));
        let value = deserialize(&mut serde_json::Deserializer::from_str(&many)).unwrap();
        // (serde_json's `Map` does not tell its capacity: `benches/request_memory.rs` measures it.)
        assert_eq!(value.as_array().unwrap().len(), 3000);
        let small = deserialize(&mut serde_json::Deserializer::from_str("[[1,2,3],[4]]")).unwrap();
        assert_eq!(small[0].as_array().unwrap().capacity(), 3);
        assert_eq!(small.as_array().unwrap().capacity(), 2);
        assert_eq!(value, serde_json::from_str::<Value>(&many).unwrap());
        // Large arrays nested after other pending elements, and elements after a large array.
        let zeros = vec!["0"; 2 * LARGE_ARRAY + 5].join(",");
        let nested = format!(r#"[[1],[{zeros}],{{"a":[[2],[{zeros}]],"b":[3]}},[4]]"#);
        let (exact, plain) = both(&nested);
        assert_eq!(exact.unwrap().to_string(), plain.unwrap().to_string());
    }

    #[test]
    fn the_nesting_limit_is_the_parsers() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        for n in [127, 128, 129, 10_000] {
            let (exact, plain) = both(&deep(n));
            assert_eq!(exact, plain, "{n}");
        }
    }
}
