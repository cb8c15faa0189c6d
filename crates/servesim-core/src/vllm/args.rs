//! The one table of `vllm serve` arguments (and the environment variables and ServeSim-only
//! deployment flags next to them): each entry's name, aliases, arity and what it does to a
//! [`Scenario`] — sets a field, is ignored (changes neither memory nor speed, with the reason), is
//! accepted but not modelled (changes speed or memory in vLLM; ServeSim's numbers leave it out),
//! or is refused. The CLI's flags, the command-line/manifest parser and the page's per-argument
//! table all derive from [`registry`]. Documented in docs/inputs.md.
//!
//! To add a flag: add one [`ArgSpec`] (and, if it sets a new field, a [`Target`] arm in
//! [`apply`] and in `command::to_vllm_command`).

use crate::deploy::{All2AllBackend, CudagraphMode, PerformanceMode};
use crate::dtype::{KvCacheDtype, WeightPrecision};
use crate::scenario::{GpuRef, ModelRef, Scenario};
use serde::Serialize;

/// How many values an argument takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arity {
    /// `--enforce-eager`: no value.
    Flag,
    /// `--max-num-seqs 256` / `--max-num-seqs=256`.
    Value,
}

/// Where an argument comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A `vllm serve` argument.
    Vllm,
    /// An environment variable vLLM reads (`NAME=VALUE` before the command).
    Env,
    /// A ServeSim deployment flag with no `vllm serve` equivalent (`--gpu`, `--num-gpus`, ...);
    /// in a pasted command it is written as a `# servesim: --gpu H100` comment line.
    ServeSim,
}

/// The scenario field an argument sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Model,
    Gpu,
    NumGpus,
    Tp,
    Dp,
    Ep,
    /// `--pipeline-parallel-size`: 1 is accepted, more is refused (not modelled).
    Pp,
    /// `--enable-expert-parallel`: ep = tp * dp once all arguments are read.
    EnableExpertParallel,
    WeightPrecision,
    /// vLLM's `--quantization`: fp8 -> fp8 weights; the checkpoint's own method -> checkpoint.
    Quantization,
    KvCacheDtype,
    /// `--dtype`: 16-bit types are accepted (same bytes and speed), float32 refused.
    Dtype,
    MaxModelLen,
    MaxNumSeqs,
    MaxNumBatchedTokens,
    GpuMemoryUtilization,
    BlockSize,
    EnablePrefixCaching,
    DisablePrefixCaching,
    EnableChunkedPrefill,
    DisableChunkedPrefill,
    EnforceEager,
    /// `--compilation-config JSON` (and `-O.KEY=V` / `-cc.KEY=V` / `--compilation-config.KEY=V`).
    CompilationConfig,
    CudagraphMode,
    KvCacheMemoryBytes,
    LongPrefillTokenThreshold,
    /// `--num-scheduler-steps` (V0 multi-step scheduling) -> `engine.num_scheduler_steps`.
    NumSchedulerSteps,
    All2AllBackend,
    EstimateCudagraphs,
    AllowLongMaxModelLen,
    VllmVersion,
    /// `--speculative-config JSON` -> `engine.speculative_config` (docs/engine.md).
    SpeculativeConfig,
    /// ServeSim's stated draft acceptance -> `engine.speculative_acceptance`.
    SpeculativeAcceptance,
    /// `--kv-transfer-config JSON` -> `engine.kv_transfer_config` (docs/engine.md "CPU KV
    /// offload tier").
    KvTransferConfig,
    /// ServeSim's host-link rate for the CPU tier -> `engine.host_link_gb_s`.
    HostLinkGbS,
    /// ServeSim's host memory per node for the CPU tier -> `engine.host_memory_gb_per_node`.
    HostMemoryGbPerNode,
    /// `--language-model-only` -> `engine.language_model_only`.
    LanguageModelOnly,
    /// `--limit-mm-per-prompt JSON` (or `.MODALITY N`): image and video 0 -> `engine.language_model_only`;
    /// other limits change nothing for text workloads.
    LimitMmPerPrompt,
    /// `--mm-encoder-tp-mode data|weights` -> `engine.mm_encoder_data_parallel`.
    MmEncoderTpMode,
    /// `--performance-mode balanced|interactivity|throughput` -> `engine.performance_mode`.
    PerformanceMode,
}

/// What an argument does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "detail")]
pub enum Effect {
    Sets(Target),
    /// Accepted; changes neither memory nor speed (the reason says why).
    Ignored(&'static str),
    /// Accepted; changes speed or memory in vLLM, but ServeSim does not model it yet.
    NotModelled(&'static str),
    /// Refused: ServeSim cannot simulate it (the reason names the fix).
    Refused(&'static str),
}

/// One argument of the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ArgSpec {
    /// Long name without dashes (`tensor-parallel-size`), or the environment variable's name.
    pub name: &'static str,
    /// Other spellings as written (`-tp`, `--tp`).
    pub aliases: &'static [&'static str],
    pub arity: Arity,
    pub origin: Origin,
    pub effect: Effect,
    /// The scenario field it sets (JSON path), or "" for ignored ones.
    pub field: &'static str,
    pub help: &'static str,
}

impl ArgSpec {
    /// The canonical spelling (`--tensor-parallel-size`, or the variable's name).
    pub fn flag(&self) -> String {
        match self.origin {
            Origin::Env => self.name.to_string(),
            _ => format!("--{}", self.name),
        }
    }
}

const fn sets(
    name: &'static str,
    aliases: &'static [&'static str],
    arity: Arity,
    t: Target,
    field: &'static str,
    help: &'static str,
) -> ArgSpec {
    ArgSpec {
        name,
        aliases,
        arity,
        origin: Origin::Vllm,
        effect: Effect::Sets(t),
        field,
        help,
    }
}

const fn other(name: &'static str, arity: Arity, effect: Effect) -> ArgSpec {
    ArgSpec {
        name,
        aliases: &[],
        arity,
        origin: Origin::Vllm,
        effect,
        field: "",
        help: "",
    }
}

const fn servesim(
    name: &'static str,
    aliases: &'static [&'static str],
    t: Target,
    field: &'static str,
    help: &'static str,
) -> ArgSpec {
    ArgSpec {
        name,
        aliases,
        arity: Arity::Value,
        origin: Origin::ServeSim,
        effect: Effect::Sets(t),
        field,
        help,
    }
}

const fn env(name: &'static str, effect: Effect, field: &'static str) -> ArgSpec {
    ArgSpec {
        name,
        aliases: &[],
        arity: Arity::Value,
        origin: Origin::Env,
        effect,
        field,
        help: "",
    }
}

use Arity::{Flag, Value};
use Effect::{Ignored, NotModelled, Refused};

const API: &str = "API-server behaviour (networking, logging, auth, chat templates, parsers): no effect on memory or step time";
const LOAD: &str = "where and how weights are loaded: changes start-up time only";
const MULTI_NODE: &str =
    "multi-node launch plumbing (addresses, ports, ranks): the layout comes from TP/DP";
const MM: &str = "multimodal inputs: ServeSim's workloads are text-only";
const V0: &str = "a V0-engine setting that vLLM V1 ignores";
const KERNEL: &str = "kernel / backend choice: changes speed, but ServeSim's step-time model has one calibrated kernel set per GPU generation";

static REGISTRY: &[ArgSpec] = &[
    // --- model and layout -----------------------------------------------------------------
    sets("model", &[], Value, Target::Model, "model", "Hugging Face id (positional after `vllm serve`, or --model)"),
    sets("tensor-parallel-size", &["-tp", "--tp"], Value, Target::Tp, "tp", "tensor-parallel size"),
    sets("data-parallel-size", &["-dp", "--dp"], Value, Target::Dp, "dp", "data-parallel size (one KV cache and scheduler per rank)"),
    sets("pipeline-parallel-size", &["-pp"], Value, Target::Pp, "", "pipeline-parallel size: 1 only (pipeline parallelism is not modelled)"),
    sets("enable-expert-parallel", &[], Flag, Target::EnableExpertParallel, "ep", "shard MoE experts over all tp*dp GPUs (ep = tp * dp)"),
    sets("quantization", &["-q"], Value, Target::Quantization, "weight_precision", "fp8 = online fp8 weights; the checkpoint's own method (modelopt, compressed-tensors, mxfp4, fbgemm_fp8, ...) = checkpoint"),
    sets("kv-cache-dtype", &[], Value, Target::KvCacheDtype, "kv_cache_dtype", "auto | bfloat16 | fp8 | fp8_e4m3 | fp8_e5m2 | fp8_ds_mla"),
    sets("dtype", &[], Value, Target::Dtype, "", "auto / bfloat16 / float16 / half: same bytes and speed in ServeSim; float32 is refused"),
    // --- engine settings --------------------------------------------------------------------
    sets("max-model-len", &[], Value, Target::MaxModelLen, "engine.max_model_len", "context limit; vLLM's human-readable forms (32k = 32000, 32K = 32768) are accepted"),
    sets("max-num-seqs", &[], Value, Target::MaxNumSeqs, "engine.max_num_seqs", "running requests per engine"),
    sets("max-num-batched-tokens", &[], Value, Target::MaxNumBatchedTokens, "engine.max_num_batched_tokens", "token budget per step (accepts 8k / 8K)"),
    sets("gpu-memory-utilization", &[], Value, Target::GpuMemoryUtilization, "engine.gpu_memory_utilization", "fraction of GPU memory vLLM may use"),
    sets("block-size", &[], Value, Target::BlockSize, "engine.block_size", "KV block size in tokens"),
    sets("enable-prefix-caching", &[], Flag, Target::EnablePrefixCaching, "engine.enable_prefix_caching", "prefix caching on (vLLM V1's default)"),
    sets("no-enable-prefix-caching", &[], Flag, Target::DisablePrefixCaching, "engine.enable_prefix_caching", "prefix caching off"),
    sets("enforce-eager", &[], Flag, Target::EnforceEager, "engine.enforce_eager", "no CUDA graphs"),
    sets("compilation-config", &["-O"], Value, Target::CompilationConfig, "engine.cudagraph_mode", "JSON; cudagraph_mode and cudagraph_capture_sizes are read, other keys are listed as ignored"),
    sets("cudagraph-mode", &[], Value, Target::CudagraphMode, "engine.cudagraph_mode", "ServeSim shorthand for --compilation-config '{\"cudagraph_mode\": ...}'"),
    sets("kv-cache-memory-bytes", &["--kv-cache-memory"], Value, Target::KvCacheMemoryBytes, "engine.kv_cache_memory_bytes", "KV cache size in bytes (replaces the profiled budget; accepts 40G / 40GiB-style suffixes)"),
    sets("long-prefill-token-threshold", &[], Value, Target::LongPrefillTokenThreshold, "engine.long_prefill_token_threshold", "prefills longer than this are chunked to it"),
    sets("all2all-backend", &[], Value, Target::All2AllBackend, "engine.all2all_backend", "allgather_reducescatter | deepep_high_throughput | deepep_low_latency | naive"),
    sets("performance-mode", &[], Value, Target::PerformanceMode, "engine.performance_mode", "balanced | interactivity | throughput (vLLM >= 0.17): throughput doubles the default max_num_seqs and max_num_batched_tokens; interactivity captures CUDA graphs at every batch size up to 32"),
    // --- vLLM arguments ServeSim does not model -------------------------------------------
    sets("speculative-config", &[], Value, Target::SpeculativeConfig, "engine.speculative_config", "JSON: method, num_speculative_tokens, model, ... (docs/engine.md \"Speculative decoding\")"),
    sets("kv-transfer-config", &[], Value, Target::KvTransferConfig, "engine.kv_transfer_config", "JSON: OffloadingConnector / SimpleCPUOffloadConnector (CPU KV tier), NixlConnector, MultiConnector (docs/engine.md \"CPU KV offload tier\")"),
    other("async-scheduling", Flag, NotModelled("overlaps CPU scheduling with the GPU step: ServeSim's step time has no separate CPU scheduling term to overlap")),
    other("no-async-scheduling", Flag, NotModelled("see --async-scheduling")),
    sets("enable-chunked-prefill", &[], Flag, Target::EnableChunkedPrefill, "engine.enable_chunked_prefill", "chunked prefill on (vLLM V1's default)"),
    sets("no-enable-chunked-prefill", &[], Flag, Target::DisableChunkedPrefill, "engine.enable_chunked_prefill", "chunked prefill off: a prompt is prefilled whole in one step or waits"),
    other("enable-eplb", Flag, NotModelled("expert load balancing: ServeSim assumes balanced experts")),
    other("eplb-config", Value, NotModelled("expert load balancing: ServeSim assumes balanced experts")),
    other("num-redundant-experts", Value, NotModelled("redundant experts (EPLB): not in ServeSim's weight sizing")),
    other("enable-dbo", Flag, NotModelled("dual-batch overlap of EP communication: not modelled")),
    other("attention-backend", Value, NotModelled(KERNEL)),
    other("moe-backend", Value, NotModelled(KERNEL)),
    other("disable-custom-all-reduce", Flag, NotModelled("NCCL instead of the custom all-reduce: ServeSim uses one all-reduce cost")),
    other("max-num-partial-prefills", Value, NotModelled("concurrent partial prefills: ServeSim's scheduler runs vLLM V1's default")),
    other("max-long-partial-prefills", Value, NotModelled("concurrent partial prefills: ServeSim's scheduler runs vLLM V1's default")),
    other("scheduling-policy", Value, NotModelled("ServeSim's scheduler is FCFS (vLLM's default); `fcfs` changes nothing")),
    other("cpu-offload-gb", Value, NotModelled("CPU weight offload: not in ServeSim's memory model")),
    other("kv-offloading-size", Value, NotModelled("CPU KV offload: ServeSim's scenario has no field for it yet")),
    other("kv-offloading-backend", Value, NotModelled("CPU KV offload: ServeSim's scenario has no field for it yet")),
    other("hf-overrides", Value, NotModelled("overrides of config.json: paste the changed config.json as a custom model instead")),
    other("cuda-graph-sizes", Value, NotModelled("use --compilation-config '{\"cudagraph_capture_sizes\": [...]}'")),
    other("api-server-count", Value, NotModelled("front-end processes: ServeSim's front-end cost is per request (docs/accuracy.md)")),
    other("stream-interval", Value, NotModelled("streaming batching of tokens: ServeSim streams every token")),
    other("config", Value, Refused("a YAML file of arguments: paste its arguments (or the file's content as a manifest) instead")),
    other("lora-modules", Value, NotModelled("LoRA adapters are not modelled")),
    other("enable-lora", Flag, NotModelled("LoRA adapters are not modelled")),
    other("swap-space", Value, Ignored(V0)),
    sets("num-scheduler-steps", &[], Value, Target::NumSchedulerSteps, "engine.num_scheduler_steps", "V0 multi-step scheduling: steps per scheduling round (vllm_version < 0.8)"),
    other("use-v2-block-manager", Flag, Ignored(V0)),
    other("disable-log-requests", Flag, Ignored(API)),
    other("enable-log-requests", Flag, Ignored(API)),
    other("disable-log-stats", Flag, Ignored(API)),
    other("disable-uvicorn-access-log", Flag, Ignored(API)),
    other("uvicorn-log-level", Value, Ignored(API)),
    other("max-log-len", Value, Ignored(API)),
    other("host", Value, Ignored(API)),
    other("port", Value, Ignored(API)),
    other("api-key", Value, Ignored(API)),
    other("served-model-name", Value, Ignored(API)),
    other("chat-template", Value, Ignored(API)),
    other("response-role", Value, Ignored(API)),
    other("enable-auto-tool-choice", Flag, Ignored(API)),
    other("tool-call-parser", Value, Ignored(API)),
    other("reasoning-parser", Value, Ignored(API)),
    other("enable-prompt-tokens-details", Flag, Ignored(API)),
    other("enable-force-include-usage", Flag, Ignored(API)),
    other("root-path", Value, Ignored(API)),
    other("allowed-origins", Value, Ignored(API)),
    other("generation-config", Value, Ignored("default sampling parameters: ServeSim's workloads fix the output lengths")),
    other("override-generation-config", Value, Ignored("default sampling parameters: ServeSim's workloads fix the output lengths")),
    other("seed", Value, Ignored("sampling seed: no effect on speed")),
    other("trust-remote-code", Flag, Ignored(LOAD)),
    other("tokenizer", Value, Ignored(LOAD)),
    other("tokenizer-mode", Value, Ignored(LOAD)),
    other("revision", Value, Ignored(LOAD)),
    other("download-dir", Value, Ignored(LOAD)),
    other("load-format", Value, Ignored(LOAD)),
    other("safetensors-load-strategy", Value, Ignored(LOAD)),
    other("distributed-executor-backend", Value, Ignored("process launcher (mp / ray): no effect on step time")),
    other("data-parallel-size-local", Value, Ignored(MULTI_NODE)),
    other("data-parallel-address", Value, Ignored(MULTI_NODE)),
    other("data-parallel-rpc-port", Value, Ignored(MULTI_NODE)),
    other("data-parallel-start-rank", Value, Ignored(MULTI_NODE)),
    other("data-parallel-backend", Value, Ignored(MULTI_NODE)),
    other("headless", Flag, Ignored(MULTI_NODE)),
    sets("language-model-only", &[], Flag, Target::LanguageModelOnly, "engine.language_model_only", "text only: vLLM does not load a multimodal checkpoint's vision encoder (its weights leave the memory budget)"),
    sets("limit-mm-per-prompt", &[], Value, Target::LimitMmPerPrompt, "engine.language_model_only", "JSON of per-modality limits (or --limit-mm-per-prompt.MODALITY N): image and video both 0 is --language-model-only (the vision encoder is not loaded); other limits change nothing for ServeSim's text workloads"),
    other("mm-processor-kwargs", Value, Ignored(MM)),
    sets("mm-encoder-tp-mode", &[], Value, Target::MmEncoderTpMode, "engine.mm_encoder_data_parallel", "weights (default: the vision encoder split over TP) | data (a whole copy on every TP rank)"),
    other("enable-sleep-mode", Flag, Ignored("sleep mode frees memory while idle: no effect while serving")),
    // --- ServeSim deployment flags (no vLLM equivalent) -------------------------------------
    servesim("gpu", &[], Target::Gpu, "gpu", "GPU: catalog id, alias, nvidia-smi / rocm-smi name or Kubernetes label"),
    servesim("num-gpus", &[], Target::NumGpus, "num_gpus", "total GPUs (a multiple of tp*dp; replicas = num_gpus / (tp*dp))"),
    servesim("ep", &[], Target::Ep, "ep", "expert-parallel size: 1, or tp*dp (what --enable-expert-parallel sets)"),
    servesim("weight-precision", &[], Target::WeightPrecision, "weight_precision", "checkpoint | bf16 | fp8 | fp4 (what-if serving precision)"),
    servesim("vllm-version", &[], Target::VllmVersion, "vllm_version", "the vLLM version served (selects the calibration line; before 0.8, V0's engine defaults)"),
    servesim("host-link-gb-s", &[], Target::HostLinkGbS, "engine.host_link_gb_s", "GB/s per GPU and direction of the CPU KV tier's host link (default: the GPU's link as achieved, docs/step-time.md \"Host link\")"),
    servesim("host-memory-gb-per-node", &[], Target::HostMemoryGbPerNode, "engine.host_memory_gb_per_node", "host memory of one node in GB, which bounds the CPU KV tier (default: the system table, docs/engine.md \"Host memory\")"),
    servesim("speculative-acceptance", &[], Target::SpeculativeAcceptance, "engine.speculative_acceptance", "JSON: the draft acceptance the simulation draws from (vLLM measures it; ServeSim needs it stated)"),
    // --- environment variables --------------------------------------------------------------
    env("VLLM_ALLOW_LONG_MAX_MODEL_LEN", Effect::Sets(Target::AllowLongMaxModelLen), "engine.allow_long_max_model_len"),
    env("VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", Effect::Sets(Target::EstimateCudagraphs), "engine.estimate_cudagraphs_in_profile"),
    env("VLLM_ALL2ALL_BACKEND", Effect::Sets(Target::All2AllBackend), "engine.all2all_backend"),
    env("VLLM_USE_DEEP_GEMM", NotModelled(KERNEL), ""),
    env("VLLM_ATTENTION_BACKEND", NotModelled(KERNEL), ""),
    env("VLLM_USE_FLASHINFER_MOE_FP8", NotModelled(KERNEL), ""),
    env("VLLM_USE_FLASHINFER_MOE_FP4", NotModelled(KERNEL), ""),
    env("VLLM_ROCM_USE_AITER", NotModelled(KERNEL), ""),
    env("VLLM_USE_V1", Ignored("vLLM V1 is the engine ServeSim models"), ""),
    env("CUDA_VISIBLE_DEVICES", Ignored("which GPUs; their number comes from TP x DP"), ""),
];

/// Every argument ServeSim knows, in table order.
pub fn registry() -> &'static [ArgSpec] {
    REGISTRY
}

/// Environment variables that only say where things are (tokens, caches, logging): ignored.
fn ignored_env_prefix(name: &str) -> bool {
    [
        "HF_",
        "HUGGING_FACE",
        "TRANSFORMERS_",
        "NCCL_DEBUG",
        "VLLM_LOGGING",
        "VLLM_CONFIGURE_LOGGING",
        "PYTHON",
        "TORCH_HOME",
        "XDG_",
        "HOME",
        "PATH",
        "VLLM_HOST_IP",
        "VLLM_PORT",
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// Finds an argument by any spelling: `--max-num-seqs`, `--max_num_seqs` (vLLM accepts
/// underscores), `-tp`, `--tp`, or an environment variable's name.
pub fn lookup(spelling: &str) -> Option<&'static ArgSpec> {
    let s = spelling.trim();
    if !s.starts_with('-') {
        return REGISTRY
            .iter()
            .find(|a| a.origin == Origin::Env && a.name == s);
    }
    let long = s.strip_prefix("--").map(|n| n.replace('_', "-"));
    REGISTRY.iter().find(|a| {
        a.origin != Origin::Env && (long.as_deref() == Some(a.name) || a.aliases.contains(&s))
    })
}

/// How one argument was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Sets a scenario field.
    Understood,
    /// Changes neither memory nor speed.
    Ignored,
    /// Changes speed or memory in vLLM; ServeSim leaves it out.
    NotModelled,
    /// ServeSim cannot simulate this; the scenario is not built.
    Refused,
    /// Not an argument ServeSim knows; ignored (check it does not change memory or speed).
    Unknown,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Understood => "understood",
            Status::Ignored => "ignored",
            Status::NotModelled => "not modelled",
            Status::Refused => "refused",
            Status::Unknown => "unknown",
        }
    }
}

/// One argument of a parsed command or manifest, with what ServeSim did with it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ArgReport {
    /// As written (`--tensor-parallel-size`, `-tp`, `VLLM_USE_DEEP_GEMM`, `replicas`).
    pub arg: String,
    pub value: Option<String>,
    pub status: Status,
    /// The scenario field set (`tp = 4`) or the reason.
    pub detail: String,
}

/// Why a V0-engine argument that V1 ignores ([`V0`]) matters in a scenario that runs V0's engine
/// (`vllm_version` < 0.8), where vLLM honours it but ServeSim, whose scheduler is V1's, does not
/// model it; `None` for the V0 arguments that change neither memory nor speed.
pub fn v0_not_modelled(spelling: &str) -> Option<String> {
    let spec = lookup(spelling)?;
    if spec.effect != Effect::Ignored(V0) {
        return None;
    }
    match spec.name {
        "swap-space" => Some(
            "V0 swaps a preempted request's KV cache to this much CPU memory; ServeSim recomputes a preempted request instead (V1's policy), and the capacity report's CPU block count assumes V0's default 4 GiB".into(),
        ),
        _ => None,
    }
}

/// Parses vLLM's integer forms: `8192`, `8k` (x1000), `8K` (x1024), `1m`, `1M`, `25.6k`
/// (vLLM's `human_readable_int`).
pub fn parse_int(v: &str) -> Option<i64> {
    let t = v.trim();
    if let Ok(x) = t.parse::<i64>() {
        return Some(x);
    }
    let (num, mult) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 1e3),
        'm' => (&t[..t.len() - 1], 1e6),
        'g' => (&t[..t.len() - 1], 1e9),
        'K' => (&t[..t.len() - 1], 1024.0),
        'M' => (&t[..t.len() - 1], 1024.0 * 1024.0),
        'G' => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => return None,
    };
    let x: f64 = num.parse().ok()?;
    let r = x * mult;
    (r.is_finite() && r.fract() == 0.0 && r.abs() < 9.0e18).then_some(r as i64)
}

/// Byte sizes: plain integers, or with `K/M/G/T` (+ optional `i`, `B`, `iB`) suffixes, binary.
fn parse_bytes(v: &str) -> Option<i64> {
    let t = v.trim();
    if let Ok(x) = t.parse::<i64>() {
        return Some(x);
    }
    let t = t.trim_end_matches(['B', 'b']).trim_end_matches('i');
    let (num, shift) = match t.chars().last()?.to_ascii_uppercase() {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        'T' => (&t[..t.len() - 1], 40),
        _ => return None,
    };
    let x: f64 = num.trim().parse().ok()?;
    let r = x * (1u64 << shift) as f64;
    (r.is_finite() && r >= 0.0 && r.fract() == 0.0 && r < 9.0e18).then_some(r as i64)
}

fn parse_bool_env(v: &str) -> Option<bool> {
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" | "" => Some(false),
        _ => None,
    }
}

fn positive_u32(flag: &str, v: &str) -> Result<u32, String> {
    match parse_int(v) {
        Some(x) if x > 0 && x <= u32::MAX as i64 => Ok(x as u32),
        _ => Err(format!("{flag} {v}: must be a positive integer")),
    }
}

fn int(flag: &str, v: &str) -> Result<i64, String> {
    parse_int(v).ok_or_else(|| {
        format!("{flag} {v}: not an integer (vLLM also accepts 8k = 8000, 8K = 8192)")
    })
}

/// State carried between arguments: `--enable-expert-parallel` and `--quantization` are settled
/// once every argument is read ([`finish`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pending {
    pub enable_expert_parallel: bool,
    /// `--data-parallel-size` or `--ep` seen: the scenario states `enable_expert_parallel`.
    pub layout_given: bool,
    /// `--quantization fp8` seen: fp8 weights unless the checkpoint is already fp8.
    pub online_fp8: bool,
    /// `--ep` stated: `--enable-expert-parallel` keeps it (1 or tp x dp, checked when the
    /// scenario resolves) instead of setting ep = tp x dp.
    pub ep_stated: bool,
    /// `--limit-mm-per-prompt` items per modality read so far (JSON and dotted forms merge).
    pub mm_limits: std::collections::BTreeMap<String, u64>,
}

/// The vLLM-settable parts of a scenario back at their defaults (what a command that does not
/// mention them means): model kept, layout 1/1/1, precisions and engine settings at vLLM's
/// defaults, one replica. GPU, workload, sweep and calibration fields are kept.
pub fn reset_vllm_fields(s: &mut Scenario) {
    s.tp = 1;
    s.dp = 1;
    s.ep = 1;
    s.enable_expert_parallel = None;
    s.num_gpus = None;
    s.weight_precision = WeightPrecision::Checkpoint;
    s.kv_cache_dtype = KvCacheDtype::Auto;
    s.engine = Default::default();
}

/// Applies one argument to the scenario. `Ok(detail)` says what was set or why it was ignored;
/// `Err` is a refusal (bad value, or something ServeSim cannot simulate), naming the fix.
/// Returns the status the argument gets.
pub fn apply(
    s: &mut Scenario,
    p: &mut Pending,
    spec: &ArgSpec,
    value: Option<&str>,
) -> Result<(Status, String), String> {
    let flag = spec.flag();
    let t = match spec.effect {
        Effect::Ignored(why) => return Ok((Status::Ignored, why.to_string())),
        Effect::NotModelled(why) => return Ok((Status::NotModelled, why.to_string())),
        Effect::Refused(why) => return Err(format!("{flag}: {why}")),
        Effect::Sets(t) => t,
    };
    let need = || value.ok_or_else(|| format!("{flag} needs a value"));
    let e = &mut s.engine;
    let detail = match t {
        Target::Model => {
            let v = need()?.trim();
            s.model = ModelRef::Catalog(v.to_string());
            format!("model = {v}")
        }
        Target::Gpu => {
            let v = need()?.trim();
            crate::gpu::find_gpu(v).map_err(|e| format!("{flag} {v}: {e}"))?;
            s.gpu = GpuRef::Catalog(v.to_string());
            format!("gpu = {v}")
        }
        Target::NumGpus => {
            let n = positive_u32(&flag, need()?)?;
            s.num_gpus = Some(n);
            format!("num_gpus = {n}")
        }
        Target::Tp => {
            s.tp = positive_u32(&flag, need()?)?;
            format!("tp = {}", s.tp)
        }
        Target::Dp => {
            p.layout_given = true;
            s.dp = positive_u32(&flag, need()?)?;
            format!("dp = {}", s.dp)
        }
        Target::Ep => {
            p.layout_given = true;
            p.ep_stated = true;
            s.ep = positive_u32(&flag, need()?)?;
            format!("ep = {}", s.ep)
        }
        Target::Pp => {
            let n = positive_u32(&flag, need()?)?;
            if n != 1 {
                return Err(format!("{flag} {n}: pipeline parallelism is not modelled yet; use --tensor-parallel-size / --data-parallel-size for the same GPUs (e.g. TP {} instead of TP x PP)", n.saturating_mul(s.tp)));
            }
            "pipeline-parallel size 1 (no pipeline parallelism)".into()
        }
        Target::EnableExpertParallel => {
            p.enable_expert_parallel = true;
            "ep = tp * dp (set once every argument is read)".into()
        }
        Target::WeightPrecision => {
            let v = need()?;
            s.weight_precision = WeightPrecision::parse(v)
                .ok_or_else(|| format!("{flag} {v}: use checkpoint, bf16, fp8 or fp4"))?;
            format!("weight_precision = {}", v.trim().to_ascii_lowercase())
        }
        Target::Quantization => {
            let v = need()?.trim().to_ascii_lowercase();
            match v.as_str() {
                "fp8" | "ptpc_fp8" => {
                    p.online_fp8 = true;
                    "weight_precision = fp8 (checkpoint when the checkpoint is already fp8)".into()
                }
                "modelopt" | "modelopt_fp4" | "compressed-tensors" | "compressed_tensors" | "mxfp4" | "fbgemm_fp8" | "quark" | "none" | "awq" | "awq_marlin" | "gptq" | "gptq_marlin" | "marlin" => {
                    s.weight_precision = WeightPrecision::Checkpoint;
                    format!("weight_precision = checkpoint (`{v}` reads the checkpoint's own quantization from its config.json)")
                }
                "bitsandbytes" | "gguf" | "experts_int8" => {
                    return Err(format!("{flag} {v}: this quantization is not modelled; use an AWQ/GPTQ/fp8 checkpoint's config.json, or --quantization fp8 for a nearby estimate"));
                }
                _ => return Err(format!("{flag} {v}: ServeSim understands fp8 and the checkpoint's own methods (modelopt, modelopt_fp4, compressed-tensors, mxfp4, fbgemm_fp8, awq, gptq and their marlin kernels)")),
            }
        }
        Target::KvCacheDtype => {
            let v = need()?;
            s.kv_cache_dtype = KvCacheDtype::parse(v).ok_or_else(|| {
                format!("{flag} {v}: use one of {}", KvCacheDtype::NAMES.join(", "))
            })?;
            format!("kv_cache_dtype = {}", s.kv_cache_dtype.name())
        }
        Target::Dtype => {
            let v = need()?.trim().to_ascii_lowercase();
            match v.as_str() {
                "auto" | "bfloat16" | "bf16" | "float16" | "half" | "fp16" => {
                    return Ok((Status::Ignored, format!("dtype {v}: 16-bit activations cost the same as bf16 in ServeSim's model")));
                }
                _ => {
                    return Err(format!(
                    "{flag} {v}: ServeSim models 16-bit activations only (auto, bfloat16, float16)"
                ))
                }
            }
        }
        Target::MaxModelLen => {
            let v = need()?;
            // vLLM: `-1` and `auto` (any case) are the same auto-fit (`human_readable_int`).
            if v.trim().eq_ignore_ascii_case("auto") || v.trim() == "-1" {
                e.max_model_len = Some(-1);
                "engine.max_model_len = -1 (auto: the longest context the KV memory holds, up to the model's maximum)".into()
            } else {
                e.max_model_len = Some(int(&flag, v)?);
                format!(
                    "engine.max_model_len = {}",
                    e.max_model_len.unwrap_or_default()
                )
            }
        }
        Target::MaxNumSeqs => {
            e.max_num_seqs = Some(int(&flag, need()?)?);
            format!(
                "engine.max_num_seqs = {}",
                e.max_num_seqs.unwrap_or_default()
            )
        }
        Target::MaxNumBatchedTokens => {
            e.max_num_batched_tokens = Some(int(&flag, need()?)?);
            format!(
                "engine.max_num_batched_tokens = {}",
                e.max_num_batched_tokens.unwrap_or_default()
            )
        }
        Target::GpuMemoryUtilization => {
            let v = need()?;
            let x: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{flag} {v}: not a number"))?;
            e.gpu_memory_utilization = Some(x);
            format!("engine.gpu_memory_utilization = {x}")
        }
        Target::BlockSize => {
            e.block_size = Some(int(&flag, need()?)?);
            format!("engine.block_size = {}", e.block_size.unwrap_or_default())
        }
        Target::EnablePrefixCaching => {
            e.enable_prefix_caching = Some(true);
            "engine.enable_prefix_caching = true".into()
        }
        Target::DisablePrefixCaching => {
            e.enable_prefix_caching = Some(false);
            "engine.enable_prefix_caching = false".into()
        }
        Target::EnableChunkedPrefill => {
            e.enable_chunked_prefill = Some(true);
            "engine.enable_chunked_prefill = true".into()
        }
        Target::DisableChunkedPrefill => {
            e.enable_chunked_prefill = Some(false);
            "engine.enable_chunked_prefill = false".into()
        }
        Target::EnforceEager => {
            e.enforce_eager = Some(true);
            "engine.enforce_eager = true".into()
        }
        Target::CudagraphMode => {
            let v = need()?;
            e.cudagraph_mode = Some(CudagraphMode::parse(v).ok_or_else(|| {
                format!(
                    "{flag} {v}: use FULL_AND_PIECEWISE, FULL_DECODE_ONLY, PIECEWISE, FULL or NONE"
                )
            })?);
            format!("engine.cudagraph_mode = {}", v.trim().to_ascii_uppercase())
        }
        Target::CompilationConfig => return compilation_config(s, &flag, need()?),
        Target::LanguageModelOnly => {
            e.language_model_only = Some(true);
            "engine.language_model_only = true".into()
        }
        Target::LimitMmPerPrompt => return limit_mm_per_prompt(s, p, &flag, need()?),
        Target::MmEncoderTpMode => {
            let v = need()?.trim();
            let data = match v.to_ascii_lowercase().as_str() {
                "data" => true,
                "weights" => false,
                _ => return Err(format!("{flag} {v}: use weights or data")),
            };
            e.mm_encoder_data_parallel = Some(data);
            format!("engine.mm_encoder_data_parallel = {data}")
        }
        Target::KvCacheMemoryBytes => {
            let v = need()?;
            e.kv_cache_memory_bytes =
                Some(parse_bytes(v).ok_or_else(|| format!("{flag} {v}: not a byte count"))?);
            format!(
                "engine.kv_cache_memory_bytes = {}",
                e.kv_cache_memory_bytes.unwrap_or_default()
            )
        }
        Target::LongPrefillTokenThreshold => {
            e.long_prefill_token_threshold = Some(int(&flag, need()?)?);
            format!(
                "engine.long_prefill_token_threshold = {}",
                e.long_prefill_token_threshold.unwrap_or_default()
            )
        }
        Target::NumSchedulerSteps => {
            e.num_scheduler_steps = Some(int(&flag, need()?)?);
            format!(
                "engine.num_scheduler_steps = {}",
                e.num_scheduler_steps.unwrap_or_default()
            )
        }
        Target::All2AllBackend => {
            let v = need()?.trim().to_ascii_lowercase();
            let Some(b) = All2AllBackend::parse(&v) else {
                return Ok((Status::NotModelled, format!("all2all backend `{v}`: ServeSim models allgather_reducescatter, deepep_high_throughput, deepep_low_latency and naive; the default is used")));
            };
            e.all2all_backend = Some(b);
            format!("engine.all2all_backend = {v}")
        }
        Target::PerformanceMode => {
            let v = need()?;
            let m = PerformanceMode::parse(v)
                .ok_or_else(|| format!("{flag} {v}: use balanced, interactivity or throughput"))?;
            e.performance_mode = Some(m);
            format!("engine.performance_mode = {}", m.name())
        }
        Target::EstimateCudagraphs | Target::AllowLongMaxModelLen => {
            let v = value.unwrap_or("1");
            let b = parse_bool_env(v).ok_or_else(|| format!("{flag}={v}: use 1 or 0"))?;
            let (slot, name) = if t == Target::EstimateCudagraphs {
                (
                    &mut e.estimate_cudagraphs_in_profile,
                    "engine.estimate_cudagraphs_in_profile",
                )
            } else {
                (
                    &mut e.allow_long_max_model_len,
                    "engine.allow_long_max_model_len",
                )
            };
            *slot = b.then_some(true);
            format!("{name} = {b}")
        }
        Target::SpeculativeConfig => {
            let v = need()?;
            let c: crate::speculative::RawSpeculativeConfig = serde_json::from_str(v.trim())
                .map_err(|e| format!("{flag}: {e}; ServeSim reads method, num_speculative_tokens, model, prompt_lookup_max/min and draft_tensor_parallel_size"))?;
            e.speculative_config = Some(c);
            "engine.speculative_config set (state the acceptance with `# servesim: --speculative-acceptance JSON`)".into()
        }
        Target::HostLinkGbS => {
            let v = need()?;
            let x: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{flag} {v}: not a number of GB/s"))?;
            e.host_link_gb_s = Some(x);
            format!("engine.host_link_gb_s = {x}")
        }
        Target::HostMemoryGbPerNode => {
            let v = need()?;
            let x: f64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{flag} {v}: not a number of GB"))?;
            e.host_memory_gb_per_node = Some(x);
            format!("engine.host_memory_gb_per_node = {x}")
        }
        Target::KvTransferConfig => {
            let v = need()?;
            e.kv_transfer_config =
                Some(crate::offload::parse(v.trim()).map_err(|m| format!("{flag}: {m}"))?);
            "engine.kv_transfer_config set".into()
        }
        Target::SpeculativeAcceptance => {
            let v = need()?;
            let a: crate::speculative::RawSpecAcceptance =
                serde_json::from_str(v.trim()).map_err(|e| format!("{flag}: {e}"))?;
            e.speculative_acceptance = Some(a);
            "engine.speculative_acceptance set".into()
        }
        Target::VllmVersion => {
            let v = need()?.trim();
            crate::perf::VllmVersion::parse(v).map_err(|e| format!("{flag} {v}: {e}"))?;
            s.vllm_version = Some(v.to_string());
            format!("vllm_version = {v}")
        }
    };
    Ok((Status::Understood, detail))
}

/// `--limit-mm-per-prompt`: a JSON object of per-modality limits (a count, or an object with a
/// `count`), or one dotted key (`--limit-mm-per-prompt.video 0`, passed here as `video=0`); the
/// forms merge. vLLM skips a tower when every modality it serves is limited to 0
/// (`SupportsMultiModal._mark_tower_model`): for Qwen3-VL's vision encoder, image and video
/// (`Qwen3_5ForConditionalGeneration`: `_mark_tower_model(vllm_config, {"image", "video"})`),
/// which is what `--language-model-only` sets. A modality not stated keeps vLLM's non-zero default.
fn limit_mm_per_prompt(
    s: &mut Scenario,
    p: &mut Pending,
    flag: &str,
    v: &str,
) -> Result<(Status, String), String> {
    let t = v.trim();
    let hint = "give a JSON object of per-modality limits, e.g. '{\"image\": 0, \"video\": 0}', or --limit-mm-per-prompt.MODALITY N";
    let obj: serde_json::Map<String, serde_json::Value> = if t.starts_with('{') {
        serde_json::from_str(t).map_err(|_| format!("{flag} {v}: {hint}"))?
    } else if let Some((k, n)) = t.split_once('=') {
        let jv = serde_json::from_str(n.trim()).map_err(|_| format!("{flag}.{k} {n}: {hint}"))?;
        std::iter::once((k.trim().to_string(), jv)).collect()
    } else {
        return Err(format!("{flag} {v}: {hint}"));
    };
    let count = |x: &serde_json::Value| match x {
        serde_json::Value::Object(o) => o.get("count").and_then(serde_json::Value::as_u64),
        other => other.as_u64(),
    };
    for (k, x) in &obj {
        let n = count(x).ok_or_else(|| {
            format!("{flag}: the limit of {k} is {x}: give a whole number of items (or {{\"count\": N}})")
        })?;
        p.mm_limits.insert(k.clone(), n);
    }
    let zero = |m: &str| p.mm_limits.get(m) == Some(&0);
    if zero("image") && zero("video") {
        s.engine.language_model_only = Some(true);
        return Ok((
            Status::Understood,
            "image and video limited to 0: engine.language_model_only = true (the vision encoder is not loaded)".into(),
        ));
    }
    if obj.keys().any(|k| zero(k)) {
        return Ok((
            Status::Ignored,
            "recorded; vLLM skips the vision encoder only when image and video are both limited to 0".into(),
        ));
    }
    Ok((Status::Ignored, MM.to_string()))
}

/// `--compilation-config JSON` or one dotted key (`cudagraph_mode=FULL`, from `-O.cudagraph_mode=FULL`
/// / `-cc.cudagraph_mode=FULL`); a bare optimisation level (`-O3`, `-O 3`) is ignored.
fn compilation_config(s: &mut Scenario, flag: &str, v: &str) -> Result<(Status, String), String> {
    let t = v.trim();
    if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() {
        return Ok((
            Status::Ignored,
            format!("optimisation level {t}: ServeSim models CUDA graphs through cudagraph_mode, not the compile level"),
        ));
    }
    let obj: serde_json::Map<String, serde_json::Value> = if t.starts_with('{') {
        serde_json::from_str(t).map_err(|e| format!("{flag}: not a JSON object ({e})"))?
    } else if let Some((k, val)) = t.split_once('=') {
        let jv = serde_json::from_str(val).unwrap_or(serde_json::Value::String(val.to_string()));
        std::iter::once((k.trim().to_string(), jv)).collect()
    } else {
        return Err(format!(
            "{flag} {t}: expected a JSON object, KEY=VALUE or an optimisation level"
        ));
    };
    let mut done = Vec::new();
    let mut ignored = Vec::new();
    for (k, val) in &obj {
        match k.as_str() {
            "cudagraph_mode" => {
                let m = val.as_str().and_then(CudagraphMode::parse).ok_or_else(|| {
                    format!("{flag}: cudagraph_mode {val}: use FULL_AND_PIECEWISE, FULL_DECODE_ONLY, PIECEWISE, FULL or NONE")
                })?;
                s.engine.cudagraph_mode = Some(m);
                done.push(format!("engine.cudagraph_mode = {}", m.name()));
            }
            "cudagraph_capture_sizes" => {
                let sizes: Vec<i64> = serde_json::from_value(val.clone()).map_err(|_| {
                    format!("{flag}: cudagraph_capture_sizes must be a list of integers")
                })?;
                done.push(format!(
                    "engine.cudagraph_capture_sizes = {} sizes",
                    sizes.len()
                ));
                s.engine.cudagraph_capture_sizes = Some(sizes);
            }
            other => ignored.push(other.to_string()),
        }
    }
    let mut detail = done.join(", ");
    if !ignored.is_empty() {
        if !detail.is_empty() {
            detail.push_str("; ");
        }
        detail.push_str(&format!(
            "ignored keys (compiler passes and options ServeSim's step-time model does not separate): {}",
            ignored.join(", ")
        ));
    }
    let status = if done.is_empty() {
        Status::Ignored
    } else {
        Status::Understood
    };
    Ok((status, detail))
}

/// Settles what depends on all arguments: `--enable-expert-parallel` (ep = tp * dp) and
/// `--quantization fp8` (fp8 weights, or the checkpoint's own when it is fp8 already).
pub fn finish(s: &mut Scenario, p: &Pending) -> Vec<String> {
    let mut notes = Vec::new();
    if p.enable_expert_parallel {
        if !p.ep_stated {
            s.ep = s.tp.saturating_mul(s.dp);
        }
        s.enable_expert_parallel = Some(true);
        notes.push(format!(
            "--enable-expert-parallel: ep = tp x dp = {}",
            s.tp.saturating_mul(s.dp)
        ));
    } else if p.layout_given && s.enable_expert_parallel.is_none() {
        // A layout stated by flags states expert parallelism too: `--ep` above 1 is it, and
        // `--data-parallel-size` above 1 without it keeps the experts tensor-parallel; either
        // way vLLM steps MoE DP ranks in lockstep.
        if s.ep > 1 {
            s.enable_expert_parallel = Some(true);
        } else if s.dp > 1 {
            s.enable_expert_parallel = Some(false);
        }
    }
    if p.online_fp8 {
        let ck_fp8 = match &s.model {
            ModelRef::Catalog(id) => crate::model::catalog::load(id)
                .map(|m| m.checkpoint.is_fp8_serialized())
                .unwrap_or(false),
            ModelRef::Custom(c) => crate::model::ModelConfig::from_hf_json(&c.name, &c.config_json)
                .map(|m| m.checkpoint.is_fp8_serialized())
                .unwrap_or(false),
        };
        if ck_fp8 {
            s.weight_precision = WeightPrecision::Checkpoint;
            notes.push("--quantization fp8 on an fp8 checkpoint: vLLM reads the checkpoint's own fp8 weights (weight_precision = checkpoint)".into());
        } else {
            s.weight_precision = WeightPrecision::Fp8;
            notes.push("--quantization fp8: vLLM quantizes the weights to fp8 at load (weight_precision = fp8)".into());
        }
    }
    notes
}

/// The report for an environment variable not in the registry.
pub fn unknown_env(name: &str) -> (Status, String) {
    if ignored_env_prefix(name) {
        (
            Status::Ignored,
            "credentials, caches, paths or logging: no effect on memory or speed".into(),
        )
    } else {
        (
            Status::Unknown,
            "an environment variable ServeSim does not know; ignored — check it changes neither memory nor speed".into(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_is_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for a in registry() {
            let mut spellings = vec![a.flag()];
            spellings.extend(a.aliases.iter().map(|s| s.to_string()));
            for sp in spellings {
                assert!(seen.insert(sp.clone()), "{sp} twice");
                assert_eq!(lookup(&sp).map(|x| x.name), Some(a.name), "{sp}");
            }
            if matches!(a.effect, Effect::Sets(t) if !matches!(t, Target::Pp | Target::Dtype)) {
                assert!(!a.field.is_empty(), "{} sets no field", a.name);
            }
        }
        assert_eq!(lookup("--max_num_seqs").unwrap().name, "max-num-seqs");
        assert!(lookup("--nonsense").is_none());
    }

    #[test]
    fn performance_mode_is_read_and_written_back() {
        // gpustack/gpustack docs/performance-lab/qwen3.5-35b-a3b/h200.md @47277d79, the
        // "Performance Mode && Prefix Cache && Quantization" section's backend parameters.
        let cmd = "vllm serve Qwen/Qwen3.5-35B-A3B-FP8 --reasoning-parser=qwen3 --performance-mode=throughput --max-model-len=32768 --enable-prefix-caching";
        let p = crate::vllm::command::parse_command(cmd, &Scenario::default_scenario()).unwrap();
        assert!(p.refusals().is_empty(), "{:?}", p.refusals());
        let s = p.scenario.unwrap();
        assert_eq!(s.engine.performance_mode, Some(PerformanceMode::Throughput));
        let back = crate::vllm::command::to_vllm_command(&s);
        assert!(back.contains("--performance-mode throughput"), "{back}");
        let mut s = Scenario::default_scenario();
        let mut pend = Pending::default();
        let spec = lookup("--performance-mode").unwrap();
        let (st, _) = apply(&mut s, &mut pend, spec, Some("Interactivity")).unwrap();
        assert_eq!(
            (st, s.engine.performance_mode),
            (Status::Understood, Some(PerformanceMode::Interactivity))
        );
        let e = apply(&mut s, &mut pend, spec, Some("fast")).unwrap_err();
        assert!(
            e.contains("--performance-mode") && e.contains("throughput"),
            "{e}"
        );
        // A refusal names the argument once.
        let p = crate::vllm::command::parse_command(
            "vllm serve Qwen/Qwen3-8B --performance-mode fast",
            &Scenario::default_scenario(),
        )
        .unwrap();
        assert_eq!(
            p.refusals(),
            ["--performance-mode fast: use balanced, interactivity or throughput"]
        );
    }

    #[test]
    fn text_only_serving_drops_the_vision_encoder() {
        // InferenceX experimental/token_position_decode_slo/qwen3.5/serve_qwen35_tp8_sbatch.sh
        // (SemiAnalysisAI/InferenceX @843c6254ff).
        let cmd = "vllm serve Qwen/Qwen3.5-397B-A17B --tensor-parallel-size 8 --language-model-only --reasoning-parser qwen3 --enable-prefix-caching";
        let p = crate::vllm::command::parse_command(cmd, &Scenario::default_scenario()).unwrap();
        let s = p.scenario.unwrap();
        assert_eq!(s.engine.language_model_only, Some(true));
        assert!(crate::vllm::command::to_vllm_command(&s).contains("--language-model-only"));
        // Every modality limited to 0 is the same thing; other limits change nothing.
        let mut s = Scenario::default_scenario();
        let mut pend = Pending::default();
        let spec = lookup("--limit-mm-per-prompt").unwrap();
        let (st, _) = apply(
            &mut s,
            &mut pend,
            spec,
            Some(r#"{"image": 0, "video": {"count": 0}}"#),
        )
        .unwrap();
        assert_eq!(
            (st, s.engine.language_model_only),
            (Status::Understood, Some(true))
        );
        let mut s = Scenario::default_scenario();
        let mut pend = Pending::default();
        let (st, _) = apply(&mut s, &mut pend, spec, Some(r#"{"image": 2, "video": 0}"#)).unwrap();
        assert_eq!((st, s.engine.language_model_only), (Status::Ignored, None));
        // Video alone at 0 leaves images: the tower stays.
        let mut pend = Pending::default();
        let (st, _) = apply(&mut s, &mut pend, spec, Some(r#"{"video": 0}"#)).unwrap();
        assert_eq!((st, s.engine.language_model_only), (Status::Ignored, None));
        // The dotted form, one modality per argument, merges.
        let cmd = "vllm serve Qwen/Qwen3.5-27B --limit-mm-per-prompt.image 0 --limit-mm-per-prompt.video=0";
        let p = crate::vllm::command::parse_command(cmd, &Scenario::default_scenario()).unwrap();
        assert_eq!(p.scenario.unwrap().engine.language_model_only, Some(true));
        let cmd = "vllm serve Qwen/Qwen3.5-27B --limit-mm-per-prompt.video 0";
        let p = crate::vllm::command::parse_command(cmd, &Scenario::default_scenario()).unwrap();
        assert_eq!(p.scenario.unwrap().engine.language_model_only, None);
        for bad in ["image", "image=lots"] {
            let e = apply(&mut s, &mut pend, spec, Some(bad)).unwrap_err();
            assert!(
                e.contains("--limit-mm-per-prompt") && e.contains("JSON object"),
                "{e}"
            );
        }
        let e = apply(&mut s, &mut pend, spec, Some(r#"{"image": -1}"#)).unwrap_err();
        assert!(e.contains("image"), "{e}");
        // vllm-project/recipes Qwen/Qwen3.5.md, "Multimodal": the encoder whole on every rank.
        let cmd = "vllm serve Qwen/Qwen3.5-397B-A17B --tensor-parallel-size 8 --mm-encoder-tp-mode data --mm-processor-cache-type shm --reasoning-parser qwen3 --enable-prefix-caching";
        let s = crate::vllm::command::parse_command(cmd, &Scenario::default_scenario())
            .unwrap()
            .scenario
            .unwrap();
        assert_eq!(s.engine.mm_encoder_data_parallel, Some(true));
        assert!(crate::vllm::command::to_vllm_command(&s).contains("--mm-encoder-tp-mode data"));
        let spec = lookup("--mm-encoder-tp-mode").unwrap();
        let e = apply(&mut s.clone(), &mut pend, spec, Some("pipeline")).unwrap_err();
        assert!(e.contains("weights or data"), "{e}");
    }

    #[test]
    fn human_readable_integers() {
        assert_eq!(parse_int("8192"), Some(8192));
        assert_eq!(parse_int("32k"), Some(32_000));
        assert_eq!(parse_int("32K"), Some(32_768));
        assert_eq!(parse_int("25.6k"), Some(25_600));
        assert_eq!(parse_int("1M"), Some(1_048_576));
        assert_eq!(parse_int("x"), None);
        assert_eq!(parse_bytes("40GiB"), Some(40 << 30));
        assert_eq!(parse_bytes("1024"), Some(1024));
    }

    #[test]
    fn the_issue_flags_apply() {
        let mut s = Scenario::default_scenario();
        s.model = ModelRef::Catalog("deepseek-ai/DeepSeek-R1-0528".into());
        let mut p = Pending::default();
        for (f, v) in [
            ("--tensor-parallel-size", Some("4")),
            ("-tp", Some("4")),
            ("--data-parallel-size", Some("2")),
            ("--enable-expert-parallel", None),
            ("--quantization", Some("fp8")),
            ("--kv-cache-dtype", Some("fp8")),
            ("--max-model-len", Some("32k")),
            ("--no-enable-prefix-caching", None),
            ("--no-enable-chunked-prefill", None),
            (
                "--compilation-config",
                Some(r#"{"cudagraph_mode": "FULL_DECODE_ONLY", "pass_config": {}}"#),
            ),
        ] {
            let spec = lookup(f).unwrap();
            let (st, _) = apply(&mut s, &mut p, spec, v).unwrap();
            assert_eq!(st, Status::Understood, "{f}");
        }
        finish(&mut s, &p);
        assert_eq!((s.tp, s.dp, s.ep), (4, 2, 8));
        assert_eq!(s.weight_precision, WeightPrecision::Checkpoint); // R1 is an fp8 checkpoint
        assert_eq!(s.engine.max_model_len, Some(32_000));
        assert_eq!(s.engine.enable_prefix_caching, Some(false));
        assert_eq!(s.engine.enable_chunked_prefill, Some(false));
        assert_eq!(s.engine.cudagraph_mode, Some(CudagraphMode::FullDecodeOnly));
        let pp = lookup("-pp").unwrap();
        assert!(apply(&mut s, &mut p, pp, Some("2"))
            .unwrap_err()
            .contains("not modelled"));
        assert!(apply(&mut s, &mut p, pp, Some("1")).is_ok());
        let q = lookup("--quantization").unwrap();
        assert!(apply(&mut s, &mut p, q, Some("awq")).is_ok());
        assert_eq!(s.weight_precision, WeightPrecision::Checkpoint);
        assert!(apply(&mut s, &mut p, q, Some("bitsandbytes")).is_err());
    }
}
