//! Sweeps: one scenario at a list of levels, plus the SLA operating point.
//!
//! `sweep(&EngineConfig, &dyn StepTimeModel, &WorkloadSpec, &SweepSpec)` runs everything;
//! [`SweepRunner`] runs one level per call (progress and cancellation between levels), or any
//! level on its own ([`SweepRunner::run_at`]) for levels run on several threads or workers and
//! assembled with [`SweepRunner::finish_with`].
//! See `docs/metrics.md` for the window and the operating-point interpolation.
//!
//! A level is simulated by `topology::run_plan_level` over a [`SimPlan`] (pools of replicas,
//! their front-ends, the router; docs/topology.md); this module keeps the levels, progress,
//! cancellation and the operating point.

use crate::bounds::{self, fmt_num};
use crate::engine::{EngineConfig, SimError, StepTimeModel};
use crate::metric::MetricId;
use crate::metrics::{Collector, LevelResult};
use crate::topology::{run_plan_level, SimPlan, TopologyLevel, MAX_ENGINES};
use crate::units::Ticks;
use crate::workload::{Arrival, Level, WorkloadError, WorkloadSpec};
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Sweep failures.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SweepError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("sweep setting `{field}`: {problem}")]
    Spec { field: String, problem: String },
}

fn spec_err(field: &str, problem: impl Into<String>) -> SweepError {
    SweepError::Spec {
        field: field.into(),
        problem: problem.into(),
    }
}

/// Comparison of an SLA gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GateOp {
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
}

impl GateOp {
    /// The operator as written in a gate's text (`>=`, `>`, `<=`, `<`).
    pub fn symbol(self) -> &'static str {
        match self {
            GateOp::Ge => ">=",
            GateOp::Gt => ">",
            GateOp::Le => "<=",
            GateOp::Lt => "<",
        }
    }
}

/// Reads SLA gates written as text, `METRIC>=VALUE, METRIC<VALUE, ...` (operators `>=`, `>`,
/// `<=`, `<`): `servesim sweep --sla` and the page's SLA field. The error quotes the gate at
/// fault; the caller puts its field or flag in front (`--sla `x>1`: ...`).
pub fn parse_sla(s: &str) -> Result<Vec<RawGate>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let ops = [GateOp::Ge, GateOp::Le, GateOp::Gt, GateOp::Lt];
        let Some((i, tok, op)) = ops
            .iter()
            .filter_map(|op| part.find(op.symbol()).map(|i| (i, op.symbol(), *op)))
            .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())))
        else {
            return Err(format!(
                "`{part}`: expected METRIC>=VALUE (operators >=, >, <=, <)"
            ));
        };
        let metric = part[..i].trim();
        let value = part[i + tok.len()..]
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("`{part}`: the value is not a number"))?;
        if MetricId::from_name(metric).is_none() {
            return Err(format!(
                "`{part}`: unknown metric `{metric}`; known: {}",
                MetricId::all()
                    .iter()
                    .map(|m| m.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out.push(RawGate {
            metric: metric.to_string(),
            op,
            value,
        });
    }
    Ok(out)
}

/// SLA gates as the text [`parse_sla`] reads (`metric>=50, ttft_ms_p50<5000`); values in
/// Rust's shortest form, so the text reads back to the same gates.
pub fn sla_text(gates: &[RawGate]) -> String {
    gates
        .iter()
        .map(|g| format!("{}{}{}", g.metric, g.op.symbol(), g.value))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One SLA condition, e.g. `e2e_tokens_per_s_per_user >= 50`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGate {
    pub metric: String,
    pub op: GateOp,
    pub value: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gate {
    pub metric: MetricId,
    pub op: GateOp,
    pub value: f64,
}

impl Gate {
    /// Whether a level passes this gate; `None` when the level has no value for the metric (no
    /// measured request, or a window without a rate): such a level neither passes nor fails.
    pub fn verdict(&self, r: &LevelResult) -> Option<bool> {
        r.get(self.metric).map(|v| match self.op {
            GateOp::Ge => v >= self.value,
            GateOp::Gt => v > self.value,
            GateOp::Le => v <= self.value,
            GateOp::Lt => v < self.value,
        })
    }
    /// Whether a level passes this gate (a level without a value does not pass it).
    pub fn passes(&self, r: &LevelResult) -> bool {
        self.verdict(r) == Some(true)
    }
}

/// A level against every gate: `Some(false)` when any gate fails, `None` when none fails but
/// some gate has no value at this level (the level neither passes nor fails), else `Some(true)`.
pub fn level_verdict(gates: &[Gate], r: &LevelResult) -> Option<bool> {
    let mut undecided = false;
    for g in gates {
        match g.verdict(r) {
            Some(false) => return Some(false),
            None => undecided = true,
            Some(true) => {}
        }
    }
    (!undecided).then_some(true)
}

/// A sweep as written (JSON).
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSweepSpec {
    /// Concurrency levels (closed loop, burst). Default 1, 2, 4, ..., 512.
    #[serde(default)]
    pub concurrency: Option<Vec<f64>>,
    /// Request-rate levels (open loop, trace). Default: the workload's own rate.
    #[serde(default)]
    pub request_rates: Option<Vec<f64>>,
    /// Simulated seconds per level (default 900).
    #[serde(default)]
    pub duration_s: Option<f64>,
    /// Instead of a duration: issue this many requests per level and run until all finish.
    #[serde(default)]
    pub num_requests: Option<f64>,
    /// Warm-up excluded from the window (default 10% of the duration).
    #[serde(default)]
    pub warmup_s: Option<f64>,
    /// Engine instances (DP ranks x replicas) behind the router (default 1).
    #[serde(default)]
    pub engines: Option<f64>,
    /// GPUs used by all engines together, for per-GPU throughput (default 1).
    #[serde(default)]
    pub gpus: Option<f64>,
    /// SLA gates, all required.
    #[serde(default)]
    pub sla: Vec<RawGate>,
    #[serde(default)]
    pub max_events: Option<f64>,
    #[serde(default)]
    pub max_requests: Option<f64>,
}

/// How a level ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// Run `duration` of simulated time; the window is `[warmup, duration]`.
    Duration { duration: Ticks, warmup: Ticks },
    /// Issue `n` requests and run until all finish; the window is the whole run.
    Requests(u64),
    /// A burst level (burst arrival, none of `duration_s`, `warmup_s`, `num_requests` stated):
    /// the level's burst is sent at t = 0 and the level runs until all of it finishes, as
    /// `vllm bench serve` without `--max-concurrency` does; each level is
    /// `Requests(burst size)` ([`Stop::at`]).
    Burst,
}

/// Simulated seconds per level when `duration_s` is not stated.
pub const DEFAULT_DURATION_S: f64 = 900.0;
/// Warm-up as a fraction of the duration when `warmup_s` is not stated.
pub const DEFAULT_WARMUP_FRACTION: f64 = 0.1;

impl Stop {
    /// The stop of a sweep that states none: [`DEFAULT_DURATION_S`] with its default warm-up.
    pub fn default_duration() -> Stop {
        Stop::Duration {
            duration: Ticks::from_secs_f64(DEFAULT_DURATION_S),
            warmup: Ticks::from_secs_f64(DEFAULT_WARMUP_FRACTION * DEFAULT_DURATION_S),
        }
    }

    /// How a level of workload `w` (already at its level) ends: [`Stop::Burst`] becomes
    /// `Requests(burst size)`; a burst stop on another arrival (never produced by
    /// `Scenario::resolve`) runs the default duration.
    pub fn at(self, w: &crate::workload::WorkloadSpec) -> Stop {
        match (self, &w.arrival) {
            (Stop::Burst, crate::workload::Arrival::Burst { count }) => Stop::Requests(*count),
            (Stop::Burst, _) => Stop::default_duration(),
            (s, _) => s,
        }
    }
}

/// A validated sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepSpec {
    /// Levels; empty means the default for the workload's arrival type.
    pub levels: Vec<Level>,
    pub stop: Stop,
    pub engines: u32,
    pub gpus: u32,
    pub sla: Vec<Gate>,
    pub max_events: u64,
    pub max_requests: u64,
    /// The API server in front of the engines (zero: requests reach the engine when sent).
    pub frontend: FrontEnd,
    /// Bytes of simulation records one level may hold (`crate::budget`); checked before and
    /// while a level runs. Not part of the scenario: the host sets it (CLI 4 GiB, page 1 GiB).
    pub memory_budget: u64,
}

/// The OpenAI-compatible API server between the benchmark client and the engine core
/// (docs/accuracy.md "Front-end terms"). With `render_round` > 0 a request first waits for its
/// round of chat-template renders on the event loop: a round starts when the loop is free and
/// takes every request sent by then (those sent at the same instant as its start join it), `n x
/// render_round` long; its requests leave it together at its end, and requests sent during it wait
/// for the next round. A request then waits for the server's serial CPU work (one request at a
/// time, FIFO: `start = max(ready, previous start + serial)`, `serial = serial_per_request + prompt
/// tokens x serial_per_input_token`), and reaches the engine `latency` later: `engine arrival =
/// start + serial + latency`. Client-side metrics
/// (TTFT, E2E, per-user rates, queueing, the measured window) are taken from `s`; the return path
/// (detokenisation, SSE) is pipelined with generation and its per-request part is folded into
/// `latency`. Closed-loop clients send their next request after the engine finished it (plus
/// think time), so they see both terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrontEnd {
    /// Fixed per-request latency (HTTP, chat template, tokenisation, first/last-token streaming).
    pub latency: Ticks,
    /// Serial API-server CPU time per request (queues under bursts).
    pub serial_per_request: Ticks,
    /// Serial API-server CPU time per prompt token (tokenisation), added to `serial_per_request`.
    pub serial_per_input_token: Ticks,
    /// Event-loop time of one chat-template render, done in rounds (above); zero: no render stage.
    pub render_round: Ticks,
}

impl FrontEnd {
    /// No front-end: the engine sees requests when they are sent.
    pub fn is_zero(&self) -> bool {
        self.latency == Ticks::ZERO
            && self.serial_per_request == Ticks::ZERO
            && self.serial_per_input_token == Ticks::ZERO
            && self.render_round == Ticks::ZERO
    }

    /// The serial API-server time of one request with `prompt_len` prompt tokens:
    /// `serial_per_request + prompt_len x serial_per_input_token` (saturating).
    pub fn serial(&self, prompt_len: u64) -> Ticks {
        self.serial_per_request + self.serial_per_input_token.saturating_mul(prompt_len)
    }
}

/// Default caps: generous for 900 s levels at high concurrency, small enough to fail fast.
pub const DEFAULT_MAX_EVENTS: u64 = 200_000_000;
pub const DEFAULT_MAX_REQUESTS: u64 = 20_000_000;

impl Default for SweepSpec {
    fn default() -> Self {
        SweepSpec {
            levels: Vec::new(),
            stop: Stop::default_duration(),
            engines: 1,
            gpus: 1,
            sla: Vec::new(),
            max_events: DEFAULT_MAX_EVENTS,
            max_requests: DEFAULT_MAX_REQUESTS,
            frontend: FrontEnd::default(),
            memory_budget: crate::budget::DEFAULT_MEMORY_BUDGET,
        }
    }
}

fn count(field: &str, v: f64) -> Result<u64, SweepError> {
    if !v.is_finite() || v < 1.0 || v.fract() != 0.0 || v > 1e15 {
        return Err(spec_err(
            field,
            format!("must be a whole number >= 1 (got {})", fmt_num(v)),
        ));
    }
    Ok(v as u64)
}

fn bounded_count(field: &str, v: f64, b: bounds::Bound) -> Result<u64, SweepError> {
    b.check_whole(v)
        .map_err(|fix| spec_err(field, format!("{fix} (got {})", fmt_num(v))))
}

impl RawSweepSpec {
    pub fn from_json(s: &str) -> Result<RawSweepSpec, SweepError> {
        serde_json::from_str(s).map_err(|e| spec_err("sweep", e.to_string()))
    }

    pub fn validate(&self) -> Result<SweepSpec, SweepError> {
        let mut levels = Vec::new();
        if self.concurrency.is_some() && self.request_rates.is_some() {
            return Err(spec_err(
                "request_rates",
                "give either `concurrency` or `request_rates`, not both",
            ));
        }
        for (field, n) in [
            ("concurrency", self.concurrency.as_ref().map_or(0, Vec::len)),
            (
                "request_rates",
                self.request_rates.as_ref().map_or(0, Vec::len),
            ),
        ] {
            if n > bounds::MAX_SWEEP_LEVELS {
                return Err(spec_err(
                    field,
                    format!(
                        "at most {} levels per sweep (got {n}); keep fewer levels (a measured file: fewer rows per arm)",
                        bounds::MAX_SWEEP_LEVELS
                    ),
                ));
            }
        }
        if let Some(c) = &self.concurrency {
            for v in c {
                levels.push(Level::Concurrency(bounded_count(
                    "concurrency",
                    *v,
                    bounds::CONCURRENCY,
                )? as u32));
            }
        }
        if let Some(r) = &self.request_rates {
            for v in r {
                bounds::REQUEST_RATE.check(*v).map_err(|fix| {
                    spec_err("request_rates", format!("{fix} (got {})", fmt_num(*v)))
                })?;
                levels.push(Level::RequestRate(*v));
            }
        }
        let stop = match (self.num_requests, self.duration_s) {
            (Some(_), Some(_)) => {
                return Err(spec_err(
                    "num_requests",
                    "give either `duration_s` or `num_requests`, not both",
                ))
            }
            (Some(n), None) => {
                Stop::Requests(bounded_count("num_requests", n, bounds::NUM_REQUESTS)?)
            }
            (None, d) => {
                let d = d.unwrap_or(DEFAULT_DURATION_S);
                bounds::DURATION_S
                    .check(d)
                    .map_err(|fix| spec_err("duration_s", format!("{fix} (got {})", fmt_num(d))))?;
                let w = self.warmup_s.unwrap_or(DEFAULT_WARMUP_FRACTION * d);
                if !w.is_finite() || w < 0.0 || w >= d {
                    return Err(spec_err(
                        "warmup_s",
                        format!(
                            "must be >= 0 and below duration_s ({}) (got {})",
                            fmt_num(d),
                            fmt_num(w)
                        ),
                    ));
                }
                Stop::Duration {
                    duration: Ticks::from_secs_f64(d),
                    warmup: Ticks::from_secs_f64(w),
                }
            }
        };
        let mut sla = Vec::new();
        for g in &self.sla {
            let metric = MetricId::from_name(&g.metric).ok_or_else(|| {
                spec_err(
                    "sla.metric",
                    format!(
                        "unknown metric `{}`; known: {}",
                        g.metric,
                        MetricId::all()
                            .iter()
                            .map(|m| m.name())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
            if !g.value.is_finite() {
                return Err(spec_err("sla.value", "must be a finite number"));
            }
            sla.push(Gate {
                metric,
                op: g.op,
                value: g.value,
            });
        }
        Ok(SweepSpec {
            levels,
            stop,
            engines: {
                let n = count("engines", self.engines.unwrap_or(1.0))?;
                if n > MAX_ENGINES as u64 {
                    return Err(spec_err(
                        "engines",
                        format!("{n} engines exceed the simulator's limit of {MAX_ENGINES}"),
                    ));
                }
                n as u32
            },
            gpus: count("gpus", self.gpus.unwrap_or(1.0))?.min(u32::MAX as u64) as u32,
            sla,
            max_events: bounded_count(
                "max_events",
                self.max_events.unwrap_or(DEFAULT_MAX_EVENTS as f64),
                bounds::MAX_EVENTS,
            )?,
            max_requests: bounded_count(
                "max_requests",
                self.max_requests.unwrap_or(DEFAULT_MAX_REQUESTS as f64),
                bounds::NUM_REQUESTS,
            )?,
            frontend: FrontEnd::default(),
            memory_budget: crate::budget::DEFAULT_MEMORY_BUDGET,
        })
    }
}

/// Default levels for a workload: concurrency 1, 2, 4, ..., 512 for closed loop and burst; the
/// workload's own rate for open-loop and trace arrivals.
pub fn default_levels(w: &WorkloadSpec) -> Vec<Level> {
    match w.arrival {
        Arrival::ClosedLoop { .. } | Arrival::Burst { .. } => {
            (0..10).map(|i| Level::Concurrency(1 << i)).collect()
        }
        _ => w.own_level().into_iter().collect(),
    }
}

/// Runs one level and returns its collector (for tests and exporters) and result: one replica
/// of `spec.engines` DP ranks behind `spec.frontend` ([`SimPlan::single`]).
///
/// Event order: the earliest of (next arrival, earliest engine event); at equal times arrivals
/// (including client think-time wake-ups) go first, then engine events by engine index; within
/// arrivals, insertion order.
pub fn run_level(
    cfg: &EngineConfig,
    model: &dyn StepTimeModel,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
) -> Result<(LevelResult, Collector), SweepError> {
    run_level_observed(cfg, model, workload, spec, level, &mut |_| {})
}

/// Events between two calls of a level's progress callback.
pub const PROGRESS_EVERY_EVENTS: u64 = 1 << 16;

/// [`run_level`], calling `progress(fraction)` every [`PROGRESS_EVERY_EVENTS`] events with how far
/// the level has got: simulated time / duration, or finished requests / requests. The callback
/// only observes (it cannot change the run), so results are identical to [`run_level`]'s.
pub fn run_level_observed(
    cfg: &EngineConfig,
    model: &dyn StepTimeModel,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
    progress: &mut dyn FnMut(f64),
) -> Result<(LevelResult, Collector), SweepError> {
    let plan = SimPlan::single(cfg, model, spec.engines, spec.frontend);
    let (r, col, _) = run_plan_level(&plan, workload, spec, level, progress, Collector::new())?;
    Ok((r, col))
}

/// One level of a plan (pools, replicas, router): results, collector and per-replica results.
pub fn run_level_plan(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
) -> Result<(LevelResult, Collector, Option<TopologyLevel>), SweepError> {
    run_plan_level(plan, workload, spec, level, &mut |_| {}, Collector::new())
}

/// [`run_level_plan`] with a streaming collector ([`Collector::streaming`]): the same result in
/// less memory, without the per-request records (for callers that only need the result).
pub fn run_level_plan_streamed(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    level: Level,
) -> Result<(LevelResult, Option<TopologyLevel>), SweepError> {
    run_plan_level(
        plan,
        workload,
        spec,
        level,
        &mut |_| {},
        Collector::streaming(),
    )
    .map(|(r, _, t)| (r, t))
}

/// The SLA crossing between the last passing and the first failing level.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Crossing {
    /// Interpolated level.
    pub level: f64,
    /// Interpolated output tok/s per GPU at that level.
    pub output_tokens_per_s_per_gpu: f64,
    /// The bracketing levels.
    pub lower: f64,
    pub upper: f64,
}

/// Where the SLA gates are met.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatingPoint {
    /// The highest level that passes every gate.
    pub highest_passing: Option<f64>,
    pub highest_passing_output_tokens_per_s_per_gpu: Option<f64>,
    pub crossing: Option<Crossing>,
    /// e.g. "C ~ 6.4 -> 19.9 tok/s/GPU".
    pub summary: String,
    /// Levels without a value for some gate's metric (neither passing nor failing; skipped).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undecided: Vec<f64>,
}

/// Finds the operating point of levels sorted by increasing level value. The crossing is
/// interpolated linearly in log(level) between the last passing level `a` (of the leading run of
/// passing levels) and the next level `b`: for each gate failing at `b`, `f = (threshold - m(a)) /
/// (m(b) - m(a))` clamped to [0, 1]; the smallest `f` wins; level = `exp(ln a + f (ln b - ln a))`,
/// throughput per GPU = `tput(a) + f (tput(b) - tput(a))`.
pub fn operating_point(levels: &[LevelResult], gates: &[Gate]) -> Option<OperatingPoint> {
    if gates.is_empty() || levels.is_empty() {
        return None;
    }
    // Levels without a value for some gate neither pass nor fail: they are left out.
    let undecided: Vec<f64> = levels
        .iter()
        .filter(|r| level_verdict(gates, r).is_none())
        .map(|r| r.level.value())
        .collect();
    let decided: Vec<(&LevelResult, bool)> = levels
        .iter()
        .filter_map(|r| level_verdict(gates, r).map(|p| (r, p)))
        .collect();
    let highest = decided
        .iter()
        .filter(|(_, p)| *p)
        .map(|(r, _)| *r)
        .max_by(|a, b| a.level.value().total_cmp(&b.level.value()));
    let prefix = if let Some(c) = levels.first() {
        if let Level::Concurrency(_) = c.level {
            "C"
        } else {
            "rate"
        }
    } else {
        "C"
    };
    let mut crossing = None;
    if let Some(i) = decided.iter().position(|(_, p)| !p) {
        if i > 0 {
            let (a, b) = (decided[i - 1].0, decided[i].0);
            let mut f: f64 = 1.0;
            for g in gates.iter().filter(|g| !g.passes(b)) {
                let fg = match (a.get(g.metric), b.get(g.metric)) {
                    (Some(ma), Some(mb)) if mb != ma => {
                        ((g.value - ma) / (mb - ma)).clamp(0.0, 1.0)
                    }
                    _ => 0.0,
                };
                f = f.min(fg);
            }
            let (la, lb) = (a.level.value(), b.level.value());
            let lvl = libm::exp(libm::log(la) + f * (libm::log(lb) - libm::log(la)));
            // Without a throughput at either end there is nothing to interpolate.
            if let (Some(ta), Some(tb)) =
                (a.output_tokens_per_s_per_gpu, b.output_tokens_per_s_per_gpu)
            {
                crossing = Some(Crossing {
                    level: lvl,
                    output_tokens_per_s_per_gpu: ta + f * (tb - ta),
                    lower: la,
                    upper: lb,
                });
            }
        }
    }
    let tput = |t: Option<f64>| t.map_or("no value".to_string(), |t| format!("{t:.2}"));
    let mut summary = match (&crossing, highest) {
        (Some(c), _) => format!(
            "{prefix} ~ {:.2} -> {:.2} tok/s/GPU",
            c.level, c.output_tokens_per_s_per_gpu
        ),
        (None, Some(h)) if decided.iter().all(|(_, p)| *p) => format!(
            "{prefix} = {} -> {} tok/s/GPU (every level passes)",
            h.level.value(),
            tput(h.output_tokens_per_s_per_gpu)
        ),
        (None, Some(h)) => format!(
            "{prefix} = {} -> {} tok/s/GPU (highest passing level)",
            h.level.value(),
            tput(h.output_tokens_per_s_per_gpu)
        ),
        (None, None) if decided.is_empty() => "no level has a value for every gate".to_string(),
        (None, None) => "no level passes the SLA".to_string(),
    };
    if !undecided.is_empty() {
        let list: Vec<String> = undecided.iter().map(|v| format!("{v}")).collect();
        summary.push_str(&format!(
            "; {} {} without a value for a gate (neither passes nor fails): {}",
            if undecided.len() == 1 {
                "level"
            } else {
                "levels"
            },
            if prefix == "C" { "(C)" } else { "(rate)" },
            list.join(", ")
        ));
    }
    Some(OperatingPoint {
        highest_passing: highest.map(|h| h.level.value()),
        highest_passing_output_tokens_per_s_per_gpu: highest
            .and_then(|h| h.output_tokens_per_s_per_gpu),
        crossing,
        summary,
        undecided,
    })
}

/// A whole sweep's output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    pub levels: Vec<LevelResult>,
    pub operating_point: Option<OperatingPoint>,
    /// True if the sweep was stopped before its last level.
    pub cancelled: bool,
    /// Per-replica results per level (plans with more than one replica; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology: Vec<TopologyLevel>,
    /// The operating point refined by simulation (`sla_refine`), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refined_operating_point: Option<crate::sla_refine::Refinement>,
}

/// Runs a sweep one level at a time: call [`SweepRunner::step`] until it returns `None`;
/// stop calling to cancel.
pub struct SweepRunner<'m> {
    plan: SimPlan<'m>,
    workload: WorkloadSpec,
    spec: SweepSpec,
    levels: Vec<Level>,
    results: Vec<LevelResult>,
    topology: Vec<TopologyLevel>,
    /// The last level's collector, reused by the next level.
    spare: Option<Collector>,
}

impl<'m> SweepRunner<'m> {
    pub fn new(
        cfg: &EngineConfig,
        model: &'m dyn StepTimeModel,
        workload: &WorkloadSpec,
        spec: &SweepSpec,
    ) -> Result<SweepRunner<'m>, SweepError> {
        SweepRunner::with_plan(
            SimPlan::single(cfg, model, spec.engines, spec.frontend),
            workload,
            spec,
        )
    }

    /// A runner over a plan of pools and routers (what `Scenario::resolve` builds).
    pub fn with_plan(
        plan: SimPlan<'m>,
        workload: &WorkloadSpec,
        spec: &SweepSpec,
    ) -> Result<SweepRunner<'m>, SweepError> {
        plan.validate()?;
        let mut levels = if spec.levels.is_empty() {
            default_levels(workload)
        } else {
            spec.levels.clone()
        };
        if levels.is_empty() {
            return Err(spec_err(
                "request_rates",
                "trace replay at its own timestamps has no level value; give `request_rates`",
            ));
        }
        levels.sort_by(|a, b| a.value().total_cmp(&b.value()));
        for l in &levels {
            workload.at_level(*l)?;
        }
        Ok(SweepRunner {
            plan,
            workload: workload.clone(),
            spec: spec.clone(),
            levels,
            results: Vec::new(),
            topology: Vec::new(),
            spare: None,
        })
    }

    pub fn levels(&self) -> &[Level] {
        &self.levels
    }
    pub fn total_levels(&self) -> usize {
        self.levels.len()
    }
    pub fn done_levels(&self) -> usize {
        self.results.len()
    }
    pub fn results(&self) -> &[LevelResult] {
        &self.results
    }

    /// Runs the next level. `None` when every level has run.
    pub fn step(&mut self) -> Option<Result<&LevelResult, SweepError>> {
        self.step_observed(&mut |_| {})
    }

    /// [`SweepRunner::step`], reporting progress within the level (see [`run_level_observed`]).
    pub fn step_observed(
        &mut self,
        progress: &mut dyn FnMut(f64),
    ) -> Option<Result<&LevelResult, SweepError>> {
        let index = self.results.len();
        match self.run_at(index, progress)? {
            Ok(out) => {
                self.topology.extend(out.topology);
                self.results.push(out.result);
                self.results.last().map(Ok)
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Runs level `index` (of [`SweepRunner::levels`]) on its own and returns it without recording
    /// it: each level starts from an empty deployment with the workload's own seed, so a level's
    /// output does not depend on which levels ran before it, on this runner or another one.
    /// Levels can so run on several threads or workers, each with its own runner of the same
    /// scenario, and [`SweepRunner::finish_with`] assembles them into the sweep `step` would give.
    /// `None` when `index` is past the last level.
    pub fn run_at(
        &mut self,
        index: usize,
        progress: &mut dyn FnMut(f64),
    ) -> Option<Result<LevelOutput, SweepError>> {
        let level = *self.levels.get(index)?;
        let col = self.spare.take().unwrap_or_else(Collector::streaming);
        Some(
            run_plan_level(&self.plan, &self.workload, &self.spec, level, progress, col).map(
                |(result, col, topology)| {
                    self.spare = Some(col);
                    LevelOutput {
                        index,
                        result,
                        topology,
                    }
                },
            ),
        )
    }

    /// The result so far (a cancelled sweep reports the levels it ran).
    pub fn finish(self) -> SweepResult {
        let cancelled = self.results.len() < self.levels.len();
        let op = operating_point(&self.results, &self.spec.sla);
        SweepResult {
            levels: self.results,
            operating_point: op,
            cancelled,
            topology: self.topology,
            refined_operating_point: None,
        }
    }

    /// The sweep from levels run elsewhere ([`SweepRunner::run_at`] on runners of the same
    /// scenario), in any order: the same `SweepResult` as stepping through them here. Levels are
    /// taken in level order; one index given twice counts once, an index past the last level
    /// is ignored; with levels missing (a cancelled run) the result holds those that ran and
    /// `cancelled` is true. The levels this runner stepped itself are replaced.
    pub fn finish_with(mut self, mut outputs: Vec<LevelOutput>) -> SweepResult {
        outputs.sort_by_key(|o| o.index);
        outputs.dedup_by_key(|o| o.index);
        outputs.retain(|o| o.index < self.levels.len());
        self.results.clear();
        self.topology.clear();
        for o in outputs {
            self.topology.extend(o.topology);
            self.results.push(o.result);
        }
        self.finish()
    }
}

/// One level's output from [`SweepRunner::run_at`]: its index in the sweep's sorted levels, its
/// result and (plans with more than one replica, or disaggregated) its per-replica results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelOutput {
    pub index: usize,
    pub result: LevelResult,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologyLevel>,
}

/// Runs every level.
pub fn sweep(
    cfg: &EngineConfig,
    model: &dyn StepTimeModel,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
) -> Result<SweepResult, SweepError> {
    sweep_with_progress(cfg, model, workload, spec, &mut |_, _, _| true)
}

/// Runs levels in order, calling `progress(result, done, total)` after each; returning `false`
/// cancels the remaining levels.
pub fn sweep_with_progress(
    cfg: &EngineConfig,
    model: &dyn StepTimeModel,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    progress: &mut dyn FnMut(&LevelResult, usize, usize) -> bool,
) -> Result<SweepResult, SweepError> {
    let mut runner = SweepRunner::new(cfg, model, workload, spec)?;
    let total = runner.total_levels();
    while let Some(r) = runner.step() {
        let r = r?.clone();
        if !progress(&r, runner.done_levels(), total) {
            break;
        }
    }
    Ok(runner.finish())
}
