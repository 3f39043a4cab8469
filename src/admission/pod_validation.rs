//! `/validate-pod`: what a Pod's deletion, eviction or update costs the budgets that guard it
//! (Kruise's `pkg/webhook/pod/validating`). One registration takes `pods` UPDATE and DELETE and
//! `pods/eviction` CREATE (Kruise registers the same handler twice, as `vpod.kb.io` and
//! `vpodeviction.kb.io`); [`validate`] finds the pod and the operation, as Kruise's handler does,
//! and [`pub_budget::check`] decides.
//!
//! An eviction carries an Eviction, not the pod: the pod is read by a lookup ([`queries`]).

use super::Inputs;
use super::feature_gates::Gate;
use super::pub_budget::{self, pod_change};
use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::workload_spread;
use super::writes::{self, Effects};
use crate::api::tree::Json;
use crate::cluster::Query;

/// The lookups [`validate`] reads: the pod an eviction names, when the budget check runs.
pub fn queries(request: &AdmissionRequest, inputs: &Inputs) -> Vec<Query> {
    let gates = &inputs.settings.gates;
    let reads_pod =
        gates.enabled(Gate::WorkloadSpread) || gates.enabled(Gate::PodUnavailableBudgetDeleteGate);
    if is_eviction(request) && reads_pod { vec![evicted_pod(request)] } else { Vec::new() }
}

/// Kruise's `validatingPodFn`: UPDATE under `PodUnavailableBudgetUpdateGate` (off by default),
/// DELETE and eviction under `PodUnavailableBudgetDeleteGate` (on by default). A DELETE without
/// `oldObject` (API servers before 1.16) is allowed unread.
pub fn validate(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let gates = &inputs.settings.gates;
    match request.operation {
        Operation::Delete if request.old_object.is_none() => Ok(Effects::default()),
        Operation::Update if gates.enabled(Gate::PodUnavailableBudgetUpdateGate) => {
            check_update(request, inputs)
        }
        Operation::Delete | Operation::Create => {
            let mut effects = Effects::default();
            // WorkloadSpread's deletion accounting (`workloadSpreadValidatingPod`, gate
            // `WorkloadSpread`) runs before the budget on DELETE and eviction. Its error ends the
            // decision; its write joins the budget's below, so that a budget refusal (an `Err`)
            // drops it too (docs/differences.md).
            if gates.enabled(Gate::WorkloadSpread) {
                effects.writes.extend(spread_removal(request, inputs)?);
            }
            if gates.enabled(Gate::PodUnavailableBudgetDeleteGate) {
                let budget = check_removal(request, inputs)?;
                effects.warnings.extend(budget.warnings);
                effects.writes.extend(budget.writes);
            }
            Ok(effects)
        }
        _ => Ok(Effects::default()),
    }
}

fn is_eviction(request: &AdmissionRequest) -> bool {
    request.operation == Operation::Create && request.sub_resource == "eviction"
}

/// The pod an eviction is for: the request's namespace and name.
fn evicted_pod(request: &AdmissionRequest) -> Query {
    Query::Get {
        group: String::new(),
        version: "v1".into(),
        kind: "Pod".into(),
        namespace: request.namespace.clone(),
        name: request.name.clone(),
    }
}

/// What `admission.Decoder` answers for a missing object.
fn no_content() -> AdmissionError {
    AdmissionError::BadRequest("there is no content to decode".into())
}

/// A DELETE of the pod itself (the old object) or an eviction (the pod read by lookup); any other
/// subresource passes.
fn check_removal(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let dry_run = writes::is_dry_run(request);
    let checked = with_removed_pod(request, inputs, |pod, operation| {
        pub_budget::check(pod, operation, dry_run, inputs)
    })?;
    Ok(checked.unwrap_or_default())
}

/// WorkloadSpread's record of a DELETE of the pod itself (the old object) or of an eviction (the pod
/// read by lookup, dry run or not, as Kruise reads it).
fn spread_removal(
    request: &AdmissionRequest,
    inputs: &Inputs,
) -> Result<Option<writes::StatusWrite>, AdmissionError> {
    let recorded =
        with_removed_pod(request, inputs, |pod, _| workload_spread::deletion(request, pod, inputs))?;
    Ok(recorded.flatten())
}

/// `f` on the pod `request` removes, with the budget operation that removes it: a DELETE's old object,
/// or the pod an eviction names (read by lookup; a pod not found is Kruise's 400). `None` for any
/// other request, a subresource's DELETE included.
fn with_removed_pod<T>(
    request: &AdmissionRequest,
    inputs: &Inputs,
    f: impl FnOnce(&Json, pub_budget::Operation) -> Result<T, AdmissionError>,
) -> Result<Option<T>, AdmissionError> {
    match request.operation {
        Operation::Delete if request.sub_resource.is_empty() => {
            let pod = request.old_object.as_ref().ok_or_else(no_content)?;
            f(pod, pub_budget::Operation::Delete).map(Some)
        }
        Operation::Create if is_eviction(request) => {
            request.object.as_ref().ok_or_else(no_content)?;
            let found = inputs.answers.get(&evicted_pod(request)).map_err(AdmissionError::BadRequest)?;
            let pod = found
                .first()
                .ok_or_else(|| AdmissionError::BadRequest(format!("pods \"{}\" not found", request.name)))?;
            f(&Json::from(&**pod), pub_budget::Operation::Evict).map(Some)
        }
        _ => Ok(None),
    }
}

/// An UPDATE that may make the pod unavailable: a spec change or a new unavailable label, on a pod
/// whose new version still names its budget. The budget judges the old pod.
fn check_update(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    let new = request.object.as_ref().ok_or_else(no_content)?;
    if pub_budget::related_budget(new).is_none() {
        return Ok(Effects::default());
    }
    let old = request.old_object.as_ref().ok_or_else(no_content)?;
    if !pod_change::makes_unavailable(old, new) {
        return Ok(Effects::default());
    }
    let operation = if pod_change::can_resize_in_place(old, new) {
        pub_budget::Operation::Resize
    } else {
        pub_budget::Operation::Update
    };
    pub_budget::check(old, operation, writes::is_dry_run(request), inputs)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::admission::feature_gates::FeatureGates;
    use crate::admission::review::decode_review;
    use crate::admission::writes::StatusWrite;
    use crate::admission::{FixedClock, SeededRandom, Settings, webhooks};
    use crate::cluster::{Answers, Snapshot};

    const NOW: &str = "2024-05-01T12:00:00Z";

    /// A ready pod of namespace `shop` guarded by the budget `web`.
    fn pod(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "shop", "annotations": {"kruise.io/related-pub": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27",
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn budget(allowed: i64, status: Value) -> Value {
        let mut budget = json!({"apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "7"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
            "status": {"desiredAvailable": 2, "unavailableAllowed": allowed, "currentAvailable": 3, "totalReplicas": 3}});
        for (key, value) in status.as_object().into_iter().flatten() {
            budget["status"][key] = value.clone();
        }
        budget
    }

    fn review(operation: &str, sub_resource: &str, object: Value, old: Value, dry_run: bool) -> Value {
        let resource = json!({"group": "", "version": "v1", "resource": "pods"});
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": if sub_resource.is_empty() { "Pod" } else { "Eviction" }},
            "resource": resource, "subResource": sub_resource, "namespace": "shop", "name": "p1",
            "operation": operation, "object": object, "oldObject": old, "dryRun": dry_run}})
    }

    fn delete(old: Value) -> Value {
        review("DELETE", "", Value::Null, old, false)
    }

    fn eviction(dry_run_option: bool) -> Value {
        let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1", "namespace": "shop"}});
        if dry_run_option {
            eviction["deleteOptions"] = json!({"dryRun": ["All"]});
        }
        review("CREATE", "eviction", eviction, Value::Null, false)
    }

    fn update(old: Value, new: Value) -> Value {
        review("UPDATE", "", new, old, false)
    }

    /// The decision of `/validate-pod` on `review` against `cluster`, with `gates` set, answered
    /// from the cluster as dry-run answers lookups.
    fn decide(review: Value, cluster: Vec<Value>, gates: &[(Gate, bool)]) -> Result<Effects, AdmissionError> {
        let request = decode_review(review).unwrap();
        let cluster = Snapshot::from_objects(cluster);
        let settings = Settings { gates: FeatureGates::from_flags(gates), ..Settings::default() };
        let clock = FixedClock(
            time::OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).unwrap(),
        );
        let (random, empty) = (SeededRandom::new(0), Answers::default());
        let inputs = Inputs {
            cluster: &cluster,
            answers: &empty,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let answers = Answers::from_snapshot(&cluster, &queries(&request, &inputs));
        validate(&request, &Inputs { answers: &answers, ..inputs })
    }

    fn written(effects: &Effects) -> &StatusWrite {
        assert_eq!(effects.writes.len(), 1, "{effects:?}");
        &effects.writes[0]
    }

    #[test]
    fn a_delete_within_the_budget_records_the_pod_as_disrupted() {
        let effects = decide(delete(pod("p1")), vec![budget(1, json!({}))], &[]).unwrap();
        let write = written(&effects);
        assert_eq!(write.target.kind, "PodUnavailableBudget");
        assert_eq!((write.target.namespace.as_str(), write.target.name.as_str()), ("shop", "web"));
        assert_eq!(write.on_failure, crate::admission::writes::OnFailure::Deny);
        assert_eq!(write.object["status"]["unavailableAllowed"], 0);
        assert_eq!(write.object["status"]["disruptedPods"], json!({"p1": NOW}));
        assert_eq!(write.object["metadata"]["resourceVersion"], "7", "the version read");
        assert_eq!(write.object["spec"], budget(1, json!({}))["spec"], "the rest as read");
        assert!(write.object["status"].get("unavailablePods").is_none());
    }

    #[test]
    fn a_spent_budget_refuses_with_kruises_message_and_writes_nothing() {
        for allowed in [0, -1] {
            let err = decide(delete(pod("p1")), vec![budget(allowed, json!({}))], &[]).unwrap_err();
            assert_eq!(err.code(), 403);
            assert_eq!(
                err.to_string(),
                "podunavailablebudget.policy.kruise.io \"web\" is forbidden: pub unavailable allowed is negative"
            );
        }
        let many: serde_json::Map<String, Value> =
            (0..2001).map(|i| (format!("p-{i}"), json!(NOW))).collect();
        let err =
            decide(delete(pod("p1")), vec![budget(5, json!({"disruptedPods": many}))], &[]).unwrap_err();
        assert!(err.to_string().ends_with("is forbidden: DisruptedPods and UnavailablePods map too big - too many unavailable not confirmed by PUB controller"), "{err}");
    }

    #[test]
    fn a_budget_that_already_records_the_pod_allows_without_a_write() {
        // What the edge decides again on after a conflict: the fresh budget holds our own record.
        for map in ["disruptedPods", "unavailablePods"] {
            let cluster = vec![budget(0, json!({map: {"p1": NOW}}))];
            assert_eq!(decide(delete(pod("p1")), cluster, &[]).unwrap(), Effects::default(), "{map}");
        }
    }

    #[test]
    fn a_fresh_read_after_a_conflict_wins_over_the_snapshot() {
        let request = decode_review(delete(pod("p1"))).unwrap();
        let cluster = Snapshot::from_objects([budget(1, json!({}))]);
        let settings = Settings::default();
        let (clock, random) = (FixedClock(time::OffsetDateTime::UNIX_EPOCH), SeededRandom::new(0));
        let mut answers = Answers::default();
        let target = pub_budget::related_budget(&Json::from(pod("p1"))).unwrap();
        let fresh = budget(0, json!({"disruptedPods": {"p1": NOW}}));
        answers.insert(target.query(), Ok(vec![std::sync::Arc::new(fresh)]));
        let inputs = Inputs {
            cluster: &cluster,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        assert_eq!(validate(&request, &inputs).unwrap(), Effects::default());
    }

    #[test]
    fn dry_runs_decide_alike_and_write_nothing() {
        let mut dry = delete(pod("p1"));
        dry["request"]["dryRun"] = json!(true);
        assert_eq!(decide(dry.clone(), vec![budget(1, json!({}))], &[]).unwrap(), Effects::default());
        assert!(
            decide(dry, vec![budget(0, json!({}))], &[]).is_err(),
            "a dry run is refused as the real one"
        );
        let cluster = vec![pod("p1"), budget(1, json!({}))];
        assert_eq!(decide(eviction(true), cluster.clone(), &[]).unwrap(), Effects::default());
        assert!(decide(eviction(true), vec![pod("p1"), budget(0, json!({}))], &[]).is_err());
    }

    #[test]
    fn an_eviction_reads_the_pod_it_names() {
        let cluster = vec![pod("p1"), budget(2, json!({"disruptedPods": {"other": NOW}}))];
        let effects = decide(eviction(false), cluster, &[]).unwrap();
        let status = &written(&effects).object["status"];
        assert_eq!(status["unavailableAllowed"], 1);
        assert_eq!(status["disruptedPods"], json!({"other": NOW, "p1": NOW}));
        let err = decide(eviction(false), vec![budget(1, json!({}))], &[]).unwrap_err();
        assert_eq!((err.code(), err.to_string()), (400, "pods \"p1\" not found".to_owned()));
    }

    #[test]
    fn unguarded_exempt_unready_and_deleted_pods_pass() {
        let cluster = || vec![budget(0, json!({}))];
        let mut exempt = pod("p1");
        exempt["metadata"]["annotations"]["pub.kruise.io/no-protect"] = json!("true");
        let mut unguarded = pod("p1");
        unguarded["metadata"]["annotations"] = json!({});
        let mut pending = pod("p1");
        pending["status"]["phase"] = json!("Pending");
        let mut not_ready = pod("p1");
        not_ready["status"]["conditions"] =
            json!([{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]);
        let mut deleting = pod("p1");
        deleting["metadata"]["deletionTimestamp"] = json!(NOW);
        let mut labelled = pod("p1");
        labelled["metadata"]["labels"] = json!({"unavailable-pod.kruise.io/drain": "true"});
        let mut other_budget = pod("p1");
        other_budget["metadata"]["annotations"]["kruise.io/related-pub"] = json!("gone");
        for (what, p) in [
            ("exempt", exempt),
            ("unguarded", unguarded),
            ("pending", pending),
            ("not ready", not_ready),
            ("deleting", deleting),
            ("labelled unavailable", labelled),
            ("budget missing", other_budget),
        ] {
            assert_eq!(decide(delete(p), cluster(), &[]).unwrap(), Effects::default(), "{what}");
        }
        // A DELETE without oldObject is allowed unread; so is everything with the gate off.
        assert_eq!(decide(delete(Value::Null), cluster(), &[]).unwrap(), Effects::default());
        let off = [(Gate::PodUnavailableBudgetDeleteGate, false)];
        assert_eq!(decide(delete(pod("p1")), cluster(), &off).unwrap(), Effects::default());
        // WorkloadSpread's step (on by default) reads the evicted pod first, as Kruise's does.
        let err = decide(eviction(false), cluster(), &off).unwrap_err();
        assert_eq!(err, AdmissionError::BadRequest("pods \"p1\" not found".into()));
        let both_off = [(Gate::PodUnavailableBudgetDeleteGate, false), (Gate::WorkloadSpread, false)];
        assert_eq!(decide(eviction(false), cluster(), &both_off).unwrap(), Effects::default());
    }

    #[test]
    fn workloadspread_records_the_deletion_before_the_budget_decides() {
        let spread = json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
            "metadata": {"name": "spread", "namespace": "shop", "resourceVersion": "3"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b"}]},
            "status": {"versionedSubsetStatuses": {"versionIgnored": [{"name": "a", "missingReplicas": 0}, {"name": "b", "missingReplicas": -1}]}}});
        let mut spread_pod = pod("p1");
        spread_pod["metadata"]["annotations"]["apps.kruise.io/matched-workloadspread"] =
            json!(r#"{"name":"spread","subset":"a"}"#);
        spread_pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "r", "controller": true}]);
        let recorded = |effects: &Effects| -> Vec<String> {
            effects.writes.iter().map(|w| w.target.kind.clone()).collect()
        };
        // Both record: the WorkloadSpread first, then the budget.
        let effects =
            decide(delete(spread_pod.clone()), vec![spread.clone(), budget(1, json!({}))], &[]).unwrap();
        assert_eq!(recorded(&effects), ["WorkloadSpread", "PodUnavailableBudget"]);
        assert_eq!(
            effects.writes[0].object["status"]["versionedSubsetStatuses"]["versionIgnored"][0]["deletingPods"],
            json!({"p1": NOW})
        );
        // An eviction reads the pod by lookup.
        let mut cluster = vec![spread.clone(), budget(1, json!({})), spread_pod.clone()];
        let effects = decide(eviction(false), cluster.clone(), &[]).unwrap();
        assert_eq!(recorded(&effects), ["WorkloadSpread", "PodUnavailableBudget"]);
        // A budget with nothing left refuses, and the WorkloadSpread's record goes with the refusal.
        cluster[1] = budget(0, json!({}));
        assert!(matches!(decide(eviction(false), cluster.clone(), &[]), Err(AdmissionError::Forbidden(_))));
        // The gate off: only the budget.
        cluster[1] = budget(1, json!({}));
        let effects = decide(eviction(false), cluster, &[(Gate::WorkloadSpread, false)]).unwrap();
        assert_eq!(recorded(&effects), ["PodUnavailableBudget"]);
    }

    #[test]
    fn a_budget_desiring_nothing_or_not_protecting_the_operation_passes() {
        let mut none_desired = budget(0, json!({}));
        none_desired["status"]["desiredAvailable"] = json!(0);
        assert_eq!(decide(delete(pod("p1")), vec![none_desired], &[]).unwrap(), Effects::default());
        let protecting = |operations: &str| {
            let mut b = budget(0, json!({}));
            b["metadata"]["annotations"] = json!({"kruise.io/pub-protect-operations": operations});
            vec![b]
        };
        assert!(decide(delete(pod("p1")), protecting("EVICT,DELETE"), &[]).is_err());
        assert!(decide(delete(pod("p1")), protecting(""), &[]).is_err(), "empty: Kruise's three");
        assert_eq!(decide(delete(pod("p1")), protecting("EVICT"), &[]).unwrap(), Effects::default());
        assert_eq!(decide(delete(pod("p1")), protecting("EVICT, DELETE"), &[]).unwrap(), Effects::default());
        assert!(decide(eviction(false), [vec![pod("p1")], protecting("EVICT")].concat(), &[]).is_err());
    }

    #[test]
    fn updates_are_checked_only_under_the_update_gate() {
        let gate = [(Gate::PodUnavailableBudgetUpdateGate, true)];
        let mut new = pod("p1");
        new["spec"]["containers"][0]["image"] = json!("nginx:1.28");
        assert_eq!(
            decide(update(pod("p1"), new.clone()), vec![budget(1, json!({}))], &[]).unwrap(),
            Effects::default()
        );
        let effects = decide(update(pod("p1"), new.clone()), vec![budget(1, json!({}))], &gate).unwrap();
        let status = &written(&effects).object["status"];
        assert_eq!(status["unavailablePods"], json!({"p1": NOW}));
        assert!(status.get("disruptedPods").is_none());
        assert!(decide(update(pod("p1"), new.clone()), vec![budget(0, json!({}))], &gate).is_err());
        // Labels and annotations alone, or a new pod without the annotation, pass.
        let mut relabelled = pod("p1");
        relabelled["metadata"]["labels"] = json!({"tier": "a"});
        assert_eq!(
            decide(update(pod("p1"), relabelled), vec![budget(0, json!({}))], &gate).unwrap(),
            Effects::default()
        );
        let mut unannotated = new.clone();
        unannotated["metadata"]["annotations"] = json!({});
        assert_eq!(
            decide(update(pod("p1"), unannotated), vec![budget(0, json!({}))], &gate).unwrap(),
            Effects::default()
        );
        // Adding the first unavailable label makes the pod unavailable.
        let mut marked = pod("p1");
        marked["metadata"]["labels"] = json!({"unavailable-pod.kruise.io/x": "1"});
        assert!(decide(update(pod("p1"), marked), vec![budget(0, json!({}))], &gate).is_err());
    }

    #[test]
    fn a_resize_is_an_update_unless_in_place_vertical_scaling_is_on() {
        let mut resized = pod("p1");
        resized["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("3");
        let update_gate = (Gate::PodUnavailableBudgetUpdateGate, true);
        let resize_only = || {
            let mut b = budget(1, json!({}));
            b["metadata"]["annotations"] = json!({"kruise.io/pub-protect-operations": "RESIZE"});
            b
        };
        // Without InPlacePodVerticalScaling a resize is protected as an update, and recorded as a
        // disruption (Kruise records only UPDATE as unavailable).
        let effects =
            decide(update(pod("p1"), resized.clone()), vec![budget(1, json!({}))], &[update_gate]).unwrap();
        assert_eq!(written(&effects).object["status"]["disruptedPods"], json!({"p1": NOW}));
        let scaling = [update_gate, (Gate::InPlacePodVerticalScaling, true)];
        assert_eq!(
            decide(update(pod("p1"), resized.clone()), vec![budget(1, json!({}))], &scaling).unwrap(),
            Effects::default(),
            "with the gate, UPDATE does not cover RESIZE"
        );
        assert_eq!(
            written(&decide(update(pod("p1"), resized), vec![resize_only()], &scaling).unwrap()).target.name,
            "web"
        );
    }

    #[test]
    fn the_table_routes_deletes_updates_and_evictions_here() {
        let hook = webhooks::by_path("/validate-pod").unwrap();
        for (review, expected) in [
            (delete(pod("p1")), true),
            (update(pod("p1"), pod("p1")), true),
            (eviction(false), true),
            (review("CREATE", "", pod("p1"), Value::Null, false), false),
            (review("DELETE", "eviction", Value::Null, pod("p1"), false), false),
        ] {
            assert_eq!(hook.matches(&decode_review(review.clone()).unwrap()), expected, "{review}");
        }
    }
}
