//! Defaults applied to the copy being judged, never to the object (validators return no patch).
//!
//! - [`pod_spec`]: Kruise's validators default the pod template before checking it
//!   (docs/workloads.md#3-5-template-defaults: `SetDefaultPodSpec`), so a template without `restartPolicy` or
//!   `imagePullPolicy` is judged as Kruise judges it. Note `imagePullPolicy: Always` for every
//!   container's image, Kruise's choice for in-place updates (init containers follow the tag).
//! - [`cloneset`], [`statefulset`], [`daemonset`]: the strategy defaults Kruise's mutating
//!   webhooks (`mcloneset`, `mstatefulset`, `mdaemonset`) write before its validators run. This
//!   binary does not serve those mutating webhooks, so the validators fill the same values in
//!   themselves: a minimal manifest that Kruise admits is admitted here too.

use serde_json::{Map, Value, json};

use crate::admission::sidecarset_rules::defaults::{self as core_defaults, Probes};
use crate::api::workloads::{
    CloneSet, CloneSetRollingUpdate, DaemonSet, DaemonSetRollingUpdate, IntOrString, StatefulSet,
    StatefulSetRollingUpdate,
};

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    let missing = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    };
    if missing {
        map.insert(key.to_owned(), value);
    }
}

fn objects_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// Kruise's `SetDefaultPodSpec` on a template's pod spec (a non-object spec is left alone): the
/// PodSpec defaults, `SetDefaults_Container` and the per-field defaults for init containers and
/// containers (containers first get `imagePullPolicy: Always`, Kruise's choice for in-place
/// updates; init containers follow the image tag), and `SetDefaultPodVolumes`. Ephemeral containers
/// are not defaulted (Kruise neither).
pub fn pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    for container in objects_in(spec, "initContainers") {
        core_defaults::core_container(container, Probes::All);
    }
    for container in objects_in(spec, "containers") {
        set_default(container, "imagePullPolicy", json!("Always"));
        core_defaults::core_container(container, Probes::All);
    }
    for volume in objects_in(spec, "volumes") {
        core_defaults::volume(volume);
    }
}

/// `mcloneset`: replicas 1; v1alpha1 update strategy `ReCreate`, partition 0, maxUnavailable 20%,
/// maxSurge 0 when unset (v1beta1: type `RollingUpdate`, the same knobs under `rollingUpdate`).
pub fn cloneset(cs: &mut CloneSet, v1beta1: bool) {
    cs.spec.replicas.get_or_insert(1);
    let strategy = &mut cs.spec.update_strategy;
    if strategy.type_.is_empty() {
        strategy.type_ = if v1beta1 { "RollingUpdate" } else { "ReCreate" }.into();
    }
    let (partition, max_unavailable, max_surge) = if v1beta1 {
        if strategy.type_ != "RollingUpdate" {
            return;
        }
        let ru = strategy.rolling_update.get_or_insert_with(CloneSetRollingUpdate::default);
        (&mut ru.partition, &mut ru.max_unavailable, &mut ru.max_surge)
    } else {
        (&mut strategy.partition, &mut strategy.max_unavailable, &mut strategy.max_surge)
    };
    partition.get_or_insert(IntOrString::Int(0));
    max_unavailable.get_or_insert_with(|| IntOrString::String("20%".into()));
    max_surge.get_or_insert(IntOrString::Int(0));
}

/// `mstatefulset`: replicas 1, `OrderedReady`, `RollingUpdate` with partition 0, maxUnavailable 1,
/// podUpdatePolicy `ReCreate` and minReadySeconds 0 when unset.
pub fn statefulset(sts: &mut StatefulSet) {
    let spec = &mut sts.spec;
    spec.replicas.get_or_insert(1);
    if spec.pod_management_policy.is_empty() {
        spec.pod_management_policy = "OrderedReady".into();
    }
    let strategy = &mut spec.update_strategy;
    if strategy.type_.is_empty() {
        strategy.type_ = "RollingUpdate".into();
    }
    if strategy.type_ == "RollingUpdate" {
        let ru = strategy.rolling_update.get_or_insert_with(StatefulSetRollingUpdate::default);
        ru.partition.get_or_insert(0);
        ru.max_unavailable.get_or_insert(IntOrString::Int(1));
        ru.min_ready_seconds.get_or_insert(0);
        if ru.pod_update_policy.is_empty() {
            ru.pod_update_policy = "ReCreate".into();
        }
    }
}

/// `mdaemonset` (`SetDefaultsDaemonSet`, `SetDefaultsDaemonSetV1beta1`): `RollingUpdate` of type
/// `Standard`; maxUnavailable 1 and maxSurge 0 only when **both** are unset, so a lone `maxSurge: 1`
/// is a surge rollout. v1alpha1's deprecated `Surging` becomes `Standard` with maxSurge 1 and
/// maxUnavailable 0 where unset (v1beta1 leaves it, and its validator refuses it). The partition is
/// not defaulted. (It does not default the template; the validators do that themselves.)
pub fn daemonset(ds: &mut DaemonSet, v1beta1: bool) {
    let strategy = &mut ds.spec.update_strategy;
    if strategy.type_.is_empty() {
        strategy.type_ = "RollingUpdate".into();
    }
    if strategy.type_ != "RollingUpdate" {
        return;
    }
    let ru = strategy.rolling_update.get_or_insert_with(DaemonSetRollingUpdate::default);
    if !v1beta1 && ru.rolling_update_type == "Surging" {
        ru.max_surge.get_or_insert(IntOrString::Int(1));
        ru.max_unavailable.get_or_insert(IntOrString::Int(0));
        ru.rolling_update_type.clear();
    }
    if ru.rolling_update_type.is_empty() {
        ru.rolling_update_type = "Standard".into();
    }
    if ru.max_unavailable.is_none() && ru.max_surge.is_none() {
        ru.max_unavailable = Some(IntOrString::Int(1));
        ru.max_surge = Some(IntOrString::Int(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_defaults_fill_only_what_is_missing() {
        let mut spec = json!({
            "restartPolicy": "Always", "dnsPolicy": "Default",
            "containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 80}],
                            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                            "readinessProbe": {"httpGet": {"port": 80}}}],
            "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x"}}]
        });
        pod_spec(&mut spec);
        assert_eq!(spec["dnsPolicy"], "Default");
        assert_eq!(spec["schedulerName"], "default-scheduler");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["readinessProbe"]["periodSeconds"], 10);
        assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTP");
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["secret"]["defaultMode"], 420);
        let once = spec.clone();
        pod_spec(&mut spec);
        assert_eq!(spec, once, "defaulting is idempotent");
    }
}
