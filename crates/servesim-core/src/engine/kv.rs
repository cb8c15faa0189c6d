//! The paged KV block pool with vLLM-style prefix caching (content-addressed full blocks,
//! ref-counted, freed cached blocks evicted least-recently-freed first).
//!
//! Physical blocks are not individually tracked: the pool counts never-hashed free blocks and
//! keeps the cached blocks in a slab (`Vec`) indexed by a small integer id, found by hash through
//! an open-addressing table. One cached "unit" stands for `group` physical blocks (one per
//! full-attention KV cache group). Freed cached blocks sit in an intrusive doubly linked LRU list
//! over slab ids (head = least recently freed = next to evict), so every operation is O(1) and
//! allocation-free once warm; callers hold slab ids, not hashes, so releasing touches no table.
//!
//! The head of the waiting queue is looked up again at every step while it cannot be admitted.
//! To keep that O(1), the pool *watches* the cached prefix found for one owner: each watched slot
//! knows its position in the prefix, evicting one cuts the prefix there, and ref-count changes
//! keep the count of evictable watched blocks current. A repeated lookup only truncates to the
//! cut and probes the table past the prefix's end.

use std::collections::HashMap;
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

/// Slab id of a cached block.
pub(crate) type BlockId = u32;
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    /// References held by running requests; `FREE_SLOT` when the slab slot is unused.
    refs: u32,
    /// LRU links (valid when `refs == 0`).
    prev: u32,
    next: u32,
    /// Position in the watched prefix, or `NIL`.
    wpos: u32,
}
const FREE_SLOT: u32 = u32::MAX;

/// Open-addressing (linear probing) table `hash -> slab id`. Keys are already well-mixed 64-bit
/// hashes, so the low bits index the table directly. An entry is the low 32 bits of the hash
/// (its home position and a fingerprint) and the slab id: 8 bytes, so the table stays
/// cache-resident; a fingerprint match is confirmed against the slab (live, same full hash).
/// Evicting a block does not touch the table: its entry goes stale (the slab slot is free or
/// holds another hash, so it never matches) and is dropped when the table is rebuilt from the
/// live slots, which happens when live + stale entries reach half the capacity (the capacity
/// doubles first if live entries alone exceed a quarter). Rebuilds are sequential passes
/// amortised over at least `capacity / 4` evictions.
struct Table {
    e: Vec<(u32, u32)>,
    mask: usize,
    /// Entries in the table, live or stale.
    len: usize,
}

#[inline]
fn live_with(slots: &[Slot], v: u32, h: u64) -> bool {
    let s = &slots[v as usize];
    s.refs != FREE_SLOT && s.hash == h
}

impl Table {
    fn new() -> Table {
        Table {
            e: vec![(0, NIL); 1024],
            mask: 1023,
            len: 0,
        }
    }

    #[inline]
    fn get(&self, h: u64, slots: &[Slot]) -> Option<u32> {
        let fp = h as u32;
        let mut i = h as usize & self.mask;
        loop {
            let (f, v) = self.e[i];
            if v == NIL {
                return None;
            }
            if f == fp && live_with(slots, v, h) {
                return Some(v);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Inserts `h -> v()` if `h` is absent and returns the new value; `None` if present.
    /// `live` is the number of live slab slots.
    #[inline]
    fn insert_new(
        &mut self,
        h: u64,
        slots: &mut Vec<Slot>,
        live: usize,
        v: impl FnOnce(&mut Vec<Slot>) -> u32,
    ) -> Option<u32> {
        if 2 * (self.len + 1) > self.e.len() {
            self.rebuild(slots, live + 1);
        }
        let fp = h as u32;
        let mut i = h as usize & self.mask;
        loop {
            let (f, old) = self.e[i];
            if old == NIL {
                let v = v(slots);
                self.e[i] = (fp, v);
                self.len += 1;
                return Some(v);
            }
            if f == fp && live_with(slots, old, h) {
                return None;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Drops the stale entries: re-inserts every live slot (growing if `live` entries would
    /// exceed a quarter of the capacity).
    fn rebuild(&mut self, slots: &[Slot], live: usize) {
        let mut n = self.e.len();
        while 4 * live > n {
            n *= 2;
        }
        self.e.clear();
        self.e.resize(n, (0, NIL));
        self.mask = n - 1;
        self.len = 0;
        for (id, s) in slots.iter().enumerate() {
            if s.refs != FREE_SLOT {
                let mut i = s.hash as usize & self.mask;
                while self.e[i].1 != NIL {
                    i = (i + 1) & self.mask;
                }
                self.e[i] = (s.hash as u32, id as u32);
                self.len += 1;
            }
        }
    }
}

pub(crate) struct KvPool {
    total: u64,
    group: u64,
    free_uncached: u64,
    table: Table,
    slots: Vec<Slot>,
    free_ids: Vec<u32>,
    /// LRU list of evictable (ref count 0) cached blocks: head is evicted first.
    head: u32,
    tail: u32,
    evictable: u64,
    /// The watched prefix (`watch[j]` caches block `j` of the owner's hash chain), its owner,
    /// the shortest position evicted since the last lookup, and its evictable blocks.
    watch: Vec<BlockId>,
    watch_owner: Option<(u64, u64)>,
    watch_cut: usize,
    watch_evictable: u64,
    /// Sink for the prefetching reads of [`KvPool::register_all`] (keeps them from being elided).
    touch: u32,
}

impl KvPool {
    pub fn new(total: u64, group: u64) -> KvPool {
        KvPool {
            total,
            group,
            free_uncached: total,
            table: Table::new(),
            slots: Vec::new(),
            free_ids: Vec::new(),
            head: NIL,
            tail: NIL,
            evictable: 0,
            watch: Vec::new(),
            watch_owner: None,
            watch_cut: 0,
            watch_evictable: 0,
            touch: 0,
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

    /// Stops watching prefix entries `from..`.
    fn unwatch_from(&mut self, from: usize) {
        for j in from..self.watch.len() {
            let s = &mut self.slots[self.watch[j] as usize];
            // An evicted entry was unwatched then (and its slot may be reused since).
            if s.wpos as usize == j {
                s.wpos = NIL;
                self.watch_evictable -= (s.refs == 0) as u64;
            }
        }
        self.watch.truncate(from);
    }

    /// The longest cached prefix of `hashes` (a block-hash chain) for `owner`: returns
    /// `(blocks hit, how many of them are evictable)`. Repeated calls for the same owner with the
    /// same (or a longer) `hashes` cost O(1) plus the change since the last call.
    pub fn lookup(&mut self, owner: (u64, u64), hashes: &[u64]) -> (u64, u64) {
        if self.watch_owner != Some(owner) {
            self.unwatch_from(0);
            self.watch_owner = Some(owner);
            self.watch_cut = 0;
        }
        let cut = self.watch_cut.min(hashes.len());
        if cut < self.watch.len() {
            self.unwatch_from(cut);
        }
        for &h in &hashes[self.watch.len()..] {
            match self.table.get(h, &self.slots) {
                Some(id) => {
                    let s = &mut self.slots[id as usize];
                    debug_assert_eq!(s.wpos, NIL);
                    s.wpos = self.watch.len() as u32;
                    self.watch_evictable += (s.refs == 0) as u64;
                    self.watch.push(id);
                }
                None => break,
            }
        }
        self.watch_cut = self.watch.len();
        (self.watch.len() as u64, self.watch_evictable)
    }

    /// Takes a reference on every block of the owner's watched prefix (the prefix hit of an
    /// admission, as found by the last [`KvPool::lookup`]), appending their ids to `out`, and
    /// ends the watch.
    pub fn take_watched(&mut self, out: &mut Vec<BlockId>) {
        debug_assert_eq!(self.watch_cut, self.watch.len(), "lookup just before");
        let cut = self.watch_cut.min(self.watch.len());
        self.unwatch_from(cut);
        let ids = std::mem::take(&mut self.watch);
        for &id in &ids {
            self.slots[id as usize].wpos = NIL;
            self.take_ref(id);
        }
        out.extend_from_slice(&ids);
        self.watch = ids;
        self.watch.clear();
        self.watch_owner = None;
        self.watch_cut = 0;
        self.watch_evictable = 0;
    }

    #[inline]
    fn unlink(&mut self, id: u32) {
        let Slot { prev, next, .. } = self.slots[id as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    /// Takes a reference on cached block `id` (a prefix hit).
    #[inline]
    pub fn take_ref(&mut self, id: BlockId) {
        let refs = self.slots[id as usize].refs;
        debug_assert!(refs != FREE_SLOT, "hit block is cached");
        if refs == 0 {
            self.unlink(id);
            self.evictable -= 1;
            if self.slots[id as usize].wpos != NIL {
                self.watch_evictable -= 1;
            }
        }
        self.slots[id as usize].refs = refs + 1;
    }

    /// Allocates `n` physical blocks, evicting cached blocks least-recently-freed first.
    /// Returns false (and changes nothing) if fewer than `n` are available.
    pub fn alloc(&mut self, n: u64) -> bool {
        if n > self.available() {
            return false;
        }
        while self.free_uncached < n {
            let id = self.head;
            debug_assert!(id != NIL, "evictable blocks exist");
            self.unlink(id);
            let s = &mut self.slots[id as usize];
            s.refs = FREE_SLOT;
            if s.wpos != NIL {
                // The watched prefix now ends before this block.
                self.watch_cut = self.watch_cut.min(s.wpos as usize);
                s.wpos = NIL;
                self.watch_evictable -= 1;
            }
            self.free_ids.push(id);
            self.evictable -= 1;
            self.free_uncached += self.group;
        }
        self.free_uncached -= n;
        true
    }

    /// Registers a just-filled block (already allocated, held by one request) under hash `h`.
    /// Returns its slab id if it became a shared cached block (the request now holds a ref on
    /// it), `None` if `h` was already cached (the block stays a private duplicate, as vLLM keeps
    /// duplicate blocks uncached for reuse).
    pub fn register(&mut self, h: u64) -> Option<BlockId> {
        let free_ids = &mut self.free_ids;
        let live = self.slots.len() - free_ids.len();
        self.table.insert_new(h, &mut self.slots, live, |slots| {
            let slot = Slot {
                hash: h,
                refs: 1,
                prev: NIL,
                next: NIL,
                wpos: NIL,
            };
            match free_ids.pop() {
                Some(id) => {
                    slots[id as usize] = slot;
                    id
                }
                None => {
                    slots.push(slot);
                    (slots.len() - 1) as u32
                }
            }
        })
    }

    /// [`KvPool::register`] for each hash in order, appending the ids of the blocks that became
    /// shared to `out`. A first pass reads the home entries of all hashes: independent loads the
    /// CPU overlaps, so the inserting pass finds them in cache.
    pub fn register_all(&mut self, hashes: &[u64], out: &mut Vec<BlockId>) {
        if hashes.len() > 1 {
            let mut acc = 0u32;
            for &h in hashes {
                acc ^= self.table.e[h as usize & self.table.mask].1;
            }
            self.touch ^= acc;
        }
        for &h in hashes {
            if let Some(id) = self.register(h) {
                out.push(id);
            }
        }
    }

    /// Returns `n` private (never-hashed) physical blocks to the pool.
    pub fn release_private(&mut self, n: u64) {
        self.free_uncached += n;
        debug_assert!(self.available() <= self.total);
    }

    /// Drops one reference on cached block `id`; at zero it becomes evictable (most recently
    /// freed, at the LRU tail).
    #[inline]
    pub fn release_ref(&mut self, id: BlockId) {
        let s = &mut self.slots[id as usize];
        debug_assert!(
            s.refs != FREE_SLOT && s.refs > 0,
            "released block is cached"
        );
        s.refs -= 1;
        if s.refs == 0 {
            s.prev = self.tail;
            s.next = NIL;
            if self.tail == NIL {
                self.head = id;
            } else {
                self.slots[self.tail as usize].next = id;
            }
            self.tail = id;
            self.evictable += 1;
            if self.slots[id as usize].wpos != NIL {
                self.watch_evictable += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, Stream};
    use std::collections::BTreeMap;

    fn hits(p: &mut KvPool, hashes: &[u64]) -> (u64, u64) {
        // a fresh owner each time: no watch reuse
        p.lookup((hashes[0], hashes.len() as u64 + 1000), hashes)
    }

    #[test]
    fn alloc_refuses_beyond_capacity_and_evicts_lru_first() {
        let mut p = KvPool::new(4, 1);
        assert!(p.alloc(2));
        let a = p.register(10).unwrap();
        let b = p.register(11).unwrap();
        assert!(p.register(10).is_none());
        assert_eq!(p.used(), 2);
        // free 11 then 10: 11 is least recently freed
        p.release_ref(b);
        p.release_ref(a);
        assert_eq!(p.available(), 4);
        assert_eq!(hits(&mut p, &[10, 11, 12]), (2, 2));
        assert!(!p.alloc(5));
        assert!(p.alloc(3)); // 2 uncached + evict 11
        assert_eq!(hits(&mut p, &[11]), (0, 0));
        assert_eq!(hits(&mut p, &[10]), (1, 1));
        p.take_ref(a);
        assert_eq!(p.available(), 0);
        assert!(!p.alloc(1));
    }

    /// Recounts a lookup from scratch (the table and ref counts only).
    fn naive(p: &KvPool, hashes: &[u64]) -> (u64, u64) {
        let mut n = 0;
        let mut ev = 0;
        for &h in hashes {
            match p.table.get(h, &p.slots) {
                Some(id) => {
                    n += 1;
                    ev += (p.slots[id as usize].refs == 0) as u64;
                }
                None => break,
            }
        }
        (n, ev)
    }

    #[test]
    fn watched_lookup_tracks_evictions_refs_and_reregistration() {
        let mut p = KvPool::new(3, 1);
        assert!(p.alloc(3));
        let ids: Vec<u32> = [1u64, 2, 3]
            .iter()
            .map(|&h| p.register(h).unwrap())
            .collect();
        let owner = (9, 0);
        assert_eq!(p.lookup(owner, &[1, 2, 3, 4]), (3, 0));
        for &id in ids.iter().rev() {
            p.release_ref(id);
        }
        assert_eq!(p.lookup(owner, &[1, 2, 3, 4]), (3, 3));
        // freed tail-first: 3 is least recently freed and goes first
        assert!(p.alloc(1));
        assert_eq!(p.lookup(owner, &[1, 2, 3, 4]), (2, 2));
        // block 2 evicted; then 1; then 3 and 2 re-registered under reused slots
        assert!(p.alloc(1));
        assert_eq!(p.lookup(owner, &[1, 2, 3, 4]), (1, 1));
        assert!(p.alloc(1));
        p.release_private(2);
        assert!(p.alloc(2));
        let b3 = p.register(3).unwrap();
        let b2 = p.register(2).unwrap();
        assert_eq!(p.lookup(owner, &[1, 2, 3, 4]), (0, 0)); // 1 was evicted by the last alloc
        p.release_ref(b3);
        p.release_ref(b2);
        let other = (10, 0);
        assert_eq!(p.lookup(other, &[2, 3, 4]), (2, 2));
        let mut out = Vec::new();
        p.take_watched(&mut out);
        assert_eq!(out, vec![b2, b3]);
        assert_eq!(p.available(), 0); // one private block is still held
    }

    #[test]
    fn watched_lookup_agrees_with_a_fresh_recount_under_random_churn() {
        let mut rng = Rng::stream(3, Stream::Test);
        let mut p = KvPool::new(64, 1);
        let chain: Vec<u64> = (0..40).map(|i| 1000 + i).collect();
        let mut held: Vec<Vec<u32>> = Vec::new();
        let mut owner = (0, 0);
        for step in 0..20_000u64 {
            match rng.range_u64(0, 5) {
                0 | 1 => {
                    // a request fills a prefix of the chain (or of a private chain)
                    let n = rng.range_u64(1, 20);
                    if p.alloc(n) {
                        let base = if rng.range_u64(0, 1) == 0 {
                            1000
                        } else {
                            50_000 + step * 64
                        };
                        let mut ids = Vec::new();
                        let mut private = 0;
                        for j in 0..n {
                            match p.register(base + j) {
                                Some(id) => ids.push(id),
                                None => private += 1,
                            }
                        }
                        p.release_private(private);
                        held.push(ids);
                    }
                }
                2 => {
                    if !held.is_empty() {
                        let i = rng.range_u64(0, held.len() as u64 - 1) as usize;
                        for id in held.swap_remove(i).into_iter().rev() {
                            p.release_ref(id);
                        }
                    }
                }
                3 => {
                    let (n, ev) = p.lookup(owner, &chain);
                    if p.alloc(0) && rng.range_u64(0, 3) == 0 && n > 0 && ev == 0 {
                        let mut out = Vec::new();
                        p.take_watched(&mut out);
                        held.push(out);
                    }
                }
                4 => owner = (step, 0),
                _ => {
                    let (n, ev) = p.lookup(owner, &chain);
                    assert_eq!((n, ev), naive(&p, &chain), "step {step}");
                }
            }
            assert!(p.available() <= p.total);
        }
    }

    #[test]
    fn table_matches_a_reference_map_under_random_inserts_and_evictions() {
        let mut rng = Rng::stream(7, Stream::Test);
        let mut t = Table::new();
        let mut slots: Vec<Slot> = Vec::new();
        let mut free: Vec<u32> = Vec::new();
        let mut want: BTreeMap<u64, u32> = BTreeMap::new();
        for step in 0..200_000u32 {
            // few distinct low bits (long probe runs, wrap-around) and many keys sharing their
            // low 32 bits (fingerprint collisions)
            let h = (rng.next_u64() & 0xF_0000_0FFF) | ((rng.range_u64(0, 3)) << 40);
            if let Some(id) = want.remove(&h) {
                // evict: the slab slot is freed, the table is not touched
                slots[id as usize].refs = FREE_SLOT;
                free.push(id);
            } else if want.len() < 3000 {
                let live = slots.len() - free.len();
                let got = t.insert_new(h, &mut slots, live, |sl| {
                    let s = Slot {
                        hash: h,
                        refs: 1,
                        prev: NIL,
                        next: NIL,
                        wpos: NIL,
                    };
                    match free.pop() {
                        Some(id) => {
                            sl[id as usize] = s;
                            id
                        }
                        None => {
                            sl.push(s);
                            (sl.len() - 1) as u32
                        }
                    }
                });
                want.insert(h, got.expect("absent key is inserted"));
                assert!(t
                    .insert_new(h, &mut slots, live + 1, |_| unreachable!())
                    .is_none());
            }
            if step % 997 == 0 {
                for (&k, &v) in &want {
                    assert_eq!(t.get(k, &slots), Some(v));
                }
                assert!(2 * t.len <= t.e.len());
            }
            assert_eq!(t.get(h, &slots), want.get(&h).copied());
        }
    }
}
