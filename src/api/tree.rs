//! The JSON tree decisions read and mutate (issues 17.1 and 20): strings borrowed from the
//! request's body, every array and object allocated at its final length, objects as a list of
//! members.
//!
//! A `serde_json::Value` (with `preserve_order`) spends about 470 bytes on an environment variable
//! of 100 bytes of text: a 72-byte slot, an index map with a hash table, four string allocations.
//! Held next to the body it came from, a Pod dense with such lists was 5–6× the body. Here a node is
//! 32 bytes, a member 56, and a string costs nothing unless it had escapes: the same Pod is about
//! 1.5× its text, so body and tree together stay within the 4× of issue 17.1, and decoding it takes
//! about half the instructions.
//!
//! The API mirrors `serde_json::Value`'s (`get`, `as_str`, `as_array`, `as_object`, indexing, `==`),
//! and [`Object`] mirrors `serde_json::Map` with `preserve_order`: `insert` of a present key
//! replaces it in place, `remove` is a swap-remove. So decisions written against `Value` read the
//! same here, and a mutation leaves its members in the order `Value` would, which decides the order
//! of the operations in a patch. Equality is `Value`'s: objects compare as maps (order aside).
//!
//! Lookups in an object scan its members: a Pod's objects have a handful of keys, and a decision
//! looks up a fixed number of keys per object, so no request can make that quadratic. Decoding
//! finds duplicate keys by sorting (the last value wins in the first one's place, as in
//! `serde_json`), never by comparing every pair.

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, Deserialize, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

/// One JSON value; strings borrow from the text it was decoded from (`'a`) unless they had escapes.
#[derive(Debug, Clone, Default)]
pub enum Json<'a> {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Object<'a>),
}

/// The members of a JSON object, in order (see the module docs for the `serde_json::Map` rules).
///
/// Copy-on-write: [`Object::borrowed`] views another tree's object (a SidecarSet's prepared
/// container, a pod's volume mount, put into an injected sidecar) without copying it, and the first
/// change copies this object's own members only (its members' objects stay views). Cloning a view
/// costs nothing.
#[derive(Debug, Clone, Default)]
pub struct Object<'a> {
    members: Members<'a>,
}

type Member<'a> = (Cow<'a, str>, Json<'a>);

/// `Cow<'a, [Member]>`, which would make trees invariant in `'a` (its owned form is reached through
/// `ToOwned`): a tree borrowed for longer must still fit where a shorter one goes.
#[derive(Debug, Clone)]
enum Members<'a> {
    Owned(Vec<Member<'a>>),
    Borrowed(&'a [Member<'a>]),
}

impl Default for Members<'_> {
    fn default() -> Self {
        Members::Owned(Vec::new())
    }
}

impl<'a> std::ops::Deref for Members<'a> {
    type Target = [Member<'a>];

    fn deref(&self) -> &Self::Target {
        match self {
            Members::Owned(members) => members,
            Members::Borrowed(members) => members,
        }
    }
}

static NULL: Json<'static> = Json::Null;

impl<'a> Json<'a> {
    /// Decode a JSON text, borrowing its strings.
    pub fn parse(text: &'a str) -> serde_json::Result<Json<'a>> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let value = deserialize(&mut deserializer)?;
        deserializer.end()?;
        Ok(value)
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object()?.get(key)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json<'a>> {
        self.as_object_mut()?.get_mut(key)
    }

    /// The value at the object keys `keys` (what `pointer("/a/b")` finds, without parsing a pointer).
    pub fn at(&self, keys: &[&str]) -> Option<&Json<'a>> {
        keys.iter().try_fold(self, |v, key| v.get(key))
    }

    /// `Value::pointer`: RFC 6901 tokens through objects and arrays.
    pub fn pointer(&self, pointer: &str) -> Option<&Json<'a>> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        rest.split('/').map(|t| t.replace("~1", "/").replace("~0", "~")).try_fold(self, |v, token| match v {
            Json::Object(map) => map.get(&token),
            Json::Array(items) => {
                if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)
            }
            _ => None,
        })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(n) => n.as_i64(),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&Vec<Json<'a>>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Json<'a>>> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&Object<'a>> {
        match self {
            Json::Object(map) => Some(map),
            _ => None,
        }
    }

    pub fn as_object_mut(&mut self) -> Option<&mut Object<'a>> {
        match self {
            Json::Object(map) => Some(map),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    pub fn is_array(&self) -> bool {
        matches!(self, Json::Array(_))
    }

    pub fn is_object(&self) -> bool {
        matches!(self, Json::Object(_))
    }

    /// The value, leaving null in its place.
    pub fn take(&mut self) -> Json<'a> {
        std::mem::take(self)
    }

    /// A `serde_json::Value` copy.
    pub fn to_value(&self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => Value::Number(n.clone()),
            Json::String(s) => Value::String(s.as_ref().to_owned()),
            Json::Array(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Object(map) => Value::Object(
                map.members.iter().map(|(k, v)| (k.as_ref().to_owned(), v.to_value())).collect(),
            ),
        }
    }

    /// The `serde_json::Value`, moving the strings this tree owns.
    pub fn into_value(self) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(b),
            Json::Number(n) => Value::Number(n),
            Json::String(s) => Value::String(s.into_owned()),
            Json::Array(items) => Value::Array(items.into_iter().map(Json::into_value).collect()),
            Json::Object(map) => Value::Object(
                map.into_members().into_iter().map(|(k, v)| (k.into_owned(), v.into_value())).collect(),
            ),
        }
    }

    /// A copy that borrows this tree: its objects are views ([`Object::borrowed`]), its strings
    /// are not copied, only its arrays are allocated again (a SidecarSet's prepared container,
    /// injected into a pod).
    pub fn borrowed(&self) -> Json<'_> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(*b),
            Json::Number(n) => Json::Number(n.clone()),
            Json::String(s) => Json::String(Cow::Borrowed(s)),
            Json::Array(items) => Json::Array(items.iter().map(Json::borrowed).collect()),
            Json::Object(map) => Json::Object(map.borrowed()),
        }
    }

    /// The same tree, owning every string (no longer tied to the text it was decoded from).
    pub fn into_owned(self) -> Json<'static> {
        match self {
            Json::Null => Json::Null,
            Json::Bool(b) => Json::Bool(b),
            Json::Number(n) => Json::Number(n),
            Json::String(s) => Json::String(Cow::Owned(s.into_owned())),
            Json::Array(items) => Json::Array(items.into_iter().map(Json::into_owned).collect()),
            Json::Object(map) => Json::Object(Object {
                members: Members::Owned(
                    map.into_members()
                        .into_iter()
                        .map(|(k, v)| (Cow::Owned(k.into_owned()), v.into_owned()))
                        .collect(),
                ),
            }),
        }
    }

    /// Decode a typed structure from this tree (`serde_json::from_value`, same errors).
    pub fn deserialize_into<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_value(self.to_value())
    }
}

impl From<Value> for Json<'static> {
    fn from(value: Value) -> Self {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(b),
            Value::Number(n) => Json::Number(n),
            Value::String(s) => Json::String(Cow::Owned(s)),
            Value::Array(items) => Json::Array(items.into_iter().map(Json::from).collect()),
            Value::Object(map) => Json::Object(Object::from(map)),
        }
    }
}

impl From<serde_json::Map<String, Value>> for Object<'static> {
    fn from(map: serde_json::Map<String, Value>) -> Self {
        Object::of(map.into_iter().map(|(k, v)| (Cow::Owned(k), Json::from(v))).collect())
    }
}

impl<'a> From<&'a Value> for Json<'a> {
    /// A tree borrowing the value's strings.
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => Json::Number(n.clone()),
            Value::String(s) => Json::String(Cow::Borrowed(s)),
            Value::Array(items) => Json::Array(items.iter().map(Json::from).collect()),
            Value::Object(map) => Json::Object(Object::of(
                map.iter().map(|(k, v)| (Cow::Borrowed(k.as_str()), Json::from(v))).collect(),
            )),
        }
    }
}

impl<'a> From<&'a str> for Json<'a> {
    fn from(s: &'a str) -> Self {
        Json::String(Cow::Borrowed(s))
    }
}

impl From<String> for Json<'_> {
    fn from(s: String) -> Self {
        Json::String(Cow::Owned(s))
    }
}

impl From<bool> for Json<'_> {
    fn from(b: bool) -> Self {
        Json::Bool(b)
    }
}

impl<'a> From<Object<'a>> for Json<'a> {
    fn from(map: Object<'a>) -> Self {
        Json::Object(map)
    }
}

impl<'a> From<Vec<Json<'a>>> for Json<'a> {
    fn from(items: Vec<Json<'a>>) -> Self {
        Json::Array(items)
    }
}

impl<'a> std::ops::Index<&str> for Json<'a> {
    type Output = Json<'a>;

    /// `value["key"]`: null when absent or not an object, as with `Value`.
    fn index(&self, key: &str) -> &Json<'a> {
        self.get(key).unwrap_or(&NULL)
    }
}

impl<'a> std::ops::Index<usize> for Json<'a> {
    type Output = Json<'a>;

    fn index(&self, i: usize) -> &Json<'a> {
        self.as_array().and_then(|items| items.get(i)).unwrap_or(&NULL)
    }
}

impl PartialEq for Json<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Json::Null, Json::Null) => true,
            (Json::Bool(a), Json::Bool(b)) => a == b,
            (Json::Number(a), Json::Number(b)) => a == b,
            (Json::String(a), Json::String(b)) => a == b,
            (Json::Array(a), Json::Array(b)) => a == b,
            (Json::Object(a), Json::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl PartialEq for Object<'_> {
    /// As maps: the same keys with equal values, in any order.
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        // Keys are unique: in the same order, members pair up by position (a copy and its
        // original); else each is looked up, in a hash map when there are many.
        if self.keys().eq(other.keys()) {
            return self.values().eq(other.values());
        }
        if self.len() <= SCAN_DUPLICATES_UP_TO {
            return self.iter().all(|(k, v)| other.get(k) == Some(v));
        }
        let index: std::collections::HashMap<&str, &Json> = other.iter().collect();
        self.iter().all(|(k, v)| index.get(k) == Some(&v))
    }
}

impl PartialEq<Value> for Json<'_> {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Json::Null, Value::Null) => true,
            (Json::Bool(a), Value::Bool(b)) => a == b,
            (Json::Number(a), Value::Number(b)) => a == b,
            (Json::String(a), Value::String(b)) => a == b,
            (Json::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y),
            (Json::Object(a), Value::Object(b)) => {
                a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| v == w))
            }
            _ => false,
        }
    }
}

impl PartialEq<Json<'_>> for Value {
    fn eq(&self, other: &Json<'_>) -> bool {
        other == self
    }
}

impl fmt::Display for Json<'_> {
    /// Compact JSON, as `Value`'s `Display`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let text = serde_json::to_string(self).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => serializer.serialize_unit(),
            Json::Bool(b) => serializer.serialize_bool(*b),
            Json::Number(n) => n.serialize(serializer),
            Json::String(s) => serializer.serialize_str(s),
            Json::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(map) => map.serialize(serializer),
        }
    }
}

impl Serialize for Object<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            out.serialize_entry(k, v)?;
        }
        out.end()
    }
}

impl<'a> Object<'a> {
    pub fn new() -> Self {
        Object { members: Members::Owned(Vec::new()) }
    }

    fn of(members: Vec<Member<'a>>) -> Self {
        Object { members: Members::Owned(members) }
    }

    /// A view of this object: nothing is copied until it is changed.
    pub fn borrowed(&self) -> Object<'_> {
        Object { members: Members::Borrowed(&self.members) }
    }

    /// The members to change: a view's are copied here, one level (see the type's docs).
    fn members_mut(&mut self) -> &mut Vec<Member<'a>> {
        if let Members::Borrowed(members) = self.members {
            self.members = Members::Owned(view_members(members));
        }
        match &mut self.members {
            Members::Owned(members) => members,
            Members::Borrowed(_) => unreachable!("made owned above"),
        }
    }

    /// The members, owned (a view's copied one level).
    fn into_members(self) -> Vec<Member<'a>> {
        match self.members {
            Members::Owned(members) => members,
            Members::Borrowed(members) => view_members(members),
        }
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.members.iter().position(|(k, _)| k == key)
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.members.iter().find_map(|(k, v)| (k == key).then_some(v))
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json<'a>> {
        let i = self.position(key)?;
        Some(&mut self.members_mut()[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// The value of the `i`-th member (a patch's walk records where its values are by position).
    pub fn value_at(&self, i: usize) -> Option<&Json<'a>> {
        self.members.get(i).map(|(_, v)| v)
    }

    /// [`Object::value_at`], to change or move the value.
    pub fn value_at_mut(&mut self, i: usize) -> Option<&mut Json<'a>> {
        self.members_mut().get_mut(i).map(|(_, v)| v)
    }

    /// `Map::insert`: a present key keeps its place and gets the new value (the old one is
    /// returned); a new key goes last.
    pub fn insert(&mut self, key: impl Into<Cow<'a, str>>, value: Json<'a>) -> Option<Json<'a>> {
        let key = key.into();
        let i = self.position(&key);
        let members = self.members_mut();
        match i {
            Some(i) => Some(std::mem::replace(&mut members[i].1, value)),
            None => {
                members.push((key, value));
                None
            }
        }
    }

    /// `Map::entry(key).or_insert(default)`.
    pub fn entry_or_insert(&mut self, key: impl Into<Cow<'a, str>>, default: Json<'a>) -> &mut Json<'a> {
        let key = key.into();
        let i = self.position(&key);
        let members = self.members_mut();
        let i = match i {
            Some(i) => i,
            None => {
                members.push((key, default));
                members.len() - 1
            }
        };
        &mut members[i].1
    }

    /// `Map::remove` with `preserve_order`: a swap-remove (the last member takes the removed one's
    /// place).
    pub fn remove(&mut self, key: &str) -> Option<Json<'a>> {
        let i = self.position(key)?;
        Some(self.members_mut().swap_remove(i).1)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&str, &Json<'a>)> + ExactSizeIterator {
        self.members.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(|(k, _)| k.as_ref())
    }

    pub fn values(&self) -> impl Iterator<Item = &Json<'a>> {
        self.members.iter().map(|(_, v)| v)
    }
}

impl<'a> Json<'a> {
    /// The object in this slot, made an empty one when it is null; `None` when it is something
    /// else (the caller decides whether that is an error or left for validation to report).
    pub fn object_or_new(&mut self) -> Option<&mut Object<'a>> {
        if self.is_null() {
            *self = Json::Object(Object::new());
        }
        self.as_object_mut()
    }
}

impl<'a> Object<'a> {
    /// The object under `key`, created empty when absent or null; `None` when `key` holds
    /// something else.
    pub fn object_entry(&mut self, key: &str) -> Option<&mut Object<'a>> {
        self.entry_or_insert(key.to_owned(), Json::Null).object_or_new()
    }

    /// The list at `key`, taken out (the key stays where it was, so putting the list back keeps
    /// the member order); empty when absent or not a list.
    pub fn take_list(&mut self, key: &str) -> Vec<Json<'a>> {
        match self.get_mut(key) {
            Some(Json::Array(items)) => std::mem::take(items),
            _ => Vec::new(),
        }
    }
}

/// Up to this many members, [`Object::lookup`] scans.
const LOOKUP_SCAN_UP_TO: usize = 16;

/// Many lookups in one object: a pod's labels, which every candidate SidecarSet's selector reads.
/// `Object::get` scans, which is right for the few lookups a decision makes in most objects; a
/// request can send 100,000 labels, so code that looks keys up once per SidecarSet hashes them
/// once instead.
pub enum Lookup<'o, 'a> {
    Scan(&'o Object<'a>),
    Hashed(std::collections::HashMap<&'o str, &'o Json<'a>>),
}

impl<'o, 'a> Lookup<'o, 'a> {
    pub fn get(&self, key: &str) -> Option<&'o Json<'a>> {
        match self {
            Lookup::Scan(map) => map.get(key),
            Lookup::Hashed(index) => index.get(key).copied(),
        }
    }
}

impl<'a> Object<'a> {
    /// This object's members, to be looked up many times (see [`Lookup`]).
    pub fn lookup(&self) -> Lookup<'_, 'a> {
        if self.len() <= LOOKUP_SCAN_UP_TO {
            Lookup::Scan(self)
        } else {
            Lookup::Hashed(self.iter().collect())
        }
    }
}

impl<'a> IntoIterator for Object<'a> {
    type Item = (Cow<'a, str>, Json<'a>);
    type IntoIter = std::vec::IntoIter<(Cow<'a, str>, Json<'a>)>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_members().into_iter()
    }
}

impl<'a, K: Into<Cow<'a, str>>> FromIterator<(K, Json<'a>)> for Object<'a> {
    /// Like collecting into a `Map`: a repeated key keeps its first place and its last value.
    fn from_iter<I: IntoIterator<Item = (K, Json<'a>)>>(iter: I) -> Self {
        let mut members: Vec<_> = iter.into_iter().map(|(k, v)| (k.into(), v)).collect();
        dedupe(&mut members);
        Object::of(members)
    }
}

impl<'de> Deserialize<'de> for Json<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize(deserializer)
    }
}

/// Decode one value, borrowing strings from the deserializer's input where it can.
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Json<'de>, D::Error> {
    Exact { stacks: &mut Stacks::default() }.deserialize(deserializer)
}

/// A stack that grew past this many entries is given back once it empties, rather than held
/// until the whole document is decoded.
const KEEP_CAPACITY: usize = 1024;
/// From this many elements on, an array grows in a vector of its own (see `visit_seq`).
const LARGE_ARRAY: usize = 1024;
/// Up to this many members, duplicate keys are found by comparing each key with the ones before.
const SCAN_DUPLICATES_UP_TO: usize = 16;

/// The members and elements of the containers being decoded, innermost last: each container is
/// allocated once, at its length, when it closes.
#[derive(Default)]
struct Stacks<'de> {
    elements: Vec<Json<'de>>,
    members: Vec<(Cow<'de, str>, Json<'de>)>,
}

struct Exact<'s, 'de> {
    stacks: &'s mut Stacks<'de>,
}

impl<'de> DeserializeSeed<'de> for Exact<'_, 'de> {
    type Value = Json<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

fn release_if_empty<T>(stack: &mut Vec<T>) {
    if stack.is_empty() && stack.capacity() > KEEP_CAPACITY {
        *stack = Vec::new();
    }
}

/// An object key, borrowed when the text has it without escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Visitor<'de> for Exact<'_, 'de> {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Json<'de>, E> {
        Ok(Json::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Json<'de>, E> {
        Ok(Json::Number(value.into()))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Json<'de>, E> {
        Ok(Number::from_f64(value).map_or(Json::Null, Json::Number))
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Borrowed(value)))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value.to_owned())))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Json<'de>, E> {
        Ok(Json::String(Cow::Owned(value)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let start = self.stacks.elements.len();
        // A large array moves to a vector of its own and grows there: its slack past the last
        // element is never written, so it is not resident, and a final copy would double its
        // resident size while both exist.
        let mut own = Vec::new();
        while let Some(element) = seq.next_element_seed(Exact { stacks: &mut *self.stacks })? {
            if !own.is_empty() {
                own.push(element);
                continue;
            }
            self.stacks.elements.push(element);
            if self.stacks.elements.len() - start == LARGE_ARRAY {
                own.reserve_exact(2 * LARGE_ARRAY);
                own.extend(self.stacks.elements.drain(start..));
            }
        }
        if own.is_empty() {
            own = self.stacks.elements.drain(start..).collect();
        }
        release_if_empty(&mut self.stacks.elements);
        Ok(Json::Array(own))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let start = self.stacks.members.len();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let value = map.next_value_seed(Exact { stacks: &mut *self.stacks })?;
            self.stacks.members.push((key, value));
        }
        let mut members: Vec<_> = self.stacks.members.drain(start..).collect();
        release_if_empty(&mut self.stacks.members);
        dedupe(&mut members);
        Ok(Json::Object(Object::of(members)))
    }
}

/// Repeated keys, as `serde_json::Map` keeps them: the first one's place, the last one's value.
/// A view's members, owned: the keys and strings stay borrowed, the members' objects become views.
/// With room for a few more: a view is copied because it is being changed, often by an insert.
fn view_members<'a>(members: &'a [Member<'a>]) -> Vec<Member<'a>> {
    let mut owned = Vec::with_capacity(members.len() + 4);
    owned.extend(members.iter().map(|(k, v)| (Cow::Borrowed(&**k), v.borrowed())));
    owned
}

fn dedupe(members: &mut Vec<(Cow<'_, str>, Json<'_>)>) {
    let n = members.len();
    if n < 2 {
        return;
    }
    // For each member, the index of the last member with its key when it is the first of them,
    // `usize::MAX` when an earlier one has its key.
    let mut order: Vec<usize> = Vec::new();
    let repeats: Vec<(usize, usize)> = if n <= SCAN_DUPLICATES_UP_TO {
        let mut repeats = Vec::new();
        for later in 1..n {
            if let Some(first) = (0..later).find(|&i| members[i].0 == members[later].0) {
                repeats.push((first, later));
            }
        }
        repeats
    } else {
        order.extend(0..n);
        order.sort_by(|&a, &b| members[a].0.cmp(&members[b].0).then(a.cmp(&b)));
        let mut repeats = Vec::new();
        let mut run = 0;
        for i in 1..=n {
            if i == n || members[order[i]].0 != members[order[run]].0 {
                repeats.extend(order[run + 1..i].iter().map(|&later| (order[run], later)));
                run = i;
            }
        }
        repeats
    };
    if repeats.is_empty() {
        return;
    }
    let mut dropped = vec![false; n];
    for &(first, later) in &repeats {
        // Later repeats come in increasing order for each first, so the last value wins.
        let value = std::mem::take(&mut members[later].1);
        members[first].1 = value;
        dropped[later] = true;
    }
    // Not shrunk: a copy at the new length would briefly hold both (review_cost charges every
    // member, repeated or not).
    let mut i = 0;
    members.retain(|_| {
        i += 1;
        !dropped[i - 1]
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn both(text: &str) -> (Json<'_>, Value) {
        (Json::parse(text).unwrap(), serde_json::from_str(text).unwrap())
    }

    #[test]
    fn decodes_what_value_decodes_and_serialises_the_same_text() {
        for text in [
            r#"{"a":1,"b":[true,null,"x\ny"],"c":{"d":-2.5e3,"e":18446744073709551615},"f":"\u00e9"}"#,
            r#"[1,2,{"k":"v"},[],{}]"#,
            r#""plain""#,
            "0",
        ] {
            let (tree, value) = both(text);
            assert_eq!(tree, value, "{text}");
            assert_eq!(serde_json::to_string(&tree).unwrap(), serde_json::to_string(&value).unwrap());
            assert_eq!(tree.to_value(), value);
            assert_eq!(tree.clone().into_value(), value);
            assert_eq!(Json::from(value.clone()), tree);
        }
    }

    #[test]
    fn repeated_keys_keep_the_first_place_and_the_last_value_small_and_large() {
        let small = r#"{"a":1,"b":2,"a":3,"c":4,"a":5}"#;
        let large: String = {
            let mut members: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
            members.push(r#""k3":"last""#.into());
            members.push(r#""k0":"zero""#.into());
            members.push(r#""k3":"really last""#.into());
            format!("{{{}}}", members.join(","))
        };
        for text in [small, large.as_str()] {
            let (tree, value) = both(text);
            assert_eq!(
                serde_json::to_string(&tree).unwrap(),
                serde_json::to_string(&value).unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn nodes_are_32_bytes_with_copy_on_write_objects() {
        assert_eq!(std::mem::size_of::<Json>(), 32);
    }

    #[test]
    fn a_view_is_copied_one_level_when_changed_and_reads_like_its_source() {
        let source = Json::from(serde_json::json!({"a": {"b": [1, "x"]}, "c": "d", "e": {}}));
        let mut view = source.borrowed();
        assert_eq!(view, source);
        let Json::Object(map) = &mut view else { panic!("an object") };
        map.insert("c", Json::from("changed"));
        map.remove("e");
        assert_eq!(view.to_value(), serde_json::json!({"a": {"b": [1, "x"]}, "c": "changed"}));
        assert_eq!(source.to_value(), serde_json::json!({"a": {"b": [1, "x"]}, "c": "d", "e": {}}));
    }

    #[test]
    fn strings_without_escapes_are_borrowed() {
        let tree = Json::parse(r#"{"plain":"text","esc\"aped":"a\tb"}"#).unwrap();
        let map = tree.as_object().unwrap();
        let members: Vec<_> = map.members.iter().collect();
        assert!(matches!(members[0], (Cow::Borrowed(_), Json::String(Cow::Borrowed("text")))));
        assert!(matches!(members[1], (Cow::Owned(_), Json::String(Cow::Owned(_)))));
    }

    #[test]
    fn maps_change_as_a_serde_json_map_with_preserve_order_does() {
        let original = json!({"a": 1, "b": 2, "c": 3, "d": 4});
        let mut map = original.as_object().unwrap().clone();
        let mut tree = Json::from(&original);
        let obj = tree.as_object_mut().unwrap();
        map.remove("a");
        obj.remove("a");
        map.insert("c".into(), json!(30));
        obj.insert("c", Json::from(json!(30)));
        map.insert("e".into(), json!(5));
        obj.insert("e", Json::from(json!(5)));
        map.entry("b").or_insert(json!(0));
        obj.entry_or_insert("b", Json::Null);
        let value = Value::Object(map);
        assert_eq!(serde_json::to_string(&tree).unwrap(), serde_json::to_string(&value).unwrap());
    }

    #[test]
    fn lookups_find_what_get_finds_in_small_and_large_objects() {
        for n in [0, 3, LOOKUP_SCAN_UP_TO, LOOKUP_SCAN_UP_TO + 1, 1000] {
            let map: Object = (0..n).map(|i| (format!("k{i}"), Json::from(format!("v{i}")))).collect();
            let lookup = map.lookup();
            assert_eq!(matches!(lookup, Lookup::Hashed(_)), n > LOOKUP_SCAN_UP_TO);
            for key in ["k0", "k2", "k999", "missing"] {
                assert_eq!(lookup.get(key), map.get(key), "{n} {key}");
            }
        }
    }

    #[test]
    fn take_list_leaves_the_key_in_place() {
        let mut tree = Json::from(json!({"env": [1, 2], "name": "x"}));
        let map = tree.as_object_mut().unwrap();
        assert_eq!(map.take_list("env"), vec![Json::from(json!(1)), Json::from(json!(2))]);
        assert_eq!(map.take_list("name"), Vec::<Json>::new());
        assert_eq!(map.keys().collect::<Vec<_>>(), ["env", "name"]);
    }

    #[test]
    fn objects_compare_as_maps() {
        assert_eq!(Json::parse(r#"{"a":1,"b":2}"#).unwrap(), Json::parse(r#"{"b":2,"a":1}"#).unwrap());
        assert_ne!(Json::parse(r#"{"a":1}"#).unwrap(), Json::parse(r#"{"a":1,"b":2}"#).unwrap());
        assert_eq!(Json::parse(r#"{"b":2,"a":1}"#).unwrap(), json!({"a": 1, "b": 2}));
    }

    #[test]
    fn reads_as_value_reads() {
        let (tree, value) = both(r#"{"spec":{"containers":[{"name":"a/b~c"}]},"n":null}"#);
        assert_eq!(tree["spec"]["containers"][0]["name"], value["spec"]["containers"][0]["name"]);
        assert_eq!(tree["missing"][3], Json::Null);
        assert_eq!(tree.at(&["spec", "containers"]).map(|c| c.is_array()), Some(true));
        for pointer in
            ["", "/spec/containers/0/name", "/spec/containers/01", "/n", "/spec/x", "/spec/containers/0"]
        {
            assert_eq!(
                tree.pointer(pointer).map(Json::to_value).as_ref(),
                value.pointer(pointer),
                "{pointer}"
            );
        }
    }

    #[test]
    fn nesting_and_syntax_errors_are_the_parsers() {
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert_eq!(
            Json::parse(&deep).unwrap_err().to_string(),
            serde_json::from_str::<Value>(&deep).unwrap_err().to_string()
        );
        assert!(Json::parse(r#"{"a":}"#).is_err());
        assert!(Json::parse("1 2").is_err());
    }
}
