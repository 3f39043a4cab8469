//! How live mode waits out an API server that does not answer (or refuses its credentials), and
//! how quickly it comes back.
//!
//! - [`Backoff`]: one loop's retry delay, doubling up to a cap, spread by jitter.
//! - [`FailureLog`]: what one failing loop says: a WARN naming the cause when it starts failing,
//!   one summary per [`SUMMARY_INTERVAL`] while it fails, one INFO with the duration when it is
//!   healthy again. The loops' own messages carry the cause, so `serve`'s default log filter
//!   leaves out the client library's ERROR line per failed request.
//! - [`Recovery`]: shared by the loops of one client. A failure any request would meet (no
//!   answer, credentials refused) marks the API server down; while it is, one cheap request
//!   (`GET /readyz`, which every authenticated identity may read) probes it every
//!   `probe_interval`. The first success of any request, probe or list or watch, wakes every loop
//!   waiting in its backoff: it retries after a random pause below [`WAKE_JITTER`], with at most
//!   [`MAX_CONCURRENT_RELISTS`] relists at once. Without this, loops that had backed off to the
//!   30 s cap noticed the API server up to 30 s after it answered again.
//!
//! The pure parts take the time and the random numbers as arguments, so their tests need neither.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit, watch};

use super::api_error::{ApiFailure, FailureKind};

/// A failing loop logs a summary this often (and a WARN at the start, an INFO at the end).
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(60);
/// Woken loops retry after a random pause below this, so they do not all hit the API server in
/// the same millisecond.
pub const WAKE_JITTER: Duration = Duration::from_millis(500);
/// At most this many full lists run at once per client after an outage: lists are what costs the
/// API server (and etcd) most.
pub const MAX_CONCURRENT_RELISTS: usize = 2;
/// How much of a delay jitter may add (20 %): spreads replicas that failed at the same moment.
const JITTER: f64 = 0.2;

/// Exponential backoff, `min` doubling up to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff { min, max, next: min }
    }

    pub fn reset(&mut self) {
        self.next = self.min;
    }

    /// The delay before the next attempt, stretched by up to 20 % by `unit` (a random number in
    /// `[0, 1)`); the one after it is twice as long, up to `max`.
    pub fn next_delay(&mut self, unit: f64) -> Duration {
        let delay = self.next + self.next.mul_f64(unit.clamp(0.0, 1.0) * JITTER);
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Sleep for [`Backoff::next_delay`].
    pub async fn wait(&mut self) {
        tokio::time::sleep(self.next_delay(rand::random())).await;
    }
}

/// What a failing loop should log now (see [`FailureLog`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// It started failing (WARN, with the cause).
    Started,
    /// Still failing: a summary (WARN) of the attempts since the last line.
    Ongoing { failing_for: Duration, attempts: u64 },
    /// Healthy again (INFO) after failing this long.
    Recovered { after: Duration, attempts: u64 },
}

#[derive(Debug, Clone)]
struct Spell {
    since: Instant,
    last_line: Instant,
    attempts: u64,
    attempts_since_line: u64,
}

/// The log of one loop's failures: a few lines per failure spell however long it lasts.
#[derive(Debug, Clone)]
pub struct FailureLog {
    interval: Duration,
    spell: Option<Spell>,
}

impl Default for FailureLog {
    fn default() -> Self {
        FailureLog::new(SUMMARY_INTERVAL)
    }
}

impl FailureLog {
    pub fn new(interval: Duration) -> Self {
        FailureLog { interval, spell: None }
    }

    /// An attempt failed at `now`; the failure began at `began` (earlier than `now` for a
    /// watch found silent: it had been failing since it last heard from the API server).
    pub fn failed(&mut self, began: Instant, now: Instant) -> Option<Line> {
        match &mut self.spell {
            None => {
                self.spell = Some(Spell {
                    since: began.min(now),
                    last_line: now,
                    attempts: 1,
                    attempts_since_line: 0,
                });
                Some(Line::Started)
            }
            Some(spell) => {
                spell.attempts += 1;
                spell.attempts_since_line += 1;
                if now.saturating_duration_since(spell.last_line) < self.interval {
                    return None;
                }
                let line = Line::Ongoing {
                    failing_for: now.saturating_duration_since(spell.since),
                    attempts: spell.attempts_since_line,
                };
                spell.last_line = now;
                spell.attempts_since_line = 0;
                Some(line)
            }
        }
    }

    /// An attempt succeeded at `now`.
    pub fn recovered(&mut self, now: Instant) -> Option<Line> {
        let spell = self.spell.take()?;
        Some(Line::Recovered { after: now.saturating_duration_since(spell.since), attempts: spell.attempts })
    }

    /// When the current failure spell began.
    pub fn failing_since(&self) -> Option<Instant> {
        self.spell.as_ref().map(|s| s.since)
    }
}

/// A failure every request to the API server would meet now, rather than one about a resource
/// (RBAC, a missing CRD, an expired resourceVersion).
pub fn affects_every_request(kind: FailureKind) -> bool {
    matches!(kind, FailureKind::Unreachable | FailureKind::Unauthorized)
}

/// Whether the API server of one client answers, shared by the loops that use the client.
pub struct Recovery {
    down: AtomicBool,
    /// Bumped on every down -> up transition; each loop holds a receiver.
    answered: watch::Sender<u64>,
    relists: Semaphore,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            down: AtomicBool::new(false),
            answered: watch::Sender::new(0),
            relists: Semaphore::new(MAX_CONCURRENT_RELISTS),
        }
    }
}

impl Recovery {
    /// A new one, with its probe running on `client` every `probe_interval` while the API server
    /// is down, until the returned handle is dropped (or aborted).
    pub fn start(
        client: kube::Client,
        probe_interval: Duration,
    ) -> (Arc<Recovery>, tokio::task::JoinHandle<()>) {
        let recovery = Arc::new(Recovery::default());
        let probe = tokio::spawn(probe(Arc::downgrade(&recovery), client, probe_interval));
        (recovery, probe)
    }

    /// A request met `failure`.
    pub fn failed(&self, failure: &ApiFailure) {
        if affects_every_request(failure.kind) {
            self.down.store(true, Ordering::Release);
        }
    }

    /// A request was answered: wake every loop waiting in its backoff, if the API server was down.
    pub fn answered(&self) {
        if self.down.swap(false, Ordering::AcqRel) {
            self.answered.send_modify(|n| *n += 1);
        }
    }

    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// A handle for one loop (see [`Waiter::pause`]).
    pub fn waiter(self: &Arc<Self>) -> Waiter {
        Waiter { answered: self.answered.subscribe(), recovery: Arc::clone(self) }
    }

    /// Hold this while listing: at most [`MAX_CONCURRENT_RELISTS`] lists at once.
    pub async fn relist_permit(&self) -> Option<SemaphorePermit<'_>> {
        self.relists.acquire().await.ok()
    }
}

/// One loop's view of [`Recovery`].
pub struct Waiter {
    answered: watch::Receiver<u64>,
    recovery: Arc<Recovery>,
}

impl Waiter {
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// This loop's request succeeded: tell the others, and forget the wake-ups it caused.
    pub fn answered(&mut self) {
        self.recovery.answered();
        self.answered.borrow_and_update();
    }

    /// This loop's request failed: an outage if every request would meet the failure, otherwise
    /// the API server answered (a refusal, a 404, a 500 are answers).
    pub fn failed(&mut self, failure: &ApiFailure) {
        if affects_every_request(failure.kind) {
            self.recovery.failed(failure);
        } else {
            self.answered();
        }
    }

    /// Wait out `backoff`'s next delay, or less: when the API server answers someone meanwhile
    /// (or did since this loop last succeeded), retry after a random pause below
    /// [`WAKE_JITTER`], the backoff starting over.
    pub async fn pause(&mut self, backoff: &mut Backoff) {
        let delay = backoff.next_delay(rand::random());
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            Ok(()) = self.answered.changed() => {
                self.answered.borrow_and_update();
                backoff.reset();
                tokio::time::sleep(WAKE_JITTER.mul_f64(rand::random())).await;
            }
        }
    }
}

/// While the API server is down, ask it `GET /readyz` every `interval` (with jitter); a 200 marks
/// it answering. Ends when the [`Recovery`] is dropped.
async fn probe(recovery: std::sync::Weak<Recovery>, client: kube::Client, interval: Duration) {
    loop {
        tokio::time::sleep(interval + interval.mul_f64(rand::random::<f64>() * JITTER)).await;
        let Some(recovery) = recovery.upgrade() else { return };
        if !recovery.is_down() {
            continue;
        }
        let request = match hyper::Request::get("/readyz").body(Vec::new()) {
            Ok(request) => request,
            Err(_) => continue,
        };
        // Bounded by the interval: a probe stuck on a dead connection must not delay the next.
        let answer =
            tokio::time::timeout(interval.max(Duration::from_secs(1)), client.request_text(request)).await;
        if let Ok(Ok(_)) = answer {
            recovery.answered();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn backoff_doubles_to_the_cap_and_starts_over_on_reset() {
        let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(4));
        let delays: Vec<Duration> = (0..6).map(|_| b.next_delay(0.0)).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 4000, 4000].map(Duration::from_millis));
        b.reset();
        assert_eq!(b.next_delay(0.0), Duration::from_millis(500));
    }

    #[test]
    fn jitter_stretches_a_delay_by_at_most_a_fifth() {
        let mut b = Backoff::new(S, S);
        assert_eq!(b.next_delay(0.5), Duration::from_millis(1100));
        assert_eq!(b.next_delay(0.999_999), Duration::from_millis(1200) - Duration::from_nanos(200));
        // Out-of-range numbers cannot shrink or blow up the delay.
        assert_eq!(b.next_delay(-3.0), S);
        assert_eq!(b.next_delay(7.0), Duration::from_millis(1200));
    }

    #[test]
    fn a_failure_spell_logs_once_at_the_start_then_once_per_interval_then_its_end() {
        let t0 = Instant::now();
        let mut log = FailureLog::new(Duration::from_secs(60));
        assert_eq!(log.failed(t0, t0), Some(Line::Started));
        // Retries every few seconds say nothing until the interval has passed.
        for s in [1, 3, 7, 15, 30, 59] {
            assert_eq!(log.failed(t0 + s * S, t0 + s * S), None, "at {s}s");
        }
        assert_eq!(
            log.failed(t0 + 61 * S, t0 + 61 * S),
            Some(Line::Ongoing { failing_for: 61 * S, attempts: 7 })
        );
        assert_eq!(log.failed(t0 + 90 * S, t0 + 90 * S), None);
        assert_eq!(log.failing_since(), Some(t0));
        assert_eq!(log.recovered(t0 + 95 * S), Some(Line::Recovered { after: 95 * S, attempts: 9 }));
        assert_eq!(log.failing_since(), None);
        // Healthy and healthy again: nothing to say.
        assert_eq!(log.recovered(t0 + 96 * S), None);
        // A new spell starts with a WARN again.
        assert_eq!(log.failed(t0 + 97 * S, t0 + 97 * S), Some(Line::Started));
    }

    #[test]
    fn a_silent_watch_has_been_failing_since_it_last_heard_from_the_api_server() {
        let heard = Instant::now();
        let found = heard + 35 * S;
        let mut log = FailureLog::default();
        assert_eq!(log.failed(heard, found), Some(Line::Started));
        assert_eq!(log.failing_since(), Some(heard));
        assert_eq!(log.recovered(found + S), Some(Line::Recovered { after: 36 * S, attempts: 1 }));
    }

    fn failure(kind: FailureKind) -> ApiFailure {
        ApiFailure { kind, message: String::new() }
    }

    #[test]
    fn only_failures_every_request_meets_mark_the_api_server_down() {
        for kind in [FailureKind::Unreachable, FailureKind::Unauthorized] {
            assert!(affects_every_request(kind), "{kind:?}");
        }
        for kind in [FailureKind::Forbidden, FailureKind::NotFound, FailureKind::Gone, FailureKind::Other] {
            assert!(!affects_every_request(kind), "{kind:?}");
        }
    }

    #[tokio::test]
    async fn an_answer_wakes_waiting_loops_long_before_their_backoff_ends() {
        let recovery = Arc::new(Recovery::default());
        let mut waiter = recovery.waiter();
        recovery.failed(&failure(FailureKind::Unreachable));
        assert!(recovery.is_down());
        let mut backoff = Backoff::new(Duration::from_secs(30), Duration::from_secs(30));
        let started = Instant::now();
        let pause = tokio::spawn(async move {
            waiter.pause(&mut backoff).await;
            backoff.next_delay(0.0)
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        recovery.answered();
        let next = tokio::time::timeout(5 * S, pause).await.expect("not woken").unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < 2 * S, "waited {waited:?}");
        assert!(!recovery.is_down());
        // Started over: the backoff's first delay again (its minimum, here the cap).
        assert_eq!(next, Duration::from_secs(30));
    }

    #[tokio::test]
    async fn without_an_outage_a_loop_waits_its_whole_backoff() {
        let recovery = Arc::new(Recovery::default());
        let mut waiter = recovery.waiter();
        // A resource-specific failure (RBAC) does not mark the API server down, and an answer
        // then wakes nobody.
        recovery.failed(&failure(FailureKind::Forbidden));
        assert!(!recovery.is_down());
        let mut backoff = Backoff::new(Duration::from_millis(800), Duration::from_millis(800));
        let started = Instant::now();
        let pause = tokio::spawn(async move { waiter.pause(&mut backoff).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        recovery.answered();
        pause.await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(800), "woke after {:?}", started.elapsed());
    }

    #[tokio::test]
    async fn relists_are_capped() {
        let recovery = Recovery::default();
        let held: Vec<_> =
            futures_util::future::join_all((0..MAX_CONCURRENT_RELISTS).map(|_| recovery.relist_permit()))
                .await;
        assert!(held.iter().all(Option::is_some));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), recovery.relist_permit()).await.is_err(),
            "a relist beyond the cap did not wait"
        );
        drop(held);
        assert!(recovery.relist_permit().await.is_some());
    }
}
