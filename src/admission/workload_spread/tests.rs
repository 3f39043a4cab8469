//! Step 2 and the deletion accounting end to end: subset choice, the status write, idempotence
//! after a conflict, dry runs and Kruise's errors.

use serde_json::{Value, json};

use super::*;
use crate::admission::feature_gates::FeatureGates;
use crate::admission::review::decode_review;
use crate::admission::writes::OnFailure;
use crate::admission::{FixedClock, SeededRandom, Settings};
use crate::cluster::{Answers, Snapshot};

const NOW: &str = "2024-05-01T12:00:00Z";

fn review(
    operation: &str,
    sub_resource: &str,
    object: Value,
    old: Value,
    dry_run: bool,
) -> AdmissionRequest<'static> {
    decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": sub_resource,
        "namespace": "ns", "name": "web-0", "operation": operation, "dryRun": dry_run,
        "object": object, "oldObject": old}}))
    .unwrap()
}

fn pod(name: &str, owner: (&str, &str, &str), labels: Value) -> Value {
    let (api_version, kind, owner_name) = owner;
    let mut metadata = json!({"namespace": "ns", "labels": labels,
        "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": "x", "controller": true}]});
    if name.ends_with('-') {
        metadata["generateName"] = json!(name);
    } else {
        metadata["name"] = json!(name);
    }
    json!({"metadata": metadata, "spec": {"containers": [{"name": "main", "image": "nginx"}]}})
}

fn cloneset_pod(name: &str) -> Value {
    pod(name, ("apps.kruise.io/v1alpha1", "CloneSet", "web"), json!({"app": "web"}))
}

fn ws(subsets: Value, status: Value) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
        "metadata": {"name": "spread", "namespace": "ns", "resourceVersion": "7"},
        "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web"},
            "subsets": subsets},
        "status": status})
}

fn cloneset(replicas: i64) -> Value {
    json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
        "metadata": {"name": "web", "namespace": "ns", "uid": "x"}, "spec": {"replicas": replicas}})
}

fn two_subsets(a: Value, b: Value) -> Value {
    json!([{"name": "a", "maxReplicas": a}, {"name": "b", "maxReplicas": b}])
}

struct Run {
    pod: Value,
    assignment: Assignment,
}

fn decide_with(
    cluster: Vec<Value>,
    answers: Answers,
    request: &AdmissionRequest,
    gates: &[(Gate, bool)],
) -> Result<Run, AdmissionError> {
    let cluster = Snapshot::from_objects(cluster);
    let settings = Settings { gates: FeatureGates::from_flags(gates), ..Settings::default() };
    let clock =
        FixedClock(time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap());
    let random = SeededRandom::new(1);
    let inputs =
        Inputs { cluster: &cluster, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let original = request.object.as_ref().unwrap();
    let mut draft = Draft::Same(original);
    let assignment = assign(request, &mut draft, &inputs)?;
    Ok(Run { pod: draft.into_json().into_value(), assignment })
}

fn decide(cluster: Vec<Value>, pod: Value) -> Result<Run, AdmissionError> {
    decide_with(cluster, Answers::default(), &review("CREATE", "", pod, Value::Null, false), &[])
}

fn subset_of(run: &Run) -> Option<Value> {
    let text =
        run.pod.pointer(&format!("/metadata/annotations/{}", MATCHED_ANNOTATION.replace('/', "~1")))?;
    serde_json::from_str(text.as_str()?).ok()
}

fn written(run: &Run) -> &Value {
    let write = run.assignment.write.as_ref().expect("a status write");
    assert_eq!(write.on_failure, OnFailure::Internal);
    assert_eq!((write.target.kind.as_str(), write.target.name.as_str()), ("WorkloadSpread", "spread"));
    assert_eq!(write.object["metadata"]["resourceVersion"], "7", "the version read is kept");
    &write.object["status"]
}

#[test]
fn statuses_absent_are_rebuilt_from_the_spec_and_the_pod_is_recorded() {
    let cluster = vec![cloneset(4), ws(two_subsets(json!(1), json!("50%")), Value::Null)];
    let run = decide(cluster, cloneset_pod("web-x")).unwrap();
    assert_eq!(subset_of(&run), Some(json!({"name": "spread", "subset": "a"})));
    assert!(run.assignment.patched);
    assert_eq!(
        written(&run)["versionedSubsetStatuses"]["versionIgnored"],
        json!([
            {"name": "a", "replicas": 0, "missingReplicas": 0, "creatingPods": {"web-x": NOW}},
            {"name": "b", "replicas": 0, "missingReplicas": 2},
        ])
    );
}

#[test]
fn full_and_unschedulable_subsets_are_passed_over() {
    // Subset a is full; b is marked unschedulable (Adaptive); c has room.
    let statuses = json!({"versionedSubsetStatuses": {"versionIgnored": [
        {"name": "a", "replicas": 2, "missingReplicas": 0},
        {"name": "b", "replicas": 0, "missingReplicas": 3, "conditions": [{"type": "Schedulable", "status": "False"}]},
        {"name": "c", "replicas": 0, "missingReplicas": 2, "creatingPods": {"other": NOW}},
    ]}});
    let subsets = json!([{"name": "a", "maxReplicas": 2}, {"name": "b", "maxReplicas": 3}, {"name": "c", "maxReplicas": 2}]);
    let run = decide(vec![cloneset(4), ws(subsets.clone(), statuses)], cloneset_pod("web-x")).unwrap();
    assert_eq!(subset_of(&run).unwrap()["subset"], "c");
    let c = &written(&run)["versionedSubsetStatuses"]["versionIgnored"][2];
    assert_eq!(
        c,
        &json!({"name": "c", "replicas": 0, "missingReplicas": 1, "creatingPods": {"other": NOW, "web-x": NOW}})
    );
    // Every subset full: no subset, the pod untouched, nothing written.
    let full = json!({"versionedSubsetStatuses": {"versionIgnored": [
        {"name": "a", "missingReplicas": 0}, {"name": "b", "missingReplicas": 0}, {"name": "c", "missingReplicas": 0}]}});
    let run = decide(vec![cloneset(4), ws(subsets, full)], cloneset_pod("web-x")).unwrap();
    assert!(!run.assignment.patched && run.assignment.write.is_none());
    assert_eq!(run.pod, cloneset_pod("web-x"));
}

#[test]
fn a_subset_without_a_limit_takes_the_pod_without_a_record() {
    // One subset without maxReplicas: no status is read at all.
    let run = decide(vec![ws(json!([{"name": "only"}]), Value::Null)], cloneset_pod("web-x")).unwrap();
    assert_eq!(subset_of(&run).unwrap()["subset"], "only");
    assert!(run.assignment.write.is_none());
    // A full first subset and an unlimited second: the second, unrecorded.
    let run =
        decide(vec![ws(two_subsets(json!(0), Value::Null), Value::Null)], cloneset_pod("web-x")).unwrap();
    assert_eq!(subset_of(&run).unwrap()["subset"], "b");
    assert!(run.assignment.write.is_none());
}

#[test]
fn percent_limits_scale_the_workloads_replicas_rounding_up() {
    let subsets = two_subsets(json!("30%"), json!("70%"));
    let run = decide(vec![cloneset(5), ws(subsets.clone(), Value::Null)], cloneset_pod("web-x")).unwrap();
    let statuses = &written(&run)["versionedSubsetStatuses"]["versionIgnored"];
    assert_eq!(
        (statuses[0]["missingReplicas"].clone(), statuses[1]["missingReplicas"].clone()),
        (json!(1), json!(4))
    );
    // Without the workload the replicas are 0: every percent subset is full.
    let run = decide(vec![ws(subsets, Value::Null)], cloneset_pod("web-x")).unwrap();
    assert!(subset_of(&run).is_none() && run.assignment.write.is_none());
}

#[test]
fn deployment_pods_are_counted_per_version() {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "d"}, "spec": {"replicas": 2}});
    let replicaset = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "namespace": "ns", "uid": "r",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d", "controller": true}]},
        "spec": {"replicas": 2}});
    let mut spread = ws(
        two_subsets(json!(1), json!(1)),
        json!({"versionedSubsetStatuses": {
        "abc": [{"name": "a", "missingReplicas": 0}, {"name": "b", "missingReplicas": 1}],
        "old": [{"name": "a", "missingReplicas": 1}, {"name": "b", "missingReplicas": 1}]}}),
    );
    spread["spec"]["targetRef"] = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let new_pod = pod("web-abc-x", ("apps/v1", "ReplicaSet", "web-abc"), json!({"pod-template-hash": "abc"}));
    let run = decide(vec![deployment.clone(), replicaset.clone(), spread.clone()], new_pod).unwrap();
    assert_eq!(subset_of(&run).unwrap()["subset"], "b", "version abc's statuses");
    let by_version = &written(&run)["versionedSubsetStatuses"];
    assert_eq!(by_version["abc"][1]["creatingPods"], json!({"web-abc-x": NOW}));
    assert_eq!(by_version["old"][0]["missingReplicas"], 1, "other versions untouched");
    // A version without statuses gets them from the spec, beside the others.
    let other = pod("web-def-x", ("apps/v1", "ReplicaSet", "web-abc"), json!({"pod-template-hash": "def"}));
    let run = decide(vec![deployment, replicaset.clone(), spread.clone()], other).unwrap();
    let by_version = &written(&run)["versionedSubsetStatuses"];
    assert_eq!(
        by_version["def"][0],
        json!({"name": "a", "replicas": 0, "missingReplicas": 0, "creatingPods": {"web-def-x": NOW}})
    );
    assert!(by_version.get("abc").is_some());
    // The Deployment the ReplicaSet names does not exist, and is not what a WorkloadSpread of the
    // namespace targets by name: Kruise's 500 with the API's message.
    let orphan = pod("web-abc-y", ("apps/v1", "ReplicaSet", "web-abc"), json!({"pod-template-hash": "abc"}));
    let ok = decide(vec![replicaset.clone(), spread.clone()], orphan.clone()).unwrap();
    assert!(subset_of(&ok).is_some(), "the target is compared by name before anything is read");
    spread["spec"]["targetRef"] =
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "other"});
    let err = decide(vec![replicaset, spread], orphan).err().unwrap();
    assert_eq!(err, AdmissionError::Internal(r#"deployments.apps "web" not found"#.into()));
}

#[test]
fn a_rerun_after_a_conflict_reads_the_fresh_status_and_records_once() {
    let cluster = vec![cloneset(4), ws(two_subsets(json!(2), json!(2)), Value::Null)];
    let request = review("CREATE", "", cloneset_pod("web-x"), Value::Null, false);
    let first = decide_with(cluster.clone(), Answers::default(), &request, &[]).unwrap();
    let target = first.assignment.write.as_ref().unwrap().target.clone();
    // Someone else's write won: the fresh object already records this pod (our first attempt
    // went through after all) at another resourceVersion.
    let mut fresh = first.assignment.write.as_ref().unwrap().object.clone();
    fresh["metadata"]["resourceVersion"] = json!("8");
    let mut answers = Answers::default();
    answers.insert(target.query(), Ok(vec![std::sync::Arc::new(fresh.clone())]));
    let again = decide_with(cluster.clone(), answers, &request, &[]).unwrap();
    assert!(again.assignment.write.is_none(), "recorded once");
    assert_eq!(subset_of(&again), subset_of(&first), "the recorded subset");
    // The fresh object has another pod in subset a, now full: the re-run records in b.
    fresh["status"]["versionedSubsetStatuses"]["versionIgnored"][0] =
        json!({"name": "a", "missingReplicas": 0, "creatingPods": {"web-y": NOW}});
    let mut answers = Answers::default();
    answers.insert(target.query(), Ok(vec![std::sync::Arc::new(fresh)]));
    let again = decide_with(cluster, answers, &request, &[]).unwrap();
    assert_eq!(subset_of(&again).unwrap()["subset"], "b");
    assert_eq!(again.assignment.write.as_ref().unwrap().object["metadata"]["resourceVersion"], "8");
}

#[test]
fn a_reinvocation_on_a_pod_given_a_subset_changes_nothing() {
    let subsets =
        json!([{"name": "a", "maxReplicas": 2, "tolerations": [{"key": "zone", "operator": "Exists"}]}]);
    let cluster = vec![cloneset(4), ws(subsets, Value::Null)];
    let first = decide(cluster.clone(), cloneset_pod("web-")).unwrap();
    assert!(first.assignment.patched && first.assignment.write.is_some());
    let again = decide(cluster, first.pod.clone()).unwrap();
    assert!(!again.assignment.patched && again.assignment.write.is_none());
    assert_eq!(again.pod, first.pod);
}

#[test]
fn a_pod_with_only_generate_name_is_recorded_under_a_uuid() {
    let cluster = vec![cloneset(4), ws(two_subsets(json!(2), json!(2)), Value::Null)];
    let run = decide(cluster, cloneset_pod("web-")).unwrap();
    let matched = subset_of(&run).unwrap();
    let uid = matched["uid"].as_str().unwrap();
    assert_eq!(uid.len(), 36);
    assert_eq!(
        written(&run)["versionedSubsetStatuses"]["versionIgnored"][0]["creatingPods"],
        json!({uid: NOW})
    );
    assert!(run.pod["metadata"].get("name").is_none(), "WorkloadSpread names no pod");
}

#[test]
fn dry_runs_gates_and_unrelated_pods_are_left_alone() {
    let cluster = || vec![cloneset(4), ws(two_subsets(json!(2), json!(2)), Value::Null)];
    let dry = review("CREATE", "", cloneset_pod("web-x"), Value::Null, true);
    let run = decide_with(cluster(), Answers::default(), &dry, &[]).unwrap();
    assert!(!run.assignment.patched && run.assignment.write.is_none());
    let request = review("CREATE", "", cloneset_pod("web-x"), Value::Null, false);
    let run = decide_with(cluster(), Answers::default(), &request, &[(Gate::WorkloadSpread, false)]).unwrap();
    assert!(!run.assignment.patched && run.assignment.write.is_none());
    // No controller, another kind of controller, a finished pod, a filter that does not select it.
    let mut finished = cloneset_pod("web-x");
    finished["status"] = json!({"phase": "Succeeded"});
    let lone = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {}});
    let other = pod("p", ("v1", "ReplicationController", "web"), json!({}));
    for p in [finished, lone, other] {
        assert!(subset_of(&decide(cluster(), p).unwrap()).is_none());
    }
    let mut filtered = ws(two_subsets(json!(2), json!(2)), Value::Null);
    filtered["spec"]["targetFilter"] = json!({"selector": {"matchLabels": {"app": "db"}}});
    assert!(subset_of(&decide(vec![cloneset(4), filtered], cloneset_pod("web-x")).unwrap()).is_none());
}

#[test]
fn custom_workloads_of_the_whitelist_are_followed() {
    let whitelist = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kruise-configuration", "namespace": "kruise-system"},
        "data": {"WorkloadSpread_Watch_Custom_Workload_WhiteList":
            r#"{"workloads": [{"Group": "game.io", "Kind": "GameSet", "replicasPath": "spec.size",
                "subResources": [{"Group": "game.io", "Kind": "GameShard"}]}]}"#}});
    let mut spread = ws(two_subsets(json!("50%"), json!(1)), Value::Null);
    spread["spec"]["targetRef"] = json!({"apiVersion": "game.io/v1", "kind": "GameSet", "name": "arena"});
    let shard = json!({"apiVersion": "game.io/v1", "kind": "GameShard", "metadata": {"name": "arena-1", "namespace": "ns",
        "ownerReferences": [{"apiVersion": "game.io/v1", "kind": "GameSet", "name": "arena", "controller": true}]}});
    let gameset = json!({"apiVersion": "game.io/v1", "kind": "GameSet", "metadata": {"name": "arena", "namespace": "ns"},
        "spec": {"size": 4}});
    let pod_of_shard = || pod("arena-1-x", ("game.io/v1", "GameShard", "arena-1"), json!({}));
    let run =
        decide(vec![whitelist.clone(), spread.clone(), shard.clone(), gameset], pod_of_shard()).unwrap();
    assert_eq!(subset_of(&run).unwrap()["subset"], "a");
    let statuses = &written(&run)["versionedSubsetStatuses"]["versionIgnored"];
    assert_eq!(statuses[0]["missingReplicas"], 1, "50% of spec.size 4, one taken");
    // Without the whitelist the shard is no workload; a shard not cached ends the walk unmatched.
    assert!(subset_of(&decide(vec![spread.clone(), shard], pod_of_shard()).unwrap()).is_none());
    assert!(subset_of(&decide(vec![whitelist, spread], pod_of_shard()).unwrap()).is_none());
}

#[test]
fn statefulset_pods_get_their_subset_by_ordinal() {
    let mut spread = ws(
        json!([{"name": "a", "maxReplicas": 2}, {"name": "b", "maxReplicas": "2"}, {"name": "c"}]),
        Value::Null,
    );
    spread["spec"]["targetRef"] = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db"});
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"replicas": 9}});
    let subset = |name: &str| {
        let run =
            decide(vec![sts.clone(), spread.clone()], pod(name, ("apps/v1", "StatefulSet", "db"), json!({})))
                .unwrap();
        assert!(run.assignment.write.is_none());
        subset_of(&run).map(|m| m["subset"].clone())
    };
    assert_eq!(subset("db-1"), Some(json!("a")));
    assert_eq!(subset("db-3"), Some(json!("b")), "the string \"2\" is read as 2");
    assert_eq!(subset("db-4"), Some(json!("c")));
    assert_eq!(subset("db-x"), Some(json!("a")), "no ordinal: -1");
}

fn deletion_of(cluster: Vec<Value>, request: &AdmissionRequest, pod: &Value) -> Option<StatusWrite> {
    let cluster = Snapshot::from_objects(cluster);
    let settings = Settings::default();
    let clock =
        FixedClock(time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap());
    let (answers, random) = (Answers::default(), SeededRandom::new(1));
    let inputs =
        Inputs { cluster: &cluster, answers: &answers, clock: &clock, random: &random, settings: &settings };
    deletion(request, &Json::from(pod), &inputs).unwrap()
}

#[test]
fn deletions_and_evictions_are_recorded_in_deleting_pods() {
    let statuses = json!({"versionedSubsetStatuses": {"versionIgnored": [
        {"name": "a", "missingReplicas": 0}, {"name": "b", "missingReplicas": -1}]}});
    let cluster = vec![ws(json!([{"name": "a", "maxReplicas": 2}, {"name": "b"}]), statuses)];
    let mut victim = cloneset_pod("web-0");
    victim["metadata"]["annotations"] = json!({MATCHED_ANNOTATION: r#"{"name":"spread","subset":"a"}"#});
    let delete = review("DELETE", "", Value::Null, victim.clone(), false);
    let write = deletion_of(cluster.clone(), &delete, &victim).expect("recorded");
    assert_eq!(write.on_failure, OnFailure::BadRequest, "Kruise's /validate-pod answers 400");
    assert_eq!(
        write.object["status"]["versionedSubsetStatuses"]["versionIgnored"][0],
        json!({"name": "a", "missingReplicas": 1, "deletingPods": {"web-0": NOW}})
    );
    let evict = review(
        "CREATE",
        "eviction",
        json!({"apiVersion": "policy/v1", "kind": "Eviction"}),
        Value::Null,
        false,
    );
    assert_eq!(deletion_of(cluster.clone(), &evict, &victim), Some(write.clone()));
    // Recorded already (a re-run after a conflict): nothing to write.
    assert_eq!(deletion_of(vec![write.object.clone()], &delete, &victim), None);
    // Dry runs: the API server's, or the Eviction's own.
    let dry_evict =
        review("CREATE", "eviction", json!({"deleteOptions": {"dryRun": ["All"]}}), Value::Null, false);
    assert_eq!(deletion_of(cluster.clone(), &dry_evict, &victim), None);
    assert_eq!(
        deletion_of(cluster.clone(), &review("DELETE", "", Value::Null, victim.clone(), true), &victim),
        None
    );
    // A dry-run eviction is decided all the same (Kruise does not see that it is one): its errors
    // are Kruise's; a dry-run DELETE is not looked at.
    let mut broken = ws(json!([{"name": "a", "maxReplicas": "50%"}, {"name": "b"}]), Value::Null);
    broken["spec"]["targetFilter"] = json!({"replicasPathList": ["spec.missing"]});
    let errors = |request: &AdmissionRequest| {
        let cluster = Snapshot::from_objects(vec![cloneset(2), broken.clone()]);
        let settings = Settings::default();
        let (answers, random, clock) =
            (Answers::default(), SeededRandom::new(1), FixedClock(time::OffsetDateTime::UNIX_EPOCH));
        let inputs = Inputs {
            cluster: &cluster,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let mut victim = victim.clone();
        victim["metadata"]["annotations"][MATCHED_ANNOTATION] = json!(r#"{"name":"spread","subset":"a"}"#);
        deletion(request, &Json::from(&victim), &inputs).err()
    };
    assert_eq!(errors(&dry_evict), Some(AdmissionError::BadRequest(r#"path "missing" not exists"#.into())));
    assert_eq!(errors(&review("DELETE", "", Value::Null, victim.clone(), true)), None);
    // Unlimited subset, unknown subset, no such WorkloadSpread, unparsable annotation: nothing.
    for annotation in [
        r#"{"name":"spread","subset":"b"}"#,
        r#"{"name":"spread","subset":"z"}"#,
        r#"{"name":"gone","subset":"a"}"#,
        "not json",
        "null",
        r#"{"name":1}"#,
    ] {
        let mut other = victim.clone();
        other["metadata"]["annotations"][MATCHED_ANNOTATION] = json!(annotation);
        assert_eq!(deletion_of(cluster.clone(), &delete, &other), None, "{annotation}");
    }
    // Keys in another case are read as Go reads them.
    let mut upper = victim.clone();
    upper["metadata"]["annotations"][MATCHED_ANNOTATION] = json!(r#"{"Name":"spread","SUBSET":"a"}"#);
    assert!(deletion_of(cluster, &delete, &upper).is_some());
}

#[test]
fn a_patched_pod_reaches_sidecarset_injection_with_its_new_labels() {
    // Through the whole /mutate-pod: the subset's patch adds the label a SidecarSet selects.
    let sidecarset = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
        "metadata": {"name": "zone-agent", "annotations": {"kruise.io/sidecarset-hash": "h", "kruise.io/sidecarset-hash-without-image": "h"}},
        "spec": {"selector": {"matchLabels": {"zone": "a"}}, "containers": [{"name": "agent", "image": "agent:1"}]}});
    let subsets = json!([{"name": "a", "maxReplicas": 3, "patch": {"metadata": {"labels": {"zone": "a"}}}}, {"name": "b"}]);
    let cluster = Snapshot::from_objects(vec![sidecarset, cloneset(4), ws(subsets, Value::Null)]);
    let settings = Settings::default();
    let clock = FixedClock(time::OffsetDateTime::UNIX_EPOCH);
    let (answers, random) = (Answers::default(), SeededRandom::new(0));
    let inputs =
        Inputs { cluster: &cluster, answers: &answers, clock: &clock, random: &random, settings: &settings };
    let request = review("CREATE", "", cloneset_pod("web-x"), Value::Null, false);
    let mut draft = Draft::Same(request.object.as_ref().unwrap());
    let effects = pod::mutate(&request, &mut draft, &inputs).unwrap();
    assert_eq!(effects.writes.len(), 1);
    let out = draft.into_json().into_value();
    assert_eq!(out["metadata"]["labels"]["zone"], "a");
    let names: Vec<&str> =
        out["spec"]["containers"].as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["main", "agent"], "injected after the patch");
    assert_eq!(out["spec"]["readinessGates"], json!([{"conditionType": "KruisePodReady"}]), "step 1 kept");
}
