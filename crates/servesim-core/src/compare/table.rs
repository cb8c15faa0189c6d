//! Tables: CSV, TSV and Markdown pipe tables (auto-detected), and AIPerf's transposed CSV export.

use super::headers::{self, Flavor, HeaderClass, UnitProblem};
use super::{
    levels_equal, ImportError, ImportOptions, Imported, LevelKind, MeasuredLevel, MeasuredRun,
    SourceFormat, Unmatched,
};
use crate::metric::{MetricId, Stat};
use std::collections::BTreeMap;

/// One measured level as read from any format, before grouping into arms.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub file: String,
    pub line: usize,
    pub arm: String,
    pub level_kind: LevelKind,
    pub level: f64,
    pub metrics: BTreeMap<MetricId, f64>,
    pub excluded: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Csv,
    Tsv,
    Markdown,
}

/// (1-based line number, cells)
type Line = (usize, Vec<String>);

fn is_separator_row(cells: &[String]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|c| {
            let t = c.trim().trim_start_matches(':').trim_end_matches(':');
            !t.is_empty() && t.chars().all(|ch| ch == '-')
        })
}

fn split_csv_line(file: &str, line_no: usize, line: &str) -> Result<Vec<String>, ImportError> {
    let mut cells = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_quotes {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_quotes = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' {
            in_quotes = true;
        } else if c == ',' {
            cells.push(cur.trim().to_string());
            cur.clear();
        } else {
            cur.push(c);
        }
    }
    if in_quotes {
        return Err(ImportError::UnbalancedQuote {
            file: file.to_string(),
            line: line_no,
        });
    }
    cells.push(cur.trim().to_string());
    Ok(cells)
}

fn split_lines(file: &str, text: &str) -> Result<(Kind, Vec<Line>), ImportError> {
    let text = text.trim_start_matches('\u{feff}');
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    let any_pipe_row = text.lines().any(|l| l.trim_start().starts_with('|'));
    let kind = if any_pipe_row {
        Kind::Markdown
    } else if first.contains('\t') {
        Kind::Tsv
    } else if first.contains(',') {
        Kind::Csv
    } else {
        return Err(ImportError::UnknownFormat {
            file: file.to_string(),
            detail: "the first line is neither a pipe-table row nor comma- or tab-separated".into(),
        });
    };
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let cells = match kind {
            Kind::Markdown => {
                if !trimmed.starts_with('|') {
                    continue; // prose around the table (titles, notes)
                }
                let inner = trimmed.trim_start_matches('|');
                let inner = inner.strip_suffix('|').unwrap_or(inner);
                let cells: Vec<String> = inner.split('|').map(|c| c.trim().to_string()).collect();
                if is_separator_row(&cells) {
                    continue;
                }
                cells
            }
            Kind::Tsv => {
                if trimmed.starts_with('#') {
                    continue;
                }
                line.split('\t').map(|c| c.trim().to_string()).collect()
            }
            Kind::Csv => {
                if trimmed.starts_with('#') {
                    continue;
                }
                split_csv_line(file, line_no, line)?
            }
        };
        out.push((line_no, cells));
    }
    Ok((kind, out))
}

fn is_missing(cell: &str) -> bool {
    matches!(
        cell.trim().to_lowercase().as_str(),
        "" | "-" | "n/a" | "na" | "none" | "null"
    )
}

/// Checks a measured metric value (already in the metric's unit).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_value(
    file: &str,
    line: usize,
    column: usize,
    header: &str,
    metric: MetricId,
    value: f64,
) -> Result<(), ImportError> {
    let err = |req: &str| ImportError::OutOfRange {
        file: file.to_string(),
        line,
        column,
        header: header.to_string(),
        value,
        requirement: req.to_string(),
    };
    if !value.is_finite() {
        return Err(ImportError::NotANumber {
            file: file.to_string(),
            line,
            column,
            header: header.to_string(),
            value: format!("{value}"),
        });
    }
    if value < 0.0 {
        return Err(err("zero or more"));
    }
    if value == 0.0 && !headers::zero_allowed(metric) {
        return Err(err(
            "greater than zero (a zero latency or throughput is not a measurement)",
        ));
    }
    Ok(())
}

fn parse_number(
    file: &str,
    line: usize,
    column: usize,
    header: &str,
    cell: &str,
) -> Result<f64, ImportError> {
    let t = cell.trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(ImportError::NotANumber {
            file: file.to_string(),
            line,
            column,
            header: header.to_string(),
            value: t.to_string(),
        }),
    }
}

/// Parses a level cell ("8", "c8", "2.5").
pub(crate) fn parse_level(
    file: &str,
    line: usize,
    column: usize,
    header: &str,
    cell: &str,
    kind: LevelKind,
) -> Result<f64, ImportError> {
    let t = cell.trim();
    let t = if kind == LevelKind::Concurrency {
        t.strip_prefix(['c', 'C']).unwrap_or(t)
    } else {
        t
    };
    let v = parse_number(file, line, column, header, t)?;
    if v <= 0.0 {
        return Err(ImportError::OutOfRange {
            file: file.to_string(),
            line,
            column,
            header: header.to_string(),
            value: v,
            requirement: "greater than zero (a level is a concurrency, a rate or a burst size)"
                .into(),
        });
    }
    Ok(v)
}

enum Col {
    Level,
    Arm,
    Excluded,
    Metric(MetricId, f64),
    Skip,
}

pub(crate) fn import_table(
    file: &str,
    text: &str,
    opts: &ImportOptions,
) -> Result<(SourceFormat, Vec<Row>, Imported), ImportError> {
    let (kind, lines) = split_lines(file, text)?;
    let Some((header_line, header)) = lines.first().cloned() else {
        return Err(ImportError::Empty {
            file: file.to_string(),
        });
    };
    if header
        .first()
        .map(|h| h.eq_ignore_ascii_case("metric"))
        .unwrap_or(false)
    {
        return import_aiperf_csv(file, &lines, opts);
    }
    let flavor = headers::detect_flavor(&header);
    let mut part = Imported {
        runs: Vec::new(),
        unmatched: Vec::new(),
        notes: Vec::new(),
    };
    let mut cols: Vec<Col> = Vec::new();
    let mut level: Option<(usize, LevelKind)> = None;
    let mut seen: BTreeMap<MetricId, usize> = BTreeMap::new();
    let mut level_candidates: Vec<(usize, LevelKind)> = Vec::new();
    let mut classes = Vec::new();
    for (i, h) in header.iter().enumerate() {
        let class = match opts.mapping.get(h.trim()) {
            Some(Some(m)) => {
                // A hand mapping decides the metric; a unit in the header that does not fit the
                // chosen metric (the "s" of `output_tok_s`) is not held against it: the values
                // are then taken in the metric's own unit, and a note says so.
                let unit = headers::split_unit(h).1;
                let fits = headers::unit_scale(*m, unit.as_deref(), flavor).is_ok();
                if !fits && unit.is_some() {
                    part.notes.push(format!(
                        "column \"{}\" is mapped by hand to {}; its header's unit \"{}\" does not fit that metric, so the values are read in the metric's own unit",
                        h.trim(),
                        m.label(),
                        unit.clone().unwrap_or_default()
                    ));
                }
                HeaderClass::Metric {
                    metric: *m,
                    unit: if fits { unit } else { headers::own_unit_of(*m) },
                }
            }
            Some(None) => HeaderClass::Unmatched("ignored by the column mapping".into()),
            None => headers::classify_with_flavor(h, flavor),
        };
        if let HeaderClass::Level(k) = class {
            level_candidates.push((i, k));
        }
        classes.push(class);
    }
    // Concurrency wins over rate, rate over burst; the first column of the winning kind is used.
    for want in [
        LevelKind::Concurrency,
        LevelKind::RequestRate,
        LevelKind::Burst,
    ] {
        if level.is_none() {
            level = level_candidates.iter().copied().find(|(_, k)| *k == want);
        }
    }
    for (i, (h, class)) in header.iter().zip(classes).enumerate() {
        let column = i + 1;
        let col = match class {
            HeaderClass::Level(_) => {
                if level.map(|(c, _)| c) == Some(i) {
                    Col::Level
                } else {
                    part.unmatched.push(Unmatched {
                        name: h.clone(),
                        column: Some(column),
                        reason: format!(
                            "another level column; the level is taken from column {}",
                            level.map(|(c, _)| c + 1).unwrap_or(0)
                        ),
                    });
                    Col::Skip
                }
            }
            HeaderClass::Arm => Col::Arm,
            HeaderClass::Excluded => Col::Excluded,
            HeaderClass::Unmatched(reason) => {
                part.unmatched.push(Unmatched {
                    name: h.clone(),
                    column: Some(column),
                    reason,
                });
                Col::Skip
            }
            HeaderClass::Metric { metric, unit } => {
                if let Some(first) = seen.get(&metric) {
                    part.unmatched.push(Unmatched {
                        name: h.clone(),
                        column: Some(column),
                        reason: format!("same metric ({}) as column {first}", metric.name()),
                    });
                    Col::Skip
                } else {
                    let scale = match headers::unit_scale(metric, unit.as_deref(), flavor) {
                        Ok(s) => s,
                        Err(UnitProblem::Missing) => {
                            return Err(ImportError::MissingUnit {
                                file: file.to_string(),
                                line: header_line,
                                column,
                                header: h.clone(),
                                metric: metric.label(),
                            })
                        }
                        Err(UnitProblem::Unknown { accepted }) => {
                            return Err(ImportError::UnknownUnit {
                                file: file.to_string(),
                                line: header_line,
                                column,
                                header: h.clone(),
                                unit: unit.unwrap_or_default(),
                                metric: metric.label(),
                                accepted: accepted.to_string(),
                            })
                        }
                    };
                    seen.insert(metric, column);
                    Col::Metric(metric, scale)
                }
            }
        };
        cols.push(col);
    }
    for key in opts.mapping.keys() {
        if !header.iter().any(|h| h.trim() == key) {
            part.notes.push(format!(
                "the column mapping names \"{key}\", which is not a header of {file}"
            ));
        }
    }
    let Some((_, level_kind)) = level else {
        return Err(ImportError::NoLevelColumn {
            file: file.to_string(),
            line: header_line,
        });
    };
    if seen.is_empty() {
        return Err(ImportError::NoMetricColumns {
            file: file.to_string(),
            line: header_line,
            unmatched: part
                .unmatched
                .iter()
                .map(|u| format!("\"{}\"", u.name))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let mut rows = Vec::new();
    for (line, cells) in lines.iter().skip(1) {
        if cells.len() != header.len() {
            return Err(ImportError::RaggedRow {
                file: file.to_string(),
                line: *line,
                header_line,
                expected: header.len(),
                found: cells.len(),
            });
        }
        let mut row = Row {
            file: file.to_string(),
            line: *line,
            arm: opts.arm_name(),
            level_kind,
            level: 0.0,
            metrics: BTreeMap::new(),
            excluded: None,
        };
        for (i, (col, cell)) in cols.iter().zip(cells).enumerate() {
            let column = i + 1;
            match col {
                Col::Level => {
                    row.level = parse_level(file, *line, column, &header[i], cell, level_kind)?;
                }
                Col::Arm => {
                    if !cell.trim().is_empty() {
                        row.arm = cell.trim().to_string();
                    }
                }
                Col::Excluded => {
                    let t = cell.trim();
                    row.excluded = match t.to_lowercase().as_str() {
                        "" | "no" | "false" | "0" | "n" => None,
                        "yes" | "true" | "1" | "x" | "y" => {
                            Some("marked excluded in the input".to_string())
                        }
                        _ => Some(t.to_string()),
                    };
                }
                Col::Metric(m, scale) => {
                    if is_missing(cell) {
                        continue;
                    }
                    let v = parse_number(file, *line, column, &header[i], cell)? * scale;
                    check_value(file, *line, column, &header[i], *m, v)?;
                    row.metrics.insert(*m, v);
                }
                Col::Skip => {}
            }
        }
        rows.push(row);
    }
    let format = match (flavor, kind) {
        (Flavor::InferenceXAgg | Flavor::InferenceXSummary, _) => SourceFormat::InferenceXTable,
        (_, Kind::Csv) => SourceFormat::Csv,
        (_, Kind::Tsv) => SourceFormat::Tsv,
        (_, Kind::Markdown) => SourceFormat::Markdown,
    };
    Ok((format, rows, part))
}

/// AIPerf `profile_export_aiperf.csv`: sections headed "Metric,avg,min,max,p1,...,std" and
/// "Metric,Value", then optionally a GPU telemetry section headed "Endpoint,GPU_Index,...".
/// The export does not record the concurrency, so the level comes from [`ImportOptions::level`].
fn import_aiperf_csv(
    file: &str,
    lines: &[Line],
    opts: &ImportOptions,
) -> Result<(SourceFormat, Vec<Row>, Imported), ImportError> {
    let mut part = Imported {
        runs: Vec::new(),
        unmatched: Vec::new(),
        notes: Vec::new(),
    };
    let Some((kind, level)) = opts.level else {
        return Err(ImportError::MissingField {
            file: file.to_string(),
            line: lines.first().map(|l| l.0).unwrap_or(1),
            what: "the AIPerf CSV export does not record the concurrency or request rate of the run".into(),
            fix: "enter the level of this run, or import profile_export_aiperf.json, which records input_config.loadgen.concurrency".into(),
        });
    };
    let mut row = Row {
        file: file.to_string(),
        line: lines.first().map(|l| l.0).unwrap_or(1),
        arm: opts.arm_name(),
        level_kind: kind,
        level,
        metrics: BTreeMap::new(),
        excluded: None,
    };
    let mut section: Option<(usize, Vec<String>)> = None;
    for (line, cells) in lines {
        let first = cells.first().map(|c| c.trim()).unwrap_or("");
        if first.eq_ignore_ascii_case("metric") {
            section = Some((*line, cells.iter().map(|c| c.to_lowercase()).collect()));
            continue;
        }
        if first.eq_ignore_ascii_case("endpoint") {
            part.unmatched.push(Unmatched {
                name: "GPU telemetry section".into(),
                column: None,
                reason: "GPU telemetry is not scored".into(),
            });
            section = None;
            continue;
        }
        let Some((header_line, cols)) = &section else {
            continue;
        };
        if cells.len() != cols.len() {
            return Err(ImportError::RaggedRow {
                file: file.to_string(),
                line: *line,
                header_line: *header_line,
                expected: cols.len(),
                found: cells.len(),
            });
        }
        let (name, unit) = headers::split_unit(first);
        let tag = name.replace(' ', "_");
        for (i, col) in cols.iter().enumerate().skip(1) {
            let stat = match col.as_str() {
                "avg" | "value" => Stat::Mean,
                "p50" => Stat::P50,
                "p90" => Stat::P90,
                "p99" => Stat::P99,
                _ => continue,
            };
            let metric = match super::json::aiperf_metric(&tag, stat) {
                Ok(m) => m,
                Err(reason) => {
                    if stat == Stat::Mean {
                        part.unmatched.push(Unmatched {
                            name: cells[0].clone(),
                            column: None,
                            reason,
                        });
                    }
                    continue;
                }
            };
            let cell = &cells[i];
            if is_missing(cell) {
                continue;
            }
            let scale =
                headers::unit_scale(metric, unit.as_deref(), Flavor::Generic).map_err(|_| {
                    ImportError::UnknownUnit {
                        file: file.to_string(),
                        line: *line,
                        column: 1,
                        header: cells[0].clone(),
                        unit: unit.clone().unwrap_or_default(),
                        metric: metric.label(),
                        accepted: "the units AIPerf writes (ms, sec, tokens/sec, requests/sec)"
                            .into(),
                    }
                })?;
            let v = parse_number(file, *line, i + 1, &cells[0], cell)? * scale;
            check_value(file, *line, i + 1, &cells[0], metric, v)?;
            row.metrics.insert(metric, v);
        }
    }
    if row.metrics.is_empty() {
        return Err(ImportError::NoMetricColumns {
            file: file.to_string(),
            line: row.line,
            unmatched: part
                .unmatched
                .iter()
                .map(|u| format!("\"{}\"", u.name))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok((SourceFormat::AiperfCsv, vec![row], part))
}

/// Groups rows into arms (in order of first appearance), rejects duplicate levels and mixed level
/// kinds, sorts levels ascending.
pub(crate) fn rows_to_runs(
    rows: Vec<Row>,
    format: SourceFormat,
) -> Result<Vec<MeasuredRun>, ImportError> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for r in rows {
        if !groups.contains_key(&r.arm) {
            order.push(r.arm.clone());
        }
        groups.entry(r.arm.clone()).or_default().push(r);
    }
    let mut runs = Vec::new();
    for arm in order {
        let rows = groups.remove(&arm).unwrap_or_default();
        let kind = rows[0].level_kind;
        let mut kept: Vec<(usize, Row)> = Vec::with_capacity(rows.len());
        for (i, r) in rows.into_iter().enumerate() {
            if r.level_kind != kind {
                return Err(ImportError::MixedLevelKinds {
                    file: r.file.clone(),
                    line: r.line,
                    arm: arm.clone(),
                    first: kind.name().into(),
                    second: r.level_kind.name().into(),
                });
            }
            kept.push((i, r));
        }
        // Duplicates after a stable sort by level (equal levels end up adjacent, in input
        // order): O(n log n) instead of comparing every row with every kept one. The reported
        // pair is the one whose second row comes first in the input, as a scan in order finds.
        kept.sort_by(|a, b| a.1.level.total_cmp(&b.1.level));
        if let Some(w) = kept
            .windows(2)
            .filter(|w| levels_equal(w[0].1.level, w[1].1.level))
            .min_by_key(|w| w[1].0)
        {
            let (prev, r) = (&w[0].1, &w[1].1);
            return Err(ImportError::DuplicateLevel {
                file: r.file.clone(),
                line: r.line,
                first_file: prev.file.clone(),
                first_line: prev.line,
                arm: arm.clone(),
                level: r.level,
            });
        }
        let kept: Vec<Row> = kept.into_iter().map(|(_, r)| r).collect();
        runs.push(MeasuredRun {
            arm,
            level_kind: kind,
            levels: kept
                .into_iter()
                .map(|r| MeasuredLevel {
                    level: r.level,
                    metrics: r.metrics,
                    excluded: r.excluded,
                })
                .collect(),
            kv_cache_tokens_logged: None,
            source_format: format,
        });
    }
    Ok(runs)
}
