//! SidecarSet admission through the routing table, as every edge calls it (`webhooks::run`): the
//! mutating webhook defaults and hashes, the validating webhook applies every rule of
//! docs/sidecarset.md#9-sidecarset-admission with Kruise's messages, and conflicts with other SidecarSets.

use serde_json::{Value, json};

use kruise_admission::admission::feature_gates::{FeatureGates, Gate};
use kruise_admission::admission::review::{Decision, decode_review};
use kruise_admission::admission::webhooks::{self, WEBHOOKS};
use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
use kruise_admission::cluster::{Answers, Snapshot};

const MUTATE: &str = "/mutate-apps-kruise-io-sidecarset";
const VALIDATE: &str = "/validate-apps-kruise-io-sidecarset";

fn review(operation: &str, version: &str, object: &Value, old: Option<&Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "operation": operation,
            "kind": {"group": "apps.kruise.io", "version": version, "kind": "SidecarSet"},
            "resource": {"group": "apps.kruise.io", "version": version, "resource": "sidecarsets"},
            "name": object.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "object": object, "oldObject": old.cloned().unwrap_or(Value::Null),
        }
    })
}

struct Cluster {
    snapshot: Snapshot,
    settings: Settings,
}

impl Cluster {
    fn new(objects: Vec<Value>) -> Self {
        Cluster { snapshot: Snapshot::from_objects(objects), settings: Settings::default() }
    }

    fn call(
        &self,
        path: &str,
        operation: &str,
        object: &Value,
        old: Option<&Value>,
    ) -> (Decision<'static>, Option<Value>) {
        let version = object["apiVersion"].as_str().and_then(|a| a.rsplit('/').next()).unwrap_or("v1beta1");
        let request = decode_review(review(operation, version, object, old)).expect("a well-formed review");
        let webhook = webhooks::by_path(path).expect("registered");
        assert!(webhook.matches(&request), "{path} must receive {operation} {version} sidecarsets");
        let answers = Answers::default();
        let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
        let random = SeededRandom::new(1);
        let inputs = Inputs {
            cluster: &self.snapshot,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &self.settings,
        };
        let outcome = webhooks::run(webhook, &request, &inputs).into_owned();
        (outcome.decision, outcome.mutated)
    }

    /// Mutate (defaults + hashes) as the apiserver would, returning the stored form.
    fn mutate(&self, object: &Value) -> Value {
        let (d, mutated) = self.call(MUTATE, "CREATE", object, None);
        assert!(d.allowed, "mutation refused: {:?}", d.status);
        mutated.expect("a mutating webhook returns the object")
    }

    /// Mutate then validate a CREATE; `Ok` or the denial message.
    fn create(&self, object: &Value) -> Result<(), String> {
        let stored = self.mutate(object);
        self.validate("CREATE", &stored, None)
    }

    fn validate(&self, operation: &str, object: &Value, old: Option<&Value>) -> Result<(), String> {
        let (d, _) = self.call(VALIDATE, operation, object, old);
        if d.allowed {
            return Ok(());
        }
        let status = d.status.expect("a denial has a status");
        assert_eq!(
            status.code, 500,
            "Kruise answers SidecarSet validation failures with 500: {}",
            status.message
        );
        Err(status.message)
    }
}

fn base() -> Value {
    json!({
        "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet",
        "metadata": {"name": "log-agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "containers": [{"name": "agent", "image": "agent:1.0", "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}],
            "volumes": [{"name": "logs", "emptyDir": {}}],
        }
    })
}

/// `base()` with `f` applied.
fn with(f: impl FnOnce(&mut Value)) -> Value {
    let mut v = base();
    f(&mut v);
    v
}

fn kruise_config(whitelist: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kruise-configuration", "namespace": "kruise-system"},
           "data": {"SidecarSet_PatchPodMetadata_WhiteList": whitelist.to_string()}})
}

fn revision(name: &str, sidecarset: &str, custom_version: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
           "metadata": {"name": name, "namespace": "kruise-system",
                        "labels": {"kruise.io/sidecarset-name": sidecarset, "apps.kruise.io/sidecarset-custom-version": custom_version}},
           "data": {"spec": {"$patch": "replace", "containers": []}}, "revision": 1})
}

#[test]
fn both_webhooks_are_registered_like_kruise() {
    let m = webhooks::by_path(MUTATE).unwrap();
    let v = webhooks::by_path(VALIDATE).unwrap();
    assert_eq!(m.name, "msidecarset.kb.io");
    assert_eq!(v.name, "vsidecarset.kb.io");
    for w in [m, v] {
        assert_eq!(w.failure_policy, webhooks::FailurePolicy::Fail);
        assert_eq!(w.capability, webhooks::Capability::SidecarSetAdmission);
        assert_eq!(w.rules[0].versions, ["v1alpha1", "v1beta1"]);
        assert_eq!(w.rules[0].resources, ["sidecarsets"]);
    }
    assert_eq!(WEBHOOKS.iter().filter(|w| w.path.contains("sidecarset")).count(), 2);
}

#[test]
fn create_is_defaulted_hashed_and_validated_and_the_hash_is_kruises() {
    let cluster = Cluster::new(vec![]);
    // The docs/sidecarset.md#8-the-sidecarset-hash vector: `containers: [{name: dns-f, image: dns:1.0}]`,
    // defaulted.
    let object = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "sidecarset1"},
                        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "dns-f", "image": "dns:1.0"}]}});
    let (decision, mutated) = cluster.call(MUTATE, "CREATE", &object, None);
    assert!(decision.allowed);
    assert!(!decision.patch.is_empty());
    let stored = mutated.unwrap();
    let annotations = &stored["metadata"]["annotations"];
    assert_eq!(
        annotations["kruise.io/sidecarset-hash"],
        "6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684"
    );
    assert_eq!(
        annotations["kruise.io/sidecarset-hash-without-image"],
        "82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94"
    );
    assert_eq!(
        stored["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "maxUnavailable": 1, "partition": 0})
    );
    assert_eq!(stored["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(cluster.validate("CREATE", &stored, None), Ok(()));

    // Re-running the mutating webhook on its own output changes nothing (reinvocation).
    let (again, _) = cluster.call(MUTATE, "UPDATE", &stored, Some(&stored));
    assert!(again.allowed && again.patch.is_empty(), "{:?}", again.patch);

    // Applying the patch to the original with an independent RFC 6902 implementation gives the
    // stored object.
    let patch: json_patch::Patch =
        serde_json::from_value(serde_json::to_value(&decision.patch).unwrap()).unwrap();
    let mut applied = object.clone();
    json_patch::patch(&mut applied, &patch).unwrap();
    assert_eq!(applied, stored);
}

#[test]
fn an_image_change_changes_only_the_image_hash() {
    let cluster = Cluster::new(vec![]);
    let a = cluster.mutate(&base());
    let b = cluster.mutate(&with(|v| v["spec"]["containers"][0]["image"] = json!("agent:2.0")));
    let h = |v: &Value, k: &str| v["metadata"]["annotations"][k].as_str().unwrap().to_owned();
    assert_ne!(h(&a, "kruise.io/sidecarset-hash"), h(&b, "kruise.io/sidecarset-hash"));
    assert_eq!(
        h(&a, "kruise.io/sidecarset-hash-without-image"),
        h(&b, "kruise.io/sidecarset-hash-without-image")
    );
    // Volumes do not take part in the hash (docs/sidecarset.md#8-the-sidecarset-hash).
    let c = cluster.mutate(&with(|v| {
        v["spec"]["volumes"][0] = json!({"name": "logs", "hostPath": {"path": "/var/log"}})
    }));
    assert_eq!(h(&a, "kruise.io/sidecarset-hash"), h(&c, "kruise.io/sidecarset-hash"));
}

#[test]
fn v1alpha1_is_served_and_unknown_fields_survive_mutation() {
    let cluster = Cluster::new(vec![]);
    let object = with(|v| {
        v["apiVersion"] = json!("apps.kruise.io/v1alpha1");
        v["spec"]["namespace"] = json!("team-a");
        v["spec"]["someFutureField"] = json!({"x": 1});
        v["spec"]["containers"][0]["someFutureContainerField"] = json!(true);
    });
    let stored = cluster.mutate(&object);
    assert_eq!(stored["spec"]["someFutureField"], json!({"x": 1}));
    assert_eq!(stored["spec"]["namespace"], "team-a");
    // No conversion webhook: the mutating webhook maps `spec.namespace` as Kruise's conversion does.
    assert_eq!(
        stored["spec"]["namespaceSelector"],
        json!({"matchLabels": {"kubernetes.io/metadata.name": "team-a"}})
    );
    assert_eq!(stored["spec"]["containers"][0]["someFutureContainerField"], true);
    assert_eq!(cluster.validate("CREATE", &stored, None), Ok(()));
}

#[test]
fn undecodable_objects_and_unsupported_versions_are_400() {
    let cluster = Cluster::new(vec![]);
    let bad = with(|v| v["spec"]["containers"][0]["ports"] = json!([{"containerPort": "eighty"}]));
    let (d, _) = cluster.call(MUTATE, "CREATE", &bad, None);
    assert_eq!(d.status.unwrap().code, 400);
    let bad = with(|v| v["spec"]["selector"] = json!("app=web"));
    let (d, _) = cluster.call(VALIDATE, "CREATE", &bad, None);
    assert_eq!(d.status.unwrap().code, 400);
}

/// One row: a SidecarSet (mutated first unless `raw`), the cluster, and the exact message or `None`.
struct Case {
    what: &'static str,
    object: Value,
    cluster: Vec<Value>,
    raw: bool,
    expect: Option<&'static str>,
}

fn case(what: &'static str, object: Value, expect: Option<&'static str>) -> Case {
    Case { what, object, cluster: vec![], raw: false, expect }
}

fn run_cases(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for c in cases {
        let cluster = Cluster::new(c.cluster);
        let got = if c.raw { cluster.validate("CREATE", &c.object, None) } else { cluster.create(&c.object) };
        let want = c.expect.map_or(Ok(()), |m| Err(m.to_owned()));
        if got != want {
            failures.push(format!("{}:\n  got  {got:?}\n  want {want:?}", c.what));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn validation_table_metadata_selectors_and_containers() {
    run_cases(vec![
        case("a valid SidecarSet", base(), None),
        case(
            "name with an underscore",
            with(|v| v["metadata"]["name"] = json!("log_agent")),
            Some(
                r#"metadata.name: Invalid value: "log_agent": sidecarset name must consist of alphanumeric characters or '-' (e.g. 'example-com', regex used for validation is '^[a-zA-Z0-9\-]+$')"#,
            ),
        ),
        case(
            "name longer than 63",
            with(|v| v["metadata"]["name"] = json!("a".repeat(64))),
            Some(
                "metadata.name: Invalid value: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": must be no more than 63 characters",
            ),
        ),
        case(
            "upper case is fine in a SidecarSet name",
            with(|v| v["metadata"]["name"] = json!("Log-Agent")),
            None,
        ),
        case(
            "annotations are limited to 256 KiB",
            with(|v| v["metadata"]["annotations"] = json!({"example.com/blob": "x".repeat(256 * 1024)})),
            Some("metadata.annotations: Too long: may not be more than 262144 bytes"),
        ),
        case(
            "label values are checked",
            with(|v| v["metadata"]["labels"] = json!({"team": "a b"})),
            Some(
                r#"metadata.labels: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"#,
            ),
        ),
        case(
            "cluster-scoped: no namespace",
            with(|v| v["metadata"]["namespace"] = json!("default")),
            Some("metadata.namespace: Forbidden: not allowed on this type"),
        ),
        case(
            "selector required",
            with(|v| v["spec"].as_object_mut().unwrap().remove("selector").map(drop).unwrap_or(())),
            Some("spec.selector: Required value: no selector defined for SidecarSet"),
        ),
        case(
            "selector not empty",
            with(|v| v["spec"]["selector"] = json!({})),
            Some("spec.selector: Invalid value: {}: empty selector is not valid for sidecarset."),
        ),
        case(
            "In needs values",
            with(|v| v["spec"]["selector"] = json!({"matchExpressions": [{"key": "app", "operator": "In"}]})),
            Some(
                "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
        ),
        case(
            "namespaceSelector, when set, not empty",
            with(|v| v["spec"]["namespaceSelector"] = json!({})),
            Some("spec.namespaceSelector: Invalid value: {}: empty selector is not valid for sidecarset."),
        ),
        case(
            "at least one container",
            with(|v| v["spec"]["containers"] = json!([])),
            Some("spec: Required value: no initContainer or container defined for SidecarSet"),
        ),
        case(
            "an init container alone is enough",
            with(|v| {
                v["spec"]["initContainers"] = v["spec"]["containers"].clone();
                v["spec"]["containers"] = json!([]);
            }),
            None,
        ),
        Case {
            what: "podInjectPolicy must be Before/After",
            raw: true,
            object: with(|v| {
                v["spec"]["containers"][0]["podInjectPolicy"] = json!("Middle");
                v["spec"]["containers"][0]["shareVolumePolicy"] = json!({"type": "disabled"});
                v["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
                v["spec"]["containers"][0]["terminationMessagePolicy"] = json!("File");
            }),
            cluster: vec![],
            expect: Some(
                r#"spec.container.podInjectPolicy: Invalid value: "Middle": unsupported pod inject policy"#,
            ),
        },
        case(
            "shareVolumePolicy enabled/disabled",
            with(|v| v["spec"]["containers"][0]["shareVolumePolicy"] = json!({"type": "sometimes"})),
            Some(
                r#"spec.container.shareVolumePolicy: Invalid value: {"type":"sometimes"}: unsupported share volume policy"#,
            ),
        ),
        case(
            "a native sidecar cannot be rolled out in place",
            with(|v| {
                v["spec"]["initContainers"] =
                    json!([{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always"}])
            }),
            Some(
                "spec.updateStrategy: Required value: The initContainer in-place upgrade is not currently supported.",
            ),
        ),
        case(
            "a native sidecar with NotUpdate is fine",
            with(|v| {
                v["spec"]["initContainers"] =
                    json!([{"name": "proxy", "image": "proxy:1", "restartPolicy": "Always"}]);
                v["spec"]["updateStrategy"] = json!({"type": "NotUpdate"});
            }),
            None,
        ),
        case(
            "image required",
            with(|v| v["spec"]["containers"][0]["image"] = json!("")),
            Some("spec.containers[0].image: Required value"),
        ),
        case(
            "container name is a DNS label",
            with(|v| v["spec"]["containers"][0]["name"] = json!("Agent")),
            Some(
                r#"spec.containers[0].name: Invalid value: "Agent": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            ),
        ),
        case(
            "container and init container share a name",
            with(|v| v["spec"]["initContainers"] = json!([{"name": "agent", "image": "init:1"}])),
            Some(r#"spec.initContainers[0].name: Duplicate value: "agent""#),
        ),
        case(
            "port range",
            with(|v| v["spec"]["containers"][0]["ports"] = json!([{"containerPort": 70000}])),
            Some(
                "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            ),
        ),
        case(
            "port protocol",
            with(|v| {
                v["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "protocol": "HTTP"}])
            }),
            Some(
                r#"spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP""#,
            ),
        ),
        case(
            "duplicate port names",
            with(|v| {
                v["spec"]["containers"][0]["ports"] =
                    json!([{"name": "http", "containerPort": 80}, {"name": "http", "containerPort": 81}])
            }),
            Some(r#"spec.containers[0].ports[1].name: Duplicate value: "http""#),
        ),
        case(
            "env names",
            with(|v| v["spec"]["containers"][0]["env"] = json!([{"name": "9LIVES", "value": "x"}])),
            Some(
                r#"spec.containers[0].env[0].name: Invalid value: "9LIVES": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"#,
            ),
        ),
        case(
            "mounts name a declared volume",
            with(|v| v["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!("cache")),
            Some(r#"spec.containers[0].volumeMounts[0].name: Not found: "cache""#),
        ),
        case(
            "mount path required",
            with(|v| v["spec"]["containers"][0]["volumeMounts"][0]["mountPath"] = json!("")),
            Some("spec.containers[0].volumeMounts[0].mountPath: Required value"),
        ),
        case(
            "volume names are DNS labels",
            with(|v| {
                v["spec"]["volumes"][0]["name"] = json!("Logs");
                v["spec"]["containers"][0]["volumeMounts"][0]["name"] = json!("Logs");
            }),
            Some(
                r#"spec.volumes[0].name: Invalid value: "Logs": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            ),
        ),
        case(
            "exactly one volume source",
            with(|v| v["spec"]["volumes"][0]["configMap"] = json!({"name": "c"})),
            Some("spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type"),
        ),
        case(
            "several errors are joined",
            with(|v| {
                v["spec"]["containers"][0]["image"] = json!("");
                v["spec"]["selector"] = json!({});
            }),
            Some(
                "[spec.selector: Invalid value: {}: empty selector is not valid for sidecarset., spec.containers[0].image: Required value]",
            ),
        ),
    ]);
}

#[test]
fn validation_table_strategies_transfer_env_and_resources_policy() {
    run_cases(vec![
        case(
            "revision needs a name or a custom version",
            with(|v| v["spec"]["injectionStrategy"] = json!({"revision": {"policy": "Always"}})),
            Some(
                r#"revision: Invalid value: {"policy":"Always"}: revisionName and customVersion cannot be empty simultaneously"#,
            ),
        ),
        case(
            "revisionName must exist",
            with(|v| v["spec"]["injectionStrategy"] = json!({"revision": {"revisionName": "log-agent-abc"}})),
            Some(
                r#"revision: Invalid value: "null": Cannot find specific ControllerRevision, err: controllerrevisions.apps "log-agent-abc" not found"#,
            ),
        ),
        Case {
            what: "revisionName found in the Kruise namespace",
            object: with(|v| {
                v["spec"]["injectionStrategy"] = json!({"revision": {"revisionName": "log-agent-abc"}})
            }),
            cluster: vec![revision("log-agent-abc", "log-agent", "v1")],
            raw: false,
            expect: None,
        },
        Case {
            what: "customVersion must exist for this SidecarSet",
            object: with(|v| v["spec"]["injectionStrategy"] = json!({"revision": {"customVersion": "v2"}})),
            cluster: vec![revision("other-abc", "other", "v2"), revision("log-agent-abc", "log-agent", "v1")],
            raw: false,
            expect: Some(
                r#"revision: Invalid value: "null": Cannot find specific ControllerRevision, err: ControllerRevision.apps "log-agent" not found"#,
            ),
        },
        Case {
            what: "customVersion found",
            object: with(|v| {
                v["spec"]["injectionStrategy"] =
                    json!({"revision": {"customVersion": "v1", "policy": "Partial"}})
            }),
            cluster: vec![revision("log-agent-abc", "log-agent", "v1")],
            raw: false,
            expect: None,
        },
        Case {
            what: "revision policy Always/Partial",
            object: with(|v| {
                v["spec"]["injectionStrategy"] =
                    json!({"revision": {"revisionName": "log-agent-abc", "policy": "Sometimes"}})
            }),
            cluster: vec![revision("log-agent-abc", "log-agent", "v1")],
            raw: false,
            expect: Some(
                r#"revision.policy: Invalid value: {"revisionName":"log-agent-abc","policy":"Sometimes"}: Invalid policy Sometimes, supported: [Always, Partial]"#,
            ),
        },
        case(
            "partition and selector together",
            with(|v| {
                v["spec"]["updateStrategy"] =
                    json!({"partition": 2, "selector": {"matchLabels": {"canary": "true"}}})
            }),
            Some(
                r#"updateStrategy: Invalid value: "{\"type\":\"RollingUpdate\",\"selector\":{\"matchLabels\":{\"canary\":\"true\"}},\"partition\":2,\"maxUnavailable\":1}": Partition and Selector cannot be used together"#,
            ),
        ),
        case(
            "a zero partition with a selector is fine",
            with(|v| {
                v["spec"]["updateStrategy"] =
                    json!({"partition": 0, "selector": {"matchLabels": {"canary": "true"}}})
            }),
            None,
        ),
        case(
            "partition percent",
            with(|v| v["spec"]["updateStrategy"] = json!({"partition": "5"})),
            Some(
                r#"spec.updateStrategy.partition: Invalid value: "5": a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"#,
            ),
        ),
        case(
            "maxUnavailable not negative",
            with(|v| v["spec"]["updateStrategy"] = json!({"maxUnavailable": -1})),
            Some("spec.updateStrategy.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
        ),
        case(
            "scatter terms unique",
            with(|v| {
                v["spec"]["updateStrategy"] =
                    json!({"scatterStrategy": [{"key": "a", "value": "b"}, {"key": "a", "value": "b"}]})
            }),
            Some("spec.updateStrategy.scatterStrategy: Required value: duplicated key=a value=b"),
        ),
        case(
            "priority: weight or order",
            with(|v| {
                v["spec"]["updateStrategy"] = json!({"priorityStrategy": {
                    "weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"a": "b"}}}],
                    "orderPriority": [{"orderedKey": "k"}]}})
            }),
            Some(
                "spec.updateStrategy.priorityStrategy: Required value: only one of weightPriority and orderPriority can be used",
            ),
        ),
        case(
            "priority weights within 0-100",
            with(
                |v| v["spec"]["updateStrategy"] = json!({"priorityStrategy": {"weightPriority": [{"weight": 101, "matchSelector": {"matchLabels": {"a": "b"}}}]}}),
            ),
            Some(
                "spec.updateStrategy.priorityStrategy: Required value: weight must be valid number in the range 1-100",
            ),
        ),
        case(
            "priority weight terms need a selector",
            with(|v| {
                v["spec"]["updateStrategy"] =
                    json!({"priorityStrategy": {"weightPriority": [{"weight": 10, "matchSelector": {}}]}})
            }),
            Some("spec.updateStrategy.priorityStrategy: Required value: selector can not be empty"),
        ),
        case(
            "priority order keys not empty",
            with(|v| {
                v["spec"]["updateStrategy"] =
                    json!({"priorityStrategy": {"orderPriority": [{"orderedKey": ""}]}})
            }),
            Some("spec.updateStrategy.priorityStrategy: Required value: order key can not be empty"),
        ),
        case(
            "scatter keys not empty",
            with(|v| v["spec"]["updateStrategy"] = json!({"scatterStrategy": [{"key": "", "value": "b"}]})),
            Some("spec.updateStrategy.scatterStrategy: Required value: key should not be empty"),
        ),
        case(
            "update selector is validated",
            with(|v| v["spec"]["updateStrategy"] = json!({"selector": {}})),
            Some(
                "spec.updateStrategy.selector: Invalid value: {}: empty selector is not valid for sidecarset.",
            ),
        ),
        case(
            "NotUpdate skips the rolling-update checks",
            with(|v| v["spec"]["updateStrategy"] = json!({"type": "NotUpdate", "partition": "5"})),
            None,
        ),
        case(
            "transferEnv: a label path",
            with(
                |v| v["spec"]["containers"][0]["transferEnv"] = json!([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['app-container']"}}, "envName": "TZ"}]),
            ),
            None,
        ),
        case(
            "transferEnv: metadata.name fails the conversion",
            with(
                |v| v["spec"]["containers"][0]["transferEnv"] = json!([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.name"}}, "envName": "TZ"}]),
            ),
            Some(
                r#"spec[0].transferEnv.fieldRef.fieldPath: Invalid value: "metadata.name": error converting fieldPath: field label not supported: metadata.name"#,
            ),
        ),
        case(
            "transferEnv: apiVersion v1 only",
            with(
                |v| v["spec"]["containers"][0]["transferEnv"] = json!([{"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.labels['a']"}}}]),
            ),
            Some(
                r#"spec[0].transferEnv.fieldRef.fieldPath: Invalid value: "metadata.labels['a']": error converting fieldPath: unsupported pod version: v2"#,
            ),
        ),
        case(
            "transferEnv: other subscripted paths",
            with(|v| {
                v["spec"]["containers"][0]["transferEnv"] =
                    json!([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "spec.containers['a']"}}}])
            }),
            Some(
                r#"spec[0].transferEnv.fieldRef.fieldPath: Invalid value: "spec.containers['a']": error converting fieldPath: field path not supported: spec.containers"#,
            ),
        ),
        case(
            "resourcesPolicy is valid",
            with(|v| {
                v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "sum", "targetContainersNameRegex": "^app$",
                    "resourcesExpr": {"limits": {"cpu": "max(cpu*50%, 50m)", "memory": "200Mi"}}})
            }),
            None,
        ),
        case(
            "resourcesPolicy with resources",
            with(|v| {
                v["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}});
                v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "sum", "targetContainersNameRegex": ".*", "resourcesExpr": {"limits": {"cpu": "cpu"}}});
            }),
            Some(
                r#"spec[0].resourcesPolicy: Invalid value: {"targetContainersMode":"sum","targetContainersNameRegex":".*","resourcesExpr":{"limits":{"cpu":"cpu"}}}: resourcesPolicy and resources cannot be configured together"#,
            ),
        ),
        case(
            "resourcesPolicy regex required",
            with(|v| {
                v["spec"]["containers"][0]["resourcesPolicy"] =
                    json!({"targetContainersMode": "max", "resourcesExpr": {"requests": {"cpu": "cpu"}}})
            }),
            Some("spec[0].resourcesPolicy.targetContainersNameRegex: Required value: invalid empty regex"),
        ),
        case(
            "resourcesPolicy needs an expression",
            with(
                |v| v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "max", "targetContainersNameRegex": ".*", "resourcesExpr": {}}),
            ),
            Some(
                "spec[0].resourcesPolicy.resourcesExpr: Invalid value: {}: at least one of limits or requests must be configured",
            ),
        ),
        case(
            "resourcesPolicy expression must parse",
            with(
                |v| v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "max", "targetContainersNameRegex": ".*", "resourcesExpr": {"requests": {"memory": "cpu + 1"}}}),
            ),
            Some(
                r#"spec[0].resourcesPolicy.resourcesExpr.requests.memory: Invalid value: "cpu + 1": invalid expression: undefined variable "cpu""#,
            ),
        ),
        // Before: the two expression parsers recursed once per parenthesis, and 20,000 of them
        // overflowed the worker's stack (the process aborts). Now nesting stops at 64 levels.
        {
            let deep = format!("{}cpu{}", "(".repeat(20_000), ")".repeat(20_000));
            let expect = format!(
                "spec[0].resourcesPolicy.resourcesExpr.requests.cpu: Invalid value: {deep:?}: invalid expression: parentheses and calls nest more than 64 deep"
            );
            case(
                "resourcesPolicy expression nested 20,000 deep",
                with(
                    |v| v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "max", "targetContainersNameRegex": ".*", "resourcesExpr": {"requests": {"cpu": deep}}}),
                ),
                Some(Box::leak(expect.into_boxed_str())),
            )
        },
        case(
            "resourcesPolicy on an ordinary init container",
            with(|v| {
                v["spec"]["initContainers"] = json!([{"name": "init", "image": "init:1", "resourcesPolicy":
                    {"targetContainersMode": "sum", "targetContainersNameRegex": ".*", "resourcesExpr": {"limits": {"cpu": "cpu"}}}}])
            }),
            Some(
                r#"spec[0].resourcesPolicy: Invalid value: {"targetContainersMode":"sum","targetContainersNameRegex":".*","resourcesExpr":{"limits":{"cpu":"cpu"}}}: resourcesPolicy is only supported for containers with RestartPolicy Always"#,
            ),
        ),
    ]);
}

#[test]
fn validation_table_patch_pod_metadata_and_canaries() {
    let patch = |policy: &str| json!([{"annotations": {"example.com/sidecar-config": "{\"a\":1}"}, "patchPolicy": policy}]);
    let allow_all = kruise_config(json!({"rules": [{"allowedAnnotationKeyExprs": ["^example\\.com/.*$"]}]}));
    run_cases(vec![
        case(
            "patchPodMetadata needs a whitelist",
            with(|v| v["spec"]["patchPodMetadata"] = patch("Overwrite")),
            Some("spec.patchPodMetadata: Required value: SidecarSet patch metadata whitelist not found"),
        ),
        Case {
            what: "whitelisted key",
            object: with(|v| v["spec"]["patchPodMetadata"] = patch("MergePatchJson")),
            cluster: vec![allow_all.clone()],
            raw: false,
            expect: None,
        },
        Case {
            what: "key outside the whitelist",
            object: with(|v| v["spec"]["patchPodMetadata"] = json!([{"annotations": {"other.io/x": "y"}}])),
            cluster: vec![allow_all.clone()],
            raw: false,
            expect: Some(
                "spec.patchPodMetadata: Required value: sidecarSet patch metadata annotation(other.io/x) is not allowed",
            ),
        },
        Case {
            what: "whitelist rules select SidecarSets by label",
            object: with(|v| v["spec"]["patchPodMetadata"] = patch("Retain")),
            cluster: vec![kruise_config(
                json!({"rules": [{"selector": {"matchLabels": {"team": "infra"}}, "allowedAnnotationKeyExprs": [".*"]}]}),
            )],
            raw: false,
            expect: Some(
                "spec.patchPodMetadata: Required value: sidecarSet patch metadata annotation is not allowed",
            ),
        },
        Case {
            what: "patch without annotations",
            object: with(|v| v["spec"]["patchPodMetadata"] = json!([{"patchPolicy": "Retain"}])),
            cluster: vec![allow_all.clone()],
            raw: false,
            expect: Some("spec.patchPodMetadata: Required value: no annotations defined for SidecarSet"),
        },
        Case {
            what: "patch without a policy (not defaulted)",
            object: with(|v| {
                v["spec"]["patchPodMetadata"] = json!([{"annotations": {"example.com/a": "b"}}]);
                v["spec"]["containers"][0]["podInjectPolicy"] = json!("BeforeAppContainer");
                v["spec"]["containers"][0]["shareVolumePolicy"] = json!({"type": "disabled"});
                v["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
                v["spec"]["containers"][0]["terminationMessagePolicy"] = json!("File");
            }),
            cluster: vec![allow_all.clone()],
            raw: true,
            expect: Some(
                "spec.patchPodMetadata: Required value: no patchPolicy defined for patchPodMetadata",
            ),
        },
        Case {
            what: "the same key twice",
            object: with(|v| {
                v["spec"]["patchPodMetadata"] =
                    json!([{"annotations": {"example.com/a": "1"}}, {"annotations": {"example.com/a": "2"}}])
            }),
            cluster: vec![allow_all.clone()],
            raw: false,
            expect: Some(
                "spec.patchPodMetadata: Required value: patch annotation[example.com/a] already exist",
            ),
        },
    ]);
}

/// Canary messages carry the whole annotation map (hashes included), so these check the details.
#[test]
fn canary_rules() {
    let canary = |base: &str, strategy: &str| {
        with(|v| {
            v["metadata"]["name"] = json!("log-agent-canary");
            v["metadata"]["annotations"] =
                json!({"apps.kruise.io/sidecarset-canary": "true", "apps.kruise.io/sidecarset-base": base});
            v["spec"]["updateStrategy"] = json!({"type": strategy});
        })
    };
    let details = |r: Result<(), String>| -> Vec<String> {
        let msg = r.err().unwrap_or_default();
        msg.trim_matches(['[', ']'])
            .split(", metadata: ")
            .map(|e| e.split_once("\"}: ").map(|(_, detail)| detail.to_owned()).unwrap_or_default())
            .collect()
    };
    let empty = Cluster::new(vec![]);
    let itself = empty.create(&canary("log-agent-canary", "NotUpdate"));
    assert_eq!(
        details(itself),
        [
            "base sidecarSet cannot be itself",
            r#"fetch base sidecarSet[log-agent-canary] failed: sidecarsets.apps.kruise.io "log-agent-canary" not found"#
        ]
    );
    let base_stored = empty.mutate(&base());
    let with_base = Cluster::new(vec![base_stored.clone()]);
    assert_eq!(
        with_base.create(&canary("log-agent", "NotUpdate")),
        Ok(()),
        "the canary's conflicts with its base are ignored"
    );
    let rolling = with_base.create(&canary("log-agent", "RollingUpdate"));
    let message = rolling.clone().unwrap_err();
    assert!(
        message.starts_with(
            r#"metadata: Invalid value: map[string]string{"apps.kruise.io/sidecarset-base":"log-agent", "apps.kruise.io/sidecarset-canary":"true", "kruise.io/sidecarset-hash":""#
        ),
        "{message}"
    );
    assert_eq!(details(rolling), ["RollingUpdate is not supported for canary sidecarSet"]);
    let mut base_is_canary = base_stored.clone();
    base_is_canary["metadata"]["annotations"]["apps.kruise.io/sidecarset-canary"] = json!("true");
    base_is_canary["metadata"]["annotations"]["apps.kruise.io/sidecarset-base"] = json!("x");
    let c = Cluster::new(vec![base_is_canary]);
    assert_eq!(details(c.create(&canary("log-agent", "NotUpdate"))), ["base sidecarSet cannot be canary"]);
    // UPDATE: the base annotation is immutable.
    let other_base = with(|v| v["metadata"]["name"] = json!("other-base"));
    let c = Cluster::new(vec![base_stored.clone(), with_base.mutate(&other_base)]);
    let old = c.mutate(&canary("log-agent", "NotUpdate"));
    let new = c.mutate(&canary("other-base", "NotUpdate"));
    assert_eq!(
        details(c.validate("UPDATE", &new, Some(&old))),
        ["annotations[apps.kruise.io/sidecarset-base] is immutable"]
    );
}

#[test]
fn update_keeps_container_names_and_upgrade_types() {
    let cluster = Cluster::new(vec![]);
    let old = cluster.mutate(&base());
    let added = cluster.mutate(&with(|v| {
        v["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "second", "image": "s:1"}));
    }));
    assert_eq!(
        cluster.validate("UPDATE", &added, Some(&old)),
        Err(r#"spec.containers.name: Invalid value: "second": container second is not found"#.into())
    );
    let hot = cluster.mutate(&with(|v| {
        v["spec"]["containers"][0]["upgradeStrategy"] = json!({"upgradeType": "HotUpgrade"})
    }));
    assert_eq!(
        cluster.validate("UPDATE", &hot, Some(&old)),
        Err(r#"spec.containers.upgradeStrategy.upgradeType: Invalid value: "agent": container agent upgradeType is immutable"#.into())
    );
    let new_image = cluster.mutate(&with(|v| v["spec"]["containers"][0]["image"] = json!("agent:2.0")));
    assert_eq!(cluster.validate("UPDATE", &new_image, Some(&old)), Ok(()));
    let removed = cluster.mutate(&with(|v| {
        v["spec"]["initContainers"] = json!([{"name": "init", "image": "i:1"}]);
        v["spec"]["containers"] = json!([]);
    }));
    assert_eq!(cluster.validate("UPDATE", &removed, Some(&old)), Ok(()), "removing containers is allowed");
}

#[test]
fn conflicts_with_other_sidecarsets() {
    let store = Cluster::new(vec![]);
    let other = |f: &dyn Fn(&mut Value)| {
        let mut v = base();
        v["metadata"]["name"] = json!("other");
        f(&mut v);
        store.mutate(&v)
    };
    let check = |others: Vec<Value>, object: Value| Cluster::new(others).create(&object);

    // Same container name, overlapping selectors.
    let same = other(&|_| {});
    assert_eq!(
        check(vec![same.clone()], base()),
        Err(r#"spec.containers: Invalid value: "agent": container agent already exist in other"#.into())
    );
    // A SidecarSet does not conflict with its own stored version.
    assert_eq!(check(vec![store.mutate(&base())], base()), Ok(()));
    // Disjoint pod selectors, or disjoint namespace selectors: no conflict.
    let disjoint = other(&|v| v["spec"]["selector"] = json!({"matchLabels": {"app": "db"}}));
    assert_eq!(check(vec![disjoint], base()), Ok(()));
    let ns_a = |v: &mut Value| v["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
    let ns_b = other(&|v| v["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "b"}}));
    assert_eq!(check(vec![ns_b.clone()], with(ns_a)), Ok(()));
    // Only one side with a namespaceSelector: treated as overlapping.
    assert!(check(vec![ns_b], base()).is_err());
    // Init container names clash only with init containers.
    let init_other = other(&|v| {
        v["spec"]["containers"] = json!([{"name": "x", "image": "x:1"}]);
        v["spec"]["initContainers"] = json!([{"name": "agent", "image": "i:1"}]);
    });
    assert_eq!(check(vec![init_other.clone()], base()), Ok(()));
    let init_self = with(|v| {
        v["spec"]["containers"][0]["name"] = json!("y");
        v["spec"]["initContainers"] = json!([{"name": "agent", "image": "i:1"}]);
    });
    assert_eq!(
        check(vec![init_other], init_self),
        Err(r#"spec.containers: Invalid value: "agent": container agent already exist in other"#.into())
    );
    // Volumes: the same definition is fine, a different one with the same name is not.
    let renamed = |v: &mut Value| v["spec"]["containers"][0]["name"] = json!("agent2");
    assert_eq!(check(vec![other(&|_| {})], with(renamed)), Ok(()));
    let other_logs =
        other(&|v| v["spec"]["volumes"][0] = json!({"name": "logs", "hostPath": {"path": "/var/log"}}));
    assert_eq!(
        check(vec![other_logs], with(renamed)),
        Err(r#"spec.volumes: Invalid value: "logs": volume logs is in conflict with sidecarset other"#.into())
    );
    // Annotations: a conflict when either side overwrites; Retain is ignored; merge+merge is fine.
    let whitelist = kruise_config(json!({"rules": [{"allowedAnnotationKeyExprs": [".*"]}]}));
    let patching = |policy: &'static str| {
        move |v: &mut Value| {
            renamed(v);
            v["spec"]["patchPodMetadata"] =
                json!([{"annotations": {"example.com/cfg": "{}"}, "patchPolicy": policy}]);
        }
    };
    let other_patch = |policy: &'static str| {
        other(&move |v: &mut Value| {
            v["spec"]["patchPodMetadata"] =
                json!([{"annotations": {"example.com/cfg": "{}"}, "patchPolicy": policy}])
        })
    };
    let conflict =
        Err(r#"spec.patchPodMetadata: Invalid value: "example.com/cfg": annotation example.com/cfg is in conflict with sidecarset other"#
            .to_owned());
    assert_eq!(
        check(vec![whitelist.clone(), other_patch("Overwrite")], with(patching("MergePatchJson"))),
        conflict
    );
    assert_eq!(
        check(vec![whitelist.clone(), other_patch("MergePatchJson")], with(patching("Overwrite"))),
        conflict
    );
    assert_eq!(
        check(vec![whitelist.clone(), other_patch("MergePatchJson")], with(patching("MergePatchJson"))),
        Ok(())
    );
    assert_eq!(check(vec![whitelist.clone(), other_patch("Overwrite")], with(patching("Retain"))), Ok(()));
    assert_eq!(check(vec![whitelist, other_patch("Retain")], with(patching("Overwrite"))), Ok(()));
}

#[test]
fn the_feature_gate_admits_patches_without_a_whitelist() {
    let mut cluster = Cluster::new(vec![]);
    cluster.settings.gates =
        FeatureGates::from_flags(&[(Gate::SidecarSetPatchPodMetadataDefaultsAllowed, true)]);
    let object = with(|v| v["spec"]["patchPodMetadata"] = json!([{"annotations": {"a": "b"}}]));
    assert_eq!(cluster.create(&object), Ok(()));
}

#[test]
fn delete_and_connect_pass_through() {
    let cluster = Cluster::new(vec![]);
    let stored = cluster.mutate(&base());
    let mut r = review("DELETE", "v1beta1", &stored, Some(&stored));
    r["request"]["object"] = Value::Null;
    let request = decode_review(r).unwrap();
    assert!(!webhooks::by_path(VALIDATE).unwrap().matches(&request), "DELETE is not registered");
}

#[test]
fn a_pod_created_after_the_sidecarset_gets_kruises_hash_entries() {
    let admission = Cluster::new(vec![]);
    let object = json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "sidecarset1"},
                        "spec": {"selector": {"matchLabels": {"app": "nginx"}}, "containers": [{"name": "dns-f", "image": "dns:1.0"}]}});
    let stored = admission.mutate(&object);
    assert_eq!(admission.validate("CREATE", &stored, None), Ok(()));

    let cluster = Cluster::new(vec![stored]);
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "nginx"}},
                     "spec": {"containers": [{"name": "nginx", "image": "nginx:1.25"}]}});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "p", "operation": "CREATE", "namespace": "default",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": pod}});
    let request = decode_review(review).unwrap();
    let answers = Answers::default();
    let clock = FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC));
    let random = SeededRandom::new(1);
    let inputs = Inputs {
        cluster: &cluster.snapshot,
        answers: &answers,
        clock: &clock,
        random: &random,
        settings: &cluster.settings,
    };
    let outcome = webhooks::run(webhooks::by_path("/mutate-pod").unwrap(), &request, &inputs);
    assert!(outcome.decision.allowed, "{:?}", outcome.decision.status);
    let injected = outcome.mutated.unwrap();
    // The docs/sidecarset.md §7 example, byte for byte: the hash is the §8 vector our mutating
    // webhook wrote.
    assert_eq!(
        injected["metadata"]["annotations"]["kruise.io/sidecarset-hash"],
        r#"{"sidecarset1":{"updateTimestamp":"2026-07-02T09:56:09Z","hash":"6wbd76bd7984x24fb4f44fv9222cw9v9bcf85x766744wddd4zwx927zzz2zb684","sidecarSetName":"sidecarset1","sidecarList":["dns-f"]}}"#
    );
    assert_eq!(
        injected["metadata"]["annotations"]["kruise.io/sidecarset-hash-without-image"],
        r#"{"sidecarset1":{"updateTimestamp":"2026-07-02T09:56:09Z","hash":"82684vwf9d4cb4wz4vffx4ddfbb47ww4z4wwxdbwb8w2zbb7zvf4524cdd49bv94","sidecarSetName":"sidecarset1","sidecarList":["dns-f"]}}"#
    );
    // The defaults written by SidecarSet admission reach the pod (docs/sidecarset.md#9-1-defaulting).
    let sidecar = &injected["spec"]["containers"][0];
    assert_eq!(sidecar["name"], "dns-f");
    assert_eq!(sidecar["imagePullPolicy"], "IfNotPresent");
    assert_eq!(sidecar["terminationMessagePath"], "/dev/termination-log");
}

/// The example SidecarSets of `examples/cluster` carry hash annotations; admitting them again must
/// reproduce those values (a second, independent derivation of
/// docs/sidecarset.md#8-the-sidecarset-hash).
#[test]
fn example_sidecarsets_keep_their_hashes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster/sidecarsets");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    let cluster = Cluster::new(vec![]);
    let mut checked = 0;
    for entry in entries {
        let path = entry.unwrap().path();
        for doc in kruise_admission::cluster::files::read_documents(&std::fs::read_to_string(&path).unwrap())
            .unwrap()
        {
            let Some(expected) = doc.pointer("/metadata/annotations/kruise.io~1sidecarset-hash").cloned()
            else {
                continue;
            };
            // Without `containers` Go hashes `"containers":null` (a nil slice); the injection
            // side's examples were hashed with `[]`, so they are not a reference for that case
            // (see hash.rs `no_containers_encodes_null_like_a_nil_go_slice`).
            if doc.pointer("/spec/containers").is_none() {
                continue;
            }
            let stored = cluster.mutate(&doc);
            assert_eq!(
                stored["metadata"]["annotations"]["kruise.io/sidecarset-hash"],
                expected,
                "{}",
                path.display()
            );
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn pathological_name_patterns_are_refused_with_a_clear_message() {
    // Hostile load, issue 17.4: a pattern is compiled with a size and length limit, once per request.
    let policy = |regex: &str| {
        with(
            |v| v["spec"]["containers"][0]["resourcesPolicy"] = json!({"targetContainersMode": "sum", "targetContainersNameRegex": regex, "resourcesExpr": {"limits": {"cpu": "cpu"}}}),
        )
    };
    let cluster = Cluster::new(vec![]);
    let path = "spec[0].resourcesPolicy.targetContainersNameRegex";
    // Go's \w is ASCII: \w{200} is an ordinary pattern there and here (Kruise accepts it).
    assert_eq!(cluster.create(&policy(r"^\w{200}$")), Ok(()));
    // Unicode classes repeated hundreds of times compile to megabytes: refused, with the reason.
    for hostile in [r"(?u)\w{200}", r"\pL{500}"] {
        let err = cluster.create(&policy(hostile)).unwrap_err();
        let expected = format!(
            "{path}: Invalid value: {hostile:?}: invalid regex pattern: the pattern is too complex: its compiled form exceeds 256 KiB"
        );
        assert!(err.starts_with(&expected), "{hostile}: {err}");
    }
    let long = format!("^({})$", (0..1000).map(|i| format!("app-{i}")).collect::<Vec<_>>().join("|"));
    let err = cluster.create(&policy(&long)).unwrap_err();
    assert!(
        err.ends_with(&format!(
            "invalid regex pattern: the pattern is {} bytes long; at most 4096 are accepted",
            long.len()
        )),
        "{err}"
    );
}

/// Issue 30.8, which goes beyond Kruise (it says nothing): a SidecarSet that reaches every
/// namespace (no namespaceSelector, no v1alpha1 `spec.namespace`) and gives its sidecars host
/// access (privileged, added capabilities, privilege escalation, hostPath volumes) is admitted with
/// a warning per finding; scoped to namespaces, or without such access, it gets none.
#[test]
fn a_cluster_wide_sidecarset_with_host_access_is_warned_about() {
    let cluster = Cluster::new(Vec::new());
    let warnings = |object: &Value| {
        let stored = cluster.mutate(object);
        let (d, _) = cluster.call(VALIDATE, "CREATE", &stored, None);
        assert!(d.allowed, "{:?}", d.status);
        d.warnings
    };
    let risky = with(|s| {
        s["spec"]["containers"][0]["securityContext"] = json!({"privileged": true, "allowPrivilegeEscalation": true, "capabilities": {"add": ["NET_ADMIN"]}});
        s["spec"]["initContainers"] = json!([{"name": "init", "image": "i:1", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]);
        s["spec"]["volumes"] =
            json!([{"name": "logs", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]);
    });
    let found = warnings(&risky);
    let text = found.join("\n");
    for expected in [
        "spec.containers[0] (agent): privileged",
        "spec.containers[0] (agent): allowPrivilegeEscalation",
        "spec.containers[0] (agent): capabilities.add [NET_ADMIN]",
        "spec.initContainers[0] (init): capabilities.add [SYS_ADMIN]",
        "spec.volumes[1] (root): hostPath /",
    ] {
        assert!(text.contains(expected), "{expected:?} missing from {found:#?}");
    }
    assert!(text.contains("every namespace"), "{found:#?}");
    let scoped = with(|s| {
        s["spec"] = risky["spec"].clone();
        s["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
    });
    assert_eq!(warnings(&scoped), Vec::<String>::new(), "scoped by namespaceSelector");
    let mut v1alpha1 = risky.clone();
    v1alpha1["apiVersion"] = json!("apps.kruise.io/v1alpha1");
    v1alpha1["spec"]["namespace"] = json!("team-a");
    assert_eq!(warnings(&v1alpha1), Vec::<String>::new(), "scoped by v1alpha1 spec.namespace");
    assert_eq!(warnings(&base()), Vec::<String>::new(), "no host access");
}

/// `--sidecarset-policy deny`: the same SidecarSet is denied (403), naming what it would give; one
/// scoped to namespaces is still admitted.
#[test]
fn sidecarset_policy_deny_refuses_a_cluster_wide_sidecarset_with_host_access() {
    use kruise_admission::admission::sidecarset_rules::host_access::Policy;
    let mut cluster = Cluster::new(Vec::new());
    cluster.settings.sidecarset_policy = Policy::Deny;
    let risky = with(|s| s["spec"]["volumes"] = json!([{"name": "logs", "hostPath": {"path": "/var/log"}}]));
    let stored = cluster.mutate(&risky);
    let (d, _) = cluster.call(VALIDATE, "CREATE", &stored, None);
    let status = d.status.expect("denied");
    assert_eq!(status.code, 403, "{}", status.message);
    assert!(status.message.contains("spec.volumes[0] (logs): hostPath /var/log"), "{}", status.message);
    let mut scoped = risky.clone();
    scoped["spec"]["namespaceSelector"] = json!({"matchLabels": {"team": "a"}});
    let stored = cluster.mutate(&scoped);
    assert!(cluster.call(VALIDATE, "CREATE", &stored, None).0.allowed);
}
