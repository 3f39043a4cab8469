//! The admission HTTP handler: one route per entry of the webhook table, each a thin adapter
//! around `review::decode_review` → `webhooks::run` → `review::review_response`.
//!
//! Shadow mode (`--shadow`) lives in [`answer_decision`], the one place a decision becomes the
//! AdmissionReview sent back: decisions, their metrics and their log line stay what they are;
//! the answer becomes "allowed, unchanged", and each decision is counted and logged as what it
//! would have done.
//!
//! HTTP-level refusals (wrong method, media type, size, unusable envelope, overload, deadline,
//! panic) are answered with a JSON `{"error": ...}` body and counted in
//! `kruise_admission_http_errors_total`; everything the apiserver can match to a request (it has a
//! uid) is answered inside an AdmissionReview with HTTP 200.
//!
//! Hostile load (issue 17): the bytes a request holds (body, then decoded values) come from one
//! [`MemoryBudget`], and the blocking work of a large review (or of a decision after lookups)
//! waits in one [`WorkQueue`]; both refuse early (429/503 with `Retry-After`, 413 for what could
//! never fit) rather than let the process starve or be OOM-killed. A cheap review is decided where
//! it arrived ([`Place`]).

use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::header::{ALLOW, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use http_body_util::BodyExt as _;

use super::deadline;
use super::listener::Peer;
use super::live_agreement::LiveAgreement;
use super::log_summary::LogSummary;
use super::lookups::Lookups;
use super::memory_budget::{Held, MemoryBudget, Refusal};
use super::metrics::Metrics;
use super::snapshot_state::ClusterState;
use super::status_writes::{self, StatusWrites};
use super::work_queue::{Shed, WorkQueue};
use crate::admission::injection::matching;
use crate::admission::review::{self, AdmissionError, AdmissionRequest, Decision, Operation, ReviewVersion};
use crate::admission::review_cost::{self, Cost};
use crate::admission::shadow::{self, Outcome};
use crate::admission::webhooks::{self, Capability, Webhook, WebhookKind};
use crate::admission::writes;
use crate::admission::{Clock, Inputs, Settings, ThreadRandom};
use crate::cluster::query::WriteFailure;
use crate::cluster::{Answers, Query, Snapshot};

/// What every request handler shares.
pub struct AppState {
    /// The routing table (`webhooks::WEBHOOKS` in production).
    pub webhooks: &'static [Webhook],
    pub cluster: Arc<ClusterState>,
    /// Answers the webhooks' `queries` (snapshot or API server).
    pub lookups: Lookups,
    pub settings: Settings,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub max_request_bytes: usize,
    /// Bytes of bodies and decoded values held at once (`--max-in-flight-bytes`).
    pub budget: Arc<MemoryBudget>,
    /// Workers for the blocking work, shared fairly between webhooks.
    pub queue: WorkQueue,
    /// `--shadow`: decide everything, enforce nothing (see [`answer_decision`]).
    pub shadow: bool,
    /// `--shadow` in live mode: Pod CREATE decisions wait here for the Pod the API server stores.
    pub agreement: Option<Arc<LiveAgreement>>,
    /// Where the decisions' status writes are made ([`status_writes`]).
    pub status_writes: StatusWrites,
    /// Refusals logged per peer per interval.
    pub refusals: LogSummary<Option<IpAddr>>,
    /// Pods of unknown Namespaces, logged once per interval.
    pub unknown_namespaces: LogSummary<()>,
}

/// One route per webhook path; anything else is a 404.
pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new();
    for webhook in state.webhooks {
        let state = state.clone();
        router = router.route(
            webhook.path,
            any(move |request: Request| {
                let state = state.clone();
                async move { handle(state, webhook, request).await }
            }),
        );
    }
    router.fallback(move |request: Request| async move {
        let started = Instant::now();
        let peer = peer_of(&request);
        let path = request.uri().path().to_owned();
        let error =
            HttpError::new(StatusCode::NOT_FOUND, "not_found", format!("no webhook is served at {path}"));
        // Read the body first, as `refuse` does, so HTTP/2 clients get this answer without a reset.
        drain(request.into_body(), state.max_request_bytes).await;
        error.into_response(&state, peer, &path, started)
    })
}

/// The address the request came from (set by the listener; absent in tests that call the router
/// directly).
fn peer_of(request: &Request) -> Option<IpAddr> {
    request.extensions().get::<Peer>().map(|peer| peer.0.ip())
}

/// A request refused at the HTTP level.
#[derive(Debug)]
struct HttpError {
    status: StatusCode,
    /// The `reason` label of `kruise_admission_http_errors_total`.
    reason: &'static str,
    message: String,
    /// Sent as `Retry-After` (seconds): the refusal is about load, not about the request.
    retry_after: Option<u32>,
}

impl HttpError {
    fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        HttpError { status, reason, message: message.into(), retry_after: None }
    }

    fn retry_after(mut self, seconds: u32) -> Self {
        self.retry_after = Some(seconds);
        self
    }

    fn bad_request(message: impl Into<String>) -> Self {
        HttpError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    fn too_large(limit: usize) -> Self {
        HttpError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body exceeds {limit} bytes (--max-request-bytes)"),
        )
    }

    /// The memory budget refused: 429 while other requests hold it, 413 when it never could fit.
    fn budget(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Busy => HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "memory_busy",
                "too many bytes are being decoded at once (--max-in-flight-bytes); retry shortly",
            )
            .retry_after(1),
            Refusal::Never { wanted, total } => HttpError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large_decoded",
                format!(
                    "decoding this request would take about {wanted} bytes, more than --max-in-flight-bytes ({total})"
                ),
            ),
        }
    }

    fn shed(shed: Shed) -> Self {
        match shed {
            Shed::QueueFull => HttpError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                "too many requests are waiting for a worker; retry shortly",
            )
            .retry_after(1),
            Shed::NoWorker(waited) => HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                format!(
                    "no worker came free within {} ms (half of what was left of the deadline)",
                    waited.as_millis()
                ),
            )
            .retry_after(1),
        }
    }

    /// The refusal's answer; counted every time, logged once per peer per interval (a caller must
    /// not be able to write a log line per request it sends).
    fn into_response(self, state: &AppState, peer: Option<IpAddr>, path: &str, started: Instant) -> Response {
        state.metrics.http_error(self.reason);
        if let Some(suppressed) = state.refusals.note(peer, Instant::now()) {
            tracing::warn!(
                peer = ?peer,
                path,
                code = self.status.as_u16(),
                reason = self.reason,
                error = %self.message,
                latency_us = micros(started),
                suppressed,
                "request refused"
            );
        }
        let body = serde_json::to_vec(&review::error_body(&self.message)).unwrap_or_default();
        let mut response = json_response(self.status, body);
        if self.status == StatusCode::METHOD_NOT_ALLOWED {
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn micros(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// A review that was answered with HTTP 200, and what to log and count about it.
struct Answered {
    body: Vec<u8>,
    /// `body`'s bytes in the memory budget, until the last of them is written.
    held: Held,
    uid: String,
    kind: String,
    object: String,
    operation: &'static str,
    allowed: bool,
    code: u16,
    patch_ops: usize,
    /// Shadow mode: what the decision would have done (the answer sent allowed it unchanged).
    shadow: Option<ShadowNote>,
}

struct ShadowNote {
    outcome: Outcome,
    /// [`shadow::summary`]: the would-be patch's operations and paths, or the denial.
    summary: String,
    /// Warnings the decision had (not sent in shadow mode).
    warnings: usize,
}

async fn handle(state: Arc<AppState>, webhook: &'static Webhook, request: Request) -> Response {
    let started = Instant::now();
    let peer = peer_of(&request);
    match answer(&state, webhook, request).await {
        Ok(answered) => {
            record(&state.metrics, webhook, &answered, started);
            let mut response = Response::new(Body::new(ChargedAnswer::new(answered.body, answered.held)));
            response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Err(error) => error.into_response(&state, peer, webhook.path, started),
    }
}

async fn answer(
    state: &Arc<AppState>,
    webhook: &'static Webhook,
    request: Request,
) -> Result<Answered, HttpError> {
    let limit = state.max_request_bytes;
    if request.method() != Method::POST {
        let message = format!("{} accepts POST only, not {}", webhook.path, request.method());
        return refuse(
            request,
            limit,
            HttpError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message),
        )
        .await;
    }
    if let Err(error) = check_content_type(request.headers()) {
        return refuse(request, limit, error).await;
    }
    let declared = declared_length(request.headers());
    // A body we would not even drain is refused before reading any of it.
    if declared.is_some_and(|len| len > drain_budget(limit)) {
        return Err(HttpError::too_large(limit));
    }
    let deadline = Deadline::new(deadline::from_query(request.uri().query()));
    let work = async {
        // Before the body is read, its cost is what it declares (HTTP/1.1 and HTTP/2 both end a
        // body at its Content-Length); without one it is heavy until read.
        let mut held = state.budget.hold(declared.map_or(Cost::Heavy, Cost::of_body));
        let body = read_body(request.into_body(), limit, declared, &mut held).await?;
        let cost = Cost::of_body(body.len());
        held.set_cost(cost);
        let prepared = {
            let state = state.clone();
            run_work(state.clone(), webhook, Place::of(cost), cost, deadline, move || {
                prepare(&state, webhook, body, held)
            })
            .await?
        };
        let decided = match prepared {
            Prepared::NeedsAnswers(pending) => {
                // Lookups get what is left of the deadline, less a tenth for the decision, so a slow
                // API server yields a denial that says so rather than a bare 504.
                let left = deadline.left();
                let Pending { request, snapshot, queries, held } = *pending;
                let answers = state.lookups.answer(&snapshot, &queries, left.saturating_sub(left / 10)).await;
                let state = state.clone();
                run_work(state.clone(), webhook, Place::Pool, cost, deadline, move || {
                    decide(&state, webhook, request, snapshot, answers, held)
                })
                .await?
            }
            Prepared::Decided(decided) => decided,
        };
        match decided {
            Decided::Answered(answered) => Ok(answered),
            Decided::NeedsWrites(writing) => write_then_answer(state, webhook, *writing, deadline).await,
        }
    };
    match tokio::time::timeout(deadline.length, work).await {
        Ok(result) => result,
        Err(_) => Err(timeout_error(deadline.length)),
    }
}

/// The internal deadline of one request: how long, and from when.
#[derive(Debug, Clone, Copy)]
struct Deadline {
    length: Duration,
    due: Instant,
}

impl Deadline {
    fn new(length: Duration) -> Self {
        Deadline { length, due: Instant::now() + length }
    }

    fn left(&self) -> Duration {
        self.due.saturating_duration_since(Instant::now())
    }
}

/// Where a request's parse and decision run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// On the task that read the request. A cheap review (under `review_cost::SCAN_FROM`, almost
    /// every one the API server sends) decodes and is decided in well under a millisecond: handing
    /// it to a blocking thread and waking the connection again cost more than the work (about
    /// 0.25 ms at p50 on a 2-core VM), and it takes no worker from the queue.
    Inline,
    /// On the blocking pool, through the [`WorkQueue`]: large reviews, whose time grows with their
    /// bytes, and decisions that waited for lookups. There the internal deadline can answer while
    /// the work runs, and a flood of them queues or is shed instead of stalling the async workers
    /// (which also serve the probe port).
    Pool,
}

impl Place {
    fn of(cost: Cost) -> Place {
        match cost {
            Cost::Cheap => Place::Inline,
            Cost::Heavy => Place::Pool,
        }
    }

    /// The `place` label of `kruise_admission_review_work_total`.
    fn as_str(self) -> &'static str {
        match self {
            Place::Inline => "inline",
            Place::Pool => "pool",
        }
    }
}

/// Run a request's parse or decision where `place` says: inline at once, or on the blocking pool
/// once the queue gives it a worker. It waits for one at most half of what is left of the
/// deadline, keeps it until the work ends (even after the request was answered 504), and does not
/// start at all when the deadline passed meanwhile. A panic is a 500 either way.
async fn run_work<T: Send + 'static>(
    state: Arc<AppState>,
    webhook: &'static Webhook,
    place: Place,
    cost: Cost,
    deadline: Deadline,
    work: impl FnOnce() -> Result<T, HttpError> + Send + 'static,
) -> Result<T, HttpError> {
    let worker = match place {
        Place::Inline => None,
        Place::Pool => {
            Some(state.queue.admit(webhook, cost, deadline.left() / 2).await.map_err(HttpError::shed)?)
        }
    };
    let work = move || {
        let _worker = worker;
        if deadline.left().is_zero() {
            return Err(timeout_error(deadline.length));
        }
        state.metrics.review_work.with_label_values(&[webhook.name, place.as_str()]).inc();
        work()
    };
    let failed = |e: &dyn std::fmt::Display| {
        HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "panic", format!("the decision task failed: {e}"))
    };
    match place {
        Place::Inline => std::panic::catch_unwind(AssertUnwindSafe(work))
            .map_err(|payload| failed(&panic_message(payload.as_ref())))?,
        Place::Pool => tokio::task::spawn_blocking(work).await.map_err(|e| failed(&e))?,
    }
}

fn timeout_error(deadline: Duration) -> HttpError {
    HttpError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "timeout",
        format!(
            "no decision within {} ms (internal deadline below the apiserver's timeout)",
            deadline.as_millis()
        ),
    )
}

/// `application/json`, with or without parameters such as `charset`.
fn check_content_type(headers: &HeaderMap) -> Result<(), HttpError> {
    let value = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let media_type = value.split(';').next().unwrap_or_default().trim();
    if media_type.eq_ignore_ascii_case("application/json") {
        return Ok(());
    }
    let shown = if value.is_empty() { "none".to_owned() } else { format!("{value:?}") };
    Err(HttpError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        format!("Content-Type must be application/json, got {shown}"),
    ))
}

fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Read the whole body, at most `limit` bytes, holding them in `held` as they arrive (not as
/// declared: a client that declares a large body and trickles it must not hold the budget with
/// bytes it never sent).
async fn read_body(
    mut body: Body,
    limit: usize,
    declared: Option<usize>,
    held: &mut Held,
) -> Result<Vec<u8>, HttpError> {
    // Reserved, not yet resident: pages are touched as the bytes arrive.
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0).min(limit));
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| HttpError::bad_request(format!("reading the request body failed: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if bytes.len() + data.len() > limit {
            drain(body, limit).await;
            return Err(HttpError::too_large(limit));
        }
        // Held a step ahead, so the budget is not asked for every frame.
        let wanted = bytes.len() + data.len();
        if wanted > held.bytes()
            && let Err(refusal) = held.grow(wanted.max(held.bytes() + BODY_STEP).min(limit) - held.bytes())
        {
            drain(body, limit).await;
            return Err(HttpError::budget(refusal));
        }
        bytes.extend_from_slice(&data);
    }
    Ok(bytes)
}

/// Refuse `request` with `error` once its body has been read and discarded (within the drain
/// budget). Over HTTP/2 an answer sent while the body is still arriving is followed by
/// RST_STREAM(NO_ERROR), which is legal, but some clients (curl) then report a stream error
/// instead of showing our JSON; with the body read, the stream just ends.
async fn refuse<T>(request: Request, limit: usize, error: HttpError) -> Result<T, HttpError> {
    drain(request.into_body(), limit).await;
    Err(error)
}

/// How much more of the budget a body takes at a time.
const BODY_STEP: usize = 256 << 10;

/// How much of an oversized body we still read (and discard) before answering 413.
fn drain_budget(limit: usize) -> usize {
    limit.saturating_mul(2).max(1 << 20)
}

/// Read and discard the rest of an oversized body, within a budget, before answering. An
/// HTTP/1.1 client that is still writing when we answer and close would otherwise see a broken
/// pipe instead of our 413.
async fn drain(mut body: Body, limit: usize) {
    let mut left = drain_budget(limit);
    let discard = async {
        while let Some(Ok(frame)) = body.frame().await {
            let len = frame.data_ref().map_or(0, |d| d.len());
            match left.checked_sub(len) {
                Some(rest) => left = rest,
                None => return,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), discard).await;
}

/// A decoded review, and the lookups its decision reads.
struct Pending {
    request: AdmissionRequest<'static>,
    snapshot: Arc<Snapshot>,
    queries: Vec<Query>,
    /// The decoded request's share of the memory budget, kept until it is decided (then the
    /// answer's).
    held: Held,
}

enum Prepared {
    Decided(Decided),
    /// The webhook named lookups; answer them (asynchronously), then decide.
    NeedsAnswers(Box<Pending>),
}

enum Decided {
    Answered(Answered),
    /// The decision allowed the request and intends status writes: make them, then answer.
    NeedsWrites(Box<Writing>),
}

/// A decision whose status writes are still to be made, with what it was decided on (to decide
/// again after a conflict).
struct Writing {
    request: AdmissionRequest<'static>,
    snapshot: Arc<Snapshot>,
    answers: Answers,
    decision: Decision<'static>,
    held: Held,
}

fn inputs<'a>(state: &'a AppState, snapshot: &'a Snapshot, answers: &'a Answers) -> Inputs<'a> {
    Inputs {
        cluster: snapshot,
        answers,
        clock: state.clock.as_ref(),
        random: &ThreadRandom,
        settings: &state.settings,
    }
}

/// Parse and decode one review and name its lookups; decide it at once when it needs none.
/// Blocking: runs where [`Place::of`] its cost says.
fn prepare(
    state: &AppState,
    webhook: &Webhook,
    body: Vec<u8>,
    mut held: Held,
) -> Result<Prepared, HttpError> {
    // What the values decoded from the body will take, and as much again for the decision's
    // working copy (a mutator edits a clone of the object), held before anything is decoded.
    let parts = review_cost::charge(&body, |decoded| held.grow(decoded.saturating_mul(2)))
        .map_err(HttpError::budget)?;
    // serde_json refuses nesting deeper than 128 levels, so hostile input cannot exhaust the stack.
    let decoded = review::decode_review_body(&body, parts)
        .map_err(|e| HttpError::bad_request(format!("the body is not valid JSON: {e}")))?;
    let request = match decoded {
        Ok(request) => request,
        Err(error) => {
            let Some((version, uid, decision)) = review::decode_error_decision(&error) else {
                return Err(HttpError::bad_request(format!(
                    "not a usable AdmissionReview: {}",
                    error.message
                )));
            };
            return answer_decision(state, version, uid, None, &decision, held)
                .map(|answered| Prepared::Decided(Decided::Answered(answered)));
        }
    };
    let Some(snapshot) = state.cluster.snapshot() else {
        return Err(HttpError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            "cluster objects are not loaded yet",
        ));
    };
    let no_answers = Answers::default();
    let queries = std::panic::catch_unwind(AssertUnwindSafe(|| {
        webhooks::queries(webhook, &request, &inputs(state, &snapshot, &no_answers))
    }))
    .map_err(|payload| panic_error(&request, payload))?;
    if queries.is_empty() {
        return decide(state, webhook, request, snapshot, no_answers, held).map(Prepared::Decided);
    }
    // The request borrows its strings from the body; while the lookups are awaited (rare: deletion
    // protection, CloneSet pods to delete) it owns them instead, and the body goes.
    let request = request.into_owned();
    held.shrink(body.len());
    drop(body);
    Ok(Prepared::NeedsAnswers(Box::new(Pending { request, snapshot, queries, held })))
}

/// Decide a decoded review with its lookups answered. Blocking (inline for a cheap review without
/// lookups, else on the pool); a panic is contained as a 500.
fn decide(
    state: &AppState,
    webhook: &Webhook,
    request: AdmissionRequest,
    snapshot: Arc<Snapshot>,
    answers: Answers,
    held: Held,
) -> Result<Decided, HttpError> {
    // Live agreement needs the Pod as we would have made it: `run` returns it with the decision.
    let agreement = state.agreement.as_ref().filter(|_| LiveAgreement::wants(webhook, &request));
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let inputs = inputs(state, &snapshot, &answers);
        if agreement.is_some() {
            webhooks::run(webhook, &request, &inputs)
        } else {
            webhooks::Outcome { decision: webhooks::decide(webhook, &request, &inputs), mutated: None }
        }
    }))
    .map_err(|payload| panic_error(&request, payload))?;
    count_unchecked(state, webhook, &request, &snapshot);
    // A denial stores no Pod: nothing to compare (it is counted as would-deny).
    if let (Some(agreement), Some(ours)) = (agreement, outcome.mutated.filter(|_| outcome.decision.allowed)) {
        agreement.remember(&request, ours, Instant::now());
    }
    if writes_to_make(state, &request, &outcome.decision) {
        let decision = outcome.decision.into_owned();
        let request = request.into_owned();
        return Ok(Decided::NeedsWrites(Box::new(Writing { request, snapshot, answers, decision, held })));
    }
    answer_decision(state, request.version, &request.uid, Some(&request), &outcome.decision, held)
        .map(Decided::Answered)
}

/// Whether `decision`'s status writes are to be made: it allows the request, which is not a dry
/// run, and this server enforces (shadow mode never writes).
fn writes_to_make(state: &AppState, request: &AdmissionRequest, decision: &Decision) -> bool {
    !decision.writes.is_empty() && decision.allowed && !state.shadow && !writes::is_dry_run(request)
}

/// How many times one request's writes are tried, each after a conflict and a decision on the
/// object read fresh. Kruise's `RetryOnConflict` tries four times, half a second apart; ours wait
/// a random, growing while ([`conflict_pause`]), so more attempts fit well inside the deadline.
const WRITE_ATTEMPTS: u32 = 12;

/// How long to wait after the `n`th conflict (from 1) before reading the object again: a random
/// time up to 4 ms · 2ⁿ⁻¹, at most 250 ms ("full jitter"). Another replica writing the same object
/// in a burst (evictions of one budget, creations in one WorkloadSpread) wins every race a loser
/// retries at once, since it reads nothing between its own writes; waiting lets its burst pass.
fn conflict_pause(n: u32) -> Duration {
    let ceiling = Duration::from_millis(4u64 << n.saturating_sub(1).min(6)).min(Duration::from_millis(250));
    ceiling.mul_f64(rand::random::<f64>())
}

/// Make `writing`'s status writes in order, then answer its decision. On a conflict, the object is
/// read again (a lookup), the request decided again with it, and the new decision's writes made;
/// when a write fails for another reason, or conflicts outlast [`WRITE_ATTEMPTS`], the answer is
/// the write's failure (PodUnavailableBudget: a denial; WorkloadSpread: 500). Writes made before a
/// failure stay made: a decision on the fresh objects sees them and does not repeat them.
async fn write_then_answer(
    state: &Arc<AppState>,
    webhook: &'static Webhook,
    writing: Writing,
    deadline: Deadline,
) -> Result<Answered, HttpError> {
    let Writing { request, snapshot, mut answers, mut decision, held } = writing;
    let request = Arc::new(request);
    let _locks = state.status_writes.lock(decision.writes.iter().map(|w| w.target.clone())).await;
    let mut conflicts = 0;
    for attempt in 1..=WRITE_ATTEMPTS {
        match write_round(state, &snapshot, &decision, &mut answers, deadline, &mut conflicts).await {
            Round::Done => break,
            Round::Failed(error) => {
                decision = Decision::deny(&error);
                break;
            }
            Round::Again if attempt == WRITE_ATTEMPTS => {
                if let Some(write) = decision.writes.first() {
                    let why = format!("it changed during each of {WRITE_ATTEMPTS} attempts");
                    decision = Decision::deny(&write.failure(&why));
                }
                break;
            }
            Round::Again => {
                // Decide again on what was read or written since.
                let (on, about, from) = (state.clone(), request.clone(), snapshot.clone());
                let read = std::mem::take(&mut answers);
                (decision, answers) =
                    run_work(state.clone(), webhook, Place::Pool, Cost::Cheap, deadline, move || {
                        let inputs = inputs(&on, &from, &read);
                        let decided = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            webhooks::decide(webhook, &about, &inputs).into_owned()
                        }))
                        .map_err(|payload| panic_error(&about, payload))?;
                        Ok((decided, read))
                    })
                    .await?;
                if !writes_to_make(state, &request, &decision) {
                    break;
                }
            }
        }
    }
    answer_decision(state, request.version, &request.uid, Some(&request), &decision, held)
}

/// What one round of a decision's writes came to.
enum Round {
    /// Every write was made (or its object is gone).
    Done,
    /// The request must be decided again: an object changed since the decision read it (it is in
    /// the answers now, read fresh or as this server last wrote it).
    Again,
    /// A write failed: the request is answered with this.
    Failed(AdmissionError),
}

async fn write_round(
    state: &AppState,
    snapshot: &Snapshot,
    decision: &Decision<'_>,
    answers: &mut Answers,
    deadline: Deadline,
    conflicts: &mut u32,
) -> Round {
    // What this server wrote since the snapshot was taken is newer than what was decided on.
    let mut stale = false;
    for write in &decision.writes {
        let read = status_writes::resource_version(&write.object);
        if let Some(mine) = state.status_writes.newer(&write.target, read, snapshot) {
            answers.insert(write.target.query(), Ok(vec![mine]));
            stale = true;
        }
    }
    if stale {
        return Round::Again;
    }
    for write in &decision.writes {
        let budget = deadline.left();
        let made = state.lookups.update_status(&state.status_writes, snapshot, &write.target, &write.object);
        let result = tokio::time::timeout(budget, made).await.unwrap_or_else(|_| {
            Err(WriteFailure::Other(format!(
                "the API server did not answer within the request deadline ({} ms)",
                budget.as_millis()
            )))
        });
        let outcome = match &result {
            Ok(_) => "written",
            Err(WriteFailure::Conflict) => "conflict",
            Err(WriteFailure::NotFound) => "not-found",
            Err(WriteFailure::Other(_)) => "failed",
        };
        state.metrics.status_writes.with_label_values(&[write.target.kind.as_str(), outcome]).inc();
        match result {
            Ok(stored) => {
                state.status_writes.remember(&write.target, stored.clone());
                answers.insert(write.target.query(), Ok(vec![stored]));
            }
            // Gone: nothing is left to account in (Kruise counts it as done).
            Err(WriteFailure::NotFound) => {}
            Err(WriteFailure::Conflict) => {
                *conflicts += 1;
                tokio::time::sleep(conflict_pause(*conflicts).min(deadline.left() / 4)).await;
                let query = write.target.query();
                let fresh =
                    state.lookups.answer(snapshot, std::slice::from_ref(&query), deadline.left()).await;
                // Without the fresh object, deciding again would decide on the same stale one.
                match fresh.get(&query) {
                    Ok(objects) => answers.insert(query, Ok(objects.to_vec())),
                    Err(why) => return Round::Failed(write.failure(&why)),
                }
                return Round::Again;
            }
            Err(WriteFailure::Other(why)) => return Round::Failed(write.failure(&why)),
        }
    }
    Round::Done
}

/// Requests let through unchecked because of what they lack (issue 30.5): a DELETE without
/// `oldObject`; a Pod whose Namespace the snapshot does not hold yet, when a SidecarSet selecting
/// namespaces by label is skipped for it (also a WARN, one per interval).
fn count_unchecked(state: &AppState, webhook: &Webhook, request: &AdmissionRequest, snapshot: &Snapshot) {
    if request.operation == Operation::Delete && request.old_object.is_none() {
        state.metrics.delete_without_old_object.with_label_values(&[webhook.name]).inc();
    }
    let pod = request.object.as_ref().filter(|_| {
        webhook.capability == Capability::PodMutation
            && request.kind.group.is_empty()
            && request.kind.kind == "Pod"
    });
    if let Some(pod) = pod
        && !matching::skipped_for_unknown_namespace(pod, &request.namespace, snapshot).is_empty()
    {
        state.metrics.pod_namespace_unknown.with_label_values(&[webhook.name]).inc();
        if let Some(suppressed) = state.unknown_namespaces.note((), Instant::now()) {
            tracing::warn!(
                namespace = %request.namespace,
                object = %request.display_name(),
                suppressed,
                "a Pod of a Namespace the cluster cache does not hold yet: SidecarSets with a namespaceSelector were skipped \
                 for it (kruise_admission_pod_namespace_unknown_total)"
            );
        }
    }
}

/// The one place a decision becomes the AdmissionReview sent back (`about`: the request, when it
/// could be decoded). Without `--shadow` the answer is the decision. With it the answer allows the
/// request unchanged (no patch, no status, no warnings: [`shadow::unenforced`]) whatever was
/// decided, and the decision itself is kept for the metrics and logs ([`record`]). What the request
/// held becomes what the answer holds (usually far less): a 429 when even that cannot be held.
fn answer_decision(
    state: &AppState,
    version: ReviewVersion,
    uid: &str,
    about: Option<&AdmissionRequest>,
    decision: &Decision,
    mut held: Held,
) -> Result<Answered, HttpError> {
    let unenforced;
    let sent = if state.shadow {
        unenforced = shadow::unenforced();
        &unenforced
    } else {
        decision
    };
    let body = review::review_response(version, uid, sent);
    held.set(body.len()).map_err(HttpError::budget)?;
    Ok(Answered {
        body,
        held,
        uid: uid.to_owned(),
        kind: about.map(|r| r.kind.kind.clone()).unwrap_or_default(),
        object: about.map(AdmissionRequest::display_name).unwrap_or_default(),
        operation: about.map_or("", |r| r.operation.as_str()),
        allowed: decision.allowed,
        code: decision.status.as_ref().map_or(200, |s| s.code),
        patch_ops: decision.patch.len(),
        shadow: state.shadow.then(|| ShadowNote {
            outcome: Outcome::of(decision),
            summary: shadow::summary(decision),
            warnings: decision.warnings.len(),
        }),
    })
}

/// How much of an answer is handed to the connection at a time: hyper's HTTP/1.1 writer may copy a
/// frame into its own buffer, and polls for the next only once that has drained, so what it holds
/// outside the budget stays about one chunk per connection.
const ANSWER_CHUNK: usize = 64 << 10;

/// An answer's body, in [`ANSWER_CHUNK`] slices of bytes that own their [`Held`]: the budget is
/// charged until the connection has taken (written, or buffered as one chunk) the last slice, so a
/// client that does not read cannot make answers pile up outside it.
struct ChargedAnswer {
    rest: bytes::Bytes,
}

/// The bytes and their charge, dropped together with the last slice.
struct Owned {
    body: Vec<u8>,
    _held: Held,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

impl ChargedAnswer {
    fn new(body: Vec<u8>, held: Held) -> Self {
        ChargedAnswer { rest: bytes::Bytes::from_owner(Owned { body, _held: held }) }
    }
}

impl hyper::body::Body for ChargedAnswer {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        if self.rest.is_empty() {
            return std::task::Poll::Ready(None);
        }
        let n = self.rest.len().min(ANSWER_CHUNK);
        std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(self.rest.split_to(n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.rest.len() as u64)
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn panic_error(request: &AdmissionRequest, payload: Box<dyn std::any::Any + Send>) -> HttpError {
    let what = panic_message(payload.as_ref());
    tracing::error!(uid = %request.uid, kind = %request.kind.kind, object = %request.display_name(), panic = %what, "decision panicked");
    HttpError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "panic",
        format!("internal error deciding request {}; see the server log", request.uid),
    )
}

fn record(metrics: &Metrics, webhook: &Webhook, a: &Answered, started: Instant) {
    let kind = match webhook.kind() {
        WebhookKind::Mutating => "admit",
        WebhookKind::Validating => "validate",
    };
    let rejected = if a.allowed { "false" } else { "true" };
    let code = a.code.to_string();
    metrics.requests.with_label_values(&[webhook.name, kind, a.operation, code.as_str(), rejected]).inc();
    metrics
        .duration
        .with_label_values(&[webhook.name, kind, a.operation, rejected])
        .observe(started.elapsed().as_secs_f64());
    if !a.allowed {
        metrics
            .rejections
            .with_label_values(&[
                webhook.name,
                kind,
                a.operation,
                webhook.metric_kind(&a.kind),
                code.as_str(),
            ])
            .inc();
    }
    // Denials carry no patch; counting their zeros would only blur the distribution.
    if webhook.kind() == WebhookKind::Mutating && a.allowed {
        metrics.patch_operations.with_label_values(&[webhook.name]).observe(a.patch_ops as f64);
    }
    tracing::info!(
        uid = %a.uid,
        kind = %a.kind,
        object = %a.object,
        operation = a.operation,
        path = webhook.path,
        allowed = a.allowed,
        code = a.code,
        patch_ops = a.patch_ops,
        latency_us = micros(started),
        "admission review"
    );
    if let Some(note) = &a.shadow {
        record_shadow(metrics, webhook, a, note);
    }
}

/// One count and one log line per shadow decision, labelled with the webhook's own name (from the
/// routing table, never from the request).
fn record_shadow(metrics: &Metrics, webhook: &Webhook, a: &Answered, note: &ShadowNote) {
    metrics.shadow_decisions.with_label_values(&[webhook.name, note.outcome.as_str()]).inc();
    let (uid, kind, object, operation, outcome) =
        (&a.uid, &a.kind, &a.object, a.operation, note.outcome.as_str());
    match note.outcome {
        Outcome::WouldPatch => tracing::info!(
            webhook = webhook.name, uid = %uid, kind = %kind, object = %object, operation, outcome,
            patch_ops = a.patch_ops, patch = %note.summary, warnings = note.warnings,
            "shadow decision"
        ),
        Outcome::WouldDeny => tracing::info!(
            webhook = webhook.name, uid = %uid, kind = %kind, object = %object, operation, outcome,
            code = a.code, reason = %note.summary, warnings = note.warnings,
            "shadow decision"
        ),
        Outcome::NoOp => tracing::info!(
            webhook = webhook.name, uid = %uid, kind = %kind, object = %object, operation, outcome,
            warnings = note.warnings,
            "shadow decision"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::SystemClock;
    use crate::admission::draft::Draft;
    use crate::admission::review::AdmissionError;
    use crate::admission::webhooks::{FailurePolicy, Handler, ObjectScope, SideEffects};
    use crate::admission::writes::{Effects, OnFailure, StatusWrite};
    use crate::cluster::Snapshot;
    use crate::cluster::query::Target;
    use serde_json::Value;
    use tower::ServiceExt as _;

    fn panics(_: &AdmissionRequest, _: &mut Draft<'_>, _: &Inputs) -> Result<Effects, AdmissionError> {
        panic!("deliberate test panic")
    }

    fn sleeps(_: &AdmissionRequest, _: &Inputs) -> Result<Effects, AdmissionError> {
        std::thread::sleep(Duration::from_millis(3000));
        Ok(Effects::default())
    }

    fn allows(_: &AdmissionRequest, _: &Inputs) -> Result<Effects, AdmissionError> {
        Ok(Effects::default())
    }

    fn budget_target() -> Target {
        Target {
            group: "test.example".into(),
            version: "v1".into(),
            kind: "Budget".into(),
            namespace: "a".into(),
            name: "budget".into(),
        }
    }

    /// A budget in the shape of a PodUnavailableBudget's: each request named once takes one of
    /// `status.left`, recorded in `status.taken`; none left is a refusal.
    fn consumes(request: &AdmissionRequest, inputs: &Inputs) -> Result<Effects, AdmissionError> {
        let target = budget_target();
        let Some(budget) = writes::current(inputs, &target) else { return Ok(Effects::default()) };
        let taken = budget["status"]["taken"].as_array().cloned().unwrap_or_default();
        if taken.iter().any(|name| name == request.name.as_str()) {
            return Ok(Effects::default());
        }
        let left = budget["status"]["left"].as_i64().unwrap_or(0);
        if left <= 0 {
            return Err(AdmissionError::Forbidden("no budget left".into()));
        }
        if writes::is_dry_run(request) {
            return Ok(Effects::default());
        }
        let mut object = budget.as_ref().clone();
        object["status"]["left"] = Value::from(left - 1);
        object["status"]["taken"] = Value::Array([taken, vec![Value::from(request.name.as_str())]].concat());
        let on_failure = OnFailure::Deny;
        Ok(Effects { warnings: Vec::new(), writes: vec![StatusWrite { target, object, on_failure }] })
    }

    static TEST_WEBHOOKS: &[Webhook] = &[
        Webhook {
            name: "panic.test",
            path: "/panic",
            rules: &[],
            handler: Handler::Mutate(panics),
            queries: None,
            failure_policy: FailurePolicy::Ignore,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::PodMutation,
        },
        Webhook {
            name: "slow.test",
            path: "/slow",
            rules: &[],
            handler: Handler::Validate(sleeps),
            queries: None,
            failure_policy: FailurePolicy::Fail,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::WorkloadRules,
        },
        Webhook {
            name: "allow.test",
            path: "/allow",
            rules: &[],
            handler: Handler::Validate(allows),
            queries: None,
            failure_policy: FailurePolicy::Fail,
            scope: ObjectScope::All,
            side_effects: SideEffects::None,
            capability: Capability::WorkloadRules,
        },
        Webhook {
            name: "consume.test",
            path: "/consume",
            rules: &[],
            handler: Handler::Validate(consumes),
            queries: None,
            failure_policy: FailurePolicy::Fail,
            side_effects: SideEffects::NoneOnDryRun,
            scope: ObjectScope::All,
            capability: Capability::WorkloadRules,
        },
    ];

    fn app() -> (Router, Arc<AppState>) {
        app_on(Snapshot::default())
    }

    fn app_on(snapshot: Snapshot) -> (Router, Arc<AppState>) {
        let metrics = Arc::new(Metrics::new().unwrap());
        let cluster = Arc::new(ClusterState::default());
        cluster.set_for_tests(Arc::new(snapshot));
        let state = AppState {
            webhooks: TEST_WEBHOOKS,
            cluster,
            lookups: Lookups::Snapshot,
            settings: Settings::default(),
            clock: Arc::new(SystemClock),
            metrics,
            max_request_bytes: 1 << 20,
            budget: MemoryBudget::new(64 << 20),
            queue: WorkQueue::new(4, TEST_WEBHOOKS),
            shadow: false,
            agreement: None,
            status_writes: StatusWrites::default(),
            refusals: LogSummary::default(),
            unknown_namespaces: LogSummary::default(),
        };
        let state = Arc::new(state);
        (router(state.clone()), state)
    }

    fn review() -> Value {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "object": {"metadata": {"name": "p"}, "spec": {}}}
        })
    }

    /// The review padded past `SCAN_FROM`: decided on the worker pool.
    fn heavy_review() -> Value {
        let mut review = review();
        review["request"]["object"]["metadata"]["annotations"] =
            serde_json::json!({"filler": "x".repeat(review_cost::SCAN_FROM)});
        review
    }

    fn post_review(path: &str, review: &Value) -> Request {
        Request::post(path)
            .header(CONTENT_TYPE, "application/json")
            .body(Body::from(review.to_string()))
            .unwrap()
    }

    fn post(path: &str) -> Request {
        post_review(path, &review())
    }

    async fn json(response: Response) -> Value {
        serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap()
    }

    #[test]
    fn conflict_pauses_grow_to_a_quarter_second_at_most() {
        for n in 1..=WRITE_ATTEMPTS {
            let ceiling = Duration::from_millis((4u64 << (n - 1).min(6)).min(250));
            assert!((0..50).all(|_| conflict_pause(n) <= ceiling), "after conflict {n}");
        }
        assert!((0..50).any(|_| conflict_pause(8) > Duration::from_millis(4)), "they grow");
    }

    fn named_review(name: &str, dry_run: bool) -> Value {
        let mut review = review();
        review["request"]["uid"] = Value::from(name);
        review["request"]["name"] = Value::from(name);
        review["request"]["dryRun"] = Value::from(dry_run);
        review
    }

    /// Many requests at once on one budget of 10: exactly 10 are allowed, each recorded once; the
    /// others are refused; a dry run and a request already recorded change nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_requests_consume_a_budget_exactly_once_each() {
        let budget = serde_json::json!({
            "apiVersion": "test.example/v1", "kind": "Budget",
            "metadata": {"namespace": "a", "name": "budget", "resourceVersion": "41"},
            "status": {"left": 10, "taken": []}
        });
        let (app, state) = app_on(Snapshot::from_objects([budget]));
        let calls = (0..40).map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let response =
                    app.oneshot(post_review("/consume", &named_review(&format!("p{i}"), false))).await;
                json(response.unwrap()).await["response"]["allowed"].as_bool().unwrap()
            })
        });
        let mut allowed = 0;
        for call in calls.collect::<Vec<_>>() {
            allowed += usize::from(call.await.unwrap());
        }
        assert_eq!(allowed, 10);
        let stored = state.status_writes.newer(&budget_target(), 0, &Snapshot::default()).unwrap();
        assert_eq!(stored["status"]["left"], 0);
        assert_eq!(stored["status"]["taken"].as_array().unwrap().len(), 10);
        assert_eq!(stored["metadata"]["resourceVersion"], "51");
        let taken = stored["status"]["taken"][0].as_str().unwrap().to_owned();
        // Already recorded: allowed, nothing written.
        let again =
            json(app.clone().oneshot(post_review("/consume", &named_review(&taken, false))).await.unwrap());
        assert_eq!(again.await["response"]["allowed"], true);
        let metrics = state.metrics.render();
        assert!(
            metrics.contains(r#"kruise_admission_status_writes_total{kind="Budget",result="written"} 10"#),
            "{metrics}"
        );
    }

    #[tokio::test]
    async fn a_dry_run_writes_nothing() {
        let budget = serde_json::json!({
            "apiVersion": "test.example/v1", "kind": "Budget",
            "metadata": {"namespace": "a", "name": "budget", "resourceVersion": "1"},
            "status": {"left": 1, "taken": []}
        });
        let (app, state) = app_on(Snapshot::from_objects([budget]));
        for _ in 0..3 {
            let response =
                app.clone().oneshot(post_review("/consume", &named_review("p", true))).await.unwrap();
            assert_eq!(json(response).await["response"]["allowed"], true);
        }
        assert!(state.status_writes.newer(&budget_target(), 0, &Snapshot::default()).is_none());
        let response = app.clone().oneshot(post_review("/consume", &named_review("q", false))).await.unwrap();
        assert_eq!(json(response).await["response"]["allowed"], true);
        let response = app.oneshot(post_review("/consume", &named_review("r", false))).await.unwrap();
        let refused = json(response).await;
        assert_eq!(refused["response"]["allowed"], false);
        assert_eq!(refused["response"]["status"]["message"], "no budget left");
    }

    #[tokio::test]
    async fn a_panicking_decision_is_a_500_and_the_router_keeps_serving() {
        let (app, state) = app();
        for request in [post("/panic"), post_review("/panic", &heavy_review())] {
            let response = app.clone().oneshot(request).await.unwrap();
            assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert!(json(response).await["error"].as_str().unwrap().contains("u1"));
        }
        let metrics = state.metrics.render();
        assert!(metrics.contains("kruise_admission_http_errors_total{reason=\"panic\"} 2"), "{metrics}");
        for place in ["inline", "pool"] {
            let line =
                format!("kruise_admission_review_work_total{{name=\"panic.test\",place=\"{place}\"}} 1");
            assert!(metrics.contains(&line), "{metrics}");
        }
    }

    /// Every worker of the pool is held: a cheap review is still decided at once, where it
    /// arrived; a large one waits for a worker and is shed when none comes, then is served on the
    /// pool once one is free.
    #[tokio::test]
    async fn a_cheap_review_is_decided_inline_while_every_worker_is_busy() {
        let (app, state) = app();
        let mut busy = Vec::new();
        for webhook in TEST_WEBHOOKS {
            while let Ok(worker) = state.queue.admit(webhook, Cost::Cheap, Duration::ZERO).await {
                busy.push(worker);
            }
        }
        assert_eq!(busy.len(), 4, "the test holds every worker");

        let started = Instant::now();
        let response = app.clone().oneshot(post("/allow?timeout=2s")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(json(response).await["response"]["allowed"], true);
        assert!(started.elapsed() < Duration::from_millis(500), "{:?}", started.elapsed());

        let response = app.clone().oneshot(post_review("/allow?timeout=1s", &heavy_review())).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE, "no worker for the large review");

        drop(busy);
        let response = app.oneshot(post_review("/allow?timeout=1s", &heavy_review())).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let metrics = state.metrics.render();
        for place in ["inline", "pool"] {
            let line =
                format!("kruise_admission_review_work_total{{name=\"allow.test\",place=\"{place}\"}} 1");
            assert!(metrics.contains(&line), "{metrics}");
        }
    }

    /// A slow decision of a large review (on the pool) is answered 504 at the deadline.
    #[tokio::test]
    async fn a_decision_past_the_deadline_is_a_504() {
        let (app, state) = app();
        let metrics = &state.metrics;
        let started = Instant::now();
        let response = app.oneshot(post_review("/slow?timeout=1s", &heavy_review())).await.unwrap();
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(900) && elapsed < Duration::from_millis(2500),
            "{elapsed:?}"
        );
        assert!(json(response).await["error"].as_str().unwrap().contains("900 ms"));
        assert!(metrics.render().contains("kruise_admission_http_errors_total{reason=\"timeout\"} 1"));
    }

    #[tokio::test]
    async fn without_a_snapshot_reviews_are_refused_with_503() {
        let metrics = Arc::new(Metrics::new().unwrap());
        let state = AppState {
            webhooks: TEST_WEBHOOKS,
            cluster: Arc::new(ClusterState::default()),
            lookups: Lookups::Snapshot,
            settings: Settings::default(),
            clock: Arc::new(SystemClock),
            metrics,
            max_request_bytes: 1 << 20,
            budget: MemoryBudget::new(64 << 20),
            queue: WorkQueue::new(4, TEST_WEBHOOKS),
            shadow: false,
            agreement: None,
            status_writes: StatusWrites::default(),
            refusals: LogSummary::default(),
            unknown_namespaces: LogSummary::default(),
        };
        let response = router(Arc::new(state)).oneshot(post("/panic")).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
