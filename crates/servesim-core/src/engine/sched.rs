//! The engine core: vLLM v1's `Scheduler.schedule()` / `update_from_output()` loop as discrete
//! events. See `docs/engine.md`.

use super::kv::{held_blocks, spans_of, Held, KvPool, Span};
use super::{
    DecodeSteps, EngineConfig, FinishedRequest, Observer, PrefillChunk, RejectReason, Request,
    Segment, SimError, StepBatch, StepRecord, StepTimeModel, WindowedDecode,
};
use crate::units::Ticks;
use std::cmp::Reverse;

#[path = "remote.rs"]
mod remote;
#[path = "sched_offload.rs"]
mod sched_offload;
#[path = "sched_run.rs"]
mod sched_run;
#[path = "sched_spec.rs"]
mod sched_spec;
use super::offload::CpuTier;
use sched_offload::CpuLookup;
use sched_spec::{SpecAdmission, SpecPlan};
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Waiting,
    Prefilling,
    /// Decoding one token per step since step `s0`, having generated `gen0` tokens before `s0`.
    Decoding {
        s0: u64,
        gen0: u64,
    },
    /// Decoding with speculative decoding: `computed` and `generated` are maintained per step
    /// (`sched_spec.rs`).
    SpecDecoding,
}

struct Live {
    id: u64,
    arrival: Ticks,
    /// The prefix cache's view of the content (prompt then output): one span of full blocks
    /// per segment (empty without prefix caching).
    spans: Vec<Span>,
    prompt_len: u64,
    output_len: u64,
    /// Tokens generated so far (not maintained while decoding: derived from the step counter).
    generated: u64,
    /// Tokens to prefill at this admission: prompt + tokens generated before a preemption.
    eff_len: u64,
    /// Tokens with KV computed (not maintained while decoding).
    computed: u64,
    phase: Phase,
    /// Physical KV blocks held.
    held: u64,
    /// Cached blocks this request holds a reference on (ranges in block order), and how many.
    held_ranges: Vec<Held>,
    ref_blocks: u64,
    /// Leading full blocks already offered to the prefix cache.
    reg_blocks: u64,
    first_scheduled: Option<Ticks>,
    first_token: Option<Ticks>,
    last_token: Ticks,
    cached_prompt_tokens: u64,
    preemptions: u32,
    runs: Vec<(u64, u64)>,
    extra_itls: Vec<Ticks>,
    /// Its current decode run's first step follows a V0 prefill-only step: that step's gap is in
    /// `extra_itls` (from the prompt's token, not from the step before), so `runs` start one later.
    skip_first_run: bool,
    bucket_pos: usize,
    gen: u32,
    /// Admission number of its current entry in the running list (the list is sorted by it).
    run_seq: u64,
    /// Speculative decoding: acceptance draws so far, tokens per streamed chunk.
    spec_draws: u64,
    chunk_tokens: Vec<u8>,
    extra_tokens: Vec<u8>,
    /// Disaggregated decode: the prompt's KV arrived from a prefill worker (`remote.rs`), and
    /// the blocks reserved for it before the transfer (0 once admitted).
    remote: bool,
    reserved: u64,
    /// CPU offload tier: chunks offered to it so far; a load in flight (finishes at
    /// `load_ready`, issued at `load_issued`) and the GPU hit before it.
    pub(super) stored_chunks: u64,
    pub(super) load_ready: Option<Ticks>,
    pub(super) load_issued: Ticks,
    pub(super) gpu_hit: u64,
}

/// The slot of a finished request's tombstone in the running list.
const DEAD: u32 = u32::MAX;

/// (step, window index, slot, request id, gen) of a decode reaching a sliding window.
type Crossing = (u64, u32, u32, u64, u32);

struct InFlight {
    start: Ticks,
    end: Ticks,
    /// A V0 prefill-only step (`EngineConfig::v0_prefill_first`): no decode advances.
    prefill_only: bool,
    n_dec: u64,
    num_seqs: u32,
    prefill_tokens: u64,
    kv_used: u64,
    running: u32,
    waiting: u32,
}

/// Records the decode run of steps `a..=b` of `l`, without its first step when that step's gap is
/// already in `extra_itls` (`Live::skip_first_run`, cleared).
fn push_run(l: &mut Live, a: u64, b: u64) {
    let a = if std::mem::take(&mut l.skip_first_run) {
        a + 1
    } else {
        a
    };
    if a <= b {
        l.runs.push((a, b));
    }
}

/// V0 prefill-only steps (`EngineConfig::v0_prefill_first`) since the last step record, folded
/// into the next one: from the first one's start, with their sequences, first tokens and prompt
/// tokens.
#[derive(Clone, Copy, Debug)]
struct PendingPrefill {
    start: Ticks,
    num_seqs: u32,
    output_tokens: u64,
    prefill_tokens: u64,
}

/// One engine core (one DP rank). Drive it with [`Engine::submit`], [`Engine::next_event_time`]
/// and [`Engine::process_next_event`] (or [`Engine::advance_to`]).
pub struct Engine<'m> {
    index: u32,
    cfg: EngineConfig,
    bs: u64,
    /// `log2(bs)` when the block size is a power of two.
    bs_shift: Option<u32>,
    group: u64,
    caching: bool,
    model: &'m dyn StepTimeModel,
    /// The model reads [`StepBatch::decode_ctx_max`] (`StepTimeModel::needs_decode_ctx_max`).
    track_ctx_max: bool,
    pool: KvPool,
    slots: Vec<Option<Live>>,
    free_slots: Vec<u32>,
    waiting: VecDeque<u32>,
    /// Running requests in admission order as (admission number, slot); a finished request's
    /// entry becomes a tombstone (`DEAD` slot) instead of shifting the list, and the list is
    /// compacted when tombstones outnumber live entries. The last entry is never a tombstone.
    running: Vec<(u64, u32)>,
    n_running: usize,
    run_seq: u64,
    prefilling: Vec<u32>,
    n_dec: u64,
    sum_dec_ctx: u64,
    buckets: Vec<Vec<u32>>,
    finish_heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// Per distinct sliding window: `sum min(ctx + 1, window)` over decodes, and how many
    /// decodes are still below the window (`ctx + 1 < window`, growing by one key per step).
    windows: Vec<WindowedDecode>,
    below: Vec<u64>,
    /// (step at which a decode's `ctx + 1` reaches the window, window index, slot, request id,
    /// gen): from that step on its windowed key count stays at `window`.
    cross_heap: BinaryHeap<Reverse<Crossing>>,
    step: u64,
    now: Ticks,
    in_flight: Option<InFlight>,
    /// V0 prefill-only steps not yet in a step record ([`PendingPrefill`]).
    v0_pending: Option<PendingPrefill>,
    /// Requests (slot, generation) whose prompt ended in a V0 prefill-only step since the last
    /// step: their first decode gap is from that prompt's token (`Live::skip_first_run`).
    v0_fresh: Vec<(u32, u32)>,
    /// V0 multi-step (`EngineConfig::num_scheduler_steps` > 1): the decode step at which the
    /// current round ends; steps before it run without scheduling.
    round_end: u64,
    completing: Vec<u32>,
    chunks: Vec<PrefillChunk>,
    plans: Vec<(u32, u64, u64)>,
    /// Spare `spans` / `held_ranges` vectors of finished requests (reused, no reallocation).
    spare_spans: Vec<Vec<Span>>,
    spare_held: Vec<Vec<Held>>,
    submitted: u64,
    finished: u64,
    rejected: u64,
    preemptions: u64,
    /// Speculative decoding: the requests scheduled in the step in flight, and per-position
    /// accepted / drafted counts of the step being completed.
    spec_plans: Vec<SpecPlan>,
    spec_pos: Vec<u64>,
    /// The CPU KV offload tier (`None` = off), stores deferred to the end of the step being
    /// scheduled, and when an engine with only loads in flight wakes.
    pub(super) offload: Option<CpuTier>,
    pub(super) pending_stores: Vec<(u32, u64)>,
    pub(super) defer_stores: bool,
    pub(super) store_t: Ticks,
    pub(super) wake: Option<Ticks>,
    /// Decode runs (`sched_run.rs`): the planned ends of the steps after the one in flight
    /// (empty: none planned), whether the driver lets the engine plan them, and the engine
    /// events (a step's start and its end) the runs stood in for since the driver last asked.
    run: Vec<Ticks>,
    run_used: Vec<u64>,
    runs_allowed: bool,
    elided_events: u64,
    /// Steps the next run may plan after the one in flight (`sched_run.rs`: doubles when a run
    /// ends, about twice what was used when an arrival cuts one).
    run_len: u64,
}

impl<'m> Engine<'m> {
    /// A new idle engine with index `index` (reported in events).
    pub fn new(
        index: u32,
        cfg: EngineConfig,
        model: &'m dyn StepTimeModel,
    ) -> Result<Engine<'m>, SimError> {
        cfg.validate()?;
        let bs = cfg.block_size as u64;
        let group = cfg.kv.full_groups as u64;
        let mut e = Engine {
            index,
            bs,
            bs_shift: bs.is_power_of_two().then(|| bs.trailing_zeros()),
            group,
            caching: cfg.enable_prefix_caching && group > 0,
            model,
            track_ctx_max: model.needs_decode_ctx_max(),
            pool: KvPool::new(cfg.num_gpu_blocks, group),
            slots: Vec::new(),
            free_slots: Vec::new(),
            waiting: VecDeque::new(),
            running: Vec::new(),
            n_running: 0,
            run_seq: 0,
            prefilling: Vec::new(),
            n_dec: 0,
            sum_dec_ctx: 0,
            buckets: vec![Vec::new(); bs as usize],
            finish_heap: BinaryHeap::new(),
            windows: {
                let mut w: Vec<u64> = cfg.kv.sliding.iter().map(|g| g.window).collect();
                w.sort_unstable();
                w.dedup();
                w.into_iter()
                    .map(|window| WindowedDecode {
                        window,
                        decode_keys: 0,
                    })
                    .collect()
            },
            below: Vec::new(),
            cross_heap: BinaryHeap::new(),
            step: 0,
            now: Ticks::ZERO,
            in_flight: None,
            v0_pending: None,
            v0_fresh: Vec::new(),
            round_end: 0,
            completing: Vec::new(),
            chunks: Vec::new(),
            plans: Vec::new(),
            spare_spans: Vec::new(),
            spare_held: Vec::new(),
            submitted: 0,
            finished: 0,
            rejected: 0,
            preemptions: 0,
            spec_plans: Vec::new(),
            spec_pos: Vec::new(),
            offload: cfg.offload.clone().map(CpuTier::new),
            pending_stores: Vec::new(),
            defer_stores: false,
            store_t: Ticks::ZERO,
            wake: None,
            run: Vec::new(),
            run_used: Vec::new(),
            runs_allowed: false,
            elided_events: 0,
            run_len: 32,
            cfg,
        };
        e.below = vec![0; e.windows.len()];
        Ok(e)
    }

    pub fn index(&self) -> u32 {
        self.index
    }
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// Requests waiting (including preempted ones).
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }
    /// Requests admitted and not finished.
    pub fn num_running(&self) -> usize {
        self.n_running
    }
    /// KV blocks in use now.
    pub fn kv_used_blocks(&self) -> u64 {
        self.pool.used()
    }
    pub fn kv_total_blocks(&self) -> u64 {
        self.pool.total()
    }
    /// (submitted, finished, rejected, preemptions) since creation.
    pub fn counters(&self) -> (u64, u64, u64, u64) {
        (
            self.submitted,
            self.finished,
            self.rejected,
            self.preemptions,
        )
    }
    /// Steps completed.
    pub fn steps(&self) -> u64 {
        self.step
    }

    #[inline]
    fn fp(&self, n: u64) -> u64 {
        self.footprint(n, false)
    }

    /// The blocks a decoding request with `n` tokens holds: [`KvFootprint::blocks_decoding`]
    /// (sliding groups keep only their window) when the engine frees out-of-window blocks, else
    /// [`Self::fp`]. Speculative decoding and the CPU tier keep the admission bound (`fp`): their
    /// paths size a decode's slots with it.
    #[inline]
    fn fp_decoding(&self, n: u64) -> u64 {
        self.footprint(n, self.sliding_frees())
    }

    /// [`KvFootprint::held`] with the division by the block size as a shift when it is a power
    /// of two (the usual case): the same value, without a hardware divide per call.
    #[inline]
    fn footprint(&self, n: u64, decoding: bool) -> u64 {
        let kv = &self.cfg.kv;
        let b = if n == 0 { 0 } else { self.div_bs(n - 1) + 1 };
        let total = kv.held(n, b, self.bs, decoding);
        debug_assert_eq!(
            total,
            if decoding {
                kv.blocks_decoding(n, self.bs)
            } else {
                kv.blocks(n, self.bs)
            }
        );
        total
    }

    /// True when decoding requests give back the sliding-window blocks their window left.
    #[inline]
    fn sliding_frees(&self) -> bool {
        !self.cfg.kv.sliding.is_empty() && self.cfg.spec.is_none() && self.offload.is_none()
    }

    /// `n / block_size`.
    #[inline]
    fn div_bs(&self, n: u64) -> u64 {
        match self.bs_shift {
            Some(sh) => n >> sh,
            None => n / self.bs,
        }
    }

    /// `n % block_size`.
    #[inline]
    fn mod_bs(&self, n: u64) -> u64 {
        match self.bs_shift {
            Some(_) => n & (self.bs - 1),
            None => n % self.bs,
        }
    }

    /// Appends slot `s` to the running list.
    fn push_running(&mut self, s: u32) {
        let seq = self.run_seq;
        self.run_seq += 1;
        self.live(s).run_seq = seq;
        self.running.push((seq, s));
        self.n_running += 1;
    }

    /// Removes slot `s` from the running list (if it is there), keeping the others' order.
    fn remove_running(&mut self, s: u32) {
        let seq = self.slots[s as usize].as_ref().expect("live slot").run_seq;
        let Ok(i) = self.running.binary_search_by_key(&seq, |e| e.0) else {
            return;
        };
        if self.running[i].1 != s {
            return;
        }
        self.n_running -= 1;
        if i + 1 == self.running.len() {
            self.running.pop();
            self.pop_dead_tail();
        } else {
            self.running[i].1 = DEAD;
            let dead = self.running.len() - self.n_running;
            if dead > 64 && dead > self.n_running {
                self.running.retain(|e| e.1 != DEAD);
            }
        }
    }

    /// Drops tombstones from the end of the running list.
    fn pop_dead_tail(&mut self) {
        while self.running.last().is_some_and(|e| e.1 == DEAD) {
            self.running.pop();
        }
    }

    fn live(&mut self, s: u32) -> &mut Live {
        self.slots[s as usize].as_mut().expect("live slot")
    }

    /// Submits a request arriving at `t` (`t` must not precede earlier events). Rejected
    /// requests are reported to the observer and returned as `Err`.
    pub fn submit(
        &mut self,
        req: Request,
        t: Ticks,
        obs: &mut dyn Observer,
    ) -> Result<(), RejectReason> {
        self.cut_decode_run(t, obs);
        self.submitted += 1;
        if self.in_flight.is_none() && t > self.now {
            self.now = t;
        }
        self.wake = None;
        obs.on_arrival(self.index, t, req.id);
        let p = req.prompt_len();
        let o = req.output_len;
        if let Some(r) = self.refusal_of(p, o) {
            self.rejected += 1;
            obs.on_rejected(self.index, t, req.id, &r);
            return Err(r);
        }
        self.enqueue(req, p, o);
        Ok(())
    }

    /// Why a request of `p` prompt and `o` output tokens is refused at submission, if it is.
    fn refusal_of(&self, p: u64, o: u64) -> Option<RejectReason> {
        if p == 0 {
            Some(RejectReason::EmptyPrompt)
        } else if o == 0 {
            Some(RejectReason::ZeroOutput)
        } else if self.cfg.num_scheduler_steps > 1
            && self.cfg.enable_chunked_prefill
            && p > self.cfg.max_num_batched_tokens as u64
        {
            // V0 `Scheduler._get_prompt_limit` with multi-step: min(max_model_len, budget).
            Some(RejectReason::PromptOverMultiStepBudget {
                prompt: p,
                budget: self.cfg.max_num_batched_tokens as u64,
            })
        } else if p + o > self.cfg.max_model_len {
            Some(RejectReason::ExceedsMaxModelLen {
                prompt: p,
                output: o,
                max_model_len: self.cfg.max_model_len,
            })
        } else {
            // With speculative decoding a request's last step also holds KV slots for its
            // drafts and lookahead, capped at max_model_len (vLLM `allocate_slots`).
            let extra = self.cfg.spec.as_ref().map_or(0, |sp| {
                (sp.num_speculative_tokens + sp.num_lookahead_tokens) as u64
            });
            let n = if extra > 0 {
                (p + o - 1 + extra).min(self.cfg.max_model_len)
            } else {
                p + o - 1
            };
            let needed = self.fp(n);
            (needed > self.pool.total()).then_some(RejectReason::ExceedsKvPool {
                needed,
                pool: self.pool.total(),
            })
        }
    }

    /// Puts an accepted request at the back of the waiting queue.
    fn enqueue(&mut self, req: Request, p: u64, o: u64) {
        let mut segs = req.prompt;
        segs.push(Segment {
            stream: req.output_stream,
            start: req.output_start,
            len: o,
        });
        Request::normalize_segments(&mut segs);
        let mut spans = self.spare_spans.pop().unwrap_or_default();
        if self.caching {
            spans_of(&segs, self.bs, &mut spans);
        }
        let live = Live {
            id: req.id,
            arrival: req.arrival,
            spans,
            prompt_len: p,
            output_len: o,
            generated: 0,
            eff_len: p,
            computed: 0,
            phase: Phase::Waiting,
            held: 0,
            held_ranges: self.spare_held.pop().unwrap_or_default(),
            ref_blocks: 0,
            reg_blocks: 0,
            first_scheduled: None,
            first_token: None,
            last_token: Ticks::ZERO,
            cached_prompt_tokens: 0,
            preemptions: 0,
            runs: Vec::new(),
            extra_itls: Vec::new(),
            skip_first_run: false,
            bucket_pos: 0,
            gen: 0,
            run_seq: u64::MAX,
            spec_draws: 0,
            chunk_tokens: Vec::new(),
            extra_tokens: Vec::new(),
            remote: false,
            reserved: 0,
            stored_chunks: 0,
            load_ready: None,
            load_issued: Ticks::ZERO,
            gpu_hit: 0,
        };
        let s = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(live);
                s
            }
            None => {
                self.slots.push(Some(live));
                (self.slots.len() - 1) as u32
            }
        };
        self.waiting.push_back(s);
    }

    /// Time of the engine's next internal event: the end of the step in flight, or `now` when
    /// idle with work to schedule; `None` when idle and empty.
    pub fn next_event_time(&self) -> Option<Ticks> {
        if let Some(f) = &self.in_flight {
            // With a decode run planned, its last step's end (`sched_run.rs`).
            Some(self.run.last().copied().unwrap_or(f.end))
        } else if !self.waiting.is_empty() || self.n_running > 0 {
            Some(self.wake.map_or(self.now, |w| w.max(self.now)))
        } else {
            None
        }
    }

    /// End of the step in flight; `None` when idle.
    pub fn step_end(&self) -> Option<Ticks> {
        self.in_flight.as_ref().map(|f| f.end)
    }

    /// Lockstep driving (`topology/lockstep.rs`): moves an idle engine's clock forward to `t`,
    /// so its next step starts there (no effect with a step in flight or `t` not later).
    pub fn idle_until(&mut self, t: Ticks) {
        if self.in_flight.is_none() && t > self.now {
            self.now = t;
        }
    }

    /// Lockstep driving: the step in flight ends at `end` instead (the slowest DP rank's end);
    /// no effect when idle or when `end` is not later than its own end.
    pub fn extend_step_to(&mut self, end: Ticks) {
        if let Some(f) = &mut self.in_flight {
            if end > f.end {
                f.end = end;
            }
        }
    }

    /// Processes the event at [`Engine::next_event_time`]: completes the step in flight, or
    /// schedules and starts the next step.
    pub fn process_next_event(&mut self, obs: &mut dyn Observer) -> Result<(), SimError> {
        if self.in_flight.is_some() {
            if self.cfg.spec.is_some() {
                self.complete_step_spec(obs);
            } else if !self.run.is_empty() {
                self.complete_run(obs);
            } else {
                self.complete_step(obs);
            }
            Ok(())
        } else if !self.waiting.is_empty() || self.n_running > 0 {
            if self.cfg.spec.is_some() {
                return self.start_step_spec(obs);
            }
            self.start_step(obs)
        } else {
            Ok(())
        }
    }

    /// Processes every engine event at or before `t` (for a single engine without external
    /// arrivals in between; a multi-engine driver interleaves [`Engine::process_next_event`]).
    pub fn advance_to(&mut self, t: Ticks, obs: &mut dyn Observer) -> Result<(), SimError> {
        while let Some(te) = self.next_event_time() {
            if te > t {
                break;
            }
            self.process_next_event(obs)?;
        }
        Ok(())
    }

    /// vLLM V1 without chunked prefill: a waiting request whose next prefill (all of its
    /// uncomputed prompt, or the long-prefill threshold) exceeds the remaining budget stops
    /// admission for this step (`Scheduler.schedule`: "If chunked_prefill is disabled, we can
    /// stop the scheduling here").
    ///
    /// vLLM V0 with multi-step scheduling does not chunk prompts either
    /// (`Scheduler._chunk_new_tokens_to_schedule`: "Prompts with more tokens than the current
    /// remaining budget are postponed"). A preempted request whose prompt and output so far exceed
    /// the whole budget, which vLLM would drop as ignored, is chunked instead (docs/engine.md).
    fn whole_prompt_waits(&self, rest: u64, budget: u64, thr: u64) -> bool {
        let want = if thr > 0 { rest.min(thr) } else { rest };
        let whole = !self.cfg.enable_chunked_prefill
            || (self.cfg.num_scheduler_steps > 1 && rest <= self.cfg.max_num_batched_tokens as u64);
        whole && want > budget
    }

    /// The first prefill chunk of a waiting request with `hit` tokens cached: all of it, capped
    /// by the budget and the long-prefill threshold, then whole-prompt admission without chunked
    /// prefill and block alignment in mamba `align` mode. `None`: admission stops this step.
    /// (A transferred prompt's chunk is replaced by its last token by the caller.)
    fn waiting_chunk(
        &self,
        eff: u64,
        hit: u64,
        budget: u64,
        thr: u64,
        remote: bool,
    ) -> Option<u64> {
        if !remote && self.whole_prompt_waits(eff - hit, budget, thr) {
            return None;
        }
        let mut chunk = (eff - hit).min(budget);
        if thr > 0 {
            chunk = chunk.min(thr);
        }
        let chunk = if remote {
            chunk
        } else {
            self.mamba_aligned(hit, chunk, eff)
        };
        (chunk > 0).then_some(chunk)
    }

    /// vLLM `Scheduler._mamba_block_aligned_split` (hybrid models in mamba cache mode `align`):
    /// a prefill chunk that ends before the prompt's last block boundary is cut to a multiple of
    /// the block size; one that crosses that boundary stops on it; the tail after it runs
    /// whole. 0 = the request cannot run this step.
    fn mamba_aligned(&self, computed: u64, chunk: u64, eff: u64) -> u64 {
        if !self.cfg.mamba_align || chunk == 0 {
            return chunk;
        }
        let bs = self.bs;
        let last = eff - eff % bs;
        let after = computed + chunk;
        if after < last {
            chunk / bs * bs
        } else if computed < last && last < after {
            last - computed
        } else {
            chunk
        }
    }

    fn decode_ctx(l: &Live, k: u64) -> u64 {
        match l.phase {
            Phase::Decoding { s0, .. } => l.eff_len + (k - s0),
            _ => l.computed,
        }
    }

    /// The longest context among the decodes at step `k` (0 without decodes): one pass over
    /// them, made only for a model that reads it.
    fn decode_ctx_max(&self, k: u64) -> u64 {
        self.buckets
            .iter()
            .flatten()
            .filter_map(|&s| self.slots[s as usize].as_ref())
            .map(|l| Self::decode_ctx(l, k))
            .max()
            .unwrap_or(0)
    }

    fn residue(&self, s0: u64, eff_len: u64) -> usize {
        self.mod_bs(self.mod_bs(s0) + self.bs - self.mod_bs(eff_len)) as usize
    }

    /// Offers blocks `reg_blocks .. upto` of a request to the prefix cache.
    #[inline]
    fn register_full(&mut self, s: u32, upto: u64) {
        if !self.caching {
            return;
        }
        let l = self.slots[s as usize].as_mut().expect("live slot");
        if upto <= l.reg_blocks {
            return;
        }
        l.ref_blocks += self
            .pool
            .register(&l.spans, l.reg_blocks, upto, &mut l.held_ranges);
        l.reg_blocks = upto;
        if self.offload.is_some() {
            self.offload_registered(s, upto);
        }
    }

    fn free_blocks(&mut self, s: u32) {
        let l = self.slots[s as usize].as_mut().expect("live slot");
        self.pool.release(&l.held_ranges);
        debug_assert_eq!(l.ref_blocks, held_blocks(&l.held_ranges));
        let private = l.held - self.group * l.ref_blocks;
        self.pool.release_private(private);
        l.held_ranges.clear();
        l.ref_blocks = 0;
        l.held = 0;
        l.reg_blocks = 0;
    }

    fn remove_from_bucket(&mut self, s: u32) {
        let l = self.slots[s as usize].as_ref().expect("live slot");
        let Phase::Decoding { s0, .. } = l.phase else {
            return;
        };
        let b = self.residue(s0, l.eff_len);
        let pos = l.bucket_pos;
        let bucket = &mut self.buckets[b];
        debug_assert_eq!(bucket[pos], s);
        bucket.swap_remove(pos);
        if pos < bucket.len() {
            let moved = bucket[pos];
            self.slots[moved as usize]
                .as_mut()
                .expect("live slot")
                .bucket_pos = pos;
        }
    }

    /// A request enters decode at step `s0` with `eff` tokens in its KV cache and `remaining`
    /// tokens to go: windowed decode sums and crossing events.
    fn windows_enter(&mut self, s: u32, s0: u64, eff: u64, remaining: u64) {
        if self.windows.is_empty() {
            return;
        }
        let (id, gen) = {
            let l = self.slots[s as usize].as_ref().expect("live slot");
            (l.id, l.gen)
        };
        for (i, w) in self.windows.iter_mut().enumerate() {
            w.decode_keys += (eff + 1).min(w.window);
            if eff + 1 < w.window {
                self.below[i] += 1;
                let cross = s0 + (w.window - 1 - eff);
                // Its last decode step is s0 + remaining - 1; the sums advance once more.
                if cross <= s0 + remaining {
                    self.cross_heap.push(Reverse((cross, i as u32, s, id, gen)));
                }
            }
        }
    }

    /// A decode with `ctx` tokens in its KV cache leaves (finish or preemption).
    fn windows_leave(&mut self, ctx: u64) {
        for (i, w) in self.windows.iter_mut().enumerate() {
            w.decode_keys -= (ctx + 1).min(w.window);
            if ctx + 1 < w.window {
                self.below[i] -= 1;
            }
        }
    }

    /// Advances the windowed sums from step `k` to `k + 1` (before finishes and new decodes).
    fn windows_advance(&mut self, k: u64) {
        if self.windows.is_empty() {
            return;
        }
        for (w, &b) in self.windows.iter_mut().zip(&self.below) {
            w.decode_keys += b;
        }
        while let Some(&Reverse((step, i, s, id, gen))) = self.cross_heap.peek() {
            if step > k + 1 {
                break;
            }
            self.cross_heap.pop();
            let valid = matches!(&self.slots[s as usize],
                Some(l) if l.id == id && l.gen == gen && matches!(l.phase, Phase::Decoding { .. }));
            if valid {
                self.below[i as usize] -= 1;
            }
        }
    }

    /// Recompute preemption of running request `s` while scheduling step `k` at time `t`.
    fn preempt(&mut self, s: u32, k: u64, t: Ticks, obs: &mut dyn Observer) {
        let phase = self.live(s).phase;
        match phase {
            Phase::Decoding { s0, gen0 } => {
                self.remove_from_bucket(s);
                let l = self.live(s);
                let steps = k - s0;
                l.generated = gen0 + steps;
                l.computed = l.eff_len + steps;
                if steps > 0 {
                    push_run(l, s0, k - 1);
                    // step k starts when step k-1 ended: its last token's time
                    l.last_token = t;
                }
                l.gen = l.gen.wrapping_add(1);
                let ctx = l.computed;
                self.n_dec -= 1;
                self.sum_dec_ctx -= ctx;
                self.windows_leave(ctx);
            }
            Phase::Prefilling => {
                if let Some(i) = self.prefilling.iter().rposition(|&x| x == s) {
                    self.prefilling.remove(i);
                }
            }
            Phase::SpecDecoding => {
                // `computed` and `generated` are current; the previous token came at `t`
                // only if the request ran in the step that just ended (else it is older).
                let l = self.live(s);
                l.gen = l.gen.wrapping_add(1);
            }
            Phase::Waiting => unreachable!("only running requests are preempted"),
        }
        let computed = self.live(s).computed;
        let upto = self.div_bs(computed);
        self.register_full(s, upto);
        self.free_blocks(s);
        let l = self.live(s);
        l.eff_len = l.prompt_len + l.generated;
        l.computed = 0;
        l.phase = Phase::Waiting;
        l.preemptions += 1;
        let id = l.id;
        let popped = self.running.pop();
        debug_assert_eq!(popped.map(|e| e.1), Some(s));
        self.n_running -= 1;
        self.pop_dead_tail();
        self.waiting.push_front(s);
        self.preemptions += 1;
        obs.on_preempted(self.index, t, id);
    }

    /// Step `k`'s KV work for its decodes, after the preemption check: the decodes entering a
    /// new block take it, and the output blocks the step fills are offered to the prefix cache.
    #[inline(always)]
    fn decode_allocs(&mut self, k: u64) {
        let bidx = self.mod_bs(k) as usize;
        // Most steps have no decode at a block boundary (one in `block_size` per decode).
        if !self.buckets[bidx].is_empty() {
            let members = std::mem::take(&mut self.buckets[bidx]);
            let mut need_sum = 0;
            for &s in &members {
                let l = self.slots[s as usize].as_ref().expect("live slot");
                let ctx = Self::decode_ctx(l, k);
                let need = self.fp_decoding(ctx + 1) - l.held;
                debug_assert!(!self.caching || self.div_bs(ctx) <= l.reg_blocks);
                need_sum += need;
                self.live(s).held += need;
            }
            let ok = self.pool.alloc(need_sum);
            debug_assert!(ok);
            self.buckets[bidx] = members;
        }
        // Output blocks that this step's decode fills enter the prefix cache now, as vLLM's
        // `allocate_slots` caches `num_computed + num_new` tokens at scheduling: the decodes
        // with `(ctx + 1) % bs == 0` are the next residue's bucket.
        if self.caching && !self.buckets[self.mod_bs(k + 1) as usize].is_empty() {
            let ridx = self.mod_bs(k + 1) as usize;
            let members = std::mem::take(&mut self.buckets[ridx]);
            for &s in &members {
                let l = self.slots[s as usize].as_ref().expect("live slot");
                let ctx = Self::decode_ctx(l, k);
                self.register_full(s, self.div_bs(ctx + 1));
            }
            self.buckets[ridx] = members;
        }
    }

    fn start_step(&mut self, obs: &mut dyn Observer) -> Result<(), SimError> {
        let k = self.step;
        if self.offload.is_some() {
            // An engine with only loads in flight resumes at the first load's end.
            if let Some(w) = self.wake.take() {
                self.now = self.now.max(w);
            }
            self.defer_stores = true;
        }
        let t = self.now;
        let bs = self.bs;
        let thr = self.cfg.long_prefill_token_threshold as u64;
        let mut budget = self.cfg.max_num_batched_tokens as u64 - self.n_dec;
        let bidx = self.mod_bs(k) as usize;
        self.chunks.clear();
        self.completing.clear();
        self.plans.clear();

        // 0. vLLM V0 without chunked prefill (`Scheduler._schedule_default`): waiting prompts
        // first, with the whole budget, and "Don't schedule decodes if prefills are scheduled":
        // a step that admits any prompt is a prefill-only step, which leaves the decode clock
        // (`self.step`) where it is (`EngineConfig::v0_prefill_first`).
        let v0_first = self.cfg.v0_prefill_first && self.offload.is_none();
        // V0 multi-step: inside a round the scheduler does not run; the round's decodes take
        // their next step and nobody is admitted. Rounds follow each other while decodes run, so
        // after steps the engine did not schedule one by one (a decode run, `sched_run.rs`) the
        // next round still starts at `round_end + m N`. A round whose decodes all finished ends
        // early.
        let multi = self.cfg.num_scheduler_steps > 1;
        let n_steps = self.cfg.num_scheduler_steps as u64;
        let mid_round = multi
            && self.n_dec > 0
            && (k < self.round_end || !(k - self.round_end).is_multiple_of(n_steps));
        if v0_first && !mid_round {
            let mut whole = self.cfg.max_num_batched_tokens as u64;
            self.admit_waiting(&mut whole, thr, t, None, obs);
            if !self.chunks.is_empty() {
                self.put_step_in_flight(t, true);
                return Ok(());
            }
        }

        // 1. Running requests: decodes (1 token each) and the next chunk of unfinished prefills.
        // vLLM walks its running list in admission order, each request taking from the budget
        // in turn; serving all decodes first gives the same chunks because a decode is never
        // behind a budget-limited chunk (docs/engine.md, "Running order"; debug-checked below).
        let mut need_total = 0u64;
        let members = std::mem::take(&mut self.buckets[bidx]);
        for &s in &members {
            let l = self.slots[s as usize].as_ref().expect("live slot");
            let ctx = Self::decode_ctx(l, k);
            need_total += self.fp_decoding(ctx + 1) - l.held;
        }
        self.buckets[bidx] = members;
        for i in 0..self.prefilling.len() {
            let s = self.prefilling[i];
            let l = self.slots[s as usize].as_ref().expect("live slot");
            let mut chunk = (l.eff_len - l.computed).min(budget);
            if thr > 0 {
                chunk = chunk.min(thr);
            }
            let chunk = self.mamba_aligned(l.computed, chunk, l.eff_len);
            if chunk == 0 {
                continue;
            }
            #[cfg(debug_assertions)]
            if chunk == budget && chunk < l.eff_len - l.computed && (thr == 0 || chunk < thr) {
                // Budget-limited: no decode may come after it in the running list.
                let pos = self
                    .running
                    .iter()
                    .position(|&x| x.1 == s)
                    .expect("running");
                for &(_, x) in self.running[pos + 1..].iter().filter(|e| e.1 != DEAD) {
                    let later = self.slots[x as usize].as_ref().expect("live slot");
                    assert!(
                        !matches!(later.phase, Phase::Decoding { .. }),
                        "a decode is behind a budget-limited prefill chunk"
                    );
                }
            }
            let need = self.fp(l.computed + chunk) - l.held;
            budget -= chunk;
            need_total += need;
            self.plans.push((s, chunk, need));
        }
        // 2. Not enough KV: preempt the most recently admitted running request until it fits.
        let mut preempted = false;
        while need_total > self.pool.available() {
            let victim = self.running.last().expect("a request needs blocks").1;
            let l = self.slots[victim as usize].as_ref().expect("live slot");
            match l.phase {
                Phase::Decoding { s0, .. } => {
                    if self.residue(s0, l.eff_len) == bidx {
                        let ctx = Self::decode_ctx(l, k);
                        need_total -= self.fp_decoding(ctx + 1) - l.held;
                    }
                }
                Phase::Prefilling => {
                    if let Some(i) = self.plans.iter().position(|p| p.0 == victim) {
                        let (_, chunk, need) = self.plans.remove(i);
                        need_total -= need;
                        budget += chunk;
                    }
                }
                Phase::Waiting | Phase::SpecDecoding => unreachable!(),
            }
            self.preempt(victim, k, t, obs);
            preempted = true;
        }
        // 3. Allocate for the running requests. The decodes entering a new block take it in
        // one `alloc` of the sum: evictions are counted off the LRU head in order, so one call
        // evicts exactly what one call per request would (nothing is registered in between).
        // Their last full block is already in the prefix cache: registered at the step that
        // filled it (`decode_allocs`' next-residue pass) or by the prefill that ended on it.
        self.decode_allocs(k);
        let plans = std::mem::take(&mut self.plans);
        for &(s, chunk, need) in &plans {
            let ok = self.pool.alloc(need);
            debug_assert!(ok);
            let l = self.live(s);
            l.held += need;
            let before = l.computed;
            l.computed += chunk;
            let done = l.computed == l.eff_len;
            let upto = l.computed / bs;
            self.chunks.push(PrefillChunk {
                new_tokens: chunk,
                context_before: before,
            });
            if done {
                self.completing.push(s);
            }
            self.register_full(s, upto);
        }
        self.plans = plans;

        // 3. Waiting requests, FCFS, unless this step preempted (as vLLM). With a CPU tier,
        // requests loading from it are passed over (`skip`, engine/offload.rs). V0 without
        // chunked prefill admitted them first (above).
        if !preempted && !v0_first && !mid_round {
            self.admit_waiting(&mut budget, thr, t, None, obs);
        }

        // 4. The step's work and duration.
        let num_prefill_tokens: u64 = self.chunks.iter().map(|c| c.new_tokens).sum();
        let num_tokens = self.n_dec + num_prefill_tokens;
        if num_tokens == 0 {
            if self.waiting.is_empty() && self.n_running == 0 {
                return Ok(());
            }
            if let Some(w) = self.offload_next_ready(t) {
                self.offload_flush(t);
                self.offload_report(t, obs);
                self.wake = Some(w);
                return Ok(());
            }
            if self.drop_newest_reservation() {
                return self.start_step(obs);
            }
            return Err(SimError::Stalled {
                engine: self.index,
                t_ns: t.0,
                waiting: self.waiting.len() as u32,
            });
        }
        self.put_step_in_flight(t, false);
        if multi && !mid_round {
            // A new round: this step and the `num_scheduler_steps - 1` after it.
            self.round_end = k + n_steps;
        }
        if self.offload.is_some() {
            let end = self.in_flight.as_ref().map_or(t, |f| f.end);
            self.offload_flush(end);
            self.offload_report(t, obs);
        }
        if self.runs_allowed && !preempted {
            self.plan_run(k);
        }
        Ok(())
    }

    /// Puts the step of `self.chunks` and the running decodes in flight at `t`; a V0
    /// prefill-only step (`start_step`, step 0) has the chunks alone.
    fn put_step_in_flight(&mut self, t: Ticks, prefill_only: bool) {
        let k = self.step;
        let n_dec = if prefill_only { 0 } else { self.n_dec };
        let num_prefill_tokens: u64 = self.chunks.iter().map(|c| c.new_tokens).sum();
        let batch = StepBatch {
            num_seqs: (n_dec as usize + self.chunks.len()) as u32,
            num_decode_seqs: n_dec as u32,
            decode_ctx_sum: if n_dec > 0 { self.sum_dec_ctx } else { 0 },
            prefills: &self.chunks,
            num_prefill_tokens,
            prefill_ctx_sum: self.chunks.iter().map(|c| c.context_before).sum(),
            prefill_attn_pairs: self
                .chunks
                .iter()
                .map(|c| c.new_tokens * c.context_before + c.new_tokens * (c.new_tokens + 1) / 2)
                .sum(),
            num_tokens: n_dec + num_prefill_tokens,
            decode_ctx_max: if self.track_ctx_max && n_dec > 0 {
                self.decode_ctx_max(k)
            } else {
                0
            },
        };
        let num_seqs = batch.num_seqs;
        let dt = self
            .model
            .step_time_windowed(&batch, &self.windows)
            .0
            .max(1);
        self.in_flight = Some(InFlight {
            start: t,
            end: Ticks(t.0.saturating_add(dt)),
            prefill_only,
            n_dec,
            num_seqs,
            prefill_tokens: num_prefill_tokens,
            kv_used: self.pool.used(),
            running: self.n_running as u32,
            waiting: self.waiting.len() as u32,
        });
    }

    /// Admits waiting requests FCFS while the step's `budget`, `max_num_seqs` and the free KV
    /// blocks allow (vLLM `Scheduler.schedule`'s waiting loop): each admitted request's chunk is
    /// pushed to `self.chunks`, and the request to `self.prefilling` (and `self.completing` when
    /// it ends the prompt), or, in a speculative step (`spec`), to `self.spec_plans`.
    fn admit_waiting(
        &mut self,
        budget: &mut u64,
        thr: u64,
        t: Ticks,
        spec: Option<SpecAdmission>,
        obs: &mut dyn Observer,
    ) {
        let bs = self.bs;
        let (look, mml, prune) = match spec {
            Some(a) => (a.lookahead, a.max_model_len, a.eagle_prune),
            None => (0, 0, false),
        };
        let mut skip = 0usize;
        while *budget > 0 && self.n_running < self.cfg.max_num_seqs as usize {
            let Some(&s) = self.waiting.get(skip) else {
                break;
            };
            if self.offload.is_some() {
                match self.offload_loaded(s, t) {
                    Some(false) => {
                        skip += 1;
                        continue;
                    }
                    Some(true) => {
                        let Some((chunk, before, done)) =
                            self.offload_admit(s, t, *budget, thr, look, mml, obs)
                        else {
                            break;
                        };
                        self.waiting.remove(skip);
                        self.push_running(s);
                        self.live(s).phase = Phase::Prefilling;
                        self.chunks.push(PrefillChunk {
                            new_tokens: chunk,
                            context_before: before,
                        });
                        self.note_admitted(s, done, spec.is_some());
                        *budget -= chunk;
                        continue;
                    }
                    None => {}
                }
            }
            let caching = self.caching;
            let group = self.group;
            let l = self.slots[s as usize].as_mut().expect("live slot");
            let eff = l.eff_len;
            let (mut hit_blocks, mut evict_hits) = if caching {
                // vLLM always recomputes the last token: at most (eff - 1) tokens hit.
                self.pool.lookup(&l.spans, (eff - 1) / bs)
            } else {
                (0, 0)
            };
            if prune && hit_blocks > 0 {
                // The EAGLE proposer needs the hidden state of the last matched token:
                // vLLM drops the last block of the hit.
                (hit_blocks, evict_hits) = self.pool.lookup(&l.spans, hit_blocks - 1);
            }
            let hit = hit_blocks * bs;
            let (remote, reserved) = (l.remote, l.reserved);
            let Some(chunk) = self.waiting_chunk(eff, hit, *budget, thr, remote) else {
                break;
            };
            // A transferred prompt: only its last token is computed (`remote.rs`).
            let (ctx0, chunk) = if remote { (eff - 1, 1) } else { (hit, chunk) };
            // A speculative step also reserves the lookahead slots of the drafts.
            let blocks = if spec.is_some() {
                self.fp((ctx0 + chunk + look).min(mml))
            } else {
                self.cfg.kv.blocks(ctx0 + chunk, bs)
            };
            let need_new = blocks - group * hit_blocks;
            if self.offload.is_some() && !remote {
                let seqs = self.cfg.max_num_seqs as u64;
                match self.offload_lookup(s, t, hit_blocks, evict_hits, seqs) {
                    CpuLookup::Miss => {}
                    CpuLookup::Skip => {
                        skip += 1;
                        continue;
                    }
                    CpuLookup::NoRoom => break,
                }
            }
            if need_new.saturating_sub(reserved) + group * evict_hits > self.pool.available() {
                break;
            }
            if skip == 0 {
                self.waiting.pop_front();
            } else {
                self.waiting.remove(skip);
            }
            let l = self.slots[s as usize].as_mut().expect("live slot");
            debug_assert!(l.held_ranges.is_empty());
            if hit_blocks > 0 {
                self.pool.take(&l.spans, hit_blocks, &mut l.held_ranges);
                l.ref_blocks = hit_blocks;
            }
            let ok = Self::alloc_over_reserved(&mut self.pool, l, need_new);
            debug_assert!(ok);
            l.held = need_new + group * hit_blocks;
            l.computed = ctx0 + chunk;
            l.reg_blocks = hit_blocks;
            l.phase = Phase::Prefilling;
            let upto = l.computed / bs;
            let done = l.computed == eff;
            if l.first_scheduled.is_none() {
                l.first_scheduled = Some(t);
                l.cached_prompt_tokens = hit;
                obs.on_scheduled(self.index, t, l.id, l.prompt_len, hit);
            }
            self.register_full(s, upto);
            self.push_running(s);
            self.chunks.push(PrefillChunk {
                new_tokens: chunk,
                context_before: ctx0,
            });
            self.note_admitted(s, done, spec.is_some());
            *budget -= chunk;
        }
    }

    /// Records a request [`Engine::admit_waiting`] admitted: a prefill of this step (and one that
    /// completes its prompt), or a speculative step's plan of it.
    fn note_admitted(&mut self, s: u32, done: bool, spec: bool) {
        if spec {
            self.spec_plans.push(SpecPlan::prefill(s, done));
        } else {
            self.prefilling.push(s);
            if done {
                self.completing.push(s);
            }
        }
    }

    fn complete_step(&mut self, obs: &mut dyn Observer) {
        let f = self.in_flight.take().expect("a step is in flight");
        let k = self.step;
        let t = f.end;
        self.now = t;
        // Every decode advanced by one token (none in a V0 prefill-only step).
        if !f.prefill_only {
            // The first decode token of a prompt that ended in a V0 prefill-only step: its gap
            // runs from that prompt's token.
            for (s, gen) in std::mem::take(&mut self.v0_fresh) {
                if let Some(l) = self.slots[s as usize].as_mut() {
                    if l.gen == gen && matches!(l.phase, Phase::Decoding { s0, .. } if s0 == k) {
                        l.extra_itls.push(Ticks(t.0 - l.last_token.0));
                        l.skip_first_run = true;
                    }
                }
            }
            self.sum_dec_ctx += self.n_dec;
            self.windows_advance(k);
            while let Some(&Reverse((st, s, gen))) = self.finish_heap.peek() {
                if st > k {
                    break;
                }
                self.finish_heap.pop();
                let valid = matches!(&self.slots[s as usize],
                    Some(l) if l.gen == gen && matches!(l.phase, Phase::Decoding { .. }));
                if valid {
                    debug_assert_eq!(st, k);
                    self.finish(s, t, Some(k), obs);
                }
            }
        }
        // The first decode step of a request whose prompt ends here: the next one, which after a
        // prefill-only step is still step `k`.
        let s0 = if f.prefill_only { k } else { k + 1 };
        let completing = std::mem::take(&mut self.completing);
        for &s in &completing {
            let id = {
                let l = self.live(s);
                l.generated += 1;
                l.id
            };
            let l = self.live(s);
            if l.first_token.is_none() {
                l.first_token = Some(t);
                obs.on_first_token(self.index, t, id);
            } else {
                let gap = Ticks(t.0 - l.last_token.0);
                l.extra_itls.push(gap);
            }
            let l = self.live(s);
            l.last_token = t;
            if let Some(i) = self.prefilling.iter().position(|&x| x == s) {
                self.prefilling.remove(i);
            }
            let l = self.live(s);
            if l.generated >= l.output_len {
                self.finish(s, t, None, obs);
            } else {
                // Decoding from here: the sliding groups give back what their window left
                // (`fp_decoding`); the prompt's last chunk needed slots for all its tokens.
                let eff = l.eff_len;
                if self.sliding_frees() {
                    let keep = self.fp_decoding(eff);
                    let l = self.live(s);
                    let drop = l.held.saturating_sub(keep);
                    l.held -= drop;
                    self.pool.release_private(drop);
                }
                let l = self.live(s);
                let gen0 = l.generated;
                let remaining = l.output_len - gen0;
                l.phase = Phase::Decoding { s0, gen0 };
                let gen = l.gen;
                self.n_dec += 1;
                self.sum_dec_ctx += eff;
                self.windows_enter(s, s0, eff, remaining);
                let b = self.residue(s0, eff);
                self.buckets[b].push(s);
                let pos = self.buckets[b].len() - 1;
                self.live(s).bucket_pos = pos;
                self.finish_heap.push(Reverse((s0 + remaining - 1, s, gen)));
                if f.prefill_only {
                    self.v0_fresh.push((s, gen));
                }
            }
        }
        self.completing = completing;
        let first_tokens = self.completing.len() as u64;
        self.completing.clear();
        if f.prefill_only && self.n_dec > 0 {
            // The decode clock waits for the next step, whose record takes this one in (step
            // records are indexed by that clock: metrics read a request's token times off it).
            let p = self.v0_pending.get_or_insert(PendingPrefill {
                start: f.start,
                num_seqs: 0,
                output_tokens: 0,
                prefill_tokens: 0,
            });
            p.num_seqs += f.num_seqs;
            p.output_tokens += first_tokens;
            p.prefill_tokens += f.prefill_tokens;
            return;
        }
        let mut rec = self.step_record(&f, k, f.n_dec + first_tokens);
        if let Some(p) = self.v0_pending.take() {
            rec.start = p.start;
            rec.num_seqs += p.num_seqs;
            rec.output_tokens += p.output_tokens;
            rec.num_prefill_tokens += p.prefill_tokens;
        }
        self.step += 1;
        obs.on_step(&rec);
        if self.offload.is_some() {
            self.offload_report(t, obs);
        }
    }

    /// The record of step `k` (`f`) that produced `output_tokens` tokens.
    #[inline]
    fn step_record(&self, f: &InFlight, k: u64, output_tokens: u64) -> StepRecord {
        StepRecord {
            engine: self.index,
            index: k,
            start: f.start,
            end: f.end,
            num_seqs: f.num_seqs,
            num_decode_seqs: f.n_dec as u32,
            num_prefill_tokens: f.prefill_tokens,
            output_tokens,
            kv_used_blocks: f.kv_used,
            kv_total_blocks: self.pool.total(),
            running: f.running,
            waiting: f.waiting,
            spec_drafts: 0,
            spec_draft_tokens: 0,
            spec_accepted_tokens: 0,
        }
    }

    /// Finishes request `s` at `t`; `last_step` is the step of its last decode token if it was
    /// decoding.
    fn finish(&mut self, s: u32, t: Ticks, last_step: Option<u64>, obs: &mut dyn Observer) {
        if let (Phase::Decoding { s0, gen0 }, Some(k)) = (self.live(s).phase, last_step) {
            self.remove_from_bucket(s);
            let l = self.live(s);
            let steps = k + 1 - s0;
            push_run(l, s0, k);
            l.generated = gen0 + steps;
            l.computed = l.eff_len + steps;
            // The context the next step would have seen.
            let ctx = l.computed;
            self.n_dec -= 1;
            self.sum_dec_ctx -= ctx;
            self.windows_leave(ctx);
        }
        let computed = self.live(s).computed;
        let upto = self.div_bs(computed);
        self.register_full(s, upto);
        self.free_blocks(s);
        self.remove_running(s);
        let mut l = self.slots[s as usize].take().expect("live slot");
        self.free_slots.push(s);
        self.spare_held.push(std::mem::take(&mut l.held_ranges));
        let mut spans = std::mem::take(&mut l.spans);
        spans.clear();
        self.spare_spans.push(spans);
        self.finished += 1;
        debug_assert_eq!(l.generated, l.output_len);
        let rec = FinishedRequest {
            id: l.id,
            arrival: l.arrival,
            first_scheduled: l.first_scheduled.unwrap_or(t),
            first_token: l.first_token.unwrap_or(t),
            finish: t,
            prompt_len: l.prompt_len,
            output_len: l.output_len,
            cached_prompt_tokens: l.cached_prompt_tokens,
            preemptions: l.preemptions,
            decode_runs: l.runs,
            extra_itls: l.extra_itls,
            chunk_tokens: {
                let mut c = l.chunk_tokens;
                c.extend_from_slice(&l.extra_tokens);
                c
            },
            engine: self.index,
        };
        obs.on_finished_owned(rec);
    }
}
