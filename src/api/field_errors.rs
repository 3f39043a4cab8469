//! Kubernetes-style field errors (`k8s.io/apimachinery/pkg/util/validation/field`), rendered the way
//! `ErrorList.ToAggregate()` does: `<path>: <Type>: <detail>`, several joined as `[e1, e2]`,
//! duplicates removed. Kruise's SidecarSet and workload validators answer with these messages,
//! so ours read the same.

use std::fmt;

use serde_json::Value;

use super::meta::IntOrString;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Required,
    Forbidden,
    TooLong,
    Invalid(String),
    Duplicate(String),
    NotFound(String),
    NotSupported(String, Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub kind: Kind,
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        match &self.kind {
            Kind::Required => f.write_str("Required value")?,
            Kind::Forbidden => f.write_str("Forbidden")?,
            Kind::TooLong => f.write_str("Too long")?,
            Kind::Invalid(v) => write!(f, "Invalid value: {v}")?,
            Kind::Duplicate(v) => write!(f, "Duplicate value: {v}")?,
            Kind::NotFound(v) => write!(f, "Not found: {v}")?,
            Kind::NotSupported(v, supported) => {
                write!(f, "Unsupported value: {v}")?;
                if !supported.is_empty() {
                    let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
                    write!(f, ": supported values: {}", quoted.join(", "))?;
                }
            }
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// Go's `%q` for the strings that appear in these messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How a bad value is shown: strings quoted, numbers and booleans bare, structures as compact JSON
/// (Go prints its structs with `%#v`, which has no stable form worth copying).
pub fn show(v: &Value) -> String {
    match v {
        Value::Null => go_quote("null"),
        Value::String(s) => go_quote(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

pub fn required(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Required, detail: detail.into() }
}

pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Forbidden, detail: detail.into() }
}

pub fn invalid(path: impl Into<String>, value: &Value, detail: impl Into<String>) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Invalid(show(value)), detail: detail.into() }
}

/// `Invalid value` with the value already rendered (with [`show`] or [`go_quote`], or as Kruise
/// formats it, e.g. a bare number).
pub fn invalid_shown(path: impl Into<String>, shown: String, detail: impl Into<String>) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Invalid(shown), detail: detail.into() }
}

pub fn invalid_str(path: impl Into<String>, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Invalid(go_quote(value)), detail: detail.into() }
}

pub fn duplicate(path: impl Into<String>, value: &str) -> FieldError {
    FieldError { path: path.into(), kind: Kind::Duplicate(go_quote(value)), detail: String::new() }
}

pub fn not_found(path: impl Into<String>, value: &str) -> FieldError {
    FieldError { path: path.into(), kind: Kind::NotFound(go_quote(value)), detail: String::new() }
}

pub fn not_supported(path: impl Into<String>, value: &str, supported: &[&str]) -> FieldError {
    FieldError {
        path: path.into(),
        kind: Kind::NotSupported(go_quote(value), supported.iter().map(|s| (*s).to_owned()).collect()),
        detail: String::new(),
    }
}

/// `field.TooLong` with a byte limit.
pub fn too_long(path: impl Into<String>, max_bytes: usize) -> FieldError {
    let unit = if max_bytes == 1 { "byte" } else { "bytes" };
    FieldError {
        path: path.into(),
        kind: Kind::TooLong,
        detail: format!("may not be more than {max_bytes} {unit}"),
    }
}

/// `ErrorList.ToAggregate().Error()`: `None` for no errors, the one message, or `[a, b, ...]`
/// without repeats.
pub fn aggregate(errors: &[FieldError]) -> Option<String> {
    let mut seen = std::collections::HashSet::new();
    let messages: Vec<String> =
        errors.iter().map(ToString::to_string).filter(|m| seen.insert(m.clone())).collect();
    match messages.len() {
        0 => None,
        1 => messages.into_iter().next(),
        _ => Some(format!("[{}]", messages.join(", "))),
    }
}

/// `validation.RegexError`: the message plus examples and the pattern, with Go's spacing.
pub fn regex_error(msg: &str, pattern: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{pattern}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{pattern}')"));
    out
}

pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `ValidatePositiveIntOrPercent` (k8s.io/kubernetes apps validation): a string must be a valid
/// percent (`[0-9]+%`, so `"5"` and `"-5%"` are refused with the regex message), an int at least 0.
pub fn positive_int_or_percent(path: &str, v: &IntOrString) -> Option<FieldError> {
    match v {
        IntOrString::String(s) if v.valid_percent().is_none() => Some(invalid_str(
            path,
            s,
            regex_error(
                "a valid percent string must be a numeric string followed by an ending '%'",
                "[0-9]+%",
                &["1%", "93%"],
            ),
        )),
        IntOrString::Int(n) if *n < 0 => {
            Some(invalid_shown(path, n.to_string(), "must be greater than or equal to 0"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_apimachinery() {
        assert_eq!(
            required("spec.selector", "no selector defined for SidecarSet").to_string(),
            "spec.selector: Required value: no selector defined for SidecarSet"
        );
        assert_eq!(
            required("spec.containers[0].image", "").to_string(),
            "spec.containers[0].image: Required value"
        );
        assert_eq!(
            invalid("a.b", &json!(0), "must be between 1 and 65535, inclusive").to_string(),
            "a.b: Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        assert_eq!(
            duplicate("spec.volumes[1].name", "v").to_string(),
            r#"spec.volumes[1].name: Duplicate value: "v""#
        );
        assert_eq!(
            not_supported("p", "X", &["Always", "IfNotPresent", "Never"]).to_string(),
            r#"p: Unsupported value: "X": supported values: "Always", "IfNotPresent", "Never""#
        );
        assert_eq!(forbidden("p", "not allowed").to_string(), "p: Forbidden: not allowed");
        assert_eq!(
            too_long("metadata.annotations", 262144).to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
    }

    #[test]
    fn aggregates_without_repeats() {
        let a = required("a", "");
        let b = required("b", "x");
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(std::slice::from_ref(&a)).unwrap(), "a: Required value");
        assert_eq!(aggregate(&[a.clone(), b, a]).unwrap(), "[a: Required value, b: Required value: x]");
    }

    #[test]
    fn regex_error_has_gos_double_space() {
        assert_eq!(
            regex_error("m", "[a-z]", &["my-name", "123-abc"]),
            "m (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z]')"
        );
    }
}
