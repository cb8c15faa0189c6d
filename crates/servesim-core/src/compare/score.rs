//! Scoring predictions against measurements. Definitions (docs/compare.md):
//! e_i = 100 (p_i / m_i - 1); signed mean = mean e_i; MAPE = mean |e_i|;
//! shape error = mean over i >= 1 of |100 (p_i / p_0) / (m_i / m_0) - 100|, level 0 being the
//! lowest scored level.

use super::{levels_equal, LevelKind, MeasuredRun, PredictedSeries, ScoreError};
use crate::metric::MetricId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a measured metric is not scored at a level where the simulation has no value for it (no
/// request measured, or a window rate without a value: docs/metrics.md "Window").
pub const NO_PREDICTION: &str = "not predicted at this level: the simulated level has no value for it (no request measured or completed in its window; lengthen the duration)";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreOptions {
    /// The name in "<name> high at every level" and in the error definition. Default "ServeSim".
    pub simulator_name: String,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        ScoreOptions {
            simulator_name: "ServeSim".to_string(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelPoint {
    pub level: f64,
    pub predicted: f64,
    pub measured: f64,
    /// 100 x (predicted / measured - 1)
    pub signed_error_pct: f64,
}

/// How many scored levels the prediction was above, below, or exactly at the measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignPattern {
    pub high: usize,
    pub low: usize,
    pub exact: usize,
}

impl SignPattern {
    /// "ServeSim high at every level", "ServeSim low at every level", "mixed (5 high / 1 low)".
    pub fn describe(&self, simulator: &str) -> String {
        let n = self.high + self.low + self.exact;
        if n > 0 && self.high == n {
            format!("{simulator} high at every level")
        } else if n > 0 && self.low == n {
            format!("{simulator} low at every level")
        } else if n > 0 && self.exact == n {
            format!("{simulator} exact at every level")
        } else if self.exact == 0 {
            format!("mixed ({} high / {} low)", self.high, self.low)
        } else {
            format!(
                "mixed ({} high / {} low / {} exact)",
                self.high, self.low, self.exact
            )
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricScore {
    pub metric: MetricId,
    /// The scored points, ascending by level.
    pub points: Vec<LevelPoint>,
    pub signed_mean_pct: f64,
    pub mape_pct: f64,
    /// `None` with fewer than two scored points.
    pub shape_error_pct: Option<f64>,
    pub sign: SignPattern,
    /// Scored levels where this metric could not be scored, with the reason.
    pub skipped: Vec<(f64, String)>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArmScore {
    pub arm: String,
    pub level_kind: LevelKind,
    /// Levels that are not excluded and have a prediction, ascending.
    pub scored_levels: Vec<f64>,
    /// Levels not scored, ascending, with the reason (excluded by the user, or no prediction).
    pub excluded: Vec<(f64, String)>,
    pub metrics: Vec<MetricScore>,
    /// Metrics measured at scored levels but never predicted (or never measured non-zero).
    pub unscored_metrics: Vec<(MetricId, String)>,
    pub kv_logged_tokens: Option<u64>,
    pub kv_predicted_tokens: Option<u64>,
    /// predicted / logged, when both are present.
    pub kv_pool_ratio: Option<f64>,
    /// The calibration runs behind the arm's predictions (`PredictedSeries::evidence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComparisonReport {
    pub simulator_name: String,
    pub arms: Vec<ArmScore>,
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// "c8" for concurrency 8, "2.5 req/s" for a rate, "burst 64" for a burst.
pub fn level_label(kind: LevelKind, level: f64) -> String {
    match kind {
        LevelKind::Concurrency => format!("c{}", fmt_num(level)),
        LevelKind::RequestRate => format!("{} req/s", fmt_num(level)),
        LevelKind::Burst => format!("burst {}", fmt_num(level)),
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let mut n = 0usize;
    let mut s = 0.0;
    for x in xs {
        s += x;
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Scores one measured arm against its predicted series.
pub fn score_arm(
    measured: &MeasuredRun,
    predicted: &PredictedSeries,
    _opts: &ScoreOptions,
) -> Result<ArmScore, ScoreError> {
    let arm = measured.arm.clone();
    if measured.level_kind != predicted.level_kind {
        return Err(ScoreError::LevelKindMismatch {
            arm,
            measured: measured.level_kind.name().into(),
            predicted: predicted.level_kind.name().into(),
        });
    }
    for (i, (level, metrics)) in predicted.points.iter().enumerate() {
        if predicted.points[..i]
            .iter()
            .any(|(l, _)| levels_equal(*l, *level))
        {
            return Err(ScoreError::DuplicatePredictedLevel { arm, level: *level });
        }
        for (m, v) in metrics {
            if !v.is_finite() {
                return Err(ScoreError::NonFinitePrediction {
                    arm,
                    metric: m.name(),
                    level: *level,
                    value: *v,
                });
            }
        }
    }
    let mut levels: Vec<&super::MeasuredLevel> = measured.levels.iter().collect();
    levels.sort_by(|a, b| a.level.total_cmp(&b.level));

    type Values<'a> = &'a BTreeMap<MetricId, f64>;
    let mut scored: Vec<(f64, Values, Values)> = Vec::new();
    let mut excluded = Vec::new();
    for l in levels {
        if let Some(reason) = &l.excluded {
            excluded.push((l.level, reason.clone()));
            continue;
        }
        match predicted
            .points
            .iter()
            .find(|(pl, _)| levels_equal(*pl, l.level))
        {
            Some((_, p)) => scored.push((l.level, &l.metrics, p)),
            None => excluded.push((l.level, "no prediction at this level".to_string())),
        }
    }

    let mut measured_metrics: Vec<MetricId> = Vec::new();
    for (_, m, _) in &scored {
        for k in m.keys() {
            if !measured_metrics.contains(k) {
                measured_metrics.push(*k);
            }
        }
    }
    measured_metrics.sort();

    let mut metrics = Vec::new();
    let mut unscored_metrics = Vec::new();
    for metric in measured_metrics {
        let mut points = Vec::new();
        let mut skipped = Vec::new();
        for (level, m, p) in &scored {
            let Some(mv) = m.get(&metric) else {
                skipped.push((*level, "not measured at this level".to_string()));
                continue;
            };
            let Some(pv) = p.get(&metric) else {
                skipped.push((*level, NO_PREDICTION.to_string()));
                continue;
            };
            if *mv == 0.0 {
                skipped.push((
                    *level,
                    "measured value is zero; the relative error is undefined".to_string(),
                ));
                continue;
            }
            points.push(LevelPoint {
                level: *level,
                predicted: *pv,
                measured: *mv,
                signed_error_pct: 100.0 * (pv / mv - 1.0),
            });
        }
        if points.is_empty() {
            let reason = skipped
                .first()
                .map(|(_, r)| r.clone())
                .unwrap_or_else(|| "no scored level".into());
            unscored_metrics.push((metric, reason));
            continue;
        }
        let signed_mean_pct = mean(points.iter().map(|p| p.signed_error_pct));
        let mape_pct = mean(points.iter().map(|p| p.signed_error_pct.abs()));
        let shape_error_pct = if points.len() >= 2 && points[0].predicted != 0.0 {
            let (p0, m0) = (points[0].predicted, points[0].measured);
            Some(mean(points[1..].iter().map(|q| {
                (100.0 * ((q.predicted / p0) / (q.measured / m0)) - 100.0).abs()
            })))
        } else {
            None
        };
        let mut sign = SignPattern {
            high: 0,
            low: 0,
            exact: 0,
        };
        for p in &points {
            if p.signed_error_pct > 0.0 {
                sign.high += 1;
            } else if p.signed_error_pct < 0.0 {
                sign.low += 1;
            } else {
                sign.exact += 1;
            }
        }
        metrics.push(MetricScore {
            metric,
            points,
            signed_mean_pct,
            mape_pct,
            shape_error_pct,
            sign,
            skipped,
        });
    }

    let kv_pool_ratio = match (
        predicted.kv_capacity_tokens,
        measured.kv_cache_tokens_logged,
    ) {
        (Some(p), Some(l)) if l > 0 => Some(p as f64 / l as f64),
        _ => None,
    };
    Ok(ArmScore {
        arm,
        level_kind: measured.level_kind,
        scored_levels: scored.iter().map(|(l, _, _)| *l).collect(),
        excluded,
        metrics,
        unscored_metrics,
        kv_logged_tokens: measured.kv_cache_tokens_logged,
        kv_predicted_tokens: predicted.kv_capacity_tokens,
        kv_pool_ratio,
        evidence: predicted.evidence.clone(),
    })
}

/// Scores several arms; the report keeps their order.
pub fn score_all(
    pairs: &[(MeasuredRun, PredictedSeries)],
    opts: &ScoreOptions,
) -> Result<ComparisonReport, ScoreError> {
    let arms = pairs
        .iter()
        .map(|(m, p)| score_arm(m, p, opts))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ComparisonReport {
        simulator_name: opts.simulator_name.clone(),
        arms,
    })
}

impl ArmScore {
    /// "Scored levels: c8, c16. Excluded: c512 (reason)." — consecutive excluded levels with the
    /// same reason share one parenthesis, as in the validation report.
    pub fn levels_line(&self) -> String {
        let scored: Vec<String> = self
            .scored_levels
            .iter()
            .map(|l| level_label(self.level_kind, *l))
            .collect();
        let mut s = if scored.is_empty() {
            "Scored levels: none.".to_string()
        } else {
            format!("Scored levels: {}.", scored.join(", "))
        };
        if !self.excluded.is_empty() {
            let mut groups: Vec<(Vec<String>, String)> = Vec::new();
            for (level, reason) in &self.excluded {
                let label = level_label(self.level_kind, *level);
                match groups.last_mut() {
                    Some((labels, r)) if r == reason => labels.push(label),
                    _ => groups.push((vec![label], reason.clone())),
                }
            }
            let parts: Vec<String> = groups
                .iter()
                .map(|(labels, r)| format!("{} ({})", labels.join(", "), r))
                .collect();
            s.push_str(&format!(" Excluded: {}.", parts.join("; ")));
        }
        s
    }
}
