//! FLOP primitives of the step-time (roofline) model. Formulas: docs/models.md.

use super::*;

/// Sum over the query positions `c = past+1 ..= past+new` of `min(c, cap)`: the number of
/// (query, key) pairs of causal attention whose context is capped at `cap` tokens.
pub(super) fn sum_capped(past: u64, new: u64, cap: f64) -> f64 {
    let (a, b) = (past as f64 + 1.0, (past + new) as f64);
    if new == 0 {
        return 0.0;
    }
    if b <= cap {
        return (a + b) * new as f64 / 2.0;
    }
    if a >= cap {
        return cap * new as f64;
    }
    // a < cap < b: positions a..=floor(cap) uncapped, the rest capped.
    let k = libm::floor(cap);
    let uncapped = (a + k) * (k - a + 1.0) / 2.0;
    uncapped + cap * (b - k)
}

/// Chunk length of the chunked Gated DeltaNet kernel (fla `chunk_gated_delta_rule`, 64).
pub const GDN_CHUNK: f64 = 64.0;

impl ModelConfig {
    /// FLOPs of one token through one Gated DeltaNet layer's recurrence (all heads, whole model
    /// width): per value head `6 dk dv` (the state read k^T S, the rank-1 delta update and the
    /// output q S) plus the chunked form's intra-chunk products `2 C (dk + dv)` (C = [`GDN_CHUNK`]).
    /// 0 for models without linear attention.
    pub fn linear_attention_flops_per_token(&self) -> f64 {
        match &self.linear_attention {
            Some(la) => {
                let (kd, vd) = (la.key_head_dim as f64, la.value_head_dim as f64);
                la.num_value_heads as f64 * (6.0 * kd * vd + 2.0 * GDN_CHUNK * (kd + vd))
            }
            None => 0.0,
        }
    }

    /// Matmul FLOPs (2 x MACs) per token, whole model, routed experts at top-k.
    pub fn linear_flops_per_token(&self) -> LinearFlops {
        let mut f = LinearFlops::default();
        for t in self.tensors() {
            if !t.linear && t.group != TensorGroup::LmHead && t.group != TensorGroup::Router {
                continue;
            }
            let flops = 2.0 * (t.rows * t.cols) as f64 * t.active_count as f64;
            match t.group {
                TensorGroup::Attention => f.attention += flops,
                TensorGroup::AttentionReplicated => f.attention_replicated += flops,
                TensorGroup::DenseMlp => f.dense_mlp += flops,
                TensorGroup::RoutedExperts => f.routed_experts += flops,
                TensorGroup::SharedExperts => f.shared_experts += flops,
                TensorGroup::LmHead => f.lm_head += flops,
                TensorGroup::Router => {
                    // Router weights are stored as vectors of hidden*E per layer; bias vectors
                    // (length E) are not matmuls.
                    if t.cols.is_multiple_of(self.hidden_size) {
                        f.router += flops;
                    }
                }
                TensorGroup::Other => f.other += flops,
                TensorGroup::Embedding | TensorGroup::Norms => {}
            }
        }
        if self.tie_word_embeddings {
            f.lm_head = 2.0 * (self.hidden_size * self.vocab_size) as f64;
        }
        if let AttentionSpec::DeepseekV4 { hc_mult, .. } = &self.attention {
            // Hyper-connection mixers: [hc*hidden -> (2+hc)*hc] twice per layer, plus hc_head.
            let hc = *hc_mult as f64;
            let h = self.hidden_size as f64;
            f.other += 2.0 * (hc * h) * ((2.0 + hc) * hc) * 2.0 * self.num_layers as f64
                + 2.0 * hc * h * hc;
        }
        f
    }

    /// Attention score + value FLOPs for `new` query tokens appended after `past` cached tokens,
    /// summed over layers (query at position c attends to min(c, window) keys). MLA: prefill form
    /// (`new > 1`, per-head q.k over nope+rope and p.v over v_head_dim, plus re-expanding the `past`
    /// cached latents through kv_b_proj as vLLM's chunked-context MLA prefill does); decode
    /// (`new == 1`) absorbed form (q.k over kv_lora_rank+rope, p.v over kv_lora_rank).
    /// DeepSeek-V4: each query attends to its sliding window plus the compressed entries
    /// (ctx/ratio; top-`index_topk` of them on ratio-4 layers) with head_dim-wide K=V, and
    /// ratio-4 layers add lightning-indexer scoring over all ctx/4 entries.
    pub fn attention_core_flops(&self, past: u64, new: u64) -> f64 {
        if new == 0 {
            return 0.0;
        }
        match &self.attention {
            AttentionSpec::Gqa {
                num_heads,
                head_dim,
                v_head_dim,
                ..
            } => {
                let per_pair = 2.0 * *num_heads as f64 * (*head_dim as f64 + *v_head_dim as f64);
                let lin = self.linear_attention_flops_per_token();
                self.layers
                    .iter()
                    .map(|l| match l.attn {
                        LayerAttn::Linear => lin * new as f64,
                        LayerAttn::SlidingWindow { window } => {
                            per_pair * sum_capped(past, new, window as f64)
                        }
                        _ => per_pair * sum_capped(past, new, f64::INFINITY),
                    })
                    .sum()
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
                if let Some(ix) = &self.sparse_indexer {
                    // DSA (vLLM FlashMLA-sparse, prefill and decode): the absorbed form over the
                    // top-k selected latents, plus the indexer scoring every cached token.
                    let sel = sum_capped(past, new, ix.topk as f64);
                    let all = sum_capped(past, new, f64::INFINITY);
                    return 2.0
                        * nh
                        * (2.0 * *kv_lora_rank as f64 + *qk_rope_head_dim as f64)
                        * sel
                        * self.num_layers as f64
                        + 2.0 * (ix.n_heads * ix.head_dim) as f64 * all * ix.indexer_layers as f64;
                }
                let pairs = sum_capped(past, new, f64::INFINITY);
                let per_layer = if new == 1 {
                    2.0 * nh * (2.0 * *kv_lora_rank as f64 + *qk_rope_head_dim as f64) * pairs
                } else {
                    let qk = (*qk_nope_head_dim + *qk_rope_head_dim) as f64;
                    let expand = 2.0
                        * *kv_lora_rank as f64
                        * nh
                        * (*qk_nope_head_dim + *v_head_dim) as f64
                        * past as f64;
                    2.0 * nh * (qk + *v_head_dim as f64) * pairs + expand
                };
                per_layer * self.num_layers as f64
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
                let window_pairs = sum_capped(past, new, *sliding_window as f64);
                let mut total = 0.0;
                for l in &self.layers {
                    total += per_pair * window_pairs;
                    if let LayerAttn::Compressed { ratio } = l.attn {
                        let r = ratio as f64;
                        let all = sum_capped(past, new, f64::INFINITY) / r;
                        if ratio == 4 {
                            let selected = sum_capped(past, new, *index_topk as f64 * r) / r;
                            total += per_pair * selected;
                            total += 2.0 * (*index_n_heads * *index_head_dim) as f64 * all;
                        } else {
                            total += per_pair * all;
                        }
                    }
                }
                total
            }
        }
    }
}
