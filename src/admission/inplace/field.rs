//! Kubernetes field errors (`k8s.io/apimachinery/pkg/util/validation/field`) as Kruise's webhooks
//! render them, so a denial reads the same as Kruise's: `<path>: <Type>: <detail>`, several joined
//! as `[e1, e2]` with duplicates removed.

use std::fmt;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldError {
    /// `<path>: Invalid value: <value>: <detail>`
    Invalid { path: String, value: String, detail: String },
    /// `<path>: Forbidden: <detail>`
    Forbidden { path: String, detail: String },
    /// `<path>: Required value[: <detail>]`
    Required { path: String, detail: String },
    /// `<path>: Unsupported value: <value>: supported values: "a", "b"`
    NotSupported { path: String, value: String, supported: &'static [&'static str] },
}

/// How an invalid value is shown: strings quoted, numbers and booleans bare, anything else as
/// compact JSON.
pub fn show(value: &Value) -> String {
    value.to_string()
}

/// A string value as Go's `%q` shows it.
pub fn show_str(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
}

impl FieldError {
    pub fn invalid(path: &str, value: String, detail: impl Into<String>) -> Self {
        FieldError::Invalid { path: path.into(), value, detail: detail.into() }
    }

    pub fn forbidden(path: &str, detail: impl Into<String>) -> Self {
        FieldError::Forbidden { path: path.into(), detail: detail.into() }
    }

    pub fn required(path: &str, detail: impl Into<String>) -> Self {
        FieldError::Required { path: path.into(), detail: detail.into() }
    }

    pub fn not_supported(path: &str, value: &str, supported: &'static [&'static str]) -> Self {
        FieldError::NotSupported { path: path.into(), value: show_str(value), supported }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldError::Invalid { path, value, detail } => write!(f, "{path}: Invalid value: {value}: {detail}"),
            FieldError::Forbidden { path, detail } => write!(f, "{path}: Forbidden: {detail}"),
            FieldError::Required { path, detail } if detail.is_empty() => write!(f, "{path}: Required value"),
            FieldError::Required { path, detail } => write!(f, "{path}: Required value: {detail}"),
            FieldError::NotSupported { path, value, supported } => {
                let list: Vec<String> = supported.iter().map(|s| show_str(s)).collect();
                write!(f, "{path}: Unsupported value: {value}: supported values: {}", list.join(", "))
            }
        }
    }
}

/// `ErrorList.ToAggregate().Error()`: `None` for no errors, the one message, or `[e1, e2, ...]`.
pub fn aggregate(errors: &[FieldError]) -> Option<String> {
    let mut messages: Vec<String> = Vec::with_capacity(errors.len());
    for e in errors {
        let m = e.to_string();
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    match messages.len() {
        0 => None,
        1 => messages.pop(),
        _ => Some(format!("[{}]", messages.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_apimachinery() {
        let a = FieldError::forbidden("spec", "no");
        let b = FieldError::invalid("spec.replicas", "-1".into(), "must be greater than or equal to 0");
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(std::slice::from_ref(&a)).as_deref(), Some("spec: Forbidden: no"));
        assert_eq!(
            aggregate(&[a.clone(), b, a]).as_deref(),
            Some("[spec: Forbidden: no, spec.replicas: Invalid value: -1: must be greater than or equal to 0]")
        );
        assert_eq!(FieldError::required("spec.x", "").to_string(), "spec.x: Required value");
        assert_eq!(
            FieldError::not_supported("spec.t", "X", &["Always"]).to_string(),
            r#"spec.t: Unsupported value: "X": supported values: "Always""#
        );
    }
}
