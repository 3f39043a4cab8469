//! Step 4 of `/mutate-pod`: container launch priority (Kruise's
//! `containerLaunchPriorityInitialization`,
//! `pkg/webhook/pod/mutating/container_launch_priority_initialization.go`). kruise-daemon starts a
//! pod's containers in priority order: each container waits on its env `KRUISE_CONTAINER_BARRIER`,
//! a key of the ConfigMap `<pod name>-barrier` that kruise-daemon fills in as higher priorities
//! start. This step writes those envs. It runs after SidecarSet injection, so injected sidecars
//! take part.

use serde_json::json;

use crate::admission::draft::{Draft, Node};
use crate::admission::injection::object_mut;
use crate::admission::review::AdmissionError;
use crate::admission::{Inputs, Random, generated};
use crate::api::field_errors::go_quote;
use crate::api::tree::Json;

/// `appspub.ContainerLaunchPriorityKey` and its one value.
pub const PRIORITY_ANNOTATION: &str = "apps.kruise.io/container-launch-priority";
pub const ORDERED: &str = "Ordered";
/// The env a user sets on a container to give its priority (an integer; higher starts first).
pub const PRIORITY_ENV: &str = "KRUISE_CONTAINER_PRIORITY";
/// The env this step adds.
pub const BARRIER_ENV: &str = "KRUISE_CONTAINER_BARRIER";

/// With annotation `apps.kruise.io/container-launch-priority: Ordered`, container `i` gets
/// priority `-i`; otherwise each container's last `KRUISE_CONTAINER_PRIORITY` env is its priority
/// (0 without one), and nothing happens when they are all equal. A pod with one container is left
/// alone. Each container then gets a `KRUISE_CONTAINER_BARRIER` env at the end of its env, and a
/// pod with only `generateName` gets a name, since the barrier ConfigMap is named after the pod.
///
/// Kruise appends the barrier env on every call; a container that has one already is left alone
/// here, so a re-invoked webhook changes nothing (docs/differences.md#pod-mutations).
pub fn initialize(pod: &mut Draft<'_>, inputs: &Inputs) -> Result<(), AdmissionError> {
    let Some(priorities) = priorities(pod)? else {
        return Ok(());
    };
    let name = pod_name(pod, inputs.random)?;
    let spec = object_mut(pod, "spec", "the pod")?;
    let mut containers = spec.take_list("containers");
    for (container, priority) in containers.iter_mut().zip(priorities) {
        if Node::Draft(container).get("env").is_some_and(|env| has_env(env, BARRIER_ENV)) {
            continue;
        }
        let Some(fields) = container.object_mut() else {
            return Err(AdmissionError::BadRequest(
                "request.object.spec.containers[] must be objects".into(),
            ));
        };
        let mut env = fields.take_list("env");
        env.push(Draft::New(
            json!({
                "name": BARRIER_ENV,
                "valueFrom": {"configMapKeyRef": {"name": format!("{name}-barrier"), "key": format!("p_{priority}")}},
            })
            .into(),
        ));
        fields.put_list("env", env);
    }
    spec.put_list("containers", containers);
    Ok(())
}

/// Each container's priority, or `None` when the pod does not launch by priority. A priority env
/// that is not an integer fails the request as it fails Kruise's (500, Go's message).
fn priorities(pod: &Draft<'_>) -> Result<Option<Vec<i64>>, AdmissionError> {
    let pod = Node::Draft(pod);
    let containers = pod.get("spec").and_then(|s| s.get("containers")).map(Node::items).unwrap_or_default();
    if containers.len() == 1 {
        return Ok(None);
    }
    let annotation =
        pod.get("metadata").and_then(|m| m.get("annotations")).and_then(|a| a.get(PRIORITY_ANNOTATION));
    if annotation.and_then(Node::as_str) == Some(ORDERED) {
        // Kruise names the pod even when it has no container at all (the API server refuses it).
        return Ok(Some((0..containers.len() as i64).map(|i| -i).collect()));
    }
    let mut priorities = Vec::with_capacity(containers.len());
    for container in &containers {
        let mut priority = 0;
        for env in container.get("env").map(Node::items).unwrap_or_default() {
            if env.get("name").and_then(Node::as_str) == Some(PRIORITY_ENV) {
                let value = env.get("value").and_then(Node::as_str).unwrap_or_default();
                priority = atoi(value).map_err(AdmissionError::Internal)?;
            }
        }
        priorities.push(priority);
    }
    Ok(priorities.iter().any(|p| *p != priorities[0]).then_some(priorities))
}

fn has_env(env: Node<'_, '_>, name: &str) -> bool {
    env.items().iter().any(|e| e.get("name").and_then(Node::as_str) == Some(name))
}

/// The pod's name; a pod with none but a `generateName` is named here, as the API server would
/// name it (`generateName` cut to 58 bytes, then 5 random characters).
fn pod_name(pod: &mut Draft<'_>, random: &dyn Random) -> Result<String, AdmissionError> {
    let name = pod.at(&["metadata", "name"]).and_then(Json::as_str).unwrap_or_default();
    let base = pod.at(&["metadata", "generateName"]).and_then(Json::as_str).unwrap_or_default();
    if !name.is_empty() || base.is_empty() {
        return Ok(name.to_owned());
    }
    let generated = generated::name(base, random);
    object_mut(pod, "metadata", "the pod")?.insert("name", Draft::New(Json::from(generated.clone())));
    Ok(generated)
}

/// Go's `strconv.Atoi` on a 64-bit machine, with its error message.
fn atoi(s: &str) -> Result<i64, String> {
    let error = |what: &str| format!("strconv.Atoi: parsing {}: {what}", go_quote(s));
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(error("invalid syntax"));
    }
    // As Go's ParseUint: a non-digit is a syntax error, unless the digits before it overflowed.
    let mut magnitude: u64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return Err(error("invalid syntax"));
        }
        magnitude = magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b - b'0')))
            .ok_or_else(|| error("value out of range"))?;
    }
    let limit = 1u64 << 63;
    match (negative, magnitude) {
        (false, m) if m < limit => Ok(m as i64),
        (true, m) if m <= limit => Ok((m as i64).wrapping_neg()),
        _ => Err(error("value out of range")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::Settings;
    use crate::admission::pod::tests::with_inputs;

    fn run(pod: &Value) -> Result<Value, AdmissionError> {
        let original = Json::from(pod.clone());
        let mut draft = Draft::Same(&original);
        with_inputs(&Settings::default(), |inputs| initialize(&mut draft, inputs))?;
        Ok(draft.into_json().into_value())
    }

    fn barrier(pod: &str, priority: &str) -> Value {
        json!({"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": format!("{pod}-barrier"), "key": priority}}})
    }

    fn envs(pod: &Value) -> Vec<Value> {
        pod["spec"]["containers"].as_array().unwrap().iter().map(|c| c["env"].clone()).collect()
    }

    #[test]
    fn ordered_pods_get_falling_priorities() {
        let pod = json!({
            "metadata": {"name": "p", "annotations": {PRIORITY_ANNOTATION: "Ordered"}},
            "spec": {"containers": [
                {"name": "a", "env": [{"name": "X", "value": "1"}], "futureField": {"kept": true}},
                {"name": "b"},
                {"name": "c", "env": null},
            ]},
        });
        let out = run(&pod).unwrap();
        assert_eq!(
            envs(&out),
            [
                json!([{"name": "X", "value": "1"}, barrier("p", "p_0")]),
                json!([barrier("p", "p_-1")]),
                json!([barrier("p", "p_-2")]),
            ]
        );
        assert_eq!(out["spec"]["containers"][0]["futureField"], json!({"kept": true}));
        assert_eq!(run(&out).unwrap(), out, "a re-invocation adds nothing");
        let mut single = pod.clone();
        single["spec"]["containers"].as_array_mut().unwrap().truncate(1);
        assert_eq!(run(&single).unwrap(), single, "one container: nothing to order");
    }

    #[test]
    fn priority_envs_decide_unless_all_equal() {
        let env = |v: &str| json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": v}]);
        let pod = |a: Value, b: Value| json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "env": a}, {"name": "b", "env": b}]}});
        let out = run(&pod(env("10"), json!([]))).unwrap();
        assert_eq!(
            envs(&out),
            [
                json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": "10"}, barrier("p", "p_10")]),
                json!([barrier("p", "p_0")]),
            ]
        );
        let same = pod(env("+3"), env("3"));
        assert_eq!(run(&same).unwrap(), same, "equal priorities: nothing");
        let zero = pod(env("0"), Value::Null);
        assert_eq!(run(&zero).unwrap(), zero);
        // The last priority env of a container wins.
        let twice = pod(
            json!([{"name": "KRUISE_CONTAINER_PRIORITY", "value": "5"}, {"name": "KRUISE_CONTAINER_PRIORITY", "value": "-5"}]),
            env("-5"),
        );
        assert_eq!(run(&twice).unwrap(), twice);
        let err = run(&pod(env("high"), env("1"))).unwrap_err();
        assert_eq!(err.to_string(), "strconv.Atoi: parsing \"high\": invalid syntax");
        assert!(matches!(err, AdmissionError::Internal(_)));
    }

    #[test]
    fn a_pod_with_only_generate_name_is_named() {
        let pod = json!({
            "metadata": {"generateName": "web-", "annotations": {PRIORITY_ANNOTATION: "Ordered"}},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        });
        let out = run(&pod).unwrap();
        let name = out["metadata"]["name"].as_str().unwrap();
        assert!(name.len() == 9 && name.starts_with("web-"), "{name}");
        assert!(name[4..].bytes().all(|b| generated::NAME_SUFFIX_CHARS.contains(&b)), "{name}");
        assert_eq!(envs(&out)[1], json!([barrier(name, "p_-1")]));
        assert_eq!(run(&out).unwrap(), out);
        // No name and no generateName: Kruise's ConfigMap name is "-barrier".
        let anonymous = json!({"metadata": {"annotations": {PRIORITY_ANNOTATION: "Ordered"}}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(envs(&run(&anonymous).unwrap())[0], json!([barrier("", "p_0")]));
    }

    #[test]
    fn atoi_is_gos() {
        assert_eq!(atoi("42"), Ok(42));
        assert_eq!(atoi("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(atoi("+007"), Ok(7));
        for (s, why) in [
            ("", "invalid syntax"),
            ("+", "invalid syntax"),
            ("1_000", "invalid syntax"),
            (" 1", "invalid syntax"),
            ("0x10", "invalid syntax"),
            ("9223372036854775808", "value out of range"),
            ("-9223372036854775809", "value out of range"),
            // Go's ParseUint fits this in a uint64 and only then meets the x.
            ("9223372036854775808x", "invalid syntax"),
            ("99999999999999999999x", "value out of range"),
        ] {
            assert_eq!(atoi(s), Err(format!("strconv.Atoi: parsing {}: {why}", go_quote(s))), "{s:?}");
        }
    }
}
