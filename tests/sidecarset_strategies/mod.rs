//! Random SidecarSets for the property tests (`sidecarset_proptest`, `pod_patch_differential`).
//! Each test picks its mounts and which optional parts a set may hold; a part left out draws
//! nothing from the random stream (`Just(false)`), so each test generates the very cases it did
//! before the two shared this code: `pod_patch_differential`'s recorded digests and
//! `sidecarset_proptest`'s saved regressions still hold.

use proptest::prelude::*;
use serde_json::{Value, json};

/// The optional parts of a generated SidecarSet.
#[derive(Clone, Copy)]
pub struct Parts {
    /// The fewest sidecar containers per set (0 or 1; at most 2).
    pub min_sidecars: usize,
    /// `patchPodMetadata` may also set the DaemonSet-style target-node annotation.
    pub target_node: bool,
    /// Sidecars may carry a `resourcesPolicy` and `volumeDevices`.
    pub resources_and_devices: bool,
}

/// A random boolean when `on`, else always `false` without drawing.
fn flag(on: bool) -> BoxedStrategy<bool> {
    if on { any::<bool>().boxed() } else { Just(false).boxed() }
}

/// One sidecar container named `name` (an init container when `init`).
pub fn sidecar(
    name: String,
    init: bool,
    mount: BoxedStrategy<Value>,
    parts: Parts,
) -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["", "BeforeAppContainer", "AfterAppContainer"]),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        prop::collection::vec(mount, 0..2),
        (any::<bool>(), flag(parts.resources_and_devices), flag(parts.resources_and_devices)),
    )
        .prop_map(move |(policy, (share, hot, native), mounts, (transfer, sized, devices))| {
            let mut c = json!({"name": name, "image": "side:1", "podInjectPolicy": policy, "volumeMounts": mounts,
                               "shareVolumePolicy": {"type": if share { "enabled" } else { "disabled" }}});
            if hot {
                c["upgradeStrategy"] = json!({"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"});
            }
            if init && native {
                c["restartPolicy"] = json!("Always");
            }
            if transfer {
                c["transferEnv"] = json!([{"sourceContainerName": "app", "envNames": ["MODE", "LEVEL"]}]);
            }
            if sized {
                c["resourcesPolicy"] = json!({"targetContainerMode": "sum", "targetContainersNameRegex": "^(app|web)$",
                    "resourceExpr": {"limits": {"cpu": "max(cpu*50%, 50m)"}, "requests": {"memory": "200Mi"}}});
            }
            if devices {
                c["volumeDevices"] = json!([{"name": "data", "devicePath": "/dev/x"}]);
            }
            c
        })
}

/// SidecarSet `set-{i}`: a selector on the `app` label (or any pod with one), up to two sidecars
/// (containers or init containers), two volumes, maybe `patchPodMetadata` and pull secrets.
pub fn sidecarset(i: usize, mount: BoxedStrategy<Value>, parts: Parts) -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["a", "b", "*"]),
        prop::collection::vec(any::<bool>(), parts.min_sidecars..3),
        prop::option::of(prop::sample::select(vec!["Retain", "Overwrite", "MergePatchJson"])),
        (any::<bool>(), flag(parts.target_node)),
    )
        .prop_flat_map(move |(app, kinds, patch, (secrets, target))| {
            let sidecars: Vec<_> = kinds
                .into_iter()
                .enumerate()
                .map(|(j, init)| sidecar(format!("s{i}-c{j}"), init, mount.clone(), parts).prop_map(move |c| (init, c)))
                .collect();
            (sidecars, Just((app, patch, secrets, target)))
        })
        .prop_map(move |(sidecars, (app, patch, secrets, target))| {
            let selector = if app == "*" {
                json!({"matchExpressions": [{"key": "app", "operator": "Exists"}]})
            } else {
                json!({"matchLabels": {"app": app}})
            };
            let (init, containers): (Vec<_>, Vec<_>) = sidecars.into_iter().partition(|(init, _)| *init);
            let mut spec = json!({
                "selector": selector,
                "initContainers": init.into_iter().map(|(_, c)| c).collect::<Vec<_>>(),
                "containers": containers.into_iter().map(|(_, c)| c).collect::<Vec<_>>(),
                "volumes": [{"name": "cache", "emptyDir": {}}, {"name": "logs", "hostPath": {"path": "/var/log"}}],
            });
            if let Some(policy) = patch {
                let mut annotations = json!({"note": "{\"from\":\"set\"}"});
                if target {
                    annotations["kruise-admission.dev/target-node"] = json!("node-from-set");
                }
                spec["patchPodMetadata"] = json!([{"annotations": annotations, "patchPolicy": policy}]);
            }
            if secrets {
                spec["imagePullSecrets"] = json!([{"name": "regcred"}, {"name": format!("s{i}-secret")}]);
            }
            json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
                   "metadata": {"name": format!("set-{i}"), "annotations": {"kruise.io/sidecarset-hash": format!("h{i}")}}, "spec": spec})
        })
}
