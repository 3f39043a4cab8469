//! Kruise's controller finder (`pkg/util/controllerfinder`) over a snapshot: given a Pod's controller
//! reference, the workload that owns its replicas, with the scale and selector Kruise reads. PUB
//! (`kruise.io/related-pub`) and, later, WorkloadSpread and `/validate-pod` decisions read it.
//!
//! Kruise tries its finders in one order and takes the first answer: ReplicationController,
//! Deployment, ReplicaSet (its Deployment when a Deployment controls it), StatefulSet, CloneSet,
//! Advanced StatefulSet, "StatefulSet-like" kinds of the `kruise-configuration` whitelist, the scale
//! subresource of any other kind, and last the bare object. A finder that finds nothing (wrong kind,
//! no such object, another uid) passes to the next one, so an existing object always ends with an
//! answer (the bare object's, replicas unknown) even when its typed finder gave up.
//!
//! The scale subresource is not read: its replicas and selector live at paths only the kind's CRD
//! names. Such a workload is answered as the bare object is, which is the same workload (same
//! apiVersion, kind, name and uid) with [`REPLICAS_UNKNOWN`] and no selector.

use std::sync::Arc;

use serde_json::Value;

use super::Snapshot;
use super::live::KRUISE_CONFIGMAP;
use crate::api::keys::{APPS_GROUP, KRUISE_APPS_GROUP};

/// `controllerfinder.ReplicasUnknown`: the workload's replicas cannot be read.
pub const REPLICAS_UNKNOWN: i64 = -1;

/// The `kruise-configuration` key of the StatefulSet-like whitelist
/// (`configuration.PPSWatchCustomWorkloadWhiteList`).
pub const STATEFULSET_LIKE_WHITELIST_KEY: &str = "PPS_Watch_Custom_Workload_WhiteList";

/// A Pod's controller reference as the finder takes it. `uid` empty: any object of that name
/// (what the PUB annotation asks); otherwise an object with another uid is not this workload.
#[derive(Debug, Clone, Copy)]
pub struct ControllerRef<'r> {
    pub api_version: &'r str,
    pub kind: &'r str,
    pub name: &'r str,
    pub uid: &'r str,
}

/// Kruise's `ScaleAndSelector`: the workload found and what it says about its pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// As Kruise reports it: the version its typed client reads (`apps/v1`, `apps.kruise.io/v1beta1`)
    /// for the built-in finders, the reference's own for the others.
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// `spec.replicas`, or [`REPLICAS_UNKNOWN`].
    pub replicas: i64,
    /// `spec.selector` as stored (`None` for ReplicationControllers and the untyped finders).
    pub selector: Option<Value>,
    /// The object itself, for decisions that read its metadata.
    pub object: Arc<Value>,
}

/// Why the finder could not answer (Kruise returns the error, and the callers that tolerate it act as
/// if there were no workload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinderError {
    #[error("invalid apiVersion {0:?} in the controller reference")]
    ApiVersion(String),
    #[error("{KRUISE_CONFIGMAP} {STATEFULSET_LIKE_WHITELIST_KEY}: {0}")]
    Whitelist(String),
}

/// `schema.ParseGroupVersion`'s group: `""` for `v1` (and for `""` and `/`), `None` for a value with
/// more than one slash, which Go refuses.
pub fn group_of(api_version: &str) -> Option<&str> {
    if api_version.is_empty() || api_version == "/" {
        return Some("");
    }
    match api_version.split_once('/') {
        None => Some(""),
        Some((_, version)) if version.contains('/') => None,
        Some((group, _)) => Some(group),
    }
}

/// The built-in finders: (group, kind, the apiVersion Kruise reports, reads spec.selector).
const TYPED: [(&str, &str, &str, bool); 6] = [
    ("", "ReplicationController", "v1", false),
    (APPS_GROUP, "Deployment", "apps/v1", true),
    (APPS_GROUP, "ReplicaSet", "apps/v1", true),
    (APPS_GROUP, "StatefulSet", "apps/v1", true),
    (KRUISE_APPS_GROUP, "CloneSet", "apps.kruise.io/v1alpha1", true),
    (KRUISE_APPS_GROUP, "StatefulSet", "apps.kruise.io/v1beta1", true),
];

/// `GetScaleAndSelectorForRef`: the workload `reference` names in `namespace`, in Kruise's finder
/// order. `kruise_namespace` is where `kruise-configuration` lives.
pub fn find(
    cluster: &Snapshot,
    kruise_namespace: &str,
    reference: ControllerRef<'_>,
    namespace: &str,
) -> Result<Option<Workload>, FinderError> {
    for typed in TYPED {
        if let Some(found) = find_typed(cluster, typed, reference, namespace) {
            return Ok(Some(found));
        }
    }
    // getPodStatefulSetLike: an apiVersion Go cannot parse passes to the next finder.
    if let Some(group) = group_of(reference.api_version)
        && CustomWorkloads::read(cluster, kruise_namespace)?.accepts(group, reference.kind)
        && let Some(object) = get(cluster, group, reference, namespace)
    {
        let replicas = object.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
        return Ok(Some(untyped(reference, object, replicas)));
    }
    // getScaleController (see the module comment) parses the apiVersion first, and fails on it.
    let Some(group) = group_of(reference.api_version) else {
        return Err(FinderError::ApiVersion(reference.api_version.to_owned()));
    };
    // getRefUID: the object itself, whatever its uid.
    let by_name = ControllerRef { uid: "", ..reference };
    Ok(get(cluster, group, by_name, namespace).map(|object| untyped(reference, object, REPLICAS_UNKNOWN)))
}

/// One of the built-in finders: `reference` must name its group (any version) and kind.
fn find_typed(
    cluster: &Snapshot,
    (group, kind, api_version, has_selector): (&str, &str, &str, bool),
    reference: ControllerRef<'_>,
    namespace: &str,
) -> Option<Workload> {
    if group_of(reference.api_version) != Some(group) || reference.kind != kind {
        return None;
    }
    let object = get(cluster, group, reference, namespace)?;
    // getPodReplicaSet: a ReplicaSet a Deployment controls is that Deployment's, or nobody's (the
    // later finders then answer with the ReplicaSet itself).
    if kind == "ReplicaSet"
        && let Some(owner) = controller_of(&object)
        && owner.get("kind").and_then(Value::as_str) == Some("Deployment")
    {
        let str_of = |key| owner.get(key).and_then(Value::as_str).unwrap_or_default();
        let deployment = ControllerRef {
            api_version: str_of("apiVersion"),
            kind: "Deployment",
            name: str_of("name"),
            uid: str_of("uid"),
        };
        return find_typed(cluster, TYPED[1], deployment, namespace);
    }
    Some(Workload {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: reference.name.to_owned(),
        uid: uid_of(&object).to_owned(),
        // The API server defaults replicas to 1 for these kinds (Kruise would dereference nil).
        replicas: object.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1),
        selector: has_selector.then(|| object.pointer("/spec/selector").cloned()).flatten(),
        object,
    })
}

/// The object `reference` names (by group, kind and name), if its uid agrees.
fn get(cluster: &Snapshot, group: &str, reference: ControllerRef<'_>, namespace: &str) -> Option<Arc<Value>> {
    let object = cluster.get(group, reference.kind, namespace, reference.name)?;
    (reference.uid.is_empty() || uid_of(&object) == reference.uid).then_some(object)
}

fn untyped(reference: ControllerRef<'_>, object: Arc<Value>, replicas: i64) -> Workload {
    Workload {
        api_version: reference.api_version.to_owned(),
        kind: reference.kind.to_owned(),
        name: reference.name.to_owned(),
        uid: uid_of(&object).to_owned(),
        replicas,
        selector: None,
        object,
    }
}

fn uid_of(object: &Value) -> &str {
    object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
}

/// `metav1.GetControllerOf`.
fn controller_of(object: &Value) -> Option<&Value> {
    object
        .pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
}

/// The custom workloads `kruise-configuration` lists under `PPS_Watch_Custom_Workload_WhiteList`
/// (`configuration.GetPPSWatchCustomWorkloadWhiteList`), read by the controller finder
/// (StatefulSet-like kinds) and by `/mutate-pod`'s PersistentPodState step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CustomWorkloads {
    /// (group, kind) pairs; the version is read (its type checked) and not compared.
    listed: Vec<(String, String)>,
}

impl CustomWorkloads {
    /// The whitelist in `kruise_namespace`'s `kruise-configuration`: empty without the ConfigMap or
    /// the key; an error when the key holds what Go's `encoding/json` cannot read into the list
    /// (keys match case-insensitively, `null` is nothing).
    pub fn read(cluster: &Snapshot, kruise_namespace: &str) -> Result<CustomWorkloads, FinderError> {
        let configmap = cluster.get("", "ConfigMap", kruise_namespace, KRUISE_CONFIGMAP);
        let text =
            configmap.as_ref().and_then(|c| c.pointer(&format!("/data/{STATEFULSET_LIKE_WHITELIST_KEY}")));
        match text.and_then(Value::as_str) {
            None => Ok(CustomWorkloads::default()),
            Some(text) => Ok(CustomWorkloads { listed: whitelist(text).map_err(FinderError::Whitelist)? }),
        }
    }

    /// `ValidateAPIVersionAndKind` with the apiVersion's group parsed ([`group_of`]): both
    /// StatefulSets (`apps`, `apps.kruise.io`) always (`IsDefaultSupport`), other kinds when listed.
    pub fn accepts(&self, group: &str, kind: &str) -> bool {
        kind == "StatefulSet" && (group == KRUISE_APPS_GROUP || group == APPS_GROUP)
            || self.listed.iter().any(|(g, k)| g == group && k == kind)
    }
}

/// The (group, kind) pairs of `{"workloads": [{"Group": .., "Version": .., "Kind": ..}]}`.
fn whitelist(text: &str) -> Result<Vec<(String, String)>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let workloads = match &value {
        Value::Null => return Ok(Vec::new()),
        Value::Object(object) => field(object, "workloads"),
        other => return Err(format!("cannot unmarshal {} into the whitelist", kind_of(other))),
    };
    let items = match workloads {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(other) => return Err(format!("cannot unmarshal {} into workloads", kind_of(other))),
    };
    let mut out = Vec::new();
    for item in items {
        let object = match item {
            Value::Null => {
                out.push((String::new(), String::new()));
                continue;
            }
            Value::Object(object) => object,
            other => return Err(format!("cannot unmarshal {} into a workload", kind_of(other))),
        };
        let text = |name| match field(object, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!("cannot unmarshal {} into {name}", kind_of(other))),
        };
        text("version")?;
        out.push((text("group")?, text("kind")?));
    }
    Ok(out)
}

/// `encoding/json`'s field match: the exact key, else one that differs only in case.
pub fn field<'v>(object: &'v serde_json::Map<String, Value>, name: &str) -> Option<&'v Value> {
    object.get(name).or_else(|| object.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(api_version: &str, kind: &str, name: &str, extra: Value) -> Value {
        let mut o = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{kind}-{name}")}});
        if let (Some(o), Value::Object(extra)) = (o.as_object_mut(), extra) {
            o.extend(extra);
        }
        o
    }

    fn spec(replicas: i64) -> Value {
        json!({"spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}})
    }

    fn find_in(cluster: &Snapshot, api_version: &str, kind: &str, name: &str, uid: &str) -> Option<Workload> {
        let reference = ControllerRef { api_version, kind, name, uid };
        find(cluster, "kruise-system", reference, "ns").unwrap()
    }

    fn short(w: Option<Workload>) -> Option<(String, String, String, i64, bool)> {
        w.map(|w| (w.api_version, w.kind, w.name, w.replicas, w.selector.is_some()))
    }

    fn s(
        api_version: &str,
        kind: &str,
        name: &str,
        replicas: i64,
        selector: bool,
    ) -> Option<(String, String, String, i64, bool)> {
        Some((api_version.into(), kind.into(), name.into(), replicas, selector))
    }

    #[test]
    fn built_in_finders_report_their_typed_version_replicas_and_selector() {
        let owned_by_deploy = json!({"metadata": {"name": "d-1", "namespace": "ns", "uid": "u", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "uid-Deployment-d", "controller": true}]},
            "spec": {"replicas": 9}});
        let mut rs = object("apps/v1", "ReplicaSet", "d-1", spec(9));
        rs["metadata"]["ownerReferences"] = owned_by_deploy["metadata"]["ownerReferences"].clone();
        let cluster = Snapshot::from_objects([
            object("v1", "ReplicationController", "rc", json!({"spec": {"replicas": 2}})),
            object("apps/v1", "Deployment", "d", spec(3)),
            rs,
            object("apps/v1", "ReplicaSet", "lone", spec(4)),
            object("apps/v1", "StatefulSet", "web", spec(5)),
            object("apps.kruise.io/v1alpha1", "CloneSet", "cs", spec(6)),
            object("apps.kruise.io/v1beta1", "StatefulSet", "web", spec(7)),
            object("batch/v1", "Job", "job", json!({"spec": {"parallelism": 2}})),
        ]);
        assert_eq!(
            short(find_in(&cluster, "v1", "ReplicationController", "rc", "")),
            s("v1", "ReplicationController", "rc", 2, false)
        );
        // A ReplicaSet a Deployment controls answers with the Deployment; any version of a group.
        assert_eq!(
            short(find_in(&cluster, "apps/v1beta2", "ReplicaSet", "d-1", "")),
            s("apps/v1", "Deployment", "d", 3, true)
        );
        assert_eq!(
            short(find_in(&cluster, "apps/v1", "ReplicaSet", "lone", "")),
            s("apps/v1", "ReplicaSet", "lone", 4, true)
        );
        assert_eq!(
            short(find_in(&cluster, "apps/v1", "StatefulSet", "web", "")),
            s("apps/v1", "StatefulSet", "web", 5, true)
        );
        assert_eq!(
            short(find_in(&cluster, "apps.kruise.io/v1alpha1", "CloneSet", "cs", "")),
            s("apps.kruise.io/v1alpha1", "CloneSet", "cs", 6, true)
        );
        // v1alpha1 Advanced StatefulSets are read as v1beta1.
        assert_eq!(
            short(find_in(&cluster, "apps.kruise.io/v1alpha1", "StatefulSet", "web", "")),
            s("apps.kruise.io/v1beta1", "StatefulSet", "web", 7, true)
        );
        // Other kinds: the object itself, replicas unknown.
        assert_eq!(
            short(find_in(&cluster, "batch/v1", "Job", "job", "")),
            s("batch/v1", "Job", "job", REPLICAS_UNKNOWN, false)
        );
        assert_eq!(find_in(&cluster, "batch/v1", "Job", "gone", ""), None);
        assert_eq!(find_in(&cluster, "apps/v1", "Deployment", "gone", ""), None);
        // Wrong group for the kind: not the typed finder; no such object either.
        assert_eq!(find_in(&cluster, "extensions/v1beta1", "Deployment", "d", ""), None);
    }

    #[test]
    fn finders_that_give_up_pass_to_the_next() {
        let mut rs = object("apps/v1", "ReplicaSet", "orphan", spec(4));
        rs["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "missing", "uid": "x", "controller": true}]);
        let cluster = Snapshot::from_objects([rs, object("apps/v1", "StatefulSet", "web", spec(5))]);
        // The Deployment is gone: the bare ReplicaSet answers, replicas unknown. The same when the
        // Deployment's uid is not the one the ReplicaSet's owner reference records.
        assert_eq!(
            short(find_in(&cluster, "apps/v1", "ReplicaSet", "orphan", "")),
            s("apps/v1", "ReplicaSet", "orphan", REPLICAS_UNKNOWN, false)
        );
        let replaced = Snapshot::from_objects([
            cluster.get("apps", "ReplicaSet", "ns", "orphan").unwrap().as_ref().clone(),
            object("apps/v1", "Deployment", "missing", spec(3)),
        ]);
        assert_eq!(find_in(&replaced, "apps/v1", "ReplicaSet", "orphan", "").unwrap().kind, "ReplicaSet");
        // Another uid: the typed finder and the StatefulSet-like one give up; the bare object does not check it.
        let found = find_in(&cluster, "apps/v1", "StatefulSet", "web", "other").unwrap();
        assert_eq!((found.replicas, found.uid.as_str()), (REPLICAS_UNKNOWN, "uid-StatefulSet-web"));
        assert_eq!(
            find_in(&cluster, "apps/v1", "StatefulSet", "web", "uid-StatefulSet-web").unwrap().replicas,
            5
        );
        let reference = ControllerRef { api_version: "a/b/c", kind: "Job", name: "j", uid: "" };
        assert_eq!(
            find(&cluster, "kruise-system", reference, "ns"),
            Err(FinderError::ApiVersion("a/b/c".into()))
        );
    }

    #[test]
    fn statefulset_like_kinds_come_from_kruise_configuration() {
        let configmap = |whitelist: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": KRUISE_CONFIGMAP, "namespace": "kruise-system"},
                "data": {STATEFULSET_LIKE_WHITELIST_KEY: whitelist}})
        };
        let game = object("game.io/v1", "GameSet", "g", json!({"spec": {"replicas": 8}}));
        let listed = r#"{"workloads": [{"Group": "game.io", "Version": "v1", "Kind": "GameSet"}]}"#;
        let cluster = Snapshot::from_objects([configmap(listed), game.clone()]);
        assert_eq!(
            short(find_in(&cluster, "game.io/v2", "GameSet", "g", "")),
            s("game.io/v2", "GameSet", "g", 8, false)
        );
        let cluster = Snapshot::from_objects([
            configmap(r#"{"WORKLOADS": [{"group": "other", "kind": "GameSet"}]}"#),
            game.clone(),
        ]);
        assert_eq!(find_in(&cluster, "game.io/v1", "GameSet", "g", "").unwrap().replicas, REPLICAS_UNKNOWN);
        for bad in ["{", r#"{"workloads": {}}"#, r#"{"workloads": [{"Kind": 1}]}"#, "[]"] {
            let cluster = Snapshot::from_objects([configmap(bad), game.clone()]);
            let reference = ControllerRef { api_version: "game.io/v1", kind: "GameSet", name: "g", uid: "" };
            let err = find(&cluster, "kruise-system", reference, "ns").unwrap_err();
            assert!(matches!(err, FinderError::Whitelist(_)), "{bad}: {err}");
        }
        assert_eq!(group_of("v1"), Some(""));
        assert_eq!(group_of("/"), Some(""));
        assert_eq!(group_of("apps.kruise.io/"), Some("apps.kruise.io"));
        assert_eq!(group_of("a/b/c"), None);
    }
}
