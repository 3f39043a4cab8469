//! A unified line diff for `dry-run --output diff` and `--compare`: the `similar` crate finds the
//! edit script (Myers) and groups it into hunks with three lines of context; this module only
//! renders them, with GNU-style ranges (`-l,n` always with its count) and optional ANSI colours.

use std::fmt::Write as _;

use similar::{Algorithm, ChangeTag, DiffOp, capture_diff_slices, group_diff_ops};

const CONTEXT: usize = 3;

/// ANSI colours for a terminal; plain text otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Plain,
    Color,
}

impl Style {
    fn paint(self, code: &str, line: &str) -> String {
        match self {
            Style::Plain => line.to_owned(),
            Style::Color => format!("\x1b[{code}m{line}\x1b[0m"),
        }
    }
}

/// A unified diff of `old` and `new` (`---`/`+++` headers, `@@` hunks), or an empty string when
/// the texts are equal.
pub fn unified(old: &str, new: &str, old_label: &str, new_label: &str, style: Style) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = capture_diff_slices(Algorithm::Myers, &a, &b);
    if ops.iter().all(|op| matches!(op, DiffOp::Equal { .. })) {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(out, "{}", style.paint("1", &format!("--- {old_label}")));
    let _ = writeln!(out, "{}", style.paint("1", &format!("+++ {new_label}")));
    for group in group_diff_ops(ops, CONTEXT) {
        hunk(&mut out, &group, &a, &b, style);
    }
    out
}

/// One hunk: a group of operations whose context overlaps.
fn hunk(out: &mut String, group: &[DiffOp], a: &[&str], b: &[&str], style: Style) {
    let (Some(first), Some(last)) = (group.first(), group.last()) else { return };
    let (old_start, new_start) = (first.old_range().start, first.new_range().start);
    let (old_count, new_count) = (last.old_range().end - old_start, last.new_range().end - new_start);
    // Unified format: 1-based start, or the line before when the range is empty.
    let start = |line: usize, count: usize| if count == 0 { line } else { line + 1 };
    let header = format!(
        "@@ -{},{} +{},{} @@",
        start(old_start, old_count),
        old_count,
        start(new_start, new_count),
        new_count
    );
    let _ = writeln!(out, "{}", style.paint("36", &header));
    for op in group {
        for change in op.iter_changes(a, b) {
            let line = change.value();
            let _ = match change.tag() {
                ChangeTag::Equal => writeln!(out, " {line}"),
                ChangeTag::Delete => writeln!(out, "{}", style.paint("31", &format!("-{line}"))),
                ChangeTag::Insert => writeln!(out, "{}", style.paint("32", &format!("+{line}"))),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_sides() {
        assert_eq!(unified("", "x\n", "a", "b", Style::Plain), "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n");
        assert_eq!(unified("x\n", "", "a", "b", Style::Plain), "--- a\n+++ b\n@@ -1,1 +0,0 @@\n-x\n");
        assert_eq!(unified("", "", "x", "y", Style::Plain), "");
        assert_eq!(unified("a\n", "a\n", "x", "y", Style::Plain), "");
    }

    #[test]
    fn hunks_carry_three_lines_of_context_and_gnu_style_ranges() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=21)
            .filter(|i| *i != 18)
            .map(|i| if i == 5 { "five\n".to_owned() } else { format!("{i}\n") })
            .collect();
        let text = unified(&old, &new, "a", "b", Style::Plain);
        let expected = "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n 19\n 20\n+21\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn insertion_into_an_empty_text_starts_at_zero() {
        assert_eq!(unified("", "x\n", "a", "b", Style::Plain), "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n");
    }

    #[test]
    fn colour_only_when_asked() {
        let text = unified("a\n", "b\n", "x", "y", Style::Color);
        assert!(text.contains("\x1b[31m-a\x1b[0m") && text.contains("\x1b[32m+b\x1b[0m"), "{text:?}");
    }
}
