//! DaemonSet-style scheduling stamp (upstream Kubernetes semantics, DESIGN.md trigger).
use serde_json::Value;

use super::Inputs;

/// Stamp node pinning and daemon tolerations onto a Pod that names a target node.
pub fn stamp(_pod: &mut Value, _inputs: &Inputs, _warnings: &mut Vec<String>) {}
