//! Live lookups: a webhook's [`Query`]s answered by the API server, each with a short timeout.
//! Failures become the `Err(String)` answer, worded so the person reading the denial knows what
//! to fix (RBAC, a missing CRD, an unreachable API server).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::discovery::Scope;
use serde_json::Value;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

use super::api_error::{FailureKind, classify, resource_name};
use crate::cluster::query::{Answer, Target, WriteFailure};
use crate::cluster::{Answers, Query};

/// At most this many lookups of one request are in flight at once (a CloneSet adding 32 pods to
/// `podsToDelete` asks 32 GETs; they go four at a time, not all at once).
pub const MAX_CONCURRENT: usize = 4;
/// A page of a full list.
const PAGE: u32 = 500;

/// Answers lookups against the API server. Kind-to-resource discovery is cached (a kind's
/// resource name does not change while the process runs); answers are not.
pub struct LiveLookups {
    client: kube::Client,
    timeout: Duration,
    resources: Mutex<HashMap<GroupVersionKind, (ApiResource, Scope)>>,
}

impl LiveLookups {
    /// `timeout` bounds each lookup, discovery included; keep it well below the webhook's
    /// `timeoutSeconds`.
    pub fn new(client: kube::Client, timeout: Duration) -> Self {
        LiveLookups { client, timeout, resources: Mutex::new(HashMap::new()) }
    }

    /// Perform every query, [`MAX_CONCURRENT`] at a time, and collect the answers for the decision.
    pub async fn answer(&self, queries: &[Query]) -> Answers {
        let mut waiting = queries.iter();
        let mut running = FuturesUnordered::new();
        let mut answers = Answers::default();
        loop {
            while running.len() < MAX_CONCURRENT
                && let Some(query) = waiting.next()
            {
                running.push(self.one(query));
            }
            match running.next().await {
                Some((query, answer)) => answers.insert(query, answer),
                None => return answers,
            }
        }
    }

    async fn one(&self, query: &Query) -> (Query, Answer) {
        let answer = match tokio::time::timeout(self.timeout, self.perform(query)).await {
            Ok(answer) => answer,
            Err(_) => {
                Err(format!("{query}: the API server did not answer within {}ms", self.timeout.as_millis()))
            }
        };
        (query.clone(), answer)
    }

    async fn perform(&self, query: &Query) -> Answer {
        let (group, version, kind) = match query {
            Query::List { group, version, kind, .. } | Query::Get { group, version, kind, .. } => {
                (group, version, kind)
            }
        };
        let (resource, scope) =
            self.resource(group, version, kind).await.map_err(|e| format!("{query}: {e}"))?;
        let rbac_name = resource_name(&resource.group, &resource.plural);
        match query {
            Query::List { namespace, filter, .. } => {
                let api: Api<DynamicObject> = match (namespace, &scope) {
                    (Some(ns), Scope::Namespaced) => Api::namespaced_with(self.client.clone(), ns, &resource),
                    _ => Api::all_with(self.client.clone(), &resource),
                };
                let selector = |s: &String| (!s.is_empty()).then(|| s.clone());
                // When one counted object is enough, the first page holds one object (usually the
                // answer), and pages grow only while they hold none (say, terminating pods).
                let mut params = ListParams {
                    label_selector: selector(&filter.labels),
                    field_selector: selector(&filter.fields),
                    limit: Some(if filter.until_one.is_some() { 1 } else { PAGE }),
                    ..ListParams::default()
                };
                let mut objects = Vec::new();
                loop {
                    let page = api.list(&params).await.map_err(|e| {
                        format!("{query}: {}", classify(&e, "list", &rbac_name, namespace.as_deref()))
                    })?;
                    let items: Vec<Arc<Value>> =
                        page.items.into_iter().filter_map(|o| typed_value(o, &resource)).collect();
                    let enough =
                        filter.until_one.is_some_and(|counted| items.iter().any(|o| counted.counts(o)));
                    objects.extend(items);
                    if enough {
                        return Ok(objects);
                    }
                    match page.metadata.continue_.filter(|c| !c.is_empty()) {
                        Some(token) => params.continue_token = Some(token),
                        None => return Ok(objects),
                    }
                    params.limit = params.limit.map(|limit| (limit * 10).min(PAGE));
                }
            }
            Query::Get { namespace, name, .. } => {
                let api: Api<DynamicObject> = match scope {
                    Scope::Namespaced => Api::namespaced_with(self.client.clone(), namespace, &resource),
                    Scope::Cluster => Api::all_with(self.client.clone(), &resource),
                };
                let ns = (!namespace.is_empty()).then_some(namespace.as_str());
                match api.get(name).await {
                    Ok(object) => Ok(typed_value(object, &resource).into_iter().collect()),
                    // Absent is an answer (as in `Answers::from_snapshot`), not a failure.
                    Err(e) => match classify(&e, "get", &rbac_name, ns) {
                        f if f.kind == FailureKind::NotFound => Ok(Vec::new()),
                        f => Err(format!("{query}: {f}")),
                    },
                }
            }
        }
    }

    /// Replace the `status` subresource of `target` with `object`'s, at the `resourceVersion` it
    /// carries (the API server refuses it with 409 if the object changed since). The object as
    /// stored, or why not.
    pub async fn update_status(&self, target: &Target, object: &Value) -> Result<Arc<Value>, WriteFailure> {
        let attempt = async {
            let (resource, scope) = self
                .resource(&target.group, &target.version, &target.kind)
                .await
                .map_err(WriteFailure::Other)?;
            let api: Api<DynamicObject> = match scope {
                Scope::Namespaced => Api::namespaced_with(self.client.clone(), &target.namespace, &resource),
                Scope::Cluster => Api::all_with(self.client.clone(), &resource),
            };
            let object: DynamicObject = serde_json::from_value(object.clone())
                .map_err(|e| WriteFailure::Other(format!("the object to write does not decode: {e}")))?;
            match api.replace_status(&target.name, &PostParams::default(), &object).await {
                Ok(stored) => typed_value(stored, &resource)
                    .ok_or_else(|| WriteFailure::Other("the API server's answer does not encode".into())),
                Err(e) => {
                    let rbac_name = format!("{}/status", resource_name(&resource.group, &resource.plural));
                    let ns = (!target.namespace.is_empty()).then_some(target.namespace.as_str());
                    let failure = classify(&e, "update", &rbac_name, ns);
                    Err(match failure.kind {
                        FailureKind::Conflict => WriteFailure::Conflict,
                        FailureKind::NotFound => WriteFailure::NotFound,
                        _ => WriteFailure::Other(failure.message),
                    })
                }
            }
        };
        match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(WriteFailure::Other(format!(
                "the API server did not answer within {}ms",
                self.timeout.as_millis()
            ))),
        }
    }

    async fn resource(&self, group: &str, version: &str, kind: &str) -> Result<(ApiResource, Scope), String> {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if let Some(found) = self.lock().get(&gvk) {
            return Ok(found.clone());
        }
        let api_version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
        let not_served =
            || format!("the API server does not serve {kind} in {api_version} (is its CRD installed?)");
        let (resource, caps) =
            kube::discovery::pinned_kind(&self.client, &gvk).await.map_err(|e| match e {
                kube::Error::Discovery(_) => not_served(),
                e => match classify(&e, "discover", &format!("API {api_version}"), None) {
                    f if f.kind == FailureKind::NotFound => not_served(),
                    f => f.message,
                },
            })?;
        let found = (resource, caps.scope);
        self.lock().insert(gvk, found.clone());
        Ok(found)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<GroupVersionKind, (ApiResource, Scope)>> {
        self.resources.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// JSON with apiVersion and kind set: list items of built-in types come without them.
fn typed_value(object: DynamicObject, resource: &ApiResource) -> Option<Arc<Value>> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    map.insert("apiVersion".into(), Value::String(resource.api_version.clone()));
    map.insert("kind".into(), Value::String(resource.kind.clone()));
    Some(Arc::new(value))
}
