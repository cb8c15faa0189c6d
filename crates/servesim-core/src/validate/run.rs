//! Running rows: calibration keys of a row (`<generation>@<era>`), selection, simulation
//! through the scenario, and one row's scenario for `--scenario-of`.

use super::*;
use crate::metrics::LevelResult;
use serde_json::Value;

/// The serde name of a catalog GPU's generation (`hopper`, `ampere`, ...).
pub fn generation_key(gpu: &str) -> Option<String> {
    let g = row_gpu(gpu).ok()?;
    match serde_json::to_value(g.generation).ok()? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// The calibration era of a row (`engine_version`; the newest era when empty).
pub fn point_era(p: &CalibrationPoint) -> crate::perf::EngineEra {
    p.engine_version
        .as_deref()
        .and_then(|v| crate::perf::VllmVersion::parse(v).ok())
        .map(crate::perf::EngineEra::of_version)
        .unwrap_or_default()
}

/// The fitted-table key a row is fitted under: `<generation>@<era>` (e.g. `hopper@vllm-0.11`).
pub fn point_key(p: &CalibrationPoint) -> Option<String> {
    let g = row_gpu(&p.gpu).ok()?;
    Some(crate::perf::calibration_key(g.generation, point_era(p)))
}

/// Sources whose rows get harness parameters of their own: (source prefix, tag). Their rows are
/// fitted with the other rows of their calibration key, and [`HARNESS_PARAMS`] are fitted for them
/// besides under `<key>+<tag>`, so what only that harness shows does not move the key's table
/// for everyone else. The InferenceX *experimental* harness measures TTFTs of seconds at
/// concurrency 4 and input throughputs that saturate at 5.5-31k tokens/s on 8 H200s, which no
/// engine setting reproduces (docs/accuracy.md, "Misses" 1). A harness entry is read only for
/// its own rows ([`FittedEfficiencies::full_table_for_point`]), never for a user's scenario.
pub const HARNESS_KEYS: &[(&str, &str)] = &[(
    "SemiAnalysis InferenceX experimental",
    "inferencex-experimental",
)];

/// The fields fitted per harness ([`HARNESS_KEYS`]) on top of its key's table: the prefill-side
/// efficiencies, the front end and the per-layer floors and chains, where that harness departs
/// from the others (slow prefill, queued first tokens, small-batch decode twice the official
/// InferenceX run's). A harness's rows do not count as reading these fields for its key
/// (`borrow_unidentified`): the latent-attention chain of `hopper@vllm-0.15`, whose only latent
/// attention rows are this harness's GLM-5, is borrowed from the nearest release line that
/// measures it.
pub const HARNESS_PARAMS: &[&str] = &[
    "gemm_bf16",
    "gemm_fp8",
    "prefill_attention",
    "api_serial_per_request_s",
    "step_overhead_piecewise_s",
    "layer_gpu_floor_s",
    "moe_layer_floor_s",
    "mla_layer_floor_s",
];

/// A row's harness entry, `<generation>@<era>+<tag>`, when its source is in [`HARNESS_KEYS`].
pub fn harness_key(p: &CalibrationPoint) -> Option<String> {
    let tag = HARNESS_KEYS
        .iter()
        .find(|(prefix, _)| p.source.starts_with(prefix))
        .map(|&(_, tag)| tag)?;
    Some(format!("{}+{tag}", point_key(p)?))
}

/// Simulates one point: gets the setup and the efficiency overrides of its GPU generation
/// (a JSON object, possibly empty) and returns the simulated level.
pub type Simulator<'a> = dyn FnMut(&PointSetup, &Value) -> Result<LevelResult, String> + 'a;

/// The rows `opts` selects.
pub fn select_points(
    points: Vec<CalibrationPoint>,
    opts: &ValidateOptions,
) -> Result<Vec<CalibrationPoint>, ValidateError> {
    let sel: Vec<CalibrationPoint> = points
        .into_iter()
        .filter(|p| {
            opts.only_source
                .as_ref()
                .is_none_or(|s| p.source.starts_with(s.as_str()))
        })
        .filter(|p| opts.only_lines.as_ref().is_none_or(|l| l.contains(&p.line)))
        .collect();
    if sel.is_empty() {
        return Err(ValidateError::NoPoints {
            filter: match &opts.only_source {
                Some(s) => format!(" with source `{s}`"),
                None => " selected".into(),
            },
        });
    }
    Ok(sel)
}

/// [`run`] with a caller-supplied simulator (tests, the fit).
pub fn run_with(
    points_csv: &str,
    opts: &ValidateOptions,
    sim: &mut Simulator,
) -> Result<ValidationReport, ValidateError> {
    let points = select_points(parse_points(points_csv)?, opts)?;
    let fitted = match &opts.efficiencies {
        Some(f) => f.clone(),
        None => fitted_efficiencies()?,
    };
    let rows = prepare_rows(points);
    let results = run_prepared(rows.iter(), &fitted, sim);
    Ok(build_report(results, fitted.description.clone()))
}

/// A selected row ready to simulate: the row, its result without comparisons (identity, notes,
/// and the capability it waits for or why it has no scenario) and its scenario's setup. The
/// mapping from the row does not depend on the efficiency table, so the fit prepares each row
/// once and simulates it under every table it tries.
#[derive(Clone, Debug)]
pub struct PreparedRow {
    pub point: CalibrationPoint,
    pub base: PointResult,
    /// `None` when the row waits for a capability or has no scenario (`base` says which).
    pub setup: Option<PointSetup>,
}

/// Maps each row to its [`PreparedRow`].
pub fn prepare_rows(points: Vec<CalibrationPoint>) -> Vec<PreparedRow> {
    points
        .into_iter()
        .map(|p| {
            let mut r = PointResult {
                line: p.line,
                source: p.source.clone(),
                model: p.model.clone(),
                gpu: p.gpu.clone(),
                tp: p.tp,
                model_family: model_family(&p).to_string(),
                calibration_key: point_key(&p),
                workload: p.workload.chars().take(60).collect(),
                comparisons: Vec::new(),
                notes: Vec::new(),
                error: None,
                waits_for: waits_for(&p),
                prompt_tokens: None,
            };
            let setup = if r.waits_for.is_some() {
                None
            } else {
                match setup_for(&p) {
                    Ok(s) => {
                        r.workload = workload_label(&p, &s);
                        r.notes = s.notes.clone();
                        r.prompt_tokens = s
                            .scenario
                            .workload
                            .validate()
                            .ok()
                            .and_then(|w| w.content.nominal_prompt_tokens());
                        Some(s)
                    }
                    Err(e) => {
                        r.error = Some(e.to_string());
                        None
                    }
                }
            };
            PreparedRow {
                point: p,
                base: r,
                setup,
            }
        })
        .collect()
}

/// Simulates prepared rows with the efficiency table `fitted` gives each, in the order given.
pub fn run_prepared<'a>(
    rows: impl Iterator<Item = &'a PreparedRow>,
    fitted: &FittedEfficiencies,
    sim: &mut Simulator,
) -> Vec<PointResult> {
    rows.map(|row| {
        let mut r = row.base.clone();
        if let Some(setup) = &row.setup {
            let eff = fitted.full_table_for_point(&row.point);
            match sim(setup, &eff) {
                Ok(level) => r.comparisons = compare_point(setup, &level),
                Err(e) => r.error = Some(e),
            }
        }
        r
    })
    .collect()
}

/// The setup's scenario with `efficiencies` set to the overrides (when non-empty): a JSON object
/// of efficiency-table fields, as the fit and the shipped table give them.
pub fn scenario_with(
    setup: &PointSetup,
    efficiencies: &Value,
) -> Result<crate::scenario::Scenario, String> {
    let mut sc = setup.scenario.clone();
    if efficiencies.as_object().is_some_and(|o| !o.is_empty()) {
        let o: crate::perf::EfficiencyOverrides = serde_json::from_value(efficiencies.clone())
            .map_err(|e| format!("efficiencies: {e}"))?;
        sc.efficiencies = Some(o);
    }
    Ok(sc)
}

/// Simulates one point: [`scenario_with`] resolved and run at its one level.
pub fn simulate(setup: &PointSetup, efficiencies: &Value) -> Result<LevelResult, String> {
    let scenario = scenario_with(setup, efficiencies)?;
    let resolved = scenario.resolve().map_err(|e| e.to_string())?;
    let result = resolved.run().map_err(|e| e.to_string())?;
    result
        .levels
        .into_iter()
        .next()
        .ok_or_else(|| "the sweep produced no level".to_string())
}

/// The scenario (runnable with `servesim sweep --scenario` once written with
/// [`crate::scenario::Scenario::to_json`]) of the row on CSV line `line`, with the efficiency
/// table `fitted` gives its GPU generation.
pub fn scenario_of_line(
    points_csv: &str,
    line: usize,
    fitted: &FittedEfficiencies,
) -> Result<crate::scenario::Scenario, ValidateError> {
    let points = parse_points(points_csv)?;
    let p = points
        .iter()
        .find(|p| p.line == line)
        .ok_or_else(|| ValidateError::NoSuchLine {
            line,
            first: points.first().map_or(0, |p| p.line),
            last: points.last().map_or(0, |p| p.line),
        })?;
    let setup = setup_for(p)?;
    let eff = fitted.full_table_for_point(p);
    scenario_with(&setup, &eff).map_err(|problem| ValidateError::Csv {
        line,
        problem,
        fix: "check data/calibration/efficiencies.json against docs/step-time.md".into(),
    })
}

/// Runs the validation: every selected row simulated through its scenario with the fitted
/// efficiencies of its GPU generation (`opts.efficiencies`, default the shipped fit).
pub fn run(points_csv: &str, opts: &ValidateOptions) -> Result<ValidationReport, ValidateError> {
    run_with(points_csv, opts, &mut |s, e| simulate(s, e))
}

/// A short label: "ShareGPT burst 1000", "random 2000/100 burst 500", "codegen 5 req/s", ...
pub(super) fn workload_label(p: &CalibrationPoint, setup: &PointSetup) -> String {
    let w = p.workload.to_ascii_lowercase();
    let kind = if w.contains("sharegpt") {
        "ShareGPT".to_string()
    } else if w.contains("random") {
        match (p.isl, p.osl) {
            (Some(i), Some(o)) => format!("random {i}/{o}"),
            _ => "random".into(),
        }
    } else if let Some(i) = w.find('\'') {
        let rest = &p.workload[i + 1..];
        rest.split('\'').next().unwrap_or("").to_string()
    } else if w.contains("sonnet") {
        "sonnet".into()
    } else if let (Some(i), Some(o)) = (p.isl, p.osl) {
        let offline = if w.starts_with("offline") {
            "offline "
        } else {
            ""
        };
        format!("{offline}fixed {i}/{o}")
    } else {
        String::new()
    };
    if kind.is_empty() {
        setup.workload_summary.clone()
    } else {
        format!("{kind}, {}", setup.workload_summary)
    }
}
