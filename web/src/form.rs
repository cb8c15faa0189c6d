//! The scenario form as the user edits it (text fields), its validation into a
//! [`Scenario`](crate::core_api::Scenario), and back. Pure Rust, tested natively.
//!
//! Each field has a stable key; the page uses `f-<key>` as the input's id and shows the field's
//! error message next to it.

use crate::core_api::{GpuRef, ModelRef, Scenario, Sla, Workload};
use servesim_core::deploy::RawEngineSettings;
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::RawGpu;
use servesim_core::parallel::Parallelism;
use std::collections::BTreeMap;

/// Workload presets: (key, label, isl, osl).
pub const PRESETS: &[(&str, &str, u64, u64)] = &[
    ("chat", "Chat (1k in / 256 out)", 1024, 256),
    ("summarize", "Summarise / RAG (8k in / 256 out)", 8192, 256),
    ("agentic", "Agentic (16k in / 1k out)", 16384, 1024),
    ("reasoning", "Reasoning (1k in / 4k out)", 1024, 4096),
    ("custom", "Custom", 0, 0),
];

/// Weight precisions offered: (value, label).
pub const WEIGHT_PRECISIONS: &[(&str, &str)] = &[
    ("checkpoint", "as the checkpoint"),
    ("bf16", "bf16"),
    ("fp8", "fp8 (--quantization fp8)"),
    ("fp4", "fp4 (NVFP4 / MXFP4)"),
];

#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    pub model_mode: String, // "catalog" | "config"
    pub model_id: String,
    pub config_json: String,
    pub gpu_mode: String, // "catalog" | "custom"
    pub gpu_id: String,
    pub custom_gpu_name: String,
    pub custom_gpu_memory_gib: String,
    pub custom_gpu_bandwidth_tb_s: String,
    pub custom_gpu_bf16_tflops: String,
    pub custom_gpu_fp8_tflops: String,
    pub custom_gpu_fp4_tflops: String,
    pub custom_gpu_link_gb_s: String,
    pub custom_gpu_domain: String,
    pub gpus: String,
    pub tp: String,
    pub dp: String,
    pub ep: String,
    pub weight_precision: String,
    pub kv_cache_dtype: String,
    pub gpu_memory_utilization: String,
    pub max_num_seqs: String,
    pub max_num_batched_tokens: String,
    pub block_size: String,
    pub max_model_len: String,
    /// `--enable-prefix-caching` (`None` = vLLM's default, on).
    pub enable_prefix_caching: Option<bool>,
    /// `--enforce-eager` (`None` = vLLM's default, off).
    pub enforce_eager: Option<bool>,
    pub preset: String,
    pub isl: String,
    pub osl: String,
    pub prefix_share: String,
    pub trace: String,
    pub levels: String,
    pub duration_s: String,
    pub sla_ttft_p90_ms: String,
    pub sla_itl_p90_ms: String,
    pub sla_min_tps_user: String,
    pub seed: String,
}

/// Field key -> message, for every invalid field.
pub type FieldErrors = BTreeMap<&'static str, String>;

fn fmt_f(v: f64) -> String {
    // Shortest text that parses back to the same value.
    let s = format!("{v}");
    if s.contains('e') {
        format!("{v:.6}")
    } else {
        s
    }
}

fn opt_f(v: Option<f64>) -> String {
    v.map(fmt_f).unwrap_or_default()
}

fn opt_i(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl Form {
    pub fn from_scenario(s: &Scenario) -> Form {
        let (model_mode, model_id, config_json) = match &s.model {
            ModelRef::Catalog(id) => ("catalog", id.clone(), String::new()),
            ModelRef::ConfigJson(j) => ("config", String::new(), j.clone()),
        };
        let (gpu_mode, gpu_id, custom) = match &s.gpu {
            GpuRef::Catalog(id) => ("catalog", id.clone(), None),
            GpuRef::Custom(c) => ("custom", String::new(), Some(c.clone())),
        };
        let preset = PRESETS
            .iter()
            .find(|p| p.2 == s.workload.isl && p.3 == s.workload.osl)
            .map(|p| p.0)
            .unwrap_or("custom");
        Form {
            model_mode: model_mode.into(),
            model_id,
            config_json,
            gpu_mode: gpu_mode.into(),
            gpu_id,
            custom_gpu_name: custom.as_ref().map(|c| c.name.clone()).unwrap_or_default(),
            custom_gpu_memory_gib: custom
                .as_ref()
                .map(|c| fmt_f(c.memory_visible_mib / 1024.0))
                .unwrap_or_default(),
            custom_gpu_bandwidth_tb_s: custom
                .as_ref()
                .map(|c| fmt_f(c.hbm_bandwidth_tb_s))
                .unwrap_or_default(),
            custom_gpu_bf16_tflops: custom
                .as_ref()
                .map(|c| fmt_f(c.bf16_dense_tflops))
                .unwrap_or_default(),
            custom_gpu_fp8_tflops: custom
                .as_ref()
                .and_then(|c| c.fp8_dense_tflops)
                .map(fmt_f)
                .unwrap_or_default(),
            custom_gpu_fp4_tflops: custom
                .as_ref()
                .and_then(|c| c.fp4_dense_tflops)
                .map(fmt_f)
                .unwrap_or_default(),
            custom_gpu_link_gb_s: custom
                .as_ref()
                .map(|c| fmt_f(c.scaleup_unidir_gb_s))
                .unwrap_or_else(|| "450".into()),
            custom_gpu_domain: custom
                .as_ref()
                .map(|c| c.scaleup_domain.to_string())
                .unwrap_or_else(|| "8".into()),
            gpus: s.num_gpus.to_string(),
            tp: s.parallelism.tp.to_string(),
            dp: s.parallelism.dp.to_string(),
            ep: s.parallelism.ep.to_string(),
            weight_precision: match s.weight_precision {
                WeightPrecision::Checkpoint => "checkpoint",
                WeightPrecision::Bf16 => "bf16",
                WeightPrecision::Fp8 => "fp8",
                WeightPrecision::Fp4 => "fp4",
            }
            .into(),
            kv_cache_dtype: s.kv_cache_dtype.name().into(),
            gpu_memory_utilization: opt_f(s.engine.gpu_memory_utilization),
            max_num_seqs: opt_i(s.engine.max_num_seqs),
            max_num_batched_tokens: opt_i(s.engine.max_num_batched_tokens),
            block_size: opt_i(s.engine.block_size),
            max_model_len: opt_i(s.engine.max_model_len),
            enable_prefix_caching: s.engine.enable_prefix_caching,
            enforce_eager: s.engine.enforce_eager,
            preset: preset.into(),
            isl: s.workload.isl.to_string(),
            osl: s.workload.osl.to_string(),
            prefix_share: fmt_f(s.workload.prefix_share),
            trace: s.workload.trace.clone().unwrap_or_default(),
            levels: s
                .levels
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            duration_s: fmt_f(s.duration_s),
            sla_ttft_p90_ms: opt_f(s.sla.ttft_p90_ms),
            sla_itl_p90_ms: opt_f(s.sla.itl_p90_ms),
            sla_min_tps_user: opt_f(s.sla.min_tokens_per_s_per_user),
            seed: s.seed.to_string(),
        }
    }

    /// Applies a workload preset (a no-op for "custom").
    pub fn apply_preset(&mut self, key: &str) {
        self.preset = key.into();
        if let Some(p) = PRESETS.iter().find(|p| p.0 == key && p.0 != "custom") {
            self.isl = p.2.to_string();
            self.osl = p.3.to_string();
        }
    }

    /// Validates every field; on success the scenario, otherwise one message per bad field.
    pub fn to_scenario(&self) -> Result<Scenario, FieldErrors> {
        let mut e = FieldErrors::new();
        let model = if self.model_mode == "config" {
            if self.config_json.trim().is_empty() {
                e.insert("config_json", "paste a Hugging Face config.json".into());
            } else if serde_json::from_str::<serde_json::Value>(&self.config_json).is_err() {
                e.insert("config_json", "this is not valid JSON".into());
            }
            ModelRef::ConfigJson(self.config_json.clone())
        } else {
            if self.model_id.trim().is_empty() {
                e.insert("model_id", "choose a model".into());
            }
            ModelRef::Catalog(self.model_id.trim().into())
        };
        let gpu = if self.gpu_mode == "custom" {
            let name = self.custom_gpu_name.trim();
            if name.is_empty() {
                e.insert("custom_gpu_name", "give the GPU a name".into());
            }
            GpuRef::Custom(RawGpu {
                name: name.into(),
                memory_visible_mib: pos_f(
                    &mut e,
                    "custom_gpu_memory_gib",
                    &self.custom_gpu_memory_gib,
                ) * 1024.0,
                hbm_bandwidth_tb_s: pos_f(
                    &mut e,
                    "custom_gpu_bandwidth_tb_s",
                    &self.custom_gpu_bandwidth_tb_s,
                ),
                bf16_dense_tflops: pos_f(
                    &mut e,
                    "custom_gpu_bf16_tflops",
                    &self.custom_gpu_bf16_tflops,
                ),
                fp8_dense_tflops: opt_pos_f(
                    &mut e,
                    "custom_gpu_fp8_tflops",
                    &self.custom_gpu_fp8_tflops,
                ),
                fp4_dense_tflops: opt_pos_f(
                    &mut e,
                    "custom_gpu_fp4_tflops",
                    &self.custom_gpu_fp4_tflops,
                ),
                scaleup_unidir_gb_s: pos_f(
                    &mut e,
                    "custom_gpu_link_gb_s",
                    &self.custom_gpu_link_gb_s,
                ),
                scaleup_domain: pos_u(&mut e, "custom_gpu_domain", &self.custom_gpu_domain, 4096)
                    as u32,
                vendor: None,
            })
        } else {
            if self.gpu_id.trim().is_empty() {
                e.insert("gpu_id", "choose a GPU".into());
            }
            GpuRef::Catalog(self.gpu_id.trim().into())
        };
        let gpus = pos_u(&mut e, "gpus", &self.gpus, 4096) as u32;
        let tp = pos_u(&mut e, "tp", &self.tp, 1024) as u32;
        let dp = pos_u(&mut e, "dp", &self.dp, 1024) as u32;
        let ep = pos_u(&mut e, "ep", &self.ep, 4096) as u32;
        if tp > 0 && dp > 0 && gpus > 0 && !e.contains_key("gpus") && !gpus.is_multiple_of(tp * dp)
        {
            e.insert(
                "gpus",
                format!(
                    "{gpus} GPUs do not split into replicas of TP x DP = {} GPUs",
                    tp * dp
                ),
            );
        }
        if ep > 1 && tp > 0 && dp > 0 && ep != tp * dp && !e.contains_key("ep") {
            e.insert(
                "ep",
                format!(
                    "with expert parallelism vLLM uses EP = TP x DP = {}",
                    tp * dp
                ),
            );
        }
        let weight_precision =
            WeightPrecision::parse(&self.weight_precision).unwrap_or_else(|| {
                e.insert("weight_precision", "choose a weight precision".into());
                WeightPrecision::Checkpoint
            });
        let kv_cache_dtype = KvCacheDtype::parse(&self.kv_cache_dtype).unwrap_or_else(|| {
            e.insert(
                "kv_cache_dtype",
                format!("use one of {}", KvCacheDtype::NAMES.join(", ")),
            );
            KvCacheDtype::Auto
        });
        let gmu = opt_pos_f(
            &mut e,
            "gpu_memory_utilization",
            &self.gpu_memory_utilization,
        );
        if gmu.is_some_and(|g| g > 1.0) {
            e.insert(
                "gpu_memory_utilization",
                "a fraction of GPU memory: at most 1".into(),
            );
        }
        let block_size = opt_pos_u(&mut e, "block_size", &self.block_size, 1024);
        if block_size.is_some_and(|b| !(b as u64).is_power_of_two())
            && !e.contains_key("block_size")
        {
            e.insert("block_size", "vLLM block sizes are powers of two".into());
        }
        let engine = RawEngineSettings {
            gpu_memory_utilization: gmu,
            max_num_seqs: opt_pos_u(&mut e, "max_num_seqs", &self.max_num_seqs, 1 << 20),
            max_num_batched_tokens: opt_pos_u(
                &mut e,
                "max_num_batched_tokens",
                &self.max_num_batched_tokens,
                1 << 24,
            ),
            block_size,
            max_model_len: opt_pos_u(&mut e, "max_model_len", &self.max_model_len, 1 << 24),
            enable_prefix_caching: self.enable_prefix_caching,
            enforce_eager: self.enforce_eager,
            ..RawEngineSettings::default()
        };
        let prefix_share = nonneg_f(&mut e, "prefix_share", &self.prefix_share);
        if prefix_share >= 1.0 {
            e.insert("prefix_share", "a fraction below 1".into());
        }
        let workload = Workload {
            isl: pos_u(&mut e, "isl", &self.isl, 1 << 24),
            osl: pos_u(&mut e, "osl", &self.osl, 1 << 24),
            prefix_share,
            trace: (!self.trace.trim().is_empty()).then(|| self.trace.clone()),
        };
        let levels = parse_levels(&self.levels).unwrap_or_else(|msg| {
            e.insert("levels", msg);
            Vec::new()
        });
        let duration_s = pos_f(&mut e, "duration_s", &self.duration_s);
        let sla = Sla {
            ttft_p90_ms: opt_pos_f(&mut e, "sla_ttft_p90_ms", &self.sla_ttft_p90_ms),
            itl_p90_ms: opt_pos_f(&mut e, "sla_itl_p90_ms", &self.sla_itl_p90_ms),
            min_tokens_per_s_per_user: opt_pos_f(
                &mut e,
                "sla_min_tps_user",
                &self.sla_min_tps_user,
            ),
        };
        let seed = match self.seed.trim().parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                e.insert("seed", "a whole number, 0 or more".into());
                0
            }
        };
        if !e.is_empty() {
            return Err(e);
        }
        Ok(Scenario {
            model,
            gpu,
            num_gpus: gpus,
            parallelism: Parallelism { tp, dp, ep },
            weight_precision,
            kv_cache_dtype,
            engine,
            workload,
            levels,
            duration_s,
            sla,
            seed,
        })
    }
}

fn pos_u(e: &mut FieldErrors, key: &'static str, text: &str, max: u64) -> u64 {
    match text.trim().parse::<u64>() {
        Ok(0) => {
            e.insert(key, "must be at least 1".into());
            0
        }
        Ok(v) if v > max => {
            e.insert(key, format!("at most {max}"));
            0
        }
        Ok(v) => v,
        Err(_) if text.trim().is_empty() => {
            e.insert(key, "required".into());
            0
        }
        Err(_) => {
            e.insert(key, "a whole number, 1 or more".into());
            0
        }
    }
}

fn opt_pos_u(e: &mut FieldErrors, key: &'static str, text: &str, max: u64) -> Option<i64> {
    if text.trim().is_empty() {
        None
    } else {
        Some(pos_u(e, key, text, max) as i64)
    }
}

fn parse_f(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

fn pos_f(e: &mut FieldErrors, key: &'static str, text: &str) -> f64 {
    match parse_f(text) {
        Some(v) if v > 0.0 => v,
        Some(_) => {
            e.insert(key, "must be above 0".into());
            0.0
        }
        None if text.trim().is_empty() => {
            e.insert(key, "required".into());
            0.0
        }
        None => {
            e.insert(key, "a number".into());
            0.0
        }
    }
}

fn nonneg_f(e: &mut FieldErrors, key: &'static str, text: &str) -> f64 {
    if text.trim().is_empty() {
        return 0.0;
    }
    match parse_f(text) {
        Some(v) if v >= 0.0 => v,
        _ => {
            e.insert(key, "a number, 0 or more".into());
            0.0
        }
    }
}

fn opt_pos_f(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<f64> {
    if text.trim().is_empty() {
        None
    } else {
        Some(pos_f(e, key, text))
    }
}

/// Parses "1, 2, 4" (commas or spaces) into strictly increasing concurrency levels.
pub fn parse_levels(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        let v: u32 = part
            .parse()
            .map_err(|_| format!("`{part}` is not a whole number"))?;
        if v == 0 {
            return Err("concurrency levels start at 1".into());
        }
        if out.last().is_some_and(|&last| v <= last) {
            return Err("list levels in increasing order".into());
        }
        out.push(v);
    }
    if out.is_empty() {
        return Err("give at least one concurrency level".into());
    }
    if out.len() > 64 {
        return Err("at most 64 levels".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scenario_survives_form_round_trip() {
        let s = Scenario::default();
        assert_eq!(Form::from_scenario(&s).to_scenario().unwrap(), s);
    }

    #[test]
    fn custom_gpu_and_pasted_config_survive_form_round_trip() {
        let s = Scenario {
            model: ModelRef::ConfigJson("{\"hidden_size\": 4096}".into()),
            gpu: GpuRef::Custom(RawGpu {
                name: "My GPU".into(),
                memory_visible_mib: 96.0 * 1024.0,
                hbm_bandwidth_tb_s: 4.0,
                bf16_dense_tflops: 800.5,
                fp8_dense_tflops: Some(1600.0),
                fp4_dense_tflops: None,
                scaleup_unidir_gb_s: 450.0,
                scaleup_domain: 8,
                vendor: None,
            }),
            num_gpus: 8,
            engine: RawEngineSettings {
                gpu_memory_utilization: Some(0.85),
                max_num_seqs: Some(128),
                block_size: Some(32),
                enable_prefix_caching: Some(false),
                ..RawEngineSettings::default()
            },
            parallelism: Parallelism {
                tp: 4,
                dp: 2,
                ep: 8,
            },
            kv_cache_dtype: KvCacheDtype::Fp8,
            weight_precision: WeightPrecision::Fp8,
            ..Scenario::default()
        };
        assert_eq!(Form::from_scenario(&s).to_scenario().unwrap(), s);
    }

    #[test]
    fn each_bad_field_gets_its_own_message() {
        let mut f = Form::from_scenario(&Scenario::default());
        f.tp = "0".into();
        f.isl = "abc".into();
        f.gpu_memory_utilization = "1.5".into();
        f.kv_cache_dtype = "int3".into();
        f.levels = "4, 2".into();
        let e = f.to_scenario().unwrap_err();
        assert_eq!(e["tp"], "must be at least 1");
        assert_eq!(e["isl"], "a whole number, 1 or more");
        assert!(e["gpu_memory_utilization"].contains("at most 1"));
        assert!(e["kv_cache_dtype"].contains("fp8_e4m3"));
        assert!(e["levels"].contains("increasing"));
        assert_eq!(e.len(), 5);
    }

    #[test]
    fn gpu_count_must_split_into_replicas() {
        let mut f = Form::from_scenario(&Scenario::default());
        f.gpus = "6".into();
        f.tp = "4".into();
        let e = f.to_scenario().unwrap_err();
        assert!(e["gpus"].contains("TP x DP = 4"), "{}", e["gpus"]);
        f.gpus = "8".into();
        assert_eq!(f.to_scenario().unwrap().num_gpus, 8);
    }

    #[test]
    fn blank_engine_fields_mean_vllm_defaults() {
        let s = Form::from_scenario(&Scenario::default())
            .to_scenario()
            .unwrap();
        assert_eq!(s.engine, RawEngineSettings::default());
        let mut f = Form::from_scenario(&s);
        f.max_num_seqs = "64".into();
        f.block_size = "24".into();
        let e = f.to_scenario().unwrap_err();
        assert!(e["block_size"].contains("powers of two"));
        f.block_size = String::new();
        assert_eq!(f.to_scenario().unwrap().engine.max_num_seqs, Some(64));
    }

    #[test]
    fn nan_and_infinity_are_rejected() {
        let mut f = Form::from_scenario(&Scenario::default());
        f.duration_s = "NaN".into();
        f.sla_itl_p90_ms = "inf".into();
        let e = f.to_scenario().unwrap_err();
        assert!(e.contains_key("duration_s"));
        assert!(e.contains_key("sla_itl_p90_ms"));
    }

    #[test]
    fn presets_set_isl_and_osl() {
        let mut f = Form::from_scenario(&Scenario::default());
        f.apply_preset("reasoning");
        let s = f.to_scenario().unwrap();
        assert_eq!((s.workload.isl, s.workload.osl), (1024, 4096));
        assert_eq!(Form::from_scenario(&s).preset, "reasoning");
        f.apply_preset("custom");
        assert_eq!(f.isl, "1024");
    }

    #[test]
    fn levels_parse_with_commas_or_spaces() {
        assert_eq!(parse_levels("1, 2 4,8").unwrap(), vec![1, 2, 4, 8]);
        assert!(parse_levels("").is_err());
        assert!(parse_levels("0,1").is_err());
        assert!(parse_levels("1,x").unwrap_err().contains("`x`"));
    }
}
