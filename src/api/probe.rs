//! A container probe (`corev1.Probe`) as Kruise re-encodes it: decoded into the Go type, then
//! written by `encoding/json`. Kruise stores probes as JSON text in pod annotations (the enhanced
//! liveness probe's backup, PodProbeMarker's `kruise.io/podprobe`), so the text must be Go's own:
//! fields in declaration order, `omitempty` ones left out when zero, unknown fields dropped.

use serde_json::{Map, Value, json};

/// `probe` in Go's field order (`ProbeHandler` inline: exec, httpGet, tcpSocket, grpc; then the
/// timings). Missing or mistyped values read as Go's zero values.
pub fn go_probe(probe: &Value) -> Value {
    let mut out = Map::new();
    if let Some(exec) = object(probe, "exec") {
        let mut fields = Map::new();
        put_nonempty(&mut fields, "command", strings(exec.get("command")));
        out.insert("exec".into(), Value::Object(fields));
    }
    if let Some(http) = object(probe, "httpGet") {
        let mut fields = Map::new();
        put_str(&mut fields, "path", http);
        fields.insert("port".into(), int_or_string(http.get("port")));
        put_str(&mut fields, "host", http);
        put_str(&mut fields, "scheme", http);
        let headers: Vec<Value> = http
            .get("httpHeaders")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|h| json!({"name": str_of(h.get("name")), "value": str_of(h.get("value"))}))
            .collect();
        put_nonempty(&mut fields, "httpHeaders", headers);
        out.insert("httpGet".into(), Value::Object(fields));
    }
    if let Some(tcp) = object(probe, "tcpSocket") {
        let mut fields = Map::new();
        fields.insert("port".into(), int_or_string(tcp.get("port")));
        put_str(&mut fields, "host", tcp);
        out.insert("tcpSocket".into(), Value::Object(fields));
    }
    if let Some(grpc) = object(probe, "grpc") {
        // `service` is a *string without omitempty: nil is written as null.
        let service = grpc.get("service").and_then(Value::as_str).map_or(Value::Null, |s| json!(s));
        out.insert("grpc".into(), json!({"port": int_of(grpc.get("port")), "service": service}));
    }
    for key in
        ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"]
    {
        let n = int_of(probe.get(key));
        if n != 0 {
            out.insert(key.into(), json!(n));
        }
    }
    if let Some(n) = probe.get("terminationGracePeriodSeconds").and_then(Value::as_i64) {
        out.insert("terminationGracePeriodSeconds".into(), json!(n));
    }
    Value::Object(out)
}

/// A pointer field: present unless missing or null.
fn object<'v>(value: &'v Value, key: &str) -> Option<&'v Map<String, Value>> {
    value.get(key)?.as_object()
}

fn str_of(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

fn int_of(value: Option<&Value>) -> i64 {
    value.and_then(Value::as_i64).unwrap_or(0)
}

fn strings(value: Option<&Value>) -> Vec<Value> {
    value.and_then(Value::as_array).into_iter().flatten().map(|v| json!(str_of(Some(v)))).collect()
}

/// `intstr.IntOrString`: a string stays a string, anything else is a number (0 when missing).
fn int_or_string(value: Option<&Value>) -> Value {
    match value {
        Some(Value::String(s)) => json!(s),
        other => json!(int_of(other)),
    }
}

/// A `string` field with `omitempty`.
fn put_str(out: &mut Map<String, Value>, key: &str, from: &Map<String, Value>) {
    let s = str_of(from.get(key));
    if !s.is_empty() {
        out.insert(key.into(), json!(s));
    }
}

/// A slice field with `omitempty`.
fn put_nonempty(out: &mut Map<String, Value>, key: &str, items: Vec<Value>) {
    if !items.is_empty() {
        out.insert(key.into(), Value::Array(items));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::go_json::compact;

    #[test]
    fn fields_come_in_go_order_and_zeros_are_left_out() {
        let probe = json!({
            "failureThreshold": 3, "periodSeconds": 0, "unknown": true, "terminationGracePeriodSeconds": 0,
            "tcpSocket": {"host": "", "port": "http"},
            "httpGet": {"scheme": "HTTP", "port": 8080, "path": "/healthz?a=1&b=<2>", "httpHeaders": [{"value": "v", "name": "X"}]},
            "exec": {"command": []},
            "grpc": {"port": 9000},
        });
        assert_eq!(
            compact(&go_probe(&probe)),
            r#"{"exec":{},"httpGet":{"path":"/healthz?a=1\u0026b=\u003c2\u003e","port":8080,"scheme":"HTTP","httpHeaders":[{"name":"X","value":"v"}]},"tcpSocket":{"port":"http"},"grpc":{"port":9000,"service":null},"failureThreshold":3,"terminationGracePeriodSeconds":0}"#
        );
        assert_eq!(
            compact(&go_probe(&json!({"exec": null, "grpc": {"port": 1, "service": ""}}))),
            r#"{"grpc":{"port":1,"service":""}}"#
        );
        assert_eq!(compact(&go_probe(&json!({"httpGet": {}}))), r#"{"httpGet":{"port":0}}"#);
    }
}
