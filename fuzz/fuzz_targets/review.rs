//! Review decoding, routing and every webhook's decision, on arbitrary bytes, against the
//! cluster in `examples/cluster`. Properties beyond "no panic":
//! - a mutating webhook's patch, applied with the json-patch crate, gives exactly the object the
//!   webhook reported;
//! - `/mutate-pod` run again on its own output returns no patch (reinvocationPolicy: IfNeeded).
#![no_main]

use std::sync::OnceLock;

use kruise_admission::admission::review::decode_review;
use kruise_admission::admission::webhooks::{self, WEBHOOKS};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot, files};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn snapshot() -> &'static Snapshot {
    static SNAPSHOT: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster");
        files::load_dir(&dir).expect("examples/cluster loads").0
    })
}

fn apply(original: &Value, ops: &[kruise_admission::admission::patch::PatchOp]) -> Value {
    let patch: json_patch::Patch = serde_json::from_value(serde_json::to_value(ops).expect("ops serialize")).expect("ops are RFC 6902");
    let mut doc = original.clone();
    json_patch::patch(&mut doc, &patch)
        .unwrap_or_else(|e| panic!("our patch does not apply: {e}\n{}", serde_json::to_string(ops).unwrap()));
    doc
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let Ok(request) = decode_review(value) else { return };
    let cluster = snapshot();
    let settings = Settings::default();
    let clock = FixedClock(time::macros::datetime!(2026-01-01 00:00 UTC));
    let random = SeededRandom::new(1);
    let none = Answers::default();
    for webhook in WEBHOOKS {
        let mut inputs = Inputs { cluster, answers: &none, clock: &clock, random: &random, settings: &settings };
        let answers = webhook.queries.map(|queries| Answers::from_snapshot(cluster, &queries(&request, &inputs)));
        if let Some(answers) = &answers {
            inputs.answers = answers;
        }
        let outcome = webhooks::run(webhook, &request, &inputs);
        let _ = kruise_admission::admission::review::review_response(request.version, &request.uid, &outcome.decision);
        let (Some(mutated), Some(original)) = (&outcome.mutated, &request.object) else { continue };
        assert_eq!(&apply(original, &outcome.decision.patch), mutated, "{}: patched object differs from the mutated one", webhook.name);
        if webhook.path == "/mutate-pod" && !outcome.decision.patch.is_empty() {
            let mut again = request.clone();
            again.object = Some(mutated.clone());
            let second = webhooks::run(webhook, &again, &inputs);
            assert!(
                second.decision.patch.is_empty() || !second.decision.allowed,
                "re-invocation patched again: {}",
                serde_json::to_string(&second.decision.patch).unwrap()
            );
        }
    }
});
