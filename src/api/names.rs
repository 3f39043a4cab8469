//! Kubernetes' name and label rules (apimachinery `util/validation`: `IsDNS1123Subdomain`,
//! `IsQualifiedName`, `IsValidLabelValue`), with their exact messages. Both validation and the
//! SidecarSet index (which must not index a name the API server would refuse) use them.

use std::sync::LazyLock;

use regex::Regex;

use super::field_errors;

const DNS1123_SUBDOMAIN: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// A static pattern (ASCII classes only, as Go's) matched against the whole string.
pub fn anchored(pattern: &str) -> Regex {
    Regex::new(&format!("^(?:{pattern})$")).unwrap_or_else(|e| unreachable!("static pattern {pattern}: {e}"))
}

static DNS1123_SUBDOMAIN_RE: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN));
static QUALIFIED_NAME_RE: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME));
static LABEL_VALUE_RE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE));

/// `validation.IsDNS1123Subdomain`.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(field_errors::max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN_RE.is_match(value) {
        errs.push(field_errors::regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN,
            &["example.com"],
        ));
    }
    errs
}

/// `validation.IsQualifiedName` (label keys, annotation keys).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => {
            return vec![format!(
                "{} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                field_errors::regex_error(
                    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                    QUALIFIED_NAME,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    let mut errs = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_owned());
        } else {
            errs.extend(dns1123_subdomain_errors(prefix).into_iter().map(|m| format!("prefix part {m}")));
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", field_errors::max_len_error(63)));
    }
    if !name.is_empty() && !QUALIFIED_NAME_RE.is_match(name) {
        errs.push(format!(
            "name part {}",
            field_errors::regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
                QUALIFIED_NAME,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `validation.IsValidLabelValue`.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(field_errors::max_len_error(63));
    }
    if !LABEL_VALUE_RE.is_match(value) {
        errs.push(field_errors::regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}
