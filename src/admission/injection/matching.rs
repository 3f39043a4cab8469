//! Which SidecarSets a pod gets (docs/sidecarset.md#2-which-sidecarsets-match): paused, namespaceSelector
//! (read from the Namespace object), selector (empty matches nothing, an invalid operator is an error),
//! canaries replacing their base.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use crate::api::sidecarset::{LabelSelector, SidecarSet};
use crate::api::tree::{Json, Lookup, Object};
use crate::cluster::Snapshot;

/// Pod or namespace labels, as found in `metadata.labels` (non-string values never match).
pub fn labels_of<'p, 'a>(object: &'p Json<'a>) -> Option<&'p Object<'a>> {
    object.at(&["metadata", "labels"])?.as_object()
}

fn label<'l>(labels: Option<&Lookup<'l, '_>>, key: &str) -> Option<&'l str> {
    labels?.get(key)?.as_str()
}

/// The usual matchLabels AND matchExpressions over labels as found in JSON (non-string values
/// never match). The selector must have passed [`LabelSelector::check`].
pub fn selector_matches(selector: &LabelSelector, labels: Option<&Lookup<'_, '_>>) -> bool {
    selector.matches_by(|k| label(labels, k))
}

/// The pod as matching sees it: its labels and its Namespace object (read once per pod).
pub struct PodTarget<'a> {
    /// Read by every candidate's selector: hashed once when there are many.
    pub labels: Option<Lookup<'a, 'a>>,
    /// `None` when the Namespace is not in the snapshot.
    pub namespace: Option<Arc<Value>>,
}

impl<'a> PodTarget<'a> {
    pub fn new(pod: &'a Json<'a>, namespace: &str, cluster: &'a Snapshot) -> Self {
        PodTarget {
            labels: labels_of(pod).map(Object::lookup),
            namespace: cluster.get("", "Namespace", "", namespace),
        }
    }
}

/// The SidecarSets that select namespaces by label and would be candidates for `pod` were its
/// Namespace known, in name order (none when it is known). [`matches`] treats a Namespace missing
/// from the snapshot as matching no namespaceSelector; in live mode that is a Namespace created
/// moments ago, whose Pods then start without their sidecars (the server counts and warns), and
/// offline a Namespace the folder lacks (`dry-run` and `inject` warn, naming these).
pub fn skipped_for_unknown_namespace<'c>(
    pod: &Json<'_>,
    namespace: &str,
    cluster: &'c Snapshot,
) -> Vec<&'c str> {
    if namespace.is_empty() || cluster.contains("", "Namespace", "", namespace) {
        return Vec::new();
    }
    let candidates = cluster.sidecarset_index().candidates(namespace, labels_of(pod));
    candidates
        .into_iter()
        .filter(|set| set.spec.namespace_selector.is_some() && !set.is_paused())
        .map(|set| set.name())
        .collect()
}

/// Does `set` match the pod (docs/sidecarset.md#2-which-sidecarsets-match, rules 1–3)? `Err` only for an
/// invalid `spec.selector`.
pub fn matches(set: &SidecarSet, pod: &PodTarget) -> Result<bool, String> {
    if set.is_paused() {
        return Ok(false);
    }
    if let Some(ns_selector) = &set.spec.namespace_selector {
        // A missing Namespace or an invalid namespaceSelector means no match, silently.
        let Some(ns) = &pod.namespace else { return Ok(false) };
        // The Namespace is decoded once per pod (`PodTarget::new`): its labels are read in place.
        let ns_labels = ns.get("metadata").and_then(|m| m.get("labels"));
        let ns_label = |k: &str| ns_labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        if ns_selector.check().is_err() || !ns_selector.matches_by(ns_label) {
            return Ok(false);
        }
    }
    let Some(selector) = set.spec.selector.as_ref().filter(|s| !s.is_empty()) else { return Ok(false) };
    selector.check().map_err(|e| format!("SidecarSet {} has an invalid spec.selector: {e}", set.name()))?;
    Ok(selector_matches(selector, pod.labels.as_ref()))
}

/// Drop the bases named by matched canaries (HEAD behaviour): the canary replaces them for this pod.
pub fn replace_canary_bases(matched: &mut Vec<&Arc<SidecarSet>>) {
    let bases: BTreeSet<String> = matched.iter().filter_map(|s| s.canary_base()).map(str::to_owned).collect();
    if !bases.is_empty() {
        matched.retain(|s| !bases.contains(s.name()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sel(v: Value) -> LabelSelector {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_unknown_namespace_is_noticed_only_when_a_namespace_selector_would_be_read() {
        let set = |name: &str, ns_selector: Value| {
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": name},
                   "spec": {"selector": {"matchLabels": {"app": "web"}}, "namespaceSelector": ns_selector,
                            "containers": [{"name": "s", "image": "i"}]}})
        };
        let pod = Json::from(json!({"metadata": {"labels": {"app": "web"}}}));
        let known = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "known"}});
        let by_label =
            Snapshot::from_objects([set("a", json!({"matchLabels": {"team": "a"}})), known.clone()]);
        assert_eq!(skipped_for_unknown_namespace(&pod, "newborn", &by_label), ["a"]);
        assert!(skipped_for_unknown_namespace(&pod, "known", &by_label).is_empty());
        let other = Json::from(json!({"metadata": {"labels": {"app": "db"}}}));
        assert!(skipped_for_unknown_namespace(&other, "newborn", &by_label).is_empty(), "no candidate");
        let everywhere = Snapshot::from_objects([set("a", Value::Null), known]);
        assert!(
            skipped_for_unknown_namespace(&pod, "newborn", &everywhere).is_empty(),
            "no namespaceSelector"
        );
    }

    #[test]
    fn selector_semantics() {
        let pod = Json::from(json!({"metadata": {"labels": {"app": "web", "tier": "front"}}}));
        let l = labels_of(&pod).map(Object::lookup);
        let l = l.as_ref();
        assert!(selector_matches(&sel(json!({"matchLabels": {"app": "web"}})), l));
        assert!(!selector_matches(&sel(json!({"matchLabels": {"app": "web", "x": "y"}})), l));
        assert!(selector_matches(
            &sel(json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "front"]}]})),
            l
        ));
        assert!(selector_matches(
            &sel(json!({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front2"]}]})),
            l
        ));
        assert!(selector_matches(
            &sel(json!({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["x"]}]})),
            l
        ));
        assert!(selector_matches(
            &sel(json!({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]})),
            l
        ));
        assert!(!selector_matches(
            &sel(json!({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})),
            l
        ));
        assert!(
            sel(json!({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]}))
                .check()
                .is_err()
        );
        assert!(sel(json!({"matchExpressions": [{"key": "app", "operator": "In"}]})).check().is_err());
    }

    #[test]
    fn empty_selector_matches_nothing_and_invalid_one_is_an_error() {
        let cluster = Snapshot::default();
        let pod = Json::from(json!({"metadata": {"labels": {"app": "web"}}}));
        let target = PodTarget::new(&pod, "default", &cluster);
        let mut set = SidecarSet::default();
        set.spec.selector = Some(LabelSelector::default());
        assert_eq!(matches(&set, &target), Ok(false));
        set.spec.selector =
            Some(sel(json!({"matchExpressions": [{"key": "app", "operator": "Like", "values": ["w"]}]})));
        assert!(matches(&set, &target).is_err());
    }
}
