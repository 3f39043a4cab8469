//! `kruise-admission dry-run`: the decisions `serve` makes, offline, for AdmissionReviews, bare objects and audit logs (see `inputs`).
//!
//! Each review goes through every webhook of the routing table the apiserver would call for it:
//! mutating webhooks first, each seeing the object as the previous one left it, then validating
//! webhooks on the final object. The same `webhooks::run` as `serve`; only the edge differs.

use std::io::{BufWriter, IsTerminal as _, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::agreement;
use super::cluster_folder;
use super::inputs::{self, Case, Classifier, Skipped};
use super::line_diff::Style;
use super::report::{self, Call, ReviewResult, Table, Totals};
use super::settings::DecisionArgs;
use crate::admission::patch::{PatchOp, diff_json};
use crate::admission::review::{self, AdmissionRequest, Operation, decode_review};
use crate::admission::webhooks::{self, Webhook, WebhookKind};
use crate::admission::writes::StatusWrite;
use crate::admission::{Clock, FixedClock, Inputs, SeededRandom, Settings, SystemClock};
use crate::api::tree::Json;
use crate::cluster::{Answers, Snapshot};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One summary line per input.
    Json,
    /// Each webhook's AdmissionReview response exactly as `serve` sends it, one line per webhook.
    Review,
    /// One aligned line per input (result, webhooks called, patch operations, message), then totals.
    Summary,
    /// The admitted objects as YAML documents.
    Patched,
    /// A unified diff per object of the input against the admitted object (coloured on a terminal).
    Diff,
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
    /// Seed of the random source used for percentage partitions and generated Pod names, so runs
    /// are repeatable.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Json)]
    pub output: Output,
    /// Objects (files or folders) layered over the `--cluster-dir` objects: an object with the same
    /// group, kind, namespace and name replaces the folder's, others are added. E.g. a new
    /// version of a SidecarSet.
    /// Repeat the flag for several (`--with a.yaml --with dir/`).
    #[arg(long = "with", value_name = "FILE")]
    pub with: Vec<PathBuf>,
    /// Report a comparison instead of each decision: with `--with`, every input without and with
    /// those objects (`--output summary`, `diff` or `json`); with `--stored`, our decision on each
    /// Pod CREATE against the Pod actually stored (`--output summary` or `json`).
    #[arg(long)]
    pub compare: bool,
    /// With `--compare`: the stored Pods to compare our decisions on the Pod CREATE inputs with, per
    /// SidecarSet and field: a file or folder of Pods (YAML/JSON, e.g. `kubectl get pods -A -o
    /// yaml`) or an audit log (the Pod each Pod create stored). Exit status 0 only when there is a
    /// Pod CREATE and every one pairs with a stored Pod and agrees.
    #[arg(long, value_name = "PATH", requires = "compare", conflicts_with = "with")]
    pub stored: Option<PathBuf>,
    /// Inputs: files or folders (every .yaml/.yml/.json below, in path order), or `-` for standard
    /// input. JSON, JSON lines or multi-document YAML; `List` kinds are expanded. Each document is
    /// an AdmissionReview (admission.k8s.io/v1 or v1beta1, replayed as recorded), an
    /// audit.k8s.io/v1 Event (an audit log line, replayed for the resources this binary admits) or
    /// a bare object (treated as a CREATE by an ordinary user).
    #[arg(value_name = "INPUT", required = true)]
    pub inputs: Vec<String>,
}

pub(crate) fn parse_rfc3339(s: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(s, &Rfc3339).map_err(|e| format!("not an RFC 3339 time: {e}"))
}

/// Run `dry-run`. Exit status: 0 when every input is allowed, 1 when any is denied (an unusable
/// review counts as denied, as `serve` refuses it), 2 when an input, a `--with` file or the cluster
/// folder cannot be read, a folder or `--with` object would be refused, or the flags do not fit
/// together (2 wins over 1). With `--compare --with` the status is that of the run with the `--with`
/// objects; with `--compare --stored` it is 1 unless every Pod CREATE agrees with its stored Pod. A
/// closed standard output ends it quietly with 0.
pub fn run(args: Args) -> ExitCode {
    match replay(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("dry-run: {message}");
            ExitCode::from(2)
        }
    }
}

/// `run` up to its exit status; an error is a reason to stop with status 2.
fn replay(args: &Args) -> Result<ExitCode, String> {
    check_flags(args)?;
    let stored = args.stored.as_deref().map(load_stored).transpose()?;
    let clock: Box<dyn Clock> = match args.now {
        Some(now) => Box::new(FixedClock(now)),
        None => Box::new(SystemClock),
    };
    // Each side of a comparison draws from its own generator with the same seed, so a
    // percentage partition decides the same way on both.
    let (random, base_random) = (SeededRandom::new(args.seed), SeededRandom::new(args.seed));
    let settings = args.decisions.settings()?;
    let loading = SeededRandom::new(args.seed);
    let deciding = cluster_folder::Deciding { clock: clock.as_ref(), random: &loading, settings: &settings };
    let cluster = cluster_folder::load("dry-run", args.cluster_dir.as_ref(), &args.with, &deciding)?;
    let base_env = Env {
        cluster: &cluster.folder,
        clock: clock.as_ref(),
        random: &base_random,
        settings: &settings,
        responses: args.output == Output::Review,
        // The agreement report pairs reviews with stored Pods by the input and attributes fields
        // against it.
        keep_input: (args.output == Output::Diff && !args.compare) || stored.is_some(),
    };
    let env = Env { cluster: cluster.current(), random: &random, ..base_env };
    let base_env = (args.compare && stored.is_none()).then_some(base_env);

    let stdout = std::io::stdout();
    let style = if super::colour::wanted(&stdout) { Style::Color } else { Style::Plain };
    let mut printer = Printer::new(args.output, style, args.compare, BufWriter::new(stdout.lock()));
    printer.agreement = stored.map(|stored| agreement::Report::new(env.cluster, stored));
    let mut walk = Replay {
        env,
        base_env,
        printer,
        progress: Progress::new(),
        classifier: Classifier::default(),
        unreadable: false,
    };
    for argument in &args.inputs {
        walk.argument(argument);
    }
    walk.progress.done();
    let Replay { printer, unreadable, .. } = walk;
    let denied = match &printer.agreement {
        Some(report) => !report.all_agree(),
        None => printer.totals.denied > 0,
    };
    match printer.finish() {
        // The reader went away (`dry-run … | head`): stop quietly, as Unix tools do.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        Err(e) => return Err(format!("cannot write output: {e}")),
        Ok(()) => {}
    }
    Ok(if unreadable {
        ExitCode::from(2)
    } else if denied {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The flag combinations clap cannot express.
fn check_flags(args: &Args) -> Result<(), String> {
    if args.compare && args.with.is_empty() && args.stored.is_none() {
        return Err(
            "--compare needs --with (objects to compare with) or --stored (the stored Pods to compare with)"
                .into(),
        );
    }
    if args.stored.is_some() && !matches!(args.output, Output::Summary | Output::Json) {
        return Err("--compare --stored reports with --output summary or json".into());
    }
    if args.compare && matches!(args.output, Output::Review | Output::Patched) {
        return Err("--compare reports with --output summary, diff or json".into());
    }
    Ok(())
}

/// The Pods of `--stored`.
fn load_stored(path: &Path) -> Result<Vec<Value>, String> {
    let (pods, ignored) = agreement::load_stored(&path.display().to_string())
        .map_err(|e| format!("cannot load --stored: {e}"))?;
    // Other documents are expected (an audit log records much more than Pod creates).
    if pods.is_empty() {
        eprintln!(
            "dry-run: warning: --stored {}: no Pod and no audit event of a Pod create among its {ignored} documents",
            path.display()
        );
    }
    Ok(pods)
}

/// The inputs' walk: each document decided and printed as it is read.
struct Replay<'a, W: Write> {
    env: Env<'a>,
    /// `--compare --with`: the run without the `--with` objects.
    base_env: Option<Env<'a>>,
    printer: Printer<W>,
    progress: Progress,
    classifier: Classifier,
    /// An input, file or document could not be read (exit status 2).
    unreadable: bool,
}

impl<W: Write> Replay<'_, W> {
    /// One INPUT argument: a file, a folder or `-`.
    fn argument(&mut self, argument: &str) {
        match inputs::expand(argument) {
            Ok(files) => files.iter().for_each(|input| self.file(input)),
            Err(message) => self.cannot_read(&format!("{argument}: {message}")),
        }
    }

    fn file(&mut self, input: &str) {
        let text = match inputs::read_text(input) {
            Ok(text) => text,
            Err(message) => return self.cannot_read(&format!("{input}: {message}")),
        };
        let read = inputs::for_each_document(&text, |index, several, document| {
            let source = if several { format!("{input}#{index}") } else { input.to_owned() };
            match self.classifier.classify(document, &source) {
                Ok(case) => self.case(&source, case),
                Err(message) => self.cannot_read(&format!("{input}: document {index}: {message}")),
            }
        });
        if let Err(message) = read {
            self.cannot_read(&format!("{input}: {message}"));
        }
    }

    fn case(&mut self, source: &str, case: Case) {
        let (with, without) = match case {
            Case::Skip(reason) => {
                *self.printer.skipped.entry(reason).or_default() += 1;
                return;
            }
            Case::Review(document) => match &self.base_env {
                Some(base_env) => {
                    (review_one(&self.env, document.clone()), Some(review_one(base_env, document)))
                }
                None => (review_one(&self.env, document), None),
            },
            Case::Request(request) => {
                let without =
                    self.base_env.as_ref().map(|base_env| request_one(base_env, (*request).clone()));
                (request_one(&self.env, *request), without)
            }
        };
        self.printer.print(source, with, without);
        self.progress.tick();
    }

    fn cannot_read(&mut self, message: &str) {
        eprintln!("dry-run: {message}");
        self.unreadable = true;
    }
}

/// Writes each result in the chosen output as it comes (the summary table waits for its widths).
struct Printer<W: Write> {
    output: Output,
    style: Style,
    compare: bool,
    out: W,
    table: Option<Table>,
    totals: Totals,
    skipped: Skipped,
    /// The first write error; later writes are skipped and `finish` reports it.
    error: Option<std::io::Error>,
    /// `--compare --stored`: results go to the agreement report, printed by `finish`.
    agreement: Option<agreement::Report>,
}

impl<W: Write> Printer<W> {
    fn new(output: Output, style: Style, compare: bool, out: W) -> Self {
        let table = match (output, compare) {
            (Output::Summary, false) => Some(Table::new(report::SUMMARY_HEADER)),
            (Output::Summary, true) => Some(Table::new(report::COMPARE_HEADER)),
            _ => None,
        };
        Printer {
            output,
            style,
            compare,
            out,
            table,
            totals: Totals::default(),
            skipped: Skipped::new(),
            error: None,
            agreement: None,
        }
    }

    fn print(&mut self, source: &str, with: ReviewResult, without: Option<ReviewResult>) {
        self.totals.add(&with);
        if let Some(report) = &mut self.agreement {
            report.add(source, &with);
            return;
        }
        let text = match (&without, self.output) {
            (Some(without), output) => {
                if report::changed(without, &with) {
                    self.totals.changed += 1;
                }
                match output {
                    Output::Summary => {
                        if let Some(table) = &mut self.table {
                            table.push(report::compare_row(source, without, &with));
                        }
                        return;
                    }
                    Output::Diff => report::compare_diff(source, without, &with, self.style),
                    _ => report::compare_json(source, without, &with) + "\n",
                }
            }
            (None, Output::Json) => with.summary(source) + "\n",
            (None, Output::Review) => with.responses.iter().map(|r| format!("{r}\n")).collect(),
            (None, Output::Summary) => {
                if let Some(table) = &mut self.table {
                    table.push(report::summary_row(source, &with));
                }
                return;
            }
            (None, Output::Patched) => report::patched(source, &with),
            (None, Output::Diff) => report::diff(source, &with, self.style),
        };
        self.write(&text);
    }

    fn write(&mut self, text: &str) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(text.as_bytes())
        {
            self.error = Some(e);
        }
    }

    /// The summary table and totals; skipped audit events on stderr for the other outputs
    /// (whose stdout stays machine-readable).
    fn finish(mut self) -> std::io::Result<()> {
        if let Some(report) = self.agreement.take() {
            let text = if self.output == Output::Summary { report.table() } else { report.json() };
            self.write(&text);
            if let Some(skipped) = report::skipped_text(&self.skipped) {
                eprintln!("dry-run: {skipped}");
            }
        } else if let Some(table) = self.table.take() {
            let mut text = if table.len() > 0 { table.render() } else { String::new() };
            text.push_str(&self.totals.line(&self.skipped, self.compare));
            text.push('\n');
            self.write(&text);
        } else if let Some(skipped) = report::skipped_text(&self.skipped) {
            eprintln!("dry-run: {skipped}");
        }
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()
    }
}

/// A count of reviews on stderr for long batches, only when stderr is a terminal (so logs and
/// pipes never see it). Shown after the first second, refreshed every 1,000 reviews.
struct Progress {
    enabled: bool,
    started: Instant,
    count: u64,
    shown: bool,
}

impl Progress {
    fn new() -> Self {
        Progress { enabled: std::io::stderr().is_terminal(), started: Instant::now(), count: 0, shown: false }
    }

    fn tick(&mut self) {
        self.count += 1;
        if !self.enabled || !self.count.is_multiple_of(1000) {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        if elapsed >= 1.0 {
            eprint!("\rdry-run: {} reviews, {:.0}/s ", self.count, self.count as f64 / elapsed);
            self.shown = true;
        }
    }

    fn done(&self) {
        if self.shown {
            // Clear the line so the next prompt or message starts clean.
            eprint!("\r\x1b[2K");
        }
    }
}

/// What every decision reads, fixed for the whole run.
#[derive(Clone, Copy)]
struct Env<'a> {
    cluster: &'a Snapshot,
    clock: &'a dyn Clock,
    random: &'a SeededRandom,
    settings: &'a Settings,
    /// Render each webhook's AdmissionReview response (only `--output review` prints them).
    responses: bool,
    /// Keep each input object in its result (only `--output diff` shows it).
    keep_input: bool,
}

fn review_one(env: &Env, document: Value) -> ReviewResult {
    // The uid as sent, for reporting even when the review is unusable.
    let sent_uid = document.pointer("/request/uid").filter(|u| u.is_string()).cloned().unwrap_or(Value::Null);
    let request = match decode_review(document) {
        Ok(request) => request,
        Err(err) => {
            // `serve` answers a denial with code 400 inside a review when it can, otherwise HTTP 400
            // with a JSON error body; `--output review` prints whichever it would send.
            let response = review::decode_error_response(&err)
                .map_or_else(|| review::error_body(&err.message).to_string(), review_text);
            return ReviewResult {
                uid: sent_uid,
                subject: "-".to_owned(),
                allowed: false,
                status: (400, err.message),
                warnings: Vec::new(),
                patch: Vec::new(),
                input: Value::Null,
                object: Value::Null,
                calls: Vec::new(),
                responses: vec![response],
                writes: Vec::new(),
                pod_create: None,
            };
        }
    };
    request_one(env, request)
}

/// A review `serve` would send, as text (it is JSON: UTF-8).
fn review_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Run a decoded (or built) request through every webhook the apiserver would call for it.
fn request_one(env: &Env, request: AdmissionRequest) -> ReviewResult {
    let matching: Vec<&Webhook> = webhooks::matching(&request).collect();
    run_webhooks(env, request, &matching)
}

/// Run `matching` (mutating ones first, as `webhooks::matching` orders them) the way the apiserver
/// calls them: each mutating webhook sees the previous one's object, validating ones see the final
/// object; a mutating denial ends the chain, validating webhooks all run (they run in parallel).
fn run_webhooks(env: &Env, request: AdmissionRequest, matching: &[&Webhook]) -> ReviewResult {
    // The input object is copied only when something reads it: `--output diff`, or the whole
    // patch when several mutating webhooks may each change the object.
    let mutating = matching.iter().filter(|w| w.kind() == WebhookKind::Mutating).count();
    let original = if env.keep_input || mutating > 1 { request.object.clone() } else { None };
    let mut current = request;
    let kind = if current.kind.kind.is_empty() {
        current.resource.resource.as_str()
    } else {
        current.kind.kind.as_str()
    };
    let is_pod_create = current.operation == Operation::Create
        && current.resource.group.is_empty()
        && current.resource.resource == "pods"
        && current.sub_resource.is_empty();
    let pod_create = is_pod_create.then(|| (pod_namespace(&current), current.name.clone()));
    let mut result = ReviewResult {
        uid: Value::String(current.uid.clone()),
        subject: format!("{kind} {}", current.display_name()),
        allowed: true,
        status: (200, String::new()),
        warnings: Vec::new(),
        patch: Vec::new(),
        input: Value::Null,
        object: Value::Null,
        calls: Vec::new(),
        responses: Vec::new(),
        writes: Vec::new(),
        pod_create,
    };
    result.warnings.extend(cluster_folder::unknown_namespace(&current, env.cluster, env.settings));
    // `run_offline` answers each webhook's lookups from the snapshot itself.
    let no_answers = Answers::default();
    let inputs = Inputs {
        cluster: env.cluster,
        answers: &no_answers,
        clock: env.clock,
        random: env.random,
        settings: env.settings,
    };
    webhooks::run_chain_offline(matching, &mut current, &inputs, |webhook, request, decision| {
        if env.responses {
            result.responses.push(review_text(review::review_response(
                request.version,
                &request.uid,
                &decision,
            )));
        }
        result.warnings.extend(decision.warnings.iter().cloned());
        // Each call writes what it allowed, as `serve` would (a later call's refusal, like the
        // API server's, does not undo it); a call that refuses writes nothing.
        if decision.allowed {
            result.writes.extend(decision.writes.iter().map(StatusWrite::to_json));
        }
        if !decision.allowed && result.allowed {
            result.allowed = false;
            result.status = cluster_folder::status(&decision);
        }
        result.calls.push(Call { path: webhook.path, allowed: decision.allowed, patch: decision.patch });
    });
    if result.allowed {
        // Only mutating calls change the object: with at most one non-empty patch, that patch is
        // the whole patch (the call saw the input unchanged), so the second diff is saved.
        let mut changes = result.calls.iter().filter(|c| !c.patch.is_empty());
        match (changes.next(), changes.next()) {
            (None, _) => {}
            (Some(only), None) => result.patch = only.patch.clone(),
            (Some(_), Some(_)) => {
                if let (Some(from), Some(to)) = (&original, &current.object) {
                    result.patch = diff_json(from, to).into_iter().map(PatchOp::into_owned).collect();
                }
            }
        }
        result.object = current.object.map_or(Value::Null, Json::into_value);
    }
    if env.keep_input {
        result.input = original.map_or(Value::Null, Json::into_value);
    }
    result
}

/// The namespace a Pod is created in: the request's, else the object's, else `default`.
fn pod_namespace(request: &AdmissionRequest) -> String {
    let from_object =
        || request.object.as_ref().and_then(|o| o.at(&["metadata", "namespace"])).and_then(Json::as_str);
    let namespace =
        Some(request.namespace.as_str()).filter(|n| !n.is_empty()).or_else(from_object).unwrap_or_default();
    if namespace.is_empty() { "default".to_owned() } else { namespace.to_owned() }
}

/// Call one webhook as `serve` would, answering its lookups from the snapshot. A mutating
/// webhook's result becomes `request.object` for the next one.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::draft::Draft;
    use crate::admission::patch::PatchOp;
    use crate::admission::review::{AdmissionError, Operation, ReviewVersion};
    use crate::admission::webhooks::{Capability, FailurePolicy, Handler, ObjectScope, SideEffects};
    use crate::admission::writes::Effects;
    use serde_json::json;

    fn label(object: &Json, key: &str) -> Option<String> {
        object.at(&["metadata", "labels", key]).and_then(Json::as_str).map(str::to_owned)
    }

    fn set_label(object: &mut Json, key: &str, value: String) {
        let labels =
            object.get_mut("metadata").and_then(|m| m.get_mut("labels")).and_then(Json::as_object_mut);
        labels.unwrap().insert(key.to_owned(), Json::from(value));
    }

    fn first(_: &AdmissionRequest, object: &mut Draft<'_>, _: &Inputs) -> Result<Effects, AdmissionError> {
        set_label(object.to_mut(), "a", "1".into());
        Ok(vec!["first".into()].into())
    }

    /// Proves chaining: it can only write "12" if it saw `first`'s label.
    fn second(_: &AdmissionRequest, object: &mut Draft<'_>, _: &Inputs) -> Result<Effects, AdmissionError> {
        let object = object.to_mut();
        let a = label(object, "a").unwrap_or_default();
        set_label(object, "b", format!("{a}2"));
        Ok(vec!["second".into()].into())
    }

    fn refuse_mutation(
        _: &AdmissionRequest,
        _: &mut Draft<'_>,
        _: &Inputs,
    ) -> Result<Effects, AdmissionError> {
        Err(AdmissionError::Forbidden("mutation refused".into()))
    }

    /// Allows only the final object of the chain.
    fn sees_final(request: &AdmissionRequest, _: &Inputs) -> Result<Effects, AdmissionError> {
        match request.object.as_ref().and_then(|o| label(o, "b")) {
            Some(b) if b == "12" => Ok(vec!["validated".into()].into()),
            other => Err(AdmissionError::Invalid(format!("expected label b=12, got {other:?}"))),
        }
    }

    fn refuse_validation(_: &AdmissionRequest, _: &Inputs) -> Result<Effects, AdmissionError> {
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
            side_effects: SideEffects::None,
            capability: Capability::PodMutation,
        }
    }

    static FIRST: Webhook = hook("/first", Handler::Mutate(first));
    static SECOND: Webhook = hook("/second", Handler::Mutate(second));
    static REFUSE_MUTATION: Webhook = hook("/refuse-mutation", Handler::Mutate(refuse_mutation));
    static SEES_FINAL: Webhook = hook("/sees-final", Handler::Validate(sees_final));
    static REFUSE_VALIDATION: Webhook = hook("/refuse-validation", Handler::Validate(refuse_validation));

    fn request() -> AdmissionRequest<'static> {
        AdmissionRequest {
            version: ReviewVersion::V1,
            uid: "u".into(),
            kind: Default::default(),
            resource: Default::default(),
            sub_resource: String::new(),
            name: String::new(),
            namespace: String::new(),
            operation: Operation::Create,
            object: Some(Json::from(json!({"metadata": {"labels": {}}, "spec": {}}))),
            old_object: None,
            dry_run: false,
            decode_warnings: Vec::new(),
        }
    }

    fn run_chain(chain: &[&Webhook]) -> ReviewResult {
        let (cluster, settings, random) = (Snapshot::default(), Settings::default(), SeededRandom::new(0));
        let clock = FixedClock(OffsetDateTime::UNIX_EPOCH);
        let env = Env {
            cluster: &cluster,
            clock: &clock,
            random: &random,
            settings: &settings,
            responses: true,
            keep_input: true,
        };
        run_webhooks(&env, request(), chain)
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
        let patch = |ops: &[PatchOp]| serde_json::to_value(ops).unwrap();
        assert_eq!(
            patch(&result.calls[1].patch),
            json!([{"op": "add", "path": "/metadata/labels/b", "value": "12"}])
        );
        assert_eq!(
            patch(&result.patch),
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
        assert!(result.patch.is_empty());
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
