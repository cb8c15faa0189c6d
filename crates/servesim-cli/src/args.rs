//! Shared deployment flags (`servesim capacity`, `sweep`, `compare` flatten [`DeploymentArgs`]).

use anyhow::{bail, Context, Result};
use clap::Args;
use servesim_core::deploy::{parallelism_from, CudagraphMode, Deployment, RawEngineSettings};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::find_gpu;
use servesim_core::model::{catalog, ModelConfig};
use std::path::Path;

/// Model, GPU, parallelism, precisions and vLLM engine settings, by vLLM's flag names.
#[derive(Args, Clone, Debug)]
pub struct DeploymentArgs {
    /// Catalog model id (see `servesim models`) or a path to a Hugging Face config.json.
    #[arg(long)]
    pub model: String,
    /// GPU id or alias (see `servesim gpus`), case-insensitive.
    #[arg(long)]
    pub gpu: String,
    /// --tensor-parallel-size.
    #[arg(long, default_value_t = 1)]
    pub tp: i64,
    /// --data-parallel-size (attention data parallelism: one KV cache per DP rank).
    #[arg(long, default_value_t = 1)]
    pub dp: i64,
    /// Expert-parallel size (1, or tp*dp as with --enable-expert-parallel).
    #[arg(long, default_value_t = 1)]
    pub ep: i64,
    /// Total GPUs (a multiple of tp*dp; default one replica).
    #[arg(long)]
    pub num_gpus: Option<i64>,
    /// checkpoint | bf16 | fp8 | fp4.
    #[arg(long, default_value = "checkpoint")]
    pub weight_precision: String,
    /// auto | bfloat16 | fp8 | fp8_e4m3 | fp8_e5m2 | fp8_ds_mla.
    #[arg(long, default_value = "auto")]
    pub kv_cache_dtype: String,
    #[arg(long)]
    pub gpu_memory_utilization: Option<f64>,
    #[arg(long)]
    pub max_num_batched_tokens: Option<i64>,
    #[arg(long)]
    pub max_num_seqs: Option<i64>,
    #[arg(long)]
    pub max_model_len: Option<i64>,
    #[arg(long)]
    pub block_size: Option<i64>,
    /// --kv-cache-memory in bytes (replaces the profiled KV budget).
    #[arg(long = "kv-cache-memory")]
    pub kv_cache_memory: Option<i64>,
    /// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (default since vLLM 0.21).
    #[arg(long)]
    pub estimate_cudagraphs: bool,
    /// FULL_AND_PIECEWISE | FULL_DECODE_ONLY | PIECEWISE | FULL | NONE.
    #[arg(long)]
    pub cudagraph_mode: Option<String>,
    #[arg(long)]
    pub enforce_eager: bool,
    /// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.
    #[arg(long)]
    pub allow_long_max_model_len: bool,
    /// vLLM's --speculative-config JSON, e.g. '{"method": "mtp", "num_speculative_tokens": 3}'.
    #[arg(long)]
    pub speculative_config: Option<String>,
    /// The acceptance to simulate (JSON; docs/engine.md "Speculative decoding"), e.g.
    /// '{"accepted_values": [2, 3], "mean_acceptance_length": 3.51}'.
    #[arg(long)]
    pub speculative_acceptance: Option<String>,
    /// vLLM's --kv-transfer-config JSON (CPU KV offload tier), e.g. '{"kv_connector":
    /// "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config":
    /// {"cpu_bytes_to_use": 107374182400, "blocks_per_chunk": 4}}'.
    #[arg(long)]
    pub kv_transfer_config: Option<String>,
    /// Host-link GB/s per GPU and direction for the CPU tier (default: the GPU's link).
    #[arg(long)]
    pub host_link_gb_s: Option<f64>,
}

/// Loads a model from the catalog, or from a config.json path.
pub fn load_model(spec: &str) -> Result<ModelConfig> {
    let p = Path::new(spec);
    if p.is_file() {
        let json = crate::input::read_text(p)?;
        let name = p
            .parent()
            .and_then(|d| d.file_name())
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| spec.to_string());
        return Ok(ModelConfig::from_hf_json(&name, &json)?);
    }
    Ok(catalog::load(spec)?)
}

impl DeploymentArgs {
    /// The raw engine settings these flags describe.
    pub fn engine(&self) -> Result<RawEngineSettings> {
        let cudagraph_mode = match &self.cudagraph_mode {
            None => None,
            Some(s) => Some(CudagraphMode::parse(s).with_context(|| {
                format!("--cudagraph-mode {s}: use FULL_AND_PIECEWISE, FULL_DECODE_ONLY, PIECEWISE, FULL or NONE")
            })?),
        };
        Ok(RawEngineSettings {
            gpu_memory_utilization: self.gpu_memory_utilization,
            max_num_seqs: self.max_num_seqs,
            max_num_batched_tokens: self.max_num_batched_tokens,
            block_size: self.block_size,
            max_model_len: self.max_model_len,
            cudagraph_mode,
            kv_cache_memory_bytes: self.kv_cache_memory,
            estimate_cudagraphs_in_profile: self.estimate_cudagraphs.then_some(true),
            enforce_eager: self.enforce_eager.then_some(true),
            allow_long_max_model_len: self.allow_long_max_model_len.then_some(true),
            speculative_config: match &self.speculative_config {
                None => None,
                Some(j) => Some(serde_json::from_str(j).with_context(|| {
                    format!("--speculative-config {j}: give vLLM's JSON object, e.g. '{{\"method\": \"mtp\", \"num_speculative_tokens\": 3}}'")
                })?),
            },
            speculative_acceptance: match &self.speculative_acceptance {
                None => None,
                Some(j) => Some(serde_json::from_str(j).with_context(|| {
                    format!("--speculative-acceptance {j}: give e.g. '{{\"mean_acceptance_length\": 2.8}}' or '{{\"accepted_values\": [2, 3], \"mean_acceptance_length\": 3.51}}'")
                })?),
            },
            kv_transfer_config: match &self.kv_transfer_config {
                None => None,
                Some(j) => Some(servesim_core::offload::parse(j).map_err(anyhow::Error::msg)?),
            },
            host_link_gb_s: self.host_link_gb_s,
            ..Default::default()
        })
    }

    /// Validates the flags into a [`Deployment`].
    pub fn deployment(&self) -> Result<Deployment> {
        let model = load_model(&self.model)?;
        let gpu = find_gpu(&self.gpu)?;
        let par = parallelism_from(Some(self.tp), Some(self.dp), Some(self.ep))?;
        let Some(wp) = WeightPrecision::parse(&self.weight_precision) else {
            bail!(
                "--weight-precision {}: use checkpoint, bf16, fp8 or fp4",
                self.weight_precision
            );
        };
        let Some(kv) = KvCacheDtype::parse(&self.kv_cache_dtype) else {
            bail!(
                "--kv-cache-dtype {}: use one of {}",
                self.kv_cache_dtype,
                KvCacheDtype::NAMES.join(", ")
            );
        };
        let num_gpus = match self.num_gpus {
            None => None,
            Some(n) if n > 0 && n <= u32::MAX as i64 => Some(n as u32),
            Some(n) => bail!("--num-gpus {n}: must be a positive integer"),
        };
        Ok(Deployment::new(
            model,
            gpu,
            par,
            num_gpus,
            wp,
            kv,
            &self.engine()?,
        )?)
    }
}
