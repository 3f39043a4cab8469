//! Lookups that are not worth caching (pods in a namespace, custom resources of a CRD). A webhook
//! names the queries it needs; the edge answers them (from the snapshot in `dry-run`, from the API
//! server in live mode) and passes the answers into the still-pure decision.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::Snapshot;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Query {
    /// Objects of a type (by API group and kind), in one namespace or in all (`None`), as far as
    /// `filter` asks.
    List { group: String, version: String, kind: String, namespace: Option<String>, filter: ListFilter },
    /// One object by name.
    Get { group: String, version: String, kind: String, namespace: String, name: String },
}

/// What a list must return, so the API server sends only that. The answer may hold more (the
/// folder-backed answers ignore the filter), so a decision still checks every object it reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ListFilter {
    /// `labelSelector` (`app=web,tier in (a,b)`); empty selects everything.
    pub labels: String,
    /// `fieldSelector` (`status.phase!=Succeeded`); empty selects everything.
    pub fields: String,
    /// The decision only needs to know whether one object that this counts exists: the lookup
    /// may stop at the first page that holds one (so a count read from the answer is at least 1,
    /// not the total). `None`: every object is read.
    pub until_one: Option<Counted>,
}

/// Which listed objects a decision counts (the Kubernetes meanings, so the lookup and the
/// decision agree on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counted {
    /// Not being deleted (no `deletionTimestamp`).
    Live,
    /// A pod that is live and neither `Succeeded` nor `Failed` (`IsPodActive`).
    ActivePod,
    /// A PersistentVolumeClaim that is live and `Bound`.
    BoundClaim,
}

impl Counted {
    pub fn counts(self, object: &Value) -> bool {
        let live = object.pointer("/metadata/deletionTimestamp").is_none_or(Value::is_null);
        let phase = object.pointer("/status/phase").and_then(Value::as_str);
        live && match self {
            Counted::Live => true,
            Counted::ActivePod => !matches!(phase, Some("Succeeded" | "Failed")),
            Counted::BoundClaim => phase == Some("Bound"),
        }
    }
}

/// How a lookup reads in a message: `list apps.kruise.io/v1beta1 CloneSet in namespace "a"`.
impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gv = |group: &str, version: &str| {
            if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
        };
        match self {
            Query::List { group, version, kind, namespace, filter } => {
                write!(f, "list {} {kind}", gv(group, version))?;
                match namespace {
                    Some(ns) => write!(f, " in namespace {ns:?}")?,
                    None => write!(f, " in all namespaces")?,
                }
                for (name, selector) in [("labels", &filter.labels), ("fields", &filter.fields)] {
                    if !selector.is_empty() {
                        write!(f, " with {name} {selector:?}")?;
                    }
                }
                Ok(())
            }
            Query::Get { group, version, kind, namespace, name } if namespace.is_empty() => {
                write!(f, "get {} {kind} {name:?}", gv(group, version))
            }
            Query::Get { group, version, kind, namespace, name } => {
                write!(f, "get {} {kind} {namespace}/{name}", gv(group, version))
            }
        }
    }
}

/// Which object a write (or a fresh read) is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl Target {
    /// The lookup that reads the object again, fresh from the API server.
    pub fn query(&self) -> Query {
        let Target { group, version, kind, namespace, name } = self.clone();
        Query::Get { group, version, kind, namespace, name }
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// Why a status write was not made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailure {
    /// The object changed since the decision read it (409): read it again and decide again.
    Conflict,
    /// The object is gone: Kruise counts that as done (there is nothing left to account in).
    NotFound,
    /// Anything else, in words for the person reading the answer.
    Other(String),
}

/// What a lookup returned, or why it failed (the message is shown to the user in a denial).
pub type Answer = Result<Vec<Arc<Value>>, String>;

#[derive(Debug, Default)]
pub struct Answers(HashMap<Query, Answer>);

impl Answers {
    pub fn insert(&mut self, query: Query, answer: Answer) {
        self.0.insert(query, answer);
    }

    /// The answer to `query`; a query nobody asked is an error the decision can report.
    pub fn get(&self, query: &Query) -> Result<&[Arc<Value>], String> {
        match self.0.get(query) {
            Some(Ok(objects)) => Ok(objects),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("lookup ({query}) was not performed")),
        }
    }

    /// Answer every query from a snapshot (dry-run and the folder-backed server).
    pub fn from_snapshot(snapshot: &Snapshot, queries: &[Query]) -> Self {
        let mut answers = Answers::default();
        for q in queries {
            let objects = match q {
                Query::List { group, kind, namespace, .. } => {
                    snapshot.list(group, kind, namespace.as_deref()).collect()
                }
                Query::Get { group, kind, namespace, name, .. } => {
                    snapshot.get(group, kind, namespace, name).into_iter().collect()
                }
            };
            answers.insert(q.clone(), Ok(objects));
        }
        answers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_read_like_kubectl() {
        let mut filter = ListFilter::default();
        let q = Query::List {
            group: String::new(),
            version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some("shop".into()),
            filter,
        };
        assert_eq!(q.to_string(), r#"list v1 Pod in namespace "shop""#);
        filter =
            ListFilter { labels: "app=web".into(), fields: "status.phase!=Failed".into(), until_one: None };
        let q = Query::List {
            group: "g".into(),
            version: "v1".into(),
            kind: "W".into(),
            namespace: None,
            filter,
        };
        assert_eq!(
            q.to_string(),
            r#"list g/v1 W in all namespaces with labels "app=web" with fields "status.phase!=Failed""#
        );
        let q = Query::Get {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Pod".into(),
            namespace: "a".into(),
            name: "p".into(),
        };
        assert_eq!(q.to_string(), "get apps/v1 Pod a/p");
        assert_eq!(Answers::default().get(&q).unwrap_err(), "lookup (get apps/v1 Pod a/p) was not performed");
    }
}
