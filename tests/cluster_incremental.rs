//! Live mode derives each snapshot, and its SidecarSet index, from the previous one by what changed
//! (`Snapshot::apply`); the folder mode builds them from scratch. Both must answer every pod the
//! same: a random sequence of adds, changes and deletes, applied one batch at a time, must leave
//! the same objects and the same candidates as a snapshot built from the final objects, and no
//! SidecarSet that selects a pod may be missing from that pod's candidates.

use std::collections::BTreeMap;
use std::sync::Arc;

use kruise_admission::admission::injection::matching::{self, PodTarget};
use kruise_admission::api::sidecarset::SidecarSet;
use kruise_admission::api::tree::{Json, Object};
use kruise_admission::cluster::{Change, ObjectKey, Snapshot, Stored, TypeKey};
use proptest::prelude::*;
use serde_json::{Value, json};

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const NAMESPACES: [&str; 3] = ["team", "other", "default"];
/// Regexes a SidecarSet's resourcesPolicy may use; the last does not compile.
const PATTERNS: [&str; 3] = [".*", "^app$", "(unclosed"];

fn selector() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!({}))),
        prop::sample::select(vec!["web", "db", "cache"])
            .prop_map(|app| Some(json!({"matchLabels": {"app": app}}))),
        prop::sample::select(vec!["x", "y"])
            .prop_map(|tier| Some(json!({"matchLabels": {"app": "web", "tier": tier}}))),
        prop::sample::subsequence(vec!["web", "db", "cache"], 1..=3).prop_map(|values| Some(
            json!({"matchExpressions": [{"key": "app", "operator": "In", "values": values}]})
        )),
        Just(Some(json!({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}))),
        Just(Some(json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}))),
        Just(Some(
            json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "a", "operator": "Bad"}]})
        )),
    ]
}

fn namespace_selector() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        prop::sample::select(NAMESPACES.to_vec()).prop_map(|ns| Some(json!({"matchLabels": {"kubernetes.io/metadata.name": ns}}))),
        prop::sample::subsequence(NAMESPACES.to_vec(), 1..=2).prop_map(|values| Some(
            json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": values}]})
        )),
        Just(Some(json!({"matchLabels": {"env": "prod"}}))),
    ]
}

/// A SidecarSet object: most decodable, some not; some paused; some with resourcesPolicy regexes.
fn sidecarset(name: &'static str) -> impl Strategy<Value = Value> {
    (selector(), namespace_selector(), any::<bool>(), prop::option::of(prop::sample::select(PATTERNS.to_vec())), 0u8..10).prop_map(
        move |(selector, namespace_selector, paused, pattern, variant)| {
            let mut container = json!({"name": format!("{name}-sidecar"), "image": "busybox"});
            if let Some(pattern) = pattern {
                container["resourcesPolicy"] =
                    json!({"targetContainersMode": "sum", "targetContainersNameRegex": pattern, "resourceExpr": {}});
            }
            let mut spec = json!({"containers": [container]});
            if let Some(s) = selector {
                spec["selector"] = s;
            }
            if let Some(s) = namespace_selector {
                spec["namespaceSelector"] = s;
            }
            if paused {
                spec["injectionStrategy"] = json!({"paused": true});
            }
            if variant == 0 {
                spec["containers"] = json!("not a list");
            }
            let api_version = if variant == 1 { "apps.kruise.io/v1alpha1" } else { "apps.kruise.io/v1beta1" };
            json!({"apiVersion": api_version, "kind": "SidecarSet", "metadata": {"name": name}, "spec": spec})
        },
    )
}

/// One step: put a SidecarSet (add or change), delete one, or touch a Namespace (not indexed).
#[derive(Debug, Clone)]
enum Op {
    Put(Value),
    Delete(&'static str),
    Namespace(&'static str, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop::sample::select(NAMES.to_vec()).prop_flat_map(sidecarset).prop_map(Op::Put),
        2 => prop::sample::select(NAMES.to_vec()).prop_map(Op::Delete),
        1 => (prop::sample::select(NAMESPACES.to_vec()), any::<bool>()).prop_map(|(ns, keep)| Op::Namespace(ns, keep)),
    ]
}

fn sidecarset_key(name: &str) -> (TypeKey, ObjectKey) {
    (TypeKey::new("apps.kruise.io", "SidecarSet"), ObjectKey { namespace: String::new(), name: name.into() })
}

fn change(op: &Op) -> Change {
    match op {
        Op::Put(object) => {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let (type_key, key) = sidecarset_key(name);
            Change { type_key, key, object: Some(Stored::Tree(Arc::new(object.clone()))) }
        }
        Op::Delete(name) => {
            let (type_key, key) = sidecarset_key(name);
            Change { type_key, key, object: None }
        }
        // As live mode keeps Namespaces: as text, which the rebuilt snapshot holds as trees.
        Op::Namespace(name, keep) => Change {
            type_key: TypeKey::new("", "Namespace"),
            key: ObjectKey { namespace: String::new(), name: (*name).into() },
            object: keep.then(|| {
                Stored::compact(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
            }),
        },
    }
}

/// Every pod shape the generated selectors can tell apart, in every namespace.
fn pods() -> Vec<(&'static str, Option<Object<'static>>)> {
    let mut pods = Vec::new();
    for ns in NAMESPACES {
        for app in [None, Some("web"), Some("db"), Some("cache")] {
            for tier in [None, Some("x"), Some("y")] {
                let mut labels = serde_json::Map::new();
                if let Some(app) = app {
                    labels.insert("app".into(), json!(app));
                }
                if let Some(tier) = tier {
                    labels.insert("tier".into(), json!(tier));
                }
                pods.push((ns, Some(Object::from(labels.clone()))));
                if labels.is_empty() {
                    pods.push((ns, None));
                }
            }
        }
    }
    pods
}

/// Everything a decision can read of a snapshot.
#[derive(Debug, PartialEq)]
struct Answers {
    objects: Vec<Value>,
    /// Candidate names for each of [`pods`].
    candidates: Vec<Vec<String>>,
    decoded: usize,
    unreadable: Vec<String>,
    /// Whether each of [`PATTERNS`] is compiled in the index.
    regexes: Vec<bool>,
}

fn answers(snapshot: &Snapshot) -> Answers {
    let objects = [("apps.kruise.io", "SidecarSet"), ("", "Namespace")]
        .iter()
        .flat_map(|(g, k)| snapshot.list(g, k, None).map(|o| (*o).clone()))
        .collect();
    let index = snapshot.sidecarset_index();
    let candidates = pods()
        .iter()
        .map(|(ns, labels)| {
            index.candidates(ns, labels.as_ref()).iter().map(|s| s.name().to_owned()).collect()
        })
        .collect();
    let regexes = PATTERNS.iter().map(|p| index.name_regex(p).is_some()).collect();
    Answers {
        objects,
        candidates,
        decoded: index.len(),
        unreadable: index.unreadable().into_iter().map(str::to_owned).collect(),
        regexes,
    }
}

/// The index is a pre-filter: every SidecarSet that selects a pod (checked in full, as a decision
/// does) must be among its candidates. Each miss, as "pod labels in namespace: SidecarSet".
fn missed_matches(snapshot: &Snapshot) -> Vec<String> {
    let sets: Vec<SidecarSet> = snapshot
        .list("apps.kruise.io", "SidecarSet", None)
        .filter_map(|o| SidecarSet::from_value(&o).ok())
        .collect();
    let index = snapshot.sidecarset_index();
    let mut missed = Vec::new();
    for (ns, labels) in pods() {
        let metadata = labels.map(|l| Object::from_iter([("labels", Json::Object(l))])).unwrap_or_default();
        let pod = Json::Object(Object::from_iter([("metadata", Json::Object(metadata))]));
        let candidates = index.candidates(ns, pod.at(&["metadata", "labels"]).and_then(Json::as_object));
        let target = PodTarget::new(&pod, ns, snapshot);
        for set in &sets {
            if matching::matches(set, &target) == Ok(true)
                && !candidates.iter().any(|c| c.name() == set.name())
            {
                missed.push(format!("{:?} in {ns}: {}", pod.at(&["metadata", "labels"]), set.name()));
            }
        }
    }
    missed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn incremental_updates_answer_like_a_rebuild(
        initial in prop::collection::vec(op(), 0..8),
        batches in prop::collection::vec(prop::collection::vec(op(), 1..4), 1..12),
    ) {
        // The model: the objects as they stand, by type and key (a later change of a key wins).
        let mut model: BTreeMap<(TypeKey, ObjectKey), Arc<Value>> = BTreeMap::new();
        let mut record = |op: &Op| {
            let c = change(op);
            match c.object {
                Some(o) => model.insert((c.type_key, c.key), o.value().expect("a kept object reads back")),
                None => model.remove(&(c.type_key, c.key)),
            };
            model.values().cloned().collect::<Vec<_>>()
        };
        let mut objects = Vec::new();
        for op in &initial {
            objects = record(op);
        }
        let mut live = Arc::new(Snapshot::from_shared(objects.clone()));
        let _ = live.sidecarset_index();
        for batch in &batches {
            for op in batch {
                objects = record(op);
            }
            let next = live.apply(batch.iter().map(change));
            let rebuilt = Snapshot::from_shared(objects.clone());
            prop_assert_eq!(answers(&next), answers(&rebuilt));
            prop_assert_eq!(next.len(), rebuilt.len());
            prop_assert_eq!(missed_matches(&rebuilt), Vec::<String>::new());
            live = Arc::new(next);
        }
    }
}

#[test]
fn unchanged_sidecarsets_are_shared_with_the_previous_index() {
    let set = |name: &str, app: &str| {
        json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": name},
               "spec": {"selector": {"matchLabels": {"app": app}}, "containers": [{"name": name, "image": "busybox"}]}})
    };
    let before = Snapshot::from_objects([set("keep", "web"), set("move", "web")]);
    let labels = Json::from(json!({"app": "web"}));
    let old = before.sidecarset_index().candidates("default", labels.as_object());
    assert_eq!(old.len(), 2);

    let (type_key, key) = sidecarset_key("move");
    let after =
        before.apply([Change { type_key, key, object: Some(Stored::Tree(Arc::new(set("move", "db")))) }]);
    let new = after.sidecarset_index().candidates("default", labels.as_object());
    assert_eq!(new.len(), 1, "the changed SidecarSet left the app=web bucket");
    assert!(
        Arc::ptr_eq(old[0], new[0]),
        "the unchanged SidecarSet is the same decoded object, not decoded again"
    );
    let db = Json::from(json!({"app": "db"}));
    assert_eq!(after.sidecarset_index().candidates("default", db.as_object()).len(), 1);
    // The previous snapshot is untouched: readers holding it still see both.
    assert_eq!(before.sidecarset_index().candidates("default", labels.as_object()).len(), 2);
}
