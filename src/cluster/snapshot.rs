//! An immutable set of cluster objects, indexed by type, namespace and name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::admission::sidecarset::index::SidecarSetIndex;

/// An object type: API group (empty for core) and kind. Versions are not part of the key: one
/// object is one object whatever version it was written in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
        let api_version = object.get("apiVersion")?.as_str()?;
        let kind = object.get("kind")?.as_str()?;
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        Some(TypeKey::new(group, kind))
    }
}

/// Namespace (empty for cluster-scoped objects) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
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

/// The objects a decision may read. Built once, then shared read-only (`Arc<Snapshot>`).
#[derive(Debug, Default)]
pub struct Snapshot {
    objects: HashMap<TypeKey, BTreeMap<ObjectKey, Arc<Value>>>,
    /// Built on first use, then shared by every request that reads this snapshot.
    sidecarsets: OnceLock<SidecarSetIndex>,
}

impl Snapshot {
    /// Build a snapshot. Objects without apiVersion, kind or name are skipped by the caller's
    /// loader (which can say where they came from); a later object with the same key wins.
    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        Snapshot::from_shared(objects.into_iter().map(Arc::new))
    }

    /// Like [`Snapshot::from_objects`], from objects that are already shared: live mode rebuilds a
    /// snapshot on every change from its caches, and sharing the objects keeps that a pointer copy.
    pub fn from_shared(objects: impl IntoIterator<Item = Arc<Value>>) -> Self {
        let mut snapshot = Snapshot::default();
        for object in objects {
            let (Some(t), Some(k)) = (TypeKey::of(&object), ObjectKey::of(&object)) else { continue };
            snapshot.objects.entry(t).or_default().insert(k, object);
        }
        snapshot
    }

    pub fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        let key = ObjectKey { namespace: namespace.into(), name: name.into() };
        self.objects.get(&TypeKey::new(group, kind))?.get(&key)
    }

    /// All objects of a type, in namespace then name order; `namespace: Some(ns)` narrows to one.
    pub fn list<'a>(&'a self, group: &str, kind: &str, namespace: Option<&'a str>) -> impl Iterator<Item = &'a Arc<Value>> + 'a {
        self.objects
            .get(&TypeKey::new(group, kind))
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(move |(k, _)| namespace.is_none_or(|ns| k.namespace == ns))
            .map(|(_, v)| v)
    }

    /// The SidecarSets of this snapshot, indexed for pod matching. Built on first use (an edge may
    /// call it right after building a snapshot so no request pays for it).
    pub fn sidecarset_index(&self) -> &SidecarSetIndex {
        self.sidecarsets.get_or_init(|| SidecarSetIndex::build(self))
    }

    /// Number of objects, for metrics and logs.
    pub fn len(&self) -> usize {
        self.objects.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of objects of each type, for metrics.
    pub fn counts(&self) -> impl Iterator<Item = (&TypeKey, usize)> {
        self.objects.iter().map(|(t, m)| (t, m.len()))
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
}
