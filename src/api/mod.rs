//! Kubernetes and Kruise API facts the decisions read: well-known keys, and the fields of the
//! Kruise types we look at.

pub mod keys;
pub mod sidecarset;
