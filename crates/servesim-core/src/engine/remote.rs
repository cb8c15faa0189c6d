//! The engine side of disaggregated prefill/decode (vLLM's `NixlConnector` on a decode worker):
//! reserving KV blocks before a transfer, and admitting a request whose prompt KV arrived from a
//! prefill worker. The engine knows nothing of pools or links; the driver
//! (`topology/disagg.rs`) decides when a transfer starts and ends.
//!
//! vLLM (`vllm/v1/core/sched/scheduler.py`): a request with `do_remote_prefill` is allocated its
//! blocks when the scheduler first sees it, waits in `WAITING_FOR_REMOTE_KVS` while the blocks
//! are pulled, and is then scheduled with `num_computed_tokens = prompt - 1`
//! (`_update_waiting_for_remote_kv`: the last prompt token is recomputed to sample the first
//! output token). Here: [`Engine::reserve_blocks`] before the transfer,
//! [`Engine::submit_transferred`] after it; at admission the request computes one token on top
//! of `prompt - 1` tokens of context, using the reserved blocks (docs/topology.md,
//! "Disaggregated prefill/decode").

use super::{Engine, Live};
use crate::engine::kv::{spans_of, KvPool};
use crate::engine::{Observer, RejectReason, Request};
use crate::units::Ticks;

impl Engine<'_> {
    /// Prompt tokens of `req` this engine's prefix cache holds now (whole blocks, at most
    /// `prompt - 1` tokens, as an admission would find them; 0 without prefix caching).
    pub fn cached_prefix_tokens(&self, req: &Request) -> u64 {
        let p = req.prompt_len();
        if !self.caching || p == 0 {
            return 0;
        }
        let mut segs = req.prompt.clone();
        Request::normalize_segments(&mut segs);
        let mut spans = Vec::new();
        spans_of(&segs, self.bs, &mut spans);
        self.pool.lookup(&spans, (p - 1) / self.bs).0 * self.bs
    }

    /// Physical KV blocks a request with `tokens` tokens of context holds (its footprint).
    pub fn blocks_for_tokens(&self, tokens: u64) -> u64 {
        self.fp(tokens)
    }

    /// Blocks to reserve for a transferred prompt of `req`: what its admission can need at most
    /// (the whole prompt, plus speculative lookahead slots), so a reserved request is always
    /// admissible; blocks its prefix cache already holds at admission are returned then.
    pub fn blocks_to_reserve(&self, req: &Request) -> u64 {
        let look = self
            .cfg
            .spec
            .as_ref()
            .map_or(0, |sp| sp.num_lookahead_tokens as u64);
        self.fp((req.prompt_len() + look).min(self.cfg.max_model_len))
    }

    /// When nothing can run (the waiting head needs blocks the reservations of later transferred
    /// requests hold, and nothing is running to free any): the newest such request gives its
    /// reservation back and recomputes its prompt locally (vLLM's recompute fallback when a KV
    /// load cannot complete, `kv_load_failure_policy`). Returns whether one was found.
    pub(super) fn drop_newest_reservation(&mut self) -> bool {
        let found = self.waiting.iter().rev().copied().find(|&s| {
            self.slots[s as usize]
                .as_ref()
                .is_some_and(|l| l.remote && l.reserved > 0)
        });
        let Some(s) = found else {
            return false;
        };
        let l = self.slots[s as usize].as_mut().expect("live slot");
        let r = std::mem::take(&mut l.reserved);
        l.remote = false;
        self.pool.release_private(r);
        true
    }

    /// Why [`Engine::submit`] would refuse `req`, if it would (no side effects).
    pub fn refusal(&self, req: &Request) -> Option<RejectReason> {
        self.refusal_of(req.prompt_len(), req.output_len)
    }

    /// Takes `n` free blocks (evicting unreferenced cached blocks, least recently freed first)
    /// for a transfer that has not started; `false` (nothing changes) when fewer are available.
    /// The blocks count as used until [`Engine::submit_transferred`] hands them to the request.
    pub fn reserve_blocks(&mut self, n: u64) -> bool {
        self.pool.alloc(n)
    }

    /// Submits a request whose prompt KV was transferred into `reserved` blocks (from
    /// [`Engine::reserve_blocks`]). At admission it computes only its last prompt token; blocks
    /// beyond the reservation are allocated then, and a reservation larger than needed (its
    /// prefix cache grew meanwhile) is returned. A refused request returns its reservation.
    pub fn submit_transferred(
        &mut self,
        req: Request,
        t: Ticks,
        reserved: u64,
        obs: &mut dyn Observer,
    ) -> Result<(), RejectReason> {
        match self.submit(req, t, obs) {
            Ok(()) => {
                let s = *self.waiting.back().expect("just queued");
                let l = self.live(s);
                l.remote = true;
                l.reserved = reserved;
                Ok(())
            }
            Err(r) => {
                self.pool.release_private(reserved);
                Err(r)
            }
        }
    }

    /// At admission: allocates `need` blocks for `l`, first from its reservation (returning any
    /// excess), and clears the remote state so a later preemption recomputes locally as vLLM
    /// does. `false` when the pool lacks the rest (callers checked availability first).
    #[inline]
    pub(super) fn alloc_over_reserved(pool: &mut KvPool, l: &mut Live, need: u64) -> bool {
        let r = std::mem::take(&mut l.reserved);
        l.remote = false;
        if need >= r {
            pool.alloc(need - r)
        } else {
            pool.release_private(r - need);
            true
        }
    }
}
