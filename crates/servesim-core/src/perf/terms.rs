//! Attention FLOPs and KV-read bytes as sums of capped linear terms, precomputed once per model so
//! that a step costs O(#layer kinds) instead of O(#layers). The formulas are those of
//! `ModelConfig::attention_core_flops` and `ModelConfig::kv_read_bytes_per_seq` (docs/models.md,
//! section 6), regrouped by layer kind; `tests/perf_props.rs` checks equality with the primitives.

use crate::model::{
    AttentionSpec, KvCacheSpec, LayerAttn, ModelConfig, DSV4_ENTRY_BYTES, DSV4_INDEXER_ENTRY_BYTES,
};

/// `coef x g(cap)`; `cap = f64::INFINITY` for uncapped terms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Term {
    pub coef: f64,
    pub cap: f64,
}

/// Sum over the query positions `c = past+1 ..= past+new` of `min(c, cap)` (mirror of
/// `model::flops::sum_capped`, in f64 so the decode mean-field can use a fractional context).
pub(super) fn sum_capped(past: f64, new: f64, cap: f64) -> f64 {
    if new <= 0.0 {
        return 0.0;
    }
    let (a, b) = (past + 1.0, past + new);
    if b <= cap {
        return (a + b) * new / 2.0;
    }
    if a >= cap {
        return cap * new;
    }
    let k = libm::floor(cap);
    let uncapped = (a + k) * (k - a + 1.0) / 2.0;
    uncapped + cap * (b - k)
}

fn push(terms: &mut Vec<Term>, coef: f64, cap: f64) {
    if coef == 0.0 {
        return;
    }
    match terms.iter_mut().find(|t| t.cap == cap) {
        Some(t) => t.coef += coef,
        None => terms.push(Term { coef, cap }),
    }
}

/// How the GPU runs DeepSeek sparse attention's attention over the selected latents
/// (docs/step-time.md §3, "DSA on FlashMLA's sparse kernels").
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DsaKernel {
    /// `min(context, index_topk)` latents per query, the model's heads, at the attention rates:
    /// the attention the architecture defines.
    Exact,
    /// vLLM's FlashMLA sparse kernels (Hopper and data-centre Blackwell): every query runs all
    /// `index_topk` index slots (unused ones are masked, not skipped), the query heads of a TP
    /// rank are padded up to a multiple of `head_multiple`, and the kernels run at their published
    /// throughput, a fraction of the GPU's bf16 peak, for a prefill and for a decode token.
    FlashMlaSparse {
        head_multiple: u32,
        prefill_peak_fraction: f64,
        decode_peak_fraction: f64,
    },
}

/// Whole-model (all layers, all heads) attention FLOPs and KV-read bytes of one sequence.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct AttnTerms {
    /// Chunks of more than one token: `sum coef x sum_capped(past, new, cap)`.
    pub prefill: Vec<Term>,
    /// Extra FLOPs per cached token of a multi-token chunk (MLA: re-expanding the cached latents).
    pub prefill_per_past: f64,
    /// One-token queries: `sum coef x min(past + 1, cap)`.
    pub decode: Vec<Term>,
    /// FLOPs of every query token (prefill or decode) on FlashMLA's sparse kernels
    /// ([`DsaKernel::FlashMlaSparse`]), kept apart from `prefill` / `decode` because they run at
    /// the kernels' own rate; 0 otherwise.
    pub sparse_per_query: f64,
    /// KV bytes read at context `ctx`: `sum coef x min(ctx, cap)`.
    pub kv: Vec<Term>,
    /// The part of `kv` that is the linear-attention layers' recurrent state, read and written
    /// whole every step once a sequence has context (`2 x per_request_fixed_bytes`, the term of
    /// cap 1): priced at its own bandwidth fraction (`hbm_state`), apart from the paged reads.
    pub state: f64,
}

impl AttnTerms {
    pub fn new(m: &ModelConfig, spec: &KvCacheSpec) -> AttnTerms {
        AttnTerms::scaled_for_tp(m, spec, 1.0, DsaKernel::Exact)
    }

    /// The terms a step-cost model divides by the TP degree `tp` to get one GPU's FLOPs: every
    /// term as [`AttnTerms::new`] except those every TP rank computes whole, multiplied by `tp`
    /// so that the division leaves them whole. That is the lightning indexer of DeepSeek sparse
    /// attention and of DeepSeek-V4's ratio-4 layers: vLLM's `Indexer`
    /// (vllm/model_executor/models/deepseek_v2.py) and `DeepseekV4Indexer`
    /// (vllm/model_executor/layers/deepseek_v4_attention.py), both "no tensor parallel, just
    /// replicated", hold `wq_b` as a `ReplicatedLinear` over all `index_n_heads` and score every
    /// cached (compressed) entry for all of them on each rank (docs/step-time.md §3).
    ///
    /// `dsa` is how the GPU runs sparse attention over the selected latents ([`DsaKernel`]):
    /// with FlashMLA's sparse kernels a query costs `index_topk` slots at the padded heads of
    /// its rank, whatever its context (a per-token term).
    pub fn scaled_for_tp(
        m: &ModelConfig,
        spec: &KvCacheSpec,
        tp: f64,
        dsa: DsaKernel,
    ) -> AttnTerms {
        let mut prefill = Vec::new();
        let mut decode = Vec::new();
        let mut kv = Vec::new();
        let mut state = 0.0;
        let mut prefill_per_past = 0.0;
        let inf = f64::INFINITY;
        match &m.attention {
            AttentionSpec::Gqa {
                num_heads,
                head_dim,
                v_head_dim,
                ..
            } => {
                let per_pair = 2.0 * *num_heads as f64 * (*head_dim as f64 + *v_head_dim as f64);
                let lin = m.linear_attention_flops_per_token();
                for l in &m.layers {
                    // A cap of 1 makes a per-token (context-independent) term.
                    let (coef, cap) = match l.attn {
                        LayerAttn::Linear => (lin, 1.0),
                        LayerAttn::SlidingWindow { window } => (per_pair, window as f64),
                        _ => (per_pair, inf),
                    };
                    push(&mut prefill, coef, cap);
                    push(&mut decode, coef, cap);
                }
            }
            AttentionSpec::Mla {
                num_heads,
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
                ..
            } => {
                let nh = *num_heads as f64;
                let l = m.num_layers as f64;
                let qk = (*qk_nope_head_dim + *qk_rope_head_dim) as f64;
                if let Some(ix) = &m.sparse_indexer {
                    let topk = ix.topk as f64;
                    let per_head =
                        2.0 * (2.0 * *kv_lora_rank as f64 + *qk_rope_head_dim as f64) * l;
                    let idx =
                        2.0 * (ix.n_heads * ix.head_dim) as f64 * ix.indexer_layers as f64 * tp;
                    // Selected-latent attention: capped at `topk` keys with the model's heads, or
                    // (FlashMLA's sparse kernels) all `topk` slots at the rank's padded heads,
                    // scaled by `tp` like the other terms so that `/ tp` leaves one rank's.
                    let mut sparse_per_query = 0.0;
                    match dsa {
                        DsaKernel::Exact => {
                            for t in [&mut prefill, &mut decode] {
                                push(t, per_head * nh, topk);
                            }
                        }
                        DsaKernel::FlashMlaSparse { head_multiple, .. } => {
                            let per_rank = libm::ceil(nh / tp).max(1.0);
                            let mult = head_multiple.max(1) as f64;
                            let padded = libm::ceil(per_rank / mult) * mult;
                            sparse_per_query = per_head * padded * tp * topk;
                        }
                    }
                    for t in [&mut prefill, &mut decode] {
                        push(t, idx, inf);
                    }
                    let (entry, indexer) = m.dsa_kv_bytes_per_token(spec);
                    push(&mut kv, entry, topk);
                    push(&mut kv, indexer, inf);
                    return AttnTerms {
                        prefill,
                        prefill_per_past,
                        decode,
                        sparse_per_query,
                        kv,
                        state: 0.0,
                    };
                }
                push(&mut prefill, 2.0 * nh * (qk + *v_head_dim as f64) * l, inf);
                prefill_per_past =
                    2.0 * *kv_lora_rank as f64 * nh * (*qk_nope_head_dim + *v_head_dim) as f64 * l;
                push(
                    &mut decode,
                    2.0 * nh * (2.0 * *kv_lora_rank as f64 + *qk_rope_head_dim as f64) * l,
                    inf,
                );
            }
            AttentionSpec::DeepseekV4 {
                num_heads,
                head_dim,
                sliding_window,
                index_n_heads,
                index_head_dim,
                index_topk,
                ..
            } => {
                let per_pair = 2.0 * *num_heads as f64 * 2.0 * *head_dim as f64;
                let w = *sliding_window as f64;
                let e = DSV4_ENTRY_BYTES as f64;
                push(&mut prefill, per_pair * m.num_layers as f64, w);
                push(&mut kv, e * m.num_layers as f64, w);
                for l in &m.layers {
                    if let LayerAttn::Compressed { ratio } = l.attn {
                        let r = ratio as f64;
                        if ratio == 4 {
                            let topk = *index_topk as f64;
                            push(&mut prefill, per_pair / r, topk * r);
                            // vLLM's `DeepseekV4Indexer` is replicated too
                            // (vllm/model_executor/layers/deepseek_v4_attention.py).
                            push(
                                &mut prefill,
                                2.0 * (*index_n_heads * *index_head_dim) as f64 / r * tp,
                                inf,
                            );
                            push(&mut kv, DSV4_INDEXER_ENTRY_BYTES as f64 / r, inf);
                            push(&mut kv, e / r, topk * r);
                        } else {
                            push(&mut prefill, per_pair / r, inf);
                            push(&mut kv, e / r, inf);
                        }
                    }
                }
                // attention_core_flops has no separate one-token form for DeepSeek-V4.
                decode = prefill.clone();
            }
        }
        if !matches!(m.attention, AttentionSpec::DeepseekV4 { .. }) {
            let bs = spec.block_size as f64;
            for g in &spec.groups {
                let cap = match g.kind {
                    LayerAttn::SlidingWindow { window } => window as f64,
                    _ => inf,
                };
                push(
                    &mut kv,
                    g.page_bytes_per_layer as f64 / bs * g.num_layers as f64,
                    cap,
                );
            }
            // Gated DeltaNet state: read and written whole every step (per sequence).
            state = 2.0 * spec.per_request_fixed_bytes as f64;
            push(&mut kv, state, 1.0);
        }
        AttnTerms {
            prefill,
            prefill_per_past,
            decode,
            sparse_per_query: 0.0,
            kv,
            state,
        }
    }

    /// Whole-model attention FLOPs of a chunk of `new` tokens after `past` cached ones
    /// (equals `ModelConfig::attention_core_flops(past, new)`).
    #[inline]
    pub fn chunk_flops(&self, past: u64, new: u64) -> f64 {
        if new == 0 {
            0.0
        } else if new == 1 {
            self.decode_flops(past as f64)
        } else {
            let (p, n) = (past as f64, new as f64);
            let mut f = self.prefill_per_past * p;
            for t in &self.prefill {
                f += t.coef * sum_capped(p, n, t.cap);
            }
            f
        }
    }

    /// Whole-model FLOPs of one decode query at (possibly fractional) context `ctx`.
    #[inline]
    pub fn decode_flops(&self, ctx: f64) -> f64 {
        self.decode
            .iter()
            .map(|t| t.coef * (ctx + 1.0).min(t.cap))
            .sum()
    }

    /// KV bytes one sequence reads at context `ctx` on one GPU (equals
    /// `ModelConfig::kv_read_bytes_per_seq(spec, ctx)`).
    #[inline]
    pub fn kv_bytes(&self, ctx: f64) -> f64 {
        self.kv.iter().map(|t| t.coef * ctx.min(t.cap)).sum()
    }

    /// The recurrent-state part of [`AttnTerms::kv_bytes`] at context `ctx`.
    #[inline]
    pub fn state_bytes(&self, ctx: f64) -> f64 {
        self.state * ctx.min(1.0)
    }
}
