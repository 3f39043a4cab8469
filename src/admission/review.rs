//! The AdmissionReview protocol: decoding a review (v1 or v1beta1) into an [`AdmissionRequest`],
//! and turning a [`Decision`] or an [`AdmissionError`] into the response the apiserver expects.
//!
//! This is the one place where errors become responses (code + message), so every edge (`serve`,
//! `dry-run`) answers the same way. Objects are kept as JSON trees ([`Json`]) so that fields this
//! binary does not know survive untouched into patches and outputs; decoded from a body, their
//! strings stay borrowed from it (issue 17.1).
//!
//! `serve` decodes straight from the body with [`decode_review_body`], which never builds the parts
//! of a review no decision reads (unknown fields, and the object the operation leaves empty);
//! [`review_cost`] tells beforehand how much memory the rest will take.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};

use super::patch::{self, PatchOp};
use super::writes::StatusWrite;
use crate::api::tree::{self, Json, Object};

/// The two AdmissionReview versions the apiserver may send. The response uses the request's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1Beta1,
}

impl ReviewVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }

    /// Whether a decision can read `object` (`new`) or `oldObject` (`!new`) for this operation:
    /// the apiserver sends `object: null` on DELETE and no `oldObject` on CREATE and CONNECT, so
    /// whatever a client puts there is dropped (after its type is checked) rather than decoded.
    pub fn carries(self, new: bool) -> bool {
        match self {
            Operation::Create | Operation::Connect => new,
            Operation::Update => true,
            Operation::Delete => !new,
        }
    }

    /// The apiserver always sends upper case. Some hand-written reviews (see the recorded
    /// `pepr-pod-create-operation-mixedcase.json`) use `Create`; we accept any case and say so in a
    /// warning rather than refusing a review whose meaning is clear.
    pub(crate) fn parse(s: &str) -> Option<(Operation, bool)> {
        let op = match s.to_ascii_uppercase().as_str() {
            "CREATE" => Operation::Create,
            "UPDATE" => Operation::Update,
            "DELETE" => Operation::Delete,
            "CONNECT" => Operation::Connect,
            _ => return None,
        };
        Some((op, op.as_str() != s))
    }
}

/// group/version/kind or group/version/resource, as the review carries them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gvr {
    pub group: String,
    pub version: String,
    pub resource: String,
}

/// One admission request, decoded. Objects stay as JSON trees, borrowing from the body they were
/// decoded from (`'a`; `'static` when decoded from a `Value`).
#[derive(Debug, Clone)]
pub struct AdmissionRequest<'a> {
    pub version: ReviewVersion,
    pub uid: String,
    pub kind: Gvk,
    pub resource: Gvr,
    /// Empty when the request is for the main resource.
    pub sub_resource: String,
    pub name: String,
    pub namespace: String,
    pub operation: Operation,
    /// `None` when absent or `null` (DELETE). An empty object `{}` counts as absent too: real
    /// reviews carry `oldObject: {}` on CREATE.
    pub object: Option<Json<'a>>,
    pub old_object: Option<Json<'a>>,
    pub dry_run: bool,
    /// Warnings about the review itself (e.g. a non-canonical operation spelling).
    pub decode_warnings: Vec<String>,
}

impl<'a> AdmissionRequest<'a> {
    /// The object a decision should look at: `object`, or `oldObject` on DELETE.
    pub fn subject(&self) -> Option<&Json<'a>> {
        match self.operation {
            Operation::Delete => self.old_object.as_ref(),
            _ => self.object.as_ref(),
        }
    }

    /// The same request, owning its objects (no longer tied to the body they were decoded from).
    pub fn into_owned(self) -> AdmissionRequest<'static> {
        AdmissionRequest {
            object: self.object.map(Json::into_owned),
            old_object: self.old_object.map(Json::into_owned),
            version: self.version,
            uid: self.uid,
            kind: self.kind,
            resource: self.resource,
            sub_resource: self.sub_resource,
            name: self.name,
            namespace: self.namespace,
            operation: self.operation,
            dry_run: self.dry_run,
            decode_warnings: self.decode_warnings,
        }
    }

    /// `namespace/name` for logs; the object's own name when the request has none (generateName).
    pub fn display_name(&self) -> String {
        let name = if self.name.is_empty() {
            self.subject()
                .and_then(|o| o.at(&["metadata", "generateName"]))
                .and_then(Json::as_str)
                .map(|g| format!("{g}*"))
                .unwrap_or_default()
        } else {
            self.name.clone()
        };
        if self.namespace.is_empty() { name } else { format!("{}/{}", self.namespace, name) }
    }
}

/// Why a review could not be decoded. Rendered as HTTP 400 when even the uid is unknown, otherwise
/// as a denial with code 400 inside a well-formed AdmissionReview.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct DecodeError {
    pub message: String,
    /// Present when the envelope was good enough to answer inside an AdmissionReview.
    pub answerable: Option<(ReviewVersion, String)>,
}

impl DecodeError {
    fn envelope(message: impl Into<String>) -> Self {
        DecodeError { message: message.into(), answerable: None }
    }
}

/// Errors a decision can end in. One mapping (here) turns each into a status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdmissionError {
    /// The request or its object cannot be understood (HTTP semantics: 400).
    #[error("{0}")]
    BadRequest(String),
    /// Delete protection and similar policy refusals (403).
    #[error("{0}")]
    Forbidden(String),
    /// The object is invalid (422).
    #[error("{0}")]
    Invalid(String),
    /// Kruise answers 500 for failures inside the pod and SidecarSet handlers (a missing revision,
    /// an unparsable annotation, a failed lookup); we keep that code so clients see the same thing.
    #[error("{0}")]
    Internal(String),
}

impl AdmissionError {
    pub fn code(&self) -> u16 {
        match self {
            AdmissionError::BadRequest(_) => 400,
            AdmissionError::Forbidden(_) => 403,
            AdmissionError::Invalid(_) => 422,
            AdmissionError::Internal(_) => 500,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            AdmissionError::BadRequest(_) => "BadRequest",
            AdmissionError::Forbidden(_) => "Forbidden",
            AdmissionError::Invalid(_) => "Invalid",
            AdmissionError::Internal(_) => "InternalError",
        }
    }
}

/// What a webhook decided for one request. The patch's values may borrow (`'a`) from the request
/// and the snapshot it was decided on ([`PatchOp`]); [`Decision::into_owned`] keeps it past them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision<'a> {
    pub allowed: bool,
    /// Set on denials.
    pub status: Option<Status>,
    pub patch: Vec<PatchOp<'a>>,
    pub warnings: Vec<String>,
    /// The status writes the decision intends ([`super::writes`]); made only when it allows.
    pub writes: Vec<StatusWrite>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
}

impl<'a> Decision<'a> {
    pub fn allow() -> Self {
        Decision { allowed: true, ..Default::default() }
    }

    pub fn deny(err: &AdmissionError) -> Self {
        Decision {
            allowed: false,
            status: Some(Status { code: err.code(), reason: err.reason(), message: err.to_string() }),
            ..Default::default()
        }
    }

    pub fn from_result(result: Result<Decision<'a>, AdmissionError>) -> Self {
        result.unwrap_or_else(|e| Decision::deny(&e))
    }

    /// The decision with its patch's borrowed strings copied.
    pub fn into_owned(self) -> Decision<'static> {
        let Decision { allowed, status, patch, warnings, writes } = self;
        Decision {
            allowed,
            status,
            patch: patch.into_iter().map(PatchOp::into_owned).collect(),
            warnings,
            writes,
        }
    }
}

/// The longest identity field accepted (`uid`, `name`, `namespace`, `subResource`, `operation`,
/// and the group, version and kind or resource of `kind` and `resource`). Names are DNS subdomains
/// (at most 253 bytes) or shorter, a uid is a 36-byte UUID, a group is a DNS subdomain: nothing the
/// API server sends is longer. Bounding them keeps a caller from making an answer (which echoes the
/// uid) or a log line carry megabytes (issue 30.3).
pub const MAX_IDENTITY_BYTES: usize = 253;

/// The longest text an answer echoes per message: a denial's message, each warning. Go's
/// apiserver itself truncates warnings it relays; ours are sentences, far below this.
pub const MAX_ECHOED_BYTES: usize = 4096;

/// Warnings an answer carries at most; the rest are counted in one last warning.
pub const MAX_WARNINGS: usize = 32;

/// Why an identity field is refused, without echoing it.
fn oversized(key: &str, len: usize) -> String {
    format!(
        "request.{key} is {len} bytes, longer than the {MAX_IDENTITY_BYTES} bytes any identity field the API server sends can be"
    )
}

fn str_field(map: &Object<'_>, key: &str) -> Result<String, String> {
    match map.get(key) {
        None | Some(Json::Null) => Ok(String::new()),
        Some(Json::String(s)) if s.len() > MAX_IDENTITY_BYTES => Err(oversized(key, s.len())),
        Some(Json::String(s)) => Ok(s.to_string()),
        Some(other) => Err(format!("request.{key} must be a string, got {}", type_name(other))),
    }
}

/// `text` cut to at most [`MAX_ECHOED_BYTES`] (on a character boundary), saying how much was cut.
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_ECHOED_BYTES {
        return text.into();
    }
    let note_room = 64;
    let mut end = MAX_ECHOED_BYTES - note_room;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} more bytes cut)", &text[..end], text.len() - end).into()
}

/// The warnings an answer carries: each [`bounded`], at most [`MAX_WARNINGS`] of them.
fn bounded_warnings(warnings: &[String]) -> Vec<std::borrow::Cow<'_, str>> {
    let mut kept: Vec<_> = warnings.iter().take(MAX_WARNINGS).map(|w| bounded(w)).collect();
    if warnings.len() > MAX_WARNINGS {
        kept.pop();
        kept.push(format!("... and {} more warnings", warnings.len() - MAX_WARNINGS + 1).into());
    }
    kept
}

fn type_name(v: &Json<'_>) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

fn gv_field(map: &Object<'_>, key: &str, last: &str) -> Result<[String; 3], String> {
    let Some(v) = map.get(key) else { return Ok(Default::default()) };
    if v.is_null() {
        return Ok(Default::default());
    }
    let Some(obj) = v.as_object() else {
        return Err(format!("request.{key} must be an object, got {}", type_name(v)));
    };
    let get = |k: &str| str_field(obj, k).map_err(|e| e.replace("request.", &format!("request.{key}.")));
    Ok([get("group")?, get("version")?, get(last)?])
}

/// Moves `key` out of the request: objects are the bulk of a review and are never copied.
/// `request.object` or `request.oldObject`: absent, null and `{}` are all absent; anything but an
/// object is an error. `decoded` is the part as [`decode_review_body`] built it, when it did; else
/// the value in `request` (a placeholder of the right type when the body's part was not built).
fn take_object<'a>(
    request: &mut Object<'a>,
    decoded: Option<Json<'a>>,
    key: &str,
) -> Result<Option<Json<'a>>, String> {
    match decoded.or_else(|| request.remove(key)) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::Object(o)) if o.is_empty() => Ok(None),
        Some(v @ Json::Object(_)) => Ok(Some(v)),
        Some(other) => Err(format!("request.{key} must be an object, got {}", type_name(&other))),
    }
}

/// Decode an AdmissionReview from its JSON value, through the same visitors as
/// [`decode_review_body`] (a `Value` deserializes itself; its strings are moved, not borrowed).
pub fn decode_review(review: Value) -> Result<AdmissionRequest<'static>, DecodeError> {
    let mut decoded = Decoded::default();
    let envelope = Fields { level: Level::Top, parts: Parts::ALL, decoded: &mut decoded }
        .deserialize(review)
        .map_err(|e| DecodeError::envelope(e.to_string()))?;
    decode_envelope(envelope, decoded)
}

/// `object` and `oldObject` as [`decode_review_body`] decoded them, kept out of the envelope.
#[derive(Default)]
struct Decoded<'a> {
    object: Option<Json<'a>>,
    old_object: Option<Json<'a>>,
}

fn decode_envelope<'a>(review: Json<'a>, parts: Decoded<'a>) -> Result<AdmissionRequest<'a>, DecodeError> {
    let (version, mut request) = envelope(review)?;
    let uid = request_uid(&request)?;
    // From here on the envelope is good enough to answer inside an AdmissionReview.
    let fail = |message: String| DecodeError { message, answerable: Some((version, uid.clone())) };
    let [kg, kv, kk] = gv_field(&request, "kind", "kind").map_err(fail)?;
    let [rg, rv, rr] = gv_field(&request, "resource", "resource").map_err(fail)?;
    let mut decode_warnings = Vec::new();
    let operation = operation(&request, &mut decode_warnings).map_err(fail)?;
    let dry_run = match request.get("dryRun") {
        None | Some(Json::Null) => false,
        Some(Json::Bool(b)) => *b,
        Some(other) => {
            return Err(fail(format!("request.dryRun must be a boolean, got {}", type_name(other))));
        }
    };
    // No decision reads who asked; only its type is checked (the decoder kept nothing else).
    if let Some(other) = request.get("userInfo").filter(|v| !matches!(v, Json::Null | Json::Object(_))) {
        return Err(fail(format!("request.userInfo must be an object, got {}", type_name(other))));
    }
    let object =
        take_object(&mut request, parts.object, "object").map_err(fail)?.filter(|_| operation.carries(true));
    let old_object = take_object(&mut request, parts.old_object, "oldObject")
        .map_err(fail)?
        .filter(|_| operation.carries(false));
    Ok(AdmissionRequest {
        version,
        uid: uid.clone(),
        kind: Gvk { group: kg, version: kv, kind: kk },
        resource: Gvr { group: rg, version: rv, resource: rr },
        sub_resource: str_field(&request, "subResource").map_err(fail)?,
        name: str_field(&request, "name").map_err(fail)?,
        namespace: str_field(&request, "namespace").map_err(fail)?,
        operation,
        object,
        old_object,
        dry_run,
        decode_warnings,
    })
}

/// The review's version and its `request`, once `apiVersion` and `kind` say it is an
/// AdmissionReview. Errors here cannot be answered inside a review (no version or uid yet).
fn envelope(review: Json<'_>) -> Result<(ReviewVersion, Object<'_>), DecodeError> {
    let Json::Object(mut top) = review else {
        return Err(DecodeError::envelope(format!(
            "an AdmissionReview must be a JSON object, got {}",
            type_name(&review)
        )));
    };
    let version = match top.get("apiVersion").and_then(Json::as_str) {
        Some("admission.k8s.io/v1") => ReviewVersion::V1,
        Some("admission.k8s.io/v1beta1") => ReviewVersion::V1Beta1,
        Some(other) => {
            return Err(DecodeError::envelope(format!(
                "unsupported apiVersion {other:?}: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1"
            )));
        }
        None => {
            return Err(DecodeError::envelope(
                "apiVersion is missing: expected admission.k8s.io/v1 or admission.k8s.io/v1beta1",
            ));
        }
    };
    match top.get("kind").and_then(Json::as_str) {
        Some("AdmissionReview") => {}
        Some(other) => {
            return Err(DecodeError::envelope(format!("kind must be AdmissionReview, got {other:?}")));
        }
        None => return Err(DecodeError::envelope("kind is missing: expected AdmissionReview")),
    }
    match top.remove("request") {
        Some(Json::Object(r)) => Ok((version, r)),
        Some(Json::Null) | None => Err(DecodeError::envelope("the AdmissionReview has no request")),
        Some(other) => {
            Err(DecodeError::envelope(format!("request must be an object, got {}", type_name(&other))))
        }
    }
}

/// `request.uid`: without it no answer can be matched to the request.
fn request_uid(request: &Object<'_>) -> Result<String, DecodeError> {
    match request.get("uid") {
        // Not answerable: the answer would have to echo it.
        Some(Json::String(s)) if s.len() > MAX_IDENTITY_BYTES => {
            Err(DecodeError::envelope(oversized("uid", s.len())))
        }
        Some(Json::String(s)) if !s.is_empty() => Ok(s.to_string()),
        Some(Json::String(_)) | None | Some(Json::Null) => Err(DecodeError::envelope(
            "request.uid is missing: the response could not be matched to the request",
        )),
        Some(other) => {
            Err(DecodeError::envelope(format!("request.uid must be a string, got {}", type_name(other))))
        }
    }
}

/// `request.operation`; a spelling the API server would not send (`create`) is accepted with a
/// warning.
fn operation(request: &Object<'_>, warnings: &mut Vec<String>) -> Result<Operation, String> {
    let text = str_field(request, "operation")?;
    match Operation::parse(&text) {
        Some((op, noncanonical)) => {
            if noncanonical {
                warnings.push(format!(
                    "request.operation {text:?} is not the API value; treated as {}",
                    op.as_str()
                ));
            }
            Ok(op)
        }
        None if text.is_empty() => Err("request.operation is missing".into()),
        None => Err(format!("request.operation {text:?} is not one of CREATE, UPDATE, DELETE, CONNECT")),
    }
}

/// Which of `object` and `oldObject` [`decode_review_body`] builds; the other ones have their type
/// checked and are dropped. [`review_cost`](super::review_cost) picks them from the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    pub object: bool,
    pub old_object: bool,
}

impl Parts {
    /// Both, for a review whose operation is not known beforehand.
    pub const ALL: Parts = Parts { object: true, old_object: true };

    pub fn for_operation(operation: Option<Operation>) -> Parts {
        operation.map_or(Parts::ALL, |op| Parts { object: op.carries(true), old_object: op.carries(false) })
    }
}

/// Decode an AdmissionReview from its JSON text. The answer is the one `serde_json::from_slice`
/// then [`decode_review`] would give (the same parser: same syntax errors, same 128-level nesting
/// limit, the last of duplicate keys wins), but only the fields `decode_review` reads are built as
/// values, and of `object` and `oldObject` only those in `parts`: everything else is parsed,
/// checked and dropped as it goes. The outer error is a JSON syntax error.
pub fn decode_review_body(
    body: &[u8],
    parts: Parts,
) -> Result<Result<AdmissionRequest<'_>, DecodeError>, serde_json::Error> {
    // Read from a slice, serde_json checks the UTF-8 of each string on its own (a tenth of the
    // decode for a typical Pod, issue 20.3); checked once over the whole body, the text is read as
    // a `str` without those checks, and strings are borrowed from it. A body that is not UTF-8 is
    // read as bytes, for the parser's own error at the right place.
    match std::str::from_utf8(body) {
        Ok(text) => decode_from(serde_json::Deserializer::from_str(text), parts),
        Err(_) => decode_from(serde_json::Deserializer::from_slice(body), parts),
    }
}

fn decode_from<'de, R: serde_json::de::Read<'de>>(
    mut deserializer: serde_json::Deserializer<R>,
    parts: Parts,
) -> Result<Result<AdmissionRequest<'de>, DecodeError>, serde_json::Error> {
    let mut decoded = Decoded::default();
    let review = Fields { level: Level::Top, parts, decoded: &mut decoded }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(decode_envelope(review, decoded))
}

const TOP_FIELDS: &[&str] = &["apiVersion", "kind"];
const REQUEST_FIELDS: &[&str] =
    &["uid", "kind", "resource", "subResource", "name", "namespace", "operation", "dryRun"];

#[derive(Clone, Copy)]
enum Level {
    Top,
    Request,
}

/// What to do with the value after a key.
enum Field {
    /// Built as a tree (small: the envelope's own fields) into the envelope.
    Keep(&'static str),
    Request,
    /// `object` or `oldObject`, to be built: kept out of the envelope, in [`Decoded`].
    Part(&'static str),
    /// Parsed and checked; only its type goes into the envelope (`userInfo`, which no decision
    /// reads, and a part the operation leaves empty).
    Typed(&'static str),
    Drop,
}

/// The keys of the top level or of `request` that [`decode_review`] reads; the parts built go to
/// `decoded`, the rest into the envelope, a tree of a few small members.
struct Fields<'s, 'de> {
    level: Level,
    parts: Parts,
    decoded: &'s mut Decoded<'de>,
}

impl<'de> DeserializeSeed<'de> for Fields<'_, 'de> {
    type Value = Json<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A key is matched against the names this level keeps without being copied.
struct KeyOf(Level, Parts);

impl<'de> DeserializeSeed<'de> for KeyOf {
    type Value = Field;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Field, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyOf {
    type Value = Field;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Field, E> {
        let KeyOf(level, parts) = self;
        let keep = |names: &[&'static str]| {
            names.iter().find(|name| **name == key).map_or(Field::Drop, |name| Field::Keep(name))
        };
        let part = |name, build| if build { Field::Part(name) } else { Field::Typed(name) };
        Ok(match (level, key) {
            (Level::Top, "request") => Field::Request,
            (Level::Top, _) => keep(TOP_FIELDS),
            (Level::Request, "object") => part("object", parts.object),
            (Level::Request, "oldObject") => part("oldObject", parts.old_object),
            (Level::Request, "userInfo") => Field::Typed("userInfo"),
            (Level::Request, _) => keep(REQUEST_FIELDS),
        })
    }
}

impl<'de> Visitor<'de> for Fields<'_, 'de> {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        // The last of repeated keys wins, as for any member.
        let mut kept = Object::new();
        while let Some(field) = map.next_key_seed(KeyOf(self.level, self.parts))? {
            let (name, value) = match field {
                Field::Keep(name) => (name, map.next_value_seed(ExactTree)?),
                Field::Request => {
                    let request =
                        Fields { level: Level::Request, parts: self.parts, decoded: &mut *self.decoded };
                    ("request", map.next_value_seed(request)?)
                }
                Field::Part(name) => {
                    let part = map.next_value_seed(ExactTree)?;
                    if name == "object" {
                        self.decoded.object = Some(part)
                    } else {
                        self.decoded.old_object = Some(part)
                    }
                    continue;
                }
                Field::Typed(name) => (name, map.next_value::<Skip>()?.placeholder()),
                Field::Drop => {
                    map.next_value::<Skip>()?;
                    continue;
                }
            };
            kept.insert(name, value);
        }
        Ok(Json::Object(kept))
    }

    // Not an object: `decode_review` only needs its type to say what is wrong.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Json<'de>, A::Error> {
        SkipVisitor.visit_seq(seq).map(Skip::placeholder)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Json<'de>, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Json<'de>, E> {
        Ok(Skip::Bool.placeholder())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Json<'de>, E> {
        Ok(Skip::Number.placeholder())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Json<'de>, E> {
        Ok(Skip::Number.placeholder())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Json<'de>, E> {
        Ok(Skip::Number.placeholder())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Json<'de>, E> {
        Ok(Skip::String.placeholder())
    }
}

/// `object` and `oldObject`, the bulk of a review, are built as trees borrowing from the body.
struct ExactTree;

impl<'de> DeserializeSeed<'de> for ExactTree {
    type Value = Json<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json<'de>, D::Error> {
        tree::deserialize(deserializer)
    }
}

/// A value parsed and checked like any other, then dropped; only its type is kept.
#[derive(Debug, Clone, Copy)]
enum Skip {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

impl Skip {
    /// The smallest value of the same type: an empty object reads as absent, anything else as
    /// the type error it is.
    fn placeholder(self) -> Json<'static> {
        match self {
            Skip::Null => Json::Null,
            Skip::Bool => Json::Bool(false),
            Skip::Number => Json::Number(0.into()),
            Skip::String => Json::String("".into()),
            Skip::Array => Json::Array(Vec::new()),
            Skip::Object => Json::Object(Object::new()),
        }
    }
}

impl<'de> de::Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Skip, D::Error> {
        // `deserialize_any`, not `deserialize_ignored_any`: serde_json counts nesting only here.
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip::Null)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip::Bool)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip::Number)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip::Number)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip::Number)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip::String)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip::Array)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip::Object)
    }
}

/// A whole AdmissionReview response, echoing the request's apiVersion and uid: the bytes sent.
///
/// Written straight into one buffer: the patch (the RFC 6902 array, serialised, then base64, as
/// the apiserver wants it) is written once into a scratch buffer ([`patch::to_text`]) and
/// base64-encoded into place with SIMD (`base64-simd`; the `base64` crate's scalar encoder was an
/// eighth of answering a typical Pod). The text is what serde_json writes for the same object,
/// compact and with the members in this order (`tests/review_response.rs` compares them on every
/// recorded review): building that object as `Value`s, hashing its keys, and scanning the base64
/// text for characters to escape were a quarter of `/mutate-pod`'s instructions for a typical Pod
/// (issue 20.3).
pub fn review_response(version: ReviewVersion, uid: &str, decision: &Decision) -> Vec<u8> {
    let patch = (!decision.patch.is_empty()).then(|| patch::to_text(&decision.patch));
    let patch_len = patch.as_ref().map_or(0, |p| base64_simd::STANDARD.encoded_length(p.len()));
    let mut out = Vec::with_capacity(256 + uid.len() + patch_len);
    out.extend_from_slice(b"{\"apiVersion\":");
    push_json(&mut out, version.api_version());
    out.extend_from_slice(b",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
    push_json(&mut out, uid);
    out.extend_from_slice(if decision.allowed { b",\"allowed\":true" } else { b",\"allowed\":false" });
    if let Some(status) = &decision.status {
        out.extend_from_slice(b",\"status\":{\"status\":");
        push_json(&mut out, if decision.allowed { "Success" } else { "Failure" });
        out.extend_from_slice(b",\"message\":");
        push_json(&mut out, &bounded(&status.message));
        out.extend_from_slice(b",\"reason\":");
        push_json(&mut out, status.reason);
        out.extend_from_slice(b",\"code\":");
        push_json(&mut out, &status.code);
        out.push(b'}');
    }
    if let Some(patch) = patch {
        // Base64 text needs no escaping: it goes between the quotes as it is.
        out.extend_from_slice(b",\"patchType\":\"JSONPatch\",\"patch\":\"");
        base64_simd::STANDARD.encode_append(patch.as_bytes(), &mut out);
        out.push(b'"');
    }
    if !decision.warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":");
        push_json(&mut out, &bounded_warnings(&decision.warnings));
    }
    out.extend_from_slice(b"}}");
    out
}

/// Append `value` as serde_json writes it (escaped strings, numbers, arrays of strings).
fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    serde_json::to_writer(out, value).expect("strings and numbers serialise into a Vec");
}

/// The answer to a review that could not be decoded: `Some(review)` to send with HTTP 200 when the
/// envelope was answerable, `None` when only an HTTP 400 with [`error_body`] makes sense.
pub fn decode_error_response(err: &DecodeError) -> Option<Vec<u8>> {
    let (version, uid, decision) = decode_error_decision(err)?;
    Some(review_response(version, uid, &decision))
}

/// The denial (code 400) a review that could not be decoded gets, with the version and uid to
/// answer it with; `None` when the envelope was not answerable.
pub fn decode_error_decision(err: &DecodeError) -> Option<(ReviewVersion, &str, Decision<'static>)> {
    let (version, uid) = err.answerable.as_ref()?;
    Some((*version, uid, Decision::deny(&AdmissionError::BadRequest(err.message.clone()))))
}

/// The JSON body of an HTTP error (400, 404, 413, ...).
pub fn error_body(message: &str) -> Value {
    json!({ "error": bounded(message) })
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    fn review(request: Value) -> Value {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }

    #[test]
    fn decodes_a_minimal_request_and_treats_empty_old_object_as_absent() {
        let r = decode_review(review(json!({
            "uid": "u1", "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "object": {"metadata": {}}, "oldObject": {}
        })))
        .unwrap();
        assert_eq!(r.uid, "u1");
        assert_eq!(r.operation, Operation::Create);
        assert!(r.object.is_some());
        assert!(r.old_object.is_none());
        assert!(r.decode_warnings.is_empty());
    }

    #[test]
    fn non_canonical_operation_is_accepted_with_a_warning() {
        let r = decode_review(review(json!({"uid": "u", "operation": "Create"}))).unwrap();
        assert_eq!(r.operation, Operation::Create);
        assert_eq!(r.decode_warnings.len(), 1);
    }

    #[test]
    fn envelope_errors_are_not_answerable_but_request_errors_are() {
        let e = decode_review(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}))
            .unwrap_err();
        assert!(e.answerable.is_none());
        assert!(decode_error_response(&e).is_none());
        let e = decode_review(review(json!({"uid": "u", "operation": 7}))).unwrap_err();
        assert_eq!(e.answerable, Some((ReviewVersion::V1, "u".into())));
        let resp: Value = serde_json::from_slice(&decode_error_response(&e).unwrap()).unwrap();
        assert_eq!(resp["response"]["status"]["code"], 400);
        assert_eq!(resp["response"]["uid"], "u");
        assert_eq!(resp["response"]["allowed"], false);
    }

    #[test]
    fn response_carries_base64_patch_only_when_there_are_operations() {
        let response = |version, decision: &Decision| -> Value {
            serde_json::from_slice(&review_response(version, "x", decision)).unwrap()
        };
        let d = Decision::allow();
        let r = response(ReviewVersion::V1Beta1, &d);
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1beta1");
        assert!(r["response"].get("patch").is_none());
        assert!(r["response"].get("patchType").is_none());
        let d = Decision { patch: vec![PatchOp::add("/a", json!(1))], ..Decision::allow() };
        let r = response(ReviewVersion::V1, &d);
        let raw = base64::engine::general_purpose::STANDARD
            .decode(r["response"]["patch"].as_str().unwrap())
            .unwrap();
        assert_eq!(String::from_utf8(raw).unwrap(), r#"[{"op":"add","path":"/a","value":1}]"#);
        assert_eq!(r["response"]["patchType"], "JSONPatch");
    }

    #[test]
    fn each_error_kind_has_its_code() {
        for (e, code) in [
            (AdmissionError::BadRequest("b".into()), 400),
            (AdmissionError::Forbidden("f".into()), 403),
            (AdmissionError::Invalid("i".into()), 422),
            (AdmissionError::Internal("x".into()), 500),
        ] {
            let d = Decision::deny(&e);
            assert!(!d.allowed);
            assert_eq!(d.status.unwrap().code, code);
        }
    }

    #[test]
    fn echoed_text_is_bounded_and_says_what_was_cut() {
        let huge = "é".repeat(1 << 20);
        let mut decision = Decision::deny(&AdmissionError::Invalid(huge.clone()));
        decision.warnings = vec![huge.clone(); 1000];
        let answer = review_response(ReviewVersion::V1, "u", &decision);
        assert!(answer.len() < 40 * MAX_ECHOED_BYTES, "{} bytes", answer.len());
        let resp: Value = serde_json::from_slice(&answer).unwrap();
        let message = resp["response"]["status"]["message"].as_str().unwrap();
        assert!(
            message.len() <= MAX_ECHOED_BYTES && message.ends_with("more bytes cut)"),
            "{}",
            message.len()
        );
        let warnings = resp["response"]["warnings"].as_array().unwrap();
        assert_eq!(warnings.len(), MAX_WARNINGS);
        assert_eq!(warnings[MAX_WARNINGS - 1], "... and 969 more warnings");
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn oversized_identity_fields_are_refused_without_being_echoed() {
        let long = "x".repeat(MAX_IDENTITY_BYTES + 1);
        let e = decode_review(review(json!({"uid": long, "operation": "CREATE"}))).unwrap_err();
        assert!(e.answerable.is_none() && e.message.len() < 200, "{e:?}");
        for key in ["name", "namespace", "subResource", "operation"] {
            let mut request = json!({"uid": "u", "operation": "CREATE"});
            request[key] = json!(long);
            let e = decode_review(review(request)).unwrap_err();
            assert_eq!(e.answerable, Some((ReviewVersion::V1, "u".into())), "{key}");
            assert!(e.message.contains(&format!("request.{key} is 254 bytes")), "{e:?}");
        }
        let kind =
            json!({"uid": "u", "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": long}});
        assert!(decode_review(review(kind)).unwrap_err().message.starts_with("request.kind.kind is 254"));
        let at_the_limit = "x".repeat(MAX_IDENTITY_BYTES);
        let r =
            decode_review(review(json!({"uid": at_the_limit, "operation": "CREATE", "name": at_the_limit})));
        assert_eq!(r.unwrap().name.len(), MAX_IDENTITY_BYTES);
    }
}
