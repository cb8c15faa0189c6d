//! A discrete-event model of one vLLM v1 engine core: scheduler, paged KV cache with prefix
//! caching, recompute preemption. `docs/engine.md` describes the model and every deviation from vLLM.
//!
//! Architecture invariants:
//! - Time is integer [`Ticks`] (ns). The engine's only internal events are step starts and step
//!   ends; arrivals come from outside through [`Engine::submit`]. A driver (see `sweep.rs` and
//!   [`cluster::Cluster`]) orders all events by `(time, class, insertion sequence)` with class
//!   external (arrivals, client wake-ups) before engine events, engines by index.
//! - The per-step cost grows with events (admissions, prefill chunks, finishes, block-boundary
//!   crossings), not with `steps x batch`: a decoding request is not touched each step; its
//!   progress is derived from the step counter.
//! - Metrics are not computed here: everything observable is reported to an [`Observer`].

pub mod cluster;
mod kv;
mod offload;
mod sched;

pub(crate) use kv::IdMap;
pub use offload::{OffloadConfig, OffloadStats};
pub use sched::Engine;
pub use spec::{SpecDecode, SpecStep};

mod spec;

use crate::units::Ticks;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A run of tokens drawn from one content stream: tokens `start .. start + len` of stream
/// `stream`. Two requests share a KV block exactly when their token sequences agree up to the end
/// of that block, i.e. when their segment lists agree up to there (segments are normalised so that
/// contiguous runs of one stream are merged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub stream: u64,
    pub start: u64,
    pub len: u64,
}

/// One request as the engine sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Unique id (assigned by the workload).
    pub id: u64,
    /// Arrival time.
    pub arrival: Ticks,
    /// The prompt's token content, as segments. Its total length is the prompt length.
    pub prompt: Vec<Segment>,
    /// The stream the output tokens are drawn from: output token `i` is token
    /// `output_start + i` of `output_stream` (agentic sessions continue the conversation stream,
    /// so the next turn's prompt reuses the output's blocks).
    pub output_stream: u64,
    pub output_start: u64,
    /// Output tokens to generate (vLLM `max_tokens` with `ignore_eos`).
    pub output_len: u64,
}

impl Request {
    /// A request with a fully unique prompt of `prompt_len` tokens (no prefix sharing).
    pub fn unique(id: u64, arrival: Ticks, prompt_len: u64, output_len: u64) -> Request {
        let stream = crate::rng::hash2(0x5eed_0000_0000_0001, id);
        Request {
            id,
            arrival,
            prompt: vec![Segment {
                stream,
                start: 0,
                len: prompt_len,
            }],
            output_stream: stream,
            output_start: prompt_len,
            output_len,
        }
    }

    pub fn prompt_len(&self) -> u64 {
        self.prompt.iter().map(|s| s.len).sum()
    }

    /// Merges contiguous runs of the same stream and drops empty segments.
    pub fn normalize_segments(segs: &mut Vec<Segment>) {
        // In place: `w` segments kept so far (`segs[..w]`), the last one possibly extended.
        let mut w = 0usize;
        for i in 0..segs.len() {
            let s = segs[i];
            if s.len == 0 {
                continue;
            }
            if w > 0 {
                let last = &mut segs[w - 1];
                if last.stream == s.stream && last.start + last.len == s.start {
                    last.len += s.len;
                    continue;
                }
            }
            segs[w] = s;
            w += 1;
        }
        segs.truncate(w);
    }
}

/// A sliding-window KV cache group: it never holds more than `max_blocks` blocks per request
/// (vLLM frees blocks that fell out of the window; the integrator sets
/// `max_blocks = cdiv(window - 1 + max_num_batched_tokens, block_size) + 1`, vLLM's
/// `SlidingWindowSpec.max_memory_usage_bytes` bound, which a prompt's chunk can reach); a
/// decoding request holds at most `cdiv(window, block_size) + 1` ([`KvFootprint::blocks_decoding`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlidingGroup {
    pub window: u64,
    pub max_blocks: u64,
}

/// How many physical KV blocks a request with `n` tokens in its KV cache holds:
/// `full_groups * cdiv(n, bs) + sum_i min(cdiv(n, bs), sliding[i].max_blocks) + fixed_blocks`
/// (`fixed_blocks` only when `n > 0`, e.g. a per-request state).
/// Prefix caching shares only the `full_groups` blocks of full token blocks (one cached "unit"
/// = `full_groups` physical blocks); sliding and fixed blocks are private to each request.
/// A uniform full-attention model is `KvFootprint::uniform()`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvFootprint {
    pub full_groups: u32,
    pub sliding: Vec<SlidingGroup>,
    pub fixed_blocks: u64,
}

impl SlidingGroup {
    /// The most blocks one request holds in this group: `max_blocks` (a prompt's chunk), and
    /// while decoding at most `cdiv(window, bs) + 1` ([`KvFootprint::blocks_decoding`]).
    #[inline]
    pub fn cap(&self, bs: u64, decoding: bool) -> u64 {
        if decoding {
            self.max_blocks.min(self.window.div_ceil(bs) + 1)
        } else {
            self.max_blocks
        }
    }
}

impl KvFootprint {
    pub fn uniform() -> KvFootprint {
        KvFootprint {
            full_groups: 1,
            sliding: Vec::new(),
            fixed_blocks: 0,
        }
    }

    /// Physical blocks a *decoding* request with `n` tokens of KV holds: as [`Self::blocks`], but
    /// each sliding group keeps only the blocks its window still reads, at most
    /// `cdiv(window, bs) + 1` (vLLM's `SlidingWindowManager.remove_skipped_blocks`, called by
    /// `KVCacheManager.allocate_slots` before every allocation, frees the blocks before
    /// `num_computed_tokens - window + 1`; a decode then holds `cdiv(window, bs)` or one more).
    /// `max_blocks` bounds a prompt's chunk, which needs slots for all its tokens.
    #[inline]
    pub fn blocks_decoding(&self, n: u64, bs: u64) -> u64 {
        self.held(n, n.div_ceil(bs), bs, true)
    }

    /// Physical blocks for `n` tokens of KV with block size `bs`.
    #[inline]
    pub fn blocks(&self, n: u64, bs: u64) -> u64 {
        self.held(n, n.div_ceil(bs), bs, false)
    }

    /// Blocks held by a request with `n` tokens of KV spanning `b = cdiv(n, bs)` blocks per
    /// full group (`b` passed in, so the engine can compute it without a divide): a decoding
    /// request's sliding groups keep only their window ([`SlidingGroup::cap`]).
    #[inline]
    pub(crate) fn held(&self, n: u64, b: u64, bs: u64, decoding: bool) -> u64 {
        if n == 0 {
            return 0;
        }
        let mut total = self.full_groups as u64 * b + self.fixed_blocks;
        for g in &self.sliding {
            total += b.min(g.cap(bs, decoding));
        }
        total
    }
}

/// The engine's settings (one engine core = one DP rank).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EngineConfig {
    /// vLLM `--max-num-seqs`.
    pub max_num_seqs: u32,
    /// vLLM `--max-num-batched-tokens`: the per-step token budget.
    pub max_num_batched_tokens: u32,
    /// vLLM `--block-size` (tokens per KV block).
    pub block_size: u32,
    /// KV blocks in the pool (vLLM's `num_gpu_blocks`, from the capacity model).
    pub num_gpu_blocks: u64,
    /// vLLM `--max-model-len`.
    pub max_model_len: u64,
    /// vLLM `--enable-prefix-caching` (on by default in v1).
    pub enable_prefix_caching: bool,
    /// vLLM `--long-prefill-token-threshold` (0 = off): caps one request's prefill chunk.
    pub long_prefill_token_threshold: u32,
    /// vLLM `--no-enable-chunked-prefill` when false: a waiting prompt is admitted only when
    /// all of it (or its long-prefill threshold) fits the step's remaining budget.
    #[serde(
        default = "chunked_default",
        skip_serializing_if = "is_chunked_default"
    )]
    pub enable_chunked_prefill: bool,
    /// Hybrid (Gated DeltaNet) model with prefix caching: vLLM's mamba cache mode `align`, whose
    /// prefill chunks end on block boundaries (`Engine::mamba_aligned`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mamba_align: bool,
    /// vLLM V0's scheduler without chunked prefill (`Scheduler._schedule_default`: "Don't
    /// schedule decodes if prefills are scheduled"): a step that admits prompts runs them alone,
    /// with the whole token budget, and the running decodes take their token in the step after.
    /// ServeSim prices such a step as the prefill-only step plus that decode step (docs/engine.md,
    /// "V0 prefill-first steps").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub v0_prefill_first: bool,
    /// vLLM V0's `--num-scheduler-steps` (multi-step scheduling; 1 = off): the scheduler runs
    /// once per round of this many steps, and the round's later steps decode the same requests
    /// without admitting any (`LLMEngine.step`'s cached scheduler outputs). A V0 prefill-only
    /// step is a round of one step (`Scheduler._get_num_lookahead_slots`: no lookahead for a
    /// prefill). With chunked prefill on, prompts are not chunked: one that does not fit the
    /// round's remaining budget waits, and one longer than the whole budget is ignored
    /// (`RejectReason::PromptOverMultiStepBudget`). docs/engine.md, "V0 multi-step rounds".
    #[serde(default = "one_step", skip_serializing_if = "is_one_step")]
    pub num_scheduler_steps: u32,
    /// Blocks held per request as a function of its KV length.
    pub kv: KvFootprint,
    /// Speculative decoding (`None` = off: one token per decode per step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecDecode>,
    /// The CPU KV offload tier (`None` = off; engine/offload.rs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadConfig>,
}

fn chunked_default() -> bool {
    true
}

fn one_step() -> u32 {
    1
}

fn is_one_step(n: &u32) -> bool {
    *n == 1
}

fn is_chunked_default(on: &bool) -> bool {
    *on
}

impl EngineConfig {
    /// Checks the settings the way vLLM's `SchedulerConfig` does.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_num_seqs == 0 {
            return Err(ConfigError::Zero("max_num_seqs"));
        }
        if self.max_num_batched_tokens == 0 {
            return Err(ConfigError::Zero("max_num_batched_tokens"));
        }
        if self.block_size == 0 {
            return Err(ConfigError::Zero("block_size"));
        }
        if self.num_gpu_blocks == 0 {
            return Err(ConfigError::Zero("num_gpu_blocks"));
        }
        if self.max_model_len == 0 {
            return Err(ConfigError::Zero("max_model_len"));
        }
        if self.kv.full_groups == 0 && self.kv.sliding.is_empty() && self.kv.fixed_blocks == 0 {
            return Err(ConfigError::EmptyFootprint);
        }
        if self.num_scheduler_steps == 0 {
            return Err(ConfigError::Zero("num_scheduler_steps"));
        }
        if self.max_num_batched_tokens < self.max_num_seqs {
            return Err(ConfigError::BudgetBelowSeqs {
                mnbt: self.max_num_batched_tokens,
                max_num_seqs: self.max_num_seqs,
            });
        }
        if let Some(sp) = &self.spec {
            sp.validate()?;
        }
        if let Some(o) = &self.offload {
            o.validate()?;
            if !self.enable_prefix_caching || self.kv.full_groups == 0 {
                return Err(ConfigError::Zero(
                    "offload needs prefix caching (enable_prefix_caching)",
                ));
            }
        }
        Ok(())
    }
}

/// Invalid engine settings.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ConfigError {
    #[error("engine setting `{0}` must be at least 1")]
    Zero(&'static str),
    #[error("KV footprint holds no blocks: set `full_groups` >= 1 (or sliding/fixed blocks)")]
    EmptyFootprint,
    #[error("max_num_batched_tokens ({mnbt}) must be >= max_num_seqs ({max_num_seqs}), as vLLM requires; raise max_num_batched_tokens")]
    BudgetBelowSeqs { mnbt: u32, max_num_seqs: u32 },
    #[error("speculative decoding setting `{field}` is invalid: {fix}")]
    Spec {
        field: &'static str,
        fix: &'static str,
    },
}

/// One prefill chunk in a step: `new_tokens` prompt tokens computed on top of `context_before`
/// tokens already in the KV cache (prefix-cache hits and earlier chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrefillChunk {
    pub new_tokens: u64,
    pub context_before: u64,
}

/// What one engine step computes. Everything a roofline needs is here as aggregates:
/// - linear-layer FLOPs and communication are proportional to `num_tokens`;
/// - attention FLOPs to `decode_ctx_sum + num_decode_seqs` (each decode attends to its context
///   plus itself) plus `prefill_attn_pairs`;
/// - KV-cache reads to `decode_ctx_sum + prefill_ctx_sum` (plus writes of `num_tokens`);
/// - weights are read once per step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepBatch<'a> {
    /// Sequences scheduled (decodes + prefill chunks).
    pub num_seqs: u32,
    pub num_decode_seqs: u32,
    /// Sum over decoding sequences of the tokens already in their KV cache (each attends to
    /// `ctx + 1` keys).
    pub decode_ctx_sum: u64,
    /// The prefill chunks of the step.
    pub prefills: &'a [PrefillChunk],
    /// Sum of `new_tokens` over prefill chunks.
    pub num_prefill_tokens: u64,
    /// Sum of `context_before` over prefill chunks.
    pub prefill_ctx_sum: u64,
    /// Causal attention (query, key) pairs of the prefill chunks:
    /// `sum new * context_before + new * (new + 1) / 2`.
    pub prefill_attn_pairs: u64,
    /// All tokens of the step: `num_decode_seqs + num_prefill_tokens`.
    pub num_tokens: u64,
    /// The longest context among the decodes (tokens already in its KV cache), tracked only
    /// for a model that asks for it ([`StepTimeModel::needs_decode_ctx_max`]); 0 otherwise.
    pub decode_ctx_max: u64,
}

/// Decode attention under one sliding window (one distinct `window` of
/// [`KvFootprint::sliding`]): a decode with `ctx` tokens in its KV cache attends to
/// `min(ctx + 1, window)` keys in a layer with that window (its own token included, as
/// FlashAttention's `window_size_left = window - 1`), against `ctx + 1` in a full-attention layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowedDecode {
    pub window: u64,
    /// `sum over decoding sequences of min(ctx + 1, window)`.
    pub decode_keys: u64,
}

/// The duration of one engine step. The roofline model implements this; tests use
/// [`LinearStepTime`].
pub trait StepTimeModel {
    fn step_time(&self, batch: &StepBatch) -> Ticks;

    /// Whether the step time depends on the longest decode context
    /// ([`StepBatch::decode_ctx_max`]): vLLM V0 replays a CUDA graph only while every decode's
    /// sequence fits `max_seq_len_to_capture`. The engine then fills that field and plans no
    /// decode runs (their batches carry only context sums).
    fn needs_decode_ctx_max(&self) -> bool {
        false
    }

    /// The engine calls this one. `windows` has one entry per distinct sliding window of the
    /// engine's [`KvFootprint`] (ascending; empty without sliding groups). Models of
    /// sliding-window layers override it; the default ignores `windows`.
    fn step_time_windowed(&self, batch: &StepBatch, windows: &[WindowedDecode]) -> Ticks {
        let _ = windows;
        self.step_time(batch)
    }

    /// The durations of `count` steps of `n` decodes and nothing else whose contexts sum to
    /// `ctx_first`, `ctx_first + n`, ... tokens (the steps of a decode run,
    /// engine/sched_run.rs), pushed to `out`: each must equal `step_time_windowed` of that batch
    /// with no sliding windows. The default builds each batch; models override it with a
    /// shorter path to the same values.
    fn decode_run_ticks(&self, n: u64, ctx_first: u64, count: usize, out: &mut Vec<Ticks>) {
        for i in 0..count as u64 {
            let batch = StepBatch {
                num_seqs: n as u32,
                num_decode_seqs: n as u32,
                decode_ctx_sum: ctx_first + i * n,
                prefills: &[],
                num_prefill_tokens: 0,
                prefill_ctx_sum: 0,
                prefill_attn_pairs: 0,
                num_tokens: n,
                decode_ctx_max: 0,
            };
            out.push(self.step_time_windowed(&batch, &[]));
        }
    }

    /// A step with speculative decoding: `batch.num_tokens` includes the draft tokens the target
    /// verifies (`spec.draft_tokens`). The default prices the step as `step_time_windowed`
    /// (enough for [`LinearStepTime`], whose cost follows `num_tokens`); the roofline adds the
    /// verification and drafter terms (docs/step-time.md, "Speculative decoding").
    fn step_time_spec(
        &self,
        batch: &StepBatch,
        windows: &[WindowedDecode],
        spec: &SpecStep,
    ) -> Ticks {
        let _ = spec;
        self.step_time_windowed(batch, windows)
    }
}

/// A test-only step-time model:
/// `t = per_step_ns + per_token_ns * num_tokens + per_ctx_token_ns * (decode_ctx_sum + prefill_ctx_sum)`,
/// rounded to whole ns and at least 1 ns. Not a performance model of any GPU.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinearStepTime {
    pub per_step_ns: f64,
    pub per_token_ns: f64,
    pub per_ctx_token_ns: f64,
}

impl StepTimeModel for LinearStepTime {
    fn step_time(&self, b: &StepBatch) -> Ticks {
        let t = self.per_step_ns
            + self.per_token_ns * b.num_tokens as f64
            + self.per_ctx_token_ns * (b.decode_ctx_sum + b.prefill_ctx_sum) as f64;
        Ticks(libm::round(t.max(1.0)) as u64)
    }
}

/// Why a request was rejected at submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RejectReason {
    #[error("prompt is empty")]
    EmptyPrompt,
    #[error("output length is 0 (vLLM requires max_tokens >= 1)")]
    ZeroOutput,
    #[error("prompt ({prompt}) + output ({output}) tokens exceed max_model_len ({max_model_len})")]
    ExceedsMaxModelLen {
        prompt: u64,
        output: u64,
        max_model_len: u64,
    },
    #[error("the request needs {needed} KV blocks but the pool has only {pool}")]
    ExceedsKvPool { needed: u64, pool: u64 },
    #[error("prompt ({prompt} tokens) exceeds max_num_batched_tokens ({budget}): vLLM V0 with multi-step scheduling and chunked prefill does not chunk prompts and ignores longer ones")]
    PromptOverMultiStepBudget { prompt: u64, budget: u64 },
}

/// A finished request's timeline, as the engine reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct FinishedRequest {
    pub id: u64,
    pub arrival: Ticks,
    /// When the request was first scheduled (queueing ends).
    pub first_scheduled: Ticks,
    pub first_token: Ticks,
    pub finish: Ticks,
    pub prompt_len: u64,
    pub output_len: u64,
    /// Prompt tokens found in the prefix cache at first admission.
    pub cached_prompt_tokens: u64,
    pub preemptions: u32,
    /// Global step-index ranges `[first, last]` in which the request decoded one token per step.
    /// The inter-token gap of step `j` is `end(j) - end(j - 1)`.
    pub decode_runs: Vec<(u64, u64)>,
    /// Inter-token gaps not covered by `decode_runs`: the token produced by a recompute prefill
    /// after a preemption, measured from the previous token (with speculative decoding also a
    /// chunk that follows a step the request sat out).
    pub extra_itls: Vec<Ticks>,
    /// Speculative decoding only (empty otherwise): tokens in each streamed chunk, first for
    /// every step of `decode_runs` in order, then one per entry of `extra_itls`.
    pub chunk_tokens: Vec<u8>,
    /// Index of the engine (DP rank / replica) that served it.
    pub engine: u32,
}

/// One completed engine step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepRecord {
    pub engine: u32,
    /// Per-engine step index (0, 1, 2, ...).
    pub index: u64,
    pub start: Ticks,
    pub end: Ticks,
    pub num_seqs: u32,
    pub num_decode_seqs: u32,
    pub num_prefill_tokens: u64,
    /// Output tokens produced at the end of the step (one per decode, one per completed prefill;
    /// with speculative decoding accepted drafts + 1 per decode, capped at the request's end).
    pub output_tokens: u64,
    /// Speculative decoding: decodes that carried drafts, draft tokens verified, drafts accepted.
    pub spec_drafts: u32,
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
    /// KV blocks in use during the step (after the step's allocations), and the pool size.
    pub kv_used_blocks: u64,
    pub kv_total_blocks: u64,
    /// Requests running / waiting when the step was scheduled.
    pub running: u32,
    pub waiting: u32,
}

/// Consecutive pure-decode steps of one engine (a decode run, engine/sched_run.rs), reported at
/// once: step `first_index + i` runs from `ends[i - 1]` (`start` for `i = 0`) to `ends[i]` with
/// `kv_used_blocks[i]` blocks in use; each has `num_seqs` decodes, each producing one token, and
/// nothing waiting.
#[derive(Clone, Copy, Debug)]
pub struct DecodeSteps<'a> {
    pub engine: u32,
    pub first_index: u64,
    pub start: Ticks,
    pub ends: &'a [Ticks],
    pub kv_used_blocks: &'a [u64],
    pub num_seqs: u32,
    pub kv_total_blocks: u64,
    pub running: u32,
}

impl DecodeSteps<'_> {
    /// Step `i`'s record, as [`Observer::on_step`] would receive it.
    #[inline]
    pub fn record(&self, i: usize) -> StepRecord {
        StepRecord {
            engine: self.engine,
            index: self.first_index + i as u64,
            start: if i == 0 { self.start } else { self.ends[i - 1] },
            end: self.ends[i],
            num_seqs: self.num_seqs,
            num_decode_seqs: self.num_seqs,
            num_prefill_tokens: 0,
            output_tokens: self.num_seqs as u64,
            kv_used_blocks: self.kv_used_blocks[i],
            kv_total_blocks: self.kv_total_blocks,
            running: self.running,
            waiting: 0,
            spec_drafts: 0,
            spec_draft_tokens: 0,
            spec_accepted_tokens: 0,
        }
    }
}

/// Receives everything observable from an engine. All methods default to no-ops (or, for
/// [`Observer::on_decode_steps`], to [`Observer::on_step`] per step).
pub trait Observer {
    fn on_arrival(&mut self, _engine: u32, _t: Ticks, _id: u64) {}
    fn on_rejected(&mut self, _engine: u32, _t: Ticks, _id: u64, _reason: &RejectReason) {}
    /// First admission; `prompt_len` tokens were looked up, `cached_tokens` hit.
    fn on_scheduled(
        &mut self,
        _engine: u32,
        _t: Ticks,
        _id: u64,
        _prompt_len: u64,
        _cached_tokens: u64,
    ) {
    }
    fn on_first_token(&mut self, _engine: u32, _t: Ticks, _id: u64) {}
    fn on_preempted(&mut self, _engine: u32, _t: Ticks, _id: u64) {}
    fn on_finished(&mut self, _r: &FinishedRequest) {}
    /// The engine reports a finished request through this one, handing over the record; the
    /// default passes it to [`Observer::on_finished`]. Observers that keep the records override
    /// it to store them without a copy.
    fn on_finished_owned(&mut self, r: FinishedRequest) {
        self.on_finished(&r)
    }
    fn on_step(&mut self, _s: &StepRecord) {}
    /// Steps of a decode run; the default reports each through [`Observer::on_step`], in order.
    fn on_decode_steps(&mut self, r: &DecodeSteps) {
        for i in 0..r.ends.len() {
            self.on_step(&r.record(i));
        }
    }
    /// Speculative decoding: after a step's [`Observer::on_step`], drafts accepted at each
    /// position (`accepted_per_pos[i]` = decodes with at least `i + 1` drafts accepted, vLLM's
    /// `spec_decode_num_accepted_tokens_per_pos`) and drafted per position
    /// (`drafted_per_pos[i]` = decodes with at least `i + 1` drafts).
    fn on_spec_step(
        &mut self,
        _engine: u32,
        _end: Ticks,
        _accepted_per_pos: &[u64],
        _drafted_per_pos: &[u64],
    ) {
    }
    /// CPU offload tier: what it did since its last report (reported at step starts and ends).
    fn on_offload(&mut self, _engine: u32, _t: Ticks, _delta: &OffloadStats) {}
}

/// An observer that ignores everything.
pub struct NullObserver;
impl Observer for NullObserver {}

/// Simulation failures (never user-input panics).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SimError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the simulation exceeded its cap of {cap} events; lower the duration or the level, or raise `max_events`")]
    EventCap { cap: u64 },
    #[error("the simulation exceeded its cap of {cap} requests; lower the duration or the level, or raise `max_requests`")]
    RequestCap { cap: u64 },
    #[error("engine {engine} stalled at t={t_ns} ns with {waiting} waiting requests and nothing schedulable (internal error)")]
    Stalled {
        engine: u32,
        t_ns: u64,
        waiting: u32,
    },
}
