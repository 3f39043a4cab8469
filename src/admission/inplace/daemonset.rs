//! `/validate-apps-kruise-io-daemonset` (`vdaemonset.kb.io`), Advanced DaemonSet v1alpha1 and v1beta1, CREATE
//! and UPDATE (docs/workloads.md#2-4-daemonset, docs/workloads.md#3-4-daemonset-validation). There is no
//! InPlaceOnly for DaemonSets; `rollingUpdate.type: InPlaceIfPossible` only forbids surge.
//!
//! Kruise answers CREATE failures with 500 (its "validating fn" path) and UPDATE failures with 422;
//! we keep both codes.

use serde_json::Value;

use super::{
    check_restart_policy, decode, defaults, does_not_match, forbid_active_deadline, immutable,
    int_or_string_value, nonnegative, objects, positive_int_or_percent, selector_value, version,
};
use crate::admission::Inputs;
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::admission::writes::Effects;
use crate::api::field_errors::{self, FieldError, aggregate};
use crate::api::tree::Json;
use crate::api::workloads::DaemonSet;

const MUTABLE_V1ALPHA1: &[&str] =
    &["template", "updateStrategy", "lifecycle", "burstReplicas", "minReadySeconds", "revisionHistoryLimit"];
const MUTABLE_V1BETA1: &[&str] = &[
    "template",
    "updateStrategy",
    "lifecycle",
    "burstReplicas",
    "minReadySeconds",
    "revisionHistoryLimit",
    "scaleStrategy",
];
// Kruise's text, with its two spaces after 'lifecycle',.
const IMMUTABLE_V1ALPHA1: &str = "updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle',  \
'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden";
const IMMUTABLE_V1BETA1: &str = "updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle', \
'scaleStrategy', 'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden";

fn decode_daemonset(value: &Json, v1beta1: bool) -> Result<DaemonSet, AdmissionError> {
    let mut ds: DaemonSet = decode(&value.to_value(), "DaemonSet")?;
    defaults::daemonset(&mut ds, v1beta1);
    Ok(ds)
}

pub fn validate(request: &AdmissionRequest, _inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let Some((new_value, old_value)) = objects(request)? else { return Ok(Effects::default()) };
    let v1beta1 = version(request, new_value) == "v1beta1";
    let ds = decode_daemonset(new_value, v1beta1)?;
    let mut errors = Vec::new();
    if let Some(old_value) = old_value {
        errors.extend(immutable::metadata_update(old_value, new_value));
        let (mutable, message) = if v1beta1 {
            (MUTABLE_V1BETA1, IMMUTABLE_V1BETA1)
        } else {
            (MUTABLE_V1ALPHA1, IMMUTABLE_V1ALPHA1)
        };
        if immutable::spec_changed_outside(old_value, new_value, mutable, &[]) {
            errors.push(field_errors::forbidden("spec", message));
        }
    }
    validate_spec(&ds, v1beta1, &mut errors);
    match aggregate(&errors) {
        None => Ok(Effects::default()),
        Some(message) if old_value.is_some() => Err(AdmissionError::Invalid(message)),
        Some(message) => Err(AdmissionError::Internal(message)),
    }
}

fn validate_spec(ds: &DaemonSet, v1beta1: bool, errors: &mut Vec<FieldError>) {
    let spec = &ds.spec;
    // A missing selector selects nothing, so it cannot match the template's labels.
    match &spec.selector {
        None => errors.push(does_not_match(&spec.template.metadata.labels)),
        Some(selector) => match selector.matches(&spec.template.metadata.labels) {
            Err(e) => errors.push(field_errors::invalid_shown("spec.selector", selector_value(selector), e)),
            Ok(false) => errors.push(does_not_match(&spec.template.metadata.labels)),
            Ok(true) if selector.is_empty() => errors.push(field_errors::invalid_shown(
                "spec.selector",
                selector_value(selector),
                "empty selector is invalid for daemonset",
            )),
            Ok(true) => {}
        },
    }
    // The template is judged after Kruise's pod defaults, so an unset restartPolicy is Always.
    let mut template_spec = spec.template.spec.clone();
    defaults::pod_spec(&mut template_spec);
    let restart = template_spec.get("restartPolicy").and_then(Value::as_str).unwrap_or_default();
    check_restart_policy(restart, errors);
    forbid_active_deadline(&spec.template, "DaemonSet", errors);
    nonnegative("spec.minReadySeconds", spec.min_ready_seconds.unwrap_or(0), errors);
    update_strategy(ds, v1beta1, errors);
    if let Some(limit) = spec.revision_history_limit {
        nonnegative("spec.revisionHistoryLimit", limit, errors);
    }
    if spec.lifecycle.as_ref().is_some_and(|l| l.in_place_update.as_ref().is_some_and(|h| !h.is_null())) {
        errors.push(field_errors::forbidden(
            "spec.lifecycle.inPlaceUpdate",
            "inPlaceUpdate hook has not supported yet",
        ));
    }
}

fn update_strategy(ds: &DaemonSet, v1beta1: bool, errors: &mut Vec<FieldError>) {
    const RU: &str = "spec.updateStrategy.rollingUpdate";
    let strategy = &ds.spec.update_strategy;
    match strategy.type_.as_str() {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = &strategy.rolling_update else {
                errors.push(field_errors::required(RU, ""));
                return;
            };
            let non_zero = |v: &Option<_>| {
                v.as_ref().is_some_and(|v: &crate::api::workloads::IntOrString| v.int_or_percent_value() != 0)
            };
            let has_unavailable = non_zero(&ru.max_unavailable);
            let has_surge = non_zero(&ru.max_surge);
            if let (true, Some(v)) = (has_unavailable, &ru.max_unavailable) {
                positive_int_or_percent(&format!("{RU}.maxUnavailable"), v, true, errors);
            }
            if let (true, Some(v)) = (has_surge, &ru.max_surge) {
                positive_int_or_percent(&format!("{RU}.maxSurge"), v, true, errors);
            }
            if has_unavailable && has_surge {
                let value = ru.max_surge.as_ref().map_or_else(|| "null".to_owned(), int_or_string_value);
                errors.push(field_errors::invalid_shown(
                    format!("{RU}.maxSurge"),
                    value,
                    "may not be set when maxUnavailable is non-zero",
                ));
            } else if !has_unavailable && !has_surge {
                errors.push(field_errors::required(
                    format!("{RU}.maxUnavailable"),
                    "cannot be 0 when maxSurge is 0",
                ));
            }
            match ru.rolling_update_type.as_str() {
                "" | "Standard" => {}
                "InPlaceIfPossible" => {
                    if has_surge {
                        errors.push(field_errors::required(
                            format!("{RU}.maxSurge"),
                            "must be 0 for InPlaceIfPossible type",
                        ));
                    }
                }
                // v1alpha1's `Surging` never gets here: the defaults turned it into `Standard`. Kruise
                // still lists it, and names the field with `rollingUpdate` twice.
                other => {
                    let supported: &'static [&'static str] = if v1beta1 {
                        &["Standard", "InPlaceIfPossible"]
                    } else {
                        &["Standard", "Surging", "InPlaceIfPossible"]
                    };
                    errors.push(field_errors::not_supported(
                        format!("{RU}.rollingUpdate.type"),
                        other,
                        supported,
                    ));
                }
            }
            // `validateNonnegativeIntOrPercent` and `IsNotMoreThan100Percent`, on Kruise's doubled path.
            if let Some(partition) = &ru.partition {
                positive_int_or_percent(&format!("{RU}.rollingUpdate.partition"), partition, true, errors);
            }
        }
        other => {
            errors.push(field_errors::not_supported(
                "spec.updateStrategy.type",
                other,
                &["RollingUpdate", "OnDelete"],
            ));
        }
    }
}
