//! `/validate-apps-kruise-io-sidecarset`: every rule of docs/sidecarset.md#9-3-validation and
//! 9-5-update-rules, then conflict detection (docs/sidecarset.md#9-4-conflicts) against the other
//! SidecarSets, with Kruise's messages and paths (including its odd ones: `revision`, `updateStrategy` and
//! `spec[0].resourcesPolicy` without the full path, `spec.container.podInjectPolicy`).
//!
//! Everything Kruise looks up live (base SidecarSet, ControllerRevisions, the other SidecarSets,
//! the `kruise-configuration` ConfigMap) is read from the cluster snapshot.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{corev1, selector};
use crate::admission::Inputs;
use crate::api::field_errors::{self, FieldError};
use crate::api::names;
use crate::api::pattern::Pattern;
use crate::api::sidecarset::{
    BASE_ANNOTATION, GROUP, KIND, LabelSelector, SidecarContainer, SidecarSet, SidecarSetPatchPodMetadata,
};
use crate::cluster::Snapshot;

const NAME_PATTERN: &str = r"^[a-zA-Z0-9\-]+$";
const NAME_MAX_LEN: usize = 63;
/// The ConfigMap (in the Kruise namespace) and key that hold the patchPodMetadata whitelist.
pub const CONFIGURATION_NAME: &str = "kruise-configuration";
pub const WHITELIST_KEY: &str = "SidecarSet_PatchPodMetadata_WhiteList";
/// `metadata.annotations` may hold at most this many bytes (keys plus values).
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

static NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(NAME_PATTERN).unwrap_or_else(|e| unreachable!("{e}")));

/// Go's `%#v` of a `map[string]string` (keys sorted), as Kruise's canary messages show annotations.
fn go_map(map: &BTreeMap<String, String>) -> String {
    let entries: Vec<String> = map
        .iter()
        .map(|(k, v)| format!("{}:{}", field_errors::go_quote(k), field_errors::go_quote(v)))
        .collect();
    format!("map[string]string{{{}}}", entries.join(", "))
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// What the validator needs besides the object: the old object on UPDATE and the cluster.
pub struct Context<'a> {
    pub old: Option<&'a SidecarSet>,
    pub inputs: &'a Inputs<'a>,
    /// Check conflicts with the other SidecarSets (the webhook does; a cluster folder's load
    /// reports them from both sides instead: [`folder_conflicts`]).
    pub conflicts: bool,
}

/// All field errors for `set`, in Kruise's order. Conflicts with other SidecarSets are checked
/// only when everything else passed (as Kruise does).
pub fn errors(set: &SidecarSet, ctx: &Context) -> Vec<FieldError> {
    let mut errs = metadata(set);
    errs.extend(canary(set, ctx));
    errs.extend(spec(set, ctx));
    if let Some(old) = ctx.old {
        errs.extend(container_immutability(set, old));
    }
    if errs.is_empty() && ctx.conflicts {
        errs.extend(conflicts(set, sidecarsets(ctx.inputs.cluster)));
    }
    errs
}

/// `ValidateObjectMeta` for a cluster-scoped object with Kruise's name rule.
fn metadata(set: &SidecarSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let meta = &set.metadata;
    let generate_name = meta.extra.get("generateName").and_then(Value::as_str).unwrap_or_default();
    if meta.name.is_empty() && generate_name.is_empty() {
        errs.push(field_errors::required("metadata.name", "name or generateName is required"));
    }
    if !meta.name.is_empty() {
        errs.extend(
            name_errors(&meta.name)
                .into_iter()
                .map(|m| field_errors::invalid_str("metadata.name", &meta.name, m)),
        );
    }
    if !meta.namespace.is_empty() {
        errs.push(field_errors::forbidden("metadata.namespace", "not allowed on this type"));
    }
    errs.extend(selector::validate_labels(&meta.labels, "metadata.labels"));
    errs.extend(annotation_errors(&meta.annotations, "metadata.annotations"));
    errs
}

fn name_errors(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    if !NAME_RE.is_match(name) {
        out.push(field_errors::regex_error(
            "sidecarset name must consist of alphanumeric characters or '-'",
            NAME_PATTERN,
            &["example-com"],
        ));
    }
    if name.len() > NAME_MAX_LEN {
        out.push(field_errors::max_len_error(NAME_MAX_LEN));
    }
    out
}

/// `ValidateAnnotations`: keys are qualified names (checked lower-cased), total size limited.
fn annotation_errors(annotations: &BTreeMap<String, String>, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total = 0;
    for (k, v) in annotations {
        errs.extend(
            names::qualified_name_errors(&k.to_lowercase())
                .into_iter()
                .map(|m| field_errors::invalid_str(path, k, m)),
        );
        total += k.len() + v.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.push(field_errors::too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errs
}

/// The other SidecarSets in the snapshot, in name order, read into the internal form. One that
/// cannot be read is skipped: it cannot be injected either.
fn sidecarsets(cluster: &Snapshot) -> impl Iterator<Item = SidecarSet> + '_ {
    cluster.list(GROUP, KIND, None).filter_map(|v| SidecarSet::from_value(&v).ok())
}

/// The conflicts among the SidecarSets of a cluster folder, said when it loads (`--cluster-dir`):
/// each SidecarSet checked against the others as the webhook checks one being created, so a pair
/// that claims the same container, volume or annotation is reported from both sides instead of
/// only showing up when one of them is next written. One line per conflict, sorted.
///
/// The SidecarSets are those the snapshot's index decoded (pods need them decoded anyway), each
/// checked only against those that claim one of its names (a conflict needs one), so a folder of
/// 10,000 loads in under a second, not in 14 s.
pub fn folder_conflicts(cluster: &Snapshot) -> Vec<String> {
    let sets: Vec<&SidecarSet> = cluster.sidecarset_index().sets().collect();
    let mut claimants: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, set) in sets.iter().enumerate() {
        for name in claimed_names(set) {
            claimants.entry(name).or_default().push(i);
        }
    }
    let mut lines = Vec::new();
    for &set in &sets {
        // In name order, as the webhook lists them: a claim names the last overlapping claimant.
        let mut candidates: Vec<usize> =
            claimed_names(set).flat_map(|name| claimants[name].iter().copied()).collect();
        candidates.sort_unstable();
        candidates.dedup();
        let name = set.name();
        lines.extend(
            conflicts(set, candidates.iter().map(|&i| sets[i]))
                .into_iter()
                .map(|e| format!("SidecarSet {name}: {e}")),
        );
    }
    lines.sort();
    lines
}

/// Every name a SidecarSet claims in the pods it selects (containers, volumes, annotation keys it
/// patches without `Retain`): what [`conflicts`] compares, in one namespace, since a pair sharing
/// none cannot conflict.
fn claimed_names(set: &SidecarSet) -> impl Iterator<Item = &str> {
    let spec = &set.spec;
    let containers = spec.init_containers.iter().chain(&spec.containers).map(|c| c.name.as_str());
    let volumes = spec.volumes.iter().map(volume_name);
    let annotations = claiming_patches(set).flat_map(|p| p.annotations.keys().map(String::as_str));
    containers.chain(volumes).chain(annotations)
}

fn get_sidecarset(ctx: &Context, name: &str) -> Option<SidecarSet> {
    ctx.inputs.cluster.get(GROUP, KIND, "", name).and_then(|v| SidecarSet::from_value(&v).ok())
}

/// Canary rules (HEAD): base not itself, base annotation immutable, base exists and is no canary,
/// canary never rolls out.
fn canary(set: &SidecarSet, ctx: &Context) -> Vec<FieldError> {
    let Some(base) = set.canary_base() else { return Vec::new() };
    let shown = go_map(&set.metadata.annotations);
    let err = |detail: String| FieldError {
        path: "metadata".into(),
        kind: field_errors::Kind::Invalid(shown.clone()),
        detail,
    };
    let mut errs = Vec::new();
    if base == set.name() {
        errs.push(err("base sidecarSet cannot be itself".into()));
    }
    if let Some(old) = ctx.old
        && old.metadata.annotations.get(BASE_ANNOTATION).map(String::as_str) != Some(base)
    {
        errs.push(err(format!("annotations[{BASE_ANNOTATION}] is immutable")));
    }
    match get_sidecarset(ctx, base) {
        None => errs.push(err(format!(
            "fetch base sidecarSet[{base}] failed: sidecarsets.apps.kruise.io {} not found",
            field_errors::go_quote(base)
        ))),
        Some(b) if b.canary_base().is_some() => errs.push(err("base sidecarSet cannot be canary".into())),
        Some(_) => {}
    }
    let strategy = set.spec.update_strategy.as_ref().map_or("", |s| s.type_.as_str());
    if strategy != "NotUpdate" {
        errs.push(err("RollingUpdate is not supported for canary sidecarSet".into()));
    }
    errs
}

fn update_type(set: &SidecarSet) -> &str {
    set.spec.update_strategy.as_ref().map_or("", |s| s.type_.as_str())
}

fn spec(set: &SidecarSet, ctx: &Context) -> Vec<FieldError> {
    let spec = &set.spec;
    let mut errs = Vec::new();
    for c in &spec.init_containers {
        if c.is_native_sidecar() && update_type(set) == "RollingUpdate" {
            errs.push(field_errors::required(
                "spec.updateStrategy",
                "The initContainer in-place upgrade is not currently supported.",
            ));
        }
    }
    match &spec.selector {
        None => errs.push(field_errors::required("spec.selector", "no selector defined for SidecarSet")),
        Some(s) => errs.extend(validate_selector(s, "spec.selector")),
    }
    if let Some(ns) = &spec.namespace_selector {
        errs.extend(validate_selector(ns, "spec.namespaceSelector"));
    }
    errs.extend(injection_strategy(set, ctx));
    errs.extend(update_strategy(set));
    if spec.init_containers.is_empty() && spec.containers.is_empty() {
        errs.push(field_errors::required("spec", "no initContainer or container defined for SidecarSet"));
    } else {
        errs.extend(containers(set, ctx));
    }
    if let Err(e) = patch_whitelist(set, ctx) {
        errs.push(field_errors::required("spec.patchPodMetadata", e));
    }
    let mut keys = HashSet::new();
    for patch in &spec.patch_pod_metadata {
        if patch.annotations.is_empty() {
            errs.push(field_errors::required(
                "spec.patchPodMetadata",
                "no annotations defined for SidecarSet",
            ));
        } else {
            errs.extend(annotation_errors(&patch.annotations, "patchPodMetadata.annotations"));
        }
        if patch.patch_policy.is_empty() {
            errs.push(field_errors::required(
                "spec.patchPodMetadata",
                "no patchPolicy defined for patchPodMetadata",
            ));
        }
        for k in patch.annotations.keys() {
            if !keys.insert(k.as_str()) {
                errs.push(field_errors::required(
                    "spec.patchPodMetadata",
                    format!("patch annotation[{k}] already exist"),
                ));
            }
        }
    }
    errs
}

/// Kruise's `validateSelector`: apimachinery's rules, and not empty.
fn validate_selector(s: &LabelSelector, path: &str) -> Vec<FieldError> {
    let mut errs = selector::validate(s, path);
    if s.is_empty() {
        errs.push(field_errors::invalid(path, &to_json(s), "empty selector is not valid for sidecarset."));
    }
    errs
}

fn injection_strategy(set: &SidecarSet, ctx: &Context) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(revision) = set.spec.injection_strategy.as_ref().and_then(|s| s.revision.as_ref()) else {
        return errs;
    };
    if revision.revision_name.is_none() && revision.custom_version.is_none() {
        errs.push(field_errors::invalid(
            "revision",
            &to_json(revision),
            "revisionName and customVersion cannot be empty simultaneously",
        ));
    } else if let Err(e) =
        find_revision(set, revision.revision_name.as_deref(), revision.custom_version.as_deref(), ctx)
    {
        errs.push(field_errors::invalid_str(
            "revision",
            "null",
            format!("Cannot find specific ControllerRevision, err: {e}"),
        ));
    }
    if !matches!(revision.policy.as_str(), "" | "Always" | "Partial") {
        errs.push(field_errors::invalid(
            "revision.policy",
            &to_json(revision),
            format!("Invalid policy {}, supported: [Always, Partial]", revision.policy),
        ));
    }
    errs
}

/// The pinned ControllerRevision (in the Kruise namespace): by name, else the newest with the
/// custom-version label of this SidecarSet.
fn find_revision(
    set: &SidecarSet,
    name: Option<&str>,
    custom_version: Option<&str>,
    ctx: &Context,
) -> Result<(), String> {
    let ns = ctx.inputs.settings.kruise_namespace.as_str();
    if let Some(name) = name {
        return match ctx.inputs.cluster.revision(ns, name) {
            Some(_) => Ok(()),
            None => Err(format!("controllerrevisions.apps {} not found", field_errors::go_quote(name))),
        };
    }
    let Some(version) = custom_version else { return Ok(()) };
    let found = ctx.inputs.cluster.revisions(ns).any(|r| r.is_custom_version(set.name(), version));
    if found {
        Ok(())
    } else {
        Err(format!("ControllerRevision.apps {} not found", field_errors::go_quote(set.name())))
    }
}

fn update_strategy(set: &SidecarSet) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(s) = set.spec.update_strategy.as_ref().filter(|s| s.type_ == "RollingUpdate") else {
        return errs;
    };
    if s.partition_and_selector() {
        errs.push(field_errors::invalid_str(
            "updateStrategy",
            &to_json(s).to_string(),
            "Partition and Selector cannot be used together",
        ));
    }
    if let Some(sel) = &s.selector {
        errs.extend(validate_selector(sel, "spec.updateStrategy.selector"));
    }
    if let Some(p) = &s.partition {
        errs.extend(field_errors::positive_int_or_percent("spec.updateStrategy.partition", p));
    }
    if let Some(m) = &s.max_unavailable {
        errs.extend(field_errors::positive_int_or_percent("spec.updateStrategy.maxUnavailable", m));
    }
    if let Some(p) = &s.priority_strategy
        && let Err(e) = priority_strategy(p)
    {
        errs.push(field_errors::required("spec.updateStrategy.priorityStrategy", e));
    }
    let mut seen = HashSet::new();
    for term in &s.scatter_strategy {
        let err = if term.key.is_empty() {
            Some("key should not be empty".to_owned())
        } else if !seen.insert((term.key.as_str(), term.value.as_str())) {
            Some(format!("duplicated key={} value={}", term.key, term.value))
        } else {
            None
        };
        if let Some(e) = err {
            errs.push(field_errors::required("spec.updateStrategy.scatterStrategy", e));
            break;
        }
    }
    errs
}

/// `UpdatePriorityStrategy.FieldsValidation`.
fn priority_strategy(p: &Value) -> Result<(), String> {
    let list = |k: &str| p.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    let (weights, orders) = (list("weightPriority"), list("orderPriority"));
    if !weights.is_empty() && !orders.is_empty() {
        return Err("only one of weightPriority and orderPriority can be used".into());
    }
    for w in &weights {
        let weight = w.get("weight").and_then(Value::as_i64).unwrap_or(0);
        if !(0..=100).contains(&weight) {
            return Err("weight must be valid number in the range 1-100".into());
        }
        let sel: LabelSelector =
            w.get("matchSelector").cloned().and_then(|s| serde_json::from_value(s).ok()).unwrap_or_default();
        if sel.is_empty() {
            return Err("selector can not be empty".into());
        }
        if let Some(bad) = sel
            .match_expressions
            .iter()
            .find(|r| !matches!(r.operator.as_str(), "In" | "NotIn" | "Exists" | "DoesNotExist"))
        {
            return Err(format!(
                "invalid selector {:?} is not a valid label selector operator",
                bad.operator
            ));
        }
    }
    if orders.iter().any(|o| o.get("orderedKey").and_then(Value::as_str).unwrap_or_default().is_empty()) {
        return Err("order key can not be empty".into());
    }
    Ok(())
}

/// Which `targetContainersNameRegex` patterns compile. Each distinct pattern is compiled at most
/// once per request, and not at all when a SidecarSet in the cluster already uses it (the index of
/// a published snapshot holds it compiled), so a SidecarSet with many containers costs one compile
/// per pattern. An index not built yet is not built for this: a cluster folder's SidecarSets are
/// validated against a snapshot of the folder as loaded, whose index nothing else needs.
struct PatternCheck<'a> {
    cluster: &'a Snapshot,
    seen: HashMap<&'a str, Result<(), String>>,
}

impl<'a> PatternCheck<'a> {
    fn check(&mut self, pattern: &'a str) -> Result<(), String> {
        if self.cluster.built_sidecarset_index().and_then(|index| index.name_regex(pattern)).is_some() {
            return Ok(());
        }
        self.seen.entry(pattern).or_insert_with(|| Pattern::compile(pattern).map(drop)).clone()
    }
}

/// Per-container rules, then the fake-pod validation of containers, init containers and volumes.
fn containers<'a>(set: &'a SidecarSet, ctx: &'a Context) -> Vec<FieldError> {
    let spec = &set.spec;
    let mut errs = Vec::new();
    let mut patterns = PatternCheck { cluster: ctx.inputs.cluster, seen: HashMap::new() };
    for (i, c) in spec.init_containers.iter().enumerate() {
        if let Some(policy) = &c.resources_policy {
            if !c.is_native_sidecar() {
                errs.push(field_errors::invalid(
                    format!("spec[{i}].resourcesPolicy"),
                    &to_json(policy),
                    "resourcesPolicy is only supported for containers with RestartPolicy Always",
                ));
            }
            errs.extend(resources_policy(c, &format!("spec[{i}].resourcesPolicy"), &mut patterns));
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        if !matches!(
            c.pod_inject_policy.as_str(),
            SidecarContainer::BEFORE_APP_CONTAINER | SidecarContainer::AFTER_APP_CONTAINER
        ) {
            errs.push(field_errors::invalid_str(
                "spec.container.podInjectPolicy",
                &c.pod_inject_policy,
                "unsupported pod inject policy",
            ));
        }
        let share = c.share_volume_policy.as_ref().map_or("", |p| p.type_.as_str());
        if !matches!(share, "enabled" | "disabled") {
            errs.push(field_errors::invalid(
                "spec.container.shareVolumePolicy",
                &json!({"type": share}),
                "unsupported share volume policy",
            ));
        }
        for t in &c.transfer_env {
            if let Some(fr) = t.source_container_name_from.as_ref().and_then(|s| s.field_ref.as_ref()) {
                errs.extend(transfer_env_field_ref(
                    &fr.api_version,
                    &fr.field_path,
                    &format!("spec[{i}].transferEnv.fieldRef"),
                ));
            }
        }
        if c.resources_policy.is_some() {
            errs.extend(resources_policy(c, &format!("spec[{i}].resourcesPolicy"), &mut patterns));
        }
    }
    let (volume_names, volume_errs) = corev1::validate_volumes(&spec.volumes);
    let init: Vec<Value> = spec.init_containers.iter().map(|c| Value::Object(c.core_container())).collect();
    let mut regular: Vec<Value> = spec.containers.iter().map(|c| Value::Object(c.core_container())).collect();
    if regular.is_empty() {
        // Kruise's fake pod needs one app container; it adds this one.
        regular.push(json!({"name": "test", "image": "busybox", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"}));
    }
    errs.extend(corev1::validate_containers(&init, &regular, &volume_names));
    errs.extend(volume_errs);
    errs
}

/// A transferEnv `sourceContainerNameFrom.fieldRef`: apiVersion v1 and a subscripted label or
/// annotation path (a plain `metadata.name` passes Kruise's list but fails its conversion).
fn transfer_env_field_ref(api_version: &str, field_path: &str, path: &str) -> Vec<FieldError> {
    if api_version.is_empty() {
        return vec![field_errors::required(format!("{path}.apiVersion"), "")];
    }
    if field_path.is_empty() {
        return vec![field_errors::required(format!("{path}.fieldPath"), "")];
    }
    let converted = if api_version != "v1" {
        Err(format!("unsupported pod version: {api_version}"))
    } else {
        match corev1::split_subscripted(field_path) {
            Some(("metadata.annotations" | "metadata.labels", _)) => Ok(()),
            Some((base, _)) => Err(format!("field path not supported: {base}")),
            None => Err(format!("field label not supported: {field_path}")),
        }
    };
    if let Err(e) = converted {
        return vec![field_errors::invalid_str(
            format!("{path}.fieldPath"),
            field_path,
            format!("error converting fieldPath: {e}"),
        )];
    }
    match corev1::split_subscripted(field_path) {
        Some(("metadata.annotations", key)) => names::qualified_name_errors(&key.to_lowercase())
            .into_iter()
            .map(|m| field_errors::invalid_str(path, key, m))
            .collect(),
        Some((_, key)) => names::qualified_name_errors(key)
            .into_iter()
            .map(|m| field_errors::invalid_str(path, key, m))
            .collect(),
        None => Vec::new(),
    }
}

/// resourcesPolicy: not with `resources`, a valid regex, at least one expression, each parses.
fn resources_policy<'a>(
    c: &'a SidecarContainer,
    path: &str,
    patterns: &mut PatternCheck<'a>,
) -> Vec<FieldError> {
    let Some(policy) = &c.resources_policy else { return Vec::new() };
    if c.resources_policy_with_resources() {
        return vec![field_errors::invalid(
            path,
            &to_json(policy),
            "resourcesPolicy and resources cannot be configured together",
        )];
    }
    let mut errs = Vec::new();
    let regex = &policy.target_containers_name_regex;
    if regex.is_empty() {
        errs.push(field_errors::required(format!("{path}.targetContainersNameRegex"), "invalid empty regex"));
    } else if let Err(e) = patterns.check(regex) {
        errs.push(field_errors::invalid_str(
            format!("{path}.targetContainersNameRegex"),
            regex,
            format!("invalid regex pattern: {e}"),
        ));
    }
    let expr = &policy.resources_expr;
    let ep = format!("{path}.resourcesExpr");
    if expr.limits.is_none() && expr.requests.is_none() {
        errs.push(field_errors::invalid(
            &ep,
            &to_json(expr),
            "at least one of limits or requests must be configured",
        ));
        return errs;
    }
    for (kind, values) in [("limits", &expr.limits), ("requests", &expr.requests)] {
        let Some(values) = values else { continue };
        for (resource, text) in [("cpu", &values.cpu), ("memory", &values.memory)] {
            if !text.is_empty()
                && let Err(e) = crate::api::resource_expression::check(text, resource)
            {
                errs.push(field_errors::invalid_str(
                    format!("{ep}.{kind}.{resource}"),
                    text,
                    format!("invalid expression: {e}"),
                ));
            }
        }
    }
    errs
}

/// The whitelist rules of `kruise-configuration`.
#[derive(Deserialize)]
struct Whitelist {
    #[serde(default)]
    rules: Vec<WhitelistRule>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WhitelistRule {
    #[serde(default)]
    selector: Option<LabelSelector>,
    #[serde(default)]
    allowed_annotation_key_exprs: Vec<String>,
}

/// `ValidateSidecarSetPatchMetadataWhitelist`.
fn patch_whitelist(set: &SidecarSet, ctx: &Context) -> Result<(), String> {
    if set.spec.patch_pod_metadata.is_empty() {
        return Ok(());
    }
    let defaults_allowed = ctx.inputs.settings.sidecarset_patch_pod_metadata_defaults_allowed();
    let config =
        ctx.inputs.cluster.get("", "ConfigMap", &ctx.inputs.settings.kruise_namespace, CONFIGURATION_NAME);
    let raw =
        config.as_ref().and_then(|c| c.pointer(&format!("/data/{WHITELIST_KEY}"))).and_then(Value::as_str);
    let Some(raw) = raw else {
        return if defaults_allowed {
            Ok(())
        } else {
            Err("SidecarSet patch metadata whitelist not found".into())
        };
    };
    let whitelist: Whitelist = serde_json::from_str(raw).map_err(|e| e.to_string())?;
    let mut allowed = Vec::new();
    for rule in &whitelist.rules {
        if let Some(sel) = &rule.selector {
            match selector::matches(sel, &set.metadata.labels) {
                None => return Err("the whitelist rule selector is not valid".into()),
                Some(false) => continue,
                Some(true) => {}
            }
        }
        for expr in &rule.allowed_annotation_key_exprs {
            allowed.push(Pattern::compile(expr)?);
        }
    }
    if allowed.is_empty() {
        return if defaults_allowed {
            Ok(())
        } else {
            Err("sidecarSet patch metadata annotation is not allowed".into())
        };
    }
    for patch in &set.spec.patch_pod_metadata {
        if let Some(key) = patch.annotations.keys().find(|k| !allowed.iter().any(|r| r.is_match(k))) {
            return Err(format!("sidecarSet patch metadata annotation({key}) is not allowed"));
        }
    }
    Ok(())
}

/// UPDATE: no container may be added or renamed, and a set upgradeType may not change.
fn container_immutability(set: &SidecarSet, old: &SidecarSet) -> Vec<FieldError> {
    let old_types: HashMap<&str, &str> = old
        .spec
        .containers
        .iter()
        .map(|c| (c.name.as_str(), c.upgrade_strategy.as_ref().map_or("", |u| u.upgrade_type.as_str())))
        .collect();
    let mut errs = Vec::new();
    for c in &set.spec.containers {
        let new_type = c.upgrade_strategy.as_ref().map_or("", |u| u.upgrade_type.as_str());
        match old_types.get(c.name.as_str()) {
            Some(old_type) if !old_type.is_empty() && *old_type != new_type => {
                errs.push(field_errors::invalid_str(
                    "spec.containers.upgradeStrategy.upgradeType",
                    &c.name,
                    format!("container {} upgradeType is immutable", c.name),
                ))
            }
            Some(_) => {}
            None => errs.push(field_errors::invalid_str(
                "spec.containers.name",
                &c.name,
                format!("container {} is not found", c.name),
            )),
        }
    }
    errs
}

/// Conflicts with the SidecarSets whose namespace and pod selectors overlap this one's.
fn conflicts<S: Borrow<SidecarSet>>(
    set: &SidecarSet,
    others: impl IntoIterator<Item = S>,
) -> Vec<FieldError> {
    let claims = Claims::of_overlapping(set, others);
    let mut errs = Vec::new();
    let named = set
        .spec
        .init_containers
        .iter()
        .map(|c| (c, &claims.init_containers))
        .chain(set.spec.containers.iter().map(|c| (c, &claims.containers)));
    for (c, owners) in named {
        if let Some(other) = owners.get(&c.name) {
            errs.push(field_errors::invalid_str(
                "spec.containers",
                &c.name,
                format!("container {} already exist in {other}", c.name),
            ));
        }
    }
    for v in &set.spec.volumes {
        let vname = volume_name(v);
        if let Some((other, theirs)) = claims.volumes.get(vname)
            && theirs != v
        {
            errs.push(field_errors::invalid_str(
                "spec.volumes",
                vname,
                format!("volume {vname} is in conflict with sidecarset {other}"),
            ));
        }
    }
    for patch in claiming_patches(set) {
        for key in patch.annotations.keys() {
            if let Some((other, policy)) = claims.annotations.get(key)
                && (patch.patch_policy == "Overwrite" || policy == "Overwrite")
            {
                errs.push(field_errors::invalid_str(
                    "spec.patchPodMetadata",
                    key,
                    format!("annotation {key} is in conflict with sidecarset {other}"),
                ));
            }
        }
    }
    errs
}

/// A volume's name; empty when it has none.
fn volume_name(volume: &Value) -> &str {
    volume.get("name").and_then(Value::as_str).unwrap_or_default()
}

/// The patchPodMetadata entries whose annotations can conflict: all but `Retain` ones.
fn claiming_patches(set: &SidecarSet) -> impl Iterator<Item = &SidecarSetPatchPodMetadata> {
    set.spec.patch_pod_metadata.iter().filter(|p| p.patch_policy != "Retain")
}

/// What the other SidecarSets that can select the same pods put into them, each with the name of
/// the SidecarSet that does (the last one listed, when several do).
#[derive(Default)]
struct Claims {
    init_containers: HashMap<String, String>,
    containers: HashMap<String, String>,
    /// Volume name -> (SidecarSet, the volume).
    volumes: HashMap<String, (String, Value)>,
    /// Annotation key -> (SidecarSet, patch policy), from patches that are not `Retain`.
    annotations: HashMap<String, (String, String)>,
}

impl Claims {
    /// The claims of every SidecarSet of `others` but `set` (and its canary base) whose namespace
    /// and pod selectors overlap `set`'s.
    fn of_overlapping<S: Borrow<SidecarSet>>(
        set: &SidecarSet,
        others: impl IntoIterator<Item = S>,
    ) -> Claims {
        let empty = LabelSelector::default();
        let base = set.canary_base();
        let mut claims = Claims::default();
        for other in others {
            let other = other.borrow();
            if base == Some(other.name()) || other.name() == set.name() {
                continue;
            }
            let ns_overlap = match (&set.spec.namespace_selector, &other.spec.namespace_selector) {
                (Some(a), Some(b)) => selector::overlapping(a, b),
                _ => true,
            };
            let pods_overlap = selector::overlapping(
                set.spec.selector.as_ref().unwrap_or(&empty),
                other.spec.selector.as_ref().unwrap_or(&empty),
            );
            if ns_overlap && pods_overlap {
                claims.add(other);
            }
        }
        claims
    }

    fn add(&mut self, other: &SidecarSet) {
        let name = other.name().to_owned();
        for c in &other.spec.init_containers {
            self.init_containers.insert(c.name.clone(), name.clone());
        }
        for c in &other.spec.containers {
            self.containers.insert(c.name.clone(), name.clone());
        }
        for v in &other.spec.volumes {
            let vname = volume_name(v).to_owned();
            self.volumes.insert(vname, (name.clone(), v.clone()));
        }
        for patch in claiming_patches(other) {
            for key in patch.annotations.keys() {
                self.annotations.insert(key.clone(), (name.clone(), patch.patch_policy.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// A SidecarSet from small pools of names, so that generated folders share names often.
    fn sidecarset(
        i: usize,
        app: &str,
        containers: &[&str],
        volume: (&str, &str),
        annotation: (&str, &str),
    ) -> Value {
        let containers: Vec<Value> =
            containers.iter().map(|c| json!({"name": c, "image": format!("{c}:1")})).collect();
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
               "metadata": {"name": format!("set-{i:02}")},
               "spec": {"selector": {"matchLabels": {"app": app}}, "containers": containers,
                        "volumes": [{"name": volume.0, "hostPath": {"path": volume.1}}],
                        "patchPodMetadata": [{"annotations": {annotation.0: "v"}, "patchPolicy": annotation.1}]}})
    }

    /// Every SidecarSet checked against all the others: what [`folder_conflicts`] must find.
    fn every_pair(cluster: &Snapshot) -> Vec<String> {
        let sets: Vec<SidecarSet> = sidecarsets(cluster).collect();
        let mut lines: Vec<String> = sets
            .iter()
            .flat_map(|s| {
                conflicts(s, &sets).into_iter().map(move |e| format!("SidecarSet {}: {e}", s.name()))
            })
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_claim_names_the_last_overlapping_claimant_in_name_order() {
        let agent = |i, app| sidecarset(i, app, &["agent"], ("logs", "/a"), ("k", "Retain"));
        let cluster =
            Snapshot::from_objects([agent(0, "web"), agent(1, "db"), agent(2, "web"), agent(3, "web")]);
        let lines = folder_conflicts(&cluster);
        assert_eq!(lines, every_pair(&cluster));
        let first = "SidecarSet set-00: spec.containers: Invalid value: \"agent\": container agent already exist in set-03";
        assert_eq!(lines.first().map(String::as_str), Some(first), "{lines:#?}");
        assert!(!lines.iter().any(|l| l.contains("set-01")), "set-01 selects other pods: {lines:#?}");
    }

    proptest! {
        #[test]
        fn folder_conflicts_finds_what_checking_every_pair_finds(
            folder in vec((
                prop::sample::select(vec!["web", "db"]),
                prop::sample::subsequence(vec!["agent", "proxy", "logs"], 0..=2),
                (prop::sample::select(vec!["logs", "data"]), prop::sample::select(vec!["/a", "/b"])),
                (prop::sample::select(vec!["k", "logs"]),
                 prop::sample::select(vec!["Retain", "Overwrite", "MergePatchJson"])),
            ), 1..10)
        ) {
            let objects = folder
                .iter()
                .enumerate()
                .map(|(i, (app, containers, volume, annotation))| sidecarset(i, app, containers, *volume, *annotation));
            let cluster = Snapshot::from_objects(objects);
            prop_assert_eq!(folder_conflicts(&cluster), every_pair(&cluster));
        }
    }
}
