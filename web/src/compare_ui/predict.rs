//! Predictions at exactly the measured levels: the arm's scenario with its sweep levels replaced by
//! the measured ones (`Scenario::set_levels`, the rewrite `servesim sweep --concurrency /
//! --request-rate / --burst` does), run level by level through the core's
//! `Scenario::resolve()` and `SweepRunner`, then converted into the scorer's `PredictedSeries`.

use crate::core_api::compare::{LevelKind, PredictedSeries};
use crate::core_api::metric::MetricId;
use crate::core_api::metrics::LevelResult;
use crate::core_api::scenario::{ResolvedScenario, Scenario};
use std::collections::BTreeMap;

/// The arm's scenario rewritten to sweep exactly `levels` of `kind`.
pub fn scenario_at_levels(
    base: &Scenario,
    kind: LevelKind,
    levels: &[f64],
) -> Result<Scenario, String> {
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
    let mut s = base.clone();
    s.set_levels(kind, levels);
    Ok(s)
}

/// Every metric the simulator reports for one level, by `MetricId`.
pub fn level_metrics(r: &LevelResult) -> BTreeMap<MetricId, f64> {
    MetricId::all()
        .into_iter()
        .filter_map(|m| r.get(m).filter(|v| v.is_finite()).map(|v| (m, v)))
        .collect()
}

/// KV cache tokens per engine, the figure vLLM logs at start-up ("GPU KV cache size: N tokens",
/// one line per engine / DP rank), for the KV pool ratio.
pub fn kv_tokens_per_engine(r: &ResolvedScenario) -> Option<u64> {
    (r.capacity.fits && r.capacity.kv_cache_tokens > 0).then_some(r.capacity.kv_cache_tokens)
}

/// Builds the scorer's series from finished levels.
pub fn series_from(
    kind: LevelKind,
    results: &[LevelResult],
    kv_capacity_tokens: Option<u64>,
) -> PredictedSeries {
    PredictedSeries {
        level_kind: kind,
        points: results
            .iter()
            .map(|r| (r.level.value(), level_metrics(r)))
            .collect(),
        kv_capacity_tokens,
    }
}

/// Runs every level synchronously (native tests, the CLI-like path). The page steps the same
/// runner level by level and yields in between (see `ui.rs`).
pub fn predict(
    base: &Scenario,
    kind: LevelKind,
    levels: &[f64],
) -> Result<PredictedSeries, String> {
    let s = scenario_at_levels(base, kind, levels)?;
    let resolved = s.resolve().map_err(|e| e.to_string())?;
    let result = resolved.run().map_err(|e| e.to_string())?;
    Ok(series_from(
        kind,
        &result.levels,
        kv_tokens_per_engine(&resolved),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::compare::{
        score_arm, MeasuredLevel, MeasuredRun, ScoreOptions, SourceFormat,
    };
    use crate::core_api::workload::RawArrival;

    pub(crate) fn quick_scenario() -> Scenario {
        let mut s = Scenario::default_scenario();
        s.sweep.duration_s = Some(20.0);
        s.sweep.warmup_s = Some(2.0);
        s
    }

    #[test]
    fn the_rewritten_scenario_sweeps_exactly_the_measured_levels() {
        let s = scenario_at_levels(
            &Scenario::default_scenario(),
            LevelKind::Concurrency,
            &[3.0, 7.0],
        )
        .unwrap();
        assert_eq!(s.sweep.concurrency, Some(vec![3.0, 7.0]));
        let r = scenario_at_levels(&s, LevelKind::RequestRate, &[0.5, 2.0]).unwrap();
        assert_eq!(r.sweep.request_rates, Some(vec![0.5, 2.0]));
        assert_eq!(r.sweep.concurrency, None);
        assert!(matches!(r.workload.arrival, RawArrival::Poisson { rate } if rate == 0.5));
        let b = scenario_at_levels(&s, LevelKind::Burst, &[64.0]).unwrap();
        assert!(matches!(b.workload.arrival, RawArrival::Burst { count } if count == 64.0));
        assert!(scenario_at_levels(&s, LevelKind::Concurrency, &[2.5]).is_err());
        assert!(scenario_at_levels(&s, LevelKind::Concurrency, &[]).is_err());
    }

    #[test]
    fn predictions_exist_at_every_measured_level_and_score_against_themselves_exactly() {
        let series = predict(&quick_scenario(), LevelKind::Concurrency, &[2.0, 8.0]).unwrap();
        let levels: Vec<f64> = series.points.iter().map(|p| p.0).collect();
        assert_eq!(levels, vec![2.0, 8.0]);
        // Throughput grows with concurrency in the simulator (below saturation).
        let tput = |i: usize| series.points[i].1[&MetricId::OutputTokensPerS];
        assert!(tput(1) > tput(0));
        assert!(series.kv_capacity_tokens.unwrap() > 100_000);
        // A "measurement" equal to the prediction scores 0 % everywhere.
        let measured = MeasuredRun {
            arm: "self".into(),
            level_kind: LevelKind::Concurrency,
            levels: series
                .points
                .iter()
                .map(|(l, m)| MeasuredLevel {
                    level: *l,
                    metrics: [(MetricId::OutputTokensPerS, m[&MetricId::OutputTokensPerS])]
                        .into_iter()
                        .collect(),
                    excluded: None,
                })
                .collect(),
            kv_cache_tokens_logged: None,
            source_format: SourceFormat::Csv,
        };
        let a = score_arm(&measured, &series, &ScoreOptions::default()).unwrap();
        assert_eq!(a.metrics.len(), 1);
        assert_eq!(a.metrics[0].mape_pct, 0.0);
        assert_eq!(a.metrics[0].shape_error_pct, Some(0.0));
    }
}
