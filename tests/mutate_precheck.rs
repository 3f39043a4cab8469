//! `/mutate-pod` skips copying (in `webhooks::decide`) and diffing a pod when `pod::may_mutate` says
//! nothing would change.
//! The pre-check must never hide a change, an error or a warning: on every pod we have (recorded
//! reviews, workload templates, hand-made edge cases) the served webhook decides exactly as the bare
//! mutator run through the copy-and-diff path.

use crate::common;

use kruise_admission::admission::pod;
use kruise_admission::admission::review::AdmissionRequest;
use kruise_admission::admission::webhooks::{self, Capability, FailurePolicy, Handler, ObjectScope, Webhook};
use serde_json::json;

/// `/mutate-pod` without its pre-check: always copy, mutate, diff.
static UNCHECKED: Webhook = Webhook {
    name: "mpod.kb.io",
    path: "/mutate-pod",
    rules: &[],
    handler: Handler::Mutate(pod::mutate),
    queries: None,
    failure_policy: FailurePolicy::Ignore,
    scope: ObjectScope::All,
    capability: Capability::PodMutation,
};

/// Every pod we can find: recorded pod CREATE reviews, workload templates (in the examples' `shop`
/// namespace and in `default`), and edge cases of the DaemonSet trigger and of malformed pods.
fn requests() -> Vec<(String, AdmissionRequest<'static>)> {
    let mut out: Vec<_> = common::recorded_pod_reviews()
        .into_iter()
        .map(|(path, request)| (path.display().to_string(), request))
        .collect();
    for (name, pod) in common::workload_template_pods() {
        for ns in ["shop", "default"] {
            out.push((format!("{name}/{ns}"), common::pod_create(&pod, ns)));
        }
    }
    let edge = [
        json!({"metadata": {"annotations": {"kruise-admission.dev/target-node": ""}}, "spec": {"containers": []}}),
        json!({"metadata": {"annotations": {"kruise-admission.dev/target-node": "n1"}}, "spec": {"containers": []}}),
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "1"}]}, "spec": {}}),
        json!({"metadata": {"annotations": {"kruise-admission.dev/daemon-scheduling": "true"}}, "spec": {"nodeName": "n2"}}),
        json!({"metadata": {}, "spec": []}),
        json!({"kind": "Service", "metadata": {}, "spec": {}}),
        json!({"metadata": {"name": "no-spec"}}),
        json!({"metadata": {"labels": {"app": "shop"}}, "spec": {"containers": [{"name": "app", "image": "app:1"}]}}),
    ];
    out.extend(
        edge.iter().enumerate().map(|(i, pod)| (format!("edge case {i}"), common::pod_create(pod, "shop"))),
    );
    out
}

#[test]
fn the_precheck_never_changes_a_decision() {
    let served = webhooks::by_path("/mutate-pod").expect("registered");
    let (mut skipped, mut mutated) = (0, 0);
    common::with_example_and_empty_cluster(|inputs| {
        for (name, request) in requests() {
            let object = request.object.as_ref().expect("a pod");
            let served_outcome = webhooks::run(served, &request, inputs);
            let full = webhooks::run(&UNCHECKED, &request, inputs);
            assert_eq!(served_outcome.decision, full.decision, "{name}");
            assert_eq!(served_outcome.mutated, full.mutated, "{name}");
            assert_eq!(webhooks::decide(served, &request, inputs), full.decision, "{name}");
            if pod::may_mutate(&request, object, inputs) {
                mutated += 1;
            } else {
                skipped += 1;
                assert_eq!(
                    full.mutated.as_ref(),
                    Some(&object.to_value()),
                    "{name}: said unchanged, but the mutator changed it"
                );
            }
        }
    });
    // Both paths are exercised, or the comparison above proves nothing.
    assert!(skipped > 10 && mutated > 10, "skipped {skipped}, mutated {mutated}");
}
