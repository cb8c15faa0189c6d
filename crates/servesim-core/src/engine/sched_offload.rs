//! The scheduler's side of the CPU KV offload tier (engine/offload.rs): stores where blocks
//! enter the prefix cache, the lookup and load of a waiting request, and its admission once
//! its blocks are in. docs/engine.md ("CPU KV offload tier").

use super::super::offload::OffloadStats;
use super::{Engine, Observer};
use crate::units::Ticks;

/// What the CPU tier decided for a waiting request.
pub(crate) enum CpuLookup {
    /// No CPU hit: admit it as usual.
    Miss,
    /// Its load is in flight (or was just issued), or its chunks are being loaded by another
    /// request: leave it waiting and look at the next one.
    Skip,
    /// Not enough free GPU blocks for the load: stop admitting (FCFS).
    NoRoom,
}

impl Engine<'_> {
    /// Blocks `.. upto` of request `s` entered the prefix cache: store now, or at the end of the
    /// step being scheduled. Out of line, so the prefix cache's hot path stays small.
    #[inline(never)]
    pub(super) fn offload_registered(&mut self, s: u32, upto: u64) {
        if self.defer_stores {
            self.pending_stores.push((s, upto));
        } else {
            self.offload_store(s, upto);
        }
    }

    /// Offers the request's chunks that `upto` full blocks complete to the tier (called where
    /// blocks enter the prefix cache).
    pub(super) fn offload_store(&mut self, s: u32, upto: u64) {
        let t = self.store_time();
        let Some(tier) = self.offload.as_mut() else {
            return;
        };
        let l = self.slots[s as usize].as_mut().expect("live slot");
        let to = upto / tier.blocks_per_chunk();
        if to > l.stored_chunks && tier.store(&l.spans, l.stored_chunks, to, t) {
            l.stored_chunks = to;
        }
    }

    /// The waiting request `s` whose load was issued: `None` if it has none, `Some(false)`
    /// while the load is in flight, `Some(true)` once its blocks are in.
    pub(super) fn offload_loaded(&self, s: u32, t: Ticks) -> Option<bool> {
        let l = self.slots[s as usize].as_ref().expect("live slot");
        l.load_ready.map(|r| r <= t)
    }

    /// Looks the waiting request `s` up in the CPU tier past its GPU hit (`hit_blocks`, of which
    /// `evict_hits` evictable) and issues the load at `t` when it hits. `extra` = KV slots
    /// the request's first step also needs beyond its tokens (speculative lookahead), `mml` =
    /// max_model_len.
    pub(super) fn offload_lookup(
        &mut self,
        s: u32,
        t: Ticks,
        hit_blocks: u64,
        evict_hits: u64,
        max_seqs: u64,
    ) -> CpuLookup {
        let bs = self.bs;
        let group = self.group;
        let Some(tier) = self.offload.as_mut() else {
            return CpuLookup::Miss;
        };
        // vLLM caps loads in flight at max_num_seqs (defers the request).
        if tier.loading >= max_seqs {
            return CpuLookup::Skip;
        }
        let l = self.slots[s as usize].as_ref().expect("live slot");
        let c = tier.blocks_per_chunk();
        let ct = c * bs;
        let eff = l.eff_len;
        let computed = hit_blocks * bs;
        let full_chunks = eff / ct;
        if full_chunks * ct < computed + ct {
            return CpuLookup::Miss;
        }
        let start = computed / ct;
        // vLLM touches the chunks of the request's tokens so far (`request.block_hashes`).
        let Some(hits) = tier.lookup(&l.spans, start, full_chunks - start, full_chunks, t) else {
            return CpuLookup::Skip;
        };
        let end_tokens = (start + hits) * ct;
        // vLLM recomputes the last token when everything hit: a load must bring at least one
        // token the GPU does not have.
        if hits == 0 || end_tokens < computed + ct || end_tokens.min(eff - 1) <= computed {
            tier.delta.lookup_tokens += eff.saturating_sub(computed);
            return CpuLookup::Miss;
        }
        let need = self.fp(end_tokens) - group * hit_blocks;
        if need + group * evict_hits > self.pool.available() {
            return CpuLookup::NoRoom;
        }
        let tier = self.offload.as_mut().expect("tier");
        let l = self.slots[s as usize].as_mut().expect("live slot");
        tier.delta.lookup_tokens += eff - computed;
        let loaded_to = end_tokens.min(eff - 1);
        tier.delta.hit_tokens += loaded_to - computed;
        let ready = tier.load(&l.spans, start, hits, t);
        tier.loading += 1;
        debug_assert!(l.held_ranges.is_empty());
        if hit_blocks > 0 {
            self.pool.take(&l.spans, hit_blocks, &mut l.held_ranges);
            l.ref_blocks = hit_blocks;
        }
        let ok = self.pool.alloc(need);
        debug_assert!(ok);
        l.held = need + group * hit_blocks;
        l.computed = loaded_to;
        l.reg_blocks = hit_blocks;
        l.gpu_hit = computed;
        l.load_issued = t;
        l.load_ready = Some(ready);
        l.stored_chunks = l.stored_chunks.max(start + hits);
        CpuLookup::Skip
    }

    /// Admits the waiting request `s` whose load finished: its next chunk on top of the loaded
    /// tokens (`budget`, `thr` as the scheduler's; `look` = extra KV slots, `mml` =
    /// max_model_len). Returns `(chunk, context_before, completes)`, or `None` when the chunk's
    /// blocks do not fit (stop admitting).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn offload_admit(
        &mut self,
        s: u32,
        t: Ticks,
        budget: u64,
        thr: u64,
        look: u64,
        mml: u64,
        obs: &mut dyn Observer,
    ) -> Option<(u64, u64, bool)> {
        let l = self.slots[s as usize].as_ref().expect("live slot");
        let before = l.computed;
        // The loaded tokens count as the request's cached prefix.
        let chunk = self.waiting_chunk(l.eff_len, before, budget, thr, false)?;
        let target = if look > 0 {
            (before + chunk + look).min(mml)
        } else {
            before + chunk
        };
        let need = self.fp(target).saturating_sub(l.held);
        if need > self.pool.available() {
            return None;
        }
        let ok = self.pool.alloc(need);
        debug_assert!(ok);
        let index = self.index;
        let l = self.slots[s as usize].as_mut().expect("live slot");
        l.held += need;
        l.computed = before + chunk;
        let done = l.computed == l.eff_len;
        let issued = l.load_issued;
        l.load_ready = None;
        if l.first_scheduled.is_none() {
            l.first_scheduled = Some(t);
            l.cached_prompt_tokens = l.gpu_hit;
            obs.on_scheduled(index, t, l.id, l.prompt_len, l.gpu_hit);
        }
        let upto = self.div_bs(self.slots[s as usize].as_ref().expect("live").computed);
        // The loaded blocks enter the GPU prefix cache now (vLLM caches them when the load
        // finishes), with the chunk's full blocks.
        self.register_full(s, upto);
        let tier = self.offload.as_mut().expect("tier");
        tier.loading -= 1;
        tier.delta.load_wait_ns += t.0 - issued.0;
        Some((chunk, before, done))
    }

    /// The earliest finish of a load in flight after `t` (the engine wakes then when nothing
    /// else can run).
    pub(super) fn offload_next_ready(&self, t: Ticks) -> Option<Ticks> {
        self.offload.as_ref()?;
        self.waiting
            .iter()
            .filter_map(|&s| self.slots[s as usize].as_ref().and_then(|l| l.load_ready))
            .filter(|&r| r > t)
            .min()
    }

    /// The tier's totals so far (`None` without a tier) and chunks held now.
    pub fn offload_stats(&self) -> Option<(OffloadStats, u64)> {
        self.offload.as_ref().map(|t| {
            let mut s = t.stats;
            s.add(&t.stats_delta());
            (s, t.len())
        })
    }

    /// When deferred stores issue (the end of the step that computes them).
    pub(super) fn store_time(&self) -> Ticks {
        self.store_t
    }

    /// Issues the stores deferred while scheduling a step, at `t` (the step's end).
    pub(super) fn offload_flush(&mut self, t: Ticks) {
        self.defer_stores = false;
        self.store_t = t;
        let pending = std::mem::take(&mut self.pending_stores);
        for &(s, upto) in &pending {
            self.offload_store(s, upto);
        }
        self.pending_stores = pending;
        self.pending_stores.clear();
    }

    /// Reports what the tier did since the last report (at `t`).
    pub(super) fn offload_report(&mut self, t: Ticks, obs: &mut dyn Observer) {
        let index = self.index;
        if let Some(tier) = self.offload.as_mut() {
            let d = tier.take_delta();
            if d != OffloadStats::default() {
                obs.on_offload(index, t, &d);
            }
        }
    }
}
