//! Configuration search: which deployment of a model serves a workload under an SLA with the
//! most tokens per GPU, or at the lowest cost? A [`RawSearch`] (a base scenario plus the options
//! to try) validates into a [`SearchSpace`] of candidate scenarios; each candidate is pruned
//! (over the GPU budget, cannot start, or hopeless by a cheap bound) or simulated as a normal
//! sweep with its SLA operating point refined by simulation; [`assemble`] ranks the results and
//! draws the Pareto frontier of tok/s per GPU against tok/s per user. Formulas: docs/search.md.
//!
//! The core runs one candidate at a time ([`evaluate`]); the CLI spreads candidates over
//! threads and the page over Web Workers, both collecting results by candidate index, so the
//! report is the same however many run at once.

pub mod cost;

use crate::dtype::{KvCacheDtype, WeightPrecision};
use crate::metric::MetricId;
use crate::metrics::LevelResult;
use crate::scenario::{GpuRef, ResolvedScenario, Scenario};
use crate::sweep::{run_level_plan_streamed, GateOp};
use crate::topology::{RawPool, RawTopology};
use crate::workload::Level;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The most candidates one search enumerates (a stated limit: above it the search is refused
/// with the count and the options to narrow).
pub const MAX_CANDIDATES: usize = 2_000;
/// Largest GPU budget accepted.
pub const MAX_GPUS: u32 = 4_096;
/// Largest `max_num_batched_tokens` value accepted (the scenario's token bound).
pub const MAX_BATCHED_TOKENS: u32 = 100_000_000;
/// Default bisection steps for each candidate's operating point.
pub const DEFAULT_REFINE_STEPS: usize = 6;

/// A search as written (JSON; the CLI's `servesim search` flags build the same).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    /// Model, workload, sweep levels, SLA gates and engine settings every candidate starts
    /// from.
    pub base: Scenario,
    /// GPU types to try (catalog ids or names); default: the base scenario's GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<String>>,
    /// GPU budget: candidates needing more GPUs are pruned.
    pub max_gpus: u32,
    /// Tensor-parallel sizes; default 1, 2, 4, 8 up to the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tp: Option<Vec<u32>>,
    /// Data-parallel sizes (attention DP ranks per replica); default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dp: Option<Vec<u32>>,
    /// Expert parallelism off/on (`--enable-expert-parallel`: ep = tp x dp); MoE models only.
    /// Default: both for MoE models, off for dense ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_parallel: Option<Vec<bool>>,
    /// Replicas behind the base scenario's router; default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<u32>>,
    /// Speculative decoding off/on (on = the base scenario's `speculative_config` and stated
    /// acceptance). Default: both when the base has one, off otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Vec<bool>>,
    /// KV cache dtypes; default the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_cache_dtypes: Option<Vec<KvCacheDtype>>,
    /// `max_num_seqs` values; default the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<Vec<u32>>,
    /// Weight precisions (`checkpoint`, `bf16`, `fp8`, `fp4`, `int4`, `int8`), each as vLLM
    /// serves the base's checkpoint at it (`ModelConfig::checkpoint.serving_precision`): one
    /// the checkpoint already is merges with `checkpoint`, one vLLM cannot serve it at is
    /// pruned with the reason. Default: the base's `weight_precision` as stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_precisions: Option<Vec<WeightPrecision>>,
    /// `max_num_batched_tokens` values for the aggregated candidates and, unless
    /// `disagg.prefill_max_num_batched_tokens` is given, the prefill pool; default the base's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<Vec<u32>>,
    /// $ per GPU-hour by GPU id, overriding the defaults (`search::cost::DEFAULT_PRICES`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_hour_usd: BTreeMap<String, f64>,
    /// Bisection steps refining each candidate's operating point (default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refine_steps: Option<usize>,
    /// Stop a candidate whose first level passes at its first failing level, the last one its
    /// operating point depends on; the levels after it are listed as skipped and are missing
    /// from the frontier (default false: every sweep level is simulated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at_crossing: Option<bool>,
    /// Disaggregated prefill/decode candidates (absent: aggregated candidates only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disagg: Option<RawDisaggSpace>,
}

/// The disaggregated part of a search: prefill:decode replica counts and each pool's
/// parallelism, on the base scenario's GPU types (both pools on the same type). The base's
/// `topology.prefill` / `.decode` / `.kv_transfer` (when it has them) are the templates: their
/// engine overrides, routers and transfer settings carry over to every P/D candidate.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDisaggSpace {
    /// `prefill:decode` replica counts, e.g. `["1:1", "1:2", "2:1"]` (default `["1:1"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pd_ratios: Option<Vec<String>>,
    /// Prefill pool TP sizes (default: the search's `tp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tp: Option<Vec<u32>>,
    /// Prefill pool DP sizes (default: the search's `dp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_dp: Option<Vec<u32>>,
    /// Prefill pool expert parallelism off/on (default: the search's `expert_parallel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_expert_parallel: Option<Vec<bool>>,
    /// Decode pool TP sizes (default: the search's `tp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_tp: Option<Vec<u32>>,
    /// Decode pool DP sizes (default: the search's `dp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_dp: Option<Vec<u32>>,
    /// Decode pool expert parallelism off/on (default: the search's `expert_parallel`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_expert_parallel: Option<Vec<bool>>,
    /// Prefill pool `max_num_batched_tokens` values (default: the search's
    /// `max_num_batched_tokens`, else the template pool's or the base's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_max_num_batched_tokens: Option<Vec<u32>>,
    /// Decode pool `max_num_batched_tokens` values (default: the template pool's or the
    /// base's, not the search's list: a decode step schedules at most `max_num_seqs x (1 + k)`
    /// tokens, so the budget does not chunk anything there; docs/search.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_max_num_batched_tokens: Option<Vec<u32>>,
    /// Also enumerate the aggregated candidates (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregated: Option<bool>,
}

/// One pool of a disaggregated candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PoolShape {
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
    pub replicas: u32,
    /// The pool's `max_num_batched_tokens` when the search sets it (`None`: the base's or the
    /// template pool's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
}

impl PoolShape {
    /// GPUs of the pool: replicas x tp x dp.
    pub fn gpus(&self) -> u32 {
        self.replicas
            .saturating_mul(self.tp)
            .saturating_mul(self.dp)
    }
}

/// Parses `P:D` (prefill and decode replica counts, each 1..=`MAX_GPUS`).
pub fn parse_pd_ratio(text: &str) -> Result<(u32, u32), SearchError> {
    let bad = || {
        serr(
            "disagg.pd_ratios",
            format!("\"{text}\""),
            format!("write PREFILL:DECODE replica counts, each 1..{MAX_GPUS}, e.g. \"1:2\""),
        )
    };
    let (p, d) = text.split_once(':').ok_or_else(bad)?;
    let p: u32 = p.trim().parse().map_err(|_| bad())?;
    let d: u32 = d.trim().parse().map_err(|_| bad())?;
    if p == 0 || d == 0 || p > MAX_GPUS || d > MAX_GPUS {
        return Err(bad());
    }
    Ok((p, d))
}

/// A search field at fault, the value, and the fix.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`search.{field}` = {value} is invalid: {fix}")]
pub struct SearchError {
    pub field: String,
    pub value: String,
    pub fix: String,
}

fn serr(field: &str, value: impl ToString, fix: impl Into<String>) -> SearchError {
    SearchError {
        field: field.into(),
        value: value.to_string(),
        fix: fix.into(),
    }
}

/// One deployment to try.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    pub index: usize,
    /// e.g. `H200 TP8 DP1 EP8 x1, kv auto, spec on`.
    pub label: String,
    /// Catalog GPU id.
    pub gpu: String,
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
    pub replicas: u32,
    pub speculative: bool,
    pub kv_cache_dtype: KvCacheDtype,
    pub max_num_seqs: Option<u32>,
    /// The scenario's `weight_precision` when the search sets it (`None`: the base's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight_precision: Option<WeightPrecision>,
    /// `max_num_batched_tokens` when the search sets it (disaggregated: the decode pool's;
    /// the prefill pool's is in `prefill`). `None`: the base's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
    /// Disaggregated candidates: the prefill pool (`tp`, `dp`, `ep` and `replicas` above are
    /// then the decode pool's). `None`: aggregated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefill: Option<PoolShape>,
    /// GPUs the candidate uses: tp x dp x replicas (disaggregated: summed over both pools).
    pub num_gpus: u32,
    /// $ per GPU-hour used for it (`None`: no price known for this GPU).
    pub usd_per_gpu_hour: Option<f64>,
    /// The scenario it runs (opens as a normal scenario and link).
    pub scenario: Scenario,
}

/// A validated search: its candidates in enumeration order.
#[derive(Clone, Debug)]
pub struct SearchSpace {
    pub candidates: Vec<Candidate>,
    pub max_gpus: u32,
    pub refine_steps: usize,
    /// Stop at the first failing level after a passing first level (else every sweep level).
    pub stop_at_crossing: bool,
    /// The SLA gates (the base scenario's).
    pub sla: Vec<crate::sweep::RawGate>,
    /// Price used per GPU id and its source.
    pub prices: BTreeMap<String, PriceUsed>,
    /// The measured evidence per GPU id: ServeSim's error on the public runs of the base's model
    /// family fitted in the calibration key that GPU's candidates use ([`crate::evidence`]).
    pub evidence: BTreeMap<String, String>,
    /// Option values merged into another because they give the same candidates (e.g. `fp8`
    /// weights of an fp8 checkpoint are `checkpoint`).
    pub merged: usize,
    /// What the search did with the options, one line each: every merge, and a precision
    /// written as the one vLLM serves the checkpoint at (`fp8` of an fp8 checkpoint is
    /// `checkpoint`).
    pub notes: Vec<String>,
    /// Weight precisions vLLM cannot serve the base's checkpoint at, with the reason: their
    /// candidates are pruned (capacity stage).
    pub refused_precisions: Vec<(WeightPrecision, String)>,
}

/// The price a search uses for one GPU type.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PriceUsed {
    pub usd_per_gpu_hour: Option<f64>,
    /// `given` or the default's source; or why there is none.
    pub source: String,
}

impl RawSearch {
    pub fn from_json(text: &str) -> Result<RawSearch, SearchError> {
        serde_json::from_str(text.trim_start_matches('\u{feff}'))
            .map_err(|e| serr("", "(the JSON)", e.to_string()))
    }

    /// Validates every option and enumerates the candidates: per GPU type, the aggregated ones
    /// (TP, DP, EP, speculation, KV dtype, `max_num_seqs`, replicas; in that nesting order),
    /// then the disaggregated ones (P:D ratio, prefill TP, DP, EP, decode TP, DP, EP,
    /// speculation, KV dtype, `max_num_seqs`).
    pub fn validate(&self) -> Result<SearchSpace, SearchError> {
        if self.max_gpus == 0 || self.max_gpus > MAX_GPUS {
            return Err(serr(
                "max_gpus",
                self.max_gpus,
                format!("give a GPU budget between 1 and {MAX_GPUS}"),
            ));
        }
        let base_gpu = match &self.base.gpu {
            GpuRef::Catalog(id) => id.clone(),
            GpuRef::Custom(g) => g.name.clone(),
        };
        let gpu_names = self.gpus.clone().unwrap_or_else(|| vec![base_gpu]);
        if gpu_names.is_empty() || gpu_names.len() > 16 {
            return Err(serr(
                "gpus",
                gpu_names.len(),
                "give between 1 and 16 GPU types",
            ));
        }
        let mut gpus = Vec::new();
        for g in &gpu_names {
            let spec = match (&self.base.gpu, g) {
                (GpuRef::Custom(c), name) if c.name == *name => c.name.clone(),
                _ => {
                    crate::gpu::find_gpu(g)
                        .map_err(|e| serr("gpus", g, e.to_string()))?
                        .id
                }
            };
            if !gpus.contains(&spec) {
                gpus.push(spec);
            }
        }
        for (k, v) in &self.gpu_hour_usd {
            if !(v.is_finite() && *v >= 0.0 && *v <= 1_000.0) {
                return Err(serr(
                    &format!("gpu_hour_usd.{k}"),
                    v,
                    "give $ per GPU-hour between 0 and 1000",
                ));
            }
        }
        // The evidence each GPU's candidates are predicted on: its calibration key for the
        // base's vLLM release line and the base's model family.
        let mut evidence = BTreeMap::new();
        let prompts = self
            .base
            .workload
            .validate()
            .ok()
            .and_then(|w| w.content.nominal_prompt_tokens());
        if let (Ok(model), Ok(era)) = (self.base.model_config(), self.base.engine_era()) {
            for g in &gpus {
                if let Ok(spec) = crate::gpu::find_gpu(g) {
                    let cal = crate::scenario::Calibration::of(
                        spec.generation,
                        era,
                        self.base.efficiencies.as_ref(),
                    );
                    evidence.insert(
                        g.clone(),
                        crate::evidence::quoted(&cal, &model, prompts).summary,
                    );
                }
            }
        }
        let mut prices = BTreeMap::new();
        for g in &gpus {
            let given = self
                .gpu_hour_usd
                .iter()
                .find(|(k, _)| {
                    k.eq_ignore_ascii_case(g) || crate::gpu::find_gpu(k).is_ok_and(|s| s.id == *g)
                })
                .map(|(_, v)| *v);
            let p = match (given, cost::default_price(g)) {
                (Some(v), _) => PriceUsed {
                    usd_per_gpu_hour: Some(v),
                    source: "given".into(),
                },
                (None, Some(d)) => PriceUsed {
                    usd_per_gpu_hour: Some(d.usd_per_gpu_hour),
                    source: d.source.into(),
                },
                (None, None) => PriceUsed {
                    usd_per_gpu_hour: None,
                    source: format!("no default price for {g}: give gpu_hour_usd.{g} (CLI --gpu-hour-usd {g}=PRICE) for costs"),
                },
            };
            prices.insert(g.clone(), p);
        }
        let list = |field: &str, v: &Option<Vec<u32>>, default: Vec<u32>, max: u32| {
            let v = v.clone().unwrap_or(default);
            if v.is_empty() {
                return Err(serr(field, "[]", "give at least one value"));
            }
            for x in &v {
                if *x == 0 || *x > max {
                    return Err(serr(
                        field,
                        x,
                        format!("each value must be between 1 and {max}"),
                    ));
                }
            }
            let mut v = v;
            v.sort_unstable();
            v.dedup();
            Ok(v)
        };
        let default_tp: Vec<u32> = [1, 2, 4, 8]
            .into_iter()
            .filter(|t| *t <= self.max_gpus)
            .collect();
        let tps = list("tp", &self.tp, default_tp, 64)?;
        let dps = list("dp", &self.dp, vec![1], 256)?;
        let replicas = list("replicas", &self.replicas, vec![1], MAX_GPUS)?;
        let mnss = match &self.max_num_seqs {
            None => vec![None],
            Some(v) => list("max_num_seqs", &Some(v.clone()), vec![], 65_536)?
                .into_iter()
                .map(Some)
                .collect(),
        };
        let is_moe = self
            .base
            .deployment()
            .map(|d| d.model.moe.is_some())
            .unwrap_or(false);
        let mnbts = match &self.max_num_batched_tokens {
            None => vec![None],
            Some(v) => list(
                "max_num_batched_tokens",
                &Some(v.clone()),
                vec![],
                MAX_BATCHED_TOKENS,
            )?
            .into_iter()
            .map(Some)
            .collect(),
        };
        // Weight precisions, as vLLM serves the base's checkpoint at each.
        let mut merged = 0;
        let mut notes = Vec::new();
        let mut refused_precisions = Vec::new();
        let wps: Vec<Option<WeightPrecision>> = match &self.weight_precisions {
            None => vec![None],
            Some(v) if v.is_empty() => {
                return Err(serr(
                    "weight_precisions",
                    "[]",
                    "give at least one precision (checkpoint, bf16, fp8, fp4, int4, int8)",
                ))
            }
            Some(v) => {
                let model = self.base.model_config().map_err(|e| {
                    serr(
                        "weight_precisions",
                        "(the base's model)",
                        format!("the base scenario's model does not load: {e}"),
                    )
                })?;
                let mut out: Vec<Option<WeightPrecision>> = Vec::new();
                let mut seen = Vec::new();
                // (the first value asked, what it is served as)
                let mut first: Vec<(WeightPrecision, WeightPrecision)> = Vec::new();
                for &p in v {
                    if seen.contains(&p) {
                        continue;
                    }
                    seen.push(p);
                    match model.checkpoint.serving_precision(p) {
                        Ok(e) => match first.iter().find(|(_, f)| *f == e) {
                            Some(&(q, _)) => {
                                merged += 1;
                                notes.push(format!(
                                    "weight precision {} merged with {}: vLLM serves this checkpoint at both as {}",
                                    p.name(),
                                    q.name(),
                                    e.name()
                                ));
                            }
                            None => {
                                if e != p {
                                    notes.push(format!(
                                        "weight precision {}: vLLM serves this checkpoint at {} as {}",
                                        p.name(),
                                        p.name(),
                                        e.name()
                                    ));
                                }
                                first.push((p, e));
                                out.push(Some(e));
                            }
                        },
                        Err(why) => {
                            out.push(Some(p));
                            refused_precisions.push((p, why));
                        }
                    }
                }
                out
            }
        };
        let eps = on_off(
            "expert_parallel",
            &self.expert_parallel,
            is_moe,
            "the model has no experts; drop expert_parallel",
        )?;
        let has_spec = self.base.engine.speculative_config.is_some();
        let specs = on_off(
            "speculative",
            &self.speculative,
            has_spec,
            "the base scenario has no engine.speculative_config (and acceptance) to turn on; add them to the base",
        )?;
        let kvs = match &self.kv_cache_dtypes {
            Some(v) if v.is_empty() => {
                return Err(serr("kv_cache_dtypes", "[]", "give at least one dtype"))
            }
            Some(v) => {
                let mut out: Vec<KvCacheDtype> = Vec::new();
                for k in v {
                    if !out.contains(k) {
                        out.push(*k);
                    }
                }
                out
            }
            None => vec![self.base.kv_cache_dtype],
        };
        let opt_list = |field: &str, v: &Vec<u32>| -> Result<Vec<Option<u32>>, SearchError> {
            Ok(list(field, &Some(v.clone()), vec![], MAX_BATCHED_TOKENS)?
                .into_iter()
                .map(Some)
                .collect())
        };
        // The disaggregated options: each pool's lists default to the search's own (the decode
        // pool's max_num_batched_tokens: the template's).
        let pd = match &self.disagg {
            None => None,
            Some(d) => {
                let ratios = match &d.pd_ratios {
                    Some(v) if v.is_empty() => {
                        return Err(serr(
                            "disagg.pd_ratios",
                            "[]",
                            "give at least one PREFILL:DECODE ratio, e.g. \"1:1\"",
                        ))
                    }
                    Some(v) => {
                        let mut out = Vec::new();
                        for t in v {
                            let r = parse_pd_ratio(t)?;
                            if !out.contains(&r) {
                                out.push(r);
                            }
                        }
                        out
                    }
                    None => vec![(1, 1)],
                };
                let ep_list = |field: &str, v: &Option<Vec<bool>>| match v {
                    None => Ok(eps.clone()),
                    Some(_) => on_off(field, v, is_moe, "the model has no experts; drop it"),
                };
                Some(PdLists {
                    ratios,
                    ptp: list(
                        "disagg.prefill_tp",
                        &d.prefill_tp.clone().or(Some(tps.clone())),
                        vec![],
                        64,
                    )?,
                    pdp: list(
                        "disagg.prefill_dp",
                        &d.prefill_dp.clone().or(Some(dps.clone())),
                        vec![],
                        256,
                    )?,
                    pep: ep_list("disagg.prefill_expert_parallel", &d.prefill_expert_parallel)?,
                    dtp: list(
                        "disagg.decode_tp",
                        &d.decode_tp.clone().or(Some(tps.clone())),
                        vec![],
                        64,
                    )?,
                    ddp: list(
                        "disagg.decode_dp",
                        &d.decode_dp.clone().or(Some(dps.clone())),
                        vec![],
                        256,
                    )?,
                    dep: ep_list("disagg.decode_expert_parallel", &d.decode_expert_parallel)?,
                    pmnbt: match &d.prefill_max_num_batched_tokens {
                        None => mnbts.clone(),
                        Some(v) => opt_list("disagg.prefill_max_num_batched_tokens", v)?,
                    },
                    dmnbt: match &d.decode_max_num_batched_tokens {
                        None => vec![None],
                        Some(v) => opt_list("disagg.decode_max_num_batched_tokens", v)?,
                    },
                    aggregated: d.aggregated.unwrap_or(true),
                })
            }
        };
        let aggregated = pd.as_ref().is_none_or(|p| p.aggregated);
        let common = gpus.len() * specs.len() * wps.len() * kvs.len() * mnss.len();
        let n_agg = if aggregated {
            tps.len() * dps.len() * eps.len() * mnbts.len() * replicas.len()
        } else {
            0
        };
        let n_pd = pd.as_ref().map_or(0, |p| {
            p.ratios.len()
                * p.ptp.len()
                * p.pdp.len()
                * p.pep.len()
                * p.dtp.len()
                * p.ddp.len()
                * p.dep.len()
                * p.pmnbt.len()
                * p.dmnbt.len()
        });
        let n = common.saturating_mul(n_agg.saturating_add(n_pd));
        if n > MAX_CANDIDATES {
            return Err(serr(
                "",
                format!("{n} candidates"),
                format!("at most {MAX_CANDIDATES} candidates per search; give fewer values for gpus, tp, dp, expert_parallel, speculative, weight_precisions, kv_cache_dtypes, max_num_seqs, max_num_batched_tokens, replicas or the disagg lists"),
            ));
        }
        let refine_steps = self.refine_steps.unwrap_or(DEFAULT_REFINE_STEPS);
        if refine_steps > 32 {
            return Err(serr(
                "refine_steps",
                refine_steps,
                "give 0 to 32 bisection steps",
            ));
        }
        // The P/D layouts (each GPU type's, after its aggregated candidates).
        let mut pd_layouts: Vec<Layout> = Vec::new();
        if let Some(p) = &pd {
            for &(pr, dr) in &p.ratios {
                for &ptp in &p.ptp {
                    for &pdp in &p.pdp {
                        for &pep in &p.pep {
                            for &dtp in &p.dtp {
                                for &ddp in &p.ddp {
                                    for &dep in &p.dep {
                                        let shape =
                                            |tp: u32, dp: u32, ep: bool, r: u32| PoolShape {
                                                tp,
                                                dp,
                                                ep: if ep { tp.saturating_mul(dp) } else { 1 },
                                                replicas: r,
                                                max_num_batched_tokens: None,
                                            };
                                        pd_layouts.push(Layout::Disagg(
                                            shape(ptp, pdp, pep, pr),
                                            shape(dtp, ddp, dep, dr),
                                        ));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut candidates = Vec::with_capacity(n);
        for g in &gpus {
            let price = prices[g].usd_per_gpu_hour;
            if aggregated {
                // nesting: TP, DP, EP, speculation, weight precision, KV dtype,
                // max_num_seqs, max_num_batched_tokens, replicas
                for &tp in &tps {
                    for &dp in &dps {
                        for &ep_on in &eps {
                            for &spec in &specs {
                                for &wp in &wps {
                                    for &kv in &kvs {
                                        for &mns in &mnss {
                                            for &mnbt in &mnbts {
                                                for &r in &replicas {
                                                    let layout = Layout::Aggregated(PoolShape {
                                                        tp,
                                                        dp,
                                                        ep: if ep_on {
                                                            tp.saturating_mul(dp)
                                                        } else {
                                                            1
                                                        },
                                                        replicas: r,
                                                        max_num_batched_tokens: mnbt,
                                                    });
                                                    let k = Knobs { spec, wp, kv, mns };
                                                    candidates.push(self.candidate(
                                                        candidates.len(),
                                                        g,
                                                        &layout,
                                                        k,
                                                        price,
                                                    ));
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            // nesting: the layout, speculation, weight precision, KV dtype, max_num_seqs,
            // prefill then decode max_num_batched_tokens
            let (pm, dm) = pd
                .as_ref()
                .map_or((vec![], vec![]), |p| (p.pmnbt.clone(), p.dmnbt.clone()));
            for layout in &pd_layouts {
                for &spec in &specs {
                    for &wp in &wps {
                        for &kv in &kvs {
                            for &mns in &mnss {
                                for &pb in &pm {
                                    for &db in &dm {
                                        let layout = match *layout {
                                            Layout::Disagg(p, d) => Layout::Disagg(
                                                PoolShape {
                                                    max_num_batched_tokens: pb,
                                                    ..p
                                                },
                                                PoolShape {
                                                    max_num_batched_tokens: db,
                                                    ..d
                                                },
                                            ),
                                            a => a,
                                        };
                                        let k = Knobs { spec, wp, kv, mns };
                                        candidates.push(self.candidate(
                                            candidates.len(),
                                            g,
                                            &layout,
                                            k,
                                            price,
                                        ));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        // A GPU whose candidates run fp8 GEMMs on a table that prices them no faster than bf16 is
        // quoted that caveat with its evidence (docs/accuracy.md "Misses" 9): the search ranks
        // precisions against each other there.
        for g in &gpus {
            let mut seen: Vec<Option<WeightPrecision>> = Vec::new();
            for c in candidates.iter().filter(|c| c.gpu == *g) {
                if seen.contains(&c.weight_precision) {
                    continue;
                }
                seen.push(c.weight_precision);
                if let Some(n) = c.scenario.fp8_no_faster_than_bf16_note() {
                    if let Some(e) = evidence.get_mut(g) {
                        e.push_str(&n);
                    }
                    break;
                }
            }
        }
        Ok(SearchSpace {
            candidates,
            max_gpus: self.max_gpus,
            refine_steps,
            stop_at_crossing: self.stop_at_crossing.unwrap_or(false),
            sla: self.base.sweep.sla.clone(),
            prices,
            evidence,
            merged,
            notes,
            refused_precisions,
        })
    }

    fn candidate(
        &self,
        index: usize,
        gpu: &str,
        layout: &Layout,
        k: Knobs,
        price: Option<f64>,
    ) -> Candidate {
        let Knobs { spec, wp, kv, mns } = k;
        let mut s = self.base.clone();
        if let Some(p) = wp {
            s.weight_precision = p;
        }
        if !matches!(&s.gpu, GpuRef::Custom(c) if c.name == gpu) {
            s.gpu = GpuRef::Catalog(gpu.to_string());
        }
        s.num_gpus = None;
        s.kv_cache_dtype = kv;
        if !spec {
            s.engine.speculative_config = None;
            s.engine.speculative_acceptance = None;
        }
        if let Some(m) = mns {
            s.engine.max_num_seqs = Some(m as i64);
        }
        let mut topo = s.topology.clone().unwrap_or_default();
        let (main, prefill) = match *layout {
            Layout::Aggregated(a) => {
                // an aggregated candidate from a P/D base: the pools are dropped
                topo.prefill = None;
                topo.decode = None;
                topo.kv_transfer = None;
                topo.replicas = (a.replicas > 1).then_some(a.replicas);
                if let Some(b) = a.max_num_batched_tokens {
                    s.engine.max_num_batched_tokens = Some(b as i64);
                }
                (a, None)
            }
            Layout::Disagg(p, d) => {
                topo.replicas = None;
                let pool = |t: Option<&RawPool>, x: PoolShape| {
                    let mut out = t.cloned().unwrap_or_default();
                    out.gpu = None;
                    out.tp = Some(x.tp);
                    out.dp = Some(x.dp);
                    out.ep = Some(x.ep);
                    out.replicas = Some(x.replicas);
                    if let Some(b) = x.max_num_batched_tokens {
                        out.engine
                            .get_or_insert_with(Default::default)
                            .max_num_batched_tokens = Some(b as i64);
                    }
                    if let Some(e) = out.engine.as_mut() {
                        // the candidate's options win over the template pool's overrides
                        if mns.is_some() {
                            e.max_num_seqs = None;
                        }
                        if !spec {
                            e.speculative_config = None;
                            e.speculative_acceptance = None;
                        }
                    }
                    out
                };
                topo.prefill = Some(pool(topo.prefill.as_ref(), p));
                topo.decode = Some(pool(topo.decode.as_ref(), d));
                (d, Some(p))
            }
        };
        // top-level parallelism: the aggregated layout's, or the decode pool's
        s.tp = main.tp;
        s.dp = main.dp;
        s.ep = main.ep;
        s.topology = (topo != RawTopology::default()).then_some(topo);
        let mnbt = |pool: &str, b: Option<u32>| {
            b.map(|b| format!(", {pool}max_num_batched_tokens {b}"))
                .unwrap_or_default()
        };
        let tail = format!(
            "{}, kv {}, spec {}{}{}{}",
            wp.map(|p| format!(", weights {}", p.name()))
                .unwrap_or_default(),
            kv.name(),
            if spec { "on" } else { "off" },
            mns.map(|m| format!(", max_num_seqs {m}"))
                .unwrap_or_default(),
            mnbt(
                if prefill.is_some() { "prefill " } else { "" },
                prefill.map_or(main.max_num_batched_tokens, |p| p.max_num_batched_tokens)
            ),
            mnbt("decode ", prefill.and(main.max_num_batched_tokens)),
        );
        let (label, num_gpus) = match prefill {
            None => (
                format!(
                    "{gpu} TP{} DP{} EP{} x{}{tail}",
                    main.tp, main.dp, main.ep, main.replicas
                ),
                main.gpus(),
            ),
            Some(p) => (
                format!(
                    "{gpu} {}P{}D prefill TP{} DP{} EP{}, decode TP{} DP{} EP{}{tail}",
                    p.replicas, main.replicas, p.tp, p.dp, p.ep, main.tp, main.dp, main.ep
                ),
                p.gpus().saturating_add(main.gpus()),
            ),
        };
        Candidate {
            index,
            label,
            gpu: gpu.to_string(),
            tp: main.tp,
            dp: main.dp,
            ep: main.ep,
            replicas: main.replicas,
            speculative: spec,
            kv_cache_dtype: kv,
            max_num_seqs: mns,
            weight_precision: wp,
            max_num_batched_tokens: main.max_num_batched_tokens,
            prefill,
            num_gpus,
            usd_per_gpu_hour: price,
            scenario: s,
        }
    }
}

/// The disaggregated option lists, validated.
struct PdLists {
    ratios: Vec<(u32, u32)>,
    ptp: Vec<u32>,
    pdp: Vec<u32>,
    pep: Vec<bool>,
    dtp: Vec<u32>,
    ddp: Vec<u32>,
    dep: Vec<bool>,
    pmnbt: Vec<Option<u32>>,
    dmnbt: Vec<Option<u32>>,
    aggregated: bool,
}

/// A candidate's options besides its layout.
#[derive(Clone, Copy, Debug)]
struct Knobs {
    spec: bool,
    wp: Option<WeightPrecision>,
    kv: KvCacheDtype,
    mns: Option<u32>,
}

/// A candidate's layout: one aggregated pool, or (prefill, decode) pools.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Aggregated(PoolShape),
    Disagg(PoolShape, PoolShape),
}

/// An off/on option: the values given (deduplicated; `true` only when `possible`, else the
/// error `why_not`), or by default both when possible and off otherwise.
fn on_off(
    field: &str,
    given: &Option<Vec<bool>>,
    possible: bool,
    why_not: &str,
) -> Result<Vec<bool>, SearchError> {
    match given {
        Some(v) if v.is_empty() => Err(serr(field, "[]", "give false, true or both")),
        Some(v) if v.contains(&true) && !possible => Err(serr(field, "true", why_not)),
        Some(v) => {
            let mut out = Vec::new();
            for b in v {
                if !out.contains(b) {
                    out.push(*b);
                }
            }
            Ok(out)
        }
        None if possible => Ok(vec![false, true]),
        None => Ok(vec![false]),
    }
}

/// Why a candidate was not simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum PruneStage {
    /// Needs more GPUs than the budget.
    Budget,
    /// The scenario is invalid for this layout, or vLLM would not start (capacity model).
    Capacity,
    /// A cheap bound shows no level can pass the SLA.
    Bound,
}

/// What happened to one candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Pruned {
        stage: PruneStage,
        reason: String,
    },
    /// Simulated, but the run failed (budget, caps): the message says which setting to change.
    Failed {
        error: String,
    },
    Evaluated {
        levels: Vec<LevelPoint>,
        operating_point: Option<OperatingPoint>,
        /// Sweep levels not simulated with `stop_at_crossing`: after the first failing level
        /// (which follows a passing first level) they cannot move the operating point.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped_levels: Vec<f64>,
    },
}

impl Outcome {
    /// One line for progress output (`servesim search`'s `[k/n] label: ...`, the page's
    /// per-candidate status).
    pub fn summary(&self) -> String {
        match self {
            Outcome::Pruned { stage, reason } => format!("pruned ({stage:?}): {reason}"),
            Outcome::Failed { error } => format!("failed: {error}"),
            Outcome::Evaluated {
                operating_point: Some(op),
                ..
            } => format!(
                "level {} -> {:.1} tok/s/GPU at the SLA",
                op.level, op.output_tokens_per_s_per_gpu
            ),
            Outcome::Evaluated { .. } => "no level passes the SLA".into(),
        }
    }
}

/// One simulated level of a candidate (a point on the frontier chart).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelPoint {
    pub level: f64,
    pub passes_sla: bool,
    /// `None` when the level's window has no rate (docs/metrics.md "Window").
    pub output_tokens_per_s_per_gpu: Option<f64>,
    pub e2e_tokens_per_s_per_user: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub usd_per_m_output_tokens: Option<f64>,
    pub usd_per_m_input_tokens: Option<f64>,
}

/// A candidate at its SLA operating point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperatingPoint {
    /// The highest simulated level that passes every gate.
    pub level: f64,
    /// `refined`: found by bisection between the sweep levels (each step simulated);
    /// `sweep_level`: the highest sweep level, with no crossing to refine (every level passes:
    /// the true point is at least this).
    pub basis: String,
    pub output_tokens_per_s: f64,
    pub output_tokens_per_s_per_gpu: f64,
    pub e2e_tokens_per_s_per_user: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub usd_per_m_output_tokens: Option<f64>,
    pub usd_per_m_input_tokens: Option<f64>,
    /// Clients (or req/s) the whole GPU budget serves: level x floor(max_gpus / num_gpus)
    /// replicas of this candidate (N replicas behind round-robin serve N times one: tested in
    /// tests/topology.rs).
    pub level_in_budget: f64,
}

/// One candidate's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CandidateResult {
    #[serde(flatten)]
    pub candidate: Candidate,
    pub outcome: Outcome,
}

impl CandidateResult {
    pub fn operating_point(&self) -> Option<&OperatingPoint> {
        match &self.outcome {
            Outcome::Evaluated {
                operating_point, ..
            } => operating_point.as_ref(),
            _ => None,
        }
    }
}

/// The cheap bound on what any level can give one user: a decode step of one sequence at
/// context 1 is the fastest step that emits tokens (the step-time model grows with batch and
/// context), and it emits at most 1 + k tokens (k = drafts with speculative decoding), so
/// `e2e_tokens_per_s_per_user <= (1 + k) / t_min` and likewise output tok/s per user. A
/// disaggregated scenario resolves as its decode pool, so this is the decode pool's bound
/// (`t_min` and `k` of the decode pool, where the tokens after the first are made).
pub fn tokens_per_s_per_user_bound(r: &ResolvedScenario) -> f64 {
    let t = fastest_step_s(r);
    let k = r
        .engine
        .spec
        .as_ref()
        .map_or(0, |s| s.num_speculative_tokens);
    if t > 0.0 {
        (1 + k) as f64 / t
    } else {
        f64::INFINITY
    }
}

/// The step-time model's time for one decoding sequence at context 1, seconds.
fn fastest_step_s(r: &ResolvedScenario) -> f64 {
    r.cost.breakdown_iter(std::iter::empty(), 1, 1).total()
}

/// The bound for one per-user gate metric. `e2e_tokens_per_s_per_user` is
/// `osl / (ttft + osl x itl) <= 1 / itl`, and every inter-token gap is at least one decode
/// step per 1 + k tokens, so the decode pool's bound holds with disaggregation too.
/// `output_tokens_per_s_per_user` (per request `osl / e2e`) also counts requests of one token,
/// made by the prefill pool alone in a step of at least its own `t_min` (no drafter there):
/// with disaggregation the bound is the larger of `(1 + k) / t_min(decode)` and
/// `1 / t_min(prefill)`.
fn per_user_bound(r: &ResolvedScenario, e2e: bool) -> f64 {
    let b = tokens_per_s_per_user_bound(r);
    match &r.disagg {
        Some(d) if !e2e => {
            let t = fastest_step_s(&d.prefill);
            b.max(if t > 0.0 { 1.0 / t } else { f64::INFINITY })
        }
        _ => b,
    }
}

/// Evaluates one candidate: budget, capacity, the cheap bound (when `prune`), then the sweep
/// and the refined operating point.
pub fn evaluate(space: &SearchSpace, c: &Candidate, prune: bool) -> CandidateResult {
    let outcome = evaluate_outcome(space, c, prune);
    CandidateResult {
        candidate: c.clone(),
        outcome,
    }
}

fn evaluate_outcome(space: &SearchSpace, c: &Candidate, prune: bool) -> Outcome {
    if c.num_gpus > space.max_gpus {
        let layout = match &c.prefill {
            None => format!("tp {} x dp {} x {} replicas", c.tp, c.dp, c.replicas),
            Some(p) => format!(
                "prefill {} x tp {} x dp {} + decode {} x tp {} x dp {}",
                p.replicas, p.tp, p.dp, c.replicas, c.tp, c.dp
            ),
        };
        return Outcome::Pruned {
            stage: PruneStage::Budget,
            reason: format!(
                "needs {} GPUs ({layout}), over the budget of {}",
                c.num_gpus, space.max_gpus
            ),
        };
    }
    if let Some((p, why)) = c
        .weight_precision
        .and_then(|p| space.refused_precisions.iter().find(|(q, _)| *q == p))
    {
        return Outcome::Pruned {
            stage: PruneStage::Capacity,
            reason: format!("weight precision {}: {why}", p.name()),
        };
    }
    let r = match c.scenario.resolve() {
        Ok(r) => r,
        Err(e) => {
            return Outcome::Pruned {
                stage: PruneStage::Capacity,
                reason: e.to_string(),
            }
        }
    };
    // Each pool must start (a disaggregated scenario resolves as its decode pool, holding the
    // prefill pool).
    if let Some(d) = &r.disagg {
        if !d.prefill.capacity.fits {
            return Outcome::Pruned {
                stage: PruneStage::Capacity,
                reason: format!(
                    "the prefill pool does not start: {}",
                    d.prefill.capacity.reason
                ),
            };
        }
    }
    if !r.capacity.fits {
        let pool = if r.disagg.is_some() {
            "the decode pool "
        } else {
            ""
        };
        return Outcome::Pruned {
            stage: PruneStage::Capacity,
            reason: format!("{pool}does not start: {}", r.capacity.reason),
        };
    }
    // A layout whose context limit (stated, or auto-fitted to its KV memory) is below every
    // request of the workload would reject them all, as vLLM does.
    if let Some(shortest) = r.workload.shortest_request_tokens() {
        // Both pools of a disaggregated layout must hold the request.
        let mml = r.context_limit();
        if shortest > mml {
            let how = if r.deployment.engine.max_model_len_auto {
                " (auto-fitted to this layout's KV memory)"
            } else {
                ""
            };
            return Outcome::Pruned {
                stage: PruneStage::Capacity,
                reason: format!(
                    "every request ({shortest}+ tokens, prompt + output) exceeds max_model_len {mml}{how}: vLLM rejects them all"
                ),
            };
        }
    }
    if prune {
        for g in &r.sweep.sla {
            let e2e = g.metric == MetricId::from_name("e2e_tokens_per_s_per_user").unwrap();
            let per_user =
                e2e || g.metric == MetricId::from_name("output_tokens_per_s_per_user").unwrap();
            let bound = per_user_bound(&r, e2e);
            let hopeless = per_user
                && match g.op {
                    GateOp::Ge => bound < g.value,
                    GateOp::Gt => bound <= g.value,
                    _ => false,
                };
            if hopeless {
                return Outcome::Pruned {
                    stage: PruneStage::Bound,
                    reason: format!(
                        "even alone a request gets at most {bound:.1} tok/s (fastest {}step {:.2} ms), below the gate {} {}",
                        if r.disagg.is_some() { "decode " } else { "" },
                        1e3 * fastest_step_s(&r),
                        g.metric.name(),
                        g.value
                    ),
                };
            }
        }
    }
    let pass = |l: &LevelResult| r.sweep.sla.iter().all(|g| g.passes(l));
    // The sweep. The operating point depends on the levels up to the first failing one when
    // the first level passes (the refinement bisects that first crossing; with no crossing it
    // is the highest passing level, which needs them all): with `stop_at_crossing`, stop there.
    let mut runner = match r.runner() {
        Ok(x) => x,
        Err(e) => {
            return Outcome::Failed {
                error: e.to_string(),
            }
        }
    };
    let mut first_passes = None;
    while let Some(step) = runner.step() {
        let l = match step {
            Ok(l) => l,
            Err(e) => {
                return Outcome::Failed {
                    error: e.to_string(),
                }
            }
        };
        let ok = pass(l);
        let first = *first_passes.get_or_insert(ok);
        if first && !ok && space.stop_at_crossing {
            break;
        }
    }
    let skipped_levels: Vec<f64> = runner.levels()[runner.done_levels()..]
        .iter()
        .map(|l| l.value())
        .collect();
    let mut result = runner.finish();
    // the refinement's highest passing step (its level result, not simulated twice)
    let mut best_step: Option<LevelResult> = None;
    result.refined_operating_point = match crate::sla_refine::refine_operating_point_observed(
        &r.plan(),
        &r.workload,
        &r.sweep,
        &result.levels,
        space.refine_steps,
        &mut |l, ok| {
            if ok {
                best_step = Some(l.clone());
            }
        },
    ) {
        Ok(x) => x,
        Err(e) => {
            return Outcome::Failed {
                error: e.to_string(),
            }
        }
    };
    // all the candidate's GPUs (both pools when disaggregated)
    let gpus = r.sweep.gpus;
    let price = c.usd_per_gpu_hour;
    let usd = |tps: Option<f64>| {
        price.and_then(|p| tps.and_then(|t| cost::usd_per_million_tokens(gpus, p, t)))
    };
    let levels: Vec<LevelPoint> = result
        .levels
        .iter()
        .map(|l| LevelPoint {
            level: l.level.value(),
            passes_sla: pass(l),
            output_tokens_per_s_per_gpu: l.output_tokens_per_s_per_gpu,
            e2e_tokens_per_s_per_user: l.e2e_tokens_per_s_per_user,
            ttft_ms_p50: l.ttft_ms.map(|d| d.p50),
            usd_per_m_output_tokens: usd(l.output_tokens_per_s),
            usd_per_m_input_tokens: usd(l.input_tokens_per_s),
        })
        .collect();
    // The operating point: the refined highest passing level (re-simulated for its metrics
    // when it is not a sweep level), else the highest passing sweep level when all pass.
    let op_level: Option<(LevelResult, &str)> = match &result.refined_operating_point {
        Some(rf) => {
            let sweep_hit = result
                .levels
                .iter()
                .find(|l| l.level.value() == rf.highest_passing && pass(l));
            let step_hit = best_step
                .take()
                .filter(|l| l.level.value() == rf.highest_passing);
            match (sweep_hit, step_hit) {
                (Some(l), _) => Some((l.clone(), "refined")),
                (None, Some(l)) => Some((l, "refined")),
                (None, None) => {
                    let lvl = match result.levels.first().map(|l| l.level) {
                        Some(Level::Concurrency(_)) => {
                            Level::Concurrency(rf.highest_passing as u32)
                        }
                        _ => Level::RequestRate(rf.highest_passing),
                    };
                    match run_level_plan_streamed(&r.plan(), &r.workload, &r.sweep, lvl) {
                        Ok((l, _)) if pass(&l) => Some((l, "refined")),
                        Ok(_) => None,
                        Err(e) => {
                            return Outcome::Failed {
                                error: e.to_string(),
                            }
                        }
                    }
                }
            }
        }
        None => {
            let all_pass = !result.levels.is_empty() && result.levels.iter().all(pass);
            if all_pass {
                result.levels.last().map(|l| (l.clone(), "sweep_level"))
            } else {
                // the first level already fails (or a later one passes without a crossing
                // after it): the highest passing sweep level, if any
                result
                    .levels
                    .iter()
                    .rev()
                    .find(|l| pass(l))
                    .map(|l| (l.clone(), "sweep_level"))
            }
        }
    };
    let fit = (space.max_gpus / c.num_gpus.max(1)) as f64;
    // A passing level has measured requests, hence completed ones and a rate; one without a
    // rate (a gate on another metric) gives no operating point rather than 0 tok/s.
    let operating_point = op_level.and_then(|(l, basis)| {
        Some(OperatingPoint {
            level: l.level.value(),
            basis: basis.to_string(),
            output_tokens_per_s: l.output_tokens_per_s?,
            output_tokens_per_s_per_gpu: l.output_tokens_per_s_per_gpu?,
            e2e_tokens_per_s_per_user: l.e2e_tokens_per_s_per_user,
            ttft_ms_p50: l.ttft_ms.map(|d| d.p50),
            usd_per_m_output_tokens: usd(l.output_tokens_per_s),
            usd_per_m_input_tokens: usd(l.input_tokens_per_s),
            level_in_budget: l.level.value() * fit,
        })
    });
    Outcome::Evaluated {
        levels,
        operating_point,
        skipped_levels,
    }
}

/// A point of the Pareto frontier: not beaten on both tok/s per user and tok/s per GPU by any
/// other simulated level of any candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrontierPoint {
    pub candidate: usize,
    pub level: f64,
    pub e2e_tokens_per_s_per_user: f64,
    pub output_tokens_per_s_per_gpu: f64,
}

/// Counts of pruned candidates by stage, and of failures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PruneSummary {
    /// Option values merged into another (docs/search.md): not candidates of their own.
    pub merged: usize,
    pub budget: usize,
    pub capacity: usize,
    pub bound: usize,
    pub failed: usize,
    pub evaluated: usize,
}

/// The search's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SearchReport {
    pub sla: Vec<crate::sweep::RawGate>,
    pub max_gpus: u32,
    pub prices: BTreeMap<String, PriceUsed>,
    /// [`SearchSpace::evidence`]: the measured evidence per GPU id.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub evidence: BTreeMap<String, String>,
    pub summary: PruneSummary,
    /// What the search did with its options (merges, precisions as vLLM serves them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Candidates with an operating point, best first by output tok/s per GPU at it (ties: the
    /// lower index).
    pub ranking_by_throughput: Vec<usize>,
    /// Candidates with an operating point and a price, cheapest first by $ per million output
    /// tokens at it.
    pub ranking_by_cost: Vec<usize>,
    pub frontier: Vec<FrontierPoint>,
    pub candidates: Vec<CandidateResult>,
}

impl SearchReport {
    pub fn best_throughput(&self) -> Option<&CandidateResult> {
        self.ranking_by_throughput
            .first()
            .map(|i| &self.candidates[*i])
    }
    pub fn best_cost(&self) -> Option<&CandidateResult> {
        self.ranking_by_cost.first().map(|i| &self.candidates[*i])
    }
}

/// Ranks the results (given in candidate order) and draws the frontier.
pub fn assemble(space: &SearchSpace, mut results: Vec<CandidateResult>) -> SearchReport {
    results.sort_by_key(|r| r.candidate.index);
    let mut summary = PruneSummary {
        merged: space.merged,
        ..PruneSummary::default()
    };
    for r in &results {
        match &r.outcome {
            Outcome::Pruned { stage, .. } => match stage {
                PruneStage::Budget => summary.budget += 1,
                PruneStage::Capacity => summary.capacity += 1,
                PruneStage::Bound => summary.bound += 1,
            },
            Outcome::Failed { .. } => summary.failed += 1,
            Outcome::Evaluated { .. } => summary.evaluated += 1,
        }
    }
    let mut by_tput: Vec<(usize, f64)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.operating_point()
                .map(|o| (i, o.output_tokens_per_s_per_gpu))
        })
        .collect();
    by_tput.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut by_cost: Vec<(usize, f64)> = results
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            r.operating_point()
                .and_then(|o| o.usd_per_m_output_tokens)
                .map(|c| (i, c))
        })
        .collect();
    by_cost.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    // Frontier: every simulated level with both coordinates; sorted by tok/s per user
    // descending (ties: tok/s per GPU descending, then index), a point is on the frontier when
    // its tok/s per GPU beats every point before it.
    let mut pts: Vec<FrontierPoint> = Vec::new();
    for (i, r) in results.iter().enumerate() {
        if let Outcome::Evaluated { levels, .. } = &r.outcome {
            for l in levels {
                if let (Some(u), Some(t)) =
                    (l.e2e_tokens_per_s_per_user, l.output_tokens_per_s_per_gpu)
                {
                    if u.is_finite() && t.is_finite() {
                        pts.push(FrontierPoint {
                            candidate: i,
                            level: l.level,
                            e2e_tokens_per_s_per_user: u,
                            output_tokens_per_s_per_gpu: t,
                        });
                    }
                }
            }
        }
    }
    pts.sort_by(|a, b| {
        b.e2e_tokens_per_s_per_user
            .total_cmp(&a.e2e_tokens_per_s_per_user)
            .then(
                b.output_tokens_per_s_per_gpu
                    .total_cmp(&a.output_tokens_per_s_per_gpu),
            )
            .then(a.candidate.cmp(&b.candidate))
    });
    let mut frontier = Vec::new();
    let mut best = f64::NEG_INFINITY;
    for p in pts {
        if p.output_tokens_per_s_per_gpu > best {
            best = p.output_tokens_per_s_per_gpu;
            frontier.push(p);
        }
    }
    SearchReport {
        sla: space.sla.clone(),
        max_gpus: space.max_gpus,
        prices: space.prices.clone(),
        evidence: space.evidence.clone(),
        summary,
        notes: space.notes.clone(),
        ranking_by_throughput: by_tput.into_iter().map(|x| x.0).collect(),
        ranking_by_cost: by_cost.into_iter().map(|x| x.0).collect(),
        frontier,
        candidates: results,
    }
}

/// The whole search, one candidate after another (the page's worker and tests; the CLI runs
/// candidates on threads and calls [`assemble`]).
pub fn run(space: &SearchSpace, prune: bool) -> SearchReport {
    let results = space
        .candidates
        .iter()
        .map(|c| evaluate(space, c, prune))
        .collect();
    assemble(space, results)
}
