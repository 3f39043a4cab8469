//! `/validate-apps-kruise-io-v1alpha1-cloneset`: every rule of
//! docs/workloads.md#2-2-cloneset-inplaceonly and §3 for CloneSet, one
//! table row per statement, run through the routing table like `serve` and `dry-run` do.

use crate::inplace_support;

use inplace_support::{Expect, World, check, remove, review, run, set, with};
use kruise_admission::admission::Settings;
use kruise_admission::admission::feature_gates::{FeatureGates, Gate};
use kruise_admission::cluster::{ListFilter, Query};
use serde_json::{Value, json};

const PATH: &str = "/validate-apps-kruise-io-v1alpha1-cloneset";
const IMMUTABLE: &str = "spec: Forbidden: updates to cloneset spec for fields other than 'replicas', 'template', 'lifecycle', \
'scaleStrategy', 'updateStrategy', 'minReadySeconds', 'progressDeadlineSeconds', 'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden";

fn cloneset(version: &str) -> Value {
    let strategy = if version == "v1beta1" {
        json!({"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxUnavailable": 1}})
    } else {
        json!({"type": "InPlaceOnly", "maxUnavailable": 1})
    };
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"), "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "shop", "uid": "cs-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.25", "imagePullPolicy": "Always",
                    "env": [{"name": "MODE", "value": "a"}],
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}
            },
            "updateStrategy": strategy
        }
    })
}

fn pod(name: &str, owner_uid: &str, terminating: bool) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop",
            "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web", "uid": owner_uid, "controller": true}]},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}});
    if terminating {
        set(&mut p, "/metadata/deletionTimestamp", json!("2026-01-01T00:00:00Z"));
    }
    p
}

fn update(
    version: &str,
    old: &Value,
    new: &Value,
    world: &World,
) -> kruise_admission::admission::review::Decision<'static> {
    run(PATH, review("clonesets", "CloneSet", version, "UPDATE", new, Some(old)), world)
}

fn create(
    version: &str,
    new: &Value,
    world: &World,
) -> kruise_admission::admission::review::Decision<'static> {
    run(PATH, review("clonesets", "CloneSet", version, "CREATE", new, None), world)
}

type Edit = fn(&mut Value);

#[test]
fn in_place_only_updates_v1alpha1() {
    let base = cloneset("v1alpha1");
    let cases: &[(&str, Edit, Expect)] = &[
        (
            "image change is in place",
            |o| set(o, "/spec/template/spec/containers/0/image", json!("nginx:1.26")),
            Expect::Allowed,
        ),
        (
            "template metadata changes freely",
            |o| {
                set(o, "/spec/template/metadata/labels/version", json!("v2"));
                set(o, "/spec/template/metadata/annotations/note", json!("x"));
            },
            Expect::Allowed,
        ),
        (
            "mutable fields change",
            |o| {
                set(o, "/spec/replicas", json!(5));
                set(o, "/spec/minReadySeconds", json!(5));
                set(o, "/spec/revisionHistoryLimit", json!(3));
                set(o, "/spec/lifecycle", json!({"preDelete": {"finalizersHandler": ["x/y"]}}));
                set(o, "/spec/volumeClaimTemplates", json!([{"metadata": {"name": "data"}}]));
            },
            Expect::Allowed,
        ),
        (
            "imagePullPolicy is not in place (anchored rule)",
            |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
            Expect::Denied(
                422,
                &[
                    "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found replace /containers/0/imagePullPolicy",
                ],
            ),
        ),
        (
            "initContainer image is not in place",
            |o| {
                set(o, "/spec/template/spec/initContainers", json!([{"name": "init", "image": "busybox:2"}]));
            },
            Expect::Denied(422, &["but found add /initContainers"]),
        ),
        (
            "env value change",
            |o| set(o, "/spec/template/spec/containers/0/env/0/value", json!("b")),
            Expect::Denied(422, &["but found replace /containers/0/env/0/value"]),
        ),
        (
            "env removed",
            |o| remove(o, "/spec/template/spec/containers/0/env"),
            Expect::Denied(422, &["but found remove /containers/0/env"]),
        ),
        (
            "env added",
            |o| set(o, "/spec/template/spec/containers/0/env/1", json!({"name": "NEW", "value": "1"})),
            Expect::Denied(422, &["but found add /containers/0/env/1"]),
        ),
        (
            "resources are refused with vertical scaling off",
            |o| set(o, "/spec/template/spec/containers/0/resources/limits/cpu", json!("2")),
            Expect::Denied(422, &["but found replace /containers/0/resources/limits/cpu"]),
        ),
        (
            "adding a container",
            |o| set(o, "/spec/template/spec/containers/1", json!({"name": "side", "image": "envoy"})),
            Expect::Denied(422, &["but found add /containers/1"]),
        ),
        (
            "adding volumes",
            |o| set(o, "/spec/template/spec/volumes", json!([{"name": "v", "emptyDir": {}}])),
            Expect::Denied(422, &["but found add /volumes"]),
        ),
        (
            "first offending change is named (imagePullPolicy before a new env entry)",
            |o| {
                set(o, "/spec/template/spec/containers/0/image", json!("nginx:1.26"));
                set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("Never"));
                set(o, "/spec/template/spec/containers/0/ports", json!([{"containerPort": 80}]));
            },
            Expect::Denied(422, &["but found replace /containers/0/imagePullPolicy"]),
        ),
        (
            "selector is immutable",
            |o| {
                set(
                    o,
                    "/spec/selector",
                    json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
                )
            },
            Expect::Denied(422, &[IMMUTABLE]),
        ),
        (
            "name is immutable",
            |o| set(o, "/metadata/name", json!("other")),
            Expect::Denied(422, &[r#"metadata.name: Invalid value: "other": field is immutable"#]),
        ),
        (
            "several errors are joined",
            |o| {
                set(o, "/spec/replicas", json!(-1));
                set(o, "/spec/template/spec/dnsPolicy", json!("Default"));
            },
            Expect::Denied(
                422,
                &[
                    "[spec: Forbidden: only allowed to update images",
                    "spec.replicas: Invalid value: -1: must be greater than or equal to 0]",
                ],
            ),
        ),
    ];
    for (name, edit, expect) in cases {
        let new = with(&base, edit);
        check(name, &update("v1alpha1", &base, &new, &World::default()), expect);
    }
}

/// Kruise's mutating webhook stored the old template with its defaults and defaults the new one
/// before the validator runs, so spelling a default out changes nothing (the validator defaults
/// both sides, as for Advanced StatefulSet).
#[test]
fn in_place_only_spelled_out_defaults_are_no_change() {
    let base = with(&cloneset("v1alpha1"), |o| {
        set(o, "/spec/template/spec", json!({"containers": [{"name": "c", "image": "nginx:1.25"}]}))
    });
    let cases: &[(&str, Edit, Expect)] = &[
        (
            "terminationMessagePath",
            |o| {
                set(
                    o,
                    "/spec/template/spec/containers/0/terminationMessagePath",
                    json!("/dev/termination-log"),
                )
            },
            Expect::Allowed,
        ),
        (
            "imagePullPolicy Always",
            |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("Always")),
            Expect::Allowed,
        ),
        (
            "restartPolicy Always",
            |o| set(o, "/spec/template/spec/restartPolicy", json!("Always")),
            Expect::Allowed,
        ),
        (
            "all three, with an image change",
            |o| {
                set(o, "/spec/template/spec/containers/0/image", json!("nginx:1.26"));
                set(
                    o,
                    "/spec/template/spec/containers/0/terminationMessagePath",
                    json!("/dev/termination-log"),
                );
                set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("Always"));
                set(o, "/spec/template/spec/restartPolicy", json!("Always"));
            },
            Expect::Allowed,
        ),
        (
            "a value other than the default is a change",
            |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
            Expect::Denied(
                422,
                &[
                    "spec: Forbidden: only allowed to update images in spec for InPlaceOnly, but found replace /containers/0/imagePullPolicy",
                ],
            ),
        ),
    ];
    for (name, edit, expect) in cases {
        let new = with(&base, edit);
        check(name, &update("v1alpha1", &base, &new, &World::default()), expect);
    }
}

#[test]
fn the_new_strategy_decides_whether_the_check_runs() {
    let recreate = with(&cloneset("v1alpha1"), |o| set(o, "/spec/updateStrategy/type", json!("ReCreate")));
    // ReCreate -> InPlaceOnly together with a non-image change: checked (the new strategy counts).
    let new = with(&recreate, |o| {
        set(o, "/spec/updateStrategy/type", json!("InPlaceOnly"));
        set(o, "/spec/template/spec/containers/0/env/0/value", json!("b"));
    });
    check(
        "switch to InPlaceOnly",
        &update("v1alpha1", &recreate, &new, &World::default()),
        &Expect::Denied(422, &["replace /containers/0/env/0/value"]),
    );
    // ReCreate -> InPlaceOnly with an image change: allowed.
    let new = with(&recreate, |o| {
        set(o, "/spec/updateStrategy/type", json!("InPlaceOnly"));
        set(o, "/spec/template/spec/containers/0/image", json!("nginx:2"));
    });
    check("switch with image", &update("v1alpha1", &recreate, &new, &World::default()), &Expect::Allowed);
    // InPlaceOnly -> ReCreate with any template change: allowed.
    let base = cloneset("v1alpha1");
    let new = with(&base, |o| {
        set(o, "/spec/updateStrategy/type", json!("ReCreate"));
        set(o, "/spec/template/spec/containers/0/env/0/value", json!("b"));
    });
    check("switch away", &update("v1alpha1", &base, &new, &World::default()), &Expect::Allowed);
    // InPlaceIfPossible never refuses template changes.
    let possible = with(&base, |o| set(o, "/spec/updateStrategy/type", json!("InPlaceIfPossible")));
    let new = with(&possible, |o| set(o, "/spec/template/spec/containers/0/env/0/value", json!("b")));
    check("InPlaceIfPossible", &update("v1alpha1", &possible, &new, &World::default()), &Expect::Allowed);
}

#[test]
fn vertical_scaling_option_admits_resizes_that_keep_the_qos_class() {
    let world = World {
        settings: Settings {
            gates: FeatureGates::from_flags(&[(Gate::InPlaceWorkloadVerticalScaling, true)]),
            ..Settings::default()
        },
        ..World::default()
    };
    let base = cloneset("v1alpha1");
    let cases: &[(&str, Edit, Expect)] = &[
        (
            "cpu resize keeping Guaranteed",
            |o| {
                set(o, "/spec/template/spec/containers/0/resources/limits/cpu", json!("2"));
                set(o, "/spec/template/spec/containers/0/resources/requests/cpu", json!("2"));
                set(o, "/spec/template/spec/containers/0/image", json!("nginx:1.26"));
            },
            Expect::Allowed,
        ),
        (
            "memory limit alone turns Guaranteed into Burstable",
            |o| set(o, "/spec/template/spec/containers/0/resources/limits/memory", json!("2Gi")),
            Expect::Denied(
                422,
                &[
                    "but found replace /containers/0/resources/limits/memory (changes the pod QoS class from Guaranteed to Burstable)",
                ],
            ),
        ),
        (
            "adding a resource is not a resize",
            |o| set(o, "/spec/template/spec/containers/0/resources/limits/ephemeral-storage", json!("1Gi")),
            Expect::Denied(
                422,
                &["add /containers/0/resources/limits/ephemeral-storage (can not add or remove resources)"],
            ),
        ),
        (
            "other changes are still refused",
            |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
            Expect::Denied(422, &["but found replace /containers/0/imagePullPolicy"]),
        ),
    ];
    for (name, edit, expect) in cases {
        check(name, &update("v1alpha1", &base, &with(&base, edit), &world), expect);
    }
}

#[test]
fn create_and_update_validation() {
    let base = cloneset("v1alpha1");
    let cases: &[(&str, Edit, Expect)] = &[
        ("valid", |_| {}, Expect::Allowed),
        (
            "minimal manifest: strategy defaults as Kruise's mutating webhook sets them",
            |o| {
                remove(o, "/spec/updateStrategy");
                remove(o, "/spec/replicas");
            },
            Expect::Allowed,
        ),
        (
            "maxSurge with InPlaceOnly",
            |o| set(o, "/spec/updateStrategy/maxSurge", json!(1)),
            Expect::Denied(
                422,
                &[
                    r#"spec.updateStrategy.maxSurge: Invalid value: "1": can not use maxSurge with strategy type InPlaceOnly"#,
                ],
            ),
        ),
        (
            "maxSurge percent with InPlaceOnly",
            |o| set(o, "/spec/updateStrategy/maxSurge", json!("10%")),
            Expect::Denied(422, &["can not use maxSurge with strategy type InPlaceOnly"]),
        ),
        (
            "maxSurge with InPlaceIfPossible is fine",
            |o| {
                set(o, "/spec/updateStrategy/type", json!("InPlaceIfPossible"));
                set(o, "/spec/updateStrategy/maxSurge", json!(1));
            },
            Expect::Allowed,
        ),
        (
            "negative replicas",
            |o| set(o, "/spec/replicas", json!(-1)),
            Expect::Denied(422, &["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]),
        ),
        (
            "no selector",
            |o| remove(o, "/spec/selector"),
            Expect::Denied(422, &["spec.selector: Required value"]),
        ),
        (
            "empty selector",
            |o| set(o, "/spec/selector", json!({})),
            Expect::Denied(
                422,
                &["spec.selector: Invalid value: ", "empty selector is invalid for cloneset"],
            ),
        ),
        (
            "selector must match template labels",
            |o| set(o, "/spec/template/metadata/labels", json!({"app": "other"})),
            Expect::Denied(
                422,
                &[
                    "spec.template.metadata.labels: Invalid value: ",
                    "`selector` does not match template `labels`",
                ],
            ),
        ),
        (
            "restartPolicy must be Always",
            |o| set(o, "/spec/template/spec/restartPolicy", json!("Never")),
            Expect::Denied(
                422,
                &[
                    r#"spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always""#,
                ],
            ),
        ),
        (
            "activeDeadlineSeconds",
            |o| set(o, "/spec/template/spec/activeDeadlineSeconds", json!(10)),
            Expect::Denied(
                422,
                &[
                    "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in cloneset is not Supported",
                ],
            ),
        ),
        (
            "unknown strategy type",
            |o| set(o, "/spec/updateStrategy/type", json!("Rolling")),
            Expect::Denied(
                422,
                &[
                    r#"spec.updateStrategy.type: Invalid value: "Rolling": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'"#,
                ],
            ),
        ),
        (
            "negative partition",
            |o| set(o, "/spec/updateStrategy/partition", json!(-1)),
            Expect::Denied(
                422,
                &["spec.updateStrategy.partition: Invalid value: -1: must be greater than or equal to 0"],
            ),
        ),
        ("partition percent", |o| set(o, "/spec/updateStrategy/partition", json!("50%")), Expect::Allowed),
        (
            "partition not a percent",
            |o| set(o, "/spec/updateStrategy/partition", json!("half")),
            Expect::Denied(422, &["failed GetScaledValueFromIntOrPercent for partition"]),
        ),
        (
            "maxUnavailable and maxSurge both below 1",
            |o| set(o, "/spec/updateStrategy/maxUnavailable", json!(0)),
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.maxUnavailable: Invalid value: 0: maxUnavailable and maxSurge should not both be less than 1",
                ],
            ),
        ),
        (
            "percent rounds up",
            |o| set(o, "/spec/updateStrategy/maxUnavailable", json!("1%")),
            Expect::Allowed,
        ),
        (
            "zero replicas may have no unavailability",
            |o| {
                set(o, "/spec/replicas", json!(0));
                set(o, "/spec/updateStrategy/maxUnavailable", json!(0));
            },
            Expect::Allowed,
        ),
        (
            "progressDeadlineSeconds must exceed minReadySeconds",
            |o| {
                set(o, "/spec/minReadySeconds", json!(10));
                set(o, "/spec/progressDeadlineSeconds", json!(10));
            },
            Expect::Denied(
                422,
                &["spec.progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds"],
            ),
        ),
        (
            "progressDeadlineSeconds MaxInt32 means no deadline",
            |o| {
                set(o, "/spec/minReadySeconds", json!(10));
                set(o, "/spec/progressDeadlineSeconds", json!(2147483647));
            },
            Expect::Allowed,
        ),
        (
            "progressDeadlineSeconds negative",
            |o| set(o, "/spec/progressDeadlineSeconds", json!(-1)),
            Expect::Denied(
                422,
                &["spec.progressDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0"],
            ),
        ),
        (
            "replicas of the wrong type is a bad request",
            |o| set(o, "/spec/replicas", json!("three")),
            Expect::Denied(400, &["cannot decode CloneSet"]),
        ),
    ];
    for (name, edit, expect) in cases {
        let obj = with(&base, edit);
        check(&format!("CREATE {name}"), &create("v1alpha1", &obj, &World::default()), expect);
    }
}

#[test]
fn pods_to_delete() {
    let world = World {
        objects: vec![
            pod("web-a", "cs-uid", false),
            pod("web-b", "cs-uid", true),
            pod("web-c", "other-uid", false),
            {
                let mut orphan = pod("web-d", "cs-uid", false);
                remove(&mut orphan, "/metadata/ownerReferences");
                orphan
            },
        ],
        ..World::default()
    };
    let base = cloneset("v1alpha1");
    let listing = |names: Value| with(&base, |o| set(o, "/spec/scaleStrategy/podsToDelete", names));
    let cases: &[(&str, Value, Expect)] = &[
        ("owned pod", json!(["web-a"]), Expect::Allowed),
        (
            "duplicates",
            json!(["web-a", "web-x", "web-a"]),
            Expect::Denied(
                422,
                &["spec.scaleStrategy.podsToDelete: Invalid value: ", "duplicated items [web-a]"],
            ),
        ),
        (
            "missing pod",
            json!(["web-x"]),
            Expect::Denied(
                422,
                &[
                    r#"spec.scaleStrategy.podsToDelete: Invalid value: "web-x": find pod web-x failed: pods "web-x" not found"#,
                ],
            ),
        ),
        ("terminating pod", json!(["web-b"]), Expect::Denied(422, &["find pod web-b already terminating"])),
        (
            "pod of another owner",
            json!(["web-c"]),
            Expect::Denied(422, &["find pod web-c owner is not this CloneSet"]),
        ),
        (
            "pod without a controller",
            json!(["web-d"]),
            Expect::Denied(422, &["find pod web-d owner is not this CloneSet"]),
        ),
        (
            "every bad name is reported",
            json!(["web-c", "web-b"]),
            Expect::Denied(422, &["[", "web-b already terminating", "web-c owner is not this CloneSet"]),
        ),
    ];
    for (name, names, expect) in cases {
        check(&format!("CREATE {name}"), &create("v1alpha1", &listing(names.clone()), &world), expect);
    }
    // Only names new compared with the old list are looked up: a pod already listed (and since
    // deleted) does not block the update.
    let old = listing(json!(["web-gone"]));
    let new = listing(json!(["web-gone", "web-a"]));
    check("UPDATE only new names", &update("v1alpha1", &old, &new, &world), &Expect::Allowed);
    // A lookup that fails denies, saying so.
    let failing = World {
        failing: vec![(
            Query::Get {
                group: String::new(),
                version: "v1".into(),
                kind: "Pod".into(),
                namespace: "shop".into(),
                name: "web-a".into(),
            },
            "the server was unable to return a response in the time allotted".into(),
        )],
        ..World::default()
    };
    check(
        "failed lookup",
        &update("v1alpha1", &old, &new, &failing),
        &Expect::Denied(422, &["find pod web-a failed: the server was unable to return a response"]),
    );
}

/// The lookups the CloneSet webhook asks for `review`.
fn queries_of(review: Value) -> Vec<Query> {
    use kruise_admission::admission::review::decode_review;
    use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, webhooks};
    use kruise_admission::cluster::{Answers, Snapshot};
    let webhook = webhooks::by_path("/validate-apps-kruise-io-v1alpha1-cloneset").unwrap();
    let (snapshot, answers, settings) = (Snapshot::from_objects([]), Answers::default(), Settings::default());
    let clock = FixedClock(time::macros::datetime!(2026-01-01 00:00 UTC));
    let inputs = Inputs {
        cluster: &snapshot,
        answers: &answers,
        clock: &clock,
        random: &SeededRandom::new(1),
        settings: &settings,
    };
    webhooks::queries(webhook, &decode_review(review).unwrap(), &inputs)
}

#[test]
fn many_new_pods_to_delete_cost_one_list_not_one_get_each() {
    // Hostile load, issue 17.3: a thousand new names used to be a thousand GETs to the API server.
    let base = cloneset("v1alpha1");
    let names =
        |prefix: &str, n: usize| Value::from((0..n).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>());
    let listing = |names: Value| with(&base, |o| set(o, "/spec/scaleStrategy/podsToDelete", names));
    let old = listing(names("gone", 1000));
    let new = listing(names("web", 1000));
    let asked = queries_of(review("clonesets", "CloneSet", "v1alpha1", "UPDATE", &new, Some(&old)));
    let pods = ListFilter { labels: "app=web".into(), ..ListFilter::default() };
    let list = Query::List {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: Some("shop".into()),
        filter: pods,
    };
    assert_eq!(asked, [list]);
    // Up to 32 new names keep one GET each (Kruise's per-pod messages, nothing listed).
    let asked = queries_of(review(
        "clonesets",
        "CloneSet",
        "v1alpha1",
        "UPDATE",
        &listing(names("web", 32)),
        Some(&old),
    ));
    assert_eq!(asked.len(), 32);
    assert!(asked.iter().all(|q| matches!(q, Query::Get { .. })));

    // Decided from the one list: the CloneSet's own pods pass, anything else is named.
    let mut objects: Vec<Value> = (0..40).map(|i| pod(&format!("web-{i}"), "cs-uid", false)).collect();
    objects.push(pod("stranger", "other-uid", false));
    let world = World { objects, ..World::default() };
    check("40 owned pods", &update("v1alpha1", &old, &listing(names("web", 40)), &world), &Expect::Allowed);
    let mut forty = names("web", 39);
    forty.as_array_mut().unwrap().extend([json!("stranger"), json!("web-x")]);
    check(
        "40 names, two bad",
        &update("v1alpha1", &old, &listing(forty), &world),
        &Expect::Denied(
            422,
            &[
                "find pod stranger owner is not this CloneSet",
                r#"find pod web-x failed: pods "web-x" not found"#,
            ],
        ),
    );
    // A thousand missing names: a hundred reported by name, the rest counted.
    check(
        "1000 missing",
        &update("v1alpha1", &old, &listing(names("missing", 1000)), &world),
        &Expect::Denied(
            422,
            &[r#"spec.scaleStrategy.podsToDelete: Invalid value: [900 more names]: not checked one by one"#],
        ),
    );
    // A list that fails is one error, not one per name.
    let failing = World {
        failing: vec![(
            Query::List {
                group: String::new(),
                version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("shop".into()),
                filter: ListFilter { labels: "app=web".into(), ..ListFilter::default() },
            },
            "pods is forbidden".into(),
        )],
        ..World::default()
    };
    check(
        "failed list",
        &update("v1alpha1", &old, &listing(names("web", 40)), &failing),
        &Expect::Denied(
            422,
            &[
                r#"spec.scaleStrategy.podsToDelete: Invalid value: [40 new names]: find pods failed: pods is forbidden"#,
            ],
        ),
    );
}

#[test]
fn v1beta1_follows_kruise_master() {
    let base = cloneset("v1beta1");
    let world = World::default();
    // Master's v1beta1 path does not run the InPlaceOnly check (docs/workloads.md#2-2-cloneset-inplaceonly).
    let new = with(&base, |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("Never")));
    check("no InPlaceOnly check", &update("v1beta1", &base, &new, &world), &Expect::Allowed);
    let surge = with(&base, |o| set(o, "/spec/updateStrategy/rollingUpdate/maxSurge", json!(1)));
    check(
        "maxSurge",
        &create("v1beta1", &surge, &world),
        &Expect::Denied(
            422,
            &[
                r#"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "1": can not use maxSurge with podUpdatePolicy InPlaceOnly"#,
            ],
        ),
    );
    // podsToDelete: duplicates only, no lookups.
    let unknown = with(&base, |o| set(o, "/spec/scaleStrategy/podsToDelete", json!(["nope"])));
    check("no lookups", &create("v1beta1", &unknown, &world), &Expect::Allowed);
    let dup = with(&base, |o| set(o, "/spec/scaleStrategy/podsToDelete", json!(["a", "a"])));
    check("duplicates", &create("v1beta1", &dup, &world), &Expect::Denied(422, &["duplicated items [a]"]));
    let bad_type = with(&base, |o| set(o, "/spec/updateStrategy/type", json!("InPlaceOnly")));
    check(
        "type",
        &create("v1beta1", &bad_type, &world),
        &Expect::Denied(422, &[r#"spec.updateStrategy.type: Unsupported value: "InPlaceOnly""#]),
    );
    let reselect = with(&base, |o| set(o, "/spec/selector/matchLabels/tier", json!("x")));
    let reselect = with(&reselect, |o| set(o, "/spec/template/metadata/labels/tier", json!("x")));
    check("immutability", &update("v1beta1", &base, &reselect, &world), &Expect::Denied(422, &[IMMUTABLE]));
}

#[test]
fn delete_on_this_path_is_delete_protection() {
    // Kruise registers vcloneset for DELETE too; that DELETE is delete protection
    // (docs/workloads.md#4-delete-protection), not the workload rules, which never look at it.
    let world = World::default();
    let delete = |old: &Value| {
        let mut r = review("clonesets", "CloneSet", "v1alpha1", "DELETE", old, Some(old));
        r["request"]["object"] = Value::Null;
        run(PATH, r, &world)
    };
    let labelled = |value: &str| {
        with(&cloneset("v1alpha1"), |o| {
            o["metadata"]["labels"] = json!({"app": "web", "policy.kruise.io/delete-protection": value});
        })
    };
    check("unlabelled", &delete(&cloneset("v1alpha1")), &Expect::Allowed);
    check(
        "Always",
        &delete(&labelled("Always")),
        &Expect::Denied(
            403,
            &["forbidden by ResourcesProtectionDeletion for policy.kruise.io/delete-protection=Always"],
        ),
    );
    check(
        "Cascading with replicas",
        &delete(&labelled("Cascading")),
        &Expect::Denied(403, &["Cascading and replicas 3>0"]),
    );
    let scaled_down = with(&labelled("Cascading"), |o| set(o, "/spec/replicas", json!(0)));
    check("Cascading at zero", &delete(&scaled_down), &Expect::Allowed);
}
