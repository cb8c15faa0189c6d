//! Predictions at exactly the measured levels: the arm's scenario rewritten to those levels
//! (`Scenario::at_measured_levels`), run through `Scenario::resolve()` and the sweep, and
//! converted into the scorer's [`PredictedSeries`]. One definition for `servesim compare` and the
//! page's comparison (which steps the same runner level by level in its worker).

use super::{LevelKind, PredictedSeries};
use crate::metric::MetricId;
use crate::metrics::LevelResult;
use crate::scenario::{ResolvedScenario, Scenario};
use std::collections::BTreeMap;

/// Every finite metric the simulator reports for one level, by `MetricId`.
pub fn level_metrics(r: &LevelResult) -> BTreeMap<MetricId, f64> {
    MetricId::all()
        .into_iter()
        .filter_map(|m| r.get(m).filter(|v| v.is_finite()).map(|v| (m, v)))
        .collect()
}

/// KV cache tokens per engine, the figure vLLM logs at start-up ("GPU KV cache size: N tokens",
/// one line per engine / DP rank), for the KV pool ratio; `None` when the deployment does not
/// start.
pub fn kv_tokens_per_engine(r: &ResolvedScenario) -> Option<u64> {
    (r.capacity.fits && r.capacity.kv_cache_tokens > 0).then_some(r.capacity.kv_cache_tokens)
}

/// The scorer's series from the finished levels of `resolved`: their metrics, its KV pool per
/// engine and the measured evidence behind its predictions (`ResolvedScenario::evidence`).
pub fn series_from(
    kind: LevelKind,
    results: &[LevelResult],
    resolved: &ResolvedScenario,
) -> PredictedSeries {
    PredictedSeries {
        level_kind: kind,
        points: results
            .iter()
            .map(|r| (r.level.value(), level_metrics(r)))
            .collect(),
        kv_capacity_tokens: kv_tokens_per_engine(resolved),
        evidence: Some(resolved.evidence().summary),
    }
}

/// Runs every level synchronously (`servesim compare`, native tests).
pub fn predict(
    base: &Scenario,
    kind: LevelKind,
    levels: &[f64],
) -> Result<PredictedSeries, String> {
    let s = base.at_measured_levels(kind, levels)?;
    let resolved = s.resolve().map_err(|e| e.to_string())?;
    let result = resolved.run().map_err(|e| e.to_string())?;
    Ok(series_from(kind, &result.levels, &resolved))
}
