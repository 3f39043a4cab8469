//! One budget for the memory requests hold at once: their bodies as they are read, then what the
//! bodies decode into (issue 17.1). A request that does not fit right now is refused with 429 and
//! `Retry-After` instead of waiting: the apiserver counts that as a failed call and applies the
//! webhook's failurePolicy, which is what would happen anyway if the Pod were OOM-killed, minus the
//! restart and the other requests lost with it.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The default `--max-in-flight-bytes`. It admits the largest review the apiserver sends (an
/// UPDATE of two 3 MiB objects dense with small values is charged about 130 MiB) and, with the
/// idle process (~30 MiB: runtime, TLS, cluster snapshot) and what the charge over-counts
/// (it bounds the real peak, typically by 1.1–2×), stays inside the Deployment's 256Mi limit.
pub const DEFAULT_MAX_IN_FLIGHT_BYTES: usize = 160 << 20;

/// Bytes, counted in the permits of a semaphore.
#[derive(Debug)]
pub struct MemoryBudget {
    permits: Arc<Semaphore>,
    total: usize,
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
        let total = total.clamp(1, Semaphore::MAX_PERMITS);
        Arc::new(MemoryBudget { permits: Arc::new(Semaphore::new(total)), total })
    }

    /// Nothing held yet.
    pub fn hold(&self) -> Held {
        Held { permits: self.permits.clone(), total: self.total, held: None }
    }

    /// Bytes not held by any request (for tests and logs).
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }
}

/// What one request holds; released when dropped, whatever becomes of the request (the blocking
/// work that owns it may outlive an answered 504).
#[derive(Debug)]
pub struct Held {
    permits: Arc<Semaphore>,
    total: usize,
    held: Option<OwnedSemaphorePermit>,
}

impl Held {
    pub fn bytes(&self) -> usize {
        self.held.as_ref().map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Hold `more` bytes besides what is held, at once or not at all.
    pub fn grow(&mut self, more: usize) -> Result<(), Refusal> {
        if more == 0 {
            return Ok(());
        }
        let wanted = self.bytes().saturating_add(more);
        let never = Refusal::Never { wanted, total: self.total };
        if wanted > self.total {
            return Err(never);
        }
        let more = u32::try_from(more).map_err(|_| never)?;
        let permit = self.permits.clone().try_acquire_many_owned(more).map_err(|_| Refusal::Busy)?;
        match &mut self.held {
            Some(held) => held.merge(permit),
            None => self.held = Some(permit),
        }
        Ok(())
    }

    /// Give back `fewer` bytes (what is no longer in memory).
    pub fn shrink(&mut self, fewer: usize) {
        if let Some(held) = &mut self.held {
            drop(held.split(fewer.min(held.num_permits())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_grow_and_shrink_within_the_total() {
        let budget = MemoryBudget::new(100);
        let mut a = budget.hold();
        a.grow(60).unwrap();
        let mut b = budget.hold();
        assert_eq!(b.grow(50), Err(Refusal::Busy));
        assert_eq!(b.bytes(), 0, "a refused grow holds nothing");
        a.shrink(20);
        b.grow(50).unwrap();
        assert_eq!(budget.available(), 10);
        assert_eq!(b.grow(60), Err(Refusal::Never { wanted: 110, total: 100 }));
        drop(a);
        drop(b);
        assert_eq!(budget.available(), 100);
    }
}
