//! The paged KV block pool with vLLM-style prefix caching (content-addressed full blocks,
//! ref-counted, freed cached blocks evicted least-recently-freed first).
//!
//! Physical blocks are not individually tracked: the pool counts never-hashed free blocks and
//! keeps the cached blocks in a hash map. One cached "unit" stands for `group` physical blocks
//! (one per full-attention KV cache group).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for keys that are already well-mixed 64-bit hashes (no OS randomness, deterministic).
#[derive(Default)]
pub(crate) struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = crate::rng::mix64(v as u64);
    }
}
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

struct Entry {
    refs: u32,
    /// Position stamp of this block's entry in the LRU queue (valid when `refs == 0`).
    stamp: u64,
}

pub(crate) struct KvPool {
    total: u64,
    group: u64,
    free_uncached: u64,
    map: IdMap<Entry>,
    lru: VecDeque<(u64, u64)>,
    evictable: u64,
    stamp: u64,
}

impl KvPool {
    pub fn new(total: u64, group: u64) -> KvPool {
        KvPool {
            total,
            group,
            free_uncached: total,
            map: IdMap::default(),
            lru: VecDeque::new(),
            evictable: 0,
            stamp: 0,
        }
    }

    /// Blocks available for allocation (never-hashed free blocks + evictable cached blocks), as
    /// vLLM's `BlockPool.get_num_free_blocks()`.
    #[inline]
    pub fn available(&self) -> u64 {
        self.free_uncached + self.evictable * self.group
    }

    #[inline]
    pub fn used(&self) -> u64 {
        self.total - self.available()
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Length of the longest cached prefix of `hashes`, and how many of those blocks are
    /// currently evictable (ref count 0).
    pub fn lookup(&self, hashes: &[u64]) -> (u64, u64) {
        let mut hit = 0;
        let mut evictable = 0;
        for h in hashes {
            match self.map.get(h) {
                Some(e) => {
                    hit += 1;
                    if e.refs == 0 {
                        evictable += 1;
                    }
                }
                None => break,
            }
        }
        (hit, evictable)
    }

    /// Takes a reference on a cached block (a prefix hit).
    pub fn take_ref(&mut self, h: u64) {
        let e = self.map.get_mut(&h).expect("hit block is cached");
        if e.refs == 0 {
            self.evictable -= 1;
        }
        e.refs += 1;
    }

    /// Allocates `n` physical blocks, evicting cached blocks least-recently-freed first.
    /// Returns false (and changes nothing) if fewer than `n` are available.
    pub fn alloc(&mut self, n: u64) -> bool {
        if n > self.available() {
            return false;
        }
        while self.free_uncached < n {
            let (h, stamp) = self.lru.pop_front().expect("evictable blocks exist");
            let valid = matches!(self.map.get(&h), Some(e) if e.refs == 0 && e.stamp == stamp);
            if valid {
                self.map.remove(&h);
                self.evictable -= 1;
                self.free_uncached += self.group;
            }
        }
        self.free_uncached -= n;
        true
    }

    /// Registers a just-filled block (already allocated, held by one request) under hash `h`.
    /// Returns true if it became a shared cached block (the request now holds a ref on `h`),
    /// false if `h` was already cached (the block stays a private duplicate, as vLLM keeps
    /// duplicate blocks uncached for reuse).
    pub fn register(&mut self, h: u64) -> bool {
        match self.map.entry(h) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Entry { refs: 1, stamp: 0 });
                true
            }
        }
    }

    /// Returns `n` private (never-hashed) physical blocks to the pool.
    pub fn release_private(&mut self, n: u64) {
        self.free_uncached += n;
        debug_assert!(self.available() <= self.total);
    }

    /// Drops one reference on cached block `h`; at zero it becomes evictable (most recently freed).
    pub fn release_ref(&mut self, h: u64) {
        let e = self.map.get_mut(&h).expect("released block is cached");
        e.refs -= 1;
        if e.refs == 0 {
            self.stamp += 1;
            e.stamp = self.stamp;
            self.lru.push_back((h, self.stamp));
            self.evictable += 1;
            if self.lru.len() as u64 > 2 * self.evictable + 4096 {
                self.compact();
            }
        }
    }

    fn compact(&mut self) {
        let map = &self.map;
        self.lru
            .retain(|(h, s)| matches!(map.get(h), Some(e) if e.refs == 0 && e.stamp == *s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_refuses_beyond_capacity_and_evicts_lru_first() {
        let mut p = KvPool::new(4, 1);
        assert!(p.alloc(2));
        assert!(p.register(10));
        assert!(p.register(11));
        assert!(!p.register(10));
        assert_eq!(p.used(), 2);
        // free 11 then 10: 11 is least recently freed
        p.release_ref(11);
        p.release_ref(10);
        assert_eq!(p.available(), 4);
        assert_eq!(p.lookup(&[10, 11, 12]), (2, 2));
        assert!(!p.alloc(5));
        assert!(p.alloc(3)); // 2 uncached + evict 11
        assert_eq!(p.lookup(&[11]), (0, 0));
        assert_eq!(p.lookup(&[10]), (1, 1));
        p.take_ref(10);
        assert_eq!(p.available(), 0);
        assert!(!p.alloc(1));
    }
}
