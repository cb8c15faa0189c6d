//! The page's only door into `servesim_core`: the scenario type (the core's own [`Scenario`], so
//! a share link, the page and `servesim sweep --scenario` carry the same JSON), catalogs,
//! validation, capacity, the sweep report, and the core modules the page's files use (re-exported
//! below, so page files write `crate::core_api::metric::MetricId`, never `servesim_core::...`;
//! only this module and the worker's own modules, `protocol`, `command_tools`, `search_form`,
//! `search_tools`, `worker`, name the core crate; `tests::page_files_reach_the_core_only_through_this_module`
//! keeps it so). Everything the UI shows comes through here; this module uses no page module.

use serde::{Deserialize, Serialize};
use servesim_core::capacity::{self, CapacityReport, RequestShape};

use servesim_core::workload::{Content, WorkloadSpec};
/// The core's modules the page's files use (types, pure functions and data; what runs a
/// simulation stays behind the worker, `scripts/check-page-binary.py`).
pub use servesim_core::{
    compare, deploy, dtype, gpu, metric, metrics, offload, perf, scenario, search, settings, share,
    sla_refine, speculative, sweep, validate, vllm, workload,
};
use std::collections::BTreeMap;

pub mod topology;
pub use topology::{
    report_topology, router_choice, set_router_choice, set_topology_replicas,
    topology_replicas_text, topology_summary, PdSummary, PoolSummary, RouterChoice,
    TopologySummary,
};

pub use servesim_core::metrics::LevelResult;
pub use servesim_core::scenario::{
    CustomModel, GpuRef, ModelRef, ResolvedScenario, Scenario, ScenarioError, SweepReport,
};
pub use servesim_core::sweep::OperatingPoint;
pub use servesim_core::workload::Level;

/// One model in the searchable list.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelEntry {
    pub id: String,
}

/// One GPU in the select.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuEntry {
    pub id: String,
    pub label: String,
    /// Memory vLLM sees, GiB.
    pub memory_gib: f64,
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The model field's list: the shipped configs, then the known releases they stand in for
/// (`MiniMaxAI/MiniMax-M2.5`, `moonshotai/Kimi-K2-Thinking`, ...), which the core resolves.
pub fn models() -> Vec<ModelEntry> {
    servesim_core::model::ids::known_ids()
        .into_iter()
        .map(|id| ModelEntry { id: id.into() })
        .collect()
}

/// vLLM's `--all2all-backend` names the core models (docs/step-time.md "5a").
pub fn all2all_backends() -> Vec<&'static str> {
    servesim_core::deploy::All2AllBackend::ALL
        .iter()
        .map(|b| b.name())
        .collect()
}

/// vLLM's `--performance-mode` names (docs/capacity.md "Engine defaults").
pub fn performance_modes() -> Vec<&'static str> {
    servesim_core::deploy::PerformanceMode::ALL
        .iter()
        .map(|m| m.name())
        .collect()
}

pub fn gpus() -> Vec<GpuEntry> {
    gpu::catalog()
        .iter()
        .map(|g| GpuEntry {
            id: g.id.clone(),
            label: g.name.clone(),
            memory_gib: g.memory_visible.0 as f64 / GIB,
        })
        .collect()
}

/// vLLM's resolved defaults for the engine fields the form leaves blank, as text.
pub fn engine_defaults(s: &Scenario) -> BTreeMap<&'static str, String> {
    let mut m = BTreeMap::new();
    if let Ok(r) = s.resolve() {
        let e = &r.deployment.engine;
        m.insert(
            "gpu_memory_utilization",
            format!("{}", e.gpu_memory_utilization),
        );
        m.insert("max_num_seqs", e.max_num_seqs.to_string());
        m.insert(
            "max_num_batched_tokens",
            e.max_num_batched_tokens.to_string(),
        );
        m.insert("block_size", e.block_size.to_string());
        m.insert("max_model_len", e.max_model_len.to_string());
        m.insert(
            "long_prefill_token_threshold",
            e.long_prefill_token_threshold.to_string(),
        );
        m.insert("cudagraph_mode", e.cudagraph_mode.name().to_string());
        m.insert("gpus", r.deployment.num_gpus.to_string());
    }
    m
}

/// One slice of a GPU's memory, for the breakdown bar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemSlice {
    pub label: String,
    pub bytes: f64,
}

/// What the capacity card shows (from the core's [`CapacityReport`]); computed in the worker
/// (`ToWorker::Check`) and sent to the page whole.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityView {
    pub fits: bool,
    /// Why it does (not) fit, in one sentence.
    pub reason: String,
    /// vLLM's start-up error when it does not fit.
    pub vllm_error: Option<String>,
    /// (setting, value, effect) changes that make it fit.
    pub fixes: Vec<(String, String, String)>,
    /// Memory vLLM sees on one GPU.
    pub gpu_bytes: f64,
    /// Per-GPU usage, in order; the rest of `gpu_bytes` is headroom.
    pub per_gpu: Vec<MemSlice>,
    /// KV cache tokens per engine (vLLM's `GPU KV cache size: N tokens`).
    pub kv_cache_tokens: u64,
    /// The request shape used for `requests_that_fit` (mean input, mean output tokens).
    pub shape: Option<(u64, u64)>,
    /// Requests of that shape that fit at once per engine (KV and max_num_seqs).
    pub requests_that_fit: Option<u64>,
    pub replicas: u32,
    pub engines: u32,
    pub log_lines: Vec<String>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
    /// Which efficiency table the simulation will use (`scenario::Calibration::summary`).
    pub calibration: String,
    /// ServeSim's error on the measured runs of that table's calibration key and this model
    /// family (`ResolvedScenario::evidence`, docs/accuracy.md "Per calibration key and model
    /// family").
    #[serde(default)]
    pub evidence: String,
    /// The CPU KV offload tier in one line (`CpuTierReport::summary_line`, as `servesim
    /// capacity` prints it); absent without a tier.
    #[serde(default)]
    pub cpu_tier: Option<String>,
    /// The drafter in one line ([`drafter_line`]); absent without speculative decoding.
    #[serde(default)]
    pub drafter: Option<String>,
}

fn view_of(r: &CapacityReport, shape: Option<RequestShape>, calibration: String) -> CapacityView {
    let b = &r.breakdown;
    let pos = |v: i64| v.max(0) as f64;
    let mut per_gpu = vec![
        MemSlice {
            label: "weights".into(),
            bytes: pos(b.weights.bytes),
        },
        MemSlice {
            label: "activation (profile run)".into(),
            bytes: pos(b.activation.bytes),
        },
        MemSlice {
            label: "non-torch".into(),
            bytes: pos(b.non_torch.bytes),
        },
    ];
    if b.cudagraph_in_budget {
        per_gpu.push(MemSlice {
            label: "CUDA graphs".into(),
            bytes: pos(b.cudagraph.bytes),
        });
    }
    per_gpu.push(MemSlice {
        label: "KV cache".into(),
        bytes: pos(b.kv_pool.bytes),
    });
    CapacityView {
        fits: r.fits,
        reason: r.reason.clone(),
        vllm_error: r.vllm_error.clone(),
        fixes: r
            .fixes
            .iter()
            .map(|f| (f.setting.clone(), f.value.clone(), f.effect.clone()))
            .collect(),
        gpu_bytes: pos(b.visible.bytes),
        per_gpu,
        kv_cache_tokens: r.kv_cache_tokens,
        shape: shape.map(|s| (s.isl, s.osl)),
        requests_that_fit: r.requests_fit.map(|f| f.at_once),
        replicas: r.replicas,
        engines: r.engines,
        log_lines: r.log_lines.clone(),
        warnings: r.warnings.clone(),
        notes: r.notes.clone(),
        calibration,
        evidence: String::new(),
        cpu_tier: r.cpu_tier.as_ref().map(|t| t.summary_line()),
        drafter: None,
    }
}

/// The mean request of a workload, for "requests that fit at once": synthetic = mean input
/// (plus the shared prefix) and mean output; agentic = the mean turn, whose input is the
/// conversation so far, `first + (turns - 1) / 2 x (new tokens per turn + output)`; a trace =
/// its mean input and output lengths. Means of the distributions before clamping.
pub fn request_shape(w: &WorkloadSpec) -> Option<RequestShape> {
    let r = |v: f64| libm::round(v).max(1.0) as u64;
    match &w.content {
        Content::Synthetic {
            input,
            output,
            shared_prefix,
        } => Some(RequestShape {
            isl: r(input.nominal_mean() + shared_prefix.map(|p| p.tokens as f64).unwrap_or(0.0)),
            osl: r(output.nominal_mean()),
        }),
        Content::Agentic(a) => {
            let per_turn = a.tokens_per_turn.nominal_mean() + a.output_tokens.nominal_mean();
            Some(RequestShape {
                isl: r(a.first_turn_tokens as f64 + (a.turns as f64 - 1.0) / 2.0 * per_turn),
                osl: r(a.output_tokens.nominal_mean()),
            })
        }
        Content::Trace(t) if !t.is_empty() => {
            let n = t.len() as f64;
            Some(RequestShape {
                isl: r(t.iter().map(|x| x.input_length as f64).sum::<f64>() / n),
                osl: r(t.iter().map(|x| x.output_length as f64).sum::<f64>() / n),
            })
        }
        Content::Trace(_) => None,
    }
}

/// vLLM's start-up memory sizing for the scenario (`capacity::compute`, as `servesim capacity`),
/// with the workload's mean request as the request shape; its warnings add the workload's
/// against the deployment (requests over a stated or auto-fitted `max_model_len`, as `servesim
/// sweep` prints them).
pub fn capacity(s: &Scenario) -> Result<CapacityView, String> {
    let r = s.resolve().map_err(|e| e.to_string())?;
    let shape = request_shape(&r.workload);
    capacity::compute(&r.deployment, shape)
        .map(|c| {
            let mut v = CapacityView {
                drafter: drafter_line(&r.deployment, r.disagg.is_some()),
                evidence: r.evidence().summary,
                ..view_of(&c, shape, r.calibration.summary.clone())
            };
            v.warnings.extend(r.warnings());
            v
        })
        .map_err(|e| e.to_string())
}

/// The drafter of a resolved deployment in one line: method, `k`, the acceptance distribution
/// the simulation draws from (`SpeculativeSettings::accepted_pmf`, its per-position rates and
/// mean), and the drafter's memory: what the budget counts for MTP (weights per GPU and KV per
/// token, [`mtp_memory_clause`]) or what it leaves out for EAGLE / draft models (docs/capacity.md
/// "Drafter memory"). `disagg`: the deployment is a decode pool.
pub fn drafter_line(d: &servesim_core::deploy::Deployment, disagg: bool) -> Option<String> {
    use servesim_core::speculative::SpecMethod;
    let sp = d.engine.speculative.as_ref()?;
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| {
                format!("{:.4}", x)
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let k = sp.num_speculative_tokens;
    let who = match (sp.method, &sp.draft_model) {
        (SpecMethod::Mtp, _) => format!("mtp ({} MTP layer(s))", sp.mtp_layers),
        (_, Some(m)) => format!("{} ({m})", sp.method.name()),
        (m, None) => m.name().to_string(),
    };
    let not_counted = match sp.method {
        SpecMethod::Mtp => mtp_memory_clause(d),
        SpecMethod::Ngram => "n-gram needs no GPU memory".to_string(),
        _ => "the drafter's weights and KV cache are not in this memory budget".to_string(),
    };
    Some(format!(
        "Drafter{}: {who}, num_speculative_tokens {k}; acceptance drawn per request and step from P(accepted = 0..{k}) = {}, per-position rates {}, mean acceptance length {:.3}; {not_counted} (docs/engine.md).",
        if disagg { " (decode pool; the prefill pool runs none)" } else { "" },
        list(&sp.accepted_pmf),
        list(&sp.rates_per_pos()),
        sp.mean_acceptance_length,
    ))
}

/// What the memory budget counts for the MTP drafter, per GPU (docs/capacity.md "Drafter
/// memory"): its weights (`Deployment::drafter_weight_bytes_per_gpu`) and the KV its layers add
/// (`Deployment::kv_cache_spec` against the target's spec: bytes per token, and per-request
/// sliding-window state when the MTP layer has only a window).
fn mtp_memory_clause(d: &servesim_core::deploy::Deployment) -> String {
    let n = d.drafter_mtp_layers();
    let weights = d.drafter_weight_bytes_per_gpu().unwrap_or(0) as f64 / GIB;
    let with = d.kv_cache_spec().ok();
    let without = d
        .model
        .kv_cache_spec(d.kv_cache_dtype, d.par.tp, d.engine.block_size)
        .ok();
    let kv = match (with, without) {
        (Some(a), Some(b)) => {
            let per_token = a.bytes_per_token() - b.bytes_per_token();
            let fixed = a
                .per_request_fixed_bytes
                .saturating_sub(b.per_request_fixed_bytes);
            let mut t = format!("{per_token:.0} B per token");
            if fixed > 0 {
                t.push_str(&format!(
                    " and {:.1} KiB of sliding-window state per request",
                    fixed as f64 / 1024.0
                ));
            }
            t
        }
        _ => "their KV".to_string(),
    };
    format!(
        "the memory budget counts the {n} MTP layer(s) as vLLM loads them: {weights:.2} GiB of weights per GPU (sharded like a decoder layer) and their KV cache in the target's ({kv} per GPU)"
    )
}

/// The URL fragment (without `#`) that carries a scenario: `s=v1.<...>` of its canonical JSON.
pub fn fragment_for(s: &Scenario) -> String {
    format!("s={}", servesim_core::share::encode(&s.to_json()))
}

/// The share link of a scenario, or why a link cannot carry it.
#[derive(Clone, Debug, PartialEq)]
pub enum ShareLink {
    /// The fragment (`s=v1.…`); it decodes back to exactly this scenario's JSON.
    Fits(String),
    /// The link would not reopen (the decoder's limits: 64 KiB encoded, 1 MiB of JSON), e.g.
    /// a large uploaded trace: offer the scenario file instead.
    TooLarge {
        encoded_bytes: usize,
        json_bytes: usize,
    },
}

/// The scenario's link, offered only when `share::decode` accepts it and gives back the same
/// JSON: the page never produces a link that cannot be reopened.
pub fn share_link(s: &Scenario) -> ShareLink {
    let json = s.to_json();
    let code = servesim_core::share::encode(&json);
    match servesim_core::share::decode(&code) {
        Ok(back) if back == json => ShareLink::Fits(format!("s={code}")),
        _ => ShareLink::TooLarge {
            encoded_bytes: code.len(),
            json_bytes: json.len(),
        },
    }
}

/// What the page says when the link cannot carry the scenario.
pub fn link_too_large_message(encoded_bytes: usize, json_bytes: usize) -> String {
    let kib = |b: usize| (b as f64 / 1024.0 * 10.0).round() / 10.0;
    format!(
        "The link can't carry this scenario: it encodes to {} KiB ({} KiB of JSON, mostly the \
         embedded trace); a link holds at most {} KiB encoded and {} KiB of JSON. Download the \
         scenario file instead: open it here with \"Open scenario file\" (Scenario JSON box) or \
         run it with `servesim sweep --scenario scenario.json`.",
        kib(encoded_bytes),
        kib(json_bytes),
        servesim_core::share::MAX_ENCODED_BYTES / 1024,
        servesim_core::share::MAX_INFLATED_BYTES / 1024,
    )
}

/// The scenario a URL fragment carries: `Ok(None)` when the fragment has no scenario,
/// `Err(message)` when it has a damaged one or one this build cannot read (the page then shows
/// the message and the default).
pub fn scenario_from_fragment(frag: &str) -> Result<Option<Scenario>, String> {
    let frag = frag.trim_start_matches('#');
    let Some(code) = frag.strip_prefix("s=") else {
        return Ok(None);
    };
    let json = servesim_core::share::decode(code).map_err(|e| e.to_string())?;
    Scenario::from_json(&json).map(Some).map_err(|e| {
        let old = matches!(e, ScenarioError::Version { .. })
            || matches!(&e, ScenarioError::Json { field, .. } if field == "version");
        if old {
            format!("the link is from an older or unknown version of ServeSim ({e})")
        } else {
            format!("the link holds a scenario this version cannot read ({e})")
        }
    })
}

/// The x-axis name of a sweep's levels.
pub fn level_axis(levels: &[LevelResult]) -> &'static str {
    match levels.first().map(|l| l.level) {
        Some(Level::RequestRate(_)) => "request rate (req/s)",
        _ => "concurrency (clients)",
    }
}

/// One entry of the recent-scenarios list kept in localStorage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recent {
    pub label: String,
    pub fragment: String,
}

/// Most recent first, no duplicates, at most [`RECENT_MAX`].
pub fn push_recent(list: &mut Vec<Recent>, r: Recent) {
    list.retain(|x| x.fragment != r.fragment);
    list.insert(0, r);
    list.truncate(RECENT_MAX);
}

pub const RECENT_MAX: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario replaying `lines` Mooncake trace lines; `random` makes the hash ids
    /// incompressible (a fixed LCG, so the test is deterministic).
    fn trace_scenario(lines: usize, random: bool) -> Scenario {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut jsonl = String::new();
        for i in 0..lines {
            let ids: Vec<String> = (0..20)
                .map(|k| {
                    if random {
                        x = x
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        ((x >> 33) % 1_000_000_000).to_string()
                    } else {
                        k.to_string()
                    }
                })
                .collect();
            jsonl.push_str(&format!(
                "{{\"timestamp\": {}, \"input_length\": 10240, \"output_length\": 128, \"hash_ids\": [{}]}}\n",
                i * 100,
                ids.join(", ")
            ));
        }
        let mut s = Scenario::default_scenario();
        s.workload.arrival = servesim_core::workload::RawArrival::Trace { rate: None };
        s.workload.requests = servesim_core::workload::RawContent::Mooncake {
            jsonl,
            block_tokens: None,
        };
        s
    }

    /// The MTP golden scenario (DeepSeek-V4-Flash, TP8 H200, MTP k = 3).
    fn mtp_scenario() -> Scenario {
        let g: serde_json::Value = serde_json::from_str(include_str!(
            "../../tests/golden/scenario_dsv4flash_tp8_h200_mtp.json"
        ))
        .unwrap();
        Scenario::from_json(&g["scenario"].to_string()).unwrap()
    }

    #[test]
    fn the_drafter_line_states_the_mtp_memory_the_budget_counts() {
        let s = mtp_scenario();
        let d = s.resolve().unwrap().deployment;
        let line = drafter_line(&d, false).unwrap();
        let w = d.drafter_weight_bytes_per_gpu().unwrap();
        assert!(w > 0);
        let spec = d.kv_cache_spec().unwrap();
        let base = d
            .model
            .kv_cache_spec(d.kv_cache_dtype, d.par.tp, d.engine.block_size)
            .unwrap();
        let fixed = spec.per_request_fixed_bytes - base.per_request_fixed_bytes;
        // DeepSeek-V4-Flash's MTP layer is sliding-window only: no per-token KV, one window of
        // state per request; the weights are the per-GPU share.
        assert_eq!(spec.bytes_per_token(), base.bytes_per_token());
        assert!(fixed > 0);
        let want = format!(
            "the memory budget counts the 1 MTP layer(s) as vLLM loads them: {:.2} GiB of weights per GPU (sharded like a decoder layer) and their KV cache in the target's (0 B per token and {:.1} KiB of sliding-window state per request per GPU)",
            w as f64 / GIB,
            fixed as f64 / 1024.0
        );
        assert!(line.contains(&want), "{line}\nwant: {want}");
        assert!(!line.contains("not in this memory budget"), "{line}");
        // The capacity card carries the same line.
        assert_eq!(capacity(&s).unwrap().drafter, Some(line));
    }

    #[test]
    fn a_small_trace_rides_in_the_link_and_reopens_identically() {
        let s = trace_scenario(50, true);
        assert!(s.resolve().is_ok(), "{:?}", s.resolve().err());
        let ShareLink::Fits(frag) = share_link(&s) else {
            panic!("a 50-line trace fits in a link");
        };
        assert_eq!(frag, fragment_for(&s));
        assert_eq!(scenario_from_fragment(&frag).unwrap(), Some(s));
    }

    #[test]
    fn a_trace_past_the_encoded_limit_gets_no_link_and_a_message_offering_the_file() {
        let s = trace_scenario(2000, true);
        let ShareLink::TooLarge {
            encoded_bytes,
            json_bytes,
        } = share_link(&s)
        else {
            panic!("a 2000-line random trace cannot fit");
        };
        assert!(encoded_bytes > servesim_core::share::MAX_ENCODED_BYTES);
        assert_eq!(json_bytes, s.to_json().len());
        // The link it would have made is indeed refused by the decoder.
        assert!(scenario_from_fragment(&fragment_for(&s)).is_err());
        let m = link_too_large_message(encoded_bytes, json_bytes);
        assert!(m.contains("can't carry"), "{m}");
        assert!(m.contains("scenario file"), "{m}");
        assert!(m.contains("64 KiB"), "{m}");
    }

    #[test]
    fn a_trace_that_compresses_small_but_inflates_past_the_limit_gets_no_link() {
        // Repetitive lines: the encoded text is short, but the JSON is over 1 MiB, which the
        // decoder refuses; the check is the decoder itself, not the encoded length alone.
        let s = trace_scenario(12_000, false);
        let code = servesim_core::share::encode(&s.to_json());
        assert!(code.len() <= servesim_core::share::MAX_ENCODED_BYTES);
        assert!(s.to_json().len() > servesim_core::share::MAX_INFLATED_BYTES);
        assert!(matches!(share_link(&s), ShareLink::TooLarge { .. }));
    }
    use servesim_core::dtype::KvCacheDtype;

    #[test]
    fn fragment_round_trip_restores_the_scenario() {
        let s = Scenario {
            num_gpus: Some(4),
            tp: 4,
            kv_cache_dtype: KvCacheDtype::Fp8,
            ..Scenario::default_scenario()
        };
        let f = fragment_for(&s);
        assert!(f.starts_with("s=v1."));
        assert_eq!(scenario_from_fragment(&format!("#{f}")).unwrap(), Some(s));
    }

    #[test]
    fn the_link_carries_the_canonical_json_the_cli_reads() {
        let s = Scenario::default_scenario();
        let code = fragment_for(&s);
        let json = servesim_core::share::decode(code.strip_prefix("s=").unwrap()).unwrap();
        assert_eq!(json, s.to_json());
        assert_eq!(Scenario::from_json(&json).unwrap(), s);
    }

    #[test]
    fn fragment_without_scenario_is_none_and_damaged_one_is_a_message() {
        assert_eq!(scenario_from_fragment(""), Ok(None));
        assert_eq!(scenario_from_fragment("#results"), Ok(None));
        let err = scenario_from_fragment("s=v1.@@@").unwrap_err();
        assert!(err.contains("not base64url"), "{err}");
    }

    #[test]
    fn links_of_the_interim_format_say_they_are_from_an_older_version() {
        // The page's pre-release scenario had no "version" and a "parallelism" object.
        let old = r#"{"model":{"catalog":"meta-llama/Meta-Llama-3.1-8B"},"gpu":{"catalog":"H100-SXM"},"num_gpus":1,"parallelism":{"tp":1,"dp":1,"ep":1},"levels":[1,2],"duration_s":60.0}"#;
        let frag = format!("s={}", servesim_core::share::encode(old));
        let err = scenario_from_fragment(&frag).unwrap_err();
        assert!(err.contains("older or unknown version"), "{err}");
        let future = r#"{"version":7}"#;
        let frag = format!("s={}", servesim_core::share::encode(future));
        let err = scenario_from_fragment(&frag).unwrap_err();
        assert!(err.contains("older or unknown version"), "{err}");
        assert!(err.contains("version 7"), "{err}");
    }

    #[test]
    fn recent_list_is_deduplicated_newest_first_and_capped() {
        let mut l = Vec::new();
        for i in 0..10 {
            push_recent(
                &mut l,
                Recent {
                    label: format!("{i}"),
                    fragment: format!("f{i}"),
                },
            );
        }
        push_recent(
            &mut l,
            Recent {
                label: "again".into(),
                fragment: "f5".into(),
            },
        );
        assert_eq!(l.len(), RECENT_MAX);
        assert_eq!(l[0].fragment, "f5");
        assert_eq!(l.iter().filter(|r| r.fragment == "f5").count(), 1);
        assert_eq!(l[1].fragment, "f9");
    }

    /// The one-adapter rule: outside this module, only the modules that run in the worker
    /// (`protocol`, `command_tools`, `search_tools`, `worker`, and the binaries) name the core
    /// crate; every page file reaches it through `crate::core_api`. Comments do not count.
    #[test]
    fn page_files_reach_the_core_only_through_this_module() {
        const WORKER_SIDE: [&str; 6] = [
            "protocol.rs",
            "level_pool.rs",
            "command_tools.rs",
            "search_form.rs",
            "search_tools.rs",
            "worker.rs",
        ];
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        walk(&src, &mut files);
        assert!(files.len() > 20, "{files:?}");
        let mut offenders = Vec::new();
        for f in &files {
            let rel = f
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let own = rel == "core_api.rs" || rel.starts_with("core_api/");
            if own || rel.starts_with("bin/") || WORKER_SIDE.contains(&rel.as_str()) {
                continue;
            }
            let text = std::fs::read_to_string(f).unwrap();
            for (i, line) in text.lines().enumerate() {
                if !line.trim_start().starts_with("//") && line.contains("servesim_core") {
                    offenders.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
        assert!(
            offenders.is_empty(),
            "page files must reach the core through crate::core_api:\n{}",
            offenders.join("\n")
        );
        // And the adapter uses no page module (no cycle with `form`).
        let own = std::fs::read_to_string(src.join("core_api.rs")).unwrap();
        let needle = ["crate", "::form"].concat();
        assert!(!own.contains(&needle), "core_api must not use the form");
    }

    #[test]
    fn capacity_card_shows_the_cli_numbers() {
        // The page and `servesim capacity` call the same function with the same deployment.
        let s = Scenario::default_scenario();
        let r = s.resolve().unwrap();
        let c = servesim_core::capacity::compute(
            &r.deployment,
            Some(RequestShape {
                isl: 1024,
                osl: 128,
            }),
        )
        .unwrap();
        let v = capacity(&s).unwrap();
        assert!(v.fits);
        assert_eq!(v.shape, Some((1024, 128)));
        assert_eq!(v.kv_cache_tokens, c.kv_cache_tokens);
        assert_eq!(v.kv_cache_tokens, r.capacity.kv_cache_tokens);
        assert_eq!(v.requests_that_fit, c.requests_fit.map(|f| f.at_once));
        assert_eq!(v.gpu_bytes, c.breakdown.visible.bytes as f64);
        assert!(v
            .log_lines
            .iter()
            .any(|l| l.starts_with("GPU KV cache size:")));
        let used: f64 = v.per_gpu.iter().map(|m| m.bytes).sum();
        assert!(used <= v.gpu_bytes);
    }

    /// The card warns, before any run, when the workload's requests exceed the context the
    /// deployment holds: here `--max-model-len auto` fits Qwen3-32B to 18,256 tokens on one H100.
    #[test]
    fn capacity_card_warns_when_requests_exceed_an_auto_fitted_context() {
        let mut s = Scenario {
            model: ModelRef::Catalog("Qwen/Qwen3-32B".into()),
            ..Scenario::default_scenario()
        };
        s.engine.max_model_len = Some(-1);
        s.workload.requests = serde_json::from_str(
            r#"{"input": {"tokens": 30000.0, "type": "constant"}, "output": {"tokens": 100.0, "type": "constant"}, "type": "synthetic"}"#,
        )
        .unwrap();
        let v = capacity(&s).unwrap();
        assert!(v.fits);
        assert!(
            v.warnings
                .iter()
                .any(|w| w.starts_with("requests of 30100 tokens")
                    && w.contains("max_model_len 18256")),
            "{:?}",
            v.warnings
        );
        assert!(v
            .log_lines
            .iter()
            .any(|l| l.starts_with("Auto-fit max_model_len: reduced from 40960 to 18256")));
    }

    #[test]
    fn agentic_preset_request_shape_is_64k_in_400_out() {
        let mut s = Scenario::default_scenario();
        s.workload.requests = servesim_core::workload::RawContent::Preset {
            name: "agentic-coding".into(),
        };
        let w = s.workload.validate().unwrap();
        let shape = request_shape(&w).unwrap();
        assert_eq!((shape.isl, shape.osl), (64000, 400));
    }

    #[test]
    fn a_model_too_big_for_the_gpu_does_not_fit_and_says_how_to_fix_it() {
        let s = Scenario {
            model: ModelRef::Catalog("meta-llama/Meta-Llama-3.1-405B".into()),
            ..Scenario::default_scenario()
        };
        assert!(s.resolve().is_ok(), "it resolves; only the run refuses");
        let v = capacity(&s).unwrap();
        assert!(!v.fits);
        assert!(!v.fixes.is_empty());
        assert_eq!(v.kv_cache_tokens, 0);
    }

    #[test]
    fn pasted_config_json_is_parsed_by_the_core() {
        let text = servesim_core::model::catalog::config_json("Qwen/Qwen3-8B").unwrap();
        let pasted = Scenario {
            model: ModelRef::Custom(CustomModel {
                name: "my-qwen".into(),
                config_json: text.into(),
            }),
            ..Scenario::default_scenario()
        };
        let by_id = Scenario {
            model: ModelRef::Catalog("Qwen/Qwen3-8B".into()),
            ..Scenario::default_scenario()
        };
        assert_eq!(
            capacity(&pasted).unwrap().kv_cache_tokens,
            capacity(&by_id).unwrap().kv_cache_tokens
        );
        let broken = Scenario {
            model: ModelRef::Custom(CustomModel {
                name: "x".into(),
                config_json: "{\"hidden_size\": 4096}".into(),
            }),
            ..Scenario::default_scenario()
        };
        assert_eq!(broken.resolve().unwrap_err().field(), "model");
    }
}
