//! The fit: fitted efficiency tables, the fitted parameters and their grids, the objective,
//! coordinate descent per calibration key, and the held-out folds (leave-one-source-out,
//! leave-one-model-family-out).

use super::*;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------------
// Fitted efficiencies.

/// The shipped fit (`data/calibration/efficiencies.json`), written by `servesim validate --fit`.
pub const FITTED_EFFICIENCIES_JSON: &str = crate::perf::CALIBRATED_EFFICIENCIES_JSON;

/// A fitted efficiency table: per GPU generation (serde name, e.g. `hopper`), the overridden
/// fields of the step-time model's efficiency table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedEfficiencies {
    /// How the values were obtained.
    pub description: String,
    /// generation -> field -> value.
    pub generations: BTreeMap<String, BTreeMap<String, f64>>,
    /// entry -> field -> the entries it was taken from: fields no row of the entry reads, taken
    /// from the nearest entries whose rows do ([`borrow_unidentified`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub borrowed: BTreeMap<String, BTreeMap<String, String>>,
}

impl FittedEfficiencies {
    /// Parses and checks a table: every field must be a field of the efficiency table with a
    /// valid value (an error names the generation and field).
    pub fn from_json(s: &str) -> Result<FittedEfficiencies, ValidateError> {
        let t: FittedEfficiencies =
            serde_json::from_str(s).map_err(|e| ValidateError::Fitted(e.to_string()))?;
        let base = crate::perf::Efficiencies::default_for(crate::gpu::Generation::Hopper);
        for (g, m) in &t.generations {
            base.with_fitted(m)
                .map_err(|e| ValidateError::Fitted(format!("generation `{g}`: {e}")))?;
        }
        Ok(t)
    }
    /// The complete efficiency table for a (CSV) GPU name as scenario overrides: the literature
    /// defaults of its generation ([`crate::perf::Efficiencies::default_for`]) with this fit's
    /// fields of that generation replaced. Complete, so a validation run does not depend on the
    /// calibration the scenario would otherwise use (`--defaults` really is the literature table).
    /// `{}` for an unknown GPU (the scenario then reports it).
    pub fn full_table_for(&self, gpu: &str, era: crate::perf::EngineEra) -> Value {
        self.table(gpu, era, None)
    }

    /// [`FittedEfficiencies::full_table_for`] of a row, with the fields of its harness entry
    /// ([`harness_key`]) on top when the table has one.
    pub fn full_table_for_point(&self, p: &CalibrationPoint) -> Value {
        let own = harness_key(p).and_then(|k| self.generations.get(&k));
        self.table(&p.gpu, point_era(p), own)
    }

    /// The literature table of `gpu`'s generation, its calibration entry's fields on top, then
    /// `extra`'s (a harness entry); `{}` for an unknown GPU.
    fn table(
        &self,
        gpu: &str,
        era: crate::perf::EngineEra,
        extra: Option<&BTreeMap<String, f64>>,
    ) -> Value {
        let Ok(g) = row_gpu(gpu) else {
            return json!({});
        };
        let mut eff = crate::perf::Efficiencies::default_for(g.generation);
        let own =
            crate::perf::lookup_calibration(&self.generations, g.generation, era).map(|(_, m)| m);
        for m in own.iter().chain(extra) {
            eff = eff.with_fitted(m).unwrap_or(eff);
        }
        serde_json::to_value(eff).unwrap_or_else(|_| json!({}))
    }

    /// This table without the fields it borrowed ([`borrow_unidentified`]): what its entries'
    /// own fits gave.
    pub fn without_borrowed(&self) -> FittedEfficiencies {
        let mut t = self.clone();
        for (entry, fields) in &self.borrowed {
            if let Some(m) = t.generations.get_mut(entry) {
                m.retain(|f, _| !fields.contains_key(f));
            }
        }
        t.borrowed.clear();
        t
    }

    /// The overrides JSON for a generation (`{}` when the fit has none).
    pub fn overrides_for(&self, generation: &str) -> Value {
        match self.generations.get(generation) {
            Some(m) => serde_json::to_value(m).unwrap_or_else(|_| json!({})),
            None => json!({}),
        }
    }
}

/// The shipped fit.
pub fn fitted_efficiencies() -> Result<FittedEfficiencies, ValidateError> {
    // The copy perf parsed once (one loader), checked field by field here.
    let f = crate::perf::shipped_calibration().ok_or_else(|| {
        ValidateError::Fitted("data/calibration/efficiencies.json does not parse".into())
    })?;
    let t = FittedEfficiencies {
        description: f.description.clone(),
        generations: f.generations.clone(),
        borrowed: f.borrowed.clone(),
    };
    let base = crate::perf::Efficiencies::default_for(crate::gpu::Generation::Hopper);
    for (g, m) in &t.generations {
        base.with_fitted(m)
            .map_err(|e| ValidateError::Fitted(format!("generation `{g}`: {e}")))?;
    }
    Ok(t)
}

/// One fitted parameter: a field of the step-time model's efficiency table and the values tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitParam {
    pub field: &'static str,
    /// What kind of kernel / cost it scales (for the docs).
    pub kind: &'static str,
    pub grid: &'static [f64],
}

/// The grid of `api_serial_per_request_s` for a harness entry (`<key>+<tag>`, read by that
/// harness's rows only): up to 24 ms. The shared tables' grid stops at 4 ms, the per-request time
/// gpustack's gpt-oss-20b 128/4 burst bounds for every model (docs/accuracy.md, "A bound on the
/// shared serial front end").
pub const HARNESS_SERIAL_GRID: &[f64] = &[0.0, 0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3, 12e-3, 16e-3, 24e-3];

/// The grid of `gemm_bf16` for a harness entry: down to 0.1. The shared tables' grid stops at
/// 0.2: a release line's table is every user's (and, through the era fallback, another release
/// line's), and a lower shared value let a 2024 ROCm build's bf16 GEMMs set today's MI300X
/// predictions (docs/accuracy.md, "Calibration: fitted efficiencies").
pub const HARNESS_GEMM_BF16_GRID: &[f64] = &[
    0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
];

impl FitParam {
    /// The values the fit tries for this field in the table entry `entry`.
    pub fn grid_for(&self, entry: &str) -> &'static [f64] {
        match (entry.contains('+'), self.field) {
            (true, "api_serial_per_request_s") => HARNESS_SERIAL_GRID,
            (true, "gemm_bf16") => HARNESS_GEMM_BF16_GRID,
            _ => self.grid,
        }
    }
}

/// The named parameters the fit may change, by kernel kind (docs/accuracy.md). Precision-specific
/// GEMM factors (fp8, fp4) are not fitted: one model each in the set, so fitting them would fit
/// that model.
pub const FIT_PARAMS: &[FitParam] = &[
    FitParam {
        field: "api_latency_completions_s",
        kind: "API server per-request latency, completions endpoint",
        grid: &[0.0, 2e-3, 5e-3, 8e-3, 12e-3, 16e-3, 20e-3, 30e-3],
    },
    FitParam {
        field: "api_latency_chat_s",
        kind: "API server per-request latency, chat endpoint",
        grid: &[0.0, 5e-3, 10e-3, 20e-3, 30e-3, 40e-3, 50e-3, 60e-3],
    },
    FitParam {
        field: "api_serial_per_request_s",
        kind: "API server serial CPU time per request (bursts)",
        grid: &[0.0, 0.5e-3, 1e-3, 2e-3, 4e-3],
    },
    FitParam {
        field: "gemm_bf16",
        kind: "dense GEMM compute (prefill-bound steps)",
        grid: &[
            0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
        ],
    },
    FitParam {
        field: "gemm_fp8",
        kind: "fp8 GEMM compute (prefill-bound steps of fp8 models)",
        grid: &[0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7],
    },
    FitParam {
        field: "gemm_weight_only",
        kind: "weight-only (dequantising) GEMMs relative to bf16 (Marlin-style W4A16 / W8A16 / MXFP4 on GPUs without tensor cores for the weights)",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "hbm_weights",
        kind: "weight streaming (decode-bound steps)",
        grid: &[0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95],
    },
    FitParam {
        field: "hbm_kv",
        kind: "paged KV reads (decode attention)",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "hbm_state",
        kind: "linear-attention recurrent-state reads and writes (Gated DeltaNet decode)",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "prefill_attention",
        kind: "prefill attention compute",
        grid: &[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    },
    FitParam {
        field: "prefill_attention_paged",
        kind: "prefill attention through vLLM V0's paged prefix-prefill kernel (ROCm V0 with chunked prefill)",
        grid: &[0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2, 0.4],
    },
    FitParam {
        field: "prefill_attention_triton",
        kind: "prefill attention through vLLM's Triton unified attention kernel (attention-sink models on NVIDIA GPUs without FlashAttention-3)",
        grid: &[0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    },
    FitParam {
        field: "fp8_unfused_launch_s",
        kind: "CPU time per fp8 linear call through vLLM V0's unfused fallback in eager steps (ROCm V0)",
        grid: &[0.0, 50e-6, 100e-6, 200e-6, 300e-6, 400e-6, 500e-6, 700e-6],
    },
    FitParam {
        field: "grouped_gemm_vs_dense",
        kind: "MoE grouped GEMM relative to dense",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "hbm_expert_weights",
        kind: "MoE expert weight streaming (decode-bound MoE steps)",
        grid: &[0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    },
    FitParam {
        field: "allreduce_bus_eff",
        kind: "tensor-parallel all-reduce bandwidth",
        grid: &[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    },
    FitParam {
        field: "allreduce_latency_s",
        kind: "latency per TP all-reduce call (small decode messages)",
        grid: &[5e-6, 10e-6, 15e-6, 20e-6, 30e-6, 45e-6],
    },
    FitParam {
        field: "layer_gpu_floor_s",
        kind: "minimum GPU time per decoder layer (small-batch decode)",
        grid: &[10e-6, 20e-6, 30e-6, 45e-6, 60e-6, 80e-6, 100e-6, 130e-6],
    },
    FitParam {
        field: "moe_layer_floor_s",
        kind: "GPU time of one MoE layer's routing chain (kernels around the grouped GEMMs)",
        grid: &[
            0.0, 20e-6, 40e-6, 60e-6, 80e-6, 100e-6, 130e-6, 170e-6, 250e-6,
        ],
    },
    FitParam {
        field: "mla_layer_floor_s",
        kind: "GPU time of one latent-attention (MLA) layer's chain beyond a GQA layer's",
        grid: &[
            0.0, 20e-6, 40e-6, 60e-6, 80e-6, 100e-6, 130e-6, 170e-6, 250e-6,
        ],
    },
    FitParam {
        field: "step_overhead_graph_s",
        kind: "per-step engine overhead (CUDA-graph steps)",
        grid: &[
            0.1e-3, 0.3e-3, 0.6e-3, 1.0e-3, 1.5e-3, 2.0e-3, 3.0e-3, 4.0e-3, 6.0e-3,
        ],
    },
    FitParam {
        field: "step_overhead_piecewise_s",
        kind: "per-step engine overhead (mixed prefill/decode steps)",
        grid: &[0.3e-3, 0.6e-3, 1.2e-3, 2.0e-3, 3.0e-3, 4.5e-3, 6.0e-3],
    },
    FitParam {
        field: "step_overhead_eager_s",
        kind: "per-step engine overhead (steps without a CUDA graph; V0 keys only: its steps with a prefill)",
        grid: &[0.3e-3, 0.6e-3, 1.2e-3, 2.0e-3, 3.0e-3, 4.5e-3, 6.0e-3, 8.0e-3],
    },
    FitParam {
        field: "per_request_overhead_s",
        kind: "per scheduled request per step CPU cost",
        grid: &[0.0, 4e-6, 10e-6, 20e-6, 40e-6, 80e-6, 160e-6],
    },
    // Last: coordinate descent tries the fields in this order, and the render time, tried first,
    // stood in for the literature table's fast prefill (a whole burst's prompts) before the GEMM
    // efficiencies had moved (docs/accuracy.md "Front-end terms").
    FitParam {
        field: "api_render_chat_s",
        kind: "API server chat-template render on the event loop, per request (chat, vLLM < 0.19)",
        grid: &[0.0, 2e-3, 4e-3, 6e-3, 8e-3, 10e-3, 12e-3, 16e-3, 20e-3],
    },
];

/// The fit objective of a report, percent: per cell (source, model), the mean over the metric
/// families it measures of the median absolute error over its points (each point counts once per
/// metric family); per source, the mean over its cells; then the mean over sources. Every source
/// weighs the same, so one large source (169 InferenceX rows) cannot dictate a key's table to the
/// others; within a source every model weighs the same, so a source's most measured model
/// (gpustack's 16 gpt-oss-120b rows on `hopper@vllm-0.11`) cannot dictate it to its other
/// models, and a model family measured on one model weighs one model (docs/accuracy.md
/// "Calibration: fitted efficiencies").
pub fn objective(r: &ValidationReport) -> f64 {
    let mut sources: Vec<&str> = Vec::new();
    for p in &r.points {
        if !sources.contains(&p.source.as_str()) {
            sources.push(p.source.as_str());
        }
    }
    let mut total = 0.0;
    let mut n = 0usize;
    for src in sources {
        let mut models: Vec<&str> = Vec::new();
        for p in r.points.iter().filter(|p| p.source == src) {
            if !models.contains(&p.model.as_str()) {
                models.push(p.model.as_str());
            }
        }
        let mut src_total = 0.0;
        let mut src_n = 0usize;
        for model in models {
            let aggs = aggregate(&r.points, "fit", &|p: &PointResult| {
                p.source == src && p.model == model
            });
            let meds: Vec<f64> = Family::ALL
                .iter()
                .filter_map(|f| {
                    aggs.iter()
                        .find(|a| a.family == *f && a.n > 0)
                        .map(|a| a.median_abs_pct)
                })
                .collect();
            if !meds.is_empty() {
                src_total += meds.iter().sum::<f64>() / meds.len() as f64;
                src_n += 1;
            }
        }
        if src_n > 0 {
            total += src_total / src_n as f64;
            n += 1;
        }
    }
    if n == 0 {
        0.0
    } else {
        total / n as f64
    }
}

/// Points of a report that could not be simulated. The fit compares (failures, objective)
/// lexicographically, so it never "improves" by making points unsimulatable.
pub fn failures(r: &ValidationReport) -> usize {
    r.points.iter().filter(|p| p.error.is_some()).count()
}

/// The fitted values as a Markdown table, each marked when it sits on an edge of its grid
/// ([`FitParam::grid_for`] its entry; a zero lower edge, where a cost term is off, is not marked): a value the fit
/// could not move further, a factor absorbing what the model lacks rather than a measurement
/// (docs/accuracy.md "Calibration"); a value no row of its entry reads names the entries it was
/// taken from instead ([`borrow_unidentified`]).
pub fn fitted_values_table(t: &FittedEfficiencies) -> String {
    let mut s = String::from("| generation | field | value | grid edge |\n|---|---|---|---|\n");
    for (g, m) in &t.generations {
        for (k, v) in m {
            if let Some(from) = t.borrowed.get(g).and_then(|b| b.get(k)) {
                s.push_str(&format!(
                    "| {g} | {k} | {v} | not read by this entry's rows: from {from} |\n"
                ));
                continue;
            }
            let edge = FIT_PARAMS
                .iter()
                .find(|f| f.field == k)
                .and_then(|f| {
                    let grid = f.grid_for(g);
                    let (lo, hi) = (grid.first()?, grid.last()?);
                    // 0 is where a cost term is off, a bound of the physics, not of the grid.
                    if v <= lo && *lo > 0.0 {
                        Some("lowest")
                    } else if v >= hi {
                        Some("highest")
                    } else {
                        None
                    }
                })
                .unwrap_or("");
            s.push_str(&format!("| {g} | {k} | {v} | {edge} |\n"));
        }
    }
    s
}

/// One step of the fit's log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitStep {
    pub round: usize,
    pub field: String,
    pub value: f64,
    pub objective: f64,
}

/// Coordinate descent over [`FIT_PARAMS`] for one GPU generation: for each parameter in turn,
/// every grid value is tried with the others fixed and the best kept (ties keep the current
/// value); `rounds` passes, from the literature table. Deterministic. Only rows of that generation
/// (and in `opts`' selection) are used. Returns the fitted overrides of that generation and the
/// log. (One [`KeyFitJob`] run by [`run_fit_job`].)
pub fn fit_generation(
    points_csv: &str,
    generation: &str,
    opts: &ValidateOptions,
    params: &[&'static str],
    rounds: usize,
    sim: &mut Simulator,
) -> Result<(BTreeMap<String, f64>, Vec<FitStep>), ValidateError> {
    let pts = select_points(parse_points(points_csv)?, opts)?;
    let job = KeyFitJob {
        key: generation.to_string(),
        lines: pts
            .iter()
            .filter(|p| point_key(p).as_deref() == Some(generation))
            .map(|p| p.line)
            .collect(),
        params: params.to_vec(),
        harness: Vec::new(),
        eras: Vec::new(),
        rounds,
    };
    let (mut tables, log) = run_fit_job(points_csv, &job, sim)?;
    Ok((tables.remove(generation).unwrap_or_default(), log))
}

/// Which fields are fitted per calibration key (`<generation>@<era>`): all of [`FIT_PARAMS`]
/// where the key's simulated rows have 3 models or more (rows that wait count for nothing,
/// `plan_fit`); with fewer just the four broad factors, so the fit cannot tune to one model's
/// kernels. `step_overhead_eager_s` only for the V0 era (or a plain generation key, which holds
/// every release line's rows, `FitShape::PerGeneration`), whose engine runs every step with a
/// prefill without a graph; elsewhere eager steps are the exception (`--enforce-eager` runs), too
/// few to fit it on. `prefill_attention` likewise only for the V0 era: V1 runs FlashAttention /
/// FlashInfer prefill kernels whose published rate is the literature value, and the V1 keys'
/// rows (short prompts, or a harness with its own entry) do not identify it: refitted, it went to
/// its grid's edge (docs/accuracy.md "Calibration: fitted efficiencies").
pub fn fit_params_for(key: &str, num_models: usize) -> Vec<&'static str> {
    let v0 = may_hold_v0_rows(key);
    if num_models >= 3 {
        FIT_PARAMS
            .iter()
            .map(|f| f.field)
            .filter(|&f| v0 || f != "step_overhead_eager_s")
            .filter(|&f| v0 || f != "prefill_attention")
            .collect()
    } else {
        vec![
            "gemm_bf16",
            "hbm_weights",
            "layer_gpu_floor_s",
            "step_overhead_graph_s",
        ]
    }
}

/// The fields a release line fits for itself (`<generation>@<era>`, [`era_params_for`]): what
/// the engine's software costs, which changed between releases (scheduling, input preparation,
/// sampling, the API server). Every other fitted field is a kernel or link efficiency of the GPU
/// generation, shared by its release lines ([`shared_params_for`]).
pub const ERA_PARAMS: &[&str] = &[
    "api_latency_completions_s",
    "api_latency_chat_s",
    "api_serial_per_request_s",
    "api_render_chat_s",
    "step_overhead_graph_s",
    "step_overhead_piecewise_s",
    "step_overhead_eager_s",
    "per_request_overhead_s",
];

/// The fields a GPU generation's entry fits on the rows of all its release lines: the
/// [`FIT_PARAMS`] not in [`ERA_PARAMS`] where those rows have 3 models or more; with fewer the
/// broad three (dense GEMM, weight reads, the per-layer floor).
pub fn shared_params_for(num_models: usize) -> Vec<&'static str> {
    if num_models >= 3 {
        FIT_PARAMS
            .iter()
            .map(|f| f.field)
            .filter(|f| !ERA_PARAMS.contains(f))
            .collect()
    } else {
        vec!["gemm_bf16", "hbm_weights", "layer_gpu_floor_s"]
    }
}

/// The fields a release line's entry fits on its own rows: the [`ERA_PARAMS`] where they have 3
/// models or more, else the graph step overhead alone; `step_overhead_eager_s` only for the V0
/// era, whose engine runs every step with a prefill without a graph (elsewhere eager steps are the
/// exception, too few to fit it on).
pub fn era_params_for(key: &str, num_models: usize) -> Vec<&'static str> {
    let v0 = may_hold_v0_rows(key);
    if num_models >= 3 {
        ERA_PARAMS
            .iter()
            .copied()
            .filter(|&f| v0 || f != "step_overhead_eager_s")
            .collect()
    } else {
        vec!["step_overhead_graph_s"]
    }
}

/// Whether a key's rows may be V0-era runs: the V0 release line's entry, or a plain generation
/// (every release line).
fn may_hold_v0_rows(key: &str) -> bool {
    key.rsplit_once('@')
        .is_none_or(|(_, era)| era == crate::perf::EngineEra::Vllm07.key())
}

/// The fit's output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitReport {
    pub table: FittedEfficiencies,
    /// generation -> log.
    pub logs: BTreeMap<String, Vec<FitStep>>,
    /// Held-out aggregates pooled over the folds: scope `leave-one-source-out` (each source
    /// predicted by a fit on the others), `leave-one-family-out` (each model family predicted by
    /// a fit on the other families) and `leave-one-family-out: <family>` per family.
    pub held_out: Vec<Aggregate>,
    /// Each simulated row as the fit that left its source out predicts it (the points behind
    /// the `leave-one-source-out` aggregates), by line.
    pub held_out_by_source: Vec<PointResult>,
    /// Each simulated row as the fit that left its model family out predicts it (the points
    /// behind the `leave-one-family-out` aggregates), by line.
    pub held_out_by_family: Vec<PointResult>,
    /// What each held-out fold refitted, by fold (`leave-one-source-out: <source>`,
    /// `leave-one-family-out: <family>`): entry -> field -> value. A fold's table is the in-sample
    /// table (without its borrowed fields) without the fold's keys, plus these entries and the
    /// fold's [`FitReport::held_out_borrowed`]; a fold that refits nothing is absent.
    pub held_out_refits: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>>,
    /// What each fold's table borrowed ([`borrow_unidentified`] on the fold's entries), by fold:
    /// entry -> field -> value. A fold's table is the in-sample table without its borrowed fields
    /// and without the fold's keys, plus the fold's refits and these values.
    pub held_out_borrowed: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>>,
}

/// The model families of [`model_family`], in report order.
pub const FAMILIES: &[&str] = &["dense", "MoE", "MLA", "sparse", "hybrid"];

/// Fits every generation on all points (the shipped table), then every held-out fold
/// (leave-one-source-out, leave-one-model-family-out: scopes `leave-one-source-out`,
/// `leave-one-family-out` and `leave-one-family-out: <family>`): [`plan_fit`]'s jobs run one
/// after another, assembled by [`assemble_fit`]. A fold refits only the calibration keys that
/// hold rows of the left-out group; every other key's training rows are unchanged, so its values
/// are the in-sample ones (the fit is per key and deterministic). A key left without training
/// rows is dropped from the fold's table (lookup falls back to the same generation's other era,
/// then the literature table).
pub fn fit_all(
    points_csv: &str,
    rounds: usize,
    held_out_rounds: usize,
    sim: &mut Simulator,
) -> Result<FitReport, ValidateError> {
    let plan = plan_fit(points_csv, rounds, held_out_rounds)?;
    let mut results = Vec::with_capacity(plan.jobs.len());
    for job in &plan.jobs {
        results.push(run_fit_job(points_csv, job, sim)?);
    }
    assemble_fit(points_csv, &plan, &results, sim)
}

impl FitReport {
    /// The table as the JSON written to data/calibration/efficiencies.json.
    pub fn table_json(&self) -> String {
        serde_json::to_string_pretty(&self.table).unwrap_or_default() + "\n"
    }

    /// Markdown: fitted values, the log, and the out-of-sample errors.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from("## Fitted efficiencies\n\n");
        s.push_str(&fitted_values_table(&self.table));
        s.push_str("\n### Fit log (accepted steps)\n\n| generation | round | field | value | objective |\n|---|---|---|---|---|\n");
        for (g, log) in &self.logs {
            for st in log {
                s.push_str(&format!(
                    "| {g} | {} | {} | {} | {:.2} |\n",
                    st.round, st.field, st.value, st.objective
                ));
            }
        }
        s.push_str("\n### Held out (pooled over folds)\n\n| scope | metric | n | median abs error | mean abs error | mean signed error |\n|---|---|---|---|---|---|\n");
        for a in &self.held_out {
            s.push_str(&a.markdown_row());
        }
        s
    }
}
