//! Kruise API types and well-known keys.

pub mod crd;
pub mod sidecarset;
