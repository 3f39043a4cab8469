//! `serve`'s connection flags: how many connections, from whom, for how long.

use std::time::Duration;

use clap::builder::TypedValueParser as _;

// The duration defaults are written out for `--help`; a test checks they equal the library's.
use crate::server::listener::{ConnLimits, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_PEER};

#[derive(Debug, Clone, clap::Args)]
pub struct ConnectionArgs {
    /// Most open HTTPS connections (TLS handshakes included); further connections are closed at
    /// once and counted as `kruise_admission_http_errors_total{reason="connection_limit"}`.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Most open HTTPS connections from one source IP address; further ones are closed at once and
    /// counted as `kruise_admission_http_errors_total{reason="peer_connection_limit"}`.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS_PER_PEER, value_parser = clap::value_parser!(u32).range(1..).map(|n| n as usize))]
    pub max_connections_per_peer: usize,
    /// Close a connection (gracefully: HTTP/2 GOAWAY) that has had no request in flight this long
    /// (Go duration). Idle HTTP/1.1 connections close after 10 s regardless.
    #[arg(long, default_value = "2m", value_parser = parse_positive_duration)]
    pub connection_idle_timeout: Duration,
    /// Close every connection after about this long (up to a tenth less, spread per connection),
    /// gracefully: HTTP/2 GOAWAY, HTTP/1.1 `Connection: close`. Clients reconnect and so spread
    /// over new replicas after a rollout or scale-up.
    #[arg(long, default_value = "10m", value_parser = parse_positive_duration)]
    pub max_connection_age: Duration,
    /// How long a connection being closed for idleness or age may finish its requests in flight
    /// before it is dropped.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
    pub max_connection_age_grace: Duration,
    /// Drop a connection whose answers have not been taken for this long (the client does not
    /// read): what they hold is freed at once instead of after the idle timeout.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub send_timeout: Duration,
}

fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    crate::server::deadline::parse_go_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a positive duration such as 30s, 2m or 1h"))
}

impl ConnectionArgs {
    pub fn apply(&self, limits: &mut ConnLimits) {
        limits.max_connections = self.max_connections;
        limits.max_connections_per_peer = self.max_connections_per_peer;
        limits.idle_timeout = self.connection_idle_timeout;
        limits.max_connection_age = self.max_connection_age;
        limits.close_grace = self.max_connection_age_grace;
        limits.send_timeout = self.send_timeout;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConnectionArgs,
    }

    #[test]
    fn defaults_are_the_library_defaults_and_flags_apply() {
        let mut limits = ConnLimits::default();
        Cli::parse_from(["x"]).args.apply(&mut limits);
        let defaults = ConnLimits::default();
        assert_eq!(
            (
                limits.max_connections,
                limits.max_connections_per_peer,
                limits.idle_timeout,
                limits.max_connection_age,
                limits.close_grace,
                limits.send_timeout
            ),
            (
                defaults.max_connections,
                defaults.max_connections_per_peer,
                defaults.idle_timeout,
                defaults.max_connection_age,
                defaults.close_grace,
                defaults.send_timeout
            )
        );
        let args = [
            "x",
            "--max-connections-per-peer",
            "8",
            "--connection-idle-timeout",
            "30s",
            "--max-connection-age",
            "1h",
        ];
        Cli::parse_from(args).args.apply(&mut limits);
        assert_eq!((limits.max_connections_per_peer, limits.idle_timeout), (8, Duration::from_secs(30)));
        assert_eq!(limits.max_connection_age, Duration::from_secs(3600));
        assert!(Cli::try_parse_from(["x", "--max-connection-age", "0s"]).is_err());
        assert!(Cli::try_parse_from(["x", "--max-connections-per-peer", "0"]).is_err());
    }
}
