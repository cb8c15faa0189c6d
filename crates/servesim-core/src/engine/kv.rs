//! The paged KV block pool with vLLM-style prefix caching (content-addressed full blocks,
//! ref-counted, freed cached blocks evicted least-recently-freed first), stored as *runs* of
//! blocks instead of one entry per block.
//!
//! Block identity. A request's content is a list of segments `(stream, start, len)`; two requests
//! share full block `j` exactly when their segment lists agree up to the block's last token
//! (vLLM chains block hashes over token ids, so a block hash identifies the whole prefix). Let
//! segment `i` cover tokens `L_i .. L_i + len_i`; the blocks whose last token lies in it are
//! `j = floor(L_i / bs) .. floor((L_i + len_i) / bs)` (a [`Span`]). Two requests agree up to the
//! end of such a block exactly when they have the same segments before `i` and segment `i` has
//! the same stream and start (its length may differ). So block `j` is identified by
//! `(key_i, j)` with `key_i` a 64-bit hash of (segments before `i`, stream and start of `i`):
//! the same sharing relation as per-block chained hashes, but one key per segment.
//!
//! Runs. The cached blocks of one key form runs `[lo, hi)` of consecutive block indices with the
//! same reference count (a per-key list sorted by `lo`). A run with ref count 0 is one node of
//! the LRU list of evictable blocks; its blocks stand in the order a per-block LRU would hold
//! them: a request frees its blocks tail-first (as vLLM), so run `[lo, hi)` entered the LRU as
//! `hi - 1, hi - 2, ..., lo` and is evicted from its top (`hi` decreases). Taking hits splits
//! the bottom off a run (the rest keeps its LRU place); releasing splits held runs at the
//! holder's range and appends the blocks whose count reaches 0 tail-first, merging with the LRU
//! tail when they continue it downwards. Every operation gives exactly what the per-block
//! structure gives (the tests drive both with random operations); its cost grows with runs and
//! segments, not blocks: a request with unique content is one run.
//!
//! One cached block (a "unit") stands for `group` physical blocks (one per full-attention KV
//! cache group). Never-hashed physical blocks are only counted.

use crate::engine::Segment;
use crate::rng::mix64;
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

const NIL: u32 = u32::MAX;
/// Root of every key chain.
const KEY_ROOT: u64 = 0x243F_6A88_85A3_08D3;
/// Odd multipliers spreading offsets and lengths (2^64 / golden ratio; SplitMix64's second).
const KEY_STEP: u64 = 0x9E37_79B9_7F4A_7C15;
const KEY_LEN: u64 = 0x94D0_49BB_1331_11EB;

/// The full blocks whose last token lies in one segment: blocks `lo .. hi` of the request, all
/// identified by `key` (a hash of the segments before it and its stream and start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub key: u64,
    pub lo: u64,
    pub hi: u64,
}

/// Appends the spans of a (normalised) segment list to `out`: one per segment that has a full
/// block ending in it, contiguous in block index (`out[i].hi == out[i + 1].lo`), starting at 0.
pub(crate) fn spans_of(segs: &[Segment], bs: u64, out: &mut Vec<Span>) {
    let mut ctx = KEY_ROOT;
    let mut pos = 0u64;
    for s in segs {
        let key = mix64(mix64(ctx ^ s.stream).wrapping_add(s.start.wrapping_mul(KEY_STEP)));
        let (lo, hi) = (pos / bs, (pos + s.len) / bs);
        if hi > lo {
            out.push(Span { key, lo, hi });
        }
        ctx = mix64(key ^ s.len.wrapping_mul(KEY_LEN));
        pos += s.len;
    }
}

/// Cached blocks `lo .. hi` of key slot `key` on which a request holds one reference each.
/// `run` is a hint: the run that covered block `hi - 1` when the range was last extended (it
/// may have been merged away since; [`KvPool::register`] checks it before use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    key: u32,
    run: u32,
    lo: u64,
    hi: u64,
}

#[derive(Clone, Copy, Debug)]
struct Run {
    key: u32,
    /// References per block (all blocks of a run have the same count); 0 = in the LRU list;
    /// `FREE_RUN` = unused slot.
    refs: u32,
    lo: u64,
    hi: u64,
    /// LRU links (valid when `refs == 0`).
    prev: u32,
    next: u32,
    /// The highest run of its key (the last of the key's list).
    top: bool,
}
const FREE_RUN: u32 = u32::MAX;

/// The runs of one key, sorted by `lo`, disjoint. Empty = unused slot (its `Vec` is kept).
struct KeySlot {
    key: u64,
    runs: Vec<u32>,
}

pub(crate) struct KvPool {
    total: u64,
    group: u64,
    free_uncached: u64,
    keys: IdMap<u32>,
    key_slots: Vec<KeySlot>,
    free_keys: Vec<u32>,
    runs: Vec<Run>,
    free_runs: Vec<u32>,
    /// LRU list of evictable runs: the head's top block is evicted first.
    head: u32,
    tail: u32,
    /// Evictable cached blocks (units).
    evictable: u64,
}

impl KvPool {
    pub fn new(total: u64, group: u64) -> KvPool {
        KvPool {
            total,
            group,
            free_uncached: total,
            keys: IdMap::default(),
            key_slots: Vec::new(),
            free_keys: Vec::new(),
            runs: Vec::new(),
            free_runs: Vec::new(),
            head: NIL,
            tail: NIL,
            evictable: 0,
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

    fn new_run(&mut self, key: u32, lo: u64, hi: u64, refs: u32) -> u32 {
        let r = Run {
            key,
            refs,
            lo,
            hi,
            prev: NIL,
            next: NIL,
            top: false,
        };
        match self.free_runs.pop() {
            Some(id) => {
                self.runs[id as usize] = r;
                id
            }
            None => {
                self.runs.push(r);
                (self.runs.len() - 1) as u32
            }
        }
    }

    fn free_run(&mut self, id: u32) {
        self.runs[id as usize].refs = FREE_RUN;
        self.free_runs.push(id);
    }

    /// Marks the last run of key slot `k` as its top (and the one below as not), after the
    /// list changed at its end.
    fn retop(&mut self, k: u32) {
        let runs = &self.key_slots[k as usize].runs;
        if let Some(&last) = runs.last() {
            self.runs[last as usize].top = true;
        }
        if runs.len() >= 2 {
            self.runs[runs[runs.len() - 2] as usize].top = false;
        }
    }

    fn key_slot(&mut self, key: u64) -> u32 {
        if let Some(&k) = self.keys.get(&key) {
            return k;
        }
        let k = match self.free_keys.pop() {
            Some(k) => {
                self.key_slots[k as usize].key = key;
                k
            }
            None => {
                self.key_slots.push(KeySlot {
                    key,
                    runs: Vec::new(),
                });
                (self.key_slots.len() - 1) as u32
            }
        };
        self.keys.insert(key, k);
        k
    }

    #[inline]
    fn unlink(&mut self, id: u32) {
        let Run { prev, next, .. } = self.runs[id as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.runs[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.runs[next as usize].prev = prev;
        }
    }

    /// Makes run `id` (at `pos` in its key's list, count just dropped to 0) the most recently
    /// freed, merging it into the LRU tail when the tail continues it downwards.
    fn push_lru(&mut self, id: u32, pos: usize) {
        let r = self.runs[id as usize];
        self.evictable += r.hi - r.lo;
        if self.tail != NIL {
            let t = &mut self.runs[self.tail as usize];
            if t.key == r.key && t.lo == r.hi {
                // Tail `[hi, x)` then `hi - 1 .. lo`: one run `[lo, x)` evicted from the top.
                // (`id` is below the tail run of its key, so not the key's top.)
                t.lo = r.lo;
                self.key_slots[r.key as usize].runs.remove(pos);
                self.free_run(id);
                return;
            }
        }
        let run = &mut self.runs[id as usize];
        run.prev = self.tail;
        run.next = NIL;
        if self.tail == NIL {
            self.head = id;
        } else {
            self.runs[self.tail as usize].next = id;
        }
        self.tail = id;
    }

    /// Splits run `runs[pos]` of key slot `k` at `at` (strictly inside): the run keeps
    /// `[at, hi)` (and its LRU place), a new run `[lo, at)` with the same count is inserted at
    /// `pos` and returned. An evictable run's lower part must be taken by the caller at once.
    fn split(&mut self, k: u32, pos: usize, at: u64) -> u32 {
        let id = self.key_slots[k as usize].runs[pos];
        let Run { lo, refs, .. } = self.runs[id as usize];
        debug_assert!(lo < at && at < self.runs[id as usize].hi);
        self.runs[id as usize].lo = at;
        let low = self.new_run(k, lo, at, refs);
        self.key_slots[k as usize].runs.insert(pos, low);
        low
    }

    /// Merges held runs `pos` and `pos + 1` of key slot `k` if they touch and have the same
    /// count (runs are only a compressed form of per-block counts, so this changes nothing).
    fn merge_held(&mut self, k: u32, pos: usize) {
        let runs = &self.key_slots[k as usize].runs;
        if pos + 1 >= runs.len() {
            return;
        }
        let (a, b) = (runs[pos], runs[pos + 1]);
        let (ra, rb) = (self.runs[a as usize], self.runs[b as usize]);
        if ra.refs > 0 && ra.refs == rb.refs && ra.hi == rb.lo {
            self.runs[a as usize].hi = rb.hi;
            self.key_slots[k as usize].runs.remove(pos + 1);
            self.free_run(b);
            self.retop(k);
        }
    }

    /// The longest cached prefix of a request's blocks `0 .. maxb` (its `spans`): returns
    /// `(blocks hit, how many of them are evictable)`.
    pub fn lookup(&self, spans: &[Span], maxb: u64) -> (u64, u64) {
        let mut j = 0u64;
        let mut ev = 0u64;
        for sp in spans {
            let end = sp.hi.min(maxb);
            if sp.lo >= end {
                break;
            }
            debug_assert_eq!(sp.lo, j, "spans are contiguous");
            let Some(&k) = self.keys.get(&sp.key) else {
                break;
            };
            // Every run of this key lies at or above `sp.lo` (same content before it).
            for &id in &self.key_slots[k as usize].runs {
                let r = &self.runs[id as usize];
                if r.lo != j {
                    break;
                }
                let e = r.hi.min(end);
                if r.refs == 0 {
                    ev += e - j;
                }
                j = e;
                if j == end {
                    break;
                }
            }
            if j < end {
                break;
            }
        }
        (j, ev)
    }

    /// Takes a reference on the request's first `hits` blocks (a prefix hit just found by
    /// [`KvPool::lookup`]) and records them in `held`.
    pub fn take(&mut self, spans: &[Span], hits: u64, held: &mut Vec<Held>) {
        for sp in spans {
            let end = sp.hi.min(hits);
            if sp.lo >= end {
                break;
            }
            let k = self.keys[&sp.key];
            let mut pos = 0;
            loop {
                let id = self.key_slots[k as usize].runs[pos];
                let r = self.runs[id as usize];
                debug_assert!(r.lo < end);
                // A run reaching past the hit is split: its top keeps the LRU place.
                let split = r.hi > end;
                let id = if split { self.split(k, pos, end) } else { id };
                let run = &mut self.runs[id as usize];
                let len = run.hi - run.lo;
                run.refs += 1;
                if run.refs == 1 {
                    if !split {
                        self.unlink(id);
                    }
                    self.evictable -= len;
                }
                if self.runs[id as usize].hi == end {
                    break;
                }
                pos += 1;
            }
            self.coalesce(k, 0, pos + 1);
            let run = self.run_at(k, end - 1);
            push_held(held, k, run, sp.lo, end);
        }
    }

    /// The run of key slot `k` that covers block `j` (cached).
    fn run_at(&self, k: u32, j: u64) -> u32 {
        let runs = &self.key_slots[k as usize].runs;
        let i = runs.partition_point(|&id| self.runs[id as usize].hi <= j);
        debug_assert!(self.runs[runs[i] as usize].lo <= j);
        runs[i]
    }

    /// Merges adjacent held runs with the same count among positions `a ..= b` of key slot `k`.
    fn coalesce(&mut self, k: u32, a: usize, b: usize) {
        for p in (a..=b).rev() {
            self.merge_held(k, p);
        }
    }

    /// Registers the request's blocks `from .. upto` (just filled; allocated and held by it):
    /// blocks not cached yet become cached with one reference (recorded in `held`); blocks
    /// already cached stay private duplicates (vLLM keeps duplicate blocks uncached for reuse).
    /// Returns the number of blocks that became cached.
    #[inline]
    pub fn register(&mut self, spans: &[Span], from: u64, upto: u64, held: &mut Vec<Held>) -> u64 {
        // The common case inline (a decode's next block, the next prefill chunk of one segment):
        // blocks `from .. upto` lie in the last span and extend the request's own top run, as
        // the fast path of `register_general` (which gives the same result).
        if let (Some(sp), Some(h)) = (spans.last(), held.last_mut()) {
            if sp.lo < from && upto <= sp.hi && h.hi == from && from < upto {
                let r = &mut self.runs[h.run as usize];
                if r.refs == 1 && r.top && r.key == h.key && r.lo < from && r.hi == from {
                    r.hi = upto;
                    h.hi = upto;
                    return upto - from;
                }
            }
        }
        self.register_general(spans, from, upto, held)
    }

    #[inline(never)]
    fn register_general(
        &mut self,
        spans: &[Span],
        from: u64,
        upto: u64,
        held: &mut Vec<Held>,
    ) -> u64 {
        let mut added = 0;
        let first = spans.partition_point(|sp| sp.hi <= from);
        for sp in &spans[first..] {
            let (a, b) = (sp.lo.max(from), sp.hi.min(upto));
            if a >= b {
                break;
            }
            // Fast path (decode output, the next prefill chunk): the request's last held range
            // ends at `a` inside this span (so it is in this key), and its hinted run still
            // covers block `a - 1`, has one reference and is the key's top run, so nothing
            // covers `a .. b`: the run grows (what the general path's merge does).
            if let Some(h) = held.last_mut() {
                if h.hi == a && a > sp.lo {
                    let r = &mut self.runs[h.run as usize];
                    if r.refs == 1 && r.top && r.key == h.key && r.lo < a && r.hi == a {
                        r.hi = b;
                        h.hi = b;
                        added += b - a;
                        continue;
                    }
                }
            }
            let k = self.key_slot(sp.key);
            let mut j = a;
            let mut pos = {
                let runs = &self.key_slots[k as usize].runs;
                let rr = &self.runs;
                runs.partition_point(|&id| rr[id as usize].hi <= j)
            };
            while j < b {
                let runs = &self.key_slots[k as usize].runs;
                if pos < runs.len() && self.runs[runs[pos] as usize].lo <= j {
                    // Already cached: a private duplicate.
                    j = self.runs[runs[pos] as usize].hi.min(b);
                    pos += 1;
                    continue;
                }
                let gap_end = if pos < runs.len() {
                    self.runs[runs[pos] as usize].lo.min(b)
                } else {
                    b
                };
                let below = (pos > 0).then(|| runs[pos - 1]);
                match below {
                    Some(p) if self.runs[p as usize].refs == 1 && self.runs[p as usize].hi == j => {
                        self.runs[p as usize].hi = gap_end;
                        self.merge_held(k, pos - 1);
                    }
                    _ => {
                        let id = self.new_run(k, j, gap_end, 1);
                        self.key_slots[k as usize].runs.insert(pos, id);
                        self.retop(k);
                        self.merge_held(k, pos);
                    }
                }
                // A merge with the run above removed it from the list: `pos` now points past
                // the (grown) run that covers `gap_end`, or at the next run.
                let runs = &self.key_slots[k as usize].runs;
                pos = runs.partition_point(|&id| self.runs[id as usize].hi <= gap_end);
                let run = self.run_at(k, gap_end - 1);
                push_held(held, k, run, j, gap_end);
                added += gap_end - j;
                j = gap_end;
            }
        }
        added
    }

    /// Drops the references recorded in `held` (tail first, as vLLM frees a request's blocks):
    /// blocks whose count reaches 0 become evictable, most recently freed.
    pub fn release(&mut self, held: &[Held]) {
        for h in held.iter().rev() {
            let k = h.key;
            let mut pos = {
                let runs = &self.key_slots[k as usize].runs;
                let rr = &self.runs;
                runs.partition_point(|&id| rr[id as usize].lo < h.hi)
            };
            debug_assert!(pos > 0, "held blocks are cached");
            // Runs covering [h.lo, h.hi) (all held, contiguous), from the top down.
            loop {
                pos -= 1;
                let mut id = self.key_slots[k as usize].runs[pos];
                let r = self.runs[id as usize];
                debug_assert!(r.refs > 0 && r.hi > h.lo, "released blocks are held");
                if r.hi > h.hi {
                    id = self.split(k, pos, h.hi);
                }
                if r.lo < h.lo {
                    self.split(k, pos, h.lo);
                    pos += 1;
                }
                let run = &mut self.runs[id as usize];
                run.refs -= 1;
                if run.refs == 0 {
                    self.push_lru(id, pos);
                }
                if r.lo <= h.lo {
                    break;
                }
            }
            // Merge what stayed held, from just below the range to just above it.
            let runs = &self.key_slots[k as usize].runs;
            let rr = &self.runs;
            let a = runs.partition_point(|&id| rr[id as usize].hi < h.lo);
            let b = runs.partition_point(|&id| rr[id as usize].lo <= h.hi);
            if b > a {
                self.coalesce(k, a, b - 1);
            }
        }
    }

    /// Allocates `n` physical blocks, evicting cached blocks least-recently-freed first.
    /// Returns false (and changes nothing) if fewer than `n` are available.
    #[inline]
    pub fn alloc(&mut self, n: u64) -> bool {
        if n <= self.free_uncached {
            self.free_uncached -= n;
            return true;
        }
        // One eviction from the LRU head's top that leaves the head run non-empty (a decode's
        // next block on a full pool): what the loop of `alloc_evicting` does in one pass.
        if self.group == 1 && self.head != NIL {
            let deficit = n - self.free_uncached;
            let r = &mut self.runs[self.head as usize];
            if deficit < r.hi - r.lo {
                r.hi -= deficit;
                self.evictable -= deficit;
                self.free_uncached = 0;
                return true;
            }
        }
        self.alloc_evicting(n)
    }

    /// [`KvPool::alloc`] when it has to evict.
    #[inline(never)]
    fn alloc_evicting(&mut self, n: u64) -> bool {
        if n > self.available() {
            return false;
        }
        while self.free_uncached < n {
            let deficit = n - self.free_uncached;
            // Cached units to evict (one unit frees `group` blocks; 1 in most models).
            let units = if self.group == 1 {
                deficit
            } else {
                deficit.div_ceil(self.group)
            };
            let id = self.head;
            debug_assert!(id != NIL, "evictable blocks exist");
            let r = &mut self.runs[id as usize];
            let ev = units.min(r.hi - r.lo);
            r.hi -= ev;
            self.evictable -= ev;
            self.free_uncached += ev * self.group;
            if r.hi == r.lo {
                self.drop_evicted_run(id);
            }
        }
        self.free_uncached -= n;
        true
    }

    /// Removes run `id`, fully evicted, from the LRU list and its key (freeing the key when it
    /// was the key's last run).
    fn drop_evicted_run(&mut self, id: u32) {
        let (k, lo) = (self.runs[id as usize].key, self.runs[id as usize].lo);
        self.unlink(id);
        let slot = &mut self.key_slots[k as usize];
        let pos = slot
            .runs
            .iter()
            .position(|&x| x == id)
            .expect("run is listed under its key");
        debug_assert!(pos == 0 || self.runs[slot.runs[pos - 1] as usize].hi <= lo);
        slot.runs.remove(pos);
        if slot.runs.is_empty() {
            let key = slot.key;
            self.keys.remove(&key);
            self.free_keys.push(k);
        } else {
            self.retop(k);
        }
        self.free_run(id);
    }

    /// Returns `n` private (never-hashed) physical blocks to the pool.
    pub fn release_private(&mut self, n: u64) {
        self.free_uncached += n;
        debug_assert!(self.available() <= self.total);
    }
}

/// Appends `[lo, hi)` of key slot `k` to a request's held ranges (merged with the last one when
/// it continues it).
fn push_held(held: &mut Vec<Held>, k: u32, run: u32, lo: u64, hi: u64) {
    if let Some(last) = held.last_mut() {
        if last.key == k && last.hi == lo {
            last.hi = hi;
            last.run = run;
            return;
        }
    }
    held.push(Held {
        key: k,
        run,
        lo,
        hi,
    });
}

/// Blocks in a request's held ranges.
pub(crate) fn held_blocks(held: &[Held]) -> u64 {
    held.iter().map(|h| h.hi - h.lo).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Rng, Stream};
    use std::collections::{BTreeMap, VecDeque};

    /// Per-block chained hashes of `segs` computed independently of [`spans_of`]: block `j`'s
    /// hash chains block `j - 1`'s with the `(stream, offset, length)` pieces of its tokens, as
    /// vLLM chains parent hashes over token ids.
    fn block_hashes(segs: &[Segment], bs: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut h = 0x1234_5678u64;
        let mut in_block = 0u64;
        for sg in segs {
            let mut off = 0;
            while off < sg.len {
                let take = (bs - in_block).min(sg.len - off);
                let piece = sg
                    .stream
                    .wrapping_add((sg.start + off).wrapping_mul(KEY_STEP));
                h = mix64(h ^ piece).wrapping_add(take);
                off += take;
                in_block += take;
                if in_block == bs {
                    out.push(h);
                    in_block = 0;
                }
            }
        }
        out
    }

    /// The reference: one entry per cached block (hash -> ref count) and a per-block LRU queue
    /// of evictable blocks (front = least recently freed), as vLLM's `BlockPool`.
    struct Naive {
        group: u64,
        free_uncached: u64,
        refs: BTreeMap<u64, u32>,
        lru: VecDeque<u64>,
    }

    impl Naive {
        fn available(&self) -> u64 {
            self.free_uncached + self.lru.len() as u64 * self.group
        }
        fn lookup(&self, hashes: &[u64]) -> (u64, u64) {
            let (mut n, mut ev) = (0, 0);
            for h in hashes {
                match self.refs.get(h) {
                    Some(&r) => {
                        n += 1;
                        ev += (r == 0) as u64;
                    }
                    None => break,
                }
            }
            (n, ev)
        }
        fn take(&mut self, h: u64) {
            let r = self.refs.get_mut(&h).expect("hit is cached");
            if *r == 0 {
                let i = self.lru.iter().position(|&x| x == h).expect("in lru");
                self.lru.remove(i);
            }
            *r += 1;
        }
        fn register(&mut self, h: u64) -> bool {
            if self.refs.contains_key(&h) {
                return false;
            }
            self.refs.insert(h, 1);
            true
        }
        fn release(&mut self, h: u64) {
            let r = self.refs.get_mut(&h).expect("held is cached");
            *r -= 1;
            if *r == 0 {
                self.lru.push_back(h);
            }
        }
        fn alloc(&mut self, n: u64) -> bool {
            if n > self.available() {
                return false;
            }
            while self.free_uncached < n {
                let h = self.lru.pop_front().expect("evictable");
                self.refs.remove(&h);
                self.free_uncached += self.group;
            }
            self.free_uncached -= n;
            true
        }
    }

    /// A request as both pools see it.
    struct Req {
        spans: Vec<Span>,
        hashes: Vec<u64>,
        len: u64,
        computed: u64,
        /// Physical blocks held, registered blocks, held ranges / hashes of ref'd blocks.
        held: u64,
        reg: u64,
        ranges: Vec<Held>,
        naive_refs: Vec<u64>,
    }

    /// Random content with much sharing: shared prefixes, conversations that grow, trace-like
    /// lists of short shared segments, unique tails, offsets that are not block-aligned.
    fn content(rng: &mut Rng, unique: u64) -> Vec<Segment> {
        let mut segs = Vec::new();
        let seg = |stream: u64, start: u64, len: u64| Segment { stream, start, len };
        match rng.range_u64(0, 4) {
            0 => {
                segs.push(seg(100 + rng.range_u64(0, 2), 0, 9 + rng.range_u64(0, 2)));
                segs.push(seg(unique, 0, rng.range_u64(1, 30)));
            }
            1 => {
                if rng.range_u64(0, 1) == 0 {
                    segs.push(seg(200, 0, 7));
                }
                segs.push(seg(300 + rng.range_u64(0, 3), 0, rng.range_u64(1, 60)));
            }
            2 => {
                for _ in 0..rng.range_u64(1, 6) {
                    segs.push(seg(400 + rng.range_u64(0, 3), 0, 8));
                }
                segs.push(seg(unique, 0, rng.range_u64(0, 9)));
            }
            3 => segs.push(seg(unique, 0, rng.range_u64(1, 40))),
            _ => {
                segs.push(seg(500, rng.range_u64(0, 2) * 3, rng.range_u64(1, 20)));
                segs.push(seg(501, 0, rng.range_u64(1, 20)));
            }
        }
        crate::engine::Request::normalize_segments(&mut segs);
        segs
    }

    /// The pool's structural invariants: each key's runs sorted, disjoint, non-empty, listed
    /// under their key, only the last one marked top; the LRU list holds exactly the runs with
    /// count 0 and their blocks sum to `evictable`; every key in the map has runs.
    fn check_invariants(p: &KvPool) {
        let mut listed = 0;
        for (&key, &k) in &p.keys {
            let slot = &p.key_slots[k as usize];
            assert_eq!(slot.key, key);
            assert!(!slot.runs.is_empty());
            for (i, &id) in slot.runs.iter().enumerate() {
                let r = p.runs[id as usize];
                assert!(r.refs != FREE_RUN && r.key == k && r.lo < r.hi);
                assert_eq!(r.top, i + 1 == slot.runs.len());
                if i > 0 {
                    assert!(p.runs[slot.runs[i - 1] as usize].hi <= r.lo);
                }
                listed += 1;
            }
        }
        let (mut id, mut in_lru, mut blocks, mut prev) = (p.head, 0, 0, NIL);
        while id != NIL {
            let r = p.runs[id as usize];
            assert_eq!(r.refs, 0);
            assert_eq!(r.prev, prev);
            in_lru += 1;
            blocks += r.hi - r.lo;
            prev = id;
            id = r.next;
        }
        assert_eq!(prev, p.tail);
        assert_eq!(blocks, p.evictable);
        let zero = p.runs.iter().filter(|r| r.refs == 0).count();
        let live = p.runs.iter().filter(|r| r.refs != FREE_RUN).count();
        assert_eq!(zero, in_lru);
        assert_eq!(live, listed);
        assert_eq!(live + p.free_runs.len(), p.runs.len());
    }

    fn fp(tokens: u64, bs: u64, group: u64) -> u64 {
        tokens.div_ceil(bs) * group
    }

    /// Registers the request's full blocks up to `computed` in both pools; checks they agree.
    fn register_both(p: &mut KvPool, n: &mut Naive, r: &mut Req, bs: u64) {
        let upto = r.computed / bs;
        if upto <= r.reg {
            return;
        }
        let added = p.register(&r.spans, r.reg, upto, &mut r.ranges);
        let mut naive_added = 0;
        for &h in &r.hashes[r.reg as usize..upto as usize] {
            if n.register(h) {
                r.naive_refs.push(h);
                naive_added += 1;
            }
        }
        assert_eq!(added, naive_added, "blocks newly cached");
        r.reg = upto;
    }

    fn release_both(p: &mut KvPool, n: &mut Naive, r: &mut Req, group: u64) {
        p.release(&r.ranges);
        for &h in r.naive_refs.iter().rev() {
            n.release(h);
        }
        let private = r.held - group * held_blocks(&r.ranges);
        assert_eq!(held_blocks(&r.ranges), r.naive_refs.len() as u64);
        p.release_private(private);
        n.free_uncached += private;
        r.ranges.clear();
        r.naive_refs.clear();
        r.held = 0;
        r.reg = 0;
        r.computed = 0;
    }

    #[test]
    fn run_pool_matches_a_per_block_lru_pool_under_random_requests() {
        for seed in 0..100u64 {
            let mut rng = Rng::stream(seed, Stream::Test);
            let bs = rng.range_u64(1, 4);
            let group = rng.range_u64(1, 3);
            let total = rng.range_u64(30, 160);
            let mut p = KvPool::new(total, group);
            let mut n = Naive {
                group,
                free_uncached: total,
                refs: BTreeMap::new(),
                lru: VecDeque::new(),
            };
            let mut waiting: Vec<Req> = Vec::new();
            let mut running: Vec<Req> = Vec::new();
            for step in 0..3000u64 {
                match rng.range_u64(0, 9) {
                    0 | 1 => {
                        let segs = content(&mut rng, 1_000_000 + seed * 10_000 + step);
                        let mut spans = Vec::new();
                        spans_of(&segs, bs, &mut spans);
                        let len: u64 = segs.iter().map(|s| s.len).sum();
                        waiting.push(Req {
                            spans,
                            hashes: block_hashes(&segs, bs),
                            len,
                            computed: 0,
                            held: 0,
                            reg: 0,
                            ranges: Vec::new(),
                            naive_refs: Vec::new(),
                        });
                    }
                    2 | 3 if !waiting.is_empty() => {
                        // admission: the longest cached prefix of at most len - 1 tokens
                        let i = rng.range_u64(0, waiting.len() as u64 - 1) as usize;
                        let r = &mut waiting[i];
                        let maxb = (r.len - 1) / bs;
                        let got = p.lookup(&r.spans, maxb);
                        assert_eq!(
                            got,
                            n.lookup(&r.hashes[..maxb as usize]),
                            "seed {seed} step {step}"
                        );
                        let (hit, ev) = got;
                        let target = rng.range_u64(hit * bs + 1, r.len);
                        let need = fp(target, bs, group) - group * hit;
                        if need + group * ev <= p.available() {
                            let mut r = waiting.swap_remove(i);
                            if hit > 0 {
                                p.take(&r.spans, hit, &mut r.ranges);
                                for &h in &r.hashes[..hit as usize] {
                                    n.take(h);
                                    r.naive_refs.push(h);
                                }
                            }
                            assert!(p.alloc(need) && n.alloc(need));
                            r.held = need + group * hit;
                            r.reg = hit;
                            r.computed = target;
                            register_both(&mut p, &mut n, &mut r, bs);
                            running.push(r);
                        }
                    }
                    4..=6 if !running.is_empty() => {
                        // progress: a prefill chunk or decode tokens
                        let i = rng.range_u64(0, running.len() as u64 - 1) as usize;
                        let r = &mut running[i];
                        if r.computed < r.len {
                            let to = rng.range_u64(r.computed + 1, r.len);
                            let need = fp(to, bs, group) - r.held;
                            let ok = p.alloc(need);
                            assert_eq!(ok, n.alloc(need));
                            if ok {
                                r.held += need;
                                r.computed = to;
                                register_both(&mut p, &mut n, r, bs);
                            }
                        }
                    }
                    7 if !running.is_empty() => {
                        // finish or preemption (back to waiting, blocks freed tail-first)
                        let i = rng.range_u64(0, running.len() as u64 - 1) as usize;
                        let mut r = running.swap_remove(i);
                        release_both(&mut p, &mut n, &mut r, group);
                        if rng.range_u64(0, 1) == 0 {
                            waiting.push(r);
                        }
                    }
                    8 => {
                        // a foreign allocation (evicts)
                        let k = rng.range_u64(0, 6);
                        let ok = p.alloc(k);
                        assert_eq!(ok, n.alloc(k));
                        if ok {
                            p.release_private(k);
                            n.free_uncached += k;
                        }
                    }
                    _ => {
                        for r in waiting.iter().chain(&running) {
                            let maxb = r.hashes.len() as u64;
                            assert_eq!(p.lookup(&r.spans, maxb), n.lookup(&r.hashes));
                        }
                    }
                }
                assert_eq!(p.available(), n.available(), "seed {seed} step {step}");
                assert_eq!(p.evictable, n.lru.len() as u64);
                check_invariants(&p);
            }
            // every run stays as coarse as the counts allow: no two adjacent held runs with
            // the same count are left unmerged
            for slot in &p.key_slots {
                for w in slot.runs.windows(2) {
                    let (a, b) = (p.runs[w[0] as usize], p.runs[w[1] as usize]);
                    assert!(a.hi <= b.lo, "runs are sorted and disjoint");
                }
            }
            for mut r in running.drain(..) {
                release_both(&mut p, &mut n, &mut r, group);
            }
            assert_eq!(p.available(), total);
            assert_eq!(n.available(), total);
        }
    }

    #[test]
    fn spans_identify_blocks_exactly_as_chained_block_hashes() {
        let mut rng = Rng::stream(5, Stream::Test);
        let bs = 4;
        let mut all: Vec<(Vec<Span>, Vec<u64>)> = Vec::new();
        for i in 0..300 {
            let segs = content(&mut rng, 9_000_000 + i % 7);
            let mut spans = Vec::new();
            spans_of(&segs, bs, &mut spans);
            let hashes = block_hashes(&segs, bs);
            // spans are contiguous from block 0 and cover every full block
            let mut j = 0;
            for sp in &spans {
                assert_eq!(sp.lo, j);
                j = sp.hi;
            }
            assert_eq!(j, hashes.len() as u64);
            all.push((spans, hashes));
        }
        let key_of =
            |spans: &[Span], j: u64| spans.iter().find(|s| s.lo <= j && j < s.hi).unwrap().key;
        let mut equal_pairs = 0;
        for a in &all {
            for b in &all {
                for j in 0..a.1.len().min(b.1.len()) as u64 {
                    let same_hash = a.1[j as usize] == b.1[j as usize];
                    assert_eq!(key_of(&a.0, j) == key_of(&b.0, j), same_hash);
                    equal_pairs += same_hash as u64;
                }
            }
        }
        assert!(equal_pairs > 10_000, "the content generator shares blocks");
    }

    #[test]
    fn eviction_takes_the_least_recently_freed_request_tail_first() {
        let bs = 1;
        let mut p = KvPool::new(6, 1);
        let seg = |stream| {
            [Segment {
                stream,
                start: 0,
                len: 3,
            }]
        };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        spans_of(&seg(1), bs, &mut a);
        spans_of(&seg(2), bs, &mut b);
        let (mut ha, mut hb) = (Vec::new(), Vec::new());
        assert!(p.alloc(6));
        assert_eq!(p.register(&a, 0, 3, &mut ha), 3);
        assert_eq!(p.register(&b, 0, 3, &mut hb), 3);
        p.release(&ha); // a freed first: evicted first, from its last block
        p.release(&hb);
        assert_eq!(p.available(), 6);
        assert_eq!(p.lookup(&a, 3), (3, 3));
        assert!(p.alloc(1));
        assert_eq!(p.lookup(&a, 3), (2, 2));
        assert!(p.alloc(2));
        assert_eq!(p.lookup(&a, 3), (0, 0));
        assert_eq!(p.lookup(&b, 3), (3, 3));
        // a hit on b's first two blocks leaves its third evictable and next in line
        let mut hb2 = Vec::new();
        p.take(&b, 2, &mut hb2);
        assert_eq!(p.available(), 1);
        assert!(p.alloc(1));
        assert_eq!(p.lookup(&b, 3), (2, 0));
        assert!(!p.alloc(1));
        p.release(&hb2);
        assert_eq!(p.available(), 2);
    }
}
