//! `--log-format json`: one JSON object per line, `timestamp`, `level`, the event's fields (the
//! `message` first), `target`, and when inside spans `span` (the innermost) and `spans` (root
//! first), each span its fields and `name`. The shape of tracing-subscriber's own JSON format with
//! flattened events, written directly into the line: that format collects each field through
//! serde's serializer and a `fmt` adaptor, which with a line per review cost a tenth of a review's
//! CPU at 10 SidecarSets (`benches/h2load.sh`, each server pinned to one core).

use std::fmt::{self, Write as _};

use time::OffsetDateTime;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use crate::api::json_text::{push_decimal, push_string};

/// The event format of `serve --log-format json`; span fields come from [`JsonFields`].
pub struct JsonLine;

impl<S> FormatEvent<S, JsonFields> for JsonLine
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = String::with_capacity(512);
        line.push_str("{\"timestamp\":\"");
        push_timestamp(&mut line, OffsetDateTime::now_utc());
        line.push_str("\",\"level\":\"");
        line.push_str(event.metadata().level().as_str());
        line.push('"');
        event.record(&mut Members { line: &mut line, scratch: String::new() });
        line.push_str(",\"target\":");
        push_string(&mut line, event.metadata().target());
        if let Some(scope) = ctx.event_scope() {
            let spans: Vec<String> = scope.from_root().map(|span| span_object(&span)).collect();
            if let Some(innermost) = spans.last() {
                line.push_str(",\"span\":");
                line.push_str(innermost);
                line.push_str(",\"spans\":[");
                line.push_str(&spans.join(","));
                line.push(']');
            }
        }
        line.push_str("}\n");
        writer.write_str(&line)
    }
}

/// A span as `{fields..., "name": ...}`, from the fields [`JsonFields`] stored as a JSON object.
fn span_object<'a, S: LookupSpan<'a>>(span: &tracing_subscriber::registry::SpanRef<'a, S>) -> String {
    let extensions = span.extensions();
    let stored = extensions.get::<FormattedFields<JsonFields>>().map_or("", |f| f.fields.as_str());
    let inner = stored.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}')).unwrap_or("").trim();
    let mut object = String::with_capacity(inner.len() + 32);
    object.push('{');
    if !inner.is_empty() {
        object.push_str(inner);
        object.push(',');
    }
    object.push_str("\"name\":");
    push_string(&mut object, span.name());
    object.push('}');
    object
}

/// RFC 3339 in UTC with microseconds, as `2026-12-07T14:52:50.754134Z`.
fn push_timestamp(out: &mut String, now: OffsetDateTime) {
    let year = u32::try_from(now.year()).unwrap_or(0);
    let parts = [
        (year, 4, '-'),
        (u32::from(u8::from(now.month())), 2, '-'),
        (u32::from(now.day()), 2, 'T'),
        (u32::from(now.hour()), 2, ':'),
        (u32::from(now.minute()), 2, ':'),
        (u32::from(now.second()), 2, '.'),
        (now.microsecond(), 6, 'Z'),
    ];
    for (value, width, then) in parts {
        push_padded(out, value, width);
        out.push(then);
    }
}

/// `value` in decimal, zero-padded to `width` digits.
fn push_padded(out: &mut String, value: u32, width: u32) {
    let mut place = 10u32.pow(width - 1);
    while place > 0 {
        out.push(char::from(b'0' + ((value / place) % 10) as u8));
        place /= 10;
    }
}

/// The event's fields as members of the line's object, in the order they were recorded.
struct Members<'a> {
    line: &'a mut String,
    /// Where a `Debug` or `Display` value is formatted before it is escaped.
    scratch: String,
}

impl Members<'_> {
    fn key(&mut self, field: &Field) {
        self.line.push(',');
        push_string(self.line, field.name());
        self.line.push(':');
    }

    fn text(&mut self, field: &Field, value: fmt::Arguments<'_>) {
        self.key(field);
        self.scratch.clear();
        let _ = self.scratch.write_fmt(value);
        push_string(self.line, &self.scratch);
    }
}

impl Visit for Members<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.key(field);
        push_string(self.line, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.text(field, format_args!("{value:?}"));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.text(field, format_args!("{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.key(field);
        push_decimal(self.line, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.key(field);
        if value < 0 {
            self.line.push('-');
        }
        push_decimal(self.line, value.unsigned_abs());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.key(field);
        self.line.push_str(if value { "true" } else { "false" });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.key(field);
        // As serde_json writes it: `25.0`, and `null` for what JSON has no number for.
        match serde_json::Number::from_f64(value) {
            Some(number) => {
                let _ = write!(self.line, "{number}");
            }
            None => self.line.push_str("null"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// The lines `body` logs, through tracing-subscriber's JSON format (flattened) and through ours.
    fn both(body: impl Fn()) -> (String, String) {
        let theirs = Arc::new(Mutex::new(Vec::new()));
        let ours = Arc::new(Mutex::new(Vec::new()));
        let sink = |buffer: &Arc<Mutex<Vec<u8>>>| {
            let buffer = buffer.clone();
            move || Sink(buffer.clone())
        };
        let subscriber =
            tracing_subscriber::fmt().with_writer(sink(&theirs)).json().flatten_event(true).finish();
        tracing::subscriber::with_default(subscriber, &body);
        let subscriber = tracing_subscriber::fmt()
            .with_writer(sink(&ours))
            .fmt_fields(JsonFields::new())
            .event_format(JsonLine)
            .finish();
        tracing::subscriber::with_default(subscriber, &body);
        let text = |b: &Arc<Mutex<Vec<u8>>>| String::from_utf8(b.lock().unwrap().clone()).unwrap();
        (text(&theirs), text(&ours))
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Each line parsed, without the timestamps (taken at different moments), which are checked
    /// for their shape.
    fn parsed(text: &str) -> Vec<serde_json::Value> {
        text.lines()
            .map(|line| {
                let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
                let stamp = value.as_object_mut().unwrap().remove("timestamp").unwrap();
                let stamp = stamp.as_str().unwrap();
                assert!(
                    OffsetDateTime::parse(stamp, &time::format_description::well_known::Rfc3339).is_ok(),
                    "{stamp}"
                );
                assert_eq!(stamp.len(), "2026-12-07T14:52:50.754134Z".len(), "{stamp}");
                value
            })
            .collect()
    }

    #[test]
    fn lines_say_what_tracing_subscribers_json_format_says() {
        let error = std::io::Error::other("disk \"full\"");
        let (theirs, ours) = both(|| {
            tracing::info!(
                uid = %"a\"b\nc\u{1b}",
                kind = "Pod",
                allowed = true,
                code = 200u16,
                delta = -3i64,
                least = i64::MIN,
                ratio = 25.0f64,
                nan = f64::NAN,
                peer = ?Some("10.0.0.1"),
                error = &error as &(dyn std::error::Error + 'static),
                "admission review"
            );
            let span = tracing::info_span!("HTTP", method = "GET", path = "/api");
            let _in = span.enter();
            let inner = tracing::warn_span!("retry");
            let _inner = inner.enter();
            tracing::warn!(attempt = 2u32, "retrying {}", "soon");
        });
        assert_eq!(parsed(&ours), parsed(&theirs), "ours:\n{ours}\ntheirs:\n{theirs}");
        assert_eq!(ours.lines().count(), 2);
        let first = ours.lines().next().unwrap();
        // The same members in the same order, not only the same values.
        let order = |line: &str| {
            let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(line).unwrap();
            object.keys().cloned().collect::<Vec<_>>()
        };
        assert_eq!(order(first), order(theirs.lines().next().unwrap()));
    }

    #[test]
    fn timestamps_are_utc_with_microseconds() {
        let mut out = String::new();
        push_timestamp(&mut out, time::macros::datetime!(2026-01-02 03:04:05.000006 UTC));
        assert_eq!(out, "2026-01-02T03:04:05.000006Z");
        out.clear();
        push_timestamp(&mut out, time::macros::datetime!(1999-12-31 23:59:59.999999 UTC));
        assert_eq!(out, "1999-12-31T23:59:59.999999Z");
    }
}
