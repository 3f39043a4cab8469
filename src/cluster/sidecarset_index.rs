//! The SidecarSet index of a [`Snapshot`]: a pod looks only at the SidecarSets that could match it,
//! never at all of them. Built from scratch for a folder, kept up to date from the previous
//! snapshot's index in live mode (a change of one SidecarSet decodes and refiles only that one).
//!
//! Two levels, like Kruise's `namespace` field index plus a label index on top:
//! - namespace: a SidecarSet whose namespaceSelector pins `kubernetes.io/metadata.name` (matchLabels,
//!   or the first `In` expression on that key) is filed under those namespaces, others under
//!   "cluster scope";
//! - labels: inside each namespace bucket, under one `(key, value)` its selector requires (a
//!   matchLabels entry, else the values of an `In` expression), else under the key of an `Exists`
//!   expression (a pod without that label key never sees it). Selectors that require no label
//!   (only `NotIn`/`DoesNotExist`), or that are invalid (their error must still reach the pods
//!   they would be checked against), go to the bucket's fallback list, checked for every pod.
//!
//! Paused SidecarSets and those with a nil or empty selector can never match and are left out.
//! The index is only a pre-filter: every candidate is still checked in full by `matching`.

use std::sync::Arc;

use serde_json::Value;

use crate::api::names::dns1123_subdomain_errors;
use crate::api::pattern::Pattern;
use crate::api::sidecarset::{GROUP, KIND, LabelSelector, NAMESPACE_NAME_LABEL, SidecarSet};
use crate::api::tree::Object;
use crate::cluster::shared_map::SharedMap;
use crate::cluster::{ObjectKey, Snapshot};

/// A SidecarSet's place in the index: its name, then its object's namespace (empty: SidecarSets
/// are cluster-scoped, but a folder may hold anything). Name order is the order of injection
/// within each namespace group ([`SidecarSetIndex::candidates`]).
type SetKey = (String, String);

/// SidecarSets filed in one place, in name order.
type Members = SharedMap<SetKey, Arc<SidecarSet>>;

#[derive(Debug, Clone, Default)]
struct Bucket {
    /// label key -> label value -> the SidecarSets whose selector requires that pair.
    by_label: SharedMap<String, SharedMap<String, Members>>,
    /// label key -> the SidecarSets whose selector requires that key to exist (any value).
    by_key: SharedMap<String, Members>,
    fallback: Members,
}

/// Where a selector files a SidecarSet inside a bucket.
enum Slot<'a> {
    /// Under one label key, for each of these values.
    Label(&'a str, Vec<&'a str>),
    /// Under one label key, whatever its value.
    Key(&'a str),
    Fallback,
}

fn slot(selector: &LabelSelector) -> Slot<'_> {
    let valid = selector.check().is_ok();
    if valid && let Some((k, v)) = selector.match_labels.iter().next() {
        return Slot::Label(k, vec![v]);
    }
    if valid && let Some(r) = selector.match_expressions.iter().find(|r| r.operator == "In") {
        return Slot::Label(&r.key, r.values.iter().map(String::as_str).collect());
    }
    if valid && let Some(r) = selector.match_expressions.iter().find(|r| r.operator == "Exists") {
        return Slot::Key(&r.key);
    }
    Slot::Fallback
}

/// Add (`Some`) or remove (`None`) `key` in `members`.
fn edit(members: &mut Members, key: &SetKey, set: Option<&Arc<SidecarSet>>) {
    match set {
        Some(set) => {
            members.insert(key.clone(), Arc::clone(set));
        }
        None => {
            members.remove(key);
        }
    }
}

/// [`edit`] the members filed under `name` in `map`: the entry is made when a SidecarSet is added
/// and dropped when left empty.
fn edit_under(map: &mut SharedMap<String, Members>, name: &str, key: &SetKey, set: Option<&Arc<SidecarSet>>) {
    if set.is_some() && !map.contains_key(name) {
        map.insert(name.to_owned(), SharedMap::default());
    }
    let Some(members) = map.get_mut(name) else { return };
    edit(members, key, set);
    if members.is_empty() {
        map.remove(name);
    }
}

impl Bucket {
    fn is_empty(&self) -> bool {
        self.by_label.is_empty() && self.by_key.is_empty() && self.fallback.is_empty()
    }

    /// File (`Some`) or unfile (`None`) a SidecarSet; entries left empty are dropped, so an index
    /// edited into some state is the index built from scratch for that state.
    fn edit(&mut self, slot: &Slot<'_>, key: &SetKey, set: Option<&Arc<SidecarSet>>) {
        let (label, values) = match slot {
            Slot::Fallback => return edit(&mut self.fallback, key, set),
            Slot::Key(label) => return edit_under(&mut self.by_key, label, key, set),
            Slot::Label(label, values) => (*label, values),
        };
        if set.is_some() && !self.by_label.contains_key(label) {
            self.by_label.insert(label.to_owned(), SharedMap::default());
        }
        let Some(by_value) = self.by_label.get_mut(label) else { return };
        for value in values {
            edit_under(by_value, value, key, set);
        }
        if by_value.is_empty() {
            self.by_label.remove(label);
        }
    }

    /// Append the SidecarSets filed for `labels`, in name order, each once.
    fn collect<'a>(&'a self, labels: Option<&Object<'_>>, out: &mut Vec<(&'a SetKey, &'a Arc<SidecarSet>)>) {
        let start = out.len();
        let mut lists = usize::from(!self.fallback.is_empty());
        out.extend(self.fallback.iter());
        for (k, v) in labels.into_iter().flat_map(Object::iter) {
            if let Some(members) = v.as_str().and_then(|v| self.by_label.get(k)?.get(v)) {
                lists += 1;
                out.extend(members.iter());
            }
            if let Some(members) = self.by_key.get(k) {
                lists += 1;
                out.extend(members.iter());
            }
        }
        // Each list is in name order and holds a SidecarSet once: with one list (most pods) that is
        // the answer; several are merged by a run-adaptive (stable) sort. What `out` held before is
        // another bucket's, never one of these, so the dedup cannot reach across.
        if lists > 1 {
            out[start..].sort_by(|a, b| a.0.cmp(b.0));
            out.dedup_by(|a, b| a.0 == b.0);
        }
    }
}

/// The SidecarSets of one snapshot with the buckets that file them. Cloning it is cheap (its maps
/// share their entries), so the index of the next snapshot is this one plus the SidecarSets that
/// changed: [`SidecarSetIndex::apply`].
#[derive(Debug, Clone, Default)]
pub struct SidecarSetIndex {
    /// Every SidecarSet object: decoded, or why it cannot be (kept for logs).
    sets: SharedMap<SetKey, Result<Arc<SidecarSet>, String>>,
    readable: usize,
    namespaced: SharedMap<String, Bucket>,
    cluster: Bucket,
    /// `resourcesPolicy.targetContainersNameRegex` patterns, compiled once (compiling per pod
    /// would dominate the decision's cost), with how many containers of decoded SidecarSets use
    /// each (a pattern no longer used is dropped).
    name_regexes: SharedMap<String, (Pattern, usize)>,
}

impl SidecarSetIndex {
    /// The index of every SidecarSet of `snapshot`: the same edits [`SidecarSetIndex::apply`]
    /// makes, from an empty index.
    pub fn build(snapshot: &Snapshot) -> Self {
        let mut index = SidecarSetIndex::default();
        for (key, object) in snapshot.entries(GROUP, KIND) {
            index.insert(key, &object);
        }
        index
    }

    /// This index with SidecarSet objects added or replaced (`Some`) and deleted (`None`), in
    /// order. Only those are decoded and refiled; everything else is shared with `self`.
    pub fn apply<'a>(&self, changes: impl IntoIterator<Item = (&'a ObjectKey, Option<&'a Value>)>) -> Self {
        let mut index = self.clone();
        for (key, object) in changes {
            match object {
                Some(object) => index.insert(key, object),
                None => index.remove(&set_key(key)),
            }
        }
        index
    }

    fn insert(&mut self, key: &ObjectKey, object: &Value) {
        let key = set_key(key);
        self.remove(&key);
        let set = SidecarSet::from_value(object).and_then(valid_name).map(Arc::new);
        if let Ok(set) = &set {
            self.readable += 1;
            self.file(&key, set, true);
        }
        self.sets.insert(key, set);
    }

    fn remove(&mut self, key: &SetKey) {
        if let Some(Ok(set)) = self.sets.remove(key) {
            self.readable -= 1;
            self.file(key, &set, false);
        }
    }

    /// File (`add`) or unfile a decoded SidecarSet: its buckets and its compiled patterns.
    /// Unfiling recomputes the places from the same decoded set, so it finds what filing made.
    fn file(&mut self, key: &SetKey, set: &Arc<SidecarSet>, add: bool) {
        for policy in set
            .spec
            .init_containers
            .iter()
            .chain(&set.spec.containers)
            .filter_map(|c| c.resources_policy.as_ref())
        {
            let pattern = policy.target_containers_name_regex.as_str();
            match (self.name_regexes.get(pattern).map(|(_, uses)| *uses), add) {
                (Some(1), false) => {
                    self.name_regexes.remove(pattern);
                }
                (Some(_), _) => {
                    if let Some((_, uses)) = self.name_regexes.get_mut(pattern) {
                        *uses = if add { *uses + 1 } else { *uses - 1 };
                    }
                }
                // An invalid pattern is reported when a pod meets it.
                (None, true) => {
                    if let Ok(regex) = Pattern::compile(pattern) {
                        self.name_regexes.insert(pattern.to_owned(), (regex, 1));
                    }
                }
                (None, false) => {}
            }
        }
        // Paused SidecarSets and nil or empty selectors never match: not filed.
        let Some(selector) = set.spec.selector.as_ref().filter(|s| !s.is_empty()) else { return };
        if set.is_paused() {
            return;
        }
        let slot = slot(selector);
        let filed = add.then_some(set);
        match namespaces_of(set.spec.namespace_selector.as_ref()) {
            Some(namespaces) => {
                for ns in namespaces {
                    if add && !self.namespaced.contains_key(ns) {
                        self.namespaced.insert(ns.to_owned(), Bucket::default());
                    }
                    let Some(bucket) = self.namespaced.get_mut(ns) else { continue };
                    bucket.edit(&slot, key, filed);
                    if bucket.is_empty() {
                        self.namespaced.remove(ns);
                    }
                }
            }
            None => self.cluster.edit(&slot, key, filed),
        }
    }

    /// The SidecarSets that could match a pod in `namespace` with `labels`, each once, in the order
    /// they are injected: those whose namespaceSelector pins `namespace` first, then the
    /// cluster-scoped ones, each group in name order. Kruise lists the same two groups in the same
    /// order (its `namespace` field index, then `clusterScope`) and leaves the order inside each
    /// undefined, so ours is one of the orders Kruise produces.
    pub fn candidates(&self, namespace: &str, labels: Option<&Object<'_>>) -> Vec<&Arc<SidecarSet>> {
        let mut found = Vec::new();
        if let Some(bucket) = self.namespaced.get(namespace) {
            bucket.collect(labels, &mut found);
        }
        self.cluster.collect(labels, &mut found);
        found.into_iter().map(|(_, set)| set).collect()
    }

    /// A compiled `targetContainersNameRegex` of a live SidecarSet (restored revisions may use
    /// others, which are compiled on use).
    pub fn name_regex(&self, pattern: &str) -> Option<&Pattern> {
        self.name_regexes.get(pattern).map(|(regex, _)| regex)
    }

    /// The decoded SidecarSets, in name order.
    pub fn sets(&self) -> impl Iterator<Item = &SidecarSet> {
        self.sets.values().filter_map(|s| s.as_deref().ok())
    }

    /// Number of decoded SidecarSets.
    pub fn len(&self) -> usize {
        self.readable
    }

    pub fn is_empty(&self) -> bool {
        self.readable == 0
    }

    /// Why some SidecarSets were left out (they cannot be decoded), in name order.
    pub fn unreadable(&self) -> Vec<&str> {
        self.sets.values().filter_map(|s| s.as_ref().err().map(String::as_str)).collect()
    }
}

fn set_key(key: &ObjectKey) -> SetKey {
    (key.name.clone(), key.namespace.clone())
}

/// Kruise's field-index values: the namespaces a namespaceSelector pins, or `None` (cluster scope).
fn namespaces_of(selector: Option<&LabelSelector>) -> Option<Vec<&str>> {
    let selector = selector?;
    if let Some(ns) = selector.match_labels.get(NAMESPACE_NAME_LABEL) {
        return Some(vec![ns.as_str()]);
    }
    let r =
        selector.match_expressions.iter().find(|r| r.key == NAMESPACE_NAME_LABEL && r.operator == "In")?;
    Some(r.values.iter().map(String::as_str).collect())
}

/// A SidecarSet whose name the apiserver would refuse (the cluster folder can hold anything) is
/// unreadable: injecting it would write a name into the comma-separated injected-list annotation
/// that splits differently when read back, so the webhook would patch its own output again.
fn valid_name(set: SidecarSet) -> Result<SidecarSet, String> {
    let errors = dns1123_subdomain_errors(set.name());
    if errors.is_empty() {
        Ok(set)
    } else {
        Err(format!(
            "SidecarSet {:?}: metadata.name is not a valid Kubernetes name: {}",
            set.name(),
            errors.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::tree::Json;
    use serde_json::json;

    fn set(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": name}, "spec": spec})
    }

    fn names(v: Vec<&Arc<SidecarSet>>) -> Vec<String> {
        v.iter().map(|s| s.name().to_owned()).collect()
    }

    #[test]
    fn a_name_the_apiserver_would_refuse_makes_the_sidecarset_unreadable() {
        let selector = json!({"selector": {"matchLabels": {"app": "web"}}});
        let index = SidecarSetIndex::build(&Snapshot::from_objects([
            set("a,b", selector.clone()),
            set("ok", selector),
        ]));
        let labels = Json::from(json!({"app": "web"}));
        assert_eq!(names(index.candidates("default", labels.as_object())), ["ok"]);
        assert_eq!(index.unreadable().len(), 1);
        assert!(index.unreadable()[0].contains("not a valid Kubernetes name"), "{:?}", index.unreadable());
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
            set(
                "c-exists",
                json!({"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}),
            ),
            set(
                "d-in",
                json!({"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x", "front"]}]}}),
            ),
            set("e-empty", json!({"selector": {}})),
            set(
                "f-paused",
                json!({"selector": {"matchLabels": {"app": "web"}}, "injectionStrategy": {"paused": true}}),
            ),
            set(
                "g-invalid",
                json!({"selector": {"matchLabels": {"app": "nope"}, "matchExpressions": [{"key": "a", "operator": "Bad"}]}}),
            ),
            set(
                "h-ns-expr",
                json!({"selector": {"matchLabels": {"app": "web"}},
                "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["other", "team"]}]}}),
            ),
            set(
                "i-not-in",
                json!({"selector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}}),
            ),
        ]);
        let index = SidecarSetIndex::build(&snapshot);
        let pod = Json::from(json!({"metadata": {"labels": {"app": "web", "tier": "front"}}}));
        let labels = pod.at(&["metadata", "labels"]).and_then(Json::as_object);
        // Namespace-pinned first, then cluster-scoped, each group by name.
        assert_eq!(
            names(index.candidates("team", labels)),
            ["a-web-in-team", "h-ns-expr", "c-exists", "d-in", "g-invalid", "i-not-in", "z-web"]
        );
        assert_eq!(
            names(index.candidates("default", labels)),
            ["c-exists", "d-in", "g-invalid", "i-not-in", "z-web"]
        );
        // `c-exists` needs the label key `app`, whatever its value; `i-not-in` needs no label.
        assert_eq!(names(index.candidates("default", None)), ["g-invalid", "i-not-in"]);
        let other = Json::from(json!({"tier": "back", "app": "other"}));
        assert_eq!(
            names(index.candidates("default", other.as_object())),
            ["c-exists", "g-invalid", "i-not-in"]
        );
    }
}
