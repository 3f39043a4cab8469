//! Step 1 of `/mutate-pod`: the `KruisePodReady` readiness gate (Kruise's `injectPodReadinessGate`,
//! `pkg/webhook/pod/mutating/pod_readiness.go`). Kruise's lifecycle hooks with `markPodNotReady`
//! and ContainerRecreateRequest's unready period act through this condition, so a pod without the
//! gate silently ignores them.

use serde_json::json;

use super::controller_group;
use crate::admission::Inputs;
use crate::admission::draft::Draft;
use crate::admission::feature_gates::Gate;
use crate::admission::injection::object_mut;
use crate::admission::review::AdmissionError;
use crate::api::keys;
use crate::api::tree::Json;

/// `appspub.KruisePodReadyConditionType`.
pub const KRUISE_POD_READY: &str = "KruisePodReady";

/// Append `{conditionType: KruisePodReady}` to `spec.readinessGates` when the pod's controller
/// (the owner reference with `controller: true`, of any kind) is in `apps.kruise.io`, or on every
/// pod with the gate `KruisePodReadinessGate` on. A pod that has the gate already is left alone
/// (Kruise's `InjectReadinessGateToPod`), so the step is idempotent.
pub fn inject(pod: &mut Draft<'_>, inputs: &Inputs) -> Result<(), AdmissionError> {
    let wanted = controller_group(pod) == Some(keys::KRUISE_APPS_GROUP)
        || inputs.settings.gates.enabled(Gate::KruisePodReadinessGate);
    if !wanted {
        return Ok(());
    }
    let spec = object_mut(pod, "spec", "the pod")?;
    if spec.get("readinessGates").and_then(Draft::value).is_some_and(|g| !g.is_null() && !g.is_array()) {
        return Err(AdmissionError::BadRequest("request.object.spec.readinessGates must be a list".into()));
    }
    let mut gates = spec.take_list("readinessGates");
    if !gates.iter().any(|g| g.field("conditionType").and_then(Json::as_str) == Some(KRUISE_POD_READY)) {
        gates.push(Draft::New(json!({"conditionType": KRUISE_POD_READY}).into()));
    }
    spec.put_list("readinessGates", gates);
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::Settings;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::pod::tests::with_inputs;

    fn run(pod: Value, settings: &Settings) -> Result<Value, AdmissionError> {
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        with_inputs(settings, |inputs| inject(&mut draft, inputs))?;
        Ok(draft.into_json().into_value())
    }

    fn owned_by(api_version: &str, kind: &str, controller: Value) -> Value {
        json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"},
            {"apiVersion": api_version, "kind": kind, "name": "w", "uid": "2", "controller": controller},
        ]}, "spec": {"containers": [{"name": "app"}]}})
    }

    fn gates(pod: &Value) -> &Value {
        &pod["spec"]["readinessGates"]
    }

    #[test]
    fn pods_of_kruise_controllers_get_the_gate() {
        let settings = Settings::default();
        for (api_version, kind) in [
            ("apps.kruise.io/v1alpha1", "CloneSet"),
            ("apps.kruise.io/v1beta1", "StatefulSet"),
            ("apps.kruise.io/v1alpha1", "AnythingElse"),
            ("apps.kruise.io/", "CloneSet"),
        ] {
            let pod = run(owned_by(api_version, kind, json!(true)), &settings).unwrap();
            assert_eq!(gates(&pod), &json!([{"conditionType": "KruisePodReady"}]), "{api_version} {kind}");
        }
        for (api_version, controller) in [
            ("apps/v1", json!(true)),
            ("apps.kruise.io/v1alpha1", json!(false)),
            ("apps.kruise.io/v1alpha1", Value::Null),
            ("apps.kruise.io/v1alpha1/x", json!(true)),
            ("apps.kruise.io", json!(true)),
        ] {
            let pod = run(owned_by(api_version, "CloneSet", controller.clone()), &settings).unwrap();
            assert_eq!(gates(&pod), &Value::Null, "{api_version} {controller}");
        }
    }

    #[test]
    fn the_gate_puts_it_on_every_pod_once() {
        let settings = Settings {
            gates: FeatureGates::from_flags(&[(Gate::KruisePodReadinessGate, true)]),
            ..Settings::default()
        };
        let pod = run(json!({"spec": {"readinessGates": [{"conditionType": "other"}]}}), &settings).unwrap();
        assert_eq!(gates(&pod), &json!([{"conditionType": "other"}, {"conditionType": "KruisePodReady"}]));
        assert_eq!(run(pod.clone(), &settings).unwrap(), pod, "not added twice");
        let pod = run(json!({"spec": {"readinessGates": null}}), &settings).unwrap();
        assert_eq!(gates(&pod), &json!([{"conditionType": "KruisePodReady"}]));
        let err = run(json!({"spec": {"readinessGates": "x"}}), &settings).unwrap_err();
        assert!(err.to_string().contains("readinessGates must be a list"), "{err}");
    }
}
