//! Well-known label, annotation, taint and field keys, in one place so a typo cannot make two
//! modules disagree.

/// Our own trigger for DaemonSet-style scheduling: the node a Pod should be pinned to.
pub const TARGET_NODE_ANNOTATION: &str = "kruise-admission.dev/target-node";
/// Opt-in for Pods that are not owned by a DaemonSet: treat their `spec.nodeName` as the target node.
pub const DAEMON_SCHEDULING_ANNOTATION: &str = "kruise-admission.dev/daemon-scheduling";

/// API groups of the owners the stamp recognises.
pub const APPS_GROUP: &str = "apps";
pub const KRUISE_APPS_GROUP: &str = "apps.kruise.io";

/// The node field selector key used by DaemonSet pinning (`matchFields`).
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// Taints the node lifecycle controller sets, tolerated by default by daemon pods (upstream
/// `k8s.io/api/core/v1` well-known taints).
pub const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
pub const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
pub const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
pub const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
pub const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
pub const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
pub const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
