//! `/validate-apps-kruise-io-daemonset`: Advanced DaemonSet rules of
//! docs/workloads.md#2-4-daemonset and §3. No
//! InPlaceOnly; CREATE failures answer 500 and UPDATE failures 422, as Kruise does.

use crate::inplace_support;

use inplace_support::{Expect, World, check, remove, review, run, set, with};
use kruise_admission::admission::review::Decision;
use serde_json::{Value, json};

const PATH: &str = "/validate-apps-kruise-io-daemonset";

fn ds(version: &str) -> Value {
    json!({
        "apiVersion": format!("apps.kruise.io/{version}"), "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "kube-agents", "uid": "ds-uid"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "Standard", "maxUnavailable": 1}}
        }
    })
}

fn decide(version: &str, operation: &str, new: &Value, old: Option<&Value>) -> Decision<'static> {
    run(PATH, review("daemonsets", "DaemonSet", version, operation, new, old), &World::default())
}

type Edit = fn(&mut Value);

#[test]
fn create_validation_answers_500() {
    let base = ds("v1alpha1");
    let cases: &[(&str, Edit, Expect)] = &[
        ("valid", |_| {}, Expect::Allowed),
        (
            "minimal manifest: no strategy, no restartPolicy (defaulted before checking)",
            |o| remove(o, "/spec/updateStrategy"),
            Expect::Allowed,
        ),
        (
            "InPlaceIfPossible forbids surge (Kruise's key is rollingUpdateType)",
            |o| {
                set(
                    o,
                    "/spec/updateStrategy/rollingUpdate",
                    json!({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 0, "maxSurge": 1}),
                )
            },
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.maxSurge: Required value: must be 0 for InPlaceIfPossible type",
                ],
            ),
        ),
        (
            "InPlaceIfPossible with maxUnavailable",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/rollingUpdateType", json!("InPlaceIfPossible")),
            Expect::Allowed,
        ),
        (
            "surge and unavailability together",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxSurge", json!("10%")),
            Expect::Denied(
                500,
                &[
                    r#"spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "10%": may not be set when maxUnavailable is non-zero"#,
                ],
            ),
        ),
        (
            "neither surge nor unavailability",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxUnavailable": 0, "maxSurge": "0%"})),
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
                ],
            ),
        ),
        (
            "surge alone",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxUnavailable": 0, "maxSurge": 1})),
            Expect::Allowed,
        ),
        (
            "maxSurge 1 alone: maxUnavailable is defaulted only when both are unset",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxSurge": 1})),
            Expect::Allowed,
        ),
        (
            "maxSurge 0 alone: nothing is defaulted",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxSurge": 0})),
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
                ],
            ),
        ),
        (
            "maxUnavailable 0 alone: nothing is defaulted",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxUnavailable": 0})),
            Expect::Denied(500, &["cannot be 0 when maxSurge is 0"]),
        ),
        (
            "Surging alone becomes Standard with maxSurge 1, maxUnavailable 0 (v1alpha1)",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"rollingUpdateType": "Surging"})),
            Expect::Allowed,
        ),
        (
            "Surging keeps a set maxUnavailable, and surge is defaulted beside it (v1alpha1)",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/rollingUpdateType", json!("Surging")),
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when maxUnavailable is non-zero",
                ],
            ),
        ),
        (
            "unknown rolling type",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/rollingUpdateType", json!("Bogus")),
            Expect::Denied(
                500,
                &[
                    r#"spec.updateStrategy.rollingUpdate.rollingUpdate.type: Unsupported value: "Bogus": supported values: "Standard", "Surging", "InPlaceIfPossible""#,
                ],
            ),
        ),
        (
            "a `type` key is not Kruise's field and is not read",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/type", json!("Bogus")),
            Expect::Allowed,
        ),
        (
            "maxUnavailable over 100%",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("150%")),
            Expect::Denied(500, &["must not be greater than 100%"]),
        ),
        (
            "maxUnavailable not a percent",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/maxUnavailable", json!("x%")),
            Expect::Denied(500, &["cannot be 0 when maxSurge is 0"]),
        ),
        (
            "a negative percent counts as 0 (Go reads \"-5%\" as no number), so surge alone is fine",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxUnavailable": "-5%", "maxSurge": 1})),
            Expect::Allowed,
        ),
        (
            "an integer string counts as that number and is not a valid percent",
            |o| set(o, "/spec/updateStrategy/rollingUpdate", json!({"maxUnavailable": "5", "maxSurge": 1})),
            Expect::Denied(
                500,
                &[
                    r#"spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "5": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"#,
                    "may not be set when maxUnavailable is non-zero",
                ],
            ),
        ),
        (
            "negative partition",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/partition", json!(-1)),
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.rollingUpdate.partition: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
        ),
        (
            "percentage partition",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/partition", json!("30%")),
            Expect::Allowed,
        ),
        (
            "partition over 100%",
            |o| set(o, "/spec/updateStrategy/rollingUpdate/partition", json!("150%")),
            Expect::Denied(
                500,
                &[
                    r#"spec.updateStrategy.rollingUpdate.rollingUpdate.partition: Invalid value: "150%": must not be greater than 100%"#,
                ],
            ),
        ),
        (
            "RollingUpdate without rollingUpdate is defaulted",
            |o| remove(o, "/spec/updateStrategy/rollingUpdate"),
            Expect::Allowed,
        ),
        ("OnDelete", |o| set(o, "/spec/updateStrategy", json!({"type": "OnDelete"})), Expect::Allowed),
        (
            "unknown strategy type",
            |o| set(o, "/spec/updateStrategy/type", json!("Recreate")),
            Expect::Denied(500, &[r#"spec.updateStrategy.type: Unsupported value: "Recreate""#]),
        ),
        (
            "empty selector",
            |o| set(o, "/spec/selector", json!({})),
            Expect::Denied(
                500,
                &["spec.selector: Invalid value: ", "empty selector is invalid for daemonset"],
            ),
        ),
        (
            "no selector matches nothing",
            |o| remove(o, "/spec/selector"),
            Expect::Denied(500, &["`selector` does not match template `labels`"]),
        ),
        (
            "selector mismatch",
            |o| set(o, "/spec/selector/matchLabels/app", json!("x")),
            Expect::Denied(
                500,
                &[
                    "spec.template.metadata.labels: Invalid value: ",
                    "`selector` does not match template `labels`",
                ],
            ),
        ),
        (
            "restartPolicy Never",
            |o| set(o, "/spec/template/spec/restartPolicy", json!("Never")),
            Expect::Denied(
                500,
                &[
                    r#"spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always""#,
                ],
            ),
        ),
        (
            "activeDeadlineSeconds",
            |o| set(o, "/spec/template/spec/activeDeadlineSeconds", json!(1)),
            Expect::Denied(
                500,
                &[
                    "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in DaemonSet is not Supported",
                ],
            ),
        ),
        (
            "negative minReadySeconds",
            |o| set(o, "/spec/minReadySeconds", json!(-1)),
            Expect::Denied(
                500,
                &["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"],
            ),
        ),
        (
            "negative revisionHistoryLimit",
            |o| set(o, "/spec/revisionHistoryLimit", json!(-1)),
            Expect::Denied(500, &["spec.revisionHistoryLimit: Invalid value: -1"]),
        ),
        (
            "inPlaceUpdate hook",
            |o| set(o, "/spec/lifecycle/inPlaceUpdate", json!({"labelsHandler": {"a": "b"}})),
            Expect::Denied(
                500,
                &["spec.lifecycle.inPlaceUpdate: Forbidden: inPlaceUpdate hook has not supported yet"],
            ),
        ),
        (
            "preDelete hook is fine",
            |o| set(o, "/spec/lifecycle/preDelete", json!({"labelsHandler": {"a": "b"}})),
            Expect::Allowed,
        ),
    ];
    for (name, edit, expect) in cases {
        check(&format!("CREATE {name}"), &decide("v1alpha1", "CREATE", &with(&base, edit), None), expect);
    }
}

#[test]
fn updates_answer_422_and_have_no_in_place_only() {
    let base = ds("v1alpha1");
    let cases: &[(&str, Edit, Expect)] = &[
        (
            "any template change (DaemonSets have no InPlaceOnly)",
            |o| {
                set(o, "/spec/template/spec/containers/0/env", json!([{"name": "A", "value": "1"}]));
                set(o, "/spec/template/spec/containers/0/imagePullPolicy", json!("IfNotPresent"));
            },
            Expect::Allowed,
        ),
        (
            "mutable fields",
            |o| {
                set(o, "/spec/burstReplicas", json!(5));
                set(o, "/spec/minReadySeconds", json!(5));
                set(o, "/spec/revisionHistoryLimit", json!(2));
                set(o, "/spec/updateStrategy/rollingUpdate/partition", json!(3));
            },
            Expect::Allowed,
        ),
        (
            "selector is immutable (Kruise's text, two spaces and all)",
            |o| set(o, "/spec/selector/matchExpressions", json!([{"key": "app", "operator": "Exists"}])),
            Expect::Denied(
                422,
                &[
                    "spec: Forbidden: updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle',  'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden",
                ],
            ),
        ),
        (
            "scaleStrategy is immutable in v1alpha1",
            |o| set(o, "/spec/scaleStrategy", json!({"partitionedScaling": true})),
            Expect::Denied(422, &["updates to daemonset spec for fields other than"]),
        ),
        (
            "validation errors on update are 422",
            |o| set(o, "/spec/minReadySeconds", json!(-3)),
            Expect::Denied(422, &["spec.minReadySeconds: Invalid value: -3"]),
        ),
    ];
    for (name, edit, expect) in cases {
        check(
            &format!("UPDATE {name}"),
            &decide("v1alpha1", "UPDATE", &with(&base, edit), Some(&base)),
            expect,
        );
    }
}

#[test]
fn v1beta1_differences() {
    let base = ds("v1beta1");
    let scaled = with(&base, |o| set(o, "/spec/scaleStrategy", json!({"partitionedScaling": true})));
    check("scaleStrategy is mutable", &decide("v1beta1", "UPDATE", &scaled, Some(&base)), &Expect::Allowed);
    let reselect = with(&base, |o| {
        set(o, "/spec/selector/matchExpressions", json!([{"key": "app", "operator": "Exists"}]))
    });
    check(
        "v1beta1 message",
        &decide("v1beta1", "UPDATE", &reselect, Some(&base)),
        &Expect::Denied(
            422,
            &[
                "spec: Forbidden: updates to daemonset spec for fields other than 'BurstReplicas', 'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', and 'revisionHistoryLimit' are forbidden",
            ],
        ),
    );
    let surging = with(&base, |o| {
        set(
            o,
            "/spec/updateStrategy/rollingUpdate",
            json!({"rollingUpdateType": "Surging", "maxUnavailable": 0, "maxSurge": 1}),
        )
    });
    check(
        "Surging is v1alpha1 only",
        &decide("v1beta1", "CREATE", &surging, None),
        &Expect::Denied(
            500,
            &[
                r#"spec.updateStrategy.rollingUpdate.rollingUpdate.type: Unsupported value: "Surging": supported values: "Standard", "InPlaceIfPossible""#,
            ],
        ),
    );
    let in_place_surge = with(&base, |o| {
        set(
            o,
            "/spec/updateStrategy/rollingUpdate",
            json!({"rollingUpdateType": "InPlaceIfPossible", "maxSurge": 1, "maxUnavailable": 0}),
        )
    });
    check(
        "InPlaceIfPossible forbids surge (v1beta1)",
        &decide("v1beta1", "CREATE", &in_place_surge, None),
        &Expect::Denied(
            500,
            &[
                "spec.updateStrategy.rollingUpdate.maxSurge: Required value: must be 0 for InPlaceIfPossible type",
            ],
        ),
    );
    for (name, rolling_update, expect) in [
        ("maxSurge 1 alone (v1beta1)", json!({"maxSurge": 1}), Expect::Allowed),
        (
            "maxSurge 0 alone (v1beta1)",
            json!({"maxSurge": 0}),
            Expect::Denied(
                500,
                &[
                    "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0",
                ],
            ),
        ),
        (
            "Bogus type (v1beta1)",
            json!({"rollingUpdateType": "Bogus"}),
            Expect::Denied(
                500,
                &[
                    r#"spec.updateStrategy.rollingUpdate.rollingUpdate.type: Unsupported value: "Bogus": supported values: "Standard", "InPlaceIfPossible""#,
                ],
            ),
        ),
    ] {
        let ds = with(&base, |o| set(o, "/spec/updateStrategy/rollingUpdate", rolling_update.clone()));
        check(name, &decide("v1beta1", "CREATE", &ds, None), &expect);
    }
}
