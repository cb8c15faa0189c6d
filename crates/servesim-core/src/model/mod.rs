//! Model architectures: parse a Hugging Face `config.json`, count parameters, size weights and KV
//! cache (per GPU, by vLLM's rules), and give the FLOP/byte primitives of the step-time model.
//!
//! Every formula here is written out, with its source, in `docs/models.md`.

pub mod catalog;
mod flops;
pub mod ids;
mod kv;
mod params;
pub use params::{Mxfp4Alignment, Mxfp4Padding};
mod parse;

#[cfg(test)]
mod tests;

use crate::dtype::{DType, WeightPrecision};
use serde::{Deserialize, Serialize};

pub use kv::{
    linear_state_bytes_per_layer, KvCacheSpec, KvGroup, KvPacking, DSA_INDEXER_ENTRY_BYTES,
    DSV4_ENTRY_BYTES, DSV4_INDEXER_ENTRY_BYTES, DSV4_PAGE_ALIGNMENT, FP8_DS_MLA_BYTES,
};

/// Errors from parsing or using a model configuration. Each names the field and the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The text is not valid JSON (or not a JSON object).
    #[error("config.json for `{model}` is not valid JSON: {message}; paste the model's config.json from Hugging Face unchanged")]
    Json { model: String, message: String },
    /// A field the architecture needs is absent.
    #[error("config.json has no `{field}`; {hint}")]
    MissingField { field: String, hint: String },
    /// A field is present but its value is unusable (zero, negative, NaN, wrong type, inconsistent).
    #[error("config.json field `{field}` = {value} is invalid: {reason}")]
    InvalidField {
        field: String,
        value: String,
        reason: String,
    },
    /// `architectures` / `model_type` names an architecture ServeSim does not model.
    #[error("architecture `{architecture}` is not supported (supported: {supported}); ServeSim does not fall back to a dense guess — pick a supported model or file an issue with the config.json")]
    UnknownArchitecture {
        architecture: String,
        supported: String,
    },
    /// `catalog::load` got an id that is not in the catalog.
    #[error("model `{id}` is not in the catalog{}; paste its config.json instead", if suggestions.is_empty() { String::new() } else { format!(" (did you mean: {}?)", suggestions.join(", ")) })]
    UnknownModel {
        id: String,
        suggestions: Vec<String>,
    },
    /// The parallel layout cannot shard this model.
    #[error("cannot shard `{model}` with {layout}: {reason}")]
    Parallelism {
        model: String,
        layout: String,
        reason: String,
    },
    /// A combination the model cannot run with (e.g. a KV dtype that does not apply).
    #[error("{what} is not supported for `{model}`: {fix}")]
    Unsupported {
        model: String,
        what: String,
        fix: String,
    },
}

/// Architecture family, from `architectures[0]` / `model_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ModelFamily {
    /// Llama 1/2/3.x, CodeLlama (`LlamaForCausalLM`).
    Llama,
    /// Qwen2 / Qwen2.5 dense (`Qwen2ForCausalLM`): q/k/v bias.
    Qwen2,
    /// Qwen3 dense (`Qwen3ForCausalLM`): q_norm/k_norm.
    Qwen3,
    /// Qwen3 MoE (`Qwen3MoeForCausalLM`).
    Qwen3Moe,
    /// Mixtral (`MixtralForCausalLM`).
    Mixtral,
    /// DeepSeek-V2 / V2-Lite (MLA + MoE).
    DeepseekV2,
    /// DeepSeek-V3 / R1 and Kimi-K2 (`model_type: kimi_k2`).
    DeepseekV3,
    /// DeepSeek-V4 (compressed sparse attention, hyper-connections).
    DeepseekV4,
    /// OpenAI gpt-oss (`GptOssForCausalLM`).
    GptOss,
    /// DeepSeek-V3.2 (`DeepseekV32ForCausalLM`): V3 shape plus DeepSeek sparse attention.
    DeepseekV32,
    /// GLM-5 / GLM-5.2 (`GlmMoeDsaForCausalLM`): MLA + DeepSeek sparse attention + MoE.
    GlmMoeDsa,
    /// MiniMax-M2 / M2.5 / M2.7 (`MiniMaxM2ForCausalLM`): GQA with per-layer QK-norm and partial
    /// rotary, 256 sigmoid-routed experts with a correction bias.
    MiniMaxM2,
    /// Qwen3.5 MoE (`Qwen3_5MoeForConditionalGeneration`, text config nested): Gated DeltaNet
    /// linear-attention layers interleaved with gated full-attention layers.
    Qwen35Moe,
    /// Qwen3.5 dense (`Qwen3_5ForConditionalGeneration`, text config nested): the same hybrid
    /// attention as [`ModelFamily::Qwen35Moe`] with a dense MLP in every layer.
    Qwen35,
    /// GLM-4.5 / 4.5-Air / 4.6 / 4.7 (`Glm4MoeForCausalLM`): GQA with q/k/v bias (optional
    /// per-head QK-norm), DeepSeek-V3-style MoE (leading dense layers, a shared expert, sigmoid
    /// routing with a correction bias).
    Glm4Moe,
}

/// How vLLM's OpenAI server turns a chat request's messages into the prompt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChatRenderer {
    /// The checkpoint's Hugging Face Jinja chat template (`apply_hf_chat_template`).
    HfJinja,
    /// gpt-oss: the Harmony format, rendered by the `openai_harmony` library (vLLM's
    /// `OpenAIServingChat.use_harmony`, set for `model_type` `gpt_oss`).
    Harmony,
    /// DeepSeek-V3.2 / V4: their repositories ship no usable Jinja template; vLLM renders with
    /// its own encoder (`vllm/tokenizers/deepseek_v32.py`, `deepseek_v4.py`).
    DeepseekEncoder,
}

impl ModelFamily {
    /// Whether the architecture's attention has learned sinks (one extra logit per head in the
    /// softmax: gpt-oss, `self.sinks` in vLLM's `OAIAttention`), which FlashAttention-2 does not
    /// implement (docs/step-time.md §3, "Triton unified attention").
    pub fn has_attention_sinks(self) -> bool {
        self == ModelFamily::GptOss
    }

    /// The chat renderer vLLM uses for this architecture (docs/accuracy.md "Front-end terms").
    pub fn chat_renderer(self) -> ChatRenderer {
        match self {
            ModelFamily::GptOss => ChatRenderer::Harmony,
            ModelFamily::DeepseekV32 | ModelFamily::DeepseekV4 => ChatRenderer::DeepseekEncoder,
            _ => ChatRenderer::HfJinja,
        }
    }
}

/// DeepSeek sparse attention (DSA, DeepSeek-V3.2 / GLM-5): a lightning indexer scores every cached
/// token with `n_heads` fp8 heads of `head_dim` and the attention reads only the `topk` best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SparseIndexer {
    pub n_heads: u32,
    pub head_dim: u32,
    pub topk: u32,
    /// Decoder layers that run their own indexer (GLM-5.2 `indexer_types`: `shared` layers reuse
    /// the previous layer's selection); all layers otherwise.
    pub indexer_layers: u32,
}

/// Gated DeltaNet linear attention (Qwen3.5 / Qwen3-Next `linear_attention` layers): a fixed
/// per-request recurrent state instead of a KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LinearAttention {
    pub num_key_heads: u32,
    pub num_value_heads: u32,
    pub key_head_dim: u32,
    pub value_head_dim: u32,
    /// Causal conv1d kernel width (`linear_conv_kernel_dim`).
    pub conv_kernel: u32,
    /// Bytes per element of the recurrent (SSM) state (`mamba_ssm_dtype`, default the model dtype).
    pub state_elem_bytes: u32,
}

/// Attention of the model (shared by all decoder layers; per-layer variation is in [`LayerAttn`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum AttentionSpec {
    /// Grouped-query attention; multi-head attention when `num_kv_heads == num_heads`.
    Gqa {
        num_heads: u32,
        num_kv_heads: u32,
        head_dim: u32,
        v_head_dim: u32,
        qkv_bias: bool,
    },
    /// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2).
    Mla {
        num_heads: u32,
        q_lora_rank: Option<u32>,
        kv_lora_rank: u32,
        qk_rope_head_dim: u32,
        qk_nope_head_dim: u32,
        v_head_dim: u32,
    },
    /// DeepSeek-V4: single shared-KV head (MQA) with low-rank Q and grouped low-rank O,
    /// per-layer KV compression (`compress_ratios`), a sliding window and a lightning indexer.
    DeepseekV4 {
        num_heads: u32,
        head_dim: u32,
        qk_rope_head_dim: u32,
        q_lora_rank: u32,
        o_lora_rank: u32,
        o_groups: u32,
        sliding_window: u32,
        index_n_heads: u32,
        index_head_dim: u32,
        index_topk: u32,
        compress_ratios: Vec<u32>,
        hc_mult: u32,
    },
}

/// Attention kind of one decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LayerAttn {
    /// Attends to the whole context.
    Full,
    /// Attends to the last `window` tokens.
    SlidingWindow { window: u32 },
    /// DeepSeek-V4: keeps one compressed KV entry per `ratio` tokens (plus the model's sliding window).
    Compressed { ratio: u32 },
    /// Linear attention (Gated DeltaNet): a fixed recurrent state per request, no per-token KV.
    Linear,
}

/// FFN kind of one decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LayerFfn {
    Dense,
    Moe,
}

/// One decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerSpec {
    pub attn: LayerAttn,
    pub ffn: LayerFfn,
}

/// Mixture-of-experts shape (of the MoE layers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub num_experts: u32,
    /// Routed experts each token uses (top-k).
    pub experts_per_tok: u32,
    /// Intermediate size of one routed expert.
    pub moe_intermediate_size: u64,
    /// Shared (always-on) experts per MoE layer.
    pub num_shared_experts: u32,
    /// Intermediate size of one shared expert.
    pub shared_intermediate_size: u64,
    /// Router has a bias vector (gpt-oss) in addition to its weight.
    pub router_bias: bool,
    /// Expert projections carry biases (gpt-oss).
    pub expert_bias: bool,
}

/// Storage types of the checkpoint's tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointDtypes {
    /// Linear layers outside the routed experts (attention, dense MLP, shared experts).
    pub dense: DType,
    /// Routed-expert linear layers.
    pub experts: DType,
    /// Block size `[rows, cols]` of fp8 block scales (one fp32 scale per block), when fp8-block quantised.
    pub fp8_block: Option<(u32, u32)>,
    /// Embedding / lm_head / norms (not quantised): the `torch_dtype`.
    pub unquantized: DType,
    /// Attention projections when they differ from `dense` (a quantisation config that excludes
    /// `self_attn`, e.g. ModelOpt NVFP4 MiniMax-M2.5); `None` = `dense`.
    #[serde(default)]
    pub attention: Option<DType>,
    /// Elements per 16-bit scale of the integer weight-only layers (AWQ / GPTQ / compressed-tensors
    /// `group_size`) when it is not the default 128; `Some(0)` = one scale per output channel
    /// (`group_size: -1`, or a compressed-tensors `strategy: channel`). Sizes the checkpoint's own weights ([`DType::bytes_per_element_grouped`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int_group_size: Option<u32>,
    /// The fp8 linears carry per-row scales: one weight scale per output channel (`fbgemm_fp8`,
    /// compressed-tensors `strategy: channel`) or activations quantised per token at run time.
    /// vLLM's fused fp8 GEMM takes them on CUDA (CUTLASS `scaled_mm`); V0 on ROCm ran them through
    /// an unfused fallback (docs/step-time.md §6, "Unfused fp8 on ROCm V0").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_row_scales: bool,
    /// The routed experts load through vLLM's `Mxfp4MoEMethod` (`quant_method: mxfp4`, gpt-oss),
    /// whose kernels pad the expert dimensions at load
    /// ([`ModelConfig::mxfp4_expert_padding_bytes_per_gpu`], docs/capacity.md "MXFP4 expert padding").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mxfp4_moe: bool,
}

impl CheckpointDtypes {
    /// True when the checkpoint's linear layers outside the routed experts are stored in fp8
    /// (vLLM's `Fp8Config.is_checkpoint_fp8_serialized`): `--quantization fp8` then reads the
    /// checkpoint's own fp8 weights instead of quantizing at load.
    pub fn is_fp8_serialized(&self) -> bool {
        self.dense == DType::Fp8
    }

    /// True when some linear layers are stored below 16 bits (the checkpoint carries a
    /// `quantization_config`).
    pub fn is_quantized(&self) -> bool {
        let wide = |d: DType| matches!(d, DType::Bf16 | DType::F16 | DType::F32);
        !(wide(self.dense) && wide(self.experts) && self.attention.is_none_or(wide))
    }

    /// The precision vLLM serves this checkpoint at when asked for `prec`
    /// (docs/search.md "Weight precision"), or why it cannot:
    /// - `checkpoint`, and a precision the checkpoint already stores every linear layer in
    ///   (bf16 for a 16-bit checkpoint, fp8 for an fp8-serialized one, fp4 / int4 / int8 for a
    ///   checkpoint quantized to it throughout), are the checkpoint itself: `Checkpoint`;
    /// - an unquantized checkpoint takes fp8 online (`--quantization fp8`: `Fp8Config` with
    ///   `is_checkpoint_fp8_serialized = False` quantizes the weights at load), and bf16 from an
    ///   fp32 checkpoint (`--dtype bfloat16`);
    /// - vLLM has no online path from bf16 to fp4, int4 or int8 weights (those are checkpoints
    ///   quantized offline: ModelOpt NVFP4, AWQ, GPTQ), never dequantizes a quantized
    ///   checkpoint's linear layers to bf16, and refuses a `--quantization` other than the
    ///   checkpoint's own `quantization_config` (`ModelConfig._verify_quantization`).
    ///
    /// Whether the GPU runs the precision is [`crate::deploy::Deployment::new`]'s rule.
    pub fn serving_precision(&self, prec: WeightPrecision) -> Result<WeightPrecision, String> {
        let linear = [
            self.dense,
            self.experts,
            self.attention.unwrap_or(self.dense),
        ];
        let all = |f: &dyn Fn(DType) -> bool| linear.iter().all(|d| f(*d));
        let own = match prec {
            WeightPrecision::Checkpoint => true,
            WeightPrecision::Bf16 => all(&|d| matches!(d, DType::Bf16 | DType::F16)),
            WeightPrecision::Fp8 => self.is_fp8_serialized(),
            WeightPrecision::Fp4 => all(&|d| matches!(d, DType::Nvfp4 | DType::Mxfp4)),
            WeightPrecision::Int4 => all(&|d| d == DType::Int4),
            WeightPrecision::Int8 => all(&|d| d == DType::Int8),
        };
        if own {
            return Ok(WeightPrecision::Checkpoint);
        }
        let stored = if linear[0] == linear[1] && linear[1] == linear[2] {
            linear[0].to_string()
        } else {
            format!(
                "{} dense, {} experts, {} attention",
                linear[0], linear[1], linear[2]
            )
        };
        if !self.is_quantized() {
            return match prec {
                WeightPrecision::Fp8 | WeightPrecision::Bf16 => Ok(prec),
                _ => Err(format!(
                    "the checkpoint stores {stored} weights and vLLM quantizes online only to fp8 (--quantization fp8); {} weights need a checkpoint quantized offline (e.g. NVFP4, AWQ or GPTQ): give that checkpoint as the model",
                    prec.name()
                )),
            };
        }
        Err(match prec {
            WeightPrecision::Bf16 => format!(
                "the checkpoint is quantized ({stored}) and vLLM does not dequantize its weights to bf16; give the bf16 checkpoint as the model"
            ),
            _ => format!(
                "the checkpoint is quantized ({stored}) and vLLM serves it only with its own quantization_config (another --quantization is refused); {} weights need another checkpoint",
                prec.name()
            ),
        })
    }
}

/// A validated model architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Hugging Face id or user label.
    pub name: String,
    pub family: ModelFamily,
    pub hidden_size: u64,
    pub vocab_size: u64,
    /// Decoder layers, excluding MTP layers.
    pub num_layers: u32,
    /// Multi-token-prediction layers (`num_nextn_predict_layers`).
    pub num_mtp_layers: u32,
    pub attention: AttentionSpec,
    /// One entry per decoder layer.
    pub layers: Vec<LayerSpec>,
    pub moe: Option<MoeSpec>,
    /// Intermediate size of the dense MLP layers (0 when every layer is MoE).
    pub dense_intermediate_size: u64,
    pub tie_word_embeddings: bool,
    pub max_position_embeddings: u64,
    pub checkpoint: CheckpointDtypes,
    /// DeepSeek-V4 hash-routed MoE layers (`num_hash_layers`): their router is a token-id table.
    pub num_hash_layers: u32,
    /// DeepSeek sparse attention indexer (DeepSeek-V3.2, GLM-5), on MLA models.
    #[serde(default)]
    pub sparse_indexer: Option<SparseIndexer>,
    /// Gated DeltaNet shape of the [`LayerAttn::Linear`] layers (Qwen3.5).
    #[serde(default)]
    pub linear_attention: Option<LinearAttention>,
    /// Full-attention layers gate their output with a sigmoid of a second query-sized projection
    /// (`attn_output_gate`, Qwen3.5): q_proj is twice as wide.
    #[serde(default)]
    pub attn_output_gate: bool,
    /// The vision encoder of a multimodal checkpoint whose layout is known (Qwen3-VL's, which
    /// Qwen3.5 uses); `None` for text-only models and unknown encoders.
    #[serde(default)]
    pub vision_tower: Option<VisionTower>,
    /// Notes on assumptions made while parsing (shown to the user).
    pub notes: Vec<String>,
}

/// The vision encoder's parameters as vLLM builds it (`Qwen3_VisionTransformer` in
/// vllm/model_executor/models/qwen3_vl.py; docs/models.md "Vision encoder"). vLLM loads it
/// unless every modality it serves (image and video) is limited to 0 (`--language-model-only`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VisionTower {
    /// Weights and biases of the column-parallel linears and weights of the row-parallel ones:
    /// split over the TP ranks (vLLM's default `mm_encoder_tp_mode` "weights").
    pub sharded_params: u64,
    /// Patch and position embeddings, norms and row-parallel biases: on every GPU.
    pub replicated_params: u64,
}

impl VisionTower {
    pub fn total_params(&self) -> u64 {
        self.sharded_params + self.replicated_params
    }

    /// Bytes on one GPU of a TP group of `tp` ranks at `bytes_per_param` (the model dtype).
    pub fn bytes_per_gpu(&self, tp: u32, bytes_per_param: u64) -> u64 {
        (self.sharded_params.div_ceil(u64::from(tp.max(1))) + self.replicated_params)
            .saturating_mul(bytes_per_param)
    }
}

/// Parameter counts by tensor group. `total` excludes MTP layers (published figures do too);
/// `mtp` lists them separately.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamCounts {
    /// All parameters except MTP.
    pub total: u64,
    /// Parameters one token touches (routed experts counted at top-k), excluding MTP.
    pub active: u64,
    pub embedding: u64,
    pub lm_head: u64,
    pub attention: u64,
    pub dense_mlp: u64,
    pub routed_experts: u64,
    pub shared_experts: u64,
    pub router: u64,
    pub norms: u64,
    /// MTP layers (not in `total`).
    pub mtp: u64,
    /// Anything else (attention sinks, DeepSeek-V4 hyper-connection mixers, hash-routing tables).
    pub other: u64,
}

/// Tensor group for weight sizing and sharding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TensorGroup {
    Embedding,
    LmHead,
    /// Attention projections sharded by TP (q/k/v/o, MLA up-projections).
    Attention,
    /// Attention tensors every TP rank holds whole (MLA q_a/kv_a down-projections, DSV4 compressor/indexer down-projections).
    AttentionReplicated,
    DenseMlp,
    RoutedExperts,
    SharedExperts,
    Router,
    Norms,
    Other,
}

/// Bytes of one tensor group.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightGroup {
    pub group: TensorGroup,
    pub params: u64,
    pub dtype: DType,
    /// Element bytes (for MXFP4/NVFP4 this includes their microscales, see [`DType::bytes_per_element`]).
    pub bytes: crate::units::Bytes,
    /// fp8 block-scale bytes (fp32 per `fp8_block` block), 0 otherwise.
    pub scale_bytes: crate::units::Bytes,
}

/// Weight bytes of the whole model (one replica, MTP excluded).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightBytes {
    pub groups: Vec<WeightGroup>,
    /// Sum of `bytes + scale_bytes` over groups.
    pub total: crate::units::Bytes,
    /// Bytes of the MTP layers (loaded only when MTP speculative decoding is on; not in `total`).
    pub mtp: crate::units::Bytes,
}

/// Matmul FLOPs (2 x MACs) per token for the whole model, by how a roofline shards them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinearFlops {
    /// Attention projections that TP shards (q/k/v/o, MLA up-projections, DSV4 grouped O).
    pub attention: f64,
    /// Attention projections every TP rank computes whole (MLA q_a/kv_a, DSV4 compressor + indexer projections).
    pub attention_replicated: f64,
    pub dense_mlp: f64,
    /// Routed experts at top-k.
    pub routed_experts: f64,
    pub shared_experts: f64,
    pub router: f64,
    pub lm_head: f64,
    /// DeepSeek-V4 hyper-connection mixing matmuls (replicated, tiny).
    pub other: f64,
}

impl LinearFlops {
    /// Sum of all fields.
    pub fn total(&self) -> f64 {
        self.attention
            + self.attention_replicated
            + self.dense_mlp
            + self.routed_experts
            + self.shared_experts
            + self.router
            + self.lm_head
            + self.other
    }
}

impl ModelConfig {
    /// Parses a Hugging Face `config.json`. `name` is the HF id or a user label.
    pub fn from_hf_json(name: &str, json: &str) -> Result<ModelConfig, ModelError> {
        let m = parse::from_hf_json(name, json)?;
        m.check_size()?;
        Ok(m)
    }

    /// Refuses a config whose dimensions are each in range but multiply to more parameters than
    /// any model ([`crate::bounds::MODEL_PARAMS_MAX`]), before any integer parameter count could
    /// overflow. The estimate (f64) is an upper bound: per layer `4 h^2` attention plus
    /// `3 h x` (dense FFN, and every routed and shared expert), plus `2 h V` embeddings.
    fn check_size(&self) -> Result<(), ModelError> {
        let h = self.hidden_size as f64;
        let mut ffn = 3.0 * h * self.dense_intermediate_size as f64;
        if let Some(moe) = &self.moe {
            ffn += 3.0
                * h
                * (moe.num_experts as f64 * moe.moe_intermediate_size as f64
                    + moe.num_shared_experts.max(1) as f64 * moe.shared_intermediate_size as f64);
        }
        let layers = (self.num_layers as f64) + self.num_mtp_layers as f64;
        let est = layers * (4.0 * h * h + ffn) + 2.0 * h * self.vocab_size as f64;
        if !est.is_finite() || est > crate::bounds::MODEL_PARAMS_MAX {
            return Err(ModelError::InvalidField {
                field: "hidden_size".into(),
                value: self.hidden_size.to_string(),
                reason: format!(
                    "the dimensions (hidden_size {}, vocab_size {}, {} layers, FFN sizes) add up to about {} parameters, more than {} (no model is that large); check the config.json",
                    self.hidden_size,
                    self.vocab_size,
                    self.num_layers,
                    crate::bounds::fmt_num(est),
                    crate::bounds::fmt_num(crate::bounds::MODEL_PARAMS_MAX)
                ),
            });
        }
        Ok(())
    }

    /// The model family of docs/accuracy.md's per-family tables: `hybrid` (linear-attention
    /// layers: Qwen3.5's Gated DeltaNet), `sparse` (DeepSeek sparse attention's indexer: V3.2,
    /// GLM-5), `MLA` (latent attention: DeepSeek-R1/V3), `MoE` (routed experts), else `dense`,
    /// tested in that order.
    pub fn accuracy_family(&self) -> &'static str {
        if self.linear_attention.is_some() {
            "hybrid"
        } else if self.sparse_indexer.is_some() {
            "sparse"
        } else if matches!(self.attention, AttentionSpec::Mla { .. }) {
            "MLA"
        } else if self.moe.is_some() {
            "MoE"
        } else {
            "dense"
        }
    }

    /// Number of MoE decoder layers (MTP excluded).
    pub fn num_moe_layers(&self) -> u32 {
        self.layers
            .iter()
            .filter(|l| l.ffn == LayerFfn::Moe)
            .count() as u32
    }

    /// Number of decoder layers whose attention is latent (MLA: DeepSeek-V2/V3, Kimi-K2; with
    /// DeepSeek sparse attention's indexer: DeepSeek-V3.2, GLM-5; DeepSeek-V4's compressed MQA):
    /// every layer that is not linear attention, for those attention kinds; 0 for GQA models.
    pub fn num_latent_attention_layers(&self) -> u32 {
        match self.attention {
            AttentionSpec::Gqa { .. } => 0,
            AttentionSpec::Mla { .. } | AttentionSpec::DeepseekV4 { .. } => {
                self.layers
                    .iter()
                    .filter(|l| l.attn != LayerAttn::Linear)
                    .count() as u32
            }
        }
    }

    /// Decoder layers whose attention all-reduces a normalisation statistic over the TP group
    /// besides the layer's output: MiniMax-M2's per-layer QK-norm normalises the whole q and k
    /// projections, which TP shards, so each layer all-reduces the two variances
    /// (`MiniMaxText01RMSNormTP.forward_qk`, vllm/model_executor/layers/mamba/linear_attn.py: one
    /// `tensor_model_parallel_all_reduce` of `[q_var, k_var]` per layer). 0 for other models.
    pub fn num_tp_norm_allreduce_layers(&self) -> u32 {
        if self.family == ModelFamily::MiniMaxM2 {
            self.num_layers
        } else {
            0
        }
    }

    /// Number of linear-attention (Gated DeltaNet) decoder layers.
    pub fn num_linear_attention_layers(&self) -> u32 {
        self.layers
            .iter()
            .filter(|l| l.attn == LayerAttn::Linear)
            .count() as u32
    }

    /// Number of dense-FFN decoder layers (MTP excluded).
    pub fn num_dense_layers(&self) -> u32 {
        self.num_layers - self.num_moe_layers()
    }
}
