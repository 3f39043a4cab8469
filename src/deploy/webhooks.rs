//! The MutatingWebhookConfiguration and ValidatingWebhookConfiguration for every entry of
//! [`WEBHOOKS`], and the same entries as the data table the Helm chart renders from.
//!
//! Choices every entry shares, and why:
//! - `timeoutSeconds` 2 (mutating) / 3 (validating): the server answers in microseconds; a short
//!   timeout bounds how long a down or overloaded webhook can stall a pod create.
//! - `matchPolicy: Equivalent`: a request through another version of the same resource (e.g.
//!   `apps.kruise.io/v1beta1` when only v1alpha1 is listed) is still sent, converted.
//! - `reinvocationPolicy: IfNeeded` on mutating entries: injection is idempotent, and another
//!   webhook that adds containers after us gets its containers seen.
//! - `namespaceSelector` excludes `kube-system` and the server's own namespace, so the server can
//!   always restart itself and the control plane is never blocked by it.
//!
//! [`Registration::Shadow`] (`manifests webhooks --shadow`, for `serve --shadow` next to
//! kruise-manager) differs only where installing beside Kruise's own configurations needs it:
//! - both configurations are named [`SHADOW_NAME`] and every entry `<name>.shadow.kruise-admission.dev`
//!   (`mpod.shadow.kruise-admission.dev`), so nothing collides with Kruise's `*.kb.io` entries and
//!   the API server's metrics and messages tell the two apart;
//! - `failurePolicy: Ignore` everywhere: a shadow that is down, slow or wrong never blocks a request;
//! - `timeoutSeconds` [`SHADOW_TIMEOUT_SECONDS`]: the most a shadow call can add to a request it
//!   only watches; the server's internal deadline (10% earlier) answers well within it;
//! - mutating entries keep `reinvocationPolicy: IfNeeded`: `kruise-admission-shadow` sorts before
//!   `kruise-mutating-webhook-configuration`, so the API server calls the shadow first with the
//!   Pod as created and again with the Pod as kruise-manager mutated it.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{CAPABILITIES, NAME, Target, capability_values_key, labels};
use crate::admission::webhooks::{FailurePolicy, ObjectScope, WEBHOOKS, Webhook, WebhookKind};

/// The label the protection-only entries select on (`policy.kruise.io/delete-protection`).
pub const DELETE_PROTECTION_LABEL: &str = "policy.kruise.io/delete-protection";
pub const MUTATING_TIMEOUT_SECONDS: u64 = 2;
pub const VALIDATING_TIMEOUT_SECONDS: u64 = 3;
/// Every entry of the shadow configurations: short, since a shadow only watches (see above).
pub const SHADOW_TIMEOUT_SECONDS: u64 = 2;
/// The name of both shadow webhook configurations.
pub const SHADOW_NAME: &str = "kruise-admission-shadow";
/// The suffix of every shadow entry's name, in place of Kruise's `.kb.io`.
pub const SHADOW_ENTRY_SUFFIX: &str = ".shadow.kruise-admission.dev";

/// Which webhook configurations to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// The server decides and enforces (`serve`).
    Enforcing,
    /// Installed next to kruise-manager's for `serve --shadow`: own names, `Ignore`, short timeouts.
    Shadow,
}

impl Registration {
    /// The name of both configurations.
    pub fn configuration_name(self) -> &'static str {
        match self {
            Registration::Enforcing => NAME,
            Registration::Shadow => SHADOW_NAME,
        }
    }

    /// The entry name `webhook` is registered under.
    pub fn entry_name(self, webhook: &Webhook) -> String {
        match self {
            Registration::Enforcing => webhook.name.to_owned(),
            Registration::Shadow => shadow_entry_name(webhook.name),
        }
    }
}

/// `mpod.kb.io` -> `mpod.shadow.kruise-admission.dev`.
pub fn shadow_entry_name(name: &str) -> String {
    format!("{}{SHADOW_ENTRY_SUFFIX}", name.strip_suffix(".kb.io").unwrap_or(name))
}
/// The port the Service exposes (it forwards to the server's 9443).
pub const SERVICE_PORT: u16 = 443;

/// Both configurations, mutating first. Entries keep table order; a kind without entries still
/// gets its (empty) configuration so `kubectl apply --prune` removes stale ones.
pub fn configurations(target: &Target) -> [Value; 2] {
    registered(target, Registration::Enforcing)
}

/// [`configurations`] for a registration.
pub fn registered(target: &Target, registration: Registration) -> [Value; 2] {
    [
        configuration(WebhookKind::Mutating, target, registration),
        configuration(WebhookKind::Validating, target, registration),
    ]
}

fn configuration(kind: WebhookKind, target: &Target, registration: Registration) -> Value {
    let entries: Vec<Value> =
        WEBHOOKS.iter().filter(|w| w.kind() == kind).map(|w| entry(w, target, registration)).collect();
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind_name(kind),
        "metadata": { "name": registration.configuration_name(), "labels": labels() },
        "webhooks": entries,
    })
}

pub fn kind_name(kind: WebhookKind) -> &'static str {
    match kind {
        WebhookKind::Mutating => "MutatingWebhookConfiguration",
        WebhookKind::Validating => "ValidatingWebhookConfiguration",
    }
}

fn failure_policy(policy: FailurePolicy) -> &'static str {
    match policy {
        FailurePolicy::Ignore => "Ignore",
        FailurePolicy::Fail => "Fail",
    }
}

/// One `webhooks[]` entry.
pub fn entry(webhook: &Webhook, target: &Target, registration: Registration) -> Value {
    let mut entry = Map::new();
    entry.insert("name".into(), json!(registration.entry_name(webhook)));
    entry.insert("admissionReviewVersions".into(), json!(["v1", "v1beta1"]));
    let mut client_config = json!({ "service": { "namespace": target.namespace, "name": target.service, "path": webhook.path, "port": SERVICE_PORT } });
    if let Some(ca) = &target.ca_bundle {
        client_config["caBundle"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
    }
    entry.insert("clientConfig".into(), client_config);
    let policy = match registration {
        Registration::Enforcing => webhook.failure_policy,
        Registration::Shadow => FailurePolicy::Ignore,
    };
    entry.insert("failurePolicy".into(), json!(failure_policy(policy)));
    entry.insert("matchPolicy".into(), json!("Equivalent"));
    entry.insert(
        "namespaceSelector".into(),
        json!({ "matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": excluded_namespaces(target),
        }] }),
    );
    if let Some(selector) = object_selector(webhook.scope) {
        entry.insert("objectSelector".into(), selector);
    }
    if webhook.kind() == WebhookKind::Mutating {
        entry.insert("reinvocationPolicy".into(), json!("IfNeeded"));
    }
    entry.insert("rules".into(), rules(webhook));
    entry.insert("sideEffects".into(), json!(webhook.side_effects.as_str()));
    let timeout = match (registration, webhook.kind()) {
        (Registration::Shadow, _) => SHADOW_TIMEOUT_SECONDS,
        (Registration::Enforcing, WebhookKind::Mutating) => MUTATING_TIMEOUT_SECONDS,
        (Registration::Enforcing, WebhookKind::Validating) => VALIDATING_TIMEOUT_SECONDS,
    };
    entry.insert("timeoutSeconds".into(), json!(timeout));
    Value::Object(entry)
}

/// `kube-system` and the server's own namespace (once, if they are the same).
fn excluded_namespaces(target: &Target) -> Vec<&str> {
    let mut namespaces = vec!["kube-system"];
    if target.namespace != "kube-system" {
        namespaces.push(&target.namespace);
    }
    namespaces
}

fn object_selector(scope: ObjectScope) -> Option<Value> {
    match scope {
        ObjectScope::All => None,
        ObjectScope::DeleteProtected => {
            Some(json!({ "matchExpressions": [{ "key": DELETE_PROTECTION_LABEL, "operator": "Exists" }] }))
        }
    }
}

fn rules(webhook: &Webhook) -> Value {
    webhook
        .rules
        .iter()
        .map(|rule| {
            json!({
                "apiGroups": rule.groups,
                "apiVersions": rule.versions,
                "operations": rule.operations.iter().map(|op| op.as_str()).collect::<Vec<_>>(),
                "resources": rule.resources,
                "scope": "*",
            })
        })
        .collect()
}

/// The table the Helm chart renders its webhook entries from (`files/webhooks.json`): the same
/// facts as [`configurations`], minus what the chart fills in from values (namespace, Service,
/// extra namespace exclusions, failure-policy overrides, disabled capabilities).
pub fn chart_table() -> Value {
    let entries: Vec<Value> = WEBHOOKS
        .iter()
        .map(|w| {
            json!({
                "name": w.name,
                "shadowName": shadow_entry_name(w.name),
                "path": w.path,
                "mutating": w.kind() == WebhookKind::Mutating,
                "capability": capability_values_key(w.capability),
                "failurePolicy": failure_policy(w.failure_policy),
                "objectSelector": object_selector(w.scope),
                "rules": rules(w),
                "sideEffects": w.side_effects.as_str(),
            })
        })
        .collect();
    let capabilities: Vec<Value> = CAPABILITIES
        .iter()
        .map(|&c| json!({ "valuesKey": capability_values_key(c), "flag": c.name() }))
        .collect();
    json!({
        "generatedBy": "kruise-admission manifests chart-table",
        "capabilities": capabilities,
        "mutatingTimeoutSeconds": MUTATING_TIMEOUT_SECONDS,
        "validatingTimeoutSeconds": VALIDATING_TIMEOUT_SECONDS,
        "shadowTimeoutSeconds": SHADOW_TIMEOUT_SECONDS,
        "webhooks": entries,
    })
}
