//! "How far to trust it": ServeSim's median absolute error per metric against the public vLLM
//! runs (docs/accuracy.md), in-sample and held out, read from the summary the core embeds.
//!
//! Source: `servesim_core::validate::ACCURACY_SUMMARY_JSON`
//! (`include_str!("../data/calibration/accuracy-summary.json")`, the JSON of
//! `validate::AccuracySummary`, written by `servesim validate --fit` / `--write-summary`):
//! `{"description": "...", "points": 63, "simulated": 63, "metrics": [{"family": "Throughput",
//! "metric": "output tok/s", "n": 58, "median_abs_pct": 9.2, "mean_signed_pct": 17.1,
//! "held_out_source_median_abs_pct": 30.5, "held_out_model_median_abs_pct": 36.4,
//! "target_pct": 15.0, "met": true}, ...]}`.
//!
//! The page reads the JSON text with its own small struct (not `validate::accuracy_summary()`),
//! so only the text, not the validation code, is linked into the page's wasm. With
//! [`SUMMARY_JSON`] = `None` the panel says the figures are not in this build.

use serde::Deserialize;

/// The embedded summary (`None` would show "not in this build").
pub const SUMMARY_JSON: Option<&str> = Some(crate::core_api::validate::ACCURACY_SUMMARY_JSON);

/// Where the page links for the method and the per-point results: docs/accuracy.md, copied
/// into the site next to index.html by Trunk (`web/index.html`, `rel="copy-file"`), so the link
/// works wherever the page is served.
pub const ACCURACY_DOC_URL: &str = "accuracy.md";

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawMetric {
    family: String,
    #[serde(default)]
    metric: Option<String>,
    n: usize,
    median_abs_pct: f64,
    #[serde(default)]
    mean_signed_pct: Option<f64>,
    #[serde(default)]
    held_out_source_median_abs_pct: Option<f64>,
    #[serde(default)]
    held_out_model_median_abs_pct: Option<f64>,
    #[serde(default)]
    held_out_family_median_abs_pct: Option<f64>,
    #[serde(default)]
    held_out_target_pct: Option<f64>,
    target_pct: f64,
    met: bool,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawFamily {
    model_family: String,
    family: String,
    n: usize,
    median_abs_pct: f64,
    mean_signed_pct: f64,
    #[serde(default)]
    held_out_median_abs_pct: Option<f64>,
    #[serde(default)]
    held_out_mean_signed_pct: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawSummary {
    #[serde(default)]
    description: String,
    #[serde(default)]
    points: usize,
    #[serde(default)]
    simulated: usize,
    metrics: Vec<RawMetric>,
    #[serde(default)]
    families: Vec<RawFamily>,
    /// The validation set as a whole (runs no fit reads), per metric.
    #[serde(default)]
    validation_metrics: Vec<RawSetMetric>,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
struct RawSetMetric {
    family: String,
    n: usize,
    median_abs_pct: f64,
    mean_signed_pct: f64,
    #[serde(default)]
    sources: usize,
}

/// One metric over the validation set (runs no fit reads).
#[derive(Clone, Debug, PartialEq)]
pub struct NeverFitted {
    pub metric: String,
    pub n: usize,
    pub median_abs_pct: f64,
    pub mean_signed_pct: f64,
    pub sources: usize,
}

/// One row of the panel.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyRow {
    /// "output tok/s", "ITL/TPOT mean", "TTFT p50".
    pub metric: String,
    /// Points scored.
    pub n: usize,
    /// Median absolute error, percent, in-sample (the shipped calibrated table).
    pub median_abs_pct: f64,
    pub mean_signed_pct: Option<f64>,
    /// Held out: each source predicted by a fit on the other source(s).
    pub held_out_source_pct: Option<f64>,
    /// Held out: each model predicted by a fit on the other models.
    pub held_out_model_pct: Option<f64>,
    /// Held out: each model family (dense, MoE, MLA, sparse, hybrid) predicted by a fit on the
    /// other families: what to expect for a new model.
    pub held_out_family_pct: Option<f64>,
    /// Target on the held-out median.
    pub held_out_target_pct: Option<f64>,
    pub target_pct: f64,
    /// The in-sample median is within the target.
    pub met: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Accuracy {
    pub rows: Vec<AccuracyRow>,
    /// Per model family and metric (in-sample and held out).
    pub families: Vec<FamilyRow>,
    /// What was compared, with which table.
    pub description: String,
    /// Measured runs in the set, and how many could be simulated.
    pub points: usize,
    pub simulated: usize,
    /// The validation set (runs no fit reads), per metric; empty in an older summary.
    pub never_fitted: Vec<NeverFitted>,
}

/// The sentence the panel gives the validation set: per metric its median absolute and mean
/// signed error over runs no fit read; `None` when the summary has none.
pub fn never_fitted_sentence(v: &[NeverFitted]) -> Option<String> {
    let runs = v.iter().map(|m| m.n).max()?;
    let sources = v.iter().map(|m| m.sources).max().unwrap_or(0);
    let per: Vec<String> = v
        .iter()
        .map(|m| {
            format!(
                "{} {:.1} % (mean signed {:+.1} %, {} runs)",
                m.metric, m.median_abs_pct, m.mean_signed_pct, m.n
            )
        })
        .collect();
    Some(format!(
        "On up to {runs} public runs from {sources} sources that no fit has read (the validation set), the median |error| is {}.",
        per.join(", ")
    ))
}

/// One row of the per-family table.
#[derive(Clone, Debug, PartialEq)]
pub struct FamilyRow {
    pub model_family: String,
    pub metric: String,
    pub n: usize,
    pub median_abs_pct: f64,
    pub mean_signed_pct: f64,
    pub held_out_pct: Option<f64>,
    pub held_out_signed_pct: Option<f64>,
}

fn family_label(f: &str) -> String {
    match f {
        "Throughput" => "output tok/s".into(),
        "InterToken" => "ITL/TPOT mean".into(),
        "Ttft" => "TTFT p50".into(),
        other => other.to_string(),
    }
}

fn pct_ok(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}

/// Reads the summary; a damaged one is a message (shown in the panel), never a panic.
pub fn parse(json: &str) -> Result<Accuracy, String> {
    let raw: RawSummary = serde_json::from_str(json)
        .map_err(|e| format!("the accuracy summary could not be read: {e}"))?;
    if raw.metrics.is_empty() {
        return Err("the accuracy summary lists no metric".into());
    }
    let mut rows = Vec::with_capacity(raw.metrics.len());
    for m in raw.metrics {
        let held = [
            m.held_out_source_median_abs_pct,
            m.held_out_model_median_abs_pct,
            m.held_out_family_median_abs_pct,
        ];
        if !pct_ok(m.median_abs_pct)
            || !pct_ok(m.target_pct)
            || held.iter().flatten().any(|v| !pct_ok(*v))
        {
            return Err(format!(
                "the accuracy summary has a bad percentage for {}",
                m.family
            ));
        }
        rows.push(AccuracyRow {
            metric: m.metric.unwrap_or_else(|| family_label(&m.family)),
            n: m.n,
            median_abs_pct: m.median_abs_pct,
            mean_signed_pct: m.mean_signed_pct,
            held_out_source_pct: m.held_out_source_median_abs_pct,
            held_out_model_pct: m.held_out_model_median_abs_pct,
            held_out_family_pct: m.held_out_family_median_abs_pct,
            held_out_target_pct: m.held_out_target_pct,
            target_pct: m.target_pct,
            met: m.met,
        });
    }
    let families = raw
        .families
        .into_iter()
        .filter(|f| pct_ok(f.median_abs_pct) && f.held_out_median_abs_pct.is_none_or(pct_ok))
        .map(|f| FamilyRow {
            model_family: f.model_family,
            metric: family_label(&f.family),
            n: f.n,
            median_abs_pct: f.median_abs_pct,
            mean_signed_pct: f.mean_signed_pct,
            held_out_pct: f.held_out_median_abs_pct,
            held_out_signed_pct: f.held_out_mean_signed_pct,
        })
        .collect();
    let never_fitted = raw
        .validation_metrics
        .into_iter()
        .filter(|m| pct_ok(m.median_abs_pct) && m.mean_signed_pct.is_finite())
        .map(|m| NeverFitted {
            metric: family_label(&m.family),
            n: m.n,
            median_abs_pct: m.median_abs_pct,
            mean_signed_pct: m.mean_signed_pct,
            sources: m.sources,
        })
        .collect();
    Ok(Accuracy {
        rows,
        families,
        description: raw.description,
        points: raw.points,
        simulated: raw.simulated,
        never_fitted,
    })
}

/// "9.2 %", or "n/a" when the summary has no such figure.
pub fn fmt_pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1} %"))
        .unwrap_or_else(|| "n/a".into())
}

/// The embedded summary, if this build has one.
pub fn embedded() -> Option<Result<Accuracy, String>> {
    SUMMARY_JSON.map(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape `validate::AccuracySummary::to_json` writes (values made up for the test).
    const SAMPLE: &str = r#"{
      "description": "ServeSim versus 63 public measured vLLM runs, table: fitted.",
      "points": 63, "simulated": 62,
      "metrics": [
        {"family": "Throughput", "metric": "output tok/s", "n": 58, "median_abs_pct": 9.2,
         "mean_signed_pct": 17.1, "held_out_source_median_abs_pct": 30.5,
         "held_out_model_median_abs_pct": 36.4, "target_pct": 15.0, "met": true},
        {"family": "Ttft", "metric": "TTFT p50", "n": 63, "median_abs_pct": 26.8,
         "mean_signed_pct": 2.0, "held_out_source_median_abs_pct": null,
         "held_out_model_median_abs_pct": 52.4, "target_pct": 25.0, "met": false}
      ]}"#;

    #[test]
    fn every_metric_row_keeps_in_sample_held_out_target_and_verdict() {
        let a = parse(SAMPLE).unwrap();
        assert_eq!((a.points, a.simulated), (63, 62));
        assert!(a.description.contains("63 public"));
        assert_eq!(a.rows.len(), 2);
        let t = &a.rows[0];
        assert_eq!(t.metric, "output tok/s");
        assert_eq!(
            (t.n, t.median_abs_pct, t.target_pct, t.met),
            (58, 9.2, 15.0, true)
        );
        assert_eq!(
            (t.held_out_source_pct, t.held_out_model_pct),
            (Some(30.5), Some(36.4))
        );
        let f = &a.rows[1];
        assert!(!f.met);
        assert_eq!(fmt_pct(f.held_out_source_pct), "n/a");
        assert_eq!(fmt_pct(f.held_out_model_pct), "52.4 %");
    }

    #[test]
    fn the_validation_set_is_one_sentence_with_signs_and_absent_in_an_older_summary() {
        assert!(parse(SAMPLE).unwrap().never_fitted.is_empty());
        assert_eq!(never_fitted_sentence(&[]), None);
        let with = SAMPLE.replacen(
            "\"metrics\": [",
            r#""validation_metrics": [
                {"family": "Throughput", "metric": "output tok/s", "n": 37, "median_abs_pct": 16.2,
                 "mean_signed_pct": 13.4, "sources": 8},
                {"family": "Ttft", "metric": "TTFT p50", "n": 17, "median_abs_pct": 40.8,
                 "mean_signed_pct": -8.3, "sources": 5}],
              "metrics": ["#,
            1,
        );
        let a = parse(&with).unwrap();
        assert_eq!(a.never_fitted.len(), 2);
        let s = never_fitted_sentence(&a.never_fitted).unwrap();
        assert!(
            s.starts_with("On up to 37 public runs from 8 sources that no fit has read"),
            "{s}"
        );
        assert!(
            s.contains("output tok/s 16.2 % (mean signed +13.4 %, 37 runs), TTFT p50 40.8 % (mean signed -8.3 %, 17 runs)"),
            "{s}"
        );
    }

    #[test]
    fn a_damaged_summary_is_a_message() {
        assert!(parse("{").unwrap_err().contains("could not be read"));
        assert!(parse(r#"{"metrics": []}"#)
            .unwrap_err()
            .contains("no metric"));
        let neg = SAMPLE.replace("\"median_abs_pct\": 9.2", "\"median_abs_pct\": -9.2");
        assert!(parse(&neg).unwrap_err().contains("Throughput"));
    }

    #[test]
    fn a_family_without_a_display_name_gets_the_pages_label() {
        let j = r#"{"metrics": [{"family": "InterToken", "n": 3, "median_abs_pct": 1.0,
            "target_pct": 15.0, "met": true}]}"#;
        assert_eq!(parse(j).unwrap().rows[0].metric, "ITL/TPOT mean");
    }

    /// The core's shipped summary (once the calibration lands) parses with the page's reader,
    /// and the page embeds it: a build with the file but `SUMMARY_JSON = None` fails here with
    /// the line to change.
    #[test]
    fn the_cores_summary_file_is_read_and_embedded_when_it_exists() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../crates/servesim-core/data/calibration/accuracy-summary.json"
        );
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let a = parse(&text).expect("the core's accuracy-summary.json parses");
                assert!(!a.rows.is_empty());
                assert!(
                    SUMMARY_JSON.is_some(),
                    "the core ships accuracy-summary.json: set compare_ui::accuracy::SUMMARY_JSON = \
                     Some(crate::core_api::validate::ACCURACY_SUMMARY_JSON)"
                );
            }
            Err(_) => assert!(embedded().is_none(), "no summary file, nothing embedded"),
        }
    }
}
