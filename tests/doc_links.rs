//! The docs' relative links lead somewhere: every relative link in `README.md`, `CONTRIBUTING.md`,
//! `SECURITY.md`, `CHANGELOG.md`, `docs/*.md` and `charts/**/README.md` names a file or folder that
//! exists, and an `#anchor` into a markdown file names one of its headings (by GitHub's slug rules)
//! or an `<a id="…">`/`<a name="…">`. And the user docs cite no issue numbers: they state current
//! behaviour; the history is in git.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The checked documents, relative to the repository root.
fn documents() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "CONTRIBUTING.md", "SECURITY.md", "CHANGELOG.md"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| root().join(p).exists())
        .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(root()).expect("under the root").to_path_buf())
        .collect();
    docs.sort();
    files.extend(docs);
    chart_readmes(&root().join("charts"), &mut files);
    files
}

fn chart_readmes(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            chart_readmes(&path, found);
        } else if path.file_name().is_some_and(|n| n == "README.md") {
            found.push(path.strip_prefix(root()).expect("under the root").to_path_buf());
        }
    }
}

/// The lines of `text` outside fenced code blocks, with their line numbers (from 1).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = if trimmed.starts_with("```") {
            Some("```")
        } else if trimmed.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (None, None) => {
                // An indented code block (four spaces after a blank line) is left in: links in
                // it are not links, but the docs indent only commands, which hold none.
                lines.push((n + 1, line));
            }
            _ => {}
        }
    }
    lines
}

/// `line` without its inline code spans (`` `…` ``), which hold no links.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for piece in line.split('`') {
        if !in_code {
            out.push_str(piece);
        }
        in_code = !in_code;
    }
    out
}

/// The link targets of one line: `[text](target)`, `![alt](target)` and `[label]: target`.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let trimmed = line.trim_start();
    if trimmed.starts_with('[')
        && let Some(close) = trimmed.find("]:")
        && !trimmed[..close].contains("](")
    {
        if let Some(target) = trimmed[close + 2..].split_whitespace().next() {
            targets.push(target.to_owned());
        }
        return targets;
    }
    let bytes = line.as_bytes();
    let mut i = 0;
    while let Some(found) = line[i..].find("](") {
        let start = i + found + 2;
        // The target runs to the matching `)`, allowing balanced parentheses inside it.
        let mut depth = 1;
        let mut end = start;
        while end < bytes.len() {
            match bytes[end] {
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        let inside = line[start..end].trim();
        let target = inside.split_whitespace().next().unwrap_or_default();
        let target = target.trim_start_matches('<').trim_end_matches('>');
        if !target.is_empty() {
            targets.push(target.to_owned());
        }
        i = end.min(line.len());
        if i == start {
            i += 1;
        }
    }
    targets
}

/// GitHub's anchor for a heading's text: markdown links reduced to their text, code spans to their
/// content, lower case, every character that is not a letter, a digit, `-`, `_` or a space dropped,
/// spaces turned into `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    // `[text](target)` → `text`.
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](").map(|m| open + m) {
            Some(mid) if rest[mid..].contains(')') => {
                let close = mid + rest[mid..].find(')').expect("checked");
                text.push_str(&rest[..open]);
                text.push_str(&rest[open + 1..mid]);
                rest = &rest[close + 1..];
            }
            _ => break,
        }
    }
    text.push_str(rest);
    text.trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a markdown file offers: its headings' slugs (a repeated slug gets `-1`, `-2`, … as on
/// GitHub) and its explicit `<a id>`/`<a name>` anchors.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (_, line) in prose_lines(text) {
        let trimmed = line.trim_start();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let base = slug(trimmed[hashes..].trim().trim_end_matches('#').trim());
            let count = seen.entry(base.clone()).or_insert(0);
            let anchor = if *count == 0 { base.clone() } else { format!("{base}-{count}") };
            *count += 1;
            found.insert(anchor);
        }
        for attribute in ["id=\"", "name=\""] {
            for piece in line.split("<a ").skip(1) {
                if let Some(at) = piece.find(attribute) {
                    let value = &piece[at + attribute.len()..];
                    if let Some(end) = value.find('"') {
                        found.insert(value[..end].to_owned());
                    }
                }
            }
        }
    }
    found
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.starts_with("//")
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let mut anchor_cache: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a document");
        let dir = doc.parent().unwrap_or(Path::new("")).to_path_buf();
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                if is_external(&target) {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() { doc.clone() } else { normalize(&dir.join(path)) };
                let full = root().join(&file);
                if !full.exists() {
                    problems.push(format!(
                        "{}:{n}: `{target}`: {} does not exist",
                        doc.display(),
                        file.display()
                    ));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if full.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                let offered = anchor_cache
                    .entry(file.clone())
                    .or_insert_with(|| anchors(&std::fs::read_to_string(&full).expect("a markdown file")));
                if !offered.contains(anchor) {
                    problems.push(format!(
                        "{}:{n}: `{target}`: {} has no heading or anchor `#{anchor}`",
                        doc.display(),
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} relative links found: is the link parser broken?");
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
}

/// `a/./b/../c` → `a/c`, without touching the file system (a link may climb out of `docs/`).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn user_docs_cite_no_issue_numbers() {
    let mut problems = Vec::new();
    // CHANGELOG.md may link releases and pull requests, as changelogs do.
    for doc in documents().into_iter().filter(|d| d != Path::new("CHANGELOG.md")) {
        let text = std::fs::read_to_string(root().join(&doc)).expect("a document");
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let words: Vec<&str> = lower.split_whitespace().collect();
            let cites_issue = words.windows(2).any(|w| {
                (w[0] == "issue" || w[0] == "issues" || w[0] == "(issue" || w[0] == "(issues")
                    && w[1].starts_with(|c: char| c.is_ascii_digit())
            });
            // `#17` after a space or a parenthesis is an issue or pull request; an anchor
            // (`file.md#13-…`, `(#1-what-moves)`) and `audit.log#11` (a document's index in
            // dry-run's output) are not.
            let bytes = line.as_bytes();
            let hash_number = (0..bytes.len()).any(|i| {
                let digits = bytes[i + 1..].iter().take_while(|b| b.is_ascii_digit()).count();
                let after = bytes.get(i + 1 + digits);
                bytes[i] == b'#'
                    && digits > 0
                    && !after.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
                    && (i == 0 || matches!(bytes[i - 1], b' ' | b'(' | b'[' | b'\t'))
            });
            if cites_issue || hash_number {
                problems.push(format!("{}:{}: {line}", doc.display(), n + 1));
            }
        }
    }
    assert!(problems.is_empty(), "issue numbers in user docs:\n{}", problems.join("\n"));
}

#[test]
fn the_slug_rules_are_githubs() {
    assert_eq!(slug("Certificate modes (`--cert-mode`)"), "certificate-modes---cert-mode");
    assert_eq!(slug("`dry-run`: decisions offline"), "dry-run-decisions-offline");
    assert_eq!(
        slug("2.3 Advanced StatefulSet under InPlaceOnly"),
        "23-advanced-statefulset-under-inplaceonly"
    );
    assert_eq!(
        slug("Agreement with stored Pods: `--compare --stored`"),
        "agreement-with-stored-pods---compare---stored"
    );
    assert_eq!(slug("Installing [the chart](x.md)"), "installing-the-chart");
    assert_eq!(slug("snake_case stays"), "snake_case-stays");
    let repeated = anchors("# A\n## Notes\n```\n## Not a heading\n```\n## Notes\n<a id=\"x-1\"></a>\n");
    assert_eq!(repeated, ["a", "notes", "notes-1", "x-1"].iter().map(|s| s.to_string()).collect());
    assert_eq!(link_targets("see [a](b.md#c) and ![d](e.png \"t\") but not `[f](g)`"), ["b.md#c", "e.png"]);
}
