//! KV-cache sizing per GPU, following vLLM's `KVCacheSpec`s (`vllm/v1/kv_cache_interface.py`)
//! and grouping (`vllm/v1/core/kv_cache_utils.py`). Formulas and sources: docs/models.md.

use super::*;
use crate::dtype::KvCacheDtype;

/// Bytes per token of MLA's `fp8_ds_mla` layout (DeepSeek-V3.2 / FlashMLA-sparse): 512 fp8 NoPE +
/// 4 fp32 scales + 64 bf16 RoPE.
pub const FP8_DS_MLA_BYTES: u64 = 656;
/// Bytes per stored entry of DeepSeek-V4's `fp8_ds_mla` layout: 448 fp8 NoPE + 64 bf16 RoPE + 8 B scales.
pub const DSV4_ENTRY_BYTES: u64 = 584;
/// vLLM pads DeepSeek-V4 / fp8_ds_mla pages to a multiple of this (`_apply_alignment_padding`).
pub const DSV4_PAGE_ALIGNMENT: u64 = 576;
/// Bytes per DeepSeek-V4 lightning-indexer key (128 fp8 + 4 B fp32 scale, the V3.2 layout).
/// ASSUMPTION: not verified in the V4 code (V4.1 docs mention FP4 indexer keys).
pub const DSV4_INDEXER_ENTRY_BYTES: u64 = 132;

/// Bytes per token per layer of the DSA indexer key cache (DeepSeek-V3.2 / GLM-5): 128 fp8
/// elements + one fp32 scale per 128 (vLLM `DeepseekV32IndexerCache`: head_dim + head_dim/128 x 4).
pub const DSA_INDEXER_ENTRY_BYTES: u64 = 132;

/// Bytes of one KV element at `kv` for a model whose activations take `model_bytes`.
fn kv_elem_bytes(kv: KvCacheDtype, model_bytes: u64) -> u64 {
    match kv {
        KvCacheDtype::Auto => model_bytes,
        KvCacheDtype::Bfloat16 => 2,
        KvCacheDtype::Fp8 | KvCacheDtype::Fp8E4m3 | KvCacheDtype::Fp8E5m2 => 1,
        KvCacheDtype::Fp8DsMla => 1,
    }
}

/// Recurrent state of one Gated DeltaNet layer of one request on one GPU at tensor-parallel size
/// `tp` (vLLM `MambaStateShapeCalculator.gated_delta_net_state_shape`): the SSM state
/// `value_heads/tp x key_dim x value_dim` at the state dtype, plus the causal-conv state
/// `(conv_kernel - 1) x (2 key_heads key_dim + value_heads value_dim)/tp` at the model dtype.
pub fn linear_state_bytes_per_layer(la: &LinearAttention, tp: u32, model_elem_bytes: u64) -> u64 {
    let tp = tp.max(1) as u64;
    let (kh, vh, kd, vd) = (
        la.num_key_heads as u64,
        la.num_value_heads as u64,
        la.key_head_dim as u64,
        la.value_head_dim as u64,
    );
    let ssm = vh.div_ceil(tp) * kd * vd * la.state_elem_bytes as u64;
    let conv = (la.conv_kernel as u64).saturating_sub(1)
        * (2 * kh * kd + vh * vd).div_ceil(tp)
        * model_elem_bytes;
    ssm + conv
}

/// How block ids map to memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum KvPacking {
    /// One spec for all layers: a block id costs `page x num_layers`.
    Uniform,
    /// vLLM hybrid allocator (`_get_kv_cache_groups_uniform_page_size`): groups of `group_size`
    /// layers share one pool; a block id costs `page x group_size`; every group allocates its
    /// own block ids.
    SharedPool { group_size: u32 },
    /// DeepSeek-V4: one block id covers `block_size` tokens of every compressed layer (layer
    /// tuples packed into one page); a block id costs the sum over groups of `page x layers`.
    LayerTuple,
}

/// KV cache of one GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KvCacheSpec {
    pub block_size: u32,
    /// vLLM KV cache groups (layers with the same spec).
    pub groups: Vec<KvGroup>,
    /// Per-request state not proportional to context and not expressed as groups
    /// (DeepSeek-V4's 128-token sliding-window caches).
    pub per_request_fixed_bytes: u64,
    /// The KV dtype actually used (after resolving `auto` and DSV4's forced `fp8_ds_mla`).
    pub dtype: KvCacheDtype,
    /// How block ids map to memory.
    pub packing: KvPacking,
    /// Notes on assumptions (e.g. forced dtype).
    pub notes: Vec<String>,
}

/// Layers sharing one KV spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvGroup {
    pub kind: LayerAttn,
    pub num_layers: u32,
    /// Bytes of one page: `block_size` tokens of one layer on this GPU (incl. alignment padding).
    pub page_bytes_per_layer: u64,
}

fn round_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

impl KvCacheSpec {
    /// Memory one block id costs on this GPU (vLLM: uniform model = page x num_layers; hybrid =
    /// page x group_size, groups share one pool; DSV4 = the packed layer tuple).
    pub fn block_bytes(&self) -> u64 {
        match self.packing {
            KvPacking::Uniform | KvPacking::LayerTuple => self
                .groups
                .iter()
                .map(|g| g.page_bytes_per_layer * g.num_layers as u64)
                .sum(),
            KvPacking::SharedPool { group_size } => {
                self.groups
                    .iter()
                    .map(|g| g.page_bytes_per_layer)
                    .max()
                    .unwrap_or(0)
                    * group_size as u64
            }
        }
    }

    fn group_blocks(&self, kind: LayerAttn, tokens: u64, mnbt: u64) -> u64 {
        let bs = self.block_size as u64;
        match kind {
            LayerAttn::SlidingWindow { window } => {
                // vLLM SlidingWindowSpec.max_memory_usage_bytes with max_model_len = tokens.
                let t = (window as u64 - 1 + mnbt).min(tokens);
                t.div_ceil(bs) + 1
            }
            LayerAttn::Full | LayerAttn::Compressed { .. } => tokens.div_ceil(bs),
            // Linear-attention layers hold no blocks (their state is per-request fixed bytes).
            LayerAttn::Linear => 0,
        }
    }

    /// Blocks one request with `tokens` of context holds (sum over groups; sliding groups capped
    /// at `cdiv(min(W - 1 + max_num_batched_tokens, tokens), block_size) + 1` as vLLM's
    /// `max_memory_usage_bytes`). DeepSeek-V4's layer-tuple packing uses one block id per
    /// `block_size` tokens for all compressed layers; its sliding-window state is in
    /// `per_request_fixed_bytes`, not in blocks.
    pub fn blocks_for_tokens(&self, tokens: u64, max_num_batched_tokens: u64) -> u64 {
        if tokens == 0 {
            return 0;
        }
        match self.packing {
            KvPacking::LayerTuple => tokens.div_ceil(self.block_size as u64),
            KvPacking::Uniform => self
                .groups
                .first()
                .map(|g| self.group_blocks(g.kind, tokens, max_num_batched_tokens))
                .unwrap_or(0),
            KvPacking::SharedPool { .. } => self
                .groups
                .iter()
                .map(|g| self.group_blocks(g.kind, tokens, max_num_batched_tokens))
                .sum(),
        }
    }

    /// Marginal KV bytes per context token on this GPU (sliding-window layers add none once
    /// their window is full).
    pub fn bytes_per_token(&self) -> f64 {
        let bs = self.block_size as f64;
        match self.packing {
            KvPacking::SharedPool { group_size } => self
                .groups
                .iter()
                .filter(|g| !matches!(g.kind, LayerAttn::SlidingWindow { .. }))
                .map(|g| (g.page_bytes_per_layer * group_size as u64) as f64 / bs)
                .sum(),
            _ => self
                .groups
                .iter()
                .filter(|g| !matches!(g.kind, LayerAttn::SlidingWindow { .. }))
                .map(|g| (g.page_bytes_per_layer * g.num_layers as u64) as f64 / bs)
                .sum(),
        }
    }

    /// True when every layer has the same spec (one group, no fixed per-request state).
    pub fn is_uniform(&self) -> bool {
        self.packing == KvPacking::Uniform && self.per_request_fixed_bytes == 0
    }

    /// Total layers holding KV in this spec.
    pub fn num_layers(&self) -> u32 {
        self.groups.iter().map(|g| g.num_layers).sum()
    }
}

/// vLLM's group size for hybrid models (`_get_kv_cache_groups_uniform_page_size`): the smallest
/// layer count per kind, or the largest when all counts are within 1.5x of the smallest.
pub(super) fn hybrid_group_size(counts: &[u32]) -> u32 {
    let min = counts.iter().copied().min().unwrap_or(1).max(1);
    let max = counts.iter().copied().max().unwrap_or(1).max(1);
    if (max as f64) < (min as f64) * 1.5 {
        max
    } else {
        min
    }
}

impl ModelConfig {
    fn unsupported(&self, what: String, fix: &str) -> ModelError {
        ModelError::Unsupported {
            model: self.name.clone(),
            what,
            fix: fix.to_string(),
        }
    }

    /// KV cache spec of one GPU at tensor-parallel size `tp` (pipeline parallelism is not modelled).
    pub fn kv_cache_spec(
        &self,
        kv: KvCacheDtype,
        tp: u32,
        block_size: u32,
    ) -> Result<KvCacheSpec, ModelError> {
        let par = crate::parallel::Parallelism { tp, dp: 1, ep: 1 };
        if block_size == 0 {
            return Err(self.unsupported(
                "block_size 0".into(),
                "use a positive block size (vLLM default 16; MLA backends 64; DeepSeek-V4 256)",
            ));
        }
        let kv_div = self.check_tp(&par)?;
        let bs = block_size as u64;
        let model_bytes = self.checkpoint.unquantized.bytes_per_element() as u64;
        let elem_bytes = kv_elem_bytes(kv, model_bytes);
        let mut notes = Vec::new();
        match &self.attention {
            AttentionSpec::Gqa {
                num_kv_heads,
                head_dim,
                v_head_dim,
                ..
            } => {
                if kv == KvCacheDtype::Fp8DsMla {
                    return Err(self.unsupported(
                        "kv-cache-dtype fp8_ds_mla".into(),
                        "fp8_ds_mla applies to DeepSeek MLA models only; use auto, bfloat16 or fp8",
                    ));
                }
                let heads = (*num_kv_heads as u64 / kv_div).max(1);
                let page = bs * heads * (*head_dim as u64 + *v_head_dim as u64) * elem_bytes;
                // Count layers per kind, in first-seen order.
                let mut kinds: Vec<(LayerAttn, u32)> = Vec::new();
                // Gated DeltaNet layers: a fixed state per request (vLLM allocates it in the same
                // pool, one state page per request and layer group; modelled as fixed bytes).
                let n_lin = self.num_linear_attention_layers() as u64;
                let fixed = match (&self.linear_attention, n_lin > 0) {
                    (Some(la), true) => {
                        let state = linear_state_bytes_per_layer(la, tp, model_bytes);
                        // vLLM pads each layer's state page to the attention page
                        // (`mamba_page_size_padded`) once the block size makes that page at
                        // least as large (`hybrid_attention_block_size`).
                        let attn_page =
                            bs * heads * (*head_dim as u64 + *v_head_dim as u64) * elem_bytes;
                        let per_layer = if attn_page >= state { attn_page } else { state };
                        let b = n_lin * per_layer;
                        notes.push(if per_layer > state {
                            format!(
                                "{n_lin} Gated DeltaNet layers: {b} B of recurrent state per request on this GPU ({state} B per layer padded to the {per_layer} B attention page), no per-token KV"
                            )
                        } else {
                            format!(
                                "{n_lin} Gated DeltaNet layers: {b} B of recurrent state per request on this GPU, no per-token KV"
                            )
                        });
                        b
                    }
                    _ => 0,
                };
                for l in self.layers.iter().filter(|l| l.attn != LayerAttn::Linear) {
                    match kinds.iter_mut().find(|k| k.0 == l.attn) {
                        Some(k) => k.1 += 1,
                        None => kinds.push((l.attn, 1)),
                    }
                }
                if kinds.len() == 1 {
                    let (kind, n) = kinds[0];
                    return Ok(KvCacheSpec {
                        block_size,
                        groups: vec![KvGroup {
                            kind,
                            num_layers: n,
                            page_bytes_per_layer: page,
                        }],
                        per_request_fixed_bytes: fixed,
                        dtype: kv,
                        packing: KvPacking::Uniform,
                        notes,
                    });
                }
                let counts: Vec<u32> = kinds.iter().map(|k| k.1).collect();
                let gs = hybrid_group_size(&counts);
                let mut groups = Vec::new();
                for (kind, n) in kinds {
                    let ngroups = n.div_ceil(gs);
                    // vLLM splits a kind into ngroups interleaved groups, the last padded to gs.
                    let mut left = n;
                    for _ in 0..ngroups {
                        let take = left.min(gs);
                        groups.push(KvGroup {
                            kind,
                            num_layers: take,
                            page_bytes_per_layer: page,
                        });
                        left -= take;
                    }
                }
                if counts.iter().any(|c| c % gs != 0) {
                    notes.push(format!(
                        "vLLM pads hybrid KV groups to {gs} layers; padding layers cost memory but hold no KV"
                    ));
                }
                Ok(KvCacheSpec {
                    block_size,
                    groups,
                    per_request_fixed_bytes: fixed,
                    dtype: kv,
                    packing: KvPacking::SharedPool { group_size: gs },
                    notes,
                })
            }
            AttentionSpec::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => {
                // One latent (kv_lora_rank + rope) per token per layer, replicated on every TP rank.
                let per_token = if kv == KvCacheDtype::Fp8DsMla {
                    FP8_DS_MLA_BYTES
                } else {
                    (*kv_lora_rank as u64 + *qk_rope_head_dim as u64) * elem_bytes
                };
                // DSA: plus the indexer's key per token on every layer with an indexer (GLM-5.2's
                // shared layers have none: spread over the layers, an approximation of vLLM's
                // separate indexer cache).
                let mut page = bs * per_token;
                if let Some(ix) = &self.sparse_indexer {
                    page += (bs * DSA_INDEXER_ENTRY_BYTES * ix.indexer_layers as u64)
                        .div_ceil(self.num_layers.max(1) as u64);
                }
                Ok(KvCacheSpec {
                    block_size,
                    groups: vec![KvGroup {
                        kind: LayerAttn::Full,
                        num_layers: self.num_layers,
                        page_bytes_per_layer: page,
                    }],
                    per_request_fixed_bytes: 0,
                    dtype: kv,
                    packing: KvPacking::Uniform,
                    notes,
                })
            }
            AttentionSpec::DeepseekV4 { sliding_window, .. } => {
                if kv != KvCacheDtype::Fp8DsMla {
                    notes.push(format!(
                        "kv-cache-dtype {} -> fp8_ds_mla: vLLM forces DeepSeek-V4 onto DeepSeek's fp8_ds_mla KV format",
                        kv.name()
                    ));
                }
                let mut groups: Vec<KvGroup> = Vec::new();
                for l in &self.layers {
                    if let LayerAttn::Compressed { ratio } = l.attn {
                        match groups.iter_mut().find(|g| g.kind == l.attn) {
                            Some(g) => g.num_layers += 1,
                            None => {
                                let entries = (bs / ratio as u64).max(1);
                                let mut page =
                                    round_up(entries * DSV4_ENTRY_BYTES, DSV4_PAGE_ALIGNMENT);
                                if ratio == 4 {
                                    page += round_up(
                                        entries * DSV4_INDEXER_ENTRY_BYTES,
                                        DSV4_PAGE_ALIGNMENT,
                                    );
                                }
                                groups.push(KvGroup {
                                    kind: l.attn,
                                    num_layers: 1,
                                    page_bytes_per_layer: page,
                                });
                            }
                        }
                    }
                }
                groups.sort_by_key(|g| match g.kind {
                    LayerAttn::Compressed { ratio } => ratio,
                    _ => 0,
                });
                if !bs.is_multiple_of(128) {
                    notes.push(format!(
                        "block size {block_size} is below/not a multiple of the largest compress ratio; vLLM recipes use --block-size 256"
                    ));
                }
                // Every decoder layer keeps a raw sliding window of `sliding_window` tokens.
                let swa = round_up(
                    *sliding_window as u64 * DSV4_ENTRY_BYTES,
                    DSV4_PAGE_ALIGNMENT,
                );
                Ok(KvCacheSpec {
                    block_size,
                    groups,
                    per_request_fixed_bytes: swa * self.num_layers as u64,
                    dtype: KvCacheDtype::Fp8DsMla,
                    packing: KvPacking::LayerTuple,
                    notes,
                })
            }
        }
    }

    /// vLLM's attention block size for a hybrid Gated DeltaNet model (`Platform
    /// ._align_hybrid_block_size`, formerly `HybridAttentionMambaModelConfig
    /// .verify_and_update_config`; mamba cache modes `none` and `align`): every page of the shared
    /// pool has one size, so the attention block grows until one attention page (`block_size x`
    /// K+V bytes of one token of one layer on this GPU) holds one layer's recurrent state:
    /// `align x cdiv(state, align x attn_token)` with `align = max(16, block_size)` (16 = the
    /// FlashAttention / FlashInfer kernels' smallest block). `None` when the model has no Gated
    /// DeltaNet layers or `block_size` is already that large. Returns `(block size, state bytes,
    /// attention bytes per token)`.
    pub fn hybrid_attention_block_size(
        &self,
        kv: KvCacheDtype,
        tp: u32,
        block_size: u32,
    ) -> Result<Option<(u32, u64, u64)>, ModelError> {
        let (
            Some(la),
            AttentionSpec::Gqa {
                num_kv_heads,
                head_dim,
                v_head_dim,
                ..
            },
        ) = (&self.linear_attention, &self.attention)
        else {
            return Ok(None);
        };
        if self.num_linear_attention_layers() == 0 {
            return Ok(None);
        }
        let par = crate::parallel::Parallelism { tp, dp: 1, ep: 1 };
        let kv_div = self.check_tp(&par)?;
        let model_bytes = self.checkpoint.unquantized.bytes_per_element() as u64;
        let heads = (*num_kv_heads as u64 / kv_div).max(1);
        let attn_token =
            heads * (*head_dim as u64 + *v_head_dim as u64) * kv_elem_bytes(kv, model_bytes);
        let state = linear_state_bytes_per_layer(la, tp, model_bytes);
        let align = (block_size as u64).max(16);
        let need = align * state.div_ceil(align * attn_token);
        if need <= block_size as u64 {
            return Ok(None);
        }
        let need = u32::try_from(need).map_err(|_| {
            self.unsupported(
                format!("attention block of {need} tokens"),
                "the recurrent state per layer is too large for one attention page",
            )
        })?;
        Ok(Some((need, state, attn_token)))
    }

    /// KV cache spec of one GPU with `mtp_layers` MTP modules loaded as the drafter: vLLM gives
    /// every attention layer of the drafter a KV spec in the same KV cache config as the target
    /// (`GPUModelRunner.get_kv_cache_spec` walks all attention layers, draft ones included), so
    /// the spec is the target's with one more layer per MTP module, shaped like
    /// [`ModelConfig::mtp_layer_spec`] (DSA models: with its own indexer). `mtp_layers = 0` is
    /// exactly [`ModelConfig::kv_cache_spec`]. Formula: docs/capacity.md "Drafter memory".
    pub fn kv_cache_spec_with_mtp(
        &self,
        kv: KvCacheDtype,
        tp: u32,
        block_size: u32,
        mtp_layers: u32,
    ) -> Result<KvCacheSpec, ModelError> {
        if mtp_layers == 0 {
            return self.kv_cache_spec(kv, tp, block_size);
        }
        let mut m = self.clone();
        let layer = self.mtp_layer_spec();
        m.layers
            .extend(std::iter::repeat_n(layer, mtp_layers as usize));
        m.num_layers += mtp_layers;
        if let Some(ix) = m.sparse_indexer.as_mut() {
            ix.indexer_layers += mtp_layers;
        }
        let mut spec = m.kv_cache_spec(kv, tp, block_size)?;
        spec.notes.push(format!(
            "MTP drafter: {mtp_layers} MTP layer(s) hold KV like a decoder layer, in the same KV cache as the target's layers"
        ));
        Ok(spec)
    }

    /// DSA models: (bytes of the selected latents per token over all layers, bytes of the indexer
    /// keys per token over the layers with an indexer). (0, 0) for other models.
    pub fn dsa_kv_bytes_per_token(&self, spec: &KvCacheSpec) -> (f64, f64) {
        let (
            Some(ix),
            AttentionSpec::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            },
        ) = (&self.sparse_indexer, &self.attention)
        else {
            return (0.0, 0.0);
        };
        let entry = if spec.dtype == KvCacheDtype::Fp8DsMla {
            FP8_DS_MLA_BYTES
        } else {
            let e = match spec.dtype {
                KvCacheDtype::Auto => self.checkpoint.unquantized.bytes_per_element() as u64,
                KvCacheDtype::Bfloat16 => 2,
                _ => 1,
            };
            (*kv_lora_rank as u64 + *qk_rope_head_dim as u64) * e
        };
        (
            self.num_layers as f64 * entry as f64,
            ix.indexer_layers as f64 * DSA_INDEXER_ENTRY_BYTES as f64,
        )
    }

    /// Bytes of KV one decode step of one sequence reads on one GPU at `context` tokens: window
    /// caps for sliding layers; DeepSeek-V4 reads its sliding window on every layer, all
    /// compressed entries on ratio-128 layers, and on ratio-4 layers every indexer key plus only
    /// the `index_topk` selected entries.
    pub fn kv_read_bytes_per_seq(&self, spec: &KvCacheSpec, context: u64) -> f64 {
        let ctx = context as f64;
        let bs = spec.block_size as f64;
        match &self.attention {
            AttentionSpec::DeepseekV4 {
                sliding_window,
                index_topk,
                ..
            } => {
                let e = DSV4_ENTRY_BYTES as f64;
                let win = ctx.min(*sliding_window as f64);
                let mut total = self.num_layers as f64 * win * e;
                for l in &self.layers {
                    if let LayerAttn::Compressed { ratio } = l.attn {
                        let n = ctx / ratio as f64;
                        if ratio == 4 {
                            total += n * DSV4_INDEXER_ENTRY_BYTES as f64;
                            total += n.min(*index_topk as f64) * e;
                        } else {
                            total += n * e;
                        }
                    }
                }
                total
            }
            AttentionSpec::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } if self.sparse_indexer.is_some() => {
                let _ = (kv_lora_rank, qk_rope_head_dim);
                let topk = self.sparse_indexer.map_or(0.0, |ix| ix.topk as f64);
                let (entry, indexer) = self.dsa_kv_bytes_per_token(spec);
                entry * ctx.min(topk) + indexer * ctx
            }
            _ => {
                spec.groups
                .iter()
                .map(|g| {
                    let per_token = g.page_bytes_per_layer as f64 / bs;
                    let tokens = match g.kind {
                        LayerAttn::SlidingWindow { window } => ctx.min(window as f64),
                        _ => ctx,
                    };
                    per_token * tokens * g.num_layers as f64
                })
                .sum::<f64>()
                    // Gated DeltaNet: the whole recurrent state is read and written every step.
                    + 2.0 * spec.per_request_fixed_bytes as f64 * ctx.min(1.0)
            }
        }
    }
}
