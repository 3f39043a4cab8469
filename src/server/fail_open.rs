//! States in which the server lets through what it would otherwise check (issue 30.5). Each is
//! said once at start, loudly, in the same way: a WARN with a `fail_open` field naming the state,
//! and a gauge at 1, so a log search and an alert find every one of them.

use super::metrics::Metrics;
use crate::admission::webhooks::Capability;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOpen {
    /// No `--client-ca-file`: any caller that reaches the port is served.
    ClientAuthOff,
    /// `--disable-capability`: its webhooks allow everything unchanged.
    CapabilityDisabled(Capability),
    /// Folder mode: lookups are answered from the folder, not the API server.
    FolderLookups,
    /// `--shadow`: nothing is enforced.
    Shadow,
}

impl FailOpen {
    /// The `fail_open` field of its WARN.
    pub fn name(self) -> &'static str {
        match self {
            FailOpen::ClientAuthOff => "client-auth-off",
            FailOpen::CapabilityDisabled(_) => "capability-disabled",
            FailOpen::FolderLookups => "folder-lookups",
            FailOpen::Shadow => "shadow",
        }
    }

    /// Set its gauge to 1.
    pub fn record(self, metrics: &Metrics) {
        match self {
            FailOpen::ClientAuthOff => metrics.client_auth_disabled.set(1),
            FailOpen::CapabilityDisabled(c) => {
                metrics.capability_disabled.with_label_values(&[c.name()]).set(1)
            }
            FailOpen::FolderLookups => {
                metrics.lookup_source.with_label_values(&[super::LOOKUPS_FROM_FOLDER]).set(1);
            }
            FailOpen::Shadow => metrics.shadow_mode.set(1),
        }
    }
}

/// `announce_fail_open!(metrics, state, fields..., message)`: [`FailOpen::record`] and a WARN with
/// `fail_open = state.name()` besides the state's own fields. A macro because each state's line
/// keeps fields of its own (tracing's field lists are fixed where the event is written).
macro_rules! announce_fail_open {
    ($metrics:expr, $state:expr, $($rest:tt)+) => {{
        let state: $crate::server::fail_open::FailOpen = $state;
        state.record($metrics);
        tracing::warn!(fail_open = state.name(), $($rest)+);
    }};
}
pub(crate) use announce_fail_open;
