//! JSON written byte for byte as Go's `encoding/json` writes it, for the values Kruise stores as
//! JSON text (the SidecarSet hash input, patched pod metadata): compact, HTML-safe string escaping.
//! And JSON Go wrote read as Go reads it back ([`drop_null_members`]).

use serde_json::Value;

/// A JSON string as Go's `encoding/json` writes it (HTML-safe escaping).
pub fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = c as u32 as u8;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Compact JSON with object keys sorted at every level and Go's HTML-safe escaping of `<`, `>`,
/// `&`, U+2028 and U+2029, as Go's `json.Marshal` writes it (MergePatchJson results).
pub fn sorted_compact(value: &Value) -> String {
    let mut out = String::new();
    write(value, true, &mut out);
    out
}

/// Compact JSON with object keys in their order and Go's escaping: what `json.Marshal` writes for
/// a Go struct whose fields `value` lists in declaration order (see [`crate::api::probe`]).
pub fn compact(value: &Value) -> String {
    let mut out = String::new();
    write(value, false, &mut out);
    out
}

fn write(value: &Value, sort: bool, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            if sort {
                keys.sort();
            }
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write(&map[k], sort, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, sort, out);
            }
            out.push(']');
        }
        Value::String(s) => write_string(out, s),
        other => out.push_str(&other.to_string()),
    }
}

/// Remove every object member whose value is `null`, at every depth.
///
/// Go's `encoding/json` writes a nil slice, map or pointer without `omitempty` as `null` (Kruise's
/// ControllerRevisions carry `"volumes":null` and the like), and reading it back into a fresh
/// struct leaves such a field nil; a `null` on any other field leaves it as it was, zero. Either
/// way the field reads as absent, which is what dropping the member gives our typed models. `null`
/// array elements are kept: Go decodes them to a zero element of a type only the model knows.
pub fn drop_null_members(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_null_members);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_null_members),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_escape_like_go() {
        let mut s = String::new();
        write_string(&mut s, "a\"b\\c\n\u{1}\u{7f}é\u{2028}");
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\u0001\u{7f}é\\u2028\"");
    }

    #[test]
    fn sorted_compact_escapes_like_go() {
        assert_eq!(
            sorted_compact(&json!({"b": 1, "a": {"d": "<&>", "c": [true, null]}})),
            r#"{"a":{"c":[true,null],"d":"\u003c\u0026\u003e"},"b":1}"#
        );
    }

    #[test]
    fn compact_keeps_member_order() {
        assert_eq!(
            compact(&json!({"b": [1, "<"], "a": {"d": null, "c": 2}})),
            r#"{"b":[1,"\u003c"],"a":{"d":null,"c":2}}"#
        );
    }

    #[test]
    fn null_members_read_as_absent_at_every_depth() {
        let mut v = json!({"volumes": null, "containers": [{"name": "c", "env": null,
            "resources": {"limits": null}}, null], "patchPodMetadata": null});
        drop_null_members(&mut v);
        assert_eq!(v, json!({"containers": [{"name": "c", "resources": {}}, null]}));
    }
}
