//! Data types of weights and KV cache, by vLLM's names.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Group size of the integer weight-only formats' scales (AWQ / GPTQ / compressed-tensors
/// default `group_size` 128).
pub const INT_GROUP_SIZE: f64 = 128.0;

/// Storage type of a tensor. Sub-byte formats carry their block scales in [`DType::bytes_per_element`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    Bf16,
    F16,
    /// 8-bit float (e4m3 or e5m2). Block-quantised checkpoints add their scales separately.
    Fp8,
    /// MXFP4: 4-bit elements with one 8-bit (e8m0) scale per 32 elements (OCP MX spec).
    Mxfp4,
    /// NVFP4: 4-bit elements with one fp8 (e4m3) scale per 16 elements (NVIDIA Blackwell).
    Nvfp4,
    /// Weight-only 4-bit integer (AWQ, GPTQ, compressed-tensors W4A16): one fp16 scale per group of
    /// 128 elements (zero points, 4 bits per group when present, are not counted). Matmuls
    /// dequantise to bf16 in the kernel (Marlin-style), so they compute at the bf16 class.
    Int4,
    /// Weight-only 8-bit integer (GPTQ int8): one fp16 scale per group of 128 elements.
    Int8,
}

impl DType {
    /// Bytes per element, including the per-block scales of the microscaled formats:
    /// MXFP4 = 0.5 + 1/32, NVFP4 = 0.5 + 1/16 (the per-tensor fp32 scale is negligible).
    pub fn bytes_per_element(self) -> f64 {
        match self {
            DType::F32 => 4.0,
            DType::Bf16 | DType::F16 => 2.0,
            DType::Fp8 => 1.0,
            DType::Mxfp4 => 0.5 + 1.0 / 32.0,
            DType::Nvfp4 => 0.5 + 1.0 / 16.0,
            DType::Int4 => 0.5 + 2.0 / INT_GROUP_SIZE,
            DType::Int8 => 1.0 + 2.0 / INT_GROUP_SIZE,
        }
    }

    /// Bytes per element of a checkpoint tensor whose integer weight-only scales come in groups
    /// of `group` elements (the checkpoint's `group_size`; `None` = [`INT_GROUP_SIZE`], `Some(0)`
    /// = one scale per output channel, GPTQ's `group_size: -1`, whose bytes are negligible): one
    /// 16-bit scale per group. Other formats: [`DType::bytes_per_element`].
    pub fn bytes_per_element_grouped(self, group: Option<u32>) -> f64 {
        let scale = match group {
            None => 2.0 / INT_GROUP_SIZE,
            Some(0) => 0.0,
            Some(g) => 2.0 / f64::from(g),
        };
        match self {
            DType::Int4 => 0.5 + scale,
            DType::Int8 => 1.0 + scale,
            other => other.bytes_per_element(),
        }
    }

    /// True for formats that only store weights at low precision and always compute in bf16
    /// (the integer weight-only formats).
    pub fn is_weight_only(self) -> bool {
        matches!(self, DType::Int4 | DType::Int8)
    }

    /// The compute class of tensor-core math for this storage type (what TFLOPS figure applies).
    pub fn compute_class(self) -> ComputeClass {
        match self {
            DType::F32 | DType::Bf16 | DType::F16 | DType::Int4 | DType::Int8 => ComputeClass::Bf16,
            DType::Fp8 => ComputeClass::Fp8,
            DType::Mxfp4 | DType::Nvfp4 => ComputeClass::Fp4,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DType::F32 => "f32",
            DType::Bf16 => "bf16",
            DType::F16 => "f16",
            DType::Fp8 => "fp8",
            DType::Mxfp4 => "mxfp4",
            DType::Nvfp4 => "nvfp4",
            DType::Int4 => "int4",
            DType::Int8 => "int8",
        };
        f.write_str(s)
    }
}

/// Which dense tensor-core peak a matmul runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeClass {
    Bf16,
    Fp8,
    Fp4,
}

/// vLLM's `--kv-cache-dtype`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub enum KvCacheDtype {
    /// The model's dtype (bf16 or fp16: 2 bytes).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "bfloat16")]
    Bfloat16,
    #[serde(rename = "fp8")]
    Fp8,
    #[serde(rename = "fp8_e4m3")]
    Fp8E4m3,
    #[serde(rename = "fp8_e5m2")]
    Fp8E5m2,
    /// DeepSeek's MLA layout: fp8 NoPE part with fp32 scales and a bf16 RoPE part
    /// (656 B/token for V3.2-style MLA, 584 B per stored entry for DeepSeek-V4).
    #[serde(rename = "fp8_ds_mla")]
    Fp8DsMla,
}

impl KvCacheDtype {
    /// Every accepted spelling, as vLLM's CLI takes them.
    pub const NAMES: [&'static str; 6] = [
        "auto",
        "bfloat16",
        "fp8",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_ds_mla",
    ];

    /// Parses vLLM's spelling of `--kv-cache-dtype`.
    pub fn parse(s: &str) -> Option<KvCacheDtype> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "auto" => KvCacheDtype::Auto,
            "bfloat16" | "bf16" => KvCacheDtype::Bfloat16,
            "fp8" => KvCacheDtype::Fp8,
            "fp8_e4m3" => KvCacheDtype::Fp8E4m3,
            "fp8_e5m2" => KvCacheDtype::Fp8E5m2,
            "fp8_ds_mla" => KvCacheDtype::Fp8DsMla,
            _ => return None,
        })
    }

    /// vLLM's spelling.
    pub fn name(self) -> &'static str {
        match self {
            KvCacheDtype::Auto => "auto",
            KvCacheDtype::Bfloat16 => "bfloat16",
            KvCacheDtype::Fp8 => "fp8",
            KvCacheDtype::Fp8E4m3 => "fp8_e4m3",
            KvCacheDtype::Fp8E5m2 => "fp8_e5m2",
            KvCacheDtype::Fp8DsMla => "fp8_ds_mla",
        }
    }

    /// True for the one-byte element types (every fp8 variant, including `fp8_ds_mla`).
    pub fn is_fp8(self) -> bool {
        matches!(
            self,
            KvCacheDtype::Fp8
                | KvCacheDtype::Fp8E4m3
                | KvCacheDtype::Fp8E5m2
                | KvCacheDtype::Fp8DsMla
        )
    }
}

/// Serving precision of the weights.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum WeightPrecision {
    /// As the checkpoint stores them (`torch_dtype`, `quantization_config`, `expert_dtype`).
    #[default]
    Checkpoint,
    Bf16,
    /// Online fp8 quantisation of the linear layers (vLLM `--quantization fp8`).
    Fp8,
    /// 4-bit weights (NVFP4 on NVIDIA Blackwell, MXFP4 elsewhere). On GPUs without fp4 tensor
    /// cores they run weight-only (Marlin-style dequantisation to bf16).
    Fp4,
    /// Weight-only 4-bit integer weights (AWQ / GPTQ / W4A16 checkpoints, group 128), Marlin kernels.
    Int4,
    /// Weight-only 8-bit integer weights (GPTQ int8 / W8A16, group 128), Marlin kernels.
    Int8,
}

impl WeightPrecision {
    /// Every precision by the scenario's spelling (`weight_precision`), in declaration order.
    pub const NAMES: [&'static str; 6] = ["checkpoint", "bf16", "fp8", "fp4", "int4", "int8"];

    /// The scenario's spelling (`weight_precision`).
    pub fn name(self) -> &'static str {
        match self {
            WeightPrecision::Checkpoint => "checkpoint",
            WeightPrecision::Bf16 => "bf16",
            WeightPrecision::Fp8 => "fp8",
            WeightPrecision::Fp4 => "fp4",
            WeightPrecision::Int4 => "int4",
            WeightPrecision::Int8 => "int8",
        }
    }

    pub fn parse(s: &str) -> Option<WeightPrecision> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "checkpoint" | "auto" => WeightPrecision::Checkpoint,
            "bf16" | "bfloat16" => WeightPrecision::Bf16,
            "fp8" => WeightPrecision::Fp8,
            "fp4" | "nvfp4" | "mxfp4" => WeightPrecision::Fp4,
            "int4" | "awq" | "gptq" | "w4a16" => WeightPrecision::Int4,
            "int8" | "w8a16" => WeightPrecision::Int8,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_dtype_names_round_trip() {
        for n in KvCacheDtype::NAMES {
            assert_eq!(KvCacheDtype::parse(n).unwrap().name(), n);
        }
        assert!(KvCacheDtype::parse("int3").is_none());
    }

    #[test]
    fn weight_precision_names_are_the_scenarios() {
        for p in [
            WeightPrecision::Checkpoint,
            WeightPrecision::Bf16,
            WeightPrecision::Fp8,
            WeightPrecision::Fp4,
            WeightPrecision::Int4,
            WeightPrecision::Int8,
        ] {
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
            assert_eq!(WeightPrecision::parse(p.name()), Some(p));
            assert!(WeightPrecision::NAMES.contains(&p.name()));
        }
        for n in WeightPrecision::NAMES {
            assert_eq!(WeightPrecision::parse(n).unwrap().name(), n);
        }
    }

    #[test]
    fn microscaled_bytes_include_scales() {
        assert_eq!(DType::Mxfp4.bytes_per_element(), 0.53125);
        assert_eq!(DType::Nvfp4.bytes_per_element(), 0.5625);
        // Integer weight-only formats: one 16-bit scale per group.
        assert_eq!(
            DType::Int4.bytes_per_element_grouped(None),
            0.5 + 2.0 / 128.0
        );
        assert_eq!(DType::Int4.bytes_per_element_grouped(Some(32)), 0.5625);
        assert_eq!(DType::Int8.bytes_per_element_grouped(Some(64)), 1.03125);
        assert_eq!(DType::Int4.bytes_per_element_grouped(Some(0)), 0.5);
        assert_eq!(DType::Fp8.bytes_per_element_grouped(Some(32)), 1.0);
        assert_eq!(DType::Fp8.compute_class(), ComputeClass::Fp8);
    }
}
