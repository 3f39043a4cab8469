//! Lookups that are not worth caching (pods in a namespace, custom resources of a CRD). A webhook
//! names the queries it needs; the edge answers them (from the snapshot in `dry-run`, from the API
//! server in live mode) and passes the answers into the still-pure decision.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::Snapshot;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Query {
    /// Every object of a type (by API group and kind), in one namespace or in all (`None`).
    List { group: String, version: String, kind: String, namespace: Option<String> },
    /// One object by name.
    Get { group: String, version: String, kind: String, namespace: String, name: String },
}

/// How a lookup reads in a message: `list apps.kruise.io/v1beta1 CloneSet in namespace "a"`.
impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gv = |group: &str, version: &str| if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
        match self {
            Query::List { group, version, kind, namespace: Some(ns) } => {
                write!(f, "list {} {kind} in namespace {ns:?}", gv(group, version))
            }
            Query::List { group, version, kind, namespace: None } => write!(f, "list {} {kind} in all namespaces", gv(group, version)),
            Query::Get { group, version, kind, namespace, name } if namespace.is_empty() => {
                write!(f, "get {} {kind} {name:?}", gv(group, version))
            }
            Query::Get { group, version, kind, namespace, name } => write!(f, "get {} {kind} {namespace}/{name}", gv(group, version)),
        }
    }
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
                Query::List { group, kind, namespace, .. } => snapshot.list(group, kind, namespace.as_deref()).cloned().collect(),
                Query::Get { group, kind, namespace, name, .. } => {
                    snapshot.get(group, kind, namespace, name).cloned().into_iter().collect()
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
        let q = Query::List { group: String::new(), version: "v1".into(), kind: "Pod".into(), namespace: Some("shop".into()) };
        assert_eq!(q.to_string(), r#"list v1 Pod in namespace "shop""#);
        let q = Query::Get { group: "apps".into(), version: "v1".into(), kind: "Pod".into(), namespace: "a".into(), name: "p".into() };
        assert_eq!(q.to_string(), "get apps/v1 Pod a/p");
        assert_eq!(Answers::default().get(&q).unwrap_err(), "lookup (get apps/v1 Pod a/p) was not performed");
    }
}
