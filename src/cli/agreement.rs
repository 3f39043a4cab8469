//! `dry-run --compare --stored PATH`: our decision on each recorded Pod CREATE against the Pod
//! actually stored (docs/sidecarset.md#13-agreement-with-stored-pods), as a table or one JSON
//! document: per SidecarSet and per `/mutate-pod` step agree/disagree counts, per field disagree
//! counts, and every Pod's verdict with its diffs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::inputs;
use super::report::ReviewResult;
use super::report::Table;
use crate::admission::agreement::{self, FieldDiff, Lookups, SidecarSetAgreement, StepAgreement, StoredPods};
use crate::admission::pod::Step;
use crate::admission::workload_spread::{WS_GROUP, WS_KIND};
use crate::api::sidecarset::{GROUP, KIND, SidecarSet};
use crate::cluster::Snapshot;

/// The stored Pods of `--stored PATH` (a file, a folder or `-`): every Pod document (`List` kinds
/// expanded, e.g. `kubectl get pods -A -o yaml`), and the Pod an audit log recorded for each Pod
/// create (`responseObject` of a `ResponseComplete` event: the Pod as stored at creation). Also how many
/// documents were neither.
pub fn load_stored(path: &str) -> Result<(Vec<Value>, usize), String> {
    let mut pods = Vec::new();
    let mut ignored = 0;
    for file in inputs::expand(path)? {
        let text = inputs::read_text(&file).map_err(|m| format!("{file}: {m}"))?;
        inputs::for_each_document(&text, |_, _, document| match stored_pod(document) {
            Some(pod) => pods.push(pod),
            None => ignored += 1,
        })
        .map_err(|m| format!("{file}: {m}"))?;
    }
    Ok((pods, ignored))
}

fn stored_pod(mut document: Value) -> Option<Value> {
    let text = |d: &Value, p: &str| d.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    if text(&document, "/kind") == "Pod" {
        return Some(document);
    }
    // Items of a PodList read from the API directly (not through kubectl) carry no kind.
    if document.get("kind").is_none() && document.pointer("/spec/containers").is_some_and(Value::is_array) {
        document["kind"] = Value::String("Pod".into());
        return Some(document);
    }
    let pod_create = text(&document, "/apiVersion").starts_with("audit.k8s.io/")
        && text(&document, "/stage") == "ResponseComplete"
        && text(&document, "/verb") == "create"
        && text(&document, "/objectRef/resource") == "pods"
        && text(&document, "/objectRef/subresource").is_empty();
    let response = document.get_mut("responseObject").map(Value::take).filter(|r| text(r, "/kind") == "Pod");
    if pod_create { response } else { None }
}

/// One Pod CREATE review's verdict.
enum Verdict {
    /// Every step agrees, every SidecarSet either side injected among them (none at all also
    /// agrees: neither injected).
    Agree,
    /// At least one step disagrees.
    Disagree,
    /// We would deny a Pod that was stored: a disagreement no SidecarSet owns.
    Denied { code: u16, message: String },
    /// No stored Pod pairs with the review: no evidence either way.
    Unmatched,
}

impl Verdict {
    fn word(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Disagree => "disagree",
            Verdict::Denied { .. } => "denied",
            Verdict::Unmatched => "unmatched",
        }
    }
}

struct PodRow {
    source: String,
    subject: String,
    stored: Option<String>,
    verdict: Verdict,
    sidecarsets: Vec<SidecarSetAgreement>,
    steps: Vec<StepAgreement>,
}

#[derive(Default)]
struct Totals {
    agree: usize,
    disagree: usize,
    /// Field path -> Pods disagreeing on it.
    fields: BTreeMap<String, usize>,
}

/// Collects each review's verdict as `dry-run` runs them; renders the report at the end.
pub struct Report {
    /// The SidecarSets our decisions read, by name, decoded once (for attribution).
    sidecarsets: HashMap<String, Arc<SidecarSet>>,
    /// The WorkloadSpreads, by namespace and name (for what a subset contributes).
    spreads: HashMap<(String, String), Arc<Value>>,
    stored: StoredPods<String>,
    pods: Vec<PodRow>,
    /// Reviews that are not a Pod CREATE (or cannot be decoded): not compared.
    other_reviews: usize,
}

impl Report {
    /// `stored`: the stored objects (non-Pods are ignored); `cluster`: where the SidecarSets our
    /// decisions read are looked up for attribution.
    pub fn new(cluster: &Snapshot, stored: Vec<Value>) -> Self {
        let sidecarsets = cluster
            .entries(GROUP, KIND)
            .filter_map(|(key, object)| {
                Some((key.name.clone(), Arc::new(SidecarSet::from_value(&object).ok()?)))
            })
            .collect();
        let spreads = cluster
            .entries(WS_GROUP, WS_KIND)
            .map(|(key, object)| ((key.namespace.clone(), key.name.clone()), object.clone()))
            .collect();
        let labelled = stored.into_iter().map(|pod| {
            let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
            (format!("{}/{}", text("/metadata/namespace"), text("/metadata/name")), pod)
        });
        Report { sidecarsets, spreads, stored: StoredPods::new(labelled), pods: Vec::new(), other_reviews: 0 }
    }

    pub fn add(&mut self, source: &str, result: &ReviewResult) {
        let Some((namespace, name)) = &result.pod_create else {
            self.other_reviews += 1;
            return;
        };
        let paired = self.stored.take(namespace, name, &result.input);
        let mut row = PodRow {
            source: source.to_owned(),
            subject: result.subject.clone(),
            stored: paired.as_ref().map(|(label, _)| label.clone()),
            verdict: Verdict::Unmatched,
            sidecarsets: Vec::new(),
            steps: Vec::new(),
        };
        match paired {
            None => {}
            Some(_) if !result.allowed => {
                row.verdict = Verdict::Denied { code: result.status.0, message: result.status.1.clone() };
            }
            Some((_, stored)) => {
                let sidecarset = |name: &str| self.sidecarsets.get(name).cloned();
                let workload_spread = |namespace: &str, name: &str| {
                    self.spreads.get(&(namespace.to_owned(), name.to_owned())).cloned()
                };
                let lookups = Lookups { sidecarset: &sidecarset, workload_spread: &workload_spread };
                let verdict = agreement::compare_pod(&result.input, &result.object, &stored, &lookups);
                row.verdict = if verdict.agrees() { Verdict::Agree } else { Verdict::Disagree };
                (row.sidecarsets, row.steps) = (verdict.sidecarsets, verdict.steps);
            }
        }
        self.pods.push(row);
    }

    /// Agreement shown: at least one Pod CREATE compared, and every one paired and agreeing (none
    /// denied, none disagreeing). No Pod CREATE at all is no evidence.
    pub fn all_agree(&self) -> bool {
        !self.pods.is_empty() && self.pods.iter().all(|p| matches!(p.verdict, Verdict::Agree))
    }

    fn sidecarset_totals(&self) -> BTreeMap<&str, Totals> {
        totals(self.pods.iter().flat_map(|p| &p.sidecarsets).map(|s| (s.name.as_str(), &s.diffs[..])))
    }

    /// In [`Step::ALL`]'s order.
    fn step_totals(&self) -> BTreeMap<Step, Totals> {
        totals(self.pods.iter().flat_map(|p| &p.steps).map(|s| (s.step, &s.diffs[..])))
    }

    fn count(&self, word: &str) -> usize {
        self.pods.iter().filter(|p| p.verdict.word() == word).count()
    }

    fn totals_line(&self) -> String {
        let no_injection = self
            .pods
            .iter()
            .filter(|p| matches!(p.verdict, Verdict::Agree) && p.sidecarsets.is_empty())
            .count();
        format!(
            "{} Pod CREATE reviews: {} agree ({no_injection} with no injection on either side), {} disagree, {} denied by us but stored, \
             {} unmatched; {} other reviews not compared; {} stored Pods paired with no review",
            self.pods.len(),
            self.count("agree"),
            self.count("disagree"),
            self.count("denied"),
            self.count("unmatched"),
            self.other_reviews,
            self.stored.unpaired().count(),
        )
    }

    /// `--output summary`: SidecarSets and their fields, steps and their fields (the SidecarSet
    /// step's are the SidecarSets'), then every Pod that is not in agreement.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let mut sets = Table::new(&["SIDECARSET", "AGREE", "DISAGREE"]);
        let mut set_fields = Table::new(&["SIDECARSET", "FIELD", "DISAGREE"]);
        for (name, t) in &self.sidecarset_totals() {
            sets.push(vec![(*name).to_owned(), t.agree.to_string(), t.disagree.to_string()]);
            for (path, n) in &t.fields {
                set_fields.push(vec![(*name).to_owned(), path.clone(), n.to_string()]);
            }
        }
        let mut steps = Table::new(&["STEP", "AGREE", "DISAGREE"]);
        let mut step_fields = Table::new(&["STEP", "FIELD", "DISAGREE"]);
        for (step, t) in &self.step_totals() {
            steps.push(vec![step.as_str().to_owned(), t.agree.to_string(), t.disagree.to_string()]);
            for (path, n) in t.fields.iter().filter(|_| *step != Step::SidecarSet) {
                step_fields.push(vec![step.as_str().to_owned(), path.clone(), n.to_string()]);
            }
        }
        let mut pods = Table::new(&[
            "SOURCE",
            "POD",
            "STORED POD",
            "RESULT",
            "STEP",
            "SIDECARSET",
            "FIELD",
            "OURS",
            "STORED",
        ]);
        for pod in self.pods.iter().filter(|p| !matches!(p.verdict, Verdict::Agree)) {
            let stored = pod.stored.clone().unwrap_or_else(|| "-".to_owned());
            let row = |step: &str, set: &str, field: &str, ours: String, theirs: String| {
                vec![
                    pod.source.clone(),
                    pod.subject.clone(),
                    stored.clone(),
                    pod.verdict.word().to_owned(),
                    step.to_owned(),
                    set.to_owned(),
                    field.to_owned(),
                    ours,
                    theirs,
                ]
            };
            match &pod.verdict {
                Verdict::Denied { code, message } => pods.push(row(
                    "-",
                    "-",
                    "-",
                    format!("denied {code}: {}", message.replace('\n', " ")),
                    "admitted".into(),
                )),
                Verdict::Unmatched => pods.push(row("-", "-", "-", "-".into(), "-".into())),
                _ => {
                    let sidecarset = Step::SidecarSet.as_str();
                    let by_set = pod.sidecarsets.iter().map(|s| (sidecarset, s.name.as_str(), &s.diffs));
                    let by_step = (pod.steps.iter())
                        .filter(|s| s.step != Step::SidecarSet)
                        .map(|s| (s.step.as_str(), "-", &s.diffs));
                    for (step, set, diffs) in by_set.chain(by_step) {
                        for d in diffs {
                            pods.push(row(step, set, &d.path, shown(&d.ours), shown(&d.stored)));
                        }
                    }
                }
            }
        }
        for table in [&sets, &set_fields, &steps, &step_fields, &pods] {
            if table.len() > 0 {
                out.push_str(&table.render());
                out.push('\n');
            }
        }
        out.push_str(&self.totals_line());
        out.push('\n');
        out
    }

    /// `--output json`: one document (shape in docs/sidecarset.md#13-4-the-report).
    pub fn json(&self) -> String {
        let fields = |t: Totals| -> Vec<Value> {
            t.fields.into_iter().map(|(path, n)| json!({"path": path, "disagree": n})).collect()
        };
        let sidecarsets: Vec<Value> = self
            .sidecarset_totals()
            .into_iter()
            .map(|(name, t)| json!({"name": name, "agree": t.agree, "disagree": t.disagree, "fields": fields(t)}))
            .collect();
        let steps: Vec<Value> = self
            .step_totals()
            .into_iter()
            .map(|(step, t)| {
                json!({"step": step.as_str(), "agree": t.agree, "disagree": t.disagree, "fields": fields(t)})
            })
            .collect();
        let pods: Vec<Value> = self
            .pods
            .iter()
            .map(|p| {
                let mut row = json!({"source": p.source, "pod": p.subject, "stored": p.stored, "result": p.verdict.word(), "sidecarsets": p.sidecarsets
                    .iter()
                    .map(|s| json!({"name": s.name, "result": result(s.agrees()), "diffs": s.diffs}))
                    .collect::<Vec<_>>(), "steps": p.steps
                    .iter()
                    .map(|s| json!({"step": s.step.as_str(), "result": result(s.agrees()), "diffs": s.diffs}))
                    .collect::<Vec<_>>()});
                if let Verdict::Denied { code, message } = &p.verdict {
                    row["status"] = json!({"code": code, "message": message});
                }
                row
            })
            .collect();
        let unpaired: Vec<&str> = self.stored.unpaired().map(|(label, _)| label.as_str()).collect();
        json!({
            "totals": {
                "podCreates": self.pods.len(),
                "agree": self.count("agree"),
                "disagree": self.count("disagree"),
                "denied": self.count("denied"),
                "unmatched": self.count("unmatched"),
                "otherReviews": self.other_reviews,
                "storedUnpaired": unpaired.len(),
            },
            "sidecarsets": sidecarsets,
            "steps": steps,
            "pods": pods,
            "storedUnpaired": unpaired,
        })
        .to_string()
            + "\n"
    }
}

/// Agree/disagree counts and per field disagree counts of `verdicts` (a verdict agrees when it has
/// no diff), by key.
fn totals<'d, K: Ord>(verdicts: impl Iterator<Item = (K, &'d [FieldDiff])>) -> BTreeMap<K, Totals> {
    let mut totals: BTreeMap<K, Totals> = BTreeMap::new();
    for (key, diffs) in verdicts {
        let entry = totals.entry(key).or_default();
        if diffs.is_empty() {
            entry.agree += 1;
        } else {
            entry.disagree += 1;
        }
        let mut paths: Vec<&str> = diffs.iter().map(|d| d.path.as_str()).collect();
        paths.dedup();
        for path in paths {
            *entry.fields.entry(path.to_owned()).or_default() += 1;
        }
    }
    totals
}

fn result(agrees: bool) -> &'static str {
    if agrees { "agree" } else { "disagree" }
}

/// The longest value a table cell shows; `--output json` has every value whole.
const CELL: usize = 100;

/// A value in one table cell: compact JSON (bare for strings) cut at [`CELL`] characters, `-`
/// when absent.
fn shown(value: &Value) -> String {
    let text = match value {
        Value::Null => return "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match text.char_indices().nth(CELL) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_pods_come_from_pods_pod_list_items_and_pod_create_audit_events() {
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}});
        assert_eq!(stored_pod(pod.clone()), Some(pod.clone()));
        let item = json!({"metadata": {"name": "p"}, "spec": {"containers": []}});
        assert_eq!(
            stored_pod(item).and_then(|p| p["kind"].as_str().map(str::to_owned)).as_deref(),
            Some("Pod")
        );
        let event = |verb: &str, stage: &str, response: Value| {
            json!({"apiVersion": "audit.k8s.io/v1", "kind": "Event", "stage": stage, "verb": verb,
                   "objectRef": {"resource": "pods", "namespace": "shop"}, "responseObject": response})
        };
        assert_eq!(stored_pod(event("create", "ResponseComplete", pod.clone())), Some(pod.clone()));
        assert_eq!(stored_pod(event("get", "ResponseComplete", pod.clone())), None);
        assert_eq!(stored_pod(event("create", "ResponseStarted", pod.clone())), None);
        assert_eq!(
            stored_pod(event("create", "ResponseComplete", json!({"kind": "Status", "code": 409}))),
            None
        );
        let mut binding = event("create", "ResponseComplete", pod);
        binding["objectRef"]["subresource"] = json!("binding");
        assert_eq!(stored_pod(binding), None);
        assert_eq!(
            stored_pod(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
            None
        );
    }
}
