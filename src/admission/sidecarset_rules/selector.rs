//! Label selectors as SidecarSet validation uses them: apimachinery's `ValidateLabelSelector`
//! (messages included), matching (for whitelist rules), and Kruise's overlap heuristic
//! (`util.IsSelectorOverlapping`).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::api::field_errors::{self, FieldError};
use crate::api::names::{label_value_errors, qualified_name_errors};
use crate::api::sidecarset::LabelSelector;

/// `ValidateLabels`: keys are qualified names, values label values.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in labels {
        errs.extend(qualified_name_errors(k).into_iter().map(|m| field_errors::invalid_str(path, k, m)));
        errs.extend(label_value_errors(v).into_iter().map(|m| field_errors::invalid_str(path, v, m)));
    }
    errs
}

const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

/// `metav1validation.ValidateLabelSelector` plus the conversion check (`LabelSelectorAsSelector`)
/// Kruise runs after it.
pub fn validate(selector: &LabelSelector, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, req) in selector.match_expressions.iter().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        match req.operator.as_str() {
            "In" | "NotIn" if req.values.is_empty() => {
                errs.push(field_errors::required(
                    format!("{p}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                ));
            }
            "Exists" | "DoesNotExist" if !req.values.is_empty() => {
                errs.push(field_errors::forbidden(
                    format!("{p}.values"),
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(field_errors::invalid_str(
                format!("{p}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        errs.extend(
            qualified_name_errors(&req.key)
                .into_iter()
                .map(|m| field_errors::invalid_str(format!("{p}.key"), &req.key, m)),
        );
    }
    errs.extend(validate_labels(&selector.match_labels, &format!("{path}.matchLabels")));
    if let Err(e) = as_requirements(selector) {
        let shown = serde_json::to_value(selector).unwrap_or(Value::Null);
        errs.push(field_errors::invalid(format!("{path}.selector"), &shown, e));
    }
    errs
}

/// The selector's requirements, or why it cannot be converted (`LabelSelectorAsSelector`).
fn as_requirements(selector: &LabelSelector) -> Result<(), String> {
    for req in &selector.match_expressions {
        if !OPERATORS.contains(&req.operator.as_str()) {
            return Err(format!("{:?} is not a valid label selector operator", req.operator));
        }
    }
    Ok(())
}

/// Does `selector` match `labels`? `None` when the selector cannot be converted (invalid operator).
pub fn matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> Option<bool> {
    as_requirements(selector).ok()?;
    Some(selector.matches_by(|k| labels.get(k).map(String::as_str)))
}

/// Kruise's heuristic: two selectors overlap unless one is provably disjoint from the other.
pub fn overlapping(a: &LabelSelector, b: &LabelSelector) -> bool {
    !(disjoint(a, b) || disjoint(b, a))
}

const ALL: &str = "\u{0}ALL";

/// `isDisjoint(s1, s2)`: the values `s1` allows per key (`matchLabels`, `In`, and "any" for
/// `Exists`), tested against each term of `s2`.
fn disjoint(s1: &LabelSelector, s2: &LabelSelector) -> bool {
    let mut allowed: HashMap<&str, Vec<&str>> = HashMap::new();
    for (k, v) in &s1.match_labels {
        allowed.insert(k, vec![v]);
    }
    for req in &s1.match_expressions {
        match req.operator.as_str() {
            "In" => allowed.entry(&req.key).or_default().extend(req.values.iter().map(String::as_str)),
            "Exists" => {
                allowed.insert(&req.key, vec![ALL]);
            }
            _ => {}
        }
    }
    for (k, v) in &s2.match_labels {
        if let Some(values) = allowed.get(k.as_str())
            && !values.contains(&ALL)
            && !values.contains(&v.as_str())
        {
            return true;
        }
    }
    for req in &s2.match_expressions {
        let values = allowed.get(req.key.as_str());
        match req.operator.as_str() {
            "In" => {
                if let Some(values) = values
                    && !values.contains(&ALL)
                    && !req.values.iter().any(|v| values.contains(&v.as_str()))
                {
                    return true;
                }
            }
            "NotIn" => {
                if let Some(values) = values
                    && values.iter().all(|v| req.values.iter().any(|x| x == v))
                {
                    return true;
                }
            }
            "Exists" if values.is_none() => return true,
            "DoesNotExist" if values.is_some() => return true,
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn overlap_heuristic_follows_kruise() {
        let a = sel(json!({"matchLabels": {"app": "a"}}));
        assert!(!overlapping(&a, &sel(json!({"matchLabels": {"app": "b"}}))));
        assert!(overlapping(&a, &sel(json!({"matchLabels": {"app": "a", "tier": "x"}}))));
        assert!(overlapping(&a, &sel(json!({"matchLabels": {"tier": "x"}}))));
        assert!(!overlapping(
            &a,
            &sel(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["b", "c"]}]}))
        ));
        assert!(overlapping(
            &a,
            &sel(json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "c"]}]}))
        ));
        assert!(!overlapping(
            &a,
            &sel(json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}))
        ));
        assert!(!overlapping(
            &a,
            &sel(json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}))
        ));
        // The known blind spot: `Exists` on a key the other does not mention counts as disjoint.
        assert!(!overlapping(&a, &sel(json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}))));
        let exists = sel(json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]}));
        assert!(overlapping(&exists, &a));
    }

    #[test]
    fn validation_messages() {
        let errs =
            validate(&sel(json!({"matchExpressions": [{"key": "app", "operator": "In"}]})), "spec.selector");
        assert_eq!(
            errs[0].to_string(),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        let errs =
            validate(&sel(json!({"matchExpressions": [{"key": "app", "operator": "Has"}]})), "spec.selector");
        assert_eq!(
            errs[0].to_string(),
            r#"spec.selector.matchExpressions[0].operator: Invalid value: "Has": not a valid selector operator"#
        );
        let errs = validate(&sel(json!({"matchLabels": {"app": "bad value"}})), "spec.selector");
        assert!(errs[0].to_string().starts_with(
            r#"spec.selector.matchLabels: Invalid value: "bad value": a valid label must be an empty string"#
        ));
        assert!(validate(&sel(json!({"matchLabels": {"example.com/app": "ok"}})), "s").is_empty());
    }

    #[test]
    fn matching() {
        let labels = BTreeMap::from([("team".to_owned(), "a".to_owned())]);
        assert_eq!(matches(&sel(json!({"matchLabels": {"team": "a"}})), &labels), Some(true));
        assert_eq!(
            matches(
                &sel(json!({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]})),
                &labels
            ),
            Some(false)
        );
        assert_eq!(
            matches(&sel(json!({"matchExpressions": [{"key": "x", "operator": "Bad"}]})), &labels),
            None
        );
    }
}
