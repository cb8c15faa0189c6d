//! Gated DeltaNet prefill (Qwen3.5 / Qwen3-Next `linear_attention` layers): the chunked
//! delta-rule kernels' time per layer, which their chain of 64-token chunks (each sequence's
//! state passes through its chunks in order) and their throughput per (chunk, value head) set,
//! not their FLOPs (docs/step-time.md §3 "Gated DeltaNet prefill kernels").

use crate::gpu::{Generation, GpuSpec};
use crate::model::ModelConfig;

/// Tokens per chunk of the chunked delta rule (`chunk_size` of fla's and FlashInfer's kernels).
pub const CHUNK_TOKENS: u64 = 64;

/// The bf16 dense peak of the GPU the kernels' costs were measured on (H100 SXM, FLOP/s).
const MEASURED_ON_BF16_FLOPS: f64 = 989.4e12;

/// One prefill kernel's measured costs (NVIDIA H100 80GB HBM3, Qwen3.5 head shapes, d = 128).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GdnKernel {
    /// What vLLM runs (shown in docs and tests).
    pub name: &'static str,
    /// Fixed time per layer call, seconds.
    pub fixed_s: f64,
    /// Seconds per chunk of the step's longest prefill chunk.
    pub chain_s_per_chunk: f64,
    /// Seconds per (chunk, value head of this GPU) with the GPU full, on the H100.
    pub s_per_chunk_head: f64,
}

/// FlashInfer's SM90 kernel (`chunk_gated_delta_rule`), which vLLM's `ChunkGatedDeltaRule`
/// runs on compute capability 9.0 (vllm-project/vllm#32846). flashinfer-ai/flashinfer#3477's
/// table ("FI Hopper (main)", Qwen3.5-397B heads at TP8: 2 key / 8 value heads per GPU): 0.096,
/// 0.187 and 0.371 ms for one sequence of 2,048, 4,096 and 8,192 tokens (2.9-3.0 us per chunk),
/// 0.187 ms for 4,096 + 4,096 and 0.055 ms for 8 x 1,024: the longest sequence's chunks set the
/// time. With the GPU full, flashinfer-ai/flashinfer#3481's 8 x 8,192 tokens at 64 value heads
/// (TP1): 1.643 ms over 65,536 (chunk, head) pairs, 0.025 us each.
pub const FLASHINFER_SM90: GdnKernel = GdnKernel {
    name: "FlashInfer SM90 chunk_gated_delta_rule",
    fixed_s: 0.0,
    chain_s_per_chunk: 2.9e-6,
    s_per_chunk_head: 0.025e-6,
};

/// fla's Triton kernels (`chunk_gated_delta_rule`, vLLM's `fla/ops`), every other GPU.
/// flashinfer-ai/flashinfer#3866's "FLA/Triton" column on the H100 at TP8 heads: 0.086, 0.144,
/// 0.259, 0.508, 0.997 and 1.954 ms for one sequence of 2,048 to 65,536 tokens (about 25 us
/// plus 1.9 us per chunk); flashinfer-ai/flashinfer#3481's at 64 value heads (TP1): 1.047 ms for
/// 8,192 tokens and 8.699 ms for 8 x 8,192 (0.132 us per (chunk, head) pair).
pub const FLA_TRITON: GdnKernel = GdnKernel {
    name: "fla chunk_gated_delta_rule (Triton)",
    fixed_s: 25e-6,
    chain_s_per_chunk: 1.9e-6,
    s_per_chunk_head: 0.132e-6,
};

/// The kernel vLLM runs on `gpu`.
pub fn kernel_for(gpu: &GpuSpec) -> GdnKernel {
    if gpu.generation == Generation::Hopper {
        FLASHINFER_SM90
    } else {
        FLA_TRITON
    }
}

/// Chunks of a prefill chunk of `new` tokens.
#[inline]
pub fn chunks(new: u64) -> u64 {
    new.div_ceil(CHUNK_TOKENS)
}

/// The Gated DeltaNet layers' prefill time on one GPU beyond their FLOPs at the prefill
/// attention rate (already in the step's attention FLOPs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GdnPrefill {
    pub kernel: GdnKernel,
    /// Gated DeltaNet layers.
    pub layers: f64,
    /// Value heads per GPU, `ceil(num_value_heads / tp)`.
    pub heads: f64,
    /// Seconds per (chunk, head) on this GPU: the H100's scaled by the bf16 peaks.
    pub s_per_chunk_head: f64,
    /// One layer's seconds per prefill token at the prefill attention rate (its FLOPs on this
    /// GPU, `linear_attention_flops_per_token / tp`, times seconds per FLOP).
    pub flop_s_per_token: f64,
}

impl GdnPrefill {
    /// `None` for a model without Gated DeltaNet layers.
    pub fn new(m: &ModelConfig, gpu: &GpuSpec, tp: u32, attn_s_per_flop: f64) -> Option<Self> {
        let la = m.linear_attention.as_ref()?;
        let layers = m.num_linear_attention_layers() as f64;
        if layers == 0.0 {
            return None;
        }
        let kernel = kernel_for(gpu);
        let tp = tp.max(1);
        Some(GdnPrefill {
            kernel,
            layers,
            heads: la.num_value_heads.div_ceil(tp) as f64,
            s_per_chunk_head: kernel.s_per_chunk_head * MEASURED_ON_BF16_FLOPS / gpu.bf16_flops,
            flop_s_per_token: m.linear_attention_flops_per_token() / tp as f64 * attn_s_per_flop,
        })
    }

    /// One layer's kernel time for a step whose longest prefill chunk has `max_chunks` chunks
    /// and whose prefill chunks have `sum_chunks` in all: `fixed + max(chain x max_chunks,
    /// per (chunk, head) x sum_chunks x heads)`.
    pub fn layer_s(&self, max_chunks: u64, sum_chunks: u64) -> f64 {
        if sum_chunks == 0 {
            return 0.0;
        }
        let chain = self.kernel.chain_s_per_chunk * max_chunks as f64;
        let full = self.s_per_chunk_head * sum_chunks as f64 * self.heads;
        self.kernel.fixed_s + chain.max(full)
    }

    /// The step's seconds beyond the FLOP time of its `tokens` prefill tokens:
    /// `layers x max(0, layer_s - tokens x flop_s_per_token)`.
    pub fn excess_s(&self, max_chunks: u64, sum_chunks: u64, tokens: u64) -> f64 {
        let k = self.layer_s(max_chunks, sum_chunks);
        self.layers * (k - tokens as f64 * self.flop_s_per_token).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_tp8() -> GdnPrefill {
        GdnPrefill {
            kernel: FLASHINFER_SM90,
            layers: 1.0,
            heads: 8.0,
            s_per_chunk_head: FLASHINFER_SM90.s_per_chunk_head,
            flop_s_per_token: 0.0,
        }
    }

    #[test]
    fn the_longest_sequence_sets_a_small_batch_and_the_heads_a_full_gpu() {
        let g = at_tp8();
        // flashinfer#3477 at TP8: 1 x 8,192 tokens 0.371 ms; 4,096 + 4,096 0.187 ms.
        let one = g.layer_s(chunks(8192), chunks(8192));
        let two = g.layer_s(chunks(4096), 2 * chunks(4096));
        assert!((one - 0.371e-3).abs() < 0.01e-3, "{one}");
        assert!((two - 0.187e-3).abs() < 0.01e-3, "{two}");
        // 64 heads, 8 x 8,192 tokens (flashinfer#3481: 1.643 ms): the throughput bound.
        let full = GdnPrefill { heads: 64.0, ..g };
        let t = full.layer_s(chunks(8192), 8 * chunks(8192));
        assert!((t - 1.643e-3).abs() < 0.05e-3, "{t}");
        assert_eq!(g.layer_s(0, 0), 0.0);
    }

    #[test]
    fn fla_matches_its_measured_single_sequence_series() {
        let g = GdnPrefill {
            kernel: FLA_TRITON,
            s_per_chunk_head: FLA_TRITON.s_per_chunk_head,
            ..at_tp8()
        };
        // flashinfer#3866's FLA/Triton column (H100, TP8 heads), within 10 %.
        for (tokens, ms) in [(2048, 0.086), (8192, 0.259), (65536, 1.954)] {
            let t = g.layer_s(chunks(tokens), chunks(tokens)) * 1e3;
            assert!((t / ms - 1.0).abs() < 0.1, "{tokens}: {t} ms against {ms}");
        }
    }

    #[test]
    fn only_the_excess_over_the_flop_time_is_added() {
        let g = GdnPrefill {
            flop_s_per_token: 1e-6,
            layers: 2.0,
            ..at_tp8()
        };
        // 64 tokens: one chunk, 2.9 us of kernel against 64 us of FLOPs: nothing added.
        assert_eq!(g.excess_s(1, 1, 64), 0.0);
        let no_flops = GdnPrefill {
            flop_s_per_token: 0.0,
            ..g
        };
        assert_eq!(no_flops.excess_s(2, 2, 128), 2.0 * 2.0 * 2.9e-6);
    }
}
