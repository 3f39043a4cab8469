//! Reading and writing `serde_json::Value`s where decisions still hold them (the cluster snapshot,
//! SidecarSet defaulting, the agreement with stored Pods; request objects are `api::tree` trees):
//! fast field access, and the "object under this key, created when absent or null" step that
//! defaulting repeats.

use serde_json::{Map, Value};

/// The value at the object keys `keys` under `value`: what `value.pointer("/a/b")` finds, without
/// `pointer`'s two string allocations per token, for the paths read on every request.
pub fn at<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().try_fold(value, |v, key| field(v, key))
}

/// `value.get(key)` for an object, scanning small maps instead of hashing. Most objects inside a
/// pod (mounts, env vars, ports, volumes) have a handful of keys, and serde_json's map hashes every
/// lookup with SipHash, which costs more than comparing a few short strings.
pub fn field<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => get(map, key),
        _ => None,
    }
}

/// `map.get(key)`, scanning small maps instead of hashing (see [`field`]).
fn get<'m>(map: &'m Map<String, Value>, key: &str) -> Option<&'m Value> {
    const SCAN_UP_TO: usize = 8;
    if map.len() <= SCAN_UP_TO { map.iter().find_map(|(k, v)| (k == key).then_some(v)) } else { map.get(key) }
}

/// The object under `key`, created empty when absent or null; `None` when `key` holds something
/// else (the caller decides whether that is an error or left for validation to report).
pub fn object_entry<'m>(map: &'m mut Map<String, Value>, key: &str) -> Option<&'m mut Map<String, Value>> {
    object_in(map.entry(key).or_insert(Value::Null))
}

/// The object in `slot`, made an empty one when `slot` is null; `None` when it is something else.
fn object_in(slot: &mut Value) -> Option<&mut Map<String, Value>> {
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_entry_creates_replaces_null_and_refuses_other_values() {
        let Value::Object(mut map) = json!({"a": null, "b": {"x": 1}, "c": 3}) else { unreachable!() };
        object_entry(&mut map, "a").unwrap().insert("y".into(), json!(2));
        object_entry(&mut map, "new").unwrap();
        assert_eq!(object_entry(&mut map, "b").unwrap()["x"], json!(1));
        assert!(object_entry(&mut map, "c").is_none());
        assert_eq!(Value::Object(map), json!({"a": {"y": 2}, "b": {"x": 1}, "c": 3, "new": {}}));
    }
}
