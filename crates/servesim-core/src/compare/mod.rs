//! Predicted versus measured: importing real benchmark results and scoring ServeSim's predictions
//! against them, in the shape of a simulator validation report.
//!
//! Everything here is a pure function over `&str` (the core has no file system): the page and the
//! CLI read the files and hand their text in. `docs/compare.md` defines every formula and lists
//! the header alias table and where each benchmark-client format comes from.
//!
//! - Import: [`import_text`] (auto-detects CSV / TSV / Markdown tables, AIPerf CSV, and the JSON
//!   exports of `vllm bench serve --save-result`, AIPerf, GuideLLM and InferenceX),
//!   [`import_files`] (several files, e.g. one vLLM JSON per level), [`parse_kv_cache_tokens`]
//!   (vLLM's start-up "GPU KV cache size: N tokens" line).
//! - Score: [`score_arm`] / [`score_all`] give per-arm, per-metric signed mean, MAPE, shape error
//!   and sign pattern over the scored levels.
//! - Export: [`ComparisonReport::to_markdown`] and [`ComparisonReport::to_csv`].

// ImportError carries the file, line, column, header and fix text the user sees; it is built only
// on the error path, so its size does not matter.
#![allow(clippy::result_large_err)]

mod error;
mod export;
mod headers;
mod json;
mod kvlog;
pub mod predict;
mod score;
mod table;

pub use error::{ImportError, ScoreError};
pub use headers::{alias_table, classify_header, HeaderClass};
pub use kvlog::parse_kv_cache_tokens;
pub use score::{
    level_label, score_all, score_arm, ArmScore, ComparisonReport, LevelPoint, MetricScore,
    ScoreOptions, SignPattern, NO_PREDICTION,
};

use crate::metric::MetricId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the sweep varied from level to level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum LevelKind {
    /// Closed loop: at most N requests in flight (vLLM `--max-concurrency`).
    Concurrency,
    /// Open loop: requests arrive at N per second.
    RequestRate,
    /// All N requests sent at time zero (vLLM `--request-rate inf` without a concurrency cap).
    Burst,
}

impl LevelKind {
    pub fn name(self) -> &'static str {
        match self {
            LevelKind::Concurrency => "concurrency",
            LevelKind::RequestRate => "request rate",
            LevelKind::Burst => "burst",
        }
    }
}

/// Which importer produced a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SourceFormat {
    Csv,
    Tsv,
    Markdown,
    VllmBenchJson,
    AiperfJson,
    AiperfCsv,
    GuidellmJson,
    InferenceXJson,
    /// A table whose headers follow InferenceX's `utils/process_result.py` keys or its
    /// `utils/summarize.py` Markdown columns.
    InferenceXTable,
}

/// One measured level (one concurrency, one rate, one burst size).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredLevel {
    pub level: f64,
    /// Values in the metric's own unit (see [`MetricId::label`]).
    pub metrics: BTreeMap<MetricId, f64>,
    /// `Some(reason)` when this level is not to be scored.
    pub excluded: Option<String>,
}

/// One arm of a measured sweep: one deployment / configuration, several levels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRun {
    pub arm: String,
    pub level_kind: LevelKind,
    /// Sorted by level, ascending; no two levels equal.
    pub levels: Vec<MeasuredLevel>,
    /// From vLLM's start-up line "GPU KV cache size: N tokens", when the user pasted the log.
    pub kv_cache_tokens_logged: Option<u64>,
    pub source_format: SourceFormat,
}

impl MeasuredRun {
    /// Marks a level as excluded from scoring. Returns false when no level matches.
    pub fn exclude(&mut self, level: f64, reason: &str) -> bool {
        match self
            .levels
            .iter_mut()
            .find(|l| levels_equal(l.level, level))
        {
            Some(l) => {
                l.excluded = Some(reason.to_string());
                true
            }
            None => false,
        }
    }
}

/// A column or field the importer saw and did not use, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unmatched {
    /// The header text or JSON field name as it appears in the input.
    pub name: String,
    /// 1-based column for tables; `None` for JSON fields.
    pub column: Option<usize>,
    pub reason: String,
}

/// What an import produced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Imported {
    pub runs: Vec<MeasuredRun>,
    /// Every column / metric field not used, with the reason (never dropped silently).
    pub unmatched: Vec<Unmatched>,
    /// Things the user should know (a definitional caveat, a mapping entry with no column, ...).
    pub notes: Vec<String>,
}

/// Header text (exactly as in the file, trimmed) to the metric it holds, or `None` to ignore the
/// column. Overrides the automatic matching.
pub type ColumnMapping = BTreeMap<String, Option<MetricId>>;

/// Options for the importers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportOptions {
    /// Arm name when the input has no "arm" column (default "measured").
    pub arm: Option<String>,
    pub mapping: ColumnMapping,
    /// The level of a one-level export that does not record it (AIPerf CSV).
    pub level: Option<(LevelKind, f64)>,
}

impl ImportOptions {
    pub(crate) fn arm_name(&self) -> String {
        self.arm.clone().unwrap_or_else(|| "measured".to_string())
    }
}

/// The ServeSim-side series for one arm (the integrator converts the engine's level results).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictedSeries {
    pub level_kind: LevelKind,
    pub points: Vec<(f64, BTreeMap<MetricId, f64>)>,
    /// Predicted KV capacity per replica in tokens, for the KV pool ratio (optional).
    pub kv_capacity_tokens: Option<u64>,
    /// The measured runs behind the scenario's predictions (`ResolvedScenario::evidence`'s
    /// sentence), carried into the report's arm (optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// Levels match when they differ by at most 1e-9 relative.
pub fn levels_equal(a: f64, b: f64) -> bool {
    let scale = a.abs().max(b.abs());
    (a - b).abs() <= 1e-9 * scale
}

/// The most bytes one import reads (all its files together): 32 MiB. Imports are linear in
/// their size (a 200,000-row CSV or 40,000 vLLM objects take well under a second, release
/// build; docs/performance.md "Imports"); the limit keeps the parsed values (several times the
/// text) inside the page worker's memory budget.
pub const MAX_IMPORT_BYTES: usize = 32 << 20;

/// Auto-detects the format of one pasted / uploaded text and imports it.
pub fn import_text(text: &str, opts: &ImportOptions) -> Result<Imported, ImportError> {
    import_files(&[("input", text)], opts)
}

/// Imports several files of one sweep (e.g. one `vllm bench serve --save-result` JSON per level).
/// Files of the same format are merged into one set of arms; a level present twice is an error.
pub fn import_files(files: &[(&str, &str)], opts: &ImportOptions) -> Result<Imported, ImportError> {
    if files.is_empty() {
        return Err(ImportError::Empty {
            file: String::new(),
        });
    }
    let mut all = Imported {
        runs: Vec::new(),
        unmatched: Vec::new(),
        notes: Vec::new(),
    };
    let bytes: usize = files.iter().map(|(_, t)| t.len()).sum();
    if bytes > MAX_IMPORT_BYTES {
        return Err(ImportError::TooLarge {
            file: if files.len() == 1 {
                files[0].0.to_string()
            } else {
                format!("{} files", files.len())
            },
            bytes,
            limit: MAX_IMPORT_BYTES,
        });
    }
    let mut rows: Vec<table::Row> = Vec::new();
    let mut format: Option<SourceFormat> = None;
    for (name, text) in files {
        let trimmed = text.trim_start_matches('\u{feff}').trim();
        if trimmed.is_empty() {
            return Err(ImportError::Empty {
                file: name.to_string(),
            });
        }
        let (fmt, mut file_rows, part) = if trimmed.starts_with('{') || trimmed.starts_with('[') {
            json::import_json(name, text, opts)?
        } else {
            table::import_table(name, text, opts)?
        };
        if let Some(prev) = format {
            if prev != fmt {
                return Err(ImportError::MixedFormats {
                    file: name.to_string(),
                    first: format!("{prev:?}"),
                    second: format!("{fmt:?}"),
                });
            }
        }
        format = Some(fmt);
        rows.append(&mut file_rows);
        for u in part.unmatched {
            if !all.unmatched.contains(&u) {
                all.unmatched.push(u);
            }
        }
        for n in part.notes {
            if !all.notes.contains(&n) {
                all.notes.push(n);
            }
        }
    }
    let format = format.unwrap_or(SourceFormat::Csv);
    all.runs = table::rows_to_runs(rows, format)?;
    if all.runs.is_empty() {
        return Err(ImportError::NoLevels {
            file: files[0].0.to_string(),
        });
    }
    Ok(all)
}
