//! Step 7b of `/mutate-pod`: PodProbeMarker on serverless pods (Kruise's
//! `podProbeMarkerMutatingPod`, `pkg/webhook/pod/mutating/pod_probe_marker.go`, alpha gate
//! `EnablePodProbeMarkerOnServerless`, off by default). Where no kruise-daemon runs the probes (a
//! virtual kubelet), the provider reads them from the pod: the probes of the PodProbeMarkers that
//! select the pod are written into `kruise.io/podprobe`, their names into `kruise.io/podprobemarker-list`.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::{labels_of, selects};
use crate::admission::Inputs;
use crate::admission::draft::{Draft, Node};
use crate::admission::feature_gates::Gate;
use crate::admission::injection::annotations_mut;
use crate::admission::review::{AdmissionError, AdmissionRequest};
use crate::api::go_json;
use crate::api::keys::KRUISE_APPS_GROUP;
use crate::api::probe::go_probe;
use crate::api::tree::Json;

/// PodProbeMarkers: `apps.kruise.io/v1alpha1`, namespaced.
pub const PPM_KIND: &str = "PodProbeMarker";
/// `PodProbeMarkerAnnotationKey`: the probes, as Go's JSON of `[]PodContainerProbe`.
pub const PROBES_ANNOTATION: &str = "kruise.io/podprobe";
/// `PodProbeMarkerListAnnotationKey`: the names of the PodProbeMarkers they came from.
pub const LIST_ANNOTATION: &str = "kruise.io/podprobemarker-list";

/// With the gate on: the pod's PodProbeMarkers ([`markers`]), then their probes in order, each
/// kept when its container is one of the pod's (containers, and init containers with
/// `restartPolicy: Always`), its `podConditionType` is set, and neither that condition nor its
/// `container/name` was kept already. The kept probes (without `markerPolicy`) go into
/// `kruise.io/podprobe`, the names of their markers (sorted, each once) into
/// `kruise.io/podprobemarker-list`. Runs on CREATE of `pods` only (the caller checks the
/// operation and subresource).
pub fn annotate(
    request: &AdmissionRequest,
    pod: &mut Draft<'_>,
    inputs: &Inputs,
) -> Result<(), AdmissionError> {
    if !inputs.settings.gates.enabled(Gate::EnablePodProbeMarkerOnServerless)
        || request.resource.resource != "pods"
    {
        return Ok(());
    }
    let markers = markers(request, pod, inputs);
    if markers.is_empty() {
        return Ok(());
    }
    let containers = container_names(pod);
    let (mut keys, mut conditions) = (HashSet::new(), HashSet::new());
    let mut names = BTreeSet::new();
    let mut probes = Vec::new();
    for marker in &markers {
        let marker_name = marker.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        for probe in marker.pointer("/spec/probes").and_then(Value::as_array).into_iter().flatten() {
            let field = |key| probe.get(key).and_then(Value::as_str).unwrap_or_default();
            let (name, container, condition) =
                (field("name"), field("containerName"), field("podConditionType"));
            let key = format!("{container}/{name}");
            if condition.is_empty()
                || conditions.contains(condition)
                || keys.contains(&key)
                || !containers.contains(container)
            {
                continue;
            }
            probes.push(go_container_probe(probe));
            keys.insert(key);
            conditions.insert(condition.to_owned());
            names.insert(marker_name.to_owned());
        }
    }
    if probes.is_empty() {
        return Ok(());
    }
    let body = go_json::compact(&Value::Array(probes));
    let list = names.into_iter().collect::<Vec<_>>().join(",");
    let annotations = annotations_mut(pod)?;
    annotations.insert(PROBES_ANNOTATION, Json::from(body));
    annotations.insert(LIST_ANNOTATION, Json::from(list));
    Ok(())
}

/// `podprobemarker.GetPodProbeMarkerForPod`: the PodProbeMarkers a non-empty
/// `kruise.io/podprobemarker-list` names (in its order, missing ones skipped, selectors not
/// read); otherwise those of the pod's namespace, in name order, whose selector selects the pod
/// (a missing, empty or invalid selector selects nothing). Kruise lists from its informer, in a
/// map's order; name order is one of its orders, and the one we promise.
fn markers(request: &AdmissionRequest, pod: &Draft<'_>, inputs: &Inputs) -> Vec<Arc<Value>> {
    let metadata = Node::Draft(pod).get("metadata");
    // Kruise's handler fills an empty metadata.namespace from the request.
    let namespace = match metadata.and_then(|m| m.get("namespace")).and_then(Node::as_str) {
        Some(ns) if !ns.is_empty() => ns,
        _ => request.namespace.as_str(),
    };
    let listed = metadata
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(LIST_ANNOTATION))
        .and_then(Node::as_str);
    if let Some(listed) = listed.filter(|l| !l.is_empty()) {
        return listed
            .split(',')
            .filter_map(|name| inputs.cluster.get(KRUISE_APPS_GROUP, PPM_KIND, namespace, name))
            .collect();
    }
    let labels = labels_of(pod);
    inputs
        .cluster
        .list(KRUISE_APPS_GROUP, PPM_KIND, Some(namespace))
        .filter(|marker| selects(marker.pointer("/spec/selector"), &labels))
        .collect()
}

/// The names of the containers probes may name: every container, and the init containers that
/// run beside them (`restartPolicy: Always`, `util.IsRestartableInitContainer`).
fn container_names(pod: &Draft<'_>) -> HashSet<String> {
    let spec = Node::Draft(pod).get("spec");
    let list = |key| spec.and_then(|s| s.get(key)).map(Node::items).unwrap_or_default();
    let name = |c: &Node| c.get("name").and_then(Node::as_str).unwrap_or_default().to_owned();
    let mut names: HashSet<String> = list("containers").iter().map(name).collect();
    names.extend(
        list("initContainers")
            .iter()
            .filter(|c| c.get("restartPolicy").and_then(Node::as_str) == Some("Always"))
            .map(name),
    );
    names
}

/// A `PodContainerProbe` as Go writes it: name, containerName, probe (`ContainerProbeSpec`, the
/// `corev1.Probe` inline), then `podConditionType`; `markerPolicy` is cleared by Kruise, so left out.
fn go_container_probe(probe: &Value) -> Value {
    let field = |key| json!(probe.get(key).and_then(Value::as_str).unwrap_or_default());
    let mut out = Map::new();
    out.insert("name".into(), field("name"));
    out.insert("containerName".into(), field("containerName"));
    out.insert("probe".into(), go_probe(probe.get("probe").unwrap_or(&Value::Null)));
    out.insert("podConditionType".into(), field("podConditionType"));
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Settings;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::pod::tests::with_cluster;
    use crate::admission::review::decode_review;

    fn request() -> AdmissionRequest<'static> {
        decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "ns",
            "operation": "CREATE", "object": {"spec": {}}}}))
        .unwrap()
    }

    fn marker(name: &str, selector: Value, probes: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "PodProbeMarker",
            "metadata": {"name": name, "namespace": "ns"}, "spec": {"selector": selector, "probes": probes}})
    }

    fn probe(name: &str, container: &str, condition: &str) -> Value {
        json!({"name": name, "containerName": container, "podConditionType": condition,
            "probe": {"exec": {"command": ["/check.sh", name]}, "periodSeconds": 5},
            "markerPolicy": [{"state": "Succeeded", "labels": {"ok": "true"}}]})
    }

    fn pod() -> Value {
        json!({"metadata": {"namespace": "ns", "labels": {"app": "game"}}, "spec": {
            "initContainers": [{"name": "native-sidecar", "restartPolicy": "Always"}, {"name": "init"}],
            "containers": [{"name": "main"}]}})
    }

    fn run_with(cluster: Vec<Value>, pod: Value, gate: bool) -> (Option<String>, Option<String>) {
        let settings = Settings {
            gates: FeatureGates::from_flags(&[(Gate::EnablePodProbeMarkerOnServerless, gate)]),
            ..Settings::default()
        };
        let original = Json::from(pod);
        let mut draft = Draft::Same(&original);
        with_cluster(cluster, &settings, |inputs| annotate(&request(), &mut draft, inputs)).unwrap();
        let out = draft.into_json().into_value();
        let get = |key: &str| {
            out.pointer("/metadata/annotations").and_then(|a| a.get(key)?.as_str().map(str::to_owned))
        };
        (get(PROBES_ANNOTATION), get(LIST_ANNOTATION))
    }

    fn run(cluster: Vec<Value>, pod: Value) -> (Option<String>, Option<String>) {
        run_with(cluster, pod, true)
    }

    #[test]
    fn probes_of_selecting_markers_are_recorded_once_per_condition_and_key() {
        let game = json!({"matchLabels": {"app": "game"}});
        let cluster = vec![
            marker(
                "b",
                game.clone(),
                json!([
                    probe("healthy", "main", "game.io/healthy"),
                    probe("ready", "native-sidecar", "game.io/ready")
                ]),
            ),
            marker(
                "a",
                game.clone(),
                json!([probe("idle", "main", "game.io/idle"), probe("healthy", "main", "game.io/other")]),
            ),
            marker(
                "c",
                game,
                json!([
                    probe("dup-condition", "main", "game.io/idle"),
                    probe("init-only", "init", "game.io/init"),
                    probe("absent", "nope", "game.io/absent"),
                    probe("no-condition", "main", ""),
                ]),
            ),
        ];
        let (probes, list) = run(cluster, pod());
        assert_eq!(
            probes.as_deref(),
            Some(
                r#"[{"name":"idle","containerName":"main","probe":{"exec":{"command":["/check.sh","idle"]},"periodSeconds":5},"podConditionType":"game.io/idle"},{"name":"healthy","containerName":"main","probe":{"exec":{"command":["/check.sh","healthy"]},"periodSeconds":5},"podConditionType":"game.io/other"},{"name":"ready","containerName":"native-sidecar","probe":{"exec":{"command":["/check.sh","ready"]},"periodSeconds":5},"podConditionType":"game.io/ready"}]"#
            )
        );
        assert_eq!(list.as_deref(), Some("a,b"), "c contributed nothing");
    }

    #[test]
    fn selectors_that_select_nothing_and_the_gate() {
        let one = json!([probe("healthy", "main", "game.io/healthy")]);
        for selector in [
            Value::Null,
            json!({}),
            json!({"matchLabels": {"app": "other"}}),
            json!({"matchExpressions": [{"key": "app", "operator": "Is", "values": ["game"]}]}),
        ] {
            assert_eq!(
                run(vec![marker("m", selector.clone(), one.clone())], pod()),
                (None, None),
                "{selector}"
            );
        }
        let selecting = marker("m", json!({"matchLabels": {"app": "game"}}), one.clone());
        assert_eq!(run_with(vec![selecting.clone()], pod(), false), (None, None));
        let mut elsewhere = selecting.clone();
        elsewhere["metadata"]["namespace"] = json!("other");
        assert_eq!(run(vec![elsewhere], pod()), (None, None));
        assert_eq!(run(vec![selecting], pod()).1.as_deref(), Some("m"));
    }

    #[test]
    fn a_listed_pod_reads_the_named_markers_whatever_their_selectors() {
        let one = |c| json!([probe("healthy", "main", c)]);
        let cluster = vec![
            marker("x", json!({"matchLabels": {"app": "other"}}), one("game.io/x")),
            marker("y", json!({"matchLabels": {"app": "game"}}), one("game.io/y")),
        ];
        let mut p = pod();
        p["metadata"]["annotations"] = json!({LIST_ANNOTATION: "missing,x"});
        let (probes, list) = run(cluster.clone(), p);
        assert!(probes.unwrap().contains("game.io/x"));
        assert_eq!(list.as_deref(), Some("x"));
        // An empty list annotation is not a list: the selectors decide.
        let mut p = pod();
        p["metadata"]["annotations"] = json!({LIST_ANNOTATION: ""});
        assert_eq!(run(cluster, p).1.as_deref(), Some("y"));
    }
}
