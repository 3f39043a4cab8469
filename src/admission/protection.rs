//! Delete protection: the `policy.kruise.io/delete-protection` label on Namespaces, CRDs, workloads,
//! Services and Ingresses (docs/workloads.md#4-delete-protection).
//!
//! One entry point, [`check_delete`], handles every protected kind by the request's kind, so the
//! protection-only webhooks and the CloneSet / Advanced StatefulSet validators can all call it.
//! Cascading checks on Namespaces and CRDs need lookups (pods, PVCs, custom resources) that are not
//! cached: [`queries`] names them, the edge answers them, and the decision reads `inputs.answers`.
//! Both go through the same [`plan`], so they cannot disagree about which lookups a request needs.

use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::route::{Capability, FailurePolicy, Handler, ObjectScope, Rule, SideEffects, Webhook};
use super::{Inputs, Settings};
use crate::admission::writes::Effects;
use crate::api::tree::Json;
use crate::cluster::{Answers, Counted, ListFilter, Query};

/// The label users put on an object to protect it.
pub const LABEL: &str = "policy.kruise.io/delete-protection";
/// Deny every deletion. Values are exact and case-sensitive (`always` protects nothing).
pub const ALWAYS: &str = "Always";
/// Deny the deletion while the object still has something in it (pods, PVCs, custom resources,
/// replicas); Services and Ingresses have nothing to cascade and ignore it.
pub const CASCADING: &str = "Cascading";

/// Kruise's wording, kept so users and e2e checks that grep for it see the same text.
const FORBIDDEN: &str = "forbidden by ResourcesProtectionDeletion for";
/// Appended to lookup failures: the deletion is refused, and this says how to proceed.
const LOOKUP_HINT: &str = "(the deletion is refused because the protection could not be checked: retry once the cluster \
     answers, or remove the label policy.kruise.io/delete-protection to delete without the check)";

/// A protection-only registration: DELETE of the objects `rules` name, answered by [`check_delete`].
/// Protection refuses deletions, so a webhook that is down must not let them through (`Fail`).
pub const fn webhook(
    name: &'static str,
    path: &'static str,
    rules: &'static [Rule],
    scope: ObjectScope,
) -> Webhook {
    Webhook {
        name,
        path,
        rules,
        handler: Handler::Validate(check_delete),
        queries: Some(queries),
        failure_policy: FailurePolicy::Fail,
        scope,
        side_effects: SideEffects::None,
        capability: Capability::DeleteProtection,
    }
}

/// The lookups [`check_delete`] will read for `request` (none unless a Cascading Namespace or CRD
/// is being deleted).
pub fn queries(request: &AdmissionRequest, inputs: &Inputs) -> Vec<Query> {
    match plan(request, inputs.settings) {
        Ok(Plan::NamespaceDependents(namespace)) => vec![pods_in(&namespace), pvcs_in(&namespace)],
        Ok(Plan::CustomResources(crd)) => vec![crd.query()],
        Ok(Plan::Allow) | Err(_) => Vec::new(),
    }
}

/// Allow or refuse the deletion `request` asks for. Every other operation is allowed: this only
/// guards DELETE. Denials are [`AdmissionError::Forbidden`] (403) with Kruise's messages.
pub fn check_delete(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    match plan(request, inputs.settings)? {
        Plan::Allow => {}
        Plan::NamespaceDependents(namespace) => check_namespace(&namespace, inputs.answers)?,
        Plan::CustomResources(crd) => check_custom_resources(&crd, inputs.answers)?,
    }
    Ok(Effects::default())
}

/// What is left to decide once the object itself has been read.
#[derive(Debug)]
enum Plan {
    Allow,
    /// A Cascading Namespace: count its active pods, then its Bound PVCs.
    NamespaceDependents(String),
    /// A Cascading CRD: count its live custom resources.
    CustomResources(CustomResourceType),
}

/// The kinds that carry protection, and what Cascading means for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protected {
    Namespace,
    CustomResourceDefinition,
    /// Deployment, ReplicaSet, StatefulSet, CloneSet, Advanced StatefulSet, UnitedDeployment.
    Workload,
    /// Service and Ingress: Cascading is not implemented for them (Kruise neither).
    AlwaysOnly,
}

fn protected_kind(group: &str, version: &str, kind: &str) -> Option<Protected> {
    match (group, kind) {
        ("", "Namespace") => Some(Protected::Namespace),
        // Only these two versions have a known shape; Kruise lets any other version through.
        ("apiextensions.k8s.io", "CustomResourceDefinition") if matches!(version, "v1" | "v1beta1") => {
            Some(Protected::CustomResourceDefinition)
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet")
        | ("apps.kruise.io", "CloneSet" | "StatefulSet" | "UnitedDeployment") => Some(Protected::Workload),
        ("", "Service") => Some(Protected::AlwaysOnly),
        ("networking.k8s.io", "Ingress") if matches!(version, "v1" | "v1beta1") => {
            Some(Protected::AlwaysOnly)
        }
        _ => None,
    }
}

/// Everything that can be decided from the request and the object being deleted
/// (docs/workloads.md#4-2-early-exits, docs/workloads.md#4-3-kinds).
fn plan(request: &AdmissionRequest, settings: &Settings) -> Result<Plan, AdmissionError> {
    if !settings.enabled(Capability::DeleteProtection)
        || request.operation != Operation::Delete
        || !request.sub_resource.is_empty()
    {
        return Ok(Plan::Allow);
    }
    // Clusters older than 1.16 send no oldObject on DELETE; there is nothing to read, so allow.
    let Some(object) = request.old_object.as_ref() else { return Ok(Plan::Allow) };
    let Some(kind) = request_kind(request, object) else { return Ok(Plan::Allow) };
    // Already being deleted (finalizers pending): refusing again would only block the cleanup.
    if terminating(object) {
        return Ok(Plan::Allow);
    }
    match (label_value(object)?, kind) {
        (Some(ALWAYS), _) => Err(forbidden(ALWAYS, "")),
        (Some(CASCADING), Protected::Namespace) => {
            let name = object.pointer("/metadata/name").and_then(Json::as_str).filter(|n| !n.is_empty());
            Ok(Plan::NamespaceDependents(name.unwrap_or(&request.name).to_owned()))
        }
        (Some(CASCADING), Protected::CustomResourceDefinition) => {
            Ok(Plan::CustomResources(CustomResourceType::of_crd(object)?))
        }
        (Some(CASCADING), Protected::Workload) => match replicas(object)? {
            Some(n) if n > 0 => Err(forbidden(CASCADING, &format!(" and replicas {n}>0"))),
            _ => Ok(Plan::Allow),
        },
        // Cascading on Service/Ingress, any other value (`always`, ""), or no label: unprotected.
        _ => Ok(Plan::Allow),
    }
}

/// The protected kind of the request (`request.kind`, or the object's own apiVersion/kind when a
/// hand-written review leaves `kind` out); `None` for kinds that carry no protection.
fn request_kind(request: &AdmissionRequest, object: &Json) -> Option<Protected> {
    if !request.kind.kind.is_empty() {
        return protected_kind(&request.kind.group, &request.kind.version, &request.kind.kind);
    }
    let api_version = object.get("apiVersion")?.as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    protected_kind(group, version, object.get("kind")?.as_str()?)
}

fn forbidden(value: &str, detail: &str) -> AdmissionError {
    AdmissionError::Forbidden(format!("{FORBIDDEN} {LABEL}={value}{detail}"))
}

fn label_value<'j>(object: &'j Json) -> Result<Option<&'j str>, AdmissionError> {
    let labels = match object.get("metadata") {
        None | Some(Json::Null) => return Ok(None),
        Some(Json::Object(metadata)) => metadata.get("labels"),
        Some(_) => {
            return Err(AdmissionError::BadRequest("request.oldObject.metadata must be an object".into()));
        }
    };
    let labels = match labels {
        None | Some(Json::Null) => return Ok(None),
        Some(Json::Object(labels)) => labels,
        Some(_) => {
            return Err(AdmissionError::BadRequest(
                "request.oldObject.metadata.labels must be an object".into(),
            ));
        }
    };
    match labels.get(LABEL) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(v)) => Ok(Some(v.as_ref())),
        Some(_) => Err(AdmissionError::BadRequest(format!(
            "request.oldObject.metadata.labels[{LABEL:?}] must be a string"
        ))),
    }
}

/// `spec.replicas` of a workload. Absent or null means "not set", which Kruise treats as nothing to
/// protect (the API server defaults it, so a real object being deleted has it).
fn replicas(object: &Json) -> Result<Option<i64>, AdmissionError> {
    match object.pointer("/spec/replicas") {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| {
            AdmissionError::BadRequest(format!("request.oldObject.spec.replicas must be an integer, got {v}"))
        }),
    }
}

/// The namespace's pods, as far as needed to know whether one is active: the API server leaves out
/// finished pods (a terminating one still has to be skipped here).
fn pods_in(namespace: &str) -> Query {
    let filter = ListFilter {
        fields: "status.phase!=Succeeded,status.phase!=Failed".into(),
        until_one: Some(Counted::ActivePod),
        ..ListFilter::default()
    };
    Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some(namespace.into()),
        filter,
    }
}

/// The namespace's PVCs, as far as needed to know whether one is Bound (PVCs have no phase field
/// selector).
fn pvcs_in(namespace: &str) -> Query {
    let filter = ListFilter { until_one: Some(Counted::BoundClaim), ..ListFilter::default() };
    Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "PersistentVolumeClaim".into(),
        namespace: Some(namespace.into()),
        filter,
    }
}

fn terminating(object: &Json) -> bool {
    object.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// Cascading Namespace: refuse while it has active pods (not Succeeded/Failed and not being
/// deleted), then while it has Bound PVCs that are not being deleted. PVCs are only looked at once
/// no pod is active, as in Kruise, so the pod message wins when both apply.
fn check_namespace(namespace: &str, answers: &Answers) -> Result<(), AdmissionError> {
    let pods = answers
        .get(&pods_in(namespace))
        .map_err(|e| AdmissionError::Forbidden(format!("{FORBIDDEN} list pods error: {e} {LOOKUP_HINT}")))?;
    let active = pods.iter().filter(|p| Counted::ActivePod.counts(p)).count();
    if active > 0 {
        return Err(forbidden(CASCADING, &format!(" and active pods {active}>0")));
    }
    let pvcs = answers
        .get(&pvcs_in(namespace))
        .map_err(|e| AdmissionError::Forbidden(format!("{FORBIDDEN} list pvc error: {e} {LOOKUP_HINT}")))?;
    let bound = pvcs.iter().filter(|c| Counted::BoundClaim.counts(c)).count();
    if bound > 0 {
        return Err(forbidden(CASCADING, &format!(" and \"Bound\" status pvc {bound}>0")));
    }
    Ok(())
}

/// The custom resources a CRD serves, in its storage version (every stored object can be listed
/// in it).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CustomResourceType {
    group: String,
    version: String,
    kind: String,
    /// Only for messages: Kruise names the list type (`apps.example.com/v1, Kind=FooList`).
    list_kind: String,
}

impl CustomResourceType {
    /// Group, storage version and kind from the CRD object itself. The storage version is the first
    /// entry of `spec.versions` with `storage: true`; a v1beta1 CRD may instead carry only the
    /// deprecated `spec.version`, which is then its one (storage) version.
    fn of_crd(crd: &Json) -> Result<Self, AdmissionError> {
        let spec = crd.get("spec");
        let text = |pointer: &str| {
            spec.and_then(|s| s.pointer(pointer)).and_then(Json::as_str).unwrap_or_default().to_owned()
        };
        let (group, kind, list_kind) = (text("/group"), text("/names/kind"), text("/names/listKind"));
        let storage = spec
            .and_then(|s| s.get("versions"))
            .and_then(Json::as_array)
            .and_then(|versions| {
                versions.iter().find(|v| v.get("storage").and_then(Json::as_bool) == Some(true))
            })
            .and_then(|v| v.get("name"))
            .and_then(Json::as_str)
            .map(str::to_owned)
            .or_else(|| spec.and_then(|s| s.get("version")).and_then(Json::as_str).map(str::to_owned))
            .unwrap_or_default();
        let list_kind =
            if list_kind.is_empty() && !kind.is_empty() { format!("{kind}List") } else { list_kind };
        let crd_type = CustomResourceType { group, version: storage, kind, list_kind };
        // Without these the custom resources cannot be listed, so the protection cannot be checked.
        let missing = [
            ("spec.group", &crd_type.group),
            ("storage version", &crd_type.version),
            ("spec.names.kind", &crd_type.kind),
        ]
        .into_iter()
        .filter(|(_, v)| v.is_empty())
        .map(|(what, _)| what)
        .collect::<Vec<_>>();
        if missing.is_empty() {
            Ok(crd_type)
        } else {
            Err(AdmissionError::Forbidden(format!(
                "failed to list CRs of {}: the CRD has no {} {LOOKUP_HINT}",
                crd_type.gvk(),
                missing.join(", no ")
            )))
        }
    }

    fn query(&self) -> Query {
        let filter = ListFilter { until_one: Some(Counted::Live), ..ListFilter::default() };
        Query::List {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
            namespace: None,
            filter,
        }
    }

    /// Go's `schema.GroupVersionKind` rendering, as in Kruise's message.
    fn gvk(&self) -> String {
        format!("{}/{}, Kind={}", self.group, self.version, self.list_kind)
    }
}

/// Cascading CRD: refuse while any of its custom resources (any namespace) is not being deleted.
fn check_custom_resources(crd: &CustomResourceType, answers: &Answers) -> Result<(), AdmissionError> {
    let objects = answers.get(&crd.query()).map_err(|e| {
        AdmissionError::Forbidden(format!("failed to list CRs of {}: {e} {LOOKUP_HINT}", crd.gvk()))
    })?;
    let active = objects.iter().filter(|o| Counted::Live.counts(o)).count();
    if active > 0 {
        return Err(forbidden(CASCADING, &format!(" and active CRs {active}>0")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn storage_version_is_the_first_with_storage_true() {
        let crd = json!({"spec": {"group": "g.io", "names": {"kind": "Foo", "listKind": "FooList"},
            "versions": [{"name": "v1", "storage": false}, {"name": "v2", "storage": true}, {"name": "v3", "storage": true}]}});
        let t = CustomResourceType::of_crd(&Json::from(crd)).unwrap();
        assert_eq!((t.group.as_str(), t.version.as_str(), t.kind.as_str()), ("g.io", "v2", "Foo"));
        assert_eq!(t.gvk(), "g.io/v2, Kind=FooList");
    }

    #[test]
    fn v1beta1_crd_without_versions_uses_spec_version_and_default_list_kind() {
        let crd = json!({"spec": {"group": "g.io", "version": "v1alpha1", "names": {"kind": "Foo"}}});
        let t = CustomResourceType::of_crd(&Json::from(crd)).unwrap();
        assert_eq!(t.version, "v1alpha1");
        assert_eq!(t.gvk(), "g.io/v1alpha1, Kind=FooList");
    }

    #[test]
    fn crd_without_storage_version_cannot_be_checked_and_is_refused() {
        let crd = json!({"spec": {"group": "g.io", "names": {"kind": "Foo"}, "versions": [{"name": "v1", "storage": false}]}});
        let err = CustomResourceType::of_crd(&Json::from(crd)).unwrap_err();
        assert_eq!(err.code(), 403);
        assert!(
            err.to_string()
                .starts_with("failed to list CRs of g.io/, Kind=FooList: the CRD has no storage version ("),
            "{err}"
        );
    }

    #[test]
    fn only_known_kinds_and_versions_are_protected() {
        assert_eq!(protected_kind("apps", "v1", "Deployment"), Some(Protected::Workload));
        assert_eq!(protected_kind("apps.kruise.io", "v1beta1", "StatefulSet"), Some(Protected::Workload));
        assert_eq!(protected_kind("networking.k8s.io", "v1beta2", "Ingress"), None);
        assert_eq!(protected_kind("apiextensions.k8s.io", "v2", "CustomResourceDefinition"), None);
        assert_eq!(protected_kind("apps", "v1", "DaemonSet"), None);
        assert_eq!(protected_kind("apps.kruise.io", "v1alpha1", "DaemonSet"), None);
        assert_eq!(protected_kind("", "v1", "Pod"), None);
    }
}
