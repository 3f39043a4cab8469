//! In-place update rules and the validation around them for Kruise workloads (docs/workloads.md §2, §3):
//! `/validate-apps-kruise-io-v1alpha1-cloneset`, `/validate-apps-kruise-io-statefulset` and
//! `/validate-apps-kruise-io-daemonset`, CREATE and UPDATE.

pub mod cloneset;
pub mod daemonset;
pub mod defaults;
pub mod immutable;
pub mod resources;
pub mod statefulset;
pub mod template_diff;

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::review::{AdmissionError, AdmissionRequest, Operation};
use crate::api::field_errors::{self, FieldError};
use crate::api::tree::Json;
use crate::api::workloads::{IntOrString, LabelSelector, PodTemplate};

/// The objects of a CREATE or UPDATE this module judges: `(new, old)`, with `old` only on UPDATE.
/// `None` for requests these rules do not look at (other operations, subresources).
fn objects<'r>(
    request: &'r AdmissionRequest,
) -> Result<Option<(&'r Json<'r>, Option<&'r Json<'r>>)>, AdmissionError> {
    if !request.sub_resource.is_empty() || !matches!(request.operation, Operation::Create | Operation::Update)
    {
        return Ok(None);
    }
    let new = request.object.as_ref().ok_or_else(|| {
        AdmissionError::BadRequest(format!("request.object is required for {}", request.operation.as_str()))
    })?;
    let old =
        match request.operation {
            Operation::Update => Some(request.old_object.as_ref().ok_or_else(|| {
                AdmissionError::BadRequest("request.oldObject is required for UPDATE".into())
            })?),
            _ => None,
        };
    Ok(Some((new, old)))
}

static NULL: Json = Json::Null;

/// `spec.template.spec` of a workload, read in place (`null` when absent).
fn template_spec<'j>(object: &'j Json<'j>) -> &'j Json<'j> {
    object.pointer("/spec/template/spec").unwrap_or(&NULL)
}

/// Decode a workload; a shape the typed model cannot read is a bad request (Kruise: 400).
fn decode<T: DeserializeOwned>(value: &Value, what: &str) -> Result<T, AdmissionError> {
    T::deserialize(value).map_err(|e| AdmissionError::BadRequest(format!("cannot decode {what}: {e}")))
}

/// The API version the request is about (`v1alpha1`, `v1beta1`), from the request's kind, else
/// from the object.
fn version<'a>(request: &'a AdmissionRequest, object: &'a Json) -> &'a str {
    if !request.kind.version.is_empty() {
        return &request.kind.version;
    }
    object.get("apiVersion").and_then(Json::as_str).and_then(|v| v.rsplit_once('/')).map_or("", |(_, v)| v)
}

fn labels_value(labels: &BTreeMap<String, String>) -> String {
    field_errors::show(&serde_json::to_value(labels).unwrap_or(Value::Null))
}

fn selector_value(selector: &LabelSelector) -> String {
    field_errors::show(&serde_json::to_value(selector).unwrap_or(Value::Null))
}

/// The selector rules CloneSet and Advanced StatefulSet share: required, well-formed, not empty,
/// and matching the template's labels.
fn check_selector(
    selector: Option<&LabelSelector>,
    labels: &BTreeMap<String, String>,
    kind: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(selector) = selector else {
        errors.push(field_errors::required("spec.selector", ""));
        return;
    };
    if selector.is_empty() {
        errors.push(field_errors::invalid_shown(
            "spec.selector",
            selector_value(selector),
            format!("empty selector is invalid for {kind}"),
        ));
        return;
    }
    match selector.matches(labels) {
        Err(e) => errors.push(field_errors::invalid_shown("spec.selector", selector_value(selector), e)),
        Ok(false) => errors.push(does_not_match(labels)),
        Ok(true) => {}
    }
}

fn does_not_match(labels: &BTreeMap<String, String>) -> FieldError {
    field_errors::invalid_shown(
        "spec.template.metadata.labels",
        labels_value(labels),
        "`selector` does not match template `labels`",
    )
}

/// The pod template rules CloneSet and Advanced StatefulSet share: `restartPolicy`, when set, is
/// `Always`, and no `activeDeadlineSeconds` (`kind` as Kruise's message spells the workload).
fn check_template(template: &PodTemplate, kind: &str, errors: &mut Vec<FieldError>) {
    let restart = template.restart_policy();
    if !restart.is_empty() {
        check_restart_policy(restart, errors);
    }
    forbid_active_deadline(template, kind, errors);
}

/// A workload's pods restart `Always`.
fn check_restart_policy(restart: &str, errors: &mut Vec<FieldError>) {
    if restart != "Always" {
        errors.push(field_errors::not_supported("spec.template.spec.restartPolicy", restart, &["Always"]));
    }
}

/// A workload's pods run until replaced: no `activeDeadlineSeconds`.
fn forbid_active_deadline(template: &PodTemplate, kind: &str, errors: &mut Vec<FieldError>) {
    if template.has_active_deadline() {
        errors.push(field_errors::forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            format!("activeDeadlineSeconds in {kind} is not Supported"),
        ));
    }
}

/// `ValidateNonnegativeField`.
fn nonnegative(path: &str, value: i64, errors: &mut Vec<FieldError>) {
    if value < 0 {
        errors.push(field_errors::invalid_shown(
            path,
            value.to_string(),
            "must be greater than or equal to 0",
        ));
    }
}

fn int_or_string_value(v: &IntOrString) -> String {
    field_errors::show(&serde_json::to_value(v).unwrap_or(Value::Null))
}

/// `ValidatePositiveIntOrPercent` (zero allowed) and, when asked, `IsNotMoreThan100Percent`.
fn positive_int_or_percent(
    path: &str,
    v: &IntOrString,
    at_most_100_percent: bool,
    errors: &mut Vec<FieldError>,
) {
    errors.extend(field_errors::positive_int_or_percent(path, v));
    if at_most_100_percent && v.valid_percent().is_some_and(|p| p > 100) {
        errors.push(field_errors::invalid_shown(
            path,
            int_or_string_value(v),
            "must not be greater than 100%",
        ));
    }
}
