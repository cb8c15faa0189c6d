//! The page's "Which deployment?" panel as plain Rust (docs/web.md, docs/search.md): the search
//! options as typed (`SearchOptions`, text only: the search worker writes them as the core's
//! `search::RawSearch` in `search_form`, so the page links neither the core's search type nor a
//! copy of its fields), and the report the worker assembled read back for display (table, chart,
//! links). Numbers shown come from the report; the report's text itself is what
//! `servesim search --json` prints.

use crate::core_api::scenario::GpuRef;
use crate::core_api::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The search options as typed. Blank = the core's default (docs/search.md "Input"); each field
/// is one `RawSearch` / `RawDisaggSpace` field (`search_form::FIELDS` pairs them with the form
/// keys).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchOptions {
    /// GPU types, comma-separated (blank: the scenario's GPU).
    pub gpus: String,
    /// TP sizes, comma-separated (blank: 1, 2, 4, 8 up to the budget).
    pub tp: String,
    /// DP sizes (blank: 1).
    pub dp: String,
    /// "" (default: both for MoE), "off", "on", "off,on".
    pub ep: String,
    /// "" (default: both when the scenario has a speculative config), "off", "on", "off,on".
    pub spec: String,
    /// KV cache dtypes, comma-separated vLLM spellings (blank: the scenario's).
    pub kv: String,
    /// Weight precisions, comma-separated (blank: the scenario's `weight_precision`).
    pub weight_precisions: String,
    /// `max_num_seqs` values (blank: the scenario's).
    pub max_num_seqs: String,
    /// `max_num_batched_tokens` values for the aggregated candidates and the prefill pool
    /// (blank: the scenario's).
    pub max_num_batched_tokens: String,
    /// Replica counts (blank: 1).
    pub replicas: String,
    /// GPU budget (required).
    pub max_gpus: String,
    /// Bisection steps per candidate (blank: 6).
    pub refine_steps: String,
    /// "" (every level, the default) or "on" (stop at the first failing level).
    pub stop_at_crossing: String,
    /// Disaggregated prefill/decode candidates: "" (none), "also" (with the aggregated ones) or
    /// "only" (`servesim search --disagg` / `--pd-only`).
    pub disagg: String,
    /// `prefill:decode` replica counts, comma-separated (blank: 1:1). Used when `disagg` is set.
    pub pd_ratios: String,
    /// Prefill pool TP / DP sizes (blank: the TP / DP sizes above), expert parallelism (blank:
    /// the expert-parallelism choice) and `max_num_batched_tokens` values (blank: the values
    /// above, else the scenario's).
    pub pd_prefill_tp: String,
    pub pd_prefill_dp: String,
    pub pd_prefill_ep: String,
    pub pd_prefill_mnbt: String,
    /// Decode pool TP / DP sizes, expert parallelism (as the prefill pool's) and
    /// `max_num_batched_tokens` values (blank: the scenario's).
    pub pd_decode_tp: String,
    pub pd_decode_dp: String,
    pub pd_decode_ep: String,
    pub pd_decode_mnbt: String,
    /// $ per GPU-hour by GPU id (blank: the documented default).
    pub prices: BTreeMap<String, String>,
}

/// Default prices for the fields' placeholders: the core's table (docs/search.md "Cost").
pub fn default_price(gpu: &str) -> Option<(f64, &'static str)> {
    crate::core_api::search::cost::DEFAULT_PRICES
        .iter()
        .find(|p| p.gpu == gpu)
        .map(|p| (p.usd_per_gpu_hour, p.source))
}

impl SearchOptions {
    /// The GPU types the search will try (the scenario's when blank).
    pub fn gpu_list(&self, base: &Scenario) -> Vec<String> {
        let l: Vec<String> = self
            .gpus
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        if !l.is_empty() {
            return l;
        }
        match &base.gpu {
            GpuRef::Catalog(id) => vec![id.clone()],
            _ => Vec::new(),
        }
    }
}

/// One simulated level of a candidate, as the report has it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewLevel {
    pub level: f64,
    pub passes_sla: bool,
    pub output_tokens_per_s_per_gpu: f64,
    pub e2e_tokens_per_s_per_user: Option<f64>,
}

/// A candidate's operating point, as the report has it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewPoint {
    pub level: f64,
    pub basis: String,
    pub output_tokens_per_s_per_gpu: f64,
    pub e2e_tokens_per_s_per_user: Option<f64>,
    pub ttft_ms_p50: Option<f64>,
    pub usd_per_m_output_tokens: Option<f64>,
}

/// A candidate and its outcome, as the report has it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewCandidate {
    pub index: usize,
    pub label: String,
    pub num_gpus: u32,
    pub usd_per_gpu_hour: Option<f64>,
    pub outcome: ViewOutcome,
}

/// A candidate's outcome, as the report has it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewOutcome {
    /// `evaluated`, `pruned` or `failed`.
    pub status: String,
    #[serde(default)]
    pub stage: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub levels: Vec<ViewLevel>,
    #[serde(default)]
    pub operating_point: Option<ViewPoint>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewSummary {
    pub budget: usize,
    pub capacity: usize,
    pub bound: usize,
    pub failed: usize,
    pub evaluated: usize,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewFrontier {
    pub candidate: usize,
    pub level: f64,
    pub e2e_tokens_per_s_per_user: f64,
    pub output_tokens_per_s_per_gpu: f64,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ViewGate {
    pub metric: String,
    pub op: String,
    pub value: f64,
}

/// The report, read for display.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct SearchView {
    pub sla: Vec<ViewGate>,
    pub max_gpus: u32,
    /// The measured evidence per GPU id (`SearchReport::evidence`; absent in reports without it).
    #[serde(default)]
    pub evidence: BTreeMap<String, String>,
    pub summary: ViewSummary,
    pub ranking_by_throughput: Vec<usize>,
    pub ranking_by_cost: Vec<usize>,
    pub frontier: Vec<ViewFrontier>,
    pub candidates: Vec<ViewCandidate>,
}

impl SearchView {
    pub fn from_report(report: &str) -> Result<SearchView, String> {
        serde_json::from_str(report).map_err(|e| format!("the search report: {e}"))
    }

    /// The per-user SLA gate the chart draws (`e2e_tokens_per_s_per_user` >= / >).
    pub fn per_user_gate(&self) -> Option<f64> {
        self.sla
            .iter()
            .find(|g| g.metric == "e2e_tokens_per_s_per_user" && g.op.starts_with('>'))
            .map(|g| g.value)
    }

    /// Pruned and failed candidates with their reasons, in candidate order.
    pub fn not_simulated(&self) -> Vec<(&ViewCandidate, String)> {
        self.candidates
            .iter()
            .filter(|c| c.outcome.status != "evaluated")
            .map(|c| {
                let o = &c.outcome;
                let why = match o.status.as_str() {
                    "pruned" => format!(
                        "pruned ({}): {}",
                        o.stage.as_deref().unwrap_or("?"),
                        o.reason.as_deref().unwrap_or("")
                    ),
                    _ => format!("failed: {}", o.error.as_deref().unwrap_or("")),
                };
                (c, why)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_list_is_the_typed_one_or_the_scenarios() {
        let o = SearchOptions {
            gpus: " H100-SXM, H200 ,".into(),
            ..SearchOptions::default()
        };
        let base = Scenario::default_scenario();
        assert_eq!(o.gpu_list(&base), vec!["H100-SXM", "H200"]);
        assert_eq!(
            SearchOptions::default().gpu_list(&base),
            vec!["H100-SXM".to_string()]
        );
        assert_eq!(default_price("H200").map(|p| p.0), Some(3.59));
    }
}
