//! Number formatting for the page and the results exports (CSV and JSON). Pure Rust, tested
//! natively.

use crate::core_api::metric::{MetricId, Stat};
use crate::core_api::workload::Level;
use crate::core_api::LevelResult;

/// The results table's columns, in order (the CSV and JSON exports have every metric).
pub fn table_columns() -> Vec<MetricId> {
    vec![
        MetricId::OutputTokensPerS,
        MetricId::OutputTokensPerSPerGpu,
        MetricId::OutputTokensPerSPerUser,
        MetricId::E2eTokensPerSPerUser,
        MetricId::TtftMs(Stat::P50),
        MetricId::TtftMs(Stat::P90),
        MetricId::ItlMs(Stat::P50),
        MetricId::ItlMs(Stat::P90),
        MetricId::E2eS(Stat::P50),
        MetricId::RequestsPerS,
        MetricId::MeanRunningBatch,
        MetricId::KvUtilizationPeak,
        MetricId::PrefixCacheHitRate,
        MetricId::Preemptions,
    ]
}

/// Column header: the metric's label, with fractions shown as percentages.
pub fn column_label(m: MetricId) -> String {
    match m {
        MetricId::KvUtilizationPeak => "KV cache use, peak (%)".into(),
        MetricId::KvUtilizationMean => "KV cache use, mean (%)".into(),
        MetricId::PrefixCacheHitRate => "prefix-cache hits (%)".into(),
        MetricId::E2eTokensPerSPerUser => "E2E tok/s per user".into(),
        other => other.label(),
    }
}

/// A column's tooltip: the metric's key (as in the exports and `--sla`) and, where it helps, its
/// definition (docs/metrics.md).
pub fn column_title(m: MetricId) -> String {
    let def = match m {
        MetricId::E2eTokensPerSPerUser => " = OSL / (TTFT + OSL × ITL), from mean values",
        MetricId::OutputTokensPerSPerUser => " = mean over requests of output tokens / E2E latency",
        MetricId::KvUtilizationPeak => ": KV blocks in use / KV blocks per engine, peak",
        MetricId::PrefixCacheHitRate => ": prompt tokens served from the prefix cache",
        MetricId::MeanRunningBatch => ": requests in the running batch, time-averaged",
        _ => "",
    };
    format!("{}{def}", m.name())
}

/// Whether a metric is a rate over the measurement window, absent (shown as "no value" with the
/// level's `no_value` reason) when the window has zero length or no completed request.
pub fn is_window_rate(m: MetricId) -> bool {
    matches!(
        m,
        MetricId::OutputTokensPerS
            | MetricId::OutputTokensPerSPerGpu
            | MetricId::InputTokensPerS
            | MetricId::RequestsPerS
            | MetricId::MeanRunningBatch
            | MetricId::KvUtilizationMean
    )
}

/// A metric's value as the table shows it: fractions as percentages with one decimal, counts
/// as whole numbers, everything else with [`fmt_num`].
pub fn fmt_metric(m: MetricId, v: f64) -> String {
    match m {
        MetricId::KvUtilizationPeak
        | MetricId::KvUtilizationMean
        | MetricId::PrefixCacheHitRate => {
            format!("{:.1}", 100.0 * v)
        }
        MetricId::Preemptions | MetricId::CompletedRequests | MetricId::RejectedRequests => {
            if v.is_finite() && v >= 0.0 {
                group_thousands(v as u64)
            } else {
                "—".into()
            }
        }
        _ => fmt_num(v),
    }
}

/// A level as the table's first column shows it.
pub fn fmt_level(l: &Level) -> String {
    match l {
        Level::Concurrency(c) => group_thousands(u64::from(*c)),
        Level::RequestRate(r) => fmt_tick(*r),
    }
}

/// Groups thousands with a thin comma: 1234567 -> "1,234,567".
pub fn group_thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Three significant figures at most, whole numbers grouped: 12345.6 -> "12,346",
/// 123.45 -> "123", 12.345 -> "12.3", 1.2345 -> "1.23", 0.01234 -> "0.0123".
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    let a = v.abs();
    let sign = if v < 0.0 { "-" } else { "" };
    if a >= 100.0 {
        format!("{sign}{}", group_thousands(a.round() as u64))
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.2}")
    } else {
        // Three significant figures below 1.
        let digits = (-libm_log10_floor(a)) as usize + 2;
        format!("{v:.digits$}")
    }
}

fn libm_log10_floor(a: f64) -> i32 {
    // a in (0, 1): count the leading zeros after the point without floating-point logs.
    let mut e = 0;
    let mut x = a;
    while x < 1.0 {
        x *= 10.0;
        e -= 1;
    }
    e
}

/// Axis tick text: grouped thousands, otherwise at most 2 decimals without trailing zeros
/// (1 -> "1", 2.5 -> "2.5", 0.25 -> "0.25").
pub fn fmt_tick(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v.abs() >= 1000.0 {
        return fmt_num(v);
    }
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Bytes as GiB with one decimal: "79.2 GiB".
pub fn fmt_gib(bytes: f64) -> String {
    format!("{:.1} GiB", bytes / (1024.0 * 1024.0 * 1024.0))
}

/// The CSV `servesim sweep --csv` prints: `level,value,` then every metric name of
/// [`MetricId::all`]; a level is `concurrency` or `request_rate` and its value; metric values in
/// Rust's shortest round-trip form, empty when the metric is undefined.
pub fn to_csv(levels: &[LevelResult]) -> String {
    let metrics = MetricId::all();
    let mut out = String::from("level,value");
    for m in &metrics {
        out.push(',');
        out.push_str(&m.name());
    }
    out.push('\n');
    for l in levels {
        let kind = match l.level {
            Level::Concurrency(_) => "concurrency",
            Level::RequestRate(_) => "request_rate",
        };
        out.push_str(kind);
        out.push(',');
        out.push_str(&l.level.value().to_string());
        for m in &metrics {
            out.push(',');
            if let Some(v) = l.get(*m) {
                out.push_str(&v.to_string());
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_get_three_significant_figures_at_most() {
        assert_eq!(fmt_num(12345.6), "12,346");
        assert_eq!(fmt_num(123.45), "123");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(1.2345), "1.23");
        assert_eq!(fmt_num(0.012345), "0.0123");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(0.0), "0.00");
        assert_eq!(fmt_num(-2500.0), "-2,500");
        assert_eq!(fmt_num(f64::NAN), "—");
    }

    #[test]
    fn ticks_drop_trailing_zeros() {
        assert_eq!(fmt_tick(1.0), "1");
        assert_eq!(fmt_tick(2.5), "2.5");
        assert_eq!(fmt_tick(0.25), "0.25");
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(1800.0), "1,800");
        assert_eq!(fmt_tick(50.0), "50");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(1234567), "1,234,567");
    }

    #[test]
    fn gib_uses_binary_units() {
        assert_eq!(fmt_gib(80.0 * 1024.0 * 1024.0 * 1024.0), "80.0 GiB");
    }

    #[test]
    fn csv_has_the_cli_header_and_full_precision_values() {
        let mut sc = crate::core_api::Scenario::default_scenario();
        sc.sweep.concurrency = Some(vec![1.0, 2.0]);
        sc.sweep.duration_s = Some(10.0);
        sc.sweep.warmup_s = Some(1.0);
        let res = sc.resolve().unwrap().run().unwrap();
        let csv = to_csv(&res.levels);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3);
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(&header[..3], ["level", "value", "completed_requests"]);
        assert_eq!(header.len(), 2 + MetricId::all().len());
        assert!(lines[1].starts_with("concurrency,1,"));
        // Every value parses back to the same f64.
        let col = header
            .iter()
            .position(|h| *h == "output_tokens_per_s")
            .unwrap();
        let v: f64 = lines[2].split(',').nth(col).unwrap().parse().unwrap();
        assert_eq!(Some(v), res.levels[1].output_tokens_per_s);
    }

    #[test]
    fn fractions_show_as_percent_and_counts_as_integers() {
        assert_eq!(fmt_metric(MetricId::PrefixCacheHitRate, 0.8951), "89.5");
        assert_eq!(fmt_metric(MetricId::Preemptions, 1234.0), "1,234");
        assert_eq!(fmt_metric(MetricId::OutputTokensPerS, 1234.4), "1,234");
        assert_eq!(fmt_level(&Level::Concurrency(512)), "512");
        assert_eq!(fmt_level(&Level::RequestRate(0.25)), "0.25");
    }
}
