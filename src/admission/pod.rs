//! `/mutate-pod`: every Pod mutation this binary makes, in a fixed order, on one copy-on-write
//! draft of the pod. The patch is computed once, afterwards, by the caller (see `webhooks::run`).

use super::draft::Draft;
use super::review::{AdmissionError, AdmissionRequest, Operation};
use super::{Inputs, daemon, injection};
use crate::api::tree::Json;

/// Mutate a Pod on CREATE. Subresource requests (`pods/binding`, `pods/status`, ...) and other
/// operations pass through unchanged. `pod` is the request's pod, not yet changed.
pub fn mutate<'a>(
    request: &AdmissionRequest,
    pod: &mut Draft<'a>,
    inputs: &Inputs<'a>,
) -> Result<Vec<String>, AdmissionError> {
    if !request.sub_resource.is_empty() || request.operation != Operation::Create {
        return Ok(Vec::new());
    }
    let Draft::Same(original) = *pod else {
        return Err(AdmissionError::Internal("pod mutations start from the request's pod, unchanged".into()));
    };
    check_is_pod(original)?;
    let mut warnings = Vec::new();
    injection::inject(request, original, pod, inputs, &mut warnings)?;
    daemon::stamp(pod, inputs, &mut warnings)?;
    Ok(warnings)
}

/// A Pod is an object whose `metadata` (if present) and `spec` are objects. Anything else cannot
/// have come from the apiserver and is refused with a message that says what is wrong.
fn check_is_pod(pod: &Json<'_>) -> Result<(), AdmissionError> {
    if let Some(kind) = pod.get("kind").and_then(Json::as_str)
        && kind != "Pod"
    {
        return Err(AdmissionError::BadRequest(format!("request.object is a {kind}, not a Pod")));
    }
    if pod.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(AdmissionError::BadRequest("request.object.metadata must be an object".into()));
    }
    match pod.get("spec") {
        Some(Json::Object(_)) => Ok(()),
        Some(_) => Err(AdmissionError::BadRequest("request.object.spec must be an object".into())),
        None => Err(AdmissionError::BadRequest("request.object is not a Pod: it has no spec".into())),
    }
}
