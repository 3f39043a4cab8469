//! One budget for the memory requests hold at once: their bodies as they are read, then what the
//! bodies decode into (issue 17.1), then their answers until the last byte is written to the
//! connection (issue 30.1: a client that never reads would otherwise hold its answers uncharged
//! until the idle timeout). A request that does not fit right now is refused with 429 and
//! `Retry-After` instead of waiting: the apiserver counts that as a failed call and applies the
//! webhook's failurePolicy, which is what would happen anyway if the Pod were OOM-killed, minus the
//! restart and the other requests lost with it.
//!
//! The last [`reserve`](MemoryBudget::reserve) bytes are for cheap requests only ([`Cost`], issue
//! 30.6): a flood of multi-MiB reviews can fill the rest, but not keep out the small Pod CREATEs
//! that make up the API server's ordinary traffic.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::admission::review_cost::Cost;

/// The budget without `--max-in-flight-bytes` and without a container memory limit to derive it
/// from (`memory_limit`). It admits the largest review the apiserver sends (an
/// UPDATE of two 3 MiB objects dense with small values is charged about 130 MiB) and, with the
/// idle process (~30 MiB: runtime, TLS, cluster snapshot) and what the charge over-counts
/// (it bounds the real peak, typically by 1.1–2×), stays inside the Deployment's 256Mi limit.
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = 160 << 20;

/// Bytes, counted in an atomic. The total may be resized while requests hold some of it (a
/// budget derived from the memory limit follows the caches): a smaller total refuses new holds
/// until enough is given back.
#[derive(Debug)]
pub struct MemoryBudget {
    used: AtomicUsize,
    total: AtomicUsize,
}

/// Why a request cannot hold more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Other requests hold the rest now: retry later (429).
    Busy,
    /// More than the whole budget: never (413).
    Never { wanted: usize, total: usize },
}

impl MemoryBudget {
    pub fn new(total: usize) -> Arc<Self> {
        Arc::new(MemoryBudget { used: AtomicUsize::new(0), total: AtomicUsize::new(total.max(1)) })
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    pub fn resize(&self, total: usize) {
        self.total.store(total.max(1), Ordering::Release);
    }

    /// Bytes requests hold now.
    pub fn held(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    /// Nothing held yet, for a request of `cost`.
    pub fn hold(self: &Arc<Self>, cost: Cost) -> Held {
        Held { budget: self.clone(), bytes: 0, cost }
    }

    /// Bytes not held by any request (for tests and logs).
    pub fn available(&self) -> usize {
        self.total().saturating_sub(self.held())
    }

    /// The bytes only cheap requests may take: a sixteenth.
    pub fn reserve(&self) -> usize {
        self.total() / 16
    }
}

/// What one request holds; released when dropped, whatever becomes of the request (the blocking
/// work that owns it may outlive an answered 504, an answer is dropped once written).
#[derive(Debug)]
pub struct Held {
    budget: Arc<MemoryBudget>,
    bytes: usize,
    cost: Cost,
}

impl Held {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The request's cost, once its body is read (before, it is what the body declared).
    pub fn set_cost(&mut self, cost: Cost) {
        self.cost = cost;
    }

    /// Hold `more` bytes besides what is held, at once or not at all. A heavy request must leave
    /// the reserve free.
    pub fn grow(&mut self, more: usize) -> Result<(), Refusal> {
        if more == 0 {
            return Ok(());
        }
        let budget = &self.budget;
        let wanted = self.bytes.saturating_add(more);
        let total = budget.total();
        if wanted > total {
            return Err(Refusal::Never { wanted, total });
        }
        let limit = match self.cost {
            Cost::Cheap => total,
            Cost::Heavy => total - total / 16,
        };
        budget
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(more).filter(|&after| after <= limit)
            })
            .map_err(|_| Refusal::Busy)?;
        self.bytes = wanted;
        Ok(())
    }

    /// Give back `fewer` bytes (what is no longer in memory).
    pub fn shrink(&mut self, fewer: usize) {
        let fewer = fewer.min(self.bytes);
        self.budget.used.fetch_sub(fewer, Ordering::AcqRel);
        self.bytes -= fewer;
    }

    /// Hold exactly `bytes`: what is held now is given back or added to.
    pub fn set(&mut self, bytes: usize) -> Result<(), Refusal> {
        match bytes.checked_sub(self.bytes) {
            Some(more) => self.grow(more),
            None => {
                self.shrink(self.bytes - bytes);
                Ok(())
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_grow_and_shrink_within_the_total() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.hold(Cost::Cheap);
        a.grow(60).unwrap();
        let mut b = budget.hold(Cost::Cheap);
        assert_eq!(b.grow(50), Err(Refusal::Busy));
        assert_eq!(b.bytes(), 0, "a refused grow holds nothing");
        a.shrink(20);
        b.grow(50).unwrap();
        assert_eq!(budget.available(), 10);
        assert_eq!(b.grow(60), Err(Refusal::Never { wanted: 110, total: 100 }));
        b.set(10).unwrap();
        assert_eq!(budget.available(), 50);
        drop(a);
        drop(b);
        assert_eq!(budget.available(), 100);
    }

    #[test]
    fn heavy_requests_leave_the_reserve_to_cheap_ones() {
        let total = 64 << 20;
        let budget = MemoryBudget::new(total);
        let mut heavy = budget.hold(Cost::Heavy);
        assert_eq!(heavy.grow(total - budget.reserve() + 1), Err(Refusal::Busy));
        heavy.grow(total - budget.reserve()).unwrap();
        let mut cheap = budget.hold(Cost::Cheap);
        cheap.grow(budget.reserve()).unwrap();
        assert_eq!(budget.available(), 0);
    }

    #[test]
    fn a_smaller_total_refuses_new_holds_until_enough_is_given_back() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.hold(Cost::Cheap);
        a.grow(60).unwrap();
        budget.resize(50);
        let mut b = budget.hold(Cost::Cheap);
        assert_eq!(b.grow(1), Err(Refusal::Busy));
        assert_eq!(b.grow(51), Err(Refusal::Never { wanted: 51, total: 50 }));
        a.shrink(20);
        b.grow(10).unwrap();
        assert_eq!((budget.held(), budget.available()), (50, 0));
    }
}
