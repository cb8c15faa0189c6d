//! Step time with speculative decoding: the target verifying `1 + drafts` tokens per decode, the
//! drafter's forward passes (MTP layers, an EAGLE head, a draft model; n-gram free) and
//! rejection sampling. Formulas and sources: docs/step-time.md ("Speculative decoding").

use super::{PerfError, PrefillChunk, StepCostModel, ACT_BYTES};
use crate::deploy::{Deployment, RawEngineSettings};
use crate::engine::SpecStep;
use crate::speculative::SpecMethod;
use crate::units::Ticks;

/// Parameters of an EAGLE / EAGLE-3 head per hidden_size^2: one Llama-style decoder layer
/// (13 h^2 in Llama-3.1-8B: 218 M parameters at h = 4096) plus the fusion projection
/// (2 h^2 for EAGLE's [2h -> h], 3 h^2 for EAGLE-3's [3h -> h]); bf16. Assumption (the heads
/// published for vLLM have this shape; a head's own config is not read).
const EAGLE_HEAD_H2: f64 = 15.0;
const EAGLE3_HEAD_H2: f64 = 16.0;
/// EAGLE-3 heads predict over a reduced draft vocabulary (`draft_vocab_size` 32000 in the
/// published Llama-3.1-8B / 70B heads).
const EAGLE3_DRAFT_VOCAB: f64 = 32000.0;
/// Bytes per probability element the rejection sampler reads/writes (fp32 probabilities,
/// `vllm/v1/sample/rejection_sampler.py`).
const PROB_BYTES: f64 = 4.0;

/// The drafter of a deployment, precomputed.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Drafter {
    /// Speculation off.
    None,
    /// The model's MTP layers: each pass runs `frac = mtp_layers / num_layers` of the target's
    /// per-layer work plus the shared lm_head.
    Mtp { frac: f64 },
    /// An EAGLE head: `flops_per_token` and `weight_bytes` per GPU; `vocab_rows_s` seconds per
    /// logits row of its lm_head, `lm_head_bytes` read per pass.
    Eagle {
        s_per_token: f64,
        weight_s: f64,
        row_s: f64,
        lm_head_s: f64,
    },
    /// A separate draft model with its own step-time model.
    Model(Box<StepCostModel>),
    /// n-gram prompt lookup on the CPU.
    Ngram,
}

/// Speculative terms of a deployment.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SpecTerms {
    pub(super) drafter: Drafter,
    /// Seconds per verified position for rejection sampling (vocab x fp32 probabilities, target
    /// and draft, read once at achieved HBM bandwidth).
    pub(super) reject_s_per_row: f64,
    /// Seconds of the target lm_head weights read once (for one pass of the MTP drafter).
    pub(super) lm_head_weight_s: f64,
}

impl SpecTerms {
    pub(super) fn none() -> SpecTerms {
        SpecTerms {
            drafter: Drafter::None,
            reject_s_per_row: 0.0,
            lm_head_weight_s: 0.0,
        }
    }

    pub(super) fn new(dep: &Deployment, m: &StepCostModel) -> Result<SpecTerms, PerfError> {
        let Some(sp) = &dep.engine.speculative else {
            return Ok(SpecTerms::none());
        };
        let model = &dep.model;
        let tp = dep.par.tp as f64;
        let h = model.hidden_size as f64;
        let vocab = model.vocab_size as f64;
        let bw = dep.gpu.hbm_bandwidth_bytes_s;
        let w_s_per_byte = 1.0 / (bw * m.eff.hbm_weights);
        let lm_head_bytes = vocab * h * ACT_BYTES / tp;
        let lm_head_weight_s = lm_head_bytes * w_s_per_byte;
        let bf16_s_per_flop = 1.0 / (dep.gpu.bf16_flops * m.eff.gemm_bf16);
        let drafter = match sp.method {
            SpecMethod::Mtp => Drafter::Mtp {
                frac: sp.mtp_layers as f64 / model.num_layers.max(1) as f64,
            },
            SpecMethod::Eagle | SpecMethod::Eagle3 => {
                let (h2, rows_vocab) = if sp.method == SpecMethod::Eagle3 {
                    (EAGLE3_HEAD_H2, EAGLE3_DRAFT_VOCAB.min(vocab))
                } else {
                    (EAGLE_HEAD_H2, vocab)
                };
                let params = h2 * h * h / tp;
                Drafter::Eagle {
                    s_per_token: 2.0 * params * bf16_s_per_flop,
                    weight_s: params * ACT_BYTES * w_s_per_byte,
                    row_s: 2.0 * h * rows_vocab / tp * bf16_s_per_flop,
                    lm_head_s: rows_vocab * h * ACT_BYTES / tp * w_s_per_byte,
                }
            }
            SpecMethod::DraftModel => {
                let id = sp.draft_model.as_deref().unwrap_or_default();
                let draft = crate::model::catalog::load(id)?;
                let raw = RawEngineSettings {
                    max_num_seqs: Some(dep.engine.max_num_seqs as i64),
                    max_num_batched_tokens: Some(dep.engine.max_num_batched_tokens as i64),
                    cudagraph_mode: Some(dep.engine.cudagraph_mode),
                    cudagraph_capture_sizes: (!dep.engine.cudagraph_capture_sizes.is_empty()).then(
                        || {
                            dep.engine
                                .cudagraph_capture_sizes
                                .iter()
                                .map(|&s| s as i64)
                                .collect()
                        },
                    ),
                    enforce_eager: Some(dep.engine.enforce_eager),
                    allow_long_max_model_len: Some(true),
                    ..Default::default()
                };
                let par = crate::parallel::Parallelism {
                    tp: dep.par.tp,
                    dp: 1,
                    ep: 1,
                };
                let d = Deployment::new(
                    draft,
                    dep.gpu.clone(),
                    par,
                    None,
                    Default::default(),
                    dep.kv_cache_dtype,
                    &raw,
                )
                .map_err(|e| PerfError::Drafter {
                    model: id.to_string(),
                    reason: e.to_string(),
                })?;
                Drafter::Model(Box::new(StepCostModel::new(&d, &m.eff)?))
            }
            SpecMethod::Ngram => Drafter::Ngram,
        };
        let reject_rows_bytes = if sp.method == SpecMethod::Ngram {
            // n-gram drafts have no draft probabilities: the target's only.
            vocab * PROB_BYTES
        } else {
            2.0 * vocab * PROB_BYTES
        };
        Ok(SpecTerms {
            drafter,
            reject_s_per_row: reject_rows_bytes * w_s_per_byte,
            lm_head_weight_s,
        })
    }
}

impl StepCostModel {
    /// Step time with speculative decoding (docs/step-time.md, "Speculative decoding"):
    /// `target(prefill chunks, decodes with 1 + drafts queries) + drafter + rejection sampling`.
    pub fn spec_step_time<I>(
        &self,
        prefill: I,
        decode_seqs: u64,
        decode_ctx_sum: u64,
        spec: &SpecStep,
    ) -> Ticks
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        super::secs_to_ticks(self.spec_step_seconds(prefill, decode_seqs, decode_ctx_sum, spec))
    }

    /// [`StepCostModel::spec_step_time`] in seconds.
    pub fn spec_step_seconds<I>(
        &self,
        prefill: I,
        decode_seqs: u64,
        decode_ctx_sum: u64,
        spec: &SpecStep,
    ) -> f64
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        let mut prefill_tokens = 0u64;
        let mut prefill_reqs = 0u64;
        let mut pf_flops = 0.0;
        let (mut pf_bytes, mut pf_state) = (0.0, 0.0);
        let (mut gdn_max, mut gdn_sum) = (0u64, 0u64);
        for ch in prefill.clone() {
            prefill_tokens += ch.new;
            if ch.new == 0 {
                continue;
            }
            prefill_reqs += 1;
            let c = super::gdn::chunks(ch.new);
            gdn_max = gdn_max.max(c);
            gdn_sum += c;
            pf_flops += self.attn.chunk_flops(ch.past, ch.new);
            let past = ch.past as f64;
            pf_bytes += self.attn.kv_bytes(past) + ch.new as f64 * self.kv_write_bytes_per_token;
            pf_state += self.attn.state_bytes(past);
        }
        let pf_kv_s = self.kv_seconds(pf_bytes, pf_state);
        let verify = decode_seqs + spec.draft_tokens;
        let tokens = prefill_tokens + verify;
        if tokens == 0 {
            return 0.0;
        }
        // Every verified position needs target logits (the rejection sampler compares them
        // with the drafts): lm_head rows = prefill requests + decodes x (1 + drafts).
        let rows = prefill_reqs as f64 + verify as f64;
        let sh = self.shape_terms(tokens, rows, prefill_tokens > 0);

        // Decode attention: each decode runs q = 1 + drafts queries over its context (mean
        // field at the mean context and mean q), reading its KV once and writing q entries.
        let (mut dc_flops, mut dc_kv_s) = (0.0, 0.0);
        let mean_ctx = if decode_seqs > 0 {
            decode_ctx_sum as f64 / decode_seqs as f64
        } else {
            0.0
        };
        if decode_seqs > 0 {
            let n = decode_seqs as f64;
            let q = verify as f64 / n;
            let q_lo = libm::floor(q) as u64;
            let frac = q - q_lo as f64;
            let past = libm::round(mean_ctx) as u64;
            let f_lo = self.attn.chunk_flops(past, q_lo.max(1));
            let f_hi = self.attn.chunk_flops(past, q_lo.max(1) + 1);
            dc_flops = self.div_tp(n * (f_lo + frac * (f_hi - f_lo)));
            dc_kv_s = self.kv_seconds(
                n * (self.attn.kv_bytes(mean_ctx) + q * self.kv_write_bytes_per_token),
                n * self.attn.state_bytes(mean_ctx),
            );
        }
        pf_flops = self.div_tp(pf_flops);
        // The compute side's seconds beyond the attention FLOPs, as in `step_seconds`: FlashMLA's
        // sparse kernels per query token (every verified position of a decode is a query) and the
        // Gated DeltaNet kernels' chunk chain.
        let pf_extra_s = self.prefill_extra_s(
            prefill_tokens,
            self.gdn_excess_s(gdn_max, gdn_sum, prefill_tokens),
        );
        let dc_extra_s = verify as f64 * self.sparse_s_per_query_decode;
        let attn = |c: f64, mm: f64| c.max(mm);
        let pf_attn = attn(
            pf_flops * self.attn_compute_s_per_flop_prefill + pf_extra_s,
            pf_kv_s,
        );
        let dc_attn = attn(
            dc_flops * self.attn_compute_s_per_flop_decode + dc_extra_s,
            dc_kv_s,
        );
        let gpu = sh.gemm_compute
            + sh.weight_reads
            + sh.activations
            + sh.tp_allreduce
            + sh.ep_alltoall
            + pf_attn
            + dc_attn
            + sh.moe_floor
            + sh.mla_floor;
        let target = gpu + sh.overhead_base + (sh.floor - gpu).max(0.0);

        // Rejection sampling over every verified position of the drafting decodes.
        let reject = (spec.decodes_with_drafts as f64 + spec.draft_tokens as f64)
            * self.spec.reject_s_per_row;

        // Drafter: pass 1 over the step's tokens (the proposer consumes the target's hidden
        // states of every scheduled token), passes 2..k over one row per request.
        let k = spec.num_speculative_tokens as f64;
        let reqs = (prefill_reqs + decode_seqs) as f64;
        let layer_floor = self.eff.layer_gpu_floor_s;
        let drafter = match &self.spec.drafter {
            super::spec::Drafter::None | super::spec::Drafter::Ngram => 0.0,
            super::spec::Drafter::Mtp { frac } => {
                let pass = |t: u64, rows: f64, with_attn: bool| -> f64 {
                    if t == 0 {
                        return 0.0;
                    }
                    let s = self.shape_terms(t, 0.0, false);
                    let body = frac
                        * (s.gemm_compute
                            + s.weight_reads
                            + s.activations
                            + s.tp_allreduce
                            + s.ep_alltoall
                            + s.moe_floor
                            + s.mla_floor
                            + if with_attn {
                                pf_attn + dc_attn
                            } else {
                                dc_attn
                            });
                    let head = (rows * self.lm_head_s_per_row).max(self.spec.lm_head_weight_s);
                    (body + head).max(layer_floor)
                };
                let first = pass(tokens, reqs, true);
                let rest = if k > 1.0 {
                    (k - 1.0) * pass(decode_seqs.max(prefill_reqs), reqs, false)
                } else {
                    0.0
                };
                first + rest
            }
            super::spec::Drafter::Eagle {
                s_per_token,
                weight_s,
                row_s,
                lm_head_s,
            } => {
                // One layer's attention: the target's per-layer share.
                let one_layer_attn = (pf_attn + dc_attn) / self.num_layers.max(1.0);
                let pass = |t: f64, rows: f64, a: f64| -> f64 {
                    (t * s_per_token).max(*weight_s) + (rows * row_s).max(*lm_head_s) + a
                };
                let first = pass(tokens as f64, reqs, one_layer_attn);
                let dec_attn_layer = dc_attn / self.num_layers.max(1.0);
                let rest = (k - 1.0).max(0.0) * pass(reqs, reqs, dec_attn_layer);
                (first + rest).max(layer_floor)
            }
            super::spec::Drafter::Model(d) => {
                // The draft model's own forward passes: pass 1 over the prefill chunks and one
                // token per decode, then k - 1 decode-only passes.
                let first = d.step_seconds(prefill, decode_seqs, decode_ctx_sum);
                let rest = if k > 1.0 && decode_seqs > 0 {
                    (k - 1.0) * d.step_seconds(std::iter::empty(), decode_seqs, decode_ctx_sum)
                } else {
                    0.0
                };
                first + rest
            }
        };
        target + reject + drafter
    }
}
