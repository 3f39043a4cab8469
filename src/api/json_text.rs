//! Compact JSON text written by hand, byte for byte what `serde_json` writes for the same values
//! (tests hold them equal), for the text on every request's path: the response's patch and the
//! annotations Kruise stores as JSON. Through serde, every byte of every string went through a
//! table of escapes one at a time: that was two fifths of answering a typical Pod (issue 20.3).
//! Here a string is checked eight bytes at a time and, as nearly all are, copied whole.
//!
//! For Go's `encoding/json` text (HTML-safe escapes) see [`super::go_json`].

use serde_json::Number;

use super::tree::{Json, Object};

/// Append `value` as `serde_json::to_string` writes it.
pub fn push_value(out: &mut String, value: &Json<'_>) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => push_number(out, n),
        Json::String(s) => push_string(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_value(out, item);
            }
            out.push(']');
        }
        Json::Object(object) => push_object(out, object),
    }
}

fn push_object(out: &mut String, object: &Object<'_>) {
    out.push('{');
    for (i, (key, value)) in object.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(out, key);
        out.push(':');
        push_value(out, value);
    }
    out.push('}');
}

/// Integers as their digits; anything else (floats, which a Pod rarely has) through `serde_json`,
/// whose shortest-round-trip formatting is what it must match.
fn push_number(out: &mut String, n: &Number) {
    if let Some(u) = n.as_u64() {
        push_decimal(out, u);
    } else if let Some(i) = n.as_i64() {
        out.push('-');
        push_decimal(out, i.unsigned_abs());
    } else if let Ok(text) = serde_json::to_string(n) {
        out.push_str(&text);
    }
}

/// Append `n` in decimal (`write!` goes through the formatting machinery: ten times the work).
pub fn push_decimal(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[start..].iter().map(|&d| char::from(d)));
}

/// Append `s` as a JSON string, escaped as `serde_json` escapes: `\"`, `\\`, the short forms of
/// backspace, form feed, newline, carriage return and tab, `\u00xx` (lowercase) for the other
/// control characters, everything else as it is. The text between escapes is copied whole (the
/// hash annotations are JSON themselves, a quote every few bytes).
pub fn push_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let bytes = s.as_bytes();
    let mut plain = 0;
    while let Some(i) = next_escape(bytes, plain) {
        // Every escaped byte is ASCII, so `plain..i` and `i + 1` are character boundaries.
        out.push_str(&s[plain..i]);
        let b = bytes[i];
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
        plain = i + 1;
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// The first byte at or after `from` that JSON escapes (a control character, `"` or `\\`), read
/// eight bytes at a time with the word-at-a-time tests: a byte-by-byte table was most of the cost.
fn next_escape(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    // The high bit of each byte of `w` below `n` (n ≤ 128), or equal to `b`. A borrow can flag a
    // byte above a true match, never below one: the lowest flag is exact.
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS;
    let equal = |w: u64, b: u8| below(w ^ (ONES * u64::from(b)), 1);
    let rest = bytes.get(from..)?;
    let mut chunks = rest.chunks_exact(8);
    let mut at = from;
    for chunk in &mut chunks {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else { break };
        let w = u64::from_le_bytes(word);
        let flags = below(w, 0x20) | equal(w, b'"') | equal(w, b'\\');
        if flags != 0 {
            // Little-endian: the lowest set bit is the first byte.
            return Some(at + flags.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    let tail = chunks.remainder().iter().position(|&b| b < 0x20 || b == b'"' || b == b'\\');
    tail.map(|i| at + i)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn text(value: &Json<'_>) -> String {
        let mut out = String::new();
        push_value(&mut out, value);
        out
    }

    #[test]
    fn next_escape_finds_the_first_byte_json_escapes_at_every_offset() {
        for len in 0..20 {
            let plain = "a~ é\u{7f}".repeat(len);
            assert_eq!(next_escape(plain.as_bytes(), 0), None);
            for at in 0..len {
                for special in [b'"', b'\\', b'\n', 0, 0x1f] {
                    // Escapable bytes after the first must not hide it (a borrow flags upwards).
                    let mut s = vec![b'x'; len];
                    s[at..].fill(special);
                    assert_eq!(next_escape(&s, 0), Some(at), "{special:?} at {at} of {len}");
                    assert_eq!(next_escape(&s, at), Some(at));
                    assert_eq!(next_escape(&s, len), None);
                }
            }
        }
    }

    #[test]
    fn every_ascii_and_some_wider_characters_are_written_as_serde_json_writes_them() {
        let mut every: String = (0u8..=0x7f).map(char::from).collect();
        every.push_str("é€😀\u{2028}<&>");
        for s in [String::new(), every.clone(), every.repeat(3), format!("plain {every} plain"), "\"".into()]
        {
            let mut out = String::new();
            push_string(&mut out, &s);
            assert_eq!(out, serde_json::to_string(&s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn decimals_are_written_as_display_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 12345, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut out = String::new();
            push_decimal(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let values = [
            json!(null),
            json!([true, false, 0, -1, u64::MAX, i64::MIN, 1.5, 1e300, -0.0, 0.1, 100000000000000000000.0]),
            json!({}),
            json!([]),
            json!({"a": {"b": [{"c": "d\n"}, [], {}], "e\"": null}, "z": 1, "m": "\u{1}"}),
        ];
        for value in values {
            let tree = Json::from(&value);
            assert_eq!(text(&tree), serde_json::to_string(&value).unwrap(), "{value}");
        }
        // Upstream's Pod with every field set, as decoded from its text.
        let pod = include_str!("../../tests/fixtures/workloads/k8s-api-testdata-core.v1.Pod.json");
        let value: serde_json::Value = serde_json::from_str(pod).unwrap();
        assert_eq!(text(&Json::from(&value)), serde_json::to_string(&value).unwrap());
    }
}
