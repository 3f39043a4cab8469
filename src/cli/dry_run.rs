//! `kruise-admission dry-run`: the decisions `serve` makes, offline, for AdmissionReview files.
//!
//! Each review goes through every webhook of the routing table the apiserver would call for it:
//! mutating webhooks first, each seeing the object as the previous one left it, then validating
//! webhooks on the final object. The same `webhooks::run` as `serve`; only the edge differs.

use std::io::{BufWriter, Read as _, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::settings::DecisionArgs;
use crate::admission::patch::diff;
use crate::admission::review::{self, AdmissionRequest, Decision, decode_review};
use crate::admission::webhooks::{self, Webhook, WebhookKind};
use crate::admission::{Clock, FixedClock, Inputs, SeededRandom, Settings, SystemClock};
use crate::cluster::files::{load_dir, read_documents};
use crate::cluster::{Answers, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One summary line per input.
    Json,
    /// Each webhook's AdmissionReview response exactly as `serve` sends it, one line per webhook.
    Review,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Folder of cluster objects (YAML/JSON, multi-document and List kinds accepted) the decisions
    /// read: SidecarSets, Namespaces, ControllerRevisions, ... Without it the cluster is empty.
    #[arg(long, value_name = "DIR")]
    pub cluster_dir: Option<PathBuf>,
    /// Fix the clock for every timestamp a decision writes (RFC 3339, e.g. 2024-01-01T00:00:00Z).
    /// Without it the system clock is used.
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub now: Option<OffsetDateTime>,
    #[command(flatten)]
    pub decisions: DecisionArgs,
    /// Seed of the random source used for percentage partitions, so runs are repeatable.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    #[arg(long, value_enum, default_value_t = Output::Json)]
    pub output: Output,
    /// AdmissionReview files (JSON or YAML, admission.k8s.io/v1 or v1beta1; one review per
    /// document), or `-` for standard input.
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
}

fn parse_rfc3339(s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &Rfc3339).map_err(|e| format!("not an RFC 3339 time: {e}"))
}

/// Run `dry-run`. Exit status: 0 when every review is allowed, 1 when any is denied (an unusable
/// review counts as denied, as `serve` refuses it), 2 when an input or the cluster folder cannot
/// be read (2 wins over 1).
pub fn run(args: Args) -> ExitCode {
    let snapshot = match &args.cluster_dir {
        None => Snapshot::default(),
        Some(dir) => match load_dir(dir) {
            Ok((snapshot, warnings)) => {
                for w in warnings {
                    eprintln!("dry-run: warning: {w}");
                }
                snapshot
            }
            Err(e) => {
                eprintln!("dry-run: cannot load --cluster-dir: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let clock: Box<dyn Clock> = match args.now {
        Some(now) => Box::new(FixedClock(now)),
        None => Box::new(SystemClock),
    };
    let random = SeededRandom::new(args.seed);
    let settings = args.decisions.settings();
    let env = Env { cluster: &snapshot, clock: clock.as_ref(), random: &random, settings: &settings };

    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let (mut denied, mut unreadable) = (false, false);
    for input in &args.inputs {
        let documents = match read_input(input) {
            Ok(docs) => docs,
            Err(message) => {
                eprintln!("dry-run: {input}: {message}");
                unreadable = true;
                continue;
            }
        };
        let several = documents.len() > 1;
        for (index, document) in documents.into_iter().enumerate() {
            let source = if several { format!("{input}#{index}") } else { input.clone() };
            let result = review_one(&env, document);
            denied |= !result.allowed;
            let lines = match args.output {
                Output::Json => vec![result.summary(&source)],
                Output::Review => result.responses,
            };
            for line in lines {
                if let Err(e) = writeln!(out, "{line}") {
                    eprintln!("dry-run: cannot write output: {e}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    if let Err(e) = out.flush() {
        eprintln!("dry-run: cannot write output: {e}");
        return ExitCode::from(2);
    }
    if unreadable {
        ExitCode::from(2)
    } else if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The documents of one input, each expected to be an AdmissionReview. Errors name the document.
fn read_input(input: &str) -> Result<Vec<Value>, String> {
    let text = if input == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("cannot read standard input: {e}"))?;
        text
    } else {
        std::fs::read_to_string(input).map_err(|e| format!("cannot read: {e}"))?
    };
    let documents = read_documents(&text)?;
    if documents.is_empty() {
        return Err("document 0: no AdmissionReview in the input".into());
    }
    Ok(documents)
}

/// What every decision reads, fixed for the whole run.
struct Env<'a> {
    cluster: &'a Snapshot,
    clock: &'a dyn Clock,
    random: &'a SeededRandom,
    settings: &'a Settings,
}

/// One webhook call, as the summary line reports it.
struct Call {
    path: &'static str,
    allowed: bool,
    patch: Value,
}

/// The outcome of one review through every matching webhook.
struct ReviewResult {
    uid: Value,
    allowed: bool,
    /// `(code, message)` of the first denial; 200 and empty when allowed.
    status: (u16, String),
    warnings: Vec<String>,
    /// Against the input object; empty on denial (nothing is admitted).
    patch: Value,
    /// The object as admitted; null on denial and for requests without an object (DELETE).
    object: Value,
    calls: Vec<Call>,
    /// Each response as `serve` would send it.
    responses: Vec<String>,
}

impl ReviewResult {
    fn summary(&self, source: &str) -> String {
        let webhooks: Vec<Value> = self.calls.iter().map(|c| json!({"path": c.path, "allowed": c.allowed, "patch": c.patch})).collect();
        json!({
            "source": source,
            "uid": self.uid,
            "allowed": self.allowed,
            "status": {"code": self.status.0, "message": self.status.1},
            "warnings": self.warnings,
            "patch": self.patch,
            "object": self.object,
            "webhooks": webhooks,
        })
        .to_string()
    }
}

fn review_one(env: &Env, document: Value) -> ReviewResult {
    // The uid as sent, for reporting even when the review is unusable.
    let sent_uid = document.pointer("/request/uid").filter(|u| u.is_string()).cloned().unwrap_or(Value::Null);
    let request = match decode_review(document) {
        Ok(request) => request,
        Err(err) => {
            // `serve` answers a denial with code 400 inside a review when it can, otherwise HTTP 400
            // with a JSON error body; `--output review` prints whichever it would send.
            let response = review::decode_error_response(&err).unwrap_or_else(|| review::error_body(&err.message));
            return ReviewResult {
                uid: sent_uid,
                allowed: false,
                status: (400, err.message),
                warnings: Vec::new(),
                patch: json!([]),
                object: Value::Null,
                calls: Vec::new(),
                responses: vec![response.to_string()],
            };
        }
    };
    let matching: Vec<&Webhook> = webhooks::matching(&request).collect();
    run_webhooks(env, request, &matching)
}

/// Run `matching` (mutating ones first, as `webhooks::matching` orders them) the way the apiserver
/// calls them: each mutating webhook sees the previous one's object, validating ones see the final
/// object; a mutating denial ends the chain, validating webhooks all run (they run in parallel).
fn run_webhooks(env: &Env, request: AdmissionRequest, matching: &[&Webhook]) -> ReviewResult {
    let original = request.object.clone();
    let mut current = request;
    let mut result = ReviewResult {
        uid: Value::String(current.uid.clone()),
        allowed: true,
        status: (200, String::new()),
        warnings: Vec::new(),
        patch: json!([]),
        object: Value::Null,
        calls: Vec::new(),
        responses: Vec::new(),
    };
    for webhook in matching {
        let decision = call(env, webhook, &mut current);
        let patch_json = serde_json::to_value(&decision.patch).unwrap_or_else(|_| json!([]));
        result.responses.push(review::review_response(current.version, &current.uid, &decision).to_string());
        result.warnings.extend(decision.warnings.iter().cloned());
        if !decision.allowed && result.allowed {
            result.allowed = false;
            let status = decision.status.as_ref();
            result.status = (status.map_or(403, |s| s.code), status.map(|s| s.message.clone()).unwrap_or_default());
        }
        result.calls.push(Call { path: webhook.path, allowed: decision.allowed, patch: patch_json });
        if !decision.allowed && webhook.kind() == WebhookKind::Mutating {
            break;
        }
    }
    if result.allowed {
        if let (Some(from), Some(to)) = (&original, &current.object) {
            result.patch = serde_json::to_value(diff(from, to)).unwrap_or_else(|_| json!([]));
        }
        result.object = current.object.unwrap_or(Value::Null);
    }
    result
}

/// Call one webhook as `serve` would, answering its lookups from the snapshot. A mutating
/// webhook's result becomes `request.object` for the next one.
fn call(env: &Env, webhook: &Webhook, request: &mut AdmissionRequest) -> Decision {
    let no_answers = Answers::default();
    let answers;
    let inputs = Inputs { cluster: env.cluster, answers: &no_answers, clock: env.clock, random: env.random, settings: env.settings };
    let inputs = match webhook.queries {
        Some(queries) => {
            answers = Answers::from_snapshot(env.cluster, &queries(request, &inputs));
            Inputs { answers: &answers, ..inputs }
        }
        None => inputs,
    };
    let outcome = webhooks::run(webhook, request, &inputs);
    if let Some(mutated) = outcome.mutated {
        request.object = Some(mutated);
    }
    outcome.decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::review::{AdmissionError, Operation, ReviewVersion};
    use crate::admission::webhooks::{Capability, FailurePolicy, Handler, ObjectScope};

    fn label(object: &Value, key: &str) -> Option<String> {
        object.pointer(&format!("/metadata/labels/{key}")).and_then(Value::as_str).map(str::to_owned)
    }

    fn set_label(object: &mut Value, key: &str, value: String) {
        object["metadata"]["labels"][key] = Value::String(value);
    }

    fn first(_: &AdmissionRequest, object: &mut Value, _: &Inputs) -> Result<Vec<String>, AdmissionError> {
        set_label(object, "a", "1".into());
        Ok(vec!["first".into()])
    }

    /// Proves chaining: it can only write "12" if it saw `first`'s label.
    fn second(_: &AdmissionRequest, object: &mut Value, _: &Inputs) -> Result<Vec<String>, AdmissionError> {
        let a = label(object, "a").unwrap_or_default();
        set_label(object, "b", format!("{a}2"));
        Ok(vec!["second".into()])
    }

    fn refuse_mutation(_: &AdmissionRequest, _: &mut Value, _: &Inputs) -> Result<Vec<String>, AdmissionError> {
        Err(AdmissionError::Forbidden("mutation refused".into()))
    }

    /// Allows only the final object of the chain.
    fn sees_final(request: &AdmissionRequest, _: &Inputs) -> Result<Vec<String>, AdmissionError> {
        match request.object.as_ref().and_then(|o| label(o, "b")) {
            Some(b) if b == "12" => Ok(vec!["validated".into()]),
            other => Err(AdmissionError::Invalid(format!("expected label b=12, got {other:?}"))),
        }
    }

    fn refuse_validation(_: &AdmissionRequest, _: &Inputs) -> Result<Vec<String>, AdmissionError> {
        Err(AdmissionError::Invalid("validation refused".into()))
    }

    const fn hook(path: &'static str, handler: Handler) -> Webhook {
        Webhook {
            name: "test.kb.io",
            path,
            rules: &[],
            handler,
            queries: None,
            failure_policy: FailurePolicy::Fail,
            scope: ObjectScope::All,
            capability: Capability::PodMutation,
        }
    }

    static FIRST: Webhook = hook("/first", Handler::Mutate(first));
    static SECOND: Webhook = hook("/second", Handler::Mutate(second));
    static REFUSE_MUTATION: Webhook = hook("/refuse-mutation", Handler::Mutate(refuse_mutation));
    static SEES_FINAL: Webhook = hook("/sees-final", Handler::Validate(sees_final));
    static REFUSE_VALIDATION: Webhook = hook("/refuse-validation", Handler::Validate(refuse_validation));

    fn request() -> AdmissionRequest {
        AdmissionRequest {
            version: ReviewVersion::V1,
            uid: "u".into(),
            kind: Default::default(),
            resource: Default::default(),
            sub_resource: String::new(),
            name: String::new(),
            namespace: String::new(),
            operation: Operation::Create,
            user_info: json!({}),
            object: Some(json!({"metadata": {"labels": {}}, "spec": {}})),
            old_object: None,
            dry_run: false,
            decode_warnings: Vec::new(),
        }
    }

    fn run_chain(chain: &[&Webhook]) -> ReviewResult {
        let (cluster, settings, random) = (Snapshot::default(), Settings::default(), SeededRandom::new(0));
        let clock = FixedClock(OffsetDateTime::UNIX_EPOCH);
        run_webhooks(&Env { cluster: &cluster, clock: &clock, random: &random, settings: &settings }, request(), chain)
    }

    fn paths(result: &ReviewResult) -> Vec<&str> {
        result.calls.iter().map(|c| c.path).collect()
    }

    #[test]
    fn mutations_chain_and_validation_sees_the_final_object() {
        let result = run_chain(&[&FIRST, &SECOND, &SEES_FINAL]);
        assert!(result.allowed, "{:?}", result.status);
        assert_eq!(paths(&result), ["/first", "/second", "/sees-final"]);
        assert_eq!(result.object["metadata"]["labels"], json!({"a": "1", "b": "12"}));
        assert_eq!(result.warnings, ["first", "second", "validated"]);
        // Each webhook's patch is against what it received; the whole patch against the input.
        assert_eq!(result.calls[1].patch, json!([{"op": "add", "path": "/metadata/labels/b", "value": "12"}]));
        assert_eq!(
            result.patch,
            json!([{"op": "add", "path": "/metadata/labels/a", "value": "1"}, {"op": "add", "path": "/metadata/labels/b", "value": "12"}])
        );
        assert_eq!(result.responses.len(), 3);
    }

    #[test]
    fn a_mutating_denial_ends_the_chain() {
        let result = run_chain(&[&FIRST, &REFUSE_MUTATION, &SECOND, &SEES_FINAL]);
        assert!(!result.allowed);
        assert_eq!(paths(&result), ["/first", "/refuse-mutation"]);
        assert_eq!(result.status, (403, "mutation refused".to_owned()));
        assert_eq!(result.patch, json!([]));
        assert_eq!(result.object, Value::Null);
        assert_eq!(result.responses.len(), 2);
    }

    #[test]
    fn validating_webhooks_all_run_and_the_first_denial_is_reported() {
        let result = run_chain(&[&FIRST, &REFUSE_VALIDATION, &SEES_FINAL]);
        assert!(!result.allowed);
        assert_eq!(paths(&result), ["/first", "/refuse-validation", "/sees-final"]);
        assert_eq!(result.status, (422, "validation refused".to_owned()));
        assert_eq!(result.calls.iter().map(|c| c.allowed).collect::<Vec<_>>(), [true, false, false]);
    }
}
