//! Prometheus metrics, in a registry owned by one server (tests run several in one process).
//! Names and labels follow the apiserver's admission metrics where they overlap; the dashboard
//! reads them by these exact names.

use prometheus::core::Collector;
use prometheus::{
    Encoder as _, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

use crate::cluster::Snapshot;
use crate::cluster::live::LiveStats;
use crate::cluster::live::certs::CertStatus;

pub struct Metrics {
    registry: Registry,
    /// `{name, type, operation, code, rejected}`: one per answered review.
    pub requests: IntCounterVec,
    /// `{name, type, operation, rejected}`: decode + decision + encode time.
    pub duration: HistogramVec,
    /// `{name, type, operation, kind, rejection_code}`: denials by request kind (no object names).
    pub rejections: IntCounterVec,
    /// `{name}`: JSON Patch operations per mutating response.
    pub patch_operations: HistogramVec,
    /// `{reason}`: requests answered with an HTTP error instead of a review.
    pub http_errors: IntCounterVec,
    /// `{name, place}`: a review's parse or decision started, `inline` on the task that read it
    /// (cheap reviews) or on the worker `pool` (large ones, and decisions after lookups).
    pub review_work: IntCounterVec,
    pub cert_not_after: Gauge,
    pub cluster_objects: IntGaugeVec,
    pub snapshot_timestamp: Gauge,
    /// Live mode, `{kind}` of the watched kinds only (SidecarSet, Namespace, ControllerRevision,
    /// ConfigMap): watch streams reopened, relists after 410 Gone, synced, seconds failing.
    pub watch_reconnects: IntCounterVec,
    pub watch_relists: IntCounterVec,
    pub watch_synced: IntGaugeVec,
    pub watch_failing_seconds: GaugeVec,
    /// `{kind}` 1: an optional kind (the Kruise namespace's) RBAC does not let us list, cached as
    /// empty (an install without OpenKruise's namespace, or without its Role).
    pub watch_unreadable: IntGaugeVec,
    /// `{step}` 1: a `/mutate-pod` step live mode skips because its CRD is not served.
    pub pod_step_skipped: IntGaugeVec,
    /// `{kind, result}`: status writes of decisions (`written`, `conflict`, `not-found`, `failed`).
    pub status_writes: IntCounterVec,
    /// `--cert-mode self-managed`: failed certificate syncs (renewals included).
    pub cert_renewal_failures: IntCounter,
    /// `--cert-mode self-managed`: webhook configurations whose caBundle was put back after
    /// something else changed it.
    pub ca_bundle_repairs: IntCounter,
    /// `{source}` 1: where lookups (delete protection's Cascading checks, CloneSet pods) are
    /// answered, `api-server` or `cluster-folder` (folder mode: protection can fail open).
    pub lookup_source: IntGaugeVec,
    /// 1 when `--shadow` is on: nothing is enforced.
    pub shadow_mode: IntGauge,
    /// `{webhook, outcome}`: `--shadow` decisions by what they would have done (`would-patch`,
    /// `would-deny`, `no-op`); `webhook` is the routing table's name.
    pub shadow_decisions: IntCounterVec,
    /// `{sidecarset, result}`: `--shadow` in live mode, our decision on a Pod CREATE against the Pod
    /// the API server stored (`agree`, `disagree`), per SidecarSet either side injected; `sidecarset`
    /// is a SidecarSet of the snapshot, `other` for a name it does not have, `-` when neither side
    /// injected any.
    pub shadow_agreement: IntCounterVec,
    pub shadow_step_agreement: IntCounterVec,
    /// `{reason}`: `--shadow` decisions on Pod CREATEs that left without a stored Pod (`expired`,
    /// `evicted` by the caps).
    pub shadow_unmatched: IntCounterVec,
    /// Decisions waiting for their stored Pod.
    pub shadow_pending: IntGauge,
    /// 1 when no `--client-ca-file` is set: any caller is served.
    pub client_auth_disabled: IntGauge,
    /// `{capability}` 1 for each `--disable-capability`, 0 for the others.
    pub capability_disabled: IntGaugeVec,
    /// `{name}`: Pod reviews whose Namespace the cluster snapshot does not hold, while a SidecarSet
    /// that selects namespaces by label would otherwise be a candidate (it is skipped).
    pub pod_namespace_unknown: IntCounterVec,
    /// `{name}`: DELETE reviews without `oldObject` (allowed: there is nothing to check).
    pub delete_without_old_object: IntCounterVec,
}

impl Metrics {
    // Left as one long function on purpose: it is the table of every metric (name, help, labels),
    // one entry per field; splitting it would scatter the table a dashboard author reads.
    #[allow(clippy::too_many_lines)]
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let r = Register(&registry);
        let build_info = r.int_gauges(
            "kruise_admission_build_info",
            "Always 1; the version is in the label",
            &["version"],
        )?;
        build_info.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        Ok(Metrics {
            requests: r.int_counters(
                "kruise_admission_webhook_request_total",
                "Admission reviews answered, by webhook, operation and result",
                &["name", "type", "operation", "code", "rejected"],
            )?,
            duration: r.histograms(
                HistogramOpts::new(
                    "kruise_admission_webhook_admission_duration_seconds",
                    "Time to answer an admission review",
                )
                // 100 µs to about 3.3 s.
                .buckets(prometheus::exponential_buckets(0.0001, 2.0, 16)?),
                &["name", "type", "operation", "rejected"],
            )?,
            rejections: r.int_counters(
                "kruise_admission_webhook_rejection_count",
                "Admission reviews denied, by request kind and denial code",
                &["name", "type", "operation", "kind", "rejection_code"],
            )?,
            patch_operations: r.histograms(
                HistogramOpts::new(
                    "kruise_admission_webhook_patch_operations",
                    "JSON Patch operations per mutating response",
                )
                .buckets(vec![0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0]),
                &["name"],
            )?,
            http_errors: r.int_counters(
                "kruise_admission_http_errors_total",
                "Requests answered with an HTTP error instead of a review",
                &["reason"],
            )?,
            review_work: r.int_counters(
                "kruise_admission_review_work_total",
                "Parses and decisions of reviews started, by where they ran: inline (cheap reviews) or on the worker pool",
                &["name", "place"],
            )?,
            cert_not_after: r.add(Gauge::new(
                "kruise_admission_serving_certificate_not_after_seconds",
                "notAfter of the serving certificate, Unix seconds",
            )?)?,
            cluster_objects: r.int_gauges(
                "kruise_admission_cluster_objects",
                "Objects in the cluster snapshot, by kind",
                &["kind"],
            )?,
            snapshot_timestamp: r.add(Gauge::new(
                "kruise_admission_cluster_snapshot_timestamp_seconds",
                "When the cluster snapshot in use was loaded, Unix seconds",
            )?)?,
            watch_reconnects: r.int_counters(
                "kruise_admission_cluster_watch_reconnects_total",
                "Live mode: watch streams that ended and were reopened, by kind",
                &["kind"],
            )?,
            watch_relists: r.int_counters(
                "kruise_admission_cluster_watch_relists_total",
                "Live mode: full relists after 410 Gone, by kind",
                &["kind"],
            )?,
            watch_synced: r.int_gauges(
                "kruise_admission_cluster_watch_synced",
                "Live mode: 1 once the kind's initial list is done",
                &["kind"],
            )?,
            watch_failing_seconds: r.add(GaugeVec::new(
                Opts::new(
                    "kruise_admission_cluster_watch_failing_seconds",
                    "Live mode: how long the kind's watch has been failing (0 when healthy)",
                ),
                &["kind"],
            )?)?,
            watch_unreadable: r.int_gauges(
                "kruise_admission_cluster_watch_unreadable",
                "Live mode: 1 when RBAC does not let the server list this optional kind (the Kruise namespace's ControllerRevisions or ConfigMap), which is then cached as empty",
                &["kind"],
            )?,
            pod_step_skipped: r.int_gauges(
                "kruise_admission_pod_step_skipped",
                "Live mode: 1 for a /mutate-pod step that is skipped because the API server does not serve its CRD (related-pub: PodUnavailableBudgets)",
                &["step"],
            )?,
            status_writes: r.int_counters(
                "kruise_admission_status_writes_total",
                "Status writes of decisions (PodUnavailableBudget and WorkloadSpread accounting) by kind and result: written, conflict (read again and decided again), not-found, failed (the request is answered with the failure)",
                &["kind", "result"],
            )?,
            cert_renewal_failures: r.add(IntCounter::new(
                "kruise_admission_certificate_renewal_failures_total",
                "--cert-mode self-managed: certificate syncs or renewals that failed (each is logged with its reason and retried)",
            )?)?,
            ca_bundle_repairs: r.add(IntCounter::new(
                "kruise_admission_ca_bundle_repairs_total",
                "--cert-mode self-managed: webhook configurations whose caBundle was put back after something else changed it (the CA unchanged)",
            )?)?,
            lookup_source: r.int_gauges(
                "kruise_admission_lookup_source",
                "1 for where delete protection's Cascading lookups and CloneSet pod lookups are answered: api-server (live mode) \
                 or cluster-folder (folder mode: objects missing from the folder count as absent)",
                &["source"],
            )?,
            shadow_mode: r.add(IntGauge::new(
                "kruise_admission_shadow_mode",
                "1 when the server runs with --shadow: every decision is made and counted, none is enforced (every review is \
                 answered allowed, unchanged; delete protection included)",
            )?)?,
            shadow_decisions: r.int_counters(
                "kruise_admission_shadow_decisions_total",
                "--shadow: decisions by webhook and by what they would have done (would-patch, would-deny, no-op); each was answered \
                 allowed, unchanged",
                &["webhook", "outcome"],
            )?,
            shadow_agreement: r.int_counters(
                "kruise_admission_shadow_agreement_total",
                "--shadow in live mode: our decision on a Pod CREATE compared with the Pod the API server stored, per SidecarSet \
                 either side injected (agree, disagree); sidecarset is a SidecarSet of the cluster, other for a name it does not \
                 have, - when neither side injected any",
                &["sidecarset", "result"],
            )?,
            shadow_step_agreement: r.int_counters(
                "kruise_admission_shadow_step_agreement_total",
                "--shadow in live mode: our decision on a Pod CREATE compared with the Pod the API server stored, per /mutate-pod \
                 step (readiness-gate, workload-spread, sidecarset, launch-priority, related-pub, persistent-pod-state, \
                 enhanced-liveness, probe-marker), each Pod once per step (agree, disagree; agree when neither side did anything)",
                &["step", "result"],
            )?,
            shadow_unmatched: r.int_counters(
                "kruise_admission_shadow_unmatched_total",
                "--shadow in live mode: decisions on Pod CREATEs no stored Pod was paired with (expired: older than the TTL; \
                 evicted: pushed out by the count or byte cap)",
                &["reason"],
            )?,
            shadow_pending: r.add(IntGauge::new(
                "kruise_admission_shadow_pending_decisions",
                "--shadow in live mode: decisions on Pod CREATEs waiting for the Pod the API server stores",
            )?)?,
            client_auth_disabled: r.add(IntGauge::new(
                "kruise_admission_client_auth_disabled",
                "1 when client certificates are not required (no --client-ca-file): any caller that reaches the port is served",
            )?)?,
            capability_disabled: r.int_gauges(
                "kruise_admission_capability_disabled",
                "1 for a capability switched off with --disable-capability (its webhooks allow everything unchanged), 0 otherwise",
                &["capability"],
            )?,
            pod_namespace_unknown: r.int_counters(
                "kruise_admission_pod_namespace_unknown_total",
                "Pod reviews whose Namespace the cluster snapshot does not hold (yet): SidecarSets with a namespaceSelector that \
                 would otherwise be candidates were skipped",
                &["name"],
            )?,
            delete_without_old_object: r.int_counters(
                "kruise_admission_delete_without_old_object_total",
                "DELETE reviews without oldObject (the API server sends it from 1.16 on): allowed, as there is nothing to check",
                &["name"],
            )?,
            registry,
        })
    }

    /// Record a newly loaded snapshot: object counts by kind (`Kind` for the core group,
    /// `Kind.group` otherwise, so apps/v1 and Kruise DaemonSets stay apart) and the load time.
    pub fn record_snapshot(&self, snapshot: &Snapshot, loaded_at_unix: f64) {
        self.cluster_objects.reset();
        for (ty, count) in snapshot.counts() {
            let kind =
                if ty.group.is_empty() { ty.kind.clone() } else { format!("{}.{}", ty.kind, ty.group) };
            self.cluster_objects
                .with_label_values(&[kind.as_str()])
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        self.snapshot_timestamp.set(loaded_at_unix);
    }

    /// Bring the live-mode watch metrics up to `stats` (called on every scrape). The library keeps
    /// running totals; the counters are advanced by the difference.
    pub fn record_live(&self, stats: &LiveStats) {
        for kind in &stats.kinds {
            let label = [kind.kind.as_str()];
            let reconnects = self.watch_reconnects.with_label_values(&label);
            reconnects.inc_by(kind.reconnects.saturating_sub(reconnects.get()));
            let relists = self.watch_relists.with_label_values(&label);
            relists.inc_by(kind.relists.saturating_sub(relists.get()));
            self.watch_synced.with_label_values(&label).set(i64::from(kind.synced));
            self.watch_unreadable.with_label_values(&label).set(i64::from(kind.unreadable));
            self.watch_failing_seconds
                .with_label_values(&label)
                .set(kind.failing_for.map_or(0.0, |d| d.as_secs_f64()));
        }
        for step in &stats.skipped_steps {
            self.pod_step_skipped.with_label_values(&[step]).set(1);
        }
    }

    /// Bring the self-managed certificate metrics up to `status` (called on every scrape).
    pub fn record_cert_status(&self, status: &CertStatus) {
        self.cert_renewal_failures.inc_by(status.failures.saturating_sub(self.cert_renewal_failures.get()));
        self.ca_bundle_repairs.inc_by(status.ca_bundle_repairs.saturating_sub(self.ca_bundle_repairs.get()));
    }

    /// Count an HTTP-level error (`bad_request`, `not_found`, `timeout`, ...).
    pub fn http_error(&self, reason: &str) {
        self.http_errors.with_label_values(&[reason]).inc();
    }

    /// The text exposition format.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding our own well-formed families into a Vec cannot fail; an empty page is the
        // fallback rather than a panic in a scrape.
        if TextEncoder::new().encode(&self.registry.gather(), &mut out).is_err() {
            out.clear();
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Registers each metric it makes in one registry.
struct Register<'a>(&'a Registry);

impl Register<'_> {
    fn add<M: Collector + Clone + 'static>(&self, metric: M) -> prometheus::Result<M> {
        self.0.register(Box::new(metric.clone()))?;
        Ok(metric)
    }

    fn int_counters(&self, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
        self.add(IntCounterVec::new(Opts::new(name, help), labels)?)
    }

    fn int_gauges(&self, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels)?)
    }

    fn histograms(&self, opts: HistogramOpts, labels: &[&str]) -> prometheus::Result<HistogramVec> {
        self.add(HistogramVec::new(opts, labels)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_once_it_has_a_sample() {
        let m = Metrics::new().unwrap();
        m.requests.with_label_values(&["mpod.kb.io", "admit", "CREATE", "200", "false"]).inc();
        m.duration.with_label_values(&["mpod.kb.io", "admit", "CREATE", "false"]).observe(0.001);
        m.rejections.with_label_values(&["mpod.kb.io", "admit", "CREATE", "Pod", "400"]).inc();
        m.patch_operations.with_label_values(&["mpod.kb.io"]).observe(3.0);
        m.http_error("not_found");
        m.shadow_decisions.with_label_values(&["mpod.kb.io", "would-patch"]).inc();
        m.cert_not_after.set(1.0);
        m.record_snapshot(
            &Snapshot::from_objects([
                serde_json::json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"}}),
            ]),
            2.0,
        );
        let text = m.render();
        for name in [
            "kruise_admission_webhook_request_total{",
            "kruise_admission_webhook_admission_duration_seconds_bucket{",
            "le=\"0.0001\"",
            "kruise_admission_webhook_rejection_count{",
            "kruise_admission_webhook_patch_operations_bucket{",
            "kruise_admission_http_errors_total{reason=\"not_found\"} 1",
            "kruise_admission_serving_certificate_not_after_seconds 1",
            "kruise_admission_build_info{version=",
            "kruise_admission_cluster_objects{kind=\"SidecarSet.apps.kruise.io\"} 1",
            "kruise_admission_cluster_snapshot_timestamp_seconds 2",
            "kruise_admission_shadow_mode 0",
            "kruise_admission_shadow_decisions_total{outcome=\"would-patch\",webhook=\"mpod.kb.io\"} 1",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }
}
