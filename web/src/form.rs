//! The scenario form as the user edits it (text fields), its reading into the core's
//! [`Scenario`], and back. Pure Rust, tested natively.
//!
//! Each field has a stable key; the page uses `f-<key>` as the input's id and shows the field's
//! error message next to it. The form only checks syntax (a number where a number belongs);
//! every rule about values is the core's (`Scenario::resolve`), whose errors are mapped back to
//! these keys by [`crate::form_keys::form_key`].
//!
//! Round trip: `Form::from_scenario(s).to_scenario() == Ok(s)` for every scenario. The few
//! fields the form has no control for (efficiency overrides, `sweep.max_events`, rarely used
//! engine settings, a custom GPU's vendor) are carried over unchanged from the scenario the
//! form was loaded from (`base`); the "Scenario JSON" box edits them.

use crate::core_api::deploy::{CudagraphMode, RawEngineSettings};
use crate::core_api::dtype::{KvCacheDtype, WeightPrecision};
use crate::core_api::gpu::RawGpu;
use crate::core_api::workload::{
    RawAgentic, RawArrival, RawContent, RawLengthDist, RawSharedPrefix, RawWorkloadSpec,
};
use crate::core_api::{CustomModel, GpuRef, ModelRef, Scenario};
use std::collections::BTreeMap;

/// A workload preset: arrival and request content as scenario JSON (`workload` without the
/// seed). Documented in docs/web.md.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Preset {
    pub key: &'static str,
    pub label: &'static str,
    pub json: &'static str,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        key: "agentic-coding",
        label: "Agentic coding (64K in / 400 out)",
        json: r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"preset","name":"agentic-coding"}}"#,
    },
    Preset {
        key: "chat",
        label: "Chat (~1.5K in / ~256 out)",
        json: r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"synthetic","input":{"type":"lognormal","mean":1024,"std":1024,"min":16,"max":16384},"output":{"type":"lognormal","mean":256,"std":256,"min":16,"max":4096},"shared_prefix":{"groups":1,"tokens":512}}}"#,
    },
    Preset {
        key: "summarisation",
        label: "Long-context summarisation (~29K in)",
        json: r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"synthetic","input":{"type":"uniform_ratio","nominal":32768,"min_ratio":0.8,"max_ratio":1.0},"output":{"type":"normal","mean":512,"std":128,"min":64,"max":1024}}}"#,
    },
    Preset {
        key: "random",
        label: "Fixed random (1024 in / 128 out)",
        json: r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"synthetic","input":{"type":"constant","tokens":1024},"output":{"type":"constant","tokens":128}}}"#,
    },
];

/// The preset's workload (seed 0).
pub fn preset_workload(key: &str) -> Option<RawWorkloadSpec> {
    let p = PRESETS.iter().find(|p| p.key == key)?;
    RawWorkloadSpec::from_json(p.json).ok()
}

/// The preset a workload is (same request content, closed loop without think time).
pub fn preset_of(w: &RawWorkloadSpec) -> Option<&'static Preset> {
    let closed = matches!(
        w.arrival,
        RawArrival::ClosedLoop {
            think_time_s: None,
            ..
        }
    );
    if !closed {
        return None;
    }
    PRESETS.iter().find(|p| {
        preset_workload(p.key)
            .map(|pw| pw.requests == w.requests)
            .unwrap_or(false)
    })
}

/// A one-line summary for the recent-scenarios list.
pub fn scenario_label(s: &Scenario) -> String {
    let model = match &s.model {
        ModelRef::Catalog(id) => id.rsplit('/').next().unwrap_or(id).to_string(),
        ModelRef::Custom(c) => c.name.clone(),
    };
    let gpu = match &s.gpu {
        GpuRef::Catalog(id) => id.clone(),
        GpuRef::Custom(c) => c.name.clone(),
    };
    let n = s.num_gpus.unwrap_or(s.tp * s.dp);
    let wl = preset_of(&s.workload)
        .map(|p| p.label.to_string())
        .unwrap_or_else(|| "custom workload".into());
    format!(
        "{model} · {n}× {gpu} · TP{} DP{} EP{} · KV {} · {wl}",
        s.tp,
        s.dp,
        s.ep,
        s.kv_cache_dtype.name(),
    )
}

/// Weight precisions offered: (value, label).
pub const WEIGHT_PRECISIONS: &[(&str, &str)] = &[
    ("checkpoint", "as the checkpoint"),
    ("bf16", "bf16"),
    ("fp8", "fp8 (--quantization fp8)"),
    ("fp4", "fp4 (NVFP4 / MXFP4)"),
];

/// Length distributions offered: (type, label).
pub const DIST_KINDS: &[(&str, &str)] = &[
    ("constant", "constant"),
    ("uniform", "uniform [min, max]"),
    ("uniform_ratio", "uniform ratio × nominal"),
    ("normal", "normal (clamped)"),
    ("lognormal", "lognormal"),
    ("exponential", "exponential"),
    ("empirical", "list of lengths"),
];

/// Arrival processes offered: (type, label).
pub const ARRIVALS: &[(&str, &str)] = &[
    ("closed_loop", "closed loop"),
    ("poisson", "Poisson"),
    ("constant", "constant rate"),
    ("gamma", "gamma (bursty)"),
    ("burst", "burst at t = 0"),
    ("trace", "trace timestamps"),
];

/// Request content kinds offered: (type, label).
pub const CONTENTS: &[(&str, &str)] = &[
    ("preset", "named preset (agentic-coding)"),
    ("synthetic", "independent requests"),
    ("agentic", "multi-turn agentic sessions"),
    ("mooncake", "Mooncake trace (JSONL)"),
];

/// The form keys of one length distribution's fields.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DistKeys {
    pub prefix: &'static str,
    pub kind: &'static str,
    pub mean: &'static str,
    pub std: &'static str,
    pub min: &'static str,
    pub max: &'static str,
    pub min_ratio: &'static str,
    pub max_ratio: &'static str,
    pub values: &'static str,
}

macro_rules! dist_keys {
    ($p:literal) => {
        DistKeys {
            prefix: $p,
            kind: concat!($p, "_kind"),
            mean: concat!($p, "_mean"),
            std: concat!($p, "_std"),
            min: concat!($p, "_min"),
            max: concat!($p, "_max"),
            min_ratio: concat!($p, "_min_ratio"),
            max_ratio: concat!($p, "_max_ratio"),
            values: concat!($p, "_values"),
        }
    };
}

impl DistKeys {
    /// The form key of one of the distribution's fields (`mean`, `std`, ...).
    pub fn key(&self, field: &str) -> &'static str {
        match field {
            "mean" => self.mean,
            "std" => self.std,
            "min" => self.min,
            "max" => self.max,
            "min_ratio" => self.min_ratio,
            "max_ratio" => self.max_ratio,
            "values" => self.values,
            _ => self.kind,
        }
    }
}

/// Input, output (independent requests), new tokens per turn, output per turn (agentic).
pub const DIST_KEYS: [DistKeys; 4] = [
    dist_keys!("in"),
    dist_keys!("out"),
    dist_keys!("turn"),
    dist_keys!("agout"),
];

/// One length distribution as text fields (fields of other kinds are kept while hidden).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DistForm {
    pub kind: String,
    /// `tokens` (constant), `mean` (normal, lognormal, exponential) or `nominal` (uniform ratio).
    pub mean: String,
    pub std: String,
    pub min: String,
    pub max: String,
    pub min_ratio: String,
    pub max_ratio: String,
    pub values: String,
}

impl DistForm {
    pub fn from_raw(d: &RawLengthDist) -> DistForm {
        let f = fmt_f;
        let o = opt_f;
        let mut x = DistForm::default();
        match d {
            RawLengthDist::Constant { tokens } => {
                x.kind = "constant".into();
                x.mean = f(*tokens);
            }
            RawLengthDist::Uniform { min, max } => {
                x.kind = "uniform".into();
                x.min = f(*min);
                x.max = f(*max);
            }
            RawLengthDist::UniformRatio {
                nominal,
                min_ratio,
                max_ratio,
            } => {
                x.kind = "uniform_ratio".into();
                x.mean = f(*nominal);
                x.min_ratio = f(*min_ratio);
                x.max_ratio = f(*max_ratio);
            }
            RawLengthDist::Normal {
                mean,
                std,
                min,
                max,
            } => {
                x.kind = "normal".into();
                x.mean = f(*mean);
                x.std = f(*std);
                x.min = f(*min);
                x.max = f(*max);
            }
            RawLengthDist::Lognormal {
                mean,
                std,
                min,
                max,
            } => {
                x.kind = "lognormal".into();
                x.mean = f(*mean);
                x.std = f(*std);
                x.min = o(*min);
                x.max = o(*max);
            }
            RawLengthDist::Exponential { mean, min, max } => {
                x.kind = "exponential".into();
                x.mean = f(*mean);
                x.min = o(*min);
                x.max = o(*max);
            }
            RawLengthDist::Empirical { values } => {
                x.kind = "empirical".into();
                x.values = values.iter().map(|v| f(*v)).collect::<Vec<_>>().join(", ");
            }
        }
        x
    }

    /// Which fields the kind uses: (key, label) pairs, `?` marking optional ones.
    pub fn fields(kind: &str) -> &'static [(&'static str, &'static str)] {
        match kind {
            "constant" => &[("mean", "tokens")],
            "uniform" => &[("min", "min"), ("max", "max")],
            "uniform_ratio" => &[
                ("mean", "nominal"),
                ("min_ratio", "min ratio"),
                ("max_ratio", "max ratio"),
            ],
            "normal" => &[
                ("mean", "mean"),
                ("std", "std"),
                ("min", "min"),
                ("max", "max"),
            ],
            "lognormal" => &[
                ("mean", "mean"),
                ("std", "std"),
                ("min", "min?"),
                ("max", "max?"),
            ],
            "exponential" => &[("mean", "mean"), ("min", "min?"), ("max", "max?")],
            "empirical" => &[("values", "lengths")],
            _ => &[],
        }
    }

    pub fn get(&self, field: &str) -> &String {
        match field {
            "mean" => &self.mean,
            "std" => &self.std,
            "min" => &self.min,
            "max" => &self.max,
            "min_ratio" => &self.min_ratio,
            "max_ratio" => &self.max_ratio,
            "values" => &self.values,
            _ => &self.kind,
        }
    }

    pub fn set(&mut self, field: &str, v: String) {
        match field {
            "mean" => self.mean = v,
            "std" => self.std = v,
            "min" => self.min = v,
            "max" => self.max = v,
            "min_ratio" => self.min_ratio = v,
            "max_ratio" => self.max_ratio = v,
            "values" => self.values = v,
            _ => self.kind = v,
        }
    }

    fn to_raw(&self, k: &DistKeys, e: &mut FieldErrors) -> RawLengthDist {
        match self.kind.as_str() {
            "constant" => RawLengthDist::Constant {
                tokens: num(e, k.mean, &self.mean),
            },
            "uniform" => RawLengthDist::Uniform {
                min: num(e, k.min, &self.min),
                max: num(e, k.max, &self.max),
            },
            "uniform_ratio" => RawLengthDist::UniformRatio {
                nominal: num(e, k.mean, &self.mean),
                min_ratio: num(e, k.min_ratio, &self.min_ratio),
                max_ratio: num(e, k.max_ratio, &self.max_ratio),
            },
            "normal" => RawLengthDist::Normal {
                mean: num(e, k.mean, &self.mean),
                std: num(e, k.std, &self.std),
                min: num(e, k.min, &self.min),
                max: num(e, k.max, &self.max),
            },
            "lognormal" => RawLengthDist::Lognormal {
                mean: num(e, k.mean, &self.mean),
                std: num(e, k.std, &self.std),
                min: opt_num(e, k.min, &self.min),
                max: opt_num(e, k.max, &self.max),
            },
            "exponential" => RawLengthDist::Exponential {
                mean: num(e, k.mean, &self.mean),
                min: opt_num(e, k.min, &self.min),
                max: opt_num(e, k.max, &self.max),
            },
            "empirical" => RawLengthDist::Empirical {
                values: num_list(e, k.values, &self.values).unwrap_or_default(),
            },
            _ => {
                e.insert(k.kind, "choose a distribution".into());
                RawLengthDist::Constant { tokens: 1.0 }
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    /// The scenario the form was loaded from: source of the fields the form has no control for.
    pub base: Scenario,
    pub model_mode: String, // "catalog" | "custom"
    pub model_id: String,
    pub custom_model_name: String,
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
    /// Blank = one replica (`tp * dp`).
    pub gpus: String,
    pub tp: String,
    pub dp: String,
    pub ep: String,
    /// `enable_expert_parallel`: "" (not stated), "true" or "false" (docs/topology.md "DP + EP").
    pub enable_expert_parallel: String,
    /// `engine.all2all_backend` by vLLM's name ("" = vLLM's default).
    pub all2all_backend: String,
    /// `engine.performance_mode` by vLLM's name ("" = not stated: vLLM's `balanced`).
    pub performance_mode: String,
    pub weight_precision: String,
    pub kv_cache_dtype: String,
    /// The vLLM version served ("" = the newest calibrated release line); selects the
    /// calibration era (docs/accuracy.md).
    pub vllm_version: String,
    /// The engine arguments with a plain value, one `String` each (`form_engine`).
    pub engine: crate::form_engine::EngineArgsForm,
    /// "" = vLLM's default, else vLLM's spelling.
    pub cudagraph_mode: String,
    /// "preset" | "synthetic" | "agentic" | "mooncake".
    pub content: String,
    pub preset_name: String,
    pub input: DistForm,
    pub output: DistForm,
    pub prefix_groups: String,
    pub prefix_tokens: String,
    pub prefix_prompts: String,
    pub ag_system: String,
    pub ag_first: String,
    pub turn: DistForm,
    pub agout: DistForm,
    pub ag_turns: String,
    pub ag_think: String,
    pub trace: String,
    pub trace_block_tokens: String,
    /// "closed_loop" | "poisson" | "constant" | "gamma" | "burst" | "trace".
    pub arrival: String,
    /// concurrency, rate or count of the arrival (blank only for `trace`).
    pub arrival_value: String,
    pub think_time_s: String,
    pub arrival_cv: String,
    pub seed: String,
    /// Blank = the default levels (concurrency 1..512, or the arrival's own rate).
    pub levels: String,
    /// "duration" | "requests".
    pub stop: String,
    pub duration_s: String,
    pub num_requests: String,
    pub warmup_s: String,
    /// SLA gates as `servesim sweep --sla` writes them: `metric>=value, ...`.
    pub sla: String,
    /// Disaggregated prefill/decode pools and the KV transfer (`form_pd`).
    pub pd: crate::form_pd::PdForm,
    /// The CPU KV offload tier of the engine (`form_offload`).
    pub offload: crate::form_offload::OffloadForm,
    /// Speculative decoding: `--speculative-config` and the acceptance (`form_spec`).
    pub spec: crate::form_spec::SpecForm,
}

/// Field key -> message, for every invalid field.
pub type FieldErrors = BTreeMap<&'static str, String>;

/// Shortest text that parses back to the same value (Rust's `Display` for f64).
pub fn fmt_f(v: f64) -> String {
    format!("{v}")
}

fn opt_f(v: Option<f64>) -> String {
    v.map(fmt_f).unwrap_or_default()
}

fn opt_b(v: Option<bool>) -> String {
    v.map(|b| b.to_string()).unwrap_or_default()
}

fn list(v: &[f64]) -> String {
    v.iter().map(|x| fmt_f(*x)).collect::<Vec<_>>().join(", ")
}

/// SLA gates as text and back: the core's reader of `servesim sweep --sla` (one syntax, one
/// set of messages).
pub use crate::core_api::sweep::{parse_sla, sla_text};

impl Form {
    pub fn from_scenario(s: &Scenario) -> Form {
        let (model_mode, model_id, custom_model_name, config_json) = match &s.model {
            ModelRef::Catalog(id) => ("catalog", id.clone(), String::new(), String::new()),
            ModelRef::Custom(c) => (
                "custom",
                String::new(),
                c.name.clone(),
                c.config_json.clone(),
            ),
        };
        let (gpu_mode, gpu_id, custom) = match &s.gpu {
            GpuRef::Catalog(id) => ("catalog", id.clone(), None),
            GpuRef::Custom(c) => ("custom", "H100-SXM".to_string(), Some(c.clone())),
        };
        let cg = |f: fn(&RawGpu) -> String, dflt: &str| {
            custom.as_ref().map(f).unwrap_or_else(|| dflt.to_string())
        };
        let en = &s.engine;
        let mut f = Form {
            base: s.clone(),
            pd: crate::form_pd::PdForm::of(s.topology.as_ref()),
            offload: crate::form_offload::OffloadForm::of(s.engine.kv_transfer_config.as_ref()),
            spec: crate::form_spec::SpecForm::of(
                s.engine.speculative_config.as_ref(),
                s.engine.speculative_acceptance.as_ref(),
            ),
            model_mode: model_mode.into(),
            model_id,
            custom_model_name,
            config_json,
            gpu_mode: gpu_mode.into(),
            gpu_id,
            custom_gpu_name: cg(|c| c.name.clone(), ""),
            custom_gpu_memory_gib: cg(|c| fmt_f(c.memory_visible_mib / 1024.0), ""),
            custom_gpu_bandwidth_tb_s: cg(|c| fmt_f(c.hbm_bandwidth_tb_s), ""),
            custom_gpu_bf16_tflops: cg(|c| fmt_f(c.bf16_dense_tflops), ""),
            custom_gpu_fp8_tflops: cg(|c| opt_f(c.fp8_dense_tflops), ""),
            custom_gpu_fp4_tflops: cg(|c| opt_f(c.fp4_dense_tflops), ""),
            custom_gpu_link_gb_s: cg(|c| fmt_f(c.scaleup_unidir_gb_s), "450"),
            custom_gpu_domain: cg(|c| c.scaleup_domain.to_string(), "8"),
            gpus: s.num_gpus.map(|n| n.to_string()).unwrap_or_default(),
            tp: s.tp.to_string(),
            dp: s.dp.to_string(),
            ep: s.ep.to_string(),
            enable_expert_parallel: opt_b(s.enable_expert_parallel),
            all2all_backend: en
                .all2all_backend
                .map(|b| b.name().to_string())
                .unwrap_or_default(),
            performance_mode: en
                .performance_mode
                .map(|m| m.name().to_string())
                .unwrap_or_default(),
            weight_precision: s.weight_precision.name().into(),
            kv_cache_dtype: s.kv_cache_dtype.name().into(),
            vllm_version: s.vllm_version.clone().unwrap_or_default(),
            engine: crate::form_engine::EngineArgsForm::of(en),
            cudagraph_mode: en
                .cudagraph_mode
                .map(|m| m.name().to_string())
                .unwrap_or_default(),
            content: String::new(),
            preset_name: "agentic-coding".into(),
            input: DistForm::from_raw(&RawLengthDist::Constant { tokens: 1024.0 }),
            output: DistForm::from_raw(&RawLengthDist::Constant { tokens: 128.0 }),
            prefix_groups: String::new(),
            prefix_tokens: String::new(),
            prefix_prompts: String::new(),
            ag_system: String::new(),
            ag_first: String::new(),
            turn: DistForm::from_raw(&RawLengthDist::Constant { tokens: 5600.0 }),
            agout: DistForm::from_raw(&RawLengthDist::Constant { tokens: 400.0 }),
            ag_turns: String::new(),
            ag_think: String::new(),
            trace: String::new(),
            trace_block_tokens: String::new(),
            arrival: String::new(),
            arrival_value: String::new(),
            think_time_s: String::new(),
            arrival_cv: String::new(),
            seed: s.workload.seed.to_string(),
            levels: list(
                s.sweep
                    .concurrency
                    .as_deref()
                    .or(s.sweep.request_rates.as_deref())
                    .unwrap_or(&[]),
            ),
            stop: if s.sweep.num_requests.is_some() {
                "requests"
            } else {
                "duration"
            }
            .into(),
            duration_s: opt_f(s.sweep.duration_s),
            num_requests: opt_f(s.sweep.num_requests),
            warmup_s: opt_f(s.sweep.warmup_s),
            sla: sla_text(&s.sweep.sla),
        };
        f.set_workload(&s.workload);
        f
    }

    /// Sets the arrival and request fields (not the seed) from a workload.
    pub fn set_workload(&mut self, w: &RawWorkloadSpec) {
        let (kind, value, think) = match &w.arrival {
            RawArrival::ClosedLoop {
                concurrency,
                think_time_s,
            } => ("closed_loop", fmt_f(*concurrency), opt_f(*think_time_s)),
            RawArrival::Poisson { rate } => ("poisson", fmt_f(*rate), String::new()),
            RawArrival::Constant { rate } => ("constant", fmt_f(*rate), String::new()),
            RawArrival::Gamma { rate, cv } => {
                self.arrival_cv = fmt_f(*cv);
                ("gamma", fmt_f(*rate), String::new())
            }
            RawArrival::Burst { count } => ("burst", fmt_f(*count), String::new()),
            RawArrival::Trace { rate } => ("trace", opt_f(*rate), String::new()),
        };
        self.arrival = kind.into();
        self.arrival_value = value;
        self.think_time_s = think;
        match &w.requests {
            RawContent::Preset { name } => {
                self.content = "preset".into();
                self.preset_name = name.clone();
            }
            RawContent::Synthetic {
                input,
                output,
                shared_prefix,
            } => {
                self.content = "synthetic".into();
                self.input = DistForm::from_raw(input);
                self.output = DistForm::from_raw(output);
                self.prefix_groups = shared_prefix
                    .as_ref()
                    .map(|p| fmt_f(p.groups))
                    .unwrap_or_default();
                self.prefix_tokens = shared_prefix
                    .as_ref()
                    .map(|p| fmt_f(p.tokens))
                    .unwrap_or_default();
                self.prefix_prompts = shared_prefix
                    .as_ref()
                    .and_then(|p| p.prompts_per_group)
                    .map(fmt_f)
                    .unwrap_or_default();
            }
            RawContent::Agentic(a) => {
                self.content = "agentic".into();
                self.set_agentic(a);
            }
            RawContent::Mooncake {
                jsonl,
                block_tokens,
            } => {
                self.content = "mooncake".into();
                self.trace = jsonl.clone();
                self.trace_block_tokens = opt_f(*block_tokens);
            }
        }
    }

    fn set_agentic(&mut self, a: &RawAgentic) {
        self.ag_system = fmt_f(a.system_prompt_tokens);
        self.ag_first = fmt_f(a.first_turn_tokens);
        self.turn = DistForm::from_raw(&a.tokens_per_turn);
        self.agout = DistForm::from_raw(&a.output_tokens);
        self.ag_turns = fmt_f(a.turns);
        self.ag_think = opt_f(a.think_time_s);
    }

    /// Applies a workload preset (arrival and requests; the seed and the sweep stay).
    pub fn apply_preset(&mut self, key: &str) {
        if let Some(w) = preset_workload(key) {
            self.set_workload(&w);
        }
    }

    /// Turns the named preset into editable agentic-session fields (same sessions).
    pub fn expand_preset(&mut self) {
        if let Ok(RawContent::Agentic(a)) =
            crate::core_api::workload::preset(self.preset_name.trim())
        {
            self.content = "agentic".into();
            self.set_agentic(&a);
        }
    }

    /// The preset the current workload is, if any (for the preset menu).
    pub fn preset_key(&self) -> &'static str {
        let mut e = FieldErrors::new();
        let w = self.workload(&mut e);
        if !e.is_empty() {
            return "custom";
        }
        preset_of(&w).map(|p| p.key).unwrap_or("custom")
    }

    fn workload(&self, e: &mut FieldErrors) -> RawWorkloadSpec {
        let av = |e: &mut FieldErrors| num(e, "arrival_value", &self.arrival_value);
        let arrival = match self.arrival.as_str() {
            "closed_loop" => RawArrival::ClosedLoop {
                concurrency: av(e),
                think_time_s: opt_num(e, "think_time_s", &self.think_time_s),
            },
            "poisson" => RawArrival::Poisson { rate: av(e) },
            "constant" => RawArrival::Constant { rate: av(e) },
            "gamma" => RawArrival::Gamma {
                rate: av(e),
                cv: num(e, "arrival_cv", &self.arrival_cv),
            },
            "burst" => RawArrival::Burst { count: av(e) },
            "trace" => RawArrival::Trace {
                rate: opt_num(e, "arrival_value", &self.arrival_value),
            },
            _ => {
                e.insert("arrival", "choose an arrival process".into());
                RawArrival::Burst { count: 1.0 }
            }
        };
        let [kin, kout, kturn, kagout] = DIST_KEYS;
        let requests = match self.content.as_str() {
            "preset" => RawContent::Preset {
                name: self.preset_name.trim().to_string(),
            },
            "synthetic" => {
                let g = opt_num(e, "prefix_groups", &self.prefix_groups);
                let t = opt_num(e, "prefix_tokens", &self.prefix_tokens);
                let prompts_per_group = opt_num(e, "prefix_prompts", &self.prefix_prompts);
                let shared_prefix = match (g.or(prompts_per_group), t) {
                    (None, None) => None,
                    (_, Some(tokens)) => Some(RawSharedPrefix {
                        groups: g.unwrap_or(1.0),
                        tokens,
                        prompts_per_group,
                    }),
                    (Some(_), None) => {
                        e.insert("prefix_tokens", "give the prefix length".into());
                        None
                    }
                };
                RawContent::Synthetic {
                    input: self.input.to_raw(&kin, e),
                    output: self.output.to_raw(&kout, e),
                    shared_prefix,
                }
            }
            "agentic" => RawContent::Agentic(RawAgentic {
                system_prompt_tokens: opt_num(e, "ag_system", &self.ag_system).unwrap_or(0.0),
                first_turn_tokens: num(e, "ag_first", &self.ag_first),
                tokens_per_turn: self.turn.to_raw(&kturn, e),
                output_tokens: self.agout.to_raw(&kagout, e),
                turns: num(e, "ag_turns", &self.ag_turns),
                think_time_s: opt_num(e, "ag_think", &self.ag_think),
            }),
            "mooncake" => {
                if self.trace.trim().is_empty() {
                    e.insert("trace", "load a Mooncake JSONL trace".into());
                }
                RawContent::Mooncake {
                    jsonl: self.trace.clone(),
                    block_tokens: opt_num(e, "trace_block_tokens", &self.trace_block_tokens),
                }
            }
            _ => {
                e.insert("content", "choose what requests contain".into());
                RawContent::Preset {
                    name: String::new(),
                }
            }
        };
        let seed = match self.seed.trim().parse::<u64>() {
            Ok(v) => v,
            Err(_) => {
                e.insert("seed", "a whole number, 0 or more".into());
                0
            }
        };
        RawWorkloadSpec {
            arrival,
            requests,
            seed,
        }
    }

    /// Whether the sweep levels are concurrencies (closed loop, burst) or request rates.
    pub fn levels_are_concurrency(&self) -> bool {
        matches!(self.arrival.as_str(), "closed_loop" | "burst")
    }

    /// Reads every field; on success the scenario, otherwise one message per bad field.
    pub fn to_scenario(&self) -> Result<Scenario, FieldErrors> {
        let mut e = FieldErrors::new();
        let model = if self.model_mode == "custom" {
            if self.config_json.trim().is_empty() {
                e.insert("config_json", "paste a Hugging Face config.json".into());
            } else if serde_json::from_str::<serde_json::Value>(&self.config_json).is_err() {
                e.insert("config_json", "this is not valid JSON".into());
            }
            if self.custom_model_name.trim().is_empty() {
                e.insert("custom_model_name", "give the model a name".into());
            }
            ModelRef::Custom(CustomModel {
                name: self.custom_model_name.clone(),
                config_json: self.config_json.clone(),
            })
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
            let vendor = match &self.base.gpu {
                GpuRef::Custom(c) => c.vendor,
                GpuRef::Catalog(_) => None,
            };
            GpuRef::Custom(RawGpu {
                name: name.into(),
                memory_visible_mib: num(
                    &mut e,
                    "custom_gpu_memory_gib",
                    &self.custom_gpu_memory_gib,
                ) * 1024.0,
                hbm_bandwidth_tb_s: num(
                    &mut e,
                    "custom_gpu_bandwidth_tb_s",
                    &self.custom_gpu_bandwidth_tb_s,
                ),
                bf16_dense_tflops: num(
                    &mut e,
                    "custom_gpu_bf16_tflops",
                    &self.custom_gpu_bf16_tflops,
                ),
                fp8_dense_tflops: opt_num(
                    &mut e,
                    "custom_gpu_fp8_tflops",
                    &self.custom_gpu_fp8_tflops,
                ),
                fp4_dense_tflops: opt_num(
                    &mut e,
                    "custom_gpu_fp4_tflops",
                    &self.custom_gpu_fp4_tflops,
                ),
                scaleup_unidir_gb_s: num(
                    &mut e,
                    "custom_gpu_link_gb_s",
                    &self.custom_gpu_link_gb_s,
                ),
                scaleup_domain: pos_u(
                    &mut e,
                    "custom_gpu_domain",
                    &self.custom_gpu_domain,
                    1 << 20,
                ) as u32,
                vendor,
            })
        } else {
            if self.gpu_id.trim().is_empty() {
                e.insert("gpu_id", "choose a GPU".into());
            }
            GpuRef::Catalog(self.gpu_id.trim().into())
        };
        let num_gpus = if self.gpus.trim().is_empty() {
            None
        } else {
            Some(pos_u(&mut e, "gpus", &self.gpus, 1 << 20) as u32)
        };
        let tp = pos_u(&mut e, "tp", &self.tp, 4096) as u32;
        let dp = pos_u(&mut e, "dp", &self.dp, 4096) as u32;
        let ep = pos_u(&mut e, "ep", &self.ep, 1 << 16) as u32;
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
        let vllm_version = match self.vllm_version.trim() {
            "" => None,
            v => match crate::core_api::perf::VllmVersion::parse(v) {
                Ok(_) => Some(v.to_string()),
                Err(m) => {
                    e.insert(
                        "vllm_version",
                        format!("{m}; write MAJOR.MINOR[.PATCH], e.g. 0.15.1, or leave blank"),
                    );
                    None
                }
            },
        };
        let cudagraph_mode = if self.cudagraph_mode.trim().is_empty() {
            None
        } else {
            let m = CudagraphMode::parse(&self.cudagraph_mode);
            if m.is_none() {
                e.insert("cudagraph_mode", "choose a CUDA graph mode".into());
            }
            m
        };
        let (speculative_config, speculative_acceptance) = self.spec.apply(
            (
                self.base.engine.speculative_config.clone(),
                self.base.engine.speculative_acceptance.clone(),
            ),
            &mut e,
        );
        let mut engine = RawEngineSettings {
            speculative_config,
            speculative_acceptance,
            cudagraph_mode,
            all2all_backend: named(
                &mut e,
                "all2all_backend",
                &self.all2all_backend,
                crate::core_api::deploy::All2AllBackend::parse,
                "use allgather_reducescatter, deepep_high_throughput, deepep_low_latency or naive",
            ),
            performance_mode: named(
                &mut e,
                "performance_mode",
                &self.performance_mode,
                crate::core_api::deploy::PerformanceMode::parse,
                "use balanced, interactivity or throughput",
            ),
            kv_transfer_config: self
                .offload
                .apply(self.base.engine.kv_transfer_config.clone(), &mut e),
            ..self.base.engine.clone()
        };
        self.engine.write(&mut engine, &mut e);
        let workload = self.workload(&mut e);
        let levels = if self.levels.trim().is_empty() {
            None
        } else {
            num_list(&mut e, "levels", &self.levels)
        };
        let (concurrency, request_rates) = if self.levels_are_concurrency() {
            (levels, None)
        } else {
            (None, levels)
        };
        let (duration_s, num_requests) = if self.stop == "requests" {
            (None, Some(num(&mut e, "num_requests", &self.num_requests)))
        } else {
            (opt_num(&mut e, "duration_s", &self.duration_s), None)
        };
        let warmup_s = if self.stop == "requests" {
            None
        } else {
            opt_num(&mut e, "warmup_s", &self.warmup_s)
        };
        let sla = parse_sla(&self.sla).unwrap_or_else(|m| {
            e.insert("sla", m);
            Vec::new()
        });
        let sweep = crate::core_api::sweep::RawSweepSpec {
            concurrency,
            request_rates,
            duration_s,
            num_requests,
            warmup_s,
            sla,
            ..self.base.sweep.clone()
        };
        let topology = self.pd.apply(self.base.topology.clone(), &mut e);
        if !e.is_empty() {
            return Err(e);
        }
        Ok(Scenario {
            version: crate::core_api::scenario::SCENARIO_VERSION,
            model,
            gpu,
            tp,
            dp,
            ep,
            enable_expert_parallel: opt_bool(&self.enable_expert_parallel),
            num_gpus,
            weight_precision,
            kv_cache_dtype,
            engine,
            workload,
            sweep,
            efficiencies: self.base.efficiencies,
            endpoint: self.base.endpoint,
            vllm_version,
            topology,
        })
    }
}

/// A select's value read by `parse` (vLLM's name): blank is `None` (vLLM's default), a name
/// `parse` does not know is an error on `key` saying which names to use.
fn named<T>(
    e: &mut FieldErrors,
    key: &'static str,
    text: &str,
    parse: impl Fn(&str) -> Option<T>,
    fix: &str,
) -> Option<T> {
    match text.trim() {
        "" => None,
        name => {
            let v = parse(name);
            if v.is_none() {
                e.insert(key, fix.into());
            }
            v
        }
    }
}

fn opt_bool(s: &str) -> Option<bool> {
    match s.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
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

fn parse_f(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// A required number (syntax only; the core checks its range).
fn num(e: &mut FieldErrors, key: &'static str, text: &str) -> f64 {
    match parse_f(text) {
        Some(v) => v,
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

fn opt_num(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<f64> {
    if text.trim().is_empty() {
        None
    } else {
        Some(num(e, key, text))
    }
}

/// "1, 2 4" (commas or spaces) into numbers.
fn num_list(e: &mut FieldErrors, key: &'static str, text: &str) -> Option<Vec<f64>> {
    let mut out = Vec::new();
    for part in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        match parse_f(part) {
            Some(v) => out.push(v),
            None => {
                e.insert(key, format!("`{part}` is not a number"));
                return None;
            }
        }
    }
    if out.is_empty() {
        e.insert(key, "give at least one value".into());
        return None;
    }
    if out.len() > 64 {
        e.insert(key, "at most 64 values".into());
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::gpu::Vendor;
    use crate::core_api::sweep::GateOp;

    fn round_trip(s: &Scenario) {
        let f = Form::from_scenario(s);
        let back = f.to_scenario().unwrap();
        assert_eq!(&back, s);
        // A form re-made from the result (without the base) gives the same scenario too:
        // every field the form shows is read from the form, not the base.
        let mut f2 = Form::from_scenario(&back);
        f2.base = Scenario::default_scenario();
        f2.base.efficiencies = s.efficiencies;
        f2.base.engine = s.engine.clone();
        f2.base.sweep.max_events = s.sweep.max_events;
        f2.base.gpu = s.gpu.clone();
        assert_eq!(f2.to_scenario().unwrap().to_json(), s.to_json());
    }

    #[test]
    fn default_scenario_survives_form_round_trip() {
        round_trip(&Scenario::default_scenario());
    }

    #[test]
    fn every_preset_survives_form_round_trip_and_is_recognised() {
        for p in PRESETS {
            let mut s = Scenario::default_scenario();
            s.workload = RawWorkloadSpec {
                seed: 7,
                ..preset_workload(p.key).unwrap()
            };
            round_trip(&s);
            assert_eq!(Form::from_scenario(&s).preset_key(), p.key);
            assert!(s.resolve().is_ok(), "preset {} resolves", p.key);
        }
        // The agentic preset is the core's named preset.
        assert_eq!(
            preset_workload("agentic-coding").unwrap().requests,
            RawContent::Preset {
                name: "agentic-coding".into()
            }
        );
    }

    #[test]
    fn every_distribution_arrival_and_content_kind_survives_form_round_trip() {
        let dists = [
            RawLengthDist::Constant { tokens: 300.0 },
            RawLengthDist::Uniform {
                min: 10.0,
                max: 20.0,
            },
            RawLengthDist::UniformRatio {
                nominal: 1000.0,
                min_ratio: 0.8,
                max_ratio: 1.0,
            },
            RawLengthDist::Normal {
                mean: 512.5,
                std: 0.1 + 0.2,
                min: 2.0,
                max: 7000.0,
            },
            RawLengthDist::Lognormal {
                mean: 400.0,
                std: 300.0,
                min: None,
                max: Some(9000.0),
            },
            RawLengthDist::Exponential {
                mean: 200.0,
                min: Some(3.0),
                max: None,
            },
            RawLengthDist::Empirical {
                values: vec![5.0, 50.0, 500.0],
            },
        ];
        let arrivals = [
            RawArrival::ClosedLoop {
                concurrency: 4.0,
                think_time_s: Some(1.5),
            },
            RawArrival::Poisson { rate: 2.5 },
            RawArrival::Constant { rate: 3.0 },
            RawArrival::Gamma { rate: 1.0, cv: 2.0 },
            RawArrival::Burst { count: 100.0 },
            RawArrival::Trace { rate: None },
            RawArrival::Trace { rate: Some(0.5) },
        ];
        for (i, d) in dists.iter().enumerate() {
            let mut s = Scenario::default_scenario();
            s.workload.arrival = arrivals[i % arrivals.len()].clone();
            if !matches!(
                s.workload.arrival,
                RawArrival::ClosedLoop { .. } | RawArrival::Burst { .. }
            ) {
                s.sweep.concurrency = None;
                s.sweep.request_rates = Some(vec![0.5, 1.0]);
            }
            s.workload.requests = RawContent::Synthetic {
                input: d.clone(),
                output: dists[(i + 3) % dists.len()].clone(),
                shared_prefix: (i % 2 == 0).then_some(RawSharedPrefix {
                    groups: 3.0,
                    tokens: 256.0,
                    prompts_per_group: (i % 4 == 0).then_some(10.0),
                }),
            };
            round_trip(&s);
            s.workload.requests = RawContent::Agentic(RawAgentic {
                system_prompt_tokens: 100.0,
                first_turn_tokens: 2000.0,
                tokens_per_turn: d.clone(),
                output_tokens: dists[(i + 1) % dists.len()].clone(),
                turns: 5.0,
                think_time_s: (i % 2 == 1).then_some(2.0),
            });
            round_trip(&s);
        }
        let mut s = Scenario::default_scenario();
        s.workload.requests = RawContent::Mooncake {
            jsonl: "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [1]}\n".into(),
            block_tokens: Some(512.0),
        };
        round_trip(&s);
    }

    #[test]
    fn custom_gpu_custom_model_engine_and_sweep_fields_survive_form_round_trip() {
        let s = Scenario {
            model: ModelRef::Custom(CustomModel {
                name: "my-model".into(),
                config_json: "{\"hidden_size\": 4096}".into(),
            }),
            gpu: GpuRef::Custom(RawGpu {
                name: "My GPU".into(),
                memory_visible_mib: 96.0 * 1024.0 + 0.5,
                hbm_bandwidth_tb_s: 4.0,
                bf16_dense_tflops: 800.5,
                fp8_dense_tflops: Some(1600.0),
                fp4_dense_tflops: None,
                scaleup_unidir_gb_s: 450.0,
                scaleup_domain: 8,
                vendor: Some(Vendor::Amd),
            }),
            num_gpus: Some(16),
            tp: 4,
            dp: 2,
            ep: 8,
            enable_expert_parallel: Some(true),
            engine: RawEngineSettings {
                all2all_backend: Some(crate::core_api::deploy::All2AllBackend::DeepepLowLatency),
                performance_mode: Some(crate::core_api::deploy::PerformanceMode::Throughput),
                gpu_memory_utilization: Some(0.85),
                max_num_seqs: Some(128),
                block_size: Some(32),
                enable_prefix_caching: Some(false),
                enforce_eager: Some(true),
                cudagraph_mode: Some(CudagraphMode::FullDecodeOnly),
                long_prefill_token_threshold: Some(2048),
                kv_cache_memory_bytes: Some(1 << 34),
                allow_long_max_model_len: Some(true),
                ..RawEngineSettings::default()
            },
            kv_cache_dtype: KvCacheDtype::Fp8,
            weight_precision: WeightPrecision::Fp8,
            ..Scenario::default_scenario()
        };
        round_trip(&s);
        let mut s2 = s.clone();
        s2.sweep.duration_s = None;
        s2.sweep.warmup_s = None;
        s2.sweep.num_requests = Some(500.0);
        s2.sweep.concurrency = None;
        s2.sweep.max_events = Some(1e6);
        s2.sweep.sla = parse_sla("ttft_ms_p50<5000, itl_ms_p90<=40.5, interactivity>20").unwrap();
        s2.efficiencies = Some(serde_json::from_str(r#"{"gemm_bf16": 0.5}"#).unwrap());
        round_trip(&s2);
    }

    #[test]
    fn syntax_errors_get_their_own_message_per_field() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.tp = "0".into();
        f.input.mean = "abc".into();
        f.engine.gpu_memory_utilization = "lots".into();
        f.kv_cache_dtype = "int3".into();
        f.levels = "4, x".into();
        f.sla = "ttft>5".into();
        let e = f.to_scenario().unwrap_err();
        assert_eq!(e["tp"], "must be at least 1");
        assert_eq!(e["in_mean"], "a number");
        assert_eq!(e["gpu_memory_utilization"], "a number");
        assert!(e["kv_cache_dtype"].contains("fp8_ds_mla"));
        assert!(e["levels"].contains("`x`"));
        assert!(e["sla"].contains("unknown metric `ttft`"));
        assert_eq!(e.len(), 6);
    }

    #[test]
    fn named_selects_read_vllm_names_and_refuse_others_on_their_field() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.performance_mode = "Throughput".into();
        f.all2all_backend = "naive".into();
        let sc = f.to_scenario().unwrap();
        assert_eq!(
            sc.engine.performance_mode,
            Some(crate::core_api::deploy::PerformanceMode::Throughput)
        );
        assert_eq!(Form::from_scenario(&sc).performance_mode, "throughput");
        f.performance_mode = "fast".into();
        f.all2all_backend = "deepep".into();
        let e = f.to_scenario().unwrap_err();
        assert_eq!(
            e["performance_mode"],
            "use balanced, interactivity or throughput"
        );
        assert!(e["all2all_backend"].contains("deepep_low_latency"));
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn vllm_version_round_trips_and_bad_versions_name_the_field() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        assert_eq!(f.vllm_version, "");
        assert_eq!(f.to_scenario().unwrap().vllm_version, None);
        f.vllm_version = "0.11.0".into();
        let sc = f.to_scenario().unwrap();
        assert_eq!(sc.vllm_version.as_deref(), Some("0.11.0"));
        assert_eq!(Form::from_scenario(&sc).vllm_version, "0.11.0");
        f.vllm_version = "eleven".into();
        let e = f.to_scenario().unwrap_err();
        assert!(
            e["vllm_version"].contains("0.15.1"),
            "{}",
            e["vllm_version"]
        );
    }

    #[test]
    fn blank_fields_mean_defaults() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.levels.clear();
        f.duration_s.clear();
        f.warmup_s.clear();
        f.gpus.clear();
        let s = f.to_scenario().unwrap();
        assert_eq!(s.engine, RawEngineSettings::default());
        assert_eq!(s.sweep.concurrency, None);
        assert_eq!(s.sweep.duration_s, None);
        assert_eq!(s.num_gpus, None);
        f.engine.max_num_seqs = "64".into();
        assert_eq!(f.to_scenario().unwrap().engine.max_num_seqs, Some(64));
    }

    #[test]
    fn nan_and_infinity_are_rejected() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.duration_s = "NaN".into();
        f.output.mean = "inf".into();
        let e = f.to_scenario().unwrap_err();
        assert!(e.contains_key("duration_s"));
        assert!(e.contains_key("out_mean"));
    }

    #[test]
    fn presets_replace_the_workload_but_keep_seed_and_sweep() {
        let mut f = Form::from_scenario(&Scenario::default_scenario());
        f.seed = "9".into();
        f.apply_preset("agentic-coding");
        let s = f.to_scenario().unwrap();
        assert_eq!(
            s.workload.requests,
            RawContent::Preset {
                name: "agentic-coding".into()
            }
        );
        assert_eq!(s.workload.seed, 9);
        assert_eq!(
            s.sweep.concurrency,
            Scenario::default_scenario().sweep.concurrency
        );
        // Expanding the preset gives the same sessions as editable fields.
        f.expand_preset();
        let expanded = f.to_scenario().unwrap();
        assert_eq!(
            expanded.workload.requests,
            crate::core_api::workload::preset("agentic-coding").unwrap()
        );
        assert_eq!(f.preset_key(), "custom");
        f.apply_preset("random");
        assert_eq!(f.preset_key(), "random");
        f.input.mean = "2048".into();
        assert_eq!(f.preset_key(), "custom");
    }

    #[test]
    fn sla_text_round_trips_and_matches_the_cli_syntax() {
        let g = parse_sla("e2e_tokens_per_s_per_user>=50, ttft_ms_p50 < 5000").unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].op, GateOp::Ge);
        assert_eq!(g[1].op, GateOp::Lt);
        assert_eq!(g[1].value, 5000.0);
        assert_eq!(
            sla_text(&g),
            "e2e_tokens_per_s_per_user>=50, ttft_ms_p50<5000"
        );
        assert!(parse_sla("").unwrap().is_empty());
        assert!(parse_sla("ttft_ms_p50 = 3").is_err());
        assert!(parse_sla("ttft_ms_p50 < abc").is_err());
    }
}
