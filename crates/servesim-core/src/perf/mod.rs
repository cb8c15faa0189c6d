//! Step-time model: how long one engine step (one forward pass over a batch of prefill chunks and
//! decode tokens) takes on one GPU of one tensor-parallel group.
//!
//! A roofline over the step's actual work: per component, `max(compute time, memory time)`
//! (non-expert GEMMs vs their weight reads; routed-expert GEMMs vs the weights of the experts
//! the step activates; prefill attention vs its KV reads; decode attention vs its KV reads), plus
//! activation traffic, tensor-parallel all-reduces, expert-parallel dispatch/combine and engine
//! overheads. Every efficiency and overhead is a named field of [`Efficiencies`].
//! Formulas, approximations and sources: docs/step-time.md.

pub mod all2all;
mod eff;
pub mod ep_load;
pub mod gdn;
mod spec;
mod terms;

pub use eff::{
    borrowed_fields, calibration_key, generation_key, lookup_calibration, shipped_calibration,
    CalibrationFile, Efficiencies, EfficiencyBasis, EfficiencyOverrides, EngineEra, FieldKind,
    VllmVersion, CALIBRATED_EFFICIENCIES_JSON,
};

use crate::deploy::{All2AllBackend, CudagraphMode, Deployment};
use crate::dtype::{ComputeClass, DType};
use crate::gpu::GpuSpec;
use crate::model::{ModelError, TensorGroup, WeightBytes};
use crate::units::Ticks;
use serde::{Deserialize, Serialize};
use terms::AttnTerms;
pub use terms::DsaKernel;

/// FlashMLA's published sparse-attention throughput (deepseek-ai/FlashMLA README, "Sparse
/// Attention Kernels"), as fractions of the bf16 dense peak of the GPU it was measured on (H800
/// SXM5: 989.4 TFLOPS, the H100's; B200: 2,250): the sparse prefill kernel "up to 640 TFlops" on
/// H800 and 1,450 on B200, the fp8-cache sparse decode kernel 410 on H800 and 350 on B200.
pub const FLASHMLA_SPARSE_PREFILL_HOPPER: f64 = 640.0 / 989.4;
pub const FLASHMLA_SPARSE_PREFILL_BLACKWELL: f64 = 1450.0 / 2250.0;
pub const FLASHMLA_SPARSE_DECODE_FP8_HOPPER: f64 = 410.0 / 989.4;
pub const FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL: f64 = 350.0 / 2250.0;

/// vLLM runs an fp8-cache prefill with the bf16 sparse prefill kernel (after up-converting the
/// cache) only from this many query heads per rank; below it the whole batch goes through the fp8
/// decode kernel (`MIN_HEADS_FOR_BF16_PREFILL`, vllm/v1/attention/backends/mla/flashmla_sparse.py).
pub const MIN_HEADS_FOR_BF16_SPARSE_PREFILL: u32 = 32;

/// How `gpu` runs DeepSeek sparse attention over the selected latents for a model with
/// `heads_per_rank` query heads per TP rank (docs/step-time.md §3, "DSA on FlashMLA's sparse
/// kernels"). vLLM's `FLASHMLA_SPARSE` backend runs on sm90 and sm100
/// (vllm/v1/attention/backends/mla/flashmla_sparse.py, `supports_compute_capability`). With a
/// 16-bit KV cache its sparse prefill kernel serves every token and "requires num_local_head to be
/// a multiple of 64 on hopper and 128 on blackwell" (`_bf16_flash_mla_kernel` pads the query
/// heads). With an fp8 cache the sparse decode kernel ("only supports h_q = 64 or 128", padded)
/// serves the decodes, and the prefills too below [`MIN_HEADS_FOR_BF16_SPARSE_PREFILL`] heads per
/// rank. Both index all `index_topk` slots of every query. Other GPUs (ROCm, sm120, Ampere) keep
/// the architecture's attention at the attention rates.
pub fn dsa_kernel(gpu: &GpuSpec, kv: crate::dtype::KvCacheDtype, heads_per_rank: u32) -> DsaKernel {
    use crate::gpu::Generation;
    let (bf16_multiple, prefill, decode_fp8) = match gpu.generation {
        Generation::Hopper => (
            64,
            FLASHMLA_SPARSE_PREFILL_HOPPER,
            FLASHMLA_SPARSE_DECODE_FP8_HOPPER,
        ),
        Generation::Blackwell | Generation::BlackwellUltra => (
            128,
            FLASHMLA_SPARSE_PREFILL_BLACKWELL,
            FLASHMLA_SPARSE_DECODE_FP8_BLACKWELL,
        ),
        _ => return DsaKernel::Exact,
    };
    if kv.is_fp8() {
        let mixed = heads_per_rank < MIN_HEADS_FOR_BF16_SPARSE_PREFILL;
        DsaKernel::FlashMlaSparse {
            head_multiple: 64,
            prefill_peak_fraction: if mixed { decode_fp8 } else { prefill },
            decode_peak_fraction: decode_fp8,
        }
    } else {
        DsaKernel::FlashMlaSparse {
            head_multiple: bf16_multiple,
            prefill_peak_fraction: prefill,
            decode_peak_fraction: prefill,
        }
    }
}

/// Bytes per activation element on the wire and in HBM (bf16).
pub const ACT_BYTES: f64 = 2.0;

/// Errors of the step-time model; each names the field and the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PerfError {
    #[error("efficiency `{field}` = {value} is invalid: {fix}")]
    InvalidEfficiency {
        field: &'static str,
        value: String,
        fix: String,
    },
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("`speculative_config.model` = {model} cannot run as the draft model here: {reason}")]
    Drafter { model: String, reason: String },
}

/// One prefill chunk of one request in a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrefillChunk {
    /// Tokens already in the KV cache for this request (computed earlier or prefix-cache hits).
    pub past: u64,
    /// Tokens computed in this step.
    pub new: u64,
}

/// The work of one step on one DP rank (one TP group).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StepWork<'a> {
    /// Prefill chunks (few per step).
    pub prefill: &'a [PrefillChunk],
    /// Sequences generating one token this step.
    pub decode_seqs: u64,
    /// Sum over those sequences of their context length (tokens already in the KV cache).
    pub decode_ctx_sum: u64,
}

impl StepWork<'_> {
    /// Tokens the step computes: prefill tokens plus one per decode sequence.
    pub fn tokens(&self) -> u64 {
        self.prefill.iter().map(|c| c.new).sum::<u64>() + self.decode_seqs
    }
}

/// How the step is executed (which CUDA-graph path vLLM takes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecMode {
    /// One full CUDA graph replay (uniform decode batch within the capture sizes, or FULL mode).
    FullGraph,
    /// Piecewise graphs with attention run eagerly between them.
    Piecewise,
    /// No graph (`enforce_eager`, `cudagraph_mode NONE`, or a batch above the largest capture size).
    #[default]
    Eager,
}

/// Work quantities of a step on one GPU (diagnostics; not time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepWorkPerGpu {
    /// Tokens computed by this DP rank.
    pub tokens: u64,
    /// Tokens the GEMMs run on after CUDA-graph padding.
    pub padded_tokens: u64,
    /// Non-expert GEMM FLOPs on this GPU (incl. lm_head).
    pub dense_gemm_flops: f64,
    /// Routed-expert GEMM FLOPs on this GPU.
    pub expert_gemm_flops: f64,
    /// Attention score/value FLOPs on this GPU (prefill + decode).
    pub attention_flops: f64,
    /// Non-expert weight bytes read.
    pub dense_weight_bytes: f64,
    /// Routed-expert weight bytes read (only the experts the step activates; with expert
    /// parallelism, the busiest GPU's).
    pub expert_weight_bytes: f64,
    /// Expected fraction of this GPU's experts the step activates (0 for dense models; with
    /// expert parallelism, the busiest GPU's activated experts over the experts it holds).
    pub experts_active_fraction: f64,
    /// KV-cache bytes read and written.
    pub kv_bytes: f64,
    /// Elementwise activation bytes.
    pub activation_bytes: f64,
}

impl StepWorkPerGpu {
    /// All GEMM FLOPs on this GPU.
    pub fn gemm_flops(&self) -> f64 {
        self.dense_gemm_flops + self.expert_gemm_flops
    }
}

/// Seconds per term of one step. Within each roofline component only the binding side is
/// counted (compute in `*_compute`, memory in `*_reads`), so `total()` is the step time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepBreakdown {
    /// GEMM components that are compute-bound.
    pub gemm_compute: f64,
    /// Attention components that are compute-bound.
    pub attention_compute: f64,
    /// GEMM components that are bound by reading their weights.
    pub weight_reads: f64,
    /// Attention components that are bound by reading (and writing) the KV cache.
    pub kv_reads: f64,
    /// Elementwise activation traffic.
    pub activations: f64,
    /// Tensor-parallel all-reduces.
    pub tp_allreduce: f64,
    /// Expert-parallel / data-parallel MoE dispatch and combine.
    pub ep_alltoall: f64,
    /// Fixed engine overheads (per step, per request, the unfused fp8 calls of an eager step of
    /// vLLM V0 on ROCm, and CPU launch time not hidden by GPU work).
    pub overhead: f64,
    /// The MoE layers' routing chain (router, top-k, block alignment, activation quantisation,
    /// weighted combine: kernels in sequence with the grouped GEMMs): `MoE layers x
    /// moe_layer_floor_s`, whatever the batch.
    pub moe_floor: f64,
    /// The latent-attention layers' chain beyond a GQA layer's: `MLA layers x
    /// mla_layer_floor_s`, whatever the batch.
    pub mla_floor: f64,
    /// How the step runs.
    pub mode: ExecMode,
    /// Unbounded times of each side before the roofline max (diagnostics, not summed).
    pub raw: RawTimes,
    pub work: StepWorkPerGpu,
    /// DP + EP (`enable_expert_parallel` stated, `dp > 1`): one MoE layer's dispatch/combine
    /// under the deployment's all-to-all backend (`ep_alltoall` = MoE layers x dispatch +
    /// combine; the TP all-gather after the sequence-parallel MoE is in `tp_allreduce`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all2all: Option<all2all::All2AllTerms>,
}

/// Compute and memory times of each roofline component before taking the max, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct RawTimes {
    pub dense_gemm_compute: f64,
    pub dense_weight_reads: f64,
    pub expert_gemm_compute: f64,
    pub expert_weight_reads: f64,
    pub prefill_attention_compute: f64,
    pub prefill_kv_reads: f64,
    pub decode_attention_compute: f64,
    pub decode_kv_reads: f64,
    /// CPU launch time of the kernels outside graphs (hidden behind GPU work when smaller).
    pub launch: f64,
    /// The part of `overhead` that vLLM V0's unfused fp8 calls add to an eager step on ROCm
    /// (`N_unfused x fp8_unfused_launch_s`, docs/step-time.md §6); 0 for every other step.
    pub unfused_fp8: f64,
    /// The part of `prefill_attention_compute` that the Gated DeltaNet prefill kernels take
    /// beyond their FLOPs at the prefill attention rate (docs/step-time.md §3); 0 without such
    /// layers or prefill.
    pub gdn_prefill: f64,
}

impl StepBreakdown {
    /// Sum of the time terms, seconds.
    pub fn total(&self) -> f64 {
        self.gemm_compute
            + self.attention_compute
            + self.weight_reads
            + self.kv_reads
            + self.activations
            + self.tp_allreduce
            + self.ep_alltoall
            + self.overhead
            + self.moe_floor
            + self.mla_floor
    }
    /// The step time in ticks (what [`StepCostModel::step_time`] returns).
    pub fn total_ticks(&self) -> Ticks {
        Ticks::from_secs_f64(self.total())
    }
}

/// Coefficients of the step-time model for one deployment, precomputed once.
#[derive(Clone, Debug, PartialEq)]
pub struct StepCostModel {
    eff: Efficiencies,
    tp: f64,
    dp: f64,
    hidden: f64,
    num_layers: f64,
    /// Non-expert GEMM seconds per (padded) token on this GPU, at achieved compute.
    dense_s_per_token: f64,
    /// lm_head seconds per logits row (one per request in the step).
    lm_head_s_per_row: f64,
    dense_flops_per_token: f64,
    lm_head_flops_per_row: f64,
    /// Non-expert weight bytes read per step and their time.
    dense_weight_bytes: f64,
    dense_weight_s: f64,
    /// Routed experts: seconds per global token, FLOPs per global token, all local expert bytes.
    expert_s_per_token: f64,
    expert_flops_per_token: f64,
    expert_weight_bytes_all: f64,
    expert_bytes_s: f64,
    /// `ln(1 - k/E)` for the activated-expert fraction (0 for dense models).
    ln_not_chosen: f64,
    experts_per_tok: f64,
    /// With expert parallelism (`ep > 1`): the experts the fullest GPU holds (`ceil(E / ep)`) and
    /// the GPUs holding experts; the step reads the busiest GPU's activated experts
    /// ([`ep_load::expected_busiest`]). `(0, 1)` without expert parallelism.
    ep_local_experts: u32,
    ep_ranks: u32,
    num_moe_layers: f64,
    num_dense_layers: f64,
    /// Layers that all-reduce a QK-norm statistic over TP (`ModelConfig::num_tp_norm_allreduce_layers`;
    /// 0 at TP 1).
    tp_norm_allreduce_layers: f64,
    /// `num_moe_layers x moe_layer_floor_s`: the routed-expert component's floor per step.
    moe_floor_s: f64,
    /// `MLA layers x mla_layer_floor_s` (0 for GQA models).
    mla_floor_s: f64,
    /// Gated DeltaNet layers' prefill kernels beyond their FLOPs (`None` without such layers).
    gdn: Option<gdn::GdnPrefill>,
    /// Attention, scaled so that `/ tp` gives one GPU's FLOPs ([`AttnTerms::scaled_for_tp`]).
    attn: AttnTerms,
    /// Attention of the whole model (each term once), for [`StepCostModel::attention_flops_whole_model`].
    attn_model: AttnTerms,
    /// Some linear layer runs its GEMMs on the GPU's fp8 tensor cores ([`StepCostModel::runs_fp8_gemms`]).
    fp8_gemms: bool,
    attn_compute_s_per_flop_prefill: f64,
    attn_compute_s_per_flop_decode: f64,
    /// DeepSeek sparse attention on FlashMLA's sparse kernels: one GPU's FLOPs and seconds per
    /// prefill / decode query token (0 when the model or GPU has none; [`dsa_kernel`]).
    sparse_flops_per_query: f64,
    sparse_s_per_query_prefill: f64,
    sparse_s_per_query_decode: f64,
    kv_s_per_byte: f64,
    /// Seconds per byte of the linear-attention layers' recurrent-state traffic (`hbm_state`).
    state_s_per_byte: f64,
    kv_write_bytes_per_token: f64,
    act_s_per_byte: f64,
    /// Communication.
    tp_link_s_per_byte: f64,
    tp_latency: f64,
    moe_link_s_per_byte: f64,
    moe_latency: f64,
    a2a_link_s_per_byte: f64,
    a2a_latency: f64,
    all2all_backend: All2AllBackend,
    /// The per-backend model of DP + EP deployments (`perf/all2all.rs`); `None` keeps the
    /// model of scenarios that do not state `enable_expert_parallel`.
    a2a: Option<all2all::All2AllModel>,
    /// Execution.
    cudagraph_mode: CudagraphMode,
    capture_sizes: Vec<u64>,
    /// vLLM V0's `max_seq_len_to_capture`: a decode batch with a longer sequence runs eagerly.
    graph_seq_len_limit: Option<u64>,
    /// Precomputed per step shape, for [`StepCostModel::step_time_iter`] (the same values the
    /// step would compute; docs/performance.md): the padded token count of every token count
    /// up to the largest capture size (at most [`PAD_TABLE_MAX`] entries; above it a binary
    /// search), the graph mode of an in-range step without / with prefill, and per
    /// [`ExecMode`] (index `mode as usize`) the fixed overhead and the per-step GPU/launch floor.
    pad_table: Vec<u64>,
    in_range_mode: [ExecMode; 2],
    mode_fixed: [f64; 3],
    /// Time the unfused fp8 fallback's calls add to an eager step (0 elsewhere).
    unfused_launch_s: f64,
    mode_floor: [f64; 3],
    /// [`ShapeTerms`] of a decode-only step of `n` sequences at index `n` (`n` up to
    /// `max_num_seqs`, at most [`DECODE_TABLE_MAX`]; index 0 unused).
    decode_table: Vec<ShapeTerms>,
    /// Speculative decoding terms (`perf/spec.rs`).
    spec: spec::SpecTerms,
}

/// The terms of a step's time that depend only on its shape (tokens, requests, prefill or not),
/// not on its contexts: GEMMs, activations, communication and the overhead parts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ShapeTerms {
    gemm_compute: f64,
    weight_reads: f64,
    activations: f64,
    tp_allreduce: f64,
    ep_alltoall: f64,
    /// `fixed + requests x per_request_overhead_s` (the first two summands of the overhead).
    overhead_base: f64,
    /// The per-step floor the GPU time is compared with.
    floor: f64,
    /// [`StepBreakdown::moe_floor`].
    moe_floor: f64,
    /// [`StepBreakdown::mla_floor`].
    mla_floor: f64,
}

/// Largest decode batch with precomputed [`ShapeTerms`].
const DECODE_TABLE_MAX: u64 = 1 << 13;

/// [`Ticks::from_secs_f64`] (`libm::round(s * 1e9) as u64`, halves away from zero) without
/// the general rounding routine: below 2^52 ns, `x - trunc(x)` is exact, so comparing it with
/// 0.5 rounds exactly as `libm::round`; anything else (negative, huge, NaN) takes the original.
#[inline]
pub fn secs_to_ticks(s: f64) -> Ticks {
    let x = s * crate::units::TICKS_PER_SECOND as f64;
    if (0.0..4_503_599_627_370_496.0).contains(&x) {
        // Signed conversions (one instruction each on x86-64), exact in this range.
        let i = x as i64;
        let frac = x - i as f64;
        Ticks(if frac >= 0.5 { i as u64 + 1 } else { i as u64 })
    } else {
        Ticks::from_secs_f64(s)
    }
}

/// Largest token count with a precomputed padding entry (vLLM's capture sizes stop at 512 by
/// default; a user list may go up to `max_num_batched_tokens`).
const PAD_TABLE_MAX: u64 = 1 << 16;

/// The compute class a matmul on weights of `dt` runs at on `gpu`: the weight format's own class
/// when the GPU has tensor cores for it, else bf16 (weight-only dequantisation: Marlin W8A16 /
/// W4A16 on Ampere and Hopper, MXFP4 on Hopper/MI300X).
pub fn compute_class_on(dt: DType, gpu: &GpuSpec) -> ComputeClass {
    let c = dt.compute_class();
    if gpu.flops(c).is_some() {
        c
    } else {
        ComputeClass::Bf16
    }
}

/// True when matmuls on weights of `dt` run weight-only on `gpu`: integer W4A16 / W8A16 formats
/// always, and fp8 / fp4 formats on GPUs without tensor cores for them (Marlin FP8 / MXFP4 /
/// NVFP4 kernels dequantise to bf16).
pub fn is_weight_only_on(dt: DType, gpu: &GpuSpec) -> bool {
    dt.is_weight_only()
        || (dt.compute_class() != ComputeClass::Bf16 && gpu.flops(dt.compute_class()).is_none())
}

/// The dtype the weights of each linear tensor group are stored in (the dtype holding most
/// parameters of the group, falling back to the group the layer would otherwise use; docs/step-time.md
/// §2, "Compute class per tensor group").
#[derive(Clone, Copy, Debug)]
struct LinearDtypes {
    attn: DType,
    attn_replicated: DType,
    mlp: DType,
    shared: DType,
    experts: DType,
}

impl LinearDtypes {
    fn of(wb: &WeightBytes, unquantized: DType) -> LinearDtypes {
        let attn = group_dtype(wb, TensorGroup::Attention, unquantized);
        let mlp = group_dtype(wb, TensorGroup::DenseMlp, attn);
        LinearDtypes {
            attn,
            attn_replicated: group_dtype(wb, TensorGroup::AttentionReplicated, attn),
            mlp,
            shared: group_dtype(wb, TensorGroup::SharedExperts, mlp),
            experts: group_dtype(wb, TensorGroup::RoutedExperts, mlp),
        }
    }
}

/// Whether any linear layer of `dep` runs a weight-only (dequantising) GEMM on its GPU, i.e. whether
/// the step reads `gemm_weight_only` (docs/step-time.md §2, "Weight-only GEMMs").
pub fn runs_weight_only_gemms(dep: &Deployment) -> bool {
    let m = &dep.model;
    let d = LinearDtypes::of(
        &m.weight_bytes(dep.weight_precision),
        m.checkpoint.unquantized,
    );
    [d.attn, d.attn_replicated, d.mlp, d.shared, d.experts]
        .into_iter()
        .any(|dt| is_weight_only_on(dt, &dep.gpu))
}

fn group_dtype(wb: &WeightBytes, g: TensorGroup, fallback: DType) -> DType {
    wb.groups
        .iter()
        .filter(|x| x.group == g)
        .max_by_key(|x| x.params)
        .map(|x| x.dtype)
        .unwrap_or(fallback)
}

fn group_bytes(wb: &WeightBytes, g: TensorGroup) -> f64 {
    wb.groups
        .iter()
        .filter(|x| x.group == g)
        .map(|x| (x.bytes.0 + x.scale_bytes.0) as f64)
        .sum()
}

impl StepCostModel {
    /// Precomputes the coefficients for `dep` with the efficiency table `eff` (validated).
    pub fn new(dep: &Deployment, eff: &Efficiencies) -> Result<StepCostModel, PerfError> {
        eff.validate()?;
        let m = &dep.model;
        let gpu = &dep.gpu;
        let par = dep.par;
        let tp = par.tp as f64;
        let prec = dep.weight_precision;
        let wb = m.weight_bytes(prec);
        let unq = m.checkpoint.unquantized;

        // Seconds per FLOP at achieved compute of a dtype's class.
        let s_per_flop = |dt: DType, grouped: bool| -> f64 {
            let class = compute_class_on(dt, gpu);
            let peak = gpu.flops(class).unwrap_or(gpu.bf16_flops);
            let e = match class {
                ComputeClass::Bf16 => eff.gemm_bf16,
                ComputeClass::Fp8 => eff.gemm_fp8,
                ComputeClass::Fp4 => eff.gemm_fp4,
            };
            // Weight-only kernels dequantise in the GEMM (docs/step-time.md, weight-only GEMMs).
            let e = if is_weight_only_on(dt, gpu) {
                e * eff.gemm_weight_only
            } else {
                e
            };
            let e = if grouped {
                e * eff.grouped_gemm_vs_dense
            } else {
                e
            };
            1.0 / (peak * e)
        };

        // vLLM V0 on ROCm: fp8 linears with per-row scales run an unfused fallback
        // (docs/step-time.md §6, `EngineSettings::v0_unfused_fp8`).
        let unfused_fp8 = dep.engine.v0_unfused_fp8(gpu, &m.checkpoint);
        let lf = m.linear_flops_per_token();
        let LinearDtypes {
            attn: dt_attn,
            attn_replicated: dt_attn_r,
            mlp: dt_mlp,
            shared: dt_shared,
            experts: dt_experts,
        } = LinearDtypes::of(&wb, unq);
        // Per-GPU FLOPs per token: TP-sharded parts / tp, replicated parts whole.
        let parts = [
            (lf.attention / tp, dt_attn),
            (lf.attention_replicated, dt_attn_r),
            (lf.dense_mlp / tp, dt_mlp),
            (lf.shared_experts / tp, dt_shared),
            (lf.router, unq),
            (lf.other, unq),
        ];
        let fp8_gemms = [dt_attn, dt_attn_r, dt_mlp, dt_shared, dt_experts]
            .into_iter()
            .any(|dt| {
                compute_class_on(dt, gpu) == ComputeClass::Fp8 && !is_weight_only_on(dt, gpu)
            });
        let dense_flops_per_token: f64 = parts.iter().map(|p| p.0).sum();
        let dense_s_per_token: f64 = parts.iter().map(|p| p.0 * s_per_flop(p.1, false)).sum();
        let lm_head_flops_per_row = lf.lm_head / tp;
        let lm_head_s_per_row = lm_head_flops_per_row * s_per_flop(unq, false);

        // Routed experts: spread over `expert_div` GPUs (ep > 1: E / ceil(E/ep) GPUs hold whole
        // experts; else every expert is sharded over tp * dp), as in weight_bytes_per_gpu.
        let (ep_local_experts, ep_ranks) = match &m.moe {
            Some(moe) if par.ep > 1 => {
                let local = moe.num_experts.div_ceil(par.ep);
                (local, moe.num_experts.div_ceil(local.max(1)))
            }
            _ => (0, 1),
        };
        let (expert_div, ln_not_chosen, k) = match &m.moe {
            Some(moe) => {
                let e = moe.num_experts as f64;
                let k = moe.experts_per_tok as f64;
                let div = if par.ep > 1 {
                    e / moe.num_experts.div_ceil(par.ep) as f64
                } else {
                    (par.tp * par.dp) as f64
                };
                let ln = if k >= e {
                    f64::NEG_INFINITY
                } else {
                    libm::log(1.0 - k / e)
                };
                (div, ln, k)
            }
            None => (1.0, 0.0, 0.0),
        };
        let expert_flops_per_token = lf.routed_experts / expert_div;
        let expert_s_per_token = expert_flops_per_token * s_per_flop(dt_experts, true);
        let routed_total = group_bytes(&wb, TensorGroup::RoutedExperts);
        let expert_weight_bytes_all = routed_total / expert_div;

        // Non-expert weights read once per step: everything on this GPU except the routed
        // experts and the input embedding table (a step reads only its tokens' rows; when the
        // embedding is tied to lm_head the table is read as lm_head and stays).
        let per_gpu_total = m.weight_bytes_per_gpu(prec, par)?.0 as f64;
        let embedding = if m.tie_word_embeddings {
            0.0
        } else {
            group_bytes(&wb, TensorGroup::Embedding) / tp
        };
        let dense_weight_bytes = (per_gpu_total - expert_weight_bytes_all - embedding).max(0.0);
        let bw = gpu.hbm_bandwidth_bytes_s;
        let w_s_per_byte = 1.0 / (bw * eff.hbm_weights);
        // Linear calls per step through the unfused fallback: two per layer for each fp8 group
        // (qkv + o, gate_up + down), one for the replicated attention down-projections, in
        // proportion to the group's parameters stored in fp8 (Llama-3.1-405B-FP8's attention,
        // kept in bf16, makes none).
        let unfused_calls: f64 = if unfused_fp8 {
            let frac = |g: TensorGroup| -> f64 {
                let (fp8, all) =
                    wb.groups
                        .iter()
                        .filter(|x| x.group == g)
                        .fold((0u64, 0u64), |(f, a), x| {
                            let p = x.params;
                            (f + if x.dtype == DType::Fp8 { p } else { 0 }, a + p)
                        });
                if all == 0 {
                    0.0
                } else {
                    fp8 as f64 / all as f64
                }
            };
            let layers = m.num_layers as f64;
            2.0 * layers * frac(TensorGroup::Attention)
                + layers * frac(TensorGroup::AttentionReplicated)
                + 2.0 * m.num_dense_layers() as f64 * frac(TensorGroup::DenseMlp)
                + 2.0 * m.num_moe_layers() as f64 * frac(TensorGroup::SharedExperts)
        } else {
            0.0
        };

        // Attention and KV.
        let spec = m.kv_cache_spec(dep.kv_cache_dtype, par.tp, dep.engine.block_size)?;
        let dsa = match &m.attention {
            crate::model::AttentionSpec::Mla { num_heads, .. } if m.sparse_indexer.is_some() => {
                dsa_kernel(gpu, dep.kv_cache_dtype, num_heads.div_ceil(par.tp))
            }
            _ => DsaKernel::Exact,
        };
        let attn = AttnTerms::scaled_for_tp(m, &spec, tp, dsa);
        // FlashMLA's sparse kernels: one GPU's FLOPs per query token and their seconds.
        let sparse_flops_per_query = attn.sparse_per_query / tp;
        let (sparse_s_per_query_prefill, sparse_s_per_query_decode) = match dsa {
            DsaKernel::FlashMlaSparse {
                prefill_peak_fraction,
                decode_peak_fraction,
                ..
            } if sparse_flops_per_query > 0.0 => (
                sparse_flops_per_query / (gpu.bf16_flops * prefill_peak_fraction),
                sparse_flops_per_query / (gpu.bf16_flops * decode_peak_fraction),
            ),
            _ => (0.0, 0.0),
        };
        let attn_model = AttnTerms::new(m, &spec);
        let attn_peak = gpu.bf16_flops;

        // Communication links: inside the scale-up domain the link, beyond it the NIC.
        let link = |group: u32| -> (f64, f64) {
            if group <= gpu.scaleup_domain {
                (gpu.scaleup_unidir_bytes_s, 0.0)
            } else {
                (
                    eff.internode_bytes_s.min(gpu.scaleup_unidir_bytes_s),
                    eff.internode_latency_s,
                )
            }
        };
        let (tp_bw, tp_extra) = link(par.tp);
        let (moe_bw, moe_extra) = link(par.tp * par.dp);
        let a2a = match &m.moe {
            Some(moe) if dep.enable_expert_parallel.is_some() && par.dp > 1 => {
                Some(all2all::All2AllModel::new(
                    dep.engine.all2all_backend,
                    par.tp,
                    par.dp,
                    m.hidden_size,
                    moe.experts_per_tok,
                    compute_class_on(dt_experts, gpu) == ComputeClass::Fp8
                        && !is_weight_only_on(dt_experts, gpu),
                    all2all::All2AllLinks {
                        scaleup_domain: gpu.scaleup_domain,
                        ep_ring_s_per_byte: 1.0 / (moe_bw * eff.allreduce_bus_eff),
                        ep_ring_latency_s: eff.allreduce_latency_s + moe_extra,
                        tp_ring_s_per_byte: 1.0 / (tp_bw * eff.allreduce_bus_eff),
                        tp_latency_s: eff.allreduce_latency_s + tp_extra,
                        ht_latency_s: eff.all2all_latency_s,
                    },
                ))
            }
            _ => None,
        };

        let attn_compute_s_per_flop_prefill = 1.0
            / (attn_peak
                * if dep.engine.v0_paged_prefill(gpu) {
                    eff.prefill_attention_paged
                } else if dep.engine.triton_unified_prefill(m, gpu) {
                    eff.prefill_attention_triton
                } else {
                    eff.prefill_attention
                });
        let gdn = gdn::GdnPrefill::new(m, gpu, par.tp, attn_compute_s_per_flop_prefill);
        let mut m = StepCostModel {
            eff: *eff,
            tp,
            dp: par.dp as f64,
            hidden: m.hidden_size as f64,
            num_layers: m.num_layers as f64,
            dense_s_per_token,
            lm_head_s_per_row,
            dense_flops_per_token,
            lm_head_flops_per_row,
            dense_weight_bytes,
            dense_weight_s: dense_weight_bytes * w_s_per_byte,
            expert_s_per_token,
            expert_flops_per_token,
            expert_weight_bytes_all,
            expert_bytes_s: 1.0 / (bw * eff.hbm_expert_weights),
            ln_not_chosen,
            experts_per_tok: k,
            ep_local_experts,
            ep_ranks,
            num_moe_layers: m.num_moe_layers() as f64,
            num_dense_layers: m.num_dense_layers() as f64,
            tp_norm_allreduce_layers: if par.tp > 1 {
                m.num_tp_norm_allreduce_layers() as f64
            } else {
                0.0
            },
            moe_floor_s: m.num_moe_layers() as f64 * eff.moe_layer_floor_s,
            mla_floor_s: m.num_latent_attention_layers() as f64 * eff.mla_layer_floor_s,
            gdn,
            attn,
            attn_model,
            fp8_gemms,
            attn_compute_s_per_flop_prefill,
            attn_compute_s_per_flop_decode: 1.0 / (attn_peak * eff.decode_attention),
            sparse_flops_per_query,
            sparse_s_per_query_prefill,
            sparse_s_per_query_decode,
            kv_s_per_byte: 1.0 / (bw * eff.hbm_kv),
            state_s_per_byte: 1.0 / (bw * eff.hbm_state),
            kv_write_bytes_per_token: spec.bytes_per_token(),
            act_s_per_byte: w_s_per_byte,
            tp_link_s_per_byte: 1.0 / (tp_bw * eff.allreduce_bus_eff),
            tp_latency: eff.allreduce_latency_s + tp_extra,
            moe_link_s_per_byte: 1.0 / (moe_bw * eff.allreduce_bus_eff),
            moe_latency: eff.allreduce_latency_s + moe_extra,
            a2a_link_s_per_byte: 1.0 / (moe_bw * eff.all2all_eff),
            a2a_latency: eff.all2all_latency_s + moe_extra,
            all2all_backend: dep.engine.all2all_backend,
            a2a,
            cudagraph_mode: dep.engine.cudagraph_mode,
            capture_sizes: dep.engine.cudagraph_capture_sizes.clone(),
            graph_seq_len_limit: dep.engine.max_seq_len_to_capture,
            pad_table: Vec::new(),
            in_range_mode: [ExecMode::Eager; 2],
            mode_fixed: [0.0; 3],
            unfused_launch_s: unfused_calls * eff.fp8_unfused_launch_s,
            mode_floor: [0.0; 3],
            decode_table: Vec::new(),
            spec: spec::SpecTerms::none(),
        };
        m.precompute_step_shapes(dep.engine.max_num_seqs);
        m.spec = spec::SpecTerms::new(dep, &m)?;
        Ok(m)
    }

    /// Fills the per-step-shape tables from [`StepCostModel::exec_mode`] and the overhead
    /// formulas of [`StepCostModel::breakdown_iter`] (same operations, so the same values).
    fn precompute_step_shapes(&mut self, max_num_seqs: u64) {
        let max = self.capture_sizes.last().copied().unwrap_or(0);
        let n = max.min(PAD_TABLE_MAX);
        self.pad_table = (0..=n).map(|t| self.pad_to_capture(t)).collect();
        // Any token count within the capture sizes (1 ..= max) selects the same mode.
        if max > 0 {
            self.in_range_mode = [self.exec_mode(false, 1).0, self.exec_mode(true, 1).0];
        }
        for mode in [ExecMode::FullGraph, ExecMode::Piecewise, ExecMode::Eager] {
            let (fixed, _, floor) = self.mode_overheads(mode);
            self.mode_fixed[mode as usize] = fixed;
            self.mode_floor[mode as usize] = floor;
        }
        // Decode-only steps: `requests` is `0.0 + n as f64` in `step_seconds` (no prefill).
        let n_max = max_num_seqs.min(DECODE_TABLE_MAX);
        self.decode_table = (0..=n_max)
            .map(|n| {
                if n == 0 {
                    ShapeTerms::default()
                } else {
                    self.shape_terms(n, 0.0 + n as f64, false)
                }
            })
            .collect();
    }

    /// Fraction of this GPU's routed-expert weights a step of `t_global` tokens (all DP ranks)
    /// reads: `f = 1 - (1 - k/E)^T` under uniform routing, or with expert parallelism the busiest
    /// GPU's activated experts over the experts it holds (docs/step-time.md §2).
    #[inline]
    fn expert_read_fraction(&self, t_global: f64) -> f64 {
        let f = 1.0 - libm::exp(t_global * self.ln_not_chosen);
        if self.ep_ranks > 1 {
            ep_load::expected_busiest(self.ep_local_experts, f, self.ep_ranks)
                / self.ep_local_experts as f64
        } else {
            f
        }
    }

    /// [`ShapeTerms`] of a step of `tokens` tokens and `requests` requests (logits rows), with
    /// or without prefill: the operations of [`StepCostModel::breakdown_iter`] for these terms.
    #[inline]
    fn shape_terms(&self, tokens: u64, requests: f64, has_prefill: bool) -> ShapeTerms {
        let (mode, padded) = self.exec_mode_fast(has_prefill, tokens);
        self.shape_terms_in(mode, padded, tokens, requests)
    }

    /// [`StepCostModel::shape_terms`] with the execution path given.
    #[inline]
    fn shape_terms_in(
        &self,
        mode: ExecMode,
        padded: u64,
        tokens: u64,
        requests: f64,
    ) -> ShapeTerms {
        let t = padded as f64;

        // GEMMs.
        let dense_c = t * self.dense_s_per_token + requests * self.lm_head_s_per_row;
        let dense_m = self.dense_weight_s;
        let (mut exp_c, mut exp_m) = (0.0, 0.0);
        if self.experts_per_tok > 0.0 {
            let t_global = t * self.dp;
            let frac = self.expert_read_fraction(t_global);
            let bytes = frac * self.expert_weight_bytes_all;
            exp_c = t_global * self.expert_s_per_token;
            exp_m = bytes * self.expert_bytes_s;
        }
        // The routing chain's kernels run in sequence with the grouped GEMMs: their time adds.
        let moe_floor = if self.experts_per_tok > 0.0 {
            self.moe_floor_s
        } else {
            0.0
        };
        let (mut gemm_compute, mut weight_reads) = (0.0, 0.0);
        for (c, mm) in [(dense_c, dense_m), (exp_c, exp_m)] {
            if c >= mm {
                gemm_compute += c;
            } else {
                weight_reads += mm;
            }
        }

        // Activations.
        let act = tokens as f64
            * self.hidden
            * ACT_BYTES
            * self.num_layers
            * self.eff.activation_vectors_per_layer;
        let activations = act * self.act_s_per_byte;

        // Communication.
        let (tp_allreduce, ep_alltoall) = self.comm(t);

        ShapeTerms {
            gemm_compute,
            weight_reads,
            activations,
            tp_allreduce,
            ep_alltoall,
            overhead_base: self.mode_fixed[mode as usize]
                + requests * self.eff.per_request_overhead_s,
            floor: self.mode_floor[mode as usize],
            moe_floor,
            mla_floor: self.mla_floor_s,
        }
    }

    /// Fixed per-step overhead of `mode`, the CPU launch time of the kernels outside graphs, and
    /// the floor the step's GPU time is compared with (the larger of that launch time and the
    /// per-layer GPU floor).
    #[inline]
    fn mode_overheads(&self, mode: ExecMode) -> (f64, f64, f64) {
        let e = &self.eff;
        let (fixed, per_layer) = match mode {
            ExecMode::FullGraph => (e.step_overhead_graph_s, 0.0),
            ExecMode::Piecewise => (e.step_overhead_piecewise_s, e.layer_launch_piecewise_s),
            ExecMode::Eager => (e.step_overhead_eager_s, e.layer_launch_eager_s),
        };
        // The unfused fp8 calls' time adds to an eager step rather than overlapping its GPU work
        // (docs/step-time.md §6); a graph replays without it.
        let unfused = match mode {
            ExecMode::Eager => self.unfused_launch_s,
            _ => 0.0,
        };
        let launch = per_layer * self.num_layers;
        (
            fixed + unfused,
            launch,
            launch.max(e.layer_gpu_floor_s * self.num_layers),
        )
    }

    /// [`StepCostModel::exec_mode`] from the precomputed tables (the same result).
    #[inline]
    fn exec_mode_fast(&self, has_prefill: bool, tokens: u64) -> (ExecMode, u64) {
        match self.pad_table.get(tokens as usize) {
            Some(&padded) if tokens > 0 => {
                let mode = self.in_range_mode[has_prefill as usize];
                match mode {
                    ExecMode::Eager => (mode, tokens),
                    _ => (mode, padded),
                }
            }
            _ => self.exec_mode(has_prefill, tokens),
        }
    }

    /// The efficiency table in use.
    pub fn efficiencies(&self) -> &Efficiencies {
        &self.eff
    }

    /// The DP + EP all-to-all model (`None` without DP + EP, or for scenarios that do not
    /// state `enable_expert_parallel`).
    pub fn all2all_model(&self) -> Option<&all2all::All2AllModel> {
        self.a2a.as_ref()
    }

    /// MoE layers of the model (for the per-step all-to-all totals).
    pub fn num_moe_layers(&self) -> f64 {
        self.num_moe_layers
    }

    /// Step time of `w`, rounded to whole nanoseconds. Zero for an empty step.
    pub fn step_time(&self, w: &StepWork) -> Ticks {
        self.step_time_iter(w.prefill.iter().copied(), w.decode_seqs, w.decode_ctx_sum)
    }

    /// Whole-model attention FLOPs of a chunk (all heads, all layers; equals
    /// `ModelConfig::attention_core_flops`). Exposed for tests and diagnostics.
    pub fn attention_flops_whole_model(&self, past: u64, new: u64) -> f64 {
        self.attn_model.chunk_flops(past, new)
    }

    /// Whether some linear layer of the deployment runs its GEMMs on the GPU's fp8 tensor cores
    /// (fp8 weights on a GPU with fp8 cores, not a weight-only kernel): its prefill then reads
    /// `gemm_fp8` (docs/step-time.md §1).
    pub fn runs_fp8_gemms(&self) -> bool {
        self.fp8_gemms
    }

    /// KV bytes one sequence reads at `ctx` on one GPU (equals
    /// `ModelConfig::kv_read_bytes_per_seq`). Exposed for tests and diagnostics.
    pub fn kv_read_bytes(&self, ctx: f64) -> f64 {
        self.attn.kv_bytes(ctx)
    }

    /// Which execution path a step of `tokens` tokens takes, and the token count its GEMMs run
    /// on (padded up to a capture size when a graph is replayed).
    pub fn exec_mode(&self, has_prefill: bool, tokens: u64) -> (ExecMode, u64) {
        let max = self.capture_sizes.last().copied().unwrap_or(0);
        let pad = || self.pad_to_capture(tokens);
        if tokens == 0 || tokens > max {
            return (ExecMode::Eager, tokens);
        }
        let mode = match (self.cudagraph_mode, has_prefill) {
            (CudagraphMode::None, _) => ExecMode::Eager,
            (CudagraphMode::Full, _) => ExecMode::FullGraph,
            (CudagraphMode::FullAndPiecewise | CudagraphMode::FullDecodeOnly, false) => {
                ExecMode::FullGraph
            }
            (CudagraphMode::FullAndPiecewise | CudagraphMode::Piecewise, _) => ExecMode::Piecewise,
            (CudagraphMode::FullDecodeOnly, true) => ExecMode::Eager,
        };
        match mode {
            ExecMode::Eager => (mode, tokens),
            _ => (mode, pad()),
        }
    }

    /// The smallest capture size `>= tokens` (`tokens` itself above the largest).
    #[inline]
    fn pad_to_capture(&self, tokens: u64) -> u64 {
        let i = self.capture_sizes.partition_point(|&s| s < tokens);
        self.capture_sizes.get(i).copied().unwrap_or(tokens)
    }

    /// Time of `calls` ring passes (one all-gather or one reduce-scatter each) over `g` GPUs of a
    /// buffer of `bytes`: each pass moves `(g-1)/g x bytes` per GPU. An all-reduce is two passes.
    #[inline]
    fn ring(g: f64, bytes: f64, s_per_byte: f64, latency: f64, calls: f64) -> f64 {
        if g <= 1.0 {
            0.0
        } else {
            calls * ((g - 1.0) / g * bytes * s_per_byte + latency)
        }
    }

    /// Seconds per term of the step (see [`StepBreakdown`]); `total()` equals `step_time`.
    pub fn breakdown(&self, w: &StepWork) -> StepBreakdown {
        self.breakdown_iter(w.prefill.iter().copied(), w.decode_seqs, w.decode_ctx_sum)
    }

    /// [`StepCostModel::step_time`] with the prefill chunks given as an iterator (walked once),
    /// so a caller with its own chunk type needs no per-step allocation, e.g.
    /// `m.step_time_iter(chunks.iter().map(|c| PrefillChunk { past: c.context_before, new: c.new_tokens }), n, ctx_sum)`.
    ///
    /// Equals `breakdown_iter(..).total_ticks()` bit for bit: [`StepCostModel::step_seconds`]
    /// performs the same floating-point operations in the same order for every term that reaches
    /// the total, without filling the diagnostic fields.
    #[inline]
    pub fn step_time_iter<I>(&self, prefill: I, decode_seqs: u64, decode_ctx_sum: u64) -> Ticks
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        secs_to_ticks(self.step_seconds(prefill, decode_seqs, decode_ctx_sum))
    }

    /// The step time in seconds before rounding: `breakdown_iter(..).total()` computed without
    /// the diagnostics (the per-step hot path of the simulator). Keep in step with
    /// [`StepCostModel::breakdown_iter`]; `tests/perf_props.rs` checks both agree bit for bit.
    #[inline]
    pub fn step_seconds<I>(&self, prefill: I, decode_seqs: u64, decode_ctx_sum: u64) -> f64
    where
        I: Iterator<Item = PrefillChunk>,
    {
        // One pass over the chunks: tokens, requests and prefill attention (in chunk order, as
        // `breakdown_iter` sums them).
        let mut prefill_tokens = 0u64;
        let mut prefill_reqs = 0u64;
        let mut pf_flops = 0.0;
        let (mut pf_bytes, mut pf_state) = (0.0, 0.0);
        let (mut gdn_max, mut gdn_sum) = (0u64, 0u64);
        for ch in prefill {
            prefill_tokens += ch.new;
            if ch.new == 0 {
                continue;
            }
            prefill_reqs += 1;
            let c = gdn::chunks(ch.new);
            gdn_max = gdn_max.max(c);
            gdn_sum += c;
            pf_flops += self.attn.chunk_flops(ch.past, ch.new);
            let past = ch.past as f64;
            pf_bytes += self.attn.kv_bytes(past) + ch.new as f64 * self.kv_write_bytes_per_token;
            pf_state += self.attn.state_bytes(past);
        }
        let pf_kv_s = self.kv_seconds(pf_bytes, pf_state);
        let tokens = prefill_tokens + decode_seqs;
        if tokens == 0 {
            return StepBreakdown::default().total();
        }
        if prefill_tokens == 0 {
            if let Some(sh) = self.decode_table.get(decode_seqs as usize) {
                return self.seconds_of(sh, pf_flops, pf_kv_s, 0.0, decode_seqs, decode_ctx_sum);
            }
        }
        let requests = prefill_reqs as f64 + decode_seqs as f64;
        let sh = self.shape_terms(tokens, requests, prefill_tokens > 0);
        // Seconds on the prefill attention's compute side beyond its FLOPs: FlashMLA's sparse
        // kernels per query token, and the Gated DeltaNet kernels' chunk chain.
        let pf_sparse_s = self.prefill_extra_s(
            prefill_tokens,
            self.gdn_excess_s(gdn_max, gdn_sum, prefill_tokens),
        );
        self.seconds_of(
            &sh,
            pf_flops,
            pf_kv_s,
            pf_sparse_s,
            decode_seqs,
            decode_ctx_sum,
        )
    }

    /// vLLM V0's `max_seq_len_to_capture` when the deployment has one (V0's default 8192).
    pub fn graph_seq_len_limit(&self) -> Option<u64> {
        self.graph_seq_len_limit
    }

    /// A decode-only step of `n` decodes whose contexts sum to `ctx_sum` and whose longest is
    /// `ctx_max`: as [`StepCostModel::step_seconds`], except that it runs eagerly when a
    /// sequence (`ctx_max + 1` tokens with the new one) is longer than V0's
    /// `max_seq_len_to_capture` (V0 `_use_captured_graph`: `max_decode_seq_len <=
    /// max_seq_len_to_capture`).
    pub fn decode_seconds(&self, n: u64, ctx_sum: u64, ctx_max: u64) -> f64 {
        match self.graph_seq_len_limit {
            Some(limit) if n > 0 && ctx_max + 1 > limit => {
                let sh = self.shape_terms_in(ExecMode::Eager, n, n, 0.0 + n as f64);
                self.seconds_of(&sh, 0.0, 0.0, 0.0, n, ctx_sum)
            }
            _ => self.step_seconds(std::iter::empty(), n, ctx_sum),
        }
    }

    /// [`StepCostModel::step_seconds`] of `count` decode-only steps of `n` decodes whose
    /// contexts sum to `ctx_first`, `ctx_first + n`, ... (the steps of a decode run,
    /// engine/sched_run.rs), each rounded to ticks and pushed to `out`: the same arithmetic as
    /// one `step_seconds` call per step (its chunk loop runs zero times; `tests/perf_props.rs`).
    pub fn decode_run_ticks(&self, n: u64, ctx_first: u64, count: usize, out: &mut Vec<Ticks>) {
        if n == 0 {
            let t = secs_to_ticks(StepBreakdown::default().total());
            out.extend(std::iter::repeat_n(t, count));
            return;
        }
        let computed;
        let sh = match self.decode_table.get(n as usize) {
            Some(sh) => sh,
            None => {
                // `step_seconds`' `requests`: 0 prefills + n decodes.
                computed = self.shape_terms(n, 0.0 + n as f64, false);
                &computed
            }
        };
        let mut ctx = ctx_first;
        for _ in 0..count {
            out.push(secs_to_ticks(self.seconds_of(sh, 0.0, 0.0, 0.0, n, ctx)));
            ctx += n;
        }
    }

    /// Seconds of `bytes` of KV-cache traffic of which `state` are linear-attention layers'
    /// recurrent-state reads and writes: the paged bytes at `hbm_kv`, the state at `hbm_state`
    /// (docs/step-time.md §2). Without state bytes, exactly `bytes x kv_s_per_byte`.
    #[inline(always)]
    fn kv_seconds(&self, bytes: f64, state: f64) -> f64 {
        (bytes - state) * self.kv_s_per_byte + state * self.state_s_per_byte
    }

    /// The step seconds from its shape terms, its prefill attention FLOPs, KV-traffic seconds
    /// ([`StepCostModel::kv_seconds`]) and seconds on FlashMLA's sparse kernels, and its decodes
    /// (the second half of [`StepCostModel::step_seconds`]).
    #[inline(always)]
    fn seconds_of(
        &self,
        sh: &ShapeTerms,
        pf_flops: f64,
        pf_kv_s: f64,
        pf_sparse_s: f64,
        decode_seqs: u64,
        decode_ctx_sum: u64,
    ) -> f64 {
        // Attention.
        let pf_flops = self.div_tp(pf_flops);
        let (mut dc_flops, mut dc_kv_s, mut dc_sparse_s) = (0.0, 0.0, 0.0);
        if decode_seqs > 0 {
            let n = decode_seqs as f64;
            let mean = decode_ctx_sum as f64 / n;
            dc_flops = self.div_tp(n * self.attn.decode_flops(mean));
            dc_kv_s = self.kv_seconds(
                n * (self.attn.kv_bytes(mean) + self.kv_write_bytes_per_token),
                n * self.attn.state_bytes(mean),
            );
            dc_sparse_s = n * self.sparse_s_per_query_decode;
        }
        let (mut attention_compute, mut kv_reads) = (0.0, 0.0);
        for (c, mm) in [
            (
                pf_flops * self.attn_compute_s_per_flop_prefill + pf_sparse_s,
                pf_kv_s,
            ),
            (
                dc_flops * self.attn_compute_s_per_flop_decode + dc_sparse_s,
                dc_kv_s,
            ),
        ] {
            if c >= mm {
                attention_compute += c;
            } else {
                kv_reads += mm;
            }
        }

        // Overheads (`StepBreakdown::total` with the overhead still 0, then the excess of the
        // floor over it), and the total in `StepBreakdown::total`'s order.
        let gpu = sh.gemm_compute
            + attention_compute
            + sh.weight_reads
            + kv_reads
            + sh.activations
            + sh.tp_allreduce
            + sh.ep_alltoall
            + 0.0
            + sh.moe_floor
            + sh.mla_floor;
        let overhead = sh.overhead_base + (sh.floor - gpu).max(0.0);
        sh.gemm_compute
            + attention_compute
            + sh.weight_reads
            + kv_reads
            + sh.activations
            + sh.tp_allreduce
            + sh.ep_alltoall
            + overhead
            + sh.moe_floor
            + sh.mla_floor
    }

    /// Seconds on the prefill attention's compute side beyond its FLOPs for `tokens` prefill tokens
    /// whose Gated DeltaNet chunk chain costs `gdn_s`: FlashMLA's sparse kernels per query token,
    /// plus the chain. One formula for the plain step, its breakdown and the speculative step.
    #[inline]
    fn prefill_extra_s(&self, tokens: u64, gdn_s: f64) -> f64 {
        tokens as f64 * self.sparse_s_per_query_prefill + gdn_s
    }

    /// The Gated DeltaNet prefill kernels' seconds beyond their FLOPs for a step whose prefill
    /// chunks hold `max` chunks at most and `sum` in all (`gdn::GdnPrefill::excess_s`).
    #[inline]
    fn gdn_excess_s(&self, max: u64, sum: u64, tokens: u64) -> f64 {
        match &self.gdn {
            Some(g) if sum > 0 => g.excess_s(max, sum, tokens),
            _ => 0.0,
        }
    }

    /// `x / tp`, skipping the division at tp = 1 (`x / 1.0` is `x` exactly).
    #[inline]
    fn div_tp(&self, x: f64) -> f64 {
        if self.tp == 1.0 {
            x
        } else {
            x / self.tp
        }
    }

    /// Tensor-parallel all-reduce and MoE dispatch/combine seconds of a step whose GEMMs run on
    /// `t` (padded) tokens.
    #[inline]
    fn comm(&self, t: f64) -> (f64, f64) {
        // Message of one all-reduce: tokens x hidden x 2 bytes.
        let msg = t * self.hidden * ACT_BYTES;
        // `calls` TP all-reduces of `bytes` each: ring passes plus the per-call latency.
        let ar_of = |bytes: f64, calls: f64| {
            Self::ring(self.tp, 2.0 * bytes, self.tp_link_s_per_byte, 0.0, calls)
                + if self.tp > 1.0 {
                    calls * self.tp_latency
                } else {
                    0.0
                }
        };
        let ar = |calls: f64| ar_of(msg, calls);
        // Dense layers: attention-out + MLP-out all-reduce. MoE layers: attention-out all-reduce;
        // the MoE output is all-reduced over TP when dp == 1 (tokens are replicated in the TP
        // group, experts TP- or EP-sharded inside it), else it goes through the DP/EP dispatch.
        let mut tp_ar = ar(2.0 * self.num_dense_layers + self.num_moe_layers);
        // A per-layer QK-norm over TP-sharded projections (MiniMax-M2): one all-reduce per layer of
        // each token's two fp32 variances, latency-bound.
        if self.tp_norm_allreduce_layers > 0.0 {
            tp_ar += ar_of(t * 2.0 * 4.0, self.tp_norm_allreduce_layers);
        }
        let mut moe = 0.0;
        if let (Some(a2a), true) = (&self.a2a, self.num_moe_layers > 0.0) {
            // DP + EP: the backend's dispatch + combine per MoE layer (`perf/all2all.rs`).
            let l = a2a.layer(t as u64);
            moe = self.num_moe_layers * (l.dispatch_s + l.combine_s);
            tp_ar += self.num_moe_layers * l.tp_allgather_s;
        } else if self.num_moe_layers > 0.0 {
            if self.dp <= 1.0 {
                tp_ar += ar(self.num_moe_layers);
            } else {
                match self.all2all_backend {
                    All2AllBackend::AllgatherReducescatter | All2AllBackend::Naive => {
                        // All-gather the hidden states of every DP rank, reduce-scatter back,
                        // plus the TP all-reduce of the expert partials when tp > 1.
                        let total = msg * self.dp;
                        moe += Self::ring(
                            self.dp,
                            total,
                            self.moe_link_s_per_byte,
                            self.moe_latency,
                            2.0 * self.num_moe_layers,
                        );
                        tp_ar += ar(self.num_moe_layers);
                    }
                    All2AllBackend::DeepepHighThroughput | All2AllBackend::DeepepLowLatency => {
                        // Dispatch + combine: each token goes to its k experts, (ep-1)/ep of
                        // them on other GPUs.
                        let g = self.tp * self.dp;
                        let bytes = msg * self.experts_per_tok;
                        moe += Self::ring(
                            g,
                            bytes,
                            self.a2a_link_s_per_byte,
                            self.a2a_latency,
                            2.0 * self.num_moe_layers,
                        );
                    }
                }
            }
        }
        (tp_ar, moe)
    }

    /// [`StepCostModel::breakdown`] with the prefill chunks given as an iterator.
    pub fn breakdown_iter<I>(
        &self,
        prefill: I,
        decode_seqs: u64,
        decode_ctx_sum: u64,
    ) -> StepBreakdown
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        self.breakdown_at(prefill, decode_seqs, decode_ctx_sum, false)
    }

    /// [`StepCostModel::breakdown_iter`] of a step whose longest decode context is
    /// `decode_ctx_max`: a decode-only step runs eagerly above V0's `max_seq_len_to_capture`,
    /// as [`StepCostModel::decode_seconds`] prices it.
    pub fn breakdown_with_ctx_max<I>(
        &self,
        prefill: I,
        decode_seqs: u64,
        decode_ctx_sum: u64,
        decode_ctx_max: u64,
    ) -> StepBreakdown
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        let no_prefill = prefill.clone().all(|c| c.new == 0);
        let over = self
            .graph_seq_len_limit
            .is_some_and(|limit| decode_seqs > 0 && decode_ctx_max + 1 > limit);
        self.breakdown_at(prefill, decode_seqs, decode_ctx_sum, no_prefill && over)
    }

    fn breakdown_at<I>(
        &self,
        prefill: I,
        decode_seqs: u64,
        decode_ctx_sum: u64,
        eager: bool,
    ) -> StepBreakdown
    where
        I: Iterator<Item = PrefillChunk> + Clone,
    {
        let w = StepWork {
            prefill: &[],
            decode_seqs,
            decode_ctx_sum,
        };
        let prefill_tokens: u64 = prefill.clone().map(|c| c.new).sum();
        let tokens = prefill_tokens + w.decode_seqs;
        let mut b = StepBreakdown::default();
        if tokens == 0 {
            return b;
        }
        let has_prefill = prefill_tokens > 0;
        let (mode, padded) = if eager {
            (ExecMode::Eager, tokens)
        } else {
            self.exec_mode(has_prefill, tokens)
        };
        b.mode = mode;
        let t = padded as f64;
        let requests = prefill.clone().filter(|c| c.new > 0).count() as f64 + w.decode_seqs as f64;

        // Non-expert GEMMs vs non-expert weight reads.
        let dense_c = t * self.dense_s_per_token + requests * self.lm_head_s_per_row;
        let dense_m = self.dense_weight_s;
        b.raw.dense_gemm_compute = dense_c;
        b.raw.dense_weight_reads = dense_m;
        b.work.dense_gemm_flops =
            t * self.dense_flops_per_token + requests * self.lm_head_flops_per_row;
        b.work.dense_weight_bytes = self.dense_weight_bytes;

        // Routed experts: tokens of all DP ranks (each rank assumed to run a batch of the same
        // size), spread over the expert GPUs; weights of the activated experts only.
        if self.experts_per_tok > 0.0 {
            let t_global = t * self.dp;
            let frac = self.expert_read_fraction(t_global);
            let bytes = frac * self.expert_weight_bytes_all;
            let c = t_global * self.expert_s_per_token;
            let mm = bytes * self.expert_bytes_s;
            b.raw.expert_gemm_compute = c;
            b.raw.expert_weight_reads = mm;
            b.work.expert_gemm_flops = t_global * self.expert_flops_per_token;
            b.work.expert_weight_bytes = bytes;
            b.work.experts_active_fraction = frac;
            b.moe_floor = self.moe_floor_s;
        }
        b.mla_floor = self.mla_floor_s;
        for (c, mm) in [
            (b.raw.dense_gemm_compute, b.raw.dense_weight_reads),
            (b.raw.expert_gemm_compute, b.raw.expert_weight_reads),
        ] {
            if c >= mm {
                b.gemm_compute += c;
            } else {
                b.weight_reads += mm;
            }
        }

        // Prefill attention: exact per chunk; reads its past context once, writes its new KV.
        let mut pf_flops = 0.0;
        let (mut pf_bytes, mut pf_state) = (0.0, 0.0);
        let (mut gdn_max, mut gdn_sum) = (0u64, 0u64);
        for ch in prefill {
            if ch.new == 0 {
                continue;
            }
            let c = gdn::chunks(ch.new);
            gdn_max = gdn_max.max(c);
            gdn_sum += c;
            pf_flops += self.attn.chunk_flops(ch.past, ch.new);
            let past = ch.past as f64;
            pf_bytes += self.attn.kv_bytes(past) + ch.new as f64 * self.kv_write_bytes_per_token;
            pf_state += self.attn.state_bytes(past);
        }
        pf_flops /= self.tp;
        // DeepSeek sparse attention on FlashMLA's sparse kernels: per query token.
        let pf_sparse_flops = prefill_tokens as f64 * self.sparse_flops_per_query;
        let gdn_s = self.gdn_excess_s(gdn_max, gdn_sum, prefill_tokens);
        b.raw.gdn_prefill = gdn_s;
        let pf_sparse_s = self.prefill_extra_s(prefill_tokens, gdn_s);
        // Decode attention: mean-field at the mean context.
        let (mut dc_flops, mut dc_bytes, mut dc_state, mut dc_sparse_flops, mut dc_sparse_s) =
            (0.0, 0.0, 0.0, 0.0, 0.0);
        if w.decode_seqs > 0 {
            let n = w.decode_seqs as f64;
            let mean = w.decode_ctx_sum as f64 / n;
            dc_flops = n * self.attn.decode_flops(mean) / self.tp;
            dc_bytes = n * (self.attn.kv_bytes(mean) + self.kv_write_bytes_per_token);
            dc_state = n * self.attn.state_bytes(mean);
            dc_sparse_flops = n * self.sparse_flops_per_query;
            dc_sparse_s = n * self.sparse_s_per_query_decode;
        }
        b.raw.prefill_attention_compute =
            pf_flops * self.attn_compute_s_per_flop_prefill + pf_sparse_s;
        b.raw.prefill_kv_reads = self.kv_seconds(pf_bytes, pf_state);
        b.raw.decode_attention_compute =
            dc_flops * self.attn_compute_s_per_flop_decode + dc_sparse_s;
        b.raw.decode_kv_reads = self.kv_seconds(dc_bytes, dc_state);
        for (c, mm) in [
            (b.raw.prefill_attention_compute, b.raw.prefill_kv_reads),
            (b.raw.decode_attention_compute, b.raw.decode_kv_reads),
        ] {
            if c >= mm {
                b.attention_compute += c;
            } else {
                b.kv_reads += mm;
            }
        }
        b.work.attention_flops = pf_flops + dc_flops + pf_sparse_flops + dc_sparse_flops;
        b.work.kv_bytes = pf_bytes + dc_bytes;

        // Elementwise activation traffic (real tokens; padding rows are cheap elementwise).
        let act = tokens as f64
            * self.hidden
            * ACT_BYTES
            * self.num_layers
            * self.eff.activation_vectors_per_layer;
        b.work.activation_bytes = act;
        b.activations = act * self.act_s_per_byte;

        // Communication.
        let (tp_ar, moe) = self.comm(t);
        b.tp_allreduce = tp_ar;
        b.ep_alltoall = moe;
        if self.num_moe_layers > 0.0 {
            b.all2all = self.a2a.map(|a| a.layer(padded));
        }

        // Overheads. The GPU time has a floor of `layer_gpu_floor_s` per layer, and the CPU launch
        // time of kernels outside graphs is hidden behind GPU work when the GPU is slower: only
        // the excess of the larger of the two over the roofline GPU time counts.
        let (fixed, launch, floor) = self.mode_overheads(mode);
        b.raw.launch = launch;
        if mode == ExecMode::Eager {
            b.raw.unfused_fp8 = self.unfused_launch_s;
        }
        let gpu = b.total();
        b.overhead = fixed + requests * self.eff.per_request_overhead_s + (floor - gpu).max(0.0);
        b.work.tokens = tokens;
        b.work.padded_tokens = padded;
        b
    }
}
