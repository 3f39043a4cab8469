//! The field-level diff of two normalised values: objects by key, lists Kubernetes identifies by a
//! key entry by entry (plus their order), quantities by value (docs/sidecarset.md#13-1-what-is-compared).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::{FieldDiff, child};
use crate::api::json::field;
use crate::api::quantity;

/// What the diff knows about where it is.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Ctx {
    /// Inside a resource list: values are quantities, compared by value.
    quantities: bool,
}

/// The identity of an entry of the list under `key`, for lists Kubernetes merges by a key.
pub(super) fn entry_key(key: &str, entry: &Value) -> Option<String> {
    let text = |k: &str| field(entry, k).and_then(Value::as_str).map(str::to_owned);
    match key {
        "env" | "imagePullSecrets" | "containers" | "initContainers" | "volumes" => text("name"),
        "volumeMounts" => text("mountPath"),
        "volumeDevices" => text("devicePath"),
        "resizePolicy" => text("resourceName"),
        "items" => text("path"),
        "ports" => {
            let port = field(entry, "containerPort")?;
            Some(format!("{port}/{}", text("protocol").unwrap_or_else(|| "TCP".into())))
        }
        _ => None,
    }
}

/// Entries of a keyed list by key, `None` when some entry has no key or two share one (the list
/// is then compared as a whole).
fn keyed<'v>(key: &str, items: &'v [Value]) -> Option<Vec<(String, &'v Value)>> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let k = entry_key(key, item)?;
        if !seen.insert(k.clone()) {
            return None;
        }
        out.push((k, item));
    }
    Some(out)
}

fn same_scalar(a: &Value, b: &Value, ctx: Ctx) -> bool {
    if ctx.quantities
        && let (Some(x), Some(y)) = (quantity::from_value(a), quantity::from_value(b))
    {
        return x.nanos().is_some() && x.nanos() == y.nanos();
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Push a [`FieldDiff`] for every leaf where `ours` and `stored` differ; both are normalised.
/// `name` is the field the values are under (it tells a keyed list, e.g. `env` by name).
pub(super) fn diff(
    path: &str,
    name: &str,
    ours: Option<&Value>,
    stored: Option<&Value>,
    ctx: Ctx,
    out: &mut Vec<FieldDiff>,
) {
    match (ours, stored) {
        (None, None) => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                let inner = Ctx { quantities: matches!(key.as_str(), "limits" | "requests") };
                let sub = if is_identifier(key) { format!("{path}.{key}") } else { child(path, key) };
                let ctx = if ctx.quantities || matches!(key.as_str(), "sizeLimit" | "divisor") {
                    Ctx { quantities: true }
                } else {
                    inner
                };
                diff(&sub, key, a.get(key), b.get(key), ctx, out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            match (keyed(name, a), keyed(name, b)) {
                (Some(ka), Some(kb)) => {
                    let index_b: HashMap<&str, &Value> = kb.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                    let index_a: HashMap<&str, &Value> = ka.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                    for (k, v) in &ka {
                        diff(&child(path, k), "", Some(v), index_b.get(k.as_str()).copied(), ctx, out);
                    }
                    for (k, v) in kb.iter().filter(|(k, _)| !index_a.contains_key(k.as_str())) {
                        diff(&child(path, k), "", None, Some(v), ctx, out);
                    }
                    // Same entries in another order (env order decides `$(VAR)` expansion).
                    fn order<'k>(of: &'k [(String, &Value)], other: &HashMap<&str, &Value>) -> Vec<&'k str> {
                        of.iter().map(|(k, _)| k.as_str()).filter(|k| other.contains_key(k)).collect()
                    }
                    let (oa, ob) = (order(&ka, &index_b), order(&kb, &index_a));
                    if oa != ob {
                        out.push(FieldDiff {
                            path: format!("{path}#order"),
                            ours: json!(oa),
                            stored: json!(ob),
                        });
                    }
                }
                _ => {
                    let same = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equivalent(x, y, ctx));
                    if !same {
                        out.push(FieldDiff {
                            path: path.to_owned(),
                            ours: Value::Array(a.clone()),
                            stored: Value::Array(b.clone()),
                        });
                    }
                }
            }
        }
        (Some(a), Some(b)) if same_scalar(a, b, ctx) => {}
        (a, b) => out.push(FieldDiff {
            path: path.to_owned(),
            ours: a.cloned().unwrap_or(Value::Null),
            stored: b.cloned().unwrap_or(Value::Null),
        }),
    }
}

fn equivalent(a: &Value, b: &Value, ctx: Ctx) -> bool {
    let mut found = Vec::new();
    diff("", "", Some(a), Some(b), ctx, &mut found);
    found.is_empty()
}

fn is_identifier(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
