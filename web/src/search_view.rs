//! The page's "Which deployment?" panel as plain Rust (docs/web.md, docs/search.md): the search
//! options as text fields, written as the `RawSearch` JSON the worker validates (the page does not
//! link `search`; field names are the core's, checked by the unit tests against
//! `RawSearch::from_json`), and the report the worker assembled read back for display (table,
//! chart, links). Numbers shown come from the report; the report's text itself is what
//! `servesim search --json` prints.

use crate::core_api::dtype::KvCacheDtype;
use crate::core_api::scenario::GpuRef;
use crate::core_api::Scenario;
use crate::form::FieldErrors;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The search options as typed. Blank = the core's default (docs/search.md "Input").
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// GPU budget (required).
    pub max_gpus: String,
    /// Disaggregated prefill/decode candidates: "" (none), "also" (with the aggregated ones) or
    /// "only" (`servesim search --disagg` / `--pd-only`).
    pub disagg: String,
    /// `prefill:decode` replica counts, comma-separated (blank: 1:1). Used when `disagg` is set.
    pub pd_ratios: String,
    /// Prefill pool TP / DP sizes (blank: the TP / DP sizes above).
    pub pd_prefill_tp: String,
    pub pd_prefill_dp: String,
    /// Decode pool TP / DP sizes (blank: the TP / DP sizes above).
    pub pd_decode_tp: String,
    pub pd_decode_dp: String,
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

fn list<T: std::str::FromStr>(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<Vec<T>> {
    if t.trim().is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<T>() {
            Ok(v) => out.push(v),
            Err(_) => {
                e.insert(
                    key,
                    format!("`{part}`: a comma-separated list of whole numbers"),
                );
                return None;
            }
        }
    }
    Some(out)
}

fn on_off(e: &mut FieldErrors, key: &'static str, t: &str) -> Option<Vec<bool>> {
    let mut out = Vec::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part {
            "off" => out.push(false),
            "on" => out.push(true),
            _ => {
                e.insert(key, "off, on or off,on (blank: the default)".into());
                return None;
            }
        }
    }
    (!out.is_empty()).then_some(out)
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

    /// The `RawSearch` JSON of these options over `base` (the scenario: model, workload, sweep
    /// levels, SLA gates, engine), or the fields at fault.
    pub fn to_search_json(&self, base: &Scenario) -> Result<String, FieldErrors> {
        let mut e = FieldErrors::new();
        let mut o = serde_json::Map::new();
        let base_json: serde_json::Value =
            serde_json::from_str(&base.to_json()).map_err(|err| {
                let mut e = FieldErrors::new();
                e.insert("search_base", err.to_string());
                e
            })?;
        o.insert("base".into(), base_json);
        let gpus: Vec<String> = self
            .gpus
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        if !gpus.is_empty() {
            o.insert("gpus".into(), gpus.into());
        }
        match self.max_gpus.trim().parse::<u32>() {
            Ok(n) => {
                o.insert("max_gpus".into(), n.into());
            }
            Err(_) => {
                e.insert("search_max_gpus", "the GPU budget: a whole number".into());
            }
        }
        if let Some(v) = list::<u32>(&mut e, "search_tp", &self.tp) {
            o.insert("tp".into(), v.into());
        }
        if let Some(v) = list::<u32>(&mut e, "search_dp", &self.dp) {
            o.insert("dp".into(), v.into());
        }
        if let Some(v) = on_off(&mut e, "search_ep", &self.ep) {
            o.insert("expert_parallel".into(), v.into());
        }
        if let Some(v) = on_off(&mut e, "search_spec", &self.spec) {
            o.insert("speculative".into(), v.into());
        }
        let mut kvs = Vec::new();
        for part in self.kv.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match KvCacheDtype::parse(part) {
                Some(k) => kvs.push(k),
                None => {
                    e.insert(
                        "search_kv",
                        format!("`{part}`: use {}", KvCacheDtype::NAMES.join(", ")),
                    );
                }
            }
        }
        if !kvs.is_empty() {
            o.insert("kv_cache_dtypes".into(), serde_json::json!(kvs));
        }
        let aggregated = match self.disagg.trim() {
            "" => None,
            "also" => Some(None),
            "only" => Some(Some(false)),
            _ => {
                e.insert("search_disagg", "none, also or only".into());
                None
            }
        };
        if let Some(aggregated) = aggregated {
            // The core's `RawDisaggSpace` fields, as `servesim search --disagg --pd-*` builds
            // them (written by name like the fields above, so the page links no serializer of
            // the core's type; the unit tests read it back with the core's type, which denies
            // unknown fields).
            let mut d = serde_json::Map::new();
            let ratios: Vec<String> = self
                .pd_ratios
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(String::from)
                .collect();
            if !ratios.is_empty() {
                d.insert("pd_ratios".into(), ratios.into());
            }
            for (name, key, text) in [
                ("prefill_tp", "search_pd_prefill_tp", &self.pd_prefill_tp),
                ("prefill_dp", "search_pd_prefill_dp", &self.pd_prefill_dp),
                ("decode_tp", "search_pd_decode_tp", &self.pd_decode_tp),
                ("decode_dp", "search_pd_decode_dp", &self.pd_decode_dp),
            ] {
                if let Some(v) = list::<u32>(&mut e, key, text) {
                    d.insert(name.into(), v.into());
                }
            }
            if let Some(a) = aggregated {
                d.insert("aggregated".into(), a.into());
            }
            o.insert("disagg".into(), d.into());
        }
        let mut prices = serde_json::Map::new();
        for g in self.gpu_list(base) {
            let t = self.prices.get(&g).map(|s| s.trim()).unwrap_or("");
            if t.is_empty() {
                continue;
            }
            match t.parse::<f64>() {
                Ok(v) if v.is_finite() => {
                    prices.insert(g, v.into());
                }
                _ => {
                    e.insert(
                        "search_prices",
                        format!("{g}: $ per GPU-hour, a number (blank: the default)"),
                    );
                }
            }
        }
        if !prices.is_empty() {
            o.insert("gpu_hour_usd".into(), prices.into());
        }
        if e.is_empty() {
            Ok(serde_json::Value::Object(o).to_string())
        } else {
            Err(e)
        }
    }
}

/// The form key of a search error's field (the core's `SearchError::field`).
pub fn search_form_key(field: &str) -> &'static str {
    match field.split('.').next().unwrap_or("") {
        "gpus" => "search_gpus",
        "max_gpus" => "search_max_gpus",
        "tp" => "search_tp",
        "dp" => "search_dp",
        "expert_parallel" => "search_ep",
        "speculative" => "search_spec",
        "gpu_hour_usd" => "search_prices",
        "kv_cache_dtypes" => "search_kv",
        "disagg" => match field {
            "disagg.pd_ratios" => "search_pd_ratios",
            "disagg.prefill_tp" => "search_pd_prefill_tp",
            "disagg.prefill_dp" => "search_pd_prefill_dp",
            "disagg.decode_tp" => "search_pd_decode_tp",
            "disagg.decode_dp" => "search_pd_decode_dp",
            _ => "search",
        },
        _ => "search",
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
    use crate::core_api::search::{RawDisaggSpace, RawSearch};

    fn base() -> Scenario {
        Scenario::default_scenario()
    }

    #[test]
    fn options_write_the_cores_search_json() {
        let o = SearchOptions {
            gpus: "H100-SXM, H200".into(),
            tp: "1,2".into(),
            dp: "1".into(),
            ep: "off".into(),
            spec: "off".into(),
            max_gpus: "4".into(),
            prices: [("H200".to_string(), "3".to_string())].into(),
            ..SearchOptions::default()
        };
        let json = o.to_search_json(&base()).unwrap();
        let raw = RawSearch::from_json(&json).unwrap();
        assert_eq!(raw.base.to_json(), base().to_json());
        assert_eq!(raw.gpus, Some(vec!["H100-SXM".into(), "H200".into()]));
        assert_eq!(raw.max_gpus, 4);
        assert_eq!(raw.tp, Some(vec![1, 2]));
        assert_eq!(raw.dp, Some(vec![1]));
        assert_eq!(raw.expert_parallel, Some(vec![false]));
        assert_eq!(raw.speculative, Some(vec![false]));
        assert_eq!(raw.gpu_hour_usd.get("H200"), Some(&3.0));
        assert_eq!(raw.gpu_hour_usd.get("H100-SXM"), None, "blank: the default");
        assert!(raw.validate().is_ok());
        // Blank options are the core's defaults.
        let o = SearchOptions {
            max_gpus: "8".into(),
            ..SearchOptions::default()
        };
        let raw = RawSearch::from_json(&o.to_search_json(&base()).unwrap()).unwrap();
        assert_eq!((raw.gpus, raw.tp, raw.expert_parallel), (None, None, None));
        assert_eq!(o.gpu_list(&base()), vec!["H100-SXM".to_string()]);
    }

    #[test]
    fn disaggregated_options_write_the_cores_disagg_space() {
        let o = SearchOptions {
            max_gpus: "8".into(),
            tp: "1,2,4,8".into(),
            kv: "auto, fp8".into(),
            disagg: "also".into(),
            pd_ratios: "1:1, 1:2,2:1".into(),
            pd_prefill_tp: "2".into(),
            pd_decode_tp: "2,4".into(),
            // Ignored unless disaggregated candidates are asked for: see the next case.
            ..SearchOptions::default()
        };
        let raw = RawSearch::from_json(&o.to_search_json(&base()).unwrap()).unwrap();
        // What `servesim search --disagg --pd-ratios 1:1,1:2,2:1 --pd-prefill-tp 2
        // --pd-decode-tp 2,4` builds (cmd_search.rs).
        let want = RawDisaggSpace {
            pd_ratios: Some(vec!["1:1".into(), "1:2".into(), "2:1".into()]),
            prefill_tp: Some(vec![2]),
            decode_tp: Some(vec![2, 4]),
            ..RawDisaggSpace::default()
        };
        assert_eq!(raw.disagg, Some(want));
        assert_eq!(
            raw.kv_cache_dtypes,
            Some(vec![KvCacheDtype::Auto, KvCacheDtype::Fp8])
        );
        let space = raw.validate().unwrap();
        assert_eq!(space.candidates.len(), 4 * 2 + 3 * 2 * 2);
        // Only P/D: the CLI's --pd-only.
        let only = SearchOptions {
            disagg: "only".into(),
            pd_decode_dp: "1".into(),
            pd_prefill_dp: "1".into(),
            ..o.clone()
        };
        let raw = RawSearch::from_json(&only.to_search_json(&base()).unwrap()).unwrap();
        let d = raw.disagg.clone().unwrap();
        assert_eq!(
            (d.aggregated, d.prefill_dp, d.decode_dp),
            (Some(false), Some(vec![1]), Some(vec![1]))
        );
        assert_eq!(raw.validate().unwrap().candidates.len(), 3 * 2 * 2);
        // No disaggregation: the P/D fields are not part of the search.
        let none = SearchOptions {
            disagg: String::new(),
            ..o
        };
        let raw = RawSearch::from_json(&none.to_search_json(&base()).unwrap()).unwrap();
        assert_eq!(raw.disagg, None);
    }

    #[test]
    fn bad_options_name_their_field() {
        let o = SearchOptions {
            tp: "1,eight".into(),
            ep: "maybe".into(),
            max_gpus: "".into(),
            prices: [("H100-SXM".to_string(), "cheap".to_string())].into(),
            kv: "fp4".into(),
            disagg: "also".into(),
            pd_decode_tp: "two".into(),
            ..SearchOptions::default()
        };
        let e = o.to_search_json(&base()).unwrap_err();
        for k in [
            "search_tp",
            "search_ep",
            "search_max_gpus",
            "search_prices",
            "search_kv",
            "search_pd_decode_tp",
        ] {
            assert!(e.contains_key(k), "{k}: {e:?}");
        }
        assert_eq!(search_form_key("max_gpus"), "search_max_gpus");
        assert_eq!(search_form_key("disagg.pd_ratios"), "search_pd_ratios");
        assert_eq!(search_form_key("disagg.prefill_expert_parallel"), "search");
        let bad_mode = SearchOptions {
            max_gpus: "2".into(),
            disagg: "sometimes".into(),
            ..SearchOptions::default()
        };
        assert!(bad_mode
            .to_search_json(&base())
            .unwrap_err()
            .contains_key("search_disagg"));
        assert_eq!(default_price("H200").map(|p| p.0), Some(3.59));
    }
}
