//! `config.json` -> [`ModelConfig`].
//!
//! Hugging Face configs carry many keys ServeSim does not need (rope scaling, token ids, ...), so this
//! parser reads a `serde_json::Value` and picks the fields it needs instead of a
//! `deny_unknown_fields` struct. Every field it needs is validated: absent -> `MissingField`,
//! zero / negative / non-integer / NaN -> `InvalidField`.

use super::*;
use serde_json::{Map, Value};

type Obj = Map<String, Value>;

const SUPPORTED: &str = "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, \
MixtralForCausalLM, DeepseekV2ForCausalLM, DeepseekV3ForCausalLM (incl. Kimi-K2), DeepseekV32ForCausalLM, \
DeepseekV4ForCausalLM, GptOssForCausalLM, Glm4MoeForCausalLM, GlmMoeDsaForCausalLM, MiniMaxM2ForCausalLM, \
Qwen3_5MoeForConditionalGeneration, Qwen3_5ForConditionalGeneration";

fn missing(field: &str, hint: &str) -> ModelError {
    ModelError::MissingField {
        field: field.to_string(),
        hint: hint.to_string(),
    }
}

fn invalid(field: &str, value: &Value, reason: &str) -> ModelError {
    ModelError::InvalidField {
        field: field.to_string(),
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

const HINT: &str = "this field is required for this architecture; paste the model's full config.json from Hugging Face";

/// The range of an integer read from a `config.json` (docs/scenario.md "Bounds"): token counts
/// (context, windows) up to [`crate::bounds::CONFIG_TOKENS`], the vocabulary up to
/// [`crate::bounds::CONFIG_VOCAB`], every dimension and count up to [`crate::bounds::CONFIG_DIM`].
fn config_bound(field: &str) -> crate::bounds::Bound {
    match field {
        "max_position_embeddings" | "sliding_window" | "index_topk" | "max_window_layers" => {
            crate::bounds::CONFIG_TOKENS
        }
        "vocab_size" => crate::bounds::CONFIG_VOCAB,
        _ => crate::bounds::CONFIG_DIM,
    }
}

fn within(field: &str, v: &Value, u: u64) -> Result<u64, ModelError> {
    let b = config_bound(field);
    if u as f64 > b.max {
        return Err(invalid(
            field,
            v,
            &format!(
                "{} (a released model's config.json stays far below; check the number)",
                b.fix()
            ),
        ));
    }
    Ok(u)
}

/// A positive integer from a JSON value (accepts integral floats such as `4096.0`).
fn as_pos(field: &str, v: &Value) -> Result<u64, ModelError> {
    if let Some(u) = v.as_u64() {
        if u == 0 {
            return Err(invalid(field, v, "must be a positive integer, got 0"));
        }
        return within(field, v, u);
    }
    if let Some(f) = v.as_f64() {
        if f.is_finite() && f > 0.0 && f.fract() == 0.0 && f < 9.0e15 {
            return within(field, v, f as u64);
        }
        return Err(invalid(field, v, "must be a positive integer"));
    }
    Err(invalid(field, v, "must be a positive integer"))
}

/// A non-negative integer (for counts that may be 0, e.g. `n_shared_experts`).
fn as_nonneg(field: &str, v: &Value) -> Result<u64, ModelError> {
    if let Some(u) = v.as_u64() {
        return within(field, v, u);
    }
    if let Some(f) = v.as_f64() {
        if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 9.0e15 {
            return within(field, v, f as u64);
        }
    }
    Err(invalid(field, v, "must be a non-negative integer"))
}

fn get<'a>(o: &'a Obj, field: &str) -> Option<&'a Value> {
    match o.get(field) {
        None | Some(Value::Null) => None,
        Some(v) => Some(v),
    }
}

fn req(o: &Obj, field: &str) -> Result<u64, ModelError> {
    match get(o, field) {
        None => Err(missing(field, HINT)),
        Some(v) => as_pos(field, v),
    }
}

fn req32(o: &Obj, field: &str) -> Result<u32, ModelError> {
    let v = req(o, field)?;
    u32::try_from(v).map_err(|_| invalid(field, &Value::from(v), "too large"))
}

fn opt(o: &Obj, field: &str) -> Result<Option<u64>, ModelError> {
    get(o, field).map(|v| as_pos(field, v)).transpose()
}

fn opt_nonneg(o: &Obj, field: &str) -> Result<Option<u64>, ModelError> {
    get(o, field).map(|v| as_nonneg(field, v)).transpose()
}

fn opt_bool(o: &Obj, field: &str) -> Result<Option<bool>, ModelError> {
    match get(o, field) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(invalid(field, v, "must be true or false")),
    }
}

fn opt_str<'a>(o: &'a Obj, field: &str) -> Result<Option<&'a str>, ModelError> {
    match get(o, field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(invalid(field, v, "must be a string")),
    }
}

fn to_u32(field: &str, v: u64) -> Result<u32, ModelError> {
    u32::try_from(v).map_err(|_| invalid(field, &Value::from(v), "too large"))
}

fn family_of(o: &Obj) -> Result<ModelFamily, ModelError> {
    let arch = match get(o, "architectures") {
        Some(Value::Array(a)) => match a.first() {
            Some(Value::String(s)) => Some(s.clone()),
            Some(v) => return Err(invalid("architectures", v, "must be a list of strings")),
            None => None,
        },
        Some(v) => return Err(invalid("architectures", v, "must be a list of strings")),
        None => None,
    };
    let model_type = opt_str(o, "model_type")?.map(str::to_string);
    if let Some(a) = &arch {
        let f = match a.as_str() {
            "LlamaForCausalLM" => Some(ModelFamily::Llama),
            "Qwen2ForCausalLM" => Some(ModelFamily::Qwen2),
            "Qwen3ForCausalLM" => Some(ModelFamily::Qwen3),
            "Qwen3MoeForCausalLM" => Some(ModelFamily::Qwen3Moe),
            "MixtralForCausalLM" => Some(ModelFamily::Mixtral),
            "DeepseekV2ForCausalLM" => Some(ModelFamily::DeepseekV2),
            "DeepseekV3ForCausalLM" => Some(ModelFamily::DeepseekV3),
            "DeepseekV4ForCausalLM" => Some(ModelFamily::DeepseekV4),
            "GptOssForCausalLM" => Some(ModelFamily::GptOss),
            "DeepseekV32ForCausalLM" => Some(ModelFamily::DeepseekV32),
            "Glm4MoeForCausalLM" => Some(ModelFamily::Glm4Moe),
            "GlmMoeDsaForCausalLM" => Some(ModelFamily::GlmMoeDsa),
            "MiniMaxM2ForCausalLM" => Some(ModelFamily::MiniMaxM2),
            "Qwen3_5MoeForConditionalGeneration" | "Qwen3_5MoeForCausalLM" => {
                Some(ModelFamily::Qwen35Moe)
            }
            "Qwen3_5ForConditionalGeneration" | "Qwen3_5ForCausalLM" => Some(ModelFamily::Qwen35),
            _ => None,
        };
        return f.ok_or_else(|| ModelError::UnknownArchitecture {
            architecture: a.clone(),
            supported: SUPPORTED.to_string(),
        });
    }
    match model_type.as_deref() {
        Some("llama") => Ok(ModelFamily::Llama),
        Some("qwen2") => Ok(ModelFamily::Qwen2),
        Some("qwen3") => Ok(ModelFamily::Qwen3),
        Some("qwen3_moe") => Ok(ModelFamily::Qwen3Moe),
        Some("mixtral") => Ok(ModelFamily::Mixtral),
        Some("deepseek_v2") => Ok(ModelFamily::DeepseekV2),
        Some("deepseek_v3") | Some("kimi_k2") => Ok(ModelFamily::DeepseekV3),
        Some("deepseek_v4") => Ok(ModelFamily::DeepseekV4),
        Some("gpt_oss") => Ok(ModelFamily::GptOss),
        Some("deepseek_v32") => Ok(ModelFamily::DeepseekV32),
        Some("glm4_moe") => Ok(ModelFamily::Glm4Moe),
        Some("glm_moe_dsa") => Ok(ModelFamily::GlmMoeDsa),
        Some("minimax_m2") => Ok(ModelFamily::MiniMaxM2),
        Some("qwen3_5_moe") | Some("qwen3_5_moe_text") => Ok(ModelFamily::Qwen35Moe),
        Some("qwen3_5") | Some("qwen3_5_text") => Ok(ModelFamily::Qwen35),
        Some(other) => Err(ModelError::UnknownArchitecture {
            architecture: other.to_string(),
            supported: SUPPORTED.to_string(),
        }),
        None => Err(missing(
            "architectures",
            "neither `architectures` nor `model_type` is present, so the architecture is unknown; paste the model's full config.json",
        )),
    }
}

fn dtype_of(o: &Obj, notes: &mut Vec<String>) -> Result<DType, ModelError> {
    let (field, s) = match opt_str(o, "torch_dtype")? {
        Some(s) => ("torch_dtype", Some(s)),
        None => ("dtype", opt_str(o, "dtype")?),
    };
    match s {
        None => {
            notes.push(
                "config.json has no `torch_dtype`: assumed bfloat16 (vLLM's usual serving dtype)"
                    .to_string(),
            );
            Ok(DType::Bf16)
        }
        Some("bfloat16") => Ok(DType::Bf16),
        Some("float16") | Some("half") => Ok(DType::F16),
        Some("float32") | Some("float") => {
            notes.push(
                "torch_dtype float32: vLLM serves float32 checkpoints in bfloat16 by default; weights sized at 2 bytes"
                    .to_string(),
            );
            Ok(DType::Bf16)
        }
        Some(other) => Err(invalid(
            field,
            &Value::from(other),
            "expected bfloat16, float16 or float32",
        )),
    }
}

fn checkpoint_of(
    o: &Obj,
    unquantized: DType,
    notes: &mut Vec<String>,
) -> Result<CheckpointDtypes, ModelError> {
    let mut ck = CheckpointDtypes {
        dense: unquantized,
        experts: unquantized,
        fp8_block: None,
        unquantized,
        attention: None,
        int_group_size: None,
        fp8_row_scales: false,
        mxfp4_moe: false,
    };
    if let Some(q) = get(o, "quantization_config") {
        let q = q
            .as_object()
            .ok_or_else(|| invalid("quantization_config", q, "must be an object"))?;
        let method = opt_str(q, "quant_method")?.ok_or_else(|| {
            missing(
                "quantization_config.quant_method",
                "a quantization_config must name its quant_method (fp8, mxfp4, modelopt)",
            )
        })?;
        let block = match get(q, "weight_block_size") {
            None => None,
            Some(Value::Array(a)) if a.len() == 2 => {
                let r = as_pos("quantization_config.weight_block_size", &a[0])?;
                let c = as_pos("quantization_config.weight_block_size", &a[1])?;
                Some((
                    to_u32("quantization_config.weight_block_size", r)?,
                    to_u32("quantization_config.weight_block_size", c)?,
                ))
            }
            Some(v) => {
                return Err(invalid(
                    "quantization_config.weight_block_size",
                    v,
                    "must be [rows, cols]",
                ))
            }
        };
        let quant_algo = opt_str(q, "quant_algo")?;
        let moe_algo = opt_str(q, "moe_quant_algo")?;
        match method {
            "fp8" => {
                ck.dense = DType::Fp8;
                ck.experts = DType::Fp8;
                ck.fp8_block = block;
                if block.is_none() {
                    notes.push("fp8 checkpoint without weight_block_size: per-tensor scales (negligible bytes)".to_string());
                }
            }
            "fbgemm_fp8" => {
                // Meta's Llama-3.1 FP8 releases (vLLM `FBGEMMFp8Config`): fp8 weights with one
                // scale per output channel, activations quantised per token at run time.
                ck.dense = DType::Fp8;
                ck.experts = DType::Fp8;
                ck.fp8_row_scales = true;
                notes.push("fbgemm_fp8 checkpoint: fp8 weights with per-channel scales (negligible bytes), dynamic per-token activation scales".to_string());
            }
            "mxfp4" => {
                // gpt-oss: only the MoE expert weights are MXFP4; `modules_to_not_convert` lists
                // attention, router, embedding and lm_head, which stay in torch_dtype.
                ck.experts = DType::Mxfp4;
                ck.mxfp4_moe = true;
            }
            "modelopt" | "modelopt_fp4" => {
                let algo = quant_algo.unwrap_or("");
                if algo.eq_ignore_ascii_case("NVFP4") {
                    ck.dense = DType::Nvfp4;
                    ck.experts = DType::Nvfp4;
                } else if algo.eq_ignore_ascii_case("FP8") {
                    ck.dense = DType::Fp8;
                    ck.experts = DType::Fp8;
                } else {
                    return Err(invalid(
                        "quantization_config.quant_algo",
                        &Value::from(algo),
                        "ServeSim models ModelOpt NVFP4 and FP8 checkpoints only",
                    ));
                }
            }
            "awq" | "gptq" | "awq_marlin" | "gptq_marlin" => {
                let bits = match get(q, "bits").or_else(|| get(q, "w_bit")) {
                    Some(v) => as_pos("quantization_config.bits", v)?,
                    None => {
                        return Err(missing(
                            "quantization_config.bits",
                            "an AWQ/GPTQ config must give the weight bit width (bits: 4 or 8)",
                        ))
                    }
                };
                let dt = int_dtype("quantization_config.bits", bits)?;
                ck.int_group_size = int_group_size(q, "quantization_config.group_size", notes)?;
                ck.dense = dt;
                ck.experts = dt;
                notes.push(format!(
                    "{method} {bits}-bit weight-only checkpoint: served by Marlin-style kernels that dequantise to bf16 (W{bits}A16)"
                ));
            }
            "compressed-tensors" => {
                let (dense, experts, group, row_scales) = compressed_tensors_dtypes(q, notes)?;
                ck.dense = dense;
                ck.experts = experts;
                ck.int_group_size = group;
                ck.fp8_row_scales = row_scales;
            }
            other => {
                return Err(invalid(
                    "quantization_config.quant_method",
                    &Value::from(other),
                    "ServeSim models fp8 (incl. block-wise), fbgemm_fp8, mxfp4, ModelOpt NVFP4/FP8, AWQ, GPTQ and compressed-tensors (W4A16, W8A16, FP8, NVFP4) checkpoints; choose a weight precision override (bf16/fp8/fp4/int4) instead",
                ))
            }
        }
        // Modules the quantisation skips: attention projections stay in torch_dtype when the
        // list names them (`modules_to_not_convert` of fp8 / mxfp4 configs, ModelOpt `ignore` /
        // `exclude_modules`, compressed-tensors `ignore`). Norms, routers and lm_head are never
        // quantised here anyway.
        // (NVIDIA's mixed fp8 + NVFP4 DeepSeek-V4 checkpoints use `ignore` for the modules kept
        // in fp8 instead of NVFP4, so `ignore` counts only for ModelOpt and compressed-tensors.)
        let keys: &[&str] = if matches!(method, "modelopt" | "modelopt_fp4" | "compressed-tensors")
        {
            &["modules_to_not_convert", "ignore", "exclude_modules"]
        } else {
            &["modules_to_not_convert"]
        };
        for key in keys {
            if let Some(list) = get(q, key) {
                let arr = list.as_array().ok_or_else(|| {
                    invalid(
                        &format!("quantization_config.{key}"),
                        list,
                        "must be a list of module names",
                    )
                })?;
                let names: Vec<&str> = arr.iter().filter_map(|v| v.as_str()).collect();
                if names.iter().any(|n| excludes_attention(n)) && ck.dense != unquantized {
                    ck.attention = Some(unquantized);
                    notes.push(format!(
                        "quantization_config.{key} excludes the attention projections: they stay {unquantized}"
                    ));
                }
                if names.iter().any(|n| excludes_experts(n)) && ck.experts != unquantized {
                    ck.experts = unquantized;
                    notes.push(format!(
                        "quantization_config.{key} excludes the routed experts: they stay {unquantized}"
                    ));
                }
                // Every linear group outside the routed experts excluded (Kimi-K2-Thinking's
                // INT4 experts: attention, shared experts and the dense layers' MLPs ignored).
                if names.iter().any(|n| excludes_attention(n))
                    && names.iter().any(|n| excludes_shared_experts(n))
                    && names.iter().any(|n| excludes_dense_mlp(n))
                    && ck.dense != unquantized
                {
                    ck.dense = unquantized;
                    notes.push(format!(
                        "quantization_config.{key} excludes the attention, shared-expert and dense MLP projections: only the routed experts are quantized, the rest stays {unquantized}"
                    ));
                }
            }
        }
        // NVIDIA's mixed-precision DeepSeek-V4 checkpoints: quant_method fp8 (block-wise, for
        // attention / shared experts, listed in `ignore`) with `moe_quant_algo: NVFP4` for the
        // routed experts (`quantized_layers.*.ffn.experts`).
        if let Some(m) = moe_algo {
            if m.eq_ignore_ascii_case("NVFP4") {
                ck.experts = DType::Nvfp4;
            } else if m.eq_ignore_ascii_case("FP8") {
                ck.experts = DType::Fp8;
            } else {
                return Err(invalid(
                    "quantization_config.moe_quant_algo",
                    &Value::from(m),
                    "expected NVFP4 or FP8",
                ));
            }
        }
        if quant_algo.is_some_and(|a| a.eq_ignore_ascii_case("NVFP4")) && method == "fp8" {
            ck.dense = DType::Nvfp4;
            ck.experts = DType::Nvfp4;
        }
    }
    // DeepSeek-V4's own checkpoints: `expert_dtype: fp4` (routed experts in FP4 with ue8m0
    // scales per 32 elements — sized as MXFP4, an assumption documented in docs/models.md).
    if let Some(e) = opt_str(o, "expert_dtype")? {
        match e {
            "fp4" => {
                if ck.experts != DType::Nvfp4 {
                    ck.experts = DType::Mxfp4;
                    notes.push("expert_dtype fp4: routed experts sized as MXFP4 (4-bit + one 1-byte ue8m0 scale per 32 elements); assumption".to_string());
                }
            }
            "fp8" => ck.experts = DType::Fp8,
            "bf16" | "bfloat16" => ck.experts = DType::Bf16,
            other => {
                return Err(invalid(
                    "expert_dtype",
                    &Value::from(other),
                    "expected fp4, fp8 or bf16",
                ))
            }
        }
    }
    Ok(ck)
}

fn int_dtype(field: &str, bits: u64) -> Result<DType, ModelError> {
    match bits {
        4 => Ok(DType::Int4),
        8 => Ok(DType::Int8),
        b => Err(invalid(
            field,
            &Value::from(b),
            "ServeSim models 4-bit and 8-bit integer weight-only checkpoints",
        )),
    }
}

/// The integer formats' `group_size` (elements per 16-bit scale): `None` for the default 128 (or
/// no field), `Some(0)` for `-1` or a compressed-tensors `strategy: channel` (one scale per output
/// channel), else `Some(n)`; another group than 128 is said in the notes, since it moves the scale
/// bytes (2 / group bytes per weight).
fn int_group_size(
    q: &Obj,
    field: &str,
    notes: &mut Vec<String>,
) -> Result<Option<u32>, ModelError> {
    let key = field.rsplit('.').next().unwrap_or(field);
    let per_channel = opt_str(q, "strategy")? == Some("channel");
    let g = match get(q, key) {
        // compressed-tensors channel-wise schemes carry `group_size: null`.
        None | Some(Value::Null) if per_channel => {
            notes.push(
                "quantization strategy channel: one scale per output channel (negligible bytes)"
                    .to_string(),
            );
            return Ok(Some(0));
        }
        None | Some(Value::Null) => return Ok(None),
        Some(g) => g,
    };
    let v = g.as_i64().ok_or_else(|| {
        invalid(
            field,
            g,
            "must be an integer (a group size, or -1 per channel)",
        )
    })?;
    match v {
        -1 => {
            notes.push(
                "quantization group_size -1: one scale per output channel (negligible bytes)"
                    .to_string(),
            );
            Ok(Some(0))
        }
        128 => Ok(None),
        1..=65_536 => {
            notes.push(format!(
                "quantization group_size {v}: one 16-bit scale per {v} weights ({:.4} bytes per weight)",
                2.0 / v as f64
            ));
            Ok(Some(v as u32))
        }
        _ => Err(invalid(
            field,
            g,
            "must be -1 or a group size from 1 to 65,536",
        )),
    }
}

/// A module pattern that names the attention block or one of its projections.
fn excludes_attention(name: &str) -> bool {
    let n = name.trim_end_matches('*').trim_end_matches('.');
    n.ends_with("self_attn")
        || n.ends_with("attn")
        || [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "qkv_proj",
            "q_a_proj",
            "q_b_proj",
            "kv_a_proj_with_mqa",
            "kv_b_proj",
        ]
        .iter()
        .any(|p| n.ends_with(p))
}

/// A module pattern that names the routed experts.
fn excludes_experts(name: &str) -> bool {
    let n = name.trim_end_matches('*').trim_end_matches('.');
    n.ends_with("mlp.experts") || n.ends_with("block_sparse_moe.experts")
}

/// A module pattern that names the shared experts (`re:.*shared_experts.*`, `mlp.shared_expert`).
fn excludes_shared_experts(name: &str) -> bool {
    let n = name.trim_end_matches('*').trim_end_matches('.');
    n.ends_with("shared_experts") || n.ends_with("shared_expert")
}

/// A module pattern that names a dense MLP's projections and not the experts'
/// (`re:.*mlp\.(gate|up|gate_up|down)_proj.*`, `mlp.down_proj`): the dense layers of a MoE model.
/// The router (`mlp.gate`, no `_proj`) is not one.
fn excludes_dense_mlp(name: &str) -> bool {
    let n = name.replace('\\', "");
    !n.contains("expert")
        && n.contains("mlp.")
        && n.contains("_proj")
        && ["gate", "up", "down"].iter().any(|p| n.contains(p))
}

/// (dense, experts) storage types, integer group size and fp8 per-row scales of a compressed-tensors config: its `config_groups` weights
/// (`num_bits`, `type`), activations present or not. W4A16 / W8A16 integer -> weight-only
/// Int4 / Int8; 8-bit float -> fp8 (with per-row scales when the weights are `strategy: channel`
/// or the activations `strategy: token`, the FP8-dynamic schemes); 4-bit float with group 16 -> NVFP4.
fn compressed_tensors_dtypes(
    q: &Obj,
    notes: &mut Vec<String>,
) -> Result<(DType, DType, Option<u32>, bool), ModelError> {
    let field = "quantization_config.config_groups";
    let groups = get(q, "config_groups")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            missing(
                field,
                "a compressed-tensors config needs config_groups with the weight scheme",
            )
        })?;
    let mut found: Option<DType> = None;
    let mut group: Option<u32> = None;
    let mut row_scales = false;
    for (name, g) in groups {
        let w = g.get("weights").and_then(Value::as_object).ok_or_else(|| {
            missing(
                &format!("{field}.{name}.weights"),
                "each config group needs its weight scheme",
            )
        })?;
        let bits = req(w, "num_bits")?;
        let kind = opt_str(w, "type")?.unwrap_or("int");
        let dt = match (kind, bits) {
            ("int", b) => int_dtype(&format!("{field}.{name}.weights.num_bits"), b)?,
            ("float", 8) => DType::Fp8,
            ("float", 4) => DType::Nvfp4,
            (k, b) => {
                return Err(invalid(
                    &format!("{field}.{name}.weights"),
                    &Value::from(format!("{k} {b}-bit")),
                    "ServeSim models int4/int8 weight-only, fp8 and fp4 (NVFP4) compressed-tensors schemes",
                ))
            }
        };
        if dt.is_weight_only() {
            group = int_group_size(w, &format!("{field}.{name}.weights.group_size"), notes)?;
            notes.push(format!(
                "compressed-tensors {dt} weight-only checkpoint: Marlin-style kernels dequantise to bf16"
            ));
        }
        if dt == DType::Fp8 {
            let per_token = g
                .get("input_activations")
                .and_then(|a| a.get("strategy"))
                .and_then(Value::as_str)
                == Some("token");
            if w.get("strategy").and_then(Value::as_str) == Some("channel") || per_token {
                row_scales = true;
            }
        }
        found = Some(dt);
    }
    let dt = found.ok_or_else(|| missing(field, "config_groups is empty"))?;
    Ok((dt, dt, group, row_scales))
}

fn u32_list(o: &Obj, field: &str) -> Result<Option<Vec<u32>>, ModelError> {
    match get(o, field) {
        None => Ok(None),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| as_nonneg(field, v).and_then(|x| to_u32(field, x)))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(invalid(field, v, "must be a list of integers")),
    }
}

/// Multimodal wrappers (`*ForConditionalGeneration`: Qwen3.5, Kimi-K2.5) nest the language
/// model's config under `text_config`. Returns the text config with the wrapper's
/// `architectures`, `tie_word_embeddings`, `quantization_config` and dtype filled in where the
/// text config lacks them; `None` when the config is not nested.
fn nested_text_config(o: &Obj) -> Result<Option<Obj>, ModelError> {
    let wrapper = match get(o, "architectures") {
        Some(Value::Array(a)) => a
            .first()
            .and_then(Value::as_str)
            .is_some_and(|s| s.ends_with("ForConditionalGeneration")),
        _ => false,
    };
    let text = match get(o, "text_config") {
        Some(Value::Object(t)) => t,
        Some(v) => return Err(invalid("text_config", v, "must be an object (the language model's config)")),
        None if wrapper && get(o, "hidden_size").is_none() => {
            return Err(missing(
                "text_config",
                "this multimodal config keeps the language model's shape under text_config; paste the full config.json",
            ))
        }
        None => return Ok(None),
    };
    if get(o, "hidden_size").is_some() && !wrapper {
        return Ok(None);
    }
    let mut m = text.clone();
    for key in [
        "architectures",
        "tie_word_embeddings",
        "quantization_config",
        "torch_dtype",
        "dtype",
    ] {
        if !m.contains_key(key) {
            if let Some(v) = o.get(key) {
                m.insert(key.to_string(), v.clone());
            }
        }
    }
    // The wrapper's architecture names the model; the text config's model_type may be a
    // `_text` variant.
    if let Some(v) = o.get("architectures") {
        m.insert("architectures".to_string(), v.clone());
    }
    Ok(Some(m))
}

/// A `vision_config` entry as a positive integer, named `vision_config.<key>` in errors.
fn vision_pos(vc: &Obj, key: &str) -> Result<u64, ModelError> {
    let field = format!("vision_config.{key}");
    match get(vc, key) {
        None => Err(missing(&field, HINT)),
        Some(v) => as_pos(&field, v),
    }
}

/// The vision encoder of a multimodal config (`vision_config`): Qwen3-VL's vision transformer
/// (Qwen3-VL, Qwen3.5; `vision_config.model_type` starting with `qwen3`), counted layer by layer
/// as vLLM's `Qwen3_VisionTransformer` builds it (docs/models.md "Vision encoder"). Another
/// encoder is not counted, and a note says so.
fn vision_tower_of(root: &Obj, notes: &mut Vec<String>) -> Result<Option<VisionTower>, ModelError> {
    let vc = match get(root, "vision_config") {
        None => return Ok(None),
        Some(Value::Object(vc)) => vc,
        Some(v) => {
            return Err(invalid(
                "vision_config",
                v,
                "must be an object (the vision encoder's config)",
            ))
        }
    };
    let qwen3 = get(vc, "model_type")
        .and_then(Value::as_str)
        .is_some_and(|t| t.starts_with("qwen3"));
    if !qwen3 {
        notes.push(
            "multimodal checkpoint: the text model is modelled; this vision encoder's layout is not known to ServeSim, so its weights are not counted (for Qwen3-VL-style encoders they are about 0.45 B parameters)"
                .to_string(),
        );
        return Ok(None);
    }
    let h = u128::from(vision_pos(vc, "hidden_size")?);
    let inter = u128::from(vision_pos(vc, "intermediate_size")?);
    let depth = u128::from(vision_pos(vc, "depth")?);
    let out = u128::from(vision_pos(vc, "out_hidden_size")?);
    let merge = u128::from(vision_pos(vc, "spatial_merge_size")?);
    let patch = u128::from(vision_pos(vc, "patch_size")?);
    let temporal = u128::from(vision_pos(vc, "temporal_patch_size")?);
    let channels = match get(vc, "in_channels") {
        None => 3,
        Some(v) => u128::from(as_pos("vision_config.in_channels", v)?),
    };
    let positions = u128::from(vision_pos(vc, "num_position_embeddings")?);
    let deepstack = match get(vc, "deepstack_visual_indexes") {
        None => 0,
        Some(Value::Array(a)) => a.len() as u128,
        Some(v) => {
            return Err(invalid(
                "vision_config.deepstack_visual_indexes",
                v,
                "must be a list of block indexes",
            ))
        }
    };
    // Blocks: qkv and fc1 column-parallel (weights and biases split), proj and fc2 row-parallel
    // (weights split, biases whole), two LayerNorms (weight and bias).
    let block_sharded = (3 * h * h + 3 * h) + h * h + (h * inter + inter) + inter * h;
    let block_replicated = h + h + 4 * h;
    // Merger: LayerNorm, fc1 (column) H x H, fc2 (row) H x out, H = hidden x merge^2; the
    // deepstack mergers normalise over H instead of hidden.
    let merged = h * merge * merge;
    let merger_sharded = merged * merged + merged + merged * out;
    let sharded = depth * block_sharded + (1 + deepstack) * merger_sharded;
    let replicated = channels * temporal * patch * patch * h
        + h
        + positions * h
        + depth * block_replicated
        + (2 * h + out)
        + deepstack * (2 * merged + out);
    let to_u64 = |v: u128| {
        u64::try_from(v).map_err(|_| {
            invalid(
                "vision_config",
                &Value::from(v as f64),
                "gives an implausibly large encoder; check the numbers",
            )
        })
    };
    let tower = VisionTower {
        sharded_params: to_u64(sharded)?,
        replicated_params: to_u64(replicated)?,
    };
    notes.push(format!(
        "multimodal checkpoint: the vision encoder ({:.2} B parameters, kept in the model dtype) is loaded unless vLLM runs with --language-model-only",
        tower.total_params() as f64 / 1e9
    ));
    Ok(Some(tower))
}

pub(super) fn from_hf_json(name: &str, json: &str) -> Result<ModelConfig, ModelError> {
    let root: Value = serde_json::from_str(json).map_err(|e| ModelError::Json {
        model: name.to_string(),
        message: e.to_string(),
    })?;
    let o = root.as_object().ok_or_else(|| ModelError::Json {
        model: name.to_string(),
        message: "the top level is not a JSON object".to_string(),
    })?;
    let mut notes = Vec::new();
    let vision_tower = vision_tower_of(o, &mut notes)?;
    let merged;
    let o = match nested_text_config(o)? {
        Some(m) => {
            merged = m;
            &merged
        }
        None => o,
    };
    let family = family_of(o)?;

    let hidden_size = req(o, "hidden_size")?;
    let vocab_size = req(o, "vocab_size")?;
    let num_layers = req32(o, "num_hidden_layers")?;
    let num_heads = req32(o, "num_attention_heads")?;
    let max_position_embeddings =
        match opt(o, "max_position_embeddings")? {
            Some(v) => v,
            None => return Err(missing(
                "max_position_embeddings",
                "the maximum context length is needed for KV sizing; paste the full config.json",
            )),
        };
    let tie_word_embeddings = opt_bool(o, "tie_word_embeddings")?.unwrap_or(false);
    let num_mtp_layers = match opt_nonneg(o, "num_nextn_predict_layers")? {
        Some(v) => to_u32("num_nextn_predict_layers", v)?,
        None => match opt_nonneg(o, "mtp_num_hidden_layers")? {
            Some(v) => to_u32("mtp_num_hidden_layers", v)?,
            None if opt_bool(o, "use_mtp")?.unwrap_or(false) => to_u32(
                "num_mtp_modules",
                opt_nonneg(o, "num_mtp_modules")?.unwrap_or(0),
            )?,
            None => 0,
        },
    };
    let unquantized = dtype_of(o, &mut notes)?;
    let checkpoint = checkpoint_of(o, unquantized, &mut notes)?;

    let head_dim_default = |field: &str| -> Result<u32, ModelError> {
        if hidden_size % num_heads as u64 != 0 {
            return Err(invalid(
                field,
                &Value::Null,
                "absent, and hidden_size is not divisible by num_attention_heads, so it cannot be implied",
            ));
        }
        to_u32("head_dim", hidden_size / num_heads as u64)
    };

    // ---- attention ----
    let attention = match family {
        ModelFamily::DeepseekV2
        | ModelFamily::DeepseekV3
        | ModelFamily::DeepseekV32
        | ModelFamily::GlmMoeDsa => AttentionSpec::Mla {
            num_heads,
            q_lora_rank: opt(o, "q_lora_rank")?
                .map(|v| to_u32("q_lora_rank", v))
                .transpose()?,
            kv_lora_rank: req32(o, "kv_lora_rank")?,
            qk_rope_head_dim: req32(o, "qk_rope_head_dim")?,
            qk_nope_head_dim: req32(o, "qk_nope_head_dim")?,
            v_head_dim: req32(o, "v_head_dim")?,
        },
        ModelFamily::DeepseekV4 => {
            let ratios = u32_list(o, "compress_ratios")?.ok_or_else(|| {
                missing(
                    "compress_ratios",
                    "DeepSeek-V4 needs the per-layer compress_ratios list",
                )
            })?;
            if ratios.len() < num_layers as usize {
                return Err(invalid(
                    "compress_ratios",
                    &Value::from(ratios.len()),
                    "needs one entry per decoder layer (num_hidden_layers), plus MTP layers",
                ));
            }
            if let Some(r) = ratios
                .iter()
                .find(|r| **r == 1 || (**r > 1 && !r.is_power_of_two()))
            {
                return Err(invalid(
                    "compress_ratios",
                    &Value::from(*r),
                    "entries must be 0 (no compression) or a power of two > 1",
                ));
            }
            AttentionSpec::DeepseekV4 {
                num_heads,
                head_dim: req32(o, "head_dim")?,
                qk_rope_head_dim: req32(o, "qk_rope_head_dim")?,
                q_lora_rank: req32(o, "q_lora_rank")?,
                o_lora_rank: req32(o, "o_lora_rank")?,
                o_groups: req32(o, "o_groups")?,
                sliding_window: req32(o, "sliding_window")?,
                index_n_heads: req32(o, "index_n_heads")?,
                index_head_dim: req32(o, "index_head_dim")?,
                index_topk: req32(o, "index_topk")?,
                compress_ratios: ratios,
                hc_mult: req32(o, "hc_mult")?,
            }
        }
        _ => {
            let num_kv_heads = match opt(o, "num_key_value_heads")? {
                Some(v) => to_u32("num_key_value_heads", v)?,
                None => {
                    notes.push(
                        "no `num_key_value_heads`: multi-head attention assumed (Hugging Face default)"
                            .to_string(),
                    );
                    num_heads
                }
            };
            if num_heads % num_kv_heads != 0 {
                return Err(invalid(
                    "num_key_value_heads",
                    &Value::from(num_kv_heads),
                    "num_attention_heads must be a multiple of num_key_value_heads",
                ));
            }
            let head_dim = match opt(o, "head_dim")? {
                Some(v) => to_u32("head_dim", v)?,
                None => head_dim_default("head_dim")?,
            };
            let qkv_bias = match family {
                ModelFamily::Qwen2 => true,
                _ => opt_bool(o, "attention_bias")?.unwrap_or(false),
            };
            AttentionSpec::Gqa {
                num_heads,
                num_kv_heads,
                head_dim,
                v_head_dim: head_dim,
                qkv_bias,
            }
        }
    };

    // ---- per-layer attention kind ----
    let mut attn_kinds = vec![LayerAttn::Full; num_layers as usize];
    match (&attention, family) {
        (
            AttentionSpec::DeepseekV4 {
                compress_ratios,
                sliding_window,
                ..
            },
            _,
        ) => {
            for (i, k) in attn_kinds.iter_mut().enumerate() {
                *k = match compress_ratios[i] {
                    0 => LayerAttn::SlidingWindow {
                        window: *sliding_window,
                    },
                    r => LayerAttn::Compressed { ratio: r },
                };
            }
        }
        (AttentionSpec::Gqa { .. }, _) => {
            let window = opt(o, "sliding_window")?;
            if let Some(types) = get(o, "layer_types") {
                let arr = types
                    .as_array()
                    .ok_or_else(|| invalid("layer_types", types, "must be a list of strings"))?;
                if arr.len() != num_layers as usize {
                    return Err(invalid(
                        "layer_types",
                        &Value::from(arr.len()),
                        "must have one entry per layer (num_hidden_layers)",
                    ));
                }
                for (i, t) in arr.iter().enumerate() {
                    attn_kinds[i] = match t.as_str() {
                        Some("full_attention") => LayerAttn::Full,
                        Some("linear_attention")
                            if matches!(family, ModelFamily::Qwen35Moe | ModelFamily::Qwen35) =>
                        {
                            LayerAttn::Linear
                        }
                        Some("sliding_attention") => {
                            let w = window.ok_or_else(|| {
                                missing(
                                    "sliding_window",
                                    "layer_types has sliding_attention layers, so the window size is needed",
                                )
                            })?;
                            LayerAttn::SlidingWindow {
                                window: to_u32("sliding_window", w)?,
                            }
                        }
                        _ => {
                            return Err(invalid(
                                "layer_types",
                                t,
                                "ServeSim models full_attention and sliding_attention layers (and linear_attention in Qwen3.5)",
                            ))
                        }
                    };
                }
            } else {
                // Qwen2/Qwen3: `use_sliding_window` gates the window (off in every released
                // config); layers >= max_window_layers use it. Mixtral: a non-null
                // `sliding_window` applies to every layer.
                let use_sw = match family {
                    ModelFamily::Qwen2 | ModelFamily::Qwen3 | ModelFamily::Qwen3Moe => {
                        opt_bool(o, "use_sliding_window")?.unwrap_or(false)
                    }
                    ModelFamily::Llama => false,
                    _ => window.is_some(),
                };
                if use_sw {
                    let w = window
                        .ok_or_else(|| missing("sliding_window", "use_sliding_window is true"))?;
                    let from = match family {
                        ModelFamily::Qwen2 | ModelFamily::Qwen3 | ModelFamily::Qwen3Moe => {
                            opt_nonneg(o, "max_window_layers")?.unwrap_or(0)
                        }
                        _ => 0,
                    };
                    for (i, k) in attn_kinds.iter_mut().enumerate() {
                        if i as u64 >= from {
                            *k = LayerAttn::SlidingWindow {
                                window: to_u32("sliding_window", w)?,
                            };
                        }
                    }
                }
            }
        }
        _ => {}
    }

    // ---- FFN / MoE ----
    let mut moe: Option<MoeSpec> = None;
    let mut ffn_kinds = vec![LayerFfn::Dense; num_layers as usize];
    let mut dense_intermediate_size = 0u64;
    let mut num_hash_layers = 0u32;
    match family {
        ModelFamily::Llama | ModelFamily::Qwen2 | ModelFamily::Qwen3 | ModelFamily::Qwen35 => {
            dense_intermediate_size = req(o, "intermediate_size")?;
        }
        ModelFamily::Mixtral => {
            moe = Some(MoeSpec {
                num_experts: req32(o, "num_local_experts")?,
                experts_per_tok: req32(o, "num_experts_per_tok")?,
                moe_intermediate_size: req(o, "intermediate_size")?,
                num_shared_experts: 0,
                shared_intermediate_size: 0,
                router_bias: false,
                expert_bias: false,
            });
            ffn_kinds.fill(LayerFfn::Moe);
        }
        ModelFamily::Qwen3Moe | ModelFamily::Qwen35Moe => {
            dense_intermediate_size = opt(o, "intermediate_size")?.unwrap_or(0);
            let shared = opt(o, "shared_expert_intermediate_size")?;
            moe = Some(MoeSpec {
                num_experts: req32(o, "num_experts")?,
                experts_per_tok: req32(o, "num_experts_per_tok")?,
                moe_intermediate_size: req(o, "moe_intermediate_size")?,
                num_shared_experts: u32::from(shared.is_some()),
                shared_intermediate_size: shared.unwrap_or(0),
                router_bias: false,
                expert_bias: false,
            });
            let step = opt(o, "decoder_sparse_step")?.unwrap_or(1);
            let mlp_only = u32_list(o, "mlp_only_layers")?.unwrap_or_default();
            for (i, k) in ffn_kinds.iter_mut().enumerate() {
                if !mlp_only.contains(&(i as u32)) && (i as u64 + 1).is_multiple_of(step) {
                    *k = LayerFfn::Moe;
                }
            }
            if ffn_kinds.contains(&LayerFfn::Dense) && dense_intermediate_size == 0 {
                return Err(missing(
                    "intermediate_size",
                    "some layers are dense (mlp_only_layers / decoder_sparse_step), so the dense MLP size is needed",
                ));
            }
        }
        ModelFamily::DeepseekV2
        | ModelFamily::DeepseekV3
        | ModelFamily::DeepseekV32
        | ModelFamily::GlmMoeDsa
        | ModelFamily::Glm4Moe => {
            let moe_int = req(o, "moe_intermediate_size")?;
            let n_shared = to_u32(
                "n_shared_experts",
                opt_nonneg(o, "n_shared_experts")?.unwrap_or(0),
            )?;
            moe = Some(MoeSpec {
                num_experts: req32(o, "n_routed_experts")?,
                experts_per_tok: req32(o, "num_experts_per_tok")?,
                moe_intermediate_size: moe_int,
                num_shared_experts: n_shared,
                shared_intermediate_size: if n_shared > 0 { moe_int } else { 0 },
                router_bias: family != ModelFamily::DeepseekV2,
                expert_bias: false,
            });
            let first_dense = opt_nonneg(o, "first_k_dense_replace")?.unwrap_or(0);
            let freq = opt(o, "moe_layer_freq")?.unwrap_or(1);
            for (i, k) in ffn_kinds.iter_mut().enumerate() {
                if i as u64 >= first_dense && (i as u64).is_multiple_of(freq) {
                    *k = LayerFfn::Moe;
                }
            }
            if ffn_kinds.contains(&LayerFfn::Dense) {
                dense_intermediate_size = req(o, "intermediate_size")?;
            }
        }
        ModelFamily::DeepseekV4 => {
            let moe_int = req(o, "moe_intermediate_size")?;
            let n_shared = to_u32(
                "n_shared_experts",
                opt_nonneg(o, "n_shared_experts")?.unwrap_or(0),
            )?;
            moe = Some(MoeSpec {
                num_experts: req32(o, "n_routed_experts")?,
                experts_per_tok: req32(o, "num_experts_per_tok")?,
                moe_intermediate_size: moe_int,
                num_shared_experts: n_shared,
                shared_intermediate_size: if n_shared > 0 { moe_int } else { 0 },
                router_bias: true,
                expert_bias: false,
            });
            ffn_kinds.fill(LayerFfn::Moe);
            num_hash_layers = to_u32(
                "num_hash_layers",
                opt_nonneg(o, "num_hash_layers")?.unwrap_or(0),
            )?
            .min(num_layers);
        }
        ModelFamily::MiniMaxM2 => {
            let shared = opt_nonneg(o, "shared_intermediate_size")?.unwrap_or(0);
            moe = Some(MoeSpec {
                num_experts: req32(o, "num_local_experts")?,
                experts_per_tok: req32(o, "num_experts_per_tok")?,
                moe_intermediate_size: req(o, "intermediate_size")?,
                num_shared_experts: u32::from(shared > 0),
                shared_intermediate_size: shared,
                router_bias: opt_bool(o, "use_routing_bias")?.unwrap_or(false),
                expert_bias: false,
            });
            ffn_kinds.fill(LayerFfn::Moe);
        }
        ModelFamily::GptOss => {
            let k = match opt(o, "experts_per_token")? {
                Some(k) => k,
                None => req(o, "num_experts_per_tok")?,
            };
            moe = Some(MoeSpec {
                num_experts: req32(o, "num_local_experts")?,
                experts_per_tok: to_u32("experts_per_token", k)?,
                moe_intermediate_size: req(o, "intermediate_size")?,
                num_shared_experts: 0,
                shared_intermediate_size: 0,
                router_bias: true,
                expert_bias: true,
            });
            ffn_kinds.fill(LayerFfn::Moe);
        }
    }
    if let Some(m) = &moe {
        if m.experts_per_tok > m.num_experts {
            return Err(invalid(
                "num_experts_per_tok",
                &Value::from(m.experts_per_tok),
                "cannot exceed the number of routed experts",
            ));
        }
    }

    let sparse_indexer = match family {
        ModelFamily::DeepseekV32 | ModelFamily::GlmMoeDsa => {
            let indexer_layers = match get(o, "indexer_types") {
                None => num_layers,
                Some(Value::Array(a)) => {
                    if a.len() != num_layers as usize {
                        return Err(invalid(
                            "indexer_types",
                            &Value::from(a.len()),
                            "must have one entry per decoder layer (num_hidden_layers)",
                        ));
                    }
                    a.iter().filter(|v| v.as_str() == Some("full")).count() as u32
                }
                Some(v) => {
                    return Err(invalid(
                        "indexer_types",
                        v,
                        "must be a list of \"full\" / \"shared\"",
                    ))
                }
            };
            Some(SparseIndexer {
                n_heads: req32(o, "index_n_heads")?,
                head_dim: req32(o, "index_head_dim")?,
                topk: req32(o, "index_topk")?,
                indexer_layers,
            })
        }
        _ => None,
    };
    let linear_attention = if attn_kinds.contains(&LayerAttn::Linear) {
        let state_elem_bytes = match opt_str(o, "mamba_ssm_dtype")? {
            None => unquantized.bytes_per_element() as u32,
            Some("float32") => 4,
            Some("bfloat16") | Some("float16") => 2,
            Some(other) => {
                return Err(invalid(
                    "mamba_ssm_dtype",
                    &Value::from(other),
                    "expected float32, bfloat16 or float16",
                ))
            }
        };
        let la = LinearAttention {
            num_key_heads: req32(o, "linear_num_key_heads")?,
            num_value_heads: req32(o, "linear_num_value_heads")?,
            key_head_dim: req32(o, "linear_key_head_dim")?,
            value_head_dim: req32(o, "linear_value_head_dim")?,
            conv_kernel: req32(o, "linear_conv_kernel_dim")?,
            state_elem_bytes,
        };
        if !la.num_value_heads.is_multiple_of(la.num_key_heads) {
            return Err(invalid(
                "linear_num_value_heads",
                &Value::from(la.num_value_heads),
                "must be a multiple of linear_num_key_heads",
            ));
        }
        Some(la)
    } else {
        None
    };
    let attn_output_gate = opt_bool(o, "attn_output_gate")?.unwrap_or(false);

    let layers = attn_kinds
        .into_iter()
        .zip(ffn_kinds)
        .map(|(attn, ffn)| LayerSpec { attn, ffn })
        .collect();

    Ok(ModelConfig {
        name: name.to_string(),
        family,
        hidden_size,
        vocab_size,
        num_layers,
        num_mtp_layers,
        attention,
        layers,
        moe,
        dense_intermediate_size,
        tie_word_embeddings,
        max_position_embeddings,
        checkpoint,
        num_hash_layers,
        sparse_indexer,
        linear_attention,
        attn_output_gate,
        vision_tower,
        notes,
    })
}
