//! The object a mutator changes, copy-on-write (issue 20): what it leaves alone stays borrowed
//! from the request, and only the entries it writes are materialised. `patch::diff_draft` then
//! skips every borrowed subtree by pointer and takes the new values out of the owned ones, so a pod
//! with one 10 KB app container and four injected sidecars copies the sidecars and the
//! annotations, not the pod.
//!
//! Maps keep their keys in the order a `serde_json::Map` (with `preserve_order`) would after the
//! same calls: an insert of a new key appends, an insert of a present key replaces in place, and a
//! remove is a swap-remove (serde_json's `Map::remove`). The patch lists added keys in that order,
//! so mutating a draft gives the same patch, byte for byte, as mutating a copy of the object.

use std::borrow::Cow;

use crate::api::tree::{Json, Object};

/// One node of the object being mutated.
#[derive(Debug, Clone, PartialEq)]
pub enum Draft<'a> {
    /// Unchanged: the request's own value.
    Same(&'a Json<'a>),
    /// Written by a mutator (a copy of the original, or new).
    New(Json<'a>),
    /// An object of the request with some entries changed.
    Object(DraftMap<'a>),
    /// An array of the request with some elements kept, some changed, added or dropped.
    Array(Vec<Draft<'a>>),
}

/// The entries of a [`Draft::Object`], in `serde_json::Map` order (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DraftMap<'a> {
    entries: Vec<(Cow<'a, str>, Draft<'a>)>,
}

impl<'a> Draft<'a> {
    /// The node as a plain value, when it is one (unchanged or written whole).
    pub fn value(&self) -> Option<&Json<'a>> {
        match self {
            Draft::Same(v) => Some(v),
            Draft::New(v) => Some(v),
            Draft::Object(_) | Draft::Array(_) => None,
        }
    }

    pub fn is_null(&self) -> bool {
        self.value().is_some_and(Json::is_null)
    }

    /// The value at `keys` (object keys only) as it is now.
    pub fn at(&self, keys: &[&str]) -> Option<&Json<'a>> {
        match (self, keys) {
            (_, []) => self.value(),
            (Draft::Object(map), [key, rest @ ..]) => map.get(key)?.at(rest),
            (Draft::Array(_), _) => None,
            (_, keys) => self.value()?.at(keys),
        }
    }

    /// The field `key` of this object as it is now (`None` for a draft object's draft child).
    pub fn field(&self, key: &str) -> Option<&Json<'a>> {
        match self {
            Draft::Same(v) => v.get(key),
            Draft::New(v) => v.get(key),
            Draft::Object(map) => map.get(key)?.value(),
            Draft::Array(_) => None,
        }
    }

    /// This node as an object whose entries can be changed one by one, or `None` when it is not
    /// an object. Its entries stay borrowed.
    pub fn object_mut(&mut self) -> Option<&mut DraftMap<'a>> {
        match self {
            Draft::Same(Json::Object(map)) => *self = Draft::Object(DraftMap::of(map)),
            Draft::New(Json::Object(map)) => {
                let entries = std::mem::take(map).into_iter().map(|(k, v)| (k, Draft::New(v))).collect();
                *self = Draft::Object(DraftMap { entries });
            }
            _ => {}
        }
        match self {
            Draft::Object(map) => Some(map),
            _ => None,
        }
    }

    /// This node as a plain value to change in place: copied here, the first time, if it was the
    /// request's (a small subtree: annotations, tolerations, affinity).
    pub fn to_mut(&mut self) -> &mut Json<'a> {
        if !matches!(self, Draft::New(_)) {
            let value = std::mem::replace(self, Draft::New(Json::Null)).into_json();
            *self = Draft::New(value);
        }
        match self {
            Draft::New(v) => v,
            _ => unreachable!("made New above"),
        }
    }

    /// The elements of this array as drafts (borrowed ones stay borrowed), leaving it empty in
    /// place; none when it is not an array.
    pub fn take_items(&mut self) -> Vec<Draft<'a>> {
        match self {
            Draft::Same(Json::Array(items)) => items.iter().map(Draft::Same).collect(),
            Draft::New(Json::Array(items)) => std::mem::take(items).into_iter().map(Draft::New).collect(),
            Draft::Array(items) => std::mem::take(items),
            _ => Vec::new(),
        }
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Draft::Array(_) | Draft::Same(Json::Array(_)) | Draft::New(Json::Array(_)))
    }

    /// The object as mutated; what was not changed is a view of the request ([`Json::borrowed`]).
    pub fn into_json(self) -> Json<'a> {
        match self {
            Draft::Same(v) => v.borrowed(),
            Draft::New(v) => v,
            Draft::Object(map) => {
                Json::Object(map.entries.into_iter().map(|(k, v)| (k, v.into_json())).collect())
            }
            Draft::Array(items) => Json::Array(items.into_iter().map(Draft::into_json).collect()),
        }
    }
}

impl<'a> DraftMap<'a> {
    fn of(map: &'a Object<'a>) -> Self {
        DraftMap { entries: map.iter().map(|(k, v)| (Cow::Borrowed(k), Draft::Same(v))).collect() }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in order. Few (a pod's top level, metadata, spec): lookups scan.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Draft<'a>)> {
        self.entries.iter().map(|(k, v)| (k.as_ref(), v))
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.entries.iter().position(|(k, _)| k == key)
    }

    pub fn get(&self, key: &str) -> Option<&Draft<'a>> {
        self.position(key).map(|i| &self.entries[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Draft<'a>> {
        self.position(key).map(|i| &mut self.entries[i].1)
    }

    /// The `i`-th entry's node (a patch's walk records where its values are by position).
    pub fn at_mut(&mut self, i: usize) -> Option<&mut Draft<'a>> {
        self.entries.get_mut(i).map(|(_, v)| v)
    }

    /// `Map::entry(key).or_insert(default)`: a new key goes last.
    pub fn entry_or_insert(&mut self, key: &str, default: Draft<'a>) -> &mut Draft<'a> {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                self.entries.push((Cow::Owned(key.to_owned()), default));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    /// `Map::insert`: a present key keeps its place.
    pub fn insert(&mut self, key: &str, value: Draft<'a>) {
        *self.entry_or_insert(key, Draft::New(Json::Null)) = value;
    }

    /// `Map::entry(key).or_insert(Value::Null)`, as a plain value to change in place.
    pub fn value_mut(&mut self, key: &str) -> &mut Json<'a> {
        self.entry_or_insert(key, Draft::New(Json::Null)).to_mut()
    }

    /// The list at `key` as drafts of its elements (empty when absent or not a list); `put_list`
    /// puts it back.
    pub fn take_list(&mut self, key: &str) -> Vec<Draft<'a>> {
        self.get_mut(key).map(Draft::take_items).unwrap_or_default()
    }

    /// Put a list back where it was (so an unchanged list diffs to nothing); an empty list stays absent.
    pub fn put_list(&mut self, key: &str, items: Vec<Draft<'a>>) {
        match self.get_mut(key) {
            Some(slot) if slot.is_array() => *slot = Draft::Array(items),
            _ if items.is_empty() => {}
            _ => self.insert(key, Draft::Array(items)),
        }
    }

    /// `Map::remove` with `preserve_order`: a swap-remove (the last entry takes the removed one's
    /// place), which decides the order of added keys in the patch.
    pub fn remove(&mut self, key: &str) {
        if let Some(i) = self.position(key) {
            self.entries.swap_remove(i);
        }
    }
}

/// A node of a draft as it is now, for reading: a draft node, or a value inside an unchanged or
/// written one. Lets a step read what earlier steps left (a list they rebuilt, a value they wrote)
/// without turning anything into a draft.
#[derive(Debug, Clone, Copy)]
pub enum Node<'d, 'a> {
    Draft(&'d Draft<'a>),
    Value(&'d Json<'a>),
}

impl<'d, 'a> Node<'d, 'a> {
    /// The node as a plain value, when it is one (not a draft object or list).
    pub fn value(self) -> Option<&'d Json<'a>> {
        match self {
            Node::Draft(d) => d.value(),
            Node::Value(v) => Some(v),
        }
    }

    /// The field `key` of this object.
    pub fn get(self, key: &str) -> Option<Node<'d, 'a>> {
        match self {
            Node::Draft(Draft::Object(map)) => map.get(key).map(Node::Draft),
            other => other.value()?.get(key).map(Node::Value),
        }
    }

    /// The elements of this list (none when it is not a list).
    pub fn items(self) -> Vec<Node<'d, 'a>> {
        match self {
            Node::Draft(Draft::Array(items)) => items.iter().map(Node::Draft).collect(),
            other => other
                .value()
                .and_then(Json::as_array)
                .map(|a| a.iter().map(Node::Value).collect())
                .unwrap_or_default(),
        }
    }

    pub fn as_str(self) -> Option<&'d str> {
        self.value()?.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The same calls on a `Map` and on a draft of it leave the same object, keys in the same order.
    #[test]
    fn keys_move_as_in_a_serde_json_map() {
        let original = json!({"a": 1, "b": {"x": 1}, "c": 3, "d": [1, 2]});
        let mut map = original.as_object().unwrap().clone();
        map.insert("e".into(), json!(5));
        map.remove("a");
        map.insert("c".into(), json!(30));
        map["b"].as_object_mut().unwrap().insert("y".into(), json!(2));
        map.entry("f").or_insert(Value::Null);
        map.remove("nothing");

        let original = Json::from(&original);
        let mut draft = Draft::Same(&original);
        let d = draft.object_mut().unwrap();
        d.insert("e", Draft::New(json!(5).into()));
        d.remove("a");
        d.insert("c", Draft::New(json!(30).into()));
        d.get_mut("b").unwrap().object_mut().unwrap().insert("y", Draft::New(json!(2).into()));
        d.value_mut("f");
        d.remove("nothing");
        let mutated = draft.into_json().into_value();
        assert_eq!(mutated, Value::Object(map.clone()));
        assert!(mutated.as_object().unwrap().keys().eq(map.keys()), "{mutated}");
    }

    #[test]
    fn reads_see_the_writes() {
        let original =
            Json::from(json!({"metadata": {"annotations": {"a": "1"}}, "spec": {"nodeName": "n"}}));
        let mut draft = Draft::Same(&original);
        let metadata = draft.object_mut().unwrap().get_mut("metadata").unwrap().object_mut().unwrap();
        metadata.value_mut("annotations").as_object_mut().unwrap().insert("b", Json::from("2"));
        assert_eq!(draft.at(&["metadata", "annotations", "b"]).and_then(Json::as_str), Some("2"));
        assert_eq!(draft.at(&["spec", "nodeName"]).and_then(Json::as_str), Some("n"));
        assert_eq!(draft.at(&["spec", "nodeName", "x"]), None);
    }
}
