//! Regular expressions that come from objects (SidecarSet `targetContainersNameRegex`, the
//! patchPodMetadata whitelist), compiled with bounds so a pattern cannot cost a request more than
//! a few milliseconds or a few hundred KiB.
//!
//! Kruise compiles them with Go's `regexp` (RE2 syntax), where `\w`, `\d`, `\s` and `\b` are ASCII
//! classes. Rust's are Unicode by default, which makes `\w{200}` a program of megabytes (about
//! 80 ms to compile). Patterns are therefore compiled in ASCII mode first, which is Go's meaning
//! of those classes and small; a pattern that needs Unicode (`\pL`, `(?u)`) is compiled with
//! Unicode, within the same size limit. They are matched against names (container names,
//! annotation keys), which are ASCII, so `.` matching a byte instead of a character changes no
//! result.

use regex::bytes::{Regex, RegexBuilder};

/// Longest pattern accepted, in bytes. Container names have at most 63 characters; this leaves
/// room for an alternation of dozens of them.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Largest compiled program accepted (the regex crate's `size_limit`; its default is 10 MiB).
pub const MAX_COMPILED_BYTES: usize = 256 * 1024;
/// Deepest nesting of groups and repetitions accepted.
const MAX_NESTING: u32 = 64;

/// A compiled, bounded pattern.
#[derive(Debug, Clone)]
pub struct Pattern(Regex);

impl Pattern {
    /// Compile `pattern`, or say why it is refused: a syntax error, too long, or too complex.
    pub fn compile(pattern: &str) -> Result<Self, String> {
        if pattern.len() > MAX_PATTERN_BYTES {
            return Err(format!(
                "the pattern is {} bytes long; at most {MAX_PATTERN_BYTES} are accepted",
                pattern.len()
            ));
        }
        let build = |unicode: bool| {
            RegexBuilder::new(pattern)
                .unicode(unicode)
                .size_limit(MAX_COMPILED_BYTES)
                .nest_limit(MAX_NESTING)
                .build()
        };
        let compiled = match build(false) {
            Ok(regex) => Ok(regex),
            // Only a pattern that cannot be read without Unicode is tried again with it.
            Err(regex::Error::Syntax(_)) => build(true),
            Err(other) => Err(other),
        };
        compiled.map(Pattern).map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => format!(
                "the pattern is too complex: its compiled form exceeds {} KiB (large repetitions of Unicode classes \
                 such as \\pL{{100}} do; use ASCII classes like [a-z0-9-] or smaller counts)",
                MAX_COMPILED_BYTES / 1024
            ),
            other => other.to_string(),
        })
    }

    pub fn is_match(&self, name: &str) -> bool {
        self.0.is_match(name.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_have_go_meaning_and_stay_small() {
        // Unicode \w{200} is a program of megabytes; Go's (ASCII) \w{200} is small and accepted.
        let p = Pattern::compile(r"^\w{200}$").unwrap();
        assert!(p.is_match(&"a".repeat(200)));
        assert!(!p.is_match(&"é".repeat(200)));
        assert!(Pattern::compile(r"\d+").unwrap().is_match("web-1"));
        let any = Pattern::compile(".*").unwrap();
        assert!(any.is_match("") && any.is_match("main"));
        // Case-insensitive and anchored alternations behave as in Go on container names.
        let p = Pattern::compile("(?i)^(MAIN|app-[0-9]+)$").unwrap();
        assert!(p.is_match("main") && p.is_match("APP-7") && !p.is_match("app-x"));
        // Unicode classes still work where a pattern asks for them.
        assert!(Pattern::compile(r"^\pL+$").unwrap().is_match("main"));
    }

    #[test]
    fn pathological_patterns_are_refused_with_a_reason() {
        let err = Pattern::compile(r"(?u)\w{200}").unwrap_err();
        assert!(err.starts_with("the pattern is too complex: its compiled form exceeds 256 KiB"), "{err}");
        let err = Pattern::compile(r"\pL{1000}").unwrap_err();
        assert!(err.contains("too complex"), "{err}");
        let long = format!("^({})$", (0..1000).map(|i| format!("c{i}")).collect::<Vec<_>>().join("|"));
        let err = Pattern::compile(&long).unwrap_err();
        assert!(err.ends_with("at most 4096 are accepted"), "{err}");
        let nested = format!("{}a{}", "(".repeat(100), ")".repeat(100));
        assert!(Pattern::compile(&nested).is_err());
        assert!(Pattern::compile("(").unwrap_err().contains("unclosed group"));
    }
}
