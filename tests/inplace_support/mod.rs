//! Shared by the `inplace_*` test crates: build an AdmissionReview for a Kruise workload, run it
//! through the routing table exactly as the edges do (`webhooks::run`, lookups answered from a
//! snapshot), and check the outcome.
#![allow(dead_code)] // each test crate uses a different subset

use kruise_admission::admission::review::{Decision, decode_review};
use kruise_admission::admission::webhooks::{self, Webhook};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Query, Snapshot};
use serde_json::{Value, json};
use time::macros::datetime;

/// What a case expects: allowed (then with no patch and no warning), or denied with this code and
/// a message that contains every listed fragment.
#[derive(Debug)]
pub enum Expect {
    Allowed,
    Denied(u16, &'static [&'static str]),
}

/// Everything around the request: cluster objects, lookups that fail, settings.
#[derive(Default)]
pub struct World {
    pub objects: Vec<Value>,
    pub failing: Vec<(Query, String)>,
    pub settings: Settings,
}

pub fn review(
    resource: &str,
    kind: &str,
    version: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
            "kind": {"group": "apps.kruise.io", "version": version, "kind": kind},
            "resource": {"group": "apps.kruise.io", "version": version, "resource": resource},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "namespace": object.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old.cloned().unwrap_or(Value::Null),
        }
    })
}

/// Run the webhook registered at `path` on `review`, as `serve` and `dry-run` do.
pub fn run(path: &str, review: Value, world: &World) -> Decision<'static> {
    let webhook: &Webhook = webhooks::by_path(path).expect("webhook registered");
    let request = decode_review(review).expect("a well-formed review");
    assert!(webhook.matches(&request), "{path} must receive {:?} {:?}", request.operation, request.resource);
    let snapshot = Snapshot::from_objects(world.objects.clone());
    let clock = FixedClock(datetime!(2026-01-01 00:00 UTC));
    let random = SeededRandom::new(1);
    let no_answers = Answers::default();
    let probe = Inputs {
        cluster: &snapshot,
        answers: &no_answers,
        clock: &clock,
        random: &random,
        settings: &world.settings,
    };
    let queries = webhook.queries.map(|q| q(&request, &probe)).unwrap_or_default();
    let mut answers = Answers::from_snapshot(&snapshot, &queries);
    for (query, error) in &world.failing {
        answers.insert(query.clone(), Err(error.clone()));
    }
    let inputs = Inputs {
        cluster: &snapshot,
        answers: &answers,
        clock: &clock,
        random: &random,
        settings: &world.settings,
    };
    webhooks::run(webhook, &request, &inputs).decision.into_owned()
}

pub fn check(name: &str, decision: &Decision, expect: &Expect) {
    match expect {
        Expect::Allowed => {
            assert!(decision.allowed, "{name}: expected allowed, got {:?}", decision.status);
            assert!(decision.patch.is_empty(), "{name}: a validator never patches");
            assert!(decision.warnings.is_empty(), "{name}: unexpected warnings {:?}", decision.warnings);
        }
        Expect::Denied(code, fragments) => {
            assert!(!decision.allowed, "{name}: expected a denial");
            let status = decision.status.as_ref().expect("a denial carries a status");
            assert_eq!(status.code, *code, "{name}: code for {:?}", status.message);
            for fragment in *fragments {
                assert!(
                    status.message.contains(fragment),
                    "{name}: {:?} must contain {fragment:?}",
                    status.message
                );
            }
            assert!(decision.patch.is_empty());
        }
    }
}

/// Apply a change to a copy: `edit(&mut copy)`.
pub fn with(base: &Value, edit: impl FnOnce(&mut Value)) -> Value {
    let mut copy = base.clone();
    edit(&mut copy);
    copy
}

/// `value[pointer] = new`, creating objects on the way.
pub fn set(value: &mut Value, pointer: &str, new: Value) {
    let mut cur = value;
    for token in pointer.trim_start_matches('/').split('/') {
        if let Value::Array(items) = cur {
            let i: usize = token.parse().expect("array index");
            if i == items.len() {
                items.push(Value::Null);
            }
            cur = &mut items[i];
            continue;
        }
        if !cur.is_object() {
            *cur = json!({});
        }
        cur = cur.as_object_mut().expect("object").entry(token.to_owned()).or_insert(Value::Null);
    }
    *cur = new;
}

pub fn remove(value: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer with a parent");
    if let Some(Value::Object(map)) = value.pointer_mut(parent) {
        map.remove(key);
    }
}
