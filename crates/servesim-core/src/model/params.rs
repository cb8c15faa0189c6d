//! Parameter counting, weight bytes and per-GPU weight sharding.
//!
//! Everything derives from one tensor inventory ([`ModelConfig::tensors`]): each entry is a
//! weight matrix (or vector) with its shape, how many copies exist, how many one token uses,
//! whether it is a quantisable linear weight, and how vLLM shards it.

use super::*;
use crate::dtype::WeightPrecision;
use crate::parallel::Parallelism;
use crate::units::Bytes;

/// How vLLM shards a tensor over GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shard {
    /// Divided by `tp` (column/row-parallel linear, vocab-parallel embedding / lm_head).
    Tp,
    /// GQA k/v projections: each rank holds `max(1, kv_heads / tp)` heads, i.e. divided by `min(tp, kv_heads)`.
    KvHeads,
    /// Whole on every GPU.
    Replicated,
    /// Routed experts: divided by `ep` when `ep > 1`, else TP-sharded over `tp * dp` (vLLM flattens TP across DP for MoE).
    Experts,
}

/// One tensor kind of the model.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tensor {
    pub group: TensorGroup,
    /// Input dimension (K of the matmul) or 1 for vectors.
    pub rows: u64,
    /// Output dimension (N of the matmul) or the vector length.
    pub cols: u64,
    /// Copies in the model (layers x experts ...).
    pub count: u64,
    /// Copies one token uses (routed experts at top-k).
    pub active_count: u64,
    /// A linear weight that the checkpoint's quantisation applies to.
    pub linear: bool,
    pub shard: Shard,
}

impl Tensor {
    fn params(&self) -> u64 {
        self.rows * self.cols * self.count
    }
}

fn lin(group: TensorGroup, rows: u64, cols: u64, count: u64, shard: Shard) -> Tensor {
    Tensor {
        group,
        rows,
        cols,
        count,
        active_count: count,
        linear: true,
        shard,
    }
}

fn vecp(group: TensorGroup, len: u64, count: u64, shard: Shard) -> Tensor {
    Tensor {
        group,
        rows: 1,
        cols: len,
        count,
        active_count: count,
        linear: false,
        shard,
    }
}

impl ModelConfig {
    /// Tensors of `n` decoder layers of the given kinds (attention + FFN + norms).
    fn layer_tensors(&self, layers: &[LayerSpec], hash_layers: u64, out: &mut Vec<Tensor>) {
        use TensorGroup as G;
        let h = self.hidden_size;
        let n = layers.len() as u64;
        if n == 0 {
            return;
        }
        // Two RMSNorms per layer (input + post-attention).
        out.push(vecp(G::Norms, h, 2 * n, Shard::Replicated));
        // Gated DeltaNet layers (Qwen3.5) carry their own mixer instead of attention.
        let n_lin = layers
            .iter()
            .filter(|l| l.attn == LayerAttn::Linear)
            .count() as u64;
        if let (Some(la), true) = (&self.linear_attention, n_lin > 0) {
            let (kh, vh, kd, vd) = (
                la.num_key_heads as u64,
                la.num_value_heads as u64,
                la.key_head_dim as u64,
                la.value_head_dim as u64,
            );
            let qkv = 2 * kh * kd + vh * vd;
            out.push(lin(G::Attention, h, qkv + vh * vd, n_lin, Shard::Tp)); // in_proj_qkvz
            out.push(lin(G::Attention, h, 2 * vh, n_lin, Shard::Tp)); // in_proj_ba
            out.push(vecp(
                G::Attention,
                qkv * la.conv_kernel as u64,
                n_lin,
                Shard::Tp,
            )); // conv1d
            out.push(vecp(G::Attention, 2 * vh, n_lin, Shard::Tp)); // dt_bias, A_log
            out.push(vecp(G::Norms, vd, n_lin, Shard::Replicated)); // gated RMSNorm
            out.push(lin(G::Attention, vh * vd, h, n_lin, Shard::Tp)); // out_proj
        }
        let n_all = n;
        let n = n - n_lin;
        match &self.attention {
            AttentionSpec::Gqa {
                num_heads,
                num_kv_heads,
                head_dim,
                v_head_dim,
                qkv_bias,
            } => {
                let (nh, nkv, hd, vd) = (
                    *num_heads as u64,
                    *num_kv_heads as u64,
                    *head_dim as u64,
                    *v_head_dim as u64,
                );
                // q_proj (twice as wide with Qwen3.5's sigmoid output gate).
                let gate = if self.attn_output_gate { 2 } else { 1 };
                out.push(lin(G::Attention, h, gate * nh * hd, n, Shard::Tp));
                out.push(lin(G::Attention, h, nkv * (hd + vd), n, Shard::KvHeads)); // k_proj + v_proj
                out.push(lin(G::Attention, nh * vd, h, n, Shard::Tp)); // o_proj
                if *qkv_bias {
                    out.push(vecp(G::Attention, nh * hd, n, Shard::Tp));
                    out.push(vecp(G::Attention, nkv * (hd + vd), n, Shard::KvHeads));
                    // Llama-style `attention_bias` also biases o_proj; Qwen2 and GLM-4.5
                    // (`Glm4MoeAttention`: o_proj without bias) bias q/k/v only.
                    if !matches!(self.family, ModelFamily::Qwen2 | ModelFamily::Glm4Moe) {
                        out.push(vecp(G::Attention, h, n, Shard::Replicated));
                    }
                }
                if matches!(
                    self.family,
                    ModelFamily::Qwen3
                        | ModelFamily::Qwen3Moe
                        | ModelFamily::Qwen35Moe
                        | ModelFamily::Qwen35
                ) {
                    // q_norm / k_norm over head_dim.
                    out.push(vecp(G::Norms, 2 * hd, n, Shard::Replicated));
                }
                if self.family == ModelFamily::MiniMaxM2 {
                    // Per-layer QK-norm (`qk_norm_type: per_layer`): over the whole q and k projections.
                    out.push(vecp(G::Norms, nh * hd, n, Shard::Tp));
                    out.push(vecp(G::Norms, nkv * hd, n, Shard::KvHeads));
                }
                if self.family == ModelFamily::GptOss {
                    // Attention sinks: one learned logit per head.
                    out.push(vecp(G::Attention, nh, n, Shard::Tp));
                }
            }
            AttentionSpec::Mla {
                num_heads,
                q_lora_rank,
                kv_lora_rank,
                qk_rope_head_dim,
                qk_nope_head_dim,
                v_head_dim,
            } => {
                let (nh, kvl, rope, nope, vd) = (
                    *num_heads as u64,
                    *kv_lora_rank as u64,
                    *qk_rope_head_dim as u64,
                    *qk_nope_head_dim as u64,
                    *v_head_dim as u64,
                );
                match q_lora_rank {
                    Some(ql) => {
                        let ql = *ql as u64;
                        out.push(lin(G::AttentionReplicated, h, ql, n, Shard::Replicated)); // q_a_proj
                        out.push(vecp(G::Norms, ql, n, Shard::Replicated)); // q_a_layernorm
                        out.push(lin(G::Attention, ql, nh * (nope + rope), n, Shard::Tp));
                        // q_b_proj
                    }
                    None => out.push(lin(G::Attention, h, nh * (nope + rope), n, Shard::Tp)), // q_proj
                }
                out.push(lin(
                    G::AttentionReplicated,
                    h,
                    kvl + rope,
                    n,
                    Shard::Replicated,
                )); // kv_a_proj_with_mqa
                out.push(vecp(G::Norms, kvl, n, Shard::Replicated)); // kv_a_layernorm
                out.push(lin(G::Attention, kvl, nh * (nope + vd), n, Shard::Tp)); // kv_b_proj
                out.push(lin(G::Attention, nh * vd, h, n, Shard::Tp)); // o_proj
                if let Some(ix) = &self.sparse_indexer {
                    // DSA lightning indexer (vLLM `Indexer`, all replicated): wq_b from the q
                    // latent, wk, k_norm (LayerNorm with bias), weights_proj. GLM-5.2's shared
                    // layers reuse the previous selection and have none.
                    let ni = if layers.len() == self.layers.len() {
                        ix.indexer_layers as u64
                    } else {
                        n
                    };
                    let (ih, ihd) = (ix.n_heads as u64, ix.head_dim as u64);
                    let ql = q_lora_rank.map_or(h, |q| q as u64);
                    out.push(lin(
                        G::AttentionReplicated,
                        ql,
                        ih * ihd,
                        ni,
                        Shard::Replicated,
                    ));
                    out.push(lin(G::AttentionReplicated, h, ihd, ni, Shard::Replicated));
                    out.push(vecp(G::Norms, 2 * ihd, ni, Shard::Replicated));
                    out.push(lin(G::AttentionReplicated, h, ih, ni, Shard::Replicated));
                }
            }
            AttentionSpec::DeepseekV4 {
                num_heads,
                head_dim,
                q_lora_rank,
                o_lora_rank,
                o_groups,
                index_n_heads,
                index_head_dim,
                hc_mult,
                ..
            } => {
                let (nh, hd, ql, ol, og, ih, ihd, hc) = (
                    *num_heads as u64,
                    *head_dim as u64,
                    *q_lora_rank as u64,
                    *o_lora_rank as u64,
                    *o_groups as u64,
                    *index_n_heads as u64,
                    *index_head_dim as u64,
                    *hc_mult as u64,
                );
                out.push(lin(G::AttentionReplicated, h, ql, n, Shard::Replicated)); // wq_a
                out.push(vecp(G::Norms, ql, n, Shard::Replicated)); // q_norm
                out.push(lin(G::Attention, ql, nh * hd, n, Shard::Tp)); // wq_b
                out.push(lin(G::AttentionReplicated, h, hd, n, Shard::Replicated)); // wkv (one shared K=V head)
                out.push(vecp(G::Norms, hd, n, Shard::Replicated)); // kv_norm
                out.push(lin(G::Attention, nh * hd / og, og * ol, n, Shard::Tp)); // wo_a (grouped)
                out.push(lin(G::Attention, og * ol, h, n, Shard::Tp)); // wo_b
                out.push(vecp(G::Attention, nh, n, Shard::Tp)); // attn_sink
                for l in layers {
                    if let LayerAttn::Compressed { ratio } = l.attn {
                        let r = ratio as u64;
                        // Compressor: wkv + wgate to `coff * head_dim` (coff = 2 for ratio 4,
                        // overlapping windows), norm, absolute position embedding [ratio, latent].
                        let lat = if r == 4 { 2 * hd } else { hd };
                        out.push(lin(
                            G::AttentionReplicated,
                            h,
                            2 * lat,
                            1,
                            Shard::Replicated,
                        ));
                        out.push(vecp(G::Norms, hd, 1, Shard::Replicated));
                        out.push(vecp(G::AttentionReplicated, r * lat, 1, Shard::Replicated));
                        if r == 4 {
                            // Lightning indexer: wq_b from the q latent, per-head weights, and
                            // its own ratio-4 compressor at index_head_dim.
                            out.push(lin(
                                G::AttentionReplicated,
                                ql,
                                ih * ihd,
                                1,
                                Shard::Replicated,
                            ));
                            out.push(lin(G::AttentionReplicated, h, ih, 1, Shard::Replicated));
                            out.push(lin(
                                G::AttentionReplicated,
                                h,
                                2 * 2 * ihd,
                                1,
                                Shard::Replicated,
                            ));
                            out.push(vecp(G::Norms, ihd, 1, Shard::Replicated));
                            out.push(vecp(
                                G::AttentionReplicated,
                                4 * 2 * ihd,
                                1,
                                Shard::Replicated,
                            ));
                        }
                    }
                }
                // Manifold hyper-connections: hc_attn and hc_ffn per layer, each
                // fn [(2+hc)*hc, hc*hidden], base [(2+hc)*hc], scale [3].
                let rows = (2 + hc) * hc;
                out.push(vecp(
                    G::Other,
                    rows * hc * h + rows + 3,
                    2 * n,
                    Shard::Replicated,
                ));
            }
        }
        // FFN
        let n = n_all;
        let dense = layers.iter().filter(|l| l.ffn == LayerFfn::Dense).count() as u64;
        let moe_n = n - dense;
        if dense > 0 {
            let i = self.dense_intermediate_size;
            out.push(lin(G::DenseMlp, h, 3 * i, dense, Shard::Tp)); // gate, up, down
        }
        if let (Some(m), true) = (&self.moe, moe_n > 0) {
            let e = m.num_experts as u64;
            let k = m.experts_per_tok as u64;
            let i = m.moe_intermediate_size;
            out.push(Tensor {
                group: G::RoutedExperts,
                rows: h,
                cols: 3 * i,
                count: moe_n * e,
                active_count: moe_n * k,
                linear: true,
                shard: Shard::Experts,
            });
            if m.expert_bias {
                out.push(Tensor {
                    group: G::RoutedExperts,
                    rows: 1,
                    cols: 2 * i + h,
                    count: moe_n * e,
                    active_count: moe_n * k,
                    linear: false,
                    shard: Shard::Experts,
                });
            }
            if m.num_shared_experts > 0 {
                out.push(lin(
                    G::SharedExperts,
                    h,
                    3 * m.shared_intermediate_size,
                    moe_n * m.num_shared_experts as u64,
                    Shard::Tp,
                ));
                if matches!(self.family, ModelFamily::Qwen3Moe | ModelFamily::Qwen35Moe) {
                    // Qwen2-MoE style shared_expert_gate [hidden -> 1].
                    out.push(vecp(G::Router, h, moe_n, Shard::Replicated));
                }
            }
            out.push(vecp(G::Router, h * e, moe_n, Shard::Replicated)); // gate weight [E, hidden]
            if m.router_bias {
                // gpt-oss router bias; DeepSeek-V3/V4 e_score_correction_bias (not on V4 hash layers).
                let biased = moe_n.saturating_sub(hash_layers);
                if biased > 0 {
                    out.push(vecp(G::Router, e, biased, Shard::Replicated));
                }
            }
        }
    }

    /// The decoder's tensor inventory (MTP layers excluded).
    pub(super) fn tensors(&self) -> Vec<Tensor> {
        use TensorGroup as G;
        let h = self.hidden_size;
        let mut out = vec![vecp(G::Embedding, h * self.vocab_size, 1, Shard::Tp)];
        self.layer_tensors(&self.layers, self.num_hash_layers as u64, &mut out);
        out.push(vecp(G::Norms, h, 1, Shard::Replicated)); // final norm
        if !self.tie_word_embeddings {
            out.push(lin(G::LmHead, h, self.vocab_size, 1, Shard::Tp));
        }
        if let AttentionSpec::DeepseekV4 { hc_mult, .. } = &self.attention {
            let hc = *hc_mult as u64;
            out.push(vecp(G::Other, hc * hc * h + hc + 1, 1, Shard::Replicated));
            // hc_head
        }
        // lm_head is never quantised in the shipped checkpoints (kept in torch_dtype).
        for t in out.iter_mut() {
            if t.group == G::LmHead {
                t.linear = false;
            }
        }
        out
    }

    /// The decoder layer inside each MTP module: shaped like the last decoder layer; on
    /// DeepSeek-V4 its attention follows the `compress_ratios` entry after the decoder layers
    /// (vLLM `resolve_layer_compress_ratio`), 0 meaning sliding-window only as on decoder layers.
    pub fn mtp_layer_spec(&self) -> LayerSpec {
        let last = *self.layers.last().expect("validated: at least one layer");
        let mut spec = last;
        if let AttentionSpec::DeepseekV4 {
            compress_ratios,
            sliding_window,
            ..
        } = &self.attention
        {
            // compress_ratios lists the MTP layer after the decoder layers.
            if let Some(r) = compress_ratios.get(self.num_layers as usize) {
                spec.attn = if *r == 0 {
                    LayerAttn::SlidingWindow {
                        window: *sliding_window,
                    }
                } else {
                    LayerAttn::Compressed { ratio: *r }
                };
            }
        }
        spec
    }

    /// Tensors of the MTP modules (DeepSeek style: enorm, hnorm, eh_proj [2h -> h], one decoder
    /// layer shaped like the last decoder layer, shared-head norm; embedding and head are shared).
    pub(super) fn mtp_tensors(&self) -> Vec<Tensor> {
        use TensorGroup as G;
        let n = self.num_mtp_layers as u64;
        let mut out = Vec::new();
        if n == 0 {
            return out;
        }
        let h = self.hidden_size;
        let layers = vec![self.mtp_layer_spec(); n as usize];
        self.layer_tensors(&layers, 0, &mut out);
        out.push(vecp(G::Norms, 3 * h, n, Shard::Replicated));
        out.push(lin(G::Other, 2 * h, h, n, Shard::Replicated));
        out
    }

    /// Parameter counts by group; `total` and `active` exclude MTP layers (as published figures
    /// do). `active` excludes the input embedding table (a token reads one row of it); see
    /// [`ParamCounts::active_with_embedding`].
    pub fn params(&self) -> ParamCounts {
        let mut p = ParamCounts::default();
        let mut active = 0u64;
        for t in self.tensors() {
            let n = t.params();
            p.total += n;
            let slot = match t.group {
                TensorGroup::Embedding => &mut p.embedding,
                TensorGroup::LmHead => &mut p.lm_head,
                TensorGroup::Attention | TensorGroup::AttentionReplicated => &mut p.attention,
                TensorGroup::DenseMlp => &mut p.dense_mlp,
                TensorGroup::RoutedExperts => &mut p.routed_experts,
                TensorGroup::SharedExperts => &mut p.shared_experts,
                TensorGroup::Router => &mut p.router,
                TensorGroup::Norms => &mut p.norms,
                TensorGroup::Other => &mut p.other,
            };
            *slot += n;
            if t.group != TensorGroup::Embedding {
                active += t.rows * t.cols * t.active_count;
            }
        }
        p.active = active;
        p.mtp = self.mtp_tensors().iter().map(Tensor::params).sum();
        p
    }

    /// The storage type of a tensor at a serving precision.
    pub(super) fn tensor_dtype(
        &self,
        t: &Tensor,
        prec: WeightPrecision,
    ) -> (DType, Option<(u32, u32)>) {
        let unq = self.checkpoint.unquantized;
        if !t.linear {
            return (unq, None);
        }
        let ck = &self.checkpoint;
        let ck_dtype = match t.group {
            TensorGroup::RoutedExperts => ck.experts,
            TensorGroup::Attention | TensorGroup::AttentionReplicated => {
                ck.attention.unwrap_or(ck.dense)
            }
            _ => ck.dense,
        };
        match prec {
            WeightPrecision::Checkpoint => {
                let block = if ck_dtype == DType::Fp8 {
                    ck.fp8_block
                } else {
                    None
                };
                (ck_dtype, block)
            }
            WeightPrecision::Bf16 => (DType::Bf16, None),
            WeightPrecision::Fp8 => (DType::Fp8, None),
            WeightPrecision::Fp4 => {
                if ck.experts == DType::Mxfp4 {
                    (DType::Mxfp4, None)
                } else {
                    (DType::Nvfp4, None)
                }
            }
            WeightPrecision::Int4 => (DType::Int4, None),
            WeightPrecision::Int8 => (DType::Int8, None),
        }
    }

    /// (element bytes, fp8 block-scale bytes) of all copies of a tensor.
    fn tensor_bytes(&self, t: &Tensor, prec: WeightPrecision) -> (f64, f64, DType) {
        let (dt, block) = self.tensor_dtype(t, prec);
        let elems = t.params() as f64;
        // The checkpoint's own integer layers carry its group size; an override quantises at 128.
        let group = match prec {
            WeightPrecision::Checkpoint => self.checkpoint.int_group_size,
            _ => None,
        };
        let bytes = elems * dt.bytes_per_element_grouped(group);
        let scales = match block {
            Some((br, bc)) => {
                let (br, bc) = (br as u64, bc as u64);
                (t.rows.div_ceil(br) * t.cols.div_ceil(bc) * t.count * 4) as f64
            }
            None => 0.0,
        };
        (bytes, scales, dt)
    }

    fn group_bytes(&self, tensors: &[Tensor], prec: WeightPrecision) -> Vec<WeightGroup> {
        let mut groups: Vec<WeightGroup> = Vec::new();
        let mut acc: Vec<(TensorGroup, DType, u64, f64, f64)> = Vec::new();
        for t in tensors {
            let (b, s, dt) = self.tensor_bytes(t, prec);
            match acc.iter_mut().find(|a| a.0 == t.group && a.1 == dt) {
                Some(a) => {
                    a.2 += t.params();
                    a.3 += b;
                    a.4 += s;
                }
                None => acc.push((t.group, dt, t.params(), b, s)),
            }
        }
        acc.sort_by_key(|a| (a.0, a.1));
        for (group, dtype, params, b, s) in acc {
            groups.push(WeightGroup {
                group,
                params,
                dtype,
                bytes: Bytes(libm::ceil(b) as u64),
                scale_bytes: Bytes(libm::ceil(s) as u64),
            });
        }
        groups
    }

    /// Weight bytes per tensor group at `prec` (whole model, one replica, MTP excluded from
    /// `total` and reported in `mtp`).
    pub fn weight_bytes(&self, prec: WeightPrecision) -> WeightBytes {
        let groups = self.group_bytes(&self.tensors(), prec);
        let total = groups.iter().map(|g| g.bytes.0 + g.scale_bytes.0).sum();
        let mtp = self
            .group_bytes(&self.mtp_tensors(), prec)
            .iter()
            .map(|g| g.bytes.0 + g.scale_bytes.0)
            .sum();
        WeightBytes {
            groups,
            total: Bytes(total),
            mtp: Bytes(mtp),
        }
    }

    pub(super) fn layout_error(&self, par: &Parallelism, reason: String) -> ModelError {
        ModelError::Parallelism {
            model: self.name.clone(),
            layout: format!("tp={} dp={} ep={}", par.tp, par.dp, par.ep),
            reason,
        }
    }

    /// Checks a TP degree against the attention heads; returns the KV-head shard divisor.
    pub(super) fn check_tp(&self, par: &Parallelism) -> Result<u64, ModelError> {
        if par.tp == 0 || par.dp == 0 || par.ep == 0 {
            return Err(self.layout_error(par, "tp, dp and ep must each be at least 1".into()));
        }
        let tp = par.tp;
        let nh = match &self.attention {
            AttentionSpec::Gqa { num_heads, .. }
            | AttentionSpec::Mla { num_heads, .. }
            | AttentionSpec::DeepseekV4 { num_heads, .. } => *num_heads,
        };
        if !nh.is_multiple_of(tp) {
            return Err(self.layout_error(
                par,
                format!("num_attention_heads = {nh} is not divisible by tp = {tp}; pick a tp that divides {nh}"),
            ));
        }
        if let AttentionSpec::Gqa { num_kv_heads, .. } = &self.attention {
            let kv = *num_kv_heads;
            if tp <= kv && !kv.is_multiple_of(tp) {
                return Err(self.layout_error(
                    par,
                    format!("num_key_value_heads = {kv} is not divisible by tp = {tp}"),
                ));
            }
            if tp > kv && !tp.is_multiple_of(kv) {
                return Err(self.layout_error(
                    par,
                    format!("tp = {tp} exceeds num_key_value_heads = {kv} but is not a multiple of it (vLLM replicates KV heads only in whole copies)"),
                ));
            }
            return Ok(tp.min(kv) as u64);
        }
        Ok(1)
    }

    /// Weight bytes one GPU holds under `par` (sharding rules in docs/models.md). MTP excluded.
    pub fn weight_bytes_per_gpu(
        &self,
        prec: WeightPrecision,
        par: Parallelism,
    ) -> Result<Bytes, ModelError> {
        self.sharded_bytes(&self.tensors(), prec, par)
    }

    /// Bytes of the MTP modules one GPU holds under `par` when MTP speculative decoding loads
    /// them: each module's decoder layer sharded like a decoder layer (TP / EP), `eh_proj`
    /// (a plain `nn.Linear` in vLLM) and the norms replicated; embedding and lm_head are the
    /// target's (docs/capacity.md "Drafter memory").
    pub fn mtp_weight_bytes_per_gpu(
        &self,
        prec: WeightPrecision,
        par: Parallelism,
    ) -> Result<Bytes, ModelError> {
        self.sharded_bytes(&self.mtp_tensors(), prec, par)
    }

    fn sharded_bytes(
        &self,
        tensors: &[Tensor],
        prec: WeightPrecision,
        par: Parallelism,
    ) -> Result<Bytes, ModelError> {
        let kv_div = self.check_tp(&par)?;
        let tp = par.tp as f64;
        let expert_div = match &self.moe {
            Some(m) if par.ep > 1 => {
                if par.ep > m.num_experts {
                    return Err(self.layout_error(
                        &par,
                        format!(
                            "ep = {} exceeds the {} routed experts",
                            par.ep, m.num_experts
                        ),
                    ));
                }
                let per_gpu = m.num_experts.div_ceil(par.ep);
                m.num_experts as f64 / per_gpu as f64
            }
            _ => (par.tp * par.dp) as f64,
        };
        let mut total = 0.0;
        for t in tensors {
            let (b, s, _) = self.tensor_bytes(t, prec);
            let div = match t.shard {
                Shard::Tp => tp,
                Shard::KvHeads => kv_div as f64,
                Shard::Replicated => 1.0,
                Shard::Experts => expert_div,
            };
            total += (b + s) / div;
        }
        Ok(Bytes(libm::ceil(total) as u64))
    }

    /// Bytes per GPU that vLLM's MXFP4 MoE kernels add at load by padding every routed expert
    /// on this GPU: the intermediate size per partition rounded up to `align.intermediate`, the
    /// hidden size to `align.hidden` (`mxfp4_round_up_hidden_size_and_intermediate_size`), for
    /// the gate/up and down weights with their MX scales (`3 I' H'` elements at
    /// [`DType::Mxfp4`]'s bytes) and the expert biases (`2 I' + H'` in the checkpoint dtype).
    /// Zero unless the experts load through `Mxfp4MoEMethod` at `prec`
    /// ([`CheckpointDtypes::mxfp4_moe`]). The partition is `I / (tp * dp)` without EP (vLLM
    /// flattens TP across DP for MoE) and whole experts, `ceil(E / ep)` per GPU, with it.
    pub fn mxfp4_expert_padding_bytes_per_gpu(
        &self,
        prec: WeightPrecision,
        par: Parallelism,
        align: Mxfp4Alignment,
    ) -> Result<Mxfp4Padding, ModelError> {
        let none = Mxfp4Padding::default();
        let Some(m) = &self.moe else {
            return Ok(none);
        };
        let probe = lin(TensorGroup::RoutedExperts, 1, 1, 1, Shard::Experts);
        if !self.checkpoint.mxfp4_moe || self.tensor_dtype(&probe, prec).0 != DType::Mxfp4 {
            return Ok(none);
        }
        self.check_tp(&par)?;
        let moe_layers = self.num_moe_layers() as u64;
        let (experts, partitions) = if par.ep > 1 {
            (m.num_experts.div_ceil(par.ep) as u64, 1)
        } else {
            (m.num_experts as u64, (par.tp * par.dp) as u64)
        };
        let h = self.hidden_size;
        let i = m.moe_intermediate_size.div_ceil(partitions.max(1));
        let round = |x: u64, a: u64| x.div_ceil(a.max(1)) * a.max(1);
        let (i2, h2) = (round(i, align.intermediate), round(h, align.hidden));
        let bpe = DType::Mxfp4.bytes_per_element();
        let bias = if m.expert_bias {
            self.checkpoint.unquantized.bytes_per_element()
        } else {
            0.0
        };
        let one = |i: u64, h: u64| 3.0 * (i * h) as f64 * bpe + (2 * i + h) as f64 * bias;
        let extra = (experts * moe_layers) as f64 * (one(i2, h2) - one(i, h));
        Ok(Mxfp4Padding {
            bytes: Bytes(libm::ceil(extra.max(0.0)) as u64),
            intermediate: (i, i2),
            hidden: (h, h2),
        })
    }

    /// Bytes of ONE routed expert in ONE layer at `prec` (incl. fp8 block scales, MX/NV scales and
    /// gpt-oss expert biases); `None` for dense models.
    pub fn expert_bytes(&self, prec: WeightPrecision) -> Option<Bytes> {
        let m = self.moe.as_ref()?;
        let h = self.hidden_size;
        let i = m.moe_intermediate_size;
        let mut one = vec![lin(TensorGroup::RoutedExperts, h, 3 * i, 1, Shard::Experts)];
        if m.expert_bias {
            one.push(Tensor {
                group: TensorGroup::RoutedExperts,
                rows: 1,
                cols: 2 * i + h,
                count: 1,
                active_count: 1,
                linear: false,
                shard: Shard::Experts,
            });
        }
        let total: f64 = one
            .iter()
            .map(|t| {
                let (b, s, _) = self.tensor_bytes(t, prec);
                b + s
            })
            .sum();
        Some(Bytes(libm::ceil(total) as u64))
    }
}

/// The multiples vLLM's MXFP4 MoE kernel pads an expert's dimensions to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mxfp4Alignment {
    /// Multiple of the intermediate size per partition.
    pub intermediate: u64,
    /// Multiple of the hidden size (1 = not padded).
    pub hidden: u64,
}

/// What [`ModelConfig::mxfp4_expert_padding_bytes_per_gpu`] adds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mxfp4Padding {
    /// Extra bytes per GPU.
    pub bytes: Bytes,
    /// Intermediate size per partition (checkpoint, padded).
    pub intermediate: (u64, u64),
    /// Hidden size (checkpoint, padded).
    pub hidden: (u64, u64),
}

impl ParamCounts {
    /// `active` plus the input embedding table (the convention Qwen and Mistral use).
    pub fn active_with_embedding(&self) -> u64 {
        self.active + self.embedding
    }
}
