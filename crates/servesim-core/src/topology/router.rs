//! Routers in front of a pool's replicas: round-robin, least outstanding requests, and the llm-d
//! endpoint picker (EPP) with weighted scorers (queue, KV-cache utilisation, prefix cache from
//! an approximate router-side block index). Formulas and sources: `docs/topology.md`.
//!
//! Per-request cost: O(log n) in the number of replicas for round-robin and least-requests
//! (ordered sets); for llm-d, O(prefix blocks x replicas holding them) for the prefix scorer plus
//! O(log n); the O(n log n) refresh of the queue/KV snapshot runs once per refresh interval.

use super::{terr, TopologyError, DEFAULT_REFRESH_INTERVAL_MS};
use crate::engine::{IdMap, Request, Segment};
use crate::rng::{hash2, Rng, Stream};
use crate::units::Ticks;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Which router.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterPolicy {
    /// Replicas in turn.
    #[default]
    RoundRobin,
    /// The replica with the fewest outstanding (routed, unfinished) requests; ties to the lowest
    /// index.
    LeastRequests,
    /// llm-d's endpoint picker: the highest weighted sum of scorer values.
    LlmD,
}

impl RouterPolicy {
    pub fn name(self) -> &'static str {
        match self {
            RouterPolicy::RoundRobin => "round-robin",
            RouterPolicy::LeastRequests => "least-requests",
            RouterPolicy::LlmD => "llm-d",
        }
    }
}

/// Weights of the llm-d scorers.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EppWeights {
    /// Queue scorer: `(max - q) / (max - min)` over the replicas' waiting queues, 1 when equal.
    pub queue: f64,
    /// KV-cache utilisation scorer: `1 - usage`.
    pub kv_cache: f64,
    /// Prefix-cache scorer: the fraction of the prompt's blocks the replica holds.
    pub prefix: f64,
}

impl EppWeights {
    /// llm-d's built-in default profile: queue 2, kv-cache utilisation 2, prefix 3.
    pub const DEFAULT: EppWeights = EppWeights {
        queue: 2.0,
        kv_cache: 2.0,
        prefix: 3.0,
    };
    /// llm-d's precise-prefix-cache-aware sample configuration: prefix 2, kv-cache 1, queue 1.
    pub const PRECISE_PREFIX: EppWeights = EppWeights {
        queue: 1.0,
        kv_cache: 1.0,
        prefix: 2.0,
    };

    /// A preset by name (`default`, `precise-prefix`).
    pub fn preset(name: &str) -> Option<EppWeights> {
        match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "default" => Some(EppWeights::DEFAULT),
            "precise-prefix" => Some(EppWeights::PRECISE_PREFIX),
            _ => None,
        }
    }
}

/// A validated router.
#[derive(Clone, Debug, PartialEq)]
pub struct RouterSpec {
    pub policy: RouterPolicy,
    pub weights: EppWeights,
    pub refresh: Ticks,
    pub max_outstanding: Option<u32>,
    /// Tokens per block of the prefix index; `None`: llm-d's auto-tune (the engines'
    /// `block_size`, as vLLM's `cache_config_info` reports it).
    pub prefix_block_tokens: Option<u64>,
    /// Blocks the prefix index remembers per replica; `None`: llm-d's auto-tune (the engines'
    /// `num_gpu_blocks`).
    pub prefix_lru_blocks: Option<u64>,
}

/// Blocks of a prompt the prefix scorer hashes at most (llm-d `maxPrefixBlocksToMatch`, 256).
pub const MAX_PREFIX_BLOCKS: usize = 256;
/// Tokens per block of the approximate prefix index when the engines report none (llm-d
/// `defaultBlockSizeTokens`, 16).
pub const DEFAULT_PREFIX_BLOCK_TOKENS: u32 = 16;
/// Blocks remembered per replica when the engines report none (llm-d
/// `defaultLRUCapacityPerServer`, 31,250).
pub const DEFAULT_PREFIX_LRU_BLOCKS: u64 = 31_250;

/// What the engines behind a router report to llm-d's auto-tune (vLLM's `cache_config_info`:
/// `block_size` and `num_gpu_blocks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineCacheInfo {
    pub block_size: u32,
    pub num_gpu_blocks: u64,
}

impl Default for RouterSpec {
    fn default() -> Self {
        RouterSpec {
            policy: RouterPolicy::RoundRobin,
            weights: EppWeights::DEFAULT,
            refresh: Ticks::from_secs_f64(DEFAULT_REFRESH_INTERVAL_MS / 1e3),
            max_outstanding: None,
            prefix_block_tokens: None,
            prefix_lru_blocks: None,
        }
    }
}

impl RouterSpec {
    pub fn from_raw(raw: Option<&super::RawRouter>) -> Result<RouterSpec, TopologyError> {
        let mut s = RouterSpec::default();
        let Some(raw) = raw else {
            return Ok(s);
        };
        s.policy = raw.policy;
        if let Some(p) = &raw.preset {
            s.weights = EppWeights::preset(p).ok_or_else(|| {
                terr(
                    "router.preset",
                    format!("\"{p}\""),
                    "use `default` (queue 2, kv-cache 2, prefix 3) or `precise-prefix` (prefix 2, kv-cache 1, queue 1)",
                )
            })?;
        }
        if let Some(w) = raw.weights {
            for (name, v) in [
                ("queue", w.queue),
                ("kv_cache", w.kv_cache),
                ("prefix", w.prefix),
            ] {
                if !v.is_finite() || !(0.0..=1e6).contains(&v) {
                    return Err(terr(
                        &format!("router.weights.{name}"),
                        v,
                        "a weight is a number between 0 and 1e6",
                    ));
                }
            }
            if w.queue + w.kv_cache + w.prefix <= 0.0 {
                return Err(terr(
                    "router.weights",
                    "all zero",
                    "give at least one scorer a positive weight",
                ));
            }
            s.weights = w;
        }
        if let Some(ms) = raw.refresh_interval_ms {
            if !ms.is_finite() || ms <= 0.0 || ms > 3.6e6 {
                return Err(terr(
                    "router.refresh_interval_ms",
                    ms,
                    "give a refresh interval above 0 and at most 3,600,000 ms (llm-d default 50)",
                ));
            }
            s.refresh = Ticks::from_secs_f64(ms / 1e3).max(Ticks(1));
        }
        if let Some(m) = raw.max_outstanding_per_replica {
            if m == 0 {
                return Err(terr(
                    "router.max_outstanding_per_replica",
                    0,
                    "must be at least 1 (leave it out for no saturation guard)",
                ));
            }
            s.max_outstanding = Some(m);
        }
        if let Some(b) = raw.prefix_block_tokens {
            if b == 0 || b > 65_536 {
                return Err(terr(
                    "router.prefix_block_tokens",
                    b,
                    "must be between 1 and 65,536 tokens (leave it out for llm-d's auto-tune: the engines' block size)",
                ));
            }
            s.prefix_block_tokens = Some(b as u64);
        }
        if let Some(c) = raw.prefix_lru_blocks_per_replica {
            if c == 0 || c > 100_000_000 {
                return Err(terr(
                    "router.prefix_lru_blocks_per_replica",
                    c,
                    "must be between 1 and 100,000,000 blocks (leave it out for llm-d's auto-tune: the engines' num_gpu_blocks)",
                ));
            }
            s.prefix_lru_blocks = Some(c);
        }
        Ok(s)
    }

    /// The prefix index's block size (tokens) and per-replica capacity (blocks) over engines
    /// reporting `cache`: the spec's, else llm-d's auto-tune (`autoTune: true` by default,
    /// `approximateprefix/plugin.go` `GetBlockSize` / `makeserver`): the engines' block size
    /// and `num_gpu_blocks`, falling back to 16 tokens and 31,250 blocks when they report 0.
    pub fn prefix_index_shape(&self, cache: EngineCacheInfo) -> (u64, u64) {
        let block = self.prefix_block_tokens.unwrap_or(match cache.block_size {
            0 => DEFAULT_PREFIX_BLOCK_TOKENS as u64,
            b => b as u64,
        });
        let cap = self
            .prefix_lru_blocks
            .unwrap_or(match cache.num_gpu_blocks {
                0 => DEFAULT_PREFIX_LRU_BLOCKS,
                b => b,
            });
        (block, cap)
    }

    /// One line for people, e.g. `llm-d (queue 2, kv-cache 2, prefix 3; refresh 50 ms)`.
    pub fn describe(&self) -> String {
        let guard = match self.max_outstanding {
            Some(m) => format!("; at most {m} outstanding per replica"),
            None => String::new(),
        };
        match self.policy {
            RouterPolicy::LlmD => format!(
                "llm-d (queue {}, kv-cache {}, prefix {}; refresh {} ms{guard})",
                self.weights.queue,
                self.weights.kv_cache,
                self.weights.prefix,
                self.refresh.0 as f64 / 1e6
            ),
            p => format!("{}{guard}", p.name()),
        }
    }
}

/// Parses the `--router` spelling: `round-robin`, `least-requests`, or `llm-d[:WEIGHTS]` with
/// WEIGHTS a preset name (`default`, `precise-prefix`) or `queue=Q,kv=K,prefix=P` (any subset;
/// the others 0). The one parser for the CLI and the page.
pub fn parse_router(spec: &str) -> Result<super::RawRouter, String> {
    let spec = spec.trim();
    let (name, weights) = match spec.split_once(':') {
        Some((n, w)) => (n.trim(), Some(w.trim())),
        None => (spec, None),
    };
    let policy = match name.to_ascii_lowercase().replace('_', "-").as_str() {
        "round-robin" | "rr" => RouterPolicy::RoundRobin,
        "least-requests" | "least-outstanding" => RouterPolicy::LeastRequests,
        "llm-d" | "epp" => RouterPolicy::LlmD,
        _ => {
            return Err(format!(
                "unknown router `{name}`; use round-robin, least-requests or llm-d[:default|precise-prefix|queue=Q,kv=K,prefix=P]"
            ))
        }
    };
    let mut raw = super::RawRouter {
        policy,
        ..super::RawRouter::default()
    };
    if let Some(w) = weights {
        if policy != RouterPolicy::LlmD {
            return Err(format!(
                "`{name}` takes no weights; weights (`:{w}`) apply to llm-d"
            ));
        }
        if EppWeights::preset(w).is_some() {
            raw.preset = Some(w.to_string());
        } else {
            let mut ew = EppWeights {
                queue: 0.0,
                kv_cache: 0.0,
                prefix: 0.0,
            };
            for part in w.split(',') {
                let Some((k, v)) = part.split_once('=') else {
                    return Err(format!(
                        "llm-d weights `{w}`: write a preset (default, precise-prefix) or queue=Q,kv=K,prefix=P"
                    ));
                };
                let v: f64 = v
                    .trim()
                    .parse()
                    .map_err(|_| format!("llm-d weight `{part}`: the value is not a number"))?;
                match k.trim().to_ascii_lowercase().as_str() {
                    "queue" => ew.queue = v,
                    "kv" | "kv_cache" | "kv-cache" => ew.kv_cache = v,
                    "prefix" => ew.prefix = v,
                    other => {
                        return Err(format!(
                            "llm-d weight `{other}`: the scorers are queue, kv and prefix"
                        ))
                    }
                }
            }
            raw.weights = Some(ew);
        }
    }
    Ok(raw)
}

/// What the router can read about replica `r` (its waiting queue and KV use), at refresh time.
pub trait ReplicaView {
    /// Requests waiting in the replica's engines (vLLM `num_requests_waiting`).
    fn waiting(&self, r: u32) -> u64;
    /// KV cache usage in [0, 1] (vLLM `kv_cache_usage_perc`; mean over the replica's DP ranks).
    fn kv_usage(&self, r: u32) -> f64;
}

/// Approximate prefix index: which replica was sent which prompt blocks (chained hashes of
/// `block` tokens), LRU-bounded per replica (llm-d's prefix-cache plugin).
///
/// One slot per block someone holds (found by its hash), listing its holders as (replica,
/// node) pairs in no order; one node per (replica, block) in a slab, on its replica's LRU list
/// (oldest first; a block sent again moves to the tail). Recording a block costs one hash
/// lookup plus a scan of its holders, an eviction a scan of the evicted block's holders (and a
/// hash removal when it was the last), and nothing is allocated per request once the slabs
/// have grown.
struct PrefixIndex {
    block: u64,
    cap: u64,
    /// Block hash -> its slot in `slots` (present only while someone holds it).
    slot_of: IdMap<u32>,
    slots: Vec<BlockSlot>,
    free_slots: Vec<u32>,
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    /// Per replica: its LRU list (oldest at `head`) and length.
    lru: Vec<Lru>,
    hashes: Vec<u64>,
    segs: Vec<Segment>,
    /// Scratch for [`PrefixIndex::matches`]: blocks matched per replica (all 0 between calls)
    /// and the replicas touched.
    counts: Vec<u32>,
    touched: Vec<u32>,
}

const NIL: u32 = u32::MAX;

/// A held block: its hash and holders, `(replica, node)`, the first inline and the rest in
/// `more` (kept, emptied, when the slot is freed and reused).
struct BlockSlot {
    hash: u64,
    len: u32,
    first: (u32, u32),
    more: Vec<(u32, u32)>,
}

impl BlockSlot {
    /// The node of replica `r`'s holding, if it holds the block.
    #[inline]
    fn find(&self, r: u32) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        if self.first.0 == r {
            return Some(self.first.1);
        }
        self.more.iter().find(|e| e.0 == r).map(|e| e.1)
    }

    #[inline]
    fn add(&mut self, r: u32, n: u32) {
        if self.len == 0 {
            self.first = (r, n);
        } else {
            self.more.push((r, n));
        }
        self.len += 1;
    }

    /// Removes replica `r`'s holding (which exists).
    fn remove(&mut self, r: u32) {
        if self.first.0 == r {
            if let Some(last) = self.more.pop() {
                self.first = last;
            }
        } else if let Some(i) = self.more.iter().position(|e| e.0 == r) {
            self.more.swap_remove(i);
        }
        self.len -= 1;
    }
}

#[derive(Clone, Copy)]
struct Node {
    slot: u32,
    replica: u32,
    /// The replica's LRU list.
    lprev: u32,
    lnext: u32,
}

#[derive(Clone, Copy)]
struct Lru {
    head: u32,
    tail: u32,
    len: u64,
}

impl PrefixIndex {
    fn new(n: u32, block: u64, cap: u64) -> PrefixIndex {
        PrefixIndex {
            block,
            cap,
            slot_of: IdMap::default(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            lru: vec![
                Lru {
                    head: NIL,
                    tail: NIL,
                    len: 0
                };
                n as usize
            ],
            hashes: Vec::new(),
            segs: Vec::new(),
            counts: vec![0; n as usize],
            touched: Vec::new(),
        }
    }

    /// Chained hashes of the prompt's blocks into `self.hashes`, as llm-d's `hashPrompt`
    /// (`approximateprefix/hashing.go`): nothing for a prompt shorter than one block; the
    /// prompt truncated to [`MAX_PREFIX_BLOCKS`] blocks; one hash per full block, then one for
    /// the partial block left over. Two prompts share block `b`'s hash exactly when their
    /// tokens agree up to the end of block `b` (and, for a partial block, its length agrees).
    fn hash_prompt(&mut self, prompt: &[Segment]) {
        self.hashes.clear();
        self.segs.clear();
        self.segs.extend_from_slice(prompt);
        Request::normalize_segments(&mut self.segs);
        let bs = self.block;
        let total: u64 = self.segs.iter().map(|s| s.len).sum();
        if total < bs {
            return;
        }
        let mut left = total.min(bs.saturating_mul(MAX_PREFIX_BLOCKS as u64));
        let mut h: u64 = 0x7072_6566_6978_0001;
        let mut in_block = 0u64;
        for s in &self.segs {
            let mut off = 0u64;
            while off < s.len && left > 0 {
                let take = (bs - in_block).min(s.len - off).min(left);
                h = hash2(h, hash2(s.stream, s.start + off));
                h = hash2(h, take);
                in_block += take;
                off += take;
                left -= take;
                if in_block == bs {
                    self.hashes.push(h);
                    in_block = 0;
                }
            }
        }
        if in_block > 0 {
            self.hashes.push(hash2(h, 0x7061_7274_6961_6c00));
        }
    }

    /// `(replica, blocks)` for every replica holding a block of the prompt's leading run, as
    /// llm-d's `matchLongestPrefix` (`approximateprefix/plugin.go`): walk the blocks in order,
    /// stop at the first block no replica holds, and count for each replica the blocks of that
    /// run it holds. Sorted by replica.
    fn matches(&mut self, out: &mut Vec<(u32, u32)>) {
        out.clear();
        for h in &self.hashes {
            let Some(&b) = self.slot_of.get(h) else {
                break;
            };
            let slot = &self.slots[b as usize];
            for &(r, _) in std::iter::once(&slot.first).chain(slot.more.iter()) {
                let c = &mut self.counts[r as usize];
                if *c == 0 {
                    self.touched.push(r);
                }
                *c += 1;
            }
        }
        self.touched.sort_unstable();
        for &r in &self.touched {
            out.push((r, std::mem::take(&mut self.counts[r as usize])));
        }
        self.touched.clear();
    }

    /// Unlinks node `n` from replica `r`'s LRU list.
    fn lru_unlink(&mut self, r: usize, n: u32) {
        let Node { lprev, lnext, .. } = self.nodes[n as usize];
        match lprev {
            NIL => self.lru[r].head = lnext,
            p => self.nodes[p as usize].lnext = lnext,
        }
        match lnext {
            NIL => self.lru[r].tail = lprev,
            q => self.nodes[q as usize].lprev = lprev,
        }
    }

    /// Appends node `n` to replica `r`'s LRU list (most recently used).
    fn lru_push(&mut self, r: usize, n: u32) {
        let tail = self.lru[r].tail;
        {
            let node = &mut self.nodes[n as usize];
            node.lprev = tail;
            node.lnext = NIL;
        }
        match tail {
            NIL => self.lru[r].head = n,
            t => self.nodes[t as usize].lnext = n,
        }
        self.lru[r].tail = n;
    }

    /// Records that replica `r` now holds the hashed blocks (most recently used), evicting its
    /// least recently used blocks beyond the capacity.
    fn insert(&mut self, r: u32) {
        let ri = r as usize;
        for i in 0..self.hashes.len() {
            let h = self.hashes[i];
            let b = match self.slot_of.entry(h) {
                std::collections::hash_map::Entry::Occupied(e) => *e.get(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let b = match self.free_slots.pop() {
                        Some(b) => {
                            self.slots[b as usize].hash = h;
                            b
                        }
                        None => {
                            self.slots.push(BlockSlot {
                                hash: h,
                                len: 0,
                                first: (NIL, NIL),
                                more: Vec::new(),
                            });
                            (self.slots.len() - 1) as u32
                        }
                    };
                    *e.insert(b)
                }
            };
            if let Some(n) = self.slots[b as usize].find(r) {
                if self.lru[ri].tail != n {
                    self.lru_unlink(ri, n);
                    self.lru_push(ri, n);
                }
                continue;
            }
            let node = Node {
                slot: b,
                replica: r,
                lprev: NIL,
                lnext: NIL,
            };
            let n = match self.free_nodes.pop() {
                Some(n) => {
                    self.nodes[n as usize] = node;
                    n
                }
                None => {
                    self.nodes.push(node);
                    (self.nodes.len() - 1) as u32
                }
            };
            self.slots[b as usize].add(r, n);
            self.lru_push(ri, n);
            self.lru[ri].len += 1;
            while self.lru[ri].len > self.cap {
                let oldest = self.lru[ri].head;
                self.evict(ri, oldest);
            }
        }
    }

    /// Drops node `n` (replica `r`'s least recently used block) from its LRU list and its
    /// block's holders, and the block when nobody holds it any more.
    fn evict(&mut self, r: usize, n: u32) {
        let Node { slot, replica, .. } = self.nodes[n as usize];
        debug_assert_eq!(replica as usize, r);
        self.lru_unlink(r, n);
        self.lru[r].len -= 1;
        let s = &mut self.slots[slot as usize];
        s.remove(replica);
        if s.len == 0 {
            let h = s.hash;
            self.slot_of.remove(&h);
            self.free_slots.push(slot);
        }
        self.free_nodes.push(n);
    }
}

/// A router's state over `n` replicas.
pub struct Router {
    spec: RouterSpec,
    n: u32,
    outstanding: Vec<u32>,
    cursor: u32,
    /// Replicas below the saturation guard (maintained only with a guard).
    open: BTreeSet<u32>,
    /// (outstanding, replica) for least-requests.
    by_load: BTreeSet<(u32, u32)>,
    /// llm-d snapshot: base score (queue + KV terms) per replica and the replicas sorted by it
    /// (descending, then index).
    base: Vec<f64>,
    order: Vec<u32>,
    next_refresh: Ticks,
    prefix: Option<PrefixIndex>,
    matched: Vec<(u32, u32)>,
    /// Scratch: the matched replicas tied at the best score.
    tied: Vec<u32>,
    rng: Rng,
    /// Requests routed to each replica (whole run).
    pub routed: Vec<u64>,
}

impl Router {
    /// A router over `n` replicas whose engines report `cache` (llm-d's prefix index
    /// auto-tunes its block size and per-replica capacity from it unless the spec sets them).
    pub fn new(spec: &RouterSpec, n: u32, cache: EngineCacheInfo, seed: u64) -> Router {
        let n = n.max(1);
        let guard = spec.max_outstanding.is_some();
        let epp = spec.policy == RouterPolicy::LlmD;
        Router {
            spec: spec.clone(),
            n,
            outstanding: vec![0; n as usize],
            cursor: 0,
            open: if guard {
                (0..n).collect()
            } else {
                BTreeSet::new()
            },
            by_load: if spec.policy == RouterPolicy::LeastRequests {
                (0..n).map(|r| (0, r)).collect()
            } else {
                BTreeSet::new()
            },
            base: if epp {
                vec![0.0; n as usize]
            } else {
                Vec::new()
            },
            order: if epp { (0..n).collect() } else { Vec::new() },
            next_refresh: Ticks::ZERO,
            prefix: (epp && spec.weights.prefix > 0.0 && n > 1).then(|| {
                let (block, cap) = spec.prefix_index_shape(cache);
                PrefixIndex::new(n, block, cap)
            }),
            matched: Vec::new(),
            tied: Vec::new(),
            rng: Rng::stream(seed, Stream::Router),
            routed: vec![0; n as usize],
        }
    }

    pub fn outstanding(&self, r: u32) -> u32 {
        self.outstanding[r as usize]
    }

    fn saturated(&self, r: u32) -> bool {
        self.spec
            .max_outstanding
            .is_some_and(|m| self.outstanding[r as usize] >= m)
    }

    /// Picks a replica for `req` at `t`, or `None` when every replica is at the saturation guard
    /// (the request waits at the router). Does not record the dispatch: call
    /// [`Router::dispatched`].
    pub fn pick(&mut self, req: &Request, t: Ticks, view: &dyn ReplicaView) -> Option<u32> {
        if self.n == 1 {
            return (!self.saturated(0)).then_some(0);
        }
        match self.spec.policy {
            RouterPolicy::RoundRobin => {
                if self.spec.max_outstanding.is_none() {
                    let r = self.cursor % self.n;
                    return Some(r);
                }
                self.open
                    .range(self.cursor % self.n..)
                    .next()
                    .or_else(|| self.open.iter().next())
                    .copied()
            }
            RouterPolicy::LeastRequests => {
                let &(load, r) = self.by_load.iter().next()?;
                match self.spec.max_outstanding {
                    Some(m) if load >= m => None,
                    _ => Some(r),
                }
            }
            RouterPolicy::LlmD => self.pick_epp(req, t, view),
        }
    }

    /// Whether a pick at `t` reads the replicas' state (llm-d's scorers refresh their view).
    #[inline]
    pub fn reads_view_at(&self, t: Ticks) -> bool {
        self.n > 1 && self.spec.policy == RouterPolicy::LlmD && t >= self.next_refresh
    }

    fn refresh(&mut self, t: Ticks, view: &dyn ReplicaView) {
        let w = self.spec.weights;
        let (mut qmax, mut qmin) = (0u64, u64::MAX);
        for r in 0..self.n {
            let q = view.waiting(r);
            qmax = qmax.max(q);
            qmin = qmin.min(q);
        }
        for r in 0..self.n {
            let q = view.waiting(r);
            let qs = if qmax == qmin {
                1.0
            } else {
                (qmax - q) as f64 / (qmax - qmin) as f64
            };
            let kv = 1.0 - view.kv_usage(r).clamp(0.0, 1.0);
            self.base[r as usize] = w.queue * qs + w.kv_cache * kv;
        }
        let base = &self.base;
        self.order.sort_by(|&a, &b| {
            base[b as usize]
                .total_cmp(&base[a as usize])
                .then(a.cmp(&b))
        });
        let iv = self.spec.refresh.0.max(1);
        self.next_refresh = Ticks((t.0 / iv + 1).saturating_mul(iv));
    }

    /// llm-d's scheduling cycle over the replicas not at the saturation guard: each scored
    /// `queue x w_q + kv x w_kv + prefix x w_p` (`scheduling/scheduler_profile.go`), the
    /// highest score picked, ties uniformly at random (`picker/maxscore/picker.go`: shuffle,
    /// then a stable sort by score). Costs O(matched replicas) plus a few random draws: the
    /// replicas holding none of the prompt score their snapshot base alone, kept sorted.
    fn pick_epp(&mut self, req: &Request, t: Ticks, view: &dyn ReplicaView) -> Option<u32> {
        if t >= self.next_refresh {
            self.refresh(t, view);
        }
        self.matched.clear();
        let mut total = 0usize;
        if let Some(ix) = self.prefix.as_mut() {
            ix.hash_prompt(&req.prompt);
            total = ix.hashes.len();
            if total > 0 {
                ix.matches(&mut self.matched);
            }
        }
        let is_matched = |m: &[(u32, u32)], r: u32| m.binary_search_by_key(&r, |e| e.0).is_ok();
        // The best replica holding none of the prompt: the first in snapshot order (base score
        // descending) that is neither matched nor saturated; `run` = the snapshot positions
        // sharing its base score.
        let mut unmatched: Option<(f64, usize)> = None;
        for (k, &r) in self.order.iter().enumerate() {
            if !self.saturated(r) && !is_matched(&self.matched, r) {
                unmatched = Some((self.base[r as usize], k));
                break;
            }
        }
        let wp = self.spec.weights.prefix;
        let mut best = unmatched.map(|(b, _)| b);
        for &(r, m) in &self.matched {
            if self.saturated(r) {
                continue;
            }
            let s = self.base[r as usize] + wp * m as f64 / total as f64;
            if best.is_none_or(|b| s > b) {
                best = Some(s);
            }
        }
        let best = best?;
        // Ties: the matched replicas scoring `best`, and (when the best unmatched one scores
        // `best`) the unmatched, unsaturated replicas of its run in the snapshot order.
        let mut tied_m = std::mem::take(&mut self.tied);
        tied_m.clear();
        for &(r, m) in &self.matched {
            if !self.saturated(r) && self.base[r as usize] + wp * m as f64 / total as f64 == best {
                tied_m.push(r);
            }
        }
        let run = match unmatched {
            Some((b, k)) if b == best => {
                let end = self.order[k..]
                    .iter()
                    .position(|&r| self.base[r as usize] != b)
                    .map_or(self.order.len(), |p| k + p);
                k..end
            }
            _ => 0..0,
        };
        let pick = self.pick_tied(&tied_m, run);
        self.tied = tied_m;
        Some(pick)
    }

    /// Uniform over the tied replicas: `tied_m` (matched) and the unmatched, unsaturated ones
    /// at snapshot positions `run`.
    fn pick_tied(&mut self, tied_m: &[u32], run: std::ops::Range<usize>) -> u32 {
        let is_matched = |m: &[(u32, u32)], r: u32| m.binary_search_by_key(&r, |e| e.0).is_ok();
        let slots = tied_m.len() + run.len();
        if slots == 1 {
            return tied_m.first().copied().unwrap_or(self.order[run.start]);
        }
        // Draw a slot, redraw when it names a matched or saturated replica of the run (such a
        // slot is not a candidate); at least one slot is.
        loop {
            let k = self.rng.range_u64(0, slots as u64 - 1) as usize;
            if k < tied_m.len() {
                return tied_m[k];
            }
            let r = self.order[run.start + k - tied_m.len()];
            if !self.saturated(r) && !is_matched(&self.matched, r) {
                return r;
            }
        }
    }

    /// Records that a request was sent to replica `r` (after [`Router::pick`] chose it).
    pub fn dispatched(&mut self, r: u32) {
        let ri = r as usize;
        self.routed[ri] += 1;
        let old = self.outstanding[ri];
        self.outstanding[ri] = old + 1;
        if self.spec.policy == RouterPolicy::LeastRequests {
            self.by_load.remove(&(old, r));
            self.by_load.insert((old + 1, r));
        }
        if self.spec.policy == RouterPolicy::RoundRobin {
            self.cursor = (r + 1) % self.n;
        }
        if self.saturated(r) {
            self.open.remove(&r);
        }
        if let Some(ix) = self.prefix.as_mut() {
            ix.insert(r);
        }
    }

    /// A request routed to `r` finished or was rejected.
    pub fn done(&mut self, r: u32) {
        let ri = r as usize;
        let old = self.outstanding[ri];
        debug_assert!(old > 0, "done without dispatch");
        let new = old.saturating_sub(1);
        self.outstanding[ri] = new;
        if self.spec.policy == RouterPolicy::LeastRequests {
            self.by_load.remove(&(old, r));
            self.by_load.insert((new, r));
        }
        if self.spec.max_outstanding.is_some() && !self.saturated(r) {
            self.open.insert(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CACHE: EngineCacheInfo = EngineCacheInfo {
        block_size: 16,
        num_gpu_blocks: 31_250,
    };

    struct View(Vec<u64>, Vec<f64>);
    impl ReplicaView for View {
        fn waiting(&self, r: u32) -> u64 {
            self.0[r as usize]
        }
        fn kv_usage(&self, r: u32) -> f64 {
            self.1[r as usize]
        }
    }

    fn req(id: u64, stream: u64, len: u64) -> Request {
        Request {
            id,
            arrival: Ticks::ZERO,
            prompt: vec![Segment {
                stream,
                start: 0,
                len,
            }],
            output_stream: id,
            output_start: 0,
            output_len: 1,
        }
    }

    #[test]
    fn round_robin_cycles_and_least_requests_balances() {
        let v = View(vec![0; 3], vec![0.0; 3]);
        let mut rr = Router::new(&RouterSpec::default(), 3, CACHE, 1);
        let picks: Vec<u32> = (0..6)
            .map(|i| {
                let r = rr.pick(&req(i, i, 32), Ticks::ZERO, &v).unwrap();
                rr.dispatched(r);
                r
            })
            .collect();
        assert_eq!(picks, vec![0, 1, 2, 0, 1, 2]);
        let spec = RouterSpec {
            policy: RouterPolicy::LeastRequests,
            ..RouterSpec::default()
        };
        let mut lr = Router::new(&spec, 3, CACHE, 1);
        for i in 0..3 {
            let r = lr.pick(&req(i, i, 32), Ticks::ZERO, &v).unwrap();
            lr.dispatched(r);
        }
        lr.done(1);
        assert_eq!(lr.pick(&req(9, 9, 32), Ticks::ZERO, &v), Some(1));
    }

    #[test]
    fn saturation_guard_holds_requests() {
        let v = View(vec![0; 2], vec![0.0; 2]);
        for policy in [
            RouterPolicy::RoundRobin,
            RouterPolicy::LeastRequests,
            RouterPolicy::LlmD,
        ] {
            let spec = RouterSpec {
                policy,
                max_outstanding: Some(1),
                ..RouterSpec::default()
            };
            let mut r = Router::new(&spec, 2, CACHE, 3);
            let a = r.pick(&req(0, 0, 32), Ticks::ZERO, &v).unwrap();
            r.dispatched(a);
            let b = r.pick(&req(1, 1, 32), Ticks::ZERO, &v).unwrap();
            assert_ne!(
                a, b,
                "{policy:?}: the guard sends the second request elsewhere"
            );
            r.dispatched(b);
            assert_eq!(r.pick(&req(2, 2, 32), Ticks::ZERO, &v), None, "{policy:?}");
            r.done(b);
            assert_eq!(
                r.pick(&req(2, 2, 32), Ticks::ZERO, &v),
                Some(b),
                "{policy:?}"
            );
        }
    }

    #[test]
    fn epp_scores_queue_kv_and_prefix() {
        let spec = RouterSpec {
            policy: RouterPolicy::LlmD,
            ..RouterSpec::default()
        };
        // queue: replica 1 has the shortest queue; KV equal -> replica 1.
        let v = View(vec![4, 0, 2], vec![0.5; 3]);
        let mut r = Router::new(&spec, 3, CACHE, 5);
        assert_eq!(r.pick(&req(0, 7, 64), Ticks::ZERO, &v), Some(1));
        r.dispatched(1);
        // Same prompt again within the refresh interval: replica 1 holds its 4 blocks
        // (prefix score 1 x 3) and still has the best snapshot queue score.
        assert_eq!(r.pick(&req(1, 7, 64), Ticks(1), &v), Some(1));
        // After a refresh where replica 2's queue is shortest and KV freest, a new prompt goes
        // there, but the cached prompt stays with replica 1 (2 x 0.5 + 2 x 0.5 + 3 = 5 against
        // 2 x 1 + 2 x 0.9 = 3.8).
        let v2 = View(vec![4, 2, 0], vec![0.5, 0.5, 0.1]);
        let later = Ticks::from_secs_f64(1.0);
        assert_eq!(r.pick(&req(2, 8, 64), later, &v2), Some(2));
        assert_eq!(r.pick(&req(3, 7, 64), later, &v2), Some(1));
    }

    /// The weighted sum decides, not prefix affinity alone: a replica holding a quarter of the
    /// prompt (`3 x 0.25`) loses to one with the shortest queue (`2 x 1`); holding all of it
    /// (`3 x 1`) it keeps the request against the same queue gap (llm-d's default weights).
    #[test]
    fn queue_scorer_overrides_a_partial_prefix_match() {
        let spec = RouterSpec {
            policy: RouterPolicy::LlmD,
            ..RouterSpec::default()
        };
        let idle = View(vec![0, 0], vec![0.0; 2]);
        let mut r = Router::new(&spec, 2, CACHE, 9);
        // a 16-token shared head then 48 tokens of stream 50: 4 blocks, replica 0 holds them
        let sent = Request {
            prompt: vec![
                Segment {
                    stream: 1,
                    start: 0,
                    len: 16,
                },
                Segment {
                    stream: 50,
                    start: 0,
                    len: 48,
                },
            ],
            ..req(0, 0, 0)
        };
        let first = r.pick(&sent, Ticks::ZERO, &idle).unwrap();
        r.dispatched(first);
        let other = 1 - first;
        // replica `other` has the shorter queue at the next refresh
        let mut q = vec![0, 0];
        q[first as usize] = 5;
        let busy = View(q, vec![0.0; 2]);
        let later = Ticks::from_secs_f64(1.0);
        // a prompt sharing only its first block of 4 with `first`: 3 x 0.25 < 2 x 1
        let partial = Request {
            prompt: vec![
                Segment {
                    stream: 1,
                    start: 0,
                    len: 16,
                },
                Segment {
                    stream: 60,
                    start: 0,
                    len: 48,
                },
            ],
            ..req(1, 0, 0)
        };
        assert_eq!(r.pick(&partial, later, &busy), Some(other));
        // the whole prompt again: 3 x 1 > 2 x 1
        assert_eq!(r.pick(&sent, later, &busy), Some(first));
    }

    /// Ties go to any of the tied replicas with equal chance (llm-d's max-score picker shuffles
    /// before its stable sort), including replicas holding none of the prompt.
    #[test]
    fn ties_are_uniform_over_every_tied_replica() {
        let spec = RouterSpec {
            policy: RouterPolicy::LlmD,
            ..RouterSpec::default()
        };
        let v = View(vec![0; 4], vec![0.0; 4]);
        let mut r = Router::new(&spec, 4, CACHE, 11);
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            // a fresh prompt each time: nobody holds it, all four tie
            let x = r.pick(&req(i, 1000 + i, 64), Ticks::ZERO, &v).unwrap();
            counts[x as usize] += 1;
        }
        for c in counts {
            // binomial(4000, 1/4): sd 27; 6 sd either side
            assert!((840..=1160).contains(&c), "{counts:?}");
        }
    }

    /// llm-d's matching credits every replica holding a block of the leading run, counted
    /// block by block, stopping at the first block nobody holds; a partial last block has its
    /// own hash; a prompt shorter than one block has none.
    #[test]
    fn prefix_matching_follows_llm_d() {
        let mut ix = PrefixIndex::new(3, 16, 1000);
        ix.hash_prompt(&req(0, 1, 8).prompt);
        assert!(ix.hashes.is_empty(), "shorter than a block: no hashes");
        ix.hash_prompt(&req(0, 1, 40).prompt);
        assert_eq!(ix.hashes.len(), 3, "2 full blocks and a partial one");
        // replica 0 got the first 32 tokens, replica 1 the whole 40
        ix.hash_prompt(&req(0, 1, 32).prompt);
        ix.insert(0);
        ix.hash_prompt(&req(0, 1, 40).prompt);
        ix.insert(1);
        let mut m = Vec::new();
        ix.matches(&mut m);
        assert_eq!(m, vec![(0, 2), (1, 3)]);
        // truncation at 256 blocks
        ix.hash_prompt(&req(0, 2, 16 * 300 + 5).prompt);
        assert_eq!(ix.hashes.len(), MAX_PREFIX_BLOCKS);
        // auto-tune: the engines' block size and blocks unless the spec sets them
        let spec = RouterSpec::default();
        let cache = EngineCacheInfo {
            block_size: 64,
            num_gpu_blocks: 5000,
        };
        assert_eq!(spec.prefix_index_shape(cache), (64, 5000));
        let set = RouterSpec {
            prefix_block_tokens: Some(16),
            prefix_lru_blocks: Some(100),
            ..RouterSpec::default()
        };
        assert_eq!(set.prefix_index_shape(cache), (16, 100));
    }

    #[test]
    fn router_flag_spellings() {
        assert_eq!(
            parse_router("round-robin").unwrap().policy,
            RouterPolicy::RoundRobin
        );
        assert_eq!(
            parse_router("least-requests").unwrap().policy,
            RouterPolicy::LeastRequests
        );
        let p = parse_router("llm-d:precise-prefix").unwrap();
        let spec = RouterSpec::from_raw(Some(&p)).unwrap();
        assert_eq!(spec.weights, EppWeights::PRECISE_PREFIX);
        let spec = RouterSpec::from_raw(Some(&parse_router("llm-d").unwrap())).unwrap();
        assert_eq!(spec.weights, EppWeights::DEFAULT);
        let w = parse_router("llm-d:queue=1,kv=0.5,prefix=4")
            .unwrap()
            .weights
            .unwrap();
        assert_eq!((w.queue, w.kv_cache, w.prefix), (1.0, 0.5, 4.0));
        assert!(parse_router("random").unwrap_err().contains("round-robin"));
        assert!(parse_router("round-robin:default").is_err());
        assert!(parse_router("llm-d:queue=x")
            .unwrap_err()
            .contains("not a number"));
    }

    #[test]
    fn prefix_index_matches_leading_blocks_and_evicts_lru() {
        let mut ix = PrefixIndex::new(2, 16, 4);
        ix.hash_prompt(&req(0, 1, 64).prompt);
        assert_eq!(ix.hashes.len(), 4);
        ix.insert(0);
        // a prompt sharing the first 32 tokens then diverging
        let p = vec![
            Segment {
                stream: 1,
                start: 0,
                len: 32,
            },
            Segment {
                stream: 2,
                start: 0,
                len: 32,
            },
        ];
        ix.hash_prompt(&p);
        let mut m = Vec::new();
        ix.matches(&mut m);
        assert_eq!(m, vec![(0, 2)]);
        // inserting 4 more blocks into replica 0 evicts the first prompt's blocks (capacity 4)
        ix.hash_prompt(&req(1, 3, 64).prompt);
        ix.insert(0);
        ix.hash_prompt(&req(0, 1, 64).prompt);
        ix.matches(&mut m);
        assert!(m.is_empty());
    }

    /// The index against a plain model of llm-d's per-replica LRUs (a list per replica, most
    /// recent last; matching walks the hashes and scans every list): the same matches after
    /// each of many random prompts (shared heads, partial blocks, repeats) sent to random
    /// replicas, with a capacity small enough that evictions run all the time.
    #[test]
    fn prefix_index_matches_a_plain_lru_model() {
        let (n, cap) = (5u32, 40usize);
        let mut ix = PrefixIndex::new(n, 16, cap as u64);
        let mut model: Vec<Vec<u64>> = vec![Vec::new(); n as usize];
        let mut rng = Rng::new(17);
        let mut m = Vec::new();
        let (mut matched, mut evicted) = (0, 0);
        for i in 0..4000u64 {
            let head = rng.range_u64(0, 3);
            let mut prompt = vec![Segment {
                stream: 100 + head,
                start: 0,
                len: rng.range_u64(0, 3) * 16 + rng.range_u64(0, 20),
            }];
            if rng.next_f64() < 0.7 {
                prompt.push(Segment {
                    stream: 200 + rng.range_u64(0, 30),
                    start: 0,
                    len: rng.range_u64(1, 200),
                });
            }
            ix.hash_prompt(&prompt);
            ix.matches(&mut m);
            let mut want: Vec<(u32, u32)> = Vec::new();
            for h in &ix.hashes {
                let holders: Vec<u32> = (0..n).filter(|&r| model[r as usize].contains(h)).collect();
                if holders.is_empty() {
                    break;
                }
                for r in holders {
                    match want.iter_mut().find(|e| e.0 == r) {
                        Some(e) => e.1 += 1,
                        None => want.push((r, 1)),
                    }
                }
            }
            want.sort_unstable();
            assert_eq!(m, want, "request {i}");
            matched += usize::from(!m.is_empty());
            let r = rng.range_u64(0, n as u64 - 1) as u32;
            ix.insert(r);
            let lru = &mut model[r as usize];
            for &h in &ix.hashes {
                if let Some(p) = lru.iter().position(|&x| x == h) {
                    lru.remove(p);
                }
                lru.push(h);
                if lru.len() > cap {
                    lru.remove(0);
                    evicted += 1;
                }
            }
            assert_eq!(ix.lru[r as usize].len, lru.len() as u64);
        }
        // the comparison covered both
        assert!(matched > 1000 && evicted > 1000, "{matched} {evicted}");
    }
}
