//! OpenKruise SidecarSet (`apps.kruise.io`, cluster-scoped), versions v1beta1 (storage, and the
//! internal form decisions work on) and v1alpha1 (converted to v1beta1 as Kruise does).
//!
//! Every struct keeps the fields it does not model in a flattened `extra` map, so an object read
//! and written back loses nothing. The embedded core `Container` (inline in `SidecarContainer`) and
//! `Volume` stay JSON: they are copied to pods verbatim, whatever Kubernetes version wrote them.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::derived::Derived;
pub use super::meta::{Extra, IntOrString, LabelSelector, LabelSelectorRequirement, ObjectMeta};
use super::resource_expression::Expression;
use super::tree::{Json, Object};

pub const GROUP: &str = "apps.kruise.io";
pub const KIND: &str = "SidecarSet";

/// Annotation on a SidecarSet (written by its mutating webhook) and on pods (map of entries).
pub const HASH_ANNOTATION: &str = "kruise.io/sidecarset-hash";
/// Same as [`HASH_ANNOTATION`] with every image blanked.
pub const HASH_WITHOUT_IMAGE_ANNOTATION: &str = "kruise.io/sidecarset-hash-without-image";
/// Pod annotation: sorted, comma-joined names of the SidecarSets injected so far.
pub const INJECTED_LIST_ANNOTATION: &str = "kruise.io/sidecarset-injected-list";
/// Pod annotation: `{"<sidecar>":"<sidecar>-1"}` for hot-upgrade sidecars.
pub const WORKING_HOTUPGRADE_CONTAINER_ANNOTATION: &str = "kruise.io/sidecarset-working-hotupgrade-container";
/// Written by the controller during in-place sidecar upgrades; never by the webhook.
pub const INPLACE_UPDATE_STATE_ANNOTATION: &str = "kruise.io/sidecarset-inplace-update-state";
/// Pod annotation prefixes for hot-upgrade versions (`version.sidecarset.kruise.io/<container>`).
pub const VERSION_ANNOTATION_PREFIX: &str = "version.sidecarset.kruise.io/";
pub const VERSION_ALT_ANNOTATION_PREFIX: &str = "versionalt.sidecarset.kruise.io/";
/// v1alpha1 label that v1beta1 moved to `spec.customVersion`; also a ControllerRevision label.
pub const CUSTOM_VERSION_LABEL: &str = "apps.kruise.io/sidecarset-custom-version";
/// ControllerRevision label naming its SidecarSet.
pub const REVISION_SIDECARSET_NAME_LABEL: &str = "kruise.io/sidecarset-name";
/// Canary SidecarSets: `sidecarset-canary: "true"` plus the name of the base they replace.
pub const CANARY_ANNOTATION: &str = "apps.kruise.io/sidecarset-canary";
pub const BASE_ANNOTATION: &str = "apps.kruise.io/sidecarset-base";
/// The well-known namespace label a v1alpha1 `spec.namespace` is converted to.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// Env var every injected sidecar gets (and by which earlier sidecars are recognised).
pub const IS_INJECTED_ENV: &str = "IS_INJECTED";
pub const SIDECARSET_VERSION_ENV: &str = "SIDECARSET_VERSION";
pub const SIDECARSET_VERSION_ALT_ENV: &str = "SIDECARSET_VERSION_ALT";

/// `corev1.LocalObjectReference` (imagePullSecrets).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalObjectReference {
    #[serde(default)]
    pub name: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `corev1.ObjectFieldSelector`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectFieldSelector {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    pub field_path: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A container of a SidecarSet: a core Container (kept as JSON, minus `name`) plus the fields
/// only SidecarSets have, which never reach the pod.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainer {
    pub name: String,
    /// `BeforeAppContainer` | `AfterAppContainer`; empty counts as after.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_inject_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_strategy: Option<SidecarContainerUpgradeStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_volume_policy: Option<ShareVolumePolicy>,
    /// A pointer in Kruise, nil unless set (so older hashes stay the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_volume_device_policy: Option<ShareVolumePolicy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transfer_env: Vec<TransferEnvVar>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_policy: Option<ResourcesPolicy>,
    /// Every core Container field except `name` (image, env, volumeMounts, ...), verbatim.
    #[serde(flatten)]
    pub container: Map<String, Value>,
    /// [`Self::core_container`] as a tree, for injection (issue 20.2).
    #[serde(skip)]
    #[schemars(skip)]
    core_object: Derived<Object<'static>>,
}

impl SidecarContainer {
    pub const BEFORE_APP_CONTAINER: &'static str = "BeforeAppContainer";
    pub const AFTER_APP_CONTAINER: &'static str = "AfterAppContainer";

    /// A resourcesPolicy beside non-empty `resources.limits` or `resources.requests`: a pair
    /// Kruise's validation refuses ("resourcesPolicy and resources cannot be configured together").
    pub fn resources_policy_with_resources(&self) -> bool {
        let set = |k: &str| {
            self.container
                .get("resources")
                .and_then(|r| r.get(k))
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        };
        self.resources_policy.is_some() && (set("limits") || set("requests"))
    }

    /// The core Container as it goes into a pod: `name` first, then the other fields in the
    /// order the SidecarSet wrote them.
    ///
    /// A clone of `container` (an index map clones without hashing its keys again) with `name`
    /// put in front; `container` never holds `name`, which deserialising gives the field.
    pub fn core_container(&self) -> Map<String, Value> {
        let mut out = self.container.clone();
        out.shift_insert(0, "name".into(), Value::String(self.name.clone()));
        out
    }

    /// [`Self::core_container`] as a tree, built the first time a pod needs it and kept: every
    /// injection clones it rather than cloning and converting the map.
    pub fn core_object(&self) -> &Object<'static> {
        self.core_object.get_or_init(|| Object::from(self.core_container()))
    }

    /// `restartPolicy: Always` on an init container: a native sidecar.
    pub fn is_native_sidecar(&self) -> bool {
        self.container.get("restartPolicy").and_then(Value::as_str) == Some("Always")
    }

    pub fn is_hot_upgrade(&self) -> bool {
        self.upgrade_strategy
            .as_ref()
            .is_some_and(|u| u.upgrade_type == SidecarContainerUpgradeStrategy::HOT_UPGRADE)
    }

    pub fn shares_volumes(&self) -> bool {
        self.share_volume_policy.as_ref().is_some_and(ShareVolumePolicy::enabled)
    }

    pub fn shares_volume_devices(&self) -> bool {
        self.share_volume_device_policy.as_ref().is_some_and(ShareVolumePolicy::enabled)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarContainerUpgradeStrategy {
    /// `ColdUpgrade` | `HotUpgrade`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub upgrade_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hot_upgrade_empty_image: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl SidecarContainerUpgradeStrategy {
    pub const HOT_UPGRADE: &'static str = "HotUpgrade";
    pub const COLD_UPGRADE: &'static str = "ColdUpgrade";
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareVolumePolicy {
    /// `enabled` | `disabled`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ShareVolumePolicy {
    pub fn enabled(&self) -> bool {
        self.type_ == "enabled"
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TransferEnvVar {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_container_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_container_name_from: Option<SourceContainerNameSource>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub env_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_names: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceContainerNameSource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field_ref: Option<ObjectFieldSelector>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesPolicy {
    /// `sum` | `max`.
    #[serde(default, alias = "targetContainerMode", skip_serializing_if = "String::is_empty")]
    pub target_containers_mode: String,
    /// RE2, unanchored; the CRD defaults it to `.*`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_containers_name_regex: String,
    #[serde(default, alias = "resourceExpr")]
    pub resources_expr: ResourceExpr,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceExpr {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceExprs>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceExprs>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceExprs {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cpu: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub memory: String,
    #[serde(flatten)]
    pub extra: Extra,
    /// `cpu` and `memory` parsed for injection (issue 20.2).
    #[serde(skip)]
    #[schemars(skip)]
    parsed: Derived<[Expression; 2]>,
}

impl ResourceExprs {
    /// `(resource, text, parsed)` for `cpu` then `memory`, leaving out an empty one. Parsed the
    /// first time a pod needs them and kept; one that does not parse carries its error.
    pub fn expressions(&self) -> impl Iterator<Item = (&'static str, &str, &Expression)> {
        let [cpu, memory] = self
            .parsed
            .get_or_init(|| [Expression::for_injection(&self.cpu), Expression::for_injection(&self.memory)]);
        [("cpu", self.cpu.as_str(), cpu), ("memory", self.memory.as_str(), memory)]
            .into_iter()
            .filter(|(_, text, _)| !text.is_empty())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetUpdateStrategy {
    /// `RollingUpdate` | `NotUpdate`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scatter_strategy: Vec<ScatterTerm>,
    /// `UpdatePriorityStrategy` (weight or order terms); the webhook never reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_strategy: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl SidecarSetUpdateStrategy {
    /// A partition (a percentage, or a non-zero number) and a selector both set: a pair Kruise's
    /// validation refuses for a RollingUpdate ("Partition and Selector cannot be used together").
    pub fn partition_and_selector(&self) -> bool {
        let partition = match &self.partition {
            Some(IntOrString::String(_)) => true,
            Some(IntOrString::Int(n)) => *n != 0,
            None => false,
        };
        partition && self.selector.is_some()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScatterTerm {
    pub key: String,
    pub value: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectionStrategy {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<SidecarSetInjectRevision>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetInjectRevision {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_name: Option<String>,
    /// `Always` | `Partial`; empty behaves as `Always`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub policy: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetPatchPodMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// `Retain` (also empty) | `Overwrite` | `MergePatchJson`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub patch_policy: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_ready_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latest_revision: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// v1beta1 `SidecarSetSpec`, the internal form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<SidecarContainer>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<SidecarContainer>,
    /// Core Volumes, verbatim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<SidecarSetUpdateStrategy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub injection_strategy: Option<SidecarSetInjectionStrategy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
    /// v1beta1 only (v1alpha1 keeps it in the `apps.kruise.io/sidecarset-custom-version` label).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub custom_version: String,
    #[serde(flatten)]
    pub extra: Extra,
    /// [`Self::volumes`] as trees, for injection (issue 20.2).
    #[serde(skip)]
    #[schemars(skip)]
    volume_trees: Derived<Vec<Json<'static>>>,
}

impl SidecarSetSpec {
    /// [`Self::volumes`] as trees, built the first time a pod needs one and kept: every injection
    /// clones the volumes its sidecars reference rather than converting them.
    pub fn volume_trees(&self) -> &[Json<'static>] {
        self.volume_trees.get_or_init(|| self.volumes.iter().cloned().map(Json::from).collect())
    }
}

/// `apps.kruise.io/v1beta1` SidecarSet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SidecarSet {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: SidecarSetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<SidecarSetStatus>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl SidecarSet {
    pub const API_VERSION: &'static str = "apps.kruise.io/v1beta1";

    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// Read a stored SidecarSet of either version into the internal (v1beta1) form.
    pub fn from_value(value: &Value) -> Result<SidecarSet, String> {
        let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("<unnamed>");
        match value.get("apiVersion").and_then(Value::as_str) {
            Some("apps.kruise.io/v1alpha1") => serde_json::from_value::<v1alpha1::SidecarSet>(value.clone())
                .map(SidecarSet::from)
                .map_err(|e| format!("SidecarSet {name} (v1alpha1) cannot be read: {e}")),
            _ => serde_json::from_value::<SidecarSet>(value.clone())
                .map_err(|e| format!("SidecarSet {name} cannot be read: {e}")),
        }
    }

    pub fn is_paused(&self) -> bool {
        self.spec.injection_strategy.as_ref().is_some_and(|s| s.paused)
    }

    /// The base SidecarSet this one replaces, when it is a canary (both annotations, exact:
    /// docs/sidecarset.md#2-which-sidecarsets-match).
    pub fn canary_base(&self) -> Option<&str> {
        let a = &self.metadata.annotations;
        (a.get(CANARY_ANNOTATION).map(String::as_str) == Some("true"))
            .then(|| a.get(BASE_ANNOTATION).map(String::as_str))
            .flatten()
            .filter(|b| !b.is_empty())
    }

    pub fn latest_revision(&self) -> &str {
        self.status.as_ref().map_or("", |s| s.latest_revision.as_str())
    }
}

/// `apps.kruise.io/v1alpha1`: the same as v1beta1 except `spec.namespace` and no
/// `spec.customVersion` (a label instead).
pub mod v1alpha1 {
    use super::*;

    pub const API_VERSION: &str = "apps.kruise.io/v1alpha1";

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct SidecarSetSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub selector: Option<LabelSelector>,
        /// Converted to a `kubernetes.io/metadata.name` namespaceSelector.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pub namespace: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub namespace_selector: Option<LabelSelector>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub init_containers: Vec<SidecarContainer>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub containers: Vec<SidecarContainer>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub volumes: Vec<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub update_strategy: Option<SidecarSetUpdateStrategy>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub injection_strategy: Option<SidecarSetInjectionStrategy>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub image_pull_secrets: Vec<LocalObjectReference>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub revision_history_limit: Option<i32>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub patch_pod_metadata: Vec<SidecarSetPatchPodMetadata>,
        #[serde(flatten)]
        pub extra: Extra,
    }

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "camelCase")]
    pub struct SidecarSet {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pub api_version: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pub kind: String,
        #[serde(default)]
        pub metadata: ObjectMeta,
        #[serde(default)]
        pub spec: SidecarSetSpec,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub status: Option<SidecarSetStatus>,
        #[serde(flatten)]
        pub extra: Extra,
    }
}

/// Kruise's conversion (docs/sidecarset.md#2-which-sidecarsets-match): a non-empty `spec.namespace` becomes a
/// namespaceSelector on `kubernetes.io/metadata.name` and replaces any namespaceSelector; the custom-version
/// label becomes `spec.customVersion`.
impl From<v1alpha1::SidecarSet> for SidecarSet {
    fn from(old: v1alpha1::SidecarSet) -> Self {
        let s = old.spec;
        let namespace_selector = if s.namespace.is_empty() {
            s.namespace_selector
        } else {
            Some(LabelSelector {
                match_labels: BTreeMap::from([(NAMESPACE_NAME_LABEL.to_owned(), s.namespace)]),
                ..Default::default()
            })
        };
        let custom_version = old.metadata.labels.get(CUSTOM_VERSION_LABEL).cloned().unwrap_or_default();
        SidecarSet {
            api_version: SidecarSet::API_VERSION.into(),
            kind: old.kind,
            metadata: old.metadata,
            spec: SidecarSetSpec {
                selector: s.selector,
                namespace_selector,
                init_containers: s.init_containers,
                containers: s.containers,
                volumes: s.volumes,
                update_strategy: s.update_strategy,
                injection_strategy: s.injection_strategy,
                image_pull_secrets: s.image_pull_secrets,
                revision_history_limit: s.revision_history_limit,
                patch_pod_metadata: s.patch_pod_metadata,
                custom_version,
                extra: s.extra,
                volume_trees: Derived::default(),
            },
            status: old.status,
            extra: old.extra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let v = json!({
            "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "future": 1,
            "metadata": {"name": "s", "uid": "u", "annotations": {"a": "b"}},
            "spec": {
                "selector": {"matchLabels": {"app": "x"}, "newSelectorField": true},
                "containers": [{"name": "c", "image": "i", "podInjectPolicy": "AfterAppContainer", "newContainerField": [1],
                                "upgradeStrategy": {"upgradeType": "HotUpgrade", "x": 1}}],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "updateStrategy": {"type": "RollingUpdate", "partition": "10%", "maxUnavailable": 1},
                "newSpecField": "kept"
            },
            "status": {"matchedPods": 1, "updatedPods": 0, "readyPods": 0, "latestRevision": "r", "newStatus": 2}
        });
        let s: SidecarSet = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(s.spec.containers[0].container.get("image"), Some(&json!("i")));
        assert!(s.spec.containers[0].is_hot_upgrade());
        assert_eq!(serde_json::to_value(&s).unwrap(), v);

        // Nothing is added either: absent counters stay absent.
        let v = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"},
                       "spec": {"namespace": "x"}, "status": {"latestRevision": "r"}});
        let s: v1alpha1::SidecarSet = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&s).unwrap(), v);
    }

    #[test]
    fn v1alpha1_namespace_replaces_namespace_selector_and_label_becomes_custom_version() {
        let v = json!({
            "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
            "metadata": {"name": "s", "labels": {"apps.kruise.io/sidecarset-custom-version": "v2"}},
            "spec": {"namespace": "team-a", "namespaceSelector": {"matchLabels": {"env": "prod"}}, "selector": {"matchLabels": {"app": "x"}}}
        });
        let s = SidecarSet::from_value(&v).unwrap();
        assert_eq!(s.api_version, "apps.kruise.io/v1beta1");
        assert_eq!(
            s.spec.namespace_selector.unwrap().match_labels,
            BTreeMap::from([("kubernetes.io/metadata.name".to_owned(), "team-a".to_owned())])
        );
        assert_eq!(s.spec.custom_version, "v2");

        let v = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"},
                       "spec": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}});
        let s = SidecarSet::from_value(&v).unwrap();
        assert_eq!(
            s.spec.namespace_selector.unwrap().match_labels.get("env").map(String::as_str),
            Some("prod")
        );
    }

    /// The tree injection clones is the core container: `name` first, then the SidecarSet's order.
    #[test]
    fn core_object_is_the_core_container_in_order() {
        let v = json!({"metadata": {"name": "s"}, "spec": {"containers": [
            {"image": "i", "podInjectPolicy": "BeforeAppContainer", "env": [{"name": "A", "value": "1"}], "name": "c", "args": ["x"]}]}});
        let s = SidecarSet::from_value(&v).unwrap();
        let c = &s.spec.containers[0];
        let object = c.core_object();
        assert_eq!(object.keys().collect::<Vec<_>>(), ["name", "image", "env", "args"]);
        assert_eq!(crate::api::tree::Json::Object(object.clone()), Value::Object(c.core_container()));
        assert!(std::ptr::eq(object, c.core_object()), "built once");
    }

    /// The volumes injection clones are the SidecarSet's, keys in their order, built once.
    #[test]
    fn volume_trees_are_the_volumes_in_order() {
        let v = json!({"metadata": {"name": "s"}, "spec": {"volumes": [
            {"name": "b", "emptyDir": {}}, {"secret": {"secretName": "x", "defaultMode": 420}, "name": "a"}]}});
        let s = SidecarSet::from_value(&v).unwrap();
        let trees = s.spec.volume_trees();
        assert_eq!(trees.len(), 2);
        for (tree, value) in trees.iter().zip(&s.spec.volumes) {
            assert_eq!(tree, value);
            let keys: Vec<&str> = tree.as_object().unwrap().keys().collect();
            assert_eq!(keys, value.as_object().unwrap().keys().map(String::as_str).collect::<Vec<_>>());
        }
        assert!(std::ptr::eq(trees, s.spec.volume_trees()), "built once");
    }

    #[test]
    fn canary_needs_both_annotations_exactly() {
        let mut s = SidecarSet::default();
        s.metadata.annotations.insert(CANARY_ANNOTATION.into(), "True".into());
        s.metadata.annotations.insert(BASE_ANNOTATION.into(), "base".into());
        assert_eq!(s.canary_base(), None);
        s.metadata.annotations.insert(CANARY_ANNOTATION.into(), "true".into());
        assert_eq!(s.canary_base(), Some("base"));
        s.metadata.annotations.insert(BASE_ANNOTATION.into(), String::new());
        assert_eq!(s.canary_base(), None);
    }

    #[test]
    fn schema_generates() {
        let schema = schemars::schema_for!(SidecarSet);
        assert!(serde_json::to_string(&schema).unwrap().contains("x-kubernetes-int-or-string"));
    }
}
