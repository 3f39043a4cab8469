//! Shadow mode's live agreement (docs/sidecarset.md#13-5-live-agreement): our decisions on Pod
//! CREATEs, kept until the API server reports the Pod it stored, then handed out in pairs for
//! [`agreement::compare`](super::agreement::compare). Pure and bounded: the caller passes the time,
//! and the store holds at most [`Limits::max_count`] decisions and [`Limits::max_bytes`] of their
//! JSON, each for at most [`Limits::ttl`]; what leaves unpaired is reported so it can be counted.
//!
//! Pairing is the rule `dry-run --compare --stored` uses (docs/sidecarset.md#13-3), run the other way
//! round: here decisions wait for stored Pods. A stored Pod pairs with the decision on its namespace
//! and name; else with the oldest waiting decision of its namespace and `generateName` that has its
//! controller and whose Pod's containers it has ([`StoredPods::take`] decides, so the two directions
//! cannot drift apart).
//!
//! The first call for a Pod wins. The shadow webhook configuration sorts before kruise-manager's and
//! has `reinvocationPolicy: IfNeeded`, so the API server calls `/mutate-pod` again with the Pod as
//! kruise-manager mutated it; that call must not replace the decision on the Pod as created. A named
//! Pod already waiting keeps its first decision. A Pod with only `generateName` has nothing that ties
//! the two calls together (the review uid is new per call), so a call whose Pod already carries
//! Kruise's injection record (`kruise.io/sidecarset-hash`) is taken for a re-invocation and not kept.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::agreement::StoredPods;
use crate::api::json::at;
use crate::api::sidecarset::HASH_ANNOTATION;

/// How much the store may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Decisions waiting at once.
    pub max_count: usize,
    /// Their JSON size (original and ours), in bytes.
    pub max_bytes: usize,
    /// How long a decision waits for its stored Pod.
    pub ttl: Duration,
}

impl Default for Limits {
    /// 1,000 decisions (a burst of Pod creations several times what a large cluster sees in the
    /// seconds a Pod takes to be stored), 32 MiB of JSON, 60 s (a stored Pod arrives within
    /// milliseconds of its admission; a watch that reconnects misses what was stored meanwhile).
    fn default() -> Self {
        Limits { max_count: 1_000, max_bytes: 32 << 20, ttl: Duration::from_secs(60) }
    }
}

/// One decision: the Pod of the review and ours (it with our patch applied).
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The review's namespace.
    pub namespace: String,
    /// The review's name, else the object's; empty when the Pod only has `generateName`.
    pub name: String,
    pub original: Value,
    pub ours: Value,
}

/// What became of a decision offered to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    Kept,
    /// A decision for this namespace and name is already waiting (a re-invocation).
    FirstCallWins,
    /// The Pod already records a SidecarSet injection and has no name: a re-invocation after
    /// kruise-manager's injection.
    AlreadyInjected,
    /// No name and no `generateName`: nothing a stored Pod could be paired by.
    NoIdentity,
    /// Larger than the whole byte budget on its own.
    TooLarge,
}

/// Decisions that left the store without a stored Pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unmatched {
    /// Older than the TTL.
    pub expired: usize,
    /// Pushed out, oldest first, to make room under the caps.
    pub evicted: usize,
}

struct Entry {
    decided: Decided,
    at: Instant,
    bytes: usize,
}

/// The waiting decisions, oldest first.
pub struct PendingDecisions {
    limits: Limits,
    /// By arrival sequence: the oldest is first.
    entries: BTreeMap<u64, Entry>,
    by_name: HashMap<(String, String), u64>,
    by_generate_name: HashMap<(String, String), Vec<u64>>,
    bytes: usize,
    next: u64,
}

fn text<'v>(pod: &'v Value, keys: &[&str]) -> &'v str {
    at(pod, keys).and_then(Value::as_str).unwrap_or_default()
}

/// The size of `value` as JSON, without writing it anywhere.
fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

impl PendingDecisions {
    pub fn new(limits: Limits) -> Self {
        PendingDecisions {
            limits,
            entries: BTreeMap::new(),
            by_name: HashMap::new(),
            by_generate_name: HashMap::new(),
            bytes: 0,
            next: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The JSON bytes held.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keep `decided` (decided at `now`) unless a call for the same Pod came first; expired
    /// decisions leave first, then the oldest until it fits.
    pub fn remember(&mut self, decided: Decided, now: Instant) -> (Remembered, Unmatched) {
        let mut unmatched = Unmatched { expired: self.expire(now), evicted: 0 };
        let generate_name = text(&decided.original, &["metadata", "generateName"]).to_owned();
        if decided.name.is_empty() {
            if generate_name.is_empty() {
                return (Remembered::NoIdentity, unmatched);
            }
            if at(&decided.original, &["metadata", "annotations", HASH_ANNOTATION]).is_some() {
                return (Remembered::AlreadyInjected, unmatched);
            }
        } else if self.by_name.contains_key(&(decided.namespace.clone(), decided.name.clone())) {
            return (Remembered::FirstCallWins, unmatched);
        }
        let bytes = json_size(&decided.original) + json_size(&decided.ours);
        if bytes > self.limits.max_bytes {
            return (Remembered::TooLarge, unmatched);
        }
        while !self.entries.is_empty()
            && (self.entries.len() >= self.limits.max_count || self.bytes + bytes > self.limits.max_bytes)
        {
            let oldest = *self.entries.keys().next().expect("not empty");
            self.remove(oldest);
            unmatched.evicted += 1;
        }
        let seq = self.next;
        self.next += 1;
        if decided.name.is_empty() {
            self.by_generate_name.entry((decided.namespace.clone(), generate_name)).or_default().push(seq);
        } else {
            self.by_name.insert((decided.namespace.clone(), decided.name.clone()), seq);
        }
        self.bytes += bytes;
        self.entries.insert(seq, Entry { decided, at: now, bytes });
        (Remembered::Kept, unmatched)
    }

    /// Drop the decisions older than the TTL at `now`; how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        while let Some((&seq, entry)) = self.entries.iter().next() {
            if now.saturating_duration_since(entry.at) <= self.limits.ttl {
                break;
            }
            self.remove(seq);
            expired += 1;
        }
        expired
    }

    /// The decision `stored` (a Pod the API server stored) was made by, removed from the store,
    /// with `stored` given back; `None` when no waiting decision pairs with it.
    pub fn take(&mut self, stored: Value) -> Option<(Decided, Value)> {
        let namespace = text(&stored, &["metadata", "namespace"]).to_owned();
        let named =
            self.by_name.get(&(namespace.clone(), text(&stored, &["metadata", "name"]).to_owned())).copied();
        let generated = self
            .by_generate_name
            .get(&(namespace, text(&stored, &["metadata", "generateName"]).to_owned()))
            .cloned()
            .unwrap_or_default();
        // The stored Pod as the offline report indexes it: one Pod, taken by the first decision that
        // pairs with it, in the order decisions were made.
        let mut one = StoredPods::new([((), stored)]);
        for seq in named.into_iter().chain(generated) {
            let entry = &self.entries[&seq].decided;
            if let Some(((), stored)) = one.take(&entry.namespace, &entry.name, &entry.original) {
                let entry = self.remove(seq);
                return Some((entry.decided, stored));
            }
        }
        None
    }

    fn remove(&mut self, seq: u64) -> Entry {
        let entry = self.entries.remove(&seq).expect("indexed entries exist");
        self.bytes -= entry.bytes;
        let d = &entry.decided;
        if d.name.is_empty() {
            let key = (d.namespace.clone(), text(&d.original, &["metadata", "generateName"]).to_owned());
            if let Some(list) = self.by_generate_name.get_mut(&key) {
                list.retain(|&s| s != seq);
                if list.is_empty() {
                    self.by_generate_name.remove(&key);
                }
            }
        } else {
            self.by_name.remove(&(d.namespace.clone(), d.name.clone()));
        }
        entry
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, generate_name: &str, owner: &str, containers: &[&str]) -> Value {
        let containers: Vec<Value> = containers.iter().map(|c| json!({"name": c})).collect();
        let mut meta = json!({"namespace": "shop", "ownerReferences": [{"uid": owner, "controller": true}]});
        if !name.is_empty() {
            meta["name"] = json!(name);
        }
        if !generate_name.is_empty() {
            meta["generateName"] = json!(generate_name);
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": containers}})
    }

    fn decided(original: Value, marker: &str) -> Decided {
        let mut ours = original.clone();
        ours["metadata"]["annotations"] = json!({"marker": marker});
        Decided {
            namespace: "shop".into(),
            name: text(&original, &["metadata", "name"]).to_owned(),
            original,
            ours,
        }
    }

    fn marker(d: &Decided) -> &str {
        text(&d.ours, &["metadata", "annotations", "marker"])
    }

    fn store() -> PendingDecisions {
        PendingDecisions::new(Limits::default())
    }

    #[test]
    fn the_first_call_for_a_pod_wins() {
        let now = Instant::now();
        let mut pending = store();
        assert_eq!(
            pending.remember(decided(pod("web-0", "", "ss", &["app"]), "first"), now).0,
            Remembered::Kept
        );
        // The re-invocation after kruise-manager's injection: same name, the sidecar already there.
        let mut injected = pod("web-0", "", "ss", &["app", "log-agent"]);
        injected["metadata"]["annotations"] = json!({HASH_ANNOTATION: "{}"});
        assert_eq!(pending.remember(decided(injected.clone(), "second"), now).0, Remembered::FirstCallWins);
        // Without a name, the injection record marks the re-invocation.
        injected["metadata"].as_object_mut().unwrap().remove("name");
        injected["metadata"]["generateName"] = json!("web-");
        assert_eq!(pending.remember(decided(injected, "second"), now).0, Remembered::AlreadyInjected);
        assert_eq!(
            pending.remember(decided(pod("", "", "x", &["app"]), "none"), now).0,
            Remembered::NoIdentity
        );
        assert_eq!(pending.len(), 1);
        let (d, _) = pending.take(pod("web-0", "", "ss", &["app", "log-agent"])).unwrap();
        assert_eq!(marker(&d), "first");
        assert!(pending.is_empty() && pending.bytes() == 0);
        // Once paired, the name can be decided again (a StatefulSet Pod re-created).
        assert_eq!(
            pending.remember(decided(pod("web-0", "", "ss", &["app"]), "again"), now).0,
            Remembered::Kept
        );
    }

    #[test]
    fn stored_pods_pair_by_name_or_oldest_first_by_generate_name_controller_and_containers() {
        let now = Instant::now();
        let mut pending = store();
        for (i, owner) in ["rs-1", "rs-2", "rs-1"].into_iter().enumerate() {
            pending.remember(decided(pod("", "web-", owner, &["app"]), &format!("{owner}#{i}")), now);
        }
        pending.remember(decided(pod("", "web-", "rs-1", &["other"]), "rs-1 other"), now);
        pending.remember(decided(pod("db-0", "", "ss", &["db"]), "db-0"), now);
        let mut take = |stored: Value| pending.take(stored).map(|(d, _)| marker(&d).to_owned());
        assert_eq!(take(pod("web-x1", "web-", "rs-1", &["app", "log-agent"])).as_deref(), Some("rs-1#0"));
        assert_eq!(take(pod("web-x2", "web-", "rs-1", &["app", "log-agent"])).as_deref(), Some("rs-1#2"));
        assert_eq!(
            take(pod("web-x3", "web-", "rs-1", &["app"])),
            None,
            "only the one with other containers is left for rs-1"
        );
        assert_eq!(take(pod("web-x4", "web-", "rs-1", &["other"])).as_deref(), Some("rs-1 other"));
        assert_eq!(take(pod("web-x5", "web-", "rs-2", &["app"])).as_deref(), Some("rs-2#1"));
        let mut elsewhere = pod("db-0", "", "ss", &["db"]);
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(take(elsewhere), None, "another namespace");
        assert_eq!(take(pod("db-0", "", "ss", &["db"])).as_deref(), Some("db-0"));
        assert!(pending.is_empty());
    }

    #[test]
    fn the_caps_evict_the_oldest_and_say_how_many() {
        let now = Instant::now();
        let one = decided(pod("p-0", "", "x", &["app"]), "0");
        let size = json_size(&one.original) + json_size(&one.ours);
        let mut pending =
            PendingDecisions::new(Limits { max_count: 3, max_bytes: 1 << 20, ttl: Duration::from_secs(60) });
        let mut evicted = 0;
        for i in 0..5 {
            evicted += pending
                .remember(decided(pod(&format!("p-{i}"), "", "x", &["app"]), &i.to_string()), now)
                .1
                .evicted;
        }
        assert_eq!((pending.len(), evicted), (3, 2));
        assert!(pending.take(pod("p-1", "", "x", &["app"])).is_none(), "the oldest went first");
        assert!(pending.take(pod("p-2", "", "x", &["app"])).is_some());
        // By bytes: room for two.
        let mut pending = PendingDecisions::new(Limits {
            max_count: 100,
            max_bytes: size * 2 + 1,
            ttl: Duration::from_secs(60),
        });
        let evicted: usize = (0..4)
            .map(|i| pending.remember(decided(pod(&format!("p-{i}"), "", "x", &["app"]), "0"), now).1.evicted)
            .sum();
        assert_eq!((pending.len(), evicted), (2, 2));
        assert!(pending.bytes() <= size * 2 + 1);
        let mut big = pod("big", "", "x", &["app"]);
        big["spec"]["containers"][0]["env"] = json!([{"name": "X", "value": "x".repeat(size * 3)}]);
        assert_eq!(pending.remember(decided(big, "big"), now).0, Remembered::TooLarge);
        assert_eq!(pending.len(), 2, "a decision too large for the budget pushes nothing out");
    }

    #[test]
    fn decisions_expire_after_the_ttl() {
        let start = Instant::now();
        let mut pending =
            PendingDecisions::new(Limits { max_count: 10, max_bytes: 1 << 20, ttl: Duration::from_secs(60) });
        pending.remember(decided(pod("a", "", "x", &["app"]), "a"), start);
        pending.remember(decided(pod("", "web-", "x", &["app"]), "b"), start + Duration::from_secs(30));
        assert_eq!(pending.expire(start + Duration::from_secs(60)), 0);
        assert_eq!(pending.expire(start + Duration::from_secs(61)), 1);
        assert!(pending.take(pod("a", "", "x", &["app"])).is_none());
        // Remembering also expires what is due.
        let (_, unmatched) =
            pending.remember(decided(pod("c", "", "x", &["app"]), "c"), start + Duration::from_secs(91));
        assert_eq!(unmatched, Unmatched { expired: 1, evicted: 0 });
        assert_eq!(pending.len(), 1);
        assert!(pending.by_generate_name.is_empty(), "indexes follow the entries");
    }
}
