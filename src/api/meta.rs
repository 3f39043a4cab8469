//! The `metav1`/`intstr` types every Kruise kind embeds: object metadata, label selectors (with the
//! one matcher all decisions use) and `IntOrString`. One definition here, used by the SidecarSet and
//! the workload types alike.
//!
//! Like every type of `api/`, each struct keeps the keys it does not model in a flattened `extra`
//! map, and empty fields are left out when serialised, so an object read and written back loses
//! nothing and gains nothing. k8s-openapi's types are not used for this reason: they drop unknown
//! keys.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

/// Fields a struct does not model, kept verbatim.
pub type Extra = Map<String, Value>;

/// `null` decodes as the default (Kubernetes clients send `labels: null`, `podsToDelete: null`).
pub fn nullable<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `metav1.OwnerReference`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
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
    pub extra: Extra,
}

/// `metav1.ObjectMeta`: the fields decisions read; everything else is kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<Value>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub owner_references: Vec<OwnerReference>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ObjectMeta {
    /// `metav1.GetControllerOf`: the owner reference marked `controller: true`.
    pub fn controller(&self) -> Option<&OwnerReference> {
        self.owner_references.iter().find(|o| o.controller == Some(true))
    }
}

/// `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    #[serde(flatten)]
    pub extra: Extra,
}

// `metav1.LabelSelectorRequirement` (a plain comment: doc comments become CRD descriptions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    // Required, as in Kruise's CRDs (the API server refuses a requirement without them).
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist` (anything else is an error when matching).
    pub operator: String,
    #[serde(default, deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl LabelSelector {
    /// `{}`: no labels and no expressions. What that means is the caller's: as a pod selector
    /// Kruise treats it as matching nothing, as a namespaceSelector as matching everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// What `metav1.LabelSelectorAsSelector` refuses, with its messages: an unknown operator,
    /// `In`/`NotIn` without values, `Exists`/`DoesNotExist` with values.
    pub fn check(&self) -> Result<(), String> {
        for req in &self.match_expressions {
            match req.operator.as_str() {
                "In" | "NotIn" if req.values.is_empty() => {
                    return Err(format!(
                        "for 'in', 'notin' operators, values set can't be empty (key {:?})",
                        req.key
                    ));
                }
                "Exists" | "DoesNotExist" if !req.values.is_empty() => {
                    return Err(format!(
                        "values set must be empty for exists and does not exist (key {:?})",
                        req.key
                    ));
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            }
        }
        Ok(())
    }

    /// matchLabels AND matchExpressions against the labels `label` looks up (so pods decoded as
    /// JSON and typed objects use the same matcher). Call [`LabelSelector::check`] first: a
    /// requirement with an unknown operator matches nothing here.
    pub fn matches_by<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.match_labels.iter().all(|(k, v)| label(k) == Some(v.as_str()))
            && self.match_expressions.iter().all(|r| {
                let value = label(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.iter().any(|x| x == v)),
                    "NotIn" => value.is_none_or(|v| r.values.iter().all(|x| x != v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }

    /// `LabelSelectorAsSelector(..).Matches(labels)`: an error for a selector [`check`](Self::check)
    /// refuses.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> Result<bool, String> {
        self.check()?;
        Ok(self.matches_by(|k| labels.get(k).map(String::as_str)))
    }

    /// The selector in the API's `labelSelector` query form (`app=web,tier in (a,b),!canary`), or
    /// `None` when it selects nothing it can say (empty) or holds a malformed requirement.
    pub fn to_query(&self) -> Option<String> {
        if self.is_empty() || self.check().is_err() {
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

/// `intstr.IntOrString`: `3` or `"30%"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum IntOrString {
    Int(i64),
    String(String),
}

impl JsonSchema for IntOrString {
    fn schema_name() -> Cow<'static, str> {
        "IntOrString".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

impl IntOrString {
    /// `util.GetScaledValueFromIntOrPercent`: an int as is; `"N%"` of `total`, rounded up or down.
    pub fn scaled(&self, total: i64, round_up: bool) -> Result<i64, String> {
        match self {
            IntOrString::Int(v) => Ok(*v),
            IntOrString::String(s) => {
                let percent = self
                    .percent()
                    .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
                let scaled = percent.saturating_mul(total);
                Ok(if round_up {
                    scaled.div_euclid(100) + i64::from(scaled.rem_euclid(100) != 0)
                } else {
                    scaled.div_euclid(100)
                })
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

    /// The number of a string that is a valid percent by Kubernetes' rule (`IsValidPercent`:
    /// `[0-9]+%`, so no sign), `None` for ints and other strings.
    pub fn valid_percent(&self) -> Option<i64> {
        let IntOrString::String(s) = self else { return None };
        let digits = s.strip_suffix('%')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        // Only an overflow fails here; Go's Atoi saturates.
        Some(digits.parse().unwrap_or(i64::MAX))
    }

    /// `getIntOrPercentValue` (Kruise's DaemonSet validation): the number of a valid percent
    /// string, else Go's `IntValue()`: the int, or the string read as a decimal integer (`"5"` is
    /// 5, `"-5%"` and `"x"` are 0).
    pub fn int_or_percent_value(&self) -> i64 {
        match self {
            IntOrString::Int(v) => *v,
            IntOrString::String(s) => self.valid_percent().unwrap_or_else(|| s.parse().unwrap_or(0)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn int_or_percent_scaling_rounds_as_asked() {
        let p = IntOrString::String("25%".into());
        assert_eq!(p.scaled(3, true), Ok(1));
        assert_eq!(p.scaled(3, false), Ok(0));
        assert_eq!(IntOrString::Int(-1).scaled(3, true), Ok(-1));
        assert!(IntOrString::String("abc".into()).scaled(3, true).is_err());
    }

    #[test]
    fn int_or_percent_values_read_as_go_reads_them() {
        let value = |v: Value| serde_json::from_value::<IntOrString>(v).unwrap().int_or_percent_value();
        assert_eq!(value(json!(3)), 3);
        assert_eq!(value(json!("25%")), 25);
        assert_eq!(value(json!("5")), 5);
        assert_eq!(value(json!("-5")), -5);
        assert_eq!(value(json!("-5%")), 0);
        assert_eq!(value(json!("x%")), 0);
        assert_eq!(IntOrString::String("-5%".into()).valid_percent(), None);
    }

    #[test]
    fn selector_matching_follows_operators() {
        let labels: BTreeMap<String, String> = [("app".to_string(), "a".to_string())].into();
        let sel: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "a"},
            "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}, {"key": "app", "operator": "In", "values": ["a", "b"]}]}))
        .unwrap();
        assert_eq!(sel.matches(&labels), Ok(true));
        let bad: LabelSelector =
            serde_json::from_value(json!({"matchExpressions": [{"key": "x", "operator": "In"}]})).unwrap();
        assert!(bad.matches(&labels).is_err());
        let other: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "b"}})).unwrap();
        assert_eq!(other.matches(&labels), Ok(false));
    }
}
