//! Live cluster mode: the snapshot kept current from API server watches, the live lookups, and
//! self-managed serving certificates.
//!
//! What `serve` calls (see the README's "Cluster modes"):
//! - [`LiveOptions`] (flatten into the `serve` arguments) and [`LiveOptions::client`];
//! - [`LiveCluster::start`] with a function that stores each new snapshot, then
//!   [`LiveCluster::wait_synced`] (fail fast) and [`LiveCluster::readiness`] for `/readyz`;
//! - [`LiveLookups::answer`] for a webhook's `queries`;
//! - [`certs::CertManager::start`] when `--cert-mode self-managed`.

pub mod api_error;
pub mod certs;
pub mod lookup;
pub mod options;
pub mod outage;
pub mod pod_creations;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use kube::api::{Api, ApiResource};
use kube::discovery::Scope;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

pub use lookup::LiveLookups;
pub use options::{CertMode, ClusterMode, LiveOptions};

use api_error::{FailureKind, classify};
use outage::Recovery;
use watch::{Kept, Timing, WatchCell, WatchSpec};

use crate::cluster::revisions::Revision;
use crate::cluster::{Change, Snapshot};

/// Why live mode cannot start. The message is one line an operator can act on.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// Kubeconfig or in-cluster configuration missing or invalid.
    #[error("cannot configure the Kubernetes client: {0}")]
    Config(String),
    /// The API server cannot be reached or refuses us (RBAC, credentials).
    #[error("{0}")]
    Api(String),
    /// A CustomResourceDefinition this server needs is not installed.
    #[error("{0}")]
    MissingCrd(String),
    /// The caches did not sync within the allowed time.
    #[error("{0}")]
    NotSynced(String),
}

/// What live mode watches and how quickly it reacts.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    /// Where ControllerRevisions and the `kruise-configuration` ConfigMap live.
    pub kruise_namespace: String,
    /// A watch failing longer than this makes the server unready (`--max-cache-staleness`).
    pub max_cache_staleness: Duration,
    /// Changes arriving within this window are folded into one new snapshot.
    pub coalesce: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// Each watch request asks the API server to end its stream after this (`timeoutSeconds`); it
    /// sends a bookmark two seconds before when it can.
    pub watch_timeout: Duration,
    /// A watch that delivers nothing, not even a bookmark, for this long is failing since it last
    /// delivered, and is reopened: the silence deadline. Longer than `watch_timeout`.
    pub idle_timeout: Duration,
    /// Bound on each list page and on opening a watch.
    pub request_timeout: Duration,
    /// While the API server does not answer (or refuses our credentials), it is asked `/readyz`
    /// this often, and every watch retries as soon as it answers (see [`outage`]).
    pub probe_interval: Duration,
}

impl Default for LiveSettings {
    fn default() -> Self {
        LiveSettings {
            kruise_namespace: "kruise-system".into(),
            max_cache_staleness: Duration::from_secs(120),
            coalesce: Duration::from_millis(50),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            watch_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(35),
            request_timeout: Duration::from_secs(10),
            probe_interval: Duration::from_secs(1),
        }
    }
}

/// The Kruise configuration ConfigMap decisions may read.
pub const KRUISE_CONFIGMAP: &str = "kruise-configuration";

/// Counts and health of one cached kind, for metrics (`kruise_admission_cluster_objects{kind}`).
#[derive(Debug, Clone)]
pub struct KindStats {
    pub kind: String,
    pub objects: usize,
    pub synced: bool,
    /// Watch streams that ended and were reopened (server timeouts, dropped connections, errors).
    pub reconnects: u64,
    /// Full relists after a 410 Gone.
    pub relists: u64,
    /// How long the watch has been failing, if it is.
    pub failing_for: Option<Duration>,
    pub last_error: Option<String>,
    /// An optional resource RBAC does not let us list, cached as empty.
    pub unreadable: bool,
}

#[derive(Debug, Clone)]
pub struct LiveStats {
    pub kinds: Vec<KindStats>,
    /// When the current snapshot was built (`kruise_admission_cluster_snapshot_timestamp_seconds`).
    pub snapshot_built_at: Option<SystemTime>,
    /// The `/mutate-pod` steps this cluster cannot run (their CRD is not served):
    /// `kruise_admission_pod_step_skipped{step}`.
    pub skipped_steps: Vec<&'static str>,
}

struct Shared {
    publish: Box<dyn Fn(Arc<Snapshot>) + Send + Sync>,
    cells: Vec<Arc<WatchCell>>,
    dirty: Notify,
    synced: AtomicBool,
    built_at: std::sync::Mutex<Option<SystemTime>>,
}

/// Watches SidecarSets, Namespaces, ControllerRevisions and the Kruise ConfigMap, and publishes
/// an immutable [`Snapshot`] of them after every change (readers swap whole snapshots, so they
/// never block and never see half an update). Dropping it stops the watches.
pub struct LiveCluster {
    shared: Arc<Shared>,
    settings: LiveSettings,
    skipped_steps: Vec<&'static str>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for LiveCluster {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl LiveCluster {
    /// Discover the SidecarSet API version the cluster serves and start the watches. Returns once
    /// they are running, before they have synced (see [`LiveCluster::wait_synced`]). Errors: the
    /// API server is unreachable or refuses discovery, or the SidecarSet CRD is not installed.
    ///
    /// `publish` receives each new snapshot (e.g. `move |s| arc_swap.store(s)`): first once every
    /// initial list is done, then after every (coalesced) change. It must not block.
    pub async fn start(
        client: kube::Client,
        settings: LiveSettings,
        publish: impl Fn(Arc<Snapshot>) + Send + Sync + 'static,
    ) -> Result<LiveCluster, LiveError> {
        let sidecarset = discover_sidecarset(&client).await?;
        let client_for_probe = client.clone();
        let (mut pod_step_specs, mut skipped_steps) = pod_step_specs(&client).await?;
        for (kind, step, keep) in POD_STEP_KINDS {
            match served(&client, "apps.kruise.io", "v1alpha1", kind).await? {
                Some(resource) => pod_step_specs.push(cluster_wide(&client, &resource, keep)),
                None => {
                    tracing::warn!(
                        step,
                        "the API server does not serve {kind}s (apps.kruise.io/v1alpha1): /mutate-pod's {step} step is skipped"
                    );
                    skipped_steps.push(step);
                }
            }
        }
        let mut specs = base_watches(&client, &sidecarset, &settings.kruise_namespace);
        specs.extend(pod_step_specs);
        let shared = Arc::new(Shared {
            publish: Box::new(publish),
            cells: specs.iter().map(|s| Arc::new(WatchCell::new(s))).collect(),
            dirty: Notify::new(),
            synced: AtomicBool::new(false),
            built_at: std::sync::Mutex::new(None),
        });
        let timing = timing(&settings);
        let (recovery, probe) = Recovery::start(client_for_probe, settings.probe_interval);
        let mut tasks = vec![probe];
        for (spec, cell) in specs.into_iter().zip(shared.cells.iter().cloned()) {
            let shared = Arc::clone(&shared);
            tasks.push(tokio::spawn(watch::run(spec, cell, timing.clone(), recovery.waiter(), move || {
                shared.dirty.notify_one()
            })));
        }
        tasks.push(tokio::spawn(publish_changes(Arc::clone(&shared), settings.coalesce)));
        Ok(LiveCluster { shared, settings, skipped_steps, tasks })
    }

    /// Every initial list is done and the first snapshot is published.
    pub fn synced(&self) -> bool {
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Wait until [`LiveCluster::synced`], at most `timeout`. Fails early, with the reason, when an
    /// initial list is refused (RBAC, missing resource); `serve` should exit non-zero on error.
    pub async fn wait_synced(&self, timeout: Duration) -> Result<(), LiveError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.synced() {
                return Ok(());
            }
            for cell in &self.shared.cells {
                let s = cell.lock();
                if let Some(e) = &s.last_error
                    && !s.listed
                    && matches!(
                        e.kind,
                        FailureKind::Forbidden | FailureKind::Unauthorized | FailureKind::NotFound
                    )
                {
                    return Err(LiveError::Api(format!("cannot cache {}s: {e}", cell.kind)));
                }
            }
            if Instant::now() >= deadline {
                return Err(LiveError::NotSynced(format!(
                    "cluster caches did not sync within {timeout:?}: {}",
                    self.pending()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the snapshot may be served (`/readyz`): synced, and no watch failing for longer than
    /// `--max-cache-staleness`. The error says why not.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.synced() {
            return Err(format!("cluster caches have not synced: {}", self.pending()));
        }
        for cell in &self.shared.cells {
            let s = cell.lock();
            if let Some(since) = s.failures.failing_since()
                && since.elapsed() > self.settings.max_cache_staleness
            {
                let error = s.last_error.as_ref().map_or_else(String::new, |e| format!(": {e}"));
                return Err(format!(
                    "the {} watch has been failing for {}s, longer than --max-cache-staleness{error}",
                    cell.kind,
                    since.elapsed().as_secs()
                ));
            }
        }
        Ok(())
    }

    pub fn stats(&self) -> LiveStats {
        let kinds = self
            .shared
            .cells
            .iter()
            .map(|cell| {
                let s = cell.lock();
                KindStats {
                    kind: cell.kind.clone(),
                    objects: s.keys.len(),
                    synced: s.listed,
                    reconnects: s.reconnects,
                    relists: s.relists,
                    failing_for: s.failures.failing_since().map(|t| t.elapsed()),
                    last_error: s.last_error.as_ref().map(ToString::to_string),
                    unreadable: s.unreadable,
                }
            })
            .collect();
        let snapshot_built_at = *self.shared.built_at.lock().unwrap_or_else(|e| e.into_inner());
        LiveStats { kinds, snapshot_built_at, skipped_steps: self.skipped_steps.clone() }
    }

    /// The kinds still waiting for their first list, with their last error.
    fn pending(&self) -> String {
        let pending: Vec<String> = self
            .shared
            .cells
            .iter()
            .filter_map(|cell| {
                let s = cell.lock();
                (!s.listed).then(|| match &s.last_error {
                    Some(e) => format!("{} ({e})", cell.kind),
                    None => cell.kind.clone(),
                })
            })
            .collect();
        if pending.is_empty() {
            "publishing the first snapshot".into()
        } else {
            format!("waiting for {}", pending.join(", "))
        }
    }
}

/// The watches every live cluster has: SidecarSets, Namespaces (labels only), and in the Kruise
/// namespace its ControllerRevisions and the `kruise-configuration` ConfigMap.
fn base_watches(client: &kube::Client, sidecarset: &ApiResource, kruise_namespace: &str) -> Vec<WatchSpec> {
    let ns = kruise_namespace.to_owned();
    vec![
        WatchSpec {
            kind: "SidecarSet".into(),
            api_version: sidecarset.api_version.clone(),
            resource: api_error::resource_name(&sidecarset.group, &sidecarset.plural),
            namespace: None,
            api: Api::all_with(client.clone(), sidecarset),
            field_selector: None,
            keep: Kept::tree,
            optional: false,
        },
        WatchSpec {
            kind: "Namespace".into(),
            api_version: "v1".into(),
            resource: "namespaces".into(),
            namespace: None,
            api: Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(&gvk("", "v1", "Namespace"), "namespaces"),
            ),
            field_selector: None,
            keep: namespace_labels_only,
            optional: false,
        },
        WatchSpec {
            kind: "ControllerRevision".into(),
            api_version: "apps/v1".into(),
            resource: "controllerrevisions.apps".into(),
            namespace: Some(ns.clone()),
            api: Api::namespaced_with(
                client.clone(),
                &ns,
                &ApiResource::from_gvk_with_plural(
                    &gvk("apps", "v1", "ControllerRevision"),
                    "controllerrevisions",
                ),
            ),
            field_selector: None,
            keep: |v| Kept::Revision(Arc::new(Revision::of(&v))),
            // The Kruise namespace is read through a Role there, which an install without
            // OpenKruise (no such namespace) cannot create.
            optional: true,
        },
        WatchSpec {
            kind: "ConfigMap".into(),
            api_version: "v1".into(),
            resource: "configmaps".into(),
            namespace: Some(ns.clone()),
            api: Api::namespaced_with(
                client.clone(),
                &ns,
                &ApiResource::from_gvk_with_plural(&gvk("", "v1", "ConfigMap"), "configmaps"),
            ),
            field_selector: Some(format!("metadata.name={KRUISE_CONFIGMAP}")),
            keep: Kept::tree,
            optional: true,
        },
    ]
}

/// Publish a new snapshot after changes, folding bursts into one. Nothing is published until
/// every kind has been listed, so a half-filled cache is never served. The first snapshot is built
/// from every cache; each later one is the previous with the changed keys replaced
/// ([`Snapshot::apply`]), so its cost (SidecarSet index included) follows the change, not the
/// cluster's size.
async fn publish_changes(shared: Arc<Shared>, coalesce: Duration) {
    let mut last: Option<Arc<Snapshot>> = None;
    loop {
        shared.dirty.notified().await;
        tokio::time::sleep(coalesce).await;
        if !shared.cells.iter().all(|cell| cell.lock().listed) {
            continue;
        }
        let mut objects = Vec::new();
        let mut revisions = Vec::new();
        for cell in &shared.cells {
            let dirty = std::mem::take(&mut cell.lock().dirty);
            for (key, kept) in dirty {
                match kept {
                    Some(Kept::Revision(revision)) => revisions.push((key, Some(revision))),
                    Some(Kept::Object(object)) => {
                        objects.push(Change { type_key: cell.type_key.clone(), key, object: Some(object) })
                    }
                    None => objects.push(Change { type_key: cell.type_key.clone(), key, object: None }),
                }
            }
        }
        let snapshot = match &last {
            None => {
                let first = Snapshot::default().apply_with(objects, revisions);
                // Built once here; every later snapshot derives its index from this one.
                let _ = first.sidecarset_index();
                first
            }
            Some(_) if objects.is_empty() && revisions.is_empty() => continue,
            Some(previous) => previous.apply_with(objects, revisions),
        };
        let snapshot = Arc::new(snapshot);
        (shared.publish)(Arc::clone(&snapshot));
        last = Some(snapshot);
        *shared.built_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(SystemTime::now());
        shared.synced.store(true, Ordering::Release);
    }
}

/// The watches' timing from the settings. The silence deadline is kept beyond the streams' own
/// end, so a healthy quiet watch is never taken for a dead one.
fn timing(settings: &LiveSettings) -> Timing {
    Timing {
        backoff_min: settings.backoff_min,
        backoff_max: settings.backoff_max,
        // A silence deadline no longer than the streams' own end would reopen healthy watches.
        idle_timeout: settings.idle_timeout.max(settings.watch_timeout + Duration::from_secs(2)),
        request_timeout: settings.request_timeout,
        // Short (client-go's reflector asks 5 to 10 minutes), so that a stream silent past it
        // is known dead within the silence deadline, even where no bookmark can come.
        watch_timeout_secs: u32::try_from(settings.watch_timeout.as_secs().max(1)).unwrap_or(u32::MAX),
    }
}

fn gvk(group: &str, version: &str, kind: &str) -> kube::api::GroupVersionKind {
    kube::api::GroupVersionKind::gvk(group, version, kind)
}

/// Decisions read only a Namespace's name and labels; the rest (uid, resourceVersion, annotations
/// with last-applied configurations, status) would only cost memory, ten thousand times over.
fn namespace_labels_only(value: Value) -> Kept {
    let meta = value.get("metadata");
    let mut kept = serde_json::Map::new();
    for field in ["name", "labels"] {
        if let Some(v) = meta.and_then(|m| m.get(field)) {
            kept.insert(field.into(), v.clone());
        }
    }
    Kept::compact(
        serde_json::json!({"apiVersion": value["apiVersion"], "kind": value["kind"], "metadata": kept}),
    )
}

/// The `/mutate-pod` step that reads PodUnavailableBudgets (`kruise.io/related-pub`), as
/// [`LiveStats::skipped_steps`] names it.
pub const RELATED_PUB_STEP: &str = "related-pub";
/// The `/mutate-pod` step that reads WorkloadSpreads (step 2).
pub const WORKLOAD_SPREAD_STEP: &str = "workloadspread";

/// The watches of `/mutate-pod`'s steps that read Kruise's policies: PodUnavailableBudgets
/// (related-pub) and WorkloadSpreads, and the workloads both read (Deployments, ReplicaSets, both
/// StatefulSets, CloneSets; Jobs for WorkloadSpread), kept as far as the decisions read them. A
/// policy kind the API server does not serve is not watched and its step is reported skipped (one
/// WARN here, and the gauge), since without it the step does nothing. The watches are optional: a
/// ClusterRole from before they existed leaves them empty (`kruise_admission_cluster_watch_unreadable`),
/// it does not keep the server unready.
async fn pod_step_specs(client: &kube::Client) -> Result<(Vec<WatchSpec>, Vec<&'static str>), LiveError> {
    use crate::admission::pod::related_pub::{PUB_GROUP, PUB_KIND};
    use crate::admission::workload_spread::{WS_GROUP, WS_KIND, WS_VERSION};
    let mut specs = Vec::new();
    let mut skipped = Vec::new();
    let pubs = served(client, PUB_GROUP, "v1alpha1", PUB_KIND).await?;
    match &pubs {
        Some(resource) => specs.push(cluster_wide(client, resource, Kept::tree)),
        None => {
            tracing::warn!(
                step = RELATED_PUB_STEP,
                "the API server does not serve PodUnavailableBudgets ({PUB_GROUP}/v1alpha1): /mutate-pod's kruise.io/related-pub step is skipped"
            );
            skipped.push(RELATED_PUB_STEP);
        }
    }
    let spreads = served(client, WS_GROUP, WS_VERSION, WS_KIND).await?;
    match &spreads {
        Some(resource) => specs.push(cluster_wide(client, resource, workload_spread_fields)),
        None => {
            tracing::warn!(
                step = WORKLOAD_SPREAD_STEP,
                "the API server does not serve WorkloadSpreads ({WS_GROUP}/{WS_VERSION}): /mutate-pod's WorkloadSpread step is skipped"
            );
            skipped.push(WORKLOAD_SPREAD_STEP);
        }
    }
    if pubs.is_none() && spreads.is_none() {
        return Ok((specs, skipped));
    }
    let mut workloads = vec![
        ("apps", "v1", "Deployment", "deployments"),
        ("apps", "v1", "ReplicaSet", "replicasets"),
        ("apps", "v1", "StatefulSet", "statefulsets"),
    ];
    if spreads.is_some() {
        workloads.push(("batch", "v1", "Job", "jobs"));
    }
    for (group, version, kind, plural) in workloads {
        let resource = ApiResource::from_gvk_with_plural(&gvk(group, version, kind), plural);
        specs.push(cluster_wide(client, &resource, workload_fields_only));
    }
    // Kruise's own workloads, where their CRDs are installed.
    for (version, kind) in [("v1alpha1", "CloneSet"), ("v1beta1", "StatefulSet")] {
        if let Some(resource) = served(client, "apps.kruise.io", version, kind).await? {
            specs.push(cluster_wide(client, &resource, workload_fields_only));
        }
    }
    Ok((specs, skipped))
}

/// The `/mutate-pod` steps that read one kind of `apps.kruise.io/v1alpha1` each, as
/// [`LiveStats::skipped_steps`] names them.
pub const PERSISTENT_POD_STATE_STEP: &str = "persistent-pod-state";
pub const POD_PROBE_MARKER_STEP: &str = "pod-probe-marker";

/// What a watch keeps of each object it receives.
type KeepFn = fn(Value) -> Kept;

/// The kinds of steps 6 and 7 (PodProbeMarker on serverless), each watched cluster-wide where
/// served and kept as far as its step reads it; where one is not served, its step is skipped, with
/// one WARN and the gauge, since without such objects the step changes nothing. Optional, as the
/// related-pub watches are.
const POD_STEP_KINDS: [(&str, &str, KeepFn); 2] = [
    ("PersistentPodState", PERSISTENT_POD_STATE_STEP, persistent_pod_state_fields_only),
    ("PodProbeMarker", POD_PROBE_MARKER_STEP, probe_marker_fields_only),
];

/// A cluster-wide, optional watch of `resource` (see [`pod_step_specs`]). Kruise's StatefulSet
/// is named `StatefulSet.apps.kruise.io` in stats and messages, beside the `apps` one.
fn cluster_wide(client: &kube::Client, resource: &ApiResource, keep: fn(Value) -> Kept) -> WatchSpec {
    let qualified = resource.group == "apps.kruise.io" && resource.kind == "StatefulSet";
    WatchSpec {
        kind: if qualified { format!("{}.{}", resource.kind, resource.group) } else { resource.kind.clone() },
        api_version: resource.api_version.clone(),
        resource: api_error::resource_name(&resource.group, &resource.plural),
        namespace: None,
        api: Api::all_with(client.clone(), resource),
        field_selector: None,
        keep,
        optional: true,
    }
}

/// `group/version` `kind`, if the API server serves it.
async fn served(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
) -> Result<Option<ApiResource>, LiveError> {
    match kube::discovery::pinned_kind(client, &gvk(group, version, kind)).await {
        Ok((resource, _)) => Ok(Some(resource)),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(e) => {
            let failure = classify(&e, "discover", &format!("API {group}/{version}"), None);
            match failure.kind {
                FailureKind::NotFound => Ok(None),
                _ => Err(LiveError::Api(failure.message)),
            }
        }
    }
}

/// What the controller finder and WorkloadSpread read of a workload: its name, uid and owner
/// references (a ReplicaSet's Deployment), `spec.replicas` (a Job's `spec.parallelism`) and
/// `spec.selector`. A Deployment's or CloneSet's pod template, often most of the object, is dropped.
fn workload_fields_only(value: Value) -> Kept {
    let meta = value.get("metadata");
    let mut kept_meta = serde_json::Map::new();
    for field in ["name", "namespace", "uid", "ownerReferences"] {
        if let Some(v) = meta.and_then(|m| m.get(field)) {
            kept_meta.insert(field.into(), v.clone());
        }
    }
    let spec = value.get("spec");
    let mut kept_spec = serde_json::Map::new();
    for field in ["replicas", "parallelism", "selector"] {
        if let Some(v) = spec.and_then(|s| s.get(field)) {
            kept_spec.insert(field.into(), v.clone());
        }
    }
    Kept::compact(serde_json::json!({
        "apiVersion": value["apiVersion"], "kind": value["kind"], "metadata": kept_meta, "spec": kept_spec,
    }))
}

/// `members` of `value`'s object at `key`, the others dropped (absent members stay absent).
fn pick_members(value: Option<&Value>, members: &[&str]) -> serde_json::Map<String, Value> {
    members.iter().filter_map(|m| Some(((*m).to_owned(), value?.get(*m)?.clone()))).collect()
}

/// What step 6 reads of a PersistentPodState: its name, namespace and deletionTimestamp, its
/// targetRef and topology terms, and of each pod state only the node topology labels (not the
/// node name or the persisted annotations).
fn persistent_pod_state_fields_only(value: Value) -> Kept {
    let states: serde_json::Map<String, Value> = value
        .pointer("/status/podStates")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(pod, state)| (pod.clone(), Value::Object(pick_members(Some(state), &["nodeTopologyLabels"]))))
        .collect();
    Kept::compact(serde_json::json!({
        "apiVersion": value["apiVersion"], "kind": value["kind"],
        "metadata": pick_members(value.get("metadata"), &["name", "namespace", "deletionTimestamp"]),
        "spec": pick_members(value.get("spec"), &["targetRef", "requiredPersistentTopology", "preferredPersistentTopology"]),
        "status": {"podStates": states},
    }))
}

/// What step 7 reads of a PodProbeMarker: its name, namespace, selector and probes without their
/// `markerPolicy` (which Kruise clears before writing a probe into the pod).
fn probe_marker_fields_only(value: Value) -> Kept {
    let probes: Vec<Value> = value
        .pointer("/spec/probes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            Value::Object(pick_members(Some(p), &["name", "containerName", "probe", "podConditionType"]))
        })
        .collect();
    let mut spec = pick_members(value.get("spec"), &["selector"]);
    spec.insert("probes".into(), Value::Array(probes));
    Kept::compact(serde_json::json!({
        "apiVersion": value["apiVersion"], "kind": value["kind"],
        "metadata": pick_members(value.get("metadata"), &["name", "namespace"]),
        "spec": spec,
    }))
}

/// A WorkloadSpread as its decisions read and write it: whole but for what the API server keeps
/// beside the object (managed fields, annotations such as kubectl's last applied configuration).
/// The status write sends it back: the API server takes only its status and resourceVersion.
fn workload_spread_fields(mut value: Value) -> Kept {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        meta.remove("annotations");
    }
    Kept::tree(value)
}

/// The SidecarSet resource the cluster serves: v1beta1 when available (Kruise 1.8+), else v1alpha1.
async fn discover_sidecarset(client: &kube::Client) -> Result<ApiResource, LiveError> {
    const GROUP: &str = "apps.kruise.io";
    let missing = || {
        LiveError::MissingCrd(format!(
            "the API server does not serve SidecarSets ({GROUP}); install OpenKruise's CRD sidecarsets.{GROUP} before starting in live mode"
        ))
    };
    let group = match kube::discovery::group(client, GROUP).await {
        Ok(group) => group,
        Err(kube::Error::Discovery(_)) => return Err(missing()),
        Err(e) => {
            let failure = classify(&e, "discover", &format!("API group {GROUP}"), None);
            return Err(match failure.kind {
                FailureKind::NotFound => missing(),
                _ => LiveError::Api(failure.message),
            });
        }
    };
    for version in ["v1beta1", "v1alpha1"] {
        if let Some((resource, caps)) =
            group.versioned_resources(version).into_iter().find(|(r, _)| r.kind == "SidecarSet")
            && caps.scope == Scope::Cluster
        {
            return Ok(resource);
        }
    }
    Err(missing())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server ends each stream after `watch_timeout` (a bookmark two seconds before when
    /// it can); a stream silent past the deadline is dead, so the deadline must outlast the stream.
    #[test]
    fn the_silence_deadline_outlasts_the_watch_stream() {
        let defaults = timing(&LiveSettings::default());
        assert_eq!(defaults.watch_timeout_secs, 30);
        assert_eq!(defaults.idle_timeout, Duration::from_secs(35));
        // Noticed within a minute of the last event, even when no bookmark comes.
        assert!(defaults.idle_timeout < Duration::from_secs(60));
        let misconfigured = LiveSettings { idle_timeout: Duration::from_secs(10), ..LiveSettings::default() };
        assert_eq!(timing(&misconfigured).idle_timeout, Duration::from_secs(32));
    }

    fn kept(kept: Kept) -> Value {
        match kept {
            Kept::Object(object) => (*object.value().expect("kept text decodes")).clone(),
            Kept::Revision(_) => panic!("an object is kept whole"),
        }
    }

    /// Steps 6 and 7 read these fields and no others; the rest (node names, persisted
    /// annotations, marker policies, status, managed fields) is dropped.
    #[test]
    fn pod_step_kinds_keep_what_their_steps_read() {
        let state = serde_json::json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
            "metadata": {"name": "s", "namespace": "ns", "uid": "u", "deletionTimestamp": "2024-01-01T00:00:00Z", "managedFields": [{}]},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
                "requiredPersistentTopology": {"nodeTopologyKeys": ["zone"]}, "persistentPodAnnotations": [{"key": "k"}]},
            "status": {"observedGeneration": 1, "podStates": {"web-0": {"nodeName": "n", "nodeTopologyLabels": {"zone": "z"}, "annotations": {"k": "v"}}}}});
        assert_eq!(
            kept(persistent_pod_state_fields_only(state)),
            serde_json::json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
                "metadata": {"name": "s", "namespace": "ns", "deletionTimestamp": "2024-01-01T00:00:00Z"},
                "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web"},
                    "requiredPersistentTopology": {"nodeTopologyKeys": ["zone"]}},
                "status": {"podStates": {"web-0": {"nodeTopologyLabels": {"zone": "z"}}}}})
        );
        let marker = serde_json::json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
            "metadata": {"name": "m", "namespace": "ns", "uid": "u"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [{"name": "p", "containerName": "c",
                "probe": {"exec": {"command": ["x"]}}, "podConditionType": "t", "markerPolicy": [{"state": "Succeeded"}]}]},
            "status": {"observedGeneration": 1}});
        assert_eq!(
            kept(probe_marker_fields_only(marker)),
            serde_json::json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
                "metadata": {"name": "m", "namespace": "ns"},
                "spec": {"selector": {"matchLabels": {"app": "a"}}, "probes": [{"name": "p", "containerName": "c",
                    "probe": {"exec": {"command": ["x"]}}, "podConditionType": "t"}]}})
        );
    }

    /// What live mode keeps of an object of `kind`, as its watch keeps it.
    fn keep(kind: &str) -> KeepFn {
        match kind {
            "Namespace" => namespace_labels_only,
            "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" | "CloneSet" => workload_fields_only,
            "WorkloadSpread" => workload_spread_fields,
            "PersistentPodState" => persistent_pod_state_fields_only,
            "PodProbeMarker" => probe_marker_fields_only,
            _ => Kept::tree,
        }
    }

    /// A snapshot of `objects` as live mode holds them: trimmed, and the many small kinds as text.
    fn as_live_mode_keeps(objects: &[Value]) -> Snapshot {
        Snapshot::default().apply(objects.iter().map(|o| {
            let Kept::Object(kept) = keep(o["kind"].as_str().unwrap())(o.clone()) else { panic!("{o}") };
            Change {
                type_key: crate::cluster::TypeKey::of(o).unwrap(),
                key: crate::cluster::ObjectKey::of(o).unwrap(),
                object: Some(kept),
            }
        }))
    }

    /// Whole objects, with the fields a real cluster has beside the ones decisions read.
    fn cluster() -> Vec<Value> {
        use serde_json::json;
        let meta = |kind: &str, name: &str, owner: Option<(&str, &str)>| {
            let mut meta = json!({"name": name, "namespace": "shop", "uid": format!("{kind}-uid"), "generation": 3,
                "resourceVersion": "41", "labels": {"app": "shop"}, "annotations": {"note": "x"},
                "managedFields": [{"manager": "kubectl"}]});
            if let Some((kind, name)) = owner {
                meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                    "uid": format!("{kind}-uid"), "controller": true, "blockOwnerDeletion": true}]);
            }
            meta
        };
        let template = json!({"metadata": {"labels": {"app": "shop"}}, "spec": {"containers": [{"name": "app", "image": "shop:1"}]}});
        let spec = json!({"replicas": 4, "selector": {"matchLabels": {"app": "shop"}}, "template": template});
        let target = |api_version: &str, kind: &str, name: &str| json!({"apiVersion": api_version, "kind": kind, "name": name});
        let zones = json!([{"name": "a", "maxReplicas": 1, "patch": {"metadata": {"labels": {"zone": "a"}}}},
            {"name": "b", "maxReplicas": 3, "patch": {"metadata": {"labels": {"zone": "b"}}}}]);
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "uid": "ns-uid",
                "labels": {"team": "a", "kubernetes.io/metadata.name": "shop"}, "annotations": {"owner": "a@example.com"}},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "logs"},
                "spec": {"selector": {"matchLabels": {"app": "shop"}}, "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "containers": [{"name": "logs", "image": "logs:1"}]}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("Deployment", "shop", None), "spec": spec,
                "status": {"replicas": 4}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta("ReplicaSet", "shop-1", Some(("Deployment", "shop"))),
                "spec": spec, "status": {"replicas": 4}}),
            json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("Job", "batch", None),
                "spec": {"parallelism": 2, "completions": 10, "selector": {"matchLabels": {"app": "shop"}}, "template": template}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "metadata": meta("CloneSet", "clone", None), "spec": spec}),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("StatefulSet", "db", None), "spec": spec}),
            json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
                "metadata": {"name": "budget", "namespace": "shop", "resourceVersion": "7"},
                "spec": {"targetRef": target("apps/v1", "Deployment", "shop"), "maxUnavailable": 1},
                "status": {"totalReplicas": 4, "desiredAvailable": 3, "currentAvailable": 4, "unavailableAllowed": 1}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
                "metadata": {"name": "spread", "namespace": "shop", "resourceVersion": "7", "annotations": {"a": "b"}},
                "spec": {"targetRef": target("apps/v1", "Deployment", "shop"), "subsets": zones},
                "status": {"observedGeneration": 1, "subsetStatuses": [{"name": "a", "replicas": 1, "missingReplicas": 0},
                    {"name": "b", "replicas": 0, "missingReplicas": 3}]}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
                "metadata": {"name": "jobs", "namespace": "shop", "resourceVersion": "7"},
                "spec": {"targetRef": target("batch/v1", "Job", "batch"), "subsets": zones}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PersistentPodState",
                "metadata": {"name": "db", "namespace": "shop", "uid": "pps-uid"},
                "spec": {"targetRef": target("apps/v1", "StatefulSet", "db"),
                    "requiredPersistentTopology": {"nodeTopologyKeys": ["zone"]},
                    "preferredPersistentTopology": [{"preference": {"nodeTopologyKeys": ["host"]}, "weight": 10}]},
                "status": {"podStates": {"db-0": {"nodeName": "n1", "nodeTopologyLabels": {"zone": "a", "host": "n1"}}}}}),
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
                "metadata": {"name": "ready", "namespace": "shop", "uid": "ppm-uid"},
                "spec": {"selector": {"matchLabels": {"app": "shop"}}, "probes": [{"name": "healthy", "containerName": "app",
                    "probe": {"exec": {"command": ["true"]}}, "podConditionType": "game.io/healthy",
                    "markerPolicy": [{"state": "Succeeded", "labels": {"healthy": "true"}}]}]}}),
        ]
    }

    /// Decisions read what live mode keeps (trimmed, Namespaces and workloads as text) as they
    /// read the whole objects: every `/mutate-pod` step that reads the cache decides the same.
    /// (`/validate-pod` reads only the PodUnavailableBudget, kept whole.)
    #[test]
    fn decisions_read_what_live_mode_keeps_as_the_whole_objects() {
        use serde_json::json;

        use crate::admission::feature_gates::{FeatureGates, Gate};
        use crate::admission::review::decode_review;
        use crate::admission::{FixedClock, Inputs, SeededRandom, Settings, webhooks};
        use crate::cluster::Answers;

        let review = |pod: Value| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "shop",
                "operation": "CREATE", "object": pod}})
        };
        let pod = |name: &str, owner: (&str, &str, &str)| {
            json!({"metadata": {"name": name, "namespace": "shop", "labels": {"app": "shop"},
                    "ownerReferences": [{"apiVersion": owner.0, "kind": owner.1, "name": owner.2,
                        "uid": format!("{}-uid", owner.1), "controller": true}]},
                "spec": {"containers": [{"name": "app", "image": "shop:1"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        };
        let reviews = [
            review(pod("shop-1-a", ("apps/v1", "ReplicaSet", "shop-1"))),
            review(pod("batch-a", ("batch/v1", "Job", "batch"))),
            review(pod("clone-a", ("apps.kruise.io/v1alpha1", "CloneSet", "clone"))),
            review(pod("db-0", ("apps/v1", "StatefulSet", "db"))),
        ];
        let whole = Snapshot::from_objects(cluster());
        let kept = as_live_mode_keeps(&cluster());
        let settings =
            Settings { gates: FeatureGates::from_flags(&[(Gate::AllAlpha, true)]), ..Settings::default() };
        let clock = FixedClock(time::OffsetDateTime::UNIX_EPOCH);
        let decide = |cluster: &Snapshot, review: &Value| {
            let request = decode_review(review.clone()).unwrap();
            let random = SeededRandom::new(1);
            let inputs = Inputs {
                cluster,
                answers: &Answers::default(),
                clock: &clock,
                random: &random,
                settings: &settings,
            };
            let mut outcome =
                webhooks::run_offline(webhooks::by_path("/mutate-pod").unwrap(), &request, &inputs);
            // A status write sends the object back as read, of which the API server takes only
            // the status and the resourceVersion (a WorkloadSpread is kept without annotations).
            let writes: Vec<Value> = std::mem::take(&mut outcome.decision.writes)
                .into_iter()
                .map(|w| json!([w.target.name, w.object["metadata"]["resourceVersion"], w.object["status"]]))
                .collect();
            (outcome.decision, outcome.mutated, writes)
        };
        let decided: Vec<_> = reviews
            .iter()
            .map(|review| {
                let on_whole = decide(&whole, review);
                assert_eq!(decide(&kept, review), on_whole, "{review}");
                assert!(on_whole.0.allowed, "{:?}", on_whole.0);
                on_whole
            })
            .collect();
        // Every kept kind was read: the steps changed the pods and wrote the statuses.
        let patch = |n: usize| serde_json::to_string(&decided[n].0.patch).unwrap();
        for read in ["logs:1", "kruise.io/related-pub", "workloadspread", "game.io/healthy"] {
            assert!(patch(0).contains(read), "{read} missing from {}", patch(0));
        }
        assert_eq!(decided[0].2.len(), 1, "the Deployment's WorkloadSpread records the pod");
        assert_eq!(decided[1].2.len(), 1, "the Job's WorkloadSpread records the pod");
        assert!(
            patch(3).contains(r#"/spec/nodeSelector","value":{"zone":"a"}"#),
            "the PersistentPodState: {}",
            patch(3)
        );
    }

    /// Every kind but those read on each review or written back whole is held as text.
    #[test]
    fn the_many_small_kinds_are_held_as_text() {
        for object in cluster() {
            let kind = object["kind"].as_str().unwrap().to_owned();
            let Kept::Object(kept) = keep(&kind)(object) else { panic!("{kind}") };
            let tree = ["SidecarSet", "PodUnavailableBudget", "WorkloadSpread"].contains(&kind.as_str());
            assert_eq!(matches!(kept, crate::cluster::Stored::Tree(_)), tree, "{kind}");
        }
    }
}
