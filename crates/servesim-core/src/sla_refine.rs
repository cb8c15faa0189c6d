//! The SLA operating point refined by simulation: instead of interpolating between the last
//! passing and the first failing sweep level (`sweep::operating_point`), bisect between them,
//! running a real level simulation at every step (`sweep::run_level`). The answer is the highest
//! simulated level that passes every gate, so it does not move with the levels chosen.
//! docs/metrics.md "Refined operating point".

use crate::metrics::LevelResult;
use crate::sweep::{level_verdict, run_level_plan_streamed, SweepError, SweepSpec};
use crate::topology::SimPlan;
use crate::workload::{Level, WorkloadSpec};
use serde::{Deserialize, Serialize};

/// One bisection step: a simulated level and whether it passes every gate (`null` when the
/// level has no value for some gate: it neither passes nor fails, and the bisection stops).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RefineStep {
    pub level: f64,
    pub passes: Option<bool>,
    pub output_tokens_per_s_per_gpu: Option<f64>,
}

/// The refined operating point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Refinement {
    /// The sweep levels bracketing the crossing (last passing, first failing).
    pub lower: f64,
    pub upper: f64,
    /// Every simulated step, in order.
    pub steps: Vec<RefineStep>,
    /// The highest simulated level that passes (the bracket's lower end if no step passed).
    pub highest_passing: f64,
    pub highest_passing_output_tokens_per_s_per_gpu: Option<f64>,
    /// The lowest simulated level that fails.
    pub lowest_failing: f64,
    /// e.g. "C = 28 passes, C = 29 fails (simulated; 5 bisection steps)".
    pub summary: String,
}

/// Bisects between the last passing and the first failing level of `results` (sorted by level,
/// as a sweep returns them) with at most `max_steps` simulations. Concurrency levels bisect over
/// integers until the bracket is adjacent; rates bisect geometrically until the bracket is
/// within 1%. `None` when there is no crossing (no gate, every level passes, or the first fails).
/// Every step simulates the whole plan (all pools, replicas and the router), as the sweep did.
pub fn refine_operating_point(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    results: &[LevelResult],
    max_steps: usize,
) -> Result<Option<Refinement>, SweepError> {
    refine_operating_point_observed(plan, workload, spec, results, max_steps, &mut |_, _| {})
}

/// [`refine_operating_point`], handing every simulated step's level result and whether it
/// passes to `on_step` (the search keeps the highest passing one instead of simulating it again).
pub fn refine_operating_point_observed(
    plan: &SimPlan,
    workload: &WorkloadSpec,
    spec: &SweepSpec,
    results: &[LevelResult],
    max_steps: usize,
    on_step: &mut dyn FnMut(&LevelResult, bool),
) -> Result<Option<Refinement>, SweepError> {
    if spec.sla.is_empty() {
        return Ok(None);
    }
    // Levels without a value for some gate neither pass nor fail: the bracket is between
    // decided levels, as in `sweep::operating_point`.
    let decided: Vec<(&LevelResult, bool)> = results
        .iter()
        .filter_map(|r| level_verdict(&spec.sla, r).map(|p| (r, p)))
        .collect();
    let Some(i) = decided.iter().position(|(_, p)| !p) else {
        return Ok(None);
    };
    if i == 0 {
        return Ok(None);
    }
    let (a, b) = (decided[i - 1].0, decided[i].0);
    let mut undecided_at = None;
    let mut lo = a.level;
    let mut hi = b.level;
    let mut lo_tput = a.output_tokens_per_s_per_gpu;
    let mut steps = Vec::new();
    while steps.len() < max_steps {
        let mid = match (lo, hi) {
            (Level::Concurrency(x), Level::Concurrency(y)) => {
                if y <= x + 1 {
                    break;
                }
                Level::Concurrency(x + (y - x) / 2)
            }
            (Level::RequestRate(x), Level::RequestRate(y)) => {
                if y <= x * 1.01 {
                    break;
                }
                Level::RequestRate(libm::sqrt(x * y))
            }
            _ => break,
        };
        let (r, _) = run_level_plan_streamed(plan, workload, spec, mid)?;
        let verdict = level_verdict(&spec.sla, &r);
        let ok = verdict == Some(true);
        on_step(&r, ok);
        steps.push(RefineStep {
            level: mid.value(),
            passes: verdict,
            output_tokens_per_s_per_gpu: r.output_tokens_per_s_per_gpu,
        });
        if verdict.is_none() {
            undecided_at = Some(mid.value());
            break;
        }
        if ok {
            lo = mid;
            lo_tput = r.output_tokens_per_s_per_gpu;
        } else {
            hi = mid;
        }
    }
    let prefix = match lo {
        Level::Concurrency(_) => "C",
        Level::RequestRate(_) => "rate",
    };
    let mut summary = format!(
        "{prefix} = {} passes, {prefix} = {} fails -> {} tok/s/GPU (simulated; {} bisection step(s) between the sweep levels {} and {})",
        lo.value(),
        hi.value(),
        lo_tput.map_or("no value".to_string(), |t| format!("{t:.2}")),
        steps.len(),
        a.level.value(),
        b.level.value()
    );
    if let Some(u) = undecided_at {
        summary.push_str(&format!(
            "; stopped at {prefix} = {u}, which has no value for a gate (neither passes nor fails)"
        ));
    }
    Ok(Some(Refinement {
        lower: a.level.value(),
        upper: b.level.value(),
        steps,
        highest_passing: lo.value(),
        highest_passing_output_tokens_per_s_per_gpu: lo_tput,
        lowest_failing: hi.value(),
        summary,
    }))
}
