//! vLLM's start-up memory sizing, per GPU: "will it start, and how many KV tokens?"
//!
//! Mirrors `Worker.determine_available_memory` and `get_kv_cache_config` of vLLM's V1 engine:
//!
//! ```text
//! budget    = visible_memory * gpu_memory_utilization
//! non_kv    = weights + peak_activation(profile run) + non_torch [+ cudagraph if estimated]
//! available = budget - non_kv                 (or --kv-cache-memory when given)
//! blocks    = floor(available / block_bytes)  (block_bytes = one block id on this GPU)
//! ```
//!
//! Every formula and constant, with its source and the calibration data, is in
//! `docs/capacity.md`. A configuration that cannot start still yields a [`CapacityReport`] with
//! `fits = false`, vLLM's own error text and concrete fixes.

use crate::deploy::{All2AllBackend, CudagraphMode, Deployment, RawEngineSettings};
use crate::dtype::KvCacheDtype;
use crate::model::{AttentionSpec, KvCacheSpec, LayerFfn, ModelConfig, ModelError};
use crate::parallel::Parallelism;
use crate::units::{Bytes, Tokens, GIB, MIB};
use serde::Serialize;

/// Bytes the profile run's dummy sampler pass allocates per (request x vocabulary entry).
/// Calibrated on five public vLLM 0.11 start-up logs on H100 (llm-d-benchmark
/// `config_explorer/empirical-vllm-memory-results.md`): torch peak increase of Qwen3-0.6B,
/// Qwen3-32B, Llama-3.1-8B, Llama-3.3-70B (TP2) and gpt-oss-20b divided by
/// `max_num_seqs * vocab_size` gives 38.25-38.55 B; 38.4 is their mean.
pub const SAMPLER_BYTES_PER_LOGIT: f64 = 38.4;
/// vLLM V0's default CPU swap space per GPU (`--swap-space`, 4 GiB), which its start-up log
/// reports in blocks ("# CPU blocks").
pub const V0_SWAP_SPACE_BYTES: u64 = 4 << 30;
/// Activation element size during the profile run (bf16/fp16).
pub const ACT_BYTES: u64 = 2;
/// Hidden-size-wide buffers alive at the forward peak: the residual and the decoder layer's input
/// (vLLM's fused add + RMSNorm works in place; the caller keeps the block's input alive while the
/// block's own tensors exist). Derived from the layer structure (docs/capacity.md).
pub const FWD_HIDDEN_BUFFERS: u64 = 2;
/// vLLM's fused-MoE kernels process at most this many tokens per chunk
/// (`VLLM_FUSED_MOE_CHUNK_SIZE`, default 32768).
pub const FUSED_MOE_CHUNK: u64 = 32 * 1024;
/// Non-torch memory that appears during profiling at TP = 1 (cuBLAS workspaces, CUDA context
/// growth): 0.13-0.14 GiB measured on H100 (llm-d-benchmark, vLLM 0.11).
pub const NON_TORCH_TP1: u64 = 140 * MIB;
/// The same at TP >= 2 (adds NCCL buffers and custom all-reduce): 0.54-0.55 GiB measured at TP2.
pub const NON_TORCH_TPN: u64 = 563 * MIB;
/// DeepEP high-throughput buffer per rank: vLLM's `DeepEPHTAll2AllManager` asks for 1 GiB of NVLink buffer.
pub const DEEPEP_HT_BYTES: u64 = GIB;
/// Tokens per rank DeepEP low-latency buffers are sized for (`VLLM_MOE_DP_CHUNK_SIZE`, default 256).
pub const DEEPEP_LL_TOKENS: u64 = 256;
/// CUDA-graph memory: fixed part per captured model (graph pool, static input buffers).
/// Rough fit to public "Estimated CUDA graph memory" log lines (0.22-0.78 GiB for 2-86 graphs).
pub const CUDAGRAPH_BASE: u64 = 256 * MIB;
/// CUDA-graph memory per captured graph (same rough fit).
pub const CUDAGRAPH_PER_GRAPH: u64 = 4 * MIB;
/// A profile-run saving smaller than this is not offered as a fix unless it makes the deployment fit.
pub const MIN_USEFUL_GAIN: u64 = 256 * MIB;
/// vLLM's redundancy buffer in its `--kv-cache-memory` suggestion (150 MiB).
pub const KV_SUGGESTION_MARGIN: u64 = 150 * MIB;

/// Errors that stop the computation (the model cannot be sized at all). A deployment that is
/// valid but does not fit is NOT an error: it returns a report with `fits = false`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CapacityError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("`{field}` = {value} is invalid: {fix}")]
    InvalidField {
        field: &'static str,
        value: String,
        fix: String,
    },
}

/// A workload question: requests of `isl` input and `osl` output tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RequestShape {
    pub isl: u64,
    pub osl: u64,
}

/// One memory figure in bytes and GiB.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Mem {
    pub bytes: i64,
    pub gib: f64,
}

impl Mem {
    fn of(bytes: i64) -> Mem {
        Mem {
            bytes,
            gib: bytes as f64 / GIB as f64,
        }
    }
}

/// Per-GPU memory breakdown (the worst rank; all ranks are alike under TP/DP/EP here).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Breakdown {
    /// Memory vLLM sees on the device.
    pub visible: Mem,
    /// `visible * gpu_memory_utilization`.
    pub budget: Mem,
    /// Weights on this GPU as vLLM measures them at load: the model's plus the MTP drafter's.
    pub weights: Mem,
    /// The MTP drafter's part of `weights` (absent without MTP speculative decoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drafter_weights: Option<Mem>,
    /// The vision encoder's part of `weights` (absent for a text-only model or
    /// `--language-model-only`; docs/capacity.md "Vision encoder").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vision_weights: Option<Mem>,
    /// The MXFP4 MoE kernel's padding of the experts, part of `weights` (absent for other
    /// checkpoints; docs/capacity.md "MXFP4 expert padding").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_padding: Option<Mem>,
    /// Peak torch allocation of the profile run (forward of `max_num_batched_tokens` + sampler).
    pub activation: Mem,
    /// Non-torch allocations that appear during profiling (NCCL, cuBLAS, DeepEP buffers).
    pub non_torch: Mem,
    /// CUDA-graph pool (subtracted only when `estimate_cudagraphs_in_profile`).
    pub cudagraph: Mem,
    /// True when `cudagraph` was subtracted from the budget.
    pub cudagraph_in_budget: bool,
    /// Memory available for the KV cache (vLLM's "Available KV cache memory"; may be negative).
    pub kv_available: Mem,
    /// Memory the KV pool actually takes (`num_blocks * block_bytes`).
    pub kv_pool: Mem,
    /// `visible - budget`: where CUDA graphs go when not estimated, plus fragmentation.
    pub headroom: Mem,
}

/// The answer to "will it start?" for one deployment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CapacityReport {
    pub model: String,
    pub gpu: String,
    pub par: Parallelism,
    pub num_gpus: u32,
    pub replicas: u32,
    /// Engines with their own KV cache (= replicas * dp).
    pub engines: u32,
    pub kv_cache_dtype: String,
    pub block_size: u32,
    pub max_model_len: u64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
    pub gpu_memory_utilization: f64,
    pub breakdown: Breakdown,
    /// Bytes one block id costs on one GPU.
    pub block_bytes: u64,
    pub num_blocks: u64,
    /// KV tokens per engine (per DP rank), headline convention (see `kv_tokens_convention`).
    pub kv_cache_tokens: u64,
    /// KV tokens summed over all engines of the deployment.
    pub kv_cache_tokens_total: u64,
    /// "uniform", or for hybrid models "vllm-2026" (max_concurrency x max_model_len).
    pub kv_tokens_convention: String,
    /// vLLM 2025's hybrid log figure: `num_blocks // num_groups * block_size`.
    pub kv_cache_tokens_vllm2025: u64,
    /// vLLM 2026's log figure: `int(max_concurrency * max_model_len)`.
    pub kv_cache_tokens_vllm2026: u64,
    /// Requests of `max_model_len` tokens that fit at once (vLLM's "Maximum concurrency").
    pub max_concurrency: f64,
    /// KV bytes one request of `max_model_len` needs on one GPU.
    pub bytes_per_max_len_request: u64,
    /// Marginal KV bytes per token on one GPU.
    pub kv_bytes_per_token: f64,
    /// Requests of `isl + osl` tokens whose KV fits at once (per engine), and the same capped by max_num_seqs.
    pub requests_fit: Option<RequestsFit>,
    /// vLLM's log lines, verbatim format.
    pub log_lines: Vec<String>,
    pub fits: bool,
    /// The CPU KV offload tier (`--kv-transfer-config`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_tier: Option<crate::offload::CpuTierReport>,
    /// Why it does (not) fit, in one sentence.
    pub reason: String,
    /// vLLM's start-up error text when it does not fit.
    pub vllm_error: Option<String>,
    /// Bytes missing for one max_model_len request (0 when it fits).
    pub deficit: Mem,
    /// Concrete changes that make it fit (empty when it fits).
    pub fixes: Vec<Fix>,
    /// Warnings (CUDA graphs larger than headroom, TPU, assumptions).
    pub warnings: Vec<String>,
    /// Notes on resolved defaults.
    pub notes: Vec<String>,
}

/// How many requests of a given shape fit at once.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RequestsFit {
    pub isl: u64,
    pub osl: u64,
    /// Limited by KV memory only.
    pub by_kv: u64,
    /// Also limited by `max_num_seqs`.
    pub at_once: u64,
}

/// A change that makes the deployment start, with what it gives.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fix {
    /// The setting to change (`tp`, `kv_cache_dtype`, `max_model_len`, ...).
    pub setting: String,
    /// The value to use.
    pub value: String,
    /// What the capacity becomes (tokens per engine) or why it helps.
    pub effect: String,
}

fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Peak activation of vLLM's profile run on one GPU, in bytes (formula in docs/capacity.md).
pub fn activation_bytes(
    model: &ModelConfig,
    par: Parallelism,
    max_num_batched_tokens: u64,
    max_num_seqs: u64,
) -> u64 {
    let n = max_num_batched_tokens;
    let h = model.hidden_size;
    let tp = par.tp as u64;
    let attn_w: u64 = match &model.attention {
        AttentionSpec::Gqa {
            num_heads,
            num_kv_heads,
            head_dim,
            v_head_dim,
            ..
        } => {
            let qh = (*num_heads as u64 / tp).max(1);
            let kvh = (*num_kv_heads as u64 / tp).max(1);
            qh * *head_dim as u64
                + kvh * (*head_dim as u64 + *v_head_dim as u64)
                + qh * *v_head_dim as u64
        }
        AttentionSpec::Mla {
            num_heads,
            kv_lora_rank,
            qk_rope_head_dim,
            qk_nope_head_dim,
            v_head_dim,
            ..
        } => {
            let qh = (*num_heads as u64 / tp).max(1);
            let qk = (*qk_nope_head_dim + *qk_rope_head_dim) as u64;
            qh * qk
                + qh * (*qk_nope_head_dim + *v_head_dim) as u64
                + (*kv_lora_rank + *qk_rope_head_dim) as u64
                + qh * *v_head_dim as u64
        }
        AttentionSpec::DeepseekV4 {
            num_heads,
            head_dim,
            ..
        } => {
            let qh = (*num_heads as u64 / tp).max(1);
            3 * qh * *head_dim as u64
        }
    };
    let dense_w = if model.layers.iter().any(|l| l.ffn == LayerFfn::Dense) {
        3 * model.dense_intermediate_size / tp
    } else {
        0
    };
    // Live at once: the residual and the layer's input (FWD_HIDDEN_BUFFERS hidden vectors) with
    // the larger of the attention block's and the MLP block's own tensors.
    let fwd_dense = n * ACT_BYTES * (FWD_HIDDEN_BUFFERS * h + attn_w.max(dense_w));
    let fwd_moe = match &model.moe {
        None => 0,
        Some(moe) => {
            let inter = if par.ep > 1 {
                moe.moe_intermediate_size
            } else {
                moe.moe_intermediate_size / tp
            };
            let k = moe.experts_per_tok as u64;
            let m = n.min(FUSED_MOE_CHUNK);
            let shared = 3 * moe.shared_intermediate_size * moe.num_shared_experts as u64 / tp;
            // fused_moe intermediate caches: (M, k, 2I) + (M*k, I) + (M, k, H), plus shared experts
            m * ACT_BYTES * k * (3 * inter + h)
                + n * ACT_BYTES * (FWD_HIDDEN_BUFFERS * h + attn_w.max(shared))
        }
    };
    let fwd = fwd_dense.max(fwd_moe);
    let s = max_num_seqs.min(n);
    let sampler = libm::ceil(s as f64 * model.vocab_size as f64 * SAMPLER_BYTES_PER_LOGIT) as u64;
    let keep = n * h * ACT_BYTES;
    fwd.max(keep + sampler)
}

/// Non-torch memory that appears during profiling, in bytes.
pub fn non_torch_bytes(model: &ModelConfig, par: Parallelism, backend: All2AllBackend) -> u64 {
    let mut b = if par.tp * par.dp > 1 {
        NON_TORCH_TPN
    } else {
        NON_TORCH_TP1
    };
    if par.ep > 1 && model.moe.is_some() {
        b += match backend {
            All2AllBackend::AllgatherReducescatter | All2AllBackend::Naive => 0,
            All2AllBackend::DeepepHighThroughput => DEEPEP_HT_BYTES,
            All2AllBackend::DeepepLowLatency => {
                // DeepEP's low-latency size hint: send+recv, double-buffered, for every expert
                // slot of DEEPEP_LL_TOKENS tokens of hidden bf16 plus scales/metadata.
                let e = model
                    .moe
                    .as_ref()
                    .map(|m| m.num_experts as u64)
                    .unwrap_or(0);
                2 * 2 * DEEPEP_LL_TOKENS * e * (2 * model.hidden_size + 32)
            }
        };
    }
    b
}

/// Number of CUDA graphs vLLM captures: FULL graphs for decode sizes (<= max_num_seqs) plus
/// PIECEWISE graphs for every capture size, per the mode.
pub fn cudagraph_count(d: &Deployment) -> u64 {
    use crate::deploy::CudagraphMode as M;
    let sizes = &d.engine.cudagraph_capture_sizes;
    let decode = sizes
        .iter()
        .filter(|&&s| s <= d.engine.max_num_seqs)
        .count() as u64;
    match d.engine.cudagraph_mode {
        M::None => 0,
        M::FullAndPiecewise => decode + sizes.len() as u64,
        M::FullDecodeOnly => decode,
        M::Piecewise | M::Full => sizes.len() as u64,
    }
}

/// CUDA-graph memory estimate in bytes (rough; see docs/capacity.md).
pub fn cudagraph_bytes(d: &Deployment) -> u64 {
    let n = cudagraph_count(d);
    if n == 0 {
        0
    } else {
        CUDAGRAPH_BASE + n * CUDAGRAPH_PER_GRAPH
    }
}

/// KV bytes one request of `tokens` tokens holds on one GPU (blocks of every group plus fixed state).
fn request_bytes(spec: &KvCacheSpec, tokens: u64, mnbt: u64) -> u64 {
    spec.blocks_for_tokens(tokens, mnbt) * spec.block_bytes() + spec.per_request_fixed_bytes
}

/// vLLM's hybrid-group count for the 2025 log convention: layers are split into groups of
/// `group_size = min(layers per spec)`; each spec contributes `ceil(n / group_size)` groups.
fn vllm_group_count(spec: &KvCacheSpec) -> u64 {
    let min = spec
        .groups
        .iter()
        .map(|g| g.num_layers as u64)
        .filter(|&n| n > 0)
        .min()
        .unwrap_or(1);
    spec.groups
        .iter()
        .map(|g| (g.num_layers as u64).div_ceil(min))
        .sum::<u64>()
        .max(1)
}

/// vLLM's start-up check for hybrid models (`GPUModelRunner._check_and_update_cudagraph_mode`,
/// vllm-project/vllm#38270): with full CUDA graphs, every decode sequence needs one block of the
/// KV pool for its Mamba / Gated DeltaNet state, so a `max_num_seqs` above the pool's
/// `num_blocks` stops the engine ("max_num_seqs (N) exceeds available Mamba cache blocks (M)").
/// Only from [`crate::deploy::MAMBA_BLOCKS_CHECK_SINCE`] (`EngineSettings::mamba_blocks_check`);
/// piecewise-only or no graphs skip it. docs/capacity.md "Hybrid models' block size".
fn mamba_blocks_refused(d: &Deployment, num_blocks: u64) -> bool {
    let e = &d.engine;
    let full_graphs = matches!(
        e.cudagraph_mode,
        CudagraphMode::FullAndPiecewise | CudagraphMode::Full | CudagraphMode::FullDecodeOnly
    );
    e.mamba_blocks_check
        && full_graphs
        && d.model.num_linear_attention_layers() > 0
        && e.max_num_seqs > num_blocks
}

/// Sizes the KV cache of `d` as vLLM does at start-up. `request` adds "how many of these fit".
pub fn compute(
    d: &Deployment,
    request: Option<RequestShape>,
) -> Result<CapacityReport, CapacityError> {
    let report = compute_inner(d, request)?;
    if report.fits {
        return Ok(report);
    }
    let mut report = report;
    report.fixes = suggest_fixes(d, &report);
    Ok(report)
}

fn compute_inner(
    d: &Deployment,
    request: Option<RequestShape>,
) -> Result<CapacityReport, CapacityError> {
    if let Some(r) = request {
        if r.isl + r.osl == 0 {
            return Err(CapacityError::InvalidField {
                field: "isl",
                value: "0".into(),
                fix: "isl + osl must be at least 1 token".into(),
            });
        }
    }
    let e = &d.engine;
    let model = &d.model;
    let visible = d.gpu.memory_visible.get();
    let budget = libm::floor(visible as f64 * e.gpu_memory_utilization) as u64;
    // vLLM loads the MTP drafter with the model, before the profile run: its weights are part
    // of the measured weight memory, and its attention layers get KV in the same KV cache.
    let drafter_weights = d.drafter_weight_bytes_per_gpu()?;
    // A multimodal checkpoint's vision encoder is loaded with the model unless
    // `--language-model-only` (docs/capacity.md "Weights").
    let vision = d.vision_tower_bytes_per_gpu();
    // vLLM's MXFP4 MoE kernels pad each expert's dimensions at load (docs/capacity.md "MXFP4 expert padding").
    let mxfp4 = d.mxfp4_padding_per_gpu()?;
    let padding = mxfp4.map_or(0, |(_, p)| p.bytes.get());
    let weights = model.weight_bytes_per_gpu(d.weight_precision, d.par)?.get()
        + padding
        + drafter_weights
        + vision;
    let spec = d.kv_cache_spec()?;
    let activation = activation_bytes(model, d.par, e.max_num_batched_tokens, e.max_num_seqs);
    // With DP + EP stated, vLLM builds its all2all manager (and DeepEP's buffers) only when
    // `dp > 1` (`ParallelConfig.use_all2all`); scenarios without the field keep the buffers.
    let backend = if d.enable_expert_parallel.is_some() && d.par.dp <= 1 {
        All2AllBackend::AllgatherReducescatter
    } else {
        e.all2all_backend
    };
    let non_torch = non_torch_bytes(model, d.par, backend);
    let cudagraph = cudagraph_bytes(d);
    let cg_in = e.estimate_cudagraphs_in_profile && cudagraph > 0;
    let non_kv = weights + activation + non_torch + if cg_in { cudagraph } else { 0 };
    let mut warnings: Vec<String> = d.notes.clone();
    if let Some((backend, p)) = mxfp4 {
        let mut padded = Vec::new();
        for (what, (from, to)) in [
            ("intermediate size per GPU", p.intermediate),
            ("hidden size", p.hidden),
        ] {
            if to != from {
                padded.push(format!("the {what} {from} -> {to}"));
            }
        }
        warnings.push(format!(
            "weights include {:.2} GiB per GPU of MXFP4 expert padding: vLLM's {backend} MoE kernel on {} pads {}",
            p.bytes.gib(),
            d.gpu.name,
            padded.join(" and ")
        ));
    }
    if vision > 0 {
        warnings.push(format!(
            "weights include the vision encoder ({:.2} GiB per GPU): vLLM loads it unless started with --language-model-only",
            vision as f64 / GIB as f64
        ));
    }
    let kv_available: i64 = match e.kv_cache_memory_bytes {
        Some(b) => {
            warnings.push(format!(
                "--kv-cache-memory {} bytes replaces the profiled budget; gpu_memory_utilization is ignored for KV sizing",
                b.get()
            ));
            b.get() as i64
        }
        None => budget as i64 - non_kv as i64,
    };
    let block_bytes = spec.block_bytes().max(1);
    let num_blocks = if kv_available > 0 {
        kv_available as u64 / block_bytes
    } else {
        0
    };
    let bs = e.block_size as u64;
    let mml = e.max_model_len;
    let mnbt = e.max_num_batched_tokens;
    let per_req = request_bytes(&spec, mml, mnbt).max(1);
    let pool = num_blocks * block_bytes;
    let uniform = spec.is_uniform();
    let tokens_2025 = if uniform {
        num_blocks * bs
    } else {
        num_blocks / vllm_group_count(&spec) * bs
    };
    let max_concurrency = pool as f64 / per_req as f64;
    let tokens_2026 = if uniform {
        num_blocks * bs
    } else {
        libm::floor(max_concurrency * mml as f64) as u64
    };
    let (kv_tokens, convention) = if uniform {
        (tokens_2025, "uniform")
    } else {
        (tokens_2026, "vllm-2026")
    };
    let max_concurrency = if uniform {
        kv_tokens as f64 / mml as f64
    } else {
        max_concurrency
    };
    let requests_fit = request.map(|r| {
        let per = request_bytes(&spec, r.isl + r.osl, mnbt).max(1);
        let by_kv = pool / per;
        RequestsFit {
            isl: r.isl,
            osl: r.osl,
            by_kv,
            at_once: by_kv.min(e.max_num_seqs),
        }
    });
    // CUDA graphs outside the budget come out of the headroom.
    let headroom = visible as i64 - budget as i64;
    if !cg_in && cudagraph as i64 > headroom && e.kv_cache_memory_bytes.is_none() {
        warnings.push(format!(
            "estimated CUDA-graph memory {:.2} GiB exceeds the {:.2} GiB left outside gpu_memory_utilization; capture may run out of memory — lower gpu_memory_utilization or set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1",
            cudagraph as f64 / GIB as f64,
            headroom as f64 / GIB as f64
        ));
    }
    if !uniform {
        warnings.push(format!(
            "hybrid KV cache ({} vLLM groups): vLLM 2025 logs {} tokens (num_blocks // groups x block_size); vLLM 2026 logs {} (max_concurrency x max_model_len); the headline is the 2026 figure",
            vllm_group_count(&spec),
            fmt_thousands(tokens_2025),
            fmt_thousands(tokens_2026)
        ));
    }
    let avail_gib = kv_available as f64 / GIB as f64;
    // V0 logs the pool in blocks, next to the CPU swap blocks (`--swap-space`, 4 GiB per GPU by
    // default), and has no "Available KV cache memory" line.
    let mut log_lines = if e.v0_defaults {
        Vec::new()
    } else {
        vec![format!("Available KV cache memory: {avail_gib:.2} GiB")]
    };
    // `--max-model-len auto` (`Deployment::auto_fit_max_model_len` has set `mml`).
    let derived = model.max_position_embeddings;
    if e.max_model_len_auto && kv_available > 0 && mml < derived {
        log_lines.push(format!(
            "Auto-fit max_model_len: reduced from {derived} to {mml} to fit in available GPU memory ({avail_gib:.2} GiB available for KV cache)"
        ));
    } else if e.max_model_len_auto && kv_available > 0 && (per_req as i64) <= kv_available {
        log_lines.push(format!(
            "Auto-fit max_model_len: full model context length {mml} fits in available GPU memory"
        ));
    }
    // An explicit KV size must fit in the GPU next to everything else: vLLM allocates the pool
    // as given and runs out of memory when it does not.
    let kv_over_gpu = e
        .kv_cache_memory_bytes
        .map(|b| (b.get() as i64).saturating_add(non_kv as i64) - visible as i64)
        .filter(|over| *over > 0);
    let (fits, reason, vllm_error, deficit) = if let Some(over) = kv_over_gpu {
        (
            false,
            format!(
                "kv_cache_memory ({:.2} GiB) plus weights, activation and non-torch memory ({:.2} GiB) exceed the GPU's {:.2} GiB; lower kv_cache_memory to at most {} bytes",
                kv_available as f64 / GIB as f64,
                non_kv as f64 / GIB as f64,
                visible as f64 / GIB as f64,
                visible.saturating_sub(non_kv)
            ),
            Some("CUDA out of memory while allocating the KV cache.".to_string()),
            over,
        )
    } else if weights > budget && e.kv_cache_memory_bytes.is_none() {
        (
            false,
            format!(
                "the weights alone ({:.2} GiB per GPU) exceed the {:.2} GiB budget ({:.2} GiB x {})",
                weights as f64 / GIB as f64,
                budget as f64 / GIB as f64,
                visible as f64 / GIB as f64,
                crate::bounds::fmt_num(e.gpu_memory_utilization)
            ),
            Some("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.".to_string()),
            per_req as i64 - kv_available,
        )
    } else if kv_available <= 0 {
        (
            false,
            format!(
                "weights, activation and non-torch memory take {:.2} GiB, more than the {:.2} GiB budget",
                non_kv as f64 / GIB as f64,
                budget as f64 / GIB as f64
            ),
            Some("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.".to_string()),
            per_req as i64 - kv_available,
        )
    } else if (per_req as i64) > kv_available {
        let est = estimate_max_len(&spec, kv_available as u64, mnbt, mml);
        (
            false,
            format!(
                "one request of max_model_len {} needs {:.2} GiB of KV per GPU but {:.2} GiB is available",
                fmt_thousands(mml),
                per_req as f64 / GIB as f64,
                avail_gib
            ),
            Some(if e.max_model_len_auto {
                // Auto-fit found no length at all (less KV memory than one block).
                "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try increasing `gpu_memory_utilization`.".to_string()
            } else {
                format!(
                "To serve at least one request with the models's max seq len ({mml}), ({:.2} GiB KV cache is needed, which is larger than the available KV cache memory ({avail_gib:.2} GiB). Based on the available memory, the estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
                per_req as f64 / GIB as f64
            )
            }),
            per_req as i64 - kv_available,
        )
    } else if mamba_blocks_refused(d, num_blocks) {
        (
            false,
            format!(
                "max_num_seqs {} exceeds the KV pool's {} blocks: every decode sequence of a hybrid model holds one block for its Gated DeltaNet state, and vLLM (>= {}.{}) refuses to capture full CUDA graphs for more sequences than blocks; lower max_num_seqs to at most {num_blocks}, raise gpu_memory_utilization, or run piecewise CUDA graphs only",
                e.max_num_seqs,
                fmt_thousands(num_blocks),
                crate::deploy::MAMBA_BLOCKS_CHECK_SINCE.major,
                crate::deploy::MAMBA_BLOCKS_CHECK_SINCE.minor,
            ),
            Some(format!(
                "max_num_seqs ({}) exceeds available Mamba cache blocks ({num_blocks}). Each decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed. Please lower max_num_seqs to at most {num_blocks} or increase gpu_memory_utilization.",
                e.max_num_seqs
            )),
            (e.max_num_seqs.saturating_sub(num_blocks) * block_bytes) as i64,
        )
    } else {
        (
            true,
            format!(
                "{} KV tokens per engine: {:.2}x requests of max_model_len {}",
                fmt_thousands(kv_tokens),
                max_concurrency,
                fmt_thousands(mml)
            ),
            None,
            0,
        )
    };
    if fits && e.v0_defaults {
        log_lines.push(format!(
            "# GPU blocks: {num_blocks}, # CPU blocks: {}",
            V0_SWAP_SPACE_BYTES / block_bytes
        ));
    } else if fits {
        log_lines.push(format!(
            "GPU KV cache size: {} tokens",
            fmt_thousands(kv_tokens)
        ));
    }
    if fits {
        // V0 prints the length with `%s` ("... for 32768 tokens ..."), V1 with `{:,}`.
        let len = if e.v0_defaults {
            mml.to_string()
        } else {
            fmt_thousands(mml)
        };
        log_lines.push(format!(
            "Maximum concurrency for {len} tokens per request: {max_concurrency:.2}x"
        ));
    } else if let Some(msg) = &vllm_error {
        log_lines.push(format!("ValueError: {msg}"));
    }
    let engines = d.engines();
    Ok(CapacityReport {
        model: model.name.clone(),
        gpu: d.gpu.id.clone(),
        par: d.par,
        num_gpus: d.num_gpus,
        replicas: d.replicas(),
        engines,
        kv_cache_dtype: spec.dtype.name().to_string(),
        block_size: e.block_size,
        max_model_len: mml,
        max_num_batched_tokens: mnbt,
        max_num_seqs: e.max_num_seqs,
        gpu_memory_utilization: e.gpu_memory_utilization,
        breakdown: Breakdown {
            visible: Mem::of(visible as i64),
            budget: Mem::of(budget as i64),
            weights: Mem::of(weights as i64),
            drafter_weights: (d.drafter_mtp_layers() > 0).then(|| Mem::of(drafter_weights as i64)),
            vision_weights: (vision > 0).then(|| Mem::of(vision as i64)),
            kernel_padding: (padding > 0).then(|| Mem::of(padding as i64)),
            activation: Mem::of(activation as i64),
            non_torch: Mem::of(non_torch as i64),
            cudagraph: Mem::of(cudagraph as i64),
            cudagraph_in_budget: cg_in,
            kv_available: Mem::of(kv_available),
            kv_pool: Mem::of(pool as i64),
            headroom: Mem::of(headroom),
        },
        block_bytes,
        num_blocks,
        kv_cache_tokens: if fits { kv_tokens } else { 0 },
        kv_cache_tokens_total: if fits { kv_tokens * engines as u64 } else { 0 },
        kv_tokens_convention: convention.into(),
        kv_cache_tokens_vllm2025: tokens_2025,
        kv_cache_tokens_vllm2026: tokens_2026,
        max_concurrency: if fits { max_concurrency } else { 0.0 },
        bytes_per_max_len_request: per_req,
        kv_bytes_per_token: spec.bytes_per_token(),
        requests_fit,
        log_lines,
        fits,
        cpu_tier: crate::offload::cpu_tier_report(
            d,
            block_bytes.saturating_mul(
                crate::scenario::kv_footprint(&spec, mnbt)
                    .full_groups
                    .max(1) as u64,
            ),
        ),
        reason,
        vllm_error,
        deficit: Mem::of(deficit.max(0)),
        fixes: Vec::new(),
        warnings,
        notes: {
            let mut n = e.notes.clone();
            n.extend(spec.notes.iter().cloned());
            n
        },
    })
}

/// `--max-model-len auto`: the longest `max_model_len` (at most the configured one) whose one
/// request fits the KV memory, with that memory in GiB; `None` when there is no KV memory
/// (the weights or the profile take the budget) or the deployment cannot be sized.
pub(crate) fn auto_fit_len(d: &Deployment) -> Option<(u64, f64)> {
    let r = compute_inner(d, None).ok()?;
    let avail = r.breakdown.kv_available.bytes;
    if avail <= 0 {
        return None;
    }
    let spec = d.kv_cache_spec().ok()?;
    let len = estimate_max_len(
        &spec,
        avail as u64,
        d.engine.max_num_batched_tokens,
        d.engine.max_model_len,
    );
    Some((len, r.breakdown.kv_available.gib))
}

/// vLLM's estimate of the longest `max_model_len` that fits (binary search, as
/// `estimate_max_model_len` does).
fn estimate_max_len(spec: &KvCacheSpec, available: u64, mnbt: u64, upper: u64) -> u64 {
    let (mut lo, mut hi) = (0u64, upper);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if request_bytes(spec, mid, mnbt) <= available {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo
}

fn rebuild(
    d: &Deployment,
    f: impl FnOnce(&mut RawEngineSettings, &mut Parallelism, &mut KvCacheDtype),
) -> Option<CapacityReport> {
    let mut raw = raw_of(d);
    let mut par = d.par;
    let mut kv = d.kv_cache_dtype;
    f(&mut raw, &mut par, &mut kv);
    let per = par.tp * par.dp;
    let num_gpus = if d.num_gpus.is_multiple_of(per) {
        d.num_gpus
    } else {
        per
    };
    let nd = Deployment::new(
        d.model.clone(),
        d.gpu.clone(),
        par,
        Some(num_gpus),
        d.weight_precision,
        kv,
        &raw,
    )
    .ok()?
    .auto_fit_max_model_len();
    compute_inner(&nd, None).ok()
}

/// The raw settings that reproduce `d.engine` (every default made explicit).
pub fn raw_of(d: &Deployment) -> RawEngineSettings {
    let e = &d.engine;
    RawEngineSettings {
        gpu_memory_utilization: Some(e.gpu_memory_utilization),
        max_num_seqs: Some(e.max_num_seqs as i64),
        max_num_batched_tokens: Some(e.max_num_batched_tokens as i64),
        block_size: Some(e.block_size as i64),
        max_model_len: Some(if e.max_model_len_auto {
            -1
        } else {
            e.max_model_len as i64
        }),
        enable_prefix_caching: Some(e.enable_prefix_caching),
        enable_chunked_prefill: Some(e.enable_chunked_prefill),
        cudagraph_mode: Some(e.cudagraph_mode),
        cudagraph_capture_sizes: if e.cudagraph_capture_sizes.is_empty() {
            None
        } else {
            Some(
                e.cudagraph_capture_sizes
                    .iter()
                    .map(|&s| s as i64)
                    .collect(),
            )
        },
        kv_cache_memory_bytes: e.kv_cache_memory_bytes.map(|b| b.get() as i64),
        estimate_cudagraphs_in_profile: Some(e.estimate_cudagraphs_in_profile),
        long_prefill_token_threshold: Some(e.long_prefill_token_threshold as i64),
        enforce_eager: Some(e.enforce_eager),
        usage_context: Some(e.usage_context),
        all2all_backend: Some(e.all2all_backend),
        allow_long_max_model_len: Some(true),
        v0_defaults: e.v0_defaults,
        mamba_blocks_check: e.mamba_blocks_check,
        speculative_config: e.speculative.as_ref().map(|sp| sp.raw.clone()),
        kv_transfer_config: e.kv_transfer.as_ref().map(|k| k.raw.clone()),
        host_link_gb_s: e.host_link_bytes_per_s.map(|b| b as f64 / 1e9),
        host_memory_gb_per_node: e.host_memory_bytes_per_node.map(|b| b as f64 / 1e9),
        speculative_acceptance: e.speculative.as_ref().map(|sp| sp.raw_acceptance.clone()),
        language_model_only: e.language_model_only.then_some(true),
        mm_encoder_data_parallel: e.mm_encoder_data_parallel.then_some(true),
        num_scheduler_steps: (e.num_scheduler_steps > 1).then_some(e.num_scheduler_steps as i64),
        performance_mode: (e.performance_mode != crate::deploy::PerformanceMode::Balanced)
            .then_some(e.performance_mode),
    }
}

fn suggest_fixes(d: &Deployment, r: &CapacityReport) -> Vec<Fix> {
    let mut fixes = Vec::new();
    let e = &d.engine;
    // A hybrid model refused for its state blocks: vLLM's own remedy first.
    if r.num_blocks > 0 && mamba_blocks_refused(d, r.num_blocks) {
        if let Some(nr) = rebuild(d, |raw, _, _| {
            raw.max_num_seqs = Some(r.num_blocks as i64);
            raw.cudagraph_capture_sizes = None;
        }) {
            if nr.fits {
                fixes.push(Fix {
                    setting: "max_num_seqs".into(),
                    value: r.num_blocks.to_string(),
                    effect: format!(
                        "one state block per decode sequence: {} KV tokens per engine",
                        fmt_thousands(nr.kv_cache_tokens)
                    ),
                });
            }
        }
    }
    // More TP.
    let mut tp = d.par.tp * 2;
    while tp <= 64 {
        let found = rebuild(d, |_, p, _| {
            p.tp = tp;
            if p.ep > 1 {
                p.ep = tp * p.dp;
            }
        });
        if let Some(nr) = found {
            if nr.fits {
                fixes.push(Fix {
                    setting: "tp".into(),
                    value: tp.to_string(),
                    effect: format!(
                        "{} KV tokens per engine on {} GPUs per replica",
                        fmt_thousands(nr.kv_cache_tokens),
                        tp * d.par.dp
                    ),
                });
                break;
            }
        }
        tp *= 2;
    }
    // fp8 KV cache.
    if !d.kv_cache_dtype.is_fp8() {
        if let Some(nr) = rebuild(d, |_, _, k| *k = KvCacheDtype::Fp8) {
            if nr.fits {
                fixes.push(Fix {
                    setting: "kv_cache_dtype".into(),
                    value: "fp8".into(),
                    effect: format!("{} KV tokens per engine", fmt_thousands(nr.kv_cache_tokens)),
                });
            }
        }
    }
    // Lower max_model_len (vLLM's own estimate).
    if r.breakdown.kv_available.bytes > 0 {
        if let Ok(spec) = d.kv_cache_spec() {
            let est = estimate_max_len(
                &spec,
                r.breakdown.kv_available.bytes as u64,
                e.max_num_batched_tokens,
                e.max_model_len,
            );
            // Only a shorter context is a fix (a stated KV pool that is itself too large is not
            // cured by the max_model_len it already holds).
            if est > 0 && est < e.max_model_len {
                fixes.push(Fix {
                    setting: "max_model_len".into(),
                    value: est.to_string(),
                    effect: "the longest max_model_len whose one request fits (vLLM's estimate)"
                        .into(),
                });
            }
        }
    }
    // Smaller profile run: fewer batched tokens / sequences.
    let smaller_mnbt = (e.max_num_batched_tokens / 2).max(e.max_num_seqs.min(2048));
    if smaller_mnbt < e.max_num_batched_tokens {
        if let Some(nr) = rebuild(d, |raw, _, _| {
            raw.max_num_batched_tokens = Some(smaller_mnbt as i64);
            raw.cudagraph_capture_sizes = None;
        }) {
            let gain = r.breakdown.activation.bytes - nr.breakdown.activation.bytes;
            if nr.fits || gain >= MIN_USEFUL_GAIN as i64 {
                fixes.push(Fix {
                    setting: "max_num_batched_tokens".into(),
                    value: smaller_mnbt.to_string(),
                    effect: format!(
                        "frees {:.2} GiB of profile-run activation{}",
                        gain as f64 / GIB as f64,
                        if nr.fits { " and fits" } else { "" }
                    ),
                });
            }
        }
    }
    let fewer_seqs = (e.max_num_seqs / 4).max(1);
    if fewer_seqs < e.max_num_seqs {
        if let Some(nr) = rebuild(d, |raw, _, _| {
            raw.max_num_seqs = Some(fewer_seqs as i64);
            raw.cudagraph_capture_sizes = None;
        }) {
            let gain = r.breakdown.activation.bytes - nr.breakdown.activation.bytes;
            if nr.fits || gain >= MIN_USEFUL_GAIN as i64 {
                fixes.push(Fix {
                    setting: "max_num_seqs".into(),
                    value: fewer_seqs.to_string(),
                    effect: format!(
                        "frees {:.2} GiB of sampler memory in the profile run{}",
                        gain as f64 / GIB as f64,
                        if nr.fits { " and fits" } else { "" }
                    ),
                });
            }
        }
    }
    // Higher gpu_memory_utilization.
    let need = r.breakdown.budget.bytes + r.deficit.bytes;
    let util = need as f64 / r.breakdown.visible.bytes as f64;
    let util = libm::ceil(util * 100.0) / 100.0;
    if util <= 0.98 && util > e.gpu_memory_utilization {
        fixes.push(Fix {
            setting: "gpu_memory_utilization".into(),
            value: format!("{util:.2}"),
            effect: format!(
                "covers the {:.2} GiB deficit (leaves {:.2} GiB for CUDA graphs and fragmentation)",
                r.deficit.gib,
                (1.0 - util) * r.breakdown.visible.gib
            ),
        });
    }
    fixes
}

/// KV tokens per engine (0 when it does not fit). Shorthand for sweeps.
pub fn kv_tokens(d: &Deployment) -> Result<Tokens, CapacityError> {
    Ok(Tokens(compute_inner(d, None)?.kv_cache_tokens))
}

/// `Bytes` of the per-GPU KV pool.
pub fn kv_pool_bytes(d: &Deployment) -> Result<Bytes, CapacityError> {
    Ok(Bytes(
        compute_inner(d, None)?.breakdown.kv_pool.bytes.max(0) as u64,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separator_matches_python_format() {
        assert_eq!(fmt_thousands(0), "0");
        assert_eq!(fmt_thousands(999), "999");
        assert_eq!(fmt_thousands(1_234_560), "1,234,560");
        assert_eq!(fmt_thousands(131_072), "131,072");
    }
}
