//! "How far to trust it": the model's median absolute error per metric against the public runs
//! (docs/accuracy.md), read from a summary the core embeds.
//!
//! Expected source: a JSON text embedded in the core, e.g.
//! `servesim_core::validate::ACCURACY_SUMMARY_JSON = include_str!("../data/calibration/accuracy-summary.json")`,
//! shaped like the `aggregates` of `servesim validate --json` (`validate::Aggregate`):
//! `{"efficiencies": "...", "aggregates": [{"family": "Throughput", "scope": "all", "n": 53,
//! "median_abs_pct": 13.3, "mean_abs_pct": .., "mean_signed_pct": .., "target_pct": 15, "met": true}, ...]}`
//! (other fields, e.g. `points`, are ignored). Until it exists [`SUMMARY_JSON`] is `None` and the
//! panel says the figures are not in this build.

use serde::Deserialize;

/// The embedded summary. Set to `Some(servesim_core::validate::ACCURACY_SUMMARY_JSON)` (or the
/// name the validate helper gives it) when it lands in the core.
pub const SUMMARY_JSON: Option<&str> = None;

/// Where the page links for the method and the per-point results (the repository's
/// docs/accuracy.md; relative, so the integrator points it at the published repository URL).
pub const ACCURACY_DOC_URL: &str = "docs/accuracy.md";

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawAggregate {
    family: String,
    #[serde(default)]
    scope: String,
    n: usize,
    median_abs_pct: f64,
    #[serde(default)]
    mean_signed_pct: Option<f64>,
    #[serde(default)]
    target_pct: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawSummary {
    aggregates: Vec<RawAggregate>,
    #[serde(default)]
    efficiencies: Option<String>,
}

/// One row of the panel.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyRow {
    /// "output tok/s", "ITL/TPOT mean", "TTFT p50".
    pub metric: String,
    pub n: usize,
    pub median_abs_pct: f64,
    pub mean_signed_pct: Option<f64>,
    pub target_pct: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Accuracy {
    pub rows: Vec<AccuracyRow>,
    /// Which efficiency table the figures were made with.
    pub efficiencies: Option<String>,
}

fn family_label(f: &str) -> String {
    match f {
        "Throughput" => "output tok/s".into(),
        "InterToken" => "ITL / TPOT mean".into(),
        "Ttft" => "TTFT p50".into(),
        other => other.to_string(),
    }
}

/// The all-points aggregates (scope "all", or the first per family when no scope says so).
pub fn parse(json: &str) -> Result<Accuracy, String> {
    let raw: RawSummary = serde_json::from_str(json)
        .map_err(|e| format!("the accuracy summary could not be read: {e}"))?;
    let mut rows: Vec<AccuracyRow> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let all_first = raw
        .aggregates
        .iter()
        .filter(|a| a.scope.is_empty() || a.scope.eq_ignore_ascii_case("all"))
        .chain(raw.aggregates.iter());
    for a in all_first {
        if seen.contains(&a.family) {
            continue;
        }
        if !(a.median_abs_pct.is_finite() && a.median_abs_pct >= 0.0) {
            return Err(format!(
                "the accuracy summary has a bad median for {}",
                a.family
            ));
        }
        seen.push(a.family.clone());
        rows.push(AccuracyRow {
            metric: family_label(&a.family),
            n: a.n,
            median_abs_pct: a.median_abs_pct,
            mean_signed_pct: a.mean_signed_pct,
            target_pct: a.target_pct,
        });
    }
    Ok(Accuracy {
        rows,
        efficiencies: raw.efficiencies,
    })
}

/// The embedded summary, if this build has one.
pub fn embedded() -> Option<Result<Accuracy, String>> {
    SUMMARY_JSON.map(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_points_aggregates_are_preferred_over_per_source_ones() {
        let json = r#"{"efficiencies":"fitted","points":[],"aggregates":[
            {"family":"Throughput","scope":"gpustack","n":20,"median_abs_pct":9.0},
            {"family":"Throughput","scope":"all","n":53,"median_abs_pct":13.3,"mean_signed_pct":-2.0,"target_pct":15.0,"met":true,"mean_abs_pct":14},
            {"family":"Ttft","scope":"all","n":58,"median_abs_pct":32.6,"target_pct":25.0}
        ]}"#;
        let a = parse(json).unwrap();
        assert_eq!(a.rows.len(), 2);
        assert_eq!(a.rows[0].metric, "output tok/s");
        assert_eq!((a.rows[0].n, a.rows[0].median_abs_pct), (53, 13.3));
        assert_eq!(a.rows[1].metric, "TTFT p50");
        assert_eq!(a.efficiencies.as_deref(), Some("fitted"));
        assert!(parse("{}").is_err());
        assert!(parse(r#"{"aggregates":[{"family":"Ttft","n":1,"median_abs_pct":-1}]}"#).is_err());
    }
}
