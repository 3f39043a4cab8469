//! Kruise workload types: CloneSet, Advanced StatefulSet and Advanced DaemonSet (`apps.kruise.io`
//! v1alpha1 and v1beta1), with the fields the admission rules read. Everything else is kept: each
//! struct flattens unknown keys into `extra`, and the pod template's spec stays a `Value`, so a
//! decoded object loses nothing a newer Kruise or Kubernetes added.
//!
//! One struct serves both versions of a kind; fields that exist in only one version are optional.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::meta::nullable;
pub use super::meta::{IntOrString, LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference};

/// API group of every Kruise workload.
pub const GROUP: &str = "apps.kruise.io";
/// Readiness gate and pod condition the in-place update machinery drives.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";

/// A Pod, with only what the CloneSet `podsToDelete` lookup reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct PodRef {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct TemplateMeta {
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A pod template. The spec stays untyped: the in-place rules diff it as JSON.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct PodTemplate {
    #[serde(default)]
    pub metadata: TemplateMeta,
    #[serde(default)]
    pub spec: Value,
}

impl PodTemplate {
    pub fn restart_policy(&self) -> &str {
        self.spec.get("restartPolicy").and_then(Value::as_str).unwrap_or_default()
    }

    pub fn has_active_deadline(&self) -> bool {
        self.spec.get("activeDeadlineSeconds").is_some_and(|v| !v.is_null())
    }

    pub fn has_readiness_gate(&self, condition: &str) -> bool {
        self.spec.get("readinessGates").and_then(Value::as_array).is_some_and(|gates| {
            gates.iter().any(|g| g.get("conditionType").and_then(Value::as_str) == Some(condition))
        })
    }
}

// ---- CloneSet ----

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct CloneSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CloneSetSpec,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetSpec {
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplate,
    #[serde(default, deserialize_with = "nullable")]
    pub scale_strategy: CloneSetScaleStrategy,
    #[serde(default, deserialize_with = "nullable")]
    pub update_strategy: CloneSetUpdateStrategy,
    #[serde(default)]
    pub min_ready_seconds: Option<i64>,
    #[serde(default)]
    pub progress_deadline_seconds: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetScaleStrategy {
    #[serde(default, deserialize_with = "nullable")]
    pub pods_to_delete: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// v1alpha1: `type` is the pod policy (`ReCreate`, `InPlaceIfPossible`, `InPlaceOnly`) and the
/// rollout knobs sit here. v1beta1 (Kruise master): `type` is `RollingUpdate`/`OnDelete` and the
/// knobs, with `podUpdatePolicy`, moved to `rollingUpdate`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetUpdateStrategy {
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub type_: String,
    #[serde(default)]
    pub partition: Option<IntOrString>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub max_surge: Option<IntOrString>,
    #[serde(default)]
    pub rolling_update: Option<CloneSetRollingUpdate>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CloneSetRollingUpdate {
    #[serde(default, deserialize_with = "nullable")]
    pub pod_update_policy: String,
    #[serde(default)]
    pub partition: Option<IntOrString>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub max_surge: Option<IntOrString>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---- Advanced StatefulSet ----

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct StatefulSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: StatefulSetSpec,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetSpec {
    #[serde(default)]
    pub replicas: Option<i64>,
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplate,
    #[serde(default, deserialize_with = "nullable")]
    pub pod_management_policy: String,
    #[serde(default, deserialize_with = "nullable")]
    pub update_strategy: StatefulSetUpdateStrategy,
    /// v1alpha1: ints; v1beta1: ints or `"<from>-<to>"` ranges.
    #[serde(default, deserialize_with = "nullable")]
    pub reserve_ordinals: Vec<IntOrString>,
    #[serde(default)]
    pub scale_strategy: Option<StatefulSetScaleStrategy>,
    #[serde(default)]
    pub persistent_volume_claim_retention_policy: Option<PvcRetentionPolicy>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetUpdateStrategy {
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub type_: String,
    #[serde(default)]
    pub rolling_update: Option<StatefulSetRollingUpdate>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetRollingUpdate {
    #[serde(default)]
    pub partition: Option<i64>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default, deserialize_with = "nullable")]
    pub pod_update_policy: String,
    #[serde(default)]
    pub unordered_update: Option<Value>,
    #[serde(default)]
    pub min_ready_seconds: Option<i64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatefulSetScaleStrategy {
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PvcRetentionPolicy {
    #[serde(default, deserialize_with = "nullable")]
    pub when_deleted: String,
    #[serde(default, deserialize_with = "nullable")]
    pub when_scaled: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

// ---- Advanced DaemonSet ----

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct DaemonSet {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: DaemonSetSpec,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetSpec {
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    #[serde(default)]
    pub template: PodTemplate,
    #[serde(default, deserialize_with = "nullable")]
    pub update_strategy: DaemonSetUpdateStrategy,
    #[serde(default)]
    pub min_ready_seconds: Option<i64>,
    #[serde(default)]
    pub revision_history_limit: Option<i64>,
    #[serde(default)]
    pub lifecycle: Option<DaemonSetLifecycle>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetLifecycle {
    #[serde(default)]
    pub in_place_update: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetUpdateStrategy {
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub type_: String,
    #[serde(default)]
    pub rolling_update: Option<DaemonSetRollingUpdate>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `rollingUpdate.rollingUpdateType` (Kruise's JSON key in v1alpha1 and v1beta1; a `type` key is
/// not read): `Standard` (or empty), `InPlaceIfPossible`, and in v1alpha1 the deprecated `Surging`.
/// There is no InPlaceOnly for DaemonSets.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetRollingUpdate {
    #[serde(default, deserialize_with = "nullable")]
    pub rolling_update_type: String,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub max_surge: Option<IntOrString>,
    /// An int or a percentage, as Kruise types it.
    #[serde(default)]
    pub partition: Option<IntOrString>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let raw = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
            "metadata": {"name": "a", "labels": null, "finalizers": ["x"]},
            "spec": {"replicas": 2, "futureField": {"a": 1}, "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}},
                     "updateStrategy": {"type": "InPlaceOnly", "paused": true}},
            "status": {"replicas": 2}
        });
        let cs: CloneSet = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(cs.spec.update_strategy.type_, "InPlaceOnly");
        let back = serde_json::to_value(&cs).unwrap();
        assert_eq!(back["spec"]["futureField"], json!({"a": 1}));
        assert_eq!(back["spec"]["updateStrategy"]["paused"], json!(true));
        assert_eq!(back["metadata"]["finalizers"], json!(["x"]));
        assert_eq!(back["status"], raw["status"]);
    }
}
