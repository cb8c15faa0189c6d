//! Comparing a simulated level with a row's measurements, aggregating the errors, and the
//! Markdown report.

use super::*;
use crate::metrics::LevelResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------------
// Comparison and report.

/// One metric of one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricComparison {
    pub family: Family,
    /// Our metric (`MetricId::name()`), e.g. `itl_ms_mean` or `tpot_ms_mean`.
    pub metric: String,
    pub measured: f64,
    pub predicted: Option<f64>,
    /// 100 (predicted / measured - 1).
    pub signed_error_pct: Option<f64>,
    /// Why this metric is left out of the aggregate (a source caveat, or not predicted).
    pub excluded: Option<String>,
}

/// One row's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    pub line: usize,
    pub source: String,
    pub model: String,
    pub gpu: String,
    pub tp: u32,
    /// [`model_family`] of the row's model.
    #[serde(default)]
    pub model_family: String,
    /// The calibration key whose table the row is fitted in and simulated with
    /// ([`point_key`]: GPU generation and vLLM release line); `None` for an unknown GPU.
    #[serde(default)]
    pub calibration_key: Option<String>,
    pub workload: String,
    pub comparisons: Vec<MetricComparison>,
    pub notes: Vec<String>,
    /// Set when the point could not be simulated (it is then missing from every aggregate).
    pub error: Option<String>,
    /// Set when the row needs a capability ServeSim does not have yet ([`waits_for`]); the row is
    /// not simulated and is missing from every aggregate.
    #[serde(default)]
    pub waits_for: Option<String>,
    /// The simulated prompts' nominal mean length in tokens (shared prefix included), when the
    /// row's workload is synthetic; what the evidence cells quote as their runs' prompt range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
}

/// Aggregate error of one metric family over a set of points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    pub family: Family,
    pub scope: String,
    pub n: usize,
    pub median_abs_pct: f64,
    pub mean_abs_pct: f64,
    pub mean_signed_pct: f64,
    pub target_pct: f64,
    pub met: bool,
}

impl Aggregate {
    /// One row of the held-out and validation-set tables:
    /// `| scope | metric | n | median abs | mean abs | mean signed |`.
    pub fn markdown_row(&self) -> String {
        format!(
            "| {} | {} | {} | {:.1}% | {:.1}% | {:+.1}% |\n",
            self.scope,
            self.family.name(),
            self.n,
            self.median_abs_pct,
            self.mean_abs_pct,
            self.mean_signed_pct
        )
    }
}

/// The whole validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ValidationReport {
    pub points: Vec<PointResult>,
    /// All points, then per source.
    pub aggregates: Vec<Aggregate>,
    /// (line, family, reason) of every comparison left out of the aggregates.
    pub excluded: Vec<(usize, Family, String)>,
    /// What the efficiency table was ("defaults" or the fitted file's description).
    pub efficiencies: String,
}

/// Options of [`run`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValidateOptions {
    /// Only rows whose `source` starts with this text.
    pub only_source: Option<String>,
    /// Efficiency overrides per GPU generation (`generation name -> overrides JSON`), e.g. a fitted
    /// table; `None` uses [`fitted_efficiencies`] (the shipped fit).
    pub efficiencies: Option<FittedEfficiencies>,
    /// Only rows whose line number is in this list (used by the fit's splits).
    pub only_lines: Option<Vec<usize>>,
}

/// Median of a list (mean of the two middle values for an even count); 0 for an empty list.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Compares a simulated level with a setup's targets.
pub fn compare_point(setup: &PointSetup, r: &LevelResult) -> Vec<MetricComparison> {
    setup
        .targets
        .iter()
        .map(|(family, metric, measured, excl)| {
            let predicted = r.get(*metric);
            let signed = predicted.map(|p| 100.0 * (p / measured - 1.0));
            let excluded = match (excl, predicted) {
                (Some(e), _) => Some(e.clone()),
                (None, None) => Some("not predicted (no request measured)".into()),
                (None, Some(_)) => None,
            };
            MetricComparison {
                family: *family,
                metric: metric.name().to_string(),
                measured: *measured,
                predicted,
                signed_error_pct: signed,
                excluded,
            }
        })
        .collect()
}

/// Aggregates of the points whose `scope` predicate holds.
pub fn aggregate(
    points: &[PointResult],
    scope: &str,
    pick: &dyn Fn(&PointResult) -> bool,
) -> Vec<Aggregate> {
    Family::ALL
        .iter()
        .filter_map(|f| {
            let errs: Vec<f64> = points
                .iter()
                .filter(|p| pick(p) && p.error.is_none())
                .flat_map(|p| p.comparisons.iter())
                .filter(|c| c.family == *f && c.excluded.is_none())
                .filter_map(|c| c.signed_error_pct)
                .collect();
            if errs.is_empty() {
                return None;
            }
            let abs: Vec<f64> = errs.iter().map(|e| e.abs()).collect();
            let n = errs.len();
            let med = median(&abs);
            let target = if scope.starts_with("leave-one") {
                f.held_out_target_pct()
            } else {
                f.target_pct()
            };
            Some(Aggregate {
                family: *f,
                scope: scope.to_string(),
                n,
                median_abs_pct: med,
                mean_abs_pct: abs.iter().sum::<f64>() / n as f64,
                mean_signed_pct: errs.iter().sum::<f64>() / n as f64,
                target_pct: target,
                met: med <= target,
            })
        })
        .collect()
}

/// How a refit's table does on rows no fit reads (the validation set), against the table it
/// replaces: the pooled aggregates of both side by side, then the comparisons whose absolute
/// error moved most (up to `top`), so that a lower objective bought with a worse prediction out
/// of sample is seen before the table ships (docs/accuracy.md "Calibration").
pub fn refit_check_markdown(
    title: &str,
    after: &ValidationReport,
    before: &ValidationReport,
    top: usize,
) -> String {
    let pooled = |r: &ValidationReport| aggregate(&r.points, "all points", &|_| true);
    let (a, b) = (pooled(after), pooled(before));
    let mut s = format!(
        "\n### {title}\n\n| metric | n | median abs error: this fit | the table it replaces | mean signed: this fit | the table it replaces |\n|---|---|---|---|---|---|\n"
    );
    for f in Family::ALL {
        let (Some(x), Some(y)) = (
            a.iter().find(|g| g.family == f),
            b.iter().find(|g| g.family == f),
        ) else {
            continue;
        };
        // A row the new table cannot simulate leaves one side's aggregate: say so in `n`.
        let n = if x.n == y.n {
            x.n.to_string()
        } else {
            format!("{} (shipped: {})", x.n, y.n)
        };
        s.push_str(&format!(
            "| {} | {n} | {:.1}% | {:.1}% | {:+.1}% | {:+.1}% |\n",
            f.name(),
            x.median_abs_pct,
            y.median_abs_pct,
            x.mean_signed_pct,
            y.mean_signed_pct
        ));
    }
    // (|after| - |before|, the row, metric, signed error before, after) per comparison scored in
    // both runs.
    let mut moves: Vec<(f64, &PointResult, &str, f64, f64)> = Vec::new();
    for p in after.points.iter().filter(|p| p.error.is_none()) {
        let Some(q) = before
            .points
            .iter()
            .find(|q| q.line == p.line && q.error.is_none())
        else {
            continue;
        };
        for c in p.comparisons.iter().filter(|c| c.excluded.is_none()) {
            let old = q
                .comparisons
                .iter()
                .find(|d| d.family == c.family && d.excluded.is_none())
                .and_then(|d| d.signed_error_pct);
            if let (Some(new), Some(old)) = (c.signed_error_pct, old) {
                moves.push((new.abs() - old.abs(), p, c.family.name(), old, new));
            }
        }
    }
    moves.sort_by(|x, y| {
        y.0.abs()
            .total_cmp(&x.0.abs())
            .then(x.1.line.cmp(&y.1.line))
            .then(x.2.cmp(y.2))
    });
    let moved: Vec<_> = moves
        .iter()
        .filter(|m| m.0.abs() >= 0.05)
        .take(top)
        .collect();
    if moved.is_empty() {
        s.push_str("\nNo comparison moved.\n");
    } else {
        s.push_str("\nLargest moves (signed error, the table it replaces -> this fit):\n\n| line | model | GPU | TP | workload | metric | before | after |\n|---|---|---|---|---|---|---|---|\n");
        for (_, p, metric, old, new) in moved {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:+.1}% | {:+.1}% |\n",
                p.line, p.model, p.gpu, p.tp, p.workload, metric, old, new
            ));
        }
    }
    s
}

/// Builds the report from per-point results.
pub fn build_report(points: Vec<PointResult>, efficiencies: String) -> ValidationReport {
    let mut aggregates = aggregate(&points, "all points", &|_| true);
    let mut sources: Vec<String> = points.iter().map(|p| p.source.clone()).collect();
    sources.dedup();
    let mut seen = Vec::new();
    for s in sources {
        if seen.contains(&s) {
            continue;
        }
        aggregates.extend(aggregate(&points, &s, &|p| p.source == s));
        seen.push(s);
    }
    let mut excluded = Vec::new();
    for p in &points {
        if p.error.is_some() {
            continue;
        }
        for c in &p.comparisons {
            if let Some(e) = &c.excluded {
                excluded.push((p.line, c.family, e.clone()));
            }
        }
    }
    ValidationReport {
        points,
        aggregates,
        excluded,
        efficiencies,
    }
}

pub(super) fn short_model(m: &str) -> &str {
    // The name after the org, keeping a note after it (`Qwen3-8B AWQ (checkpoint not named)`)
    // unless the note names another id (`org/Model (README: "org/Other")`).
    let cut = m.find(" (").unwrap_or(m.len());
    let start = m[..cut].rfind('/').map_or(0, |i| i + 1);
    if m[cut..].contains('/') {
        &m[start..cut]
    } else {
        &m[start..]
    }
}

/// The tag a per-point table puts after a measured inter-token value that is a per-request TPOT
/// rather than a pooled ITL: ` (TPOT)` for the mean, ` (TPOT p50)` for the median.
pub fn inter_token_tag(metric: &str) -> &'static str {
    match metric {
        "tpot_ms_mean" => " (TPOT)",
        "tpot_ms_p50" => " (TPOT p50)",
        "tpot_ms_p90" => " (TPOT p90)",
        "tpot_ms_p99" => " (TPOT p99)",
        _ => "",
    }
}

/// A signed error cell of the Markdown tables (`+12.3%`, `-` when there is none).
pub fn fmt_pct(v: Option<f64>) -> String {
    match v {
        Some(e) => format!("{e:+.1}%"),
        None => "-".into(),
    }
}

/// A measured or predicted value cell of the Markdown tables (3 significant figures or so).
pub fn fmt_val(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

impl ValidationReport {
    /// The aggregate of one family over all points.
    pub fn overall(&self, f: Family) -> Option<&Aggregate> {
        self.aggregates
            .iter()
            .find(|a| a.family == f && a.scope == "all points")
    }

    /// Markdown: aggregate table, per-point table, excluded comparisons.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        s.push_str("## Validation against measured vLLM runs\n\n");
        s.push_str(&format!("Efficiency table: {}.\n\n", self.efficiencies));
        s.push_str("Signed error = 100 * (ServeSim / measured - 1). Aggregates use the absolute error; every point weighs the same.\n\n");
        s.push_str("| scope | metric | n | median abs error | mean abs error | mean signed error | target (median) | met |\n|---|---|---|---|---|---|---|---|\n");
        for a in &self.aggregates {
            s.push_str(&format!(
                "| {} | {} | {} | {:.1}% | {:.1}% | {:+.1}% | <= {:.0}% | {} |\n",
                a.scope,
                a.family.name(),
                a.n,
                a.median_abs_pct,
                a.mean_abs_pct,
                a.mean_signed_pct,
                a.target_pct,
                if a.met { "yes" } else { "no" }
            ));
        }
        s.push_str("\n### Per point\n\n");
        s.push_str("| line | source | model | GPU | TP | workload | out tok/s meas | sim | err | ITL/TPOT ms meas | sim | err | TTFT p50 ms meas | sim | err |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for p in &self.points {
            let mut cells = Vec::new();
            for f in Family::ALL {
                match p.comparisons.iter().find(|c| c.family == f) {
                    Some(c) => {
                        let tag = if f == Family::InterToken {
                            inter_token_tag(&c.metric)
                        } else {
                            ""
                        };
                        cells.push(format!("{}{}", fmt_val(c.measured), tag));
                        cells.push(c.predicted.map(fmt_val).unwrap_or_else(|| "-".into()));
                        let e = fmt_pct(c.signed_error_pct);
                        cells.push(if c.excluded.is_some() {
                            format!("({e})*")
                        } else {
                            e
                        });
                    }
                    None => cells.extend(["-".to_string(), "-".into(), "-".into()]),
                }
            }
            let src = p.source.split('/').next().unwrap_or(&p.source);
            let wl = match (&p.error, &p.waits_for) {
                (Some(_), _) => format!("{} (NOT SIMULATED, see below)", p.workload),
                (_, Some(_)) => format!("{} (WAITS, see below)", p.workload),
                _ => p.workload.clone(),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                p.line,
                src,
                short_model(&p.model),
                p.gpu,
                p.tp,
                wl,
                cells.join(" | ")
            ));
        }
        let failed: Vec<&PointResult> = self.points.iter().filter(|p| p.error.is_some()).collect();
        if !failed.is_empty() {
            s.push_str("\nNot simulated (missing from every aggregate):\n\n");
            for p in failed {
                s.push_str(&format!(
                    "- line {}: {}\n",
                    p.line,
                    p.error.as_deref().unwrap_or("")
                ));
            }
        }
        let waiting: Vec<&PointResult> = self
            .points
            .iter()
            .filter(|p| p.waits_for.is_some())
            .collect();
        if !waiting.is_empty() {
            let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
            for p in &waiting {
                by.entry(p.waits_for.as_deref().unwrap_or(""))
                    .or_default()
                    .push(p.line);
            }
            s.push_str(&format!(
                "\nWaiting for a capability ({} rows, not simulated, missing from every aggregate):\n\n",
                waiting.len()
            ));
            for (why, lines) in by {
                let l: Vec<String> = lines.iter().map(|x| x.to_string()).collect();
                s.push_str(&format!(
                    "- {why} ({} rows): lines {}\n",
                    lines.len(),
                    l.join(", ")
                ));
            }
        }
        if !self.excluded.is_empty() {
            s.push_str("\n`(...)*` = left out of the aggregates:\n\n");
            for (line, f, why) in &self.excluded {
                s.push_str(&format!("- line {line}, {}: {why}\n", f.name()));
            }
        }
        s
    }
}
