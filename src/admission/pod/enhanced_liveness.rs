//! Step 7a of `/mutate-pod`: the enhanced liveness probe (Kruise's
//! `enhancedLivenessProbeWhenPodCreate`, `pkg/webhook/pod/mutating/enhancedlivenessprobe_handler.go`,
//! alpha gate `EnhancedLivenessProbe`, off by default). A pod that asks for it hands its
//! containers' liveness probes to kruise-daemon: the kubelet must not run them, so they are taken
//! off the containers and kept, as Go's JSON, in an annotation kruise-daemon reads.

use serde_json::{Value, json};

use super::controller_group;
use crate::admission::Inputs;
use crate::admission::draft::{Draft, Node};
use crate::admission::feature_gates::Gate;
use crate::admission::injection::{annotations_mut, object_mut};
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::api::go_json;
use crate::api::keys::KRUISE_APPS_GROUP;
use crate::api::probe::go_probe;
use crate::api::tree::Json;

/// `AnnotationUsingEnhancedLiveness`: `"true"` asks for it.
pub const USING_ANNOTATION: &str = "apps.kruise.io/using-enhanced-liveness";
/// `AnnotationNativeContainerProbeContext`: the probes taken off, `[{"name", "livenessProbe"}]`.
pub const CONTEXT_ANNOTATION: &str = "apps.kruise.io/container-probe-context";

/// With the gate on, for a pod whose controller is in `apps.kruise.io` and whose
/// `apps.kruise.io/using-enhanced-liveness` is `"true"`: remove every container's
/// `livenessProbe` (init containers keep theirs) and record them, in container order, in
/// `apps.kruise.io/container-probe-context`. A pod without liveness probes is left alone. Runs on
/// CREATE of `pods` only (the caller checks the operation and subresource).
pub fn backup(
    request: &AdmissionRequest,
    pod: &mut Draft<'_>,
    inputs: &Inputs,
) -> Result<(), AdmissionError> {
    if !inputs.settings.gates.enabled(Gate::EnhancedLivenessProbe)
        || request.resource.resource != "pods"
        || controller_group(pod) != Some(KRUISE_APPS_GROUP)
    {
        return Ok(());
    }
    let using = Node::Draft(pod)
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(USING_ANNOTATION));
    if using.and_then(Node::as_str) != Some("true") {
        return Ok(());
    }
    let spec = object_mut(pod, "spec", "the pod")?;
    let mut containers = spec.take_list("containers");
    let mut backed_up = Vec::new();
    for container in &mut containers {
        let node = Node::Draft(container);
        let Some(probe) = node.get("livenessProbe").and_then(Node::value).filter(|p| !p.is_null()) else {
            continue;
        };
        let name = node.get("name").and_then(Node::as_str).unwrap_or_default().to_owned();
        backed_up.push(json!({"name": name, "livenessProbe": go_probe(&probe.to_value())}));
        container
            .object_mut()
            .ok_or_else(|| {
                AdmissionError::BadRequest("request.object.spec.containers[] must be objects".into())
            })?
            .remove("livenessProbe");
    }
    spec.put_list("containers", containers);
    if backed_up.is_empty() {
        return Ok(());
    }
    let context = go_json::compact(&Value::Array(backed_up));
    annotations_mut(pod)?.insert(CONTEXT_ANNOTATION, Json::from(context));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Settings;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::pod::tests::with_inputs;
    use crate::admission::review::decode_review;

    fn request() -> AdmissionRequest<'static> {
        decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "ns",
            "operation": "CREATE", "object": {"spec": {}}}}))
        .unwrap()
    }

    fn run(pod: Value, gate: bool) -> Value {
        let settings = Settings {
            gates: FeatureGates::from_flags(&[(Gate::EnhancedLivenessProbe, gate)]),
            ..Settings::default()
        };
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        with_inputs(&settings, |inputs| backup(&request(), &mut draft, inputs)).unwrap();
        draft.into_json().into_value()
    }

    fn pod(api_version: &str, using: &str) -> Value {
        json!({"metadata": {"annotations": {USING_ANNOTATION: using}, "ownerReferences": [
        {"apiVersion": api_version, "kind": "CloneSet", "name": "web", "uid": "x", "controller": true}]},
        "spec": {
            "initContainers": [{"name": "init", "livenessProbe": {"exec": {"command": ["true"]}}}],
            "containers": [
                {"name": "app", "image": "nginx", "livenessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 10, "extra": 1}},
                {"name": "plain", "image": "busybox"},
                {"name": "side", "livenessProbe": {"tcpSocket": {"port": "http"}, "initialDelaySeconds": 0}},
            ]}})
    }

    #[test]
    fn liveness_probes_move_to_the_annotation() {
        let out = run(pod("apps.kruise.io/v1alpha1", "true"), true);
        assert_eq!(
            out["metadata"]["annotations"][CONTEXT_ANNOTATION],
            json!(
                r#"[{"name":"app","livenessProbe":{"httpGet":{"path":"/","port":80},"periodSeconds":10}},{"name":"side","livenessProbe":{"tcpSocket":{"port":"http"}}}]"#
            )
        );
        let containers = out["spec"]["containers"].as_array().unwrap();
        assert!(containers.iter().all(|c| c.get("livenessProbe").is_none()), "{containers:?}");
        assert_eq!(containers[0], json!({"name": "app", "image": "nginx"}));
        assert_eq!(
            out["spec"]["initContainers"],
            pod("", "")["spec"]["initContainers"],
            "init containers keep theirs"
        );
    }

    #[test]
    fn only_kruise_pods_that_ask_with_the_gate_on() {
        for (api_version, using, gate) in [
            ("apps.kruise.io/v1alpha1", "true", false),
            ("apps.kruise.io/v1alpha1", "True", true),
            ("apps/v1", "true", true),
            ("apps.kruise.io/v1/x", "true", true),
        ] {
            let p = pod(api_version, using);
            assert_eq!(run(p.clone(), gate), p, "{api_version} {using} {gate}");
        }
        // No liveness probe at all: nothing to record.
        let mut p = pod("apps.kruise.io/v1beta1", "true");
        p["spec"]["containers"] = json!([{"name": "app", "livenessProbe": null}]);
        assert_eq!(run(p.clone(), true), p);
    }
}
