//! Kruise workload types: CloneSet, Advanced StatefulSet and Advanced DaemonSet (`apps.kruise.io`
//! v1alpha1 and v1beta1), with the fields the admission rules read. Everything else is kept: each
//! struct flattens unknown keys into `extra`, and the pod template's spec stays a `Value`, so a
//! decoded object loses nothing a newer Kruise or Kubernetes added.
//!
//! One struct serves both versions of a kind; fields that exist in only one version are optional.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// API group of every Kruise workload.
pub const GROUP: &str = "apps.kruise.io";
/// Readiness gate and pod condition the in-place update machinery drives.
pub const INPLACE_UPDATE_READY: &str = "InPlaceUpdateReady";

/// `null` decodes as the default (Kubernetes clients send `labels: null`, `podsToDelete: null`).
fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `intstr.IntOrString`: `3` or `"30%"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

impl IntOrString {
    /// `util.GetScaledValueFromIntOrPercent`: an int as is; `"N%"` of `total`, rounded up or down.
    pub fn scaled(&self, total: i64, round_up: bool) -> Result<i64, String> {
        match self {
            IntOrString::Int(v) => Ok(*v),
            IntOrString::String(s) => {
                let percent = self.percent().ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
                let scaled = percent.saturating_mul(total);
                Ok(if round_up { scaled.div_euclid(100) + i64::from(scaled.rem_euclid(100) != 0) } else { scaled.div_euclid(100) })
            }
        }
    }

    /// The number of a valid percent string (`"25%"` → 25), `None` for ints and other strings.
    pub fn percent(&self) -> Option<i64> {
        let IntOrString::String(s) = self else { return None };
        let digits = s.strip_suffix('%')?;
        let unsigned = digits.strip_prefix('-').unwrap_or(digits);
        if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// `getIntOrPercentValue`: the int, or the number of a percent string (0 for anything else).
    pub fn int_or_percent_value(&self) -> i64 {
        match self {
            IntOrString::Int(v) => *v,
            IntOrString::String(_) => self.percent().unwrap_or(0),
        }
    }
}

impl std::fmt::Display for IntOrString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrString::Int(v) => write!(f, "{v}"),
            IntOrString::String(s) => f.write_str(s),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default, deserialize_with = "nullable")]
    pub controller: Option<bool>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub namespace: String,
    #[serde(default, deserialize_with = "nullable")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub owner_references: Vec<OwnerReference>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ObjectMeta {
    /// `metav1.GetControllerOf`: the owner reference marked `controller: true`.
    pub fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|o| o.controller == Some(true))
    }
}

/// A Pod, with only what the CloneSet `podsToDelete` lookup reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
pub struct PodRef {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, deserialize_with = "nullable")]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, deserialize_with = "nullable")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// No requirement at all (such a selector would select every pod in the namespace).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// `metav1.LabelSelectorAsSelector(..).Matches(labels)`; an error for a malformed requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        let mut all = self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
        for req in &self.match_expressions {
            let value = labels.get(&req.key);
            let ok = match req.operator.as_str() {
                "In" | "NotIn" if req.values.is_empty() => {
                    return Err(format!("for 'in', 'notin' operators, values set can't be empty (key {:?})", req.key));
                }
                "Exists" | "DoesNotExist" if !req.values.is_empty() => {
                    return Err(format!("values set must be empty for exists and does not exist (key {:?})", req.key));
                }
                "In" => value.is_some_and(|v| req.values.contains(v)),
                "NotIn" => value.is_none_or(|v| !req.values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            all &= ok;
        }
        Ok(all)
    }

    /// The selector in the API's `labelSelector` query form (`app=web,tier in (a,b),!canary`), or
    /// `None` when it selects nothing it can say (empty) or holds a malformed requirement.
    pub fn to_query(&self) -> Option<String> {
        if self.is_empty() || self.matches(&BTreeMap::new()).is_err() {
            return None;
        }
        let labels = self.match_labels.iter().map(|(k, v)| format!("{k}={v}"));
        let expressions = self.match_expressions.iter().map(|req| match req.operator.as_str() {
            "In" => format!("{} in ({})", req.key, req.values.join(",")),
            "NotIn" => format!("{} notin ({})", req.key, req.values.join(",")),
            "Exists" => req.key.clone(),
            _ => format!("!{}", req.key),
        });
        Some(labels.chain(expressions).collect::<Vec<_>>().join(","))
    }
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
        self.spec
            .get("readinessGates")
            .and_then(Value::as_array)
            .is_some_and(|gates| gates.iter().any(|g| g.get("conditionType").and_then(Value::as_str) == Some(condition)))
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

/// `rollingUpdate.type`: `Standard` (or empty), `InPlaceIfPossible`, and in v1alpha1 the deprecated
/// `Surging`. There is no InPlaceOnly for DaemonSets.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonSetRollingUpdate {
    #[serde(default, rename = "type", deserialize_with = "nullable")]
    pub type_: String,
    #[serde(default)]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default)]
    pub max_surge: Option<IntOrString>,
    #[serde(default)]
    pub partition: Option<i64>,
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

    #[test]
    fn int_or_percent_scaling_rounds_as_asked() {
        let p = IntOrString::String("25%".into());
        assert_eq!(p.scaled(3, true), Ok(1));
        assert_eq!(p.scaled(3, false), Ok(0));
        assert_eq!(IntOrString::Int(-1).scaled(3, true), Ok(-1));
        assert!(IntOrString::String("abc".into()).scaled(3, true).is_err());
    }

    #[test]
    fn selector_matching_follows_operators() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "a".to_string())].into();
        let sel: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "a"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}, {"key": "app", "operator": "In", "values": ["a", "b"]}]}))
        .unwrap();
        assert_eq!(sel.matches(&labels), Ok(true));
        let bad: LabelSelector = serde_json::from_value(json!({"matchExpressions": [{"key": "x", "operator": "In"}]})).unwrap();
        assert!(bad.matches(&labels).is_err());
        let other: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "b"}})).unwrap();
        assert_eq!(other.matches(&labels), Ok(false));
    }
}
