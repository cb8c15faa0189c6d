//! The one scenario type shared by the CLI (`servesim sweep`), the page and validation: a
//! versioned JSON document (what share links and `--scenario FILE` carry) that resolves into a
//! deployment, its start-up capacity, the engine configuration, the step-time model, the workload
//! and the sweep. Identical JSON gives identical results everywhere.
//!
//! Glue rules (docs/scenario.md):
//! - `EngineConfig` takes `max_num_seqs`, `max_num_batched_tokens`, `block_size`, `max_model_len`,
//!   prefix caching and `long_prefill_token_threshold` from the resolved [`EngineSettings`], and
//!   `num_gpu_blocks` from the [`CapacityReport`] (per engine = per DP rank).
//! - `KvFootprint` from the model's [`KvCacheSpec`] (see [`kv_footprint`]).
//! - engines = `dp x replicas`, GPUs = `num_gpus`; the user cannot set them in `sweep`.
//! - A scenario that does not fit still resolves (the capacity report says why), but
//!   [`ResolvedScenario::runner`] refuses to run it.
//!
//! [`EngineSettings`]: crate::deploy::EngineSettings

use crate::capacity::{self, CapacityError, CapacityReport};
use crate::deploy::{DeployError, Deployment, RawEngineSettings};
use crate::dtype::{KvCacheDtype, WeightPrecision};
use crate::engine::{
    EngineConfig, KvFootprint, PrefillChunk as EnginePrefill, SlidingGroup, StepBatch,
    StepTimeModel,
};
use crate::fieldwise::{serde_fields, TopLevel};
use crate::gpu::{find_gpu, GpuError, RawGpu};
use crate::metrics::LevelResult;
use crate::model::{catalog, KvCacheSpec, KvPacking, LayerAttn, ModelConfig, ModelError};
use crate::parallel::Parallelism;
use crate::perf::{
    Efficiencies, EfficiencyOverrides, PerfError, PrefillChunk as PerfPrefill, StepCostModel,
};
use crate::sweep::{
    OperatingPoint, RawGate, RawSweepSpec, SweepError, SweepResult, SweepRunner, SweepSpec,
};
use crate::topology::{RawTopology, SimPlan, TopologyError, TopologySpec};
use crate::units::Ticks;
use crate::workload::{
    RawArrival, RawContent, RawLengthDist, RawWorkloadSpec, WorkloadError, WorkloadSpec,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The newest scenario format version this build reads and writes. Version 2 adds `topology`
/// (replicas, router); a version-1 document reads as before, and a scenario that uses no
/// version-2 field is written as version 1 (so it opens in older builds and its link is
/// unchanged).
pub const SCENARIO_VERSION: u32 = 2;

/// The oldest version this build reads.
pub const OLDEST_SCENARIO_VERSION: u32 = 1;

/// The first vLLM release taken to render chat templates off the API server's event loop:
/// vllm-project/vllm PR #34789 ("Offload blocking tokenizer ops to shared thread pool to unblock
/// event loop") moved the render to a one-thread executor; it was still in review on 2026-03-26,
/// so 0.19 is the earliest release that can carry it (docs/accuracy.md "Front-end terms").
pub const RENDER_OFF_LOOP_SINCE: crate::perf::VllmVersion = crate::perf::VllmVersion {
    major: 0,
    minor: 19,
    patch: 0,
};

/// The model: a catalog id or a pasted Hugging Face `config.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelRef {
    /// A catalog id, e.g. `meta-llama/Meta-Llama-3.1-8B` (case-insensitive).
    Catalog(String),
    /// A model described by its `config.json` text.
    Custom(CustomModel),
}

/// A model given by its `config.json` text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomModel {
    pub name: String,
    pub config_json: String,
}

/// The GPU: a catalog id/alias or a custom description.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum GpuRef {
    Catalog(String),
    Custom(RawGpu),
}

fn one() -> u32 {
    1
}

/// A complete simulation request. See docs/scenario.md for every field and the default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Format version; must be [`SCENARIO_VERSION`].
    pub version: u32,
    pub model: ModelRef,
    pub gpu: GpuRef,
    #[serde(default = "one")]
    pub tp: u32,
    #[serde(default = "one")]
    pub dp: u32,
    #[serde(default = "one")]
    pub ep: u32,
    /// Version 2: vLLM's `--enable-expert-parallel` (`true`: experts sharded over all
    /// `tp x dp` GPUs, `ep = tp x dp`; `false`: experts tensor-parallel). Stating it (either
    /// value) also models vLLM's DP lockstep for MoE models with `dp > 1` and prices the
    /// all-to-all per `engine.all2all_backend` (docs/topology.md "DP + EP"). Absent: `ep` as
    /// written and independent DP ranks (how scenarios before the field ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_expert_parallel: Option<bool>,
    /// Total GPUs (a multiple of `tp * dp`); default one replica.
    #[serde(default)]
    pub num_gpus: Option<u32>,
    #[serde(default)]
    pub weight_precision: WeightPrecision,
    #[serde(default)]
    pub kv_cache_dtype: KvCacheDtype,
    /// vLLM engine settings; absent fields take vLLM's defaults for this GPU and model.
    #[serde(default)]
    pub engine: RawEngineSettings,
    /// The workload; its arrival's own level (concurrency or rate) is replaced by each sweep level.
    pub workload: RawWorkloadSpec,
    /// Levels, duration, warm-up, SLA gates. `engines` and `gpus` come from the deployment and
    /// must not be set here.
    #[serde(default)]
    pub sweep: RawSweepSpec,
    /// Overrides of the step-time model's efficiency table (default: the GPU generation's table).
    #[serde(default)]
    pub efficiencies: Option<EfficiencyOverrides>,
    /// The API endpoint the clients call (`completions`, the default of `vllm bench serve`, or
    /// `chat`); selects the front-end latency (docs/accuracy.md "Front-end terms").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
    /// The vLLM version served (`0.15.1`, `0.11.0`, ...): selects the calibration of its release
    /// line ([`crate::perf::EngineEra`], docs/accuracy.md). Default: the newest calibrated line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vllm_version: Option<String>,
    /// Version 2: replicas and the router in front of them (docs/topology.md). Absent: the
    /// replicas `num_gpus` gives (default one) behind round-robin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<RawTopology>,
}

/// A field newer than version 1: its name, the version that introduced it, and whether a
/// scenario uses it.
pub type FieldVersion = (&'static str, u32, fn(&Scenario) -> bool);

/// The fields newer than version 1: (name, the version that introduced it, whether a scenario
/// uses it). A document of an older version that carries one is refused naming the version to
/// set; a scenario using one is written as that version ([`Scenario::written_version`]). Every
/// other field of [`Scenario`] is a version-1 field. Adding a field to a new version is one line
/// here beside the struct's own field.
pub const FIELD_VERSIONS: [FieldVersion; 2] = [
    ("enable_expert_parallel", 2, |s| {
        s.enable_expert_parallel.is_some()
    }),
    ("topology", 2, |s| s.topology.is_some()),
];

/// The OpenAI-compatible endpoint the benchmark clients call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `/v1/completions` (`vllm bench serve` default backend `vllm`/`openai`).
    #[default]
    Completions,
    /// `/v1/chat/completions` (`--backend openai-chat`): chat template, chat streaming.
    Chat,
}

/// Why a scenario cannot be read, resolved or run. [`ScenarioError::field`] gives the JSON path
/// of the offending field; the message names the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScenarioError {
    #[error("scenario JSON: `{field}`: {message}")]
    Json { field: String, message: String },
    #[error("scenario version {found} is not supported: this build reads versions {OLDEST_SCENARIO_VERSION} to {SCENARIO_VERSION}; set \"version\": {SCENARIO_VERSION} (and check the fields against docs/scenario.md)")]
    Version { found: String },
    #[error("{}", named("model", "", &.0.to_string()))]
    Model(ModelError),
    #[error("gpu: {0}")]
    Gpu(GpuError),
    #[error("{}", named(&deploy_field(.0), .0.field(), &.0.to_string()))]
    Deploy(DeployError),
    #[error("capacity: {0}")]
    Capacity(CapacityError),
    #[error("{}", named(&workload_field(.0), workload_own_field(.0), &.0.to_string()))]
    Workload(WorkloadError),
    #[error("{}", sweep_text(.0))]
    Sweep(SweepError),
    #[error("efficiencies: {0}")]
    Perf(PerfError),
    #[error("{0}")]
    Topology(TopologyError),
    /// An error of one pool of a disaggregated deployment (`topology.prefill` / `.decode`),
    /// its field spelled as the pool's path.
    #[error("{message}")]
    Pool { field: String, message: String },
    #[error("`{field}` = {value} is invalid: {fix}")]
    Invalid {
        field: String,
        value: String,
        fix: String,
    },
    /// The deployment does not start (vLLM would fail at start-up): nothing to simulate.
    #[error("the deployment does not fit, so there is nothing to simulate: {reason}{}", fixes_text(.fixes))]
    DoesNotFit { reason: String, fixes: Vec<String> },
}

/// A wrapped error's message with its field spelled as the scenario's JSON path: the message's
/// own `` `field` `` becomes `` `path` `` (so "`engine.max_num_seqs` = 0 is invalid", not
/// "engine.max_num_seqs: `max_num_seqs` = 0"); a message that does not quote its field gets the
/// path in front, once.
fn named(path: &str, own: &str, msg: &str) -> String {
    let quoted = format!("`{own}`");
    if !own.is_empty() && msg.contains(&quoted) {
        msg.replacen(&quoted, &format!("`{path}`"), 1)
    } else if msg.starts_with(&format!("{path}:"))
        || msg.starts_with(&format!("{path} "))
        || msg.starts_with(&format!("`{path}`"))
    {
        msg.to_string()
    } else {
        format!("{path}: {msg}")
    }
}

fn sweep_text(e: &SweepError) -> String {
    match e {
        SweepError::Workload(w) => named(&workload_field(w), workload_own_field(w), &w.to_string()),
        SweepError::Spec { field, problem } => {
            let path = if field.starts_with("sweep") {
                field.clone()
            } else {
                format!("sweep.{field}")
            };
            format!("sweep setting `{path}`: {problem}")
        }
        SweepError::Sim(s) => format!("sweep: {s}"),
    }
}

fn workload_own_field(e: &WorkloadError) -> &str {
    match e {
        WorkloadError::BadCount { field, .. }
        | WorkloadError::NotPositive { field, .. }
        | WorkloadError::MinAboveMax { field, .. }
        | WorkloadError::Empty { field }
        | WorkloadError::Invalid { field, .. } => field.as_str(),
        _ => "",
    }
}

fn fixes_text(f: &[String]) -> String {
    if f.is_empty() {
        String::new()
    } else {
        format!(". Fixes: {}", f.join("; "))
    }
}

impl ScenarioError {
    /// The JSON path of the field at fault, e.g. `engine.max_num_seqs`, `workload.requests.input.mean`.
    pub fn field(&self) -> String {
        match self {
            ScenarioError::Json { field, .. } => field.clone(),
            ScenarioError::Version { .. } => "version".into(),
            ScenarioError::Model(_) => "model".into(),
            ScenarioError::Gpu(e) => match e {
                GpuError::InvalidField { field, .. } => format!("gpu.custom.{field}"),
                _ => "gpu".into(),
            },
            ScenarioError::Deploy(e) => deploy_field(e),
            ScenarioError::Capacity(e) => match e {
                CapacityError::Model(_) => "model".into(),
                CapacityError::InvalidField { field, .. } => deploy_path(field),
            },
            ScenarioError::Workload(e) => workload_field(e),
            ScenarioError::Sweep(e) => match e {
                SweepError::Workload(w) => workload_field(w),
                SweepError::Sim(_) => "sweep".into(),
                SweepError::Spec { field, .. } => {
                    if field.starts_with("sweep") {
                        field.clone()
                    } else {
                        format!("sweep.{field}")
                    }
                }
            },
            ScenarioError::Perf(e) => match e {
                PerfError::InvalidEfficiency { field, .. } => format!("efficiencies.{field}"),
                PerfError::Model(_) => "model".into(),
                PerfError::Drafter { .. } => "engine.speculative_config.model".into(),
            },
            ScenarioError::Invalid { field, .. } => field.clone(),
            ScenarioError::Topology(e) => format!("topology.{}", e.field),
            ScenarioError::Pool { field, .. } => field.clone(),
            ScenarioError::DoesNotFit { .. } => "deployment".into(),
        }
    }
}

/// The JSON path of a deployment error's field: a top-level field of the scenario (`tp`,
/// `num_gpus`, `kv_cache_dtype`, ...) as it is, anything else an engine setting.
fn deploy_path(field: &str) -> String {
    if Scenario::fields().contains(&field) {
        field.to_string()
    } else {
        format!("engine.{field}")
    }
}

fn deploy_field(e: &DeployError) -> String {
    match e {
        DeployError::Model(_) => "model".into(),
        DeployError::Gpu(_) => "gpu".into(),
        other => deploy_path(other.field()),
    }
}

fn workload_field(e: &WorkloadError) -> String {
    let f = match e {
        WorkloadError::BadCount { field, .. }
        | WorkloadError::NotPositive { field, .. }
        | WorkloadError::MinAboveMax { field, .. }
        | WorkloadError::Empty { field }
        | WorkloadError::Invalid { field, .. } => field.as_str(),
        WorkloadError::Json(_) => "",
        WorkloadError::Trace { .. } => "requests.jsonl",
        WorkloadError::UnknownPreset(_) => "requests.name",
    };
    if f.is_empty() {
        "workload".into()
    } else if f.starts_with("sweep") {
        f.to_string()
    } else {
        format!("workload.{f}")
    }
}

fn json_err(field: &str, e: impl ToString) -> ScenarioError {
    ScenarioError::Json {
        field: crate::bounds::clip(field),
        message: crate::bounds::clip_message(&e.to_string()),
    }
}

fn invalid(field: &str, value: impl ToString, fix: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        field: field.to_string(),
        value: crate::bounds::clip(&value.to_string()),
        fix: fix.into(),
    }
}

/// Removes `null` members of objects, recursively (absent and `null` mean the same in a scenario).
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            for x in m.values_mut() {
                strip_nulls(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

impl Scenario {
    /// The page's first view (and the base the CLI's flags modify): Llama-3.1-8B on one H100-SXM,
    /// vLLM defaults, `vllm bench serve --dataset-name random`-like requests (1024 input, 128
    /// output tokens, constant), closed loop at concurrency 1, 2, 4, ..., 512, 300 s per level
    /// (30 s warm-up), one SLA gate `e2e_tokens_per_s_per_user >= 50`.
    pub fn default_scenario() -> Scenario {
        Scenario {
            version: SCENARIO_VERSION,
            model: ModelRef::Catalog("meta-llama/Meta-Llama-3.1-8B".into()),
            gpu: GpuRef::Catalog("H100-SXM".into()),
            tp: 1,
            dp: 1,
            ep: 1,
            enable_expert_parallel: None,
            num_gpus: None,
            weight_precision: WeightPrecision::Checkpoint,
            kv_cache_dtype: KvCacheDtype::Auto,
            engine: RawEngineSettings::default(),
            workload: RawWorkloadSpec {
                arrival: RawArrival::ClosedLoop {
                    concurrency: 1.0,
                    think_time_s: None,
                },
                requests: RawContent::Synthetic {
                    input: RawLengthDist::Constant { tokens: 1024.0 },
                    output: RawLengthDist::Constant { tokens: 128.0 },
                    shared_prefix: None,
                },
                seed: 0,
            },
            sweep: RawSweepSpec {
                concurrency: Some((0..10).map(|i| (1u32 << i) as f64).collect()),
                duration_s: Some(300.0),
                warmup_s: Some(30.0),
                sla: vec![RawGate {
                    metric: "e2e_tokens_per_s_per_user".into(),
                    op: crate::sweep::GateOp::Ge,
                    value: 50.0,
                }],
                ..RawSweepSpec::default()
            },
            efficiencies: None,
            endpoint: None,
            vllm_version: None,
            topology: None,
        }
    }

    /// Sweeps exactly `levels` of `kind`: the arrival takes the first level (a closed loop keeps
    /// its think time; a rate keeps the arrival's own process, constant or gamma with its cv,
    /// Poisson otherwise, and a trace replay is rescaled) and the sweep's level list becomes
    /// `levels`. Burst levels also drop the sweep's stated stop (`duration_s`, `warmup_s`,
    /// `num_requests`): each level then sends its burst at t = 0 and runs until it finishes
    /// (`Stop::Burst`), as `vllm bench serve` without `--max-concurrency` measures. What
    /// `servesim sweep --concurrency / --request-rate / --burst`, `servesim compare` and the
    /// page's predictions at measured levels do. An empty list leaves the arrival at level 1.
    pub fn set_levels(&mut self, kind: crate::compare::LevelKind, levels: &[f64]) {
        use crate::compare::LevelKind;
        let first = levels.first().copied().unwrap_or(1.0);
        let arrival = &self.workload.arrival;
        let is_trace = matches!(self.workload.requests, RawContent::Mooncake { .. });
        self.workload.arrival = match kind {
            LevelKind::Burst => RawArrival::Burst { count: first },
            LevelKind::Concurrency => RawArrival::ClosedLoop {
                concurrency: first,
                think_time_s: match arrival {
                    RawArrival::ClosedLoop { think_time_s, .. } => *think_time_s,
                    _ => None,
                },
            },
            LevelKind::RequestRate => match arrival {
                _ if is_trace => RawArrival::Trace { rate: Some(first) },
                RawArrival::Constant { .. } => RawArrival::Constant { rate: first },
                RawArrival::Gamma { cv, .. } => RawArrival::Gamma {
                    rate: first,
                    cv: *cv,
                },
                _ => RawArrival::Poisson { rate: first },
            },
        };
        if kind == LevelKind::Burst {
            self.sweep.duration_s = None;
            self.sweep.warmup_s = None;
            self.sweep.num_requests = None;
        }
        if kind == LevelKind::RequestRate {
            self.sweep.request_rates = Some(levels.to_vec());
            self.sweep.concurrency = None;
        } else {
            self.sweep.concurrency = Some(levels.to_vec());
            self.sweep.request_rates = None;
        }
    }

    /// The scenario rewritten to predict exactly the measured `levels` of `kind`
    /// ([`Scenario::set_levels`]), or why it cannot: no level, or a concurrency / burst level
    /// that is not a whole number >= 1. `servesim compare` and the page's comparison use it.
    pub fn at_measured_levels(
        &self,
        kind: crate::compare::LevelKind,
        levels: &[f64],
    ) -> Result<Scenario, String> {
        use crate::compare::LevelKind;
        if levels.is_empty() {
            return Err("no measured level to predict".into());
        }
        if matches!(kind, LevelKind::Concurrency | LevelKind::Burst) {
            if let Some(l) = levels.iter().find(|l| l.fract() != 0.0 || **l < 1.0) {
                return Err(format!(
                    "measured {} {l} is not a whole number >= 1; the simulator runs whole clients",
                    kind.name()
                ));
            }
        }
        let mut s = self.clone();
        s.set_levels(kind, levels);
        Ok(s)
    }

    /// Reads a scenario. The version is checked first; errors name the top-level field (and
    /// serde's message names the nested one).
    pub fn from_json(s: &str) -> Result<Scenario, ScenarioError> {
        // A UTF-8 byte-order mark (Windows editors write one) is not content.
        let s = s.strip_prefix('\u{feff}').unwrap_or(s);
        let v: Value = serde_json::from_str(s).map_err(|e| json_err("", e))?;
        let Value::Object(obj) = &v else {
            return Err(json_err("", "a scenario is a JSON object"));
        };
        match obj.get("version") {
            None => {
                return Err(json_err(
                    "version",
                    format!("missing; add \"version\": {SCENARIO_VERSION}"),
                ))
            }
            Some(Value::Number(n))
                if n.as_u64().is_some_and(|v| {
                    (OLDEST_SCENARIO_VERSION as u64..=SCENARIO_VERSION as u64).contains(&v)
                }) => {}
            Some(other) => {
                return Err(ScenarioError::Version {
                    found: other.to_string(),
                })
            }
        }
        let known = Scenario::fields();
        for k in obj.keys() {
            if !known.contains(&k.as_str()) {
                return Err(json_err(
                    k,
                    format!("unknown field; known fields: {}", known.join(", ")),
                ));
            }
        }
        let version = obj.get("version").and_then(Value::as_u64).unwrap_or(1) as u32;
        for (k, since, _) in FIELD_VERSIONS {
            if version < since && obj.contains_key(k) {
                return Err(json_err(
                    k,
                    format!("is a version-{since} field; set \"version\": {since}"),
                ));
            }
        }
        let mut s = Scenario::deserialize(TopLevel { obj, fields: known })
            .map_err(|e| json_err(&e.field, e.message))?;
        // In memory every scenario is the newest version; `to_json` writes the oldest version
        // that holds its fields (`written_version`).
        s.version = SCENARIO_VERSION;
        Ok(s)
    }

    /// The top-level fields of the scenario JSON, in declaration order: serde's own list for
    /// [`Scenario`] (so it cannot drift from the struct).
    pub fn fields() -> &'static [&'static str] {
        serde_fields::<Scenario>()
    }

    /// The version this scenario is written as: 2 when it uses a version-2 field, else 1.
    pub fn written_version(&self) -> u32 {
        FIELD_VERSIONS
            .iter()
            .filter(|(_, _, used)| used(self))
            .map(|(_, since, _)| *since)
            .fold(OLDEST_SCENARIO_VERSION, u32::max)
    }

    fn to_value(&self) -> Value {
        let mut c = self.clone();
        c.version = self.written_version();
        let mut v = serde_json::to_value(&c).unwrap_or(Value::Null);
        strip_nulls(&mut v);
        v
    }

    /// Canonical compact JSON (keys sorted, absent options omitted): stable for share links.
    pub fn to_json(&self) -> String {
        self.to_value().to_string()
    }

    /// The same canonical content, indented for people.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(&self.to_value()).unwrap_or_default()
    }

    /// [`fp8_no_faster_than_bf16_note`] of this scenario's deployment and calibrated table (with its
    /// `efficiencies` overrides), without resolving the rest (`None` when it does not resolve
    /// that far): what a search quotes with each GPU's evidence.
    pub fn fp8_no_faster_than_bf16_note(&self) -> Option<String> {
        let dep = self.deployment().ok()?;
        let base = Efficiencies::calibrated_for(dep.gpu.generation, self.engine_era().ok()?);
        let eff = match &self.efficiencies {
            None => base,
            Some(o) => base.with_overrides(o).ok()?,
        };
        let cost = StepCostModel::new(&dep, &eff).ok()?;
        fp8_no_faster_than_bf16_note(&cost, &eff, &dep.gpu)
    }

    /// The calibration era of `vllm_version` (the newest when absent).
    pub fn engine_era(&self) -> Result<crate::perf::EngineEra, ScenarioError> {
        match &self.vllm_version {
            None => Ok(crate::perf::EngineEra::default()),
            Some(v) => crate::perf::VllmVersion::parse(v)
                .map(crate::perf::EngineEra::of_version)
                .map_err(|e| {
                    invalid(
                        "vllm_version",
                        v,
                        format!("{}; write the vLLM version as MAJOR.MINOR[.PATCH], e.g. 0.15.1, or leave it out for the newest calibrated release line", crate::bounds::clip_message(&e.to_string())),
                    )
                }),
        }
    }

    /// Whether the API server renders this scenario's chat prompts on its event loop, in rounds
    /// (`sweep::FrontEnd::render_round`): the chat endpoint, a model rendered from its Hugging
    /// Face Jinja template, and a vLLM before [`RENDER_OFF_LOOP_SINCE`] (an absent `vllm_version`
    /// is the newest release line, which renders off the loop). docs/accuracy.md "Front-end terms".
    pub fn renders_chat_on_event_loop(&self, model: &ModelConfig) -> Result<bool, ScenarioError> {
        if self.endpoint.unwrap_or_default() != Endpoint::Chat
            || model.family.chat_renderer() != crate::model::ChatRenderer::HfJinja
        {
            return Ok(false);
        }
        let Some(v) = &self.vllm_version else {
            return Ok(false);
        };
        self.engine_era()?;
        Ok(crate::perf::VllmVersion::parse(v).is_ok_and(|v| v < RENDER_OFF_LOOP_SINCE))
    }

    /// Validates everything and builds the simulation inputs. A deployment that does not fit
    /// still resolves (see [`ResolvedScenario::capacity`]); only [`ResolvedScenario::runner`]
    /// refuses it.
    pub fn resolve(&self) -> Result<ResolvedScenario, ScenarioError> {
        if let Some(t) = &self.topology {
            if t.prefill.is_some() || t.decode.is_some() || t.kv_transfer.is_some() {
                return self.resolve_disagg(t);
            }
        }
        let deployment = self.deployment()?;
        let capacity = capacity::compute(&deployment, None).map_err(ScenarioError::Capacity)?;
        self.resolve_from(deployment, capacity)
    }

    /// The deployment this scenario states (model, GPU, layout, precisions, engine settings),
    /// validated: the first step of [`Scenario::resolve`], and all `servesim capacity` needs.
    /// The scenario's model (catalog entry or custom `config.json`), without the deployment.
    pub fn model_config(&self) -> Result<ModelConfig, ScenarioError> {
        match &self.model {
            ModelRef::Catalog(id) => catalog::load(id).map_err(ScenarioError::Model),
            ModelRef::Custom(c) => {
                if c.name.trim().is_empty() {
                    return Err(invalid(
                        "model.custom.name",
                        "\"\"",
                        "give the model a name (e.g. its Hugging Face id)",
                    ));
                }
                ModelConfig::from_hf_json(c.name.trim(), &c.config_json)
                    .map_err(ScenarioError::Model)
            }
        }
    }

    pub fn deployment(&self) -> Result<Deployment, ScenarioError> {
        if !(OLDEST_SCENARIO_VERSION..=SCENARIO_VERSION).contains(&self.version) {
            return Err(ScenarioError::Version {
                found: self.version.to_string(),
            });
        }
        let model = self.model_config()?;
        let gpu = match &self.gpu {
            GpuRef::Catalog(id) => find_gpu(id).map_err(ScenarioError::Gpu)?,
            GpuRef::Custom(raw) => raw.validate().map_err(ScenarioError::Gpu)?,
        };
        let par = Parallelism {
            tp: self.tp,
            dp: self.dp,
            ep: self.ep,
        };
        let (par, ep_note) =
            crate::deploy::apply_expert_parallel(&model, par, self.enable_expert_parallel)
                .map_err(ScenarioError::Deploy)?;
        // `topology.replicas` without `num_gpus`: the GPUs of that many replicas.
        let replicas = self.topology.as_ref().and_then(|t| t.replicas);
        let num_gpus = match (self.num_gpus, replicas) {
            (None, Some(r)) if r > 0 => Some(
                r.checked_mul(self.tp.max(1))
                    .and_then(|x| x.checked_mul(self.dp.max(1)))
                    .ok_or_else(|| {
                        invalid(
                            "topology.replicas",
                            r,
                            "replicas x tp x dp must stay below 4,294,967,296 GPUs",
                        )
                    })?,
            ),
            (g, _) => g,
        };
        let mut engine = self.engine.clone();
        engine.v0_defaults = self.engine_era()? == crate::perf::EngineEra::Vllm07;
        engine.mamba_blocks_check = self.vllm_version.as_deref().is_none_or(|v| {
            crate::perf::VllmVersion::parse(v)
                .map_or(true, |v| v >= crate::deploy::MAMBA_BLOCKS_CHECK_SINCE)
        });
        if let (Some(mode), Some(v)) = (engine.performance_mode, &self.vllm_version) {
            let since = crate::deploy::PERFORMANCE_MODE_SINCE;
            if crate::perf::VllmVersion::parse(v).is_ok_and(|v| v < since) {
                return Err(invalid(
                    "engine.performance_mode",
                    mode.name(),
                    format!(
                        "vLLM {v} has no --performance-mode (added in {}.{}); remove it or set vllm_version to {}.{} or later",
                        since.major, since.minor, since.major, since.minor
                    ),
                ));
            }
        }
        Deployment::new(
            model,
            gpu,
            par,
            num_gpus,
            self.weight_precision,
            self.kv_cache_dtype,
            &engine,
        )
        .map_err(ScenarioError::Deploy)
        .map(|d| {
            d.with_expert_parallel(self.enable_expert_parallel, ep_note)
                .auto_fit_max_model_len()
        })
    }

    fn resolve_from(
        &self,
        deployment: Deployment,
        capacity: CapacityReport,
    ) -> Result<ResolvedScenario, ScenarioError> {
        let e = &deployment.engine;
        let spec = deployment.kv_cache_spec().map_err(ScenarioError::Model)?;
        let kv = kv_footprint(&spec, e.max_num_batched_tokens);
        let to_u32 = |field: &str, v: u64| -> Result<u32, ScenarioError> {
            u32::try_from(v).map_err(|_| invalid(field, v, "must be below 4,294,967,296"))
        };
        let engine = EngineConfig {
            max_num_seqs: to_u32("engine.max_num_seqs", e.max_num_seqs)?,
            max_num_batched_tokens: to_u32(
                "engine.max_num_batched_tokens",
                e.max_num_batched_tokens,
            )?,
            block_size: e.block_size,
            num_gpu_blocks: capacity.num_blocks,
            max_model_len: e.max_model_len,
            enable_prefix_caching: e.enable_prefix_caching,
            enable_chunked_prefill: e.enable_chunked_prefill,
            mamba_align: e.enable_prefix_caching
                && deployment.model.num_linear_attention_layers() > 0,
            v0_prefill_first: e.v0_defaults && !e.enable_chunked_prefill,
            num_scheduler_steps: e.num_scheduler_steps,
            long_prefill_token_threshold: to_u32(
                "engine.long_prefill_token_threshold",
                e.long_prefill_token_threshold,
            )?,
            kv,
            spec: None,
            offload: None,
        };
        // The calibrated table (fitted fields of docs/accuracy.md over the literature defaults).
        let era = self.engine_era()?;
        let base = Efficiencies::calibrated_for(deployment.gpu.generation, era);
        let mut calibration =
            Calibration::of(deployment.gpu.generation, era, self.efficiencies.as_ref());
        let eff = match &self.efficiencies {
            None => base,
            Some(o) => base.with_overrides(o).map_err(ScenarioError::Perf)?,
        };
        let cost = StepCostModel::new(&deployment, &eff).map_err(ScenarioError::Perf)?;
        if let Some(note) = fp8_no_faster_than_bf16_note(&cost, &eff, &deployment.gpu) {
            calibration.summary.push_str(&note);
        }
        let workload = self.workload.validate().map_err(ScenarioError::Workload)?;
        let mut engine = engine;
        if let (Some(o), Some(tier)) = (
            e.kv_transfer.as_ref().and_then(|k| k.offload.as_ref()),
            capacity.cpu_tier.clone(),
        ) {
            if tier.chunks == 0 {
                return Err(invalid(
                    "engine.kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use",
                    o.cpu_bytes_to_use,
                    format!(
                        "holds no chunk: one chunk is {} bytes per rank x {} ranks; give more bytes",
                        tier.chunk_bytes_per_rank, tier.ranks_per_engine
                    ),
                ));
            }
            let field = "engine.kv_transfer_config.kv_connector_extra_config.cpu_bytes_to_use";
            match tier.host_memory_bytes_per_node {
                None => {
                    return Err(invalid(
                        "engine.host_memory_gb_per_node",
                        "absent",
                        format!(
                            "the CPU tier pins {} bytes of host memory per node and the host memory of a {} node is not known; state the node's host memory in GB",
                            tier.host_bytes_per_node, deployment.gpu.id
                        ),
                    ));
                }
                Some(m) if tier.host_bytes_per_node > m => {
                    return Err(invalid(
                        field,
                        o.cpu_bytes_to_use,
                        format!(
                            "the tier pins {} bytes per rank x {} GPUs per node = {} bytes, above the node's {} bytes of host memory ({}); give fewer bytes",
                            tier.host_bytes_per_rank,
                            tier.gpus_per_node,
                            tier.host_bytes_per_node,
                            m,
                            tier.host_memory_source
                        ),
                    ));
                }
                Some(_) => {}
            }
            engine.offload = Some(crate::engine::OffloadConfig {
                blocks_per_chunk: o.blocks_per_chunk as u32,
                num_chunks: tier.chunks,
                chunk_bytes: tier.chunk_bytes_per_rank,
                link_bytes_per_s: tier.host_link_bytes_per_s,
                store_threshold: o.store_threshold as u32,
                max_tracker_size: o.max_tracker_size,
            });
        }
        engine.spec = e.speculative.as_ref().map(|sp| crate::engine::SpecDecode {
            num_speculative_tokens: sp.num_speculative_tokens,
            num_lookahead_tokens: sp.method.lookahead(sp.num_speculative_tokens),
            eagle_prune: sp.method.uses_eagle_proposer(),
            accept_rates: sp.rates_per_pos(),
            // The acceptance draws get their own stream of the scenario seed.
            seed: crate::rng::hash2(workload.seed, crate::rng::Stream::SpecAcceptance as u64),
        });
        if let Some(v) = self.sweep.engines {
            return Err(invalid(
                "sweep.engines",
                v,
                "engines are derived from the deployment (dp x replicas); set dp or num_gpus instead and drop sweep.engines",
            ));
        }
        if let Some(v) = self.sweep.gpus {
            return Err(invalid(
                "sweep.gpus",
                v,
                "GPUs are derived from the deployment (num_gpus); set num_gpus instead and drop sweep.gpus",
            ));
        }
        // Before the sweep: the engine limit is reported on `topology.replicas`.
        let topology = self
            .topology
            .clone()
            .unwrap_or_default()
            .validate(Some(deployment.replicas()), deployment.par.dp)
            .map_err(ScenarioError::Topology)?;
        let mut raw_sweep = self.sweep.clone();
        raw_sweep.engines = Some(deployment.engines() as f64);
        raw_sweep.gpus = Some(deployment.num_gpus as f64);
        let mut sweep = raw_sweep.validate().map_err(ScenarioError::Sweep)?;
        // A burst with no stated stop runs each level until its burst finishes (docs/workload.md).
        if matches!(workload.arrival, crate::workload::Arrival::Burst { .. })
            && self.sweep.duration_s.is_none()
            && self.sweep.warmup_s.is_none()
            && self.sweep.num_requests.is_none()
        {
            sweep.stop = crate::sweep::Stop::Burst;
        }
        let api_latency = match self.endpoint.unwrap_or_default() {
            Endpoint::Completions => eff.api_latency_completions_s,
            Endpoint::Chat => eff.api_latency_chat_s,
        };
        let render_round = if self.renders_chat_on_event_loop(&deployment.model)? {
            Ticks::from_secs_f64(eff.api_render_chat_s)
        } else {
            Ticks::ZERO
        };
        if render_round > Ticks::ZERO {
            calibration.summary.push_str(&format!(
                "; chat templates rendered on the API server's event loop in rounds (vLLM before 0.19): {} ms per request, a burst of N waits N x that (docs/accuracy.md \"Front-end terms\")",
                crate::bounds::fmt_num(eff.api_render_chat_s * 1e3)
            ));
        }
        sweep.frontend = crate::sweep::FrontEnd {
            latency: Ticks::from_secs_f64(api_latency),
            serial_per_request: Ticks::from_secs_f64(eff.api_serial_per_request_s),
            serial_per_input_token: Ticks::from_secs_f64(eff.api_serial_per_input_token_s),
            render_round,
        };
        Ok(ResolvedScenario {
            deployment,
            capacity,
            engine,
            cost,
            workload,
            sweep,
            calibration,
            topology,
            disagg: None,
        })
    }
}

/// An error of pool `pool`'s single-pool scenario, with the pool's own fields (GPU,
/// parallelism, engine settings, replicas) spelled under `topology.{pool}`.
fn pool_err(pool: &str, e: ScenarioError) -> ScenarioError {
    let inner = e.field();
    let head = inner.split('.').next().unwrap_or("");
    let path = match head {
        "tp" | "dp" | "ep" | "gpu" | "engine" | "deployment" => format!("topology.{pool}.{inner}"),
        "topology" => format!("topology.{pool}.{}", inner.trim_start_matches("topology.")),
        _ => return e,
    };
    let msg = e.to_string();
    let message = named(&path, &inner, &msg);
    let message = if message.contains(&path) {
        message
    } else {
        format!("{pool} pool: {message}")
    };
    ScenarioError::Pool {
        field: path,
        message,
    }
}

impl Scenario {
    /// A disaggregated deployment (`topology.prefill` + `topology.decode`): each pool resolves
    /// as its own single-pool scenario ([`crate::topology::RawPool`]), so it gets its own
    /// capacity report and step-time model; the KV transfer model joins them
    /// (docs/topology.md, "Disaggregated prefill/decode").
    fn resolve_disagg(&self, t: &RawTopology) -> Result<ResolvedScenario, ScenarioError> {
        use crate::topology::pools::{pool_scenario, PoolRole};
        let need = "a disaggregated topology needs both pools: give topology.prefill and topology.decode (each may be {} to take the top-level settings)";
        let (Some(pp), Some(dp)) = (&t.prefill, &t.decode) else {
            let missing = if t.prefill.is_none() {
                "topology.prefill"
            } else {
                "topology.decode"
            };
            return Err(invalid(missing, "absent", need));
        };
        if let Some(r) = t.replicas {
            return Err(invalid(
                "topology.replicas",
                r,
                "with prefill/decode pools the replicas are per pool: set topology.prefill.replicas and topology.decode.replicas and drop topology.replicas",
            ));
        }
        if let Some(g) = self.num_gpus {
            return Err(invalid(
                "num_gpus",
                g,
                "with prefill/decode pools the GPUs are the pools' (replicas x tp x dp each); drop num_gpus",
            ));
        }
        let pre = pool_scenario(self, pp, PoolRole::Prefill, t.router.clone())
            .resolve()
            .map_err(|e| pool_err("prefill", e))?;
        let mut dec = pool_scenario(self, dp, PoolRole::Decode, dp.router.clone())
            .resolve()
            .map_err(|e| pool_err("decode", e))?;
        let transfer = crate::topology::pools::transfer_model(
            t.kv_transfer.as_ref(),
            &pre.deployment,
            &dec.deployment,
            pre.topology.replicas,
        )?;
        dec.sweep.gpus = pre
            .deployment
            .num_gpus
            .checked_add(dec.deployment.num_gpus)
            .ok_or_else(|| invalid("topology", "too many GPUs", "use fewer replicas"))?;
        dec.sweep.engines = pre.deployment.engines() + dec.deployment.engines();
        dec.disagg = Some(Box::new(ResolvedDisagg {
            prefill: pre,
            transfer,
        }));
        Ok(dec)
    }
}

/// Maps a model's KV cache spec onto the engine's per-request block footprint:
/// - uniform: one full group (`{1, [], 0}`), or one sliding group when every layer slides;
/// - hybrid shared pool (gpt-oss): one full group per vLLM full-attention KV group, and per
///   sliding-window KV group `max_blocks = cdiv(window - 1 + max_num_batched_tokens, block_size) + 1`
///   (vLLM `SlidingWindowSpec.max_memory_usage_bytes`);
/// - DeepSeek-V4 layer tuple: one block id per `block_size` tokens for all compressed layers
///   (`full_groups = 1`) plus the per-request sliding-window state rounded up to whole blocks
///   (`fixed_blocks = cdiv(per_request_fixed_bytes, block_bytes)`).
pub fn kv_footprint(spec: &KvCacheSpec, max_num_batched_tokens: u64) -> KvFootprint {
    let bs = spec.block_size.max(1) as u64;
    let mut fp = KvFootprint {
        full_groups: 0,
        sliding: Vec::new(),
        fixed_blocks: 0,
    };
    let add = |kind: LayerAttn, fp: &mut KvFootprint| match kind {
        LayerAttn::SlidingWindow { window } => fp.sliding.push(SlidingGroup {
            window: window as u64,
            max_blocks: (window as u64)
                .saturating_sub(1)
                .saturating_add(max_num_batched_tokens)
                .div_ceil(bs)
                + 1,
        }),
        LayerAttn::Full | LayerAttn::Compressed { .. } => fp.full_groups += 1,
        // Not in KV groups (its state is `per_request_fixed_bytes`).
        LayerAttn::Linear => {}
    };
    match spec.packing {
        KvPacking::Uniform => {
            if let Some(g) = spec.groups.first() {
                add(g.kind, &mut fp);
            }
        }
        KvPacking::SharedPool { .. } => {
            for g in &spec.groups {
                add(g.kind, &mut fp);
            }
        }
        KvPacking::LayerTuple => {
            fp.full_groups = 1;
        }
    }
    if spec.per_request_fixed_bytes > 0 {
        let bb = spec.block_bytes().max(1);
        fp.fixed_blocks = spec.per_request_fixed_bytes.div_ceil(bb);
    }
    if fp.full_groups == 0 && fp.sliding.is_empty() {
        fp.full_groups = 1;
    }
    fp
}

fn map_chunk(c: &EnginePrefill) -> PerfPrefill {
    PerfPrefill {
        past: c.context_before,
        new: c.new_tokens,
    }
}

/// The roofline as the engine's step-time model: `StepBatch` (prefill chunks with
/// `new_tokens`/`context_before`, decode count and context sum) maps onto `perf::StepWork`.
impl StepTimeModel for StepCostModel {
    #[inline]
    fn step_time(&self, b: &StepBatch) -> Ticks {
        if b.num_prefill_tokens == 0 && self.graph_seq_len_limit().is_some() {
            return crate::perf::secs_to_ticks(self.decode_seconds(
                b.num_decode_seqs as u64,
                b.decode_ctx_sum,
                b.decode_ctx_max,
            ));
        }
        self.step_time_iter(
            b.prefills.iter().map(map_chunk),
            b.num_decode_seqs as u64,
            b.decode_ctx_sum,
        )
    }

    fn needs_decode_ctx_max(&self) -> bool {
        self.graph_seq_len_limit().is_some()
    }

    /// `step_time` of each decode-only batch: the same arithmetic (`decode_run_ticks`).
    fn decode_run_ticks(&self, n: u64, ctx_first: u64, count: usize, out: &mut Vec<Ticks>) {
        StepCostModel::decode_run_ticks(self, n, ctx_first, count, out)
    }

    fn step_time_spec(
        &self,
        b: &StepBatch,
        _windows: &[crate::engine::WindowedDecode],
        spec: &crate::engine::SpecStep,
    ) -> Ticks {
        self.spec_step_time(
            b.prefills.iter().map(map_chunk),
            b.num_decode_seqs as u64,
            b.decode_ctx_sum,
            spec,
        )
    }
}

/// Which efficiency table a scenario runs with: the calibration key used (GPU generation and vLLM
/// release line), whether it is fitted or the literature table, and the fields the scenario
/// overrides. Reported with every sweep so no result hides its basis (docs/accuracy.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Calibration {
    /// `hopper`, `ampere`, ...
    pub generation: String,
    /// The release line of the scenario's `vllm_version` (`vllm-0.11`, `vllm-0.15`).
    pub era: String,
    /// `calibrated` (fitted fields over the literature table) or `literature`.
    pub basis: String,
    /// The calibration entry used (`hopper@vllm-0.15`; another era's when this one has none);
    /// `None` for the literature table.
    pub fit: Option<String>,
    /// Efficiency fields the scenario's `efficiencies` overrides, sorted.
    pub overridden: Vec<String>,
    /// One line for people: the above in words.
    pub summary: String,
}

impl Calibration {
    pub fn of(
        g: crate::gpu::Generation,
        era: crate::perf::EngineEra,
        overrides: Option<&EfficiencyOverrides>,
    ) -> Calibration {
        let generation = crate::perf::generation_key(g);
        let fit = Efficiencies::calibration_entry(g, era);
        let overridden: Vec<String> = overrides
            .and_then(|o| serde_json::to_value(o).ok())
            .and_then(|v| v.as_object().map(|m| m.keys().cloned().collect()))
            .unwrap_or_default();
        let mut summary = match &fit {
            Some(k) if *k == crate::perf::calibration_key(g, era) => {
                format!("efficiencies calibrated for {generation}, {} (fit {k})", era.label())
            }
            Some(k) => format!(
                "efficiencies: no fit for {generation} at {}; using the nearest calibrated fit {k}",
                era.label()
            ),
            None => format!(
                "efficiencies: literature table for {generation} (no measured runs on this GPU generation)"
            ),
        };
        // Fields none of the fit's runs reads, taken from the nearest fit whose runs do
        // (`validate::borrow_unidentified`, docs/accuracy.md).
        let lent = fit
            .as_deref()
            .map(crate::perf::borrowed_fields)
            .unwrap_or_default();
        if !lent.is_empty() {
            summary.push_str(&format!(
                "; borrowed because none of the fit's runs reads them: {}",
                lent.join(", ")
            ));
        }
        if !overridden.is_empty() {
            summary.push_str(&format!(
                "; {} field(s) set by the scenario: {}",
                overridden.len(),
                overridden.join(", ")
            ));
        }
        Calibration {
            generation,
            era: era.key().to_string(),
            basis: if fit.is_some() {
                "calibrated"
            } else {
                "literature"
            }
            .into(),
            fit,
            overridden,
            summary,
        }
    }
}

/// Said with the calibration line when the deployment runs fp8 GEMMs and its table prices them at
/// no more FLOP/s than bf16 ones (`gemm_fp8 x fp8 peak <= 1.01 x gemm_bf16 x bf16 peak`: within
/// 1 %, the fractions' grid rounding, counts as parity), which public runs contradict: a plan
/// comparing an FP8 checkpoint with its bf16 one would see the FP8 prefill no faster, where it
/// measured 1.43x faster (docs/accuracy.md, "Misses" 9). `None` otherwise.
pub fn fp8_no_faster_than_bf16_note(
    cost: &StepCostModel,
    eff: &Efficiencies,
    gpu: &crate::gpu::GpuSpec,
) -> Option<String> {
    let fp8 = gpu.fp8_flops? * eff.gemm_fp8;
    let bf16 = gpu.bf16_flops * eff.gemm_bf16;
    (cost.runs_fp8_gemms() && fp8 <= 1.01 * bf16).then(|| {
        format!(
            "; this table runs fp8 GEMMs at {:.0} TFLOPS on this GPU, no faster than its bf16 GEMMs' {:.0}, where measured FP8 checkpoints prefill faster than their bf16 ones (1.43x on one H200, docs/accuracy.md \"Misses\" 9): compare fp8 with bf16 prefill with care",
            fp8 / 1e12,
            bf16 / 1e12
        )
    })
}

/// A scenario with everything validated and derived.
#[derive(Clone, Debug)]
pub struct ResolvedScenario {
    /// Which efficiency table the step-time model uses (shown with results).
    pub calibration: Calibration,
    pub deployment: Deployment,
    pub capacity: CapacityReport,
    pub engine: EngineConfig,
    pub cost: StepCostModel,
    pub workload: WorkloadSpec,
    pub sweep: SweepSpec,
    /// Replicas of the deployment and the router in front of them (a disaggregated
    /// deployment: of its decode pool).
    pub topology: TopologySpec,
    /// A disaggregated deployment: the other fields describe its decode pool; this holds the
    /// prefill pool (resolved the same way) and the KV transfer model.
    pub disagg: Option<Box<ResolvedDisagg>>,
}

/// The prefill side of a disaggregated deployment.
#[derive(Clone, Debug)]
pub struct ResolvedDisagg {
    pub prefill: ResolvedScenario,
    pub transfer: crate::topology::KvTransferModel,
}

impl ResolvedScenario {
    /// The measured evidence for this scenario's calibration key and model family: ServeSim's
    /// error on the public runs fitted in the same key ([`crate::evidence::quoted`],
    /// docs/accuracy.md "Per calibration key and model family"). A disaggregated deployment whose
    /// pools use different keys is quoted both (`cells`: the decode pool's).
    pub fn evidence(&self) -> crate::evidence::Evidence {
        let prompts = self.workload.content.nominal_prompt_tokens();
        let mut e = crate::evidence::quoted(&self.calibration, &self.deployment.model, prompts);
        if let Some(d) = &self.disagg {
            if d.prefill.calibration.fit != self.calibration.fit {
                let p = crate::evidence::quoted(
                    &d.prefill.calibration,
                    &d.prefill.deployment.model,
                    prompts,
                );
                e.summary = format!("decode pool: {}; prefill pool: {}", e.summary, p.summary);
            }
        }
        e
    }

    /// The plan the simulation runs: one aggregated pool of `topology.replicas` replicas of
    /// `engine` x `dp` ranks, each with its own API-server front-end, behind the router.
    pub fn plan(&self) -> SimPlan<'_> {
        if let Some(d) = &self.disagg {
            let mut pre = d.prefill.plan();
            let mut dec = self.single_plan();
            pre.pools[0].name = "prefill".into();
            dec.pools[0].name = "decode".into();
            pre.pools.push(dec.pools.remove(0));
            pre.disagg = Some(crate::topology::DisaggPlan {
                decode_router: self.topology.router.clone(),
                transfer: d.transfer.clone(),
            });
            return pre;
        }
        self.single_plan()
    }

    fn single_plan(&self) -> SimPlan<'_> {
        let mut plan = SimPlan::single(
            &self.engine,
            &self.cost,
            self.deployment.par.dp,
            self.sweep.frontend,
        );
        plan.pools[0].replicas = self.topology.replicas;
        plan.pools[0].lockstep = self.deployment.dp_lockstep();
        plan.router = self.topology.router.clone();
        plan
    }

    /// A level-by-level runner (progress and cancellation between levels). Fails when the
    /// deployment does not fit, quoting the capacity report's reason and fixes.
    pub fn runner(&self) -> Result<SweepRunner<'_>, ScenarioError> {
        if let Some(d) = &self.disagg {
            if let Err(e) = d.prefill.fits() {
                return Err(pool_err("prefill", e));
            }
            if let Err(e) = self.fits() {
                return Err(pool_err("decode", e));
            }
        }
        self.fits()?;
        SweepRunner::with_plan(self.plan(), &self.workload, &self.sweep)
            .map_err(ScenarioError::Sweep)
    }

    /// `Err(DoesNotFit)` when the deployment does not start.
    fn fits(&self) -> Result<(), ScenarioError> {
        if !self.capacity.fits || self.engine.num_gpu_blocks == 0 {
            return Err(ScenarioError::DoesNotFit {
                reason: self.capacity.reason.clone(),
                fixes: self
                    .capacity
                    .fixes
                    .iter()
                    .map(|f| format!("{} = {} ({})", f.setting, f.value, f.effect))
                    .collect(),
            });
        }
        Ok(())
    }

    /// The longest request (prompt + output) every engine accepts: `max_model_len`, or the
    /// shorter of the two pools' when disaggregated (each pool has its own, e.g. auto-fitted).
    pub fn context_limit(&self) -> u64 {
        self.disagg.as_ref().map_or(self.engine.max_model_len, |d| {
            d.prefill
                .engine
                .max_model_len
                .min(self.engine.max_model_len)
        })
    }

    /// Warnings about the workload against the deployment, shown next to the capacity figures:
    /// requests longer than `max_model_len` (which vLLM, and the simulation, reject), of the
    /// prefill pool too when its limit ([`Self::context_limit`]) is the shorter one.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .workload
            .max_model_len_warning(self.engine.max_model_len)
            .into_iter()
            .collect();
        let limit = self.context_limit();
        if limit < self.engine.max_model_len {
            w.extend(
                self.workload
                    .max_model_len_warning(limit)
                    .map(|m| format!("prefill pool: {m}")),
            );
        }
        w
    }

    /// Runs every level.
    /// Refines `result`'s SLA operating point by simulation (`sla_refine`, at most `max_steps`
    /// extra level runs of the whole plan) and stores it in `result.refined_operating_point`
    /// (left `None` when there is no crossing to refine).
    pub fn refine(&self, result: &mut SweepResult, max_steps: usize) -> Result<(), ScenarioError> {
        result.refined_operating_point = crate::sla_refine::refine_operating_point(
            &self.plan(),
            &self.workload,
            &self.sweep,
            &result.levels,
            max_steps,
        )
        .map_err(ScenarioError::Sweep)?;
        Ok(())
    }

    pub fn run(&self) -> Result<SweepResult, ScenarioError> {
        let mut r = self.runner()?;
        while let Some(step) = r.step() {
            step.map_err(ScenarioError::Sweep)?;
        }
        Ok(r.finish())
    }
}

/// The capacity figures shown next to a sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CapacitySummary {
    pub fits: bool,
    pub reason: String,
    pub engines: u32,
    pub num_gpus: u32,
    pub block_size: u32,
    /// KV blocks per engine (vLLM's `num_gpu_blocks`).
    pub num_gpu_blocks: u64,
    /// KV tokens per engine and over all engines (capacity report's headline convention).
    pub kv_cache_tokens: u64,
    pub kv_cache_tokens_total: u64,
    pub max_concurrency: f64,
    pub kv_cache_memory_gib: f64,
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub max_model_len: u64,
    pub notes: Vec<String>,
    /// The CPU KV offload tier (absent without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_tier: Option<crate::offload::CpuTierReport>,
}

impl CapacitySummary {
    pub fn of(c: &CapacityReport) -> CapacitySummary {
        CapacitySummary {
            fits: c.fits,
            reason: c.reason.clone(),
            engines: c.engines,
            num_gpus: c.num_gpus,
            block_size: c.block_size,
            num_gpu_blocks: c.num_blocks,
            kv_cache_tokens: c.kv_cache_tokens,
            kv_cache_tokens_total: c.kv_cache_tokens_total,
            max_concurrency: c.max_concurrency,
            kv_cache_memory_gib: c.breakdown.kv_pool.gib,
            max_num_seqs: c.max_num_seqs,
            max_num_batched_tokens: c.max_num_batched_tokens,
            max_model_len: c.max_model_len,
            notes: c.notes.clone(),
            cpu_tier: c.cpu_tier.clone(),
        }
    }
}

/// The JSON `servesim sweep --json` prints (and the page exports): the scenario, its capacity,
/// every level's metrics and the SLA operating point.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport<'a> {
    pub scenario: Value,
    /// The efficiency table used ([`Calibration`]).
    pub calibration: Calibration,
    /// The measured evidence for that table and the model's family
    /// ([`ResolvedScenario::evidence`], one sentence).
    pub evidence: String,
    pub capacity: CapacitySummary,
    pub levels: &'a [LevelResult],
    pub operating_point: Option<&'a OperatingPoint>,
    pub cancelled: bool,
    /// [`ResolvedScenario::warnings`] (absent when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Per-replica results per level (plans with more than one replica; omitted otherwise).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub topology: &'a [crate::topology::TopologyLevel],
    /// The operating point refined by simulation (`--refine-sla`; absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refined_operating_point: Option<&'a crate::sla_refine::Refinement>,
    /// Disaggregated deployments: each pool's capacity (`capacity` above is the decode pool's)
    /// and the KV transfer model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disaggregated: Option<DisaggSummary>,
}

/// The pools' capacity and the transfer model of a disaggregated deployment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DisaggSummary {
    pub prefill_capacity: CapacitySummary,
    pub decode_capacity: CapacitySummary,
    pub kv_transfer: crate::topology::KvTransferModel,
}

impl<'a> SweepReport<'a> {
    pub fn new(s: &Scenario, r: &ResolvedScenario, result: &'a SweepResult) -> SweepReport<'a> {
        SweepReport {
            scenario: s.to_value(),
            calibration: r.calibration.clone(),
            evidence: r.evidence().summary,
            capacity: CapacitySummary::of(&r.capacity),
            levels: &result.levels,
            operating_point: result.operating_point.as_ref(),
            cancelled: result.cancelled,
            warnings: r.warnings(),
            topology: &result.topology,
            refined_operating_point: result.refined_operating_point.as_ref(),
            disaggregated: r.disagg.as_ref().map(|d| DisaggSummary {
                prefill_capacity: CapacitySummary::of(&d.prefill.capacity),
                decode_capacity: CapacitySummary::of(&r.capacity),
                kv_transfer: d.transfer.clone(),
            }),
        }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }
}
