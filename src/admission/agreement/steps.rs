//! The fields each `/mutate-pod` step other than SidecarSet injection owns, compared step by step
//! (docs/sidecarset.md#13-6-the-other-steps). Each step is judged only on what it writes, so that
//! one step's difference is not counted against another:
//!
//! - node affinity, which WorkloadSpread and PersistentPodState both write, is split by who can
//!   have written it: the required terms and the matched subset's own preferred terms are
//!   WorkloadSpread's, every other preferred term either Pod added is PersistentPodState's;
//! - `nodeSelector` entries are PersistentPodState's, except the keys a matched subset's patch names;
//! - a container only one side has is the SidecarSet verdict's: launch priority's barrier env is
//!   compared on the containers both Pods have, the enhanced liveness probe on the review's own
//!   containers (a sidecar's probe belongs to the whole sidecar the SidecarSet verdict compares).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::diff::{Ctx, diff, entry_key};
use super::normalize::{normalized_container, tidy};
use super::{FieldDiff, annotations, child, list, name_of, spec_list};
use crate::admission::pod::Step;
use crate::admission::pod::enhanced_liveness::CONTEXT_ANNOTATION;
use crate::admission::pod::launch_priority::BARRIER_ENV;
use crate::admission::pod::persistent_pod_state::INJECTED_ANNOTATION;
use crate::admission::pod::probe_marker::{LIST_ANNOTATION, PROBES_ANNOTATION};
use crate::admission::pod::readiness_gate::KRUISE_POD_READY;
use crate::admission::pod::related_pub::RELATED_PUB_ANNOTATION;
use crate::admission::workload_spread::MATCHED_ANNOTATION;
use crate::api::json::{at, field};

/// Finds a WorkloadSpread by namespace and name, in the cluster the decision read.
pub type SpreadLookup<'a> = &'a dyn Fn(&str, &str) -> Option<Arc<Value>>;

const PREFERRED: &[&str] =
    &["spec", "affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution"];
const PREFERRED_PATH: &str = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
const REQUIRED: &[&str] =
    &["spec", "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"];
const REQUIRED_PATH: &str = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";

/// The diffs of `step` (not [`Step::SidecarSet`], which is judged per SidecarSet) between `ours` and
/// `stored`, both made from `original`.
pub(super) fn compare_step(
    step: Step,
    original: &Value,
    ours: &Value,
    stored: &Value,
    spreads: SpreadLookup,
) -> Vec<FieldDiff> {
    let mut out = Vec::new();
    match step {
        Step::ReadinessGate => readiness_gate(ours, stored, &mut out),
        Step::WorkloadSpread => workload_spread(ours, stored, spreads, &mut out),
        // Judged per SidecarSet (`compare_pod`).
        Step::SidecarSet => {}
        Step::LaunchPriority => launch_priority(ours, stored, &mut out),
        Step::RelatedPub => annotation(RELATED_PUB_ANNOTATION, ours, stored, &mut out),
        Step::PersistentPodState => persistent_pod_state(original, ours, stored, spreads, &mut out),
        Step::EnhancedLiveness => enhanced_liveness(original, ours, stored, &mut out),
        Step::ProbeMarker => {
            json_annotation_diff(PROBES_ANNOTATION, &[], ours, stored, &mut out);
            annotation(LIST_ANNOTATION, ours, stored, &mut out);
        }
    }
    out
}

/// The `KruisePodReady` entry of `spec.readinessGates`.
fn readiness_gate(ours: &Value, stored: &Value, out: &mut Vec<FieldDiff>) {
    let gate = |pod: &Value| {
        spec_list(pod, "readinessGates")
            .iter()
            .find(|g| field(g, "conditionType").and_then(Value::as_str) == Some(KRUISE_POD_READY))
            .map(tidied)
    };
    let path = child("spec.readinessGates", KRUISE_POD_READY);
    diff(&path, "", gate(ours).as_ref(), gate(stored).as_ref(), Ctx::default(), out);
}

/// The annotation `key` as it is (a string, or whatever a Pod put there).
fn annotation(key: &str, ours: &Value, stored: &Value, out: &mut Vec<FieldDiff>) {
    let path = child("metadata.annotations", key);
    diff(&path, "", annotations(ours).get(key), annotations(stored).get(key), Ctx::default(), out);
}

/// An annotation whose value is JSON, parsed, so that the diff names the field inside it that
/// differs; `drop` are keys each side draws on its own. Text that does not parse compares as text.
fn json_annotation(pod: &Value, key: &str, drop: &[&str]) -> Option<Value> {
    let value = annotations(pod).get(key)?;
    let Some(text) = value.as_str() else { return Some(value.clone()) };
    let mut parsed = serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()));
    if let Value::Object(m) = &mut parsed {
        for key in drop {
            m.shift_remove(*key);
        }
    }
    Some(parsed)
}

fn json_annotation_diff(key: &str, drop: &[&str], ours: &Value, stored: &Value, out: &mut Vec<FieldDiff>) {
    let path = child("metadata.annotations", key);
    let (a, b) = (json_annotation(ours, key, drop), json_annotation(stored, key, drop));
    diff(&path, "", a.as_ref(), b.as_ref(), Ctx::default(), out);
}

/// A value as storage keeps it (no `null`, empty lists or Go zero values).
fn tidied(value: &Value) -> Value {
    let mut v = value.clone();
    tidy(&mut v, false);
    v
}

fn items_at<'v>(pod: &'v Value, keys: &[&str]) -> &'v [Value] {
    at(pod, keys).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn tidied_list(pod: &Value, keys: &[&str]) -> Vec<Value> {
    items_at(pod, keys).iter().map(tidied).collect()
}

/// The containers of `pod` by name (the first of a name).
fn containers_by_name(pod: &Value) -> HashMap<&str, &Value> {
    let mut by_name = HashMap::new();
    for c in spec_list(pod, "containers") {
        if let Some(name) = name_of(c) {
            by_name.entry(name).or_insert(c);
        }
    }
    by_name
}

/// A subset either Pod's `matched-workloadspread` annotation names, as the cluster has it.
struct Subset {
    /// `<WorkloadSpread>/<subset>`: where a diff of its entries points.
    label: String,
    spec: Value,
}

/// The WorkloadSpread and subset of the Pod's `matched-workloadspread` annotation.
fn matched(pod: &Value) -> Option<(String, String)> {
    let value = json_annotation(pod, MATCHED_ANNOTATION, &[])?;
    let text = |key| field(&value, key).and_then(Value::as_str).map(str::to_owned);
    Some((text("name")?, text("subset")?))
}

/// The subsets either Pod was given (once each), that the cluster still has.
fn involved_subsets(ours: &Value, stored: &Value, spreads: SpreadLookup) -> Vec<Subset> {
    let namespace = [stored, ours]
        .into_iter()
        .filter_map(|p| at(p, &["metadata", "namespace"]).and_then(Value::as_str))
        .find(|ns| !ns.is_empty())
        .unwrap_or_default();
    let named: BTreeSet<(String, String)> = [ours, stored].into_iter().filter_map(matched).collect();
    named
        .into_iter()
        .filter_map(|(spread, subset)| {
            let object = spreads(namespace, &spread)?;
            let spec = items_at(&object, &["spec", "subsets"])
                .iter()
                .find(|s| name_of(s) == Some(subset.as_str()))?
                .clone();
            Some(Subset { label: format!("{spread}/{subset}"), spec })
        })
        .collect()
}

/// WorkloadSpread: the `matched-workloadspread` annotation (without the `uid` each side draws for
/// a Pod without a name); then, for each subset either Pod was given, how many times each Pod has
/// each of its tolerations and preferred node terms, the required node terms when it has one, and
/// what its patch names. Without the WorkloadSpread in the cluster only the annotation is compared.
fn workload_spread(ours: &Value, stored: &Value, spreads: SpreadLookup, out: &mut Vec<FieldDiff>) {
    json_annotation_diff(MATCHED_ANNOTATION, &["uid"], ours, stored, out);
    let subsets = involved_subsets(ours, stored, spreads);
    for subset in &subsets {
        let entries = [
            ("spec.tolerations", &["spec", "tolerations"][..], "tolerations"),
            (PREFERRED_PATH, PREFERRED, "preferredNodeSelectorTerms"),
        ];
        for (path, keys, key) in entries {
            let (in_ours, in_stored) = (tidied_list(ours, keys), tidied_list(stored, keys));
            for (i, entry) in list(&subset.spec, key).iter().enumerate() {
                let entry = tidied(entry);
                let count = |items: &[Value]| items.iter().filter(|e| **e == entry).count();
                let (a, b) = (count(&in_ours), count(&in_stored));
                if a != b {
                    out.push(FieldDiff {
                        path: child(path, &format!("{}#{i}", subset.label)),
                        ours: json!(a),
                        stored: json!(b),
                    });
                }
            }
        }
        if let Some(patch) = field(&subset.spec, "patch").filter(|p| p.is_object()) {
            let (a, b) = (patched(ours, patch), patched(stored, patch));
            let keys: BTreeSet<&String> =
                a.as_object().into_iter().chain(b.as_object()).flat_map(|m| m.keys()).collect();
            for key in keys {
                diff(key, key, a.get(key), b.get(key), Ctx::default(), out);
            }
        }
    }
    if subsets.iter().any(|s| field(&s.spec, "requiredNodeSelectorTerm").is_some_and(|r| !r.is_null())) {
        let required = |pod: &Value| at(pod, REQUIRED).map(tidied);
        diff(REQUIRED_PATH, "", required(ours).as_ref(), required(stored).as_ref(), Ctx::default(), out);
    }
}

/// What of `pod` a subset's patch names, as storage keeps it. Containers are defaulted whole
/// before the patched fields are taken (a default may follow from a field the patch does not name).
fn patched(pod: &Value, patch: &Value) -> Value {
    let mut defaulted = pod.clone();
    if let Some(spec) = defaulted.get_mut("spec") {
        for key in ["initContainers", "containers"] {
            if let Some(Value::Array(items)) = spec.get_mut(key) {
                for c in items.iter_mut() {
                    *c = normalized_container(c, pod, None);
                }
            }
        }
    }
    let mut part = project(&defaulted, patch, "");
    tidy(&mut part, false);
    part
}

/// The part of `value` that a strategic merge patch names: of an object the keys the patch has
/// (its `$` directives left out), of a list Kubernetes merges by a key the entries the patch names,
/// anything else whole. `key` is the field the value is under.
fn project(value: &Value, patch: &Value, key: &str) -> Value {
    match (value, patch) {
        (Value::Object(v), Value::Object(p)) => Value::Object(
            p.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .filter_map(|(k, pk)| Some((k.clone(), project(v.get(k)?, pk, k))))
                .collect(),
        ),
        (Value::Array(items), Value::Array(patches)) => {
            let keyed: Option<Vec<(String, &Value)>> =
                patches.iter().map(|p| Some((entry_key(key, p)?, p))).collect();
            let Some(keyed) = keyed else { return value.clone() };
            Value::Array(
                keyed
                    .iter()
                    .filter_map(|(k, p)| {
                        let item = items.iter().find(|i| entry_key(key, i).as_deref() == Some(k))?;
                        Some(project(item, p, ""))
                    })
                    .collect(),
            )
        }
        _ => value.clone(),
    }
}

/// Launch priority: the barrier env of each container both Pods have. Its ConfigMap is named after
/// the Pod, which each side names on its own when the review has only `generateName`: a reference
/// to the Pod's own ConfigMap reads `<pod>-barrier` on both sides, any other name is compared.
fn launch_priority(ours: &Value, stored: &Value, out: &mut Vec<FieldDiff>) {
    let barrier = |pod: &Value, container: &Value| {
        let mut env = tidied(list(container, "env").iter().find(|e| name_of(e) == Some(BARRIER_ENV))?);
        let own =
            format!("{}-barrier", at(pod, &["metadata", "name"]).and_then(Value::as_str).unwrap_or_default());
        if let Some(Value::Object(reference)) = env.pointer_mut("/valueFrom/configMapKeyRef")
            && reference.get("name").and_then(Value::as_str) == Some(own.as_str())
        {
            reference.insert("name".into(), json!("<pod>-barrier"));
        }
        Some(env)
    };
    let theirs_by_name = containers_by_name(stored);
    for container in spec_list(ours, "containers") {
        let Some(name) = name_of(container) else { continue };
        let Some(theirs) = theirs_by_name.get(name) else { continue };
        let path = child(&format!("{}.env", child("spec.containers", name)), BARRIER_ENV);
        let (a, b) = (barrier(ours, container), barrier(stored, theirs));
        diff(&path, "", a.as_ref(), b.as_ref(), Ctx::default(), out);
    }
}

/// PersistentPodState: its annotation, the `nodeSelector` entries either Pod added or changed
/// (but the keys a matched subset's patch names), and the preferred node terms either Pod added
/// that are not a matched subset's (in order, as a whole).
fn persistent_pod_state(
    original: &Value,
    ours: &Value,
    stored: &Value,
    spreads: SpreadLookup,
    out: &mut Vec<FieldDiff>,
) {
    annotation(INJECTED_ANNOTATION, ours, stored, out);
    let subsets = involved_subsets(ours, stored, spreads);
    let selector = |pod: &Value| {
        at(pod, &["spec", "nodeSelector"]).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let (before, a, b) = (selector(original), selector(ours), selector(stored));
    let patched_keys: BTreeSet<&str> = subsets
        .iter()
        .filter_map(|s| at(&s.spec, &["patch", "spec", "nodeSelector"]).and_then(Value::as_object))
        .flat_map(|m| m.keys().map(String::as_str))
        .collect();
    let keys: BTreeSet<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| !patched_keys.contains(k.as_str()))
        .filter(|k| before.get(*k) != a.get(*k) || before.get(*k) != b.get(*k))
        .collect();
    for key in keys {
        diff(&child("spec.nodeSelector", key), "", a.get(key), b.get(key), Ctx::default(), out);
    }
    // Both steps append: the terms past the review's own are added, unless something rewrote the
    // list (then all of it is compared). A subset's own terms are taken away once each.
    let own = tidied_list(original, PREFERRED);
    let subset_terms: Vec<Value> =
        subsets.iter().flat_map(|s| list(&s.spec, "preferredNodeSelectorTerms")).map(tidied).collect();
    let added = |pod: &Value| {
        let terms = tidied_list(pod, PREFERRED);
        let skip = if terms.starts_with(&own) { own.len() } else { 0 };
        let mut left = subset_terms.clone();
        let terms: Vec<Value> = (terms.into_iter().skip(skip))
            .filter(|t| match left.iter().position(|l| l == t) {
                Some(i) => {
                    left.swap_remove(i);
                    false
                }
                None => true,
            })
            .collect();
        Value::Array(terms)
    };
    diff(PREFERRED_PATH, "", Some(&added(ours)), Some(&added(stored)), Ctx::default(), out);
}

/// Enhanced liveness: the probe-context annotation, and the liveness probe of each of the review's
/// own containers (taken off by the step) on both sides.
fn enhanced_liveness(original: &Value, ours: &Value, stored: &Value, out: &mut Vec<FieldDiff>) {
    json_annotation_diff(CONTEXT_ANNOTATION, &[], ours, stored, out);
    let (in_ours, in_stored) = (containers_by_name(ours), containers_by_name(stored));
    // The probe alone, defaulted as in its container.
    let probe = |containers: &HashMap<&str, &Value>, pod: &Value, name: &str| {
        let probe = field(containers.get(name)?, "livenessProbe")?;
        normalized_container(&json!({"livenessProbe": probe}), pod, None).get("livenessProbe").cloned()
    };
    for name in spec_list(original, "containers").iter().filter_map(name_of) {
        let path = format!("{}.livenessProbe", child("spec.containers", name));
        let (a, b) = (probe(&in_ours, ours, name), probe(&in_stored, stored, name));
        diff(&path, "livenessProbe", a.as_ref(), b.as_ref(), Ctx::default(), out);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::Settings;
    use crate::admission::agreement::{Lookups, PodAgreement, compare_pod};
    use crate::admission::feature_gates::{FeatureGates, Gate};
    use crate::cluster::Snapshot;

    const WS: &str = "apps.kruise.io/matched-workloadspread";

    /// Pod `web-0` of Advanced StatefulSet `web` in `ns`, in a cluster where every step has
    /// something to do: a WorkloadSpread (subset `a`: a toleration, a preferred and a required node
    /// term, a patch of a label and the app's CPU limit), a PodUnavailableBudget, a
    /// PersistentPodState (zone required, host preferred), a PodProbeMarker; the Pod asks for
    /// ordered launch and enhanced liveness. The cluster, the Pod as sent and ours.
    fn decided() -> (Snapshot, Value, Value) {
        let owner = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web", "uid": "s1", "controller": true});
        let target = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "name": "web"});
        let cluster = Snapshot::from_objects([
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
                "metadata": {"name": "web", "namespace": "ns", "uid": "s1"}, "spec": {"replicas": 3}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
                "metadata": {"name": "spread", "namespace": "ns", "resourceVersion": "7"},
                "spec": {"targetRef": target, "subsets": [
                    {"name": "a", "maxReplicas": 5,
                     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
                     "preferredNodeSelectorTerms": [{"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}],
                     "requiredNodeSelectorTerm": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
                     "patch": {"metadata": {"labels": {"subset": "a"}}, "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1"}}}]}}},
                    {"name": "b"}]}}),
            json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
                "metadata": {"name": "web-pub", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
                "metadata": {"name": "web-state", "namespace": "ns"},
                "spec": {"targetRef": target, "requiredPersistentTopology": {"nodeTopologyKeys": ["zone"]},
                         "preferredPersistentTopology": [{"weight": 100, "preference": {"nodeTopologyKeys": ["host"]}}]},
                "status": {"podStates": {"web-0": {"nodeName": "n1", "nodeTopologyLabels": {"zone": "z1", "host": "n1"}}}}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
                "metadata": {"name": "warm", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
                "probes": [{"name": "warm", "containerName": "app", "podConditionType": "game.io/warm",
                            "probe": {"exec": {"command": ["/warm.sh"]}}}]}}),
        ]);
        let original = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "ns", "labels": {"app": "web"}, "ownerReferences": [owner],
                "annotations": {"apps.kruise.io/container-launch-priority": "Ordered", "apps.kruise.io/using-enhanced-liveness": "true"}},
            "spec": {"containers": [
                {"name": "app", "image": "web:1", "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}}},
                {"name": "helper", "image": "helper:1"}]}});
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "ns", "name": "web-0", "operation": "CREATE", "userInfo": {"username": "u"}, "object": original}});
        let gates = [(Gate::EnhancedLivenessProbe, true), (Gate::EnablePodProbeMarkerOnServerless, true)];
        let settings = Settings { gates: FeatureGates::from_flags(&gates), ..Settings::default() };
        let ours = crate::admission::pod::tests::mutated(&cluster, review, &settings);
        (cluster, original, ours)
    }

    /// Ours as the API server stores it: named already, given a uid, its containers defaulted.
    fn stored(ours: &Value) -> Value {
        let mut pod = ours.clone();
        pod["metadata"]["uid"] = json!("0b7f");
        pod["metadata"]["creationTimestamp"] = json!("2024-05-01T12:00:07Z");
        for c in pod["spec"]["containers"].as_array_mut().unwrap() {
            c["imagePullPolicy"] = json!("IfNotPresent");
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["terminationMessagePolicy"] = json!("File");
        }
        pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("1000m");
        pod["spec"]["containers"][0]["resources"]["requests"] = json!({"cpu": "1"});
        pod["status"] = json!({"phase": "Pending"});
        pod
    }

    fn verdict(cluster: &Snapshot, original: &Value, ours: &Value, stored: &Value) -> PodAgreement {
        let sidecarset = |_: &str| None;
        let workload_spread =
            |namespace: &str, name: &str| cluster.get("apps.kruise.io", "WorkloadSpread", namespace, name);
        compare_pod(
            original,
            ours,
            stored,
            &Lookups { sidecarset: &sidecarset, workload_spread: &workload_spread },
        )
    }

    /// Each step's disagreeing paths, for the steps that disagree.
    fn disagreements(verdict: &PodAgreement) -> Vec<(&'static str, Vec<String>)> {
        (verdict.steps.iter())
            .filter(|s| !s.agrees())
            .map(|s| (s.step.as_str(), s.diffs.iter().map(|d| d.path.clone()).collect()))
            .collect()
    }

    fn annotation_mut(pod: &mut Value) -> &mut serde_json::Map<String, Value> {
        pod["metadata"]["annotations"].as_object_mut().unwrap()
    }

    #[test]
    fn a_pod_every_step_changed_agrees_step_by_step_when_stored_so() {
        let (cluster, original, ours) = decided();
        // Every step did its part.
        let a = ours["metadata"]["annotations"].as_object().unwrap();
        for key in [
            WS,
            RELATED_PUB_ANNOTATION,
            INJECTED_ANNOTATION,
            CONTEXT_ANNOTATION,
            PROBES_ANNOTATION,
            LIST_ANNOTATION,
        ] {
            assert!(a.contains_key(key), "{key}: {ours:#}");
        }
        assert_eq!(ours["spec"]["readinessGates"], json!([{"conditionType": "KruisePodReady"}]));
        assert_eq!(ours["spec"]["containers"][1]["env"][0]["name"], BARRIER_ENV);
        assert_eq!(ours["spec"]["nodeSelector"], json!({"zone": "z1"}));
        assert_eq!(items_at(&ours, PREFERRED).len(), 2, "the subset's term and the state's");

        let result = verdict(&cluster, &original, &ours, &stored(&ours));
        assert_eq!(result.steps.iter().map(|s| s.step).collect::<Vec<_>>(), Step::ALL);
        assert_eq!(disagreements(&result), Vec::<(&str, Vec<String>)>::new());
        assert!(result.agrees() && result.sidecarsets.is_empty());
    }

    #[test]
    fn a_pod_no_step_changed_agrees_on_every_step() {
        let original =
            json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"containers": [{"name": "app"}]}});
        let result = verdict(&Snapshot::default(), &original, &original, &stored(&original));
        assert!(result.agrees(), "{result:#?}");
    }

    /// Kruise stored the Pod of [`decided`] with `change` made, in one step's fields: that step
    /// disagrees on `paths` and every other step agrees.
    fn only(step: &str, paths: &[&str], change: impl FnOnce(&mut Value)) {
        let (cluster, original, ours) = decided();
        let mut pod = stored(&ours);
        change(&mut pod);
        let result = verdict(&cluster, &original, &ours, &pod);
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(disagreements(&result), [(step, paths)], "{step}");
    }

    fn node_affinity(pod: &mut Value) -> &mut serde_json::Map<String, Value> {
        pod["spec"]["affinity"]["nodeAffinity"].as_object_mut().unwrap()
    }

    #[test]
    fn readiness_gate_disagrees_on_its_gate() {
        only("readiness-gate", &["spec.readinessGates[KruisePodReady]"], |p| {
            p["spec"].as_object_mut().unwrap().remove("readinessGates");
        });
    }

    #[test]
    fn workload_spread_disagrees_on_its_annotation_and_what_the_subset_gives() {
        only(
            "workload-spread",
            &["metadata.annotations[apps.kruise.io/matched-workloadspread].subset"],
            |p| {
                annotation_mut(p).insert(WS.into(), json!(r#"{"name":"spread","subset":"b"}"#));
            },
        );
        let patched = [
            "spec.tolerations[spread/a#0]",
            "metadata.labels.subset",
            "spec.containers[app].resources.limits.cpu",
        ];
        only("workload-spread", &patched, |p| {
            p["spec"]["tolerations"] = json!([]);
            p["metadata"]["labels"]["subset"] = json!("b");
            p["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("2");
        });
        let terms = [&format!("{PREFERRED_PATH}[spread/a#0]"), REQUIRED_PATH];
        only("workload-spread", &terms, |p| {
            let node = node_affinity(p);
            node.remove("requiredDuringSchedulingIgnoredDuringExecution");
            node["preferredDuringSchedulingIgnoredDuringExecution"].as_array_mut().unwrap().remove(0);
        });
    }

    #[test]
    fn launch_priority_disagrees_on_a_barrier() {
        let path = "spec.containers[app].env[KRUISE_CONTAINER_BARRIER].valueFrom.configMapKeyRef.key";
        only("launch-priority", &[path], |p| {
            p["spec"]["containers"][0]["env"][0]["valueFrom"]["configMapKeyRef"]["key"] = json!("p_-1");
        });
    }

    #[test]
    fn related_pub_disagrees_on_its_annotation() {
        only("related-pub", &["metadata.annotations[kruise.io/related-pub]"], |p| {
            annotation_mut(p).remove(RELATED_PUB_ANNOTATION);
        });
    }

    #[test]
    fn persistent_pod_state_disagrees_on_its_selector_terms_and_annotation() {
        only("persistent-pod-state", &["spec.nodeSelector[zone]", PREFERRED_PATH], |p| {
            p["spec"]["nodeSelector"]["zone"] = json!("z2");
            node_affinity(p)["preferredDuringSchedulingIgnoredDuringExecution"]
                .as_array_mut()
                .unwrap()
                .remove(1);
        });
        only(
            "persistent-pod-state",
            &["metadata.annotations[kruise.io/injected-persistent-pod-state]"],
            |p| {
                annotation_mut(p).remove(INJECTED_ANNOTATION);
            },
        );
    }

    #[test]
    fn enhanced_liveness_disagrees_on_its_annotation_and_the_probe_left_in_place() {
        let paths = [
            "metadata.annotations[apps.kruise.io/container-probe-context]",
            "spec.containers[app].livenessProbe",
        ];
        only("enhanced-liveness", &paths, |p| {
            annotation_mut(p).remove(CONTEXT_ANNOTATION);
            p["spec"]["containers"][0]["livenessProbe"] = json!({"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
        });
    }

    #[test]
    fn probe_marker_disagrees_on_its_annotations() {
        let paths = [
            "metadata.annotations[kruise.io/podprobe]",
            "metadata.annotations[kruise.io/podprobemarker-list]",
        ];
        only("probe-marker", &paths, |p| {
            annotation_mut(p).remove(PROBES_ANNOTATION);
            annotation_mut(p).remove(LIST_ANNOTATION);
        });
    }

    /// A JSON annotation disagrees on the field inside it; the `uid` each side draws for a Pod
    /// without a name is not compared.
    #[test]
    fn json_annotations_compare_field_by_field_without_the_drawn_uid() {
        let (cluster, original, ours) = decided();
        let mut ours = ours;
        annotation_mut(&mut ours).insert(WS.into(), json!(r#"{"name":"spread","subset":"a","uid":"1f0c"}"#));
        let mut pod = stored(&ours);
        annotation_mut(&mut pod).insert(WS.into(), json!(r#"{"name":"spread","subset":"a","uid":"77aa"}"#));
        assert!(verdict(&cluster, &original, &ours, &pod).agrees());
        annotation_mut(&mut pod).insert(WS.into(), json!("not JSON {"));
        let result = verdict(&cluster, &original, &ours, &pod);
        let diffs = &result.steps[1].diffs;
        assert_eq!(
            diffs.iter().map(|d| (d.path.as_str(), &d.stored)).collect::<Vec<_>>(),
            [("metadata.annotations[apps.kruise.io/matched-workloadspread]", &json!("not JSON {"))]
        );
    }

    /// The barrier ConfigMap is named after the Pod, which each side names on its own for a Pod with
    /// only `generateName`: the Pod's own ConfigMap agrees whatever the name, another one does not.
    #[test]
    fn a_barrier_names_the_pods_own_config_map_whatever_the_pods_name() {
        let pod = |name: &str, config_map: &str| {
            let env = json!([{"name": BARRIER_ENV, "valueFrom": {"configMapKeyRef": {"name": config_map, "key": "p_0"}}}]);
            json!({"metadata": {"name": name, "generateName": "web-"}, "spec": {"containers": [
                {"name": "app", "env": env}, {"name": "helper", "env": env}]}})
        };
        let original = json!({"metadata": {"generateName": "web-"}, "spec": {"containers": [{"name": "app"}, {"name": "helper"}]}});
        let ours = pod("web-bcdfg", "web-bcdfg-barrier");
        let steps = |stored: &Value| disagreements(&verdict(&Snapshot::default(), &original, &ours, stored));
        assert_eq!(steps(&pod("web-k2x4q", "web-k2x4q-barrier")), Vec::<(&str, Vec<String>)>::new());
        let path = |c: &str| {
            format!("spec.containers[{c}].env[KRUISE_CONTAINER_BARRIER].valueFrom.configMapKeyRef.name")
        };
        assert_eq!(
            steps(&pod("web-k2x4q", "elsewhere")),
            [("launch-priority", vec![path("app"), path("helper")])]
        );
    }

    /// A container only one side has is the SidecarSet verdict's: its barrier is not compared again.
    #[test]
    fn a_container_only_one_side_has_is_not_launch_prioritys() {
        let (cluster, original, ours) = decided();
        let mut pod = stored(&ours);
        pod["spec"]["containers"].as_array_mut().unwrap().remove(1);
        let result = verdict(&cluster, &original, &ours, &pod);
        assert!(result.steps[3].agrees(), "{:#?}", result.steps[3]);
    }
}
