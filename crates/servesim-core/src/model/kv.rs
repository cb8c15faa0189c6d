//! KV-cache sizing per GPU, following vLLM's `KVCacheSpec`s.

use super::*;
use crate::dtype::KvCacheDtype;

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
    /// Notes on assumptions (e.g. forced dtype).
    pub notes: Vec<String>,
}

/// Layers sharing one KV spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvGroup {
    pub kind: LayerAttn,
    pub num_layers: u32,
    /// Bytes of one page: `block_size` tokens of one layer on this GPU.
    pub page_bytes_per_layer: u64,
}

impl KvCacheSpec {
    /// Memory one block id costs on this GPU.
    pub fn block_bytes(&self) -> u64 {
        todo!()
    }

    /// Blocks one request with `tokens` of context holds.
    pub fn blocks_for_tokens(&self, tokens: u64, max_num_batched_tokens: u64) -> u64 {
        let _ = (tokens, max_num_batched_tokens);
        todo!()
    }

    /// Marginal KV bytes per context token on this GPU.
    pub fn bytes_per_token(&self) -> f64 {
        todo!()
    }

    /// True when every layer has the same spec (one group, no fixed state).
    pub fn is_uniform(&self) -> bool {
        todo!()
    }
}

impl ModelConfig {
    /// KV cache spec of one GPU at tensor-parallel size `tp`.
    pub fn kv_cache_spec(
        &self,
        kv: KvCacheDtype,
        tp: u32,
        block_size: u32,
    ) -> Result<KvCacheSpec, ModelError> {
        let _ = (kv, tp, block_size);
        todo!()
    }

    /// Bytes of KV one decode step of one sequence reads on one GPU at `context` tokens.
    pub fn kv_read_bytes_per_seq(&self, spec: &KvCacheSpec, context: u64) -> f64 {
        let _ = (spec, context);
        todo!()
    }
}
