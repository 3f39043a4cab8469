//! What a decision does besides answering: its warnings and the status writes it intends.
//!
//! Some of Kruise's Pod decisions record what they allowed in another object's status
//! (WorkloadSpread `creatingPods` / `deletingPods`, PodUnavailableBudget `disruptedPods` /
//! `unavailablePods`). Decisions stay pure: they return the whole object as it would be written,
//! carrying the `resourceVersion` they read, and the edge makes the write (live mode), prints it
//! (`dry-run -o json`) or drops it (shadow mode, dry-run requests, refused requests). A write that
//! conflicts is not retried as such: the edge reads the object again, puts it in the decision's
//! answers ([`current`]) and decides again, as Kruise's `RetryOnConflict` does.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Inputs;
use super::review::{AdmissionError, AdmissionRequest};
pub use crate::cluster::query::{Target, WriteFailure};

/// A decision's side products: warnings for the user, and the status writes it intends.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Effects {
    pub warnings: Vec<String>,
    pub writes: Vec<StatusWrite>,
}

impl From<Vec<String>> for Effects {
    fn from(warnings: Vec<String>) -> Self {
        Effects { warnings, writes: Vec::new() }
    }
}

/// One `update` of an object's `status` subresource.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusWrite {
    pub target: Target,
    /// The whole object as it would be written. Its `metadata.resourceVersion` is the one the
    /// decision read, so the API server refuses the write if anything changed the object since.
    pub object: Value,
    /// What the answer becomes when the write cannot be made.
    pub on_failure: OnFailure,
}

/// Kruise's answer when its status write fails (after its retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// PodUnavailableBudget: the request is refused (403), naming the budget.
    Deny,
    /// WorkloadSpread on `/mutate-pod`: the webhook errs (500).
    Internal,
    /// WorkloadSpread on `/validate-pod`, whose handler answers every error with 400.
    BadRequest,
}

impl StatusWrite {
    /// The error the request is answered with when the write fails for `why` (the API server's
    /// message, or that conflicts outlasted the retries).
    pub fn failure(&self, why: &str) -> AdmissionError {
        let Target { kind, namespace, name, .. } = &self.target;
        let message = format!("couldn't update {kind} {namespace}/{name}: {why}");
        match self.on_failure {
            OnFailure::Deny => AdmissionError::Forbidden(message),
            OnFailure::Internal => AdmissionError::Internal(message),
            OnFailure::BadRequest => AdmissionError::BadRequest(message),
        }
    }

    /// How `dry-run -o json` lists the write.
    pub fn to_json(&self) -> Value {
        json!({
            "verb": "update",
            "subresource": "status",
            "apiVersion": self.target.api_version(),
            "kind": self.target.kind,
            "namespace": self.target.namespace,
            "name": self.target.name,
            "object": self.object,
        })
    }
}

/// The object `target` as the decision should see it: read again from the API server after a
/// conflicting write (the edge answered `target.query()`), otherwise the cached one. `None`: it
/// does not exist (any more).
pub fn current(inputs: &Inputs<'_>, target: &Target) -> Option<Arc<Value>> {
    match inputs.answers.get(&target.query()) {
        Ok(fresh) => fresh.first().cloned(),
        Err(_) => inputs.cluster.get(&target.group, &target.kind, &target.namespace, &target.name),
    }
}

/// Whether the request must not write: the API server's `dryRun`, or, for a `pods/eviction`
/// CREATE, the Eviction's own `deleteOptions.dryRun` (`kubectl drain --dry-run=server` sets only
/// that one; Kruise never reads it, and records such evictions as real ones). Any non-empty list
/// is a dry run, as `dryrun.IsDryRun` reads it (the API server admits only `All`).
pub fn is_dry_run(request: &AdmissionRequest) -> bool {
    request.dry_run
        || (request.sub_resource == "eviction"
            && request
                .object
                .as_ref()
                .and_then(|eviction| eviction.get("deleteOptions")?.get("dryRun")?.as_array())
                .is_some_and(|modes| !modes.is_empty()))
}
