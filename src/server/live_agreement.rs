//! `serve --shadow` in live mode: our decision on each Pod CREATE against the Pod the API server
//! stored (docs/sidecarset.md#13-5-live-agreement). `/mutate-pod` hands its decisions here
//! ([`LiveAgreement::remember`]); the Pod-creation watch hands the stored Pods
//! ([`LiveAgreement::stored`]); each pair is compared with [`agreement::compare_pod`] and counted in
//! `kruise_admission_shadow_agreement_total{sidecarset, result}` and
//! `kruise_admission_shadow_step_agreement_total{step, result}`, each disagreement logged with its
//! diff. Decisions no stored Pod pairs with are counted in `kruise_admission_shadow_unmatched_total`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde_json::Value;

use super::metrics::Metrics;
use crate::admission::agreement::{self, Lookups};
use crate::admission::pending_decisions::{Decided, Limits, PendingDecisions, Remembered, Unmatched};
use crate::admission::pod::Step;
use crate::admission::review::{AdmissionRequest, Operation};
use crate::admission::shadow;
use crate::admission::webhooks::{Capability, Webhook};
use crate::admission::workload_spread;
use crate::api::sidecarset::{self, SidecarSet};
use crate::api::tree::Json;
use crate::cluster::Snapshot;

/// The `sidecarset` label for a Pod neither side injected.
pub const NO_SIDECARSET: &str = "-";
/// The `sidecarset` label for a name that is not a SidecarSet of the snapshot.
pub const OTHER_SIDECARSET: &str = "other";

pub struct LiveAgreement {
    pending: Mutex<PendingDecisions>,
    metrics: Arc<Metrics>,
}

impl LiveAgreement {
    pub fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        for reason in ["expired", "evicted"] {
            metrics.shadow_unmatched.with_label_values(&[reason]);
        }
        for step in Step::ALL {
            for agrees in [true, false] {
                metrics.shadow_step_agreement.with_label_values(&[step.as_str(), result(agrees)]);
            }
        }
        LiveAgreement { pending: Mutex::new(PendingDecisions::new(limits)), metrics }
    }

    fn lock(&self) -> MutexGuard<'_, PendingDecisions> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `webhook`'s decision on `request` is one to compare: Pod injection on a Pod CREATE
    /// that will be stored (not a dry run, not a subresource).
    pub fn wants(webhook: &Webhook, request: &AdmissionRequest) -> bool {
        webhook.capability == Capability::PodMutation
            && request.operation == Operation::Create
            && request.kind.kind == "Pod"
            && request.resource.group.is_empty()
            && request.resource.resource == "pods"
            && request.sub_resource.is_empty()
            && !request.dry_run
            && request.object.is_some()
    }

    /// Keep our decision on `request` (`ours`: its Pod with our patch applied) until the stored Pod
    /// arrives. The first call for a Pod wins (see `pending_decisions`).
    pub fn remember(&self, request: &AdmissionRequest, ours: Value, now: Instant) {
        let Some(original) = request.object.as_ref().map(Json::to_value) else { return };
        let name = if request.name.is_empty() {
            original.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned()
        } else {
            request.name.clone()
        };
        let decided = Decided { namespace: request.namespace.clone(), name, original, ours };
        let (remembered, unmatched) = {
            let mut pending = self.lock();
            let result = pending.remember(decided, now);
            self.metrics.shadow_pending.set(pending.len() as i64);
            result
        };
        self.count_unmatched(unmatched);
        if remembered != Remembered::Kept {
            tracing::debug!(uid = %request.uid, object = %request.display_name(), why = ?remembered, "shadow agreement: decision not kept");
        }
    }

    /// Drop the decisions past their TTL.
    pub fn expire(&self, now: Instant) {
        let expired = {
            let mut pending = self.lock();
            let expired = pending.expire(now);
            self.metrics.shadow_pending.set(pending.len() as i64);
            expired
        };
        self.count_unmatched(Unmatched { expired, evicted: 0 });
    }

    fn count_unmatched(&self, unmatched: Unmatched) {
        for (reason, n) in [("expired", unmatched.expired), ("evicted", unmatched.evicted)] {
            if n > 0 {
                self.metrics.shadow_unmatched.with_label_values(&[reason]).inc_by(n as u64);
            }
        }
    }

    /// A Pod the API server stored: compare it with the decision it pairs with, if one waits, using
    /// the SidecarSets of `snapshot`. CPU work (the comparison); the lock is not held for it.
    pub fn stored(&self, pod: Value, snapshot: Option<&Snapshot>) {
        let taken = self.lock().take(pod);
        if let Some((decided, stored)) = taken {
            self.compare(&decided, &stored, snapshot);
        }
        // Only once the comparison is counted: whoever sees no decision pending sees its verdict.
        let pending = self.lock().len();
        self.metrics.shadow_pending.set(pending as i64);
    }

    fn compare(&self, decided: &Decided, stored: &Value, snapshot: Option<&Snapshot>) {
        let sidecarset = |name: &str| {
            let object = snapshot?.get(sidecarset::GROUP, sidecarset::KIND, "", name)?;
            SidecarSet::from_value(&object).ok().map(Arc::new)
        };
        let workload_spread = |namespace: &str, name: &str| {
            snapshot?.get(workload_spread::WS_GROUP, workload_spread::WS_KIND, namespace, name)
        };
        let lookups = Lookups { sidecarset: &sidecarset, workload_spread: &workload_spread };
        let verdict = agreement::compare_pod(&decided.original, &decided.ours, stored, &lookups);
        let pod_name = format!(
            "{}/{}",
            stored.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default(),
            stored.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
        );
        for step in &verdict.steps {
            self.metrics
                .shadow_step_agreement
                .with_label_values(&[step.step.as_str(), result(step.agrees())])
                .inc();
            // The SidecarSet step's disagreements are logged per SidecarSet, below.
            if !step.agrees() && step.step != Step::SidecarSet {
                tracing::warn!(
                    pod = %pod_name,
                    step = step.step.as_str(),
                    diffs = step.diffs.len(),
                    diff = %shadow::diff_summary(&step.diffs),
                    "shadow disagreement"
                );
            }
        }
        if verdict.sidecarsets.is_empty() {
            self.metrics.shadow_agreement.with_label_values(&[NO_SIDECARSET, "agree"]).inc();
            return;
        }
        for verdict in verdict.sidecarsets {
            // Only names the cluster has become label values: the annotations a name came from are
            // the Pods', which anyone creating a Pod writes.
            let known =
                snapshot.is_some_and(|s| s.contains(sidecarset::GROUP, sidecarset::KIND, "", &verdict.name));
            let label = if known { verdict.name.as_str() } else { OTHER_SIDECARSET };
            self.metrics.shadow_agreement.with_label_values(&[label, result(verdict.agrees())]).inc();
            if !verdict.agrees() {
                tracing::warn!(
                    pod = %pod_name,
                    step = Step::SidecarSet.as_str(),
                    sidecarset = %shadow::truncate(&verdict.name, 253),
                    diffs = verdict.diffs.len(),
                    diff = %shadow::diff_summary(&verdict.diffs),
                    "shadow disagreement"
                );
            }
        }
    }
}

/// The `result` label of a verdict.
fn result(agrees: bool) -> &'static str {
    if agrees { "agree" } else { "disagree" }
}
