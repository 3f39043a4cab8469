//! The merge rule (docs/sidecarset.md#6-2-merge-rule), the same for init containers and containers: a sidecar
//! replaces a same-named container of the pod in place; others go before or after the pod's list.

use std::collections::HashMap;

use serde_json::Value;

/// A container ready for the pod, with its SidecarSet's placement.
#[derive(Debug, Clone)]
pub struct Injected {
    pub container: Value,
    pub before: bool,
    /// The SidecarSet that injects it (for the duplicate-name check).
    pub sidecarset: String,
}

impl Injected {
    pub fn name(&self) -> &str {
        self.container.get("name").and_then(Value::as_str).unwrap_or_default()
    }
}

/// `before + pod (with in-place replacements) + after`. Names are looked up in the pod's
/// original list only.
pub fn merge(pod: Vec<Value>, injected: Vec<Injected>) -> Vec<Value> {
    let positions: HashMap<String, usize> =
        pod.iter().enumerate().filter_map(|(i, c)| Some((c.get("name")?.as_str()?.to_owned(), i))).collect();
    let mut middle = pod;
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for item in injected {
        match positions.get(item.name()) {
            Some(&i) => middle[i] = item.container,
            None if item.before => before.push(item.container),
            None => after.push(item.container),
        }
    }
    before.extend(middle);
    before.extend(after);
    before
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn inj(name: &str, before: bool) -> Injected {
        Injected { container: json!({"name": name, "image": "new"}), before, sidecarset: "s".into() }
    }

    #[test]
    fn buckets_and_in_place_replacement() {
        let pod = vec![json!({"name": "app"}), json!({"name": "proxy", "image": "old"})];
        let out = merge(pod, vec![inj("b1", true), inj("a1", false), inj("proxy", true), inj("b2", true)]);
        let names: Vec<&str> = out.iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["b1", "b2", "app", "proxy", "a1"]);
        assert_eq!(out[3]["image"], "new");
    }
}
