//! Which stored Pod is the one a Pod CREATE review made (docs/sidecarset.md#13-3-pairing-reviews-with-stored-pods).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{name_of, spec_list};
use crate::api::json::{at, field};

/// Stored Pods waiting to be paired with the reviews of their CREATE
/// (docs/sidecarset.md#13-3-pairing-reviews-with-stored-pods), each used once. Reviews that name
/// their Pod pair by namespace and name; a review with only `generateName` pairs with the oldest
/// unused Pod of that namespace and `generateName` that has the same controller and the review's
/// own containers and init containers (by name).
#[derive(Debug)]
pub struct StoredPods<T> {
    /// In creation order (creationTimestamp, then name); `None` once paired.
    pods: Vec<Option<(T, Value)>>,
    by_name: HashMap<(String, String), Vec<usize>>,
    by_generate_name: HashMap<(String, String), Vec<usize>>,
}

fn text<'v>(pod: &'v Value, keys: &[&str]) -> &'v str {
    at(pod, keys).and_then(Value::as_str).unwrap_or_default()
}

/// The uid of the Pod's controller (the ownerReference with `controller: true`), if any.
fn controller_uid(pod: &Value) -> Option<&str> {
    at(pod, &["metadata", "ownerReferences"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|o| field(o, "controller").and_then(Value::as_bool) == Some(true))
        .and_then(|o| field(o, "uid")?.as_str())
}

/// The review's containers and init containers are all in the stored Pod (a sidecar may have
/// replaced one in place, so names, not content).
fn has_containers_of(stored: &Value, original: &Value) -> bool {
    ["containers", "initContainers"].into_iter().all(|key| {
        let names: HashSet<&str> = spec_list(stored, key).iter().filter_map(name_of).collect();
        spec_list(original, key).iter().filter_map(name_of).all(|n| names.contains(n))
    })
}

impl<T> StoredPods<T> {
    /// Index `pods` (each with a label of where it came from, e.g. `file#index`); objects that are
    /// not Pods are left out.
    pub fn new(pods: impl IntoIterator<Item = (T, Value)>) -> Self {
        let mut pods: Vec<(T, Value)> =
            pods.into_iter().filter(|(_, p)| text(p, &["kind"]) == "Pod").collect();
        pods.sort_by(|(_, a), (_, b)| {
            let key = |p: &Value| {
                (
                    text(p, &["metadata", "creationTimestamp"]).to_owned(),
                    text(p, &["metadata", "name"]).to_owned(),
                )
            };
            key(a).cmp(&key(b))
        });
        let mut index = StoredPods {
            pods: Vec::with_capacity(pods.len()),
            by_name: HashMap::new(),
            by_generate_name: HashMap::new(),
        };
        for (i, (label, pod)) in pods.into_iter().enumerate() {
            let namespace = text(&pod, &["metadata", "namespace"]).to_owned();
            index
                .by_name
                .entry((namespace.clone(), text(&pod, &["metadata", "name"]).to_owned()))
                .or_default()
                .push(i);
            let generate_name = text(&pod, &["metadata", "generateName"]);
            if !generate_name.is_empty() {
                index.by_generate_name.entry((namespace, generate_name.to_owned())).or_default().push(i);
            }
            index.pods.push(Some((label, pod)));
        }
        index
    }

    /// The stored Pod for the CREATE of `original` in `namespace` (the review's `name`, else the
    /// object's), removed from the unpaired ones.
    pub fn take(&mut self, namespace: &str, name: &str, original: &Value) -> Option<(T, Value)> {
        let name = if name.is_empty() { text(original, &["metadata", "name"]) } else { name };
        let candidates = if name.is_empty() {
            let generate_name = text(original, &["metadata", "generateName"]);
            if generate_name.is_empty() {
                return None;
            }
            self.by_generate_name.get(&(namespace.to_owned(), generate_name.to_owned()))?
        } else {
            self.by_name.get(&(namespace.to_owned(), name.to_owned()))?
        };
        let by_name = !name.is_empty();
        let pods = &self.pods;
        let found = candidates.iter().copied().find(|&i| {
            pods[i].as_ref().is_some_and(|(_, stored)| {
                by_name
                    || (controller_uid(stored) == controller_uid(original)
                        && has_containers_of(stored, original))
            })
        })?;
        self.pods[found].take()
    }

    /// The stored Pods no review was paired with, in creation order.
    pub fn unpaired(&self) -> impl Iterator<Item = &(T, Value)> {
        self.pods.iter().flatten()
    }
}
