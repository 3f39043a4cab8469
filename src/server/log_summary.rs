//! Warnings a caller can cause at will (refused requests and connections, issue 30.4) are
//! summarised instead of written one per event: the first event of a key (a peer's address) in an
//! interval is logged at once, later ones in the interval are only counted, and the count goes out
//! with the key's next line. A flood then writes one line per peer per interval, and nothing is
//! lost from the totals (every refusal is also a metric).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often each peer's refusals may be logged.
pub const SUMMARY_INTERVAL: Duration = Duration::from_secs(10);

/// Keys tracked at once; past it, new keys share the default key's line (an attacker with many
/// addresses cannot grow the map without bound either).
const MAX_KEYS: usize = 4096;

#[derive(Debug)]
pub struct LogSummary<K> {
    interval: Duration,
    keys: Mutex<HashMap<K, Entry>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    logged_at: Instant,
    /// Events since `logged_at` that were only counted.
    unlogged: u64,
}

impl<K: Hash + Eq + Default> Default for LogSummary<K> {
    fn default() -> Self {
        LogSummary::new(SUMMARY_INTERVAL)
    }
}

impl<K: Hash + Eq + Default> LogSummary<K> {
    pub fn new(interval: Duration) -> Self {
        LogSummary { interval, keys: Mutex::new(HashMap::new()) }
    }

    /// One event of `key` at `now`: `Some(n)` when it is to be logged now, `n` being the events of
    /// `key` only counted since its last line; `None` when it is only counted.
    pub fn note(&self, key: K, now: Instant) -> Option<u64> {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        if keys.len() >= MAX_KEYS && !keys.contains_key(&key) {
            // Keys whose interval is over and that have nothing unlogged carry no information.
            keys.retain(|_, e| e.unlogged > 0 || now.saturating_duration_since(e.logged_at) < self.interval);
        }
        let key = if keys.len() >= MAX_KEYS && !keys.contains_key(&key) { K::default() } else { key };
        match keys.get_mut(&key) {
            Some(entry) if now.saturating_duration_since(entry.logged_at) < self.interval => {
                entry.unlogged += 1;
                None
            }
            Some(entry) => {
                let unlogged = entry.unlogged;
                *entry = Entry { logged_at: now, unlogged: 0 };
                Some(unlogged)
            }
            None => {
                keys.insert(key, Entry { logged_at: now, unlogged: 0 });
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_per_interval_with_the_count_of_the_rest() {
        let summary = LogSummary::<Option<u8>>::new(Duration::from_secs(10));
        let t0 = Instant::now();
        assert_eq!(summary.note(Some(1), t0), Some(0));
        for i in 1..=5 {
            assert_eq!(summary.note(Some(1), t0 + Duration::from_secs(i)), None);
        }
        assert_eq!(
            summary.note(Some(2), t0 + Duration::from_secs(1)),
            Some(0),
            "another key has its own line"
        );
        assert_eq!(summary.note(Some(1), t0 + Duration::from_secs(10)), Some(5));
        assert_eq!(summary.note(Some(1), t0 + Duration::from_secs(11)), None);
    }

    #[test]
    fn past_the_key_limit_new_keys_share_the_default_line() {
        let summary = LogSummary::<Option<usize>>::new(Duration::from_secs(10));
        let now = Instant::now();
        for key in 0..MAX_KEYS {
            summary.note(Some(key), now);
            summary.note(Some(key), now);
        }
        assert_eq!(summary.note(Some(MAX_KEYS), now), Some(0), "the default key's first line");
        assert_eq!(summary.note(Some(MAX_KEYS + 1), now), None, "counted under the default key");
        assert_eq!(summary.keys.lock().unwrap().len(), MAX_KEYS + 1);
    }
}
