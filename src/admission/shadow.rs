//! Shadow mode (`serve --shadow`): every decision is made as usual, then answered as "allowed,
//! unchanged", so the server can run next to kruise-manager and be judged on real traffic
//! without enforcing anything. This module is the pure part: what a decision would have done
//! ([`Outcome`]), the answer actually sent ([`unenforced`]) and a bounded summary for the log.
//! The server applies it in the one place a decision becomes a response.

use super::agreement::FieldDiff;
use super::patch::PatchOp;
use super::review::Decision;

/// What a decision would have done had it been enforced. The values are the `outcome` label of
/// `kruise_admission_shadow_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    WouldPatch,
    WouldDeny,
    NoOp,
}

impl Outcome {
    pub fn of(decision: &Decision) -> Outcome {
        if !decision.allowed {
            Outcome::WouldDeny
        } else if decision.patch.is_empty() {
            Outcome::NoOp
        } else {
            Outcome::WouldPatch
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::WouldPatch => "would-patch",
            Outcome::WouldDeny => "would-deny",
            Outcome::NoOp => "no-op",
        }
    }

    pub const ALL: [Outcome; 3] = [Outcome::WouldPatch, Outcome::WouldDeny, Outcome::NoOp];
}

/// The answer shadow mode sends for any decision: allowed, no patch, no status and no warnings.
/// Warnings are left out too (allowed decisions' as well as denials'): `kubectl` prints them to
/// whoever made the request, and a server that is only being evaluated must not be seen.
pub fn unenforced() -> Decision<'static> {
    Decision::allow()
}

/// At most this many characters of a summary (the log line stays bounded whatever the object).
pub const SUMMARY_LIMIT: usize = 512;

/// One line saying what `decision` would have done: the patch as `op path` pairs (`add
/// /spec/containers/0, replace /metadata/annotations/kruise.io~1sidecarset-hash`), or the denial
/// as `code Reason: message`; empty for a no-op. Cut at [`SUMMARY_LIMIT`] characters, saying how
/// many operations were left out.
pub fn summary(decision: &Decision) -> String {
    match Outcome::of(decision) {
        Outcome::NoOp => String::new(),
        Outcome::WouldDeny => {
            let text = decision
                .status
                .as_ref()
                .map_or_else(String::new, |s| format!("{} {}: {}", s.code, s.reason, s.message));
            truncate(&text, SUMMARY_LIMIT)
        }
        Outcome::WouldPatch => {
            let ops = &decision.patch;
            let tail = |left: usize| format!(" … {left} more");
            let mut out = String::new();
            for (i, op) in ops.iter().enumerate() {
                let kind = match op {
                    PatchOp::Add { .. } => "add",
                    PatchOp::Remove { .. } => "remove",
                    PatchOp::Replace { .. } => "replace",
                };
                let item = format!("{}{kind} {}", if i == 0 { "" } else { ", " }, op.path());
                // Room for this item and, when more follow, for the tail that says so.
                let after = ops.len() - i - 1;
                let room = SUMMARY_LIMIT - if after > 0 { tail(after).len() } else { 0 };
                if out.len() + item.len() > room {
                    if out.is_empty() {
                        // One path longer than the whole budget: shown cut.
                        return format!(
                            "{}{}",
                            truncate(&item, room),
                            if after > 0 { tail(after) } else { String::new() }
                        );
                    }
                    return format!("{out}{}", tail(ops.len() - i));
                }
                out.push_str(&item);
            }
            out
        }
    }
}

/// One line for a SidecarSet's disagreement with the stored Pod: `path: ours -> stored` per field
/// (`-` for an absent side), in diff order, cut at [`DIFF_SUMMARY_LIMIT`] bytes saying how many
/// fields were left out; each value at most [`VALUE_LIMIT`] bytes.
pub fn diff_summary(diffs: &[FieldDiff]) -> String {
    let shown = |v: &serde_json::Value| {
        if v.is_null() { "-".to_owned() } else { truncate(&v.to_string(), VALUE_LIMIT) }
    };
    let mut out = String::new();
    for (i, d) in diffs.iter().enumerate() {
        let item = format!(
            "{}{}: {} -> {}",
            if i == 0 { "" } else { "; " },
            d.path,
            shown(&d.ours),
            shown(&d.stored)
        );
        let left = diffs.len() - i;
        if out.len() + item.len() > DIFF_SUMMARY_LIMIT {
            if out.is_empty() {
                out = truncate(&item, DIFF_SUMMARY_LIMIT);
                if left > 1 {
                    out.push_str(&format!(" … {} more", left - 1));
                }
                return out;
            }
            out.push_str(&format!(" … {left} more"));
            return out;
        }
        out.push_str(&item);
    }
    out
}

/// At most about this many bytes of a disagreement's diff in its log line.
pub const DIFF_SUMMARY_LIMIT: usize = 2048;
/// At most this many bytes of one value in it.
pub const VALUE_LIMIT: usize = 256;

/// The first `limit` bytes of `text`, cut at a character boundary, with `…` when cut.
pub fn truncate(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::review::AdmissionError;
    use serde_json::json;

    #[test]
    fn outcomes_follow_the_decision() {
        assert_eq!(Outcome::of(&Decision::allow()), Outcome::NoOp);
        let warned = Decision { warnings: vec!["w".into()], ..Decision::allow() };
        assert_eq!(Outcome::of(&warned), Outcome::NoOp);
        let patched = Decision { patch: vec![PatchOp::add("/a", json!(1))], ..Decision::allow() };
        assert_eq!(Outcome::of(&patched), Outcome::WouldPatch);
        assert_eq!(Outcome::of(&Decision::deny(&AdmissionError::Forbidden("no".into()))), Outcome::WouldDeny);
        assert_eq!(Outcome::ALL.map(Outcome::as_str), ["would-patch", "would-deny", "no-op"]);
    }

    #[test]
    fn the_sent_answer_allows_and_changes_nothing() {
        let sent = unenforced();
        assert!(sent.allowed && sent.patch.is_empty() && sent.warnings.is_empty() && sent.status.is_none());
    }

    #[test]
    fn summaries_name_operations_and_paths_or_the_denial() {
        let patched = Decision {
            patch: vec![
                PatchOp::add("/spec/containers/0", json!({"name": "sidecar"})),
                PatchOp::Replace {
                    path: "/metadata/annotations/kruise.io~1sidecarset-hash".into(),
                    value: json!("x").into(),
                },
                PatchOp::Remove { path: "/spec/nodeName".into() },
            ],
            ..Decision::allow()
        };
        assert_eq!(
            summary(&patched),
            "add /spec/containers/0, replace /metadata/annotations/kruise.io~1sidecarset-hash, remove /spec/nodeName"
        );
        let denied =
            Decision::deny(&AdmissionError::Invalid("spec.containers[0].name: Invalid value".into()));
        assert_eq!(summary(&denied), "422 Invalid: spec.containers[0].name: Invalid value");
        assert_eq!(summary(&Decision::allow()), "");
    }

    #[test]
    fn diff_summaries_show_both_sides_and_are_bounded() {
        let diff = |path: &str, ours: serde_json::Value, stored: serde_json::Value| FieldDiff {
            path: path.into(),
            ours,
            stored,
        };
        let diffs = [
            diff("spec.containers[log-agent].image", json!("fluent-bit:3.2.4"), json!("fluent-bit:3.1")),
            diff(
                "spec.volumes[agent-config]",
                json!({"configMap": {"name": "agent"}}),
                serde_json::Value::Null,
            ),
        ];
        assert_eq!(
            diff_summary(&diffs),
            r#"spec.containers[log-agent].image: "fluent-bit:3.2.4" -> "fluent-bit:3.1"; spec.volumes[agent-config]: {"configMap":{"name":"agent"}} -> -"#
        );
        let many: Vec<FieldDiff> = (0..500)
            .map(|i| diff(&format!("spec.containers[c].env[V{i}].value"), json!("x".repeat(1000)), json!(i)))
            .collect();
        let text = diff_summary(&many);
        assert!(text.len() <= DIFF_SUMMARY_LIMIT + 20, "{}", text.len());
        assert!(text.ends_with(" more"), "{text}");
    }

    #[test]
    fn summaries_are_bounded() {
        let patched = Decision {
            patch: (0..2000)
                .map(|i| PatchOp::add(format!("/spec/containers/0/env/{i}"), json!({})))
                .collect(),
            ..Decision::allow()
        };
        let text = summary(&patched);
        assert!(text.len() <= SUMMARY_LIMIT, "{}", text.len());
        assert!(text.starts_with("add /spec/containers/0/env/0, add /spec/containers/0/env/1"), "{text}");
        assert!(text.ends_with(" more"), "{text}");
        let denied = Decision::deny(&AdmissionError::Invalid("é".repeat(5000)));
        let text = summary(&denied);
        assert!(text.len() <= SUMMARY_LIMIT && text.ends_with('…'), "{}", text.len());
    }
}
