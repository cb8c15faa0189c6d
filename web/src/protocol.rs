//! Messages between the page and the sweep worker. Each message is one JSON string posted with
//! `postMessage` (documented in docs/web.md). Every message carries the run `id` the page chose,
//! so late messages from a cancelled run are recognised and dropped.
//!
//! The worker runs `Scenario::from_json(..)?.resolve()?.runner()?` and steps it level by level
//! ([`SweepRun`]); the report it sends at the end is the core's `SweepReport`, the same bytes
//! `servesim sweep --scenario S --json` prints.

use crate::compare_ui::import_view::{ColumnView, ImportFailure, ImportView, SourceFile};
use crate::compare_ui::predict::{scenario_at_levels, series_from};
use crate::core_api::{
    CapacityView, GpuEntry, Level, LevelResult, OperatingPoint, ResolvedScenario, Scenario,
    SweepReport,
};
use serde::{Deserialize, Serialize};
use servesim_core::compare::{
    ColumnMapping, Imported, LevelKind, MeasuredLevel, MeasuredRun, PredictedSeries, SourceFormat,
    Unmatched,
};
use servesim_core::metric::MetricId;
use servesim_core::sla_refine::Refinement;
use servesim_core::sweep::SweepRunner;
use std::collections::BTreeMap;

/// Page -> worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Run the whole sweep of this scenario (canonical JSON, as in the share link).
    Run { id: u32, scenario: String },
    /// Predict the comparison arm's scenario at exactly these measured levels of `level_kind`
    /// (`compare_ui::predict::scenario_at_levels`, then the same level-by-level run). Levels are
    /// decimal strings in Rust's shortest round-trip form, so they arrive bit-exact.
    Predict {
        id: u32,
        scenario: String,
        level_kind: LevelKind,
        levels: Vec<String>,
    },
    /// Stop after the current level (the page also terminates a worker that does not answer).
    Cancel { id: u32 },
    /// Read a pasted `vllm serve ...` command against `base` (a scenario's canonical JSON: what
    /// the command does not mention is kept); answered with `Parsed` (`command_tools`).
    ParseCommand { id: u32, text: String, base: String },
    /// The `vllm serve` and `vllm bench serve` commands of this scenario; answered with
    /// `Commands`.
    Commands { id: u32, scenario: String },
    /// The model and GPU catalogs' names for the pickers; answered with `Catalog`.
    Catalog { id: u32 },
    /// Resolve this scenario (`Scenario::resolve`) and size it (`capacity::compute`): the form's
    /// core errors, vLLM's defaults for blank engine fields and the capacity card, answered with
    /// `Checked` (`command_tools::check`). The page does not link the resolver.
    Check { id: u32, scenario: String },
    /// Import measured results (the comparison's paste box or uploaded files) with the user's
    /// column mapping (`compare_ui::import_view::run_import`: the core's importers, linked into
    /// the worker only); answered with `Imported`.
    Import {
        id: u32,
        files: Vec<SourceFile>,
        mapping: ColumnMapping,
    },
}

/// The import panel's [`ImportView`] on the wire: a measured level's metrics as (metric, value)
/// pairs, because a `MetricId` such as `TtftMs(P50)` is not a JSON object key. Floats travel in
/// [`exact`] form like every worker message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireImport {
    pub runs: Vec<WireRun>,
    pub unmatched: Vec<Unmatched>,
    pub notes: Vec<String>,
    pub columns: Vec<ColumnView>,
    pub metrics: Vec<MetricId>,
}

/// A `MeasuredLevel` on the wire: (level, metrics, exclusion reason).
pub type WireLevel = (f64, Vec<(MetricId, f64)>, Option<String>);

/// A `MeasuredRun` on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireRun {
    pub arm: String,
    pub level_kind: LevelKind,
    pub levels: Vec<WireLevel>,
    pub kv_cache_tokens_logged: Option<u64>,
    pub source_format: SourceFormat,
}

impl WireImport {
    pub fn from_view(v: &ImportView) -> WireImport {
        WireImport {
            runs: v
                .imported
                .runs
                .iter()
                .map(|r| WireRun {
                    arm: r.arm.clone(),
                    level_kind: r.level_kind,
                    levels: r
                        .levels
                        .iter()
                        .map(|l| {
                            let m = l.metrics.iter().map(|(k, v)| (*k, *v)).collect();
                            (l.level, m, l.excluded.clone())
                        })
                        .collect(),
                    kv_cache_tokens_logged: r.kv_cache_tokens_logged,
                    source_format: r.source_format,
                })
                .collect(),
            unmatched: v.imported.unmatched.clone(),
            notes: v.imported.notes.clone(),
            columns: v.columns.clone(),
            metrics: v.metrics.clone(),
        }
    }

    pub fn into_view(self) -> ImportView {
        ImportView {
            imported: Imported {
                runs: self
                    .runs
                    .into_iter()
                    .map(|r| MeasuredRun {
                        arm: r.arm,
                        level_kind: r.level_kind,
                        levels: r
                            .levels
                            .into_iter()
                            .map(|(level, m, excluded)| MeasuredLevel {
                                level,
                                metrics: m.into_iter().collect(),
                                excluded,
                            })
                            .collect(),
                        kv_cache_tokens_logged: r.kv_cache_tokens_logged,
                        source_format: r.source_format,
                    })
                    .collect(),
                unmatched: self.unmatched,
                notes: self.notes,
            },
            columns: self.columns,
            metrics: self.metrics,
        }
    }
}

/// One argument of a pasted command and what ServeSim did with it (the core's `ArgReport`;
/// `status` is its label: understood, ignored, not modelled, refused, unknown).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireArg {
    pub arg: String,
    pub value: Option<String>,
    pub status: String,
    pub detail: String,
}

/// The scorer's `PredictedSeries` on the wire: every number a decimal string in Rust's shortest
/// round-trip form (`f64::to_string`, read back with `str::parse`), because serde_json's default
/// float parser is not exact to the last bit and the page must score exactly the numbers the
/// worker computed (the browser test compares the page's Markdown with a native run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireSeries {
    pub level_kind: LevelKind,
    /// (level, metric name -> value).
    pub points: Vec<(String, BTreeMap<String, String>)>,
    pub kv_capacity_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

impl WireSeries {
    pub fn from_series(s: &PredictedSeries) -> WireSeries {
        WireSeries {
            level_kind: s.level_kind,
            points: s
                .points
                .iter()
                .map(|(l, m)| {
                    (
                        l.to_string(),
                        m.iter()
                            .map(|(k, v)| (k.name().to_string(), v.to_string()))
                            .collect(),
                    )
                })
                .collect(),
            kv_capacity_tokens: s.kv_capacity_tokens,
            evidence: s.evidence.clone(),
        }
    }

    pub fn to_series(&self) -> Result<PredictedSeries, String> {
        let num = |t: &str| {
            t.parse::<f64>()
                .map_err(|_| format!("bad number from the worker: {t:?}"))
        };
        let mut points = Vec::with_capacity(self.points.len());
        for (l, m) in &self.points {
            let mut metrics = BTreeMap::new();
            for (k, v) in m {
                let id = MetricId::from_name(k)
                    .ok_or_else(|| format!("unknown metric from the worker: {k}"))?;
                metrics.insert(id, num(v)?);
            }
            points.push((num(l)?, metrics));
        }
        Ok(PredictedSeries {
            level_kind: self.level_kind,
            points,
            kv_capacity_tokens: self.kv_capacity_tokens,
            evidence: self.evidence.clone(),
        })
    }
}

/// Worker -> page. Externally tagged (`{"done": {...}}`): an internally tagged enum makes serde
/// buffer every message through its `Content` type, which compiles each payload's
/// deserializer a second time into the page (about 30 KB of wasm).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker's wasm is loaded and its message handler installed; sent once at start-up.
    Ready,
    /// The scenario resolved; these levels (sorted) will run.
    Started { id: u32, levels: Vec<Level> },
    /// Level `index` (0-based) of `levels` is starting.
    Progress {
        id: u32,
        index: usize,
        levels: usize,
    },
    /// Level `index` is this far along (simulated time / duration, or finished / requests),
    /// sent every `sweep::PROGRESS_EVERY_EVENTS` simulated events.
    LevelProgress {
        id: u32,
        index: usize,
        fraction: f64,
    },
    /// Level `index` finished.
    Level {
        id: u32,
        index: usize,
        result: Box<LevelResult>,
    },
    /// Every level finished. `report` is the `SweepReport` JSON (`servesim sweep --json`),
    /// `csv` the same rows as `servesim sweep --csv`.
    Done {
        id: u32,
        operating_point: Option<OperatingPoint>,
        /// The operating point refined by simulation (`ResolvedScenario::refine` with
        /// [`REFINE_STEPS`]; absent without an SLA crossing). Also in `report`.
        #[serde(default)]
        refined: Option<Refinement>,
        /// Why the refinement could not run (the sweep's results stand).
        #[serde(default)]
        refine_error: Option<String>,
        report: String,
        csv: String,
    },
    /// Every level finished; the SLA operating point is being refined by up to `max_steps`
    /// extra level simulations (sent before they start; the page allows them the time).
    Refining { id: u32, max_steps: usize },
    /// The run stopped after a Cancel; the report holds the levels that ran (`cancelled: true`).
    Cancelled {
        id: u32,
        report: Option<String>,
        csv: Option<String>,
    },
    /// A `Predict` finished: the arm's predicted series at every requested level.
    Predicted { id: u32, series: WireSeries },
    /// A `ParseCommand` answer: the scenario (canonical JSON; absent when an argument was refused
    /// or the text could not be read, then `error` or the refused arguments say why), every
    /// argument's status, and notes.
    Parsed {
        id: u32,
        scenario: Option<String>,
        args: Vec<WireArg>,
        notes: Vec<String>,
        error: Option<String>,
    },
    /// A `Commands` answer.
    Commands {
        id: u32,
        serve: String,
        bench: String,
    },
    /// A `Catalog` answer: model ids and GPUs, in catalog order.
    Catalog {
        id: u32,
        models: Vec<String>,
        gpus: Vec<GpuEntry>,
    },
    /// A `Check` answer for `scenario` (the JSON as sent, so the page knows which form state it
    /// describes): the core's first error (JSON path, message), vLLM's defaults for blank engine
    /// fields (form key -> value) and, when it resolves, the capacity card or why it cannot be
    /// computed.
    Checked {
        id: u32,
        scenario: String,
        error: Option<(String, String)>,
        defaults: Vec<(String, String)>,
        capacity: Option<Result<CapacityView, String>>,
    },
    /// An `Import` answer: the runs and what each column became, or the first error and where
    /// it points.
    Imported {
        id: u32,
        result: Box<Result<WireImport, ImportFailure>>,
    },
    /// The run failed; `message` is for the user, `field` the scenario's JSON path at fault.
    Error {
        id: u32,
        field: Option<String>,
        message: String,
    },
}

impl ToWorker {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        serde_json::from_str(s).map_err(|e| format!("bad message to worker: {e}"))
    }
}

impl FromWorker {
    /// In [`exact`] form: the page reads every number bit for bit as the worker computed it.
    pub fn to_json(&self) -> String {
        exact::to_string(self).unwrap_or_default()
    }
    pub fn from_json(s: &str) -> Result<Self, String> {
        exact::from_str(s).map_err(|e| format!("bad message from worker: {e}"))
    }
    /// The run this message belongs to (None for `Ready`).
    pub fn run_id(&self) -> Option<u32> {
        match self {
            FromWorker::Ready => None,
            FromWorker::Started { id, .. }
            | FromWorker::Progress { id, .. }
            | FromWorker::LevelProgress { id, .. }
            | FromWorker::Level { id, .. }
            | FromWorker::Done { id, .. }
            | FromWorker::Cancelled { id, .. }
            | FromWorker::Predicted { id, .. }
            | FromWorker::Parsed { id, .. }
            | FromWorker::Refining { id, .. }
            | FromWorker::Commands { id, .. }
            | FromWorker::Catalog { id, .. }
            | FromWorker::Checked { id, .. }
            | FromWorker::Imported { id, .. }
            | FromWorker::Error { id, .. } => Some(*id),
        }
    }
}

/// At most this many extra level simulations refine the SLA operating point after a sweep in the
/// page (bisection between the sweep levels around the crossing, `sla_refine`): the page's report
/// is what `servesim sweep --scenario S --json --refine-sla 8` prints.
pub const REFINE_STEPS: usize = 8;

/// A running sweep whose worker sends nothing (no level, no `LevelProgress`) for this long is
/// taken for dead: the worker sends progress every `sweep::PROGRESS_EVERY_EVENTS` simulated
/// events, far more often than this (docs/web.md "A worker that dies").
pub const DEFAULT_STALL_MS: f64 = 30_000.0;

/// The no-progress limit for this page load: [`DEFAULT_STALL_MS`], or `stall_ms=N` in the page's
/// query string (`?stall_ms=1500`; 100 to 600,000 ms), which lets a browser test see the check
/// fire without waiting 30 s, or a slow device allow more. Anything else keeps the default.
pub fn stall_ms_from_query(search: &str) -> f64 {
    search
        .trim_start_matches('?')
        .split('&')
        .filter_map(|kv| kv.strip_prefix("stall_ms="))
        .filter_map(|v| v.parse::<f64>().ok())
        .find(|v| (100.0..=600_000.0).contains(v))
        .unwrap_or(DEFAULT_STALL_MS)
}

/// "30 s", "1.5 s": a no-progress limit in the page's message.
pub fn fmt_stall(ms: f64) -> String {
    if ms % 1000.0 == 0.0 {
        format!("{:.0} s", ms / 1000.0)
    } else {
        format!("{:.1} s", ms / 1000.0)
    }
}

/// Overall sweep progress in 0..=1 after `done` of `levels` levels.
pub fn sweep_fraction(done: usize, levels: usize) -> f64 {
    if levels == 0 {
        return 1.0;
    }
    (done as f64 / levels as f64).clamp(0.0, 1.0)
}

/// Reads and resolves a scenario; a bad one becomes the `Error` message to send.
pub fn prepare(
    id: u32,
    scenario_json: &str,
) -> Result<(Scenario, ResolvedScenario), Box<FromWorker>> {
    let err = |e: servesim_core::scenario::ScenarioError| {
        Box::new(FromWorker::Error {
            id,
            field: Some(e.field()),
            message: e.to_string(),
        })
    };
    let s = Scenario::from_json(scenario_json).map_err(err)?;
    let mut r = s.resolve().map_err(err)?;
    // The worker's memory budget per level (docs/web.md "Bounded runs").
    r.sweep.memory_budget = servesim_core::budget::WORKER_MEMORY_BUDGET;
    Ok((s, r))
}

/// The rows of `servesim sweep --csv`: `level,value,` then every metric of `MetricId::all()`.
pub fn csv(levels: &[LevelResult]) -> String {
    crate::table::to_csv(levels)
}

/// Reads a `Predict` request: the levels (decimal strings), the scenario, rewritten to exactly
/// those levels (`scenario_at_levels`), resolved. A problem is the `Error` message to send.
pub fn prepare_predict(
    id: u32,
    scenario_json: &str,
    kind: LevelKind,
    levels: &[String],
) -> Result<(Scenario, ResolvedScenario), Box<FromWorker>> {
    let fail = |message: String| {
        Box::new(FromWorker::Error {
            id,
            field: None,
            message,
        })
    };
    let mut values = Vec::with_capacity(levels.len());
    for l in levels {
        values.push(
            l.parse::<f64>()
                .map_err(|_| fail(format!("measured level {l:?} is not a number")))?,
        );
    }
    let (base, _) = prepare(id, scenario_json)?;
    let s = scenario_at_levels(&base, kind, &values).map_err(fail)?;
    let err = |e: servesim_core::scenario::ScenarioError| {
        Box::new(FromWorker::Error {
            id,
            field: Some(e.field()),
            message: e.to_string(),
        })
    };
    let mut r = s.resolve().map_err(err)?;
    // The worker's memory budget per level (docs/web.md "Bounded runs").
    r.sweep.memory_budget = servesim_core::budget::WORKER_MEMORY_BUDGET;
    Ok((s, r))
}

/// One sweep being run, level by level. The worker calls [`SweepRun::step`] once per level and
/// yields to its event loop in between, so a `Cancel` message is seen between levels.
pub struct SweepRun<'r> {
    id: u32,
    scenario: &'r Scenario,
    resolved: &'r ResolvedScenario,
    runner: Option<SweepRunner<'r>>,
    /// `Some(kind)` for a comparison's `Predict`: no per-level results, a `Predicted` at the end.
    predict: Option<LevelKind>,
}

impl<'r> SweepRun<'r> {
    /// Builds the runner (`ResolvedScenario::runner`); a deployment that does not fit is the
    /// `Error` message to send.
    pub fn new(
        id: u32,
        scenario: &'r Scenario,
        resolved: &'r ResolvedScenario,
    ) -> Result<SweepRun<'r>, Box<FromWorker>> {
        let runner = resolved.runner().map_err(|e| {
            Box::new(FromWorker::Error {
                id,
                field: Some(e.field()),
                message: e.to_string(),
            })
        })?;
        Ok(SweepRun {
            id,
            scenario,
            resolved,
            runner: Some(runner),
            predict: None,
        })
    }

    /// The same run for a comparison's `Predict` (ends with `Predicted` instead of `Done`).
    pub fn new_predict(
        id: u32,
        scenario: &'r Scenario,
        resolved: &'r ResolvedScenario,
        kind: LevelKind,
    ) -> Result<SweepRun<'r>, Box<FromWorker>> {
        let mut run = SweepRun::new(id, scenario, resolved)?;
        run.predict = Some(kind);
        Ok(run)
    }

    pub fn started(&self) -> FromWorker {
        FromWorker::Started {
            id: self.id,
            levels: self
                .runner
                .as_ref()
                .map(|r| r.levels().to_vec())
                .unwrap_or_default(),
        }
    }

    fn report(&self, result: &servesim_core::sweep::SweepResult) -> (String, String) {
        (
            SweepReport::new(self.scenario, self.resolved, result).to_json_pretty(),
            csv(&result.levels),
        )
    }

    /// Runs the next level and sends its result; after the last one sends `Done`.
    /// Returns false when nothing is left to run (after `Done` or `Error`).
    pub fn step(&mut self, send: &mut dyn FnMut(FromWorker)) -> bool {
        let id = self.id;
        let Some(runner) = self.runner.as_mut() else {
            return false;
        };
        let (index, levels) = (runner.done_levels(), runner.total_levels());
        if index < levels {
            send(FromWorker::Progress { id, index, levels });
            let stepped = runner.step_observed(&mut |fraction| {
                send(FromWorker::LevelProgress {
                    id,
                    index,
                    fraction,
                })
            });
            match stepped {
                Some(Ok(r)) => {
                    if self.predict.is_none() {
                        send(FromWorker::Level {
                            id,
                            index,
                            result: Box::new(r.clone()),
                        });
                    }
                    if index + 1 < levels {
                        return true;
                    }
                }
                Some(Err(e)) => {
                    let e = servesim_core::scenario::ScenarioError::Sweep(e);
                    send(FromWorker::Error {
                        id,
                        field: Some(e.field()),
                        message: e.to_string(),
                    });
                    self.runner = None;
                    return false;
                }
                None => {}
            }
        }
        let Some(runner) = self.runner.take() else {
            return false;
        };
        self.conclude(runner.finish(), send);
        false
    }

    /// The number of levels (0 after the run ended).
    pub fn total_levels(&self) -> usize {
        self.runner.as_ref().map_or(0, |r| r.total_levels())
    }

    /// Runs level `index` on its own (`SweepRunner::run_at`, for a sweep spread over several
    /// workers, `level_pool`); a failing level is the `Error` message to send. `None` past the
    /// last level or after the run ended.
    pub fn run_at(
        &mut self,
        index: usize,
        progress: &mut dyn FnMut(f64),
    ) -> Option<Result<servesim_core::sweep::LevelOutput, Box<FromWorker>>> {
        let id = self.id;
        let out = self.runner.as_mut()?.run_at(index, progress)?;
        Some(out.map_err(|e| {
            let e = servesim_core::scenario::ScenarioError::Sweep(e);
            Box::new(FromWorker::Error {
                id,
                field: Some(e.field()),
                message: e.to_string(),
            })
        }))
    }

    /// The page's `Level` message for a level that finished (none for a comparison's
    /// `Predict`).
    pub fn level_message(&self, index: usize, result: &LevelResult) -> Option<FromWorker> {
        self.predict.is_none().then(|| FromWorker::Level {
            id: self.id,
            index,
            result: Box::new(result.clone()),
        })
    }

    /// Ends the run with levels run elsewhere (`SweepRunner::finish_with`): the same messages
    /// as stepping through them here.
    pub fn conclude_with(
        &mut self,
        outputs: Vec<servesim_core::sweep::LevelOutput>,
        send: &mut dyn FnMut(FromWorker),
    ) {
        if let Some(runner) = self.runner.take() {
            self.conclude(runner.finish_with(outputs), send);
        }
    }

    /// `Predicted`, or the SLA refinement (`Refining`) and `Done`, for the finished levels.
    fn conclude(
        &mut self,
        result: servesim_core::sweep::SweepResult,
        send: &mut dyn FnMut(FromWorker),
    ) {
        let id = self.id;
        if let Some(kind) = self.predict {
            let series = series_from(kind, &result.levels, self.resolved);
            send(FromWorker::Predicted {
                id,
                series: WireSeries::from_series(&series),
            });
            return;
        }
        let mut result = result;
        let mut refine_error = None;
        // As `servesim sweep --refine-sla 8`: refined whenever there are gates (the core finds
        // the bracket, or leaves it absent).
        if !self.resolved.sweep.sla.is_empty() {
            send(FromWorker::Refining {
                id,
                max_steps: REFINE_STEPS,
            });
            if let Err(e) = self.resolved.refine(&mut result, REFINE_STEPS) {
                refine_error = Some(e.to_string());
            }
        }
        let (report, csv) = self.report(&result);
        send(FromWorker::Done {
            id,
            operating_point: result.operating_point.clone(),
            refined: result.refined_operating_point.clone(),
            refine_error,
            report,
            csv,
        });
    }

    /// [`SweepRun::cancel`] for levels run elsewhere: the report of those that finished.
    pub fn cancel_with(self, outputs: Vec<servesim_core::sweep::LevelOutput>) -> FromWorker {
        self.cancelled(|r| r.finish_with(outputs))
    }

    /// Stops the run; the message carries the report of the levels that ran.
    pub fn cancel(self) -> FromWorker {
        self.cancelled(SweepRunner::finish)
    }

    /// The `Cancelled` message with the report of the sweep `finish` makes of the runner (none
    /// for a comparison's `Predict`).
    fn cancelled(
        mut self,
        finish: impl FnOnce(SweepRunner<'r>) -> servesim_core::sweep::SweepResult,
    ) -> FromWorker {
        let (report, csv) = match self.runner.take() {
            Some(_) if self.predict.is_some() => (None, None),
            Some(r) => {
                let (a, b) = self.report(&finish(r));
                (Some(a), Some(b))
            }
            None => (None, None),
        };
        FromWorker::Cancelled {
            id: self.id,
            report,
            csv,
        }
    }
}

/// The worker's run loop without the browser (tested natively): runs every level, polling
/// `cancelled()` before each one.
pub fn run_sweep(
    id: u32,
    scenario_json: &str,
    send: &mut dyn FnMut(FromWorker),
    cancelled: &mut dyn FnMut() -> bool,
) {
    run_job(
        &ToWorker::Run {
            id,
            scenario: scenario_json.to_string(),
        },
        send,
        cancelled,
    )
}

/// The scenario and its resolution for a `Run` or `Predict` request (None for `Cancel`).
pub fn prepare_job(
    msg: &ToWorker,
) -> Option<Result<(Scenario, ResolvedScenario), Box<FromWorker>>> {
    match msg {
        ToWorker::Run { id, scenario } => Some(prepare(*id, scenario)),
        ToWorker::Predict {
            id,
            scenario,
            level_kind,
            levels,
        } => Some(prepare_predict(*id, scenario, *level_kind, levels)),
        ToWorker::Cancel { .. }
        | ToWorker::ParseCommand { .. }
        | ToWorker::Commands { .. }
        | ToWorker::Catalog { .. }
        | ToWorker::Check { .. }
        | ToWorker::Import { .. } => None,
    }
}

/// Starts the level-by-level run of a prepared `Run` or `Predict`.
pub fn start_job<'r>(
    msg: &ToWorker,
    scenario: &'r Scenario,
    resolved: &'r ResolvedScenario,
) -> Result<SweepRun<'r>, Box<FromWorker>> {
    match msg {
        ToWorker::Predict { id, level_kind, .. } => {
            SweepRun::new_predict(*id, scenario, resolved, *level_kind)
        }
        ToWorker::Run { id, .. }
        | ToWorker::Cancel { id }
        | ToWorker::ParseCommand { id, .. }
        | ToWorker::Commands { id, .. }
        | ToWorker::Catalog { id }
        | ToWorker::Check { id, .. }
        | ToWorker::Import { id, .. } => SweepRun::new(*id, scenario, resolved),
    }
}

/// [`run_sweep`] for any request: a sweep (`Run`) or a comparison's prediction (`Predict`).
pub fn run_job(
    msg: &ToWorker,
    send: &mut dyn FnMut(FromWorker),
    cancelled: &mut dyn FnMut() -> bool,
) {
    let (s, r) = match prepare_job(msg) {
        Some(Ok(x)) => x,
        Some(Err(m)) => return send(*m),
        None => return,
    };
    let mut run = match start_job(msg, &s, &r) {
        Ok(x) => x,
        Err(m) => return send(*m),
    };
    send(run.started());
    loop {
        if cancelled() {
            return send(run.cancel());
        }
        if !run.step(send) {
            return;
        }
    }
}

/// JSON that carries every float exactly: each non-integer number is written as
/// `{"\u0001f64": "<shortest round-trip decimal>"}` and read back with `str::parse::<f64>`
/// (exact), integers stay JSON integers (exact in serde_json).
pub mod exact {
    use serde::de::DeserializeOwned;
    use serde::Serialize;
    use serde_json::{Map, Number, Value};

    const KEY: &str = "\u{1}f64";

    pub fn to_string<T: Serialize>(x: &T) -> Result<String, String> {
        let mut v = serde_json::to_value(x).map_err(|e| e.to_string())?;
        wrap(&mut v);
        serde_json::to_string(&v).map_err(|e| e.to_string())
    }

    pub fn from_str<T: DeserializeOwned>(s: &str) -> Result<T, String> {
        let mut v: Value = serde_json::from_str(s).map_err(|e| e.to_string())?;
        unwrap(&mut v)?;
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    fn wrap(v: &mut Value) {
        match v {
            Value::Number(n) if n.is_f64() => {
                let text = n.as_f64().map(|f| f.to_string()).unwrap_or_default();
                let mut m = Map::new();
                m.insert(KEY.to_string(), Value::String(text));
                *v = Value::Object(m);
            }
            Value::Array(a) => a.iter_mut().for_each(wrap),
            Value::Object(m) => m.values_mut().for_each(wrap),
            _ => {}
        }
    }

    fn unwrap(v: &mut Value) -> Result<(), String> {
        match v {
            Value::Object(m) if m.len() == 1 && m.contains_key(KEY) => {
                let f = m
                    .get(KEY)
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<f64>().ok())
                    .and_then(Number::from_f64)
                    .ok_or_else(|| format!("a float written as {:?} cannot be read", m.get(KEY)))?;
                *v = Value::Number(f);
                Ok(())
            }
            Value::Array(a) => a.iter_mut().try_for_each(unwrap),
            Value::Object(m) => m.values_mut().try_for_each(unwrap),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stall_limit_is_30_s_unless_the_query_sets_a_sane_one() {
        assert_eq!(stall_ms_from_query(""), 30_000.0);
        assert_eq!(stall_ms_from_query("?stall_ms=1500"), 1500.0);
        assert_eq!(stall_ms_from_query("?x=1&stall_ms=2000"), 2000.0);
        for bad in [
            "?stall_ms=0",
            "?stall_ms=-5",
            "?stall_ms=abc",
            "?stall_ms=1e9",
            "?stall_ms=NaN",
        ] {
            assert_eq!(stall_ms_from_query(bad), 30_000.0, "{bad}");
        }
        assert_eq!(fmt_stall(30_000.0), "30 s");
        assert_eq!(fmt_stall(1_500.0), "1.5 s");
    }

    /// A quick scenario: 3 levels of 20 simulated seconds.
    pub(crate) fn small_scenario() -> Scenario {
        let mut s = Scenario::default_scenario();
        s.sweep.concurrency = Some(vec![1.0, 4.0, 16.0]);
        s.sweep.duration_s = Some(20.0);
        s.sweep.warmup_s = Some(2.0);
        s
    }

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            FromWorker::Ready,
            FromWorker::Started {
                id: 3,
                levels: vec![Level::Concurrency(1), Level::RequestRate(0.5)],
            },
            FromWorker::Progress {
                id: 3,
                index: 1,
                levels: 4,
            },
            FromWorker::Cancelled {
                id: 3,
                report: None,
                csv: None,
            },
            FromWorker::Error {
                id: 3,
                field: Some("tp".into()),
                message: "x".into(),
            },
        ];
        for m in msgs {
            assert_eq!(FromWorker::from_json(&m.to_json()).unwrap(), m);
        }
        let run = ToWorker::Run {
            id: 7,
            scenario: small_scenario().to_json(),
        };
        assert_eq!(ToWorker::from_json(&run.to_json()).unwrap(), run);
        assert!(run.to_json().contains("\"type\":\"run\""));
    }

    #[test]
    fn sweep_reports_each_level_in_order_then_the_cli_report() {
        let mut got = Vec::new();
        let json = small_scenario().to_json();
        run_sweep(9, &json, &mut |m| got.push(m), &mut || false);
        assert!(matches!(&got[0], FromWorker::Started { levels, .. } if levels.len() == 3));
        let levels: Vec<(usize, f64)> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { index, result, .. } => Some((*index, result.level.value())),
                _ => None,
            })
            .collect();
        assert_eq!(levels, vec![(0, 1.0), (1, 4.0), (2, 16.0)]);
        assert!(got.iter().all(|m| m.run_id() == Some(9)));
        let Some(FromWorker::Done { report, csv, .. }) = got.last() else {
            panic!("last message is Done: {:?}", got.last());
        };
        // The report is the core's SweepReport of the same scenario: what the CLI prints.
        let s = Scenario::from_json(&json).unwrap();
        let r = s.resolve().unwrap();
        let mut native = r.run().unwrap();
        r.refine(&mut native, REFINE_STEPS).unwrap();
        assert_eq!(
            report,
            &SweepReport::new(&s, &r, &native).to_json_pretty(),
            "worker report == servesim sweep --json --refine-sla 8"
        );
        assert_eq!(csv.lines().count(), 4);
        // Levels sent one by one are the report's levels.
        let sent: Vec<LevelResult> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Level { result, .. } => Some((**result).clone()),
                _ => None,
            })
            .collect();
        assert_eq!(sent, native.levels);
    }

    #[test]
    fn a_crossing_is_refined_by_simulation_after_the_levels() {
        // The SLA crossing between C = 4 and C = 64: a per-user speed halfway between the two.
        let mut s = small_scenario();
        s.sweep.concurrency = Some(vec![4.0, 64.0]);
        let plain = s.resolve().unwrap().run().unwrap();
        let speed = |i: usize| plain.levels[i].e2e_tokens_per_s_per_user.unwrap();
        let gate = (speed(0) + speed(1)) / 2.0;
        s.sweep.sla =
            crate::form::parse_sla(&format!("e2e_tokens_per_s_per_user>={gate}")).unwrap();
        let mut got = Vec::new();
        run_sweep(5, &s.to_json(), &mut |m| got.push(m), &mut || false);
        let refining = got
            .iter()
            .position(|m| {
                matches!(
                    m,
                    FromWorker::Refining {
                        max_steps: REFINE_STEPS,
                        ..
                    }
                )
            })
            .expect("a Refining message");
        assert!(matches!(
            got[refining - 1],
            FromWorker::Level { index: 1, .. }
        ));
        let Some(FromWorker::Done {
            refined: Some(refined),
            refine_error: None,
            report,
            ..
        }) = got.last()
        else {
            panic!("Done with a refinement: {:?}", got.last());
        };
        assert_eq!((refined.lower, refined.upper), (4.0, 64.0));
        assert!(!refined.steps.is_empty() && refined.steps.len() <= REFINE_STEPS);
        assert!(refined.highest_passing >= 4.0 && refined.lowest_failing <= 64.0);
        let v: serde_json::Value = serde_json::from_str(report).unwrap();
        assert_eq!(
            v["refined_operating_point"]["highest_passing"].as_f64(),
            Some(refined.highest_passing)
        );
    }

    #[test]
    fn cancel_between_levels_stops_the_sweep_with_a_partial_report() {
        let mut got = Vec::new();
        let mut polls = 0;
        run_sweep(
            1,
            &small_scenario().to_json(),
            &mut |m| got.push(m),
            &mut || {
                polls += 1;
                polls > 1
            },
        );
        let n_levels = got
            .iter()
            .filter(|m| matches!(m, FromWorker::Level { .. }))
            .count();
        assert_eq!(n_levels, 1);
        let Some(FromWorker::Cancelled {
            id: 1,
            report: Some(report),
            ..
        }) = got.last()
        else {
            panic!("ends with Cancelled: {:?}", got.last());
        };
        let v: serde_json::Value = serde_json::from_str(report).unwrap();
        assert_eq!(v["cancelled"], true);
        assert_eq!(v["levels"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn bad_scenario_json_is_an_error_message_not_a_panic() {
        let mut got = Vec::new();
        run_sweep(2, "{not json", &mut |m| got.push(m), &mut || false);
        assert!(matches!(&got[..], [FromWorker::Error { id: 2, .. }]));
    }

    #[test]
    fn a_deployment_that_does_not_fit_is_an_error_naming_the_fix() {
        let mut s = small_scenario();
        s.model = crate::core_api::ModelRef::Catalog("meta-llama/Meta-Llama-3.1-405B".into());
        let mut got = Vec::new();
        run_sweep(4, &s.to_json(), &mut |m| got.push(m), &mut || false);
        match &got[..] {
            [FromWorker::Error { field, message, .. }] => {
                assert_eq!(field.as_deref(), Some("deployment"));
                assert!(message.contains("does not fit"), "{message}");
                assert!(message.contains("Fixes"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    fn predict_msg(id: u32, levels: &[f64]) -> ToWorker {
        ToWorker::Predict {
            id,
            scenario: small_scenario().to_json(),
            level_kind: LevelKind::Concurrency,
            levels: levels.iter().map(|l| l.to_string()).collect(),
        }
    }

    /// Runs a request through JSON both ways, as the page and the worker exchange it.
    fn run_over_json(msg: &ToWorker, cancel_after: Option<usize>) -> Vec<FromWorker> {
        let msg = ToWorker::from_json(&msg.to_json()).unwrap();
        let mut got = Vec::new();
        let mut polls = 0;
        run_job(
            &msg,
            &mut |m| got.push(FromWorker::from_json(&m.to_json()).unwrap()),
            &mut || {
                polls += 1;
                cancel_after.is_some_and(|n| polls > n)
            },
        );
        got
    }

    #[test]
    fn predict_answers_level_by_level_with_the_native_prediction_bit_for_bit() {
        let got = run_over_json(&predict_msg(5, &[2.0, 8.0]), None);
        assert!(matches!(&got[0], FromWorker::Started { id: 5, levels } if levels.len() == 2));
        let progress: Vec<usize> = got
            .iter()
            .filter_map(|m| match m {
                FromWorker::Progress {
                    index, levels: 2, ..
                } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(progress, vec![0, 1]);
        assert!(!got.iter().any(|m| matches!(m, FromWorker::Level { .. })));
        let Some(FromWorker::Predicted { id: 5, series }) = got.last() else {
            panic!("ends with Predicted: {:?}", got.last());
        };
        // The same prediction made natively in one call (what the main thread used to do).
        let native = crate::compare_ui::predict::predict(
            &small_scenario(),
            LevelKind::Concurrency,
            &[2.0, 8.0],
        )
        .unwrap();
        let wire = series.to_series().unwrap();
        assert_eq!(wire, native);
        for ((_, a), (_, b)) in wire.points.iter().zip(&native.points) {
            for (k, v) in a {
                assert_eq!(v.to_bits(), b[k].to_bits(), "{k:?} bit-exact");
            }
        }
    }

    #[test]
    fn predict_cancelled_between_levels_ends_without_a_series() {
        let got = run_over_json(&predict_msg(6, &[1.0, 4.0, 16.0]), Some(1));
        let started_levels = got
            .iter()
            .filter(|m| matches!(m, FromWorker::Progress { .. }))
            .count();
        assert_eq!(started_levels, 1);
        assert!(matches!(
            got.last(),
            Some(FromWorker::Cancelled {
                id: 6,
                report: None,
                csv: None
            })
        ));
    }

    #[test]
    fn predict_errors_name_the_problem() {
        // A fractional concurrency cannot be simulated (whole clients).
        let got = run_over_json(&predict_msg(7, &[2.5]), None);
        match &got[..] {
            [FromWorker::Error { id: 7, message, .. }] => {
                assert!(message.contains("whole number"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        let bad = ToWorker::Predict {
            id: 8,
            scenario: small_scenario().to_json(),
            level_kind: LevelKind::RequestRate,
            levels: vec!["fast".into()],
        };
        match &run_over_json(&bad, None)[..] {
            [FromWorker::Error { id: 8, message, .. }] => assert!(message.contains("fast")),
            other => panic!("{other:?}"),
        }
        let broken = ToWorker::Predict {
            id: 9,
            scenario: "{".into(),
            level_kind: LevelKind::Concurrency,
            levels: vec!["1".into()],
        };
        assert!(matches!(
            &run_over_json(&broken, None)[..],
            [FromWorker::Error { id: 9, .. }]
        ));
    }

    #[test]
    fn wire_series_keeps_awkward_floats_exact() {
        let vals = [0.1 + 0.2, 1.0 / 3.0, 123456.789e-300, f64::MAX, 5e-324];
        let series = PredictedSeries {
            level_kind: LevelKind::RequestRate,
            points: vals
                .iter()
                .map(|v| (*v, [(MetricId::OutputTokensPerS, *v)].into_iter().collect()))
                .collect(),
            kv_capacity_tokens: Some(7),
            evidence: Some("1 run | 2 sources".into()),
        };
        let msg = FromWorker::Predicted {
            id: 1,
            series: WireSeries::from_series(&series),
        };
        let FromWorker::Predicted { series: back, .. } =
            FromWorker::from_json(&msg.to_json()).unwrap()
        else {
            panic!()
        };
        let back = back.to_series().unwrap();
        assert_eq!(back.evidence, series.evidence);
        for ((l, m), v) in back.points.iter().zip(vals) {
            assert_eq!(l.to_bits(), v.to_bits());
            assert_eq!(m[&MetricId::OutputTokensPerS].to_bits(), v.to_bits());
        }
        let mut bad = WireSeries::from_series(&series);
        bad.points[0].1.insert("no_such_metric".into(), "1".into());
        assert!(bad.to_series().unwrap_err().contains("no_such_metric"));
    }

    #[test]
    fn sweep_fraction_counts_finished_levels() {
        assert_eq!(sweep_fraction(0, 4), 0.0);
        assert_eq!(sweep_fraction(1, 4), 0.25);
        assert_eq!(sweep_fraction(4, 4), 1.0);
        assert_eq!(sweep_fraction(0, 0), 1.0);
    }

    #[test]
    fn exact_json_carries_every_float_to_the_last_bit() {
        let xs: Vec<f64> = vec![
            // 185.66666666666666: serde_json's default parser reads it back as ...663.
            3342.0 / 18.0,
            0.1 + 0.2,
            1.0 / 3.0,
            5e-324,
            1.7976931348623157e308,
            -2.2250738585072014e-308,
            0.35842078800000005,
            123456789.12345679,
            3.0,
        ];
        let back: Vec<f64> = exact::from_str(&exact::to_string(&xs).unwrap()).unwrap();
        assert_eq!(
            xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        // Integers stay integers; a stray marker object is refused, not guessed.
        assert_eq!(exact::to_string(&vec![1u64, 2]).unwrap(), "[1,2]");
        assert!(exact::from_str::<Vec<f64>>("[{\"\\u0001f64\":\"x\"}]").is_err());
    }

    #[test]
    fn worker_messages_reach_the_page_bit_exact() {
        let m = FromWorker::LevelProgress {
            id: 3,
            index: 1,
            fraction: 3342.0 / 18.0,
        };
        let back = FromWorker::from_json(&m.to_json()).unwrap();
        let FromWorker::LevelProgress { fraction, .. } = back else {
            panic!("the same message comes back")
        };
        assert_eq!(fraction.to_bits(), (3342.0f64 / 18.0).to_bits());
        // Plain serde_json (no exact form) would not carry it.
        let plain: f64 = serde_json::from_str(&(3342.0f64 / 18.0).to_string()).unwrap();
        assert_ne!(plain.to_bits(), (3342.0f64 / 18.0).to_bits());
    }
}
