//! The Pods the API server stores, as they are created, for shadow mode's live agreement
//! (docs/sidecarset.md#13-5-live-agreement). Nothing is cached: the watch starts from the current
//! resourceVersion (a list of one Pod, read for its resourceVersion only), hands each `ADDED` Pod to
//! the caller without its `managedFields`, and ignores every other event. A Pod created while the
//! watch is down is missed (its decision then expires unmatched), never looked for: a full list of
//! Pods is what this must not cost.

use std::pin::pin;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::LiveSettings;
use super::api_error::{ApiFailure, FailureKind, classify};
use super::outage::Backoff;
use super::watch::Timing;

const RESOURCE: &str = "pods";

/// Watch Pod creations cluster-wide until the task is aborted, calling `added` with each Pod
/// stored (JSON, `apiVersion` and `kind` set, no `managedFields`). Needs `list` and `watch` on
/// pods cluster-wide (the shadow RBAC).
pub fn start(
    client: kube::Client,
    settings: &LiveSettings,
    added: impl Fn(Value) + Send + Sync + 'static,
) -> JoinHandle<()> {
    let resource =
        ApiResource::from_gvk_with_plural(&kube::api::GroupVersionKind::gvk("", "v1", "Pod"), RESOURCE);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    tokio::spawn(run(api, super::timing(settings), added))
}

async fn run(api: Api<DynamicObject>, timing: Timing, added: impl Fn(Value)) {
    let mut backoff = Backoff::new(timing.backoff_min, timing.backoff_max);
    loop {
        let mut resource_version = match current_resource_version(&api, &timing).await {
            Ok(rv) => {
                backoff.reset();
                rv
            }
            Err(failure) => {
                tracing::warn!(error = %failure, "shadow agreement: cannot read the pods' resourceVersion; retrying");
                backoff.wait().await;
                continue;
            }
        };
        tracing::info!(resource_version = %resource_version, "shadow agreement: watching pod creations");
        loop {
            match watch(&api, &timing, &mut resource_version, &added).await {
                Ok(lasted) if lasted < Duration::from_secs(1) => backoff.wait().await,
                Ok(_) => backoff.reset(),
                Err(failure) if failure.kind == FailureKind::Gone => break,
                Err(failure) => {
                    tracing::warn!(error = %failure, "shadow agreement: the pod watch failed; retrying");
                    backoff.wait().await;
                }
            }
        }
        // Pods stored between the expired resourceVersion and now are missed, not listed.
        tracing::info!("shadow agreement: pod watch resourceVersion expired; starting from the current one");
    }
}

/// The resourceVersion to watch from: a list of at most one Pod (only the list's own
/// resourceVersion is read).
async fn current_resource_version(api: &Api<DynamicObject>, timing: &Timing) -> Result<String, ApiFailure> {
    let params = ListParams { limit: Some(1), ..ListParams::default() };
    match tokio::time::timeout(timing.request_timeout, api.list(&params)).await {
        Err(_) => Err(timed_out("list", timing)),
        Ok(Err(e)) => Err(classify(&e, "list", RESOURCE, None)),
        Ok(Ok(list)) => Ok(list.metadata.resource_version.unwrap_or_default()),
    }
}

fn timed_out(verb: &str, timing: &Timing) -> ApiFailure {
    ApiFailure {
        kind: FailureKind::Unreachable,
        message: format!(
            "{verb} {RESOURCE} cluster-wide: the API server did not answer within {}s",
            timing.request_timeout.as_secs()
        ),
    }
}

/// One watch from `resource_version` to its end (how long it lasted), keeping `resource_version`
/// at the last one seen. A 410 is an error of kind [`FailureKind::Gone`].
async fn watch(
    api: &Api<DynamicObject>,
    timing: &Timing,
    resource_version: &mut String,
    added: &impl Fn(Value),
) -> Result<Duration, ApiFailure> {
    let params =
        WatchParams { timeout: Some(timing.watch_timeout_secs), bookmarks: true, ..WatchParams::default() };
    let stream =
        match tokio::time::timeout(timing.request_timeout, api.watch(&params, resource_version)).await {
            Err(_) => return Err(timed_out("watch", timing)),
            Ok(Err(e)) => return Err(classify(&e, "watch", RESOURCE, None)),
            Ok(Ok(stream)) => stream,
        };
    let opened = Instant::now();
    let mut stream = pin!(stream);
    loop {
        let event = match tokio::time::timeout(timing.idle_timeout, stream.next()).await {
            Err(_) | Ok(None) => return Ok(opened.elapsed()),
            Ok(Some(Err(e))) => return Err(classify(&e, "watch", RESOURCE, None)),
            Ok(Some(Ok(event))) => event,
        };
        let object = match event {
            WatchEvent::Added(o) => Some(o),
            WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                if let Some(rv) = o.metadata.resource_version {
                    *resource_version = rv;
                }
                None
            }
            WatchEvent::Bookmark(b) => {
                *resource_version = b.metadata.resource_version;
                None
            }
            WatchEvent::Error(status) => {
                return Err(classify(&kube::Error::Api(status), "watch", RESOURCE, None));
            }
        };
        if let Some(object) = object {
            if let Some(rv) = &object.metadata.resource_version {
                resource_version.clone_from(rv);
            }
            if let Some(pod) = stored_pod(object) {
                added(pod);
            }
        }
    }
}

/// The Pod as the agreement reads it: JSON with `apiVersion` and `kind`, without `managedFields`
/// (often the largest part, and never compared).
fn stored_pod(object: DynamicObject) -> Option<Value> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    map.insert("apiVersion".into(), Value::String("v1".into()));
    map.insert("kind".into(), Value::String("Pod".into()));
    Some(value)
}
