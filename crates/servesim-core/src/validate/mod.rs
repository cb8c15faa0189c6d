//! Predicted versus measured on the public calibration set (`data/calibration/measured-points.csv`).
//!
//! [`parse_points`] reads the calibration CSV (header as in the shipped file; unknown extra
//! columns are allowed, missing required ones are an error naming the column); [`setup_for`] maps a
//! row to a scenario (model, GPU, parallelism, dtypes, engine limits, workload, stop rule) by the
//! rules in `docs/accuracy.md`; [`run`] simulates every row and compares output tok/s, ITL or TPOT
//! (like with like) and TTFT p50; [`ValidationReport::to_markdown`] prints the per-point and
//! aggregate tables. Everything is pure (no file system): the CLI reads the file.
//!
//! Per-source caveats are applied, not just printed: a metric the source says is not comparable
//! for a row is excluded from the aggregate and listed with its reason.

mod borrow;
mod csv;
mod fit;
mod plan;
mod reach;
mod report;
mod rows;
mod run;
mod setup;
mod summary;

pub use borrow::*;
pub use csv::*;
pub use fit::*;
pub use plan::*;
pub use reach::*;
pub use report::*;
pub use run::*;
pub use setup::*;
pub use summary::*;

pub use rows::{
    model_family, page_model, resolve_model, version_in, waits_for, ResolvedModel,
    MODEL_FILE_ALIASES,
};

use thiserror::Error;

/// Validation failures. Row numbers are 1-based file lines (the header is line 1).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ValidateError {
    #[error("calibration CSV line {line}: {problem}. Fix: {fix}")]
    Csv {
        line: usize,
        problem: String,
        fix: String,
    },
    #[error("calibration CSV: required column `{column}` is missing from the header. Fix: use the header of data/calibration/measured-points.csv")]
    MissingColumn { column: String },
    #[error(
        "calibration CSV line {line}, column `{column}`: {problem} (got `{value}`). Fix: {fix}"
    )]
    BadCell {
        line: usize,
        column: String,
        value: String,
        problem: String,
        fix: String,
    },
    #[error("calibration CSV: no data rows{filter}. Fix: check the file and the --only filter")]
    NoPoints { filter: String },
    #[error("calibration CSV line {line}: the scenario is invalid: {message}")]
    Scenario { line: usize, message: String },
    #[error("fitted efficiencies: {0}")]
    Fitted(String),
    #[error("calibration CSV: no data row on line {line}. Fix: use a line number from the report (data rows are on lines {first}..={last})")]
    NoSuchLine {
        line: usize,
        first: usize,
        last: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_commas() {
        let r = split_csv("a,b\n\"x, y\",\"say \"\"hi\"\"\"\n").unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].1, vec!["x, y".to_string(), "say \"hi\"".to_string()]);
        assert_eq!(r[1].0, 2);
    }

    #[test]
    fn notes_parsing() {
        assert_eq!(
            mean_lengths_from_notes("total tok/s 5482.59. Mean lengths (derived = totals/successful requests): in 219.2, out 200.8."),
            Some((219.2, 200.8))
        );
        assert_eq!(
            shared_prefix_from_workload("inference-perf shared_prefix multi-turn 'codegen': 11 system prompts x 4 users, system 100 + question 466 tok, output 247 tok"),
            Some((11.0, 100.0, 466.0, 247.0))
        );
        assert_eq!(
            number_before(
                "load stage 0: 600s at constant rate 5 req/s",
                "s at constant rate"
            ),
            Some(600.0)
        );
        assert_eq!(
            number_after("x; max_model_len=32768; y", "max_model_len="),
            Some(32768.0)
        );
    }
}
