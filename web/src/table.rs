//! Number formatting for the page and the results exports (CSV and JSON). Pure Rust, tested
//! natively.

use crate::core_api::{LevelRow, OperatingPoint, Scenario};
use serde::Serialize;
use servesim_core::metric::{MetricId, Stat};

/// The results table's columns, in order (the CSV has every metric).
pub fn table_columns() -> Vec<MetricId> {
    vec![
        MetricId::OutputTokensPerS,
        MetricId::OutputTokensPerSPerGpu,
        MetricId::OutputTokensPerSPerUser,
        MetricId::TtftMs(Stat::P50),
        MetricId::TtftMs(Stat::P90),
        MetricId::ItlMs(Stat::Mean),
        MetricId::ItlMs(Stat::P90),
        MetricId::E2eS(Stat::P50),
        MetricId::RequestsPerS,
    ]
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

/// CSV with a header of metric keys (`concurrency` first, then every metric present in any row,
/// in [`MetricId::all`] order). Values are written in full precision (Rust's shortest
/// round-trip form) so the CSV matches the CLI's JSON exactly.
pub fn to_csv(rows: &[LevelRow]) -> String {
    let cols: Vec<MetricId> = MetricId::all()
        .into_iter()
        .filter(|m| rows.iter().any(|r| r.get(*m).is_some()))
        .collect();
    let mut out = String::from("concurrency");
    for c in &cols {
        out.push(',');
        out.push_str(&c.name());
    }
    out.push('\n');
    for r in rows {
        out.push_str(&r.concurrency.to_string());
        for c in &cols {
            out.push(',');
            if let Some(v) = r.get(*c) {
                out.push_str(&format!("{v}"));
            }
        }
        out.push('\n');
    }
    out
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a Scenario,
    levels: &'a [LevelRow],
    operating_point: Option<&'a OperatingPoint>,
}

/// The scenario and its results as pretty JSON.
pub fn to_json(scenario: &Scenario, rows: &[LevelRow], op: Option<&OperatingPoint>) -> String {
    serde_json::to_string_pretty(&ResultsJson {
        scenario,
        levels: rows,
        operating_point: op,
    })
    .expect("results serialise")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

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

    fn row(c: u32, pairs: &[(MetricId, f64)]) -> LevelRow {
        LevelRow {
            concurrency: c,
            values: pairs
                .iter()
                .map(|(m, v)| (m.name(), *v))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn csv_has_a_column_per_present_metric_and_full_precision_values() {
        let rows = vec![
            row(
                1,
                &[
                    (MetricId::OutputTokensPerS, 0.1 + 0.2),
                    (MetricId::TtftMs(Stat::P90), 12.5),
                ],
            ),
            row(8, &[(MetricId::OutputTokensPerS, 800.0)]),
        ];
        let csv = to_csv(&rows);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "concurrency,output_tokens_per_s,ttft_ms_p90");
        assert_eq!(lines[1], "1,0.30000000000000004,12.5");
        assert_eq!(lines[2], "8,800,");
        // Every value parses back to the same f64.
        let v: f64 = lines[1].split(',').nth(1).unwrap().parse().unwrap();
        assert_eq!(v, 0.1 + 0.2);
    }

    #[test]
    fn json_export_parses_back_with_scenario_and_levels() {
        let s = Scenario::default();
        let rows = vec![row(4, &[(MetricId::RequestsPerS, 2.0)])];
        let j: serde_json::Value = serde_json::from_str(&to_json(&s, &rows, None)).unwrap();
        assert_eq!(j["levels"][0]["concurrency"], 4);
        assert_eq!(j["levels"][0]["values"]["requests_per_s"], 2.0);
        assert_eq!(Scenario::from_json(&j["scenario"].to_string()).unwrap(), s);
    }
}
