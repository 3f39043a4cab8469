//! A sorted map whose clones share their entries, so that a new snapshot can be made from the
//! previous one by copying only what changed.
//!
//! Entries live in sorted chunks of at most `2 × CHUNK`, each behind an `Arc`: a clone copies one
//! pointer per chunk (n / 64 of them), and an insert or remove in a clone copies the one chunk it
//! touches (`Arc::make_mut`), never the others. Lookups are two binary searches. The persistent
//! map crates (im, imbl, rpds) would do the same with a deeper tree, but are MPL-2.0, which
//! deny.toml does not allow; one level of chunks is enough for the tens of thousands of objects a
//! webhook caches.

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Entries per chunk after a split; a chunk splits when it grows past twice this.
const CHUNK: usize = 64;

#[derive(Debug)]
pub struct SharedMap<K, V> {
    /// Non-empty, each sorted, and every key of a chunk below every key of the next.
    chunks: Vec<Arc<Vec<(K, V)>>>,
    len: usize,
}

impl<K, V> Clone for SharedMap<K, V> {
    fn clone(&self) -> Self {
        SharedMap { chunks: self.chunks.clone(), len: self.len }
    }
}

impl<K, V> Default for SharedMap<K, V> {
    fn default() -> Self {
        SharedMap { chunks: Vec::new(), len: 0 }
    }
}

impl<K, V> SharedMap<K, V> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.chunks.iter().flat_map(|c| c.iter().map(|(k, v)| (k, v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }
}

impl<K: Ord + Clone, V: Clone> SharedMap<K, V> {
    /// The chunk that holds `key` if any chunk does (the last one starting at or before it; the
    /// first when `key` sorts before everything).
    fn chunk_of<Q: Ord + ?Sized>(&self, key: &Q) -> usize
    where
        K: Borrow<Q>,
    {
        self.chunks.partition_point(|c| c.first().is_some_and(|(k, _)| k.borrow() <= key)).saturating_sub(1)
    }

    fn position<Q: Ord + ?Sized>(&self, key: &Q) -> (usize, Result<usize, usize>)
    where
        K: Borrow<Q>,
    {
        let c = self.chunk_of(key);
        let found =
            self.chunks.get(c).map_or(Err(0), |chunk| chunk.binary_search_by(|(k, _)| k.borrow().cmp(key)));
        (c, found)
    }

    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        let (c, i) = self.position(key);
        let i = i.ok()?;
        Some(&self.chunks[c][i].1)
    }

    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.get(key).is_some()
    }

    /// The value of `key`, copying its chunk first if another map shares it.
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        let (c, i) = self.position(key);
        let i = i.ok()?;
        Some(&mut Arc::make_mut(&mut self.chunks[c])[i].1)
    }

    /// Insert or replace; returns the value replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        if self.chunks.is_empty() {
            self.chunks.push(Arc::new(vec![(key, value)]));
            self.len = 1;
            return None;
        }
        let (c, found) = self.position(&key);
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        match found {
            Ok(i) => Some(std::mem::replace(&mut chunk[i].1, value)),
            Err(i) => {
                chunk.insert(i, (key, value));
                self.len += 1;
                if chunk.len() > 2 * CHUNK {
                    let tail = chunk.split_off(CHUNK);
                    // The half left behind keeps the capacity it grew to (up to 4 × CHUNK); a
                    // map filled by inserts would otherwise hold twice or more what it needs.
                    chunk.shrink_to_fit();
                    self.chunks.insert(c + 1, Arc::new(tail));
                }
                None
            }
        }
    }

    /// Remove `key`; returns its value. A chunk left small is merged with its neighbour, so many
    /// deletions do not leave a long list of tiny chunks behind.
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let (c, found) = self.position(key);
        let i = found.ok()?;
        let (_, value) = Arc::make_mut(&mut self.chunks[c]).remove(i);
        self.len -= 1;
        let left = self.chunks[c].len();
        if left == 0 {
            self.chunks.remove(c);
        } else if left < CHUNK / 4
            && c + 1 < self.chunks.len()
            && left + self.chunks[c + 1].len() <= 2 * CHUNK
        {
            let next = self.chunks.remove(c + 1);
            Arc::make_mut(&mut self.chunks[c]).extend(next.iter().cloned());
        }
        Some(value)
    }
}

impl<K: Ord + Clone, V: Clone> FromIterator<(K, V)> for SharedMap<K, V> {
    /// Later entries win over earlier ones with the same key (as `BTreeMap`'s `collect`).
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let sorted: BTreeMap<K, V> = iter.into_iter().collect();
        let len = sorted.len();
        let mut chunks = Vec::with_capacity(len.div_ceil(CHUNK));
        let mut chunk = Vec::with_capacity(CHUNK);
        for entry in sorted {
            chunk.push(entry);
            if chunk.len() == CHUNK {
                chunks.push(Arc::new(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK))));
            }
        }
        if !chunk.is_empty() {
            chunks.push(Arc::new(chunk));
        }
        SharedMap { chunks, len }
    }
}

#[cfg(test)]
impl<K: Ord, V> SharedMap<K, V> {
    /// How many chunks both maps hold (the same `Arc`).
    fn shared_chunks(&self, other: &Self) -> usize {
        self.chunks.iter().filter(|c| other.chunks.iter().any(|o| Arc::ptr_eq(c, o))).count()
    }

    fn check(&self) {
        assert_eq!(self.len, self.chunks.iter().map(|c| c.len()).sum::<usize>());
        let keys: Vec<&K> = self.iter().map(|(k, _)| k).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "sorted and unique");
        assert!(self.chunks.iter().all(|c| !c.is_empty() && c.len() <= 2 * CHUNK));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn behaves_like_a_btreemap(ops in proptest::collection::vec((any::<bool>(), 0u16..600, any::<u8>()), 0..2000)) {
            let mut map = SharedMap::default();
            let mut model = BTreeMap::new();
            let mut snapshots = Vec::new();
            for (n, (insert, key, value)) in ops.into_iter().enumerate() {
                if insert {
                    prop_assert_eq!(map.insert(key, value), model.insert(key, value));
                } else {
                    prop_assert_eq!(map.remove(&key), model.remove(&key));
                }
                if n % 97 == 0 {
                    snapshots.push((map.clone(), model.clone()));
                }
            }
            map.check();
            prop_assert!(map.iter().eq(model.iter()));
            // Earlier clones are untouched by later edits.
            for (shared, expected) in snapshots {
                shared.check();
                prop_assert!(shared.iter().eq(expected.iter()));
            }
        }
    }

    #[test]
    fn an_edit_copies_one_chunk() {
        let map: SharedMap<u32, u32> = (0..10_000).map(|i| (i, i)).collect();
        let mut next = map.clone();
        next.insert(5_000, 0);
        next.remove(&7);
        assert_eq!(map.get(&5_000), Some(&5_000));
        assert_eq!(next.get(&5_000), Some(&0));
        assert_eq!(
            next.shared_chunks(&map),
            map.chunks.len() - 2,
            "all chunks but the two edited ones are shared"
        );
    }
}
