//! RFC 6902 JSON Patch between the object as decoded and as mutated.
//!
//! Mutators change a copy-on-write draft of the object (`admission::draft`); this module computes the
//! patch afterwards. Working on untyped values means fields this binary does not model (newer Kubernetes
//! fields, other webhooks' additions) are never touched: they are equal on both sides, so no operation
//! mentions them.
//!
//! The diff is minimal where it matters for admission and linear in the object size:
//! - objects: removed keys, changed keys (recursively), added keys, in document order;
//! - arrays: equal prefix and suffix are skipped; the middle is aligned by identity (`name` for
//!   objects that have one, the value itself for scalars), so a container inserted before the app
//!   containers is one `add`, not a rewrite of every later element. When identities are missing,
//!   duplicated or reordered, elements are compared pairwise instead. Both walks are O(n) with
//!   hash lookups; no quadratic LCS (Istio's 2,000-env-var pod took seconds with one).
//!
//! The `to` side is a plain value (`diff`) or a mutator's copy-on-write draft of `from`
//! (`diff_draft`, see `admission::draft`); one walk serves both, so they give the same patch for
//! the same object.
//!
//! Same input, same bytes: the walk order depends only on the documents.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;

use super::draft::{Draft, DraftMap};
use crate::api::json_text;
use crate::api::tree::{Json, Object};

/// One RFC 6902 operation. Only the three a diff needs.
///
/// Values may borrow (`'a`) from the request and the cluster snapshot the decision read: a patch is
/// serialised into the response while both are still held, so nothing is copied to outlive them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum PatchOp<'a> {
    Add { path: String, value: Json<'a> },
    Remove { path: String },
    Replace { path: String, value: Json<'a> },
}

impl<'a> PatchOp<'a> {
    pub fn add(path: impl Into<String>, value: impl Into<Json<'a>>) -> Self {
        PatchOp::Add { path: path.into(), value: value.into() }
    }

    /// The operation with its value's borrowed strings copied, to keep past the request.
    pub fn into_owned(self) -> PatchOp<'static> {
        match self {
            PatchOp::Add { path, value } => PatchOp::Add { path, value: value.into_owned() },
            PatchOp::Remove { path } => PatchOp::Remove { path },
            PatchOp::Replace { path, value } => PatchOp::Replace { path, value: value.into_owned() },
        }
    }

    /// The value of an `add` or `replace`.
    fn value_mut(&mut self) -> Option<&mut Json<'a>> {
        match self {
            PatchOp::Add { value, .. } | PatchOp::Replace { value, .. } => Some(value),
            PatchOp::Remove { .. } => None,
        }
    }

    pub fn path(&self) -> &str {
        match self {
            PatchOp::Add { path, .. } | PatchOp::Remove { path } | PatchOp::Replace { path, .. } => path,
        }
    }
}

/// The patch as JSON text: what `serde_json::to_string(ops)` writes (a test holds them equal), by
/// hand because that was the largest part of answering a typical Pod (see [`json_text`]).
pub fn to_text(ops: &[PatchOp<'_>]) -> String {
    let mut out = String::with_capacity(64 * ops.len());
    out.push('[');
    for (i, op) in ops.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (name, value) = match op {
            PatchOp::Add { value, .. } => ("add", Some(value)),
            PatchOp::Remove { .. } => ("remove", None),
            PatchOp::Replace { value, .. } => ("replace", Some(value)),
        };
        out.push_str("{\"op\":\"");
        out.push_str(name);
        out.push_str("\",\"path\":");
        json_text::push_string(&mut out, op.path());
        if let Some(value) = value {
            out.push_str(",\"value\":");
            json_text::push_value(&mut out, value);
        }
        out.push('}');
    }
    out.push(']');
    out
}

/// Append one reference token to `path`, escaped (RFC 6901): `~` → `~0`, `/` → `~1`. Annotation
/// keys such as `kruise.io/sidecarset-hash` need it. Written in place: one pass, no allocation;
/// `memchr2` finds the next `~` or `/` (a byte at a time was 380 instructions a key).
fn push_token(path: &mut String, token: &str) {
    let mut rest = token;
    while let Some(i) = memchr::memchr2(b'~', b'/', rest.as_bytes()) {
        path.push_str(&rest[..i]);
        path.push_str(if rest.as_bytes()[i] == b'~' { "~0" } else { "~1" });
        // Both are ASCII: `i + 1` is a character boundary.
        rest = &rest[i + 1..];
    }
    path.push_str(rest);
}

/// The patch that turns `from` into `to`.
pub fn diff<'v>(from: &Value, to: &'v Value) -> Vec<PatchOp<'v>> {
    diff_json(&Json::from(from), &Json::from(to))
}

/// [`diff`] of two trees; the values are copies of `to`'s (its strings stay borrowed).
pub fn diff_json<'t>(from: &Json<'_>, to: &Json<'t>) -> Vec<PatchOp<'t>> {
    let (mut ops, routes) = walk(from, To::Value(to)).into_parts();
    for (value, route) in ops.iter_mut().filter_map(PatchOp::value_mut).zip(routes.iter()) {
        *value = value_at(to, route).cloned().unwrap_or_default();
    }
    ops
}

/// The patch that turns `from` into the draft a mutator made of it. Subtrees the draft still
/// borrows from `from` are skipped by pointer, and the values of `add` and `replace` operations
/// (injected containers, mostly) are moved out of the draft instead of copied.
pub fn diff_draft<'a>(from: &Json<'_>, mut to: Draft<'a>) -> Vec<PatchOp<'a>> {
    let (mut ops, routes) = walk(from, To::of(&to)).into_parts();
    for (value, route) in ops.iter_mut().filter_map(PatchOp::value_mut).zip(routes.iter()) {
        *value = take_at(&mut to, route);
    }
    ops
}

/// The value at `route` (one the walk recorded) in `node`, moved out when the draft owns it (a
/// subtree of the request becomes a view of it).
fn take_at<'a>(node: &mut Draft<'a>, route: &[usize]) -> Json<'a> {
    let Some((&i, rest)) = route.split_first() else {
        return std::mem::replace(node, Draft::New(Json::Null)).into_json();
    };
    match node {
        // A view of the request's subtree: its strings and objects are not copied.
        Draft::Same(v) => value_at(v, route).map(Json::borrowed).unwrap_or_default(),
        Draft::New(v) => value_at_mut(v, route).map(Json::take).unwrap_or_default(),
        Draft::Object(map) => map.at_mut(i).map_or(Json::Null, |n| take_at(n, rest)),
        Draft::Array(items) => items.get_mut(i).map_or(Json::Null, |n| take_at(n, rest)),
    }
}

/// The value at `route` in `v`: at each step the member or element at that position.
fn value_at<'v, 'a>(mut v: &'v Json<'a>, route: &[usize]) -> Option<&'v Json<'a>> {
    for &i in route {
        v = match v {
            Json::Object(map) => map.value_at(i)?,
            Json::Array(items) => items.get(i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// [`value_at`], to move the value out.
fn value_at_mut<'v, 'a>(mut v: &'v mut Json<'a>, route: &[usize]) -> Option<&'v mut Json<'a>> {
    for &i in route {
        v = match v {
            Json::Object(map) => map.value_at_mut(i)?,
            Json::Array(items) => items.get_mut(i)?,
            _ => return None,
        };
    }
    Some(v)
}

/// The side of the diff being patched towards: a plain value, or a draft's object or array (a
/// draft's borrowed and owned nodes are plain values).
#[derive(Clone, Copy)]
enum To<'t> {
    Value(&'t Json<'t>),
    Object(&'t DraftMap<'t>),
    Array(&'t [Draft<'t>]),
}

/// An object on the `to` side.
#[derive(Clone, Copy)]
enum ToMap<'t> {
    Map(&'t Object<'t>),
    Draft(&'t DraftMap<'t>),
}

/// An array on the `to` side.
#[derive(Clone, Copy)]
enum ToList<'t> {
    Values(&'t [Json<'t>]),
    Drafts(&'t [Draft<'t>]),
}

impl<'t> To<'t> {
    fn of(draft: &'t Draft<'t>) -> Self {
        match draft {
            Draft::Same(v) => To::Value(v),
            Draft::New(v) => To::Value(v),
            Draft::Object(map) => To::Object(map),
            Draft::Array(items) => To::Array(items),
        }
    }

    fn as_map(self) -> Option<ToMap<'t>> {
        match self {
            To::Value(Json::Object(map)) => Some(ToMap::Map(map)),
            To::Object(map) => Some(ToMap::Draft(map)),
            _ => None,
        }
    }

    fn as_list(self) -> Option<ToList<'t>> {
        match self {
            To::Value(Json::Array(items)) => Some(ToList::Values(items)),
            To::Array(items) => Some(ToList::Drafts(items)),
            _ => None,
        }
    }
}

impl<'t> ToMap<'t> {
    fn len(self) -> usize {
        match self {
            ToMap::Map(map) => map.len(),
            ToMap::Draft(map) => map.len(),
        }
    }

    fn iter(self) -> impl Iterator<Item = (&'t str, To<'t>)> {
        let (map, draft) = match self {
            ToMap::Map(map) => (Some(map), None),
            ToMap::Draft(draft) => (None, Some(draft)),
        };
        let plain = map.into_iter().flat_map(|m| m.iter().map(|(k, v)| (k, To::Value(v))));
        plain.chain(draft.into_iter().flat_map(|d| d.iter().map(|(k, v)| (k, To::of(v)))))
    }

    /// The value at `key` and its position.
    fn find(self, key: &str) -> Option<(usize, To<'t>)> {
        self.iter().enumerate().find_map(|(i, (k, v))| (k == key).then_some((i, v)))
    }
}

impl<'t> ToList<'t> {
    fn len(self) -> usize {
        match self {
            ToList::Values(items) => items.len(),
            ToList::Drafts(items) => items.len(),
        }
    }

    fn at(self, i: usize) -> To<'t> {
        match self {
            ToList::Values(items) => To::Value(&items[i]),
            ToList::Drafts(items) => To::of(&items[i]),
        }
    }

    fn slice(self, range: std::ops::Range<usize>) -> Self {
        match self {
            ToList::Values(items) => ToList::Values(&items[range]),
            ToList::Drafts(items) => ToList::Drafts(&items[range]),
        }
    }

    fn iter(self) -> impl DoubleEndedIterator<Item = To<'t>> + ExactSizeIterator {
        (0..self.len()).map(move |i| self.at(i))
    }
}

/// The operations, with `null` where `add` and `replace` values go, and where in `to` each value
/// is: its route, the position of the member or element at each step down. No operation lies
/// inside another's value, so the callers above fill them in by route, without parsing a path or
/// comparing a key again.
struct Walked {
    ops: Vec<PatchOp<'static>>,
    /// The routes of all operations, one after another: `ends[k]` is where the `k`-th one's ends.
    steps: Vec<usize>,
    ends: Vec<usize>,
    /// The path and route of the node being compared.
    path: String,
    route: Vec<usize>,
}

impl Walked {
    fn push(&mut self, op: PatchOp<'static>) {
        if self.ops.is_empty() {
            // Sized for a typical injection's patch (about 16 operations, 3 steps each) when the
            // first one comes, so none is regrown on the way (growing them from empty cost more than
            // the walk's comparisons) and a pod nothing changed allocates nothing.
            self.ops.reserve(16);
            self.ends.reserve(16);
            self.steps.reserve(64);
        }
        self.ops.push(op);
        self.steps.extend_from_slice(&self.route);
        self.ends.push(self.steps.len());
    }

    /// Forget the operations from the `mark`-th on.
    fn truncate(&mut self, mark: usize) {
        self.ops.truncate(mark);
        self.ends.truncate(mark);
        self.steps.truncate(self.ends.last().copied().unwrap_or(0));
    }

    /// The operations, and the routes of those with values, in order.
    fn into_parts(self) -> (Vec<PatchOp<'static>>, Routes) {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        let spans = (self.ops.iter().zip(starts.zip(self.ends.iter().copied())))
            .filter(|(op, _)| !matches!(op, PatchOp::Remove { .. }))
            .map(|(_, (start, end))| start..end)
            .collect();
        (self.ops, Routes { steps: self.steps, spans })
    }

    fn push_here(&mut self, op: fn(String) -> PatchOp<'static>) {
        let op = op(self.path.clone());
        self.push(op);
    }

    /// Run `f` one step down: at member `key`, the `index`-th of `to`'s object.
    fn at_key<R>(&mut self, key: &str, index: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        self.path.push('/');
        push_token(&mut self.path, key);
        self.route.push(index);
        let r = f(self);
        self.route.pop();
        self.path.truncate(len);
        r
    }

    /// Run `f` one step down: at element `index` (of `to`'s array, and of the array as patched).
    fn at_index<R>(&mut self, index: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let len = self.path.len();
        self.path.push('/');
        json_text::push_decimal(&mut self.path, index as u64);
        self.route.push(index);
        let r = f(self);
        self.route.pop();
        self.path.truncate(len);
        r
    }
}

/// Where the values of a walk's operations are in `to`, in the order of the operations.
struct Routes {
    steps: Vec<usize>,
    spans: Vec<std::ops::Range<usize>>,
}

impl Routes {
    fn iter(&self) -> impl Iterator<Item = &[usize]> {
        self.spans.iter().map(|span| &self.steps[span.clone()])
    }
}

fn add(path: String) -> PatchOp<'static> {
    PatchOp::Add { path, value: Json::Null }
}

fn remove(path: String) -> PatchOp<'static> {
    PatchOp::Remove { path }
}

fn replace(path: String) -> PatchOp<'static> {
    PatchOp::Replace { path, value: Json::Null }
}

fn walk(from: &Json<'_>, to: To) -> Walked {
    let mut w = Walked {
        ops: Vec::new(),
        steps: Vec::new(),
        ends: Vec::new(),
        // Room for the deepest pointers a pod patch has (annotation keys), so it is not regrown.
        path: String::with_capacity(128),
        route: Vec::new(),
    };
    diff_value(from, to, &mut w);
    w
}

fn diff_value(from: &Json<'_>, to: To, w: &mut Walked) {
    match (from, to.as_map(), to.as_list()) {
        (Json::Object(a), Some(b), _) => diff_object(a, b, w),
        (Json::Array(a), _, Some(b)) => diff_array(a, b, w),
        _ if same(from, to) => {}
        _ => w.push_here(replace),
    }
}

fn diff_object(a: &Object<'_>, b: ToMap, w: &mut Walked) {
    // A mutated copy keeps the original's key order, so keys pair up by position and need no
    // hashing; only the keys after the first mismatch are looked up (same output order either way:
    // `a`'s keys first, then the keys only `b` has).
    let common = a.keys().zip(b.iter()).take_while(|(x, (y, _))| x == y).count();
    for (index, ((key, old), (_, new))) in a.iter().zip(b.iter()).take(common).enumerate() {
        if !same(old, new) {
            w.at_key(key, index, |w| diff_value(old, new, w));
        }
    }
    // Past the common prefix each key is looked up on the other side: by scanning when few are
    // left, else in a hash map built once (an object of 10,000 annotations with one removed near
    // the front must not cost 10,000 scans of 10,000 keys).
    let hashed = a.len() + b.len() - 2 * common > SCAN_UP_TO;
    let a_index: Option<HashMap<&str, &Json>> = hashed.then(|| a.iter().collect());
    let b_index: Option<HashMap<&str, (usize, To)>> =
        hashed.then(|| b.iter().enumerate().map(|(i, (k, v))| (k, (i, v))).collect());
    let in_a = |key: &str| a_index.as_ref().map_or_else(|| a.get(key), |m| m.get(key).copied());
    let in_b = |key: &str| b_index.as_ref().map_or_else(|| b.find(key), |m| m.get(key).copied());
    for (key, old) in a.iter().skip(common) {
        match in_b(key) {
            // A removal has no value to find: its route is never followed.
            None => w.at_key(key, 0, |w| w.push_here(remove)),
            Some((index, new)) => {
                if !same(old, new) {
                    w.at_key(key, index, |w| diff_value(old, new, w));
                }
            }
        }
    }
    for (index, (key, _)) in b.iter().enumerate().skip(common) {
        if in_a(key).is_none() {
            w.at_key(key, index, |w| w.push_here(add));
        }
    }
}

/// `a == b`, but maps whose keys come in the same order (a mutated copy and its original) are
/// compared by position: serde_json's map equality hashes every key to look it up, which was the
/// largest single cost of diffing a pod. A draft's borrowed node is its original: equal by pointer.
fn same(a: &Json<'_>, b: To) -> bool {
    if let To::Value(b) = b
        && std::ptr::eq(a, b)
    {
        return true;
    }
    match (a, b.as_map(), b.as_list()) {
        (Json::Object(x), Some(y), _) => {
            if x.len() != y.len() {
                return false;
            }
            for ((kx, vx), (ky, vy)) in x.iter().zip(y.iter()) {
                if kx != ky {
                    // Another order: equal when every key has an equal value (keys are unique).
                    return match y {
                        ToMap::Map(y) => x == y,
                        ToMap::Draft(_) => y.iter().all(|(k, v)| x.get(k).is_some_and(|old| same(old, v))),
                    };
                }
                if !same(vx, vy) {
                    return false;
                }
            }
            true
        }
        (Json::Array(x), _, Some(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(vx, vy)| same(vx, vy))
        }
        (_, _, _) => match b {
            To::Value(b) => a == b,
            To::Object(_) | To::Array(_) => false,
        },
    }
}

/// The identity of an array element for alignment: the `name` of an object, or the scalar itself.
#[derive(PartialEq, Eq, Hash)]
enum Identity<'a> {
    Name(&'a str),
    Scalar(String),
}

fn identity(v: To<'_>) -> Option<Identity<'_>> {
    match v {
        To::Object(map) => map.get("name").and_then(Draft::value).and_then(Json::as_str).map(Identity::Name),
        To::Array(_) => None,
        To::Value(Json::Object(map)) => map.get("name").and_then(Json::as_str).map(Identity::Name),
        To::Value(Json::Array(_)) => None,
        To::Value(Json::String(s)) => Some(Identity::Scalar(format!("s{s}"))),
        To::Value(other) => Some(Identity::Scalar(other.to_string())),
    }
}

/// Identities of every element, or `None` when any is missing.
fn identities<'t>(items: impl ExactSizeIterator<Item = To<'t>>) -> Option<Vec<Identity<'t>>> {
    items.map(identity).collect()
}

/// Lists up to this long are searched by scanning: the ones a mutation usually changes (a pod's
/// containers, the volumes and pull secrets injection appends to) are short, and comparing a few
/// names costs less than hashing them. Longer ones get a hash map (SipHash, keyed per process:
/// the identities come from the request).
const SCAN_UP_TO: usize = 16;

/// Where each identity of a list is.
enum Positions<'i, 't> {
    Scan(&'i [Identity<'t>]),
    Map(HashMap<&'i Identity<'t>, usize>),
}

impl<'i, 't> Positions<'i, 't> {
    /// Where each of `ids` is, or `None` when one repeats (then alignment by identity would be
    /// ambiguous).
    fn of(ids: &'i [Identity<'t>]) -> Option<Self> {
        if ids.len() <= SCAN_UP_TO {
            ids.iter().enumerate().all(|(i, id)| !ids[..i].contains(id)).then_some(Positions::Scan(ids))
        } else {
            let mut map = HashMap::with_capacity(ids.len());
            ids.iter().enumerate().all(|(i, id)| map.insert(id, i).is_none()).then_some(Positions::Map(map))
        }
    }

    fn get(&self, id: &Identity<'_>) -> Option<usize> {
        match self {
            Positions::Scan(ids) => ids.iter().position(|x| x == id),
            Positions::Map(map) => map.get(id).copied(),
        }
    }
}

fn diff_array(a: &[Json<'_>], b: ToList, w: &mut Walked) {
    let prefix = a.iter().zip(b.iter()).take_while(|(x, y)| same(x, *y)).count();
    let (a_rest, b_rest) = (&a[prefix..], b.slice(prefix..b.len()));
    let suffix = a_rest.iter().rev().zip(b_rest.iter().rev()).take_while(|(x, y)| same(x, *y)).count();
    let old = &a_rest[..a_rest.len() - suffix];
    let new = b_rest.slice(0..b_rest.len() - suffix);
    if old.is_empty() && new.len() == 0 {
        return;
    }
    if !diff_aligned(old, new, prefix, w) {
        diff_pairwise(old, new, prefix, w);
    }
}

/// Walks `old` and `new` together, matching elements by identity. At every step the partly patched
/// array is `new[..i] ++ old[j..]`, so the index of the next operation is `base + i`.
/// Returns false (having emitted nothing) when identities cannot align the two sides in order.
fn diff_aligned(old: &[Json<'_>], new: ToList, base: usize, w: &mut Walked) -> bool {
    let (Some(old_ids), Some(new_ids)) = (identities(old.iter().map(To::Value)), identities(new.iter()))
    else {
        return false;
    };
    let (Some(in_new), Some(in_old)) = (Positions::of(&new_ids), Positions::of(&old_ids)) else {
        return false;
    };
    // Common elements must keep their relative order, or this walk would need moves.
    let mut last = None;
    for id in &old_ids {
        if let Some(pos) = in_new.get(id) {
            if last.is_some_and(|l| pos < l) {
                return false;
            }
            last = Some(pos);
        }
    }
    let mark = w.ops.len();
    let (mut i, mut j) = (0, 0);
    while i < new.len() || j < old.len() {
        let at = base + i;
        if j < old.len() && in_new.get(&old_ids[j]).is_none() {
            w.at_index(at, |w| w.push_here(remove));
            j += 1;
        } else if i < new.len() && in_old.get(&new_ids[i]).is_none() {
            w.at_index(at, |w| w.push_here(add));
            i += 1;
        } else if i < new.len() && j < old.len() {
            if !same(&old[j], new.at(i)) {
                w.at_index(at, |w| diff_value(&old[j], new.at(i), w));
            }
            i += 1;
            j += 1;
        } else {
            // Unreachable given the order check, but never loop forever on a logic slip.
            w.truncate(mark);
            return false;
        }
    }
    true
}

fn diff_pairwise(old: &[Json<'_>], new: ToList, base: usize, w: &mut Walked) {
    let common = old.len().min(new.len());
    for (k, (old_k, new_k)) in old.iter().zip(new.iter()).enumerate() {
        if !same(old_k, new_k) {
            w.at_index(base + k, |w| diff_value(old_k, new_k, w));
        }
    }
    // Remove from the end so earlier indices stay valid.
    for k in (common..old.len()).rev() {
        w.at_index(base + k, |w| w.push_here(remove));
    }
    for k in common..new.len() {
        w.at_index(base + k, |w| w.push_here(add));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(from: Value, to: Value) -> Vec<PatchOp<'static>> {
        let ops = diff(&from, &to);
        let tree = Json::from(&from);
        assert_eq!(
            diff_draft(&tree, Draft::New(Json::from(&to))),
            ops,
            "moving the values must give the same patch"
        );
        assert!(diff_draft(&tree, Draft::Same(&tree)).is_empty());
        let patch: json_patch::Patch = serde_json::from_value(serde_json::to_value(&ops).unwrap()).unwrap();
        let mut doc = from.clone();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc, to, "patch {ops:?} must turn from into to");
        assert_eq!(ops, diff(&from, &to), "diff must be deterministic");
        assert_eq!(to_text(&ops), serde_json::to_string(&ops).unwrap(), "the text must be serde_json's");
        ops.into_iter().map(PatchOp::into_owned).collect()
    }

    #[test]
    fn equal_documents_need_no_operations() {
        assert!(check(json!({"a": [1, {"b": 2}]}), json!({"a": [1, {"b": 2}]})).is_empty());
    }

    #[test]
    fn annotation_keys_are_escaped() {
        let ops = check(
            json!({"metadata": {"annotations": {}}}),
            json!({"metadata": {"annotations": {"a/b~c": "1"}}}),
        );
        assert_eq!(ops[0].path(), "/metadata/annotations/a~1b~0c");
    }

    #[test]
    fn container_inserted_before_app_containers_is_one_add() {
        let from = json!({"containers": [{"name": "app", "image": "a"}, {"name": "b", "image": "b"}]});
        let to = json!({"containers": [{"name": "side", "image": "s"}, {"name": "app", "image": "a"}, {"name": "b", "image": "b"}]});
        let ops = check(from, to);
        assert_eq!(ops, vec![PatchOp::add("/containers/0", json!({"name": "side", "image": "s"}))]);
    }

    #[test]
    fn insert_before_and_in_place_replace_together() {
        let from = json!([{"name": "a", "image": "1"}, {"name": "x", "image": "old"}, {"name": "z"}]);
        let to = json!([{"name": "s"}, {"name": "a", "image": "1"}, {"name": "x", "image": "new"}, {"name": "z"}, {"name": "t"}]);
        let ops = check(from, to);
        assert_eq!(ops.len(), 3, "{ops:?}");
        assert_eq!(ops[1], PatchOp::Replace { path: "/2/image".into(), value: json!("new").into() });
    }

    #[test]
    fn reorders_and_duplicates_fall_back_to_pairwise() {
        check(json!([{"name": "a"}, {"name": "b"}]), json!([{"name": "b"}, {"name": "a"}]));
        check(json!([{"name": "a"}, {"name": "a"}]), json!([{"name": "a", "x": 1}]));
        check(json!([1, 2, 3]), json!([3, 2]));
        check(json!([[1], [2]]), json!([[2], [1], [3]]));
    }

    #[test]
    fn removals_and_type_changes() {
        check(json!({"a": 1, "b": {"c": [1, 2]}}), json!({"b": "x", "d": null}));
        check(json!([1, 2, 3, 4]), json!([1, 4]));
        check(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]), json!([{"name": "c"}]));
    }

    /// Small JSON documents, with few key names so that maps share keys, reorder and collide.
    fn arb_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            (0..3i64).prop_map(Value::from),
            "[ab]".prop_map(Value::from)
        ];
        leaf.prop_recursive(4, 40, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(("[a-d]", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// The same document with every map's keys in reverse order (equal to it under `==`).
    fn reversed(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                Value::Object(m.iter().rev().map(|(k, v)| (k.clone(), reversed(v))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest::proptest! {
        #[test]
        fn same_is_equality_and_diffs_apply(a in arb_value(), b in arb_value()) {
            let r = reversed(&a);
            let (ja, jb, jr) = (Json::from(&a), Json::from(&b), Json::from(&r));
            proptest::prop_assert_eq!(same(&ja, To::Value(&jb)), a == b);
            proptest::prop_assert!(same(&ja, To::Value(&jr)) && same(&jr, To::Value(&ja)));
            proptest::prop_assert_eq!(same(&jr, To::Value(&jb)), r == b);
            proptest::prop_assert_eq!(ja == jb, a == b);
            proptest::prop_assert_eq!(ja == b, a == b);
            check(a.clone(), b.clone());
            check(r, b);
        }
    }

    /// Edits of a draft: (key, what) with what 0 = remove, 1 = insert `b`'s value, 2 = descend
    /// into the entry as a draft object and insert there, 3 = descend into an array entry and
    /// replace its first element.
    fn edit(draft: &mut Draft<'_>, edits: &[(String, u8, Value)]) {
        let Some(map) = draft.object_mut() else { return };
        for (key, what, value) in edits {
            match what {
                0 => map.remove(key),
                1 => map.insert(key, Draft::New(Json::from(value.clone()))),
                2 => {
                    if let Some(inner) = map.get_mut(key).and_then(Draft::object_mut) {
                        inner.insert(key, Draft::New(Json::from(value.clone())));
                    }
                }
                _ => {
                    if let Some(entry) = map.get_mut(key).filter(|e| e.is_array()) {
                        let mut items = entry.take_items();
                        if let Some(first) = items.first_mut() {
                            *first = Draft::New(Json::from(value.clone()));
                        }
                        *entry = Draft::Array(items);
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// A draft's patch is the patch to the object it stands for, whatever was edited.
        #[test]
        fn a_draft_patches_like_its_value(a in arb_value(), edits in proptest::collection::vec(("[a-d]", 0..4u8, arb_value()), 0..6)) {
            let tree = Json::from(&a);
            let mut draft = Draft::Same(&tree);
            edit(&mut draft, &edits);
            let value = draft.clone().into_json().into_value();
            proptest::prop_assert_eq!(diff_draft(&tree, draft), diff(&a, &value));
        }
    }

    #[test]
    fn large_env_list_is_linear_and_one_add() {
        let env: Vec<Value> = (0..2000).map(|i| json!({"name": format!("E{i}"), "value": "v"})).collect();
        let mut env2 = env.clone();
        env2.push(json!({"name": "IS_INJECTED", "value": "true"}));
        let ops = check(json!({"env": env}), json!({"env": env2}));
        assert_eq!(ops.len(), 1);
    }
}
