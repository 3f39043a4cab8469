//! The internal deadline of one review. The apiserver appends `?timeout=<Go duration>` (the
//! webhook's `timeoutSeconds`, 10s by default) and gives up on the call after that long. We stop a
//! little earlier and answer HTTP 504 ourselves, so the apiserver applies the webhook's
//! `failurePolicy` exactly as it would for its own timeout, but with an answer in the log instead
//! of a dropped connection.

use std::time::Duration;

/// The apiserver's default `timeoutSeconds` for admissionregistration.k8s.io/v1.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The apiserver's largest `timeoutSeconds`. A `?timeout=` above it did not come from an apiserver;
/// it is capped so that a client cannot hold a request (and its connection) open for hours by
/// trickling the body under a huge deadline.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);

/// The room left for the answer to travel back: 10% of the timeout, at least 100 ms.
fn margin(timeout: Duration) -> Duration {
    (timeout / 10).max(Duration::from_millis(100))
}

/// The deadline for a request with this query string.
pub fn from_query(query: Option<&str>) -> Duration {
    let timeout = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(parse_go_duration)
        .filter(|d| !d.is_zero())
        .unwrap_or(DEFAULT_TIMEOUT)
        .min(MAX_TIMEOUT);
    timeout.saturating_sub(margin(timeout)).max(Duration::from_millis(1))
}

/// Go's `time.Duration` text (`10s`, `1m30s`, `1.5s`, `250ms`), as the apiserver writes it.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..number_len].parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_apiserver_sends() {
        assert_eq!(parse_go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("1m0s"), Some(Duration::from_secs(60)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        for bad in ["", "10", "s", "10x", "-1s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn deadline_is_a_little_below_the_timeout() {
        assert_eq!(from_query(Some("timeout=10s")), Duration::from_secs(9));
        assert_eq!(from_query(Some("x=1&timeout=30s")), Duration::from_secs(27));
        assert_eq!(from_query(Some("timeout=1s")), Duration::from_millis(900));
        assert_eq!(from_query(Some("timeout=500ms")), Duration::from_millis(400));
        assert_eq!(from_query(None), Duration::from_secs(9));
        assert_eq!(from_query(Some("timeout=garbage")), Duration::from_secs(9));
        assert_eq!(
            from_query(Some("timeout=1000h")),
            Duration::from_secs(27),
            "capped at the apiserver's 30 s maximum"
        );
    }
}
