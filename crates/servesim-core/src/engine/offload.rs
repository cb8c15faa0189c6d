//! The CPU KV offload tier of one engine (vLLM's `OffloadingConnector` /
//! `SimpleCPUOffloadConnector` scheduler side): chunks of `blocks_per_chunk` full GPU blocks
//! stored to host memory when they are computed, an LRU over them bounded by the tier's size,
//! lookups after the GPU prefix cache, and loads that the request waits for while the engine
//! steps the others. Every load and store crosses the host link, one FIFO queue per rank shared
//! by both directions. Rules and their vLLM files: docs/engine.md ("CPU KV offload tier").
//!
//! Architecture invariants: simulated time stays integer; the tier never holds more than
//! `num_chunks` chunks; a chunk is hit only once its store finished; a request that loads is
//! never scheduled before its load finished; nothing here runs when the tier is off.

use super::kv::{IdMap, Span};
use crate::rng::mix64;
use crate::units::Ticks;
use serde::{Deserialize, Serialize};

/// The tier as the engine runs it (built by `scenario.rs` from `offload::OffloadSettings`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffloadConfig {
    /// GPU blocks per offloaded chunk (vLLM `blocks_per_chunk`).
    pub blocks_per_chunk: u32,
    /// Chunks the tier holds (vLLM's CPU block count, `offload::tier_size`).
    pub num_chunks: u64,
    /// Bytes of one chunk on one rank (what one rank's link moves per chunk).
    pub chunk_bytes: u64,
    /// Host-link bytes per second per rank, one FIFO queue for loads and stores.
    pub link_bytes_per_s: u64,
    /// vLLM `store_threshold` (< 2 = no filter).
    pub store_threshold: u32,
    /// vLLM `max_tracker_size` of the threshold filter.
    pub max_tracker_size: u64,
}

impl OffloadConfig {
    pub fn validate(&self) -> Result<(), super::ConfigError> {
        if self.blocks_per_chunk == 0 {
            return Err(super::ConfigError::Zero("offload.blocks_per_chunk"));
        }
        if self.chunk_bytes == 0 {
            return Err(super::ConfigError::Zero("offload.chunk_bytes"));
        }
        if self.link_bytes_per_s == 0 {
            return Err(super::ConfigError::Zero("offload.link_bytes_per_s"));
        }
        if self.max_tracker_size == 0 {
            return Err(super::ConfigError::Zero("offload.max_tracker_size"));
        }
        Ok(())
    }
}

/// Totals of one engine's tier (reported through [`Observer::on_offload`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffloadStats {
    /// Prompt tokens looked up in the CPU tier (past the GPU hit), and found there.
    pub lookup_tokens: u64,
    pub hit_tokens: u64,
    pub loads: u64,
    pub loaded_bytes: u64,
    pub stored_chunks: u64,
    pub stored_bytes: u64,
    /// Stores vLLM's `prepare_store` refuses (no evictable chunk left).
    pub stores_skipped: u64,
    pub evictions: u64,
    /// Sum over loads of (admission - load issue), ns.
    pub load_wait_ns: u64,
    /// Most chunks held at once.
    pub peak_chunks: u64,
}

const NIL: u32 = u32::MAX;
const CHUNK_KEY: u64 = 0xC2B2_AE3D_27D4_EB4F;

#[derive(Clone, Copy)]
struct Node {
    key: u64,
    prev: u32,
    next: u32,
    /// Store finished (the chunk can be hit from then on).
    ready: Ticks,
    /// A load reads it until then (not evictable).
    busy: Ticks,
    /// Lookups (store-threshold tracker only).
    count: u64,
}

/// An LRU list (head = least recent) over a slab, keyed by chunk hash.
#[derive(Default)]
struct Lru {
    map: IdMap<u32>,
    nodes: Vec<Node>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    len: u64,
}

impl Lru {
    fn new() -> Lru {
        Lru {
            head: NIL,
            tail: NIL,
            ..Default::default()
        }
    }
    fn get(&self, key: u64) -> Option<u32> {
        self.map.get(&key).copied()
    }
    fn unlink(&mut self, i: u32) {
        let n = self.nodes[i as usize];
        if n.prev == NIL {
            self.head = n.next;
        } else {
            self.nodes[n.prev as usize].next = n.next;
        }
        if n.next == NIL {
            self.tail = n.prev;
        } else {
            self.nodes[n.next as usize].prev = n.prev;
        }
    }
    fn push_tail(&mut self, i: u32) {
        self.nodes[i as usize].prev = self.tail;
        self.nodes[i as usize].next = NIL;
        if self.tail == NIL {
            self.head = i;
        } else {
            self.nodes[self.tail as usize].next = i;
        }
        self.tail = i;
    }
    fn touch(&mut self, i: u32) {
        if self.tail != i {
            self.unlink(i);
            self.push_tail(i);
        }
    }
    fn insert(&mut self, key: u64, ready: Ticks) -> u32 {
        let node = Node {
            key,
            prev: NIL,
            next: NIL,
            ready,
            busy: Ticks::ZERO,
            count: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        self.push_tail(i);
        self.map.insert(key, i);
        self.len += 1;
        i
    }
    fn remove(&mut self, i: u32) {
        self.unlink(i);
        let key = self.nodes[i as usize].key;
        self.map.remove(&key);
        self.free.push(i);
        self.len -= 1;
    }
}

/// One engine's CPU tier.
pub(crate) struct CpuTier {
    cfg: OffloadConfig,
    lru: Lru,
    /// Lookup counts for `store_threshold >= 2` (bounded by `max_tracker_size`, oldest dropped).
    tracker: Lru,
    /// When the rank's host link is next free.
    link_free: Ticks,
    /// Requests with a load in flight or done and not yet admitted.
    pub(crate) loading: u64,
    /// Totals reported so far, and what happened since the last report.
    pub(crate) stats: OffloadStats,
    pub(crate) delta: OffloadStats,
    keys: Vec<u64>,
}

/// The chunk key of chunk `j` (blocks `j*c .. (j+1)*c`): the identity of its last block, which
/// identifies the whole prefix (kv.rs "Block identity").
fn chunk_key(spans: &[Span], j: u64, c: u64) -> Option<u64> {
    let b = (j + 1) * c - 1;
    let i = spans.partition_point(|s| s.hi <= b);
    let s = spans.get(i)?;
    (s.lo <= b).then(|| mix64(s.key ^ (b + 1).wrapping_mul(CHUNK_KEY)))
}

impl CpuTier {
    pub(crate) fn new(cfg: OffloadConfig) -> CpuTier {
        CpuTier {
            cfg,
            lru: Lru::new(),
            tracker: Lru::new(),
            link_free: Ticks::ZERO,
            loading: 0,
            stats: OffloadStats::default(),
            delta: OffloadStats::default(),
            keys: Vec::new(),
        }
    }

    pub(crate) fn blocks_per_chunk(&self) -> u64 {
        self.cfg.blocks_per_chunk as u64
    }

    /// Chunks held now.
    pub(crate) fn len(&self) -> u64 {
        self.lru.len
    }

    /// A transfer of `chunks` chunks issued at `t`: it starts when the link is free and takes
    /// `ceil(bytes * 1e9 / link_bytes_per_s)` ns (at least 1). Returns its end.
    fn transfer(&mut self, chunks: u64, t: Ticks) -> (Ticks, u64) {
        let bytes = chunks.saturating_mul(self.cfg.chunk_bytes);
        let ns = (bytes as u128 * 1_000_000_000).div_ceil(self.cfg.link_bytes_per_s as u128);
        let ns = u64::try_from(ns).unwrap_or(u64::MAX).max(1);
        let start = t.max(self.link_free);
        let end = Ticks(start.0.saturating_add(ns));
        self.link_free = end;
        (end, bytes)
    }

    fn track(&mut self, key: u64) -> u64 {
        if self.cfg.store_threshold < 2 {
            return 0;
        }
        let i = match self.tracker.get(key) {
            Some(i) => {
                self.tracker.touch(i);
                i
            }
            None => {
                if self.tracker.len >= self.cfg.max_tracker_size {
                    let h = self.tracker.head;
                    self.tracker.remove(h);
                }
                self.tracker.insert(key, Ticks::ZERO)
            }
        };
        self.tracker.nodes[i as usize].count += 1;
        self.tracker.nodes[i as usize].count
    }

    /// Moves the request's chunks `0 .. n` that the tier holds to the MRU end, first chunk
    /// last (vLLM `LRUCachePolicy.touch` walks the keys reversed).
    fn touch_all(&mut self, spans: &[Span], n: u64) {
        let c = self.blocks_per_chunk();
        for j in (0..n).rev() {
            if let Some(i) = chunk_key(spans, j, c).and_then(|k| self.lru.get(k)) {
                self.lru.touch(i);
            }
        }
    }

    /// Consecutive chunks from `start` (at most `max`) that are stored and finished at `t`
    /// (vLLM `get_num_new_matched_tokens` + `lookup`); `None` when one of them is being loaded
    /// by another request (vLLM delays the request).
    pub(crate) fn lookup(
        &mut self,
        spans: &[Span],
        start: u64,
        max: u64,
        total: u64,
        t: Ticks,
    ) -> Option<u64> {
        self.touch_all(spans, total);
        let c = self.blocks_per_chunk();
        let mut hits = 0;
        let mut busy = false;
        for j in start..start + max {
            let Some(key) = chunk_key(spans, j, c) else {
                break;
            };
            self.track(key);
            match self.lru.get(key) {
                Some(i) if self.lru.nodes[i as usize].ready <= t => {
                    busy |= self.lru.nodes[i as usize].busy > t;
                    hits += 1;
                }
                _ => break,
            }
        }
        (!busy).then_some(hits)
    }

    /// Stores the request's chunks `from .. to` (just computed) at `t` (vLLM
    /// `_get_reqs_to_store` + `prepare_store`): chunks already held are skipped; with a store
    /// threshold, chunks looked up fewer times are skipped; new chunks need free or evictable
    /// (finished, not being loaded, not among these) chunks, LRU first, or the whole store is
    /// refused (returns `false`: the request retries from `from` next time).
    pub(crate) fn store(&mut self, spans: &[Span], from: u64, to: u64, t: Ticks) -> bool {
        let c = self.blocks_per_chunk();
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        for j in from..to {
            let Some(key) = chunk_key(spans, j, c) else {
                break;
            };
            keys.push(key);
        }
        let thr = self.cfg.store_threshold as u64;
        let mut new = 0u64;
        for &k in &keys {
            let counted = thr < 2
                || self
                    .tracker
                    .get(k)
                    .is_some_and(|i| self.tracker.nodes[i as usize].count >= thr);
            if counted && self.lru.get(k).is_none() {
                new += 1;
            }
        }
        if new == 0 {
            self.keys = keys;
            self.touch_all(spans, to);
            return true;
        }
        let free = self.cfg.num_chunks.saturating_sub(self.lru.len);
        if new > free {
            let need = new - free;
            // Atomic: count the evictable chunks first.
            let mut found = 0u64;
            let mut i = self.lru.head;
            while i != NIL && found < need {
                let n = &self.lru.nodes[i as usize];
                if n.ready <= t && n.busy <= t && !keys.contains(&n.key) {
                    found += 1;
                }
                i = n.next;
            }
            if found < need {
                self.delta.stores_skipped += 1;
                self.keys = keys;
                return false;
            }
            let mut evicted = 0u64;
            let mut i = self.lru.head;
            while evicted < need {
                let n = self.lru.nodes[i as usize];
                if n.ready <= t && n.busy <= t && !keys.contains(&n.key) {
                    self.lru.remove(i);
                    evicted += 1;
                }
                i = n.next;
            }
            self.delta.evictions += evicted;
        }
        let (end, bytes) = self.transfer(new, t);
        for &k in &keys {
            let counted = thr < 2
                || self
                    .tracker
                    .get(k)
                    .is_some_and(|i| self.tracker.nodes[i as usize].count >= thr);
            if counted && self.lru.get(k).is_none() {
                self.lru.insert(k, end);
            }
        }
        debug_assert!(self.lru.len <= self.cfg.num_chunks);
        self.delta.stored_chunks += new;
        self.delta.stored_bytes += bytes;
        self.delta.peak_chunks = self.delta.peak_chunks.max(self.lru.len);
        self.keys = keys;
        self.touch_all(spans, to);
        true
    }

    /// Loads `hits` chunks from `start` at `t`: returns when the load finishes.
    pub(crate) fn load(&mut self, spans: &[Span], start: u64, hits: u64, t: Ticks) -> Ticks {
        let (end, bytes) = self.transfer(hits, t);
        let c = self.blocks_per_chunk();
        for j in start..start + hits {
            if let Some(i) = chunk_key(spans, j, c).and_then(|k| self.lru.get(k)) {
                let n = &mut self.lru.nodes[i as usize];
                n.busy = n.busy.max(end);
            }
        }
        self.delta.loads += 1;
        self.delta.loaded_bytes += bytes;
        end
    }
}

impl OffloadStats {
    /// Adds a later delta (`peak_chunks` takes the max).
    pub fn add(&mut self, d: &OffloadStats) {
        self.lookup_tokens += d.lookup_tokens;
        self.hit_tokens += d.hit_tokens;
        self.loads += d.loads;
        self.loaded_bytes += d.loaded_bytes;
        self.stored_chunks += d.stored_chunks;
        self.stored_bytes += d.stored_bytes;
        self.stores_skipped += d.stores_skipped;
        self.evictions += d.evictions;
        self.load_wait_ns += d.load_wait_ns;
        self.peak_chunks = self.peak_chunks.max(d.peak_chunks);
    }
}

impl CpuTier {
    pub(crate) fn stats_delta(&self) -> OffloadStats {
        self.delta
    }
    pub(crate) fn take_delta(&mut self) -> OffloadStats {
        let d = std::mem::take(&mut self.delta);
        self.stats.add(&d);
        d
    }
}
