//! The SidecarSet guard (issue 30.8), which goes beyond Kruise: a SidecarSet injects its sidecars
//! into every Pod it matches, so writing one is as powerful as reading the service-account token of
//! every such Pod, and one with no namespaceSelector matches Pods in every namespace. When such a
//! SidecarSet also gives its sidecars host access, `vsidecarset` says so in a warning per finding
//! (`--sidecarset-policy warn`, the default) or denies it (`deny`).
//!
//! Host access a sidecar can have: a privileged container, added capabilities, privilege
//! escalation allowed, hostPath volumes. (hostNetwork, hostPID and hostIPC are Pod fields; a
//! SidecarSet cannot set them.)

use serde_json::Value;

use crate::api::sidecarset::{SidecarContainer, SidecarSet};

/// What `vsidecarset` does with a cluster-wide SidecarSet that gives host access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Policy {
    /// Admit it, with a warning per finding.
    #[default]
    Warn,
    /// Deny it (403), naming the findings.
    Deny,
}

/// The host access `set` gives, one finding per container field and hostPath volume, when it has
/// no namespaceSelector (v1alpha1 `spec.namespace` has become one by now); none when it has.
pub fn findings(set: &SidecarSet) -> Vec<String> {
    if set.spec.namespace_selector.is_some() {
        return Vec::new();
    }
    let containers = [("initContainers", &set.spec.init_containers), ("containers", &set.spec.containers)];
    let mut found: Vec<String> = containers
        .into_iter()
        .flat_map(|(field, list)| list.iter().enumerate().map(move |(i, c)| (field, i, c)))
        .flat_map(|(field, i, c)| {
            container_findings(c).into_iter().map(move |f| format!("spec.{field}[{i}] ({}): {f}", c.name))
        })
        .collect();
    for (i, volume) in set.spec.volumes.iter().enumerate() {
        if let Some(host_path) = volume.get("hostPath") {
            let path = host_path.get("path").and_then(Value::as_str).unwrap_or("?");
            let name = volume.get("name").and_then(Value::as_str).unwrap_or("?");
            found.push(format!("spec.volumes[{i}] ({name}): hostPath {path}"));
        }
    }
    found
}

fn container_findings(container: &SidecarContainer) -> Vec<String> {
    let Some(security) = container.container.get("securityContext") else { return Vec::new() };
    let mut found = Vec::new();
    if security.get("privileged") == Some(&Value::Bool(true)) {
        found.push("privileged".to_owned());
    }
    if security.get("allowPrivilegeEscalation") == Some(&Value::Bool(true)) {
        found.push("allowPrivilegeEscalation".to_owned());
    }
    if let Some(added) =
        security.pointer("/capabilities/add").and_then(Value::as_array).filter(|a| !a.is_empty())
    {
        let names: Vec<&str> = added.iter().map(|c| c.as_str().unwrap_or("?")).collect();
        found.push(format!("capabilities.add [{}]", names.join(", ")));
    }
    found
}

/// The warning (or denial line) for one finding.
pub fn describe(finding: &str) -> String {
    format!(
        "{finding}: host access, and the SidecarSet has no namespaceSelector, so it is injected into the matching Pods of \
         every namespace (writing SidecarSets is as powerful as reading the token of every Pod they match)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(spec: Value) -> SidecarSet {
        SidecarSet::from_value(&json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
                                        "metadata": {"name": "s"}, "spec": spec}))
        .unwrap()
    }

    #[test]
    fn each_kind_of_host_access_is_one_finding() {
        let risky = set(json!({
            "containers": [{"name": "a", "securityContext": {"privileged": true, "capabilities": {"add": ["NET_ADMIN", "SYS_TIME"]}}},
                           {"name": "b", "securityContext": {"privileged": false, "allowPrivilegeEscalation": true}}],
            "volumes": [{"name": "h", "hostPath": {"path": "/var/run"}}, {"name": "e", "emptyDir": {}}]}));
        assert_eq!(
            findings(&risky),
            [
                "spec.containers[0] (a): privileged",
                "spec.containers[0] (a): capabilities.add [NET_ADMIN, SYS_TIME]",
                "spec.containers[1] (b): allowPrivilegeEscalation",
                "spec.volumes[0] (h): hostPath /var/run",
            ]
        );
        let mut scoped = risky.clone();
        scoped.spec.namespace_selector =
            Some(serde_json::from_value(json!({"matchLabels": {"a": "b"}})).unwrap());
        assert!(findings(&scoped).is_empty());
        assert!(
            findings(&set(
                json!({"containers": [{"name": "a", "securityContext": {"capabilities": {"add": []}}}]})
            ))
            .is_empty()
        );
    }
}
