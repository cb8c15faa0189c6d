//! Deployment and engine settings, by vLLM's names and defaults.
//!
//! [`RawEngineSettings`] is what a user writes (every field optional, unknown fields rejected);
//! [`EngineSettings::resolve`] fills vLLM's defaults for the GPU and model and validates.
//! [`Deployment::new`] checks the parallel layout against the model (vLLM's sharding rules) and
//! the precisions against the GPU. Defaults and rules, with their vLLM sources, are in
//! `docs/capacity.md` ("Engine defaults").

use crate::dtype::{DType, KvCacheDtype, WeightPrecision};
use crate::gpu::{find_gpu, GpuError, GpuSpec};
use crate::model::{catalog, AttentionSpec, ModelConfig, ModelError, ModelFamily};
use crate::parallel::Parallelism;
use crate::units::{Bytes, GIB};
use serde::{Deserialize, Serialize};

/// vLLM's `CUDAGraphMode` (`--compilation-config '{"cudagraph_mode": ...}'`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CudagraphMode {
    /// Full graphs for uniform decode batches, piecewise graphs for mixed batches (V1 default).
    #[default]
    FullAndPiecewise,
    /// Full graphs for decode batches only; mixed batches run eagerly.
    FullDecodeOnly,
    /// Piecewise graphs (attention outside the graph).
    Piecewise,
    /// Full graphs for every captured size.
    Full,
    /// No CUDA graphs (`--enforce-eager`).
    None,
}

impl CudagraphMode {
    /// vLLM's spelling.
    pub fn name(self) -> &'static str {
        match self {
            CudagraphMode::FullAndPiecewise => "FULL_AND_PIECEWISE",
            CudagraphMode::FullDecodeOnly => "FULL_DECODE_ONLY",
            CudagraphMode::Piecewise => "PIECEWISE",
            CudagraphMode::Full => "FULL",
            CudagraphMode::None => "NONE",
        }
    }
    /// Parses vLLM's spelling (case-insensitive).
    pub fn parse(s: &str) -> Option<CudagraphMode> {
        Some(match s.trim().to_ascii_uppercase().as_str() {
            "FULL_AND_PIECEWISE" => CudagraphMode::FullAndPiecewise,
            "FULL_DECODE_ONLY" => CudagraphMode::FullDecodeOnly,
            "PIECEWISE" => CudagraphMode::Piecewise,
            "FULL" => CudagraphMode::Full,
            "NONE" => CudagraphMode::None,
            _ => return None,
        })
    }
    /// Number of graph sets captured per size (FULL_AND_PIECEWISE captures two).
    pub fn graph_sets(self) -> u32 {
        match self {
            CudagraphMode::FullAndPiecewise => 2,
            CudagraphMode::None => 0,
            _ => 1,
        }
    }
}

/// vLLM's `UsageContext`: the defaults of `max_num_seqs` / `max_num_batched_tokens` differ between
/// the OpenAI server (`vllm serve`) and the offline `LLM` class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageContext {
    #[default]
    OpenaiApiServer,
    LlmClass,
}

/// vLLM's `--performance-mode` (vLLM >= 0.17, `VllmConfig.performance_mode`): what the engine's
/// defaults favour. `throughput` doubles the default `max_num_seqs` and `max_num_batched_tokens`
/// (each only when not stated; `EngineArgs` "If throughput mode is set, double
/// max_num_batched_tokens and max_num_seqs"); `interactivity` captures CUDA graphs at every batch
/// size up to 32 (`VllmConfig._set_cudagraph_sizes`: "Fine-grained CUDA graphs at small batch
/// sizes for minimal padding overhead"); `balanced` is vLLM's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerformanceMode {
    #[default]
    Balanced,
    Interactivity,
    Throughput,
}

impl PerformanceMode {
    /// Every mode, by vLLM's `--performance-mode` name.
    pub const ALL: [PerformanceMode; 3] = [
        PerformanceMode::Balanced,
        PerformanceMode::Interactivity,
        PerformanceMode::Throughput,
    ];

    /// vLLM's name.
    pub fn name(self) -> &'static str {
        match self {
            PerformanceMode::Balanced => "balanced",
            PerformanceMode::Interactivity => "interactivity",
            PerformanceMode::Throughput => "throughput",
        }
    }

    /// Reads vLLM's name (case-insensitive).
    pub fn parse(s: &str) -> Option<PerformanceMode> {
        let s = s.trim().to_ascii_lowercase();
        PerformanceMode::ALL.into_iter().find(|m| m.name() == s)
    }

    fn is_balanced(&self) -> bool {
        *self == PerformanceMode::Balanced
    }
}

/// The first vLLM release with `--performance-mode` (vllm-project/vllm, merged 2026-02-26,
/// released in v0.17.0).
pub const PERFORMANCE_MODE_SINCE: crate::perf::VllmVersion = crate::perf::VllmVersion {
    major: 0,
    minor: 17,
    patch: 0,
};

/// The first vLLM release that refuses to start a hybrid (Mamba / Gated DeltaNet) model whose
/// `max_num_seqs` exceeds the KV cache's blocks when its CUDA graphs include full ones
/// ("max_num_seqs (N) exceeds available Mamba cache blocks (M)"): vllm-project/vllm#38270, merged
/// at the end of March 2026, after which full decode graphs are no longer capped to the blocks
/// (#34571). Found in v0.20.0 and not in v0.17.1 (NVIDIA-NeMo/RL#2620: the same jobs failed only
/// after the bump from 0.17.1 to 0.20.0); whether v0.19 carries it is not established, so the
/// check starts at 0.20.
pub const MAMBA_BLOCKS_CHECK_SINCE: crate::perf::VllmVersion = crate::perf::VllmVersion {
    major: 0,
    minor: 20,
    patch: 0,
};

/// vLLM's `--all2all-backend` / `VLLM_ALL2ALL_BACKEND` for expert parallelism.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum All2AllBackend {
    /// All-gather + reduce-scatter over NCCL (vLLM's default): no extra buffers.
    #[default]
    AllgatherReducescatter,
    /// DeepEP high-throughput kernels: a 1 GiB NVLink buffer per rank.
    DeepepHighThroughput,
    /// DeepEP low-latency kernels: an RDMA buffer sized by DeepEP's size hint.
    DeepepLowLatency,
    /// vLLM's `naive` backend: broadcast-based all-gather for dispatch, all-reduce for combine.
    Naive,
}

impl All2AllBackend {
    /// Every backend ServeSim models, by vLLM's `--all2all-backend` name.
    pub const ALL: [All2AllBackend; 4] = [
        All2AllBackend::AllgatherReducescatter,
        All2AllBackend::DeepepHighThroughput,
        All2AllBackend::DeepepLowLatency,
        All2AllBackend::Naive,
    ];

    /// vLLM's name (`--all2all-backend`, `vllm/config/parallel.py` `All2AllBackend`).
    pub fn name(self) -> &'static str {
        match self {
            All2AllBackend::AllgatherReducescatter => "allgather_reducescatter",
            All2AllBackend::DeepepHighThroughput => "deepep_high_throughput",
            All2AllBackend::DeepepLowLatency => "deepep_low_latency",
            All2AllBackend::Naive => "naive",
        }
    }

    /// Reads vLLM's name (case-insensitive); `None` for a name ServeSim does not model.
    pub fn parse(s: &str) -> Option<All2AllBackend> {
        let s = s.trim().to_ascii_lowercase();
        All2AllBackend::ALL.into_iter().find(|b| b.name() == s)
    }
}

/// Engine settings as a user writes them. `None` = vLLM's default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEngineSettings {
    pub gpu_memory_utilization: Option<f64>,
    pub max_num_seqs: Option<i64>,
    pub max_num_batched_tokens: Option<i64>,
    pub block_size: Option<i64>,
    /// `-1` = vLLM's `--max-model-len auto` (the longest context the KV memory holds).
    pub max_model_len: Option<i64>,
    pub enable_prefix_caching: Option<bool>,
    /// `--enable-chunked-prefill` / `--no-enable-chunked-prefill` (on by default in V1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_chunked_prefill: Option<bool>,
    pub cudagraph_mode: Option<CudagraphMode>,
    pub cudagraph_capture_sizes: Option<Vec<i64>>,
    /// `--kv-cache-memory` in bytes: replaces the profiled KV budget.
    pub kv_cache_memory_bytes: Option<i64>,
    /// `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1`.
    pub estimate_cudagraphs_in_profile: Option<bool>,
    pub long_prefill_token_threshold: Option<i64>,
    pub enforce_eager: Option<bool>,
    pub usage_context: Option<UsageContext>,
    pub all2all_backend: Option<All2AllBackend>,
    /// `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`: accept `max_model_len` above the model's maximum.
    pub allow_long_max_model_len: Option<bool>,
    /// Resolve the defaults of vLLM's V0 engine (vLLM < 0.8) instead of V1's. Never written by a
    /// user: [`crate::scenario::Scenario::deployment`] sets it from the scenario's
    /// `vllm_version`, the one place the version is stated.
    #[serde(skip)]
    pub v0_defaults: bool,
    /// The release refuses to start a hybrid (Gated DeltaNet) model whose `max_num_seqs` exceeds
    /// the KV pool's blocks when its CUDA graphs include full ones ([`MAMBA_BLOCKS_CHECK_SINCE`]).
    /// Never written by a user: [`crate::scenario::Scenario::deployment`] sets it from the
    /// scenario's `vllm_version`.
    #[serde(skip)]
    pub mamba_blocks_check: bool,
    /// vLLM `--speculative-config` (its JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_config: Option<crate::speculative::RawSpeculativeConfig>,
    /// The acceptance the simulation draws from (servesim's own; docs/engine.md,
    /// "Speculative decoding").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_acceptance: Option<crate::speculative::RawSpecAcceptance>,
    /// vLLM `--kv-transfer-config` (its JSON object): the CPU KV offload tier and stacked
    /// connectors (`offload.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_transfer_config: Option<crate::offload::RawKvTransferConfig>,
    /// Host-link bytes per second per GPU for the CPU tier (default: the GPU's link,
    /// `offload::host_link_for`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link_gb_s: Option<f64>,
    /// Host memory of one node (GB), which bounds the CPU tier (default: the system table,
    /// `offload::host_memory_for`; required for a CPU tier on a GPU the table lacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_memory_gb_per_node: Option<f64>,
    /// vLLM `--language-model-only` (or `--limit-mm-per-prompt` 0 for image and video): a
    /// multimodal checkpoint's vision encoder is not loaded (docs/capacity.md "Weights").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_model_only: Option<bool>,
    /// vLLM `--mm-encoder-tp-mode data` (`true`) or `weights` (`false`, the default): with
    /// `data` every TP rank holds the whole vision encoder and encodes its own images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mm_encoder_data_parallel: Option<bool>,
    /// vLLM V0's `--num-scheduler-steps` (multi-step scheduling; default 1 = off). Only a V0
    /// `vllm_version` (< 0.8) has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_scheduler_steps: Option<i64>,
    /// vLLM's `--performance-mode` (vLLM >= 0.17; `None` = `balanced`, vLLM's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub performance_mode: Option<PerformanceMode>,
}

/// Engine settings with every default resolved. Counts are positive.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineSettings {
    pub gpu_memory_utilization: f64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub block_size: u32,
    pub max_model_len: u64,
    /// `--max-model-len auto` / `-1`: `max_model_len` starts at the model's maximum and
    /// [`Deployment::auto_fit_max_model_len`] lowers it to what the KV memory holds.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub max_model_len_auto: bool,
    pub enable_prefix_caching: bool,
    /// Off: a prompt is prefilled whole in one step or waits (docs/engine.md).
    pub enable_chunked_prefill: bool,
    pub cudagraph_mode: CudagraphMode,
    /// Sorted batch sizes graphs are captured for (empty when eager).
    pub cudagraph_capture_sizes: Vec<u64>,
    pub kv_cache_memory_bytes: Option<Bytes>,
    pub estimate_cudagraphs_in_profile: bool,
    /// 0 = off (vLLM's default).
    pub long_prefill_token_threshold: u64,
    pub enforce_eager: bool,
    pub usage_context: UsageContext,
    pub all2all_backend: All2AllBackend,
    /// The defaults are vLLM V0's (`RawEngineSettings::v0_defaults`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub v0_defaults: bool,
    /// `RawEngineSettings::mamba_blocks_check`: `max_num_seqs` above the KV pool's blocks stops
    /// a hybrid model's start-up (`capacity`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mamba_blocks_check: bool,
    /// vLLM V0's `max_seq_len_to_capture` (8192): a decode batch holding a longer sequence runs
    /// without its CUDA graph. `None` in V1, which has no such limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_seq_len_to_capture: Option<u64>,
    /// Speculative decoding (`None` = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<crate::speculative::SpeculativeSettings>,
    /// `--kv-transfer-config` (`None` = no connector).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_transfer: Option<crate::offload::KvTransferSettings>,
    /// Host-link override, bytes per second per GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_link_bytes_per_s: Option<u64>,
    /// Host memory per node, bytes (stated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_memory_bytes_per_node: Option<u64>,
    /// The vision encoder is not loaded (`--language-model-only`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub language_model_only: bool,
    /// V0 multi-step scheduling: steps per scheduling round (1 = off).
    #[serde(skip_serializing_if = "is_one")]
    pub num_scheduler_steps: u32,
    /// `--mm-encoder-tp-mode data`: the vision encoder whole on every TP rank.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mm_encoder_data_parallel: bool,
    /// `--performance-mode` (its effects are already in the batch limits and capture sizes).
    #[serde(skip_serializing_if = "PerformanceMode::is_balanced")]
    pub performance_mode: PerformanceMode,
    /// Which defaults were filled and why (shown to the user).
    pub notes: Vec<String>,
}

/// Errors of deployment and engine settings; each names the field and the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DeployError {
    #[error("`{field}` = {value} is invalid: {fix}")]
    InvalidField {
        field: &'static str,
        value: String,
        fix: String,
    },
    #[error("`{field}` = {value} does not fit the model: {fix}")]
    Parallelism {
        field: &'static str,
        value: String,
        fix: String,
    },
    #[error("`{field}` = {value} is not supported here: {fix}")]
    Unsupported {
        field: &'static str,
        value: String,
        fix: String,
    },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

impl DeployError {
    /// The field the error is about (`model` / `gpu` for the wrapped errors).
    pub fn field(&self) -> &'static str {
        match self {
            DeployError::InvalidField { field, .. }
            | DeployError::Parallelism { field, .. }
            | DeployError::Unsupported { field, .. } => field,
            DeployError::Model(_) => "model",
            DeployError::Gpu(_) => "gpu",
        }
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

fn invalid(field: &'static str, value: impl ToString, fix: impl Into<String>) -> DeployError {
    DeployError::InvalidField {
        field,
        value: value.to_string(),
        fix: fix.into(),
    }
}

/// The upper bound of a positive engine setting (docs/scenario.md "Bounds"): token counts and
/// sequence counts; sizes in bytes are checked against the GPU where they are used.
fn engine_bound(field: &str) -> Option<crate::bounds::Bound> {
    match field {
        "max_num_seqs" => Some(crate::bounds::MAX_NUM_SEQS),
        "max_num_batched_tokens" | "max_model_len" | "long_prefill_token_threshold" => {
            Some(crate::bounds::TOKENS)
        }
        _ => None,
    }
}

fn pos_int(field: &'static str, v: Option<i64>) -> Result<Option<u64>, DeployError> {
    match v {
        None => Ok(None),
        Some(x) if x > 0 => {
            if let Some(b) = engine_bound(field) {
                b.check_u64(x as u64)
                    .map_err(|fix| invalid(field, x, fix))?;
            }
            Ok(Some(x as u64))
        }
        Some(x) if field == "max_model_len" => Err(invalid(
            field,
            x,
            "must be a positive integer, or -1 (vLLM's auto: the longest context the KV memory holds)",
        )),
        Some(x) => Err(invalid(field, x, "must be a positive integer")),
    }
}

/// vLLM V0's default `max_num_seqs` (`EngineArgs.max_num_seqs`, vLLM < 0.8).
pub const V0_MAX_NUM_SEQS: u64 = 256;
/// V0 turns chunked prefill on by default above this `max_model_len` (32K).
pub const V0_LONG_CONTEXT: u64 = 32_768;
/// V0's default token budget with chunked prefill (`SchedulerConfig`, one scheduler step).
pub const V0_CHUNKED_BUDGET: u64 = 512;
/// V0's smallest default budget without chunked prefill (`max(max_model_len, 2048)`).
pub const V0_MIN_BUDGET: u64 = 2048;
/// V0's `max_seq_len_to_capture` (`EngineArgs`): the longest sequence a CUDA graph serves.
pub const V0_MAX_SEQ_LEN_TO_CAPTURE: u64 = 8192;

/// vLLM's default `max_num_batched_tokens` / `max_num_seqs` (`EngineArgs.get_batch_defaults`,
/// vLLM >= 0.10): GPUs with >= 70 GiB whose name does not contain "a100" get the large values.
pub fn default_batch_limits(gpu: &GpuSpec, ctx: UsageContext) -> (u64, u64) {
    let big = gpu.memory_visible.get() >= 70 * GIB
        && !gpu.id.to_ascii_lowercase().contains("a100")
        && !gpu.name.to_ascii_lowercase().contains("a100");
    match (big, ctx) {
        (true, UsageContext::OpenaiApiServer) => (8192, 1024),
        (true, UsageContext::LlmClass) => (16384, 1024),
        (false, UsageContext::OpenaiApiServer) => (2048, 256),
        (false, UsageContext::LlmClass) => (8192, 256),
    }
}

/// vLLM's default CUDA-graph capture sizes (`VllmConfig._set_cudagraph_sizes`): `[1, 2, 4]`,
/// then every 8 up to 248, then every 16 from 256, up to `min(2 * max_num_seqs, 512,
/// max_num_batched_tokens)`; `max_num_batched_tokens` itself is added when it is below the cap.
pub fn default_capture_sizes(max_num_seqs: u64, max_num_batched_tokens: u64) -> Vec<u64> {
    default_capture_sizes_q(max_num_seqs, max_num_batched_tokens, 1)
}

/// vLLM V0's CUDA-graph batch sizes (`_BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in
/// range(1, 33)]`) up to `_get_max_graph_batch_size(max_num_seqs)`: `max_num_seqs` padded as
/// `_get_graph_batch_size` pads a batch (1, 2, 4, then multiples of 8), at most 256.
pub fn v0_capture_sizes(max_num_seqs: u64) -> Vec<u64> {
    let cap = match max_num_seqs {
        0..=2 => max_num_seqs.max(1),
        3..=4 => 4,
        n => n.div_ceil(8).saturating_mul(8).min(256),
    };
    [1, 2, 4]
        .into_iter()
        .chain((8..=256).step_by(8))
        .filter(|&s| s <= cap)
        .collect()
}

/// [`default_capture_sizes`] with decode query length `q` (`1 + num_speculative_tokens`):
/// the cap is `min(2 * max_num_seqs * q, 512, max_num_batched_tokens)` (vLLM
/// `VllmConfig._set_cudagraph_sizes`, `decode_query_len`).
pub fn default_capture_sizes_q(max_num_seqs: u64, max_num_batched_tokens: u64, q: u64) -> Vec<u64> {
    capture_sizes(
        max_num_seqs,
        max_num_batched_tokens,
        q,
        PerformanceMode::Balanced,
    )
}

/// [`default_capture_sizes_q`] under a `--performance-mode`: `interactivity` starts with every
/// size from 1 to `min(cap, 32)` instead of `[1, 2, 4]` (vLLM `VllmConfig._set_cudagraph_sizes`);
/// the other modes capture the default sizes.
pub fn capture_sizes(
    max_num_seqs: u64,
    max_num_batched_tokens: u64,
    q: u64,
    mode: PerformanceMode,
) -> Vec<u64> {
    let cap = (2 * max_num_seqs * q).min(512).min(max_num_batched_tokens);
    let mut v: Vec<u64> = if mode == PerformanceMode::Interactivity {
        (1..=cap.min(32)).collect()
    } else {
        [1, 2, 4].into_iter().filter(|&s| s <= cap).collect()
    };
    if cap >= 8 {
        v.extend((8..(cap + 1).min(256)).step_by(8));
    }
    if cap >= 256 {
        v.extend((256..=cap).step_by(16));
    }
    if max_num_batched_tokens <= cap && !v.contains(&max_num_batched_tokens) {
        v.push(max_num_batched_tokens);
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// vLLM's KV block size for this model on this GPU when `--block-size` is not given:
/// 256 for DeepSeek-V4 (the recipes' value; FlashMLA fp8_ds_mla needs a common size),
/// 128 for MLA on Blackwell (CUTLASS MLA backend), 64 for MLA elsewhere (FlashMLA),
/// 16 otherwise (`CacheConfig` default on CUDA/ROCm).
pub fn default_block_size(model: &ModelConfig, gpu: &GpuSpec) -> (u32, &'static str) {
    match model.attention {
        AttentionSpec::DeepseekV4 { .. } => (
            256,
            "block_size 256: DeepSeek-V4 recipes use --block-size 256 (FlashMLA fp8_ds_mla and the FP8 indexer need a common block size)",
        ),
        AttentionSpec::Mla { .. } if gpu.generation.is_blackwell() => (
            128,
            "block_size 128: vLLM forces 128 for the CUTLASS MLA backend it picks on Blackwell",
        ),
        AttentionSpec::Mla { .. } => (
            64,
            "block_size 64: vLLM forces 64 for the FlashMLA backend (MLA models)",
        ),
        AttentionSpec::Gqa { .. } => (16, "block_size 16: vLLM's CacheConfig default on CUDA/ROCm"),
    }
}

impl EngineSettings {
    /// Resolves vLLM's defaults for `gpu` and `model` and validates every field.
    pub fn resolve(
        raw: &RawEngineSettings,
        model: &ModelConfig,
        gpu: &GpuSpec,
    ) -> Result<EngineSettings, DeployError> {
        let mut notes = Vec::new();
        let util = raw.gpu_memory_utilization.unwrap_or(0.9);
        if !(util.is_finite() && util > 0.0 && util <= 1.0) {
            return Err(invalid(
                "gpu_memory_utilization",
                util,
                "must be in (0, 1] (vLLM's default is 0.9)",
            ));
        }
        let ctx = raw.usage_context.unwrap_or_default();
        let v0 = raw.v0_defaults;
        let mode = raw.performance_mode.unwrap_or_default();
        if v0 && raw.performance_mode.is_some() {
            return Err(invalid(
                "performance_mode",
                mode.name(),
                "vLLM's V0 engine (vllm_version < 0.8) has no --performance-mode (added in vLLM 0.17); remove it",
            ));
        }
        let (def_mnbt, def_seqs) = default_batch_limits(gpu, ctx);
        // vLLM `EngineArgs`: "If throughput mode is set, double max_num_batched_tokens and
        // max_num_seqs" (each default only; a stated value stays).
        let doubled = mode == PerformanceMode::Throughput;
        let (def_mnbt, def_seqs) = if doubled {
            (def_mnbt * 2, def_seqs * 2)
        } else {
            (def_mnbt, def_seqs)
        };
        let by_mode = if doubled {
            ", doubled by --performance-mode throughput"
        } else {
            ""
        };
        let max_num_seqs = match pos_int("max_num_seqs", raw.max_num_seqs)? {
            Some(v) => v,
            None if v0 => {
                notes.push(format!(
                    "max_num_seqs {V0_MAX_NUM_SEQS}: vLLM V0's default (vllm_version < 0.8, EngineArgs.max_num_seqs)"
                ));
                V0_MAX_NUM_SEQS
            }
            None => {
                notes.push(format!(
                    "max_num_seqs {def_seqs}: vLLM's default for {} in the {} context{by_mode}",
                    gpu.id,
                    ctx_name(ctx)
                ));
                def_seqs
            }
        };
        // The budget's default depends on max_model_len (chunked prefill off), resolved below;
        // its note keeps its place in the list.
        let mnbt_note_at = notes.len();
        let block_size = match pos_int("block_size", raw.block_size)? {
            Some(v) if v > 1 << 20 => {
                return Err(invalid("block_size", v, "must be at most 1,048,576 tokens"))
            }
            Some(v) => v as u32,
            None => {
                let (b, why) = default_block_size(model, gpu);
                notes.push(why.to_string());
                b
            }
        };
        let allow_long = raw.allow_long_max_model_len.unwrap_or(false);
        // vLLM's `-1` / `auto` (`ModelConfig.max_model_len`, `ge=-1`): the engine is configured
        // with the model's maximum, and the KV sizing at start-up lowers it when one request of
        // that length does not fit (`_auto_fit_max_model_len`, vllm/v1/core/kv_cache_utils.py).
        let max_model_len_auto = raw.max_model_len == Some(-1);
        let stated_len = if max_model_len_auto {
            None
        } else {
            raw.max_model_len
        };
        let max_model_len = match pos_int("max_model_len", stated_len)? {
            Some(v) => {
                if v > model.max_position_embeddings && !allow_long {
                    return Err(invalid(
                        "max_model_len",
                        v,
                        format!(
                            "the model's max_position_embeddings is {}; vLLM refuses a longer max_model_len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (allow_long_max_model_len); lower it to at most {}",
                            model.max_position_embeddings, model.max_position_embeddings
                        ),
                    ));
                }
                v
            }
            None if max_model_len_auto => model.max_position_embeddings,
            None => {
                notes.push(format!(
                    "max_model_len {}: the model's max_position_embeddings",
                    model.max_position_embeddings
                ));
                model.max_position_embeddings
            }
        };
        if let Err(fix) = crate::bounds::TOKENS.check_u64(max_model_len) {
            return Err(invalid(
                "max_model_len",
                max_model_len,
                format!("{fix} (the model's max_position_embeddings is larger: set max_model_len)"),
            ));
        }
        let speculative_stated = raw.speculative_config.is_some();
        let enable_chunked_prefill = match raw.enable_chunked_prefill {
            Some(b) => b,
            None if v0 => {
                // V0 `EngineArgs.create_engine_config`: on by default only for long contexts
                // ("Chunked prefill is enabled by default for models with max_model_len > 32K"),
                // and not with prefix caching or speculative decoding.
                let on = max_model_len > V0_LONG_CONTEXT
                    && raw.enable_prefix_caching != Some(true)
                    && !speculative_stated;
                notes.push(if on {
                    format!("chunked prefill on: vLLM V0 turns it on by default when max_model_len > {V0_LONG_CONTEXT}")
                } else {
                    format!("chunked prefill off: vLLM V0's default (on only when max_model_len > {V0_LONG_CONTEXT}, without prefix caching or speculative decoding)")
                });
                on
            }
            None => true,
        };
        let mnbt = match pos_int("max_num_batched_tokens", raw.max_num_batched_tokens)? {
            Some(v) => v,
            None if v0 => {
                // V0 `SchedulerConfig.__post_init__`: 512 with chunked prefill (one scheduler
                // step), otherwise max(max_model_len, 2048).
                let v = if enable_chunked_prefill {
                    V0_CHUNKED_BUDGET
                } else {
                    max_model_len.max(V0_MIN_BUDGET)
                };
                notes.insert(
                    mnbt_note_at,
                    if enable_chunked_prefill {
                        format!("max_num_batched_tokens {v}: vLLM V0's default with chunked prefill")
                    } else {
                        format!("max_num_batched_tokens {v}: vLLM V0's default without chunked prefill (max(max_model_len, {V0_MIN_BUDGET}))")
                    },
                );
                v
            }
            None if !enable_chunked_prefill && max_model_len > def_mnbt => {
                // vLLM `EngineArgs._set_default_args`: without chunked prefill the default
                // budget is raised to max_model_len so that any prompt fits one step.
                notes.insert(mnbt_note_at, format!(
                    "max_num_batched_tokens {max_model_len}: chunked prefill is off, so vLLM raises its default ({def_mnbt}) to max_model_len"
                ));
                max_model_len
            }
            None => {
                notes.insert(
                    mnbt_note_at,
                    format!(
                        "max_num_batched_tokens {def_mnbt}: vLLM's default for {} in the {} context{by_mode}",
                        gpu.id,
                        ctx_name(ctx)
                    ),
                );
                def_mnbt
            }
        };
        if mnbt < max_num_seqs {
            return Err(invalid(
                "max_num_batched_tokens",
                mnbt,
                format!(
                    "vLLM requires max_num_batched_tokens >= max_num_seqs ({max_num_seqs}); raise it or lower max_num_seqs"
                ),
            ));
        }
        if !enable_chunked_prefill && mnbt < max_model_len {
            // vLLM `SchedulerConfig._verify_args`.
            return Err(invalid(
                "max_num_batched_tokens",
                mnbt,
                format!(
                    "with chunked prefill off (enable_chunked_prefill = false) vLLM requires max_num_batched_tokens >= max_model_len ({max_model_len}): raise it to {max_model_len}, lower max_model_len, or turn chunked prefill on"
                ),
            ));
        }
        let enforce_eager = raw.enforce_eager.unwrap_or(false);
        let cudagraph_mode = if enforce_eager {
            if matches!(raw.cudagraph_mode, Some(m) if m != CudagraphMode::None) {
                return Err(invalid(
                    "cudagraph_mode",
                    raw.cudagraph_mode.map(|m| m.name()).unwrap_or_default(),
                    "enforce_eager turns CUDA graphs off; drop one of the two",
                ));
            }
            CudagraphMode::None
        } else {
            match raw.cudagraph_mode {
                Some(m) => m,
                None if v0 => {
                    // V0's model runner replays a graph only for a batch without prefill
                    // (`prefill_metadata is None`); prefill and mixed steps run eagerly.
                    notes.push(format!("cudagraph_mode FULL_DECODE_ONLY: vLLM V0 captures CUDA graphs for decode-only batches; steps with a prefill, or with a sequence longer than max_seq_len_to_capture {V0_MAX_SEQ_LEN_TO_CAPTURE}, run eagerly"));
                    CudagraphMode::FullDecodeOnly
                }
                None => CudagraphMode::default(),
            }
        };
        let cudagraph_capture_sizes = if cudagraph_mode == CudagraphMode::None {
            Vec::new()
        } else if let Some(sizes) = &raw.cudagraph_capture_sizes {
            let mut v = Vec::with_capacity(sizes.len());
            for &s in sizes {
                if s <= 0 {
                    return Err(invalid(
                        "cudagraph_capture_sizes",
                        s,
                        "every size must be a positive integer",
                    ));
                }
                // vLLM drops sizes above max_num_batched_tokens.
                if s as u64 <= mnbt {
                    v.push(s as u64);
                }
            }
            v.sort_unstable();
            v.dedup();
            if v.is_empty() {
                return Err(invalid(
                    "cudagraph_capture_sizes",
                    format!("{sizes:?}"),
                    format!("no size is <= max_num_batched_tokens ({mnbt}); give smaller sizes"),
                ));
            }
            v
        } else if v0 {
            v0_capture_sizes(max_num_seqs)
        } else {
            if mode == PerformanceMode::Interactivity {
                notes.push("CUDA graphs captured at every batch size up to 32: --performance-mode interactivity (vLLM VllmConfig._set_cudagraph_sizes)".into());
            }
            capture_sizes(max_num_seqs, mnbt, 1, mode)
        };
        let speculative = crate::speculative::resolve(
            raw.speculative_config.as_ref(),
            raw.speculative_acceptance.as_ref(),
            model,
        )?;
        let mut cudagraph_capture_sizes = cudagraph_capture_sizes;
        if let (Some(sp), false) = (&speculative, cudagraph_capture_sizes.is_empty()) {
            let q = 1 + sp.num_speculative_tokens as u64;
            if raw.cudagraph_capture_sizes.is_none() {
                cudagraph_capture_sizes = capture_sizes(max_num_seqs, mnbt, q, mode);
            }
            cudagraph_capture_sizes = capture_sizes_for_spec(&cudagraph_capture_sizes, q);
            notes.push(format!(
                "speculative decoding ({}, k = {}): CUDA-graph capture sizes rounded up to multiples of {q} (vLLM adjust_cudagraph_sizes_for_spec_decode)",
                sp.method.name(),
                sp.num_speculative_tokens
            ));
        }
        let num_scheduler_steps =
            resolve_scheduler_steps(raw, v0, enable_chunked_prefill, &speculative, &mut notes)?;
        let kv_cache_memory_bytes =
            pos_int("kv_cache_memory_bytes", raw.kv_cache_memory_bytes)?.map(Bytes);
        let long_prefill_token_threshold = match raw.long_prefill_token_threshold {
            None | Some(0) => 0,
            Some(x) if x > 0 => pos_int("long_prefill_token_threshold", Some(x))?.unwrap_or(0),
            Some(x) => {
                return Err(invalid(
                    "long_prefill_token_threshold",
                    x,
                    "must be 0 (off) or a positive number of tokens",
                ))
            }
        };
        let enable_prefix_caching = match raw.enable_prefix_caching {
            Some(b) => b,
            None if v0 => {
                notes
                    .push("prefix caching off: vLLM V0's default (--enable-prefix-caching)".into());
                false
            }
            None => true,
        };
        let kv_transfer = match &raw.kv_transfer_config {
            None => None,
            Some(k) => {
                let t = crate::offload::resolve(k, block_size, enable_prefix_caching)?;
                notes.extend(t.notes.iter().cloned());
                Some(t)
            }
        };
        let host_link_bytes_per_s = match raw.host_link_gb_s {
            None => None,
            Some(g) if g.is_finite() && (0.1..=10_000.0).contains(&g) => {
                Some(libm::round(g * 1e9) as u64)
            }
            Some(g) => {
                return Err(invalid(
                    "host_link_gb_s",
                    g,
                    "give the host link's GB/s per GPU and direction, 0.1..=10000 (PCIe Gen5 x16 achieves about 53 of its 63)",
                ))
            }
        };
        let host_memory_bytes_per_node = match raw.host_memory_gb_per_node {
            None => None,
            Some(g) if g.is_finite() && (1.0..=1_000_000.0).contains(&g) => {
                Some(libm::round(g * 1e9) as u64)
            }
            Some(g) => {
                return Err(invalid(
                    "host_memory_gb_per_node",
                    g,
                    "give the node's host memory in GB, 1..=1000000 (a DGX H100 has 2048)",
                ))
            }
        };
        let mut e = EngineSettings {
            kv_transfer,
            host_link_bytes_per_s,
            host_memory_bytes_per_node,
            gpu_memory_utilization: util,
            max_num_seqs,
            max_num_batched_tokens: mnbt,
            block_size,
            max_model_len,
            max_model_len_auto,
            enable_prefix_caching,
            enable_chunked_prefill,
            cudagraph_mode,
            cudagraph_capture_sizes,
            kv_cache_memory_bytes,
            estimate_cudagraphs_in_profile: raw.estimate_cudagraphs_in_profile.unwrap_or(false),
            long_prefill_token_threshold,
            enforce_eager,
            usage_context: ctx,
            all2all_backend: raw.all2all_backend.unwrap_or_default(),
            v0_defaults: v0,
            mamba_blocks_check: raw.mamba_blocks_check,
            max_seq_len_to_capture: (v0 && cudagraph_mode != CudagraphMode::None)
                .then_some(V0_MAX_SEQ_LEN_TO_CAPTURE),
            speculative,
            language_model_only: raw.language_model_only.unwrap_or(false),
            mm_encoder_data_parallel: raw.mm_encoder_data_parallel.unwrap_or(false),
            num_scheduler_steps,
            performance_mode: mode,
            notes,
        };
        if e.v0_paged_prefill(gpu) {
            e.notes.push(
                "prefill attention at prefill_attention_paged: with chunked prefill on, vLLM V0's ROCm backend runs every prefill through its paged prefix-prefill kernel (PagedAttention.forward_prefix; docs/step-time.md §3)"
                    .into(),
            );
        }
        if e.triton_unified_prefill(model, gpu) {
            e.notes.push(format!(
                "prefill attention at prefill_attention_triton: vLLM's V1 engine runs this model's attention sinks through its Triton unified attention backend (TRITON_ATTN) on the {}, where FlashAttention-3 does not run (docs/step-time.md §3)",
                gpu.id
            ));
        }
        Ok(e)
    }

    /// Whether prefills run vLLM's Triton unified attention kernel (`TRITON_ATTN`,
    /// `kernel_unified_attention_2d`) instead of FlashAttention, so that their attention runs at
    /// `prefill_attention_triton` (docs/step-time.md §3). vLLM's V1 CUDA platform picks that
    /// backend for a model with attention sinks on any GPU from sm_80 that is neither Hopper
    /// (FlashAttention-3 implements sinks) nor sm_100 (FlashInfer first):
    /// `CudaPlatformBase.get_attn_backend_cls`, "if has_sink and not
    /// cls.is_device_capability(90): return TRITON_ATTN_VLLM_V1" (vllm/platforms/cuda.py, vLLM
    /// 0.10-0.11); vLLM's gpt-oss recipe: "GPT-OSS works on Ampere devices by default, using the
    /// `TRITON_ATTN` attention backend" (vllm-project/recipes OpenAI/GPT-OSS.md). ROCm's backend
    /// choice is its own and is not modelled here.
    pub fn triton_unified_prefill(&self, model: &ModelConfig, gpu: &GpuSpec) -> bool {
        use crate::gpu::Generation;
        !self.v0_defaults
            && gpu.vendor == crate::gpu::Vendor::Nvidia
            && matches!(
                gpu.generation,
                Generation::Ampere | Generation::Ada | Generation::BlackwellRtx
            )
            && model.family.has_attention_sinks()
    }

    /// Whether prefills run vLLM V0's paged prefix-prefill kernel (`PagedAttention.forward_prefix`,
    /// Triton `context_attention_fwd`) instead of FlashAttention, so that their attention runs at
    /// `prefill_attention_paged` (docs/step-time.md §3). V0's ROCm backend takes that path for
    /// any prefill with a block table, and V0's metadata builder gives every prefill one when
    /// chunked prefill is on (vllm/attention/backends/utils.py, `CommonMetadataBuilder
    /// ._add_seq_group`; rocm_flash_attn.py: "prefix-enabled attention"). V0's CUDA
    /// FlashAttention backend runs the same prefills through `flash_attn_varlen_func` with the
    /// block table, and V1 has one attention path for both.
    pub fn v0_paged_prefill(&self, gpu: &GpuSpec) -> bool {
        self.v0_defaults && self.enable_chunked_prefill && gpu.vendor == crate::gpu::Vendor::Amd
    }

    /// Whether fp8 linears with per-row scales (a checkpoint's
    /// [`crate::model::CheckpointDtypes::fp8_row_scales`]) run vLLM's unfused fallback, so that
    /// each such call adds `fp8_unfused_launch_s` to an eager step (docs/step-time.md §6). vLLM's
    /// `apply_fp8_linear` fuses per-row scales into CUTLASS `scaled_mm` on CUDA; ROCm has no
    /// CUTLASS, and until the row-wise `torch._scaled_mm` path (vllm-project/vllm#12501, from
    /// torch 2.7 with ROCm 6.3) it ran `torch._scaled_mm` at unit scales with an fp32 output and
    /// applied both scales afterwards ("Fallback for channelwise case, where we use unfused DQ").
    /// Applied to the V0 releases (vLLM < 0.8), whose ROCm images predate torch 2.7 (V1's
    /// piecewise graphs capture the linear layers, so its eager steps alone could show it).
    pub fn v0_unfused_fp8(&self, gpu: &GpuSpec, ck: &crate::model::CheckpointDtypes) -> bool {
        ck.fp8_row_scales && self.v0_defaults && gpu.vendor == crate::gpu::Vendor::Amd
    }
}

/// `num_scheduler_steps` resolved (1 when unset): V0 only, within [`crate::bounds::SCHEDULER_STEPS`],
/// and not with speculative decoding (vLLM V0 refuses the two together:
/// `EngineArgs.create_engine_config`: "Speculative decoding is not supported with multi-step
/// (--num-scheduler-steps > 1)").
fn resolve_scheduler_steps(
    raw: &RawEngineSettings,
    v0: bool,
    chunked: bool,
    speculative: &Option<crate::speculative::SpeculativeSettings>,
    notes: &mut Vec<String>,
) -> Result<u32, DeployError> {
    const FIELD: &str = "num_scheduler_steps";
    let Some(n) = raw.num_scheduler_steps else {
        return Ok(1);
    };
    if n < 1 {
        return Err(invalid(
            FIELD,
            n,
            "must be a positive number of steps (1 = multi-step scheduling off)",
        ));
    }
    crate::bounds::SCHEDULER_STEPS
        .check_u64(n as u64)
        .map_err(|fix| invalid(FIELD, n, fix))?;
    if n == 1 {
        return Ok(1);
    }
    if !v0 {
        return Err(DeployError::Unsupported {
            field: FIELD,
            value: n.to_string(),
            fix: "multi-step scheduling is vLLM V0's (vllm_version < 0.8); the V1 engine schedules every step. Remove it, or set a V0 vllm_version".into(),
        });
    }
    if speculative.is_some() {
        return Err(DeployError::Unsupported {
            field: FIELD,
            value: n.to_string(),
            fix: "vLLM V0 does not run speculative decoding with multi-step scheduling; drop one of the two".into(),
        });
    }
    notes.push(if chunked {
        format!("num_scheduler_steps {n}: vLLM V0 schedules once per round of {n} steps; with chunked prefill a prompt is admitted only whole at a round's start, within the budget the round's decodes leave, and a prompt longer than max_num_batched_tokens is ignored (docs/engine.md, \"V0 multi-step rounds\")")
    } else {
        format!("num_scheduler_steps {n}: vLLM V0 schedules once per round of {n} decode steps; prompts are admitted between rounds, in prefill-only steps (docs/engine.md, \"V0 multi-step rounds\")")
    });
    Ok(n as u32)
}

/// vLLM `CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`: every size rounded up to a
/// multiple of `q`, sizes above the largest dropped, duplicates removed; `[q]` when none is left
/// and `q` is within the largest size (the list is left as it is when `q` is above it).
pub fn capture_sizes_for_spec(sizes: &[u64], q: u64) -> Vec<u64> {
    let Some(&max) = sizes.last() else {
        return Vec::new();
    };
    if q <= 1 {
        return sizes.to_vec();
    }
    let mut v: Vec<u64> = sizes
        .iter()
        .map(|&s| s.div_ceil(q) * q)
        .filter(|&s| s <= max)
        .collect();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() && q <= max {
        v.push(q);
    }
    if v.is_empty() {
        return sizes.to_vec();
    }
    v
}

fn ctx_name(c: UsageContext) -> &'static str {
    match c {
        UsageContext::OpenaiApiServer => "OpenAI API server",
        UsageContext::LlmClass => "offline LLM class",
    }
}

/// A validated deployment: one model on `num_gpus` GPUs of one kind, in replicas of `tp * dp` GPUs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Deployment {
    pub model: ModelConfig,
    pub gpu: GpuSpec,
    pub par: Parallelism,
    pub num_gpus: u32,
    pub weight_precision: WeightPrecision,
    pub kv_cache_dtype: KvCacheDtype,
    pub engine: EngineSettings,
    /// Notes on defaults and on combinations vLLM runs with caveats.
    pub notes: Vec<String>,
    /// vLLM's `--enable-expert-parallel` as the scenario states it; `None` for a scenario that
    /// predates the field (its `ep` is taken as written and its DP ranks step independently,
    /// docs/topology.md "DP + EP"). Set by [`Deployment::with_expert_parallel`].
    pub enable_expert_parallel: Option<bool>,
}

/// Applies vLLM's `--enable-expert-parallel` (`enable`; `None` = not stated) to a layout:
/// `true` shards the experts over all `tp x dp` GPUs (ep = tp x dp), `false` keeps them
/// tensor-parallel (ep 1). On a dense model vLLM ignores the flag; so does this, with a note.
pub fn apply_expert_parallel(
    model: &ModelConfig,
    par: Parallelism,
    enable: Option<bool>,
) -> Result<(Parallelism, Option<String>), DeployError> {
    let g = par.tp.saturating_mul(par.dp);
    match enable {
        None => Ok((par, None)),
        Some(_) if model.moe.is_none() => Ok((
            par,
            Some(format!(
                "enable_expert_parallel has no effect: {} is dense (no experts), and vLLM ignores the flag for it too",
                model.name
            )),
        )),
        Some(true) => {
            if par.ep != 1 && par.ep != g {
                return Err(invalid(
                    "ep",
                    par.ep,
                    format!("with enable_expert_parallel true the experts are sharded over tp x dp = {g} GPUs; drop ep or set it to {g}"),
                ));
            }
            Ok((Parallelism { ep: g, ..par }, None))
        }
        Some(false) => {
            if par.ep > 1 {
                return Err(invalid(
                    "ep",
                    par.ep,
                    "enable_expert_parallel is false, so the experts are tensor-parallel (ep 1); drop ep or set enable_expert_parallel true",
                ));
            }
            Ok((par, None))
        }
    }
}

/// A deployment as a user writes it (model and GPU by name).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDeployment {
    /// Catalog id of the model.
    pub model: String,
    /// Catalog id or alias of the GPU.
    pub gpu: String,
    pub tp: Option<i64>,
    pub dp: Option<i64>,
    pub ep: Option<i64>,
    pub num_gpus: Option<i64>,
    pub weight_precision: Option<WeightPrecision>,
    pub kv_cache_dtype: Option<KvCacheDtype>,
    #[serde(default)]
    pub engine: RawEngineSettings,
}

impl RawDeployment {
    /// Looks up model and GPU in the catalogs and validates.
    pub fn resolve(&self) -> Result<Deployment, DeployError> {
        let model = catalog::load(&self.model)?;
        let gpu = find_gpu(&self.gpu)?;
        let par = parallelism_from(self.tp, self.dp, self.ep)?;
        let num_gpus = pos_int("num_gpus", self.num_gpus)?;
        let num_gpus = match num_gpus {
            Some(n) if n > u32::MAX as u64 => return Err(invalid("num_gpus", n, "too large")),
            other => other.map(|n| n as u32),
        };
        Deployment::new(
            model,
            gpu,
            par,
            num_gpus,
            self.weight_precision.unwrap_or_default(),
            self.kv_cache_dtype.unwrap_or_default(),
            &self.engine,
        )
        .map(Deployment::auto_fit_max_model_len)
    }
}

/// Builds a [`Parallelism`] from user integers (defaults 1), rejecting zero and negatives.
pub fn parallelism_from(
    tp: Option<i64>,
    dp: Option<i64>,
    ep: Option<i64>,
) -> Result<Parallelism, DeployError> {
    let get = |field: &'static str, v: Option<i64>| -> Result<u32, DeployError> {
        match pos_int(field, v)? {
            None => Ok(1),
            Some(x) if x > 4096 => Err(invalid(field, x, "must be at most 4096")),
            Some(x) => Ok(x as u32),
        }
    };
    Ok(Parallelism {
        tp: get("tp", tp)?,
        dp: get("dp", dp)?,
        ep: get("ep", ep)?,
    })
}

fn par_err(field: &'static str, value: impl ToString, fix: impl Into<String>) -> DeployError {
    DeployError::Parallelism {
        field,
        value: value.to_string(),
        fix: fix.into(),
    }
}

fn divisors_up_to(n: u64, max: u64) -> String {
    (1..=n.min(max))
        .filter(|d| n.is_multiple_of(*d))
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Deployment {
    /// Validates a deployment. `num_gpus` defaults to one replica (`tp * dp`).
    pub fn new(
        model: ModelConfig,
        gpu: GpuSpec,
        par: Parallelism,
        num_gpus: Option<u32>,
        weight_precision: WeightPrecision,
        kv_cache_dtype: KvCacheDtype,
        engine: &RawEngineSettings,
    ) -> Result<Deployment, DeployError> {
        let mut notes = Vec::new();
        for (field, v) in [("tp", par.tp), ("dp", par.dp), ("ep", par.ep)] {
            if v == 0 {
                return Err(invalid(field, 0, "must be at least 1"));
            }
        }
        let tp = par.tp as u64;
        // Attention heads.
        let (heads, kv_heads) = match &model.attention {
            AttentionSpec::Gqa {
                num_heads,
                num_kv_heads,
                ..
            } => (*num_heads as u64, Some(*num_kv_heads as u64)),
            AttentionSpec::Mla { num_heads, .. } => (*num_heads as u64, None),
            AttentionSpec::DeepseekV4 { num_heads, .. } => (*num_heads as u64, None),
        };
        if heads % tp != 0 {
            return Err(par_err(
                "tp",
                tp,
                format!(
                    "vLLM needs the {heads} attention heads of {} divisible by the tensor-parallel size; use one of: {}",
                    model.name,
                    divisors_up_to(heads, 64)
                ),
            ));
        }
        if let Some(kvh) = kv_heads {
            if tp <= kvh && kvh % tp != 0 {
                return Err(par_err(
                    "tp",
                    tp,
                    format!(
                        "{} has {kvh} KV heads: vLLM needs them divisible by TP (or TP a multiple of them, which replicates KV heads); use one of: {}",
                        model.name,
                        divisors_up_to(kvh, 64)
                    ),
                ));
            }
            if tp > kvh && !tp.is_multiple_of(kvh) {
                return Err(par_err(
                    "tp",
                    tp,
                    format!(
                        "TP {tp} exceeds the {kvh} KV heads of {} and is not a multiple of them, so vLLM cannot replicate them evenly",
                        model.name
                    ),
                ));
            }
            if tp > kvh {
                notes.push(format!(
                    "TP {tp} > {kvh} KV heads: each KV head is replicated on {} GPUs (KV per GPU does not shrink further)",
                    tp / kvh
                ));
            }
        }
        // Expert parallelism.
        match &model.moe {
            None => {
                if par.ep > 1 {
                    return Err(par_err(
                        "ep",
                        par.ep,
                        format!("{} is dense (no experts); use ep 1", model.name),
                    ));
                }
            }
            Some(moe) => {
                if par.ep > 1 {
                    if par.ep != par.tp * par.dp {
                        return Err(par_err(
                            "ep",
                            par.ep,
                            format!(
                                "vLLM's --enable-expert-parallel shards experts over all tp*dp = {} GPUs of a replica; use ep {} or ep 1",
                                par.tp * par.dp,
                                par.tp * par.dp
                            ),
                        ));
                    }
                    if moe.num_experts % par.ep != 0 {
                        return Err(par_err(
                            "ep",
                            par.ep,
                            format!(
                                "{} has {} routed experts, not divisible by ep; use an ep dividing {} (e.g. {})",
                                model.name,
                                moe.num_experts,
                                moe.num_experts,
                                divisors_up_to(moe.num_experts as u64, 128)
                            ),
                        ));
                    }
                } else if moe.moe_intermediate_size % tp != 0 {
                    return Err(par_err(
                        "tp",
                        tp,
                        format!(
                            "without expert parallelism vLLM splits each expert's intermediate size ({}) over TP; it must divide evenly, or enable ep = tp*dp",
                            moe.moe_intermediate_size
                        ),
                    ));
                }
            }
        }
        if model.dense_intermediate_size > 0 && !model.dense_intermediate_size.is_multiple_of(tp) {
            return Err(par_err(
                "tp",
                tp,
                format!(
                    "the dense MLP intermediate size {} is not divisible by TP",
                    model.dense_intermediate_size
                ),
            ));
        }
        // fp8 block-quantised checkpoints: each TP shard of a linear must hold whole blocks
        // (vLLM: "... is not divisible by weight quantization block_n").
        if let Some((block_n, _)) = model.checkpoint.fp8_block {
            if weight_precision == WeightPrecision::Checkpoint {
                let bn = block_n as u64;
                let mut shards = Vec::new();
                if model.checkpoint.dense == DType::Fp8 {
                    shards.push(("dense MLP", model.dense_intermediate_size));
                }
                if let Some(moe) = &model.moe {
                    if par.ep == 1 && model.checkpoint.experts == DType::Fp8 {
                        shards.push(("expert", moe.moe_intermediate_size));
                    }
                }
                for (what, size) in shards {
                    if size > 0 && !(size / tp).is_multiple_of(bn) {
                        return Err(par_err(
                            "tp",
                            tp,
                            format!(
                                "the {what} intermediate size {size} / TP {tp} = {} is not divisible by the checkpoint's fp8 block size {bn}, which vLLM rejects; use a smaller TP or enable expert parallelism",
                                size / tp
                            ),
                        ));
                    }
                }
            }
        }
        // GPUs.
        let per_replica = par.tp * par.dp;
        let num_gpus = num_gpus.unwrap_or(per_replica);
        if num_gpus == 0 {
            return Err(invalid("num_gpus", 0, "must be at least 1"));
        }
        if !num_gpus.is_multiple_of(per_replica) {
            return Err(par_err(
                "num_gpus",
                num_gpus,
                format!(
                    "a replica uses tp*dp = {per_replica} GPUs; num_gpus must be a multiple of it (e.g. {} or {})",
                    per_replica,
                    2 * per_replica
                ),
            ));
        }
        // Precisions vs GPU.
        if gpu.generation.is_tpu() {
            notes.push(
                "TPU: vLLM's TPU worker sizes memory differently; these figures use the CUDA/ROCm rules".into(),
            );
        }
        // At `checkpoint`, the precisions its linear layers are stored in meet the same rules
        // (an fp8 checkpoint on a GPU without fp8 is refused as `--quantization fp8` is).
        let linear = [
            model.checkpoint.dense,
            model.checkpoint.experts,
            model.checkpoint.attention.unwrap_or(model.checkpoint.dense),
        ];
        let mut stored: Vec<WeightPrecision> = Vec::new();
        if weight_precision == WeightPrecision::Checkpoint {
            for d in linear {
                let p = match d {
                    DType::Fp8 => WeightPrecision::Fp8,
                    DType::Mxfp4 | DType::Nvfp4 => WeightPrecision::Fp4,
                    DType::Int4 => WeightPrecision::Int4,
                    DType::Int8 => WeightPrecision::Int8,
                    DType::F32 | DType::Bf16 | DType::F16 => continue,
                };
                if !stored.contains(&p) {
                    stored.push(p);
                }
            }
        } else {
            stored.push(weight_precision);
        }
        let of_checkpoint = if weight_precision == WeightPrecision::Checkpoint {
            " (the checkpoint's own weights)"
        } else {
            ""
        };
        for prec in stored {
            match prec {
                WeightPrecision::Fp8 if !gpu.supports_fp8() => {
                    if gpu.generation == crate::gpu::Generation::Ampere {
                        notes.push(format!(
                        "fp8 weights{of_checkpoint} on Ampere: vLLM runs them weight-only (FP8 Marlin, W8A16); matmuls compute in bf16"
                    ));
                    } else if weight_precision == WeightPrecision::Checkpoint {
                        return Err(DeployError::Unsupported {
                        field: "weight_precision",
                        value: "checkpoint".into(),
                        fix: format!(
                            "{} stores fp8 weights and {} has no fp8 support in vLLM; give the model's bf16 checkpoint, or choose a GPU with fp8 (Ampere through FP8 Marlin, Hopper and later)",
                            model.name, gpu.id
                        ),
                    });
                    } else {
                        return Err(DeployError::Unsupported {
                            field: "weight_precision",
                            value: "fp8".into(),
                            fix: format!(
                                "{} has no fp8 support in vLLM; use bf16 or checkpoint",
                                gpu.id
                            ),
                        });
                    }
                }
                WeightPrecision::Fp4 if !gpu.supports_fp4() => {
                    notes.push(format!(
                    "fp4 weights{of_checkpoint} on {}: no fp4 tensor cores, so vLLM runs them weight-only (Marlin-style MXFP4/NVFP4 kernels dequantise to bf16); matmuls compute in bf16",
                    gpu.id
                ));
                }
                WeightPrecision::Int4 | WeightPrecision::Int8 => {
                    notes.push(format!(
                    "integer weights{of_checkpoint} (AWQ / GPTQ / W4A16 / W8A16, group 128): weight-only Marlin-style kernels; matmuls compute in bf16"
                ));
                }
                _ => {}
            }
        }
        match kv_cache_dtype {
            KvCacheDtype::Fp8DsMla
                if !matches!(
                    model.attention,
                    AttentionSpec::Mla { .. } | AttentionSpec::DeepseekV4 { .. }
                ) =>
            {
                return Err(DeployError::Unsupported {
                    field: "kv_cache_dtype",
                    value: "fp8_ds_mla".into(),
                    fix: format!(
                        "fp8_ds_mla is DeepSeek's MLA layout; {} uses GQA — use fp8 instead",
                        model.name
                    ),
                });
            }
            k if k.is_fp8() && !gpu.supports_fp8() => {
                notes.push(format!(
                    "fp8 KV cache on {}: vLLM stores the cache in fp8 and dequantises to bf16 for attention (no fp8 tensor cores)",
                    gpu.id
                ));
            }
            _ => {}
        }
        if model.family == ModelFamily::DeepseekV4
            && !kv_cache_dtype.is_fp8()
            && kv_cache_dtype != KvCacheDtype::Auto
        {
            return Err(DeployError::Unsupported {
                field: "kv_cache_dtype",
                value: kv_cache_dtype.name().into(),
                fix: "DeepSeek-V4's fp8_ds_mla KV layout supports only fp8; use fp8 (or auto)"
                    .into(),
            });
        }
        let mut engine_settings = EngineSettings::resolve(engine, &model, &gpu)?;
        if let Some((b, state, attn_token)) = model
            .hybrid_attention_block_size(kv_cache_dtype, par.tp, engine_settings.block_size)
            .map_err(DeployError::Model)?
        {
            // Resolved again with the raised block so that everything derived from it follows.
            let raw = RawEngineSettings {
                block_size: Some(b as i64),
                ..engine.clone()
            };
            let mut e = EngineSettings::resolve(&raw, &model, &gpu)?;
            e.notes.push(format!(
                "block_size {b}: vLLM raises the attention block so that one attention page ({b} tokens x {attn_token} B) holds a Gated DeltaNet layer's state ({state} B): \"Setting attention block size to {b} tokens to ensure that attention page size is >= mamba page size\""
            ));
            engine_settings = e;
        }
        let engine = engine_settings;
        if let (AttentionSpec::Mla { num_heads, .. }, Some(ix)) =
            (&model.attention, &model.sparse_indexer)
        {
            let per_rank = num_heads.div_ceil(par.tp);
            if let crate::perf::DsaKernel::FlashMlaSparse {
                head_multiple,
                prefill_peak_fraction,
                decode_peak_fraction,
            } = crate::perf::dsa_kernel(&gpu, kv_cache_dtype, per_rank)
            {
                let padded = per_rank.div_ceil(head_multiple) * head_multiple;
                notes.push(format!(
                    "DeepSeek sparse attention on FlashMLA's sparse kernels: {per_rank} query heads per rank computed as {padded}, all {} index slots per token, at {:.0} % (prefill) / {:.0} % (decode) of the bf16 peak (docs/step-time.md §3)",
                    ix.topk,
                    prefill_peak_fraction * 100.0,
                    decode_peak_fraction * 100.0
                ));
            }
        }
        if engine.v0_unfused_fp8(&gpu, &model.checkpoint)
            && model
                .weight_bytes(weight_precision)
                .groups
                .iter()
                .any(|g| g.dtype == DType::Fp8)
        {
            notes.push(
                "fp8 linears through vLLM V0's unfused fallback on ROCm: this checkpoint's per-row fp8 scales (per-channel weights, per-token activations) ran torch._scaled_mm at unit scales with an fp32 output and the scales applied after; each call adds fp8_unfused_launch_s to an eager step (docs/step-time.md §6)"
                    .into(),
            );
        }
        Ok(Deployment {
            model,
            gpu,
            par,
            num_gpus,
            weight_precision,
            kv_cache_dtype,
            engine,
            notes,
            enable_expert_parallel: None,
        })
    }

    /// The deployment with `--enable-expert-parallel` as stated (the layout must already be the
    /// one [`apply_expert_parallel`] returned), its note added.
    /// With DP + EP stated and `deepep_high_throughput`, CUDA graphs are off, as vLLM turns them
    /// off (`vllm/platforms/cuda.py`, `check_and_update_config`: "DeepEP high-throughput kernels
    /// are optimized for prefill and are incompatible with CUDA Graphs").
    pub fn with_expert_parallel(mut self, enable: Option<bool>, note: Option<String>) -> Self {
        self.enable_expert_parallel = enable;
        self.notes.extend(note);
        if self.dp_lockstep()
            && self.engine.all2all_backend == All2AllBackend::DeepepHighThroughput
            && self.engine.cudagraph_mode != CudagraphMode::None
        {
            self.engine.cudagraph_mode = CudagraphMode::None;
            self.engine.cudagraph_capture_sizes.clear();
            self.notes.push("all2all_backend deepep_high_throughput with dp > 1: CUDA graphs off (cudagraph_mode NONE), as vLLM turns them off for these kernels".into());
        }
        self
    }

    /// `--max-model-len auto`: vLLM sizes the KV cache at start-up and, when one request of the
    /// model's maximum length does not fit, lowers `max_model_len` to the longest that does
    /// (a binary search over the per-request KV bytes, `_auto_fit_max_model_len` in
    /// vllm/v1/core/kv_cache_utils.py, docs/capacity.md). Applied after every other setting is
    /// final (expert parallelism changes the buffers and the graphs); a deployment without KV
    /// memory keeps the model's maximum, and the capacity report says why it cannot start.
    pub fn auto_fit_max_model_len(mut self) -> Self {
        if !self.engine.max_model_len_auto {
            return self;
        }
        let from = self.engine.max_model_len;
        match crate::capacity::auto_fit_len(&self) {
            Some((len, avail_gib)) if len > 0 && len < from => {
                self.engine.max_model_len = len;
                self.engine.notes.push(format!(
                    "max_model_len auto: reduced from {from} to {len} to fit in available GPU memory ({avail_gib:.2} GiB available for KV cache), as vLLM's auto-fit does"
                ));
            }
            Some((len, _)) if len >= from => self.engine.notes.push(format!(
                "max_model_len auto: the model's full context length {from} fits in available GPU memory"
            )),
            _ => {}
        }
        self
    }

    /// Whether the DP ranks of a replica step in lockstep (vLLM's `DPEngineCoreProc`: a MoE
    /// model with `dp > 1`; dense DP ranks are independent engines). Only for scenarios that
    /// state `enable_expert_parallel` (older ones keep independent ranks, docs/topology.md).
    pub fn dp_lockstep(&self) -> bool {
        self.enable_expert_parallel.is_some() && self.model.moe.is_some() && self.par.dp > 1
    }

    /// Number of replicas (`num_gpus / (tp * dp)`).
    pub fn replicas(&self) -> u32 {
        self.num_gpus / (self.par.tp * self.par.dp)
    }

    /// Number of engines with their own KV cache and scheduler (`replicas * dp`).
    pub fn engines(&self) -> u32 {
        self.replicas() * self.par.dp
    }

    /// MTP modules vLLM loads as the drafter: all of the model's (`num_nextn_predict_layers`)
    /// with `method: mtp`, 0 otherwise. vLLM instantiates every one of them
    /// (`DeepSeekMultiTokenPredictor.layers`) whatever `num_speculative_tokens` is: extra draft
    /// positions rerun a layer (`spec_step_idx % num_mtp_layers`), they add no layer.
    pub fn drafter_mtp_layers(&self) -> u32 {
        match &self.engine.speculative {
            Some(sp) if sp.method == crate::speculative::SpecMethod::Mtp => sp.mtp_layers,
            _ => 0,
        }
    }

    /// The KV cache spec of one GPU of this deployment: the model's, plus the MTP drafter's
    /// layers when MTP speculative decoding is on ([`ModelConfig::kv_cache_spec_with_mtp`]).
    ///
    /// Hybrid Gated DeltaNet models with prefix caching run vLLM's mamba cache mode `align`
    /// ("Mamba cache mode is set to 'align' ... by default when prefix caching is enabled"): a
    /// request holds two state pages per layer (the running state and the last block-aligned
    /// one; `MambaSpec.max_memory_usage_bytes`), one without prefix caching (docs/capacity.md).
    pub fn kv_cache_spec(&self) -> Result<crate::model::KvCacheSpec, crate::model::ModelError> {
        let mut spec = self.model.kv_cache_spec_with_mtp(
            self.kv_cache_dtype,
            self.par.tp,
            self.engine.block_size,
            self.drafter_mtp_layers(),
        )?;
        if self.engine.enable_prefix_caching
            && self.model.num_linear_attention_layers() > 0
            && spec.per_request_fixed_bytes > 0
        {
            spec.per_request_fixed_bytes *= 2;
            spec.notes.push(
                "prefix caching on: vLLM's mamba cache mode `align` keeps two state pages per Gated DeltaNet layer and request (the running state and the last block-aligned one)".into(),
            );
        }
        Ok(spec)
    }

    /// Weight bytes of a multimodal checkpoint's vision encoder on one GPU: 0 for a text-only
    /// model, an encoder of unknown layout, or `--language-model-only` (vLLM then skips the
    /// tower, `SupportsMultiModal._mark_tower_model`); split over TP, or whole on every rank with
    /// `--mm-encoder-tp-mode data` (the tower's linears are built with `disable_tp`). Kept in the model's unquantized dtype
    /// (**A**: vLLM hands the tower the quantization config, but the FP8 re-quantizations'
    /// vision weights are not in the reference set; the unquantized size is the larger).
    pub fn vision_tower_bytes_per_gpu(&self) -> u64 {
        match &self.model.vision_tower {
            Some(v) if !self.engine.language_model_only => {
                let bytes = self.model.checkpoint.unquantized.bytes_per_element() as u64;
                let split = if self.engine.mm_encoder_data_parallel {
                    1
                } else {
                    self.par.tp
                };
                v.bytes_per_gpu(split, bytes.max(1))
            }
            _ => 0,
        }
    }

    /// vLLM's MXFP4 MoE backend on this GPU and the multiples it pads an expert's dimensions to
    /// (`vllm/model_executor/layers/fused_moe/oracle/mxfp4.py`: the default backend by device,
    /// `mxfp4_round_up_hidden_size_and_intermediate_size`): Marlin on sm_80 / sm_89 / sm_120
    /// (intermediate to 128, hidden to 256), the Triton `matmul_ogs` kernels on Hopper
    /// (intermediate to 64), FlashInfer's TRT-LLM kernels on sm_100 / sm_103 (both to 256), and
    /// ROCm (both to 256). `None` where ServeSim does not know the backend (TPU, a custom GPU).
    pub fn mxfp4_moe_backend(&self) -> Option<(&'static str, crate::model::Mxfp4Alignment)> {
        use crate::gpu::Generation as G;
        use crate::model::Mxfp4Alignment as A;
        let a = |intermediate, hidden| A {
            intermediate,
            hidden,
        };
        match self.gpu.generation {
            G::Ampere | G::Ada | G::BlackwellRtx => Some(("Marlin", a(128, 256))),
            G::Hopper => Some(("Triton matmul_ogs", a(64, 1))),
            G::Blackwell | G::BlackwellUltra => Some(("FlashInfer TRT-LLM", a(256, 256))),
            G::Cdna3 | G::Cdna4 => Some(("ROCm", a(256, 256))),
            G::TpuV5e | G::TpuV6e | G::Custom => None,
        }
    }

    /// Bytes per GPU the MXFP4 MoE kernel's padding adds to the weights at load, with the
    /// backend and the padded dimensions (zero bytes for every other checkpoint; docs/capacity.md
    /// "MXFP4 expert padding").
    pub fn mxfp4_padding_per_gpu(
        &self,
    ) -> Result<Option<(&'static str, crate::model::Mxfp4Padding)>, crate::model::ModelError> {
        let Some((backend, align)) = self.mxfp4_moe_backend() else {
            return Ok(None);
        };
        let pad = self.model.mxfp4_expert_padding_bytes_per_gpu(
            self.weight_precision,
            self.par,
            align,
        )?;
        Ok((pad.bytes.get() > 0).then_some((backend, pad)))
    }

    /// Weight bytes of the MTP drafter on one GPU (0 without MTP speculative decoding).
    pub fn drafter_weight_bytes_per_gpu(&self) -> Result<u64, crate::model::ModelError> {
        if self.drafter_mtp_layers() == 0 {
            return Ok(0);
        }
        Ok(self
            .model
            .mtp_weight_bytes_per_gpu(self.weight_precision, self.par)?
            .get())
    }
}
