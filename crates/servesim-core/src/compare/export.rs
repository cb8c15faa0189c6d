//! Markdown (the validation report's shape) and CSV (one row per arm, metric and level).

use super::score::level_label;
use super::ComparisonReport;

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl ComparisonReport {
    /// The report: error definition, per-arm scored / excluded levels and the calibration runs
    /// behind the arm's predictions ("measured evidence: ..."), the metric table
    /// "| arm | metric | signed mean | MAPE % | shape error % | sign |" and the KV pool table.
    pub fn to_markdown(&self) -> String {
        let sim = &self.simulator_name;
        let mut out = String::new();
        out.push_str(&format!(
            "Signed error 100 * ({sim} / measured - 1).\n\n## Arms\n\n"
        ));
        for arm in &self.arms {
            out.push_str(&format!(
                "### {}\n\n{}\n",
                md_cell(&arm.arm),
                arm.levels_line()
            ));
            if let Some(e) = &arm.evidence {
                // One sentence ("measured evidence: ..."), a paragraph of its own: `|` needs no
                // escaping outside a table.
                out.push_str(&format!("{}\n", e.replace('\n', " ")));
            }
            if !arm.unscored_metrics.is_empty() {
                let parts: Vec<String> = arm
                    .unscored_metrics
                    .iter()
                    .map(|(m, r)| format!("{} ({r})", m.label()))
                    .collect();
                out.push_str(&format!("Not scored: {}.\n", parts.join("; ")));
            }
            out.push('\n');
        }
        out.push_str("## Metrics\n\nOver the scored levels. MAPE is mean absolute error; shape error divides each side by its lowest-level value and excludes that level.\n\n");
        out.push_str("| arm | metric | signed mean | MAPE % | shape error % | sign |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for arm in &self.arms {
            for m in &arm.metrics {
                let shape = m
                    .shape_error_pct
                    .map(|s| format!("{s:.1}"))
                    .unwrap_or_else(|| "n/a".into());
                out.push_str(&format!(
                    "| {} | {} | {:+.1}% | {:.1} | {} | {} |\n",
                    md_cell(&arm.arm),
                    m.metric.label(),
                    m.signed_mean_pct,
                    m.mape_pct,
                    shape,
                    m.sign.describe(sim)
                ));
            }
        }
        out.push_str(&format!(
            "\n## KV pool\n\n{sim}'s KV capacity per replica divided by the KV tokens vLLM logged at start-up (\"GPU KV cache size: N tokens\").\n\n| arm | {sim} / vLLM-logged |\n|---|---|\n"
        ));
        for arm in &self.arms {
            let cell = match (arm.kv_pool_ratio, arm.kv_logged_tokens) {
                (Some(r), _) => format!("{r:.2}"),
                (None, None) => "not logged".into(),
                (None, Some(_)) => "not predicted".into(),
            };
            out.push_str(&format!("| {} | {} |\n", md_cell(&arm.arm), cell));
        }
        out
    }

    /// `arm,metric,level_kind,level,level_label,predicted,measured,signed_error_pct`, one row per
    /// scored point.
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "arm,metric,level_kind,level,level_label,predicted,measured,signed_error_pct\n",
        );
        for arm in &self.arms {
            for m in &arm.metrics {
                for p in &m.points {
                    out.push_str(&format!(
                        "{},{},{},{},{},{},{},{}\n",
                        csv_cell(&arm.arm),
                        m.metric.name(),
                        csv_cell(arm.level_kind.name()),
                        p.level,
                        csv_cell(&level_label(arm.level_kind, p.level)),
                        p.predicted,
                        p.measured,
                        p.signed_error_pct
                    ));
                }
            }
        }
        out
    }
}
