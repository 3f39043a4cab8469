//! SidecarSet admission: `/mutate-apps-kruise-io-sidecarset` (defaults, then the two hash
//! annotations the pod webhook copies) and `/validate-apps-kruise-io-sidecarset` (field rules and
//! conflicts with the other SidecarSets). Both work on the object as JSON so fields this binary does
//! not model are kept.

pub mod corev1;
pub mod defaults;
pub mod hash;
pub mod host_access;
pub mod selector;
pub mod stored;
pub mod validate;

use serde_json::{Map, Value};

use super::Inputs;
use super::draft::Draft;
use super::review::{AdmissionError, AdmissionRequest, Operation};
use crate::admission::writes::Effects;
use crate::api::field_errors;
use crate::api::json::object_entry;
use crate::api::sidecarset::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, NAMESPACE_NAME_LABEL, SidecarSet,
};
use crate::api::tree::Json;

/// The SidecarSet versions Kruise serves; anything else is refused like Kruise does (400).
pub const VERSIONS: &[&str] = &["v1alpha1", "v1beta1"];

fn check_version(request: &AdmissionRequest) -> Result<(), AdmissionError> {
    let version = request.resource.version.as_str();
    if VERSIONS.contains(&version) {
        Ok(())
    } else {
        Err(AdmissionError::BadRequest(format!("unsupported version: {version}")))
    }
}

/// Refuse what Kruise's decoder would refuse (400): not an object, or fields of the wrong type.
fn decode(object: &Value) -> Result<SidecarSet, AdmissionError> {
    if !object.is_object() {
        return Err(AdmissionError::BadRequest("the SidecarSet must be a JSON object".into()));
    }
    SidecarSet::from_value(object).map_err(AdmissionError::BadRequest)
}

/// `/mutate-apps-kruise-io-sidecarset`: the defaults of docs/sidecarset.md#9-1-defaulting, then the hash
/// annotations (docs/sidecarset.md#8-the-sidecarset-hash), on CREATE and UPDATE.
pub fn mutate(
    request: &AdmissionRequest,
    draft: &mut Draft<'_>,
    _inputs: &Inputs,
) -> Result<Effects, AdmissionError> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(Effects::default());
    }
    // A SidecarSet is small and its defaulting (written against `Value`) touches it all over: one
    // `Value` copy to change in place, which becomes the draft once done.
    let mut object = draft.to_mut().take().into_value();
    check_version(request)?;
    decode(&object)?;
    defaults::apply(&mut object);
    if request.resource.version == "v1alpha1" {
        namespace_to_selector(&mut object);
    }
    let empty = Value::Object(Map::new());
    let spec = object.get("spec").unwrap_or(&empty);
    let (hash, without_image) = hash::sidecarset_hashes(spec)
        .map_err(|e| AdmissionError::BadRequest(format!("the SidecarSet cannot be decoded: {e}")))?;
    let annotations = object
        .as_object_mut()
        .and_then(|o| object_entry(o, "metadata"))
        .and_then(|m| object_entry(m, "annotations"))
        .ok_or_else(|| {
            AdmissionError::BadRequest("metadata.annotations of the SidecarSet must be an object".into())
        })?;
    annotations.insert(HASH_ANNOTATION.into(), Value::String(hash));
    annotations.insert(HASH_WITHOUT_IMAGE_ANNOTATION.into(), Value::String(without_image));
    *draft = Draft::New(Json::from(object));
    Ok(Effects::default())
}

/// The v1alpha1→v1beta1 conversion of `spec.namespace` (docs/sidecarset.md#2-which-sidecarsets-match), done
/// at admission because the CRD has no conversion webhook: a non-empty `spec.namespace` becomes (and
/// replaces) the namespaceSelector `kubernetes.io/metadata.name: <namespace>`, so the object keeps its
/// meaning when it is stored or read as v1beta1 (whose schema has no `namespace`).
fn namespace_to_selector(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let Some(namespace) =
        spec.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_owned)
    else {
        return;
    };
    let selector = serde_json::json!({"matchLabels": {NAMESPACE_NAME_LABEL: namespace}});
    spec.insert("namespaceSelector".into(), selector);
}

/// `/validate-apps-kruise-io-sidecarset`: field rules, then conflicts with the other SidecarSets.
/// Denials carry code 500, as Kruise's handler reports validation failures through its
/// internal-error path (docs/sidecarset.md#9-6-response-codes); undecodable objects get 400.
pub fn validate(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
    validate_with(request, inputs, true).map(Effects::from)
}

/// A SidecarSet of a cluster folder, at load: what [`validate`] refuses but conflicts with the
/// other SidecarSets. A folder cannot say which of a conflicting pair was written first (Kruise
/// refuses the later one), so `validate::folder_conflicts` reports each pair from both sides.
pub fn validate_in_folder(
    request: &AdmissionRequest,
    inputs: &Inputs,
) -> Result<Vec<String>, AdmissionError> {
    validate_with(request, inputs, false)
}

fn validate_with(
    request: &AdmissionRequest,
    inputs: &Inputs,
    conflicts: bool,
) -> Result<Vec<String>, AdmissionError> {
    if !matches!(request.operation, Operation::Create | Operation::Update) {
        return Ok(Vec::new());
    }
    check_version(request)?;
    let object = request
        .object
        .as_ref()
        .ok_or_else(|| AdmissionError::BadRequest("request.object is required".into()))?;
    let set = decode(&object.to_value())?;
    let old = match request.operation {
        Operation::Update => {
            let old = request.old_object.as_ref().ok_or_else(|| {
                AdmissionError::BadRequest("request.oldObject is required for UPDATE".into())
            })?;
            Some(decode(&old.to_value())?)
        }
        _ => None,
    };
    let ctx = validate::Context { old: old.as_ref(), inputs, conflicts };
    if let Some(message) = field_errors::aggregate(&validate::errors(&set, &ctx)) {
        return Err(AdmissionError::Internal(message));
    }
    let found: Vec<String> = host_access::findings(&set).iter().map(|f| host_access::describe(f)).collect();
    match inputs.settings.sidecarset_policy {
        host_access::Policy::Deny if !found.is_empty() => Err(AdmissionError::Forbidden(format!(
            "denied by --sidecarset-policy deny: {}",
            found.join("; ")
        ))),
        _ => Ok(found),
    }
}
