//! The install manifests: generated from the routing table, checked in without drift, and the
//! Helm chart rendering the same webhook entries as the binary.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use kruise_admission::admission::webhooks::{FailurePolicy, ObjectScope, WEBHOOKS, WebhookKind};
use kruise_admission::deploy::{self, Registration, Target, rbac::RbacOptions, webhooks::configurations};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn entries(configuration: &Value) -> &Vec<Value> {
    configuration["webhooks"].as_array().expect("webhooks is a list")
}

fn target(namespace: &str, service: &str) -> Target {
    Target::new(namespace, service)
}

/// Every path the server routes (the table) has exactly one entry, in the configuration of its
/// kind, and every entry's path is routed.
#[test]
fn every_routed_path_has_exactly_one_entry_and_every_entry_is_routed() {
    let [mutating, validating] = configurations(&Target::default());
    assert_eq!(mutating["kind"], "MutatingWebhookConfiguration");
    assert_eq!(validating["kind"], "ValidatingWebhookConfiguration");
    let mut seen: BTreeMap<String, (WebhookKind, usize)> = BTreeMap::new();
    for (kind, configuration) in [(WebhookKind::Mutating, &mutating), (WebhookKind::Validating, &validating)]
    {
        for entry in entries(configuration) {
            let path = entry["clientConfig"]["service"]["path"].as_str().expect("service path").to_string();
            seen.entry(path).or_insert((kind, 0)).1 += 1;
        }
    }
    for webhook in WEBHOOKS {
        let (kind, count) =
            seen.get(webhook.path).unwrap_or_else(|| panic!("{} is routed but not registered", webhook.path));
        assert_eq!(*count, 1, "{} is registered {count} times", webhook.path);
        assert_eq!(*kind, webhook.kind(), "{} is in the wrong configuration", webhook.path);
    }
    for path in seen.keys() {
        assert!(
            WEBHOOKS.iter().any(|w| w.path == path),
            "{path} is registered but the server does not route it"
        );
    }
    assert_eq!(seen.len(), WEBHOOKS.len());
}

/// The settings issue 8 asks of every entry, checked against the issue's values.
#[test]
fn every_entry_has_the_safe_settings() {
    let target = target("webhooks-ns", "webhooks-svc");
    for configuration in configurations(&target) {
        assert_eq!(configuration["metadata"]["name"], "kruise-admission");
        for entry in entries(&configuration) {
            let name = entry["name"].as_str().expect("name");
            let webhook = WEBHOOKS.iter().find(|w| w.name == name).expect("entry comes from the table");
            // The pod webhooks write budgets' and spreads' status, but never for a dry-run request.
            let side_effects = if webhook.path.ends_with("-pod") { "NoneOnDryRun" } else { "None" };
            assert_eq!(entry["sideEffects"], side_effects, "{name}");
            assert_eq!(entry["admissionReviewVersions"], json!(["v1", "v1beta1"]), "{name}");
            assert_eq!(entry["matchPolicy"], "Equivalent", "{name}");
            let mutating = webhook.kind() == WebhookKind::Mutating;
            assert_eq!(entry["timeoutSeconds"], if mutating { 2 } else { 3 }, "{name}");
            assert_eq!(
                entry.get("reinvocationPolicy"),
                mutating.then(|| json!("IfNeeded")).as_ref(),
                "{name}"
            );
            let policy = match webhook.failure_policy {
                FailurePolicy::Ignore => "Ignore",
                FailurePolicy::Fail => "Fail",
            };
            assert_eq!(entry["failurePolicy"], policy, "{name}");
            assert_eq!(
                entry["clientConfig"],
                json!({ "service": { "namespace": "webhooks-ns", "name": "webhooks-svc", "path": webhook.path, "port": 443 } }),
                "{name}"
            );
            assert_eq!(
                entry["namespaceSelector"],
                json!({ "matchExpressions": [{ "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "webhooks-ns"] }] }),
                "{name}"
            );
            let protected = json!({ "matchExpressions": [{ "key": "policy.kruise.io/delete-protection", "operator": "Exists" }] });
            match webhook.scope {
                ObjectScope::DeleteProtected => assert_eq!(entry["objectSelector"], protected, "{name}"),
                ObjectScope::All => assert!(entry.get("objectSelector").is_none(), "{name}"),
            }
            let rules = entry["rules"].as_array().expect("rules");
            assert_eq!(rules.len(), webhook.rules.len(), "{name}");
            for (rule, expected) in rules.iter().zip(webhook.rules) {
                assert_eq!(rule["scope"], "*");
                assert_eq!(rule["apiGroups"], json!(expected.groups));
                assert_eq!(rule["apiVersions"], json!(expected.versions));
                assert_eq!(rule["resources"], json!(expected.resources));
                let ops: Vec<&str> = expected.operations.iter().map(|o| o.as_str()).collect();
                assert_eq!(rule["operations"], json!(ops));
            }
        }
    }
}

/// `manifests webhooks --shadow` (issue 19): installable next to kruise-manager's configurations.
/// Own configuration and entry names, every entry Ignore with the short shadow timeout,
/// sideEffects None, IfNeeded on the mutating entries; everything that decides which requests
/// are sent (rules, selectors, paths) is the enforcing registration's.
#[test]
fn shadow_configurations_install_next_to_kruise_managers() {
    let target = target("webhooks-ns", "webhooks-svc");
    let enforcing = configurations(&target);
    let shadow = deploy::webhooks::registered(&target, Registration::Shadow);
    let mut names = std::collections::BTreeSet::new();
    for (live, shadow) in enforcing.iter().zip(&shadow) {
        assert_eq!(shadow["kind"], live["kind"]);
        assert_eq!(shadow["metadata"]["name"], "kruise-admission-shadow");
        assert_eq!(entries(shadow).len(), entries(live).len());
        for (live, entry) in entries(live).iter().zip(entries(shadow)) {
            let name = entry["name"].as_str().expect("name");
            let kruise = live["name"].as_str().expect("name");
            // Kruise's own entry names are the table's (`*.kb.io`); ours must differ from all of them.
            assert!(WEBHOOKS.iter().all(|w| w.name != name), "{name} collides with Kruise's entry names");
            assert_eq!(
                name,
                format!(
                    "{}.shadow.kruise-admission.dev",
                    kruise.strip_suffix(".kb.io").expect("a Kruise name")
                )
            );
            assert!(names.insert(name.to_owned()), "{name} twice");
            assert_eq!(entry["failurePolicy"], "Ignore", "{name}");
            let side_effects =
                if name.starts_with("mpod.") || name.starts_with("vpod.") { "NoneOnDryRun" } else { "None" };
            assert_eq!(entry["sideEffects"], side_effects, "{name}");
            assert_eq!(entry["timeoutSeconds"], 2, "{name}");
            let mutating = shadow["kind"] == "MutatingWebhookConfiguration";
            assert_eq!(
                entry.get("reinvocationPolicy"),
                mutating.then(|| json!("IfNeeded")).as_ref(),
                "{name}"
            );
            let mut same = entry.clone();
            for (field, value) in [
                ("name", &live["name"]),
                ("failurePolicy", &live["failurePolicy"]),
                ("timeoutSeconds", &live["timeoutSeconds"]),
            ] {
                same[field] = value.clone();
            }
            assert_eq!(&same, live, "{name}: only the name, failurePolicy and timeout differ");
        }
    }
    assert!(names.contains("mpod.shadow.kruise-admission.dev"));
}

#[test]
fn checked_in_shadow_configurations_match_the_table() {
    let expected = deploy::webhooks_yaml(&Target::default(), Registration::Shadow).expect("yaml");
    assert!(expected.contains("enforces nothing"), "the file says what it is");
    assert_no_drift(
        "manifests/components/shadow/webhooks.yaml",
        &expected,
        "kruise-admission manifests webhooks --shadow > manifests/components/shadow/webhooks.yaml",
    );
}

/// The CLI: `--shadow` for webhooks and rbac (self-managed certificates then update the shadow
/// configurations), refused where it means nothing.
#[test]
fn the_cli_prints_the_shadow_registration() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kruise-admission")).args(args).output().expect("run the binary")
    };
    let out = run(&["manifests", "webhooks", "--shadow", "--namespace", "ns-a", "--service", "svc-b"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        deploy::webhooks_yaml(&target("ns-a", "svc-b"), Registration::Shadow).expect("yaml")
    );
    let out = run(&["manifests", "rbac", "--shadow"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let objects = parse_yaml(&String::from_utf8_lossy(&out.stdout));
    let role = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "kruise-admission:webhook-configurations")
        .expect("ClusterRole");
    assert_eq!(role["rules"][0]["resourceNames"], json!(["kruise-admission-shadow"]));
    let pods = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "kruise-admission:pod-creations")
        .expect("the live agreement's ClusterRole");
    assert_eq!(
        pods["rules"],
        json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}])
    );
    let out = run(&["manifests", "rbac"]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("pod-creations"), "only shadow mode watches pods");
    let out = run(&["manifests", "crds", "--shadow"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--shadow applies to"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `shadow.enabled`: the chart renders the binary's shadow entries, `--shadow`, and points
/// self-managed certificates (flags and RBAC) at the shadow configurations.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_shadow_mode() {
    let helm = helm();
    let default = helm_template(&helm, "platform", "ka", &[]);
    let args = server_args(default.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment"));
    assert!(!parsed_serve_args(&args, "chart defaults").shadow, "shadow is off by default: {args:?}");

    // Even with a capability's failurePolicy overridden to Fail, shadow entries stay Ignore.
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &["shadow.enabled=true", "capabilities.deleteProtection.failurePolicy=Fail"],
    );
    let [mutating, validating] =
        deploy::webhooks::registered(&target("platform", "ka-kruise-admission"), Registration::Shadow);
    assert_eq!(rendered_webhooks(&objects, "MutatingWebhookConfiguration"), mutating["webhooks"]);
    assert_eq!(rendered_webhooks(&objects, "ValidatingWebhookConfiguration"), validating["webhooks"]);
    for kind in ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
        let configuration = objects.iter().find(|o| o["kind"] == kind).expect("configuration");
        assert_eq!(configuration["metadata"]["name"], "ka-kruise-admission-shadow");
    }
    let args = server_args(objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment"));
    let serve = parsed_serve_args(&args, "chart shadow.enabled");
    assert!(serve.shadow, "{args:?}");
    assert_eq!(serve.live.mutating_webhook_configs, ["ka-kruise-admission-shadow"]);
    assert_eq!(serve.live.validating_webhook_configs, ["ka-kruise-admission-shadow"]);
    let role = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "ka-kruise-admission:webhook-configurations")
        .expect("ClusterRole");
    assert_eq!(role["rules"][0]["resourceNames"], json!(["ka-kruise-admission-shadow"]));
    // The live agreement's Pod watch, in live mode only.
    let pods = |objects: &[Value]| {
        objects.iter().any(|o| o["metadata"]["name"] == "ka-kruise-admission:pod-creations")
    };
    assert!(pods(&objects) && !pods(&default));
    assert!(!pods(&helm_template(
        &helm,
        "platform",
        "ka",
        &["shadow.enabled=true", "liveCluster.enabled=false"]
    )));
}

/// `components/shadow` (examples/kustomize/shadow): the base with `--shadow`, the shadow
/// configurations `manifests webhooks --shadow` prints instead of the base's, and self-managed
/// certificates pointed at them.
#[test]
#[ignore = "needs kubectl: set KUBECTL=/path/to/kubectl or put it on PATH (.ci/run installs it)"]
fn the_kustomize_shadow_component_replaces_the_configurations() {
    let kubectl = kubectl();
    let objects = kustomize(&kubectl, "examples/kustomize/shadow");
    let configurations: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")))
        .collect();
    let expected = deploy::webhooks::registered(&Target::default(), Registration::Shadow);
    assert_eq!(
        configurations,
        expected.iter().collect::<Vec<_>>(),
        "exactly the shadow configurations, none of the base's"
    );
    let args = server_args(objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment"));
    let serve = parsed_serve_args(&args, "examples/kustomize/shadow");
    assert!(serve.shadow, "{args:?}");
    assert_eq!(serve.live.mutating_webhook_configs, ["kruise-admission-shadow"]);
    assert_eq!(serve.live.validating_webhook_configs, ["kruise-admission-shadow"]);
    let role = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "kruise-admission:webhook-configurations")
        .expect("ClusterRole");
    let shadow_options =
        RbacOptions { webhook_configurations: "kruise-admission-shadow".into(), ..RbacOptions::default() };
    let generated = deploy::rbac::objects(&Target::default(), &shadow_options);
    let generated = generated
        .iter()
        .find(|o| o["metadata"]["name"] == "kruise-admission:webhook-configurations")
        .expect("ClusterRole");
    assert_eq!(
        role["rules"], generated["rules"],
        "the component's patch gives what `manifests rbac --shadow` prints"
    );
    let shadow_rbac = deploy::rbac::shadow_objects(&Target::default(), &shadow_options);
    for object in &shadow_rbac {
        assert!(
            objects
                .iter()
                .any(|o| o["kind"] == object["kind"] && o["metadata"]["name"] == object["metadata"]["name"]),
            "{object}"
        );
    }
}

/// The pod webhook must never block the cluster when it is down (issue 8: pods Ignore).
#[test]
fn the_pod_webhook_is_mutating_create_only_and_ignores_failures() {
    let [mutating, _] = configurations(&Target::default());
    let pod = entries(&mutating)
        .iter()
        .find(|e| e["clientConfig"]["service"]["path"] == "/mutate-pod")
        .expect("/mutate-pod");
    assert_eq!(pod["name"], "mpod.kb.io");
    assert_eq!(pod["failurePolicy"], "Ignore");
    assert_eq!(
        pod["rules"],
        json!([{ "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "*" }])
    );
}

#[test]
fn installing_into_kube_system_excludes_it_once() {
    for configuration in configurations(&target("kube-system", "svc")) {
        for entry in entries(&configuration) {
            assert_eq!(entry["namespaceSelector"]["matchExpressions"][0]["values"], json!(["kube-system"]));
        }
    }
}

fn parse_yaml(text: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).expect("valid YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

#[test]
fn the_yaml_reads_back_as_the_same_objects() {
    let target = Target::default();
    let text = deploy::webhooks_yaml(&target, Registration::Enforcing).expect("yaml");
    assert_eq!(parse_yaml(&text), configurations(&target).to_vec());
    let options = RbacOptions::default();
    let text = deploy::rbac_yaml(&target, &options).expect("yaml");
    assert_eq!(parse_yaml(&text), deploy::rbac::objects(&target, &options));
}

/// A checked-in generated file equals what the binary generates today.
fn assert_no_drift(relative: &str, expected: &str, regenerate: &str) {
    let path = repo().join(relative);
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        actual == expected,
        "{relative} is out of date with the routing table; regenerate it with:\n    {regenerate}\nor every generated file at once with .ci/regenerate-manifests.sh"
    );
}

#[test]
fn checked_in_webhook_configurations_match_the_table() {
    let expected = deploy::webhooks_yaml(&Target::default(), Registration::Enforcing).expect("yaml");
    assert_no_drift(
        "manifests/webhooks.yaml",
        &expected,
        "kruise-admission manifests webhooks > manifests/webhooks.yaml",
    );
}

#[test]
fn checked_in_rbac_matches_the_generator() {
    let expected = deploy::rbac_yaml(&Target::default(), &RbacOptions::default()).expect("yaml");
    assert_no_drift(
        "manifests/rbac.yaml",
        &expected,
        "kruise-admission manifests rbac > manifests/rbac.yaml",
    );
}

#[test]
fn checked_in_shadow_rbac_matches_the_generator() {
    let expected = deploy::shadow_rbac_yaml(&Target::default(), &RbacOptions::default()).expect("yaml");
    assert_no_drift(
        "manifests/components/shadow/rbac.yaml",
        &expected,
        "kruise-admission manifests shadow-rbac > manifests/components/shadow/rbac.yaml",
    );
}

#[test]
fn checked_in_openkruise_rbac_matches_the_generator() {
    let expected = deploy::openkruise_rbac_yaml(&Target::default(), &RbacOptions::default()).expect("yaml");
    assert_no_drift(
        "manifests/components/openkruise/rbac.yaml",
        &expected,
        "kruise-admission manifests openkruise-rbac > manifests/components/openkruise/rbac.yaml",
    );
}

#[test]
fn checked_in_chart_rbac_matches_the_generator() {
    assert_no_drift(
        "charts/kruise-admission/files/rbac.json",
        &deploy::chart_rbac_json(),
        "kruise-admission manifests chart-rbac > charts/kruise-admission/files/rbac.json",
    );
}

#[test]
fn checked_in_chart_table_matches_the_table() {
    assert_no_drift(
        "charts/kruise-admission/files/webhooks.json",
        &deploy::chart_table_json(),
        "kruise-admission manifests chart-table > charts/kruise-admission/files/webhooks.json",
    );
}

/// Every rule of `objects`' roles, one line per group, resource and rule: kind, namespace,
/// group/resource, resourceNames, verbs; sorted.
fn grants(objects: &[Value]) -> Vec<String> {
    let mut granted = Vec::new();
    for object in objects.iter().filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role") {
        for rule in object["rules"].as_array().expect("rules") {
            for group in rule["apiGroups"].as_array().expect("groups") {
                for resource in rule["resources"].as_array().expect("resources") {
                    let names = rule.get("resourceNames").map_or_else(String::new, Value::to_string);
                    let verbs: Vec<&str> = rule["verbs"]
                        .as_array()
                        .expect("verbs")
                        .iter()
                        .map(|v| v.as_str().expect("verb"))
                        .collect();
                    granted.push(format!(
                        "{} {} {}/{} {names} {}",
                        object["kind"].as_str().expect("kind"),
                        object["metadata"]["namespace"].as_str().unwrap_or("*"),
                        group.as_str().expect("group"),
                        resource.as_str().expect("resource"),
                        verbs.join(",")
                    ));
                }
            }
        }
    }
    granted.sort();
    granted
}

/// Every rule the generator grants, as (role kind, namespace, API group, resource, names, verbs):
/// exactly the requests the server makes (`cluster::live` watches and lookups, `certs`), nothing
/// more. A new API call must be added here and to `deploy::rbac` together.
#[test]
fn rbac_grants_exactly_what_the_server_calls() {
    let target = target("own-ns", "svc");
    let options = RbacOptions {
        kruise_namespace: "kruise-ns".into(),
        cert_secret: "my-secret".into(),
        ..RbacOptions::default()
    };
    let objects = deploy::rbac::objects(&target, &RbacOptions { openkruise: true, ..options.clone() });
    let shadow =
        deploy::rbac::objects(&target, &RbacOptions { shadow: true, openkruise: true, ..options.clone() });
    assert_eq!(grants(&shadow).len(), grants(&objects).len() + 1);
    // Without OpenKruise (the default), nothing in the Kruise namespace, which may not exist.
    let without = grants(&deploy::rbac::objects(&target, &options));
    assert_eq!(
        grants(&objects).into_iter().filter(|g| !without.contains(g)).collect::<Vec<_>>(),
        [
            r#"Role kruise-ns /configmaps ["kruise-configuration"] list,watch"#,
            "Role kruise-ns apps/controllerrevisions  list,watch",
        ]
    );
    assert_eq!(
        grants(&shadow).into_iter().filter(|g| !grants(&objects).contains(g)).collect::<Vec<_>>(),
        // Shadow mode's Pod-creation watch: a list of one Pod for the resourceVersion, then watch.
        ["ClusterRole * /pods  list,watch"]
    );
    let granted = grants(&objects);
    let mut expected = vec![
        // Watches (list + watch only: the reflector never gets one object).
        "ClusterRole * apps.kruise.io/sidecarsets  list,watch",
        "ClusterRole * /namespaces  list,watch",
        // /mutate-pod's related-pub and WorkloadSpread steps: PUBs, WorkloadSpreads and the
        // workloads they read.
        "ClusterRole * policy.kruise.io/podunavailablebudgets  list,watch",
        "ClusterRole * apps/deployments  list,watch",
        "ClusterRole * apps/replicasets  list,watch",
        "ClusterRole * apps/statefulsets  list,watch",
        "ClusterRole * apps.kruise.io/clonesets  list,watch",
        "ClusterRole * apps.kruise.io/statefulsets  list,watch",
        "ClusterRole * apps.kruise.io/workloadspreads  list,watch",
        "ClusterRole * batch/jobs  list,watch",
        // /mutate-pod's PersistentPodState step and PodProbeMarker on serverless pods.
        "ClusterRole * apps.kruise.io/persistentpodstates  list,watch",
        "ClusterRole * apps.kruise.io/podprobemarkers  list,watch",
        "Role kruise-ns apps/controllerrevisions  list,watch",
        // Listed and watched with the field selector metadata.name=kruise-configuration.
        r#"Role kruise-ns /configmaps ["kruise-configuration"] list,watch"#,
        // Live lookups: Cascading Namespace (pods, PVCs), CloneSet podsToDelete and an eviction's
        // pod (a pod by name).
        "ClusterRole * /pods  get,list",
        // Status writes: the disruptions /validate-pod records, WorkloadSpread's pods; after a
        // conflict the object is read again by name.
        "ClusterRole * policy.kruise.io/podunavailablebudgets/status  update",
        "ClusterRole * apps.kruise.io/workloadspreads/status  update",
        "ClusterRole * policy.kruise.io/podunavailablebudgets  get",
        "ClusterRole * apps.kruise.io/workloadspreads  get",
        "ClusterRole * /persistentvolumeclaims  list",
        // Self-managed certificates: create cannot name an object that does not exist yet.
        "Role own-ns /secrets  create",
        r#"Role own-ns /secrets ["my-secret"] get,update"#,
        // Their caBundle: read and replaced by name, and listed and watched with the field
        // selector metadata.name=kruise-admission, so a reset is repaired at once.
        r#"ClusterRole * admissionregistration.k8s.io/mutatingwebhookconfigurations ["kruise-admission"] get,update,list,watch"#,
        r#"ClusterRole * admissionregistration.k8s.io/validatingwebhookconfigurations ["kruise-admission"] get,update,list,watch"#,
    ];
    expected.sort_unstable();
    assert_eq!(granted, expected);
    // Custom resources of a CRD being deleted: an aggregated role the operator extends per CRD.
    let custom = objects
        .iter()
        .find(|o| o["metadata"]["name"] == "kruise-admission:custom-resources")
        .expect("aggregated role");
    assert_eq!(custom["rules"], json!([]));
    assert_eq!(
        custom["aggregationRule"],
        json!({ "clusterRoleSelectors": [{ "matchLabels": { "kruise-admission.dev/aggregate-to-custom-resources": "true" } }] })
    );
    for object in &shadow {
        let needed_for = object["metadata"]["annotations"]["kruise-admission.dev/needed-for"]
            .as_str()
            .expect("every object says its mode");
        assert!(
            matches!(needed_for, "live-cluster" | "self-managed-certs" | "shadow-agreement" | "openkruise"),
            "{needed_for}"
        );
        if let Some(subjects) = object.get("subjects") {
            assert_eq!(
                subjects,
                &json!([{ "kind": "ServiceAccount", "name": "kruise-admission", "namespace": "own-ns" }])
            );
        }
    }
}

#[test]
fn the_cli_prints_the_generated_configurations() {
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["manifests", "webhooks", "--namespace", "ns-a", "--service", "svc-b"])
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        deploy::webhooks_yaml(&target("ns-a", "svc-b"), Registration::Enforcing).expect("yaml")
    );
}

/// `--ca-bundle-file` puts the CA, base64-encoded as the API expects, into every entry.
#[test]
fn the_cli_embeds_a_provided_ca_bundle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = dir.path().join("ca.crt");
    let pem = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
    std::fs::write(&ca, pem).expect("write ca");
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["manifests", "webhooks", "--ca-bundle-file"])
        .arg(&ca)
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // base64 of the PEM above, computed independently.
    let expected = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";
    let documents = parse_yaml(&String::from_utf8_lossy(&out.stdout));
    let entries: Vec<&Value> = documents.iter().flat_map(entries).collect();
    assert_eq!(entries.len(), WEBHOOKS.len());
    for entry in entries {
        assert_eq!(entry["clientConfig"]["caBundle"], expected);
    }

    std::fs::write(&ca, "not a certificate").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["manifests", "webhooks", "--ca-bundle-file"])
        .arg(&ca)
        .output()
        .expect("run the binary");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ca-bundle-file"));
}

#[test]
fn crds_are_generated_by_the_binary_and_match_the_checked_in_files() {
    let out = Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .args(["manifests", "crds"])
        .output()
        .expect("run the binary");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let checked_in = std::fs::read_to_string(repo().join(kruise_admission::api::crd::SIDECARSET_CRD_PATH))
        .expect("checked-in CRD");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        checked_in,
        "regenerate with .ci/regenerate-manifests.sh"
    );
    let chart =
        std::fs::read_to_string(repo().join("charts/kruise-admission/files/apps.kruise.io_sidecarsets.yaml"))
            .expect("chart CRD");
    assert_eq!(
        chart, checked_in,
        "the chart installs the same CRD; regenerate with .ci/regenerate-manifests.sh"
    );
}

/// `$HELM`, else `helm` on PATH. The tests that call it are `#[ignore]`d: `cargo test -- --ignored`
/// runs them (.ci/run does, with helm installed), and then a missing helm fails them.
fn helm() -> PathBuf {
    tool("HELM", "helm")
}

/// `$<variable>`, else `name` on PATH; a test that asked for a tool it cannot find fails.
fn tool(variable: &str, name: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("PATH")
                .and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(name)).find(|p| p.is_file()))
        })
        .unwrap_or_else(|| panic!("{name} is not found: set {variable}=/path/to/{name} or put it on PATH"))
}

/// `helm template` of the chart, as it exits.
fn helm_render(helm: &Path, namespace: &str, release: &str, sets: &[&str]) -> std::process::Output {
    let mut command = Command::new(helm);
    command
        .args(["template", release])
        .arg(repo().join("charts/kruise-admission"))
        .args(["--namespace", namespace]);
    for set in sets {
        command.args(["--set", set]);
    }
    command.output().expect("run helm")
}

fn helm_template(helm: &Path, namespace: &str, release: &str, sets: &[&str]) -> Vec<Value> {
    let out = helm_render(helm, namespace, release, sets);
    assert!(out.status.success(), "helm template failed: {}", String::from_utf8_lossy(&out.stderr));
    parse_yaml(&String::from_utf8_lossy(&out.stdout))
}

fn rendered_webhooks(objects: &[Value], kind: &str) -> Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]["webhooks"].clone()
}

/// The chart renders exactly the binary's webhook entries (caBundle and metadata aside, which
/// depend on the cert mode).
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_the_binarys_webhook_entries() {
    let helm = helm();
    for (namespace, release) in [("kruise-admission", "kruise-admission"), ("platform", "ka")] {
        let objects = helm_template(&helm, namespace, release, &[]);
        let service = objects
            .iter()
            .find(|o| o["kind"] == "Service" && o["spec"]["ports"][0]["port"] == 443)
            .and_then(|o| o["metadata"]["name"].as_str())
            .expect("a webhook Service")
            .to_string();
        let [mutating, validating] = configurations(&target(namespace, &service));
        assert_eq!(
            rendered_webhooks(&objects, "MutatingWebhookConfiguration"),
            mutating["webhooks"],
            "release {release}"
        );
        assert_eq!(
            rendered_webhooks(&objects, "ValidatingWebhookConfiguration"),
            validating["webhooks"],
            "release {release}"
        );
    }
    // A provided CA lands in the same place as `manifests webhooks --ca-bundle-file` puts it.
    let pem = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
    let encoded = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmYWtlCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K";
    let objects = helm_template(
        &helm,
        "kruise-admission",
        "kruise-admission",
        &["certs.mode=provided", &format!("certs.provided.caBundle={encoded}")],
    );
    let with_ca = Target { ca_bundle: Some(pem.as_bytes().to_vec()), ..Target::default() };
    let [mutating, validating] = configurations(&with_ca);
    assert_eq!(rendered_webhooks(&objects, "MutatingWebhookConfiguration"), mutating["webhooks"]);
    assert_eq!(rendered_webhooks(&objects, "ValidatingWebhookConfiguration"), validating["webhooks"]);
    // cert-manager: no caBundle in the entries (cainjector writes it), the annotation names the
    // rendered serving Certificate.
    let objects = helm_template(&helm, "kruise-admission", "kruise-admission", &["certs.mode=cert-manager"]);
    let [mutating, validating] = configurations(&Target::default());
    for (kind, expected) in
        [("MutatingWebhookConfiguration", &mutating), ("ValidatingWebhookConfiguration", &validating)]
    {
        assert_eq!(rendered_webhooks(&objects, kind), expected["webhooks"]);
        let configuration = objects.iter().find(|o| o["kind"] == kind).expect("configuration");
        assert_eq!(
            configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "kruise-admission/kruise-admission-serving"
        );
    }
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "Certificate" && o["metadata"]["name"] == "kruise-admission-serving")
    );
}

/// Turning a capability off removes its entries and passes the server flag, together.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_disables_a_capability_in_the_configuration_and_the_server_together() {
    let helm = helm();
    let objects = helm_template(
        &helm,
        "kruise-admission",
        "kruise-admission",
        &["capabilities.podMutation.enabled=false"],
    );
    let mutating = rendered_webhooks(&objects, "MutatingWebhookConfiguration");
    assert!(!mutating.as_array().expect("list").iter().any(|e| e["name"] == "mpod.kb.io"));
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment");
    let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(args.as_array().expect("args").contains(&json!("--disable-capability=pod-mutation")), "{args}");
}

/// Values that change entries: extra exclusions are appended after kube-system and the release
/// namespace, and a capability's failurePolicy overrides its entries' own.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_applies_exclusions_and_failure_policy_overrides() {
    let helm = helm();
    let objects = helm_template(
        &helm,
        "platform",
        "kruise-admission",
        &["webhooks.excludeNamespaces={monitoring,platform}", "capabilities.podMutation.failurePolicy=Fail"],
    );
    let mutating = rendered_webhooks(&objects, "MutatingWebhookConfiguration");
    let pod = mutating
        .as_array()
        .expect("list")
        .iter()
        .find(|e| e["name"] == "mpod.kb.io")
        .expect("mpod.kb.io")
        .clone();
    assert_eq!(pod["failurePolicy"], "Fail");
    assert_eq!(
        pod["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["kube-system", "platform", "monitoring"])
    );
}

/// The dashboard only queries metrics the server exports (names from the brief).
#[test]
fn the_dashboard_queries_only_exported_metrics() {
    const EXPORTED: &[&str] = &[
        "kruise_admission_webhook_request_total",
        "kruise_admission_webhook_admission_duration_seconds",
        "kruise_admission_webhook_rejection_count",
        "kruise_admission_webhook_patch_operations",
        "kruise_admission_http_errors_total",
        "kruise_admission_serving_certificate_not_after_seconds",
        "kruise_admission_build_info",
        "kruise_admission_cluster_objects",
        "kruise_admission_cluster_snapshot_timestamp_seconds",
    ];
    let text =
        std::fs::read_to_string(repo().join("charts/kruise-admission/dashboards/kruise-admission.json"))
            .expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let metric = regex::Regex::new(r"kruise_admission_[a-z_]+").expect("regex");
    let mut queried = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            for found in metric.find_iter(target["expr"].as_str().expect("expr")) {
                let name = found.as_str();
                let base = name
                    .strip_suffix("_bucket")
                    .filter(|b| b.ends_with("_seconds") || b.ends_with("_operations"))
                    .unwrap_or(name);
                assert!(
                    EXPORTED.contains(&base),
                    "the dashboard queries {name}, which the server does not export"
                );
                queried.insert(base.to_string());
            }
        }
    }
    // Requests, latency, denials, patch sizes, cache age and cert expiry are all shown.
    for needed in [
        "kruise_admission_webhook_request_total",
        "kruise_admission_webhook_admission_duration_seconds",
        "kruise_admission_webhook_rejection_count",
        "kruise_admission_webhook_patch_operations",
        "kruise_admission_cluster_snapshot_timestamp_seconds",
        "kruise_admission_serving_certificate_not_after_seconds",
    ] {
        assert!(queried.contains(needed), "the dashboard does not show {needed}");
    }
}

/// Issue 8's Deployment requirements, for one rendered Deployment.
fn assert_deployment_is_safe(deployment: &Value, origin: &str) {
    let spec = &deployment["spec"];
    // Two by default; an overlay may ask for more (examples/kustomize/other-namespace: 3).
    assert!(spec["replicas"].as_u64().is_some_and(|r| r >= 2), "{origin}: at least two replicas");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0, "{origin}: maxUnavailable 0");
    let pod = &spec["template"]["spec"];
    assert!(pod["affinity"]["podAntiAffinity"].is_object(), "{origin}: pod anti-affinity");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{origin}");
    assert_eq!(pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault", "{origin}");
    let containers = pod["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "{origin}");
    let server = &containers[0];
    let security = &server["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true, "{origin}");
    assert_eq!(security["allowPrivilegeEscalation"], false, "{origin}");
    assert_eq!(security["capabilities"]["drop"], json!(["ALL"]), "{origin}");
    // Guaranteed QoS: requests equal limits, CPU and memory both set (evicted last).
    let resources = &server["resources"];
    for resource in ["cpu", "memory"] {
        assert!(resources["limits"][resource].is_string(), "{origin}: a {resource} limit: {resources}");
        assert_eq!(
            resources["requests"][resource], resources["limits"][resource],
            "{origin}: {resource} request = limit (Guaranteed QoS)"
        );
    }
    // A priority class, and a soft spread across zones that selects the pods themselves.
    assert!(
        pod["priorityClassName"].as_str().is_some_and(|c| !c.is_empty()),
        "{origin}: a priorityClassName"
    );
    let labels = spec["template"]["metadata"]["labels"].as_object().expect("pod labels");
    let zones: Vec<&Value> = pod["topologySpreadConstraints"]
        .as_array()
        .map(|c| c.iter().filter(|c| c["topologyKey"] == "topology.kubernetes.io/zone").collect())
        .unwrap_or_default();
    assert_eq!(zones.len(), 1, "{origin}: one zone spread constraint");
    assert_eq!(zones[0]["whenUnsatisfiable"], "ScheduleAnyway", "{origin}: the zone spread is soft");
    let selector = zones[0]["labelSelector"]["matchLabels"].as_object().expect("the spread's matchLabels");
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{origin}: the zone spread does not select the pods: {selector:?}"
    );
    assert_eq!(
        server["readinessProbe"]["httpGet"],
        json!({ "path": "/readyz", "port": "metrics" }),
        "{origin}"
    );
    assert_eq!(
        server["livenessProbe"]["httpGet"],
        json!({ "path": "/healthz", "port": "metrics" }),
        "{origin}"
    );
    let ports: Vec<(&str, i64)> = server["ports"]
        .as_array()
        .expect("ports")
        .iter()
        .map(|p| (p["name"].as_str().expect("port name"), p["containerPort"].as_i64().expect("port")))
        .collect();
    assert!(
        ports.contains(&("webhook", 9443)) && ports.iter().any(|(name, _)| *name == "metrics"),
        "{origin}: {ports:?}"
    );
    // The drain budget: preStop sleep, then --shutdown-grace, both inside the grace period.
    let pre_stop = server["lifecycle"]["preStop"]["sleep"]["seconds"].as_i64().expect("a preStop sleep");
    assert!(pre_stop > 0, "{origin}");
    let args: Vec<&str> =
        server["args"].as_array().expect("args").iter().map(|a| a.as_str().expect("arg")).collect();
    assert_eq!(args.first(), Some(&"serve"), "{origin}");
    let grace = args
        .iter()
        .find_map(|a| a.strip_prefix("--shutdown-grace="))
        .and_then(|g| g.strip_suffix('s'))
        .and_then(|g| g.parse::<i64>().ok())
        .expect("--shutdown-grace=<n>s");
    let termination = pod["terminationGracePeriodSeconds"].as_i64().expect("terminationGracePeriodSeconds");
    assert!(termination > pre_stop + grace, "{origin}: {termination} <= {pre_stop} + {grace}");
    // Self-managed certificates are written by the server into --cert-dir; otherwise it reads files.
    let files: &[&str] = if args.contains(&"--cert-mode=self-managed") {
        &["--cert-dir=/etc/kruise-admission/tls"]
    } else {
        &[
            "--tls-cert-file=/etc/kruise-admission/tls/tls.crt",
            "--tls-key-file=/etc/kruise-admission/tls/tls.key",
        ]
    };
    for flag in std::iter::once(&"--listen=0.0.0.0:9443").chain(files) {
        assert!(args.contains(flag), "{origin}: {flag} missing from {args:?}");
    }
}

#[test]
fn the_kustomize_deployment_is_safe_to_roll_and_drain() {
    let text =
        std::fs::read_to_string(repo().join("manifests/deployment.yaml")).expect("manifests/deployment.yaml");
    assert_deployment_is_safe(&parse_yaml(&text)[0], "manifests/deployment.yaml");
    let text = std::fs::read_to_string(repo().join("manifests/poddisruptionbudget.yaml")).expect("pdb");
    assert_eq!(parse_yaml(&text)[0]["spec"]["minAvailable"], 1);
    let text = std::fs::read_to_string(repo().join("manifests/service.yaml")).expect("service");
    assert_eq!(
        parse_yaml(&text)[0]["spec"]["ports"][0],
        json!({ "name": "webhook", "port": 443, "targetPort": "webhook", "protocol": "TCP" })
    );
}

#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_deployment_is_safe_to_roll_and_drain() {
    let helm = helm();
    for mode in ["provided", "cert-manager", "self-managed"] {
        let objects =
            helm_template(&helm, "kruise-admission", "kruise-admission", &[&format!("certs.mode={mode}")]);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment");
        assert_deployment_is_safe(deployment, mode);
        let args = &deployment["spec"]["template"]["spec"]["containers"][0]["args"];
        let self_managed = [json!("--cert-mode=self-managed"), json!("--cert-secret=kruise-admission-tls")];
        for flag in &self_managed {
            assert_eq!(
                args.as_array().expect("args").contains(flag),
                mode == "self-managed",
                "{mode}: {flag}"
            );
        }
        assert!(objects.iter().any(|o| o["kind"] == "PodDisruptionBudget"), "{mode}: a PDB");
    }
}

/// `serve` as the chart runs it: every argument is a flag the binary accepts, and the cert and
/// cluster modes render the flags `serve` needs for them.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_serve_flags_for_each_mode() {
    let helm = helm();
    for (sets, live, self_managed) in [
        // The defaults: live mode, self-managed certificates.
        (&[][..], true, true),
        (&["certs.mode=provided"][..], true, false),
        (&["liveCluster.enabled=false"][..], false, true),
        (&["liveCluster.enabled=false", "certs.mode=cert-manager"][..], false, false),
        (&["certs.selfManaged.secretName=own"][..], true, true),
    ] {
        let objects = helm_template(&helm, "platform", "ka", sets);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment");
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let args = server_args(deployment);
        let serve = parsed_serve_args(&args, &format!("the chart with {sets:?}"));
        let mode = |m: kruise_admission::cluster::live::ClusterMode| {
            m == kruise_admission::cluster::live::ClusterMode::Live
        };
        assert_eq!(mode(serve.live.cluster_mode), live, "{sets:?}: {args:?}");
        assert_eq!(args.iter().any(|a| a.starts_with("--cluster-dir")), !live, "{sets:?}: {args:?}");
        let needs_api = live || self_managed;
        assert_eq!(
            deployment["spec"]["template"]["spec"]["automountServiceAccountToken"], needs_api,
            "{sets:?}"
        );
        let pod_namespace = json!([{ "name": "POD_NAMESPACE", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } }]);
        assert_eq!(container["env"] == pod_namespace, needs_api, "{sets:?}: {}", container["env"]);
        assert_eq!(
            args.iter().any(|a| a.starts_with("--tls-cert-file")),
            !self_managed,
            "{sets:?}: {args:?}"
        );
        if self_managed {
            let expected_secret = if sets.contains(&"certs.selfManaged.secretName=own") {
                "own"
            } else {
                "ka-kruise-admission-tls"
            };
            assert_eq!(serve.live.cert_secret, expected_secret);
            // The Service and both webhook configurations are named after the release.
            assert_eq!(serve.live.service, "ka-kruise-admission");
            assert_eq!(serve.live.mutating_webhook_configs, ["ka-kruise-admission"]);
            assert_eq!(serve.live.validating_webhook_configs, ["ka-kruise-admission"]);
            for kind in ["Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"] {
                assert!(
                    objects
                        .iter()
                        .any(|o| o["kind"] == kind && o["metadata"]["name"] == "ka-kruise-admission"),
                    "{kind}"
                );
            }
            // --cert-dir is the writable emptyDir mounted where the server reads the files.
            let mount = container["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .find(|m| m["name"] == "tls")
                .expect("tls mount");
            assert_eq!(
                mount["mountPath"].as_str().map(std::path::PathBuf::from),
                Some(serve.cert_dir.clone())
            );
            assert_eq!(mount["readOnly"], false);
            let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().expect("volumes");
            assert!(
                volumes.iter().find(|v| v["name"] == "tls").expect("tls volume").get("emptyDir").is_some()
            );
        }
    }
}

/// The chart passes the binary's own request-memory defaults (no in-flight budget: the server
/// derives it from the memory limit), and refuses to render an explicit in-flight budget above 5/8
/// of the memory limit (the pod would be OOM-killed before it answered 429).
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_keeps_the_request_memory_budget_inside_the_memory_limit() {
    use kruise_admission::server::DEFAULT_MAX_REQUEST_BYTES;
    let helm = helm();
    let serve_with = |sets: &[&str]| {
        let objects = helm_template(&helm, "platform", "ka", sets);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment").clone();
        parsed_serve_args(&server_args(&deployment), &format!("the chart with {sets:?}"))
    };
    let defaults = serve_with(&[]);
    assert_eq!((defaults.max_request_bytes, defaults.max_in_flight_bytes), (DEFAULT_MAX_REQUEST_BYTES, None));
    let small = serve_with(&["resources.limits.memory=128Mi"]);
    assert_eq!(small.max_in_flight_bytes, None, "a derived budget fits any limit");
    let raised = serve_with(&["resources.limits.memory=1Gi", "requestMemory.maxInFlightBytes=671088640"]);
    assert_eq!(raised.max_in_flight_bytes, Some(640 << 20));
    for sets in [
        &["requestMemory.maxInFlightBytes=167772161"][..],
        &["resources.limits.memory=128Mi", "requestMemory.maxInFlightBytes=167772160"][..],
        &["resources.limits.memory=268435455", "requestMemory.maxInFlightBytes=167772160"][..],
    ] {
        let out = helm_render(&helm, "platform", "ka", sets);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("at most 5/8 of resources.limits.memory"),
            "{sets:?} rendered: {stderr}"
        );
    }
}

/// The chart's RBAC (live cluster + self-managed certificates) grants exactly what
/// `kruise-admission manifests rbac` prints.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_rbac_matches_the_binarys() {
    let helm = helm();
    let essentials = |o: &Value| {
        json!({
            "kind": o["kind"],
            "name": o["metadata"]["name"],
            "namespace": o["metadata"]["namespace"],
            "neededFor": o["metadata"]["annotations"]["kruise-admission.dev/needed-for"],
            "rules": o["rules"],
            "aggregationRule": o["aggregationRule"],
            "roleRef": o["roleRef"],
            "subjects": o["subjects"],
        })
    };
    let is_rbac = |o: &&Value| o["apiVersion"] == "rbac.authorization.k8s.io/v1";
    let sorted = |mut v: Vec<Value>| {
        v.sort_by_key(|o| o.to_string());
        v
    };
    // The defaults (live mode, self-managed certificates) render all of it, for any release name,
    // namespace, Kruise namespace and Secret. `helm template` has no cluster to look the Kruise
    // namespace up in, so `kruiseNamespaceRole: auto` leaves its Role out there; `create` renders it.
    let rendered = helm_template(&helm, "kruise-admission", "kruise-admission", &[]);
    let chart = sorted(rendered.iter().filter(is_rbac).map(essentials).collect());
    let binary = sorted(
        deploy::rbac::objects(&Target::default(), &RbacOptions::default()).iter().map(essentials).collect(),
    );
    assert_eq!(chart, binary);
    let rendered = helm_template(
        &helm,
        "platform",
        "ka",
        &["kruiseNamespace=kruise", "kruiseNamespaceRole=create", "certs.selfManaged.secretName=own-tls"],
    );
    let chart = sorted(rendered.iter().filter(is_rbac).map(essentials).collect());
    let options = RbacOptions {
        name: "ka-kruise-admission".into(),
        webhook_configurations: "ka-kruise-admission".into(),
        kruise_namespace: "kruise".into(),
        cert_secret: "own-tls".into(),
        shadow: false,
        openkruise: true,
    };
    let binary = sorted(
        deploy::rbac::objects(&Target::new("platform", "ka-kruise-admission"), &options)
            .iter()
            .map(essentials)
            .collect(),
    );
    assert_eq!(chart, binary);
    for object in rendered.iter().filter(is_rbac) {
        assert_eq!(
            object["metadata"]["labels"]["app.kubernetes.io/instance"], "ka",
            "the chart's own labels"
        );
        assert!(!object.to_string().contains('@'), "a placeholder left in {object}");
    }
    // Each mode gets only its own objects.
    let needed_for = |sets: &[&str]| {
        let rendered = helm_template(&helm, "kruise-admission", "kruise-admission", sets);
        let mut modes: Vec<String> = rendered
            .iter()
            .filter(is_rbac)
            .map(|o| {
                o["metadata"]["annotations"]["kruise-admission.dev/needed-for"]
                    .as_str()
                    .expect("mode")
                    .to_owned()
            })
            .collect();
        modes.sort();
        modes.dedup();
        modes
    };
    assert_eq!(needed_for(&["certs.mode=provided"]), ["live-cluster"]);
    assert_eq!(needed_for(&["certs.mode=cert-manager"]), ["live-cluster"]);
    assert_eq!(needed_for(&["liveCluster.enabled=false"]), ["self-managed-certs"]);
    // Folder mode with provided certificates: no RBAC and no token.
    let rendered = helm_template(
        &helm,
        "kruise-admission",
        "kruise-admission",
        &["liveCluster.enabled=false", "certs.mode=provided"],
    );
    assert!(!rendered.iter().any(|o| is_rbac(&o)));
    let account = rendered.iter().find(|o| o["kind"] == "ServiceAccount").expect("a ServiceAccount");
    assert_eq!(account["automountServiceAccountToken"], false);
}

/// Every capability has its switch in the chart's values and schema, under the key the
/// generated table uses.
#[test]
fn the_chart_values_have_a_switch_for_every_capability() {
    let chart = repo().join("charts/kruise-admission");
    let values =
        parse_yaml(&std::fs::read_to_string(chart.join("values.yaml")).expect("values.yaml")).remove(0);
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart.join("values.schema.json")).expect("schema"))
            .expect("JSON");
    let required = &schema["properties"]["capabilities"]["required"];
    for capability in deploy::CAPABILITIES {
        let key = deploy::capability_values_key(capability);
        assert_eq!(
            values["capabilities"][&key],
            json!({ "enabled": true, "failurePolicy": "" }),
            "capabilities.{key} in values.yaml"
        );
        assert!(
            required.as_array().expect("required").contains(&json!(key)),
            "capabilities.{key} in values.schema.json"
        );
    }
}

/// `$KUBECTL`, else `kubectl` on PATH (kustomize is built in); as for [`helm`], its tests are
/// `#[ignore]`d and fail without it.
fn kubectl() -> PathBuf {
    tool("KUBECTL", "kubectl")
}

/// `kubectl kustomize <dir>` (relative to the repository), parsed.
fn kustomize(kubectl: &Path, dir: &str) -> Vec<Value> {
    let out = Command::new(kubectl).arg("kustomize").arg(repo().join(dir)).output().expect("run kubectl");
    assert!(out.status.success(), "kubectl kustomize {dir} failed: {}", String::from_utf8_lossy(&out.stderr));
    parse_yaml(&String::from_utf8_lossy(&out.stdout))
}

fn server_args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("text").to_owned())
        .collect()
}

/// The arguments as `serve` parses them (every one must be a flag it accepts).
fn parsed_serve_args(args: &[String], origin: &str) -> kruise_admission::cli::serve::ServeArgs {
    use clap::Parser as _;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Sub,
    }
    #[derive(clap::Subcommand)]
    enum Sub {
        Serve(Box<kruise_admission::cli::serve::ServeArgs>),
    }
    let Sub::Serve(serve) =
        Cli::try_parse_from(std::iter::once("kruise-admission".to_owned()).chain(args.iter().cloned()))
            .unwrap_or_else(|e| panic!("{origin}: serve rejects the arguments: {e}"))
            .command;
    *serve
}

/// Issue 16: what `kubectl apply -k manifests/` and `helm install` give with no values is live
/// mode with self-managed certificates. Read from the files themselves (no tool needed).
#[test]
fn the_installed_defaults_are_live_mode_with_self_managed_certificates() {
    use kruise_admission::cluster::live::{CertMode, ClusterMode};
    let deployment =
        parse_yaml(&std::fs::read_to_string(repo().join("manifests/deployment.yaml")).expect("deployment"))
            .remove(0);
    let args = server_args(&deployment);
    let serve = parsed_serve_args(&args, "manifests/deployment.yaml");
    assert_eq!(serve.live.cluster_mode, ClusterMode::Live, "{args:?}");
    assert_eq!(serve.live.cert_mode, CertMode::SelfManaged, "{args:?}");
    assert!(
        !args.iter().any(|a| a.starts_with("--cluster-dir") || a.starts_with("--tls-")),
        "folder or file flags in live, self-managed mode: {args:?}"
    );
    assert_eq!(deployment["spec"]["template"]["spec"]["automountServiceAccountToken"], true);
    let account =
        parse_yaml(&std::fs::read_to_string(repo().join("manifests/serviceaccount.yaml")).expect("account"))
            .remove(0);
    assert_eq!(account["automountServiceAccountToken"], true);
    // The base carries the RBAC, and no CRD.
    let base = parse_yaml(
        &std::fs::read_to_string(repo().join("manifests/kustomization.yaml")).expect("kustomization"),
    )
    .remove(0);
    let resources: Vec<&str> =
        base["resources"].as_array().expect("resources").iter().map(|r| r.as_str().expect("path")).collect();
    assert!(resources.contains(&"rbac.yaml"), "{resources:?}");
    assert!(base.get("components").is_none(), "the base pulls in no component: {base}");
    for resource in &resources {
        let text = std::fs::read_to_string(repo().join("manifests").join(resource)).expect("resource");
        assert!(
            !parse_yaml(&text).iter().any(|o| o["kind"] == "CustomResourceDefinition"),
            "the base ships a CRD in {resource}"
        );
    }
    // The chart's values.
    let values = parse_yaml(
        &std::fs::read_to_string(repo().join("charts/kruise-admission/values.yaml")).expect("values"),
    )
    .remove(0);
    assert_eq!(values["certs"]["mode"], "self-managed");
    assert_eq!(values["liveCluster"]["enabled"], true);
}

/// Rendered with kustomize: the base has no CRD (an existing OpenKruise keeps its own); the
/// sidecarset-crd component adds exactly the generated SidecarSet CRD; the base's RBAC is the
/// generator's.
/// The chart's SidecarSet CRD is a template decided by Helm's `lookup` (`sidecarSetCRD`), not in
/// `crds/`, which Helm 4 would server-side-apply over OpenKruise's. `helm template` sees no cluster,
/// so `auto` leaves it out there (what `helm install` decides is the e2e suite's installs check);
/// `create` renders the generated CRD, kept on uninstall; `skip` never renders it.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_the_sidecarset_crd_only_when_asked_or_absent_from_the_cluster() {
    let helm = helm();
    let crds = |sets: &[&str]| -> Vec<Value> {
        helm_template(&helm, "platform", "ka", sets)
            .into_iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .collect()
    };
    assert_eq!(crds(&[]), Vec::<Value>::new(), "auto under helm template");
    assert_eq!(crds(&["sidecarSetCRD=skip"]), Vec::<Value>::new());
    let mut expected = parse_yaml(&kruise_admission::api::crd::sidecarset_crd_yaml()).remove(0);
    expected["metadata"]["annotations"] = serde_json::json!({"helm.sh/resource-policy": "keep"});
    assert_eq!(crds(&["sidecarSetCRD=create"]), vec![expected]);
}

#[test]
#[ignore = "needs kubectl: set KUBECTL=/path/to/kubectl or put it on PATH (.ci/run installs it)"]
fn the_kustomize_base_ships_no_crd_and_the_component_adds_the_sidecarset_crd() {
    let kubectl = kubectl();
    let base = kustomize(&kubectl, "manifests");
    assert!(!base.iter().any(|o| o["kind"] == "CustomResourceDefinition"));
    let mut rbac: Vec<Value> =
        base.iter().filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1").cloned().collect();
    let mut generated = deploy::rbac::objects(&Target::default(), &RbacOptions::default());
    let key = |o: &Value| (o["kind"].to_string(), o["metadata"]["name"].to_string());
    rbac.sort_by_key(key);
    generated.sort_by_key(key);
    assert_eq!(rbac, generated);
    let with_crd = kustomize(&kubectl, "examples/kustomize/without-openkruise");
    let crds: Vec<&Value> = with_crd.iter().filter(|o| o["kind"] == "CustomResourceDefinition").collect();
    assert_eq!(crds.len(), 1);
    let expected = parse_yaml(&kruise_admission::api::crd::sidecarset_crd_yaml()).remove(0);
    assert_eq!(crds[0], &expected);
    // ... and nothing else: no namespace kruise-system, which OpenKruise makes (the base has no
    // Role there to need it, and a later install of OpenKruise that creates it must not find it).
    let added: Vec<(String, String)> = with_crd
        .iter()
        .filter(|o| !base.contains(o))
        .map(|o| {
            (
                o["kind"].as_str().expect("kind").to_owned(),
                o["metadata"]["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect();
    assert_eq!(added, [("CustomResourceDefinition".to_owned(), "sidecarsets.apps.kruise.io".to_owned())]);
    assert!(!base.iter().any(|o| o["metadata"]["namespace"] == "kruise-system"));
    assert_eq!(with_crd.len(), base.len() + 1, "the component adds the CRD and changes nothing else");
}

/// Each example under examples/kustomize does what its name says (issue 16, point 7).
#[test]
#[ignore = "needs kubectl: set KUBECTL=/path/to/kubectl or put it on PATH (.ci/run installs it)"]
fn every_kustomize_example_does_what_its_name_says() {
    use kruise_admission::cluster::live::{CertMode, ClusterMode};
    let kubectl = kubectl();
    /// What one example must render.
    struct Example {
        name: &'static str,
        cluster_mode: ClusterMode,
        cert_mode: CertMode,
        cert_manager: bool,
        /// `kruise-admission.dev/needed-for` of its RBAC objects.
        rbac_modes: &'static [&'static str],
        token: bool,
        crd: bool,
    }
    let both = &["live-cluster", "self-managed-certs"][..];
    let (live, folder, self_managed, provided) =
        (ClusterMode::Live, ClusterMode::Folder, CertMode::SelfManaged, CertMode::Provided);
    let expected = [
        Example {
            name: "cert-manager",
            cluster_mode: live,
            cert_mode: provided,
            cert_manager: true,
            rbac_modes: &["live-cluster"],
            token: true,
            crd: false,
        },
        Example {
            name: "client-auth",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            rbac_modes: both,
            token: true,
            crd: false,
        },
        Example {
            name: "folder-mode",
            cluster_mode: folder,
            cert_mode: provided,
            cert_manager: false,
            rbac_modes: &[],
            token: false,
            crd: false,
        },
        Example {
            name: "live-cluster",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            rbac_modes: both,
            token: true,
            crd: false,
        },
        Example {
            name: "other-namespace",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            rbac_modes: &["live-cluster", "openkruise", "self-managed-certs"],
            token: true,
            crd: false,
        },
        Example {
            name: "provided-certs",
            cluster_mode: live,
            cert_mode: provided,
            cert_manager: false,
            rbac_modes: &["live-cluster"],
            token: true,
            crd: false,
        },
        Example {
            name: "shadow",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            // With the live agreement's Pod watch.
            rbac_modes: &["live-cluster", "self-managed-certs", "shadow-agreement"],
            token: true,
            crd: false,
        },
        Example {
            name: "with-openkruise",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            // With the Role in the Kruise namespace.
            rbac_modes: &["live-cluster", "openkruise", "self-managed-certs"],
            token: true,
            crd: false,
        },
        Example {
            name: "without-openkruise",
            cluster_mode: live,
            cert_mode: self_managed,
            cert_manager: false,
            rbac_modes: both,
            token: true,
            crd: true,
        },
    ];
    let mut examples: Vec<String> = std::fs::read_dir(repo().join("examples/kustomize"))
        .expect("examples/kustomize")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    examples.sort();
    assert_eq!(
        examples,
        expected.iter().map(|e| e.name).collect::<Vec<_>>(),
        "every example is checked here"
    );
    for Example { name, cluster_mode, cert_mode, cert_manager, rbac_modes, token, crd } in expected {
        let objects = kustomize(&kubectl, &format!("examples/kustomize/{name}"));
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment");
        let args = server_args(deployment);
        let serve = parsed_serve_args(&args, name);
        assert_eq!(serve.live.cluster_mode, cluster_mode, "{name}: {args:?}");
        assert_eq!(serve.live.cert_mode, cert_mode, "{name}: {args:?}");
        // Folder-only and file-only flags appear only in their modes.
        assert_eq!(
            args.iter().any(|a| a.starts_with("--cluster-dir")),
            cluster_mode == ClusterMode::Folder,
            "{name}: {args:?}"
        );
        assert_eq!(
            args.iter().any(|a| a.starts_with("--tls-cert-file")),
            cert_mode == CertMode::Provided,
            "{name}: {args:?}"
        );
        assert_eq!(objects.iter().any(|o| o["apiVersion"] == "cert-manager.io/v1"), cert_manager, "{name}");
        let mut modes: Vec<&str> = objects
            .iter()
            .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
            .map(|o| o["metadata"]["annotations"]["kruise-admission.dev/needed-for"].as_str().expect("mode"))
            .collect();
        modes.sort_unstable();
        modes.dedup();
        assert_eq!(modes, rbac_modes, "{name}");
        assert_eq!(deployment["spec"]["template"]["spec"]["automountServiceAccountToken"], token, "{name}");
        let account = objects.iter().find(|o| o["kind"] == "ServiceAccount").expect("a ServiceAccount");
        assert_eq!(account["automountServiceAccountToken"], token, "{name}");
        assert_eq!(objects.iter().any(|o| o["kind"] == "CustomResourceDefinition"), crd, "{name}");
        // The certificate files are where the flags say, on the right kind of volume.
        let pod = &deployment["spec"]["template"]["spec"];
        let tls = pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .find(|v| v["name"] == "tls")
            .expect("tls volume");
        let mount = pod["containers"][0]["volumeMounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .find(|m| m["name"] == "tls")
            .expect("mount");
        let dir = mount["mountPath"].as_str().expect("path");
        match cert_mode {
            CertMode::SelfManaged => {
                assert!(tls.get("emptyDir").is_some() && mount["readOnly"] == false, "{name}: {tls}");
                assert_eq!(serve.cert_dir, PathBuf::from(dir), "{name}");
            }
            CertMode::Provided => {
                assert_eq!(tls["secret"]["secretName"], "kruise-admission-tls", "{name}");
                assert_eq!(serve.tls_cert_file, Some(PathBuf::from(dir).join("tls.crt")), "{name}");
                assert_eq!(mount["readOnly"], true, "{name}");
            }
        }
        if cluster_mode == ClusterMode::Folder {
            let cluster = pod["volumes"]
                .as_array()
                .expect("volumes")
                .iter()
                .find(|v| v["name"] == "cluster")
                .expect("cluster volume");
            assert_eq!(cluster["configMap"]["name"], "kruise-admission-cluster", "{name}");
        }
        assert_client_auth(
            &objects,
            deployment,
            name == "client-auth",
            &["kube-apiserver-webhook-client"],
            name,
        );
        assert_network_policy(&objects, deployment, name);
        assert_deployment_is_safe(deployment, name);
    }
}

/// The usual overlay, `namespace: platform` with `images:` and `replicas: 3`
/// (examples/kustomize/other-namespace): every object of the server moves to `platform`, the Role
/// that reads Kruise's revisions stays in kruise-system bound to the moved ServiceAccount, the
/// webhooks are the binary's for a server in `platform` (their self-exclusion included), and the
/// whole rendering passes `kubernetes-validate --strict`.
#[test]
#[ignore = "needs kubectl and kubernetes-validate: set KUBECTL and KUBERNETES_VALIDATE or put them on PATH (.ci/run installs them)"]
fn a_kustomize_overlay_that_changes_the_namespace_moves_the_server_but_not_the_kruise_role() {
    let kubectl = kubectl();
    let validate = tool("KUBERNETES_VALIDATE", "kubernetes-validate");
    let dir = "examples/kustomize/other-namespace";
    let objects = kustomize(&kubectl, dir);
    let kruise_role = "kruise-admission:kruise-revisions";
    for object in &objects {
        let (kind, name) = (object["kind"].as_str().unwrap_or_default(), &object["metadata"]["name"]);
        let namespace = &object["metadata"]["namespace"];
        match kind {
            "Role" | "RoleBinding" if name == kruise_role => {
                assert_eq!(namespace, "kruise-system", "{kind} {name}")
            }
            "Namespace" => assert_eq!(name, "platform"),
            _ if namespace.is_null() => {}
            _ => assert_eq!(namespace, "platform", "{kind} {name}"),
        }
        // Every binding names the moved ServiceAccount.
        for subject in object["subjects"].as_array().into_iter().flatten() {
            assert_eq!(subject["namespace"], "platform", "{kind} {name}: {subject}");
        }
    }
    assert!(
        objects.iter().filter(|o| o["metadata"]["name"] == kruise_role).count() == 2,
        "the Role and RoleBinding in kruise-system are there"
    );
    let deployment = deployment_in(&objects);
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/kruise-admission:0.1.0"
    );
    let [mutating, validating] = configurations(&target("platform", "kruise-admission"));
    assert_eq!(rendered_webhooks(&objects, "MutatingWebhookConfiguration"), mutating["webhooks"]);
    assert_eq!(rendered_webhooks(&objects, "ValidatingWebhookConfiguration"), validating["webhooks"]);

    let rendered =
        Command::new(&kubectl).arg("kustomize").arg(repo().join(dir)).output().expect("run kubectl");
    let mut child = Command::new(&validate)
        .args(["--strict", "--kubernetes-version", "1.37.0", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubernetes-validate");
    std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), &rendered.stdout).expect("write");
    let out = child.wait_with_output().expect("kubernetes-validate finishes");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{log}");
    assert!(!log.lines().any(|l| l.starts_with("WARN") || l.starts_with("ERROR")), "{log}");
    let valid = log.lines().filter(|l| l.starts_with("INFO") && l.contains("passed")).count();
    assert_eq!(valid, objects.len(), "every object validated: {log}");
}

/// With client authentication: `--client-ca-file` in a read-only mount of the client CA ConfigMap
/// (a rendered one holds a PEM CA), and exactly `names` as `--allowed-client-name`; without it,
/// none of that.
fn assert_client_auth(objects: &[Value], deployment: &Value, enabled: bool, names: &[&str], origin: &str) {
    let args = server_args(deployment);
    let ca_file = args.iter().find_map(|a| a.strip_prefix("--client-ca-file="));
    let allowed: Vec<&str> = args.iter().filter_map(|a| a.strip_prefix("--allowed-client-name=")).collect();
    let pod = &deployment["spec"]["template"]["spec"];
    let volume = pod["volumes"].as_array().expect("volumes").iter().find(|v| v["name"] == "client-ca");
    if !enabled {
        assert!(
            ca_file.is_none() && allowed.is_empty() && volume.is_none(),
            "{origin}: client auth without asking: {args:?}"
        );
        return;
    }
    assert_eq!(allowed, names, "{origin}");
    let ca_file =
        PathBuf::from(ca_file.unwrap_or_else(|| panic!("{origin}: no --client-ca-file in {args:?}")));
    // As `serve` reads them.
    let serve = parsed_serve_args(&args, origin);
    assert_eq!(serve.allowed_client_names, names, "{origin}");
    assert_eq!(serve.client_ca_file.as_ref(), Some(&ca_file), "{origin}");
    let mount = pod["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == "client-ca")
        .expect("mount");
    assert_eq!(mount["readOnly"], true, "{origin}");
    assert_eq!(ca_file.parent(), Some(Path::new(mount["mountPath"].as_str().expect("path"))), "{origin}");
    let key = ca_file.file_name().and_then(|n| n.to_str()).expect("file name");
    let volume = volume.expect("client-ca volume");
    let config_map = volume["configMap"]["name"].as_str().expect("a ConfigMap volume");
    assert!(volume["configMap"].get("optional").is_none(), "{origin}: the pod must wait for its CA");
    if let Some(rendered) =
        objects.iter().find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == config_map)
    {
        let pem = rendered["data"][key]
            .as_str()
            .unwrap_or_else(|| panic!("{origin}: ConfigMap {config_map} has no {key}"));
        assert!(pem.contains("-----BEGIN CERTIFICATE-----"), "{origin}: {pem}");
    }
}

/// One NetworkPolicy selects the server pods and admits TCP to the webhook and metrics container
/// ports only (issue 17, point 6). Returns each rule's `from` (null: any source).
fn assert_network_policy(objects: &[Value], deployment: &Value, origin: &str) -> Vec<Value> {
    let policies: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "NetworkPolicy").collect();
    assert_eq!(policies.len(), 1, "{origin}: one NetworkPolicy");
    let spec = &policies[0]["spec"];
    let labels = deployment["spec"]["template"]["metadata"]["labels"].as_object().expect("pod labels");
    let selector = spec["podSelector"]["matchLabels"].as_object().expect("matchLabels");
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v)),
        "{origin}: {selector:?} does not select the pods"
    );
    assert_eq!(policies[0]["metadata"]["namespace"], deployment["metadata"]["namespace"], "{origin}");
    assert_eq!(
        spec["policyTypes"],
        json!(["Ingress"]),
        "{origin}: egress (API server, DNS) is not restricted"
    );
    let container_port = |name: &str| {
        deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["containerPort"].as_i64())
            .expect("container port")
    };
    let rules = spec["ingress"].as_array().expect("ingress rules");
    let ports: Vec<Value> = rules.iter().map(|r| r["ports"].clone()).collect();
    assert_eq!(
        ports,
        [
            json!([{ "port": container_port("webhook"), "protocol": "TCP" }]),
            json!([{ "port": container_port("metrics"), "protocol": "TCP" }])
        ],
        "{origin}"
    );
    rules.iter().map(|r| r.get("from").cloned().unwrap_or(Value::Null)).collect()
}

/// The chart: the NetworkPolicy is on by default with open sources; `networkPolicy.apiServer` and
/// `.metrics` restrict each port's sources; `enabled=false` drops it.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_network_policy_admits_only_the_webhook_and_metrics_ports() {
    let helm = helm();
    let deployment_of =
        |objects: &[Value]| objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment").clone();
    let objects = helm_template(&helm, "platform", "ka", &[]);
    assert_eq!(
        assert_network_policy(&objects, &deployment_of(&objects), "default"),
        [Value::Null, Value::Null]
    );
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &[
            "networkPolicy.apiServer[0].ipBlock.cidr=10.0.0.0/24",
            r"networkPolicy.metrics[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring",
            "metrics.port=9090",
        ],
    );
    let from = assert_network_policy(&objects, &deployment_of(&objects), "restricted");
    assert_eq!(from[0], json!([{ "ipBlock": { "cidr": "10.0.0.0/24" } }]));
    assert_eq!(
        from[1],
        json!([{ "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": "monitoring" } } }])
    );
    let objects = helm_template(&helm, "platform", "ka", &["networkPolicy.enabled=false"]);
    assert!(!objects.iter().any(|o| o["kind"] == "NetworkPolicy"));
}

/// The chart: client authentication is off by default; on, it renders the flags, the mount, and
/// the CA ConfigMap when `clientAuth.caCert` is given (else it names the operator's ConfigMap).
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_client_authentication() {
    let helm = helm();
    let deployment_of =
        |objects: &[Value]| objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment").clone();
    let objects = helm_template(&helm, "platform", "ka", &[]);
    assert_client_auth(&objects, &deployment_of(&objects), false, &[], "default");
    let pem = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----";
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &[
            "clientAuth.enabled=true",
            "clientAuth.allowedNames={kube-apiserver-webhook-client,apiserver-b}",
            &format!("clientAuth.caCert={pem}"),
        ],
    );
    let deployment = deployment_of(&objects);
    assert_client_auth(
        &objects,
        &deployment,
        true,
        &["kube-apiserver-webhook-client", "apiserver-b"],
        "caCert",
    );
    let config_map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "ka-kruise-admission-client-ca");
    assert_eq!(
        config_map.expect("the chart creates the CA ConfigMap from clientAuth.caCert")["data"]["ca.crt"],
        format!("{pem}\n")
    );
    // The operator's own ConfigMap.
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &["clientAuth.enabled=true", "clientAuth.caConfigMap=my-ca", "clientAuth.allowedNames={apiserver}"],
    );
    let deployment = deployment_of(&objects);
    assert_client_auth(&objects, &deployment, true, &["apiserver"], "caConfigMap");
    let volumes = deployment["spec"]["template"]["spec"]["volumes"].as_array().expect("volumes").clone();
    assert!(
        volumes.contains(&json!({ "name": "client-ca", "configMap": { "name": "my-ca" } })),
        "{volumes:?}"
    );
    assert!(
        !objects.iter().any(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "my-ca"),
        "not the chart's to create"
    );
    // No allowed names: any certificate the CA signed (a cluster CA signs every kubelet's) would
    // do, so the chart refuses to render.
    let out =
        helm_render(&helm, "platform", "ka", &["clientAuth.enabled=true", "clientAuth.caConfigMap=my-ca"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("clientAuth.enabled needs clientAuth.allowedNames"),
        "client auth without allowed names rendered: {stderr}"
    );
}

/// Every value of the chart's values.yaml has a row in the values table of its README.md (at its
/// leaf, or at the level the table documents, such as a list), with the same type and default;
/// and every row names a value that exists.
#[test]
fn the_chart_readme_documents_every_value() {
    let chart = repo().join("charts/kruise-admission");
    let values =
        parse_yaml(&std::fs::read_to_string(chart.join("values.yaml")).expect("values.yaml")).remove(0);
    let readme = std::fs::read_to_string(chart.join("README.md")).expect("charts/kruise-admission/README.md");
    let table = readme.split("\n## Values\n").nth(1).expect("a ## Values section");
    let mut rows = std::collections::BTreeMap::new();
    for line in table.lines().take_while(|l| !l.starts_with("## ")).filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert!(cells.len() >= 4, "a row is | key | type | default | description |: {line}");
        let unquote =
            |cell: &str| cell.strip_prefix('`').and_then(|c| c.strip_suffix('`')).map(str::to_owned);
        let key = unquote(cells[0]).unwrap_or_else(|| panic!("key in backticks: {line}"));
        let default = unquote(cells[2]).unwrap_or_else(|| panic!("default in backticks: {line}"));
        assert!(!cells[3..].join("|").trim().is_empty(), "{key}: no description");
        assert!(rows.insert(key.clone(), (cells[1].to_owned(), default)).is_none(), "{key}: two rows");
    }
    fn type_name(value: &Value) -> &'static str {
        match value {
            Value::Bool(_) => "bool",
            Value::Number(n) if n.is_i64() || n.is_u64() => "int",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "list",
            Value::Object(_) => "object",
            Value::Null => "null",
        }
    }
    fn walk(
        value: &Value,
        prefix: &str,
        rows: &std::collections::BTreeMap<String, (String, String)>,
        seen: &mut Vec<String>,
        missing: &mut Vec<String>,
    ) {
        for (key, value) in value.as_object().expect("a map") {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            if let Some((kind, default)) = rows.get(&path) {
                assert_eq!(kind, type_name(value), "{path}: type in the README");
                let documented: Value = serde_saphyr::from_str(default).expect("the default reads as YAML");
                assert_eq!(&documented, value, "{path}: the README's default is not values.yaml's");
                seen.push(path);
            } else if value.as_object().is_some_and(|m| !m.is_empty()) {
                walk(value, &path, rows, seen, missing);
            } else {
                missing.push(path);
            }
        }
    }
    let (mut seen, mut missing) = (Vec::new(), Vec::new());
    walk(&values, "", &rows, &mut seen, &mut missing);
    assert!(missing.is_empty(), "values.yaml keys without a row in the chart README's table: {missing:?}");
    let stale: Vec<&String> = rows.keys().filter(|k| !seen.contains(k)).collect();
    assert!(stale.is_empty(), "README rows for values that values.yaml does not have: {stale:?}");
    // The schema knows every top-level value the table documents.
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart.join("values.schema.json")).expect("schema"))
            .expect("JSON");
    for key in rows.keys() {
        let top = key.split('.').next().expect("a key");
        assert!(schema["properties"].get(top).is_some(), "{top}: not in values.schema.json");
    }
}

fn deployment_in(objects: &[Value]) -> &Value {
    objects.iter().find(|o| o["kind"] == "Deployment").expect("a Deployment")
}

/// The chart's own PriorityClass by default (above every workload, below the system classes), an
/// existing class instead with priorityClassName, none with priorityClass.create=false.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_runs_the_webhook_with_a_priority_class() {
    let helm = helm();
    let objects = helm_template(&helm, "platform", "ka", &[]);
    let classes: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "PriorityClass").collect();
    assert_eq!(classes.len(), 1, "the chart's own PriorityClass");
    assert_eq!(classes[0]["metadata"]["name"], "ka-kruise-admission");
    assert_eq!(classes[0]["value"], 1_000_000_000, "the highest a non-system class may have");
    assert_eq!(classes[0]["globalDefault"], false);
    assert_eq!(
        deployment_in(&objects)["spec"]["template"]["spec"]["priorityClassName"],
        "ka-kruise-admission"
    );
    let objects = helm_template(&helm, "platform", "ka", &["priorityClassName=system-cluster-critical"]);
    assert!(!objects.iter().any(|o| o["kind"] == "PriorityClass"), "an existing class: none created");
    assert_eq!(
        deployment_in(&objects)["spec"]["template"]["spec"]["priorityClassName"],
        "system-cluster-critical"
    );
    let objects = helm_template(&helm, "platform", "ka", &["priorityClass.create=false"]);
    assert!(!objects.iter().any(|o| o["kind"] == "PriorityClass"));
    assert!(deployment_in(&objects)["spec"]["template"]["spec"].get("priorityClassName").is_none());
    // The kustomize base runs with its own class too.
    let text =
        std::fs::read_to_string(repo().join("manifests/priorityclass.yaml")).expect("priorityclass.yaml");
    let class = parse_yaml(&text).remove(0);
    let deployment =
        parse_yaml(&std::fs::read_to_string(repo().join("manifests/deployment.yaml")).expect("deployment"))
            .remove(0);
    assert_eq!(deployment["spec"]["template"]["spec"]["priorityClassName"], class["metadata"]["name"]);
    assert_eq!(class["value"], 1_000_000_000);
}

/// Names, pod metadata, extra flags, affinity and spread as the values say.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_renders_the_naming_and_scheduling_values() {
    let helm = helm();
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &[
            "nameOverride=webhooks",
            "fullnameOverride=ka-webhooks",
            r"podAnnotations.example\.com/owner=platform",
            "podLabels.team=platform",
            "extraArgs={--max-connections=2048,--max-connections-per-peer=64}",
            r"serviceAccount.annotations.example\.com/role=kruise-admission",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/os",
            "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
            "topologySpreadConstraints[0].maxSkew=1",
            "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
            "topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
            "sidecarSetPolicy=deny",
        ],
    );
    let deployment = deployment_in(&objects);
    assert_eq!(deployment["metadata"]["name"], "ka-webhooks");
    for kind in
        ["Service", "ServiceAccount", "PodDisruptionBudget", "NetworkPolicy", "MutatingWebhookConfiguration"]
    {
        let object = objects.iter().find(|o| o["kind"] == kind).unwrap_or_else(|| panic!("a {kind}"));
        assert_eq!(object["metadata"]["name"], "ka-webhooks", "{kind}");
        assert_eq!(object["metadata"]["labels"]["app.kubernetes.io/name"], "webhooks", "{kind}");
    }
    let mutating = objects.iter().find(|o| o["kind"] == "MutatingWebhookConfiguration").expect("mutating");
    assert_eq!(mutating["webhooks"][0]["clientConfig"]["service"]["name"], "ka-webhooks");
    let account = objects.iter().find(|o| o["kind"] == "ServiceAccount").expect("account");
    assert_eq!(account["metadata"]["annotations"], json!({ "example.com/role": "kruise-admission" }));
    let template = &deployment["spec"]["template"];
    assert_eq!(template["metadata"]["annotations"], json!({ "example.com/owner": "platform" }));
    assert_eq!(template["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        json!({ "app.kubernetes.io/name": "webhooks", "app.kubernetes.io/instance": "ka" }),
        "podLabels stay out of the selector"
    );
    let args = server_args(deployment);
    assert_eq!(args[args.len() - 2..], ["--max-connections=2048", "--max-connections-per-peer=64"]);
    let serve = parsed_serve_args(&args, "extraArgs");
    assert_eq!((serve.connections.max_connections, serve.connections.max_connections_per_peer), (2048, 64));
    assert_eq!(
        serve.decisions.sidecarset_policy,
        kruise_admission::admission::sidecarset_rules::host_access::Policy::Deny,
        "sidecarSetPolicy"
    );
    let pod = &template["spec"];
    assert!(pod["affinity"].get("podAntiAffinity").is_none(), "affinity replaces the default");
    assert!(pod["affinity"]["nodeAffinity"].is_object());
    assert_eq!(
        pod["topologySpreadConstraints"],
        json!([{
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": { "matchLabels": { "app.kubernetes.io/name": "webhooks", "app.kubernetes.io/instance": "ka" } }
        }])
    );
    // A pod label that would change what the selector matches is refused.
    let out = helm_render(&helm, "platform", "ka", &[r"podLabels.app\.kubernetes\.io/instance=other"]);
    assert!(!out.status.success(), "a selector label in podLabels rendered");
}

/// On the host network: the webhook and metrics ports of their own, the flags, the Service and
/// the NetworkPolicy following them, and cluster DNS; ports the host uses are refused.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_runs_on_the_host_network_with_ports_of_its_own() {
    let helm = helm();
    let objects = helm_template(&helm, "platform", "ka", &["hostNetwork.enabled=true"]);
    let deployment = deployment_in(&objects);
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    let serve = parsed_serve_args(&server_args(deployment), "hostNetwork");
    assert_eq!((serve.listen.port(), serve.metrics_listen.port()), (10263, 10264));
    assert_eq!(
        pod["containers"][0]["ports"],
        json!([
            { "name": "webhook", "containerPort": 10263, "protocol": "TCP" },
            { "name": "metrics", "containerPort": 10264, "protocol": "TCP" }
        ])
    );
    let service = objects.iter().find(|o| o["kind"] == "Service").expect("a Service");
    let targets: Vec<&Value> =
        service["spec"]["ports"].as_array().expect("ports").iter().map(|p| &p["targetPort"]).collect();
    assert_eq!(targets, [&json!("webhook"), &json!("metrics")], "the Service targets the ports by name");
    assert_eq!(assert_network_policy(&objects, deployment, "hostNetwork"), [Value::Null, Value::Null]);
    // Off the host network nothing changes.
    let objects = helm_template(&helm, "platform", "ka", &[]);
    let pod = &deployment_in(&objects)["spec"]["template"]["spec"];
    assert!(pod.get("hostNetwork").is_none() && pod.get("dnsPolicy").is_none());
    for port in ["9443", "10250", "8080", "80"] {
        let out = helm_render(
            &helm,
            "platform",
            "ka",
            &["hostNetwork.enabled=true", &format!("hostNetwork.port={port}")],
        );
        assert!(!out.status.success(), "host-network webhook port {port} rendered");
    }
    let out =
        helm_render(&helm, "platform", "ka", &["hostNetwork.enabled=true", "hostNetwork.metricsPort=10263"]);
    assert!(!out.status.success(), "one port for both rendered");
}

/// With the autoscaler the Deployment sets no replicas, the HPA targets it, and the PDB leaves a
/// pod evictable at its minimum; a PDB that blocks every eviction is refused.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_autoscales_with_a_coherent_disruption_budget() {
    let helm = helm();
    let objects = helm_template(&helm, "platform", "ka", &[]);
    assert!(!objects.iter().any(|o| o["kind"] == "HorizontalPodAutoscaler"), "off by default");
    let objects =
        helm_template(&helm, "platform", "ka", &["autoscaling.enabled=true", "autoscaling.maxReplicas=4"]);
    let deployment = deployment_in(&objects);
    assert!(deployment["spec"].get("replicas").is_none(), "the autoscaler owns the replicas");
    let hpa = objects.iter().find(|o| o["kind"] == "HorizontalPodAutoscaler").expect("an HPA");
    assert_eq!(hpa["apiVersion"], "autoscaling/v2");
    assert_eq!(
        hpa["spec"]["scaleTargetRef"],
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"] })
    );
    assert_eq!(
        (hpa["spec"]["minReplicas"].as_i64(), hpa["spec"]["maxReplicas"].as_i64()),
        (Some(2), Some(4))
    );
    assert_eq!(hpa["spec"]["metrics"][0]["resource"]["name"], "cpu");
    let pdb = objects.iter().find(|o| o["kind"] == "PodDisruptionBudget").expect("a PDB");
    assert!(pdb["spec"]["minAvailable"].as_i64().expect("minAvailable") < 2);
    for sets in [
        &["autoscaling.enabled=true", "autoscaling.minReplicas=1"][..],
        &["replicas=1"][..],
        &["podDisruptionBudget.minAvailable=100%"][..],
        &["autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=3"][..],
    ] {
        let out = helm_render(&helm, "platform", "ka", sets);
        assert!(!out.status.success(), "{sets:?} rendered");
    }
    assert!(
        helm_render(&helm, "platform", "ka", &["replicas=3", "podDisruptionBudget.minAvailable=2"])
            .status
            .success()
    );
}

/// The PrometheusRule is off by default; on, its expressions name only metrics the server exports
/// (or the API server's admission webhook series and `up`), and it alerts on what the docs
/// recommend.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_prometheus_rule_alerts_on_exported_metrics() {
    let helm = helm();
    let objects = helm_template(&helm, "platform", "ka", &[]);
    assert!(!objects.iter().any(|o| o["kind"] == "PrometheusRule"), "off by default");
    let source =
        std::fs::read_to_string(repo().join("src/server/metrics.rs")).expect("src/server/metrics.rs");
    let quoted = regex::Regex::new(r#""(kruise_admission_[a-z_]+)""#).expect("regex");
    let exported: std::collections::BTreeSet<&str> =
        quoted.captures_iter(&source).map(|c| c.get(1).expect("name").as_str()).collect();
    let objects = helm_template(&helm, "platform", "ka", &["metrics.prometheusRule.enabled=true"]);
    let rule = objects.iter().find(|o| o["kind"] == "PrometheusRule").expect("a PrometheusRule");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    let metric = regex::Regex::new(r"\b(kruise_admission_[a-z_]+|apiserver_[a-z_]+)").expect("regex");
    let mut named = std::collections::BTreeSet::new();
    for group in rule["spec"]["groups"].as_array().expect("groups") {
        for alert in group["rules"].as_array().expect("rules") {
            let expr = alert["expr"].as_str().expect("expr");
            for found in metric.find_iter(expr) {
                let name = found.as_str();
                let base = name.strip_suffix("_bucket").unwrap_or(name);
                assert!(
                    exported.contains(base)
                        || [
                            "apiserver_admission_webhook_fail_open_count",
                            "apiserver_admission_webhook_rejection_count",
                            "apiserver_admission_webhook_admission_duration_seconds"
                        ]
                        .contains(&base),
                    "{}: {name} is not a metric the server or the API server exports",
                    alert["alert"]
                );
                named.insert(base.to_owned());
            }
            assert!(["warning", "critical"].contains(&alert["labels"]["severity"].as_str().unwrap_or("")));
        }
    }
    for needed in [
        "kruise_admission_http_errors_total",
        "apiserver_admission_webhook_fail_open_count",
        "kruise_admission_serving_certificate_not_after_seconds",
        "kruise_admission_cluster_watch_synced",
        "kruise_admission_shadow_agreement_total",
    ] {
        assert!(named.contains(needed), "no alert on {needed}");
    }
}

/// The chart claims exactly the oldest Kubernetes the end-to-end suite runs on: its `kubeVersion`
/// floor is the minor version of the last entry of tests/e2e/kube/VERSIONS, and every version
/// there has its pinned module.
#[test]
fn the_charts_kube_version_floor_is_the_oldest_version_the_e2e_suite_runs() {
    let versions = std::fs::read_to_string(repo().join("tests/e2e/kube/VERSIONS")).expect("VERSIONS");
    let versions: Vec<&str> = versions.lines().filter(|l| l.starts_with('v')).collect();
    assert!(versions.len() >= 2, "VERSIONS lists the newest and the floor: {versions:?}");
    for v in &versions {
        let module = repo().join(format!("tests/e2e/kube/kube-apiserver-{v}"));
        assert!(module.join("go.mod").is_file() && module.join("go.sum").is_file(), "{v} is not pinned");
    }
    let floor = versions.last().expect("a floor");
    let minor: Vec<&str> = floor.trim_start_matches('v').split('.').take(2).collect();
    let chart =
        std::fs::read_to_string(repo().join("charts/kruise-admission/Chart.yaml")).expect("Chart.yaml");
    let want = format!("kubeVersion: \">={}.{}.0-0\"", minor[0], minor[1]);
    assert!(chart.lines().any(|l| l == want), "Chart.yaml should say {want}");
}

/// The chart: `networkPolicy.egress.enabled` restricts egress to TCP to the API server's ports
/// (to the given peers), and to nothing in folder mode with provided certificates, which never
/// calls the API server; ingress stays as without it.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_network_policy_egress_reaches_only_the_api_server() {
    let helm = helm();
    let policy =
        |objects: &[Value]| objects.iter().find(|o| o["kind"] == "NetworkPolicy").expect("a policy").clone();
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &["networkPolicy.egress.enabled=true", "networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.10/32"],
    );
    let spec = policy(&objects)["spec"].clone();
    assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        spec["egress"],
        json!([{ "ports": [{ "port": 443, "protocol": "TCP" }, { "port": 6443, "protocol": "TCP" }],
                 "to": [{ "ipBlock": { "cidr": "10.0.0.10/32" } }] }])
    );
    assert_eq!(spec["ingress"].as_array().map(Vec::len), Some(2), "ingress unchanged");
    let objects = helm_template(
        &helm,
        "platform",
        "ka",
        &["networkPolicy.egress.enabled=true", "liveCluster.enabled=false", "certs.mode=provided"],
    );
    let spec = policy(&objects)["spec"].clone();
    assert_eq!((&spec["policyTypes"], &spec["egress"]), (&json!(["Ingress", "Egress"]), &json!([])));
    let spec = policy(&helm_template(&helm, "platform", "ka", &[]))["spec"].clone();
    assert_eq!((&spec["policyTypes"], spec.get("egress")), (&json!(["Ingress"]), None), "off by default");
}

/// The chart: with self-managed certificates (the default) a ValidatingAdmissionPolicy and its
/// binding let the release's service account UPDATE only caBundle of the release's own webhook
/// configurations (`<fullname>-shadow` in shadow mode); not rendered in the other cert modes or
/// with `certs.selfManaged.caBundleOnlyPolicy=false`. Its CEL is exercised on a real
/// kube-apiserver by tests/e2e/ca_bundle.sh.
#[test]
#[ignore = "needs helm: set HELM=/path/to/helm or put it on PATH (.ci/run installs it)"]
fn the_chart_limits_the_service_account_to_ca_bundle_changes() {
    let helm = helm();
    let policies = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"].as_str().is_some_and(|k| k.starts_with("ValidatingAdmissionPolicy")))
            .cloned()
            .collect()
    };
    for (sets, configurations) in
        [(&[][..], "ka-kruise-admission"), (&["shadow.enabled=true"][..], "ka-kruise-admission-shadow")]
    {
        let objects = helm_template(&helm, "platform", "ka", sets);
        let found = policies(&objects);
        assert_eq!(found.len(), 2, "{sets:?}: a policy and its binding");
        let (policy, binding) = (&found[0], &found[1]);
        assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
        assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
        let spec = &policy["spec"];
        assert_eq!(spec["failurePolicy"], "Fail");
        assert_eq!(
            spec["matchConstraints"]["resourceRules"],
            json!([{ "apiGroups": ["admissionregistration.k8s.io"], "apiVersions": ["*"], "operations": ["UPDATE"],
                     "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                     "resourceNames": [configurations] }])
        );
        assert_eq!(
            spec["matchConditions"][0]["expression"],
            "request.userInfo.username == 'system:serviceaccount:platform:ka-kruise-admission'"
        );
        let sa = objects.iter().find(|o| o["kind"] == "ServiceAccount").expect("service account");
        assert_eq!(sa["metadata"]["name"], "ka-kruise-admission", "the account the condition names");
        let webhooks: Vec<&Value> = objects
            .iter()
            .filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("WebhookConfiguration")))
            .collect();
        assert!(
            webhooks.iter().all(|w| w["metadata"]["name"] == configurations),
            "the configurations it names"
        );
    }
    for sets in [
        &["certs.mode=provided"][..],
        &["certs.mode=cert-manager"],
        &["certs.selfManaged.caBundleOnlyPolicy=false"],
    ] {
        assert!(policies(&helm_template(&helm, "platform", "ka", sets)).is_empty(), "{sets:?}");
    }
}
