//! What the import panel shows: the core's import result plus, for tables, one entry per column
//! saying what it was matched to (or why not), and the location of an import error.
//!
//! All parsing of measured data is the core's (`servesim_core::compare::import_files`); this module
//! only finds the header row to list the columns (display only) and reads the error's location.
//! [`run_import`] runs in the tools worker (`ToWorker::Import`, `command_tools`): the importers are
//! not linked into the page binary, and a large paste never blocks the page's thread.

use crate::core_api::compare::{
    classify_header, import_files, ColumnMapping, HeaderClass, ImportError, ImportOptions,
    Imported, LevelKind,
};
use crate::core_api::metric::MetricId;
use std::collections::BTreeSet;

/// One input: a pasted text (named "pasted") or an uploaded file.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

/// What one table column became.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ColumnStatus {
    Level(LevelKind),
    Arm,
    Excluded,
    /// Matched to a metric; `by_hand` when the user's mapping decided it.
    Metric {
        metric: MetricId,
        by_hand: bool,
    },
    /// Ignored by the user's mapping.
    Ignored,
    /// Not used, with the core's reason.
    Unmatched(String),
}

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ColumnView {
    /// 1-based, as the core's messages count columns.
    pub column: usize,
    pub header: String,
    pub status: ColumnStatus,
}

/// A successful import as the panel shows it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImportView {
    pub imported: Imported,
    /// Columns of the (first) table; empty for JSON exports.
    pub columns: Vec<ColumnView>,
    /// Every metric present in the imported runs (for JSON exports this is "what was matched").
    pub metrics: Vec<MetricId>,
}

/// A failed import: the core's message and where it points.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ImportFailure {
    pub message: String,
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl ImportFailure {
    /// "line 3, column 2" / "line 3" / "" for the badge beside the input.
    pub fn location(&self) -> String {
        match (self.line, self.column) {
            (Some(l), Some(c)) => format!("line {l}, column {c}"),
            (Some(l), None) => format!("line {l}"),
            _ => String::new(),
        }
    }
}

/// File, line and column of an import error (1-based, as an editor shows them).
pub fn error_location(e: &ImportError) -> (String, Option<usize>, Option<usize>) {
    use ImportError as E;
    match e {
        E::Empty { file } | E::UnknownFormat { file, .. } | E::NoLevels { file } => {
            (file.clone(), None, None)
        }
        E::MixedFormats { file, .. } | E::TooLarge { file, .. } => (file.clone(), None, None),
        E::RaggedRow { file, line, .. }
        | E::UnbalancedQuote { file, line }
        | E::NoLevelColumn { file, line }
        | E::NoMetricColumns { file, line, .. }
        | E::DuplicateLevel { file, line, .. }
        | E::MixedLevelKinds { file, line, .. }
        | E::MissingField { file, line, .. } => (file.clone(), Some(*line), None),
        E::NotANumber {
            file, line, column, ..
        }
        | E::OutOfRange {
            file, line, column, ..
        }
        | E::UnknownUnit {
            file, line, column, ..
        }
        | E::MissingUnit {
            file, line, column, ..
        }
        | E::InvalidJson {
            file, line, column, ..
        } => (file.clone(), Some(*line), Some(*column)),
    }
}

/// Splits one CSV line with RFC 4180 quotes (display only; the core parses the data).
fn split_csv_line(line: &str, sep: char) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            c if c == sep && !quoted => cells.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    cells.push(cur);
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// The header cells of a table input, detected like the core does (docs/compare.md "Detection"):
/// Markdown when a line starts with `|`, else TSV when the first line has a tab, else CSV; blank
/// and `#` comment lines skipped. `None` for JSON or an AIPerf CSV (its rows are metrics).
pub fn table_headers(text: &str) -> Option<Vec<String>> {
    let t = text.trim_start_matches('\u{feff}');
    let trimmed = t.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') || trimmed.is_empty() {
        return None;
    }
    let headers = if t.lines().any(|l| l.trim_start().starts_with('|')) {
        let line = t.lines().find(|l| l.trim_start().starts_with('|'))?;
        let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
        inner
            .split('|')
            .map(|c| c.trim().to_string())
            .collect::<Vec<_>>()
    } else {
        let line = t
            .lines()
            .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))?;
        let sep = if line.contains('\t') { '\t' } else { ',' };
        split_csv_line(line, sep)
    };
    if headers
        .first()
        .is_some_and(|h| h.eq_ignore_ascii_case("metric"))
    {
        return None;
    }
    Some(headers)
}

fn metrics_of(imp: &Imported) -> BTreeSet<MetricId> {
    imp.runs
        .iter()
        .flat_map(|r| r.levels.iter())
        .flat_map(|l| l.metrics.keys().copied())
        .collect()
}

// ImportError is the core's (it carries file, line, column and the fix text).
#[allow(clippy::result_large_err)]
fn import(
    files: &[SourceFile],
    mapping: &ColumnMapping,
    arm: Option<&str>,
) -> Result<Imported, ImportError> {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|f| (f.name.as_str(), f.text.as_str()))
        .collect();
    let opts = ImportOptions {
        arm: arm.map(str::to_string),
        mapping: mapping.clone(),
        level: None,
    };
    import_files(&refs, &opts)
}

/// Imports the inputs with the user's mapping and describes every column of the first table.
pub fn run_import(
    files: &[SourceFile],
    mapping: &ColumnMapping,
    arm: Option<&str>,
) -> Result<ImportView, ImportFailure> {
    let imported = import(files, mapping, arm).map_err(|e| {
        let (file, line, column) = error_location(&e);
        ImportFailure {
            message: e.to_string(),
            file,
            line,
            column,
        }
    })?;
    let present = metrics_of(&imported);
    let mut columns = Vec::new();
    if let Some(headers) = files.first().and_then(|f| table_headers(&f.text)) {
        for (i, h) in headers.iter().enumerate() {
            let column = i + 1;
            let status = if let Some(u) = imported
                .unmatched
                .iter()
                .find(|u| u.column == Some(column) || (u.column.is_none() && &u.name == h))
            {
                ColumnStatus::Unmatched(u.reason.clone())
            } else if let Some(m) = mapping.get(h.trim()) {
                match m {
                    Some(metric) => ColumnStatus::Metric {
                        metric: *metric,
                        by_hand: true,
                    },
                    None => ColumnStatus::Ignored,
                }
            } else {
                match classify_header(h) {
                    HeaderClass::Level(k) => ColumnStatus::Level(k),
                    HeaderClass::Arm => ColumnStatus::Arm,
                    HeaderClass::Excluded => ColumnStatus::Excluded,
                    HeaderClass::Metric { metric, .. } if present.contains(&metric) => {
                        ColumnStatus::Metric {
                            metric,
                            by_hand: false,
                        }
                    }
                    // The table's flavour (e.g. InferenceX) matched it differently: find the
                    // metric exactly by importing once more without this column.
                    _ => match exact_metric(files, mapping, arm, h, &present) {
                        Some(metric) => ColumnStatus::Metric {
                            metric,
                            by_hand: false,
                        },
                        None => ColumnStatus::Unmatched("not used by the importer".into()),
                    },
                }
            };
            columns.push(ColumnView {
                column,
                header: h.clone(),
                status,
            });
        }
    }
    Ok(ImportView {
        imported,
        columns,
        metrics: present.into_iter().collect(),
    })
}

/// The metric a column supplied: the one that disappears when the column is ignored.
fn exact_metric(
    files: &[SourceFile],
    mapping: &ColumnMapping,
    arm: Option<&str>,
    header: &str,
    present: &BTreeSet<MetricId>,
) -> Option<MetricId> {
    let mut m = mapping.clone();
    m.insert(header.trim().to_string(), None);
    let without = import(files, &m, arm).ok().map(|i| metrics_of(&i))?;
    let gone: Vec<MetricId> = present.difference(&without).copied().collect();
    match gone.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pasted(text: &str) -> Vec<SourceFile> {
        vec![SourceFile {
            name: "pasted".into(),
            text: text.into(),
        }]
    }

    #[test]
    fn columns_are_listed_with_their_metric_or_reason() {
        let v = run_import(
            &pasted("concurrency,output_throughput,TTFT p95 (ms),Median TTFT (ms)\n8,1000,50,40\n16,1800,70,55\n"),
            &ColumnMapping::new(),
            None,
        )
        .unwrap();
        assert_eq!(v.columns.len(), 4);
        assert_eq!(
            v.columns[0].status,
            ColumnStatus::Level(LevelKind::Concurrency)
        );
        assert_eq!(
            v.columns[1].status,
            ColumnStatus::Metric {
                metric: MetricId::OutputTokensPerS,
                by_hand: false
            }
        );
        // p95 is a statistic ServeSim does not have: unmatched with the core's reason.
        assert!(matches!(&v.columns[2].status, ColumnStatus::Unmatched(r) if !r.is_empty()));
        assert_eq!(
            v.columns[3].status,
            ColumnStatus::Metric {
                metric: MetricId::TtftMs(crate::core_api::metric::Stat::P50),
                by_hand: false
            }
        );
    }

    #[test]
    fn a_hand_mapping_matches_an_unmatched_column_and_reimports() {
        let text = "concurrency,TTFT p95 (ms)\n8,50\n16,70\n";
        assert!(run_import(&pasted(text), &ColumnMapping::new(), None).is_err());
        let mut m = ColumnMapping::new();
        m.insert(
            "TTFT p95 (ms)".into(),
            Some(MetricId::TtftMs(crate::core_api::metric::Stat::P99)),
        );
        let v = run_import(&pasted(text), &m, None).unwrap();
        assert_eq!(
            v.columns[1].status,
            ColumnStatus::Metric {
                metric: MetricId::TtftMs(crate::core_api::metric::Stat::P99),
                by_hand: true
            }
        );
        assert_eq!(
            v.imported.runs[0].levels[1].metrics
                [&MetricId::TtftMs(crate::core_api::metric::Stat::P99)],
            70.0
        );
    }

    #[test]
    fn errors_carry_the_line_and_column_of_the_bad_cell() {
        let f = run_import(
            &pasted("concurrency,output_throughput\n8,1000\n16,abc\n"),
            &ColumnMapping::new(),
            None,
        )
        .unwrap_err();
        assert_eq!((f.line, f.column), (Some(3), Some(2)));
        assert_eq!(f.location(), "line 3, column 2");
        assert!(f.message.contains("\"abc\" is not a number"));
    }

    #[test]
    fn bad_inputs_of_every_kind_are_typed_errors_with_a_location() {
        // (input, expected line, expected column)
        let cases: &[(&str, Option<usize>, Option<usize>)] = &[
            ("concurrency,output_throughput\n8,1000,5\n", Some(2), None), // ragged
            ("concurrency,TTFT p50 (parsecs)\n8,10\n", Some(1), Some(2)), // unknown unit (header)
            (
                "concurrency,output_throughput\n8,1000\n8,1100\n",
                Some(3),
                None,
            ), // duplicate
            ("concurrency,output_throughput\n8,-5\n", Some(2), Some(2)),  // negative
            ("concurrency,output_throughput\n8,0\n", Some(2), Some(2)),   // zero throughput
            ("{\"max_concurrency\": 8, \n", Some(2), Some(1)),            // truncated JSON
        ];
        for (text, line, col) in cases {
            let f = run_import(&pasted(text), &ColumnMapping::new(), None).unwrap_err();
            assert_eq!((f.line, f.column), (*line, *col), "{text}: {}", f.message);
            assert!(f.message.contains("Fix:"), "{}", f.message);
        }
        let f = run_import(&pasted("hello world"), &ColumnMapping::new(), None).unwrap_err();
        assert!(!f.message.is_empty());
    }

    #[test]
    fn headers_are_found_in_markdown_tsv_and_quoted_csv() {
        assert_eq!(
            table_headers("Results:\n\n| Conc | TTFT (ms) |\n|---|---|\n| 8 | 5 |").unwrap(),
            vec!["Conc", "TTFT (ms)"]
        );
        assert_eq!(
            table_headers("# comment\nc\tttft_ms_p50\n1\t2").unwrap(),
            vec!["c", "ttft_ms_p50"]
        );
        assert_eq!(
            table_headers("\"a, b\",c\n").unwrap(),
            vec!["a, b".to_string(), "c".to_string()]
        );
        assert_eq!(table_headers("{\"a\":1}"), None);
        assert_eq!(table_headers("Metric,avg\nx,1"), None);
    }
}
