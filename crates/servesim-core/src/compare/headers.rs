//! Matching a table header ("TTFT p50 (ms)", "median_ttft_ms", "tok/s/user", ...) to a
//! [`MetricId`] and its unit. The rules and the alias table are documented in docs/compare.md.

use super::LevelKind;
use crate::metric::{MetricId, Stat};

/// What one header names.
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderClass {
    Level(LevelKind),
    Arm,
    Excluded,
    /// A metric; `unit` is the unit text found in the header, if any.
    Metric {
        metric: MetricId,
        unit: Option<String>,
    },
    Unmatched(String),
}

/// Header conventions of a whole table, detected from all its headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    Generic,
    /// Keys of InferenceX `utils/process_result.py` (`median_ttft` in seconds, `*_intvty`).
    InferenceXAgg,
    /// Columns of InferenceX `utils/summarize.py` (`TTFT (ms)` = median, ...).
    InferenceXSummary,
}

const TIME_UNITS: [&str; 10] = [
    "ns", "us", "µs", "ms", "msec", "s", "sec", "secs", "second", "seconds",
];

/// The physical dimension of a metric's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    TimeMs,
    TimeS,
    TokRate,
    ReqRate,
    Count,
    Ratio,
}

pub(crate) fn dim(m: MetricId) -> Dim {
    match m {
        MetricId::TtftMs(_) | MetricId::ItlMs(_) | MetricId::TpotMs(_) => Dim::TimeMs,
        MetricId::QueueingMsMean => Dim::TimeMs,
        MetricId::E2eS(_) => Dim::TimeS,
        MetricId::OutputTokensPerS
        | MetricId::InputTokensPerS
        | MetricId::OutputTokensPerSPerGpu
        | MetricId::OutputTokensPerSPerUser
        | MetricId::E2eTokensPerSPerUser
        | MetricId::Interactivity => Dim::TokRate,
        MetricId::RequestsPerS => Dim::ReqRate,
        MetricId::CompletedRequests | MetricId::Preemptions | MetricId::RejectedRequests => {
            Dim::Count
        }
        MetricId::KvUtilizationMean
        | MetricId::KvUtilizationPeak
        | MetricId::PrefixCacheHitRate
        | MetricId::CpuHitRate
        | MetricId::MeanRunningBatch => Dim::Ratio,
    }
}

/// Whether a measured value of zero is meaningful (counts and ratios); latencies and rates must be
/// strictly positive.
pub(crate) fn zero_allowed(m: MetricId) -> bool {
    matches!(dim(m), Dim::Count | Dim::Ratio)
}

/// Why a unit could not be turned into a scale factor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum UnitProblem {
    Missing,
    Unknown { accepted: &'static str },
}

fn time_factor_to_ms(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-6),
        "us" | "µs" => Some(1e-3),
        "ms" | "msec" => Some(1.0),
        "s" | "sec" | "secs" | "second" | "seconds" => Some(1000.0),
        _ => None,
    }
}

/// The factor that converts a value in `unit` into the metric's own unit.
pub(crate) fn unit_scale(
    metric: MetricId,
    unit: Option<&str>,
    flavor: Flavor,
) -> Result<f64, UnitProblem> {
    let unit = unit.map(|u| u.trim().to_lowercase().replace(' ', ""));
    let unit = unit.as_deref().filter(|u| !u.is_empty());
    const TIME: &str = "ns, us, ms, s";
    match dim(metric) {
        d @ (Dim::TimeMs | Dim::TimeS) => {
            let to_ms = match unit {
                Some(u) => time_factor_to_ms(u).ok_or(UnitProblem::Unknown { accepted: TIME })?,
                // InferenceX's aggregate keys drop the `_ms` and store seconds
                // (utils/process_result.py: `float(value) / 1000.0`).
                None if flavor == Flavor::InferenceXAgg => 1000.0,
                None => return Err(UnitProblem::Missing),
            };
            Ok(if d == Dim::TimeMs {
                to_ms
            } else {
                to_ms / 1000.0
            })
        }
        Dim::TokRate => match unit {
            None => Ok(1.0),
            Some(u) if is_token_rate_unit(u) => Ok(1.0),
            Some(_) => Err(UnitProblem::Unknown {
                accepted: "tok/s, tokens/s, tokens/sec, tok/s/user, tok/s/gpu",
            }),
        },
        Dim::ReqRate => match unit {
            None => Ok(1.0),
            Some(u) if is_request_rate_unit(u) => Ok(1.0),
            Some(_) => Err(UnitProblem::Unknown {
                accepted: "req/s, requests/s, requests/sec",
            }),
        },
        Dim::Count => match unit {
            None | Some("requests") | Some("reqs") | Some("count") => Ok(1.0),
            Some(_) => Err(UnitProblem::Unknown {
                accepted: "no unit, or requests",
            }),
        },
        Dim::Ratio => match unit {
            None => Ok(1.0),
            Some(_) => Err(UnitProblem::Unknown {
                accepted: "no unit (a fraction 0..1)",
            }),
        },
    }
}

fn is_token_rate_unit(u: &str) -> bool {
    if u == "tps" {
        return true;
    }
    let head = ["tokens", "token", "tok"]
        .iter()
        .find(|h| u.starts_with(**h));
    match head {
        Some(h) => {
            let rest = &u[h.len()..];
            let rest = rest.trim_start_matches('/');
            let rest = rest.strip_prefix("per").unwrap_or(rest);
            let unit_part = rest.split('/').next().unwrap_or("");
            matches!(unit_part, "s" | "sec" | "second")
        }
        None => false,
    }
}

fn is_request_rate_unit(u: &str) -> bool {
    matches!(
        u,
        "req/s" | "reqs/s" | "requests/s" | "requests/sec" | "request/s" | "rps" | "qps"
    )
}

/// Splits "TTFT p50 (ms)" into ("ttft p50", Some("ms")) and "ttft_p50_s" into ("ttft p50",
/// Some("s")); the name comes back lowercased with `_`/`-` turned into spaces.
pub(crate) fn split_unit(header: &str) -> (String, Option<String>) {
    let lower = header.trim().to_lowercase();
    let (name_part, mut unit) = match (lower.ends_with(')'), lower.rfind('(')) {
        (true, Some(open)) => (
            lower[..open].to_string(),
            Some(lower[open + 1..lower.len() - 1].trim().to_string()),
        ),
        _ => (lower.clone(), None),
    };
    let raw_tokens: Vec<String> = name_part
        .split([' ', '_', '-', '\t'])
        .filter(|t| !t.is_empty())
        .map(|t| t.to_string())
        .collect();
    // `output_tok_s`, `tokens_s_gpu`, `req_s`: a rate written with `_` instead of `/` is one
    // rate token (`tok/s`, `tok/s/gpu`), not a name followed by the unit "s".
    let mut tokens: Vec<String> = Vec::with_capacity(raw_tokens.len());
    let mut i = 0;
    while i < raw_tokens.len() {
        let t = raw_tokens[i].as_str();
        let next = raw_tokens.get(i + 1).map(String::as_str);
        let head = match t {
            "tok" | "toks" | "token" | "tokens" => Some("tok"),
            "req" | "reqs" | "request" | "requests" => Some("req"),
            _ => None,
        };
        match (head, next) {
            (Some(h), Some("s" | "sec" | "second")) => {
                let mut r = format!("{h}/s");
                i += 2;
                if let Some(per) = raw_tokens.get(i).map(String::as_str) {
                    if matches!(per, "gpu" | "user") {
                        r.push('/');
                        r.push_str(per);
                        i += 1;
                    }
                }
                tokens.push(r);
            }
            _ => {
                tokens.push(t.to_string());
                i += 1;
            }
        }
    }
    if unit.is_none() && tokens.len() >= 2 {
        if let Some(last) = tokens.last() {
            if TIME_UNITS.contains(&last.as_str()) {
                unit = tokens.pop();
            }
        }
    }
    (tokens.join(" "), unit)
}

fn stat_of(tokens: &[&str]) -> Option<Result<Stat, String>> {
    for t in tokens {
        match *t {
            "mean" | "avg" | "average" => return Some(Ok(Stat::Mean)),
            "median" | "med" | "p50" => return Some(Ok(Stat::P50)),
            "p90" => return Some(Ok(Stat::P90)),
            "p99" => return Some(Ok(Stat::P99)),
            "std" | "stdev" | "stddev" | "min" | "max" => return Some(Err(t.to_string())),
            _ => {
                let is_pct = t.len() > 1
                    && t.starts_with('p')
                    && t[1..].chars().all(|c| c.is_ascii_digit() || c == '.');
                if is_pct {
                    return Some(Err(t.to_string()));
                }
            }
        }
    }
    None
}

/// Classifies one header with the generic conventions.
pub fn classify_header(header: &str) -> HeaderClass {
    classify_with_flavor(header, Flavor::Generic)
}

pub(crate) fn detect_flavor(headers: &[String]) -> Flavor {
    let lower: Vec<String> = headers.iter().map(|h| h.trim().to_lowercase()).collect();
    let has = |s: &str| lower.iter().any(|h| h == s);
    if has("tput per gpu") && has("output tput per gpu") {
        Flavor::InferenceXSummary
    } else if has("tput_per_gpu")
        || has("output_tput_per_gpu")
        || lower.iter().any(|h| h.ends_with("_intvty"))
    {
        Flavor::InferenceXAgg
    } else {
        Flavor::Generic
    }
}

const NO_MATCH: &str = "no ServeSim metric matches this header; map it by hand if it is one";

pub(crate) fn classify_with_flavor(header: &str, flavor: Flavor) -> HeaderClass {
    let raw = header.trim().to_lowercase();
    // ServeSim's own flat keys (e.g. `ttft_ms_p50`, from `servesim sweep --csv`).
    if let Some(m) = MetricId::from_name(&raw) {
        return HeaderClass::Metric {
            metric: m,
            unit: own_unit(m),
        };
    }
    let (name, unit) = split_unit(header);
    let tokens: Vec<&str> = name.split(' ').filter(|t| !t.is_empty()).collect();
    let flat = format!(" {} ", tokens.join(" "));
    let has = |w: &str| tokens.contains(&w);
    let phrase = |p: &str| flat.contains(&format!(" {p} "));

    match name.as_str() {
        "concurrency" | "c" | "conc" | "max concurrency" => {
            return HeaderClass::Level(LevelKind::Concurrency)
        }
        "request rate" | "rate" | "qps" | "rps" => {
            return HeaderClass::Level(LevelKind::RequestRate)
        }
        "burst" | "burst size" => return HeaderClass::Level(LevelKind::Burst),
        "arm" => return HeaderClass::Arm,
        "excluded" | "exclude" | "exclusion" | "excluded reason" | "exclusion reason" => {
            return HeaderClass::Excluded
        }
        _ => {}
    }

    if flavor == Flavor::InferenceXSummary {
        // utils/summarize.py prints r['median_ttft'] * 1000 as "TTFT (ms)", etc.
        match name.as_str() {
            "ttft" => {
                return HeaderClass::Metric {
                    metric: MetricId::TtftMs(Stat::P50),
                    unit,
                }
            }
            "e2el" => {
                return HeaderClass::Metric {
                    metric: MetricId::E2eS(Stat::P50),
                    unit,
                }
            }
            "tpot" => {
                return HeaderClass::Metric {
                    metric: MetricId::TpotMs(Stat::P50),
                    unit,
                }
            }
            "interactivity" => {
                return HeaderClass::Unmatched(
                    "InferenceX's interactivity column is 1000 / median TPOT; ServeSim's interactivity is 1000 / mean TPOT".into(),
                )
            }
            _ => {}
        }
    }

    let stat = stat_of(&tokens);
    let metric_with_stat = |f: fn(Stat) -> MetricId, what: &str| -> HeaderClass {
        match &stat {
            Some(Ok(s)) => HeaderClass::Metric {
                metric: f(*s),
                unit: unit.clone(),
            },
            Some(Err(other)) => HeaderClass::Unmatched(format!(
                "ServeSim has no {other} of {what} (it has mean, p50, p90, p99)"
            )),
            None => HeaderClass::Unmatched(format!(
                "the header does not say which statistic of {what} (mean, median/p50, p90, p99); rename it or map it by hand"
            )),
        }
    };
    let mean_only = |m: MetricId, what: &str| -> HeaderClass {
        match &stat {
            None | Some(Ok(Stat::Mean)) => HeaderClass::Metric {
                metric: m,
                unit: unit.clone(),
            },
            Some(Ok(s)) => HeaderClass::Unmatched(format!(
                "ServeSim has only the mean {what}, not the {}",
                s.name()
            )),
            Some(Err(other)) => {
                HeaderClass::Unmatched(format!("ServeSim has only the mean {what}, not {other}"))
            }
        }
    };

    if has("intvty") || has("interactivity") {
        return mean_only(MetricId::Interactivity, "interactivity (1000 / mean TPOT)");
    }
    if has("ttft") || phrase("time to first token") {
        return metric_with_stat(MetricId::TtftMs, "TTFT");
    }
    if has("tpot") || phrase("time per output token") {
        // A TPOT header without a statistic is the mean (vLLM's "Mean TPOT", the usual column).
        if stat.is_none() {
            return HeaderClass::Metric {
                metric: MetricId::TpotMs(Stat::Mean),
                unit,
            };
        }
        return metric_with_stat(MetricId::TpotMs, "TPOT");
    }
    if has("itl") || phrase("inter token latency") || phrase("inter token") || has("intertoken") {
        return metric_with_stat(MetricId::ItlMs, "ITL");
    }

    let unit_is_rate = unit
        .as_deref()
        .map(|u| {
            let u = u.replace(' ', "");
            is_token_rate_unit(&u) || is_request_rate_unit(&u)
        })
        .unwrap_or(false);
    let rate_word = tokens.iter().any(|t| {
        t.contains("tok/s")
            || t.contains("tokens/s")
            || t.contains("tok/sec")
            || t.contains("req/s")
            || t.contains("requests/s")
            || *t == "throughput"
            || *t == "tput"
            || *t == "tps"
    }) || phrase("per second")
        || phrase("per sec");
    if unit_is_rate || rate_word {
        if !matches!(stat, None | Some(Ok(Stat::Mean))) {
            return HeaderClass::Unmatched(
                "a percentile of a throughput; ServeSim's throughputs are totals over the level"
                    .into(),
            );
        }
        let slash_has = |w: &str| tokens.iter().any(|t| t.split('/').any(|p| p == w));
        let unit_has = |w: &str| {
            unit.as_deref()
                .map(|u| u.replace(' ', "").split('/').any(|p| p == w))
                .unwrap_or(false)
        };
        let per_user = slash_has("user") || unit_has("user");
        let per_gpu = slash_has("gpu") || unit_has("gpu");
        let request = has("request")
            || has("requests")
            || has("req")
            || tokens
                .iter()
                .any(|t| t.starts_with("req/") || t.starts_with("requests/"))
            || unit
                .as_deref()
                .map(|u| is_request_rate_unit(&u.replace(' ', "")))
                .unwrap_or(false);
        let metric = if per_user {
            if has("e2e") {
                MetricId::E2eTokensPerSPerUser
            } else {
                MetricId::OutputTokensPerSPerUser
            }
        } else if per_gpu {
            if has("total") || has("input") || has("prompt") {
                return HeaderClass::Unmatched(
                    "total or input tokens per GPU: ServeSim has output tokens per GPU only".into(),
                );
            } else if has("output") {
                MetricId::OutputTokensPerSPerGpu
            } else if has("tput") {
                return HeaderClass::Unmatched(
                    "InferenceX's tput_per_gpu counts input + output tokens; ServeSim has output tokens per GPU only".into(),
                );
            } else {
                MetricId::OutputTokensPerSPerGpu
            }
        } else if request {
            MetricId::RequestsPerS
        } else if has("total") {
            return HeaderClass::Unmatched(
                "total (input + output) token throughput has no ServeSim metric".into(),
            );
        } else if has("input") || has("prompt") {
            MetricId::InputTokensPerS
        } else if has("goodput") || has("peak") || has("max") {
            return HeaderClass::Unmatched(NO_MATCH.into());
        } else {
            MetricId::OutputTokensPerS
        };
        return HeaderClass::Metric { metric, unit };
    }

    if has("queue") || has("queueing") || has("queuing") || has("queued") {
        return mean_only(MetricId::QueueingMsMean, "queueing time");
    }
    if has("e2el")
        || has("e2e")
        || phrase("end to end")
        || has("latency")
        || phrase("request latency")
    {
        return metric_with_stat(MetricId::E2eS, "E2E latency");
    }
    if has("completed") || phrase("successful requests") || phrase("request count") {
        return HeaderClass::Metric {
            metric: MetricId::CompletedRequests,
            unit,
        };
    }
    if has("preemptions") {
        return HeaderClass::Metric {
            metric: MetricId::Preemptions,
            unit,
        };
    }
    // The CPU KV tier's hit rate: "CPU hit rate", "cpu_tier_hit_rate", "CPU-tier hits (%)",
    // "KV offload hit rate", and vLLM's connector counters ("external prefix cache hit rate",
    // `vllm:external_prefix_cache_hits / queries`).
    let hitword = has("hit") || has("hits") || has("hitrate");
    if hitword && (has("cpu") || has("offload") || phrase("external prefix cache")) {
        return HeaderClass::Metric {
            metric: MetricId::CpuHitRate,
            unit,
        };
    }
    HeaderClass::Unmatched(NO_MATCH.into())
}

/// The unit a metric is stored in (`ms`, `s`), as a header would write it; `None` for unitless.
pub(crate) fn own_unit_of(m: MetricId) -> Option<String> {
    own_unit(m)
}

fn own_unit(m: MetricId) -> Option<String> {
    match dim(m) {
        Dim::TimeMs => Some("ms".into()),
        Dim::TimeS => Some("s".into()),
        _ => None,
    }
}

/// The documented example spellings and what they match (tested; reproduced in docs/compare.md).
pub fn alias_table() -> Vec<(&'static str, MetricId)> {
    vec![
        ("output_throughput", MetricId::OutputTokensPerS),
        (
            "Output token throughput (tok/s)",
            MetricId::OutputTokensPerS,
        ),
        ("tok/s", MetricId::OutputTokensPerS),
        (
            "Output Token Throughput (tokens/sec)",
            MetricId::OutputTokensPerS,
        ),
        ("request_throughput", MetricId::RequestsPerS),
        ("Request throughput (req/s)", MetricId::RequestsPerS),
        ("input tok/s", MetricId::InputTokensPerS),
        ("median_ttft_ms", MetricId::TtftMs(Stat::P50)),
        ("mean_ttft_ms", MetricId::TtftMs(Stat::Mean)),
        ("p99_ttft_ms", MetricId::TtftMs(Stat::P99)),
        ("TTFT p50 (ms)", MetricId::TtftMs(Stat::P50)),
        ("ttft_p50_s", MetricId::TtftMs(Stat::P50)),
        ("Median TTFT (ms)", MetricId::TtftMs(Stat::P50)),
        ("p99_itl_ms", MetricId::ItlMs(Stat::P99)),
        ("p90_itl_ms", MetricId::ItlMs(Stat::P90)),
        ("ITL mean ms", MetricId::ItlMs(Stat::Mean)),
        ("Mean ITL (ms)", MetricId::ItlMs(Stat::Mean)),
        ("tpot", MetricId::TpotMs(Stat::Mean)),
        ("mean_tpot_ms", MetricId::TpotMs(Stat::Mean)),
        ("median_tpot_ms", MetricId::TpotMs(Stat::P50)),
        ("p99_tpot_ms", MetricId::TpotMs(Stat::P99)),
        ("TPOT p90 (ms)", MetricId::TpotMs(Stat::P90)),
        ("Median TPOT (ms)", MetricId::TpotMs(Stat::P50)),
        ("mean_e2el_ms", MetricId::E2eS(Stat::Mean)),
        ("E2E p90 (s)", MetricId::E2eS(Stat::P90)),
        ("interactivity", MetricId::Interactivity),
        ("mean_intvty", MetricId::Interactivity),
        ("tok/s/user", MetricId::OutputTokensPerSPerUser),
        ("output tok/s per user", MetricId::OutputTokensPerSPerUser),
        (
            "tokens per second per gpu",
            MetricId::OutputTokensPerSPerGpu,
        ),
        ("output_tput_per_gpu", MetricId::OutputTokensPerSPerGpu),
        ("completed", MetricId::CompletedRequests),
        ("ttft_ms_p50", MetricId::TtftMs(Stat::P50)),
        ("output_tok_s", MetricId::OutputTokensPerS),
        ("Output_Tok_S", MetricId::OutputTokensPerS),
        ("tput", MetricId::OutputTokensPerS),
        ("tok/s/gpu", MetricId::OutputTokensPerSPerGpu),
        ("output_tok_s_gpu", MetricId::OutputTokensPerSPerGpu),
        ("tok_s_user", MetricId::OutputTokensPerSPerUser),
        ("req_s", MetricId::RequestsPerS),
        ("Interactivity", MetricId::Interactivity),
        ("TTFT P50 (MS)", MetricId::TtftMs(Stat::P50)),
        ("cpu_hit_rate", MetricId::CpuHitRate),
        ("CPU hit rate", MetricId::CpuHitRate),
        ("cpu_tier_hit_rate", MetricId::CpuHitRate),
        ("CPU-tier hits (%)", MetricId::CpuHitRate),
        ("KV offload hit rate", MetricId::CpuHitRate),
        ("external_prefix_cache_hit_rate", MetricId::CpuHitRate),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{import_text, ImportOptions};

    #[test]
    fn the_documented_spellings_match() {
        for (h, m) in alias_table() {
            match classify_header(h) {
                HeaderClass::Metric { metric, .. } => assert_eq!(metric, m, "{h}"),
                other => panic!("{h}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_cpu_hit_rate_column_imports() {
        // The report's arms with CPU-tier hits: a hit-rate column next to the usual ones.
        let text = "concurrency,output_tok_s,CPU hit rate\n128,900,0.12\n512,1400,0.31\n";
        let imp = import_text(text, &ImportOptions::default()).unwrap();
        let lvl = &imp.runs[0].levels[1];
        assert_eq!(lvl.metrics[&MetricId::CpuHitRate], 0.31);
        // The prefix-cache hit rate stays its own metric.
        assert!(!matches!(
            classify_header("prefix cache hit rate"),
            HeaderClass::Metric {
                metric: MetricId::CpuHitRate,
                ..
            }
        ));
    }

    #[test]
    fn output_tok_s_imports_and_a_hand_mapping_with_a_misleading_unit_works() {
        let text = "concurrency,output_tok_s,TTFT p50 (ms)\n1,100,20\n2,190,25\n";
        let imp = import_text(text, &ImportOptions::default()).unwrap();
        let lvl = &imp.runs[0].levels[1];
        assert_eq!(lvl.metrics[&MetricId::OutputTokensPerS], 190.0);
        // A header whose trailing token reads as seconds, mapped by hand to a token rate.
        let text = "concurrency,gen_speed_s\n1,100\n";
        let mut opts = ImportOptions::default();
        opts.mapping
            .insert("gen_speed_s".into(), Some(MetricId::OutputTokensPerS));
        let imp = import_text(text, &opts).unwrap();
        assert_eq!(
            imp.runs[0].levels[0].metrics[&MetricId::OutputTokensPerS],
            100.0
        );
        assert!(
            imp.notes.iter().any(|n| n.contains("mapped by hand")),
            "{:?}",
            imp.notes
        );
    }
}
