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

mod rows;

pub use rows::{resolve_model, version_in, waits_for, ResolvedModel, MODEL_FILE_ALIASES};

use crate::metric::{MetricId, Stat};
use crate::metrics::LevelResult;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
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

fn bad(line: usize, column: &str, value: &str, problem: &str, fix: &str) -> ValidateError {
    ValidateError::BadCell {
        line,
        column: column.into(),
        value: value.into(),
        problem: problem.into(),
        fix: fix.into(),
    }
}

fn opt_num(line: usize, column: &str, v: &str) -> Result<Option<f64>, ValidateError> {
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
fn count_or_unknown(line: usize, column: &str, v: &str) -> Result<u32, ValidateError> {
    if v.trim().is_empty() {
        Ok(0)
    } else {
        count_cell(line, column, v)
    }
}

fn count_cell(line: usize, column: &str, v: &str) -> Result<u32, ValidateError> {
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
        });
    }
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
fn number_after(text: &str, key: &str) -> Option<f64> {
    let i = text.find(key)? + key.len();
    leading_number(&text[i..])
}

fn leading_number(s: &str) -> Option<f64> {
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
fn number_before(text: &str, key: &str) -> Option<f64> {
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

// ---------------------------------------------------------------------------------------------
// Row -> scenario.

/// Model ids in the CSV that are not catalog ids, mapped to the catalog config they use
/// (same architecture and config.json; the CSV names a later checkpoint revision).
pub const MODEL_ALIASES: &[(&str, &str)] = &[
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-ai/DeepSeek-R1"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "Qwen/Qwen3-235B-A22B"),
];

/// GPU names in the CSV that are not catalog ids or aliases, mapped to the catalog GPU
/// (the same part: SXM form factor, 80 GB HBM).
pub const GPU_ALIASES: &[(&str, &str)] = &[
    ("H100-SXM-80GB", "H100-SXM"),
    ("A100-SXM-80GB", "A100-80GB"),
    ("H200-SXM-141GB", "H200"),
    // gpustack's quantisation pages do not state the form factor; the SXM part is assumed.
    ("H100-80GB", "H100-SXM"),
];

/// The catalog GPU name of a CSV GPU name.
pub fn catalog_gpu(name: &str) -> &str {
    // "A100-SXM-80GB (form factor not stated)": the part before the parenthetical.
    let name = name.split(" (").next().unwrap_or(name).trim();
    GPU_ALIASES
        .iter()
        .find(|(a, _)| a.eq_ignore_ascii_case(name))
        .map(|(_, b)| *b)
        .unwrap_or(name)
}

/// Coefficient of variation (std / mean) assumed for ShareGPT input and output lengths.
/// ASSUMPTION (docs/accuracy.md): lognormal with std = mean; the CSV gives only the means.
pub const SHAREGPT_CV: f64 = 1.0;
/// vLLM `benchmarks/datasets.py` `is_valid_sequence` defaults for ShareGPT: prompts and outputs
/// of at least 4 tokens, prompts of at most 1024 tokens, prompt + output at most 2048.
pub const SHAREGPT_MIN_LEN: f64 = 4.0;
pub const SHAREGPT_MAX_PROMPT: f64 = 1024.0;
pub const SHAREGPT_MAX_OUTPUT: f64 = 1024.0;
/// Simulated length of an open-loop (constant-rate) point, seconds, and its warm-up.
/// The measured stages ran 600-1200 s; metrics at a constant rate below saturation reach steady
/// state within seconds, so a shorter simulated window changes the estimate by sampling noise only.
pub const OPEN_LOOP_DURATION_S: f64 = 120.0;
pub const OPEN_LOOP_WARMUP_S: f64 = 20.0;
/// Workload seed used for every point.
pub const SEED: u64 = 42;

/// How the measured inter-token figure is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Family {
    /// Output tokens per second.
    Throughput,
    /// ITL mean, or TPOT mean (like with like).
    InterToken,
    /// TTFT p50.
    Ttft,
}

impl Family {
    pub const ALL: [Family; 3] = [Family::Throughput, Family::InterToken, Family::Ttft];
    pub fn name(self) -> &'static str {
        match self {
            Family::Throughput => "output tok/s",
            Family::InterToken => "ITL/TPOT mean",
            Family::Ttft => "TTFT p50",
        }
    }
    /// The accuracy target on the median absolute error, percent.
    pub fn target_pct(self) -> f64 {
        match self {
            Family::Throughput | Family::InterToken => 15.0,
            Family::Ttft => 25.0,
        }
    }
}

/// A row turned into something the simulator runs: the scenario JSON (`crate::scenario` schema)
/// plus what the comparison needs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointSetup {
    pub line: usize,
    /// Catalog model id used.
    pub model_id: String,
    /// Scenario JSON (without `efficiencies`).
    pub scenario: Value,
    /// One-line description of the simulated workload.
    pub workload_summary: String,
    /// Comparisons to make: (family, our metric, measured value, exclusion reason).
    pub targets: Vec<(Family, MetricId, f64, Option<String>)>,
    /// Notes on the mapping shown with the point.
    pub notes: Vec<String>,
}

fn weight_precision(p: &CalibrationPoint) -> Result<&'static str, ValidateError> {
    let w = p.weight_dtype.to_ascii_lowercase();
    let first = w.split_whitespace().next().unwrap_or("");
    // Native checkpoints (fp16/bf16 Llama/Qwen, block-FP8 DeepSeek, MXFP4 gpt-oss) run as stored.
    if w.contains("native") || matches!(first, "fp16" | "bf16" | "float16" | "bfloat16") {
        return Ok("checkpoint");
    }
    match first {
        "fp8" => Ok("fp8"),
        "fp4" | "nvfp4" | "mxfp4" => Ok("fp4"),
        _ => Err(bad(
            p.line,
            "weight_dtype",
            &p.weight_dtype,
            "unknown weight dtype",
            "start the cell with fp16, bf16, fp8 or fp4 (add `native` for the checkpoint's own format)",
        )),
    }
}

fn kv_dtype(p: &CalibrationPoint) -> Result<String, ValidateError> {
    let k = p.kv_dtype.to_ascii_lowercase();
    let first = k
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    match first {
        "auto" | "bfloat16" | "bf16" | "fp8" | "fp8_e4m3" | "fp8_e5m2" | "fp8_ds_mla" => {
            Ok(first.to_string())
        }
        "fp16" | "float16" => Ok("auto".into()),
        _ => Err(bad(
            p.line,
            "kv_dtype",
            &p.kv_dtype,
            "unknown KV cache dtype",
            "start the cell with auto, bfloat16 or fp8",
        )),
    }
}

fn lengths_constant(v: f64) -> Value {
    json!({"type": "constant", "tokens": libm::round(v)})
}

fn lengths_sharegpt(mean: f64, max: f64) -> Value {
    json!({
        "type": "lognormal",
        "mean": mean,
        "std": mean * SHAREGPT_CV,
        "min": SHAREGPT_MIN_LEN,
        "max": max,
    })
}

/// Maps one row to a scenario (rules in docs/accuracy.md, never tuned per point).
pub fn setup_for(p: &CalibrationPoint) -> Result<PointSetup, ValidateError> {
    let mut notes = Vec::new();
    let (model_id, precision) = match MODEL_ALIASES.iter().find(|(a, _)| *a == p.model) {
        Some((_, b)) => {
            notes.push(format!("model {} uses the {} config", p.model, b));
            (b.to_string(), weight_precision(p)?)
        }
        None => match resolve_model(p) {
            Ok(r) => {
                notes.extend(r.notes);
                (r.catalog_id, r.precision)
            }
            Err(e) => {
                return Err(bad(
                    p.line,
                    "model",
                    &p.model,
                    &e,
                    "use a model with a shipped config, or add its config.json",
                ))
            }
        },
    };
    let mut engine = serde_json::Map::new();
    if let Some(v) = p.max_num_seqs {
        engine.insert("max_num_seqs".into(), json!(v as i64));
    }
    if let Some(v) = p.max_num_batched_tokens {
        engine.insert("max_num_batched_tokens".into(), json!(v as i64));
    }
    if let Some(v) = number_after(&p.notes, "max_model_len=") {
        engine.insert("max_model_len".into(), json!(v as i64));
    }
    let is_inference_sim = p.source.starts_with("inference-sim");
    let (arrival, sweep, summary_arrival, input, output, shared) = if let Some(rate) =
        p.request_rate.filter(|_| p.concurrency.is_none())
    {
        if shared_prefix_from_workload(&p.workload).is_none() {
            // Open loop without shared prefixes: Poisson (the workload says so) or constant
            // arrivals of `num_requests` requests; the measured run lasts n / rate.
            let n = p.num_requests.ok_or_else(|| {
                bad(
                    p.line,
                    "num_requests",
                    "",
                    "an open-loop row needs the number of requests",
                    "fill in num_requests",
                )
            })?;
            let (input, output) = lengths_of(p, n, &mut notes)?;
            let poisson = p.workload.to_ascii_lowercase().contains("poisson");
            let kind = if poisson { "poisson" } else { "constant" };
            let dur = n / rate;
            notes.push(format!(
                "{kind} arrivals at {rate} req/s for {n} requests: simulated {dur:.1} s, no warm-up (the benchmark counts every request)"
            ));
            (
                json!({"type": kind, "rate": rate}),
                json!({"request_rates": [rate], "duration_s": dur, "warmup_s": 0.0}),
                format!("{kind} {rate} req/s, {n} requests"),
                input,
                output,
                None,
            )
        } else {
            // Open loop at a constant rate.
            let (groups, prefix, question, out) =
            shared_prefix_from_workload(&p.workload).ok_or_else(|| {
                bad(
                    p.line,
                    "workload",
                    &p.workload,
                    "an open-loop row needs the shared-prefix text `G system prompts x U users, system S + question Q tok, output O tok`",
                    "describe the prompt structure in that form",
                )
            })?;
            let dur = number_before(&p.notes, "s at constant rate");
            notes.push(format!(
            "constant {rate} req/s, simulated {OPEN_LOOP_DURATION_S} s (warm-up {OPEN_LOOP_WARMUP_S} s){}",
            dur.map(|d| format!("; measured stage {d} s")).unwrap_or_default()
        ));
            (
                json!({"type": "constant", "rate": rate}),
                json!({"request_rates": [rate], "duration_s": OPEN_LOOP_DURATION_S, "warmup_s": OPEN_LOOP_WARMUP_S}),
                format!("constant {rate} req/s"),
                lengths_constant(question),
                lengths_constant(out),
                Some((groups, prefix)),
            )
        }
    } else {
        let n = p.num_requests.ok_or_else(|| {
            bad(
                p.line,
                "num_requests",
                "",
                "a burst or fixed-concurrency row needs the number of requests",
                "fill in num_requests",
            )
        })?;
        let (input, output) = lengths_of(p, n, &mut notes)?;
        match p.concurrency {
            Some(c) => (
                json!({"type": "closed_loop", "concurrency": c}),
                json!({"concurrency": [c], "num_requests": n}),
                format!("closed loop c={c}, {n} requests"),
                input,
                output,
                None,
            ),
            None => (
                json!({"type": "burst", "count": n}),
                json!({"concurrency": [n], "num_requests": n}),
                format!("burst of {n} at t=0"),
                input,
                output,
                None,
            ),
        }
    };
    let mut requests = json!({"type": "synthetic", "input": input, "output": output});
    if let Some((g, t)) = shared {
        requests["shared_prefix"] = json!({"groups": g, "tokens": t});
    }
    let workload = json!({"arrival": arrival, "requests": requests, "seed": SEED});
    // Endpoint kind, as the source states it: the workload names the chat endpoint
    // (`vllm bench serve --backend openai-chat`); otherwise completions (inference-perf
    // "streaming completions API", vllm bench serve's default backend).
    let endpoint = if p.workload.to_ascii_lowercase().contains("chat endpoint") {
        "chat"
    } else {
        "completions"
    };
    if p.offline {
        notes.push("offline run (no API server): simulated behind the completions endpoint, whose per-request latency is small against these runs".into());
    } else {
        notes.push(format!("API endpoint: {endpoint}"));
    }
    let mut scenario = json!({
        "version": 1,
        "model": {"catalog": model_id},
        "gpu": {"catalog": catalog_gpu(&p.gpu)},
        "tp": p.tp,
        "dp": p.dp,
        "ep": p.ep,
        "num_gpus": p.num_gpus,
        "weight_precision": precision,
        "kv_cache_dtype": kv_dtype(p)?,
        "engine": Value::Object(engine),
        "workload": workload,
        "sweep": sweep,
        "endpoint": endpoint,
    });
    if let Some(v) = &p.engine_version {
        scenario["vllm_version"] = json!(v);
        notes.push(format!("vLLM {v}: calibration era {}", point_era(p).key()));
    }
    if let Some(note) = started_kv_floor(&mut scenario) {
        notes.push(note);
    }

    // What to compare, and the per-source caveats.
    let mut targets = Vec::new();
    if let Some(m) = p.output_tok_s {
        let mut excl = None;
        if is_inference_sim {
            let retok = number_after(&p.notes, "output_len(re-tokenized text) mean=");
            if let (Some(r), Some(osl)) = (retok, p.osl) {
                if r < 0.95 * osl {
                    excl = Some(format!(
                        "output tok/s counts re-tokenized text: mean {r} of {osl} generated tokens (source caveat)"
                    ));
                }
            }
        }
        targets.push((Family::Throughput, MetricId::OutputTokensPerS, m, excl));
    }
    if is_inference_sim {
        // The column is (e2e_mean - ttft_mean) / (osl - 1): a per-request TPOT, not a pooled ITL.
        if let Some(m) = p.itl_mean_ms {
            targets.push((Family::InterToken, MetricId::TpotMsMean, m, None));
            notes.push(
                "measured itl_mean_ms is derived as (e2e_mean - ttft_mean)/(osl - 1): compared with our TPOT mean".into(),
            );
        }
    } else if let Some(m) = p.itl_mean_ms {
        targets.push((Family::InterToken, MetricId::ItlMs(Stat::Mean), m, None));
    } else if let Some(m) = p.tpot_mean_ms {
        targets.push((Family::InterToken, MetricId::TpotMsMean, m, None));
    }
    if let Some(m) = p.ttft_p50_ms {
        targets.push((Family::Ttft, MetricId::TtftMs(Stat::P50), m, None));
    }
    let _ = &summary_arrival;
    Ok(PointSetup {
        line: p.line,
        model_id,
        scenario,
        workload_summary: summary_arrival,
        targets,
        notes,
    })
}

/// Input/output lengths of a burst, closed-loop or Poisson row: fixed `isl`/`osl`, else ShareGPT
/// (lognormal) with the means the notes give (`Mean lengths ...: in X, out Y`, or
/// `total in/out A/B` over `n` requests).
fn lengths_of(
    p: &CalibrationPoint,
    n: f64,
    notes: &mut Vec<String>,
) -> Result<(Value, Value), ValidateError> {
    if let (Some(i), Some(o)) = (p.isl, p.osl) {
        return Ok((lengths_constant(i), lengths_constant(o)));
    }
    let (i, o) = mean_lengths_from_notes(&p.notes)
        .or_else(|| totals_from_notes(&p.notes).map(|(a, b)| (a / n, b / n)))
        .ok_or_else(|| {
            bad(
                p.line,
                "notes",
                &p.notes,
                "without isl/osl the notes must give `Mean lengths ...: in X, out Y` or `total in/out A/B`",
                "fill in isl/osl or the mean lengths",
            )
        })?;
    notes.push(format!(
        "ShareGPT lengths: lognormal, means in {i:.1} / out {o:.1} (from the notes), std = {SHAREGPT_CV} x mean, clamped to [{SHAREGPT_MIN_LEN}, {SHAREGPT_MAX_PROMPT}] / [{SHAREGPT_MIN_LEN}, {SHAREGPT_MAX_OUTPUT}]"
    ));
    Ok((
        lengths_sharegpt(i, SHAREGPT_MAX_PROMPT),
        lengths_sharegpt(o, SHAREGPT_MAX_OUTPUT),
    ))
}

/// Total input / output tokens from the notes: "total in/out 215196/117108" or
/// "total in/out tok 1600000/400000".
pub fn totals_from_notes(notes: &str) -> Option<(f64, f64)> {
    let i = notes.find("total in/out")? + "total in/out".len();
    let rest = notes[i..].trim_start();
    let rest = rest.strip_prefix("tok").unwrap_or(rest).trim_start();
    let a = leading_number(rest)?;
    let slash = rest.find('/')?;
    let b = leading_number(&rest[slash + 1..])?;
    Some((a, b))
}

/// A measured run that started although our capacity model says vLLM would refuse the recorded
/// settings because one request of `max_model_len` tokens does not fit in the KV pool. vLLM
/// (0.10-0.11, `_check_enough_kv_cache_memory`) refuses to start in that case and does not reduce
/// `max_model_len` on its own, so the real run had at least that much KV memory per GPU. The row
/// is then simulated with exactly that minimum (`engine.kv_cache_memory_bytes` = the bytes of one
/// max-length request): the smallest KV pool consistent with the run having started, an
/// assumption that makes such rows KV-pessimistic. Other refusals are left as they are.
fn started_kv_floor(scenario: &mut Value) -> Option<String> {
    let sc = crate::scenario::Scenario::from_json(&scenario.to_string()).ok()?;
    let cap = sc.resolve().ok()?.capacity;
    if cap.fits || cap.bytes_per_max_len_request == 0 {
        return None;
    }
    let needs_one_request = cap
        .vllm_error
        .as_deref()
        .is_some_and(|e| e.contains("max seq len") || e.contains("max_model_len"));
    if !needs_one_request {
        return None;
    }
    let bytes = cap.bytes_per_max_len_request;
    scenario["engine"]["kv_cache_memory_bytes"] = json!(bytes);
    Some(format!(
        "the run started at max_model_len {}, which vLLM only does with >= {:.2} GiB of KV per GPU; our capacity model estimates less ({}); simulated with that minimum (kv_cache_memory_bytes = {bytes}, an assumption: a lower bound on the real pool)",
        cap.max_model_len,
        bytes as f64 / (1u64 << 30) as f64,
        cap.reason
    ))
}

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
    pub workload: String,
    pub comparisons: Vec<MetricComparison>,
    pub notes: Vec<String>,
    /// Set when the point could not be simulated (it is then missing from every aggregate).
    pub error: Option<String>,
    /// Set when the row needs a capability ServeSim does not have yet ([`waits_for`]); the row is
    /// not simulated and is missing from every aggregate.
    #[serde(default)]
    pub waits_for: Option<String>,
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
            Some(Aggregate {
                family: *f,
                scope: scope.to_string(),
                n,
                median_abs_pct: med,
                mean_abs_pct: abs.iter().sum::<f64>() / n as f64,
                mean_signed_pct: errs.iter().sum::<f64>() / n as f64,
                target_pct: f.target_pct(),
                met: med <= f.target_pct(),
            })
        })
        .collect()
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

fn short_model(m: &str) -> &str {
    m.rsplit('/').next().unwrap_or(m)
}

fn fmt_pct(v: Option<f64>) -> String {
    match v {
        Some(e) => format!("{e:+.1}%"),
        None => "-".into(),
    }
}

fn fmt_val(v: f64) -> String {
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
                        let tag = if c.metric == "tpot_ms_mean" && f == Family::InterToken {
                            " (TPOT)"
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

/// The serde name of a catalog GPU's generation (`hopper`, `ampere`, ...).
pub fn generation_key(gpu: &str) -> Option<String> {
    let g = crate::gpu::find_gpu(catalog_gpu(gpu)).ok()?;
    match serde_json::to_value(g.generation).ok()? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// The calibration era of a row (`engine_version`; the newest era when empty).
pub fn point_era(p: &CalibrationPoint) -> crate::perf::EngineEra {
    p.engine_version
        .as_deref()
        .and_then(|v| crate::perf::VllmVersion::parse(v).ok())
        .map(crate::perf::EngineEra::of_version)
        .unwrap_or_default()
}

/// The fitted-table key a row is fitted under: `<generation>@<era>` (e.g. `hopper@vllm-0.11`).
pub fn point_key(p: &CalibrationPoint) -> Option<String> {
    let g = crate::gpu::find_gpu(catalog_gpu(&p.gpu)).ok()?;
    Some(crate::perf::calibration_key(g.generation, point_era(p)))
}

/// Simulates one point: gets the setup and the efficiency overrides of its GPU generation
/// (a JSON object, possibly empty) and returns the simulated level.
pub type Simulator<'a> = dyn FnMut(&PointSetup, &Value) -> Result<LevelResult, String> + 'a;

/// The rows `opts` selects.
pub fn select_points(
    points: Vec<CalibrationPoint>,
    opts: &ValidateOptions,
) -> Result<Vec<CalibrationPoint>, ValidateError> {
    let sel: Vec<CalibrationPoint> = points
        .into_iter()
        .filter(|p| {
            opts.only_source
                .as_ref()
                .is_none_or(|s| p.source.starts_with(s.as_str()))
        })
        .filter(|p| opts.only_lines.as_ref().is_none_or(|l| l.contains(&p.line)))
        .collect();
    if sel.is_empty() {
        return Err(ValidateError::NoPoints {
            filter: match &opts.only_source {
                Some(s) => format!(" with source `{s}`"),
                None => " selected".into(),
            },
        });
    }
    Ok(sel)
}

/// [`run`] with a caller-supplied simulator (tests, the fit).
pub fn run_with(
    points_csv: &str,
    opts: &ValidateOptions,
    sim: &mut Simulator,
) -> Result<ValidationReport, ValidateError> {
    let points = select_points(parse_points(points_csv)?, opts)?;
    let fitted = match &opts.efficiencies {
        Some(f) => f.clone(),
        None => fitted_efficiencies()?,
    };
    let mut results = Vec::new();
    for p in &points {
        let mut r = PointResult {
            line: p.line,
            source: p.source.clone(),
            model: p.model.clone(),
            gpu: p.gpu.clone(),
            tp: p.tp,
            workload: p.workload.chars().take(60).collect(),
            comparisons: Vec::new(),
            notes: Vec::new(),
            error: None,
            waits_for: waits_for(p),
        };
        if r.waits_for.is_some() {
            results.push(r);
            continue;
        }
        let setup = match setup_for(p) {
            Ok(s) => s,
            Err(e) => {
                r.error = Some(e.to_string());
                results.push(r);
                continue;
            }
        };
        let eff = fitted.full_table_for(&p.gpu, point_era(p));
        r.workload = workload_label(p, &setup);
        r.notes = setup.notes.clone();
        match sim(&setup, &eff) {
            Ok(level) => r.comparisons = compare_point(&setup, &level),
            Err(e) => r.error = Some(e),
        }
        results.push(r);
    }
    Ok(build_report(results, fitted.description.clone()))
}

/// Simulates one point through [`crate::scenario::Scenario`]: the setup's scenario JSON with
/// `efficiencies` set to the overrides (when non-empty), resolved and run at its one level.
pub fn simulate(setup: &PointSetup, efficiencies: &Value) -> Result<LevelResult, String> {
    let mut sc = setup.scenario.clone();
    if efficiencies.as_object().is_some_and(|o| !o.is_empty()) {
        sc["efficiencies"] = efficiencies.clone();
    }
    let scenario =
        crate::scenario::Scenario::from_json(&sc.to_string()).map_err(|e| e.to_string())?;
    let resolved = scenario.resolve().map_err(|e| e.to_string())?;
    let result = resolved.run().map_err(|e| e.to_string())?;
    result
        .levels
        .into_iter()
        .next()
        .ok_or_else(|| "the sweep produced no level".to_string())
}

/// The scenario JSON (the `crate::scenario` schema, runnable with `servesim sweep --scenario`) of
/// the row on CSV line `line`, with the efficiency table `fitted` gives its GPU generation.
pub fn scenario_of_line(
    points_csv: &str,
    line: usize,
    fitted: &FittedEfficiencies,
) -> Result<Value, ValidateError> {
    let points = parse_points(points_csv)?;
    let p = points
        .iter()
        .find(|p| p.line == line)
        .ok_or_else(|| ValidateError::NoSuchLine {
            line,
            first: points.first().map_or(0, |p| p.line),
            last: points.last().map_or(0, |p| p.line),
        })?;
    let setup = setup_for(p)?;
    let mut sc = setup.scenario.clone();
    let eff = fitted.full_table_for(&p.gpu, point_era(p));
    if eff.as_object().is_some_and(|o| !o.is_empty()) {
        sc["efficiencies"] = eff;
    }
    Ok(sc)
}

/// Runs the validation: every selected row simulated through its scenario with the fitted
/// efficiencies of its GPU generation (`opts.efficiencies`, default the shipped fit).
pub fn run(points_csv: &str, opts: &ValidateOptions) -> Result<ValidationReport, ValidateError> {
    run_with(points_csv, opts, &mut |s, e| simulate(s, e))
}

/// A short label: "ShareGPT burst 1000", "random 2000/100 burst 500", "codegen 5 req/s", ...
fn workload_label(p: &CalibrationPoint, setup: &PointSetup) -> String {
    let w = p.workload.to_ascii_lowercase();
    let kind = if w.contains("sharegpt") {
        "ShareGPT".to_string()
    } else if w.contains("random") {
        match (p.isl, p.osl) {
            (Some(i), Some(o)) => format!("random {i}/{o}"),
            _ => "random".into(),
        }
    } else if let Some(i) = w.find('\'') {
        let rest = &p.workload[i + 1..];
        rest.split('\'').next().unwrap_or("").to_string()
    } else {
        String::new()
    };
    format!("{kind}, {}", setup.workload_summary)
}

// ---------------------------------------------------------------------------------------------
// Fitted efficiencies.

/// The shipped fit (`data/calibration/efficiencies.json`), written by `servesim validate --fit`.
pub const FITTED_EFFICIENCIES_JSON: &str = include_str!("../../data/calibration/efficiencies.json");

/// A fitted efficiency table: per GPU generation (serde name, e.g. `hopper`), the overridden
/// fields of the step-time model's efficiency table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FittedEfficiencies {
    /// How the values were obtained.
    pub description: String,
    /// generation -> field -> value.
    pub generations: BTreeMap<String, BTreeMap<String, f64>>,
}

impl FittedEfficiencies {
    /// Parses and checks a table: every field must be a field of the efficiency table with a
    /// valid value (an error names the generation and field).
    pub fn from_json(s: &str) -> Result<FittedEfficiencies, ValidateError> {
        let t: FittedEfficiencies =
            serde_json::from_str(s).map_err(|e| ValidateError::Fitted(e.to_string()))?;
        let base = crate::perf::Efficiencies::default_for(crate::gpu::Generation::Hopper);
        for (g, m) in &t.generations {
            base.with_fitted(m)
                .map_err(|e| ValidateError::Fitted(format!("generation `{g}`: {e}")))?;
        }
        Ok(t)
    }
    /// The complete efficiency table for a (CSV) GPU name as scenario overrides: the literature
    /// defaults of its generation ([`crate::perf::Efficiencies::default_for`]) with this fit's
    /// fields of that generation replaced. Complete, so a validation run does not depend on the
    /// calibration the scenario would otherwise use (`--defaults` really is the literature table).
    /// `{}` for an unknown GPU (the scenario then reports it).
    pub fn full_table_for(&self, gpu: &str, era: crate::perf::EngineEra) -> Value {
        let Ok(g) = crate::gpu::find_gpu(catalog_gpu(gpu)) else {
            return json!({});
        };
        let base = crate::perf::Efficiencies::default_for(g.generation);
        let eff = match crate::perf::lookup_calibration(&self.generations, g.generation, era) {
            Some((_, m)) => base.with_fitted(m).unwrap_or(base),
            None => base,
        };
        serde_json::to_value(eff).unwrap_or_else(|_| json!({}))
    }

    /// The overrides JSON for a generation (`{}` when the fit has none).
    pub fn overrides_for(&self, generation: &str) -> Value {
        match self.generations.get(generation) {
            Some(m) => serde_json::to_value(m).unwrap_or_else(|_| json!({})),
            None => json!({}),
        }
    }
}

/// The shipped fit.
pub fn fitted_efficiencies() -> Result<FittedEfficiencies, ValidateError> {
    FittedEfficiencies::from_json(FITTED_EFFICIENCIES_JSON)
}

/// One fitted parameter: a field of the step-time model's efficiency table and the values tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitParam {
    pub field: &'static str,
    /// What kind of kernel / cost it scales (for the docs).
    pub kind: &'static str,
    pub grid: &'static [f64],
}

/// The named parameters the fit may change, by kernel kind (docs/accuracy.md). Precision-specific
/// GEMM factors (fp8, fp4) are not fitted: one model each in the set, so fitting them would fit
/// that model.
pub const FIT_PARAMS: &[FitParam] = &[
    FitParam {
        field: "api_latency_completions_s",
        kind: "API server per-request latency, completions endpoint",
        grid: &[0.0, 2e-3, 5e-3, 8e-3, 12e-3, 16e-3, 20e-3, 30e-3],
    },
    FitParam {
        field: "api_latency_chat_s",
        kind: "API server per-request latency, chat endpoint",
        grid: &[0.0, 5e-3, 10e-3, 20e-3, 30e-3, 40e-3, 50e-3, 60e-3],
    },
    FitParam {
        field: "api_serial_per_request_s",
        kind: "API server serial CPU time per request (bursts)",
        grid: &[0.0, 0.5e-3, 1e-3, 2e-3, 4e-3, 8e-3, 12e-3, 16e-3, 24e-3],
    },
    FitParam {
        field: "gemm_bf16",
        kind: "dense GEMM compute (prefill-bound steps)",
        grid: &[
            0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85,
        ],
    },
    FitParam {
        field: "hbm_weights",
        kind: "weight streaming (decode-bound steps)",
        grid: &[0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95],
    },
    FitParam {
        field: "hbm_kv",
        kind: "paged KV reads (decode attention)",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "prefill_attention",
        kind: "prefill attention compute",
        grid: &[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
    },
    FitParam {
        field: "grouped_gemm_vs_dense",
        kind: "MoE grouped GEMM relative to dense",
        grid: &[0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    },
    FitParam {
        field: "hbm_expert_weights",
        kind: "MoE expert weight streaming (decode-bound MoE steps)",
        grid: &[0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    },
    FitParam {
        field: "allreduce_bus_eff",
        kind: "tensor-parallel all-reduce bandwidth",
        grid: &[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    },
    FitParam {
        field: "step_overhead_graph_s",
        kind: "per-step engine overhead (CUDA-graph steps)",
        grid: &[
            0.1e-3, 0.3e-3, 0.6e-3, 1.0e-3, 1.5e-3, 2.0e-3, 3.0e-3, 4.0e-3,
        ],
    },
    FitParam {
        field: "step_overhead_piecewise_s",
        kind: "per-step engine overhead (mixed prefill/decode steps)",
        grid: &[0.3e-3, 0.6e-3, 1.2e-3, 2.0e-3, 3.0e-3, 4.5e-3, 6.0e-3],
    },
    FitParam {
        field: "per_request_overhead_s",
        kind: "per scheduled request per step CPU cost",
        grid: &[0.0, 4e-6, 10e-6, 20e-6, 40e-6, 80e-6, 160e-6],
    },
];

/// The fit objective of a report: the mean over the three metric families of the median absolute
/// error over the report's points (each point counts once per family), percent.
pub fn objective(r: &ValidationReport) -> f64 {
    let aggs = aggregate(&r.points, "fit", &|_| true);
    Family::ALL
        .iter()
        .map(|f| {
            aggs.iter()
                .find(|a| a.family == *f)
                .map(|a| a.median_abs_pct)
                .unwrap_or(0.0)
        })
        .sum::<f64>()
        / 3.0
}

/// Points of a report that could not be simulated. The fit compares (failures, objective)
/// lexicographically, so it never "improves" by making points unsimulatable.
pub fn failures(r: &ValidationReport) -> usize {
    r.points.iter().filter(|p| p.error.is_some()).count()
}

/// One step of the fit's log.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitStep {
    pub round: usize,
    pub field: String,
    pub value: f64,
    pub objective: f64,
}

/// Coordinate descent over [`FIT_PARAMS`] for one GPU generation: for each parameter in turn,
/// every grid value is tried with the others fixed and the best kept (ties keep the current
/// value); `rounds` passes. Deterministic. Only rows of that generation (and in `opts`'
/// selection) are used. Returns the fitted overrides of that generation and the log.
pub fn fit_generation(
    points_csv: &str,
    generation: &str,
    opts: &ValidateOptions,
    start: &FittedEfficiencies,
    params: &[&str],
    rounds: usize,
    sim: &mut Simulator,
) -> Result<(BTreeMap<String, f64>, Vec<FitStep>), ValidateError> {
    let pts = select_points(parse_points(points_csv)?, opts)?;
    let lines: Vec<usize> = pts
        .iter()
        .filter(|p| point_key(p).as_deref() == Some(generation))
        .map(|p| p.line)
        .collect();
    if lines.is_empty() {
        return Err(ValidateError::NoPoints {
            filter: format!(" on {generation} GPUs"),
        });
    }
    let mut cur = start.clone();
    let eval =
        |table: &FittedEfficiencies, sim: &mut Simulator| -> Result<(usize, f64), ValidateError> {
            let o = ValidateOptions {
                only_source: None,
                efficiencies: Some(table.clone()),
                only_lines: Some(lines.clone()),
            };
            let r = run_with(points_csv, &o, sim)?;
            Ok((failures(&r), objective(&r)))
        };
    let mut best = eval(&cur, sim)?;
    let mut log = vec![FitStep {
        round: 0,
        field: "(start)".into(),
        value: 0.0,
        objective: best.1,
    }];
    for round in 1..=rounds {
        for fp in FIT_PARAMS.iter().filter(|f| params.contains(&f.field)) {
            for &v in fp.grid {
                let mut t = cur.clone();
                t.generations
                    .entry(generation.to_string())
                    .or_default()
                    .insert(fp.field.to_string(), v);
                if t == cur {
                    continue;
                }
                let obj = eval(&t, sim)?;
                if obj.0 < best.0 || (obj.0 == best.0 && obj.1 < best.1 - 1e-9) {
                    best = obj;
                    cur = t;
                    log.push(FitStep {
                        round,
                        field: fp.field.to_string(),
                        value: v,
                        objective: obj.1,
                    });
                }
            }
        }
    }
    Ok((
        cur.generations.get(generation).cloned().unwrap_or_default(),
        log,
    ))
}

/// Which fields are fitted per generation: all of [`FIT_PARAMS`] where the set has several
/// models; with a single model (A100: Qwen3-14B only) just the three broad factors, so the fit
/// cannot tune to one model's kernels.
pub fn fit_params_for(generation: &str, num_models: usize) -> Vec<&'static str> {
    let _ = generation;
    if num_models >= 3 {
        FIT_PARAMS.iter().map(|f| f.field).collect()
    } else {
        vec!["gemm_bf16", "hbm_weights", "step_overhead_graph_s"]
    }
}

/// Out-of-sample check of one split: fitted on `train`, aggregates over `test`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SplitResult {
    pub train: String,
    pub test: String,
    pub fitted: BTreeMap<String, BTreeMap<String, f64>>,
    pub test_aggregates: Vec<Aggregate>,
}

/// The fit's output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FitReport {
    pub table: FittedEfficiencies,
    /// generation -> log.
    pub logs: BTreeMap<String, Vec<FitStep>>,
    /// Source split: fit on one source, test on the other (both directions).
    pub splits: Vec<SplitResult>,
    /// Held-out aggregates pooled over the folds: scope `leave-one-source-out` (each source
    /// predicted by a fit on the others) and `leave-one-model-out` (each model predicted by a fit
    /// on the other models).
    pub held_out: Vec<Aggregate>,
}

/// Held-out results of one grouping: every point predicted by a table fitted without its group.
fn held_out_points(
    points_csv: &str,
    rounds: usize,
    group: &dyn Fn(&CalibrationPoint) -> String,
    sim: &mut Simulator,
) -> Result<Vec<PointResult>, ValidateError> {
    let pts = parse_points(points_csv)?;
    let mut groups: Vec<String> = Vec::new();
    for p in &pts {
        let g = group(p);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let mut out = Vec::new();
    for g in &groups {
        let train: Vec<usize> = pts
            .iter()
            .filter(|p| &group(p) != g)
            .map(|p| p.line)
            .collect();
        let test: Vec<usize> = pts
            .iter()
            .filter(|p| &group(p) == g)
            .map(|p| p.line)
            .collect();
        let o = ValidateOptions {
            only_lines: Some(train),
            efficiencies: Some(FittedEfficiencies::default()),
            ..Default::default()
        };
        // A generation without training rows keeps the literature defaults.
        let (t, _) = fit_table(points_csv, &o, rounds, sim)?;
        let o = ValidateOptions {
            only_lines: Some(test),
            efficiencies: Some(t),
            ..Default::default()
        };
        out.extend(run_with(points_csv, &o, sim)?.points);
    }
    out.sort_by_key(|p| p.line);
    Ok(out)
}

/// Leave-one-source-out and leave-one-model-out aggregates (scopes `leave-one-source-out`,
/// `leave-one-model-out`). Costs one fit per source and per model.
pub fn held_out(
    points_csv: &str,
    rounds: usize,
    sim: &mut Simulator,
) -> Result<Vec<Aggregate>, ValidateError> {
    let by_source = held_out_points(points_csv, rounds, &|p| p.source.clone(), sim)?;
    let by_model = held_out_points(points_csv, rounds, &|p| p.model.clone(), sim)?;
    let mut a = aggregate(&by_source, "leave-one-source-out", &|_| true);
    a.extend(aggregate(&by_model, "leave-one-model-out", &|_| true));
    Ok(a)
}

fn fit_table(
    points_csv: &str,
    opts: &ValidateOptions,
    rounds: usize,
    sim: &mut Simulator,
) -> Result<(FittedEfficiencies, BTreeMap<String, Vec<FitStep>>), ValidateError> {
    let pts = select_points(parse_points(points_csv)?, opts)?;
    let mut gens: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in &pts {
        if let Some(g) = point_key(p) {
            let models = gens.entry(g).or_default();
            if !models.contains(&p.model) {
                models.push(p.model.clone());
            }
        }
    }
    let mut table = FittedEfficiencies::default();
    let mut logs = BTreeMap::new();
    for (g, models) in &gens {
        let params = fit_params_for(g, models.len());
        let (fitted, log) = fit_generation(
            points_csv,
            g,
            opts,
            &FittedEfficiencies::default(),
            &params,
            rounds,
            sim,
        )?;
        table.generations.insert(g.clone(), fitted);
        logs.insert(g.clone(), log);
    }
    Ok((table, logs))
}

/// Fits every generation on all points (the shipped table), then the source split both ways.
pub fn fit_all(
    points_csv: &str,
    rounds: usize,
    sim: &mut Simulator,
) -> Result<FitReport, ValidateError> {
    let all = ValidateOptions {
        efficiencies: Some(FittedEfficiencies::default()),
        ..Default::default()
    };
    let (mut table, logs) = fit_table(points_csv, &all, rounds, sim)?;
    let pts = parse_points(points_csv)?;
    let mut sources: Vec<String> = Vec::new();
    for p in &pts {
        if !sources.contains(&p.source) {
            sources.push(p.source.clone());
        }
    }
    table.description = format!(
        "fitted by `servesim validate --fit` on {} points ({}), coordinate descent, {rounds} rounds, objective = mean over output tok/s, ITL/TPOT and TTFT p50 of the median absolute error per GPU generation and vLLM release line (`<generation>@<era>`)",
        pts.len(),
        sources.join(" + ")
    );
    let mut splits = Vec::new();
    for train in &sources {
        for test in sources.iter().filter(|s| *s != train) {
            let train_lines: Vec<usize> = pts
                .iter()
                .filter(|p| &p.source == train)
                .map(|p| p.line)
                .collect();
            let test_lines: Vec<usize> = pts
                .iter()
                .filter(|p| &p.source == test)
                .map(|p| p.line)
                .collect();
            let o = ValidateOptions {
                only_lines: Some(train_lines),
                efficiencies: Some(FittedEfficiencies::default()),
                ..Default::default()
            };
            let (t, _) = fit_table(points_csv, &o, rounds, sim)?;
            // A generation the training source does not cover keeps the defaults.
            let o = ValidateOptions {
                only_lines: Some(test_lines),
                efficiencies: Some(t.clone()),
                ..Default::default()
            };
            let rep = run_with(points_csv, &o, sim)?;
            splits.push(SplitResult {
                train: train.clone(),
                test: test.clone(),
                fitted: t.generations,
                test_aggregates: aggregate(
                    &rep.points,
                    &format!("{test} (fit on {train})"),
                    &|_| true,
                ),
            });
        }
    }
    let held_out = held_out(points_csv, rounds, sim)?;
    Ok(FitReport {
        table,
        logs,
        splits,
        held_out,
    })
}

impl FitReport {
    /// The table as the JSON written to data/calibration/efficiencies.json.
    pub fn table_json(&self) -> String {
        serde_json::to_string_pretty(&self.table).unwrap_or_default() + "\n"
    }

    /// Markdown: fitted values, the log, and the out-of-sample errors.
    pub fn to_markdown(&self) -> String {
        let mut s = String::from(
            "## Fitted efficiencies\n\n| generation | field | value |\n|---|---|---|\n",
        );
        for (g, m) in &self.table.generations {
            for (k, v) in m {
                s.push_str(&format!("| {g} | {k} | {v} |\n"));
            }
        }
        s.push_str("\n### Fit log (accepted steps)\n\n| generation | round | field | value | objective |\n|---|---|---|---|---|\n");
        for (g, log) in &self.logs {
            for st in log {
                s.push_str(&format!(
                    "| {g} | {} | {} | {} | {:.2} |\n",
                    st.round, st.field, st.value, st.objective
                ));
            }
        }
        s.push_str("\n### Held out (pooled over folds)\n\n| scope | metric | n | median abs error | mean abs error | mean signed error |\n|---|---|---|---|---|---|\n");
        for a in &self.held_out {
            s.push_str(&format!(
                "| {} | {} | {} | {:.1}% | {:.1}% | {:+.1}% |\n",
                a.scope,
                a.family.name(),
                a.n,
                a.median_abs_pct,
                a.mean_abs_pct,
                a.mean_signed_pct
            ));
        }
        s.push_str("\n### Out of sample (source split)\n\n| test set | metric | n | median abs error | mean abs error | mean signed error |\n|---|---|---|---|---|---|\n");
        for sp in &self.splits {
            for a in &sp.test_aggregates {
                s.push_str(&format!(
                    "| {} | {} | {} | {:.1}% | {:.1}% | {:+.1}% |\n",
                    a.scope,
                    a.family.name(),
                    a.n,
                    a.median_abs_pct,
                    a.mean_abs_pct,
                    a.mean_signed_pct
                ));
            }
        }
        s
    }
}

// ---------------------------------------------------------------------------------------------
// "How far to trust it": the summary the page shows.

/// The shipped accuracy summary (`data/calibration/accuracy-summary.json`), written by
/// `servesim validate --fit` (all figures) or `--write-summary` (in-sample figures, held-out
/// figures kept).
pub const ACCURACY_SUMMARY_JSON: &str =
    include_str!("../../data/calibration/accuracy-summary.json");

/// Accuracy of one metric family against the public measured runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricAccuracy {
    pub family: Family,
    /// Display name ("output tok/s", "ITL/TPOT mean", "TTFT p50").
    pub metric: String,
    /// Points scored.
    pub n: usize,
    /// Median absolute error, percent, with the shipped (calibrated) table: in-sample.
    pub median_abs_pct: f64,
    /// Mean signed error, percent (positive: ServeSim predicts higher than measured).
    pub mean_signed_pct: f64,
    /// Median absolute error when each source is predicted by a fit on the other source(s).
    pub held_out_source_median_abs_pct: Option<f64>,
    /// Median absolute error when each model is predicted by a fit on the other models.
    pub held_out_model_median_abs_pct: Option<f64>,
    /// Target on the median absolute error, percent.
    pub target_pct: f64,
    /// In-sample median within the target.
    pub met: bool,
}

/// How far to trust ServeSim's numbers (docs/accuracy.md), per metric family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccuracySummary {
    /// What was compared, with which table.
    pub description: String,
    /// Measured runs in the set, and how many could be simulated.
    pub points: usize,
    pub simulated: usize,
    pub metrics: Vec<MetricAccuracy>,
}

fn round1(v: f64) -> f64 {
    libm::round(v * 10.0) / 10.0
}

impl AccuracySummary {
    /// From a validation report (in-sample) and held-out aggregates (scopes
    /// `leave-one-source-out`, `leave-one-model-out`; may be empty).
    pub fn from_report(r: &ValidationReport, held_out: &[Aggregate]) -> AccuracySummary {
        let pick = |scope: &str, f: Family| {
            held_out
                .iter()
                .find(|a| a.scope == scope && a.family == f)
                .map(|a| round1(a.median_abs_pct))
        };
        let metrics = Family::ALL
            .iter()
            .filter_map(|f| {
                let a = r.overall(*f)?;
                Some(MetricAccuracy {
                    family: *f,
                    metric: f.name().to_string(),
                    n: a.n,
                    median_abs_pct: round1(a.median_abs_pct),
                    mean_signed_pct: round1(a.mean_signed_pct),
                    held_out_source_median_abs_pct: pick("leave-one-source-out", *f),
                    held_out_model_median_abs_pct: pick("leave-one-model-out", *f),
                    target_pct: a.target_pct,
                    met: a.met,
                })
            })
            .collect();
        AccuracySummary {
            description: format!(
                "ServeSim versus {} public measured vLLM runs (data/calibration/measured-points.csv), table: {}. Median absolute error of each point's prediction; held-out = predicted by a fit that did not see that source / model.",
                r.points.len(),
                r.efficiencies
            ),
            points: r.points.len(),
            simulated: r.points.iter().filter(|p| p.error.is_none()).count(),
            metrics,
        }
    }

    /// The held-out aggregates this summary carries (to keep them when only the in-sample part
    /// is recomputed).
    pub fn held_out_aggregates(&self) -> Vec<Aggregate> {
        let mut v = Vec::new();
        for m in &self.metrics {
            for (scope, x) in [
                ("leave-one-source-out", m.held_out_source_median_abs_pct),
                ("leave-one-model-out", m.held_out_model_median_abs_pct),
            ] {
                if let Some(x) = x {
                    v.push(Aggregate {
                        family: m.family,
                        scope: scope.into(),
                        n: m.n,
                        median_abs_pct: x,
                        mean_abs_pct: 0.0,
                        mean_signed_pct: 0.0,
                        target_pct: m.target_pct,
                        met: x <= m.target_pct,
                    });
                }
            }
        }
        v
    }

    /// The JSON written to data/calibration/accuracy-summary.json.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    pub fn from_json(s: &str) -> Result<AccuracySummary, ValidateError> {
        serde_json::from_str(s).map_err(|e| ValidateError::Fitted(format!("accuracy summary: {e}")))
    }
}

/// The shipped accuracy summary (embedded; a test keeps it in step with a fresh validation).
pub fn accuracy_summary() -> AccuracySummary {
    AccuracySummary::from_json(ACCURACY_SUMMARY_JSON).unwrap_or_default()
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
