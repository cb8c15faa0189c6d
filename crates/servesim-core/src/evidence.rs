//! The measured evidence behind one prediction: ServeSim's error on the public measured runs
//! that share the scenario's calibration key (GPU generation and vLLM release line) and model
//! family, in-sample and with that family held out of the fit, as the shipped accuracy summary
//! records them (docs/accuracy.md "Per calibration key and model family").
//!
//! Architecture invariant: this module reads the summary's JSON text with its own small structs
//! and words one sentence; it neither runs nor links the validation, so the page can call it.

use serde::{Deserialize, Serialize};

/// One (calibration key, model family, metric) cell of the accuracy summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceCell {
    /// The calibration key the runs are fitted in and simulated with (`hopper@vllm-0.15`).
    pub key: String,
    /// `dense`, `MoE`, `MLA`, `sparse` or `hybrid` (`ModelConfig::accuracy_family`).
    pub model_family: String,
    /// "output tok/s", "ITL/TPOT mean" or "TTFT p50".
    pub metric: String,
    /// Measured runs scored on this metric.
    pub n: usize,
    /// Sources (publications) those runs come from.
    pub sources: usize,
    /// In-sample (the shipped table): median absolute and mean signed error, percent.
    pub median_abs_pct: f64,
    pub mean_signed_pct: f64,
    /// The same runs predicted by the fit that did not see their model family
    /// (leave-one-family-out); `None` when the summary was written without the folds.
    pub held_out_median_abs_pct: Option<f64>,
    pub held_out_mean_signed_pct: Option<f64>,
    /// The shortest and longest nominal mean prompt of those runs, tokens
    /// (`PointResult::prompt_tokens`; `None` when no run's workload states one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_min: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_max: Option<u64>,
}

/// The metrics in the order the sentence names them.
const METRICS: [&str; 3] = ["output tok/s", "ITL/TPOT mean", "TTFT p50"];

#[derive(Deserialize)]
struct RawSummary {
    #[serde(default)]
    evidence: Vec<EvidenceCell>,
    #[serde(default)]
    families: Vec<RawFamily>,
    #[serde(default)]
    validation: Vec<EvidenceCell>,
}

#[derive(Deserialize)]
struct RawFamily {
    model_family: String,
    /// The metric family as `validate::Family` serialises it (`Throughput`, `InterToken`,
    /// `Ttft`), in the order of [`METRICS`].
    family: String,
    #[serde(default)]
    held_out_median_abs_pct: Option<f64>,
}

/// What the calibration set says about a prediction, for people and for tests.
#[derive(Clone, Debug, PartialEq)]
pub struct Evidence {
    /// The summary's cells for the key and family, in [`METRICS`] order (empty: none).
    pub cells: Vec<EvidenceCell>,
    /// The validation set's cells for the key and family (runs no fit read), in [`METRICS`]
    /// order (empty: none).
    pub validation: Vec<EvidenceCell>,
    /// One sentence.
    pub summary: String,
}

/// The shortest and longest prompt of the runs behind `cells`, when their cells record them.
fn prompt_range(cells: &[EvidenceCell]) -> Option<(u64, u64)> {
    let lo = cells.iter().filter_map(|c| c.prompt_tokens_min).min()?;
    let hi = cells.iter().filter_map(|c| c.prompt_tokens_max).max()?;
    Some((lo, hi))
}

fn pct(v: f64) -> String {
    format!("{v:.1} %")
}

/// The evidence for a model of `model_family` predicted with the fitted table of calibration
/// key `key` (`None`: the literature table, no fit), from the accuracy summary's JSON text.
pub fn evidence(summary_json: &str, key: Option<&str>, model_family: &str) -> Evidence {
    let raw: RawSummary = match serde_json::from_str(summary_json) {
        Ok(r) => r,
        Err(e) => {
            return Evidence {
                cells: Vec::new(),
                validation: Vec::new(),
                summary: format!("measured evidence: the accuracy summary could not be read ({e})"),
            }
        }
    };
    let Some(key) = key else {
        return Evidence {
            cells: Vec::new(),
            validation: Vec::new(),
            summary: "measured evidence: none; no public run on this GPU generation is in the calibration set, so the step-time model uses the literature table (docs/step-time.md) and no error can be quoted".into(),
        };
    };
    let pick = |from: &[EvidenceCell]| -> Vec<EvidenceCell> {
        METRICS
            .iter()
            .filter_map(|m| {
                from.iter()
                    .find(|c| c.key == key && c.model_family == model_family && c.metric == *m)
                    .cloned()
            })
            .collect()
    };
    let cells = pick(&raw.evidence);
    let validation = pick(&raw.validation);
    let never_fitted = never_fitted_clause(&validation, model_family);
    if cells.is_empty() {
        // The family's held-out medians over every key: what an unseen family gets.
        let fam: Vec<String> = ["Throughput", "InterToken", "Ttft"]
            .iter()
            .zip(METRICS)
            .filter_map(|(f, m)| {
                raw.families
                    .iter()
                    .find(|r| r.model_family == model_family && r.family == *f)
                    .and_then(|r| r.held_out_median_abs_pct)
                    .map(|v| format!("{m} {}", pct(v)))
            })
            .collect();
        let mut summary = format!(
            "measured evidence: no public run of a {model_family} model is fitted in {key}, so for this model family the prediction is out of sample"
        );
        if !fam.is_empty() {
            summary.push_str(&format!(
                " (with {model_family} models held out of the fit, every key: median |error| {})",
                fam.join(", ")
            ));
        }
        summary.push_str(&never_fitted);
        return Evidence {
            cells,
            validation,
            summary,
        };
    }
    let sources = cells.iter().map(|c| c.sources).max().unwrap_or(0);
    // The prompt lengths those runs cover: a prediction far outside them is an extrapolation.
    let prompts = match prompt_range(&cells) {
        Some((a, b)) if a == b => format!(" (prompts of {a} tokens)"),
        Some((a, b)) => format!(" (prompts of {a} to {b} tokens)"),
        None => String::new(),
    };
    let in_sample: Vec<String> = cells
        .iter()
        .map(|c| format!("{} {} ({} runs)", c.metric, pct(c.median_abs_pct), c.n))
        .collect();
    let mut summary = format!(
        "measured evidence: {model_family} models in {key}, {sources} source(s){prompts}: ServeSim's median |error| {} in-sample",
        in_sample.join(", ")
    );
    let held: Vec<String> = cells
        .iter()
        .filter_map(|c| {
            c.held_out_median_abs_pct
                .map(|v| format!("{} {}", c.metric, pct(v)))
        })
        .collect();
    if !held.is_empty() {
        summary.push_str(&format!(
            "; {} with {model_family} models held out of the fit",
            held.join(", ")
        ));
    }
    summary.push_str(&never_fitted);
    Evidence {
        cells,
        validation,
        summary,
    }
}

/// The clause quoting the validation set's runs (never fitted) of the key and family: their
/// median absolute and mean signed error per metric, so that a prediction the fitted runs flatter
/// is seen against runs no fit read. Empty when there are none.
fn never_fitted_clause(validation: &[EvidenceCell], model_family: &str) -> String {
    if validation.is_empty() {
        return String::new();
    }
    let sources = validation.iter().map(|c| c.sources).max().unwrap_or(0);
    let runs = validation.iter().map(|c| c.n).max().unwrap_or(0);
    let per: Vec<String> = validation
        .iter()
        .map(|c| {
            format!(
                "{} {} (mean signed {:+.1} %)",
                c.metric,
                pct(c.median_abs_pct),
                c.mean_signed_pct
            )
        })
        .collect();
    format!(
        "; {runs} run(s) of {model_family} models from {sources} source(s) that no fit read (the validation set) give median |error| {}",
        per.join(", ")
    )
}

/// The evidence a prediction with calibration `cal` for `model` is quoted: the summary's cell
/// for the fitted entry it uses (`Calibration::fit`) and the model's family, plus a clause when
/// the scenario's prompts (`prompt_tokens`, their nominal mean) lie outside the prompt lengths
/// those runs cover by more than half again, and one when the scenario sets efficiency fields
/// itself (outside what those runs tested). One wording for a scenario
/// (`ResolvedScenario::evidence`) and a search's GPUs (`SearchSpace::evidence`).
pub fn quoted(
    cal: &crate::scenario::Calibration,
    model: &crate::model::ModelConfig,
    prompt_tokens: Option<u64>,
) -> Evidence {
    let mut e = evidence(
        crate::validate::ACCURACY_SUMMARY_JSON,
        cal.fit.as_deref(),
        model.accuracy_family(),
    );
    if let (Some(p), Some((lo, hi))) = (prompt_tokens, prompt_range(&e.cells)) {
        // 1.5x either way: a factor the rows' own spread of lengths would not call a new regime.
        if p.saturating_mul(2) > hi.saturating_mul(3) || p.saturating_mul(3) < lo.saturating_mul(2)
        {
            e.summary.push_str(&format!(
                "; this scenario's prompts (about {p} tokens) lie outside those runs' {lo} to {hi}, so its prefill and first tokens are an extrapolation"
            ));
        }
    }
    let n = cal.overridden.len();
    if n > 0 && cal.fit.is_some() {
        e.summary.push_str(&format!(
            "; the scenario sets {n} efficiency field(s) itself, which these runs did not test"
        ));
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(metric: &str, n: usize, med: f64, held: Option<f64>) -> String {
        format!(
            r#"{{"key": "hopper@vllm-0.15", "model_family": "MoE", "metric": "{metric}", "n": {n},
              "sources": 2, "median_abs_pct": {med}, "mean_signed_pct": 1.0,
              "held_out_median_abs_pct": {}, "held_out_mean_signed_pct": null}}"#,
            held.map_or("null".to_string(), |v| v.to_string())
        )
    }

    fn summary() -> String {
        format!(
            r#"{{"evidence": [{}, {}, {}],
               "families": [{{"model_family": "MLA", "family": "Throughput", "held_out_median_abs_pct": 74.2}},
                            {{"model_family": "MLA", "family": "Ttft", "held_out_median_abs_pct": 62.7}}]}}"#,
            cell("TTFT p50", 30, 24.3, Some(45.5)),
            cell("output tok/s", 40, 9.8, Some(20.7)),
            cell("ITL/TPOT mean", 38, 15.4, None),
        )
    }

    #[test]
    fn the_runs_prompt_lengths_are_quoted_as_one_range() {
        let with = |c: String, lo: u64, hi: u64| {
            c.replacen(
                "\"sources\": 2,",
                &format!(
                    "\"sources\": 2, \"prompt_tokens_min\": {lo}, \"prompt_tokens_max\": {hi},"
                ),
                1,
            )
        };
        let json = format!(
            r#"{{"evidence": [{}, {}]}}"#,
            with(cell("output tok/s", 40, 9.8, None), 547, 750),
            with(cell("TTFT p50", 30, 24.3, None), 128, 600),
        );
        let e = evidence(&json, Some("hopper@vllm-0.15"), "MoE");
        assert!(
            e.summary
                .contains("2 source(s) (prompts of 128 to 750 tokens): ServeSim"),
            "{}",
            e.summary
        );
        // Without the fields (an older summary) the sentence has no range.
        let e = evidence(&summary(), Some("hopper@vllm-0.15"), "MoE");
        assert!(!e.summary.contains("prompts of"), "{}", e.summary);
    }

    #[test]
    fn a_key_and_family_with_runs_quote_them_in_metric_order() {
        let e = evidence(&summary(), Some("hopper@vllm-0.15"), "MoE");
        assert_eq!(e.cells.len(), 3);
        assert_eq!(e.cells[0].metric, "output tok/s");
        assert!(
            e.summary
                .contains("MoE models in hopper@vllm-0.15, 2 source(s)"),
            "{}",
            e.summary
        );
        assert!(e.summary.contains(
            "output tok/s 9.8 % (40 runs), ITL/TPOT mean 15.4 % (38 runs), TTFT p50 24.3 % (30 runs) in-sample"
        ));
        assert!(e
            .summary
            .contains("output tok/s 20.7 %, TTFT p50 45.5 % with MoE models held out"));
    }

    #[test]
    fn a_family_the_key_has_not_seen_is_out_of_sample_with_the_familys_held_out_figures() {
        let e = evidence(&summary(), Some("hopper@vllm-0.15"), "MLA");
        assert!(e.cells.is_empty());
        assert!(e
            .summary
            .contains("no public run of a MLA model is fitted in hopper@vllm-0.15"));
        assert!(e
            .summary
            .contains("every key: median |error| output tok/s 74.2 %, TTFT p50 62.7 %"));
        let other_key = evidence(&summary(), Some("ampere@vllm-0.11"), "MoE");
        assert!(other_key.cells.is_empty());
        assert!(!other_key.summary.contains("every key"));
    }

    #[test]
    fn never_fitted_runs_follow_the_fitted_ones_with_their_signs_even_for_an_unseen_family() {
        let validation = |fam: &str| {
            format!(
                r#"{{"key": "hopper@vllm-0.15", "model_family": "{fam}", "metric": "output tok/s", "n": 6,
                  "sources": 2, "median_abs_pct": 61.8, "mean_signed_pct": 103.1,
                  "held_out_median_abs_pct": null, "held_out_mean_signed_pct": null}}"#
            )
        };
        let json = summary().replacen(
            "\"evidence\": [",
            &format!(
                "\"validation\": [{}, {}], \"evidence\": [",
                validation("MoE"),
                validation("MLA")
            ),
            1,
        );
        let clause = "6 run(s) of {} models from 2 source(s) that no fit read (the validation set) give median |error| output tok/s 61.8 % (mean signed +103.1 %)";
        let e = evidence(&json, Some("hopper@vllm-0.15"), "MoE");
        assert_eq!(e.validation.len(), 1);
        assert!(
            e.summary
                .ends_with(&format!("; {}", clause.replace("{}", "MoE"))),
            "{}",
            e.summary
        );
        // The fitted runs' sentence is unchanged before it.
        let without = evidence(&summary(), Some("hopper@vllm-0.15"), "MoE");
        assert!(e.summary.starts_with(&without.summary), "{}", e.summary);
        // A family the key never fitted is out of sample, and still told the runs no fit read.
        let m = evidence(&json, Some("hopper@vllm-0.15"), "MLA");
        assert!(m.cells.is_empty());
        assert!(m.summary.contains("out of sample"), "{}", m.summary);
        assert!(
            m.summary
                .ends_with(&format!("; {}", clause.replace("{}", "MLA"))),
            "{}",
            m.summary
        );
        // Another key has none.
        assert!(evidence(&json, Some("ampere@vllm-0.11"), "MoE")
            .validation
            .is_empty());
    }

    #[test]
    fn the_literature_table_and_a_damaged_summary_are_said_plainly() {
        let e = evidence(&summary(), None, "dense");
        assert!(e.summary.contains("literature table"));
        let bad = evidence("{", Some("hopper@vllm-0.15"), "MoE");
        assert!(bad.summary.contains("could not be read"));
    }
}
