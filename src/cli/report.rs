//! The outputs of `dry-run` for people: `summary` (an aligned table with totals), `patched` (the
//! admitted objects as YAML) and `diff` (input vs admitted object), and the `--compare` report of
//! each input without and with the `--with` objects.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::inputs::Skipped;
use super::line_diff::{Style, unified};
use crate::admission::patch::PatchOp;

/// One webhook call, as the summary line reports it.
pub(crate) struct Call {
    pub(crate) path: &'static str,
    pub(crate) allowed: bool,
    pub(crate) patch: Vec<PatchOp<'static>>,
}

/// The outcome of one review through every matching webhook.
pub(crate) struct ReviewResult {
    pub(crate) uid: Value,
    /// `Kind namespace/name` of the request, for people (`-` when the review cannot be decoded).
    pub(crate) subject: String,
    pub(crate) allowed: bool,
    /// `(code, message)` of the first denial; 200 and empty when allowed.
    pub(crate) status: (u16, String),
    pub(crate) warnings: Vec<String>,
    /// Against the input object; empty on denial (nothing is admitted).
    pub(crate) patch: Vec<PatchOp<'static>>,
    /// The object as the request carried it, kept only for `--output diff`; null otherwise and
    /// for requests without an object (DELETE).
    pub(crate) input: Value,
    /// The object as admitted; null on denial and for requests without an object (DELETE).
    pub(crate) object: Value,
    pub(crate) calls: Vec<Call>,
    /// Each response as `serve` would send it.
    pub(crate) responses: Vec<String>,
    /// The status writes `serve` would make for the review ([`crate::admission::writes`]): those
    /// of each call that allowed it.
    pub(crate) writes: Vec<Value>,
    /// `(namespace, name)` of a Pod CREATE (name empty with generateName); `None` for any other
    /// request.
    pub(crate) pod_create: Option<(String, String)>,
}

impl ReviewResult {
    /// The `json` output line.
    pub(crate) fn summary(&self, source: &str) -> String {
        let webhooks: Vec<Value> = self
            .calls
            .iter()
            .map(|c| json!({"path": c.path, "allowed": c.allowed, "patch": c.patch}))
            .collect();
        json!({
            "source": source,
            "uid": self.uid,
            "allowed": self.allowed,
            "status": {"code": self.status.0, "message": self.status.1},
            "warnings": self.warnings,
            "patch": self.patch,
            "object": self.object,
            "webhooks": webhooks,
            "writes": self.writes,
        })
        .to_string()
    }
}

/// Objects as YAML; a value serde-saphyr cannot render falls back to JSON (which is YAML too).
pub fn yaml(value: &Value) -> String {
    let mut text = serde_saphyr::to_string(value).unwrap_or_else(|_| value.to_string());
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// `allowed` or `denied <code>`.
fn verdict(result: &ReviewResult) -> String {
    if result.allowed { "allowed".to_owned() } else { format!("denied {}", result.status.0) }
}

/// The denial message, else the warnings; newlines folded so a row stays one line.
fn message(result: &ReviewResult) -> String {
    let text = if !result.allowed {
        result.status.1.clone()
    } else if result.warnings.is_empty() {
        String::new()
    } else {
        format!("warning: {}", result.warnings.join("; "))
    };
    text.replace('\n', " ")
}

fn patch_ops(result: &ReviewResult) -> usize {
    result.patch.len()
}

fn webhooks(result: &ReviewResult) -> String {
    if result.calls.is_empty() {
        "-".to_owned()
    } else {
        result.calls.iter().map(|c| c.path).collect::<Vec<_>>().join(",")
    }
}

/// Rows of text cells printed with each column padded to its widest cell (the last column is
/// not padded).
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table { rows: vec![header.iter().map(|h| (*h).to_owned()).collect()] }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Data rows (without the header).
    pub fn len(&self) -> usize {
        self.rows.len() - 1
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| self.rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

pub const SUMMARY_HEADER: &[&str] = &["SOURCE", "OBJECT", "RESULT", "WEBHOOKS", "PATCH", "MESSAGE"];

pub fn summary_row(source: &str, result: &ReviewResult) -> Vec<String> {
    let ops = if result.allowed { patch_ops(result).to_string() } else { "-".to_owned() };
    vec![source.to_owned(), result.subject.clone(), verdict(result), webhooks(result), ops, message(result)]
}

/// Totals over the results of a run, for the summary's last line.
#[derive(Debug, Default)]
pub struct Totals {
    pub allowed: usize,
    pub denied: usize,
    pub patch_ops: usize,
    pub changed: usize,
}

impl Totals {
    pub fn add(&mut self, result: &ReviewResult) {
        if result.allowed {
            self.allowed += 1;
        } else {
            self.denied += 1;
        }
        self.patch_ops += patch_ops(result);
    }

    pub fn line(&self, skipped: &Skipped, compare: bool) -> String {
        let inputs = self.allowed + self.denied;
        let mut line = format!(
            "{inputs} inputs: {} allowed, {} denied, {} patch operations",
            self.allowed, self.denied, self.patch_ops
        );
        if compare {
            let _ = write!(line, "; {} changed by --with, {} unchanged", self.changed, inputs - self.changed);
        }
        if let Some(skipped) = skipped_text(skipped) {
            line.push('\n');
            line.push_str(&skipped);
        }
        line
    }
}

/// `N audit events skipped: reason: n, ...`, or None when none was.
pub fn skipped_text(skipped: &Skipped) -> Option<String> {
    let total: usize = skipped.values().sum();
    if total == 0 {
        return None;
    }
    let reasons: Vec<String> =
        skipped.iter().map(|(reason, n)| format!("{n} {}", reason.describe())).collect();
    Some(format!("{total} audit events skipped: {}", reasons.join("; ")))
}

/// One `patched` document: the admitted object, or a comment saying why there is none.
pub fn patched(source: &str, result: &ReviewResult) -> String {
    if !result.allowed {
        return format!("# {source}: {}: {}\n", verdict(result), message(result));
    }
    if result.object.is_null() {
        return format!("# {source}: allowed, no object (DELETE)\n");
    }
    format!("---\n# {source}: allowed, {} patch operations\n{}", patch_ops(result), yaml(&result.object))
}

/// One `diff` entry: the input object against the admitted one.
pub fn diff(source: &str, result: &ReviewResult, style: Style) -> String {
    if !result.allowed {
        return format!("# {source}: {}: {}\n", verdict(result), message(result));
    }
    if result.object.is_null() {
        return format!("# {source}: allowed, no object (DELETE)\n");
    }
    let text = unified(
        &yaml(&result.input),
        &yaml(&result.object),
        &format!("{source} (input)"),
        &format!("{source} (admitted)"),
        style,
    );
    if text.is_empty() { format!("# {source}: allowed, unchanged\n") } else { text }
}

/// Did the `--with` objects change this input's outcome?
pub fn changed(without: &ReviewResult, with: &ReviewResult) -> bool {
    without.allowed != with.allowed
        || without.status != with.status
        || without.object != with.object
        || without.warnings != with.warnings
}

fn outcome(result: &ReviewResult) -> String {
    if result.allowed { format!("allowed, {} ops", patch_ops(result)) } else { verdict(result) }
}

pub const COMPARE_HEADER: &[&str] = &["SOURCE", "OBJECT", "WITHOUT", "WITH", "CHANGE", "MESSAGE"];

pub fn compare_row(source: &str, without: &ReviewResult, with: &ReviewResult) -> Vec<String> {
    let change = if changed(without, with) { "changed" } else { "unchanged" };
    vec![
        source.to_owned(),
        with.subject.clone(),
        outcome(without),
        outcome(with),
        change.to_owned(),
        message(with),
    ]
}

/// The admitted object without the `--with` objects against the one with them; a comment when
/// nothing changed or when one side has no object (denied, DELETE).
pub fn compare_diff(source: &str, without: &ReviewResult, with: &ReviewResult, style: Style) -> String {
    if !changed(without, with) {
        return format!("# {source}: unchanged by --with ({})\n", outcome(with));
    }
    let mut out = String::new();
    if without.allowed != with.allowed || without.status != with.status {
        let _ = writeln!(out, "# {source}: {} -> {}: {}", outcome(without), outcome(with), message(with));
    }
    if !without.object.is_null() && !with.object.is_null() {
        out.push_str(&unified(
            &yaml(&without.object),
            &yaml(&with.object),
            &format!("{source} (without --with)"),
            &format!("{source} (with --with)"),
            style,
        ));
    }
    if out.is_empty() {
        // Same object, different warnings.
        let _ = writeln!(out, "# {source}: warnings {:?} -> {:?}", without.warnings, with.warnings);
    }
    out
}

/// `--compare --output json`: both outcomes in the `json` line shape, and whether they differ.
pub fn compare_json(source: &str, without: &ReviewResult, with: &ReviewResult) -> String {
    let parse = |r: &ReviewResult| serde_json::from_str::<Value>(&r.summary(source)).unwrap_or(Value::Null);
    json!({"source": source, "changed": changed(without, with), "without": parse(without), "with": parse(with)}).to_string()
}
