//! What the fuzz targets share: one webhook call with every property the server relies on checked.
//! A violated property panics, which libFuzzer reports as a crash with the input that caused it.

use kruise_admission::admission::feature_gates::{FeatureGates, Gate};
use kruise_admission::admission::patch::PatchOp;
use kruise_admission::admission::review::{self, AdmissionRequest, Decision};
use kruise_admission::admission::webhooks::{self, Webhook, WebhookKind};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::api::tree::Json;
use kruise_admission::cluster::{Answers, Snapshot};
use serde_json::Value;

/// A fixed instant: decisions that read the clock must be reproducible from the input alone.
pub fn clock() -> FixedClock {
    // 2026-01-01T00:00:00Z
    FixedClock(
        time::OffsetDateTime::from_unix_timestamp(1_767_225_600).unwrap_or(time::OffsetDateTime::UNIX_EPOCH),
    )
}

/// Settings varied by two bits of the input, so both sides of each switch are explored.
pub fn settings(bits: u8) -> Settings {
    Settings {
        gates: FeatureGates::from_flags(&[
            (Gate::InPlaceWorkloadVerticalScaling, bits & 1 != 0),
            (Gate::SidecarSetPatchPodMetadataDefaultsAllowed, bits & 2 != 0),
        ]),
        ..Settings::default()
    }
}

/// `original` with `ops` applied by an independent RFC 6902 implementation (the json-patch crate).
pub fn apply(original: &Value, ops: &[PatchOp]) -> Value {
    // Through `Value`, not text: serde_json's default float parser may move a float read back
    // from text by one ulp, which would be a finding about this harness, not about the patch.
    let text = || serde_json::to_string(ops).unwrap_or_default();
    let value = serde_json::to_value(ops).unwrap_or_else(|e| panic!("our ops do not serialize: {e}"));
    let patch: json_patch::Patch = serde_json::from_value(value)
        .unwrap_or_else(|e| panic!("our ops are not RFC 6902 ({e}): {}", text()));
    let mut doc = original.clone();
    if let Err(e) = json_patch::patch(&mut doc, &patch) {
        panic!("our patch does not apply: {e}\n{}", text());
    }
    doc
}

/// One call of `webhook` as `serve` and `dry-run` make it, the lookups it names answered from
/// `cluster`. Checks:
/// - `decide` (what `serve` answers) gives the same decision as `run` (what `dry-run` reports);
/// - a decision is either allowed or carries a status with one of the four error codes, and a
///   denial carries no patch;
/// - for a request the apiserver could send to this webhook (see [`apiserver_could_send`]), no
///   denial says a lookup was not performed: the webhook's `queries` named everything its
///   decision reads. (A forged review, e.g. a Namespace DELETE posted to the CloneSet path, may be
///   refused that way: fail-closed, and never sent by an apiserver.)
/// - the review response is built and echoes the uid;
/// - a mutating webhook's patch, applied independently, gives exactly the object it reported;
/// - a mutator's pre-check that says "nothing to do" is right: the mutator itself changes nothing
///   and says nothing;
/// - a mutating webhook run again on its own output returns no patch (reinvocationPolicy: IfNeeded);
/// - with every lookup failing, the decision still comes back (no panic).
///
/// Returns the mutated object when the webhook patched.
pub fn check_webhook(
    webhook: &Webhook,
    request: &AdmissionRequest,
    cluster: &Snapshot,
    settings: &Settings,
) -> Option<Value> {
    let clock = clock();
    let none = Answers::default();
    let queries = webhook.queries.map(|queries| {
        let random = SeededRandom::new(1);
        queries(request, &Inputs { cluster, answers: &none, clock: &clock, random: &random, settings })
    });
    let answers = queries.as_ref().map_or_else(Answers::default, |q| Answers::from_snapshot(cluster, q));
    let run = |request: &AdmissionRequest, answers: &Answers| {
        let random = SeededRandom::new(1);
        webhooks::run(
            webhook,
            request,
            &Inputs { cluster, answers, clock: &clock, random: &random, settings },
        )
        .into_owned()
    };
    let outcome = run(request, &answers);
    let decided = {
        let random = SeededRandom::new(1);
        webhooks::decide(
            webhook,
            request,
            &Inputs { cluster, answers: &answers, clock: &clock, random: &random, settings },
        )
        .into_owned()
    };
    let decision = &outcome.decision;
    assert_eq!(&decided, decision, "{}: decide and run disagree", webhook.name);
    check_decision(webhook, request, decision);
    if let Some(status) = decision.status.as_ref().filter(|_| apiserver_could_send(webhook, request)) {
        assert!(
            !status.message.contains("was not performed"),
            "{}: the decision read a lookup its queries did not name: {}",
            webhook.name,
            status.message
        );
    }

    if let Some(queries) = queries.filter(|q| !q.is_empty()) {
        let mut failing = Answers::default();
        for query in queries {
            failing.insert(query, Err("the lookup failed (fuzz)".into()));
        }
        let _ = run(request, &failing);
    }

    if webhook.kind() != WebhookKind::Mutating {
        return None;
    }
    let (Some(mutated), Some(original)) = (outcome.mutated, &request.object) else { return None };
    assert_eq!(
        apply(&original.to_value(), &decision.patch),
        mutated,
        "{}: the patched object differs from the mutated one",
        webhook.name
    );
    if decision.patch.is_empty() {
        return None;
    }
    let mut again = request.clone();
    again.object = Some(Json::from(mutated.clone()));
    let second = run(&again, &answers).decision;
    assert!(
        !second.allowed || second.patch.is_empty(),
        "{}: re-invocation on its own output patched again: {}",
        webhook.name,
        serde_json::to_string(&second.patch).unwrap_or_default()
    );
    Some(mutated)
}

/// Whether an apiserver could send `request` to `webhook`: the webhook's rules match it, and its
/// kind is the resource's (`Namespace` for `namespaces`, same group), as is the object's own kind
/// when it names one.
pub fn apiserver_could_send(webhook: &Webhook, request: &AdmissionRequest) -> bool {
    let kind = request.kind.kind.to_lowercase();
    let resource = &request.resource.resource;
    let object_kind = request.subject().and_then(|o| o.get("kind")).and_then(Json::as_str);
    webhook.matches(request)
        && !kind.is_empty()
        && request.kind.group == request.resource.group
        && (*resource == format!("{kind}s") || *resource == format!("{kind}es"))
        && object_kind.is_none_or(|k| k == request.kind.kind)
}

fn check_decision(webhook: &Webhook, request: &AdmissionRequest, decision: &Decision) {
    match &decision.status {
        None => assert!(decision.allowed, "{}: refused without a status", webhook.name),
        Some(status) => {
            assert!(!decision.allowed, "{}: allowed with a status {status:?}", webhook.name);
            assert!(
                matches!(status.code, 400 | 403 | 422 | 500),
                "{}: status code {}",
                webhook.name,
                status.code
            );
            assert!(decision.patch.is_empty(), "{}: a denial carries a patch", webhook.name);
        }
    }
    let response: Value =
        serde_json::from_slice(&review::review_response(request.version, &request.uid, decision))
            .expect("the response is JSON");
    assert_eq!(
        response.pointer("/response/uid").and_then(Value::as_str),
        Some(request.uid.as_str()),
        "{}: uid not echoed",
        webhook.name
    );
}

/// A tiny deterministic byte reader: 0 once the bytes run out.
pub struct Bytes<'a>(pub &'a [u8]);

impl Bytes<'_> {
    pub fn byte(&mut self) -> u8 {
        let Some((&first, rest)) = self.0.split_first() else { return 0 };
        self.0 = rest;
        first
    }

    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { usize::from(self.byte()) % n }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
