//! Predictions at exactly the measured levels: the arm's scenario with its sweep levels replaced by
//! the measured ones (`Scenario::at_measured_levels`, the rewrite `servesim sweep --concurrency /
//! --request-rate / --burst` does), run level by level through the core's
//! `Scenario::resolve()` and `SweepRunner`, then converted into the scorer's `PredictedSeries`
//! (`compare::predict` in the core, shared with `servesim compare`).

use crate::core_api::compare::LevelKind;
use crate::core_api::scenario::Scenario;

/// The arm's scenario rewritten to sweep exactly `levels` of `kind` (the core's
/// `Scenario::at_measured_levels`, which `servesim compare` uses too).
pub fn scenario_at_levels(
    base: &Scenario,
    kind: LevelKind,
    levels: &[f64],
) -> Result<Scenario, String> {
    base.at_measured_levels(kind, levels)
}

pub use crate::core_api::compare::predict::{level_metrics, predict, series_from};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_api::compare::{
        score_arm, MeasuredLevel, MeasuredRun, ScoreOptions, SourceFormat,
    };
    use crate::core_api::metric::MetricId;
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
