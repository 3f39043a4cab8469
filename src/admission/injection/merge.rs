//! The merge rule (docs/sidecarset.md#6-2-merge-rule), the same for init containers and containers: a sidecar
//! replaces a same-named container of the pod in place; others go before or after the pod's list.

use crate::admission::draft::Draft;
use crate::api::tree::{Json, Object};

/// A container ready for the pod, with its SidecarSet's placement.
#[derive(Debug, Clone)]
pub struct Injected<'a> {
    pub container: Json<'a>,
    pub before: bool,
    /// The SidecarSet that injects it (for the duplicate-name check).
    pub sidecarset: String,
}

impl Injected<'_> {
    pub fn name(&self) -> &str {
        self.container.get("name").and_then(Json::as_str).unwrap_or_default()
    }
}

/// `before + pod (with in-place replacements) + after`. Names are looked up in the pod's
/// original list only; the pod's containers stay drafts (borrowed unless replaced).
///
/// A scan of the pod's list per injected container (the last of a name, as a map by name would
/// have it), not a map of the pod's names: the injected containers are the SidecarSets' few, and
/// a replacement keeps the name at its place.
pub fn merge<'a>(pod: Vec<Draft<'a>>, injected: Vec<Injected<'a>>) -> Vec<Draft<'a>> {
    let mut middle = pod;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for item in injected {
        let name = item.name();
        match middle.iter().rposition(|c| c.field("name").and_then(Json::as_str) == Some(name)) {
            Some(i) => {
                let replaced = keep_empty_resources(&middle[i], item.container);
                middle[i] = Draft::New(replaced);
            }
            None if item.before => before.push(Draft::New(item.container)),
            None => after.push(Draft::New(item.container)),
        }
    }
    before.extend(middle);
    before.extend(after);
    before
}

/// The replacement for `old`, with `old`'s `resources: {}` kept when the sidecar sets none. The API
/// server writes every container it decodes back with `resources: {}` (Go's encoding/json emits the
/// non-pointer `ResourceRequirements` struct even under `omitempty`), so a pod re-invoked after an
/// earlier patch carries it on the injected sidecar; it means the same as no `resources`, and
/// keeping it is what lets re-invocation patch nothing (found against a real kube-apiserver by
/// `tests/e2e`, check `reinvocation-no-patch`).
fn keep_empty_resources<'a>(old: &Draft<'_>, mut new: Json<'a>) -> Json<'a> {
    let old_is_empty = old.field("resources").and_then(Json::as_object).is_some_and(|r| r.is_empty());
    if let Json::Object(container) = &mut new
        && old_is_empty
        && !container.contains_key("resources")
    {
        container.insert("resources", Json::Object(Object::new()));
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn inj(name: &str, before: bool) -> Injected<'static> {
        Injected { container: json!({"name": name, "image": "new"}).into(), before, sidecarset: "s".into() }
    }

    fn merged(pod: Vec<Value>, injected: Vec<Injected>) -> Vec<Value> {
        let pod: Vec<Json> = pod.iter().map(Json::from).collect();
        let drafts = merge(pod.iter().map(Draft::Same).collect(), injected);
        drafts.into_iter().map(|d| d.into_json().into_value()).collect()
    }

    #[test]
    fn buckets_and_in_place_replacement() {
        let pod = vec![json!({"name": "app"}), json!({"name": "proxy", "image": "old"})];
        let out = merged(pod, vec![inj("b1", true), inj("a1", false), inj("proxy", true), inj("b2", true)]);
        let names: Vec<&str> = out.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["b1", "b2", "app", "proxy", "a1"]);
        assert_eq!(out[3]["image"], "new");
    }

    #[test]
    fn an_empty_resources_written_by_the_api_server_is_kept() {
        let pod = vec![json!({"name": "proxy", "image": "new", "resources": {}})];
        assert_eq!(
            merged(pod, vec![inj("proxy", false)])[0],
            json!({"name": "proxy", "image": "new", "resources": {}})
        );
        let pod = vec![json!({"name": "proxy", "image": "new", "resources": {"limits": {"cpu": "1"}}})];
        assert_eq!(merged(pod, vec![inj("proxy", false)])[0], json!({"name": "proxy", "image": "new"}));
    }
}
