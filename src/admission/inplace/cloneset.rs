//! `/validate-apps-kruise-io-v1alpha1-cloneset` (`vcloneset.kb.io`), CREATE and UPDATE
//! (docs/workloads.md#2-2-cloneset-inplaceonly, docs/workloads.md#3-2-cloneset-validation). Every failure is
//! one 422 with the field errors joined as Kruise joins them.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::template_diff::first_offending_change_defaulted;
use super::{
    check_selector, check_template, decode, defaults, immutable, int_or_string_value, nonnegative, objects,
    template_spec, version,
};
use crate::admission::Inputs;
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::admission::writes::Effects;
use crate::api::field_errors::{self, FieldError, aggregate};
use crate::api::tree::Json;
use crate::api::workloads::{CloneSet, IntOrString, LabelSelector, PodRef};
use crate::cluster::{Answers, ListFilter, Query};

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

fn decode_cloneset(value: &Json, v1beta1: bool) -> Result<CloneSet, AdmissionError> {
    let mut cs: CloneSet = decode(&value.to_value(), "CloneSet")?;
    defaults::cloneset(&mut cs, v1beta1);
    Ok(cs)
}

/// `spec.scaleStrategy.podsToDelete` read in place (the typed decode reports a list of the wrong
/// shape; this only has to find names).
fn listed<'j>(value: &'j Json) -> Vec<&'j str> {
    value
        .at(&["spec", "scaleStrategy", "podsToDelete"])
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect()
}

/// Up to this many newly listed pods are read one GET each (with Kruise's per-pod messages). More
/// are read with one list of the CloneSet's pods (by its selector), so a request costs the API
/// server at most this many GETs or one list, however long `podsToDelete` is.
pub const MAX_POD_GETS: usize = 32;
/// At most this many refused names are reported one by one.
const MAX_REPORTED: usize = 100;

/// Pods newly listed in `podsToDelete` (not in the old list), sorted; empty when the list has
/// duplicates (that error stops the check) or for v1beta1 (which checks only duplicates).
/// Linear in both lists (sets), so 200,000 names cost milliseconds, not a minute.
fn new_pods_to_delete<'a>(list: &[&'a str], before: &[&str], v1beta1: bool) -> Vec<&'a str> {
    if v1beta1 || !duplicates(list).is_empty() {
        return Vec::new();
    }
    let before: HashSet<&str> = before.iter().copied().collect();
    let now: BTreeSet<&str> = list.iter().copied().filter(|name| !before.contains(name)).collect();
    now.into_iter().collect()
}

/// Names listed more than once, each once, in the order their second listing appears.
fn duplicates<'a>(list: &[&'a str]) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    let mut reported = HashSet::new();
    list.iter().copied().filter(|item| !seen.insert(*item) && reported.insert(*item)).collect()
}

fn namespace<'a>(request: &'a AdmissionRequest, object: &'a Json) -> &'a str {
    object
        .at(&["metadata", "namespace"])
        .and_then(Json::as_str)
        .filter(|ns| !ns.is_empty())
        .unwrap_or(&request.namespace)
}

fn pod_query(namespace: &str, name: &str) -> Query {
    Query::Get {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The CloneSet's pods in `namespace`, by its selector (`None` when it has no usable selector:
/// that is an error of its own, and listing every pod of the namespace instead would be unbounded).
fn pods_query(namespace: &str, selector: Option<&LabelSelector>) -> Option<Query> {
    let labels = selector?.to_query()?;
    let filter = ListFilter { labels, ..ListFilter::default() };
    Some(Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some(namespace.into()),
        filter,
    })
}

fn selector_of(value: &Json) -> Option<LabelSelector> {
    value.at(&["spec", "selector"]).and_then(|s| s.deserialize_into().ok())
}

/// The lookups for the newly listed pods in `podsToDelete`: one GET each, or one list of the
/// CloneSet's pods beyond [`MAX_POD_GETS`]. Read from the objects in place: this runs before every
/// decision, so it decodes nothing else.
pub fn queries(request: &AdmissionRequest, _inputs: &Inputs) -> Vec<Query> {
    let Ok(Some((new, old))) = objects(request) else { return Vec::new() };
    let v1beta1 = version(request, new) == "v1beta1";
    let before = old.map(listed).unwrap_or_default();
    let ns = namespace(request, new);
    let names = new_pods_to_delete(&listed(new), &before, v1beta1);
    if names.len() > MAX_POD_GETS {
        return pods_query(ns, selector_of(new).as_ref()).into_iter().collect();
    }
    names.into_iter().map(|name| pod_query(ns, name)).collect()
}

/// Where the newly listed pods are read from in the answers.
enum PodSource<'a> {
    /// One GET per pod.
    Gets(&'a Answers),
    /// The CloneSet's pods by name, from one list (or why it failed).
    Listed(Result<HashMap<&'a str, &'a Arc<Value>>, String>),
}

impl<'a> PodSource<'a> {
    fn new(answers: &'a Answers, ns: &str, cs: &CloneSet, new_names: usize) -> Self {
        if new_names <= MAX_POD_GETS {
            return PodSource::Gets(answers);
        }
        let listed = match pods_query(ns, cs.spec.selector.as_ref()) {
            None => Err("the CloneSet has no valid selector to list its pods by".to_owned()),
            Some(query) => answers.get(&query).map(|pods| {
                pods.iter()
                    .filter_map(|pod| Some((pod.pointer("/metadata/name")?.as_str()?, pod)))
                    .collect::<HashMap<_, _>>()
            }),
        };
        PodSource::Listed(listed)
    }

    /// The pod named `name`, `Ok(None)` when it does not exist, or why it could not be read.
    fn get(&self, ns: &str, name: &str) -> Result<Option<&'a Arc<Value>>, String> {
        match self {
            PodSource::Gets(answers) => answers.get(&pod_query(ns, name)).map(|pods| pods.first()),
            PodSource::Listed(Ok(pods)) => Ok(pods.get(name).copied()),
            PodSource::Listed(Err(e)) => Err(e.clone()),
        }
    }
}

pub fn validate(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let Some((new_value, old_value)) = objects(request)? else { return Ok(Effects::default()) };
    let v1beta1 = version(request, new_value) == "v1beta1";
    let cs = decode_cloneset(new_value, v1beta1)?;
    let mut errors = Vec::new();
    // The old object is read in place: it was admitted before, and decoding it would copy its
    // whole template once more.
    if let Some(old_value) = old_value {
        errors.extend(immutable::metadata_update(old_value, new_value));
        if immutable::spec_changed_outside(old_value, new_value, MUTABLE, &[]) {
            errors.push(field_errors::forbidden("spec", IMMUTABLE_MESSAGE));
        }
        // Kruise master's v1beta1 path skips this check (docs/workloads.md#2-2-cloneset-inplaceonly); the
        // released v1alpha1 runs it. It keys off the new object's strategy only, and diffs the templates
        // with the template defaults Kruise's mutating webhook stored on both.
        if !v1beta1
            && cs.spec.update_strategy.type_ == "InPlaceOnly"
            && let Some(offence) = first_offending_change_defaulted(
                &template_spec(old_value).to_value(),
                &cs.spec.template.spec,
                inputs.settings.inplace_vertical_scaling(),
            )
        {
            errors.push(field_errors::forbidden(
                "spec",
                format!("only allowed to update images in spec for InPlaceOnly, but found {offence}"),
            ));
        }
    }
    validate_spec(request, (new_value, &cs), old_value, v1beta1, inputs, &mut errors);
    match aggregate(&errors) {
        Some(message) => Err(AdmissionError::Invalid(message)),
        None => Ok(Effects::default()),
    }
}

fn validate_spec(
    request: &AdmissionRequest,
    (value, cs): (&Json, &CloneSet),
    old: Option<&Json>,
    v1beta1: bool,
    inputs: &Inputs,
    errors: &mut Vec<FieldError>,
) {
    let spec = &cs.spec;
    let replicas = spec.replicas.unwrap_or(1);
    nonnegative("spec.replicas", replicas, errors);
    check_selector(spec.selector.as_ref(), &spec.template.metadata.labels, "cloneset", errors);
    check_template(&spec.template, "cloneset", errors);
    scale_strategy(request, (value, cs), old, v1beta1, inputs, errors);
    update_strategy(cs, replicas, v1beta1, errors);
    if let Some(deadline) = spec.progress_deadline_seconds {
        nonnegative("spec.progressDeadlineSeconds", deadline, errors);
        if deadline != i64::from(i32::MAX) && deadline <= spec.min_ready_seconds.unwrap_or(0) {
            errors.push(field_errors::invalid_shown(
                "spec.progressDeadlineSeconds",
                deadline.to_string(),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

fn scale_strategy(
    request: &AdmissionRequest,
    (value, cs): (&Json, &CloneSet),
    old: Option<&Json>,
    v1beta1: bool,
    inputs: &Inputs,
    errors: &mut Vec<FieldError>,
) {
    const PATH: &str = "spec.scaleStrategy.podsToDelete";
    let list = &cs.spec.scale_strategy.pods_to_delete;
    let names: Vec<&str> = list.iter().map(String::as_str).collect();
    let dup = duplicates(&names);
    if !dup.is_empty() {
        let value = field_errors::show(&serde_json::to_value(list).unwrap_or(Value::Null));
        errors.push(field_errors::invalid_shown(
            PATH,
            value,
            format!("duplicated items [{}]", dup.join(" ")),
        ));
        return;
    }
    let ns = namespace(request, value);
    let before = old.map(listed).unwrap_or_default();
    let new_names = new_pods_to_delete(&names, &before, v1beta1);
    let pods = PodSource::new(inputs.answers, ns, cs, new_names.len());
    if let PodSource::Listed(Err(e)) = &pods {
        errors.push(field_errors::invalid_shown(
            PATH,
            format!("[{} new names]", new_names.len()),
            format!("find pods failed: {e}"),
        ));
        return;
    }
    let before_errors = errors.len();
    for (checked, name) in new_names.iter().copied().enumerate() {
        // Each refused name is one line of the message: past a hundred, say how many are left.
        if errors.len() - before_errors == MAX_REPORTED {
            let rest = new_names.len() - checked;
            errors.push(field_errors::invalid_shown(
                PATH,
                format!("[{rest} more names]"),
                "not checked one by one: fix the names above first",
            ));
            return;
        }
        let fail = |detail: String| field_errors::invalid_shown(PATH, field_errors::go_quote(name), detail);
        let pod = match pods.get(ns, name) {
            Err(e) => Err(format!("find pod {name} failed: {e}")),
            Ok(None) => {
                Err(format!("find pod {name} failed: pods {} not found", field_errors::go_quote(name)))
            }
            Ok(Some(pod)) => decode::<PodRef>(pod, "Pod").map_err(|e| format!("find pod {name} failed: {e}")),
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
type Knobs<'a> =
    (&'static str, &'a str, Option<&'a IntOrString>, Option<&'a IntOrString>, Option<&'a IntOrString>);

fn update_strategy(cs: &CloneSet, replicas: i64, v1beta1: bool, errors: &mut Vec<FieldError>) {
    let knobs = if v1beta1 { v1beta1_knobs(cs, errors) } else { Some(v1alpha1_knobs(cs, errors)) };
    let Some((prefix, policy, partition, max_unavailable, max_surge)) = knobs else { return };
    let scaled = |name: &str, v: Option<&IntOrString>, errors: &mut Vec<FieldError>| -> i64 {
        let Some(v) = v else { return 0 };
        v.scaled(replicas, true).unwrap_or_else(|e| {
            let detail = format!("failed GetScaledValueFromIntOrPercent for {name}: {e}");
            errors.push(field_errors::invalid_shown(
                format!("{prefix}.{name}"),
                field_errors::go_quote(&v.to_string()),
                detail,
            ));
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
        errors.push(field_errors::invalid_shown(
            format!("{prefix}.maxSurge"),
            field_errors::go_quote(&v.to_string()),
            detail,
        ));
    }
    if replicas > 0 && unavailable < 1 && surge < 1 {
        let value = max_unavailable.map_or_else(|| "null".to_owned(), int_or_string_value);
        errors.push(field_errors::invalid_shown(
            format!("{prefix}.maxUnavailable"),
            value,
            "maxUnavailable and maxSurge should not both be less than 1",
        ));
    }
}

/// v1beta1 keeps the knobs in `updateStrategy.rollingUpdate` (none without it) and the policy in
/// its `podUpdatePolicy`; the type is `RollingUpdate` or `OnDelete`.
fn v1beta1_knobs<'a>(cs: &'a CloneSet, errors: &mut Vec<FieldError>) -> Option<Knobs<'a>> {
    let strategy = &cs.spec.update_strategy;
    if !matches!(strategy.type_.as_str(), "RollingUpdate" | "OnDelete") {
        errors.push(field_errors::not_supported(
            "spec.updateStrategy.type",
            &strategy.type_,
            &["RollingUpdate", "OnDelete"],
        ));
    }
    let ru = strategy.rolling_update.as_ref()?;
    if !ru.pod_update_policy.is_empty() && !POLICIES.contains(&ru.pod_update_policy.as_str()) {
        errors.push(field_errors::not_supported(
            "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
            &ru.pod_update_policy,
            &POLICIES,
        ));
    }
    Some((
        "spec.updateStrategy.rollingUpdate",
        &ru.pod_update_policy,
        ru.partition.as_ref(),
        ru.max_unavailable.as_ref(),
        ru.max_surge.as_ref(),
    ))
}

/// v1alpha1 keeps the knobs in `updateStrategy` itself, the policy as its type.
fn v1alpha1_knobs<'a>(cs: &'a CloneSet, errors: &mut Vec<FieldError>) -> Knobs<'a> {
    let strategy = &cs.spec.update_strategy;
    if !POLICIES.contains(&strategy.type_.as_str()) {
        errors.push(field_errors::invalid_shown(
            "spec.updateStrategy.type",
            field_errors::go_quote(&strategy.type_),
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
}
