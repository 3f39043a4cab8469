//! The SidecarSet index, built once per [`Snapshot`] (lazily, then shared): a pod looks only at the
//! SidecarSets that could match it, never at all of them.
//!
//! Two levels, like Kruise's `namespace` field index plus a label index on top:
//! - namespace: a SidecarSet whose namespaceSelector pins `kubernetes.io/metadata.name` (matchLabels,
//!   or the first `In` expression on that key) is filed under those namespaces, others under
//!   "cluster scope";
//! - labels: inside each namespace bucket, under one `(key, value)` its selector requires (a
//!   matchLabels entry, else the values of an `In` expression). Selectors that require no specific
//!   value (only `NotIn`/`Exists`/`DoesNotExist`), or that are invalid (their error must still
//!   reach the pods they would be checked against), go to the bucket's fallback list.
//!
//! Paused SidecarSets and those with a nil or empty selector can never match and are left out.
//! The index is only a pre-filter: every candidate is still checked in full by `matching`.

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;
use serde_json::{Map, Value};

use super::matching::check_selector;
use crate::api::sidecarset::{GROUP, KIND, LabelSelector, NAMESPACE_NAME_LABEL, SidecarSet};
use crate::cluster::Snapshot;

#[derive(Debug, Default)]
struct Bucket {
    by_label: HashMap<String, HashMap<String, Vec<u32>>>,
    fallback: Vec<u32>,
}

impl Bucket {
    fn add(&mut self, id: u32, selector: &LabelSelector) {
        let valid = check_selector(selector).is_ok();
        if valid && let Some((k, v)) = selector.match_labels.iter().next() {
            self.by_label.entry(k.clone()).or_default().entry(v.clone()).or_default().push(id);
            return;
        }
        if valid && let Some(r) = selector.match_expressions.iter().find(|r| r.operator == "In") {
            let values = self.by_label.entry(r.key.clone()).or_default();
            for v in &r.values {
                values.entry(v.clone()).or_default().push(id);
            }
            return;
        }
        self.fallback.push(id);
    }

    fn collect(&self, labels: Option<&Map<String, Value>>, out: &mut Vec<u32>) {
        out.extend_from_slice(&self.fallback);
        for (k, v) in labels.into_iter().flatten() {
            if let Some(ids) = v.as_str().and_then(|v| self.by_label.get(k)?.get(v)) {
                out.extend_from_slice(ids);
            }
        }
    }
}

/// SidecarSets of one snapshot, in name order, with the buckets that point into them.
#[derive(Debug, Default)]
pub struct SidecarSetIndex {
    sets: Vec<Arc<SidecarSet>>,
    namespaced: HashMap<String, Bucket>,
    cluster: Bucket,
    /// SidecarSets that could not be read (a message each), for logs.
    unreadable: Vec<String>,
    /// `resourcesPolicy.targetContainersNameRegex` patterns, compiled once (compiling per pod
    /// would dominate the decision's cost).
    name_regexes: HashMap<String, Regex>,
}

impl SidecarSetIndex {
    pub fn build(snapshot: &Snapshot) -> Self {
        let mut index = SidecarSetIndex::default();
        // `list` yields name order (cluster-scoped objects share the empty namespace).
        for object in snapshot.list(GROUP, KIND, None) {
            match SidecarSet::from_value(object) {
                Ok(set) => index.sets.push(Arc::new(set)),
                Err(e) => index.unreadable.push(e),
            }
        }
        index.sets.sort_by(|a, b| a.name().cmp(b.name()));
        for set in &index.sets {
            for policy in set.spec.init_containers.iter().chain(&set.spec.containers).filter_map(|c| c.resources_policy.as_ref()) {
                let pattern = &policy.target_containers_name_regex;
                if !index.name_regexes.contains_key(pattern)
                    && let Ok(regex) = Regex::new(pattern)
                {
                    index.name_regexes.insert(pattern.clone(), regex);
                }
            }
        }
        for (id, set) in index.sets.iter().enumerate() {
            let Some(selector) = set.spec.selector.as_ref().filter(|s| !s.is_empty()) else { continue };
            if set.is_paused() {
                continue;
            }
            let id = id as u32;
            match namespaces_of(set.spec.namespace_selector.as_ref()) {
                Some(namespaces) => {
                    for ns in namespaces {
                        index.namespaced.entry(ns.to_owned()).or_default().add(id, selector);
                    }
                }
                None => index.cluster.add(id, selector),
            }
        }
        index
    }

    /// The SidecarSets that could match a pod in `namespace` with `labels`, in name order, each once.
    pub fn candidates(&self, namespace: &str, labels: Option<&Map<String, Value>>) -> Vec<Arc<SidecarSet>> {
        let mut ids = Vec::new();
        if let Some(bucket) = self.namespaced.get(namespace) {
            bucket.collect(labels, &mut ids);
        }
        self.cluster.collect(labels, &mut ids);
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter().map(|id| Arc::clone(&self.sets[id as usize])).collect()
    }

    /// A compiled `targetContainersNameRegex` of a live SidecarSet (restored revisions may use
    /// others, which are compiled on use).
    pub fn name_regex(&self, pattern: &str) -> Option<&Regex> {
        self.name_regexes.get(pattern)
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }

    /// Why some SidecarSets were left out (they cannot be decoded).
    pub fn unreadable(&self) -> &[String] {
        &self.unreadable
    }
}

/// Kruise's field-index values: the namespaces a namespaceSelector pins, or `None` (cluster scope).
fn namespaces_of(selector: Option<&LabelSelector>) -> Option<Vec<&str>> {
    let selector = selector?;
    if let Some(ns) = selector.match_labels.get(NAMESPACE_NAME_LABEL) {
        return Some(vec![ns.as_str()]);
    }
    let r = selector.match_expressions.iter().find(|r| r.key == NAMESPACE_NAME_LABEL && r.operator == "In")?;
    Some(r.values.iter().map(String::as_str).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": name}, "spec": spec})
    }

    fn names(v: Vec<Arc<SidecarSet>>) -> Vec<String> {
        v.iter().map(|s| s.name().to_owned()).collect()
    }

    #[test]
    fn candidates_come_from_namespace_and_label_buckets_in_name_order() {
        let snapshot = Snapshot::from_objects([
            set("z-web", json!({"selector": {"matchLabels": {"app": "web"}}})),
            set(
                "a-web-in-team",
                json!({"selector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}}),
            ),
            set("b-db", json!({"selector": {"matchLabels": {"app": "db"}}})),
            set("c-exists", json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}})),
            set("d-in", json!({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "front"]}]}})),
            set("e-empty", json!({"selector": {}})),
            set("f-paused", json!({"selector": {"matchLabels": {"app": "web"}}, "injectionStrategy": {"paused": true}})),
            set("g-invalid", json!({"selector": {"matchLabels": {"app": "nope"}, "matchExpressions": [{"key": "a", "operator": "Bad"}]}})),
            set(
                "h-ns-expr",
                json!({"selector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["other", "team"]}]}}),
            ),
        ]);
        let index = SidecarSetIndex::build(&snapshot);
        let pod = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
        assert_eq!(names(index.candidates("team", labels)), ["a-web-in-team", "c-exists", "d-in", "g-invalid", "h-ns-expr", "z-web"]);
        assert_eq!(names(index.candidates("default", labels)), ["c-exists", "d-in", "g-invalid", "z-web"]);
        assert_eq!(names(index.candidates("default", None)), ["c-exists", "g-invalid"]);
    }
}
