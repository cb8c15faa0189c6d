//! "How far to trust it": the accuracy summary the page shows, in-sample and held out, per
//! metric and per model family.

use super::*;
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// "How far to trust it": the summary the page shows.

/// The shipped accuracy summary (`data/calibration/accuracy-summary.json`), written by
/// `servesim validate --fit` (all figures) or `--write-summary` (in-sample figures, held-out
/// figures kept).
pub const ACCURACY_SUMMARY_JSON: &str =
    include_str!("../../data/calibration/accuracy-summary.json");

/// Accuracy of one metric family against the public measured runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricAccuracy {
    pub family: Family,
    /// Display name ("output tok/s", "ITL/TPOT mean", "TTFT p50").
    pub metric: String,
    /// Points scored.
    pub n: usize,
    /// Median absolute error, percent, with the shipped (calibrated) table: in-sample.
    pub median_abs_pct: f64,
    /// Mean signed error, percent (positive: ServeSim predicts higher than measured).
    pub mean_signed_pct: f64,
    /// Median absolute error when each source is predicted by a fit on the other source(s).
    pub held_out_source_median_abs_pct: Option<f64>,
    /// Median absolute error when each model is predicted by a fit on the other models (not
    /// computed by the current fit: see the family figure).
    #[serde(default)]
    pub held_out_model_median_abs_pct: Option<f64>,
    /// Median absolute error when each model family (dense / MoE / MLA / sparse / hybrid) is
    /// predicted by a fit on the other families.
    #[serde(default)]
    pub held_out_family_median_abs_pct: Option<f64>,
    /// Target on the held-out (leave-one-family-out) median, percent.
    #[serde(default)]
    pub held_out_target_pct: Option<f64>,
    /// Target on the median absolute error, percent.
    pub target_pct: f64,
    /// In-sample median within the target.
    pub met: bool,
}

/// How far to trust ServeSim's numbers (docs/accuracy.md), per metric family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracySummary {
    /// What was compared, with which table.
    pub description: String,
    /// Measured runs in the set, and how many could be simulated.
    pub points: usize,
    pub simulated: usize,
    pub metrics: Vec<MetricAccuracy>,
    /// Per model family and metric: in-sample and leave-one-family-out figures.
    #[serde(default)]
    pub families: Vec<FamilyAccuracy>,
    /// Per calibration key, model family and metric: the measured evidence a scenario with
    /// that key and family is quoted ([`crate::evidence`]).
    #[serde(default)]
    pub evidence: Vec<crate::evidence::EvidenceCell>,
    /// Per calibration key, model family and metric: the validation set's rows (never fitted;
    /// docs/accuracy.md "Validation set (never fitted)") predicted with the table, grouped by the
    /// fitted entry each row's scenario uses ([`validation_key`]); no held-out figures (no fit
    /// reads these rows). A scenario is quoted its key and family's cell next to the
    /// in-sample ones ([`crate::evidence`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation: Vec<crate::evidence::EvidenceCell>,
    /// The validation set as a whole, per metric: every simulated row, whatever table predicts it
    /// (the page's "How far to trust it" and docs/accuracy.md "Validation set (never fitted)").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_metrics: Vec<SetAccuracy>,
}

/// One metric over a set of runs: how many were scored, the median absolute and the mean signed
/// error, percent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAccuracy {
    pub family: Family,
    /// Display name ("output tok/s", "ITL/TPOT mean", "TTFT p50").
    pub metric: String,
    pub n: usize,
    pub median_abs_pct: f64,
    pub mean_signed_pct: f64,
    /// The sources (publications) of the scored runs.
    pub sources: usize,
}

/// The fitted entry of `table` a row's scenario reads (`Calibration::fit`): its own
/// `<generation>@<era>` entry, else the nearest other era's (`perf::lookup_calibration`); `None`
/// when the table has nothing for the generation (the literature table) or the row has no key.
pub fn validation_key(p: &PointResult, table: &FittedEfficiencies) -> Option<String> {
    let key = p.calibration_key.as_deref()?;
    let (_, era) = key.split_once('@')?;
    let generation: crate::gpu::Generation =
        serde_json::from_value(serde_json::json!(generation_of(key))).ok()?;
    let era = crate::perf::EngineEra::ALL
        .iter()
        .copied()
        .find(|e| e.key() == era)?;
    crate::perf::lookup_calibration(&table.generations, generation, era).map(|(k, _)| k)
}

/// The held-out scope of one (model family, calibration key) cell: its rows as the fit that
/// left the family out predicts them ([`evidence_held_out`]).
pub fn evidence_scope(model_family: &str, key: &str) -> String {
    format!("leave-one-family-out: {model_family} @ {key}")
}

/// The simulated points of `points` by (calibration key, model family), keys sorted.
fn by_key_and_family(
    points: &[PointResult],
) -> std::collections::BTreeMap<(String, String), Vec<PointResult>> {
    let mut m: std::collections::BTreeMap<(String, String), Vec<PointResult>> =
        std::collections::BTreeMap::new();
    for p in points.iter().filter(|p| p.error.is_none()) {
        if let Some(k) = &p.calibration_key {
            m.entry((k.clone(), p.model_family.clone()))
                .or_default()
                .push(p.clone());
        }
    }
    m
}

/// The columns a docs table gives every evidence cell, up to its mean signed error:
/// `| key | family | metric | runs | sources | prompts | median | signed |`.
fn cell_row(c: &crate::evidence::EvidenceCell) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {:.1} % | {:+.1} % |",
        c.key,
        c.model_family,
        c.metric,
        c.n,
        c.sources,
        match (c.prompt_tokens_min, c.prompt_tokens_max) {
            (Some(a), Some(b)) if a == b => a.to_string(),
            (Some(a), Some(b)) => format!("{a}-{b}"),
            _ => "-".into(),
        },
        c.median_abs_pct,
        c.mean_signed_pct,
    )
}

/// Whether `p` was scored on metric family `f` (a comparison neither excluded nor without an
/// error).
fn scored_on(p: &PointResult, f: Family) -> bool {
    p.comparisons
        .iter()
        .any(|c| c.family == f && c.excluded.is_none() && c.signed_error_pct.is_some())
}

/// One [`crate::evidence::EvidenceCell`] per (calibration key, model family) group and metric
/// scored in it, with the group's held-out figures from `held_out` (scope [`evidence_scope`];
/// none there: `None`).
fn key_family_cells(
    groups: std::collections::BTreeMap<(String, String), Vec<PointResult>>,
    held_out: &[Aggregate],
) -> Vec<crate::evidence::EvidenceCell> {
    groups
        .into_iter()
        .flat_map(|((key, fam), pts)| {
            let scope = evidence_scope(&fam, &key);
            aggregate(&pts, &scope, &|_| true)
                .into_iter()
                .map(|a| {
                    // The runs scored on this metric.
                    let scored: Vec<&PointResult> =
                        pts.iter().filter(|p| scored_on(p, a.family)).collect();
                    let sources: std::collections::BTreeSet<&str> =
                        scored.iter().map(|p| p.source.as_str()).collect();
                    let (held_med, held_signed) = held_figures(held_out, &scope, a.family);
                    let prompts = scored.iter().filter_map(|p| p.prompt_tokens);
                    crate::evidence::EvidenceCell {
                        key: key.clone(),
                        model_family: fam.clone(),
                        metric: a.family.name().to_string(),
                        n: a.n,
                        sources: sources.len(),
                        median_abs_pct: round1(a.median_abs_pct),
                        mean_signed_pct: round1(a.mean_signed_pct),
                        held_out_median_abs_pct: held_med,
                        held_out_mean_signed_pct: held_signed,
                        prompt_tokens_min: prompts.clone().min(),
                        prompt_tokens_max: prompts.max(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Held-out aggregates per (model family, calibration key) cell (scope [`evidence_scope`]) from
/// the points each leave-one-family-out fold predicts (`FitReport::held_out_by_family`).
pub fn evidence_held_out(held_out_by_family: &[PointResult]) -> Vec<Aggregate> {
    by_key_and_family(held_out_by_family)
        .into_iter()
        .flat_map(|((key, fam), pts)| aggregate(&pts, &evidence_scope(&fam, &key), &|_| true))
        .collect()
}

/// Accuracy of one metric for one model family.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FamilyAccuracy {
    /// `dense`, `MoE`, `MLA`, `sparse`, `hybrid` ([`model_family`]).
    pub model_family: String,
    pub family: Family,
    pub n: usize,
    /// In-sample median absolute error and mean signed error, percent.
    pub median_abs_pct: f64,
    pub mean_signed_pct: f64,
    /// The same with the family held out of the fit.
    pub held_out_median_abs_pct: Option<f64>,
    pub held_out_mean_signed_pct: Option<f64>,
}

/// The limit on a model family's in-sample mean signed error, percent.
pub const FAMILY_SIGNED_LIMIT_PCT: f64 = 25.0;

/// A metric family's name in docs/accuracy.md's tables.
fn doc_metric_name(f: Family) -> &'static str {
    match f {
        Family::Throughput => "output tok/s",
        Family::InterToken => "ITL / TPOT mean",
        Family::Ttft => "TTFT p50",
    }
}

/// The held-out median and mean signed error (rounded) of `scope` and metric `f`, when
/// `held_out` has them.
fn held_figures(held_out: &[Aggregate], scope: &str, f: Family) -> (Option<f64>, Option<f64>) {
    let h = held_out.iter().find(|h| h.scope == scope && h.family == f);
    (
        h.map(|h| round1(h.median_abs_pct)),
        h.map(|h| round1(h.mean_signed_pct)),
    )
}

/// A percentage cell of the docs tables: signed or not, "not computed" when absent.
fn pct_cell(v: Option<f64>, signed: bool) -> String {
    match v {
        Some(v) if signed => format!("{v:+.1} %"),
        Some(v) => format!("{v:.1} %"),
        None => "not computed".into(),
    }
}

/// A held-out aggregate as the summary keeps it (median and mean signed; the mean absolute
/// error is not kept), judged against the metric's held-out target.
fn held_out_aggregate(
    family: Family,
    scope: String,
    n: usize,
    median: f64,
    signed: f64,
) -> Aggregate {
    Aggregate {
        family,
        scope,
        n,
        median_abs_pct: median,
        mean_abs_pct: 0.0,
        mean_signed_pct: signed,
        target_pct: family.held_out_target_pct(),
        met: median <= family.held_out_target_pct(),
    }
}

pub(super) fn round1(v: f64) -> f64 {
    libm::round(v * 10.0) / 10.0
}

impl AccuracySummary {
    /// From a validation report (in-sample) and held-out aggregates (scopes
    /// `leave-one-source-out`, `leave-one-model-out`; may be empty).
    pub fn from_report(r: &ValidationReport, held_out: &[Aggregate]) -> AccuracySummary {
        let pick = |scope: &str, f: Family| {
            held_out
                .iter()
                .find(|a| a.scope == scope && a.family == f)
                .map(|a| round1(a.median_abs_pct))
        };
        let metrics = Family::ALL
            .iter()
            .filter_map(|f| {
                let a = r.overall(*f)?;
                Some(MetricAccuracy {
                    family: *f,
                    metric: f.name().to_string(),
                    n: a.n,
                    median_abs_pct: round1(a.median_abs_pct),
                    mean_signed_pct: round1(a.mean_signed_pct),
                    held_out_source_median_abs_pct: pick("leave-one-source-out", *f),
                    held_out_model_median_abs_pct: pick("leave-one-model-out", *f),
                    held_out_family_median_abs_pct: pick("leave-one-family-out", *f),
                    held_out_target_pct: Some(f.held_out_target_pct()),
                    target_pct: a.target_pct,
                    met: a.met,
                })
            })
            .collect();
        AccuracySummary {
            description: format!(
                "ServeSim versus {} public measured vLLM runs (data/calibration/measured-points.csv and measured-points-more.csv), table: {}. Median absolute error of each point's prediction; held-out = predicted by a fit that did not see that source / model family.",
                r.points.len(),
                r.efficiencies
            ),
            points: r.points.len(),
            simulated: r.points.iter().filter(|p| p.error.is_none()).count(),
            metrics,
            families: FAMILIES
                .iter()
                .flat_map(|fam| {
                    let scope = format!("leave-one-family-out: {fam}");
                    let pts: Vec<PointResult> = r
                        .points
                        .iter()
                        .filter(|p| p.model_family == *fam)
                        .cloned()
                        .collect();
                    aggregate(&pts, fam, &|_| true)
                        .into_iter()
                        .map(|a| {
                            let (held_med, held_signed) = held_figures(held_out, &scope, a.family);
                            FamilyAccuracy {
                                model_family: fam.to_string(),
                                family: a.family,
                                n: a.n,
                                median_abs_pct: round1(a.median_abs_pct),
                                mean_signed_pct: round1(a.mean_signed_pct),
                                held_out_median_abs_pct: held_med,
                                held_out_mean_signed_pct: held_signed,
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .collect(),
            evidence: key_family_cells(by_key_and_family(&r.points), held_out),
            validation: Vec::new(),
            validation_metrics: Vec::new(),
        }
    }

    /// With the validation set's cells ([`AccuracySummary::validation`]): `r`, the validation
    /// set run with `table` (the table this summary describes), its simulated rows grouped by
    /// the fitted entry each reads ([`validation_key`]) and model family. Rows predicted with the
    /// literature table (no entry for their GPU generation) are in no cell.
    pub fn with_validation(mut self, r: &ValidationReport, table: &FittedEfficiencies) -> Self {
        let mut groups: std::collections::BTreeMap<(String, String), Vec<PointResult>> =
            std::collections::BTreeMap::new();
        for p in r.points.iter().filter(|p| p.error.is_none()) {
            if let Some(k) = validation_key(p, table) {
                groups
                    .entry((k, p.model_family.clone()))
                    .or_default()
                    .push(p.clone());
            }
        }
        self.validation = key_family_cells(groups, &[]);
        self.validation_metrics = Family::ALL
            .iter()
            .filter_map(|f| {
                let a = r.overall(*f)?;
                let sources: std::collections::BTreeSet<&str> = r
                    .points
                    .iter()
                    .filter(|p| p.error.is_none() && scored_on(p, *f))
                    .map(|p| p.source.as_str())
                    .collect();
                Some(SetAccuracy {
                    family: *f,
                    metric: f.name().to_string(),
                    n: a.n,
                    median_abs_pct: round1(a.median_abs_pct),
                    mean_signed_pct: round1(a.mean_signed_pct),
                    sources: sources.len(),
                })
            })
            .collect();
        self
    }

    /// The held-out aggregates this summary carries (to keep them when only the in-sample part
    /// is recomputed).
    pub fn held_out_aggregates(&self) -> Vec<Aggregate> {
        let mut v = Vec::new();
        for m in &self.metrics {
            for (scope, x) in [
                ("leave-one-source-out", m.held_out_source_median_abs_pct),
                ("leave-one-model-out", m.held_out_model_median_abs_pct),
                ("leave-one-family-out", m.held_out_family_median_abs_pct),
            ] {
                if let Some(x) = x {
                    v.push(held_out_aggregate(m.family, scope.into(), m.n, x, 0.0));
                }
            }
        }
        for f in &self.families {
            if let (Some(x), Some(sg)) = (f.held_out_median_abs_pct, f.held_out_mean_signed_pct) {
                v.push(held_out_aggregate(
                    f.family,
                    format!("leave-one-family-out: {}", f.model_family),
                    f.n,
                    x,
                    sg,
                ));
            }
        }
        for c in &self.evidence {
            let Some(family) = Family::ALL.into_iter().find(|f| f.name() == c.metric) else {
                continue;
            };
            if let (Some(x), Some(sg)) = (c.held_out_median_abs_pct, c.held_out_mean_signed_pct) {
                v.push(held_out_aggregate(
                    family,
                    evidence_scope(&c.model_family, &c.key),
                    c.n,
                    x,
                    sg,
                ));
            }
        }
        v
    }

    /// docs/accuracy.md "Targets and status": per metric, held out first, then in-sample
    /// (a test keeps the page in step with the shipped summary).
    pub fn targets_table(&self) -> String {
        let mut s = String::from(
            "| metric | points | held out: leave-one-model-family-out (target) | held out: leave-one-source-out | in-sample (target) | in-sample mean signed |\n|---|---|---|---|---|---|\n",
        );
        for m in &self.metrics {
            let family_out = match (m.held_out_family_median_abs_pct, m.held_out_target_pct) {
                (Some(v), Some(t)) => format!(
                    "{v:.1} % (<= {t:.0} %: {})",
                    if v <= t { "yes" } else { "no" }
                ),
                (Some(v), None) => format!("{v:.1} %"),
                (None, _) => "not computed".into(),
            };
            let source_out = m
                .held_out_source_median_abs_pct
                .map_or("not computed".into(), |v| format!("{v:.1} %"));
            s.push_str(&format!(
                "| {} | {} | {family_out} | {source_out} | {:.1} % (<= {:.0} %: {}) | {:+.1} % |\n",
                doc_metric_name(m.family),
                m.n,
                m.median_abs_pct,
                m.target_pct,
                if m.met { "yes" } else { "no" },
                m.mean_signed_pct
            ));
        }
        s
    }

    /// docs/accuracy.md "Per model family": held out and in-sample, signed means beyond
    /// the issue's +-25 % marked.
    pub fn families_table(&self) -> String {
        let mut s = String::from(
            "| family | metric | points | held out: median abs error | held out: mean signed | in-sample: median abs error | in-sample: mean signed |\n|---|---|---|---|---|---|---|\n",
        );
        for f in &self.families {
            let beyond = if f.mean_signed_pct.abs() > FAMILY_SIGNED_LIMIT_PCT {
                " (beyond +-25 %)"
            } else {
                ""
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {:.1} % | {:+.1} %{beyond} |\n",
                f.model_family,
                doc_metric_name(f.family),
                f.n,
                pct_cell(f.held_out_median_abs_pct, false),
                pct_cell(f.held_out_mean_signed_pct, true),
                f.median_abs_pct,
                f.mean_signed_pct
            ));
        }
        s
    }

    /// docs/accuracy.md "Per calibration key and model family": the evidence a scenario is
    /// quoted, every cell.
    pub fn evidence_table(&self) -> String {
        let mut s = String::from(
            "| calibration key | model family | metric | points | sources | prompts (tokens) | in-sample: median abs error | in-sample: mean signed | held out: median abs error | held out: mean signed |\n|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for c in &self.evidence {
            s.push_str(&format!(
                "{} {} | {} |\n",
                cell_row(c),
                pct_cell(c.held_out_median_abs_pct, false),
                pct_cell(c.held_out_mean_signed_pct, true),
            ));
        }
        s
    }

    /// docs/accuracy.md "Validation set (never fitted)": the validation set's cells a scenario is
    /// quoted, every cell.
    pub fn validation_table(&self) -> String {
        let mut s = String::from(
            "| calibration key | model family | metric | runs | sources | prompts (tokens) | median abs error | mean signed |\n|---|---|---|---|---|---|---|---|\n",
        );
        for c in &self.validation {
            s.push_str(&cell_row(c));
            s.push('\n');
        }
        s
    }

    /// The JSON written to data/calibration/accuracy-summary.json.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    pub fn from_json(s: &str) -> Result<AccuracySummary, ValidateError> {
        serde_json::from_str(s).map_err(|e| ValidateError::Fitted(format!("accuracy summary: {e}")))
    }
}

/// The shipped accuracy summary (embedded; a test keeps it in step with a fresh validation).
pub fn accuracy_summary() -> AccuracySummary {
    AccuracySummary::from_json(ACCURACY_SUMMARY_JSON).unwrap_or_default()
}
