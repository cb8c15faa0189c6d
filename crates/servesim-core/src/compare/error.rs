//! Typed errors of the importers and the scorer. Every message names where (file, 1-based line
//! and column as an editor shows them) and how to fix it.

use thiserror::Error;

#[derive(Clone, Debug, PartialEq, Error)]
pub enum ImportError {
    #[error("{file}: the input is {bytes} bytes, over the import limit of {limit} bytes (compare::MAX_IMPORT_BYTES, 32 MiB in all files together). Fix: import the summary rows only (one row or object per level), or split the import by arm.")]
    TooLarge {
        file: String,
        bytes: usize,
        limit: usize,
    },

    #[error("{file}: the input is empty. Fix: paste or upload a results table or a benchmark-client JSON export.")]
    Empty { file: String },

    #[error("{file}: cannot tell the format ({detail}). Fix: use a CSV / TSV / Markdown table with a header row naming the level column (concurrency, request_rate, ...), or a JSON export of vllm bench serve, AIPerf, GuideLLM or InferenceX.")]
    UnknownFormat { file: String, detail: String },

    #[error("{file}: files of different formats in one import ({first} then {second}). Fix: import each format separately.")]
    MixedFormats {
        file: String,
        first: String,
        second: String,
    },

    #[error("{file} line {line}: row has {found} cells but the header (line {header_line}) has {expected}. Fix: make every row have one cell per header column (an empty cell is allowed).")]
    RaggedRow {
        file: String,
        line: usize,
        header_line: usize,
        expected: usize,
        found: usize,
    },

    #[error("{file} line {line}: unbalanced double quote. Fix: close the quoted cell on the same line, and write a quote inside a quoted cell as \"\".")]
    UnbalancedQuote { file: String, line: usize },

    #[error("{file} line {line}, column {column} (\"{header}\"): \"{value}\" is not a number. Fix: write a plain number (e.g. 1234.5), or leave the cell empty if the value was not measured.")]
    NotANumber {
        file: String,
        line: usize,
        column: usize,
        header: String,
        value: String,
    },

    #[error("{file} line {line}, column {column} (\"{header}\"): {value} must be {requirement}. Fix: check the cell; leave it empty if the value was not measured.")]
    OutOfRange {
        file: String,
        line: usize,
        column: usize,
        header: String,
        value: f64,
        requirement: String,
    },

    #[error("{file} line {line}, column {column} (\"{header}\"): unit \"{unit}\" is not understood for {metric}. Fix: use one of {accepted} in the header (e.g. \"TTFT p50 (ms)\"), or map the column by hand.")]
    UnknownUnit {
        file: String,
        line: usize,
        column: usize,
        header: String,
        unit: String,
        metric: String,
        accepted: String,
    },

    #[error("{file} line {line}, column {column} (\"{header}\"): the header names {metric} but no unit. Fix: add the unit, e.g. \"{header} (ms)\" or \"{header} (s)\".")]
    MissingUnit {
        file: String,
        line: usize,
        column: usize,
        header: String,
        metric: String,
    },

    #[error("{file} line {line}: no level column in the header. Fix: name one column concurrency (or c, conc, max_concurrency), request_rate (or rate, qps, rps) or burst.")]
    NoLevelColumn { file: String, line: usize },

    #[error("{file} line {line}: no column holds a ServeSim metric (unmatched: {unmatched}). Fix: rename the headers after the alias table in docs/compare.md, or map the columns by hand.")]
    NoMetricColumns {
        file: String,
        line: usize,
        unmatched: String,
    },

    #[error("{file}: no measured level found. Fix: the table needs at least one data row below the header.")]
    NoLevels { file: String },

    #[error("{file} line {line}: arm \"{arm}\" has level {level} twice (first at {first_file} line {first_line}). Fix: keep one row per level and arm, or give the rows different arms.")]
    DuplicateLevel {
        file: String,
        line: usize,
        first_file: String,
        first_line: usize,
        arm: String,
        level: f64,
    },

    #[error("{file} line {line}: arm \"{arm}\" mixes {first} and {second} levels. Fix: put runs with a different level kind in a separate arm.")]
    MixedLevelKinds {
        file: String,
        line: usize,
        arm: String,
        first: String,
        second: String,
    },

    #[error("{file} line {line}, column {column}: invalid JSON: {message}. Fix: the file must be the client's JSON export unchanged (one object, an array, or one object per line).")]
    InvalidJson {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("{file} line {line}: {what}. Fix: {fix}")]
    MissingField {
        file: String,
        line: usize,
        what: String,
        fix: String,
    },
}

#[derive(Clone, Debug, PartialEq, Error)]
pub enum ScoreError {
    #[error("arm \"{arm}\": the measured levels are {measured} but the predicted ones are {predicted}. Fix: simulate the same kind of sweep as the benchmark.")]
    LevelKindMismatch {
        arm: String,
        measured: String,
        predicted: String,
    },
    #[error(
        "arm \"{arm}\": predicted level {level} appears twice. Fix: one predicted point per level."
    )]
    DuplicatePredictedLevel { arm: String, level: f64 },
    #[error("arm \"{arm}\": predicted {metric} at level {level} is {value}, not a finite number. Fix: this is a simulator bug; report it.")]
    NonFinitePrediction {
        arm: String,
        metric: String,
        level: f64,
        value: f64,
    },
}
