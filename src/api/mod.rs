//! Kruise API types: the fields this binary reads, with everything else kept.

pub mod workloads;
