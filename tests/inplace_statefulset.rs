//! `/validate-apps-kruise-io-statefulset`: Advanced StatefulSet rules of
//! docs/workloads.md#2-3-statefulset-inplaceonly and §3, with the README's deliberate difference (the
//! InPlaceOnly rule is anchored like CloneSet's).

use crate::inplace_support;

use inplace_support::{Expect, World, check, remove, review, run, set, with};
use kruise_admission::admission::Settings;
use kruise_admission::admission::feature_gates::{FeatureGates, Gate};
use kruise_admission::admission::review::Decision;
use serde_json::{Value, json};

const PATH: &str = "/validate-apps-kruise-io-statefulset";
const IMMUTABLE: &str = "spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', \
'reserveOrdinals', 'lifecycle', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', `volumeClaimTemplates`, \
`VolumeClaimUpdateStrategy` and 'updateStrategy' are forbidden";

fn sts(version: &str) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"), "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "shop", "uid": "sts-uid"},
        "spec": {
            "replicas": 3,
            "serviceName": "db",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
                         "containers": [{"name": "db", "image": "postgres:16", "imagePullPolicy": "Always",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}]}
            },
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"podUpdatePolicy": "InPlaceOnly", "maxUnavailable": 1, "partition": 0}}
        }
    })
}

fn decide(
    version: &str,
    operation: &str,
    new: &Value,
    old: Option<&Value>,
    world: &World,
) -> Decision<'static> {
    run(PATH, review("statefulsets", "StatefulSet", version, operation, new, old), world)
}

type Edit = fn(&mut Value);

const IN_PLACE_ONLY: &str = "invalid template modified with InPlaceOnly strategy: ";

#[test]
fn in_place_only_updates() {
    for version in ["v1alpha1", "v1beta1"] {
        let base = sts(version);
        let cases: &[(&str, Edit, Expect)] = &[
            (
                "image change",
                |o| set(o, "/spec/template/spec/containers/0/image", json!("postgres:17")),
                Expect::Allowed,
            ),
            (
                "template metadata",
                |o| set(o, "/spec/template/metadata/annotations/a", json!("b")),
                Expect::Allowed,
            ),
            (
                "mutable fields",
                |o| {
                    set(o, "/spec/replicas", json!(5));
                    set(o, "/spec/reserveOrdinals", json!([1, "3-4"]));
                    set(o, "/spec/ordinals", json!({"start": 2}));
                    set(
                        o,
                        "/spec/persistentVolumeClaimRetentionPolicy",
                        json!({"whenDeleted": "Delete", "whenScaled": "Retain"}),
                    );
                    set(o, "/spec/updateStrategy/rollingUpdate/partition", json!(2));
                },
                Expect::Allowed,
            ),
            (
                "imagePullPolicy is refused (anchored; Kruise's unanchored rule lets it through)",
                |o| set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent")),
                Expect::Denied(
                    422,
                    &[
                        "invalid template modified with InPlaceOnly strategy: replace /containers/0/imagePullPolicy, currently only image update is allowed for InPlaceOnly",
                    ],
                ),
            ),
            (
                "initContainer image",
                |o| set(o, "/spec/template/spec/initContainers", json!([{"name": "i", "image": "busybox"}])),
                Expect::Denied(422, &[IN_PLACE_ONLY, "add /initContainers"]),
            ),
            (
                "env",
                |o| set(o, "/spec/template/spec/containers/0/env", json!([{"name": "A", "value": "1"}])),
                Expect::Denied(422, &[IN_PLACE_ONLY, "add /containers/0/env,"]),
            ),
            (
                "resources",
                |o| set(o, "/spec/template/spec/containers/0/resources/limits/cpu", json!("2")),
                Expect::Denied(422, &[IN_PLACE_ONLY, "replace /containers/0/resources/limits/cpu"]),
            ),
            (
                "validation runs first: an immutable field hides the InPlaceOnly check",
                |o| {
                    set(o, "/spec/serviceName", json!("other"));
                    set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("Never"));
                },
                Expect::Denied(422, &[IMMUTABLE]),
            ),
            (
                "podManagementPolicy is immutable",
                |o| set(o, "/spec/podManagementPolicy", json!("OrderedReady")),
                Expect::Denied(422, &[IMMUTABLE]),
            ),
        ];
        for (name, edit, expect) in cases {
            let new = with(&base, edit);
            check(
                &format!("{version} {name}"),
                &decide(version, "UPDATE", &new, Some(&base), &World::default()),
                expect,
            );
        }
    }
}

#[test]
fn templates_are_compared_after_kruise_defaults() {
    // The stored template lacks the defaults (gate TemplateNoDefaults, or no defaulting webhook);
    // the new one spells them out. Same pod, so only the image change counts.
    let old = with(&sts("v1beta1"), |o| remove(o, "/spec/template/spec/containers/0/imagePullPolicy"));
    let new = with(&sts("v1beta1"), |o| {
        set(o, "/spec/template/spec/containers/0/image", json!("postgres:17"));
        set(o, "/spec/template/spec/restartPolicy", json!("Always"));
        set(o, "/spec/template/spec/dnsPolicy", json!("ClusterFirst"));
        set(o, "/spec/template/spec/containers/0/terminationMessagePath", json!("/dev/termination-log"));
    });
    check("defaults", &decide("v1beta1", "UPDATE", &new, Some(&old), &World::default()), &Expect::Allowed);
    // A value other than the default is still a change.
    let new = with(&new, |o| set(o, "/spec/template/spec/dnsPolicy", json!("Default")));
    check(
        "non-default",
        &decide("v1beta1", "UPDATE", &new, Some(&old), &World::default()),
        &Expect::Denied(422, &["replace /dnsPolicy"]),
    );
}

#[test]
fn spelling_out_a_default_is_not_a_change() {
    // Stored without podManagementPolicy (no defaulting webhook ran); the update spells out the
    // default, OrderedReady. Not a change of an immutable field; Parallel would be.
    let stored = with(&sts("v1beta1"), |o| {
        remove(o, "/spec/podManagementPolicy");
        set(o, "/spec/updateStrategy/rollingUpdate/podUpdatePolicy", json!("ReCreate"));
    });
    let explicit = with(&stored, |o| set(o, "/spec/podManagementPolicy", json!("OrderedReady")));
    check(
        "default spelled out",
        &decide("v1beta1", "UPDATE", &explicit, Some(&stored), &World::default()),
        &Expect::Allowed,
    );
    let parallel = with(&stored, |o| set(o, "/spec/podManagementPolicy", json!("Parallel")));
    check(
        "real change",
        &decide("v1beta1", "UPDATE", &parallel, Some(&stored), &World::default()),
        &Expect::Denied(422, &[IMMUTABLE]),
    );
}

#[test]
fn vertical_scaling_option() {
    let world = World {
        settings: Settings {
            gates: FeatureGates::from_flags(&[(Gate::InPlaceWorkloadVerticalScaling, true)]),
            ..Settings::default()
        },
        ..World::default()
    };
    let base = sts("v1beta1");
    let new = with(&base, |o| {
        set(o, "/spec/template/spec/containers/0/resources/limits/memory", json!("2Gi"));
        set(o, "/spec/template/spec/containers/0/resources/requests/memory", json!("2Gi"));
    });
    check("resize", &decide("v1beta1", "UPDATE", &new, Some(&base), &world), &Expect::Allowed);
    let new =
        with(&base, |o| set(o, "/spec/template/spec/containers/0/resources/requests/cpu", json!("500m")));
    check(
        "qos change",
        &decide("v1beta1", "UPDATE", &new, Some(&base), &world),
        &Expect::Denied(
            422,
            &[
                IN_PLACE_ONLY,
                "replace /containers/0/resources/requests/cpu (changes the pod QoS class from Guaranteed to Burstable)",
            ],
        ),
    );
}

#[test]
fn create_and_update_validation() {
    let base = sts("v1beta1");
    let cases: &[(&str, Edit, Expect)] = &[
        ("valid", |_| {}, Expect::Allowed),
        (
            "minimal manifest: Kruise's defaults (OrderedReady, RollingUpdate, ReCreate, maxUnavailable 1)",
            |o| {
                remove(o, "/spec/updateStrategy");
                remove(o, "/spec/podManagementPolicy");
                remove(o, "/spec/template/spec/readinessGates");
            },
            Expect::Allowed,
        ),
        (
            "InPlaceIfPossible needs the readiness gate",
            |o| {
                set(o, "/spec/updateStrategy/rollingUpdate/podUpdatePolicy", json!("InPlaceIfPossible"));
                remove(o, "/spec/template/spec/readinessGates");
            },
            Expect::Denied(
                422,
                &[
                    "spec.template.spec.readinessGates: Invalid value: \"null\": must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceIfPossible",
                ],
            ),
        ),
        (
            "InPlaceOnly needs the readiness gate",
            |o| set(o, "/spec/template/spec/readinessGates", json!([{"conditionType": "Other"}])),
            Expect::Denied(
                422,
                &[
                    "spec.template.spec.readinessGates: Invalid value: ",
                    "must contains InPlaceUpdateReady when podUpdatePolicy is InPlaceOnly",
                ],
            ),
        ),
        (
            "ReCreate needs no gate",
            |o| {
                set(o, "/spec/updateStrategy/rollingUpdate/podUpdatePolicy", json!("ReCreate"));
                remove(o, "/spec/template/spec/readinessGates");
            },
            Expect::Allowed,
        ),
        (
            "unknown podUpdatePolicy",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/podUpdatePolicy", json!("Sometimes")),
            Expect::Denied(
                422,
                &[
                    r#"spec.updateStrategy.rollingUpdate.podUpdatePolicy: Invalid value: "Sometimes": must be 'ReCreate', InPlaceIfPossible or 'InPlaceOnly'"#,
                ],
            ),
        ),
        (
            "unknown podManagementPolicy",
            |o| set(o, "/spec/podManagementPolicy", json!("Random")),
            Expect::Denied(
                422,
                &[
                    r#"spec.podManagementPolicy: Invalid value: "Random": must be 'OrderedReady' or 'Parallel'"#,
                ],
            ),
        ),
        (
            "unknown update type",
            |o| set(o, "/spec/updateStrategy/type", json!("Blue")),
            Expect::Denied(
                422,
                &["spec.updateStrategy: Invalid value: ", "must be 'RollingUpdate' or 'OnDelete'"],
            ),
        ),
        (
            "OnDelete with rollingUpdate",
            |o| set(o, "/spec/updateStrategy/type", json!("OnDelete")),
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate: Invalid value: ",
                    "only allowed for updateStrategy 'RollingUpdate'",
                ],
            ),
        ),
        ("OnDelete alone", |o| set(o, "/spec/updateStrategy", json!({"type": "OnDelete"})), Expect::Allowed),
        (
            "negative partition",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/partition", json!(-1)),
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
        ),
        (
            "minReadySeconds over 300",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/minReadySeconds", json!(301)),
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate.minReadySeconds: Invalid value: 301: must be no more than 300 seconds",
                ],
            ),
        ),
        (
            "minReadySeconds negative",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/minReadySeconds", json!(-1)),
            Expect::Denied(422, &["minReadySeconds: Invalid value: -1: must be greater than or equal to 0"]),
        ),
        (
            "maxUnavailable 0%",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("0%")),
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: ",
                    "should not be less than 1",
                ],
            ),
        ),
        (
            "maxUnavailable not a percent",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("many")),
            Expect::Denied(
                422,
                &[
                    r#"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "many": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"#,
                ],
            ),
        ),
        (
            "maxUnavailable 50% with Parallel",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("50%")),
            Expect::Allowed,
        ),
        (
            "maxUnavailable 2 needs Parallel",
            |o| {
                set(o, "/spec/podManagementPolicy", json!("OrderedReady"));
                set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!(2));
            },
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: can only work with Parallel PodManagementPolicyType",
                ],
            ),
        ),
        (
            "scaleStrategy.maxUnavailable needs Parallel",
            |o| {
                set(o, "/spec/podManagementPolicy", json!("OrderedReady"));
                set(o, "/spec/scaleStrategy/maxUnavailable", json!("10%"));
            },
            Expect::Denied(
                422,
                &[
                    r#"spec.scaleStrategy.maxUnavailable: Invalid value: "10%": can only work with Parallel PodManagementPolicyType"#,
                ],
            ),
        ),
        (
            "unorderedUpdate needs Parallel",
            |o| {
                set(o, "/spec/podManagementPolicy", json!("OrderedReady"));
                set(o, "/spec/updateStrategy/rollingUpdate/unorderedUpdate", json!({"priorityStrategy": {}}));
            },
            Expect::Denied(
                422,
                &[
                    "spec.updateStrategy.rollingUpdate.unorderedUpdate: Required value: unorderedUpdate can only work with Parallel PodManagementPolicyType",
                ],
            ),
        ),
        (
            "reserveOrdinals ints and ranges",
            |o| set(o, "/spec/reserveOrdinals", json!([0, 7, "2-4"])),
            Expect::Allowed,
        ),
        (
            "reserveOrdinals negative",
            |o| set(o, "/spec/reserveOrdinals", json!([-1])),
            Expect::Denied(422, &["spec.reserveOrdinals[0]: Invalid value: -1"]),
        ),
        (
            "reserveOrdinals bad range",
            |o| set(o, "/spec/reserveOrdinals", json!([1, "2-"])),
            Expect::Denied(422, &[r#"spec.reserveOrdinals[1]: Invalid value: "2-""#]),
        ),
        (
            "PVC retention values",
            |o| set(o, "/spec/persistentVolumeClaimRetentionPolicy", json!({"whenDeleted": "Keep"})),
            Expect::Denied(
                422,
                &[
                    r#"spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: "Retain", "Delete""#,
                ],
            ),
        ),
        (
            "restartPolicy",
            |o| set(o, "/spec/template/spec/restartPolicy", json!("OnFailure")),
            Expect::Denied(422, &[r#"spec.template.spec.restartPolicy: Unsupported value: "OnFailure""#]),
        ),
        (
            "activeDeadlineSeconds",
            |o| set(o, "/spec/template/spec/activeDeadlineSeconds", json!(5)),
            Expect::Denied(422, &["activeDeadlineSeconds in StatefulSet is not Supported"]),
        ),
        (
            "negative replicas",
            |o| set(o, "/spec/replicas", json!(-2)),
            Expect::Denied(422, &["spec.replicas: Invalid value: -2: must be greater than or equal to 0"]),
        ),
        (
            "no selector",
            |o| remove(o, "/spec/selector"),
            Expect::Denied(422, &["spec.selector: Required value"]),
        ),
        (
            "empty selector",
            |o| set(o, "/spec/selector", json!({"matchLabels": {}})),
            Expect::Denied(422, &["empty selector is invalid for statefulset"]),
        ),
        (
            "selector mismatch",
            |o| set(o, "/spec/template/metadata/labels", json!({"app": "x"})),
            Expect::Denied(422, &["`selector` does not match template `labels`"]),
        ),
    ];
    for (name, edit, expect) in cases {
        let obj = with(&base, edit);
        check(&format!("CREATE {name}"), &decide("v1beta1", "CREATE", &obj, None, &World::default()), expect);
    }
}
