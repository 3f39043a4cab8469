//! Kubernetes and Kruise API facts the decisions read: well-known keys, and the fields of the
//! Kruise types we look at (everything else is kept as it came).

pub mod crd;
pub mod keys;
pub mod quantity;
pub mod sidecarset;
pub mod workloads;
