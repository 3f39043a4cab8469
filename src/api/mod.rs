//! Kruise API types and well-known keys.

pub mod sidecarset;
