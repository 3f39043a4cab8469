//! `--cert-mode self-managed`: one CA and serving certificate for all replicas, kept in a Secret,
//! written to the folder the server reads its TLS files from, and the CA bundle patched into this
//! server's own webhook configurations (Kruise's behaviour: openkruise/kruise
//! `pkg/webhook/util/controller/webhook_controller.go`, `pkg/webhook/util/writer/`).
//!
//! Replicas never coordinate through locks: the Secret is created with `create` (a loser gets
//! AlreadyExists and reads the winner's), replaced with its resourceVersion as a precondition (a
//! loser gets Conflict and reads again), and so are the webhook configurations.
//!
//! Both webhook configurations are also watched (by name, with a `metadata.name` field selector):
//! when one's caBundle no longer matches (a `helm upgrade` or a GitOps sync reset it), the next sync
//! runs at once instead of at the next resync, so TLS to the webhook is broken for the time of one
//! watch event and one sync, not up to a minute. Something that keeps resetting it gets repairs
//! spaced ever wider apart (see [`RepairPacing`]) and a WARN, not a write war.
//!
//! Differences from Kruise: ECDSA P-256 keys instead of RSA 2048 (ring cannot generate RSA), a
//! serving certificate valid for max(1 year, 2 × --cert-renew-before) instead of 10 years, and a CA
//! replaced early is kept in `ca.crt` (and the caBundle) next to the new one until it expires, so
//! certificates issued by either verify during the switch.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use serde_json::Value;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::api_error::{FailureKind, classify};
use super::outage::{FailureLog, Line, Recovery, affects_every_request};
use super::watch::{self, Kept, WatchCell, WatchSpec};
use crate::tls_material::{
    CA_CRT, CA_KEY, CA_LIFETIME, Ca, IssueError, ParsedCert, SELF_MANAGED, TLS_CRT, TLS_KEY, key_matches,
    parse_pem, pem_block, write_files,
};

/// The largest `--cert-renew-before` (see [`CertSettings::check`]).
pub const MAX_RENEW_BEFORE: Duration = Duration::from_secs(CA_LIFETIME.as_secs() / 4);
/// How often the Secret, files and configurations are checked again after a good sync.
const RESYNC: Duration = Duration::from_secs(60);
/// After a failed sync: the first retry, doubled after each further failure up to the maximum.
const RETRY_MIN: Duration = Duration::from_secs(5);
const RETRY_MAX: Duration = Duration::from_secs(300);
const ATTEMPTS: usize = 5;
/// The first wait between repairs once something keeps resetting the caBundle; it doubles with
/// each further repair, up to the resync interval ([`RepairPacing`]).
const REPAIR_GAP_MIN: Duration = Duration::from_secs(1);
/// A repair within this long after the previous one's wait ended means something keeps resetting it.
const FIGHT_WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct CertSettings {
    /// Namespace of this server, its Service and the Secret.
    pub namespace: String,
    pub secret_name: String,
    /// The Service in front of the server; the certificate is issued for `<service>.<namespace>.svc`.
    pub service: String,
    pub renew_before: Duration,
    /// Where `tls.crt`, `tls.key` and `ca.crt` are written.
    pub cert_dir: PathBuf,
    pub mutating_configs: Vec<String>,
    pub validating_configs: Vec<String>,
}

impl CertSettings {
    /// From the live flags; `cert_dir` is the folder `serve` reads `tls.crt`/`tls.key` from (its
    /// `--cert-dir`).
    pub fn from_options(options: &super::LiveOptions, cert_dir: PathBuf) -> Self {
        CertSettings {
            namespace: options.namespace.clone(),
            secret_name: options.cert_secret.clone(),
            service: options.service.clone(),
            renew_before: options.cert_renew_before,
            cert_dir,
            mutating_configs: options.mutating_webhook_configs.clone(),
            validating_configs: options.validating_webhook_configs.clone(),
        }
    }

    fn dns_names(&self) -> Vec<String> {
        let svc = format!("{}.{}.svc", self.service, self.namespace);
        vec![
            svc.clone(),
            format!("{svc}.cluster.local"),
            format!("{}.{}", self.service, self.namespace),
            "localhost".into(),
        ]
    }

    /// `renew_before` must leave the certificates a life: above zero (a certificate renewed only
    /// once expired is an outage), and small enough that the serving certificate it implies
    /// (2 × renew_before) fits twice in the CA's lifetime. Past that, every sync would find a
    /// fresh CA already too short-lived and replace it, forever; far past it (`999999999d`), the
    /// date arithmetic would overflow.
    pub fn check(&self) -> Result<(), CertError> {
        let max = MAX_RENEW_BEFORE;
        if self.renew_before.is_zero() || self.renew_before > max {
            return Err(CertError::new(format!(
                "--cert-renew-before {}s is out of range: it must be above 0 and at most {}d (a quarter of the {}-day CA lifetime, \
                 so the serving certificate, valid for twice the renewal window, fits in the CA's life with room to renew)",
                self.renew_before.as_secs(),
                max.as_secs() / 86_400,
                CA_LIFETIME.as_secs() / 86_400
            )));
        }
        Ok(())
    }

    fn serving_validity(&self) -> Duration {
        (self.renew_before * 2).max(Duration::from_secs(365 * 86_400))
    }
}

/// Why a certificate sync failed; the message names what to fix.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CertError {
    /// Set when the API refused; forbidden and not-found will not heal by retrying soon.
    pub kind: Option<FailureKind>,
    pub message: String,
}

impl CertError {
    fn new(message: impl Into<String>) -> Self {
        CertError { kind: None, message: message.into() }
    }

    fn api(err: &kube::Error, verb: &str, resource: &str, namespace: Option<&str>) -> Self {
        let f = classify(err, verb, resource, namespace);
        CertError { kind: Some(f.kind), message: f.message }
    }

    fn is_permanent(&self) -> bool {
        matches!(self.kind, Some(FailureKind::Forbidden | FailureKind::Unauthorized | FailureKind::NotFound))
    }
}

/// A failed sync, at the start of a failure spell and once per interval while it lasts. An
/// API server that does not answer is expected now and then and heals by itself: WARN; anything
/// else (RBAC, a broken Secret) needs a person: ERROR.
fn log_sync_failure(e: &CertError, failures: u64, retry_in: Duration) {
    if e.kind.is_some_and(affects_every_request) {
        tracing::warn!(
            error = %e,
            failures,
            retry_in_s = retry_in.as_secs_f64(),
            "self-managed certificate sync failed: the API server does not answer; keeping the certificate in use and retrying"
        );
    } else {
        tracing::error!(
            error = %e,
            failures,
            retry_in_s = retry_in.as_secs_f64(),
            "self-managed certificate renewal failed; keeping the certificate in use and retrying"
        );
    }
}

/// The PEM material kept in the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    /// The signing CA first, then a previous CA that is still valid.
    ca_bundle: String,
    ca_key: String,
    cert: String,
    key: String,
}

/// What one sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncOutcome {
    /// The Secret was created or replaced by this replica.
    pub secret_written: bool,
    pub files_written: bool,
    /// Webhook configurations whose caBundle was updated.
    pub configs_patched: usize,
    /// The CA bundle (PEM) now in the Secret, the files and the configurations.
    pub ca_bundle: String,
    /// Expiry of the serving certificate now in use (`kruise_admission_serving_certificate_not_after_seconds`).
    pub not_after: OffsetDateTime,
}

/// The state of the background loop, for logs and metrics.
#[derive(Debug, Clone, Default)]
pub struct CertStatus {
    pub last_sync: Option<SystemTime>,
    pub not_after: Option<OffsetDateTime>,
    pub last_error: Option<String>,
    /// Failed syncs (renewals included) since start:
    /// `kruise_admission_certificate_renewal_failures_total`.
    pub failures: u64,
    /// Webhook configurations whose caBundle was put back after something else changed it, while
    /// the CA stayed the same: `kruise_admission_ca_bundle_repairs_total`.
    pub ca_bundle_repairs: u64,
}

/// A view of the loop's [`CertStatus`] that the server keeps for its metrics.
#[derive(Debug, Clone)]
pub struct CertStatusView(Arc<Mutex<CertStatus>>);

impl CertStatusView {
    pub fn get(&self) -> CertStatus {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CertStatus> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How often the loop syncs, and how it backs off after a failure.
#[derive(Debug, Clone)]
pub struct CertTiming {
    pub resync: Duration,
    pub retry_min: Duration,
    pub retry_max: Duration,
}

impl Default for CertTiming {
    fn default() -> Self {
        CertTiming { resync: RESYNC, retry_min: RETRY_MIN, retry_max: RETRY_MAX }
    }
}

pub struct CertManager {
    client: kube::Client,
    settings: CertSettings,
    timing: CertTiming,
}

/// The running sync loop and the configurations' watches; dropping it stops them.
pub struct CertHandle {
    tasks: Vec<JoinHandle<()>>,
    status: CertStatusView,
}

impl Drop for CertHandle {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl CertHandle {
    pub fn status(&self) -> CertStatus {
        self.status.get()
    }

    /// The status, readable after the handle is gone (for the server's metrics).
    pub fn status_view(&self) -> CertStatusView {
        self.status.clone()
    }
}

impl CertManager {
    pub fn new(client: kube::Client, settings: CertSettings) -> Self {
        CertManager { client, settings, timing: CertTiming::default() }
    }

    /// Other sync and retry intervals (tests).
    pub fn with_timing(self, timing: CertTiming) -> Self {
        CertManager { timing, ..self }
    }

    /// Sync until the first success (at most `init_timeout`; forbidden or missing objects fail at
    /// once), then keep syncing every minute in the background, and at once when a watched
    /// configuration's caBundle drifts. `serve` exits non-zero on error.
    pub async fn start(self, init_timeout: Duration) -> Result<CertHandle, CertError> {
        self.settings.check()?;
        let deadline = tokio::time::Instant::now() + init_timeout;
        let mut backoff = Duration::from_millis(500);
        let mut failures = 0;
        let first = loop {
            match self.sync_once().await {
                Ok(outcome) => break outcome,
                Err(e) if e.is_permanent() || tokio::time::Instant::now() + backoff > deadline => {
                    return Err(CertError {
                        kind: e.kind,
                        message: format!("self-managed certificates: {e}"),
                    });
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "self-managed certificate sync failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        };
        let status = CertStatusView(Arc::new(Mutex::new(CertStatus {
            last_sync: Some(SystemTime::now()),
            not_after: Some(first.not_after),
            last_error: None,
            failures,
            ca_bundle_repairs: 0,
        })));
        let (drift, mut tasks) = self.watch_configurations();
        tasks.push(tokio::spawn(self.run(status.clone(), drift, first.ca_bundle)));
        Ok(CertHandle { tasks, status })
    }

    /// One watch per webhook configuration, by name (so the grant can stay `resourceNames`), reusing
    /// live mode's list-then-watch loop; each change wakes the sync loop, which compares.
    fn watch_configurations(&self) -> (Drift, Vec<JoinHandle<()>>) {
        let changed = Arc::new(Notify::new());
        let live = super::LiveSettings::default();
        let timing = super::timing(&live);
        let (recovery, probe) = Recovery::start(self.client.clone(), live.probe_interval);
        let mut cells = Vec::new();
        let mut tasks = vec![probe];
        for (kind, names) in [
            ("MutatingWebhookConfiguration", &self.settings.mutating_configs),
            ("ValidatingWebhookConfiguration", &self.settings.validating_configs),
        ] {
            let resource = webhook_configuration_resource(kind);
            for name in names {
                let spec = WatchSpec {
                    kind: kind.into(),
                    api_version: "admissionregistration.k8s.io/v1".into(),
                    resource: format!("{}.admissionregistration.k8s.io ({name})", resource.plural),
                    namespace: None,
                    api: Api::all_with(self.client.clone(), &resource),
                    field_selector: Some(format!("metadata.name={name}")),
                    keep: |v| Kept::tree(ca_bundles_only(v)),
                    optional: false,
                };
                let cell = Arc::new(WatchCell::new(&spec));
                cells.push(Arc::clone(&cell));
                let changed = Arc::clone(&changed);
                tasks.push(tokio::spawn(watch::run(
                    spec,
                    cell,
                    timing.clone(),
                    recovery.waiter(),
                    move || changed.notify_one(),
                )));
            }
        }
        (Drift { cells, changed }, tasks)
    }

    /// Sync every `resync`, and as soon as the watches see a configuration whose caBundle is not
    /// `bundle` (paced by [`RepairPacing`]); after a failure retry with exponential backoff (and
    /// jitter, so replicas that failed together do not retry together), drift or not. A failed
    /// sync writes no files: the certificate being served stays until a renewal succeeds (an
    /// expired one makes `/readyz` fail, see `server::health`).
    ///
    /// A drift sync reads the Secret again rather than writing the bundle this replica last saw:
    /// when another replica replaced the CA, this one adopts it instead of putting the old one back.
    async fn run(self, status: CertStatusView, drift: Drift, mut bundle: String) {
        let mut next = Instant::now() + self.timing.resync;
        let mut retry = self.timing.retry_min;
        let mut pacing = RepairPacing::default();
        let mut failing = false;
        // An API server outage fails every sync until it ends: a WARN when it starts, a summary
        // per interval, an INFO at the end, as the watches log theirs.
        let mut failures = FailureLog::default();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = drift.changed.notified() => {
                    if !failing && drift.differs(&bundle) {
                        next = next.min(pacing.earliest());
                    }
                    continue;
                }
            }
            let result = self.sync_once().await;
            let mut s = status.lock();
            match result {
                Ok(outcome) => {
                    let repaired = if outcome.ca_bundle == bundle { outcome.configs_patched } else { 0 };
                    let failed_for = match failures.recovered(Instant::now().into_std()) {
                        Some(Line::Recovered { after, .. }) => Some(after.as_secs_f64()),
                        _ => None,
                    };
                    if outcome.secret_written || outcome.files_written || s.last_error.is_some() {
                        tracing::info!(
                            secret_written = outcome.secret_written,
                            files_written = outcome.files_written,
                            configs_patched = outcome.configs_patched,
                            not_after = %outcome.not_after,
                            failed_for_s = failed_for,
                            "self-managed certificate synced"
                        );
                    }
                    if repaired > 0 {
                        s.ca_bundle_repairs += repaired as u64;
                        let fight = pacing.repaired(Instant::now(), self.timing.resync);
                        if fight {
                            tracing::warn!(
                                configs = repaired,
                                repairs = s.ca_bundle_repairs,
                                next_repair_after_s = pacing.gap.as_secs_f64(),
                                "the webhook configurations' caBundle was reset again soon after the last repair: \
                                 something keeps resetting it (a helm upgrade or a GitOps sync without an ignore \
                                 rule for caBundle); repairs are spaced out meanwhile"
                            );
                        } else {
                            tracing::info!(
                                configs = repaired,
                                repairs = s.ca_bundle_repairs,
                                "a webhook configuration's caBundle had been changed; put back"
                            );
                        }
                    }
                    s.last_sync = Some(SystemTime::now());
                    s.not_after = Some(outcome.not_after);
                    s.last_error = None;
                    bundle = outcome.ca_bundle;
                    failing = false;
                    next = Instant::now() + self.timing.resync;
                    retry = self.timing.retry_min;
                }
                Err(e) => {
                    s.failures += 1;
                    let delay = retry + retry.mul_f64(rand::random::<f64>() * 0.2);
                    retry = (retry * 2).min(self.timing.retry_max);
                    let now = Instant::now().into_std();
                    if failures.failed(now, now).is_some() {
                        log_sync_failure(&e, s.failures, delay);
                    }
                    s.last_error = Some(e.message);
                    failing = true;
                    next = Instant::now() + delay;
                }
            }
        }
    }

    /// One pass: make sure the Secret holds a valid CA and serving certificate, put the CA bundle
    /// into the webhook configurations, then write the files (in that order, so the API server
    /// trusts a new CA before the server presents a certificate from it).
    pub async fn sync_once(&self) -> Result<SyncOutcome, CertError> {
        self.settings.check()?;
        let now = OffsetDateTime::now_utc();
        let (material, secret_written) = self.ensure_secret(now).await?;
        let mut configs_patched = 0;
        for (kind, names) in [
            ("MutatingWebhookConfiguration", &self.settings.mutating_configs),
            ("ValidatingWebhookConfiguration", &self.settings.validating_configs),
        ] {
            for name in names {
                if self.ensure_ca_bundle(kind, name, &material.ca_bundle).await? {
                    configs_patched += 1;
                }
            }
        }
        let files = [
            (TLS_CRT, material.cert.as_bytes()),
            (TLS_KEY, material.key.as_bytes()),
            (CA_CRT, material.ca_bundle.as_bytes()),
        ];
        let files_written = write_files(&self.settings.cert_dir, &files).map_err(|e| {
            CertError::new(format!(
                "cannot write the certificate files to {}: {e}",
                self.settings.cert_dir.display()
            ))
        })?;
        let not_after = parse_pem(&material.cert).first().map_or(now, |c| c.not_after);
        Ok(SyncOutcome {
            secret_written,
            files_written,
            configs_patched,
            ca_bundle: material.ca_bundle,
            not_after,
        })
    }

    /// Read the Secret; create it when missing, replace its content when it is no longer valid.
    async fn ensure_secret(&self, now: OffsetDateTime) -> Result<(Material, bool), CertError> {
        let s = &self.settings;
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &s.namespace);
        let err = |e: &kube::Error, verb: &str| {
            CertError::api(e, verb, &format!("secrets ({})", s.secret_name), Some(&s.namespace))
        };
        for _ in 0..ATTEMPTS {
            let existing = api.get_opt(&s.secret_name).await.map_err(|e| err(&e, "get"))?;
            let Some(mut secret) = existing else {
                let material = issue(None, s, now)?;
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(s.secret_name.clone()),
                        namespace: Some(s.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    type_: Some("kubernetes.io/tls".into()),
                    data: Some(secret_data(&material)),
                    ..Secret::default()
                };
                match api.create(&PostParams::default(), &secret).await {
                    Ok(_) => return Ok((material, true)),
                    // Another replica created it first: use theirs.
                    Err(e) if err(&e, "create").kind == Some(FailureKind::AlreadyExists) => continue,
                    Err(e) => return Err(err(&e, "create")),
                }
            };
            let material = match stored_material(&secret) {
                Some(m) => match verdict(&m, s, now) {
                    Verdict::Valid => return Ok((m, false)),
                    Verdict::RenewServing => issue(Some((&m, true)), s, now)?,
                    Verdict::RenewCa => issue(Some((&m, false)), s, now)?,
                },
                // Missing keys or a Secret written by something else: start over.
                None => issue(None, s, now)?,
            };
            secret.data.get_or_insert_with(BTreeMap::new).extend(secret_data(&material));
            // The read resourceVersion stays in the object: a replica that wrote in between makes
            // this a Conflict, and the next round reads (and probably accepts) what it wrote.
            match api.replace(&s.secret_name, &PostParams::default(), &secret).await {
                Ok(_) => return Ok((material, true)),
                Err(e) if err(&e, "update").kind == Some(FailureKind::Conflict) => continue,
                Err(e) => return Err(err(&e, "update")),
            }
        }
        Err(CertError::new(format!(
            "secret {}/{} kept changing while this replica updated it; will retry",
            s.namespace, s.secret_name
        )))
    }

    /// Set `clientConfig.caBundle` on every webhook of one configuration; write only if something
    /// differs. Returns whether it wrote.
    async fn ensure_ca_bundle(&self, kind: &str, name: &str, ca_bundle: &str) -> Result<bool, CertError> {
        let resource = webhook_configuration_resource(kind);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let rbac = format!("{}.admissionregistration.k8s.io ({name})", resource.plural);
        let encoded = encoded_bundle(ca_bundle);
        for _ in 0..ATTEMPTS {
            let mut config = match api.get(name).await {
                Ok(config) => config,
                Err(e) => {
                    let mut error = CertError::api(&e, "get", &rbac, None);
                    if error.kind == Some(FailureKind::NotFound) {
                        error.message = format!(
                            "{kind} {name:?} does not exist: install the webhook configurations, or name them with --{}-webhook-config-name",
                            if kind.starts_with('M') { "mutating" } else { "validating" }
                        );
                    }
                    return Err(error);
                }
            };
            if !set_ca_bundle(&mut config.data, &encoded) {
                return Ok(false);
            }
            match api.replace(name, &PostParams::default(), &config).await {
                Ok(_) => return Ok(true),
                Err(e) => {
                    let error = CertError::api(&e, "update", &rbac, None);
                    if error.kind != Some(FailureKind::Conflict) {
                        return Err(error);
                    }
                }
            }
        }
        Err(CertError::new(format!(
            "{kind} {name:?} kept changing while this replica updated its caBundle; will retry"
        )))
    }
}

/// The configurations' caBundles as the watches last saw them, and the signal that one changed.
struct Drift {
    cells: Vec<Arc<WatchCell>>,
    changed: Arc<Notify>,
}

impl Drift {
    /// Some watched configuration has a webhook whose caBundle is not `bundle`. A configuration
    /// not (yet) seen, or deleted, is no drift: there is nothing to repair until it exists again.
    fn differs(&self, bundle: &str) -> bool {
        let encoded = encoded_bundle(bundle);
        self.cells.iter().any(|cell| {
            cell.unpublished_objects().iter().any(|config| set_ca_bundle(&mut Value::clone(config), &encoded))
        })
    }
}

/// How soon a drift sync may run. The first repair is immediate; one that follows the previous
/// within its wait plus [`FIGHT_WINDOW`] means something keeps resetting the caBundle, and the
/// wait doubles (from [`REPAIR_GAP_MIN`], up to the resync interval), so two controllers that
/// disagree do not write to the API server as fast as it answers. A quiet spell resets it.
#[derive(Debug, Default)]
struct RepairPacing {
    last: Option<Instant>,
    gap: Duration,
}

impl RepairPacing {
    fn earliest(&self) -> Instant {
        self.last.map_or_else(Instant::now, |last| last + self.gap)
    }

    /// Record a repair at `now`; returns whether it was part of a fight.
    fn repaired(&mut self, now: Instant, max_gap: Duration) -> bool {
        let fight = self.last.is_some_and(|last| now < last + self.gap + FIGHT_WINDOW);
        self.gap = if fight {
            (self.gap * 2).clamp(REPAIR_GAP_MIN, max_gap.max(REPAIR_GAP_MIN))
        } else {
            Duration::ZERO
        };
        self.last = Some(now);
        fight
    }
}

fn webhook_configuration_resource(kind: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_lowercase());
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind),
        &plural,
    )
}

/// `clientConfig.caBundle` as stored: the PEM, base64-encoded.
fn encoded_bundle(ca_bundle: &str) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(ca_bundle))
}

/// Set `clientConfig.caBundle` of every webhook in a configuration (its JSON, or the part of it
/// beside the metadata) to `encoded`; returns whether anything differed.
fn set_ca_bundle(config: &mut Value, encoded: &Value) -> bool {
    let mut changed = false;
    let webhooks = config.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten();
    for client_config in webhooks.filter_map(|w| w.get_mut("clientConfig").and_then(Value::as_object_mut)) {
        if client_config.get("caBundle") != Some(encoded) {
            client_config.insert("caBundle".into(), encoded.clone());
            changed = true;
        }
    }
    changed
}

/// What the drift check reads of a watched configuration: its name and each webhook's
/// `clientConfig.caBundle` (rules, selectors and annotations would only cost memory).
fn ca_bundles_only(value: Value) -> Value {
    let webhooks: Vec<Value> = value
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|w| match w.get("clientConfig") {
            Some(Value::Object(c)) => {
                let kept: serde_json::Map<String, Value> =
                    c.get_key_value("caBundle").map(|(k, v)| (k.clone(), v.clone())).into_iter().collect();
                serde_json::json!({ "clientConfig": kept })
            }
            _ => serde_json::json!({}),
        })
        .collect();
    let meta = value.get("metadata");
    serde_json::json!({
        "apiVersion": value["apiVersion"],
        "kind": value["kind"],
        "metadata": {"name": meta.and_then(|m| m.get("name")), "resourceVersion": meta.and_then(|m| m.get("resourceVersion"))},
        "webhooks": webhooks,
    })
}

fn secret_data(m: &Material) -> BTreeMap<String, ByteString> {
    [(CA_CRT, &m.ca_bundle), (CA_KEY, &m.ca_key), (TLS_CRT, &m.cert), (TLS_KEY, &m.key)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
}

fn stored_material(secret: &Secret) -> Option<Material> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| data.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok());
    Some(Material {
        ca_bundle: text(CA_CRT)?,
        ca_key: text(CA_KEY)?,
        cert: text(TLS_CRT)?,
        key: text(TLS_KEY)?,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Valid,
    RenewServing,
    RenewCa,
}

/// Whether `key_pem` holds the private half of `cert`'s key.
fn key_pem_matches(key_pem: &str, cert: &ParsedCert) -> bool {
    rcgen::KeyPair::from_pem(key_pem).is_ok_and(|k| key_matches(&k, cert))
}

/// Is the stored material still good at `now`? The CA must outlive any serving certificate it
/// would issue now; the serving certificate must be issued by it, match its key, name the
/// Service and still be valid `renew_before` from now.
fn verdict(m: &Material, s: &CertSettings, now: OffsetDateTime) -> Verdict {
    let cas = parse_pem(&m.ca_bundle);
    let Some(ca) = cas.first() else { return Verdict::RenewCa };
    if !key_pem_matches(&m.ca_key, ca) || ca.not_after < now + s.serving_validity() {
        return Verdict::RenewCa;
    }
    let Some(cert) = parse_pem(&m.cert).into_iter().next() else { return Verdict::RenewServing };
    let names_ok = s.dns_names().iter().all(|n| cert.dns_names.contains(n));
    if cert.issuer != ca.subject
        || !key_pem_matches(&m.key, &cert)
        || !names_ok
        || cert.not_before > now
        || cert.not_after < now + s.renew_before
    {
        return Verdict::RenewServing;
    }
    Verdict::Valid
}

fn gen_err(e: rcgen::Error) -> CertError {
    CertError::new(format!("cannot generate a certificate: {e}"))
}

fn issue_err(e: IssueError) -> CertError {
    gen_err(e.source)
}

/// New material. `previous`: `(material, keep_ca)`: with `keep_ca` only the serving certificate
/// is reissued; otherwise a new CA is made and the previous CA stays in the bundle while valid.
fn issue(
    previous: Option<(&Material, bool)>,
    s: &CertSettings,
    now: OffsetDateTime,
) -> Result<Material, CertError> {
    let (ca_bundle, ca_key_pem) = match previous {
        Some((m, true)) => (m.ca_bundle.clone(), m.ca_key.clone()),
        _ => {
            let ca = Ca::new(&SELF_MANAGED, now).map_err(issue_err)?;
            let mut bundle = ca.cert_pem;
            // Keep the old CA trusted until it expires: certificates it issued keep verifying
            // while replicas switch over.
            if let Some((m, _)) = previous
                && let Some(old) = parse_pem(&m.ca_bundle).into_iter().next()
                && old.not_after > now
            {
                bundle.push_str(&pem_block(&old.der));
            }
            (bundle, ca.key.serialize_pem())
        }
    };
    let signing_ca = ca_bundle.split_inclusive("-----END CERTIFICATE-----").next().unwrap_or_default();
    let ca = Ca {
        profile: &SELF_MANAGED,
        cert_pem: signing_ca.to_owned(),
        key: rcgen::KeyPair::from_pem(&ca_key_pem).map_err(gen_err)?,
    };
    let names = s.dns_names();
    let (cert, key) = ca.issue_serving(&names, &names[0], s.serving_validity(), now).map_err(issue_err)?;
    Ok(Material { ca_bundle, ca_key: ca_key_pem, cert, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CertSettings {
        CertSettings {
            namespace: "kruise-system".into(),
            secret_name: "certs".into(),
            service: "kruise-webhook-service".into(),
            renew_before: Duration::from_secs(30 * 86_400),
            cert_dir: PathBuf::new(),
            mutating_configs: vec![],
            validating_configs: vec![],
        }
    }

    #[test]
    fn fresh_material_is_valid_and_names_the_service() {
        let now = OffsetDateTime::now_utc();
        let m = issue(None, &settings(), now).unwrap();
        assert_eq!(verdict(&m, &settings(), now), Verdict::Valid);
        let cert = parse_pem(&m.cert).remove(0);
        assert!(cert.dns_names.contains(&"kruise-webhook-service.kruise-system.svc".to_owned()));
        assert_eq!(cert.issuer, parse_pem(&m.ca_bundle)[0].subject);
    }

    #[test]
    fn serving_certificate_is_renewed_before_expiry_with_the_same_ca() {
        let now = OffsetDateTime::now_utc();
        let s = settings();
        let m = issue(None, &s, now).unwrap();
        // Validity is max(1y, 2 x 30d) = 365d: 340 days later it is within renew-before.
        let later = now + time::Duration::days(340);
        assert_eq!(verdict(&m, &s, later), Verdict::RenewServing);
        let renewed = issue(Some((&m, true)), &s, later).unwrap();
        assert_eq!(renewed.ca_bundle, m.ca_bundle);
        assert_ne!(renewed.cert, m.cert);
        assert_eq!(verdict(&renewed, &s, later), Verdict::Valid);
    }

    #[test]
    fn an_expiring_ca_is_replaced_and_the_old_one_stays_trusted() {
        let now = OffsetDateTime::now_utc();
        let s = settings();
        let m = issue(None, &s, now).unwrap();
        let later = now + time::Duration::days(9 * 365 + 200);
        assert_eq!(verdict(&m, &s, later), Verdict::RenewCa);
        let renewed = issue(Some((&m, false)), &s, later).unwrap();
        let cas = parse_pem(&renewed.ca_bundle);
        assert_eq!(cas.len(), 2);
        assert_eq!(cas[1].der, parse_pem(&m.ca_bundle)[0].der);
        assert_eq!(verdict(&renewed, &s, later), Verdict::Valid);
    }

    #[test]
    fn the_drift_check_sees_what_the_sync_would_write() {
        let encoded = encoded_bundle("CA");
        let stored = serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "c", "resourceVersion": "7", "annotations": {"a": "b"}},
            "webhooks": [{"name": "a", "rules": [], "clientConfig": {"url": "https://x", "caBundle": encoded}},
                         {"name": "b", "clientConfig": {"service": {"name": "s"}}}]});
        let trimmed = ca_bundles_only(stored.clone());
        assert_eq!(trimmed["metadata"], serde_json::json!({"name": "c", "resourceVersion": "7"}));
        assert_eq!(
            trimmed["webhooks"],
            serde_json::json!([{"clientConfig": {"caBundle": encoded}}, {"clientConfig": {}}])
        );
        // The second webhook lacks it: both the full object and the trimmed one need a write.
        assert!(set_ca_bundle(&mut stored.clone(), &encoded));
        assert!(set_ca_bundle(&mut trimmed.clone(), &encoded));
        let mut fixed = stored;
        set_ca_bundle(&mut fixed, &encoded);
        assert!(!set_ca_bundle(&mut ca_bundles_only(fixed), &encoded));
    }

    #[test]
    fn repairs_in_a_row_are_spaced_out_and_a_quiet_spell_resets_the_pace() {
        let max = Duration::from_secs(60);
        let start = Instant::now();
        let mut pacing = RepairPacing::default();
        assert!(pacing.earliest() <= Instant::now(), "the first repair is immediate");
        assert!(!pacing.repaired(start, max));
        let mut at = start;
        let mut gaps = Vec::new();
        for _ in 0..8 {
            at = pacing.earliest();
            assert!(pacing.repaired(at, max), "each one follows the previous within its wait");
            gaps.push(pacing.gap.as_secs());
        }
        assert_eq!(gaps, [1, 2, 4, 8, 16, 32, 60, 60]);
        // A repair long after the last wait ended is not part of the fight.
        assert!(!pacing.repaired(at + Duration::from_secs(60 + 11), max));
        assert_eq!(pacing.gap, Duration::ZERO);
    }

    #[test]
    fn mismatched_keys_and_names_are_not_valid() {
        let now = OffsetDateTime::now_utc();
        let s = settings();
        let m = issue(None, &s, now).unwrap();
        let other = issue(None, &s, now).unwrap();
        assert_eq!(
            verdict(&Material { key: other.key.clone(), ..m.clone() }, &s, now),
            Verdict::RenewServing
        );
        assert_eq!(
            verdict(&Material { ca_key: other.ca_key.clone(), ..m.clone() }, &s, now),
            Verdict::RenewCa
        );
        let renamed = CertSettings { service: "elsewhere".into(), ..settings() };
        assert_eq!(verdict(&m, &renamed, now), Verdict::RenewServing);
    }
}
