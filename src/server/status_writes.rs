//! The edge of the decisions that write status (`admission::writes`): their intended writes are
//! made here, after the decision allowed the request and before the answer is sent.
//!
//! Correctness across replicas comes from `resourceVersion` alone: each write carries the version
//! its decision read, a conflict (409) means someone else wrote first, and the request is decided
//! again on the object read fresh from the API server. Within one server, writes to one object are
//! also taken one at a time ([`StatusWrites::lock`]) and a decision that read an older version than
//! this server last wrote is decided again on that one before writing ([`StatusWrites::newer`]), so
//! concurrent requests of one replica queue instead of conflicting with each other.
//!
//! In folder mode there is no API server: writes are kept in memory with the same optimistic
//! concurrency, so a laptop server behaves like a cluster (a PodUnavailableBudget's allowance is
//! consumed), and the folder is never written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use crate::cluster::Snapshot;
use crate::cluster::query::{Target, WriteFailure};

/// Objects remembered as written at most; past it, entries the cache has caught up with go first.
const REMEMBERED: usize = 4096;

#[derive(Default)]
pub struct StatusWrites {
    locks: Mutex<HashMap<Target, Weak<tokio::sync::Mutex<()>>>>,
    /// The object as this server last wrote it, while its watch has not delivered that version.
    written: Mutex<HashMap<Target, Arc<Value>>>,
}

/// The `resourceVersion` of an object, as a number (Kruise compares them so too; the API server's
/// are etcd revisions). Missing or not a number: 0, older than anything written.
pub fn resource_version(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl StatusWrites {
    /// Hold the write locks of `targets` (in a fixed order, so two requests cannot deadlock).
    pub async fn lock(
        &self,
        targets: impl IntoIterator<Item = Target>,
    ) -> Vec<tokio::sync::OwnedMutexGuard<()>> {
        let mut targets: Vec<Target> = targets.into_iter().collect();
        targets.sort_by(|a, b| {
            (&a.group, &a.kind, &a.namespace, &a.name).cmp(&(&b.group, &b.kind, &b.namespace, &b.name))
        });
        targets.dedup();
        let mutexes: Vec<_> = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            if locks.len() >= REMEMBERED {
                locks.retain(|_, lock| lock.strong_count() > 0);
            }
            targets
                .into_iter()
                .map(|target| {
                    let entry = locks.entry(target).or_default();
                    entry.upgrade().unwrap_or_else(|| {
                        let lock = Arc::new(tokio::sync::Mutex::new(()));
                        *entry = Arc::downgrade(&lock);
                        lock
                    })
                })
                .collect()
        };
        let mut guards = Vec::with_capacity(mutexes.len());
        for mutex in mutexes {
            guards.push(mutex.lock_owned().await);
        }
        guards
    }

    /// What this server last wrote to `target`, when it is newer than `read` (the version a
    /// decision read). Forgets it once the cache holds that version or a later one.
    pub fn newer(&self, target: &Target, read: u64, snapshot: &Snapshot) -> Option<Arc<Value>> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let mine = written.get(target)?;
        let cached = snapshot.get(&target.group, &target.kind, &target.namespace, &target.name);
        if cached.is_some_and(|c| resource_version(&c) >= resource_version(mine)) {
            written.remove(target);
            return None;
        }
        (resource_version(mine) > read).then(|| mine.clone())
    }

    /// Remember `object` as the version of `target` this server wrote.
    pub fn remember(&self, target: &Target, object: Arc<Value>) {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        if written.len() >= REMEMBERED && !written.contains_key(target) {
            // Rare (thousands of budgets written within one watch delay): forgetting only costs a
            // conflict and a fresh read.
            written.clear();
        }
        written.insert(target.clone(), object);
    }

    /// Folder mode's write: refused as a conflict unless `object` carries the version last
    /// written (or the folder's); stored with the next version.
    pub fn write_in_memory(
        &self,
        target: &Target,
        object: &Value,
        snapshot: &Snapshot,
    ) -> Result<Arc<Value>, WriteFailure> {
        let mut written = self.written.lock().unwrap_or_else(|e| e.into_inner());
        let current = match written.get(target) {
            Some(mine) => mine.clone(),
            None => snapshot
                .get(&target.group, &target.kind, &target.namespace, &target.name)
                .ok_or(WriteFailure::NotFound)?,
        };
        if resource_version(&current) != resource_version(object) {
            return Err(WriteFailure::Conflict);
        }
        let mut stored = current.as_ref().clone();
        if let (Some(stored), Some(status)) = (stored.as_object_mut(), object.get("status")) {
            stored.insert("status".into(), status.clone());
        }
        if let Some(meta) = stored.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "resourceVersion".into(),
                Value::String((resource_version(&current) + 1).to_string()),
            );
        }
        let stored = Arc::new(stored);
        written.insert(target.clone(), stored.clone());
        Ok(stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> Target {
        Target {
            group: "policy.kruise.io".into(),
            version: "v1alpha1".into(),
            kind: "PodUnavailableBudget".into(),
            namespace: "a".into(),
            name: "pub".into(),
        }
    }

    fn budget(rv: &str, allowed: i64) -> Value {
        json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
               "metadata": {"namespace": "a", "name": "pub", "resourceVersion": rv},
               "spec": {"maxUnavailable": 1}, "status": {"unavailableAllowed": allowed}})
    }

    #[test]
    fn in_memory_writes_take_turns_on_the_resource_version() {
        let snapshot = Snapshot::from_objects([budget("7", 2)]);
        let writes = StatusWrites::default();
        let stored = writes.write_in_memory(&target(), &budget("7", 1), &snapshot).unwrap();
        assert_eq!(stored["metadata"]["resourceVersion"], "8");
        assert_eq!(stored["status"]["unavailableAllowed"], 1);
        // A second writer that read version 7 too conflicts, and then sees version 8.
        assert_eq!(
            writes.write_in_memory(&target(), &budget("7", 1), &snapshot),
            Err(WriteFailure::Conflict)
        );
        assert_eq!(writes.newer(&target(), 7, &snapshot).unwrap()["metadata"]["resourceVersion"], "8");
        assert!(writes.newer(&target(), 8, &snapshot).is_none());
        // Only the status is written, as the API server's status subresource does.
        let mut other_spec = budget("8", 0);
        other_spec["spec"]["maxUnavailable"] = json!(5);
        let stored = writes.write_in_memory(&target(), &other_spec, &snapshot).unwrap();
        assert_eq!(stored["spec"]["maxUnavailable"], 1);
        assert_eq!(stored["status"]["unavailableAllowed"], 0);
    }

    #[test]
    fn a_written_version_is_forgotten_once_the_cache_has_it() {
        let writes = StatusWrites::default();
        writes.remember(&target(), Arc::new(budget("9", 0)));
        assert!(writes.newer(&target(), 7, &Snapshot::from_objects([budget("7", 1)])).is_some());
        assert!(writes.newer(&target(), 7, &Snapshot::from_objects([budget("9", 0)])).is_none());
        // Forgotten: even an older read gets nothing from here now.
        assert!(writes.newer(&target(), 7, &Snapshot::from_objects([budget("7", 1)])).is_none());
    }

    #[test]
    fn a_missing_object_is_not_found_in_folder_mode() {
        let writes = StatusWrites::default();
        let missing = writes.write_in_memory(&target(), &budget("1", 0), &Snapshot::default());
        assert_eq!(missing, Err(WriteFailure::NotFound));
    }

    #[tokio::test]
    async fn locks_of_one_object_are_taken_in_turn() {
        let writes = Arc::new(StatusWrites::default());
        let first = writes.lock([target()]).await;
        let second = {
            let writes = writes.clone();
            tokio::spawn(async move { writes.lock([target(), target()]).await.len() })
        };
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        drop(first);
        assert_eq!(second.await.unwrap(), 1);
    }
}
