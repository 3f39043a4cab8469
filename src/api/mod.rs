//! Kubernetes and Kruise API facts the decisions read: well-known keys, and the fields of the
//! Kruise types we look at (everything else is kept as it came).

pub mod crd;
pub mod keys;
pub mod quantity;
pub mod sidecarset;
pub mod workloads;

use serde_json::Value;

/// The value at the object keys `keys` under `value`: what `value.pointer("/a/b")` finds, without
/// `pointer`'s two string allocations per token, for the paths read on every request.
pub fn at<'v>(value: &'v Value, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().try_fold(value, |v, key| v.get(key))
}
