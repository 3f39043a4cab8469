//! Least-privilege RBAC for the server's ServiceAccount, one object per reason, each annotated
//! with the mode that needs it (`kruise-admission.dev/needed-for`). The verbs are exactly the
//! requests the server makes (and nothing else):
//!
//! - `live-cluster` (`--cluster-mode=live`, `cluster::live`): list + watch of SidecarSets and
//!   Namespaces (cluster-wide), and of PodUnavailableBudgets, WorkloadSpreads, Deployments,
//!   ReplicaSets, both StatefulSets, CloneSets and Jobs (the related-pub and WorkloadSpread steps and
//!   the workloads they read), of PersistentPodStates and PodProbeMarkers (steps 6 and 7); the live
//!   lookups: list pods and PVCs of a Namespace whose `Cascading`
//!   deletion is checked, get a pod by name (CloneSet `podsToDelete`, the pod an eviction names), and list the custom
//!   resources of a CRD being deleted through an aggregated ClusterRole the operator extends per
//!   CRD (so the server never holds `list` on `*`). Pods and PVCs are read across namespaces by
//!   unknown names, which RBAC cannot narrow. Update of the `status` of PodUnavailableBudgets and
//!   WorkloadSpreads: the disruptions and pods decisions record there.
//! - `openkruise` (live mode on a cluster that runs OpenKruise): list + watch of ControllerRevisions
//!   and of the `kruise-configuration` ConfigMap (by name: it is listed and watched with a
//!   `metadata.name` field selector) in the Kruise namespace only. A Role there cannot be created
//!   where that namespace does not exist, so it is a mode of its own: `manifests rbac` leaves it out
//!   unless `--openkruise` (the kustomize component `openkruise`; the chart's
//!   `kruiseNamespaceRole`), and the server treats those two kinds as optional when refused.
//! - `self-managed-certs` (`--cert-mode=self-managed`, `cluster::live::certs`): get, update of its
//!   own Secret by name, create of Secrets in its own namespace (RBAC cannot name an object that
//!   does not exist yet), get, update of its own two webhook configurations by name, and list +
//!   watch of them by name too (with a `metadata.name` field selector, which `resourceNames`
//!   covers): the watch that repairs a reset caBundle at once.
//! - `shadow-agreement` (`serve --shadow` in live mode, `cluster::live::pod_creations`): list (one
//!   Pod, for the current resourceVersion) and watch of pods cluster-wide, to compare each stored Pod
//!   with the decision made on its CREATE. Pods are created in every namespace, under names not
//!   known in advance.
//! - folder mode with provided certificates reads nothing from the API server and needs none of
//!   this (the kustomize components and the chart leave these objects out there).

use serde_json::{Value, json};

use super::{NAME, Target, labels};
use crate::cluster::live::KRUISE_CONFIGMAP;

pub const NEEDED_FOR_ANNOTATION: &str = "kruise-admission.dev/needed-for";
/// The mode of the objects only `serve --shadow` in live mode needs.
pub const SHADOW_AGREEMENT: &str = "shadow-agreement";
/// The mode of the objects in the Kruise namespace (which exists only where OpenKruise runs).
pub const OPENKRUISE: &str = "openkruise";
/// ClusterRoles carrying this label are aggregated into `kruise-admission:custom-resources`.
pub const AGGREGATE_LABEL: &str = "kruise-admission.dev/aggregate-to-custom-resources";

/// What the RBAC depends on besides the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RbacOptions {
    /// The ServiceAccount and the prefix of every object's name (`<name>:cluster-reader`; the
    /// chart uses its release's full name).
    pub name: String,
    /// The name of both webhook configurations whose caBundle self-managed certificates keep
    /// current: `name`, or `<name>-shadow` for the shadow configurations (`--shadow`).
    pub webhook_configurations: String,
    /// Where Kruise keeps SidecarSet ControllerRevisions (`Settings::kruise_namespace`).
    pub kruise_namespace: String,
    /// The Secret `--cert-mode self-managed` keeps its CA and serving certificate in.
    pub cert_secret: String,
    /// `serve --shadow`: add the [`SHADOW_AGREEMENT`] objects ([`shadow_objects`]).
    pub shadow: bool,
    /// A cluster that runs OpenKruise: add the [`OPENKRUISE`] objects ([`openkruise_objects`]).
    pub openkruise: bool,
}

impl Default for RbacOptions {
    fn default() -> Self {
        RbacOptions {
            name: NAME.into(),
            webhook_configurations: NAME.into(),
            kruise_namespace: "kruise-system".into(),
            cert_secret: format!("{NAME}-tls"),
            shadow: false,
            openkruise: false,
        }
    }
}

fn metadata(name: &str, namespace: Option<&str>, needed_for: &str) -> Value {
    let mut meta =
        json!({ "name": name, "labels": labels(), "annotations": { NEEDED_FOR_ANNOTATION: needed_for } });
    if let Some(namespace) = namespace {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn subjects(target: &Target, options: &RbacOptions) -> Value {
    json!([{ "kind": "ServiceAccount", "name": options.name, "namespace": target.namespace }])
}

fn binding(
    kind: &str,
    name: &str,
    namespace: Option<&str>,
    needed_for: &str,
    target: &Target,
    options: &RbacOptions,
) -> Value {
    let role_kind = if kind == "ClusterRoleBinding" { "ClusterRole" } else { "Role" };
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": metadata(name, namespace, needed_for),
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name },
        "subjects": subjects(target, options),
    })
}

fn role(kind: &str, name: &str, namespace: Option<&str>, needed_for: &str, rules: Value) -> Value {
    json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata(name, namespace, needed_for), "rules": rules })
}

/// The RBAC objects for live mode (`live-cluster`), then for self-managed certificates, then with
/// `options.openkruise` those in the Kruise namespace, then with `options.shadow` for shadow
/// mode's live agreement.
pub fn objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let mut objects = base_objects(target, options);
    if options.openkruise {
        objects.extend(openkruise_objects(target, options));
    }
    if options.shadow {
        objects.extend(shadow_objects(target, options));
    }
    objects
}

/// `openkruise`: SidecarSet revisions and Kruise's configuration, which live in the Kruise
/// namespace only. Revisions are named by Kruise per revision, so they cannot be granted by name.
/// The ConfigMap is listed and watched with `metadata.name=kruise-configuration`, which is what
/// lets `resourceNames` apply to list and watch.
pub fn openkruise_objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let revisions = format!("{}:kruise-revisions", options.name);
    let kruise_ns = Some(options.kruise_namespace.as_str());
    let watch = json!(["list", "watch"]);
    vec![
        role(
            "Role",
            &revisions,
            kruise_ns,
            OPENKRUISE,
            json!([
                { "apiGroups": ["apps"], "resources": ["controllerrevisions"], "verbs": watch },
                { "apiGroups": [""], "resources": ["configmaps"], "resourceNames": [KRUISE_CONFIGMAP], "verbs": watch },
            ]),
        ),
        binding("RoleBinding", &revisions, kruise_ns, OPENKRUISE, target, options),
    ]
}

/// What `serve --shadow` in live mode needs besides [`objects`] without shadow: the Pod-creation
/// watch of the live agreement (a list of one Pod for the resourceVersion, then watch).
pub fn shadow_objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let name = format!("{}:pod-creations", options.name);
    vec![
        role(
            "ClusterRole",
            &name,
            None,
            SHADOW_AGREEMENT,
            json!([{ "apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"] }]),
        ),
        binding("ClusterRoleBinding", &name, None, SHADOW_AGREEMENT, target, options),
    ]
}

fn base_objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let mut objects = live_cluster_objects(target, options);
    objects.extend(self_managed_cert_objects(target, options));
    objects
}

/// `live-cluster`: the watches of the snapshot and the live lookups.
fn live_cluster_objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let live = "live-cluster";
    let watch = json!(["list", "watch"]);
    let name = &options.name;
    let cluster_reader = format!("{name}:cluster-reader");
    let status_writer = format!("{name}:status-writer");
    let custom = format!("{name}:custom-resources");
    vec![
        role(
            "ClusterRole",
            &cluster_reader,
            None,
            live,
            json!([
                // The snapshot: every SidecarSet (cluster-scoped) and every Namespace (for its labels),
                // so no name to restrict to.
                { "apiGroups": ["apps.kruise.io"], "resources": ["sidecarsets"], "verbs": watch },
                { "apiGroups": [""], "resources": ["namespaces"], "verbs": watch },
                // /mutate-pod's kruise.io/related-pub and WorkloadSpread steps: every
                // PodUnavailableBudget and WorkloadSpread, and the workloads they read to match a
                // targetRef (Jobs: WorkloadSpread only).
                { "apiGroups": ["policy.kruise.io"], "resources": ["podunavailablebudgets"], "verbs": watch },
                { "apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"], "verbs": watch },
                { "apiGroups": ["apps.kruise.io"], "resources": ["clonesets", "statefulsets", "workloadspreads"], "verbs": watch },
                { "apiGroups": ["batch"], "resources": ["jobs"], "verbs": watch },
                // /mutate-pod's PersistentPodState step and PodProbeMarker on serverless pods.
                { "apiGroups": ["apps.kruise.io"], "resources": ["persistentpodstates", "podprobemarkers"], "verbs": watch },
                // Live lookups (no watch, never cached): pods and PVCs of a Namespace whose Cascading
                // deletion is checked; a pod by name (CloneSet podsToDelete, the pod an eviction
                // names). Their names are not
                // known in advance, so RBAC cannot narrow them.
                { "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] },
                { "apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["list"] },
            ]),
        ),
        binding("ClusterRoleBinding", &cluster_reader, None, live, target, options),
        // The status writes decisions make: /validate-pod records a disruption in the
        // PodUnavailableBudget that allowed it, WorkloadSpread accounting records pods in their
        // WorkloadSpread. Replaced with the resourceVersion read (optimistic concurrency), no patch;
        // after a conflict the object is read again by name (get), fresher than the watch.
        role(
            "ClusterRole",
            &status_writer,
            None,
            live,
            json!([
                { "apiGroups": ["policy.kruise.io"], "resources": ["podunavailablebudgets"], "verbs": ["get"] },
                { "apiGroups": ["policy.kruise.io"], "resources": ["podunavailablebudgets/status"], "verbs": ["update"] },
                { "apiGroups": ["apps.kruise.io"], "resources": ["workloadspreads"], "verbs": ["get"] },
                { "apiGroups": ["apps.kruise.io"], "resources": ["workloadspreads/status"], "verbs": ["update"] },
            ]),
        ),
        binding("ClusterRoleBinding", &status_writer, None, live, target, options),
        // CRD `Cascading` protection lists the CRD's custom resources. Grant them per CRD with a
        // ClusterRole labelled `AGGREGATE_LABEL: "true"` (list); the controller manager fills in
        // this role's rules from those.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": metadata(&custom, None, live),
            "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { AGGREGATE_LABEL: "true" } }] },
            "rules": [],
        }),
        binding("ClusterRoleBinding", &custom, None, live, target, options),
    ]
}

/// `self-managed-certs`: the certificate Secret and the caBundle of the webhook configurations.
fn self_managed_cert_objects(target: &Target, options: &RbacOptions) -> Vec<Value> {
    let certs = "self-managed-certs";
    let name = &options.name;
    let secret = format!("{name}:cert-secret");
    let configurations = format!("{name}:webhook-configurations");
    let own_ns = Some(target.namespace.as_str());
    // Read, then replace with the resourceVersion read (optimistic concurrency): no patch.
    let by_name = json!(["get", "update"]);
    vec![
        // Self-managed certificates: create the Secret once if missing (create cannot be limited by
        // name), then only ever this one Secret.
        role(
            "Role",
            &secret,
            own_ns,
            certs,
            json!([
                { "apiGroups": [""], "resources": ["secrets"], "verbs": ["create"] },
                { "apiGroups": [""], "resources": ["secrets"], "resourceNames": [options.cert_secret], "verbs": by_name },
            ]),
        ),
        binding("RoleBinding", &secret, own_ns, certs, target, options),
        // caBundle patching of this server's own two configurations, by name; they are also
        // listed and watched with `metadata.name=<name>`, so a reset caBundle is seen at once.
        role(
            "ClusterRole",
            &configurations,
            None,
            certs,
            json!([{
                "apiGroups": ["admissionregistration.k8s.io"],
                "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                "resourceNames": [options.webhook_configurations],
                "verbs": ["get", "update", "list", "watch"],
            }]),
        ),
        binding("ClusterRoleBinding", &configurations, None, certs, target, options),
    ]
}

/// Placeholders in [`chart_objects`], replaced by the chart's template (`templates/rbac.yaml`).
pub const CHART_PLACEHOLDERS: [(&str, &str); 5] = [
    ("@fullname@", "the release's full name"),
    ("@namespace@", "the release namespace"),
    ("@kruiseNamespace@", ".Values.kruiseNamespace"),
    ("@certSecret@", "the self-managed Secret's name"),
    (
        "@webhookConfigurations@",
        "the webhook configurations' name (<fullname>, or <fullname>-shadow with shadow.enabled)",
    ),
];

/// The objects [`objects`] makes, with placeholders where the chart puts release values: the Helm
/// chart renders its RBAC from this (`files/rbac.json`, `kruise-admission manifests chart-rbac`),
/// so the chart and `kruise-admission manifests rbac` cannot disagree.
pub fn chart_objects() -> Value {
    let [(fullname, _), (namespace, _), (kruise_namespace, _), (cert_secret, _), (configurations, _)] =
        CHART_PLACEHOLDERS;
    let target = Target::new(namespace, fullname);
    let options = RbacOptions {
        name: fullname.into(),
        webhook_configurations: configurations.into(),
        kruise_namespace: kruise_namespace.into(),
        cert_secret: cert_secret.into(),
        // Every mode's objects; the chart renders those of the modes its values turn on.
        shadow: true,
        openkruise: true,
    };
    json!({ "generatedBy": "kruise-admission manifests chart-rbac", "objects": objects(&target, &options) })
}
