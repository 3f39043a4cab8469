//! One list-then-watch loop per cached resource. It keeps the keys of its objects, and the changes
//! not yet published, in a [`WatchCell`] and wakes the publisher on every change. The objects
//! themselves live only in the published snapshot (which may keep less of them than the watch
//! delivers, e.g. ControllerRevisions), so nothing is cached twice.
//!
//! The loop is written out (instead of kube-runtime's `watcher`, which is why the `runtime`
//! feature of kube is off) because readiness needs to know exactly when a watch is healthy again.
//! The runtime watcher (kube 5) reports `Init`/`InitApply`/`InitDone` around a full re-list, but
//! when it re-opens a watch from the last resourceVersion (the usual recovery after a dropped
//! connection) it emits nothing until an object changes, so a quiet resource would look failed for
//! as long as nothing happens in it; it also hides the 410 Gone that forces a re-list and the
//! errors readiness counts (`--max-cache-staleness`).

use std::collections::{BTreeMap, BTreeSet};
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt as _};
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use serde_json::Value;

use super::api_error::{ApiFailure, FailureKind, classify};
use super::outage::{Backoff, FailureLog, Line, Waiter};
use crate::cluster::revisions::Revision;
use crate::cluster::{ObjectKey, Stored, TypeKey};

/// An object as a watch keeps it until it is published: whole (or trimmed) JSON, as a tree or as
/// text ([`Stored`]), or, for ControllerRevisions, only what decisions read, so that not even a
/// list holds them whole.
#[derive(Debug, Clone)]
pub(super) enum Kept {
    Object(Stored),
    Revision(Arc<Revision>),
}

impl Kept {
    /// Kept decoded: the kinds read on every review (SidecarSets, the Kruise ConfigMap) or
    /// listed and written back whole (PodUnavailableBudgets, WorkloadSpreads).
    pub fn tree(value: Value) -> Kept {
        Kept::Object(Stored::Tree(Arc::new(value)))
    }

    /// Kept as text ([`Stored::compact`]): the kinds there are many of, of which a review decodes
    /// the one or few it reads.
    pub fn compact(value: Value) -> Kept {
        Kept::Object(Stored::compact(value))
    }
}

/// How objects of one resource are fetched and what is kept of them.
pub(super) struct WatchSpec {
    /// Kind as shown in stats and messages (`SidecarSet`), qualified with its group after a dot
    /// where two watched kinds share a name (`StatefulSet.apps.kruise.io`).
    pub kind: String,
    pub api_version: String,
    /// RBAC name (`sidecarsets.apps.kruise.io`), for messages.
    pub resource: String,
    pub namespace: Option<String>,
    pub api: Api<DynamicObject>,
    pub field_selector: Option<String>,
    /// What is kept of each object: what decisions read (e.g. only a Namespace's labels).
    pub keep: fn(Value) -> Kept,
    /// Readable only through a grant an install may leave out (the Role in the Kruise namespace,
    /// which cannot be created where that namespace does not exist): a forbidden list then counts
    /// as an empty cache instead of keeping the server unready, is said loudly (one WARN, and
    /// `kruise_admission_cluster_watch_unreadable`), and is retried with backoff, so a later grant is
    /// picked up.
    pub optional: bool,
}

impl WatchSpec {
    /// The objects' kind: [`WatchSpec::kind`] without its group.
    pub fn object_kind(&self) -> &str {
        self.kind.split_once('.').map_or(self.kind.as_str(), |(kind, _)| kind)
    }
}

/// Timing of the loops; tests shorten it.
#[derive(Debug, Clone)]
pub(super) struct Timing {
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// A watch that delivers nothing (not even a bookmark) for this long is considered dead: the
    /// silence deadline, longer than `watch_timeout_secs` (after which the API server ends every
    /// stream, sending a bookmark two seconds before when it can).
    pub idle_timeout: Duration,
    /// Bound on a list page or on opening a watch: an API server that accepts the connection
    /// and never answers must not leave the cache silently frozen.
    pub request_timeout: Duration,
    /// Asked of the API server per watch request; it closes the stream after it.
    pub watch_timeout_secs: u32,
}

/// The state of one watch, shared with the publisher and readiness checks. Locked only briefly,
/// never across an `.await`.
#[derive(Debug, Default)]
pub(super) struct WatchState {
    /// The keys of the objects the API server has now.
    pub keys: BTreeSet<ObjectKey>,
    /// Each key added (`Some`: its latest object), changed or deleted (`None`) since the publisher
    /// last took them: the next snapshot is the previous one with these replaced, not a rebuild.
    /// Until the first snapshot, every key ever seen is here.
    pub dirty: BTreeMap<ObjectKey, Option<Kept>>,
    /// The initial list completed at least once.
    pub listed: bool,
    pub reconnects: u64,
    pub relists: u64,
    /// The current failure spell, if any (ended when a list or watch request succeeds): since when
    /// it has been failing, and what to log.
    pub failures: FailureLog,
    pub last_error: Option<ApiFailure>,
    /// An optional resource that RBAC does not let us list: cached as empty (see
    /// [`WatchSpec::optional`]).
    pub unreadable: bool,
}

pub(super) struct WatchCell {
    pub kind: String,
    /// The snapshot type of the objects (from the watched apiVersion and kind).
    pub type_key: TypeKey,
    state: Mutex<WatchState>,
}

impl WatchCell {
    pub fn new(spec: &WatchSpec) -> Self {
        WatchCell {
            kind: spec.kind.clone(),
            type_key: TypeKey::from_api_version(&spec.api_version, spec.object_kind()),
            state: Mutex::new(WatchState::default()),
        }
    }

    /// The state, even if a holder panicked (the maps stay consistent: every edit is one insert or
    /// one replace).
    pub fn lock(&self) -> MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The objects of a cell that no publisher takes changes from (the self-managed
    /// certificates' watch of the webhook configurations): its `dirty` map is never drained, so
    /// it holds every object the API server has now (`None` for the deleted ones).
    pub fn unpublished_objects(&self) -> Vec<Arc<Value>> {
        let s = self.lock();
        s.dirty
            .values()
            .filter_map(|kept| match kept {
                Some(Kept::Object(object)) => object.value(),
                Some(Kept::Revision(_)) | None => None,
            })
            .collect()
    }

    /// An attempt failed; the failure began at `began` (earlier than now for a silent watch).
    /// Logged as a failure spell: a WARN naming the cause at its start, a summary per interval.
    fn fail(&self, failure: ApiFailure, began: Instant) {
        let mut s = self.lock();
        let line = s.failures.failed(began, Instant::now());
        s.last_error = Some(failure.clone());
        drop(s);
        match line {
            Some(Line::Started) => {
                tracing::warn!(kind = %self.kind, error = %failure, "cluster watch failing; retrying with backoff");
            }
            Some(Line::Ongoing { failing_for, attempts }) => tracing::warn!(
                kind = %self.kind,
                error = %failure,
                failing_for_s = failing_for.as_secs(),
                attempts,
                "cluster watch still failing"
            ),
            Some(Line::Recovered { .. }) | None => {}
        }
    }

    /// A list or watch request succeeded: the end of a failure spell, if there was one.
    fn healthy(&self) {
        let line = self.lock().failures.recovered(Instant::now());
        if let Some(Line::Recovered { after, attempts }) = line {
            tracing::info!(kind = %self.kind, failed_for_s = after.as_secs_f64(), attempts, "cluster watch recovered");
        }
    }

    /// A (re)list's result: a relist can drop, add or change anything, so every key on either
    /// side is dirty.
    fn replace_all(&self, objects: BTreeMap<ObjectKey, Kept>) {
        let mut s = self.lock();
        let gone: Vec<ObjectKey> = s.keys.iter().filter(|k| !objects.contains_key(*k)).cloned().collect();
        s.dirty.extend(gone.into_iter().map(|k| (k, None)));
        s.keys = objects.keys().cloned().collect();
        s.dirty.extend(objects.into_iter().map(|(k, v)| (k, Some(v))));
        s.listed = true;
        let was_unreadable = std::mem::take(&mut s.unreadable);
        drop(s);
        self.healthy();
        if was_unreadable {
            tracing::info!(kind = %self.kind, "cluster watch readable again: its objects are cached");
        }
    }

    /// An optional resource RBAC refuses: cached as empty and counted as listed, so readiness
    /// does not wait for a grant the install may never make.
    fn unreadable(&self, failure: ApiFailure) {
        let mut s = self.lock();
        // Warned once per refusal spell, outside the lock (as `fail` does): readiness and the
        // publisher take it too.
        let warn = (!s.unreadable).then(|| failure.to_string());
        let keys = std::mem::take(&mut s.keys);
        s.dirty.extend(keys.into_iter().map(|k| (k, None)));
        s.listed = true;
        s.last_error = Some(failure);
        s.unreadable = true;
        drop(s);
        // Cached as empty: not failing (readiness does not wait), said by the WARN below.
        self.healthy();
        if let Some(error) = warn {
            tracing::warn!(kind = %self.kind, %error,
                "UNREADABLE: no RBAC grant to list this optional resource; it is cached as empty, so \
                 what decisions read from it is missing (e.g. SidecarSets pinned to a revision are \
                 refused) until the grant is made (docs/install.md, OpenKruise)");
        }
    }

    /// One watch event: the object stored (`Some`) or deleted (`None`).
    fn apply(&self, key: ObjectKey, value: Option<Kept>) {
        let mut s = self.lock();
        match &value {
            Some(_) => s.keys.insert(key.clone()),
            None => s.keys.remove(&key),
        };
        s.dirty.insert(key, value);
    }
}

/// Why a watch ended.
enum End {
    /// Closed by the server (its timeout) after `lasted`: re-watch from the last
    /// resourceVersion.
    Closed { lasted: Duration },
    /// 410: the resourceVersion is too old; relist.
    Gone,
    /// Failing since `began`: when the request was made, or when a silent stream last delivered.
    Failed { failure: ApiFailure, began: Instant },
}

impl End {
    fn failed_now(failure: ApiFailure) -> End {
        End::Failed { failure, began: Instant::now() }
    }
}

/// Run forever: list, watch, re-watch, relist on 410. `changed` is called after every change to
/// the cell's objects. `waiter` is this loop's part in the client's [`super::outage::Recovery`]:
/// its backoff ends early once the API server answers anyone again.
pub(super) async fn run(
    spec: WatchSpec,
    cell: Arc<WatchCell>,
    timing: Timing,
    mut waiter: Waiter,
    changed: impl Fn(),
) {
    let mut backoff = Backoff::new(timing.backoff_min, timing.backoff_max);
    loop {
        let listed = {
            let _relist = waiter.recovery().relist_permit().await;
            list(&spec, &timing).await
        };
        let mut resource_version = match listed {
            Ok((objects, rv)) => {
                waiter.answered();
                cell.replace_all(objects);
                changed();
                backoff.reset();
                rv
            }
            Err(failure) if spec.optional && failure.kind == FailureKind::Forbidden => {
                waiter.answered();
                cell.unreadable(failure);
                changed();
                waiter.pause(&mut backoff).await;
                continue;
            }
            Err(failure) => {
                waiter.failed(&failure);
                cell.fail(failure, Instant::now());
                waiter.pause(&mut backoff).await;
                continue;
            }
        };
        // Watch until the resourceVersion expires, then relist.
        loop {
            match watch(&spec, &cell, &timing, &mut waiter, &mut resource_version, &changed).await {
                End::Gone => break,
                End::Failed { failure, began } => {
                    waiter.failed(&failure);
                    cell.fail(failure, began);
                    waiter.pause(&mut backoff).await;
                }
                // A server that closes every stream at once must not turn this into a busy loop.
                End::Closed { lasted } if lasted < Duration::from_secs(1) => backoff.wait().await,
                End::Closed { .. } => backoff.reset(),
            }
        }
        tracing::info!(kind = %cell.kind, "resourceVersion expired; relisting");
        cell.lock().relists += 1;
    }
}

/// Open one watch from `resource_version` and follow it to its end, keeping `resource_version` at
/// the last one seen.
async fn watch(
    spec: &WatchSpec,
    cell: &WatchCell,
    timing: &Timing,
    waiter: &mut Waiter,
    resource_version: &mut String,
    changed: &impl Fn(),
) -> End {
    let params = WatchParams {
        field_selector: spec.field_selector.clone(),
        timeout: Some(timing.watch_timeout_secs),
        bookmarks: true,
        ..WatchParams::default()
    };
    let stream =
        match tokio::time::timeout(timing.request_timeout, spec.api.watch(&params, resource_version)).await {
            Ok(Ok(stream)) => stream,
            Err(_) => return End::failed_now(timed_out(spec, "watch", timing)),
            Ok(Err(e)) => {
                let failure = classify(&e, "watch", &spec.resource, spec.namespace.as_deref());
                return if failure.kind == FailureKind::Gone { End::Gone } else { End::failed_now(failure) };
            }
        };
    waiter.answered();
    cell.healthy();
    let end = follow(spec, cell, timing, stream, resource_version, changed).await;
    cell.lock().reconnects += 1;
    end
}

/// Apply a watch stream's events to the cell until it ends, or until it has been silent (not even
/// a bookmark) for `idle_timeout`: the API server ends every stream after `watch_timeout_secs`,
/// so a stream silent for longer is a connection that stopped delivering without closing. Dropping
/// it closes that connection.
async fn follow(
    spec: &WatchSpec,
    cell: &WatchCell,
    timing: &Timing,
    stream: impl Stream<Item = kube::Result<WatchEvent<DynamicObject>>>,
    resource_version: &mut String,
    changed: &impl Fn(),
) -> End {
    let opened = Instant::now();
    let mut heard = opened;
    let mut stream = pin!(stream);
    loop {
        let event = match tokio::time::timeout(timing.idle_timeout, stream.next()).await {
            Err(_) => return End::Failed { failure: silent(spec, timing), began: heard },
            Ok(None) => return End::Closed { lasted: opened.elapsed() },
            Ok(Some(Err(e))) => {
                return End::failed_now(classify(&e, "watch", &spec.resource, spec.namespace.as_deref()));
            }
            Ok(Some(Ok(event))) => event,
        };
        heard = Instant::now();
        let (object, present) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, true),
            WatchEvent::Deleted(o) => (o, false),
            WatchEvent::Bookmark(b) => {
                *resource_version = b.metadata.resource_version;
                continue;
            }
            WatchEvent::Error(status) if status.code == 410 => return End::Gone,
            WatchEvent::Error(status) => {
                return End::failed_now(classify(
                    &kube::Error::Api(status),
                    "watch",
                    &spec.resource,
                    spec.namespace.as_deref(),
                ));
            }
        };
        if let Some(rv) = &object.metadata.resource_version {
            resource_version.clone_from(rv);
        }
        if let Some((key, value)) = keyed(spec, object) {
            cell.apply(key, present.then_some(value));
            changed();
        }
    }
}

/// A watch stream that stopped delivering without closing.
fn silent(spec: &WatchSpec, timing: &Timing) -> ApiFailure {
    ApiFailure {
        kind: FailureKind::Unreachable,
        message: format!(
            "watch {} {}: no event or bookmark for {}s although the API server ends every watch after {}s; \
             the connection stopped delivering without closing (a stalled proxy, load balancer or NAT); reconnecting",
            spec.resource,
            scope(spec),
            timing.idle_timeout.as_secs(),
            timing.watch_timeout_secs
        ),
    }
}

fn scope(spec: &WatchSpec) -> String {
    spec.namespace.as_deref().map_or_else(|| "cluster-wide".to_owned(), |ns| format!("in namespace {ns:?}"))
}

fn timed_out(spec: &WatchSpec, verb: &str, timing: &Timing) -> ApiFailure {
    ApiFailure {
        kind: FailureKind::Unreachable,
        message: format!(
            "{verb} {} {}: the API server did not answer within {}s",
            spec.resource,
            scope(spec),
            timing.request_timeout.as_secs()
        ),
    }
}

/// The full list, page by page (each within `request_timeout`), and the resourceVersion to watch
/// from.
async fn list(spec: &WatchSpec, timing: &Timing) -> Result<(BTreeMap<ObjectKey, Kept>, String), ApiFailure> {
    let mut objects = BTreeMap::new();
    let mut params =
        ListParams { field_selector: spec.field_selector.clone(), limit: Some(500), ..ListParams::default() };
    loop {
        let page = tokio::time::timeout(timing.request_timeout, spec.api.list(&params))
            .await
            .map_err(|_| timed_out(spec, "list", timing))?
            .map_err(|e| classify(&e, "list", &spec.resource, spec.namespace.as_deref()))?;
        let continue_token = page.metadata.continue_.clone().filter(|c| !c.is_empty());
        let resource_version = page.metadata.resource_version.clone().unwrap_or_default();
        for o in page.items {
            if let Some((key, value)) = keyed(spec, o) {
                objects.insert(key, value);
            }
        }
        match continue_token {
            Some(token) => params.continue_token = Some(token),
            None => return Ok((objects, resource_version)),
        }
    }
}

/// The object as decisions see it: JSON with apiVersion and kind set (list items of built-in
/// types come without them), kept as far as it is read.
fn keyed(spec: &WatchSpec, object: DynamicObject) -> Option<(ObjectKey, Kept)> {
    let mut value = serde_json::to_value(object).ok()?;
    let map = value.as_object_mut()?;
    // Field ownership bookkeeping is often the largest part of an object and no decision reads it.
    if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    map.insert("apiVersion".into(), Value::String(spec.api_version.clone()));
    map.insert("kind".into(), Value::String(spec.object_kind().to_owned()));
    let key = ObjectKey::of(&value)?;
    Some((key, (spec.keep)(value)))
}
