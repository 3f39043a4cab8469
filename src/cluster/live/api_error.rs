//! One reading of kube errors for live mode: what went wrong, in words that tell an operator what to
//! fix (RBAC, CRDs, connectivity), and whether retrying can help.

/// What an API call's failure means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    Forbidden,
    Unauthorized,
    NotFound,
    /// 410: a watch or list resourceVersion is too old; relist.
    Gone,
    /// 409 on update: someone else wrote first; read again.
    Conflict,
    /// 409 on create.
    AlreadyExists,
    /// No HTTP answer at all: connection refused, TLS, timeout.
    Unreachable,
    Other,
}

/// A failed API call, classified, with its one-line explanation.
#[derive(Debug, Clone)]
pub struct ApiFailure {
    pub kind: FailureKind,
    pub message: String,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Classify `err` from `verb` on `what` (e.g. `"list"`, `"sidecarsets.apps.kruise.io"`,
/// `Some("kruise-system")`).
pub fn classify(err: &kube::Error, verb: &str, resource: &str, namespace: Option<&str>) -> ApiFailure {
    let scope = namespace.map_or_else(|| "cluster-wide".to_owned(), |ns| format!("in namespace {ns:?}"));
    match err {
        kube::Error::Api(status) => {
            let detail = if status.message.is_empty() { status.reason.clone() } else { status.message.clone() };
            let (kind, message) = match (status.code, status.reason.as_str()) {
                (403, _) => (
                    FailureKind::Forbidden,
                    format!(
                        "forbidden: the API server does not allow {verb} on {resource} {scope} for this server's identity; \
                         grant it in the RBAC role (see manifests/rbac) ({detail})"
                    ),
                ),
                (401, _) => (
                    FailureKind::Unauthorized,
                    format!(
                        "unauthorized: the API server rejected this server's credentials; check --kubeconfig or the service account token ({detail})"
                    ),
                ),
                (404, _) => (FailureKind::NotFound, format!("{verb} {resource} {scope}: not found ({detail})")),
                (410, _) => (FailureKind::Gone, format!("{verb} {resource} {scope}: resource version expired ({detail})")),
                (409, "AlreadyExists") => (FailureKind::AlreadyExists, format!("{verb} {resource} {scope}: already exists ({detail})")),
                (409, _) => {
                    (FailureKind::Conflict, format!("{verb} {resource} {scope}: conflict, the object changed meanwhile ({detail})"))
                }
                (code, reason) => (FailureKind::Other, format!("{verb} {resource} {scope} failed: HTTP {code} {reason} ({detail})")),
            };
            ApiFailure { kind, message }
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::RustlsTls(_) | kube::Error::ReadEvents(_) => ApiFailure {
            kind: FailureKind::Unreachable,
            message: format!("cannot reach the API server to {verb} {resource} {scope}: {}", error_chain(err)),
        },
        other => ApiFailure { kind: FailureKind::Other, message: format!("{verb} {resource} {scope} failed: {}", error_chain(other)) },
    }
}

/// An error and its sources on one line ("connection refused" hides a few levels down).
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `sidecarsets.apps.kruise.io`, `pods` (core): how RBAC rules name a resource.
pub fn resource_name(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_owned() } else { format!("{plural}.{group}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure("denied by policy", reason).with_code(code)))
    }

    #[test]
    fn forbidden_names_the_verb_resource_and_scope() {
        let f = classify(&api_error(403, "Forbidden"), "list", "pods", Some("shop"));
        assert_eq!(f.kind, FailureKind::Forbidden);
        assert!(f.message.contains("list on pods in namespace \"shop\""), "{}", f.message);
        assert!(f.message.contains("RBAC"), "{}", f.message);
    }

    #[test]
    fn conflicts_and_already_exists_are_told_apart() {
        assert_eq!(classify(&api_error(409, "AlreadyExists"), "create", "secrets", Some("a")).kind, FailureKind::AlreadyExists);
        assert_eq!(classify(&api_error(409, "Conflict"), "update", "secrets", Some("a")).kind, FailureKind::Conflict);
        assert_eq!(classify(&api_error(410, "Expired"), "watch", "namespaces", None).kind, FailureKind::Gone);
        assert_eq!(classify(&api_error(500, "InternalError"), "get", "x", None).kind, FailureKind::Other);
    }
}
