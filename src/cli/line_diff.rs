//! A unified line diff for `dry-run --output diff` and `--compare`: Myers' O(ND) shortest edit
//! script on the lines between the common prefix and suffix, then hunks with three lines of context.
//!
//! Objects rendered as YAML differ in a few places (a sidecar added, a toleration stamped), so after
//! trimming the common ends the edit distance D is small and the D² trace Myers keeps is tiny.

use std::fmt::Write as _;

const CONTEXT: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// Same line: old index, new index.
    Keep(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// The shortest edit script from `a` to `b`, in order.
fn edits(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (a_mid, b_mid) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut out: Vec<Edit> = (0..prefix).map(|i| Edit::Keep(i, i)).collect();
    out.extend(myers(a_mid, b_mid).into_iter().map(|e| match e {
        Edit::Keep(i, j) => Edit::Keep(i + prefix, j + prefix),
        Edit::Delete(i) => Edit::Delete(i + prefix),
        Edit::Insert(j) => Edit::Insert(j + prefix),
    }));
    let (a_end, b_end) = (a.len() - suffix, b.len() - suffix);
    out.extend((0..suffix).map(|s| Edit::Keep(a_end + s, b_end + s)));
    out
}

/// Myers' greedy forward search. `trace[d]` is the furthest-reaching x on diagonals -d-1..=d+1
/// before step d; backtracking through it recovers the path.
fn myers(a: &[&str], b: &[&str]) -> Vec<Edit> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = n + m;
    let offset = max + 1;
    let mut v = vec![0isize; (2 * max + 3) as usize];
    let mut trace: Vec<Vec<isize>> = Vec::new();
    let at = |k: isize| (k + offset) as usize;
    for d in 0..=max {
        trace.push(v[at(-d - 1)..=at(d + 1)].to_vec());
        for k in (-d..=d).step_by(2) {
            let mut x = if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) { v[at(k + 1)] } else { v[at(k - 1)] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[at(k)] = x;
            if x >= n && y >= m {
                return backtrack(&trace, n, m);
            }
        }
    }
    Vec::new()
}

fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<Edit> {
    let (mut x, mut y) = (n, m);
    let mut out = Vec::new();
    for d in (0..trace.len() as isize).rev() {
        let v = &trace[d as usize];
        let get = |k: isize| v[(k + d + 1) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && get(k - 1) < get(k + 1)) { k + 1 } else { k - 1 };
        let (prev_x, prev_y) = if d == 0 { (0, 0) } else { (get(prev_k), get(prev_k) - prev_k) };
        while x > prev_x && y > prev_y {
            out.push(Edit::Keep((x - 1) as usize, (y - 1) as usize));
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == prev_x {
                out.push(Edit::Insert((y - 1) as usize));
            } else {
                out.push(Edit::Delete((x - 1) as usize));
            }
        }
        (x, y) = (prev_x, prev_y);
    }
    out.reverse();
    out
}

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
    let script = edits(&a, &b);
    let changes: Vec<usize> = script.iter().enumerate().filter(|(_, e)| !matches!(e, Edit::Keep(..))).map(|(i, _)| i).collect();
    let Some(&first) = changes.first() else { return String::new() };
    let mut out = String::new();
    let _ = writeln!(out, "{}", style.paint("1", &format!("--- {old_label}")));
    let _ = writeln!(out, "{}", style.paint("1", &format!("+++ {new_label}")));
    // Group changes whose context overlaps into one hunk.
    let mut start = first;
    let mut end = first;
    for &c in &changes[1..] {
        if c > end + 2 * CONTEXT {
            hunk(&mut out, &script, &a, &b, start, end, style);
            start = c;
        }
        end = c;
    }
    hunk(&mut out, &script, &a, &b, start, end, style);
    out
}

/// One hunk: the edits from `first_change - CONTEXT` to `last_change + CONTEXT`.
fn hunk(out: &mut String, script: &[Edit], a: &[&str], b: &[&str], first_change: usize, last_change: usize, style: Style) {
    let from = first_change.saturating_sub(CONTEXT);
    let to = (last_change + CONTEXT + 1).min(script.len());
    // Line positions before the hunk: count what the earlier edits consumed.
    let (mut old_line, mut new_line) = (0, 0);
    for e in &script[..from] {
        match e {
            Edit::Keep(..) => {
                old_line += 1;
                new_line += 1;
            }
            Edit::Delete(_) => old_line += 1,
            Edit::Insert(_) => new_line += 1,
        }
    }
    let part = &script[from..to];
    let old_count = part.iter().filter(|e| !matches!(e, Edit::Insert(_))).count();
    let new_count = part.iter().filter(|e| !matches!(e, Edit::Delete(_))).count();
    // Unified format: 1-based start, or the line before when the range is empty.
    let start = |line: usize, count: usize| if count == 0 { line } else { line + 1 };
    let header = format!("@@ -{},{} +{},{} @@", start(old_line, old_count), old_count, start(new_line, new_count), new_count);
    let _ = writeln!(out, "{}", style.paint("36", &header));
    for e in part {
        let _ = match *e {
            Edit::Keep(i, _) => writeln!(out, " {}", a[i]),
            Edit::Delete(i) => writeln!(out, "{}", style.paint("31", &format!("-{}", a[i]))),
            Edit::Insert(j) => writeln!(out, "{}", style.paint("32", &format!("+{}", b[j]))),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: &[&str], b: &[&str], script: &[Edit]) -> Vec<String> {
        script
            .iter()
            .filter_map(|e| match *e {
                Edit::Keep(i, _) => Some(a[i].to_owned()),
                Edit::Insert(j) => Some(b[j].to_owned()),
                Edit::Delete(_) => None,
            })
            .collect()
    }

    #[test]
    fn the_script_turns_old_into_new_with_the_fewest_edits() {
        // Myers' paper example: ABCABBA -> CBABAC has distance 5.
        let a: Vec<&str> = "A B C A B B A".split(' ').collect();
        let b: Vec<&str> = "C B A B A C".split(' ').collect();
        let script = edits(&a, &b);
        assert_eq!(apply(&a, &b, &script), b);
        assert_eq!(script.iter().filter(|e| !matches!(e, Edit::Keep(..))).count(), 5);
        // Every old line is kept or deleted exactly once, in order.
        let olds: Vec<usize> =
            script.iter().filter_map(|e| if let Edit::Keep(i, _) | Edit::Delete(i) = *e { Some(i) } else { None }).collect();
        assert_eq!(olds, (0..a.len()).collect::<Vec<_>>());
    }

    #[test]
    fn empty_sides() {
        assert_eq!(edits(&[], &["x"]), [Edit::Insert(0)]);
        assert_eq!(edits(&["x"], &[]), [Edit::Delete(0)]);
        assert!(edits(&[], &[]).is_empty());
        assert_eq!(unified("a\n", "a\n", "x", "y", Style::Plain), "");
    }

    #[test]
    fn hunks_carry_three_lines_of_context_and_gnu_style_ranges() {
        let old: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let new: String = (1..=21).filter(|i| *i != 18).map(|i| if i == 5 { "five\n".to_owned() } else { format!("{i}\n") }).collect();
        let text = unified(&old, &new, "a", "b", Style::Plain);
        let expected =
            "--- a\n+++ b\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n@@ -15,6 +15,6 @@\n 15\n 16\n 17\n-18\n 19\n 20\n+21\n";
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
