//! `resourcesPolicy` (docs/sidecarset.md#5-6-resources-policy): a sidecar's resources computed from the pod's
//! target containers.

use crate::api::pattern::Pattern;
use crate::api::resource_expression::parse_quantity;
use crate::api::sidecarset::{ResourcesPolicy, SidecarSet};
use crate::api::tree::{Json, Object};

/// The resources for a sidecar under `policy`, which replace its own `resources` entirely.
/// `injected` are the container names of the SidecarSets injected into this pod, hot-upgrade
/// pairs included (never targets).
/// `compiled` is the regex from the index when it has it.
pub fn compute(
    set: &SidecarSet,
    sidecar: &str,
    policy: &ResourcesPolicy,
    compiled: Option<&Pattern>,
    pod: &Json<'_>,
    injected: &[String],
) -> Result<Json<'static>, String> {
    let context = |e: String| format!("SidecarSet {} container {sidecar}: resourcesPolicy: {e}", set.name());
    let compiled_here;
    let regex = match compiled {
        Some(r) => r,
        None => {
            compiled_here = Pattern::compile(&policy.target_containers_name_regex).map_err(|e| {
                context(format!(
                    "targetContainersNameRegex {:?} is not a valid regex: {e}",
                    policy.target_containers_name_regex
                ))
            })?;
            &compiled_here
        }
    };
    let list =
        |key: &str| pod.at(&["spec", key]).and_then(Json::as_array).map(Vec::as_slice).unwrap_or_default();
    let native_init = list("initContainers")
        .iter()
        .filter(|c| c.get("restartPolicy").and_then(Json::as_str) == Some("Always"));
    let targets: Vec<&Json> = native_init
        .chain(list("containers"))
        .filter(|c| {
            c.get("name")
                .and_then(Json::as_str)
                .is_some_and(|n| !injected.iter().any(|s| s == n) && regex.is_match(n))
        })
        .collect();
    if targets.is_empty() {
        return Err(context(format!(
            "no container of the pod matches targetContainersNameRegex {:?} (sidecars do not count)",
            policy.target_containers_name_regex
        )));
    }
    // Built as a tree, the form the sidecar takes it in (no `Value` to convert per pod).
    let mut out = Object::new();
    for (kind, exprs) in [
        ("limits", policy.resources_expr.limits.as_ref()),
        ("requests", policy.resources_expr.requests.as_ref()),
    ] {
        let Some(exprs) = exprs else { continue };
        let mut values = Object::new();
        for (resource, expr, parsed) in exprs.expressions() {
            // Limits: unlimited (not evaluated) when any target has none. Requests: missing is 0.
            let Some(aggregate) =
                aggregate(&targets, kind, resource, &policy.target_containers_mode).map_err(context)?
            else {
                continue;
            };
            let v = parsed
                .evaluate(aggregate)
                .map_err(|e| context(format!("{kind}.{resource} expression {expr:?}: {e}")))?;
            if v < 0.0 {
                return Err(context(format!("{kind}.{resource} expression {expr:?} gives a negative value")));
            }
            values.insert(resource, Json::from(format_quantity(resource, v)));
        }
        if !values.is_empty() {
            out.insert(kind, Json::Object(values));
        }
    }
    Ok(Json::Object(out))
}

/// Sum or max of `resources.<kind>.<resource>` over the targets; `None` for an unlimited limit.
fn aggregate(targets: &[&Json], kind: &str, resource: &str, mode: &str) -> Result<Option<f64>, String> {
    let mut acc = 0.0f64;
    for c in targets {
        let q = match c.at(&["resources", kind, resource]) {
            None | Some(Json::Null) if kind == "limits" => return Ok(None),
            None | Some(Json::Null) => continue,
            Some(Json::Number(n)) => n.as_f64().unwrap_or(0.0),
            Some(Json::String(s)) => parse_quantity(s).map_err(|e| {
                format!("container {}: {e}", c.get("name").and_then(Json::as_str).unwrap_or(""))
            })?,
            Some(other) => return Err(format!("{kind}.{resource} {other} is not a quantity")),
        };
        acc = match mode {
            "sum" => acc + q,
            "max" => acc.max(q),
            // Kruise aggregates nothing for another mode: limits unlimited, requests 0.
            _ if kind == "limits" => return Ok(None),
            _ => 0.0,
        };
    }
    Ok(Some(acc))
}

/// CPU in whole millicores (rounded up, like Kubernetes), memory in whole bytes with the largest
/// exact suffix.
fn format_quantity(resource: &str, v: f64) -> String {
    if resource == "cpu" {
        let millis = (v * 1000.0 - 1e-6).ceil().max(0.0) as u64;
        return if millis.is_multiple_of(1000) { (millis / 1000).to_string() } else { format!("{millis}m") };
    }
    let bytes = (v - 1e-6).ceil().max(0.0) as u64;
    if bytes == 0 {
        return "0".into();
    }
    for (suffix, factor) in [
        ("Ei", 1u64 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ] {
        if bytes.is_multiple_of(factor) {
            return format!("{}{suffix}", bytes / factor);
        }
    }
    for (suffix, factor) in [
        ("E", 1_000_000_000_000_000_000u64),
        ("P", 1_000_000_000_000_000),
        ("T", 1_000_000_000_000),
        ("G", 1_000_000_000),
        ("M", 1_000_000),
        ("k", 1000),
    ] {
        if bytes.is_multiple_of(factor) {
            return format!("{}{suffix}", bytes / factor);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An expression that does not parse is reported when it is evaluated, on every pod, with the
    /// parser's message: not when nothing evaluates it (a limit left unlimited).
    #[test]
    fn a_broken_expression_is_reported_when_evaluated() {
        let set = SidecarSet::from_value(&serde_json::json!({"metadata": {"name": "s"}, "spec": {"containers": [{
            "name": "side", "image": "i", "resourcesPolicy": {"targetContainersMode": "sum", "targetContainersNameRegex": ".*",
                "resourcesExpr": {"limits": {"cpu": "cpu *"}, "requests": {"memory": "memory / 2"}}}}]}}))
        .unwrap();
        let policy = set.spec.containers[0].resources_policy.as_ref().unwrap();
        let pod = |resources: serde_json::Value| {
            Json::from(serde_json::json!({"spec": {"containers": [{"name": "app", "resources": resources}]}}))
        };
        let unlimited = pod(serde_json::json!({"requests": {"memory": "1Gi"}}));
        let computed = compute(&set, "side", policy, None, &unlimited, &[]).unwrap();
        assert_eq!(computed, serde_json::json!({"requests": {"memory": "512Mi"}}));
        let limited = pod(serde_json::json!({"limits": {"cpu": "1"}}));
        for _ in 0..2 {
            assert_eq!(
                compute(&set, "side", policy, None, &limited, &[]).unwrap_err(),
                "SidecarSet s container side: resourcesPolicy: limits.cpu expression \"cpu *\": the expression ends too early"
            );
        }
    }

    #[test]
    fn quantity_formatting() {
        assert_eq!(format_quantity("cpu", 0.3), "300m");
        assert_eq!(format_quantity("cpu", 2.0), "2");
        assert_eq!(format_quantity("cpu", 0.0375), "38m");
        assert_eq!(format_quantity("memory", 200.0 * 1048576.0), "200Mi");
        assert_eq!(format_quantity("memory", 1e9), "1G");
        assert_eq!(format_quantity("memory", 1001.0), "1001");
    }
}
