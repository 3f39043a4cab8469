//! The queue in front of the blocking pool (issue 17.5). Parsing and deciding large reviews, and
//! deciding after lookups, run on blocking threads (cheap reviews are decided inline:
//! `app::Place`), and a blocking task cannot be stopped once it runs: before this queue, a 504 answered
//! the client while the work went on, and a flood of slow requests filled the pool until every
//! request behind it timed out.
//!
//! Now a request needs a worker before its blocking work is spawned, and holds it until that work
//! really ends (answered or not), so the number of workers, not the flood, bounds what runs.
//! - No webhook may hold more than half of the workers: a slow or attacked webhook cannot starve
//!   the others (pod CREATEs keep their share while a SidecarSet flood queues behind its own).
//! - A request waits for a worker at most half of what is left of its deadline, then is shed with
//!   503 and `Retry-After`; when [`MAX_WAITING`] requests already wait, it is shed at once with 429.
//!   The apiserver treats both as a failed call (failurePolicy), as it would our 504, but sooner.
//! - Work whose deadline passed while it waited is not started (see `app::on_worker`).
//! - Heavy work (large bodies, [`Cost`]) holds at most three quarters of the workers, and all but
//!   one of a webhook's share: the rest is kept for cheap work (issue 30.6).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::admission::review_cost::Cost;
use crate::admission::webhooks::Webhook;

/// Workers for parsing and deciding. The runtime gets a few more blocking threads than this (see
/// `server::runtime`), so file reads and the cluster reload never queue behind decisions; with 2
/// cores, 8 already keep both busy while some wait on memory or the allocator.
pub const DEFAULT_WORKERS: usize = 8;

/// A backstop on requests waiting for a worker. What sheds first is the wait bounded by each
/// request's deadline, and the memory budget their bodies hold; this only caps the bookkeeping.
/// It is well above a burst the apiserver sends: a bound of 32 turned 64 concurrent small reviews
/// (`tests/serve.rs`) into 429s, which `/mutate-pod`'s failurePolicy Ignore would have admitted
/// without sidecars.
pub const MAX_WAITING: usize = 1024;

#[derive(Debug)]
pub struct WorkQueue {
    workers: Arc<Semaphore>,
    /// The workers [`Cost::Heavy`] work may hold: all but a quarter (at least one).
    heavy: Arc<Semaphore>,
    /// Each webhook's share, by path.
    shares: HashMap<&'static str, Share>,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// A webhook's share of the workers, and the part of it heavy work may hold (all but one).
#[derive(Debug, Clone)]
struct Share {
    all: Arc<Semaphore>,
    heavy: Arc<Semaphore>,
}

impl Share {
    fn new(workers: usize) -> Self {
        Share {
            all: Arc::new(Semaphore::new(workers)),
            heavy: Arc::new(Semaphore::new(workers.saturating_sub(1).max(1))),
        }
    }
}

/// Why a request was not given a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// Too many requests already wait (429).
    QueueFull,
    /// No worker came free within the wait its deadline allowed (503).
    NoWorker(Duration),
}

/// A worker, held while its blocking work runs (with, for heavy work, its places in the heavy
/// parts of the pool and of the webhook's share).
#[derive(Debug)]
pub struct Worker {
    _permits: Vec<OwnedSemaphorePermit>,
}

impl WorkQueue {
    /// `workers` in all, half of them (at least one) per webhook, and at most [`MAX_WAITING`]
    /// requests waiting.
    pub fn new(workers: usize, webhooks: &[Webhook]) -> Self {
        let workers = workers.max(1);
        let share = workers.div_ceil(2);
        WorkQueue {
            workers: Arc::new(Semaphore::new(workers)),
            heavy: Arc::new(Semaphore::new((workers - workers / 4).max(1))),
            shares: webhooks.iter().map(|w| (w.path, Share::new(share))).collect(),
            waiting: AtomicUsize::new(0),
            max_waiting: MAX_WAITING,
        }
    }

    /// A worker for `webhook`'s work of `cost`, waiting at most `wait`.
    pub async fn admit(&self, webhook: &Webhook, cost: Cost, wait: Duration) -> Result<Worker, Shed> {
        let share = self.shares.get(webhook.path).cloned().unwrap_or_else(|| Share::new(1));
        // Always taken in this order, so two requests never wait for each other's permits.
        let semaphores: Vec<Arc<Semaphore>> = match cost {
            Cost::Cheap => vec![share.all, self.workers.clone()],
            Cost::Heavy => vec![share.heavy, share.all, self.heavy.clone(), self.workers.clone()],
        };
        // The fast path: every permit free, without queueing.
        let free: Vec<OwnedSemaphorePermit> =
            semaphores.iter().map_while(|s| s.clone().try_acquire_owned().ok()).collect();
        if free.len() == semaphores.len() {
            return Ok(Worker { _permits: free });
        }
        drop(free);
        let _waiting = Waiting::enter(&self.waiting, self.max_waiting).ok_or(Shed::QueueFull)?;
        let acquire = async {
            let mut permits = Vec::with_capacity(semaphores.len());
            for semaphore in &semaphores {
                permits.push(semaphore.clone().acquire_owned().await.ok()?);
            }
            Some(Worker { _permits: permits })
        };
        tokio::time::timeout(wait, acquire).await.ok().flatten().ok_or(Shed::NoWorker(wait))
    }
}

/// One place in the waiting count, left when dropped (also when the request is).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn enter(count: &'a AtomicUsize, max: usize) -> Option<Self> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .ok()
            .map(|_| Waiting(count))
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::webhooks::WEBHOOKS;

    #[tokio::test]
    async fn one_webhook_gets_half_and_the_rest_is_left_to_others() {
        let queue = WorkQueue::new(4, WEBHOOKS);
        let (pods, other) = (&WEBHOOKS[0], &WEBHOOKS[1]);
        let short = Duration::from_millis(20);
        let a = queue.admit(pods, Cost::Cheap, short).await.unwrap();
        let _b = queue.admit(pods, Cost::Cheap, short).await.unwrap();
        assert_eq!(
            queue.admit(pods, Cost::Cheap, short).await.unwrap_err(),
            Shed::NoWorker(short),
            "a webhook's share is half"
        );
        let _c = queue.admit(other, Cost::Cheap, short).await.unwrap();
        drop(a);
        let _d = queue.admit(pods, Cost::Cheap, short).await.unwrap();
    }

    #[tokio::test]
    async fn heavy_work_leaves_workers_to_cheap_work() {
        let queue = WorkQueue::new(8, WEBHOOKS);
        let short = Duration::from_millis(20);
        let mut heavy = Vec::new();
        for webhook in &WEBHOOKS[..3] {
            while let Ok(worker) = queue.admit(webhook, Cost::Heavy, short).await {
                heavy.push(worker);
            }
        }
        assert_eq!(heavy.len(), 6, "heavy work holds all but a quarter of the workers");
        for webhook in &WEBHOOKS[..2] {
            let cheap = queue.admit(webhook, Cost::Cheap, short).await;
            assert!(cheap.is_ok(), "{}: a webhook's heavy work leaves one of its share", webhook.name);
        }
    }

    #[tokio::test]
    async fn waiting_is_bounded() {
        let queue = Arc::new(WorkQueue { max_waiting: 4, ..WorkQueue::new(1, WEBHOOKS) });
        let _held = queue.admit(&WEBHOOKS[0], Cost::Cheap, Duration::ZERO).await.unwrap();
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let queue = queue.clone();
                tokio::spawn(async move {
                    queue.admit(&WEBHOOKS[0], Cost::Cheap, Duration::from_secs(5)).await.map(drop)
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            queue.admit(&WEBHOOKS[0], Cost::Cheap, Duration::from_secs(5)).await.unwrap_err(),
            Shed::QueueFull
        );
        for waiter in waiters {
            waiter.abort();
        }
    }
}
