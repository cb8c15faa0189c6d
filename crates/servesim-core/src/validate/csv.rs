//! The calibration CSV: required columns, one row as a [`CalibrationPoint`], RFC 4180 splitting,
//! combining files, and the text helpers that read the `workload` and `notes` cells.

use super::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The column names the parser needs (all in the shipped header).
pub const REQUIRED_COLUMNS: &[&str] = &[
    "source",
    "model",
    "gpu",
    "num_gpus",
    "tp",
    "dp",
    "ep",
    "weight_dtype",
    "kv_dtype",
    "workload",
    "isl",
    "osl",
    "concurrency",
    "request_rate",
    "output_tok_s",
    "ttft_p50_ms",
    "itl_mean_ms",
    "tpot_mean_ms",
    "notes",
    "num_requests",
    "max_num_seqs",
    "max_num_batched_tokens",
];

/// One measured run (one CSV row).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CalibrationPoint {
    /// 1-based line in the file.
    pub line: usize,
    pub source: String,
    pub source_ref: String,
    pub model: String,
    pub gpu: String,
    /// The `engine_version` column (e.g. `0.11.0`): selects the calibration era; empty or absent
    /// -> the newest era.
    pub engine_version: Option<String>,
    pub num_gpus: u32,
    pub tp: u32,
    pub dp: u32,
    pub ep: u32,
    pub weight_dtype: String,
    pub kv_dtype: String,
    pub workload: String,
    pub isl: Option<f64>,
    pub osl: Option<f64>,
    pub concurrency: Option<f64>,
    /// `None` for `inf` (all requests at t = 0).
    pub request_rate: Option<f64>,
    pub output_tok_s: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub itl_mean_ms: Option<f64>,
    pub tpot_mean_ms: Option<f64>,
    /// The optional `output_tok_s_per_user` column (InferenceX: 1000 / median TPOT).
    #[serde(default)]
    pub output_tok_s_per_user: Option<f64>,
    pub notes: String,
    pub num_requests: Option<f64>,
    pub max_num_seqs: Option<f64>,
    pub max_num_batched_tokens: Option<f64>,
    /// The `engine` column (e.g. `vLLM`, `vLLM (ROCm, offline LLM engine)`); empty when absent.
    #[serde(default)]
    pub engine: String,
    /// An offline `benchmark_throughput` / `LLM` engine run (no API server): the `engine` or
    /// `request_rate` cell says `offline`.
    #[serde(default)]
    pub offline: bool,
    /// Another row (its line) whose every measured figure is this row's, on a different GPU: the
    /// source published one run twice, and which GPU ran it cannot be told ([`parse_points`]).
    #[serde(default)]
    pub repeats_line: Option<usize>,
}

/// Splits CSV text into records (RFC 4180: quoted fields may hold commas, `""` and newlines),
/// each with the 1-based line it starts on. Blank lines are skipped.
pub fn split_csv(text: &str) -> Result<Vec<(usize, Vec<String>)>, ValidateError> {
    let mut out = Vec::new();
    let mut rec: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut in_quotes = false;
    let mut line = 1usize;
    let mut start_line = 1usize;
    let mut chars = text.trim_start_matches('\u{feff}').chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        if in_quotes {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => in_quotes = false,
                '\n' => {
                    line += 1;
                    field.push('\n');
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() => {
                in_quotes = true;
                any = true;
            }
            ',' => {
                rec.push(std::mem::take(&mut field));
                any = true;
            }
            '\r' => {}
            '\n' => {
                if any || !field.is_empty() {
                    rec.push(std::mem::take(&mut field));
                    out.push((start_line, std::mem::take(&mut rec)));
                }
                any = false;
                line += 1;
                start_line = line;
            }
            _ => {
                field.push(c);
                any = true;
            }
        }
    }
    if in_quotes {
        return Err(ValidateError::Csv {
            line: start_line,
            problem: "a quoted field is not closed".into(),
            fix: "close the quote (write a literal quote as \"\")".into(),
        });
    }
    if any || !field.is_empty() {
        rec.push(field);
        out.push((start_line, rec));
    }
    Ok(out)
}

pub(super) fn bad(
    line: usize,
    column: &str,
    value: &str,
    problem: &str,
    fix: &str,
) -> ValidateError {
    ValidateError::BadCell {
        line,
        column: column.into(),
        value: value.into(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

pub(super) fn opt_num(line: usize, column: &str, v: &str) -> Result<Option<f64>, ValidateError> {
    let t = v.trim();
    if t.is_empty() {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
        // A published `0.00` is a value rounded away by the source's display (gpustack prints
        // two decimals): no measurement to score, the same as an empty cell (docs/accuracy.md).
        Ok(0.0) => Ok(None),
        Ok(_) => Err(bad(
            line,
            column,
            v,
            "must be a finite number > 0",
            "leave the cell empty when not measured",
        )),
        Err(_) => Err(bad(
            line,
            column,
            v,
            "is not a number",
            "write a plain decimal number, or leave it empty",
        )),
    }
}

/// A count that the source may leave unknown (empty cell -> 0; [`waits_for`] lists such rows).
pub(super) fn count_or_unknown(line: usize, column: &str, v: &str) -> Result<u32, ValidateError> {
    if v.trim().is_empty() {
        Ok(0)
    } else {
        count_cell(line, column, v)
    }
}

pub(super) fn count_cell(line: usize, column: &str, v: &str) -> Result<u32, ValidateError> {
    match v.trim().parse::<f64>() {
        Ok(x) if x >= 1.0 && x.fract() == 0.0 && x <= u32::MAX as f64 => Ok(x as u32),
        _ => Err(bad(
            line,
            column,
            v,
            "must be a whole number >= 1",
            "write e.g. 1, 2, 8",
        )),
    }
}

/// Joins calibration CSVs with the same header into one text (the header once, then every data
/// row in order): a combined run (`servesim validate A.csv B.csv`). Line numbers in the combined
/// text continue from file to file (a row on line `l` of the second file is on line
/// `lines(first file) + l - 1`); the report prints them.
pub fn combine_csvs(texts: &[&str]) -> Result<String, ValidateError> {
    let mut out = String::new();
    let mut header: Option<&str> = None;
    for (i, t) in texts.iter().enumerate() {
        let t = t.strip_prefix('\u{feff}').unwrap_or(t);
        let (h, body) = t.split_once('\n').unwrap_or((t, ""));
        let h = h.trim_end_matches('\r');
        match header {
            None => {
                header = Some(h);
                out.push_str(h);
                out.push('\n');
            }
            Some(first) if first != h => {
                return Err(ValidateError::Csv {
                    line: 1,
                    problem: format!("file {} has a different header than the first file", i + 1),
                    fix:
                        "combine only CSVs with the header of data/calibration/measured-points.csv"
                            .into(),
                })
            }
            Some(_) => {}
        }
        out.push_str(body);
        if !body.is_empty() && !body.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// Marks rows whose measured figures (output tok/s and at least one latency, every one given
/// equal) repeat a row's on another GPU: two GPUs never produce the same run to the last digit,
/// so the source copied one run onto both (gpustack's GLM-4.5-Air A100 and H100 pages share their
/// "Other Benchmark Cases"). Both rows are marked; [`super::waits_for`] keeps them out.
fn mark_repeated_runs(points: &mut [CalibrationPoint]) {
    let key = |p: &CalibrationPoint| {
        let lat = [p.ttft_p50_ms, p.itl_mean_ms, p.tpot_mean_ms];
        match p.output_tok_s {
            Some(t) if lat.iter().any(Option::is_some) => {
                Some((t.to_bits(), lat.map(|v| v.map(f64::to_bits))))
            }
            _ => None,
        }
    };
    // Rows grouped by their figures (linear in the rows, whatever the file's size).
    let mut groups: BTreeMap<_, Vec<usize>> = BTreeMap::new();
    for (i, p) in points.iter().enumerate() {
        if let Some(k) = key(p) {
            groups.entry(k).or_default().push(i);
        }
    }
    for idx in groups.values().filter(|g| g.len() > 1) {
        for &i in idx {
            let other = idx
                .iter()
                .find(|&&j| points[j].gpu != points[i].gpu)
                .map(|&j| points[j].line);
            points[i].repeats_line = other;
        }
    }
}

/// Parses the calibration CSV.
pub fn parse_points(text: &str) -> Result<Vec<CalibrationPoint>, ValidateError> {
    let recs = split_csv(text)?;
    let Some((_, header)) = recs.first() else {
        return Err(ValidateError::NoPoints {
            filter: String::new(),
        });
    };
    let mut idx: BTreeMap<&str, usize> = BTreeMap::new();
    for c in REQUIRED_COLUMNS {
        let Some(i) = header.iter().position(|h| h.trim() == *c) else {
            return Err(ValidateError::MissingColumn {
                column: c.to_string(),
            });
        };
        idx.insert(c, i);
    }
    let source_ref = header.iter().position(|h| h.trim() == "source_ref");
    let engine_version = header.iter().position(|h| h.trim() == "engine_version");
    let engine_col = header.iter().position(|h| h.trim() == "engine");
    let per_user_col = header
        .iter()
        .position(|h| h.trim() == "output_tok_s_per_user");
    let mut out = Vec::new();
    for (line, rec) in recs.iter().skip(1) {
        let line = *line;
        if rec.len() != header.len() {
            return Err(ValidateError::Csv {
                line,
                problem: format!(
                    "the row has {} cells but the header has {}",
                    rec.len(),
                    header.len()
                ),
                fix: "quote cells that contain commas".into(),
            });
        }
        let cell = |c: &str| rec[idx[c]].as_str();
        let text = |c: &str| cell(c).trim().to_string();
        let rate = cell("request_rate").trim();
        let engine = engine_col
            .map(|i| rec[i].trim().to_string())
            .unwrap_or_default();
        let offline = rate.to_ascii_lowercase().contains("offline")
            || engine.to_ascii_lowercase().contains("offline");
        let request_rate = if rate.eq_ignore_ascii_case("inf")
            || (offline && rate.to_ascii_lowercase().starts_with("inf"))
        {
            None
        } else {
            match opt_num(line, "request_rate", rate)? {
                Some(r) => Some(r),
                None if cell("concurrency").trim().is_empty() => {
                    return Err(bad(
                        line,
                        "request_rate",
                        rate,
                        "is empty and no concurrency is given",
                        "write `inf` for a burst, a rate in req/s, or a concurrency",
                    ))
                }
                None => None,
            }
        };
        for c in ["model", "gpu", "source"] {
            if cell(c).trim().is_empty() {
                return Err(bad(line, c, "", "must not be empty", "fill it in"));
            }
        }
        out.push(CalibrationPoint {
            line,
            source: text("source"),
            source_ref: source_ref
                .map(|i| rec[i].trim().to_string())
                .unwrap_or_default(),
            model: text("model"),
            gpu: text("gpu"),
            engine_version: match engine_version.map(|i| rec[i].trim()) {
                None | Some("") => None,
                Some(v) => match version_in(v) {
                    Some(x) => Some(x),
                    // A nightly build without a version: the newest era.
                    None if v.to_ascii_lowercase().contains("nightly") => None,
                    None => {
                        let e = crate::perf::VllmVersion::parse(v)
                            .err()
                            .unwrap_or_else(|| "no version number".into());
                        return Err(bad(
                            line,
                            "engine_version",
                            v,
                            &e,
                            "write the vLLM version as MAJOR.MINOR[.PATCH], e.g. 0.15.1 (text around it is allowed), or leave the cell empty",
                        ));
                    }
                },
            },
            num_gpus: count_cell(line, "num_gpus", cell("num_gpus"))?,
            tp: count_or_unknown(line, "tp", cell("tp"))?,
            dp: count_or_unknown(line, "dp", cell("dp"))?,
            ep: count_cell(line, "ep", cell("ep"))?,
            weight_dtype: text("weight_dtype"),
            kv_dtype: text("kv_dtype"),
            workload: text("workload"),
            isl: opt_num(line, "isl", cell("isl"))?,
            osl: opt_num(line, "osl", cell("osl"))?,
            concurrency: opt_num(line, "concurrency", cell("concurrency"))?,
            request_rate,
            output_tok_s: opt_num(line, "output_tok_s", cell("output_tok_s"))?,
            ttft_p50_ms: opt_num(line, "ttft_p50_ms", cell("ttft_p50_ms"))?,
            itl_mean_ms: opt_num(line, "itl_mean_ms", cell("itl_mean_ms"))?,
            tpot_mean_ms: opt_num(line, "tpot_mean_ms", cell("tpot_mean_ms"))?,
            output_tok_s_per_user: match per_user_col {
                Some(i) => opt_num(line, "output_tok_s_per_user", &rec[i])?,
                None => None,
            },
            notes: text("notes"),
            num_requests: opt_num(line, "num_requests", cell("num_requests"))?,
            max_num_seqs: opt_num(line, "max_num_seqs", cell("max_num_seqs"))?,
            max_num_batched_tokens: opt_num(
                line,
                "max_num_batched_tokens",
                cell("max_num_batched_tokens"),
            )?,
            engine,
            offline,
            repeats_line: None,
        });
    }
    mark_repeated_runs(&mut out);
    if out.is_empty() {
        return Err(ValidateError::NoPoints {
            filter: String::new(),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Text helpers for the `workload` and `notes` cells.

/// The number right after `key` (e.g. `"max_model_len="` -> 4096).
pub(super) fn number_after(text: &str, key: &str) -> Option<f64> {
    let i = text.find(key)? + key.len();
    leading_number(&text[i..])
}

pub(super) fn leading_number(s: &str) -> Option<f64> {
    let s = s.trim_start();
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let t = s[..end].trim_end_matches('.');
    t.parse::<f64>().ok()
}

/// The number right before `key` (e.g. `"600s at constant rate"` with key `"s at constant rate"`).
pub(super) fn number_before(text: &str, key: &str) -> Option<f64> {
    let i = text.find(key)?;
    let head = &text[..i];
    let start = head
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    head[start..].parse::<f64>().ok()
}

/// ShareGPT mean lengths from the notes: "Mean lengths (...): in 219.2, out 200.8".
pub fn mean_lengths_from_notes(notes: &str) -> Option<(f64, f64)> {
    let i = notes.find("Mean lengths")?;
    let rest = &notes[i..];
    let colon = rest.find(':')?;
    let rest = &rest[colon..];
    let a = number_after(rest, "in ")?;
    let b = number_after(rest, "out ")?;
    Some((a, b))
}

/// Shared-prefix structure from the inference-perf workload text: "11 system prompts x 4 users,
/// system 100 + question 466 tok, output 247 tok" -> (groups 11, prefix 100, question 466, output 247).
pub fn shared_prefix_from_workload(w: &str) -> Option<(f64, f64, f64, f64)> {
    let groups = number_before(w, " system prompts")?;
    let j = w.find(", system ")? + ", system ".len();
    let prefix = leading_number(&w[j..])?;
    let question = number_after(w, "+ question ")?;
    let output = number_after(w, "output ")?;
    Some((groups, prefix, question, output))
}
