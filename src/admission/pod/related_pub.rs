//! Step 5 of `/mutate-pod`: the `kruise.io/related-pub` annotation (Kruise's `pubMutatingPod`,
//! `pkg/webhook/pod/mutating/pod_unavailable_budget.go`, with `GetPubForPod` of
//! `pkg/controller/podunavailablebudget`). It names the PodUnavailableBudget that guards the pod, so
//! that Kruise's PUB controller and `/validate-pod` find the budget without listing every PUB.

use serde_json::Value;

use super::{controller_ref, labels_of, selects};
use crate::admission::Inputs;
use crate::admission::draft::{Draft, Node};
use crate::admission::feature_gates::Gate;
use crate::admission::injection::annotations_mut;
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::api::tree::Json;
use crate::cluster::controller_finder::{self, ControllerRef, group_of};

/// `pubcontrol.PodRelatedPubAnnotation`.
pub const RELATED_PUB_ANNOTATION: &str = "kruise.io/related-pub";
/// PodUnavailableBudgets: `policy.kruise.io/v1alpha1`.
pub const PUB_GROUP: &str = "policy.kruise.io";
pub const PUB_KIND: &str = "PodUnavailableBudget";

/// Whether Kruise runs the step: either PUB gate on (`PodUnavailableBudgetDeleteGate`, on by
/// default, or `PodUnavailableBudgetUpdateGate`).
pub fn enabled(inputs: &Inputs) -> bool {
    let gates = &inputs.settings.gates;
    gates.enabled(Gate::PodUnavailableBudgetDeleteGate) || gates.enabled(Gate::PodUnavailableBudgetUpdateGate)
}

/// Set `kruise.io/related-pub` to the name of the first PodUnavailableBudget, in name order, of the
/// pod's namespace that guards it: by `targetRef` when one names the pod's workload (as the
/// controller finder finds it), otherwise by `selector` (a missing or empty selector guards nothing).
/// A PUB with a `targetRef` is judged by its selector when the pod has no workload. Runs on CREATE
/// of `pods` only (the caller checks the operation and subresource).
pub fn annotate(
    request: &AdmissionRequest,
    pod: &mut Draft<'_>,
    inputs: &Inputs,
) -> Result<(), AdmissionError> {
    if !enabled(inputs) || request.resource.resource != "pods" {
        return Ok(());
    }
    let Some(name) = related_pub(request, pod, inputs) else { return Ok(()) };
    annotations_mut(pod)?.insert(RELATED_PUB_ANNOTATION, Json::from(name));
    Ok(())
}

/// The name of the PUB guarding the pod, if any.
fn related_pub(request: &AdmissionRequest, pod: &Draft<'_>, inputs: &Inputs) -> Option<String> {
    let metadata = Node::Draft(pod).get("metadata");
    // Kruise's handler fills an empty metadata.namespace from the request.
    let namespace = match metadata.and_then(|m| m.get("namespace")).and_then(Node::as_str) {
        Some(ns) if !ns.is_empty() => ns,
        _ => request.namespace.as_str(),
    };
    // The finder's errors only mean "no workload" here (Kruise logs them and goes on).
    let workload = controller_ref(pod).and_then(|r| {
        let reference = ControllerRef { api_version: r.api_version, kind: r.kind, name: r.name, uid: "" };
        controller_finder::find(inputs.cluster, &inputs.settings.kruise_namespace, reference, namespace)
            .ok()
            .flatten()
    });
    let labels = labels_of(pod);
    inputs.cluster.list(PUB_GROUP, PUB_KIND, Some(namespace)).find_map(|pub_| {
        let spec = pub_.get("spec");
        let target = spec.and_then(|s| s.get("targetRef")).filter(|t| !t.is_null());
        let guards = match (target, &workload) {
            (Some(target), Some(w)) => {
                let field = |key| target.get(key).and_then(Value::as_str).unwrap_or_default();
                // pubcontrol.IsReferenceEqual: group (not version), kind and name.
                group_of(field("apiVersion")).is_some_and(|g| Some(g) == group_of(&w.api_version))
                    && field("kind") == w.kind
                    && field("name") == w.name
            }
            _ => selects(spec.and_then(|s| s.get("selector")), &labels),
        };
        guards.then(|| pub_.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::Settings;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::pod::tests::with_cluster;
    use crate::admission::review::decode_review;

    fn request(namespace: &str) -> AdmissionRequest<'static> {
        decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": namespace,
            "operation": "CREATE", "object": {"spec": {}}}}))
        .unwrap()
    }

    fn pub_(name: &str, spec: Value) -> Value {
        json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
            "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
    }

    fn pod(labels: Value, owner: Option<(&str, &str, &str)>) -> Value {
        let owners = owner.map(|(api_version, kind, name)| {
            json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": "x", "controller": true}])
        });
        json!({"metadata": {"namespace": "ns", "labels": labels, "ownerReferences": owners}, "spec": {}})
    }

    fn run(cluster: Vec<Value>, pod: Value, gates: &[(Gate, bool)]) -> Option<Value> {
        let settings = Settings { gates: FeatureGates::from_flags(gates), ..Settings::default() };
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        with_cluster(cluster, &settings, |inputs| annotate(&request("ns"), &mut draft, inputs)).unwrap();
        let out = draft.into_json().into_value();
        out.pointer("/metadata/annotations").map(|a| a[RELATED_PUB_ANNOTATION].clone())
    }

    fn deployment() -> Vec<Value> {
        vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "ns", "uid": "d"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}}}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web-1", "namespace": "ns", "uid": "r",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]},
                "spec": {"replicas": 3}}),
        ]
    }

    #[test]
    fn a_selector_pub_names_the_pods_it_selects() {
        let web = json!({"app": "web"});
        let selecting =
            |name, selector: Value| pub_(name, json!({"selector": selector, "maxUnavailable": 1}));
        let cluster = vec![
            selecting("b", json!({"matchLabels": {"app": "web"}})),
            selecting("a", json!({"matchLabels": {"app": "web"}})),
        ];
        assert_eq!(
            run(cluster.clone(), pod(web.clone(), None), &[]),
            Some(json!("a")),
            "first in name order"
        );
        assert_eq!(run(cluster.clone(), pod(json!({"app": "db"}), None), &[]), None);
        // Empty, missing and unknown-operator selectors select nothing; In without values is not an error.
        let nothing = vec![
            selecting("a", json!({})),
            pub_("b", json!({"maxUnavailable": 1})),
            selecting(
                "c",
                json!({"matchExpressions": [{"key": "app", "operator": "Is", "values": ["web"]}]}),
            ),
            selecting("d", json!({"matchExpressions": [{"key": "app", "operator": "In"}]})),
        ];
        assert_eq!(run(nothing.clone(), pod(web.clone(), None), &[]), None);
        let mut with_notin = nothing;
        with_notin.push(selecting("e", json!({"matchExpressions": [{"key": "tier", "operator": "NotIn"}]})));
        assert_eq!(run(with_notin, pod(web.clone(), None), &[]), Some(json!("e")));
        // PUBs of other namespaces do not count.
        let mut elsewhere = selecting("a", json!({"matchLabels": {"app": "web"}}));
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(run(vec![elsewhere], pod(web.clone(), None), &[]), None);
        // Both PUB gates off (PodWebhook=false turns them off too): no annotation.
        let off = [(Gate::PodUnavailableBudgetDeleteGate, false)];
        assert_eq!(run(cluster.clone(), pod(web.clone(), None), &off), None);
        let update_only =
            [(Gate::PodUnavailableBudgetDeleteGate, false), (Gate::PodUnavailableBudgetUpdateGate, true)];
        assert_eq!(run(cluster.clone(), pod(web.clone(), None), &update_only), Some(json!("a")));
        assert_eq!(run(cluster, pod(web, None), &[(Gate::PodWebhook, false)]), None);
    }

    #[test]
    fn a_target_ref_pub_names_the_pods_of_its_workload() {
        let targeting = |name, api_version, kind, workload| {
            pub_(
                name,
                json!({"targetRef": {"apiVersion": api_version, "kind": kind, "name": workload}, "maxUnavailable": 1}),
            )
        };
        let web = json!({"app": "web"});
        let of_rs = Some(("apps/v1", "ReplicaSet", "web-1"));
        // The ReplicaSet's pods belong to its Deployment; any version of the group matches.
        let mut cluster = deployment();
        cluster.push(targeting("by-ref", "apps/v1beta1", "Deployment", "web"));
        assert_eq!(run(cluster.clone(), pod(web.clone(), of_rs), &[]), Some(json!("by-ref")));
        // Naming the ReplicaSet does not match; nor does another group.
        for (api_version, kind, name) in [
            ("apps/v1", "ReplicaSet", "web-1"),
            ("extensions/v1beta1", "Deployment", "web"),
            ("apps/v1/x", "Deployment", "web"),
        ] {
            let mut cluster = deployment();
            cluster.push(targeting("by-ref", api_version, kind, name));
            assert_eq!(run(cluster, pod(web.clone(), of_rs), &[]), None, "{api_version} {kind} {name}");
        }
        // Without a workload, a targetRef PUB is judged by its selector, and a selector PUB by it.
        let mut both = targeting("both", "apps/v1", "Deployment", "web");
        both["spec"]["selector"] = json!({"matchLabels": {"app": "web"}});
        assert_eq!(run(vec![both.clone()], pod(web.clone(), of_rs), &[]), Some(json!("both")));
        let mut cluster = deployment();
        cluster.push(both);
        cluster.push(targeting("a-other", "apps/v1", "Deployment", "other"));
        // With the workload found, the targetRef decides and the selector is not read.
        assert_eq!(run(cluster, pod(json!({"app": "db"}), of_rs), &[]), Some(json!("both")));
    }

    #[test]
    fn an_existing_annotation_is_replaced() {
        let mut p = pod(json!({"app": "web"}), None);
        p["metadata"]["annotations"] = json!({RELATED_PUB_ANNOTATION: "old", "keep": "me"});
        let cluster = vec![pub_("new", json!({"selector": {"matchLabels": {"app": "web"}}}))];
        assert_eq!(run(cluster, p, &[]), Some(json!("new")));
    }
}
