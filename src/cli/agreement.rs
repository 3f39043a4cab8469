//! `dry-run --compare --stored PATH`: our decision on each recorded Pod CREATE against the Pod
//! actually stored (docs/sidecarset.md#13-agreement-with-stored-pods), as a table or one JSON
//! document: per SidecarSet agree/disagree counts, per field disagree counts, and every Pod's verdict
//! with its diffs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::inputs;
use super::report::ReviewResult;
use super::report::Table;
use crate::admission::agreement::{self, SidecarSetAgreement, StoredPods};
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
    /// Every SidecarSet either side injected agrees (none at all also agrees: neither injected).
    Agree,
    /// At least one SidecarSet disagrees.
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
}

#[derive(Default)]
struct SetTotals {
    agree: usize,
    disagree: usize,
    /// Field path -> Pods disagreeing on it.
    fields: BTreeMap<String, usize>,
}

/// Collects each review's verdict as `dry-run` runs them; renders the report at the end.
pub struct Report {
    /// The SidecarSets our decisions read, by name, decoded once (for attribution).
    sidecarsets: HashMap<String, Arc<SidecarSet>>,
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
        let labelled = stored.into_iter().map(|pod| {
            let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
            (format!("{}/{}", text("/metadata/namespace"), text("/metadata/name")), pod)
        });
        Report { sidecarsets, stored: StoredPods::new(labelled), pods: Vec::new(), other_reviews: 0 }
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
        };
        match paired {
            None => {}
            Some(_) if !result.allowed => {
                row.verdict = Verdict::Denied { code: result.status.0, message: result.status.1.clone() };
            }
            Some((_, stored)) => {
                let lookup = |name: &str| self.sidecarsets.get(name).cloned();
                row.sidecarsets = agreement::compare(&result.input, &result.object, &stored, &lookup);
                row.verdict = if row.sidecarsets.iter().all(SidecarSetAgreement::agrees) {
                    Verdict::Agree
                } else {
                    Verdict::Disagree
                };
            }
        }
        self.pods.push(row);
    }

    /// Agreement shown: at least one Pod CREATE compared, and every one paired and agreeing (none
    /// denied, none disagreeing). No Pod CREATE at all is no evidence.
    pub fn all_agree(&self) -> bool {
        !self.pods.is_empty() && self.pods.iter().all(|p| matches!(p.verdict, Verdict::Agree))
    }

    fn sidecarset_totals(&self) -> BTreeMap<&str, SetTotals> {
        let mut totals: BTreeMap<&str, SetTotals> = BTreeMap::new();
        for set in self.pods.iter().flat_map(|p| &p.sidecarsets) {
            let entry = totals.entry(set.name.as_str()).or_default();
            if set.agrees() {
                entry.agree += 1;
            } else {
                entry.disagree += 1;
            }
            let mut paths: Vec<&str> = set.diffs.iter().map(|d| d.path.as_str()).collect();
            paths.dedup();
            for path in paths {
                *entry.fields.entry(path.to_owned()).or_default() += 1;
            }
        }
        totals
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

    /// `--output summary`: SidecarSets, fields, then every Pod that is not in agreement.
    pub fn table(&self) -> String {
        let totals = self.sidecarset_totals();
        let mut out = String::new();
        let mut sets = Table::new(&["SIDECARSET", "AGREE", "DISAGREE"]);
        let mut fields = Table::new(&["SIDECARSET", "FIELD", "DISAGREE"]);
        for (name, t) in &totals {
            sets.push(vec![(*name).to_owned(), t.agree.to_string(), t.disagree.to_string()]);
            for (path, n) in &t.fields {
                fields.push(vec![(*name).to_owned(), path.clone(), n.to_string()]);
            }
        }
        let mut pods =
            Table::new(&["SOURCE", "POD", "STORED POD", "RESULT", "SIDECARSET", "FIELD", "OURS", "STORED"]);
        for pod in self.pods.iter().filter(|p| !matches!(p.verdict, Verdict::Agree)) {
            let stored = pod.stored.clone().unwrap_or_else(|| "-".to_owned());
            let row = |set: &str, field: &str, ours: String, theirs: String| {
                vec![
                    pod.source.clone(),
                    pod.subject.clone(),
                    stored.clone(),
                    pod.verdict.word().to_owned(),
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
                    format!("denied {code}: {}", message.replace('\n', " ")),
                    "admitted".into(),
                )),
                Verdict::Unmatched => pods.push(row("-", "-", "-".into(), "-".into())),
                _ => {
                    for set in pod.sidecarsets.iter().filter(|s| !s.agrees()) {
                        for d in &set.diffs {
                            pods.push(row(&set.name, &d.path, shown(&d.ours), shown(&d.stored)));
                        }
                    }
                }
            }
        }
        for table in [&sets, &fields, &pods] {
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
        let sidecarsets: Vec<Value> = self
            .sidecarset_totals()
            .into_iter()
            .map(|(name, t)| {
                let fields: Vec<Value> =
                    t.fields.into_iter().map(|(path, n)| json!({"path": path, "disagree": n})).collect();
                json!({"name": name, "agree": t.agree, "disagree": t.disagree, "fields": fields})
            })
            .collect();
        let pods: Vec<Value> = self
            .pods
            .iter()
            .map(|p| {
                let mut row = json!({"source": p.source, "pod": p.subject, "stored": p.stored, "result": p.verdict.word(), "sidecarsets": p.sidecarsets
                    .iter()
                    .map(|s| json!({"name": s.name, "result": if s.agrees() { "agree" } else { "disagree" }, "diffs": s.diffs}))
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
            "pods": pods,
            "storedUnpaired": unpaired,
        })
        .to_string()
            + "\n"
    }
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
