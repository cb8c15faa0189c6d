//! Shipped Hugging Face `config.json` files (verbatim; see data/models/PROVENANCE.md).

use super::{ModelConfig, ModelError};

/// (HF id, config.json text).
const CATALOG: &[(&str, &str)] = &[
    (
        "MiniMaxAI/MiniMax-M2.7",
        include_str!("../../data/models/MiniMaxAI--MiniMax-M2.7.json"),
    ),
    (
        "Qwen/Qwen2.5-7B-Instruct",
        include_str!("../../data/models/Qwen--Qwen2.5-7B-Instruct.json"),
    ),
    (
        "Qwen/Qwen3-14B",
        include_str!("../../data/models/Qwen--Qwen3-14B.json"),
    ),
    (
        "Qwen/Qwen3-235B-A22B",
        include_str!("../../data/models/Qwen--Qwen3-235B-A22B.json"),
    ),
    (
        "Qwen/Qwen3-30B-A3B",
        include_str!("../../data/models/Qwen--Qwen3-30B-A3B.json"),
    ),
    (
        "Qwen/Qwen3-32B",
        include_str!("../../data/models/Qwen--Qwen3-32B.json"),
    ),
    (
        "Qwen/Qwen3-8B",
        include_str!("../../data/models/Qwen--Qwen3-8B.json"),
    ),
    (
        "Qwen/Qwen3.5-122B-A10B",
        include_str!("../../data/models/Qwen--Qwen3.5-122B-A10B.json"),
    ),
    (
        "Qwen/Qwen3.5-27B",
        include_str!("../../data/models/Qwen--Qwen3.5-27B.json"),
    ),
    (
        "Qwen/Qwen3.5-35B-A3B",
        include_str!("../../data/models/Qwen--Qwen3.5-35B-A3B.json"),
    ),
    (
        "Qwen/Qwen3.5-397B-A17B",
        include_str!("../../data/models/Qwen--Qwen3.5-397B-A17B.json"),
    ),
    (
        "codellama/CodeLlama-34b-Instruct-hf",
        include_str!("../../data/models/codellama--CodeLlama-34b-Instruct-hf.json"),
    ),
    (
        "deepseek-ai/DeepSeek-R1",
        include_str!("../../data/models/deepseek-ai--DeepSeek-R1.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V2-Lite",
        include_str!("../../data/models/deepseek-ai--DeepSeek-V2-Lite.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V3",
        include_str!("../../data/models/deepseek-ai--DeepSeek-V3.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V3.2",
        include_str!("../../data/models/deepseek-ai--DeepSeek-V3.2.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V4-Flash",
        include_str!("../../data/models/deepseek-ai--DeepSeek-V4-Flash.json"),
    ),
    (
        "deepseek-ai/DeepSeek-V4-Pro",
        include_str!("../../data/models/deepseek-ai--DeepSeek-V4-Pro.json"),
    ),
    (
        "meta-llama/Llama-3.1-70B-Instruct",
        include_str!("../../data/models/meta-llama--Llama-3.1-70B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        include_str!("../../data/models/meta-llama--Llama-3.1-8B-Instruct.json"),
    ),
    (
        "meta-llama/Llama-2-70b-hf",
        include_str!("../../data/models/meta-llama--Llama-2-70b-hf.json"),
    ),
    (
        "meta-llama/Llama-2-7b-hf",
        include_str!("../../data/models/meta-llama--Llama-2-7b-hf.json"),
    ),
    (
        "meta-llama/Llama-3.1-405B-Instruct-FP8",
        include_str!("../../data/models/meta-llama--Llama-3.1-405B-Instruct-FP8.json"),
    ),
    (
        "meta-llama/Meta-Llama-3.1-405B",
        include_str!("../../data/models/meta-llama--Meta-Llama-3.1-405B.json"),
    ),
    (
        "meta-llama/Meta-Llama-3.1-70B",
        include_str!("../../data/models/meta-llama--Meta-Llama-3.1-70B.json"),
    ),
    (
        "meta-llama/Meta-Llama-3.1-8B",
        include_str!("../../data/models/meta-llama--Meta-Llama-3.1-8B.json"),
    ),
    (
        "mistralai/Mixtral-8x7B-v0.1",
        include_str!("../../data/models/mistralai--Mixtral-8x7B-v0.1.json"),
    ),
    (
        "moonshotai/Kimi-K2-Instruct",
        include_str!("../../data/models/moonshotai--Kimi-K2-Instruct.json"),
    ),
    (
        "nvidia/DeepSeek-V4-Flash-NVFP4",
        include_str!("../../data/models/nvidia--DeepSeek-V4-Flash-NVFP4.json"),
    ),
    (
        "nvidia/DeepSeek-V4-Pro-NVFP4",
        include_str!("../../data/models/nvidia--DeepSeek-V4-Pro-NVFP4.json"),
    ),
    (
        "nvidia/MiniMax-M2.5-NVFP4",
        include_str!("../../data/models/nvidia--MiniMax-M2.5-NVFP4.json"),
    ),
    (
        "openai/gpt-oss-120b",
        include_str!("../../data/models/openai--gpt-oss-120b.json"),
    ),
    (
        "openai/gpt-oss-20b",
        include_str!("../../data/models/openai--gpt-oss-20b.json"),
    ),
    (
        "sgl-project/DeepSeek-V4-Flash-FP8",
        include_str!("../../data/models/sgl-project--DeepSeek-V4-Flash-FP8.json"),
    ),
    (
        "sgl-project/DeepSeek-V4-Pro-FP8",
        include_str!("../../data/models/sgl-project--DeepSeek-V4-Pro-FP8.json"),
    ),
    (
        "zai-org/GLM-4.5-Air",
        include_str!("../../data/models/zai-org--GLM-4.5-Air.json"),
    ),
    (
        "zai-org/GLM-4.7",
        include_str!("../../data/models/zai-org--GLM-4.7.json"),
    ),
    (
        "zai-org/GLM-5",
        include_str!("../../data/models/zai-org--GLM-5.json"),
    ),
    (
        "zai-org/GLM-5-FP8",
        include_str!("../../data/models/zai-org--GLM-5-FP8.json"),
    ),
    (
        "zai-org/GLM-5.2-FP8",
        include_str!("../../data/models/zai-org--GLM-5.2-FP8.json"),
    ),
];

/// Every catalog id (Hugging Face ids), in catalog order.
pub fn ids() -> Vec<&'static str> {
    CATALOG.iter().map(|(id, _)| *id).collect()
}

/// Loads a model by Hugging Face id (case-insensitive): a shipped config, or a checkpoint that
/// shares a shipped architecture (`model::ids`: instruct / dated / re-quantized releases, with
/// their own quantization and context length). Unknown ids list suggestions ranked by family,
/// size and version.
pub fn load(id: &str) -> Result<ModelConfig, ModelError> {
    super::ids::resolve(id).map(|(m, _)| m)
}

/// The raw config.json text of a shipped config (case-insensitive id).
pub fn config_json(id: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .find(|(cid, _)| cid.eq_ignore_ascii_case(id.trim()))
        .map(|(_, j)| *j)
}
