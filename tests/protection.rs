//! Delete protection (`policy.kruise.io/delete-protection`, docs/workloads.md#4-delete-protection): every
//! protected kind against every label value, the early exits, failed lookups, the registrations, recorded
//! DELETE reviews, and a folder of cluster objects as `dry-run --cluster-dir` reads it.
//!
//! Decisions go the way an edge takes them: `webhooks::matching` picks the webhooks, each webhook's
//! `queries` names its lookups, `Answers::from_snapshot` answers them, `webhooks::run` decides.

use crate::common;

use std::path::PathBuf;

use kruise_admission::admission::review::Operation;
use kruise_admission::admission::review::{AdmissionRequest, Decision, decode_review};
use kruise_admission::admission::webhooks::{self, Capability, FailurePolicy, ObjectScope, Rule, Webhook};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings, protection};
use kruise_admission::cluster::{Answers, Counted, ListFilter, Query, Snapshot, files};
use serde_json::{Value, json};
use time::macros::datetime;

const ALWAYS_MSG: &str =
    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always";
const CASCADING_MSG: &str =
    "forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Cascading";

/// CloneSet and Advanced StatefulSet DELETE reach us on the in-place validators' paths, which call
/// `protection::check_delete`. Until those land on this branch, this stand-in plays their part.
static INPLACE_STANDIN: Webhook = protection::webhook(
    "vcloneset-and-vstatefulset-standin",
    "/standin",
    &[
        Rule {
            groups: &["apps.kruise.io"],
            versions: &["v1alpha1", "v1beta1"],
            resources: &["clonesets"],
            kind: "CloneSet",
            operations: &[Operation::Delete],
        },
        Rule {
            groups: &["apps.kruise.io"],
            versions: &["v1alpha1", "v1beta1"],
            resources: &["statefulsets"],
            kind: "StatefulSet",
            operations: &[Operation::Delete],
        },
    ],
    ObjectScope::All,
);

/// One protected kind: how a DELETE review for it names it.
#[derive(Clone, Copy)]
struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    resource: &'static str,
    namespaced: bool,
}

const NAMESPACE: Kind =
    Kind { group: "", version: "v1", kind: "Namespace", resource: "namespaces", namespaced: false };
const CRD_V1: Kind = Kind {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    resource: "customresourcedefinitions",
    namespaced: false,
};
const CRD_V1BETA1: Kind = Kind { version: "v1beta1", ..CRD_V1 };
const DEPLOYMENT: Kind =
    Kind { group: "apps", version: "v1", kind: "Deployment", resource: "deployments", namespaced: true };
const REPLICASET: Kind =
    Kind { group: "apps", version: "v1", kind: "ReplicaSet", resource: "replicasets", namespaced: true };
const STATEFULSET: Kind =
    Kind { group: "apps", version: "v1", kind: "StatefulSet", resource: "statefulsets", namespaced: true };
const CLONESET: Kind = Kind {
    group: "apps.kruise.io",
    version: "v1alpha1",
    kind: "CloneSet",
    resource: "clonesets",
    namespaced: true,
};
const ASTS_V1ALPHA1: Kind = Kind {
    group: "apps.kruise.io",
    version: "v1alpha1",
    kind: "StatefulSet",
    resource: "statefulsets",
    namespaced: true,
};
const ASTS_V1BETA1: Kind = Kind { version: "v1beta1", ..ASTS_V1ALPHA1 };
const UNITED_DEPLOYMENT: Kind = Kind {
    group: "apps.kruise.io",
    version: "v1alpha1",
    kind: "UnitedDeployment",
    resource: "uniteddeployments",
    namespaced: true,
};
const SERVICE: Kind =
    Kind { group: "", version: "v1", kind: "Service", resource: "services", namespaced: true };
const INGRESS_V1: Kind = Kind {
    group: "networking.k8s.io",
    version: "v1",
    kind: "Ingress",
    resource: "ingresses",
    namespaced: true,
};
const INGRESS_V1BETA1: Kind = Kind { version: "v1beta1", ..INGRESS_V1 };

const WORKLOADS: [Kind; 7] =
    [DEPLOYMENT, REPLICASET, STATEFULSET, CLONESET, ASTS_V1ALPHA1, ASTS_V1BETA1, UNITED_DEPLOYMENT];

fn api_version(k: Kind) -> String {
    if k.group.is_empty() { k.version.to_owned() } else { format!("{}/{}", k.group, k.version) }
}

/// An object of kind `k` named `name`, with `label` as its protection label (if any) and `spec`.
fn object(k: Kind, name: &str, label: Option<&str>, spec: Value) -> Value {
    let mut metadata = json!({"name": name, "uid": "0c4f4b5e-0000-4000-8000-000000000001"});
    if k.namespaced {
        metadata["namespace"] = json!("shop");
    }
    if let Some(v) = label {
        metadata["labels"] = json!({"app": "x", "policy.kruise.io/delete-protection": v});
    }
    json!({"apiVersion": api_version(k), "kind": k.kind, "metadata": metadata, "spec": spec})
}

fn request_json(k: Kind, operation: &str, old_object: Value) -> Value {
    let name = old_object.pointer("/metadata/name").cloned().unwrap_or(json!("x"));
    let namespace = if k.namespaced { json!("shop") } else { Value::Null };
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "7d1a4d9e-1111-4222-8333-444455556666",
            "kind": {"group": k.group, "version": k.version, "kind": k.kind},
            "resource": {"group": k.group, "version": k.version, "resource": k.resource},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": null,
            "oldObject": old_object,
        }
    })
}

fn delete(k: Kind, old_object: Value) -> AdmissionRequest<'static> {
    decode_review(request_json(k, "DELETE", old_object)).unwrap()
}

/// Everything the decision reads except the answers.
struct Env {
    snapshot: Snapshot,
    settings: Settings,
    clock: FixedClock,
    random: SeededRandom,
}

impl Env {
    fn new(objects: Vec<Value>) -> Self {
        Env::of(Snapshot::from_objects(objects))
    }

    fn of(snapshot: Snapshot) -> Self {
        Env {
            snapshot,
            settings: Settings::default(),
            clock: FixedClock(datetime!(2026-11-29 00:00 UTC)),
            random: SeededRandom::new(1),
        }
    }

    fn inputs<'a>(&'a self, answers: &'a Answers) -> Inputs<'a> {
        Inputs {
            cluster: &self.snapshot,
            answers,
            clock: &self.clock,
            random: &self.random,
            settings: &self.settings,
        }
    }

    /// The queries `webhook` asks for on `request`.
    fn queries(&self, webhook: &Webhook, request: &AdmissionRequest) -> Vec<Query> {
        webhooks::queries(webhook, request, &self.inputs(&Answers::default()))
    }

    /// Run one webhook as an edge does: answer its queries from the snapshot, then decide.
    fn run(&self, webhook: &Webhook, request: &AdmissionRequest) -> Decision<'static> {
        webhooks::run_offline(webhook, request, &self.inputs(&Answers::default())).decision
    }

    /// The webhooks the apiserver would call (the in-place stand-in when nothing on this branch
    /// serves the kind) and their decisions.
    fn decide_all(&self, request: &AdmissionRequest) -> Vec<(&'static str, Decision<'static>)> {
        let mut hooks: Vec<&'static Webhook> = webhooks::matching(request).collect();
        if hooks.is_empty() && INPLACE_STANDIN.matches(request) {
            hooks.push(&INPLACE_STANDIN);
        }
        hooks.into_iter().map(|w| (w.name, self.run(w, request))).collect()
    }

    /// The decision of the one webhook that receives `request`.
    fn decide(&self, request: &AdmissionRequest) -> Decision<'static> {
        let mut all = self.decide_all(request);
        assert_eq!(
            all.len(),
            1,
            "expected exactly one webhook for {:?}/{:?}, got {:?}",
            request.kind,
            request.operation,
            names(&all)
        );
        all.remove(0).1
    }
}

fn names(all: &[(&str, Decision)]) -> Vec<String> {
    all.iter().map(|(n, _)| n.to_string()).collect()
}

#[track_caller]
fn assert_allowed(d: &Decision) {
    assert!(d.allowed, "expected allowed, got {:?}", d.status);
    assert!(d.status.is_none(), "{:?}", d.status);
    assert!(d.warnings.is_empty(), "no warnings expected, got {:?}", d.warnings);
    assert!(d.patch.is_empty());
}

#[track_caller]
fn assert_denied(d: &Decision, message: &str) {
    assert!(!d.allowed, "expected a denial with {message:?}");
    let status = d.status.as_ref().unwrap();
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(status.message, message);
}

fn pod(namespace: &str, name: &str, phase: &str, deleting: bool) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {}, "status": {"phase": phase}});
    if deleting {
        p["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
    }
    p
}

fn pvc(namespace: &str, name: &str, phase: &str, deleting: bool) -> Value {
    let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": namespace}, "status": {"phase": phase}});
    if deleting {
        c["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
    }
    c
}

fn widget(version: &str, namespace: Option<&str>, name: &str, deleting: bool) -> Value {
    let mut w =
        json!({"apiVersion": format!("example.com/{version}"), "kind": "Widget", "metadata": {"name": name}});
    if let Some(ns) = namespace {
        w["metadata"]["namespace"] = json!(ns);
    }
    if deleting {
        w["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
    }
    w
}

/// `widgets.example.com`: served in v1beta1 and v1, stored in v1.
fn widgets_crd(k: Kind, label: Option<&str>) -> Value {
    object(
        k,
        "widgets.example.com",
        label,
        json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true},
            ],
        }),
    )
}

const OTHER_VALUES: [&str; 5] = ["always", "cascading", "", "Never", "ALWAYS"];

// ---------------------------------------------------------------- the kind × label-value table

#[test]
fn no_label_and_other_values_allow_every_kind_without_lookups_or_warnings() {
    let env = Env::new(vec![pod("shop", "web", "Running", false), widget("v1", Some("a"), "w", false)]);
    let kinds =
        [NAMESPACE, CRD_V1, CRD_V1BETA1, SERVICE, INGRESS_V1, INGRESS_V1BETA1].into_iter().chain(WORKLOADS);
    for k in kinds {
        let spec = if k.kind == "CustomResourceDefinition" {
            widgets_crd(k, None)["spec"].clone()
        } else {
            json!({"replicas": 3})
        };
        for label in std::iter::once(None).chain(OTHER_VALUES.map(Some)) {
            let request = delete(k, object(k, "shop", label, spec.clone()));
            assert_allowed(&env.decide(&request));
            assert!(
                protection::queries(&request, &env.inputs(&Answers::default())).is_empty(),
                "{} {label:?}",
                k.kind
            );
        }
    }
}

#[test]
fn always_denies_every_protected_kind_without_lookups() {
    // Dependents exist and replicas are 0: Always does not look at either.
    let env = Env::new(vec![pod("shop", "web", "Running", false)]);
    let kinds =
        [NAMESPACE, CRD_V1, CRD_V1BETA1, SERVICE, INGRESS_V1, INGRESS_V1BETA1].into_iter().chain(WORKLOADS);
    for k in kinds {
        let spec = if k.kind == "CustomResourceDefinition" {
            widgets_crd(k, None)["spec"].clone()
        } else {
            json!({"replicas": 0})
        };
        let request = delete(k, object(k, "shop", Some("Always"), spec));
        assert_denied(&env.decide(&request), ALWAYS_MSG);
        assert!(protection::queries(&request, &env.inputs(&Answers::default())).is_empty(), "{}", k.kind);
    }
}

#[test]
fn cascading_workloads_are_refused_while_replicas_are_above_zero() {
    let env = Env::new(vec![]);
    for k in WORKLOADS {
        let with = |spec: Value| env.decide(&delete(k, object(k, "web", Some("Cascading"), spec)));
        assert_denied(&with(json!({"replicas": 3})), &format!("{CASCADING_MSG} and replicas 3>0"));
        assert_denied(&with(json!({"replicas": 1})), &format!("{CASCADING_MSG} and replicas 1>0"));
        assert_allowed(&with(json!({"replicas": 0})));
        // nil replicas count as 0 (docs/workloads.md#4-3-kinds): nothing to protect.
        assert_allowed(&with(json!({})));
        assert_allowed(&with(json!({"replicas": null})));
    }
}

#[test]
fn cascading_workloads_ignore_owned_pods() {
    // Only spec.replicas counts (docs/workloads.md#4-3-kinds): running pods in the namespace do not block a
    // workload at 0.
    let env = Env::new(vec![pod("shop", "web-abc", "Running", false)]);
    assert_allowed(
        &env.decide(&delete(
            DEPLOYMENT,
            object(DEPLOYMENT, "web", Some("Cascading"), json!({"replicas": 0})),
        )),
    );
}

#[test]
fn cascading_service_and_ingress_are_allowed() {
    let env = Env::new(vec![pod("shop", "web", "Running", false)]);
    for k in [SERVICE, INGRESS_V1, INGRESS_V1BETA1] {
        assert_allowed(&env.decide(&delete(k, object(k, "web", Some("Cascading"), json!({})))));
    }
}

fn namespace(name: &str, label: Option<&str>) -> AdmissionRequest<'static> {
    let mut ns = object(NAMESPACE, name, label, json!({"finalizers": ["kubernetes"]}));
    ns["status"] = json!({"phase": "Active"});
    delete(NAMESPACE, ns)
}

#[test]
fn cascading_namespace_is_refused_while_it_has_active_pods() {
    let env = Env::new(vec![
        pod("shop", "web-1", "Running", false),
        pod("shop", "web-2", "Pending", false),
        pod("shop", "web-3", "Unknown", false),
        pod("shop", "job-1", "Succeeded", false),
        pod("shop", "job-2", "Failed", false),
        pod("shop", "old-1", "Running", true),
        pod("elsewhere", "web-1", "Running", false),
        // Pods come first: Bound PVCs do not change the message.
        pvc("shop", "data", "Bound", false),
    ]);
    assert_denied(
        &env.decide(&namespace("shop", Some("Cascading"))),
        &format!("{CASCADING_MSG} and active pods 3>0"),
    );
}

#[test]
fn cascading_namespace_without_active_pods_is_refused_while_it_has_bound_pvcs() {
    let env = Env::new(vec![
        pod("shop", "job-1", "Succeeded", false),
        pod("shop", "old-1", "Running", true),
        pvc("shop", "db-0", "Bound", false),
        pvc("shop", "db-1", "Bound", false),
        pvc("shop", "scratch", "Pending", false),
        pvc("shop", "lost", "Lost", false),
        pvc("shop", "gone", "Bound", true),
        pvc("elsewhere", "db-0", "Bound", false),
    ]);
    assert_denied(
        &env.decide(&namespace("shop", Some("Cascading"))),
        &format!("{CASCADING_MSG} and \"Bound\" status pvc 2>0"),
    );
}

#[test]
fn cascading_namespace_with_only_finished_pods_and_unbound_pvcs_is_allowed() {
    let env = Env::new(vec![
        pod("shop", "job-1", "Succeeded", false),
        pod("shop", "job-2", "Failed", false),
        pod("shop", "old-1", "Running", true),
        pvc("shop", "scratch", "Pending", false),
        pvc("shop", "lost", "Lost", false),
        pvc("shop", "gone", "Bound", true),
        pod("elsewhere", "web-1", "Running", false),
        pvc("elsewhere", "db-0", "Bound", false),
    ]);
    assert_allowed(&env.decide(&namespace("shop", Some("Cascading"))));
    assert_allowed(&Env::new(vec![]).decide(&namespace("empty", Some("Cascading"))));
}

#[test]
fn cascading_namespace_asks_for_its_pods_and_pvcs() {
    let env = Env::new(vec![]);
    let request = namespace("shop", Some("Cascading"));
    let list = |kind: &str, filter| Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: Some("shop".into()),
        filter,
    };
    // Only what the decision needs: whether one active pod (the API server leaves finished pods
    // out), then one Bound PVC, exists.
    let pods = ListFilter {
        fields: "status.phase!=Succeeded,status.phase!=Failed".into(),
        until_one: Some(Counted::ActivePod),
        ..ListFilter::default()
    };
    let pvcs = ListFilter { until_one: Some(Counted::BoundClaim), ..ListFilter::default() };
    assert_eq!(
        env.queries(webhooks::by_path("/validate-namespace").unwrap(), &request),
        [list("Pod", pods), list("PersistentVolumeClaim", pvcs)]
    );
}

#[test]
fn cascading_crd_is_refused_while_custom_resources_exist_in_any_namespace() {
    let env = Env::new(vec![
        widget("v1", Some("a"), "w1", false),
        widget("v1", Some("b"), "w2", false),
        widget("v1beta1", Some("b"), "w3", false),
        widget("v1", Some("b"), "w4", true),
        // Same kind in another group, another kind in the same group: not this CRD's.
        json!({"apiVersion": "other.io/v1", "kind": "Widget", "metadata": {"name": "x", "namespace": "a"}}),
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "a"}}),
    ]);
    for k in [CRD_V1, CRD_V1BETA1] {
        assert_denied(
            &env.decide(&delete(k, widgets_crd(k, Some("Cascading")))),
            &format!("{CASCADING_MSG} and active CRs 3>0"),
        );
    }
}

#[test]
fn cascading_crd_counts_cluster_scoped_custom_resources() {
    let env = Env::new(vec![widget("v1", None, "cluster-wide", false)]);
    assert_denied(
        &env.decide(&delete(CRD_V1, widgets_crd(CRD_V1, Some("Cascading")))),
        &format!("{CASCADING_MSG} and active CRs 1>0"),
    );
}

#[test]
fn cascading_crd_without_live_custom_resources_is_allowed() {
    let env = Env::new(vec![
        widget("v1", Some("a"), "w4", true),
        json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "namespace": "a"}}),
    ]);
    for k in [CRD_V1, CRD_V1BETA1] {
        assert_allowed(&env.decide(&delete(k, widgets_crd(k, Some("Cascading")))));
    }
}

#[test]
fn cascading_crd_lists_its_storage_version_in_all_namespaces() {
    let env = Env::new(vec![]);
    let request = delete(CRD_V1, widgets_crd(CRD_V1, Some("Cascading")));
    let filter = ListFilter { until_one: Some(Counted::Live), ..ListFilter::default() };
    let expected = Query::List {
        group: "example.com".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        namespace: None,
        filter,
    };
    assert_eq!(
        env.queries(webhooks::by_path("/validate-customresourcedefinition").unwrap(), &request),
        [expected]
    );
}

#[test]
fn crd_of_an_unknown_apiextensions_version_is_not_checked() {
    let k = Kind { version: "v2", ..CRD_V1 };
    let request = delete(k, widgets_crd(k, Some("Always")));
    let env = Env::new(vec![]);
    // Not registered for v2, and the decision itself lets an unknown shape through (as Kruise does).
    assert!(env.decide_all(&request).is_empty());
    assert_allowed(&env.run(webhooks::by_path("/validate-customresourcedefinition").unwrap(), &request));
}

// ---------------------------------------------------------------- failed lookups

fn with_answers(env: &Env, request: &AdmissionRequest, answers: &Answers) -> Decision<'static> {
    let path = if request.kind.kind == "Namespace" {
        "/validate-namespace"
    } else {
        "/validate-customresourcedefinition"
    };
    webhooks::run(webhooks::by_path(path).unwrap(), request, &env.inputs(answers)).decision.into_owned()
}

const HINT: &str = "(the deletion is refused because the protection could not be checked: retry once the cluster answers, or remove the \
                    label policy.kruise.io/delete-protection to delete without the check)";

#[test]
fn a_failed_pod_lookup_refuses_the_namespace_deletion_and_says_what_to_do() {
    let env = Env::new(vec![]);
    let request = namespace("shop", Some("Cascading"));
    let queries = env.queries(webhooks::by_path("/validate-namespace").unwrap(), &request);
    let mut answers = Answers::default();
    answers.insert(queries[0].clone(), Err("the server is currently unable to handle the request".into()));
    answers.insert(queries[1].clone(), Ok(vec![]));
    assert_denied(
        &with_answers(&env, &request, &answers),
        &format!(
            "forbidden by ResourcesProtectionDeletion for list pods error: the server is currently unable to handle the request {HINT}"
        ),
    );
}

#[test]
fn a_failed_pvc_lookup_refuses_once_no_pod_is_active() {
    let env = Env::new(vec![]);
    let request = namespace("shop", Some("Cascading"));
    let queries = env.queries(webhooks::by_path("/validate-namespace").unwrap(), &request);
    let mut answers = Answers::default();
    answers.insert(queries[0].clone(), Ok(vec![]));
    answers.insert(queries[1].clone(), Err("timeout".into()));
    assert_denied(
        &with_answers(&env, &request, &answers),
        &format!("forbidden by ResourcesProtectionDeletion for list pvc error: timeout {HINT}"),
    );
    // Active pods decide before the PVC lookup is read.
    let mut answers = Answers::default();
    answers.insert(queries[0].clone(), Ok(vec![std::sync::Arc::new(pod("shop", "web", "Running", false))]));
    answers.insert(queries[1].clone(), Err("timeout".into()));
    assert_denied(&with_answers(&env, &request, &answers), &format!("{CASCADING_MSG} and active pods 1>0"));
}

#[test]
fn a_failed_custom_resource_lookup_refuses_the_crd_deletion() {
    let env = Env::new(vec![]);
    let request = delete(CRD_V1, widgets_crd(CRD_V1, Some("Cascading")));
    let queries = env.queries(webhooks::by_path("/validate-customresourcedefinition").unwrap(), &request);
    let mut answers = Answers::default();
    answers.insert(queries[0].clone(), Err("widgets.example.com is forbidden".into()));
    assert_denied(
        &with_answers(&env, &request, &answers),
        &format!(
            "failed to list CRs of example.com/v1, Kind=WidgetList: widgets.example.com is forbidden {HINT}"
        ),
    );
}

#[test]
fn a_lookup_the_edge_did_not_perform_refuses_instead_of_allowing() {
    let env = Env::new(vec![pod("shop", "web", "Succeeded", false)]);
    let d = with_answers(&env, &namespace("shop", Some("Cascading")), &Answers::default());
    assert!(!d.allowed);
    let message = d.status.unwrap().message;
    assert!(
        message.starts_with("forbidden by ResourcesProtectionDeletion for list pods error: lookup "),
        "{message}"
    );
    assert!(message.ends_with(HINT), "{message}");
}

// ------------------------------------------------- early exits (workloads.md §4.1, §4.2) and the switch

#[test]
fn an_object_already_being_deleted_is_allowed() {
    let env = Env::new(vec![pod("shop", "web", "Running", false)]);
    for (k, spec) in [
        (NAMESPACE, json!({})),
        (DEPLOYMENT, json!({"replicas": 2})),
        (SERVICE, json!({})),
        (CLONESET, json!({"replicas": 2})),
    ] {
        for label in ["Always", "Cascading"] {
            let mut old = object(k, "shop", Some(label), spec.clone());
            old["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
            let request = delete(k, old);
            assert_allowed(&env.decide(&request));
            assert!(protection::queries(&request, &env.inputs(&Answers::default())).is_empty());
        }
    }
    let mut crd = widgets_crd(CRD_V1, Some("Always"));
    crd["metadata"]["deletionTimestamp"] = json!("2026-11-28T10:00:00Z");
    assert_allowed(&env.decide(&delete(CRD_V1, crd)));
}

#[test]
fn a_delete_without_old_object_is_allowed() {
    let env = Env::new(vec![]);
    for old in [Value::Null, json!({})] {
        for k in [NAMESPACE, CRD_V1, DEPLOYMENT, SERVICE, INGRESS_V1, UNITED_DEPLOYMENT] {
            assert_allowed(&env.decide(&delete(k, old.clone())));
        }
    }
}

#[test]
fn a_subresource_delete_is_allowed() {
    let env = Env::new(vec![]);
    let mut review =
        request_json(DEPLOYMENT, "DELETE", object(DEPLOYMENT, "web", Some("Always"), json!({"replicas": 1})));
    review["request"]["subResource"] = json!("status");
    let request = decode_review(review).unwrap();
    // The registration does not send subresources; the decision also lets them through if sent.
    assert!(env.decide_all(&request).is_empty());
    assert_allowed(&env.run(webhooks::by_path("/validate-apps-deployment").unwrap(), &request));
}

#[test]
fn other_operations_are_allowed_even_if_sent() {
    let env = Env::new(vec![]);
    let old = object(DEPLOYMENT, "web", Some("Always"), json!({"replicas": 1}));
    for op in ["CREATE", "UPDATE", "CONNECT"] {
        let mut review = request_json(DEPLOYMENT, op, old.clone());
        review["request"]["object"] = old.clone();
        let request = decode_review(review).unwrap();
        assert!(env.decide_all(&request).is_empty(), "{op} must not be sent to a protection webhook");
        assert_allowed(&env.run(webhooks::by_path("/validate-apps-deployment").unwrap(), &request));
    }
}

#[test]
fn switched_off_everything_is_allowed_and_nothing_is_looked_up() {
    let mut env = Env::new(vec![pod("shop", "web", "Running", false), widget("v1", Some("a"), "w", false)]);
    env.settings.disabled = vec![Capability::DeleteProtection];
    let requests = [
        namespace("shop", Some("Cascading")),
        namespace("shop", Some("Always")),
        delete(CRD_V1, widgets_crd(CRD_V1, Some("Cascading"))),
        delete(DEPLOYMENT, object(DEPLOYMENT, "web", Some("Cascading"), json!({"replicas": 2}))),
        delete(CLONESET, object(CLONESET, "web", Some("Always"), json!({"replicas": 2}))),
        delete(SERVICE, object(SERVICE, "web", Some("Always"), json!({}))),
    ];
    for request in &requests {
        let d = env.decide(request);
        assert!(d.allowed && d.status.is_none() && d.patch.is_empty(), "{d:?}");
        // The webhook still answers (a configuration may keep calling it) and says why it let this through.
        assert!(
            d.warnings.iter().all(|w| w.contains("--disable-capability delete-protection")),
            "{:?}",
            d.warnings
        );
        assert!(protection::queries(request, &env.inputs(&Answers::default())).is_empty());
    }
    assert_eq!(
        env.decide(&requests[1]).warnings.len(),
        1,
        "the protection-only webhook says it is switched off"
    );
    assert!(Settings::default().enabled(Capability::DeleteProtection), "delete protection is on by default");
}

#[test]
fn malformed_fields_that_are_read_are_bad_requests() {
    let env = Env::new(vec![]);
    let d = env
        .decide(&delete(DEPLOYMENT, object(DEPLOYMENT, "web", Some("Cascading"), json!({"replicas": "3"}))));
    assert_eq!(d.status.as_ref().map(|s| s.code), Some(400), "{d:?}");
    let mut old = object(SERVICE, "web", None, json!({}));
    old["metadata"]["labels"] = json!({"policy.kruise.io/delete-protection": true});
    assert_eq!(env.decide(&delete(SERVICE, old)).status.map(|s| s.code), Some(400));
}

// ------------------------------------------------- registrations (workloads.md §4.3, §4.5)

#[test]
fn each_protected_kind_is_registered_for_delete_only_under_kruises_name_and_path() {
    let expected = [
        ("/validate-namespace", "vnamespace.kb.io", vec![NAMESPACE]),
        ("/validate-customresourcedefinition", "vcustomresourcedefinition.kb.io", vec![CRD_V1, CRD_V1BETA1]),
        ("/validate-apps-deployment", "vbuiltindeployment.kb.io", vec![DEPLOYMENT]),
        ("/validate-apps-replicaset", "vbuiltinreplicaset.kb.io", vec![REPLICASET]),
        ("/validate-apps-statefulset", "vbuiltinstatefulset.kb.io", vec![STATEFULSET]),
        ("/validate-service", "vservice.kb.io", vec![SERVICE]),
        ("/validate-ingress", "vingress.kb.io", vec![INGRESS_V1, INGRESS_V1BETA1]),
        (
            "/validate-apps-kruise-io-v1alpha1-uniteddeployment",
            "vuniteddeployment.kb.io",
            vec![UNITED_DEPLOYMENT],
        ),
    ];
    for (path, name, kinds) in expected {
        let w = webhooks::by_path(path).unwrap_or_else(|| panic!("{path} is not registered"));
        assert_eq!(w.name, name);
        assert_eq!(w.capability, Capability::DeleteProtection);
        assert_eq!(w.failure_policy, FailurePolicy::Fail);
        assert_eq!(w.scope, ObjectScope::DeleteProtected);
        assert!(w.queries.is_some());
        assert!(w.rules.iter().all(|r| r.operations == [Operation::Delete]), "{path}: DELETE only");
        for k in kinds {
            let old = object(k, "x", None, json!({}));
            let request = delete(k, old.clone());
            assert!(w.matches(&request), "{path} must receive DELETE of {} {}", k.kind, k.version);
            let mut create = request_json(k, "CREATE", Value::Null);
            create["request"]["object"] = old;
            assert!(!w.matches(&decode_review(create).unwrap()), "{path} must not receive CREATE");
        }
    }
    // CloneSet and Advanced StatefulSet belong to the in-place validators' paths, not to protection.
    for path in ["/validate-apps-kruise-io-v1alpha1-cloneset", "/validate-apps-kruise-io-statefulset"] {
        assert!(
            webhooks::by_path(path).is_none_or(|w| w.capability != Capability::DeleteProtection),
            "{path}"
        );
    }
}

/// Every (group, version, resource) whose DELETE OpenKruise checks for delete protection, from its
/// source at commit 07169cfac7b9cf7800dda1b8652f850cc3184132 (2026-07-02): the `+kubebuilder:webhook`
/// markers of the handlers that call `pkg/webhook/util/deletionprotection` (builtinworkloads,
/// cloneset, customresourcedefinition, ingress, namespace, service, statefulset, uniteddeployment),
/// with `versions=` as served by `config/crd/bases` (CloneSet, Advanced StatefulSet and
/// UnitedDeployment each serve v1alpha1 and v1beta1).
const KRUISE_PROTECTED: [(&str, &str, &str, &str); 15] = [
    ("", "v1", "Namespace", "namespaces"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions"),
    ("apiextensions.k8s.io", "v1beta1", "CustomResourceDefinition", "customresourcedefinitions"),
    ("apps", "v1", "Deployment", "deployments"),
    ("apps", "v1", "ReplicaSet", "replicasets"),
    ("apps", "v1", "StatefulSet", "statefulsets"),
    ("", "v1", "Service", "services"),
    ("networking.k8s.io", "v1", "Ingress", "ingresses"),
    ("networking.k8s.io", "v1beta1", "Ingress", "ingresses"),
    ("apps.kruise.io", "v1alpha1", "CloneSet", "clonesets"),
    ("apps.kruise.io", "v1beta1", "CloneSet", "clonesets"),
    ("apps.kruise.io", "v1alpha1", "StatefulSet", "statefulsets"),
    ("apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets"),
    ("apps.kruise.io", "v1alpha1", "UnitedDeployment", "uniteddeployments"),
    ("apps.kruise.io", "v1beta1", "UnitedDeployment", "uniteddeployments"),
];

#[test]
fn the_routing_table_protects_every_version_kruise_serves_and_nothing_else() {
    let env = Env::new(vec![]);
    for (group, version, kind, resource) in KRUISE_PROTECTED {
        let k = Kind {
            group,
            version,
            kind,
            resource,
            namespaced: kind != "Namespace" && kind != "CustomResourceDefinition",
        };
        let spec = if kind == "CustomResourceDefinition" {
            widgets_crd(k, None)["spec"].clone()
        } else {
            json!({"replicas": 0})
        };
        let request = delete(k, object(k, "x", Some("Always"), spec));
        // The real table only (not the test stand-in): some webhook receives it, and it is refused.
        let hooks: Vec<&Webhook> = webhooks::matching(&request).collect();
        assert!(!hooks.is_empty(), "DELETE of {kind} {group}/{version} reaches no webhook");
        let decisions: Vec<Decision> = hooks.iter().map(|w| env.run(w, &request)).collect();
        let hook_names: Vec<&str> = hooks.iter().map(|w| w.name).collect();
        assert!(
            decisions.iter().any(|d| !d.allowed),
            "DELETE of {kind} {group}/{version} is not refused by {hook_names:?}"
        );
    }
    // And the other way: every DELETE the table routes is one Kruise protects, but pod DELETEs,
    // which `/validate-pod` checks against PodUnavailableBudgets, not against protection.
    let listed: Vec<(&str, &str, &str)> = KRUISE_PROTECTED.iter().map(|&(g, v, _, r)| (g, v, r)).collect();
    for w in webhooks::WEBHOOKS.iter().filter(|w| w.capability != Capability::PodValidation) {
        for rule in w.rules.iter().filter(|r| r.operations.contains(&Operation::Delete)) {
            for (g, v, r) in rule.groups.iter().flat_map(|g| {
                rule.versions.iter().flat_map(move |v| rule.resources.iter().map(move |r| (*g, *v, *r)))
            }) {
                assert!(
                    listed.contains(&(g, v, r)),
                    "{} routes DELETE of {g}/{v} {r}, which Kruise does not protect",
                    w.name
                );
            }
        }
    }
}

#[test]
fn unprotected_kinds_are_not_sent_and_not_refused() {
    // docs/workloads.md#4-3-kinds, last row: Advanced DaemonSet, DaemonSet, Pod, ... carry no protection.
    let env = Env::new(vec![]);
    let kinds = [
        Kind { group: "apps", version: "v1", kind: "DaemonSet", resource: "daemonsets", namespaced: true },
        Kind {
            group: "apps.kruise.io",
            version: "v1alpha1",
            kind: "DaemonSet",
            resource: "daemonsets",
            namespaced: true,
        },
        Kind {
            group: "apps.kruise.io",
            version: "v1alpha1",
            kind: "BroadcastJob",
            resource: "broadcastjobs",
            namespaced: true,
        },
        Kind { group: "", version: "v1", kind: "Pod", resource: "pods", namespaced: true },
        Kind { group: "batch", version: "v1", kind: "Job", resource: "jobs", namespaced: true },
    ];
    for k in kinds {
        let request = delete(k, object(k, "x", Some("Always"), json!({"replicas": 1})));
        for (name, d) in env.decide_all(&request) {
            assert!(d.allowed, "{name} refused an unprotected {}", k.kind);
        }
        assert_eq!(
            protection::check_delete(&request, &env.inputs(&Answers::default())),
            Ok(Default::default())
        );
    }
}

// ---------------------------------------------------------------- recorded reviews

fn recorded(name: &str) -> Value {
    let path = common::fixtures_dir().join("recorded").join(name);
    serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

fn with_label(mut review: Value, value: &str) -> Value {
    let labels = review["request"]["oldObject"]["metadata"]
        .as_object_mut()
        .unwrap()
        .entry("labels")
        .or_insert(json!({}));
    labels["policy.kruise.io/delete-protection"] = json!(value);
    review
}

#[test]
fn recorded_deployment_delete_with_protection_labels() {
    // A real kubectl delete of a Deployment at replicas 0 (kubewarden's echo policy test data).
    let env = Env::new(vec![]);
    let review = recorded("kubewarden-policies-deployment-delete.json");
    assert_eq!(review["request"]["oldObject"]["spec"]["replicas"], 0);
    let decide = |r: Value| env.decide_all(&decode_review(r).unwrap());
    let all = decide(review.clone());
    assert_eq!(names(&all), ["vbuiltindeployment.kb.io"]);
    assert_allowed(&all[0].1);
    assert_allowed(&decide(with_label(review.clone(), "Cascading"))[0].1);
    assert_denied(&decide(with_label(review.clone(), "Always"))[0].1, ALWAYS_MSG);
    let mut scaled = with_label(review, "Cascading");
    scaled["request"]["oldObject"]["spec"]["replicas"] = json!(5);
    assert_denied(&decide(scaled)[0].1, &format!("{CASCADING_MSG} and replicas 5>0"));
}

#[test]
fn recorded_deletes_of_unprotected_kinds_stay_allowed_even_when_labelled_always() {
    let env = Env::new(vec![]);
    for name in [
        "pepr-clusterrole-delete.json",
        "pepr-servicemonitor-cr-delete.json",
        "pepr-pod-delete.json",
        "openyurt-pod-delete-by-node.json",
    ] {
        let request = decode_review(with_label(recorded(name), "Always")).unwrap();
        for (webhook, d) in env.decide_all(&request) {
            assert!(d.allowed, "{name}: {webhook} refused");
        }
        assert_eq!(
            protection::check_delete(&request, &env.inputs(&Answers::default())),
            Ok(Default::default()),
            "{name}"
        );
    }
}

// ---------------------------------------------------------------- a cluster folder, as dry-run reads it

fn folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/protection")
}

/// The folder's DELETE reviews and their decisions, expected from the folder's contents and spec
/// docs/workloads.md#4-3-kinds and 4-4-messages (see the comments in the YAML files): the denial message, or
/// `None` for allowed.
fn folder_cases() -> [(&'static str, Option<String>); 11] {
    [
        ("namespace-shop-cascading.json", Some(format!("{CASCADING_MSG} and active pods 2>0"))),
        ("namespace-data-cascading.json", Some(format!("{CASCADING_MSG} and \"Bound\" status pvc 2>0"))),
        ("namespace-archive-cascading.json", None),
        ("namespace-archive-always.json", Some(ALWAYS_MSG.to_owned())),
        ("crd-widgets-cascading-v1.json", Some(format!("{CASCADING_MSG} and active CRs 3>0"))),
        ("crd-gadgets-cascading-v1beta1.json", None),
        ("deployment-cascading-replicas-3.json", Some(format!("{CASCADING_MSG} and replicas 3>0"))),
        ("statefulset-cascading-replicas-0.json", None),
        ("uniteddeployment-always.json", Some(ALWAYS_MSG.to_owned())),
        ("service-cascading.json", None),
        ("ingress-v1beta1-always.json", Some(ALWAYS_MSG.to_owned())),
    ]
}

/// The same reviews through the real `dry-run` binary with `--cluster-dir`: the CLI answers the
/// lookups from the folder exactly as the library path above does.
#[test]
fn dry_run_of_delete_reviews_against_the_cluster_folder() {
    let cases = folder_cases();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["dry-run", "--output", "json", "--cluster-dir"])
        .arg(folder().join("cluster"))
        .args(cases.iter().map(|(file, _)| folder().join("reviews").join(file)))
        .output()
        .expect("run dry-run");
    assert_eq!(
        out.status.code(),
        Some(1),
        "some reviews are denied: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let lines: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    assert_eq!(lines.len(), cases.len());
    for ((file, expected), line) in cases.iter().zip(&lines) {
        assert!(line["source"].as_str().is_some_and(|s| s.ends_with(file)), "{file}: {}", line["source"]);
        match expected {
            Some(message) => {
                assert_eq!(line["allowed"], false, "{file}");
                assert_eq!(line["status"]["code"], 403, "{file}");
                assert_eq!(line["status"]["message"], message.as_str(), "{file}");
            }
            None => assert_eq!(line["allowed"], true, "{file}: {}", line["status"]),
        }
    }
}

#[test]
fn delete_reviews_against_a_cluster_folder() {
    let (snapshot, warnings) = files::load_dir(&folder().join("cluster")).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let env = Env::of(snapshot);
    for (file, expected) in folder_cases() {
        let path = folder().join("reviews").join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let docs = files::read_documents(&text).unwrap();
        assert_eq!(docs.len(), 1, "{file}");
        let request = decode_review(docs.into_iter().next().unwrap()).unwrap();
        assert_eq!(request.operation, Operation::Delete, "{file}");
        let all = env.decide_all(&request);
        assert_eq!(all.len(), 1, "{file}: {:?}", names(&all));
        let d = &all[0].1;
        match &expected {
            Some(message) => assert_denied(d, message),
            None => assert_allowed(d),
        }
    }
}

#[test]
fn a_review_without_request_kind_is_judged_by_the_objects_own_kind() {
    // Hand-written reviews sometimes leave `kind` out; the webhook is chosen by `resource`, and the
    // decision falls back to the object's apiVersion/kind.
    let env = Env::new(vec![]);
    for (k, spec, expected) in [
        (DEPLOYMENT, json!({"replicas": 2}), Some(format!("{CASCADING_MSG} and replicas 2>0"))),
        (SERVICE, json!({}), None),
        (INGRESS_V1BETA1, json!({}), None),
    ] {
        let mut review = request_json(k, "DELETE", object(k, "web", Some("Cascading"), spec));
        review["request"].as_object_mut().unwrap().remove("kind");
        let d = env.decide(&decode_review(review).unwrap());
        match expected {
            Some(message) => assert_denied(&d, &message),
            None => assert_allowed(&d),
        }
    }
    let mut review = request_json(DEPLOYMENT, "DELETE", object(DEPLOYMENT, "web", Some("Always"), json!({})));
    review["request"].as_object_mut().unwrap().remove("kind");
    assert_denied(&env.decide(&decode_review(review).unwrap()), ALWAYS_MSG);
}
