//! The page's only door into `servesim_core` (apart from the share-link codec): the scenario type,
//! the catalogs, capacity and one sweep level. Everything the UI shows comes through here, so
//! wiring the core's model/capacity/engine APIs touches only this file.
//!
//! STATUS: the core's model catalog, capacity and engine are not merged yet. Until they are, the
//! functions marked `PLACEHOLDER` return stand-in values so the page, the worker protocol and the
//! browser tests can be built and exercised; the page shows a banner saying so
//! ([`CORE_WIRED`] is false). They are to be replaced, not shipped as results.

use serde::{Deserialize, Serialize};
use servesim_core::dtype::{KvCacheDtype, WeightPrecision};
use servesim_core::metric::{MetricId, Stat};
use servesim_core::parallel::Parallelism;
use std::collections::BTreeMap;

/// False while capacity and simulation are placeholders; the page shows a warning banner.
pub const CORE_WIRED: bool = false;

/// Which model: a catalog id, or a pasted Hugging Face `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelRef {
    Catalog(String),
    ConfigJson(String),
}

/// Which GPU: a catalog id or a custom spec.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GpuRef {
    Catalog(String),
    Custom(CustomGpu),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomGpu {
    pub name: String,
    pub memory_gib: f64,
    pub hbm_bandwidth_tb_s: f64,
    pub bf16_dense_tflops: f64,
    pub fp8_dense_tflops: Option<f64>,
    pub fp4_dense_tflops: Option<f64>,
}

/// vLLM engine arguments, by vLLM's names.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engine {
    pub gpu_memory_utilization: f64,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub block_size: u32,
    pub max_model_len: Option<u64>,
    pub enable_prefix_caching: bool,
    pub enable_chunked_prefill: bool,
}

impl Default for Engine {
    fn default() -> Self {
        // vLLM v1 defaults (vllm/engine/arg_utils.py); the core's EngineSettings::default()
        // replaces these when wired.
        Engine {
            gpu_memory_utilization: 0.9,
            max_num_seqs: 256,
            max_num_batched_tokens: 8192,
            block_size: 16,
            max_model_len: None,
            enable_prefix_caching: true,
            enable_chunked_prefill: true,
        }
    }
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
    /// Uploaded trace (JSONL or CSV text), replacing isl/osl when present.
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
    /// GPUs in total; replicas = gpus / (tp * dp).
    pub gpus: u32,
    pub parallelism: Parallelism,
    pub weight_precision: WeightPrecision,
    pub kv_cache_dtype: KvCacheDtype,
    pub engine: Engine,
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
            gpus: 1,
            parallelism: Parallelism::default(),
            weight_precision: WeightPrecision::Checkpoint,
            kv_cache_dtype: KvCacheDtype::Auto,
            engine: Engine::default(),
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

/// One model in the searchable select.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelEntry {
    pub id: String,
}

/// One GPU in the select.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuEntry {
    pub id: String,
    pub label: String,
    pub memory_gib: f64,
}

/// PLACEHOLDER stand-in data: (id, params in billions, layers, kv heads, head dim), to be
/// replaced by `servesim_core::model::catalog`.
const PLACEHOLDER_MODELS: &[(&str, f64, u64, u64, u64)] = &[
    ("meta-llama/Meta-Llama-3.1-8B", 8.03, 32, 8, 128),
    ("meta-llama/Meta-Llama-3.1-70B", 70.6, 80, 8, 128),
    ("meta-llama/Meta-Llama-3.1-405B", 405.9, 126, 8, 128),
    ("Qwen/Qwen3-8B", 8.19, 36, 8, 128),
    ("Qwen/Qwen3-32B", 32.8, 64, 8, 128),
    ("mistralai/Mixtral-8x7B-v0.1", 46.7, 32, 8, 128),
];

/// PLACEHOLDER stand-in GPU table, to be replaced by `servesim_core::gpu`.
const PLACEHOLDER_GPUS: &[(&str, &str, f64, f64)] = &[
    ("A100-SXM", "NVIDIA A100-SXM4-80GB", 80.0, 2.039),
    ("H100-SXM", "NVIDIA H100-SXM5-80GB", 80.0, 3.35),
    ("H200-SXM", "NVIDIA H200-SXM-141GB", 141.0, 4.8),
    ("B200", "NVIDIA B200", 180.0, 8.0),
    ("MI300X", "AMD Instinct MI300X", 192.0, 5.3),
];

pub fn models() -> Vec<ModelEntry> {
    PLACEHOLDER_MODELS
        .iter()
        .map(|m| ModelEntry { id: m.0.into() })
        .collect()
}

pub fn gpus() -> Vec<GpuEntry> {
    PLACEHOLDER_GPUS
        .iter()
        .map(|g| GpuEntry {
            id: g.0.into(),
            label: g.1.into(),
            memory_gib: g.2,
        })
        .collect()
}

/// One slice of a GPU's memory, for the breakdown bar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemSlice {
    pub label: String,
    pub bytes: f64,
}

/// What the capacity card shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityView {
    pub fits: bool,
    /// Why it does not fit (vLLM's message), when it does not.
    pub reason: Option<String>,
    /// What to change so it fits.
    pub fix: Option<String>,
    /// Physical memory of one GPU.
    pub gpu_bytes: f64,
    /// Per-GPU usage, in order; the rest of `gpu_bytes` is unused headroom.
    pub per_gpu: Vec<MemSlice>,
    /// KV cache tokens per replica (vLLM's `GPU KV cache size: N tokens`).
    pub kv_cache_tokens: u64,
    /// Requests of the workload's ISL+OSL whose KV fits at once, per replica.
    pub requests_that_fit: f64,
    pub replicas: u32,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// vLLM's start-up memory sizing for the scenario.
///
/// PLACEHOLDER: weights = params x bytes / tp, KV/token = 2 x layers x kv_heads x head_dim x
/// bytes / tp, a flat 3 GiB for activation + non-torch memory. To be replaced by
/// `servesim_core::capacity::capacity`.
pub fn capacity(s: &Scenario) -> Result<CapacityView, String> {
    let (params_b, layers, kv_heads, head_dim) = match &s.model {
        ModelRef::Catalog(id) => PLACEHOLDER_MODELS
            .iter()
            .find(|m| m.0 == id)
            .map(|m| (m.1, m.2, m.3, m.4))
            .ok_or_else(|| format!("unknown model `{id}`: pick one from the list"))?,
        ModelRef::ConfigJson(_) => {
            return Err("pasted config.json needs the core's model parser (not wired yet)".into())
        }
    };
    let gpu_gib = match &s.gpu {
        GpuRef::Catalog(id) => PLACEHOLDER_GPUS
            .iter()
            .find(|g| g.0 == id)
            .map(|g| g.2)
            .ok_or_else(|| format!("unknown GPU `{id}`: pick one from the list"))?,
        GpuRef::Custom(c) => c.memory_gib,
    };
    let tp = f64::from(s.parallelism.tp.max(1));
    let w_bytes = match s.weight_precision {
        WeightPrecision::Checkpoint | WeightPrecision::Bf16 => 2.0,
        WeightPrecision::Fp8 => 1.0,
        WeightPrecision::Fp4 => 0.5625,
    };
    let kv_bytes = if s.kv_cache_dtype.is_fp8() { 1.0 } else { 2.0 };
    let gpu_bytes = gpu_gib * GIB;
    let budget = gpu_bytes * s.engine.gpu_memory_utilization;
    let weights = params_b * 1e9 * w_bytes / tp;
    let overhead = 3.0 * GIB;
    let kv_pool = budget - weights - overhead;
    let kv_per_token = 2.0 * layers as f64 * kv_heads as f64 * head_dim as f64 * kv_bytes / tp;
    let replicas = s.gpus / s.parallelism.gpus().max(1);
    let mut per_gpu = vec![
        MemSlice {
            label: "weights".into(),
            bytes: weights,
        },
        MemSlice {
            label: "activation + non-torch".into(),
            bytes: overhead,
        },
    ];
    if kv_pool <= 0.0 {
        return Ok(CapacityView {
            fits: false,
            reason: Some(format!(
                "No available memory for the cache blocks: weights and overhead need {:.1} GiB per GPU, the budget is {:.1} GiB",
                (weights + overhead) / GIB,
                budget / GIB
            )),
            fix: Some("raise --tensor-parallel-size, use fp8/fp4 weights, or a GPU with more memory".into()),
            gpu_bytes,
            per_gpu,
            kv_cache_tokens: 0,
            requests_that_fit: 0.0,
            replicas,
        });
    }
    per_gpu.push(MemSlice {
        label: "KV cache".into(),
        bytes: kv_pool,
    });
    let block = f64::from(s.engine.block_size);
    let tokens = (kv_pool / kv_per_token / block).floor() * block;
    let per_req = (s.workload.isl + s.workload.osl) as f64;
    Ok(CapacityView {
        fits: true,
        reason: None,
        fix: None,
        gpu_bytes,
        per_gpu,
        kv_cache_tokens: tokens as u64,
        requests_that_fit: tokens / per_req,
        replicas,
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
    let gpus = f64::from(s.gpus.max(1));
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

/// Fields whose catalog reference is unknown (the form's own validation cannot know the
/// catalogs).
pub fn check_refs(s: &Scenario) -> crate::form::FieldErrors {
    let mut e = crate::form::FieldErrors::new();
    if let ModelRef::Catalog(id) = &s.model {
        if !models().iter().any(|m| &m.id == id) {
            e.insert(
                "model_id",
                format!(
                    "`{id}` is not in the catalog: pick one from the list or paste its config.json"
                ),
            );
        }
    }
    if let GpuRef::Catalog(id) = &s.gpu {
        if !gpus().iter().any(|g| &g.id == id) {
            e.insert(
                "gpu_id",
                format!("`{id}` is not in the catalog: pick one or enter a custom GPU"),
            );
        }
    }
    e
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
        s.gpus,
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
            gpus: 4,
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
    fn unknown_catalog_ids_are_field_errors() {
        let s = Scenario {
            model: ModelRef::Catalog("nobody/nothing".into()),
            gpu: GpuRef::Catalog("Z9000".into()),
            ..Scenario::default()
        };
        let e = check_refs(&s);
        assert!(e["model_id"].contains("nobody/nothing"));
        assert!(e["gpu_id"].contains("Z9000"));
        assert!(check_refs(&Scenario::default()).is_empty());
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
