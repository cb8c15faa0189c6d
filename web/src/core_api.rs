//! The page's only door into `servesim_core` (apart from the share-link codec): the scenario type,
//! the catalogs, capacity and one sweep level. Everything the UI shows comes through here, so
//! wiring further core APIs touches only this file.
//!
//! STATUS
//! - Wired to the core: the model catalog (`model::catalog`), pasted `config.json`
//!   (`ModelConfig::from_hf_json`), the GPU catalog and custom GPUs (`gpu`), deployment validation
//!   (`deploy::Deployment::new`, vLLM's defaults) and start-up capacity (`capacity::compute`).
//! - PLACEHOLDER: [`run_level`] (the sweep) is a stand-in until the core's scenario resolver and
//!   step-time model land; the page shows a banner while [`SIM_WIRED`] is false.

use serde::{Deserialize, Serialize};
use servesim_core::capacity::{self, CapacityReport, RequestShape};
use servesim_core::deploy::{DeployError, Deployment, RawEngineSettings};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::gpu::{self, RawGpu};
use servesim_core::metric::{MetricId, Stat};
use servesim_core::model::{catalog, ModelConfig};
use servesim_core::parallel::Parallelism;
use std::collections::BTreeMap;

/// False while the sweep is a placeholder; the page shows a warning banner.
pub const SIM_WIRED: bool = false;

/// Which model: a catalog id, or a pasted Hugging Face `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelRef {
    Catalog(String),
    ConfigJson(String),
}

/// Which GPU: a catalog id (or alias) or a custom spec in the core's raw form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GpuRef {
    Catalog(String),
    Custom(RawGpu),
}

/// Request mix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Input (prompt) tokens per request.
    pub isl: u64,
    /// Output tokens per request.
    pub osl: u64,
    /// Share of each prompt that is a prefix common to all requests (0..1).
    pub prefix_share: f64,
    /// Uploaded trace (Mooncake JSONL), replacing isl/osl when present.
    pub trace: Option<String>,
}

/// Service-level gates for the operating point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sla {
    pub ttft_p90_ms: Option<f64>,
    pub itl_p90_ms: Option<f64>,
    pub min_tokens_per_s_per_user: Option<f64>,
}

/// The whole scenario, as the share link and the worker carry it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub model: ModelRef,
    pub gpu: GpuRef,
    /// GPUs in total; replicas = num_gpus / (tp * dp).
    pub num_gpus: u32,
    pub parallelism: Parallelism,
    pub weight_precision: WeightPrecision,
    pub kv_cache_dtype: KvCacheDtype,
    /// vLLM engine arguments; `None` = vLLM's default for this model and GPU.
    pub engine: RawEngineSettings,
    pub workload: Workload,
    /// Concurrency levels of the sweep.
    pub levels: Vec<u32>,
    /// Simulated seconds per level.
    pub duration_s: f64,
    pub sla: Sla,
    pub seed: u64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            model: ModelRef::Catalog("meta-llama/Meta-Llama-3.1-8B".into()),
            gpu: GpuRef::Catalog("H100-SXM".into()),
            num_gpus: 1,
            parallelism: Parallelism::default(),
            weight_precision: WeightPrecision::Checkpoint,
            kv_cache_dtype: KvCacheDtype::Auto,
            engine: RawEngineSettings::default(),
            workload: Workload {
                isl: 1024,
                osl: 256,
                prefix_share: 0.0,
                trace: None,
            },
            levels: vec![1, 2, 4, 8, 16, 32, 64, 128],
            duration_s: 60.0,
            sla: Sla {
                ttft_p90_ms: Some(2000.0),
                itl_p90_ms: Some(50.0),
                min_tokens_per_s_per_user: None,
            },
            seed: 1,
        }
    }
}

impl Scenario {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("scenario serialises")
    }
    pub fn from_json(s: &str) -> Result<Scenario, String> {
        serde_json::from_str(s).map_err(|e| format!("the scenario is not valid: {e}"))
    }
}

/// One model in the searchable list.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelEntry {
    pub id: String,
}

/// One GPU in the select.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuEntry {
    pub id: String,
    pub label: String,
    /// Memory vLLM sees, GiB.
    pub memory_gib: f64,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

pub fn models() -> Vec<ModelEntry> {
    catalog::ids()
        .into_iter()
        .map(|id| ModelEntry { id: id.into() })
        .collect()
}

pub fn gpus() -> Vec<GpuEntry> {
    gpu::catalog()
        .iter()
        .map(|g| GpuEntry {
            id: g.id.clone(),
            label: g.name.clone(),
            memory_gib: g.memory_visible.0 as f64 / GIB,
        })
        .collect()
}

/// A failure to build the deployment, with the form field it belongs to (when there is one).
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    pub field: Option<&'static str>,
    pub message: String,
}

/// The form key of a core field name.
fn form_key(s: &Scenario, core_field: &str) -> Option<&'static str> {
    Some(match core_field {
        "model" => match s.model {
            ModelRef::Catalog(_) => "model_id",
            ModelRef::ConfigJson(_) => "config_json",
        },
        "gpu" => match s.gpu {
            GpuRef::Catalog(_) => "gpu_id",
            GpuRef::Custom(_) => "custom_gpu_name",
        },
        "num_gpus" => "gpus",
        "tp" => "tp",
        "dp" => "dp",
        "ep" => "ep",
        "weight_precision" => "weight_precision",
        "kv_cache_dtype" => "kv_cache_dtype",
        "gpu_memory_utilization" => "gpu_memory_utilization",
        "max_num_seqs" => "max_num_seqs",
        "max_num_batched_tokens" => "max_num_batched_tokens",
        "block_size" => "block_size",
        "max_model_len" => "max_model_len",
        "memory_visible_mib" => "custom_gpu_memory_gib",
        "hbm_bandwidth_tb_s" => "custom_gpu_bandwidth_tb_s",
        "bf16_dense_tflops" => "custom_gpu_bf16_tflops",
        "fp8_dense_tflops" => "custom_gpu_fp8_tflops",
        "name" => "custom_gpu_name",
        _ => return None,
    })
}

/// Builds the validated deployment the CLI would build (`servesim capacity`).
pub fn deployment(s: &Scenario) -> Result<Deployment, ScenarioError> {
    let model = match &s.model {
        ModelRef::Catalog(id) => catalog::load(id),
        ModelRef::ConfigJson(text) => ModelConfig::from_hf_json("pasted config.json", text),
    }
    .map_err(|e| ScenarioError {
        field: form_key(s, "model"),
        message: e.to_string(),
    })?;
    let gpu = match &s.gpu {
        GpuRef::Catalog(id) => gpu::find_gpu(id),
        GpuRef::Custom(raw) => raw.validate(),
    }
    .map_err(|e| {
        let field = match &e {
            gpu::GpuError::InvalidField { field, .. } => form_key(s, field),
            _ => form_key(s, "gpu"),
        };
        ScenarioError {
            field,
            message: e.to_string(),
        }
    })?;
    Deployment::new(
        model,
        gpu,
        s.parallelism,
        Some(s.num_gpus),
        s.weight_precision,
        s.kv_cache_dtype,
        &s.engine,
    )
    .map_err(|e: DeployError| ScenarioError {
        field: form_key(s, e.field()),
        message: e.to_string(),
    })
}

/// Errors the core finds in a scenario, by form field (empty when it builds).
pub fn check(s: &Scenario) -> crate::form::FieldErrors {
    let mut e = crate::form::FieldErrors::new();
    if let Err(err) = deployment(s) {
        e.insert(err.field.unwrap_or("model_id"), err.message);
    }
    e
}

/// vLLM's resolved defaults for the engine fields the form leaves blank, as text.
pub fn engine_defaults(s: &Scenario) -> BTreeMap<&'static str, String> {
    let mut m = BTreeMap::new();
    if let Ok(d) = deployment(s) {
        let e = &d.engine;
        m.insert(
            "gpu_memory_utilization",
            format!("{}", e.gpu_memory_utilization),
        );
        m.insert("max_num_seqs", e.max_num_seqs.to_string());
        m.insert(
            "max_num_batched_tokens",
            e.max_num_batched_tokens.to_string(),
        );
        m.insert("block_size", e.block_size.to_string());
        m.insert("max_model_len", e.max_model_len.to_string());
    }
    m
}

/// One slice of a GPU's memory, for the breakdown bar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemSlice {
    pub label: String,
    pub bytes: f64,
}

/// What the capacity card shows (from the core's [`CapacityReport`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityView {
    pub fits: bool,
    /// Why it does (not) fit, in one sentence.
    pub reason: String,
    /// vLLM's start-up error when it does not fit.
    pub vllm_error: Option<String>,
    /// (setting, value, effect) changes that make it fit.
    pub fixes: Vec<(String, String, String)>,
    /// Memory vLLM sees on one GPU.
    pub gpu_bytes: f64,
    /// Per-GPU usage, in order; the rest of `gpu_bytes` is headroom.
    pub per_gpu: Vec<MemSlice>,
    /// KV cache tokens per engine (vLLM's `GPU KV cache size: N tokens`).
    pub kv_cache_tokens: u64,
    /// Requests of the workload's ISL+OSL that fit at once per engine (KV and max_num_seqs).
    pub requests_that_fit: Option<u64>,
    pub replicas: u32,
    pub engines: u32,
    pub log_lines: Vec<String>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

fn view_of(r: &CapacityReport) -> CapacityView {
    let b = &r.breakdown;
    let pos = |v: i64| v.max(0) as f64;
    let mut per_gpu = vec![
        MemSlice {
            label: "weights".into(),
            bytes: pos(b.weights.bytes),
        },
        MemSlice {
            label: "activation (profile run)".into(),
            bytes: pos(b.activation.bytes),
        },
        MemSlice {
            label: "non-torch".into(),
            bytes: pos(b.non_torch.bytes),
        },
    ];
    if b.cudagraph_in_budget {
        per_gpu.push(MemSlice {
            label: "CUDA graphs".into(),
            bytes: pos(b.cudagraph.bytes),
        });
    }
    per_gpu.push(MemSlice {
        label: "KV cache".into(),
        bytes: pos(b.kv_pool.bytes),
    });
    CapacityView {
        fits: r.fits,
        reason: r.reason.clone(),
        vllm_error: r.vllm_error.clone(),
        fixes: r
            .fixes
            .iter()
            .map(|f| (f.setting.clone(), f.value.clone(), f.effect.clone()))
            .collect(),
        gpu_bytes: pos(b.visible.bytes),
        per_gpu,
        kv_cache_tokens: r.kv_cache_tokens,
        requests_that_fit: r.requests_fit.map(|f| f.at_once),
        replicas: r.replicas,
        engines: r.engines,
        log_lines: r.log_lines.clone(),
        warnings: r.warnings.clone(),
        notes: r.notes.clone(),
    }
}

/// vLLM's start-up memory sizing for the scenario (`capacity::compute`, as `servesim capacity`).
pub fn capacity(s: &Scenario) -> Result<CapacityView, ScenarioError> {
    let d = deployment(s)?;
    let shape = RequestShape {
        isl: s.workload.isl,
        osl: s.workload.osl,
    };
    capacity::compute(&d, Some(shape))
        .map(|r| view_of(&r))
        .map_err(|e| ScenarioError {
            field: None,
            message: e.to_string(),
        })
}

/// One level's metrics, keyed by [`MetricId::name`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelRow {
    pub concurrency: u32,
    pub values: BTreeMap<String, f64>,
}

impl LevelRow {
    pub fn get(&self, m: MetricId) -> Option<f64> {
        self.values.get(&m.name()).copied()
    }
}

/// The best level that meets every SLA gate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    pub concurrency: u32,
    pub output_tokens_per_s_per_gpu: f64,
    pub tokens_per_s_per_user: f64,
}

/// Runs one level of the sweep. `on_progress(fraction)` is called during the level.
///
/// PLACEHOLDER: a closed-form toy (ITL grows linearly with batch), busy-waiting in proportion to
/// `duration_s` so the worker's progress and cancel paths are exercised. Not a model of anything;
/// to be replaced by the core's sweep runner.
pub fn run_level(
    s: &Scenario,
    index: usize,
    on_progress: &mut dyn FnMut(f64),
) -> Result<LevelRow, String> {
    let c = *s
        .levels
        .get(index)
        .ok_or_else(|| format!("no level {index}"))?;
    let steps = 20;
    let mut acc = 0.0f64;
    for step in 0..steps {
        // Stand-in for simulation work: ~duration_s x 1e4 float ops per step.
        for i in 0..(s.duration_s as u64 * 10_000) {
            acc += libm_free_sqrt(i as f64 + acc.fract());
        }
        on_progress(f64::from(step + 1) / f64::from(steps));
    }
    let cf = f64::from(c);
    let itl_ms = 8.0 * (1.0 + cf / 64.0);
    let ttft_ms = 40.0 * (1.0 + cf / 16.0) + acc * 0.0;
    let osl = s.workload.osl as f64;
    let e2e_s = (ttft_ms + osl * itl_ms) / 1000.0;
    let per_user = osl / e2e_s;
    let gpus = f64::from(s.num_gpus.max(1));
    let mut values = BTreeMap::new();
    let mut put = |m: MetricId, v: f64| {
        values.insert(m.name(), v);
    };
    put(MetricId::OutputTokensPerS, per_user * cf);
    put(MetricId::OutputTokensPerSPerGpu, per_user * cf / gpus);
    put(MetricId::OutputTokensPerSPerUser, per_user);
    put(MetricId::RequestsPerS, cf / e2e_s);
    put(MetricId::TtftMs(Stat::P50), ttft_ms);
    put(MetricId::TtftMs(Stat::P90), ttft_ms * 1.3);
    put(MetricId::ItlMs(Stat::Mean), itl_ms);
    put(MetricId::ItlMs(Stat::P90), itl_ms * 1.2);
    put(MetricId::E2eS(Stat::P50), e2e_s);
    Ok(LevelRow {
        concurrency: c,
        values,
    })
}

fn libm_free_sqrt(x: f64) -> f64 {
    // Placeholder busy work only; the real engine uses libm.
    x * 0.5
}

/// The highest-throughput level meeting every gate.
pub fn operating_point(s: &Scenario, rows: &[LevelRow]) -> Option<OperatingPoint> {
    rows.iter()
        .filter(|r| {
            let ok = |gate: Option<f64>, m: MetricId, upper: bool| match (gate, r.get(m)) {
                (None, _) => true,
                (Some(g), Some(v)) => {
                    if upper {
                        v <= g
                    } else {
                        v >= g
                    }
                }
                (Some(_), None) => false,
            };
            ok(s.sla.ttft_p90_ms, MetricId::TtftMs(Stat::P90), true)
                && ok(s.sla.itl_p90_ms, MetricId::ItlMs(Stat::P90), true)
                && ok(
                    s.sla.min_tokens_per_s_per_user,
                    MetricId::OutputTokensPerSPerUser,
                    false,
                )
        })
        .filter_map(|r| {
            Some(OperatingPoint {
                concurrency: r.concurrency,
                output_tokens_per_s_per_gpu: r.get(MetricId::OutputTokensPerSPerGpu)?,
                tokens_per_s_per_user: r.get(MetricId::OutputTokensPerSPerUser)?,
            })
        })
        .max_by(|a, b| {
            a.output_tokens_per_s_per_gpu
                .total_cmp(&b.output_tokens_per_s_per_gpu)
        })
}

/// The URL fragment (without `#`) that carries a scenario: `s=v1.<...>`.
pub fn fragment_for(s: &Scenario) -> String {
    format!("s={}", servesim_core::share::encode(&s.to_json()))
}

/// The scenario a URL fragment carries: `Ok(None)` when the fragment has no scenario,
/// `Err(message)` when it has a damaged one (the page then shows the message and the default).
pub fn scenario_from_fragment(frag: &str) -> Result<Option<Scenario>, String> {
    let frag = frag.trim_start_matches('#');
    let Some(code) = frag.strip_prefix("s=") else {
        return Ok(None);
    };
    let json = servesim_core::share::decode(code).map_err(|e| e.to_string())?;
    Scenario::from_json(&json).map(Some)
}

/// A one-line summary for the recent-scenarios list.
pub fn scenario_label(s: &Scenario) -> String {
    let model = match &s.model {
        ModelRef::Catalog(id) => id.rsplit('/').next().unwrap_or(id).to_string(),
        ModelRef::ConfigJson(_) => "pasted config".into(),
    };
    let gpu = match &s.gpu {
        GpuRef::Catalog(id) => id.clone(),
        GpuRef::Custom(c) => c.name.clone(),
    };
    let p = s.parallelism;
    format!(
        "{model} · {}× {gpu} · TP{} DP{} · KV {} · {}/{} tok",
        s.num_gpus,
        p.tp,
        p.dp,
        s.kv_cache_dtype.name(),
        s.workload.isl,
        s.workload.osl
    )
}

/// One entry of the recent-scenarios list kept in localStorage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recent {
    pub label: String,
    pub fragment: String,
}

/// Most recent first, no duplicates, at most [`RECENT_MAX`].
pub fn push_recent(list: &mut Vec<Recent>, r: Recent) {
    list.retain(|x| x.fragment != r.fragment);
    list.insert(0, r);
    list.truncate(RECENT_MAX);
}

pub const RECENT_MAX: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragment_round_trip_restores_the_scenario() {
        let s = Scenario {
            num_gpus: 4,
            parallelism: Parallelism {
                tp: 4,
                dp: 1,
                ep: 1,
            },
            kv_cache_dtype: KvCacheDtype::Fp8,
            ..Scenario::default()
        };
        let f = fragment_for(&s);
        assert!(f.starts_with("s=v1."));
        assert_eq!(scenario_from_fragment(&format!("#{f}")).unwrap(), Some(s));
    }

    #[test]
    fn fragment_without_scenario_is_none_and_damaged_one_is_a_message() {
        assert_eq!(scenario_from_fragment(""), Ok(None));
        assert_eq!(scenario_from_fragment("#results"), Ok(None));
        let err = scenario_from_fragment("s=v1.@@@").unwrap_err();
        assert!(err.contains("not base64url"), "{err}");
        // Valid link, but not a scenario: the serde message names the problem.
        let not_scenario = format!("s={}", servesim_core::share::encode("{\"x\":1}"));
        assert!(scenario_from_fragment(&not_scenario)
            .unwrap_err()
            .contains("not valid"));
    }

    #[test]
    fn recent_list_is_deduplicated_newest_first_and_capped() {
        let mut l = Vec::new();
        for i in 0..10 {
            push_recent(
                &mut l,
                Recent {
                    label: format!("{i}"),
                    fragment: format!("f{i}"),
                },
            );
        }
        push_recent(
            &mut l,
            Recent {
                label: "again".into(),
                fragment: "f5".into(),
            },
        );
        assert_eq!(l.len(), RECENT_MAX);
        assert_eq!(l[0].fragment, "f5");
        assert_eq!(l.iter().filter(|r| r.fragment == "f5").count(), 1);
        assert_eq!(l[1].fragment, "f9");
    }

    #[test]
    fn core_errors_land_on_the_field_they_are_about() {
        let bad_model = Scenario {
            model: ModelRef::Catalog("nobody/nothing".into()),
            ..Scenario::default()
        };
        assert!(check(&bad_model)["model_id"].contains("nobody/nothing"));
        let bad_gpu = Scenario {
            gpu: GpuRef::Catalog("Z9000".into()),
            ..Scenario::default()
        };
        assert!(check(&bad_gpu)["gpu_id"].contains("Z9000"));
        // Llama-3.1-8B has 32 attention heads: TP 3 cannot split them.
        let bad_tp = Scenario {
            num_gpus: 3,
            parallelism: Parallelism {
                tp: 3,
                dp: 1,
                ep: 1,
            },
            ..Scenario::default()
        };
        assert!(
            check(&bad_tp)["tp"].contains("divisible"),
            "{:?}",
            check(&bad_tp)
        );
        assert!(check(&Scenario::default()).is_empty());
    }

    #[test]
    fn capacity_card_shows_the_cli_numbers() {
        // The page and `servesim capacity` call the same function with the same deployment.
        let s = Scenario::default();
        let d = deployment(&s).unwrap();
        let r = servesim_core::capacity::compute(
            &d,
            Some(RequestShape {
                isl: 1024,
                osl: 256,
            }),
        )
        .unwrap();
        let v = capacity(&s).unwrap();
        assert!(v.fits);
        assert_eq!(v.kv_cache_tokens, r.kv_cache_tokens);
        assert_eq!(v.requests_that_fit, r.requests_fit.map(|f| f.at_once));
        assert_eq!(v.gpu_bytes, r.breakdown.visible.bytes as f64);
        assert!(v
            .log_lines
            .iter()
            .any(|l| l.starts_with("GPU KV cache size:")));
        // The bar's slices never exceed the GPU.
        let used: f64 = v.per_gpu.iter().map(|m| m.bytes).sum();
        assert!(used <= v.gpu_bytes);
    }

    #[test]
    fn a_model_too_big_for_the_gpu_does_not_fit_and_says_how_to_fix_it() {
        let s = Scenario {
            model: ModelRef::Catalog("meta-llama/Meta-Llama-3.1-405B".into()),
            ..Scenario::default()
        };
        let v = capacity(&s).unwrap();
        assert!(!v.fits);
        assert!(!v.fixes.is_empty());
        assert_eq!(v.kv_cache_tokens, 0);
    }

    #[test]
    fn pasted_config_json_is_parsed_by_the_core() {
        let text = catalog::config_json("Qwen/Qwen3-8B").unwrap();
        let pasted = Scenario {
            model: ModelRef::ConfigJson(text.into()),
            ..Scenario::default()
        };
        let by_id = Scenario {
            model: ModelRef::Catalog("Qwen/Qwen3-8B".into()),
            ..Scenario::default()
        };
        assert_eq!(
            capacity(&pasted).unwrap().kv_cache_tokens,
            capacity(&by_id).unwrap().kv_cache_tokens
        );
        let broken = Scenario {
            model: ModelRef::ConfigJson("{\"hidden_size\": 4096}".into()),
            ..Scenario::default()
        };
        assert!(check(&broken).contains_key("config_json"));
    }

    #[test]
    fn operating_point_is_the_best_level_meeting_every_gate() {
        let s = Scenario::default(); // gates: TTFT p90 <= 2000 ms, ITL p90 <= 50 ms
        let mk = |c: u32, tpg: f64, itl: f64| {
            let mut v = BTreeMap::new();
            v.insert(MetricId::OutputTokensPerSPerGpu.name(), tpg);
            v.insert(MetricId::OutputTokensPerSPerUser.name(), 1000.0 / itl);
            v.insert(MetricId::TtftMs(Stat::P90).name(), 100.0);
            v.insert(MetricId::ItlMs(Stat::P90).name(), itl);
            LevelRow {
                concurrency: c,
                values: v,
            }
        };
        let rows = vec![mk(1, 100.0, 10.0), mk(8, 700.0, 40.0), mk(64, 2000.0, 80.0)];
        let op = operating_point(&s, &rows).unwrap();
        assert_eq!(op.concurrency, 8);
        let strict = Scenario {
            sla: Sla {
                ttft_p90_ms: Some(50.0),
                itl_p90_ms: None,
                min_tokens_per_s_per_user: None,
            },
            ..Scenario::default()
        };
        assert_eq!(operating_point(&strict, &rows), None);
    }
}
