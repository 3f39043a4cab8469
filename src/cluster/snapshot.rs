//! An immutable set of cluster objects, indexed by type, namespace and name.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use super::revisions::{self, Revision};
use super::shared_map::SharedMap;
use crate::api::sidecarset::{GROUP as SIDECARSET_GROUP, KIND as SIDECARSET_KIND};
use crate::cluster::sidecarset_index::SidecarSetIndex;

/// An object type: API group (empty for core) and kind. Versions are not part of the key: one
/// object is one object whatever version it was written in.
#[derive(Debug, Clone)]
pub struct TypeKey {
    pub group: String,
    pub kind: String,
}

impl TypeKey {
    pub fn new(group: &str, kind: &str) -> Self {
        TypeKey { group: group.into(), kind: kind.into() }
    }

    /// From an object's `apiVersion` (`apps.kruise.io/v1beta1`, `v1`) and `kind`.
    pub fn of(object: &Value) -> Option<Self> {
        Some(TypeKey::from_api_version(object.get("apiVersion")?.as_str()?, object.get("kind")?.as_str()?))
    }

    pub fn from_api_version(api_version: &str, kind: &str) -> Self {
        TypeKey::new(api_version.rsplit_once('/').map_or("", |(g, _)| g), kind)
    }

    fn is_revision(&self) -> bool {
        self.group == revisions::GROUP && self.kind == revisions::KIND
    }
}

/// Namespace (empty for cluster-scoped objects) and name.
#[derive(Debug, Clone)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

/// Equality, order and hash of the keys by their two strings, in order, as derived; but an empty
/// string is never handed to `memcmp`. An empty `String`'s pointer is dangling, and glibc's AVX-512
/// `memcmp` reads it with a masked load whose fault suppression took about 130 ns per comparison on
/// the AMD EPYC machines the benchmarks run on (two 12-byte names: under 2 ns). Core types have an
/// empty group and cluster-scoped objects an empty namespace, so a Namespace lookup made about six
/// such comparisons: 7 % of a Pod review's CPU.
macro_rules! compared_by {
    ($key:ty, $first:ident, $second:ident) => {
        impl PartialEq for $key {
            fn eq(&self, other: &Self) -> bool {
                text_eq(&self.$first, &other.$first) && text_eq(&self.$second, &other.$second)
            }
        }

        impl Eq for $key {}

        impl Ord for $key {
            fn cmp(&self, other: &Self) -> Ordering {
                text_cmp(&self.$first, &other.$first).then_with(|| text_cmp(&self.$second, &other.$second))
            }
        }

        impl PartialOrd for $key {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }

        impl Hash for $key {
            fn hash<H: Hasher>(&self, state: &mut H) {
                self.$first.hash(state);
                self.$second.hash(state);
            }
        }
    };
}

compared_by!(TypeKey, group, kind);
compared_by!(ObjectKey, namespace, name);

fn text_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

fn text_cmp(a: &str, b: &str) -> Ordering {
    if a.is_empty() || b.is_empty() { a.len().cmp(&b.len()) } else { a.cmp(b) }
}

impl ObjectKey {
    pub fn of(object: &Value) -> Option<Self> {
        let meta = object.get("metadata")?;
        Some(ObjectKey {
            namespace: meta.get("namespace").and_then(Value::as_str).unwrap_or_default().to_owned(),
            name: meta.get("name")?.as_str()?.to_owned(),
        })
    }
}

/// An object as a snapshot holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Stored {
    /// The decoded tree.
    Tree(Arc<Value>),
    /// Compact JSON text, decoded on each read: a small object's tree costs about ten times its
    /// text (a Namespace's 160 bytes of labels decode to 1.9 KiB: every map is an `IndexMap` with
    /// its own hash table, every value 72 bytes). Live mode keeps so the kinds there are many of
    /// and that a review reads a few of at most ([`Stored::compact`]).
    Text(Arc<str>),
}

impl Stored {
    /// `value` as text when decoding the text gives `value` back, else as a tree: serde_json's
    /// default float parsing is not exact to the last bit, and its decoder refuses nesting its
    /// encoder writes. A read then sees what a tree would have given it.
    pub fn compact(value: Value) -> Stored {
        let text = serde_json::to_string(&value).ok();
        match text.filter(|t| serde_json::from_str::<Value>(t).is_ok_and(|decoded| decoded == value)) {
            Some(text) => Stored::Text(text.into()),
            None => Stored::Tree(Arc::new(value)),
        }
    }

    /// The object (`None` only for text that does not decode, which [`Stored::compact`] never
    /// keeps).
    pub fn value(&self) -> Option<Arc<Value>> {
        match self {
            Stored::Tree(tree) => Some(Arc::clone(tree)),
            Stored::Text(text) => serde_json::from_str(text).ok().map(Arc::new),
        }
    }
}

/// One object added or replaced (`object: Some`) or deleted (`None`), for [`Snapshot::apply`].
#[derive(Debug, Clone)]
pub struct Change {
    pub type_key: TypeKey,
    pub key: ObjectKey,
    pub object: Option<Stored>,
}

/// The objects a decision may read. Built once, then shared read-only (`Arc<Snapshot>`).
///
/// Each type's objects are a [`SharedMap`], so the next snapshot of a live cluster
/// ([`Snapshot::apply`]) shares every object, and every chunk of the maps, that did not change.
/// Objects are held as [`Stored`] trees or text; readers get the tree either way.
/// ControllerRevisions are kept as [`Revision`]s only (what decisions read of them), never as
/// objects.
#[derive(Debug)]
pub struct Snapshot {
    /// No empty maps: a type without objects has no entry. No ControllerRevisions.
    objects: HashMap<TypeKey, SharedMap<ObjectKey, Stored>>,
    revisions: SharedMap<ObjectKey, Arc<Revision>>,
    /// The key `counts` reports the revisions under.
    revision_type: TypeKey,
    /// Built on first use (or derived from the previous snapshot's by [`Snapshot::apply`]), then
    /// shared by every request that reads this snapshot.
    sidecarsets: OnceLock<SidecarSetIndex>,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            objects: HashMap::new(),
            revisions: SharedMap::default(),
            revision_type: TypeKey::new(revisions::GROUP, revisions::KIND),
            sidecarsets: OnceLock::new(),
        }
    }
}

impl Snapshot {
    /// Build a snapshot. Objects without apiVersion, kind or name are skipped by the caller's
    /// loader (which can say where they came from); a later object with the same key wins.
    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        Snapshot::from_shared(objects.into_iter().map(Arc::new))
    }

    /// Like [`Snapshot::from_objects`], from objects that are already shared.
    pub fn from_shared(objects: impl IntoIterator<Item = Arc<Value>>) -> Self {
        let mut by_type: HashMap<TypeKey, Vec<(ObjectKey, Stored)>> = HashMap::new();
        let mut revisions = Vec::new();
        for object in objects {
            let (Some(t), Some(k)) = (TypeKey::of(&object), ObjectKey::of(&object)) else { continue };
            if t.is_revision() {
                revisions.push((k, Arc::new(Revision::of(&object))));
            } else {
                by_type.entry(t).or_default().push((k, Stored::Tree(object)));
            }
        }
        let objects = by_type.into_iter().map(|(t, entries)| (t, entries.into_iter().collect())).collect();
        Snapshot { objects, revisions: revisions.into_iter().collect(), ..Snapshot::default() }
    }

    /// This snapshot with `changes` applied in order, sharing everything they do not touch. When
    /// this snapshot's SidecarSet index is built, the new snapshot's is derived from it by the
    /// SidecarSets that changed (an object replaced by an equal one is not a change); otherwise
    /// it is built on first use. The cost follows the size of the changes, not of the snapshot.
    pub fn apply(&self, changes: impl IntoIterator<Item = Change>) -> Snapshot {
        self.apply_with(changes, [])
    }

    /// [`Snapshot::apply`], plus ControllerRevisions already reduced to [`Revision`]s (added or
    /// replaced: `Some`; deleted: `None`), as live mode keeps them.
    pub fn apply_with(
        &self,
        changes: impl IntoIterator<Item = Change>,
        revised: impl IntoIterator<Item = (ObjectKey, Option<Arc<Revision>>)>,
    ) -> Snapshot {
        let mut objects = self.objects.clone();
        let mut revisions = self.revisions.clone();
        for (key, revision) in revised {
            match revision {
                Some(revision) => revisions.insert(key, revision),
                None => revisions.remove(&key),
            };
        }
        let mut changed_sets: Vec<(ObjectKey, Option<Arc<Value>>)> = Vec::new();
        for Change { type_key, key, object } in changes {
            if type_key.is_revision() {
                match object.as_ref().and_then(Stored::value) {
                    Some(object) => revisions.insert(key, Arc::new(Revision::of(&object))),
                    None => revisions.remove(&key),
                };
                continue;
            }
            let map = objects.entry(type_key.clone()).or_default();
            let previous = match &object {
                Some(object) => map.insert(key.clone(), object.clone()),
                None => map.remove(&key),
            };
            if map.is_empty() {
                objects.remove(&type_key);
            }
            let same = match (&previous, &object) {
                (Some(Stored::Tree(a)), Some(Stored::Tree(b))) => Arc::ptr_eq(a, b) || a == b,
                (a, b) => a == b,
            };
            if !same && type_key.group == SIDECARSET_GROUP && type_key.kind == SIDECARSET_KIND {
                changed_sets.push((key, object.as_ref().and_then(Stored::value)));
            }
        }
        let next = Snapshot { objects, revisions, ..Snapshot::default() };
        if let Some(index) = self.sidecarsets.get() {
            let _ = next.sidecarsets.set(index.apply(changed_sets.iter().map(|(k, o)| (k, o.as_deref()))));
        }
        next
    }

    pub fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.stored(group, kind, namespace, name)?.value()
    }

    /// Whether the object exists, without decoding it.
    pub fn contains(&self, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
        self.stored(group, kind, namespace, name).is_some()
    }

    fn stored(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<&Stored> {
        let key = ObjectKey { namespace: namespace.into(), name: name.into() };
        self.objects.get(&TypeKey::new(group, kind))?.get(&key)
    }

    /// All objects of a type, in namespace then name order; `namespace: Some(ns)` narrows to one.
    pub fn list<'a>(
        &'a self,
        group: &str,
        kind: &str,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = Arc<Value>> + 'a {
        // Narrowed before decoding: only the listed namespace's objects are read.
        self.stored_entries(group, kind)
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .filter_map(|(_, v)| v.value())
    }

    /// All objects of a type with their keys, in namespace then name order.
    pub fn entries<'a>(
        &'a self,
        group: &str,
        kind: &str,
    ) -> impl Iterator<Item = (&'a ObjectKey, Arc<Value>)> + 'a {
        self.stored_entries(group, kind).filter_map(|(key, object)| Some((key, object.value()?)))
    }

    fn stored_entries<'a>(
        &'a self,
        group: &str,
        kind: &str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Stored)> + 'a {
        self.objects.get(&TypeKey::new(group, kind)).into_iter().flat_map(SharedMap::iter)
    }

    /// The ControllerRevision `namespace/name`.
    pub fn revision(&self, namespace: &str, name: &str) -> Option<&Revision> {
        let key = ObjectKey { namespace: namespace.into(), name: name.into() };
        self.revisions.get(&key).map(|r| &**r)
    }

    /// The ControllerRevisions in `namespace`, by name.
    pub fn revisions<'a>(&'a self, namespace: &'a str) -> impl Iterator<Item = &'a Revision> + 'a {
        self.revisions.iter().filter(move |(k, _)| k.namespace == namespace).map(|(_, r)| &**r)
    }

    /// The SidecarSets of this snapshot, indexed for pod matching. Built on first use (an edge may
    /// call it right after building a snapshot so no request pays for it).
    pub fn sidecarset_index(&self) -> &SidecarSetIndex {
        self.sidecarsets.get_or_init(|| SidecarSetIndex::build(self))
    }

    /// The SidecarSet index if it was built already (a published snapshot's always is), for what
    /// only saves work with it and should not build it.
    pub fn built_sidecarset_index(&self) -> Option<&SidecarSetIndex> {
        self.sidecarsets.get()
    }

    /// Number of objects, for metrics and logs.
    pub fn len(&self) -> usize {
        self.objects.values().map(SharedMap::len).sum::<usize>() + self.revisions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of objects of each type, for metrics.
    pub fn counts(&self) -> impl Iterator<Item = (&TypeKey, usize)> {
        let revisions = (!self.revisions.is_empty()).then_some((&self.revision_type, self.revisions.len()));
        self.objects.iter().map(|(t, m)| (t, m.len())).chain(revisions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn indexes_by_group_kind_namespace_and_name() {
        let s = Snapshot::from_objects([
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "a"}}),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "b"}}),
            json!({"kind": "Broken"}),
        ]);
        assert_eq!(s.len(), 4);
        assert!(s.get("", "Namespace", "", "a").is_some());
        assert!(s.get("apps.kruise.io", "SidecarSet", "", "s").is_some());
        assert_eq!(s.list("", "Pod", Some("a")).count(), 1);
        assert_eq!(s.list("", "Pod", None).count(), 2);
    }

    #[test]
    fn text_reads_back_as_the_tree_it_was_made_from() {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "a", "labels": {"z": "1", "a": "2"}}, "n": [1, -2, 3.5, 1e300, null, true]});
        let stored = Stored::compact(namespace.clone());
        assert!(matches!(stored, Stored::Text(_)), "{stored:?}");
        let read = stored.value().unwrap();
        assert_eq!(*read, namespace);
        assert_eq!(read.to_string(), namespace.to_string(), "members in the same order");

        let s = Snapshot::default().apply([Change {
            type_key: TypeKey::new("", "Namespace"),
            key: ObjectKey::of(&namespace).unwrap(),
            object: Some(stored),
        }]);
        assert_eq!(s.get("", "Namespace", "", "a").as_deref(), Some(&namespace));
        assert!(s.contains("", "Namespace", "", "a") && !s.contains("", "Namespace", "", "b"));
        assert_eq!(s.list("", "Namespace", None).collect::<Vec<_>>(), [read]);
    }

    #[test]
    fn what_text_would_not_give_back_stays_a_tree() {
        // Deeper than serde_json's decoder follows (128), though its encoder writes it.
        let mut deep = json!(0);
        for _ in 0..200 {
            deep = json!([deep]);
        }
        assert!(matches!(Stored::compact(deep.clone()), Stored::Tree(t) if *t == deep));
    }
}
