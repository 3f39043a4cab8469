//! Kubernetes and Kruise API facts the decisions read: well-known keys, and the fields of the
//! Kruise types we look at (everything else is kept as it came).

pub mod crd;
pub mod go_json;
pub mod keys;
pub mod meta;
pub mod quantity;
pub mod sidecarset;
pub mod workloads;

use serde_json::Value;

/// The value at the object keys `keys` under `value`: what `value.pointer("/a/b")` finds, without
/// `pointer`'s two string allocations per token, for the paths read on every request.
pub fn at<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().try_fold(value, |v, key| field(v, key))
}

/// `value.get(key)` for an object, scanning small maps instead of hashing. Most objects inside a
/// pod (mounts, env vars, ports, volumes) have a handful of keys, and serde_json's map hashes every
/// lookup with SipHash, which costs more than comparing a few short strings.
pub fn field<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    const SCAN_UP_TO: usize = 8;
    match value {
        Value::Object(map) if map.len() <= SCAN_UP_TO => {
            map.iter().find_map(|(k, v)| (k == key).then_some(v))
        }
        Value::Object(map) => map.get(key),
        _ => None,
    }
}
