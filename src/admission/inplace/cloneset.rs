//! `/validate-apps-kruise-io-v1alpha1-cloneset` (`vcloneset.kb.io`), CREATE and UPDATE
//! (docs/workloads.md#2-2-cloneset-inplaceonly, docs/workloads.md#3-2-cloneset-validation). Every failure is
//! one 422 with the field errors joined as Kruise joins them.

use std::collections::BTreeSet;

use serde_json::Value;

use super::template_diff::first_offending_change;
use super::{check_selector, decode, defaults, immutable, int_or_string_value, nonnegative, objects, template_spec, version};
use crate::admission::Inputs;
use crate::admission::field::{self, FieldError, aggregate};
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::api::workloads::{CloneSet, IntOrString, PodRef};
use crate::cluster::Query;

const MUTABLE: &[&str] = &[
    "replicas",
    "template",
    "scaleStrategy",
    "updateStrategy",
    "minReadySeconds",
    "lifecycle",
    "revisionHistoryLimit",
    "volumeClaimTemplates",
    "progressDeadlineSeconds",
];
const IMMUTABLE_MESSAGE: &str = "updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', 'scaleStrategy', \
'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden";
const POLICIES: [&str; 3] = ["ReCreate", "InPlaceIfPossible", "InPlaceOnly"];

fn decode_cloneset(value: &Value, v1beta1: bool) -> Result<CloneSet, AdmissionError> {
    let mut cs: CloneSet = decode(value, "CloneSet")?;
    defaults::cloneset(&mut cs, v1beta1);
    Ok(cs)
}

/// `spec.scaleStrategy.podsToDelete` read in place (the typed decode reports a list of the wrong
/// shape; this only has to find names).
fn listed(value: &Value) -> Vec<&str> {
    value.pointer("/spec/scaleStrategy/podsToDelete").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect()
}

/// Pods newly listed in `podsToDelete` (not in the old list), sorted; empty when the list has
/// duplicates (that error stops the check) or for v1beta1 (which checks only duplicates).
fn new_pods_to_delete<'a>(list: &[&'a str], before: &[&str], v1beta1: bool) -> Vec<&'a str> {
    if v1beta1 || !duplicates(list).is_empty() {
        return Vec::new();
    }
    let now: BTreeSet<&str> = list.iter().copied().collect();
    now.into_iter().filter(|name| !before.contains(name)).collect()
}

fn duplicates<'a>(list: &[&'a str]) -> Vec<&'a str> {
    let mut seen = BTreeSet::new();
    let mut dup = Vec::new();
    for item in list {
        if !seen.insert(*item) && !dup.contains(item) {
            dup.push(*item);
        }
    }
    dup
}

fn namespace<'a>(request: &'a AdmissionRequest, object: &'a Value) -> &'a str {
    object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|ns| !ns.is_empty()).unwrap_or(&request.namespace)
}

fn pod_query(namespace: &str, name: &str) -> Query {
    Query::Get { group: String::new(), version: "v1".into(), kind: "Pod".into(), namespace: namespace.into(), name: name.into() }
}

/// One GET per newly listed pod in `podsToDelete`. Read from the objects in place: this runs
/// before every decision, so it decodes nothing.
pub fn queries(request: &AdmissionRequest, _inputs: &Inputs) -> Vec<Query> {
    let Ok(Some((new, old))) = objects(request) else { return Vec::new() };
    let v1beta1 = version(request, new) == "v1beta1";
    let before = old.map(listed).unwrap_or_default();
    let ns = namespace(request, new);
    new_pods_to_delete(&listed(new), &before, v1beta1).into_iter().map(|name| pod_query(ns, name)).collect()
}

pub fn validate(request: &AdmissionRequest, inputs: &Inputs) -> Result<Vec<String>, AdmissionError> {
    let Some((new_value, old_value)) = objects(request)? else { return Ok(Vec::new()) };
    let v1beta1 = version(request, new_value) == "v1beta1";
    let cs = decode_cloneset(new_value, v1beta1)?;
    let mut errors = Vec::new();
    // The old object is read in place: it was admitted before, and decoding it would copy its
    // whole template once more.
    if let Some(old_value) = old_value {
        errors.extend(immutable::metadata_update(old_value, new_value));
        if immutable::spec_changed_outside(old_value, new_value, MUTABLE, &[]) {
            errors.push(field::forbidden("spec", IMMUTABLE_MESSAGE));
        }
        // Kruise master's v1beta1 path skips this check (docs/workloads.md#2-2-cloneset-inplaceonly); the
        // released v1alpha1 runs it. It keys off the new object's strategy only, and diffs the templates as
        // sent.
        if !v1beta1
            && cs.spec.update_strategy.type_ == "InPlaceOnly"
            && let Some(offence) =
                first_offending_change(template_spec(old_value), &cs.spec.template.spec, inputs.settings.inplace_vertical_scaling)
        {
            errors.push(field::forbidden("spec", format!("only allowed to update images in spec for InPlaceOnly, but found {offence}")));
        }
    }
    validate_spec(request, (new_value, &cs), old_value, v1beta1, inputs, &mut errors);
    match aggregate(&errors) {
        Some(message) => Err(AdmissionError::Invalid(message)),
        None => Ok(Vec::new()),
    }
}

fn validate_spec(
    request: &AdmissionRequest,
    (value, cs): (&Value, &CloneSet),
    old: Option<&Value>,
    v1beta1: bool,
    inputs: &Inputs,
    errors: &mut Vec<FieldError>,
) {
    let spec = &cs.spec;
    let replicas = spec.replicas.unwrap_or(1);
    nonnegative("spec.replicas", replicas, errors);
    check_selector(spec.selector.as_ref(), &spec.template.metadata.labels, "cloneset", errors);
    let restart = spec.template.restart_policy();
    if !restart.is_empty() && restart != "Always" {
        errors.push(field::not_supported("spec.template.spec.restartPolicy", restart, &["Always"]));
    }
    if spec.template.has_active_deadline() {
        errors.push(field::forbidden("spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in cloneset is not Supported"));
    }
    scale_strategy(request, (value, cs), old, v1beta1, inputs, errors);
    update_strategy(cs, replicas, v1beta1, errors);
    if let Some(deadline) = spec.progress_deadline_seconds {
        nonnegative("spec.progressDeadlineSeconds", deadline, errors);
        if deadline != i64::from(i32::MAX) && deadline <= spec.min_ready_seconds.unwrap_or(0) {
            errors.push(field::invalid_shown("spec.progressDeadlineSeconds", deadline.to_string(), "must be greater than minReadySeconds"));
        }
    }
}

fn scale_strategy(
    request: &AdmissionRequest,
    (value, cs): (&Value, &CloneSet),
    old: Option<&Value>,
    v1beta1: bool,
    inputs: &Inputs,
    errors: &mut Vec<FieldError>,
) {
    const PATH: &str = "spec.scaleStrategy.podsToDelete";
    let list = &cs.spec.scale_strategy.pods_to_delete;
    let names: Vec<&str> = list.iter().map(String::as_str).collect();
    let dup = duplicates(&names);
    if !dup.is_empty() {
        let value = field::show(&serde_json::to_value(list).unwrap_or(Value::Null));
        errors.push(field::invalid_shown(PATH, value, format!("duplicated items [{}]", dup.join(" "))));
        return;
    }
    let ns = namespace(request, value);
    let before = old.map(listed).unwrap_or_default();
    for name in new_pods_to_delete(&names, &before, v1beta1) {
        let fail = |detail: String| field::invalid_shown(PATH, field::go_quote(name), detail);
        let pod = match inputs.answers.get(&pod_query(ns, name)) {
            Err(e) => Err(format!("find pod {name} failed: {e}")),
            Ok([]) => Err(format!("find pod {name} failed: pods {} not found", field::go_quote(name))),
            Ok([pod, ..]) => decode::<PodRef>(pod, "Pod").map_err(|e| format!("find pod {name} failed: {e}")),
        };
        match pod {
            Err(detail) => errors.push(fail(detail)),
            Ok(pod) if pod.metadata.deletion_timestamp.as_ref().is_some_and(|t| !t.is_null()) => {
                errors.push(fail(format!("find pod {name} already terminating")))
            }
            Ok(pod) if pod.metadata.controller().is_none_or(|o| o.uid != cs.metadata.uid) => {
                errors.push(fail(format!("find pod {name} owner is not this CloneSet")))
            }
            Ok(_) => {}
        }
    }
}

/// The rollout knobs, wherever the version keeps them: `(path prefix, policy, partition,
/// maxUnavailable, maxSurge)`.
type Knobs<'a> = (&'static str, &'a str, Option<&'a IntOrString>, Option<&'a IntOrString>, Option<&'a IntOrString>);

fn update_strategy(cs: &CloneSet, replicas: i64, v1beta1: bool, errors: &mut Vec<FieldError>) {
    let strategy = &cs.spec.update_strategy;
    let knobs: Knobs = if v1beta1 {
        if !matches!(strategy.type_.as_str(), "RollingUpdate" | "OnDelete") {
            errors.push(field::not_supported("spec.updateStrategy.type", &strategy.type_, &["RollingUpdate", "OnDelete"]));
        }
        let Some(ru) = &strategy.rolling_update else { return };
        if !ru.pod_update_policy.is_empty() && !POLICIES.contains(&ru.pod_update_policy.as_str()) {
            errors.push(field::not_supported("spec.updateStrategy.rollingUpdate.podUpdatePolicy", &ru.pod_update_policy, &POLICIES));
        }
        (
            "spec.updateStrategy.rollingUpdate",
            &ru.pod_update_policy,
            ru.partition.as_ref(),
            ru.max_unavailable.as_ref(),
            ru.max_surge.as_ref(),
        )
    } else {
        if !POLICIES.contains(&strategy.type_.as_str()) {
            errors.push(field::invalid_shown(
                "spec.updateStrategy.type",
                field::go_quote(&strategy.type_),
                "must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'",
            ));
        }
        (
            "spec.updateStrategy",
            &strategy.type_,
            strategy.partition.as_ref(),
            strategy.max_unavailable.as_ref(),
            strategy.max_surge.as_ref(),
        )
    };
    let (prefix, policy, partition, max_unavailable, max_surge) = knobs;
    let scaled = |name: &str, v: Option<&IntOrString>, errors: &mut Vec<FieldError>| -> i64 {
        let Some(v) = v else { return 0 };
        v.scaled(replicas, true).unwrap_or_else(|e| {
            let detail = format!("failed GetScaledValueFromIntOrPercent for {name}: {e}");
            errors.push(field::invalid_shown(format!("{prefix}.{name}"), field::go_quote(&v.to_string()), detail));
            0
        })
    };
    let partition_value = scaled("partition", partition, errors);
    nonnegative(&format!("{prefix}.partition"), partition_value, errors);
    let unavailable = scaled("maxUnavailable", max_unavailable, errors);
    let surge = scaled("maxSurge", max_surge, errors);
    if let Some(v) = max_surge
        && policy == "InPlaceOnly"
        && surge > 0
    {
        let detail = if v1beta1 {
            "can not use maxSurge with podUpdatePolicy InPlaceOnly"
        } else {
            "can not use maxSurge with strategy type InPlaceOnly"
        };
        errors.push(field::invalid_shown(format!("{prefix}.maxSurge"), field::go_quote(&v.to_string()), detail));
    }
    if replicas > 0 && unavailable < 1 && surge < 1 {
        let value = max_unavailable.map_or_else(|| "null".to_owned(), int_or_string_value);
        errors.push(field::invalid_shown(
            format!("{prefix}.maxUnavailable"),
            value,
            "maxUnavailable and maxSurge should not both be less than 1",
        ));
    }
}
