//! The engine step with speculative decoding: vLLM's `Scheduler.schedule()` walk over the running
//! list in admission order with `1 + k` tokens per decode (budget- and max_model_len-capped),
//! per-request KV allocation with lookahead slots and tail preemption, and
//! `update_from_output()`'s acceptance: `num_computed_tokens -= rejected`, accepted + 1 tokens
//! emitted (capped at the request's end). Every decode is touched every step (each draws its
//! acceptance), so this path costs O(running) per step; without speculation the engine takes the
//! O(events) path of `sched.rs`. docs/engine.md ("Speculative decoding").

use super::*;
use crate::engine::SpecStep;

/// One request scheduled in the step in flight.
#[derive(Clone, Copy, Debug)]
pub(super) struct SpecPlan {
    slot: u32,
    /// Drafts verified (decodes only).
    drafts: u32,
    decode: bool,
    /// A prefill chunk that completes the prefill (the step samples its next token).
    completes: bool,
}

impl SpecPlan {
    /// A prefill chunk of request `slot` (`completes`: it ends the prompt).
    pub(super) fn prefill(slot: u32, completes: bool) -> SpecPlan {
        SpecPlan {
            slot,
            drafts: 0,
            decode: false,
            completes,
        }
    }
}

/// What a speculative step changes in the admission of waiting requests
/// ([`Engine::admit_waiting`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct SpecAdmission {
    /// KV slots reserved beyond the prompt for the drafts (vLLM `num_lookahead_tokens`).
    pub lookahead: u64,
    /// The lookahead reservation stops at `max_model_len`.
    pub max_model_len: u64,
    /// EAGLE drops the last block of a prefix-cache hit.
    pub eagle_prune: bool,
}

impl<'m> Engine<'m> {
    pub(super) fn start_step_spec(&mut self, obs: &mut dyn Observer) -> Result<(), SimError> {
        let (k, look, prune) = {
            let sp = self.cfg.spec.as_ref().expect("speculative decoding on");
            (
                sp.num_speculative_tokens as u64,
                sp.num_lookahead_tokens as u64,
                sp.eagle_prune,
            )
        };
        let step = self.step;
        if self.offload.is_some() {
            if let Some(w) = self.wake.take() {
                self.now = self.now.max(w);
            }
            self.defer_stores = true;
        }
        let t = self.now;
        let bs = self.bs;
        let mml = self.cfg.max_model_len;
        let thr = self.cfg.long_prefill_token_threshold as u64;
        let mut budget = self.cfg.max_num_batched_tokens as u64;
        self.chunks.clear();
        self.spec_plans.clear();
        for w in &mut self.windows {
            w.decode_keys = 0;
        }
        let (mut n_dec, mut ctx_sum, mut draft_tokens, mut with_drafts) = (0u64, 0u64, 0u64, 0u32);
        let mut preempted = false;

        // 1. Running requests in admission order, each taking from the budget in turn.
        let mut i = 0;
        'walk: while i < self.running.len() && budget > 0 {
            let s = self.running[i].1;
            if s == DEAD {
                i += 1;
                continue;
            }
            let l = self.slots[s as usize].as_ref().expect("live slot");
            let (n, decode) = match l.phase {
                // num_tokens_with_spec - num_computed = 1 + k, capped by the budget and by
                // max_model_len - 1 - num_computed.
                Phase::SpecDecoding => (
                    (1 + k)
                        .min(budget)
                        .min(mml.saturating_sub(1 + l.computed).max(1)),
                    true,
                ),
                Phase::Prefilling => {
                    let mut c = (l.eff_len - l.computed).min(budget);
                    if thr > 0 {
                        c = c.min(thr);
                    }
                    (self.mamba_aligned(l.computed, c, l.eff_len), false)
                }
                Phase::Waiting | Phase::Decoding { .. } => unreachable!("running, speculative"),
            };
            if n == 0 {
                i += 1;
                continue;
            }
            // allocate_slots(num_new_tokens, num_lookahead_tokens): blocks for
            // computed + new + lookahead tokens (at most max_model_len).
            let need = self
                .fp((l.computed + n + look).min(mml))
                .saturating_sub(l.held);
            while need > self.pool.available() {
                let victim = self.running.last().expect("a request needs blocks").1;
                self.preempt(victim, step, t, obs);
                preempted = true;
                if victim == s {
                    break 'walk;
                }
            }
            let ok = self.pool.alloc(need);
            debug_assert!(ok);
            let l = self.live(s);
            l.held += need;
            let ctx = l.computed;
            if decode {
                let drafts = n - 1;
                n_dec += 1;
                ctx_sum += ctx;
                draft_tokens += drafts;
                with_drafts += (drafts > 0) as u32;
                for w in &mut self.windows {
                    w.decode_keys += (ctx + 1).min(w.window);
                }
                // Only verified tokens are cached: num_computed + 1 = num_tokens.
                self.register_full(s, self.div_bs(ctx + 1));
                self.spec_plans.push(SpecPlan {
                    slot: s,
                    drafts: drafts as u32,
                    decode: true,
                    completes: false,
                });
            } else {
                l.computed += n;
                let done = l.computed == l.eff_len;
                let upto = l.computed / bs;
                self.chunks.push(PrefillChunk {
                    new_tokens: n,
                    context_before: ctx,
                });
                self.register_full(s, upto);
                self.spec_plans.push(SpecPlan {
                    slot: s,
                    drafts: 0,
                    decode: false,
                    completes: done,
                });
            }
            budget -= n;
            i += 1;
        }

        // 2. Waiting requests, FCFS, unless this step preempted.
        if !preempted {
            let spec = SpecAdmission {
                lookahead: look,
                max_model_len: mml,
                eagle_prune: prune,
            };
            self.admit_waiting(&mut budget, thr, t, Some(spec), obs);
        }

        // 3. The step's work and duration.
        let num_prefill_tokens: u64 = self.chunks.iter().map(|c| c.new_tokens).sum();
        let num_tokens = n_dec + draft_tokens + num_prefill_tokens;
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
                return self.start_step_spec(obs);
            }
            return Err(SimError::Stalled {
                engine: self.index,
                t_ns: t.0,
                waiting: self.waiting.len() as u32,
            });
        }
        let batch = StepBatch {
            num_seqs: (n_dec as usize + self.chunks.len()) as u32,
            num_decode_seqs: n_dec as u32,
            decode_ctx_sum: ctx_sum,
            prefills: &self.chunks,
            num_prefill_tokens,
            prefill_ctx_sum: self.chunks.iter().map(|c| c.context_before).sum(),
            prefill_attn_pairs: self
                .chunks
                .iter()
                .map(|c| c.new_tokens * c.context_before + c.new_tokens * (c.new_tokens + 1) / 2)
                .sum(),
            num_tokens,
            decode_ctx_max: 0,
        };
        let spec = SpecStep {
            draft_tokens,
            decodes_with_drafts: with_drafts,
            num_speculative_tokens: k as u32,
        };
        let dt = self
            .model
            .step_time_spec(&batch, &self.windows, &spec)
            .0
            .max(1);
        self.in_flight = Some(InFlight {
            start: t,
            end: Ticks(t.0 + dt),
            prefill_only: false,
            n_dec,
            num_seqs: batch.num_seqs,
            prefill_tokens: num_prefill_tokens,
            kv_used: self.pool.used(),
            running: self.n_running as u32,
            waiting: self.waiting.len() as u32,
        });
        if self.offload.is_some() {
            let end = self.in_flight.as_ref().map_or(t, |f| f.end);
            self.offload_flush(end);
            self.offload_report(t, obs);
        }
        Ok(())
    }

    pub(super) fn complete_step_spec(&mut self, obs: &mut dyn Observer) {
        let f = self.in_flight.take().expect("a step is in flight");
        let step = self.step;
        let t = f.end;
        self.now = t;
        let k = self
            .cfg
            .spec
            .as_ref()
            .map_or(0, |sp| sp.num_speculative_tokens as usize);
        // accepted per position, then drafted per position.
        self.spec_pos.clear();
        self.spec_pos.resize(2 * k, 0);
        let (mut out, mut drafts_n, mut draft_tok, mut accepted) = (0u64, 0u32, 0u64, 0u64);
        let plans = std::mem::take(&mut self.spec_plans);
        for p in &plans {
            let s = p.slot;
            if p.decode {
                let (id, n) = {
                    let l = self.live(s);
                    let n = l.spec_draws;
                    if p.drafts > 0 {
                        l.spec_draws += 1;
                    }
                    (l.id, n)
                };
                let a = if p.drafts > 0 {
                    self.cfg.spec.as_ref().expect("spec").draw(id, n, p.drafts)
                } else {
                    0
                };
                if p.drafts > 0 {
                    drafts_n += 1;
                    draft_tok += p.drafts as u64;
                    accepted += a as u64;
                    for i in 0..a as usize {
                        self.spec_pos[i] += 1;
                    }
                    for i in 0..p.drafts as usize {
                        self.spec_pos[k + i] += 1;
                    }
                }
                let l = self.live(s);
                // num_computed_tokens += (1 + drafts) - rejected = 1 + accepted.
                l.computed += 1 + a as u64;
                let emit = (1 + a as u64).min(l.output_len - l.generated);
                l.generated += emit;
                out += emit;
                let emit = emit as u8;
                if l.last_token == f.start {
                    // The previous token came at the end of the previous step: the gap is
                    // end(step) - end(step - 1), a decode run step.
                    match l.runs.last_mut() {
                        Some(r) if r.1 + 1 == step => r.1 = step,
                        _ => l.runs.push((step, step)),
                    }
                    l.chunk_tokens.push(emit);
                } else {
                    // The request sat out a step (budget spent ahead of it).
                    l.extra_itls.push(Ticks(t.0 - l.last_token.0));
                    l.extra_tokens.push(emit);
                }
                l.last_token = t;
                if l.generated >= l.output_len {
                    l.computed = l.prompt_len + l.output_len;
                    self.finish(s, t, None, obs);
                }
            } else if p.completes {
                let l = self.live(s);
                l.generated += 1;
                out += 1;
                if l.first_token.is_none() {
                    l.first_token = Some(t);
                    let id = l.id;
                    obs.on_first_token(self.index, t, id);
                } else {
                    let gap = Ticks(t.0 - l.last_token.0);
                    l.extra_itls.push(gap);
                    l.extra_tokens.push(1);
                }
                let l = self.live(s);
                l.last_token = t;
                if l.generated >= l.output_len {
                    l.computed = l.prompt_len + l.output_len;
                    self.finish(s, t, None, obs);
                } else {
                    l.phase = Phase::SpecDecoding;
                }
            }
        }
        self.spec_plans = plans;
        let rec = StepRecord {
            engine: self.index,
            index: step,
            start: f.start,
            end: t,
            num_seqs: f.num_seqs,
            num_decode_seqs: f.n_dec as u32,
            num_prefill_tokens: f.prefill_tokens,
            output_tokens: out,
            kv_used_blocks: f.kv_used,
            kv_total_blocks: self.pool.total(),
            running: f.running,
            waiting: f.waiting,
            spec_drafts: drafts_n,
            spec_draft_tokens: draft_tok,
            spec_accepted_tokens: accepted,
        };
        self.step += 1;
        obs.on_step(&rec);
        if self.offload.is_some() {
            self.offload_report(t, obs);
        }
        if drafts_n > 0 {
            let (acc, drafted) = self.spec_pos.split_at(k);
            obs.on_spec_step(self.index, t, acc, drafted);
        }
    }
}
