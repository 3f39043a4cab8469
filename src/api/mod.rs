//! Kubernetes and Kruise API facts the decisions read: well-known keys, and the fields of the
//! Kruise types we look at (everything else is kept as it came).

pub mod crd;
pub mod derived;
pub mod field_errors;
pub mod go_json;
pub mod image_ref;
pub mod json;
pub mod json_text;
pub mod keys;
pub mod meta;
pub mod names;
pub mod pattern;
pub mod quantity;
pub mod resource_expression;
pub mod sidecarset;
pub mod sidecarset_fields;
pub mod tree;
pub mod workloads;
