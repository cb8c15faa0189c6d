//! JSON exports of benchmark clients: `vllm bench serve --save-result`, AIPerf
//! `profile_export_aiperf.json`, GuideLLM benchmark reports and InferenceX aggregate results.
//! Field names and their sources are listed in docs/compare.md.

use super::headers::{self, Flavor, HeaderClass};
use super::table::{check_value, Row};
use super::{ImportError, ImportOptions, Imported, LevelKind, SourceFormat, Unmatched};
use crate::metric::{MetricId, Stat};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

type Obj = Map<String, Value>;

/// 1-based (line, column) of the `n`-th (0-based) occurrence of `"key"` in the text, or (1, 1).
fn locate_nth(text: &str, key: &str, n: usize) -> (usize, usize) {
    let needle = format!("\"{key}\"");
    let mut from = 0;
    let mut pos = None;
    for _ in 0..=n {
        match text[from..].find(&needle) {
            Some(p) => {
                pos = Some(from + p);
                from = from + p + needle.len();
            }
            None => break,
        }
    }
    match pos {
        Some(p) => {
            let before = &text[..p];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
            (line, col)
        }
        None => (1, 1),
    }
}

/// The 1-based line of every occurrence of `"key"` in the text, in one pass (so that looking up
/// the line of the n-th object is O(1), not a rescan: imports stay linear in their size).
fn key_lines(text: &str, key: &str) -> Vec<usize> {
    let needle = format!("\"{key}\"");
    let mut out = Vec::new();
    let (mut from, mut line, mut counted) = (0usize, 1usize, 0usize);
    while let Some(p) = text[from..].find(&needle) {
        let at = from + p;
        line += text.as_bytes()[counted..at]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        counted = at;
        out.push(line);
        from = at + needle.len();
    }
    out
}

fn locate(text: &str, key: &str) -> (usize, usize) {
    locate_nth(text, key, 0)
}

fn num(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
}

fn parse_values(file: &str, text: &str) -> Result<Vec<Value>, ImportError> {
    let mut out = Vec::new();
    let stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    for item in stream {
        match item {
            Ok(Value::Array(items)) => out.extend(items),
            Ok(v) => out.push(v),
            Err(e) => {
                return Err(ImportError::InvalidJson {
                    file: file.to_string(),
                    line: e.line().max(1),
                    column: e.column().max(1),
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}

fn detect(v: &Value) -> Option<SourceFormat> {
    let o = v.as_object()?;
    if o.get("benchmarks").map(Value::is_array).unwrap_or(false) {
        return Some(SourceFormat::GuidellmJson);
    }
    let aiperf_record = |x: &Value| {
        x.as_object()
            .map(|r| r.contains_key("unit") && r.contains_key("avg"))
            .unwrap_or(false)
    };
    if o.get("records").map(Value::is_object).unwrap_or(false) || o.values().any(aiperf_record) {
        return Some(SourceFormat::AiperfJson);
    }
    if o.contains_key("conc")
        && (o.contains_key("tput_per_gpu") || o.contains_key("output_tput_per_gpu"))
    {
        return Some(SourceFormat::InferenceXJson);
    }
    if [
        "max_concurrency",
        "output_throughput",
        "mean_ttft_ms",
        "request_throughput",
    ]
    .iter()
    .any(|k| o.contains_key(*k))
    {
        return Some(SourceFormat::VllmBenchJson);
    }
    None
}

pub(crate) fn import_json(
    file: &str,
    text: &str,
    opts: &ImportOptions,
) -> Result<(SourceFormat, Vec<Row>, Imported), ImportError> {
    let values = parse_values(file, text)?;
    if values.is_empty() {
        return Err(ImportError::Empty {
            file: file.to_string(),
        });
    }
    let mut format: Option<SourceFormat> = None;
    for (i, v) in values.iter().enumerate() {
        let f = detect(v).ok_or_else(|| ImportError::UnknownFormat {
            file: file.to_string(),
            detail: format!(
                "JSON object {} has none of the fields of a vllm bench serve, AIPerf, GuideLLM or InferenceX export",
                i + 1
            ),
        })?;
        if let Some(prev) = format {
            if prev != f {
                return Err(ImportError::MixedFormats {
                    file: file.to_string(),
                    first: format!("{prev:?}"),
                    second: format!("{f:?}"),
                });
            }
        }
        format = Some(f);
    }
    let format = format.unwrap_or(SourceFormat::VllmBenchJson);
    let mut part = Imported {
        runs: Vec::new(),
        unmatched: Vec::new(),
        notes: Vec::new(),
    };
    let mut rows = Vec::new();
    let (date_lines, conc_lines) = match format {
        SourceFormat::VllmBenchJson => (key_lines(text, "date"), Vec::new()),
        SourceFormat::InferenceXJson => (Vec::new(), key_lines(text, "conc")),
        _ => (Vec::new(), Vec::new()),
    };
    for (i, v) in values.iter().enumerate() {
        let o = v.as_object().ok_or_else(|| ImportError::UnknownFormat {
            file: file.to_string(),
            detail: "a JSON array element is not an object".into(),
        })?;
        match format {
            SourceFormat::VllmBenchJson => {
                let line = if i == 0 {
                    1
                } else {
                    date_lines.get(i).copied().unwrap_or(1)
                };
                rows.push(vllm_row(file, text, line, o, opts, &mut part)?);
            }
            SourceFormat::AiperfJson => rows.push(aiperf_row(file, text, o, opts, &mut part)?),
            SourceFormat::GuidellmJson => {
                rows.extend(guidellm_rows(file, text, o, opts, &mut part)?)
            }
            _ => {
                let line = conc_lines.get(i).copied().unwrap_or(1);
                rows.push(inferencex_row(file, text, line, o, opts, &mut part)?)
            }
        }
    }
    Ok((format, rows, part))
}

fn push_unmatched(part: &mut Imported, name: &str, reason: &str) {
    let u = Unmatched {
        name: name.to_string(),
        column: None,
        reason: reason.to_string(),
    };
    if !part.unmatched.contains(&u) {
        part.unmatched.push(u);
    }
}

fn insert_checked(
    file: &str,
    text: &str,
    key: &str,
    row: &mut Row,
    metric: MetricId,
    value: f64,
) -> Result<(), ImportError> {
    // Locating the key scans the text: only for a value that fails its check, so an import
    // stays linear in its size (a scan per value made 40,000 objects take over a minute).
    if check_value(file, 0, 0, key, metric, value).is_err() {
        let (line, column) = locate(text, key);
        check_value(file, line, column, key, metric, value)?;
    }
    row.metrics.insert(metric, value);
    Ok(())
}

fn check_level(file: &str, text: &str, key: &str, v: f64) -> Result<f64, ImportError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        let (line, column) = locate(text, key);
        Err(ImportError::OutOfRange {
            file: file.to_string(),
            line,
            column,
            header: key.to_string(),
            value: v,
            requirement: "greater than zero (a level is a concurrency, a rate or a burst size)"
                .into(),
        })
    }
}

fn new_row(file: &str, line: usize, opts: &ImportOptions, kind: LevelKind, level: f64) -> Row {
    Row {
        file: file.to_string(),
        line,
        arm: opts.arm_name(),
        level_kind: kind,
        level,
        metrics: BTreeMap::new(),
        excluded: None,
    }
}

/// `vllm bench serve --save-result` (vllm/benchmarks/serve.py): one object per level.
fn vllm_row(
    file: &str,
    text: &str,
    line: usize,
    o: &Obj,
    opts: &ImportOptions,
    part: &mut Imported,
) -> Result<Row, ImportError> {
    if let Some(v) = o
        .get("max_concurrency")
        .filter(|v| !v.is_null() && !v.is_number())
    {
        let (line, _) = locate(text, "max_concurrency");
        return Err(ImportError::MissingField {
            file: file.to_string(),
            line,
            what: format!(
                "max_concurrency is {}, not a number (vllm bench serve writes a number or null)",
                crate::bounds::clip(&v.to_string())
            ),
            fix: "write the concurrency as a number (remove the quotes), or null for a run without --max-concurrency".into(),
        });
    }
    let (kind, key, level) = match (num(o.get("max_concurrency")), o.get("request_rate")) {
        (Some(c), _) => (LevelKind::Concurrency, "max_concurrency", c),
        (None, Some(Value::Number(r))) => (
            LevelKind::RequestRate,
            "request_rate",
            r.as_f64().unwrap_or(f64::NAN),
        ),
        _ => match num(o.get("num_prompts")) {
            Some(n) => {
                part.notes.push(
                    "vLLM ran without --max-concurrency and with --request-rate inf: all prompts were sent at once, so the level is a burst of num_prompts requests".into(),
                );
                (LevelKind::Burst, "num_prompts", n)
            }
            None => {
                return Err(ImportError::MissingField {
                    file: file.to_string(),
                    line,
                    what: "the vLLM result has neither max_concurrency, a numeric request_rate nor num_prompts".into(),
                    fix: "import the file written by --save-result unchanged, or put the results in a table with a concurrency column".into(),
                })
            }
        },
    };
    let level = check_level(file, text, key, level)?;
    let mut row = new_row(file, line, opts, kind, level);
    let simple = [
        ("completed", MetricId::CompletedRequests, 1.0),
        ("request_throughput", MetricId::RequestsPerS, 1.0),
        ("output_throughput", MetricId::OutputTokensPerS, 1.0),
    ];
    for (k, m, scale) in simple {
        if let Some(v) = num(o.get(k)) {
            insert_checked(file, text, k, &mut row, m, v * scale)?;
        }
    }
    type Family = (&'static str, fn(Stat) -> MetricId, f64);
    let families: [Family; 4] = [
        ("ttft", MetricId::TtftMs, 1.0),
        ("tpot", MetricId::TpotMs, 1.0),
        ("itl", MetricId::ItlMs, 1.0),
        ("e2el", MetricId::E2eS, 1e-3),
    ];
    for (fam, f, scale) in families {
        for (stat, keys) in [
            (Stat::Mean, vec![format!("mean_{fam}_ms")]),
            (
                Stat::P50,
                vec![format!("median_{fam}_ms"), format!("p50_{fam}_ms")],
            ),
            (Stat::P90, vec![format!("p90_{fam}_ms")]),
            (Stat::P99, vec![format!("p99_{fam}_ms")]),
        ] {
            if let Some(k) = keys.iter().find(|k| num(o.get(k.as_str())).is_some()) {
                let v = num(o.get(k.as_str())).unwrap_or(f64::NAN);
                insert_checked(file, text, k, &mut row, f(stat), v * scale)?;
            }
        }
    }
    let used = |k: &str| -> bool {
        matches!(k, "completed" | "request_throughput" | "output_throughput")
            || ["ttft", "tpot", "itl", "e2el"].iter().any(|fam| {
                [
                    format!("mean_{fam}_ms"),
                    format!("median_{fam}_ms"),
                    format!("p50_{fam}_ms"),
                    format!("p90_{fam}_ms"),
                    format!("p99_{fam}_ms"),
                ]
                .iter()
                .any(|x| x == k)
            })
    };
    for (k, v) in o {
        let metric_like = used(k)
            || k.ends_with("_ms")
            || k.contains("throughput")
            || k == "completed"
            || k == "max_concurrency";
        if metric_like && !v.is_number() && !v.is_null() {
            // Strict types: a quoted number is not read as one, and never silently dropped.
            push_unmatched(
                part,
                k,
                &format!(
                    "the value is {}, not a number: not used (vllm bench serve writes numbers; remove the quotes to import it)",
                    crate::bounds::clip(&v.to_string())
                ),
            );
            continue;
        }
        if used(k) || !v.is_number() {
            continue;
        }
        let reason = if k == "total_token_throughput" {
            "total (input + output) token throughput has no ServeSim metric"
        } else if k.starts_with("std_") {
            "standard deviations are not scored"
        } else if k.ends_with("_ms") {
            "ServeSim has mean, p50, p90 and p99 only"
        } else if k.contains("throughput") || k.contains("goodput") || k.contains("per_s") {
            "no ServeSim metric matches this field"
        } else if VLLM_RUN_FIELDS.contains(&k.as_str()) {
            continue; // the run's settings and counts: they describe the level, nothing to score
        } else {
            "not a field of `vllm bench serve`'s result (a misspelt metric?): not used"
        };
        push_unmatched(part, k, reason);
    }
    Ok(row)
}

/// Numeric fields of a `vllm bench serve --save-result` object that describe the run rather than
/// measure it (vllm/benchmarks/serve.py `benchmark()` result and `main()`'s additions): read for the
/// level (`request_rate`, `max_concurrency`) or not scored, without a note. Every other numeric field
/// that is not a metric gets a note.
pub(crate) const VLLM_RUN_FIELDS: &[&str] = &[
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "max_concurrent_requests",
    "num_warmups",
    "seed",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "ramp_up_start_rps",
    "ramp_up_end_rps",
];

/// AIPerf metric tag (`time_to_first_token`, ...) and statistic to a ServeSim metric, or the reason
/// it has none. Definitions: AIPerf docs/metrics_reference.md.
pub(crate) fn aiperf_metric(tag: &str, stat: Stat) -> Result<MetricId, String> {
    let mean_only = |m: MetricId, what: &str| {
        if stat == Stat::Mean {
            Ok(m)
        } else {
            Err(format!("ServeSim has only the mean {what}"))
        }
    };
    match tag {
        "time_to_first_token" => Ok(MetricId::TtftMs(stat)),
        "request_latency" => Ok(MetricId::E2eS(stat)),
        // AIPerf's inter_token_latency is per request (request_latency - TTFT) / (output tokens
        // - 1), vLLM's TPOT; its statistics are over requests, as ServeSim's TPOT percentiles.
        "inter_token_latency" => Ok(MetricId::TpotMs(stat)),
        "output_token_throughput" => mean_only(MetricId::OutputTokensPerS, "output throughput"),
        "request_throughput" => mean_only(MetricId::RequestsPerS, "request throughput"),
        "request_count" => mean_only(MetricId::CompletedRequests, "request count"),
        "output_token_throughput_per_user" => Err(
            "AIPerf computes it per request as 1 / inter_token_latency; ServeSim's output tok/s per user is output tokens / E2E latency".into(),
        ),
        "inter_chunk_latency" => Err(
            "gaps between streamed chunks; equal to vLLM's ITL only when every chunk holds one token, which the export does not record".into(),
        ),
        _ => Err("no ServeSim metric matches this AIPerf metric".into()),
    }
}

/// AIPerf `profile_export_aiperf.json`: metric records at the top level (newer) or under
/// `records` (older), each `{"unit": .., "avg": .., "p50": .., ...}`.
fn aiperf_row(
    file: &str,
    text: &str,
    o: &Obj,
    opts: &ImportOptions,
    part: &mut Imported,
) -> Result<Row, ImportError> {
    let container = o.get("records").and_then(Value::as_object).unwrap_or(o);
    let loadgen = o
        .get("input_config")
        .and_then(|c| c.get("loadgen"))
        .and_then(Value::as_object);
    let rate = loadgen.and_then(|l| num(l.get("request_rate")));
    let conc = loadgen.and_then(|l| num(l.get("concurrency")));
    let (kind, level) = match (rate, conc, opts.level) {
        (Some(r), _, _) => (
            LevelKind::RequestRate,
            check_level(file, text, "request_rate", r)?,
        ),
        (None, Some(c), _) => (
            LevelKind::Concurrency,
            check_level(file, text, "concurrency", c)?,
        ),
        (None, None, Some((k, l))) => (k, l),
        (None, None, None) => {
            return Err(ImportError::MissingField {
                file: file.to_string(),
                line: 1,
                what: "the AIPerf export has no input_config.loadgen.concurrency or request_rate"
                    .into(),
                fix: "enter the level of this run by hand".into(),
            })
        }
    };
    let mut row = new_row(file, 1, opts, kind, level);
    for (tag, rec) in container {
        let Some(r) = rec.as_object() else { continue };
        let Some(unit) = r.get("unit").and_then(Value::as_str) else {
            continue;
        };
        for (key, stat) in [
            ("avg", Stat::Mean),
            ("p50", Stat::P50),
            ("p90", Stat::P90),
            ("p99", Stat::P99),
        ] {
            let Some(v) = num(r.get(key)) else { continue };
            match aiperf_metric(tag, stat) {
                Ok(m) => {
                    let scale =
                        headers::unit_scale(m, Some(unit), Flavor::Generic).map_err(|_| {
                            let (line, column) = locate(text, tag);
                            ImportError::UnknownUnit {
                                file: file.to_string(),
                                line,
                                column,
                                header: tag.clone(),
                                unit: unit.to_string(),
                                metric: m.label(),
                                accepted:
                                    "the units AIPerf writes (ms, sec, tokens/sec, requests/sec)"
                                        .into(),
                            }
                        })?;
                    insert_checked(file, text, tag, &mut row, m, v * scale)?;
                }
                Err(reason) => {
                    if key == "avg" {
                        push_unmatched(part, tag, &reason);
                    }
                }
            }
        }
    }
    Ok(row)
}

/// GuideLLM benchmark report: `benchmarks[]`, each with the scheduling strategy and a `metrics`
/// object of status distribution summaries (`successful.mean`, `.median`, `.percentiles.p90`).
fn guidellm_rows(
    file: &str,
    text: &str,
    o: &Obj,
    opts: &ImportOptions,
    part: &mut Imported,
) -> Result<Vec<Row>, ImportError> {
    let benches = o
        .get("benchmarks")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    part.notes.push(
        "GuideLLM's inter_token_latency_ms is per request (last token - first token) / (output tokens - 1), vLLM's TPOT definition: its mean is imported as the mean TPOT, its percentiles are not used; time_per_output_token_ms includes the first token and is not used".into(),
    );
    let mut rows = Vec::new();
    let metrics_lines = key_lines(text, "metrics");
    for (i, b) in benches.iter().enumerate() {
        let line = metrics_lines.get(i).copied().unwrap_or(1);
        let strategy = ["config", "args", "scheduler"]
            .iter()
            .find_map(|k| b.get(*k).and_then(|c| c.get("strategy")))
            .or_else(|| b.get("strategy"));
        let stype = strategy
            .and_then(|s| s.get("type_").or_else(|| s.get("type")))
            .and_then(Value::as_str)
            .unwrap_or("");
        let (kind, level) = match stype {
            "concurrent" => (
                LevelKind::Concurrency,
                strategy.and_then(|s| num(s.get("streams"))),
            ),
            "synchronous" => (LevelKind::Concurrency, Some(1.0)),
            "constant" | "poisson" | "async" | "async_constant" | "async_poisson" => (
                LevelKind::RequestRate,
                strategy.and_then(|s| num(s.get("rate"))),
            ),
            "throughput" => {
                part.notes.push(format!(
                    "GuideLLM benchmark {} used the throughput strategy (no fixed concurrency or rate) and is not imported",
                    i + 1
                ));
                continue;
            }
            other => {
                return Err(ImportError::MissingField {
                    file: file.to_string(),
                    line,
                    what: format!(
                        "GuideLLM benchmark {} has strategy type \"{other}\", not concurrent, synchronous, constant or poisson",
                        i + 1
                    ),
                    fix: "export a concurrent or rate sweep, or put the results in a table with a level column".into(),
                });
            }
        };
        let Some(level) = level else {
            return Err(ImportError::MissingField {
                file: file.to_string(),
                line,
                what: format!(
                    "GuideLLM benchmark {} has no streams / rate in its strategy",
                    i + 1
                ),
                fix: "import the report GuideLLM wrote, unchanged".into(),
            });
        };
        let level = check_level(file, text, "strategy", level)?;
        let mut row = new_row(file, line, opts, kind, level);
        let metrics = b.get("metrics").and_then(Value::as_object);
        let Some(metrics) = metrics else {
            return Err(ImportError::MissingField {
                file: file.to_string(),
                line,
                what: format!("GuideLLM benchmark {} has no metrics object", i + 1),
                fix: "import the report GuideLLM wrote, unchanged".into(),
            });
        };
        let get = |field: &str, stat: Stat| -> Option<f64> {
            let s = metrics.get(field)?.get("successful")?;
            match stat {
                Stat::Mean => num(s.get("mean")),
                Stat::P50 => num(s.get("median"))
                    .or_else(|| num(s.get("percentiles").and_then(|p| p.get("p50")))),
                Stat::P90 => num(s.get("percentiles").and_then(|p| p.get("p90"))),
                Stat::P99 => num(s.get("percentiles").and_then(|p| p.get("p99"))),
            }
        };
        for stat in Stat::ALL {
            if let Some(v) = get("time_to_first_token_ms", stat) {
                insert_checked(
                    file,
                    text,
                    "time_to_first_token_ms",
                    &mut row,
                    MetricId::TtftMs(stat),
                    v,
                )?;
            }
            if let Some(v) = get("request_latency", stat) {
                insert_checked(
                    file,
                    text,
                    "request_latency",
                    &mut row,
                    MetricId::E2eS(stat),
                    v,
                )?;
            }
            // GuideLLM's inter_token_latency is per request (latency - TTFT) / (output tokens
            // - 1), its statistics over requests: ServeSim's TPOT.
            if let Some(v) = get("inter_token_latency_ms", stat) {
                insert_checked(
                    file,
                    text,
                    "inter_token_latency_ms",
                    &mut row,
                    MetricId::TpotMs(stat),
                    v,
                )?;
            }
        }
        let means = [
            ("output_tokens_per_second", MetricId::OutputTokensPerS),
            ("prompt_tokens_per_second", MetricId::InputTokensPerS),
            ("requests_per_second", MetricId::RequestsPerS),
        ];
        for (field, m) in means {
            if let Some(v) = get(field, Stat::Mean) {
                insert_checked(file, text, field, &mut row, m, v)?;
            }
        }
        for (field, reason) in [
            (
                "time_per_output_token_ms",
                "GuideLLM's TPOT includes the first token; ServeSim's TPOT excludes it",
            ),
            (
                "tokens_per_second",
                "total (input + output) token throughput has no ServeSim metric",
            ),
        ] {
            if metrics.contains_key(field) {
                push_unmatched(part, field, reason);
            }
        }
        rows.push(row);
    }
    let kinds: Vec<LevelKind> = rows.iter().map(|r| r.level_kind).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        for r in rows.iter_mut() {
            r.arm = format!("{} ({})", r.arm, r.level_kind.name());
        }
        part.notes.push(
            "the GuideLLM report mixes concurrency and request-rate benchmarks; they are imported as separate arms".into(),
        );
    }
    Ok(rows)
}

/// InferenceX aggregate result (utils/process_result.py): `conc`, `tput_per_gpu`,
/// `output_tput_per_gpu`, and the vLLM latency keys without `_ms`, in seconds.
fn inferencex_row(
    file: &str,
    text: &str,
    line: usize,
    o: &Obj,
    opts: &ImportOptions,
    part: &mut Imported,
) -> Result<Row, ImportError> {
    let conc = num(o.get("conc")).ok_or_else(|| ImportError::MissingField {
        file: file.to_string(),
        line,
        what: "the InferenceX result has no numeric conc".into(),
        fix: "import the agg_*.json file unchanged".into(),
    })?;
    let conc = check_level(file, text, "conc", conc)?;
    let mut row = new_row(file, line, opts, LevelKind::Concurrency, conc);
    if opts.arm.is_none() && o.contains_key("hw") {
        let s = |k: &str| {
            o.get(k).map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
        };
        let mut parts: Vec<String> = Vec::new();
        for k in ["hw", "framework", "precision"] {
            if let Some(v) = s(k) {
                parts.push(v);
            }
        }
        for (k, p) in [("tp", "tp"), ("ep", "ep")] {
            if let Some(v) = s(k) {
                parts.push(format!("{p}{v}"));
            }
        }
        if let (Some(i), Some(osl)) = (s("isl"), s("osl")) {
            parts.push(format!("{i}/{osl}"));
        }
        row.arm = parts.join(" ");
    }
    const META: [&str; 12] = [
        "conc",
        "tp",
        "ep",
        "isl",
        "osl",
        "prefill_tp",
        "prefill_ep",
        "decode_tp",
        "decode_ep",
        "prefill_num_workers",
        "decode_num_workers",
        "num_requests_total",
    ];
    for (k, v) in o {
        let Some(x) = v.as_f64() else { continue };
        if META.contains(&k.as_str()) || k.starts_with("num_") {
            continue;
        }
        match headers::classify_with_flavor(k, Flavor::InferenceXAgg) {
            HeaderClass::Metric { metric, unit } => {
                let scale = headers::unit_scale(metric, unit.as_deref(), Flavor::InferenceXAgg)
                    .unwrap_or(1.0);
                if row.metrics.contains_key(&metric) {
                    push_unmatched(part, k, "same metric as another field");
                    continue;
                }
                insert_checked(file, text, k, &mut row, metric, x * scale)?;
            }
            HeaderClass::Unmatched(reason) => push_unmatched(part, k, &reason),
            _ => {}
        }
    }
    Ok(row)
}
