//! `/validate-apps-kruise-io-statefulset` (`vstatefulset.kb.io`), Advanced StatefulSet v1alpha1 and v1beta1,
//! CREATE and UPDATE (docs/workloads.md#2-3-statefulset-inplaceonly,
//! docs/workloads.md#3-3-statefulset-validation).
//!
//! On UPDATE the field validation and immutability run first; only if they pass is the InPlaceOnly
//! check reached, and its failure is a plain message, not a field error (as in Kruise). The check
//! is anchored like CloneSet's (docs/workloads.md#2-3-statefulset-inplaceonly: Kruise's unanchored rule
//! lets `imagePullPolicy` through), and it diffs both templates after Kruise's template defaults, so a
//! stored template that lacks them does not turn every update into spurious `add` operations.

use serde_json::Value;

use super::template_diff::first_offending_change_defaulted;
use super::{
    check_selector, check_template, decode, defaults, immutable, int_or_string_value, nonnegative, objects,
    positive_int_or_percent, template_spec,
};
use crate::admission::Inputs;
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::admission::writes::Effects;
use crate::api::field_errors::{self, FieldError, aggregate};
use crate::api::tree::Json;
use crate::api::workloads::{INPLACE_UPDATE_READY, IntOrString, StatefulSet, StatefulSetRollingUpdate};

const MUTABLE: &[&str] = &[
    "replicas",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "scaleStrategy",
    "volumeClaimTemplates",
    "volumeClaimUpdateStrategy",
    "reserveOrdinals",
    "lifecycle",
    "revisionHistoryLimit",
    "ordinals",
];
const IMMUTABLE_MESSAGE: &str = "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'reserveOrdinals', \
'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', `volumeClaimTemplates`, `VolumeClaimUpdateStrategy` and \
'updateStrategy' are forbidden";
/// Immutable fields Kruise's mutating webhook defaults: spelling the default out later is no change.
const DEFAULTED: &[(&str, &str)] = &[("podManagementPolicy", "OrderedReady")];
/// Kruise's `MaxMinReadySeconds`.
const MAX_MIN_READY_SECONDS: i64 = 300;
const PARALLEL_ONLY: &str = "can only work with Parallel PodManagementPolicyType";
const RU: &str = "spec.updateStrategy.rollingUpdate";

fn decode_statefulset(value: &Json) -> Result<StatefulSet, AdmissionError> {
    let mut sts: StatefulSet = decode(&value.to_value(), "StatefulSet")?;
    defaults::statefulset(&mut sts);
    Ok(sts)
}

pub fn validate(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let Some((new_value, old_value)) = objects(request)? else { return Ok(Effects::default()) };
    let sts = decode_statefulset(new_value)?;
    let mut errors = Vec::new();
    validate_spec(&sts, &mut errors);
    let Some(old_value) = old_value else { return into_result(&errors) };
    errors.extend(immutable::metadata_update(old_value, new_value));
    if immutable::spec_changed_outside(old_value, new_value, MUTABLE, DEFAULTED) {
        errors.push(field_errors::forbidden("spec", IMMUTABLE_MESSAGE));
    }
    into_result(&errors)?;
    let in_place_only = sts
        .spec
        .update_strategy
        .rolling_update
        .as_ref()
        .is_some_and(|ru| ru.pod_update_policy == "InPlaceOnly");
    if in_place_only
        && let Some(offence) = first_offending_change_defaulted(
            &template_spec(old_value).to_value(),
            &sts.spec.template.spec,
            inputs.settings.inplace_vertical_scaling(),
        )
    {
        return Err(AdmissionError::Invalid(format!(
            "invalid template modified with InPlaceOnly strategy: {offence}, currently only image update is allowed for InPlaceOnly"
        )));
    }
    Ok(Effects::default())
}

fn into_result(errors: &[FieldError]) -> Result<Effects, AdmissionError> {
    match aggregate(errors) {
        Some(message) => Err(AdmissionError::Invalid(message)),
        None => Ok(Effects::default()),
    }
}

fn validate_spec(sts: &StatefulSet, errors: &mut Vec<FieldError>) {
    let spec = &sts.spec;
    let parallel = spec.pod_management_policy == "Parallel";
    // In Kruise's order (validateStatefulSetSpec), which is the order of the aggregated message.
    if !matches!(spec.pod_management_policy.as_str(), "OrderedReady" | "Parallel") {
        errors.push(field_errors::invalid_shown(
            "spec.podManagementPolicy",
            field_errors::go_quote(&spec.pod_management_policy),
            "must be 'OrderedReady' or 'Parallel'",
        ));
    }
    for (i, ordinal) in spec.reserve_ordinals.iter().enumerate() {
        let ok = match ordinal {
            IntOrString::Int(n) => *n >= 0,
            IntOrString::String(s) => is_range(s),
        };
        if !ok {
            errors.push(field_errors::invalid_shown(
                format!("spec.reserveOrdinals[{i}]"),
                int_or_string_value(ordinal),
                "must be a non-negative integer or a range \"<start>-<end>\"",
            ));
        }
    }
    if let Some(max) = spec.scale_strategy.as_ref().and_then(|s| s.max_unavailable.as_ref()) {
        max_unavailable("spec.scaleStrategy.maxUnavailable", Some(max), parallel, errors);
    }
    update_strategy(sts, parallel, errors);
    if let Some(policy) = &spec.persistent_volume_claim_retention_policy {
        for (field, value) in [("whenDeleted", &policy.when_deleted), ("whenScaled", &policy.when_scaled)] {
            if !value.is_empty() && !matches!(value.as_str(), "Retain" | "Delete") {
                let path = format!("spec.persistentVolumeClaimRetentionPolicy.{field}");
                errors.push(field_errors::not_supported(&path, value, &["Retain", "Delete"]));
            }
        }
    }
    nonnegative("spec.replicas", spec.replicas.unwrap_or(1), errors);
    check_selector(spec.selector.as_ref(), &spec.template.metadata.labels, "statefulset", errors);
    check_template(&spec.template, "StatefulSet", errors);
}

/// `^\d+-\d+$`
fn is_range(s: &str) -> bool {
    s.split_once('-')
        .is_some_and(|(a, b)| [a, b].iter().all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit())))
}

fn update_strategy(sts: &StatefulSet, parallel: bool, errors: &mut Vec<FieldError>) {
    let strategy = &sts.spec.update_strategy;
    match strategy.type_.as_str() {
        "OnDelete" => {
            if let Some(ru) = &strategy.rolling_update {
                let value = field_errors::show(&serde_json::to_value(ru).unwrap_or(Value::Null));
                errors.push(field_errors::invalid_shown(
                    RU,
                    value,
                    "only allowed for updateStrategy 'RollingUpdate'",
                ));
            }
        }
        "RollingUpdate" => {
            if let Some(ru) = &strategy.rolling_update {
                rolling_update(sts, ru, parallel, errors);
            }
        }
        other => {
            errors.push(field_errors::invalid_shown(
                "spec.updateStrategy",
                field_errors::go_quote(other),
                "must be 'RollingUpdate' or 'OnDelete'",
            ));
        }
    }
}

fn rolling_update(
    sts: &StatefulSet,
    ru: &StatefulSetRollingUpdate,
    parallel: bool,
    errors: &mut Vec<FieldError>,
) {
    nonnegative(&format!("{RU}.partition"), ru.partition.unwrap_or(0), errors);
    let min_ready = ru.min_ready_seconds.unwrap_or(0);
    nonnegative(&format!("{RU}.minReadySeconds"), min_ready, errors);
    if min_ready > MAX_MIN_READY_SECONDS {
        errors.push(field_errors::invalid_shown(
            format!("{RU}.minReadySeconds"),
            min_ready.to_string(),
            "must be no more than 300 seconds",
        ));
    }
    max_unavailable(&format!("{RU}.maxUnavailable"), ru.max_unavailable.as_ref(), parallel, errors);
    pod_update_policy(sts, &ru.pod_update_policy, errors);
    if ru.unordered_update.as_ref().is_some_and(|u| !u.is_null()) && !parallel {
        errors.push(field_errors::required(
            format!("{RU}.unorderedUpdate"),
            "unorderedUpdate can only work with Parallel PodManagementPolicyType",
        ));
    }
}

/// `rollingUpdate.maxUnavailable` (required) and `scaleStrategy.maxUnavailable`: at least one pod,
/// and above one only with `Parallel` (Kruise's validateMaxUnavailableField, for both).
fn max_unavailable(path: &str, max: Option<&IntOrString>, parallel: bool, errors: &mut Vec<FieldError>) {
    let Some(max) = max else {
        errors.push(field_errors::required(path, ""));
        return;
    };
    positive_int_or_percent(path, max, false, errors);
    // Kruise shows the scaled number here (0 when it cannot be computed), not the field's text.
    match max.scaled(1, true) {
        Err(e) => errors.push(field_errors::invalid_shown(
            path,
            "0".to_string(),
            format!("getValueFromIntOrPercent error: {e}"),
        )),
        Ok(v) if v < 1 => {
            errors.push(field_errors::invalid_shown(path, v.to_string(), "should not be less than 1"))
        }
        Ok(_) => {}
    }
    if !parallel && *max != IntOrString::Int(1) {
        errors.push(field_errors::invalid_shown(path, int_or_string_value(max), PARALLEL_ONLY));
    }
}

/// `rollingUpdate.podUpdatePolicy`: in-place policies need the in-place readiness gate.
fn pod_update_policy(sts: &StatefulSet, policy: &str, errors: &mut Vec<FieldError>) {
    match policy {
        "" => errors.push(field_errors::required(format!("{RU}.podUpdatePolicy"), "")),
        "ReCreate" => {}
        "InPlaceIfPossible" | "InPlaceOnly" => {
            if !sts.spec.template.has_readiness_gate(INPLACE_UPDATE_READY) {
                let gates = sts.spec.template.spec.get("readinessGates").cloned().unwrap_or(Value::Null);
                errors.push(field_errors::invalid_shown(
                    "spec.template.spec.readinessGates",
                    field_errors::show(&gates),
                    format!("must contains {INPLACE_UPDATE_READY} when podUpdatePolicy is {policy}"),
                ));
            }
        }
        other => errors.push(field_errors::invalid_shown(
            format!("{RU}.podUpdatePolicy"),
            field_errors::go_quote(other),
            "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
        )),
    }
}
