//! Where a core error shows on the form: [`form_key`] maps the JSON path of a
//! `ScenarioError` (`ScenarioError::field`) to the form field that shows it. Deployment paths
//! are listed here, the workload and sweep settings come from the core's settings table
//! (`servesim_core::settings`, shared with the CLI's flags), the length distributions and
//! agentic sessions from the form's own keys ([`DIST_KEYS`]).

use crate::core_api::{GpuRef, ModelRef, Scenario};
use crate::form::DIST_KEYS;

/// The form key showing an error of the core at JSON path `path` (see
/// [`ScenarioError::field`]). Paths without a field of their own go to `scenario`, shown in the
/// capacity card's error list.
pub fn form_key(s: &Scenario, path: &str) -> &'static str {
    let dist = |prefix: &str, rest: &str| -> &'static str {
        let keys = DIST_KEYS
            .iter()
            .find(|k| k.prefix == prefix)
            .unwrap_or(&DIST_KEYS[0]);
        match rest {
            "tokens" | "mean" | "nominal" => keys.mean,
            "std" => keys.std,
            "min" => keys.min,
            "max" => keys.max,
            "min_ratio" => keys.min_ratio,
            "max_ratio" => keys.max_ratio,
            "values" => keys.values,
            _ => keys.kind,
        }
    };
    let p = path.strip_prefix("workload.").unwrap_or(path);
    let (head, rest) = p.split_once('.').unwrap_or((p, ""));
    match path {
        "model" | "model.custom.config_json" => match s.model {
            ModelRef::Catalog(_) => "model_id",
            ModelRef::Custom(_) => "config_json",
        },
        "model.custom.name" => "custom_model_name",
        "gpu" => match s.gpu {
            GpuRef::Catalog(_) => "gpu_id",
            GpuRef::Custom(_) => "custom_gpu_name",
        },
        "gpu.custom.memory_visible_mib" => "custom_gpu_memory_gib",
        "gpu.custom.hbm_bandwidth_tb_s" => "custom_gpu_bandwidth_tb_s",
        "gpu.custom.bf16_dense_tflops" => "custom_gpu_bf16_tflops",
        "gpu.custom.fp8_dense_tflops" => "custom_gpu_fp8_tflops",
        "gpu.custom.fp4_dense_tflops" => "custom_gpu_fp4_tflops",
        "gpu.custom.scaleup_unidir_gb_s" => "custom_gpu_link_gb_s",
        "gpu.custom.scaleup_domain" => "custom_gpu_domain",
        "gpu.custom.name" => "custom_gpu_name",
        "num_gpus" => "gpus",
        "topology.replicas" => "replicas",
        p if crate::form_offload::offload_form_key(p).is_some() => {
            crate::form_offload::offload_form_key(p).unwrap_or("scenario")
        }
        p if crate::form_spec::spec_form_key(p).is_some() => {
            crate::form_spec::spec_form_key(p).unwrap_or("scenario")
        }
        p if decode_spec_key(s, p).is_some() => decode_spec_key(s, p).unwrap_or("scenario"),
        p if crate::form_pd::pd_form_key(p).is_some() => {
            crate::form_pd::pd_form_key(p).unwrap_or("scenario")
        }
        p if p.starts_with("topology.router") => "router",
        "tp" => "tp",
        "dp" => "dp",
        "ep" => "ep",
        "enable_expert_parallel" => "enable_expert_parallel",
        "engine.all2all_backend" => "all2all_backend",
        "engine.performance_mode" => "performance_mode",
        "weight_precision" => "weight_precision",
        "kv_cache_dtype" => "kv_cache_dtype",
        "vllm_version" => "vllm_version",
        p if crate::form_engine::engine_form_key(p).is_some() => {
            crate::form_engine::engine_form_key(p).unwrap_or("scenario")
        }
        "engine.cudagraph_mode" => "cudagraph_mode",
        _ => match (head, path.starts_with("workload.")) {
            ("requests", true) => {
                let (h2, r2) = rest.split_once('.').unwrap_or((rest, ""));
                match h2 {
                    "input" => dist("in", r2),
                    "output" => dist("out", r2),
                    "tokens_per_turn" => dist("turn", r2),
                    "output_tokens" => dist("agout", r2),
                    "system_prompt_tokens" => "ag_system",
                    "first_turn_tokens" => "ag_first",
                    "turns" => "ag_turns",
                    "think_time_s" => "ag_think",
                    _ => setting_key(path),
                }
            }
            _ => setting_key(path),
        },
    }
}

/// A disaggregated decode pool's speculation error (`topology.decode.engine.speculative_*`) on
/// the speculative decoding controls, when the pool takes the top-level setting (a pool's own
/// `speculative_config`, stated in the Scenario JSON box, stays the pool's error).
fn decode_spec_key(s: &Scenario, path: &str) -> Option<&'static str> {
    let rest = path.strip_prefix("topology.decode.")?;
    let own = s
        .topology
        .as_ref()
        .and_then(|t| t.decode.as_ref())
        .and_then(|p| p.engine.as_ref())
        .is_some_and(|e| e.speculative_config.is_some() || e.speculative_acceptance.is_some());
    if own {
        return None;
    }
    crate::form_spec::spec_form_key(rest)
}

/// The form field of a workload or sweep setting at `path`, from the core's settings table
/// (`servesim_core::settings`, shared with the CLI's flags); `scenario` for any other path.
fn setting_key(path: &str) -> &'static str {
    crate::core_api::settings::form_key(path).unwrap_or("scenario")
}

/// Errors the core finds in a scenario (`Scenario::resolve`), keyed by form field; empty when
/// it resolves. Tests only: the page asks the tools worker, which resolves the scenario and
/// sends the error's path, mapped with [`form_key`]. A deployment that does not fit still
/// resolves: the capacity card says why.
#[cfg(test)]
pub fn check(s: &Scenario) -> crate::form::FieldErrors {
    let mut e = crate::form::FieldErrors::new();
    if let Err(err) = s.resolve() {
        e.insert(form_key(s, &err.field()), err.to_string());
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_errors_land_on_the_field_they_are_about() {
        let d = Scenario::default_scenario;
        let bad_model = Scenario {
            model: ModelRef::Catalog("nobody/nothing".into()),
            ..d()
        };
        assert!(check(&bad_model)["model_id"].contains("nobody/nothing"));
        let bad_gpu = Scenario {
            gpu: GpuRef::Catalog("Z9000".into()),
            ..d()
        };
        assert!(check(&bad_gpu)["gpu_id"].contains("Z9000"));
        // Llama-3.1-8B has 32 attention heads: TP 3 cannot split them.
        let bad_tp = Scenario {
            num_gpus: Some(3),
            tp: 3,
            ..d()
        };
        assert!(check(&bad_tp).contains_key("tp"), "{:?}", check(&bad_tp));
        let mut bad_len = d();
        bad_len.workload.requests = crate::core_api::workload::RawContent::Synthetic {
            input: crate::core_api::workload::RawLengthDist::Constant { tokens: 0.0 },
            output: crate::core_api::workload::RawLengthDist::Constant { tokens: 10.0 },
            shared_prefix: None,
        };
        assert!(
            check(&bad_len).contains_key("in_mean"),
            "{:?}",
            check(&bad_len)
        );
        let mut bad_sweep = d();
        bad_sweep.sweep.duration_s = Some(-1.0);
        assert!(check(&bad_sweep).contains_key("duration_s"));
        let custom = Scenario {
            model: ModelRef::Custom(crate::core_api::CustomModel {
                name: "x".into(),
                config_json: "{\"hidden_size\": 4096}".into(),
            }),
            ..d()
        };
        assert!(check(&custom).contains_key("config_json"));
        assert!(check(&d()).is_empty());
    }

    #[test]
    fn workload_and_sweep_paths_map_to_their_fields_through_the_settings_table() {
        // The keys the hand-kept mapping gave before it derived from `servesim_core::settings`.
        let s = Scenario::default_scenario();
        for (path, key) in [
            ("sweep.concurrency", "levels"),
            ("sweep.request_rates", "levels"),
            ("sweep.duration_s", "duration_s"),
            ("sweep.num_requests", "num_requests"),
            ("sweep.warmup_s", "warmup_s"),
            ("sweep.sla", "sla"),
            ("sweep.sla.metric", "sla"),
            ("sweep.sla.value", "sla"),
            ("sweep.max_events", "scenario"),
            ("sweep", "scenario"),
            ("workload", "scenario"),
            ("workload.seed", "seed"),
            ("workload.arrival", "arrival_value"),
            ("workload.arrival.rate", "arrival_value"),
            ("workload.arrival.concurrency", "arrival_value"),
            ("workload.arrival.think_time_s", "think_time_s"),
            ("workload.arrival.cv", "arrival_cv"),
            ("workload.requests", "content"),
            ("workload.requests.name", "content"),
            ("workload.requests.shared_prefix", "prefix_tokens"),
            ("workload.requests.shared_prefix.tokens", "prefix_tokens"),
            ("workload.requests.shared_prefix.groups", "prefix_groups"),
            (
                "workload.requests.shared_prefix.prompts_per_group",
                "prefix_prompts",
            ),
            ("workload.requests.jsonl", "trace"),
            ("workload.requests.block_tokens", "trace_block_tokens"),
            ("workload.requests.input.mean", "in_mean"),
            ("workload.requests.output.std", "out_std"),
            ("workload.requests.tokens_per_turn.min", "turn_min"),
            ("workload.requests.turns", "ag_turns"),
            ("workload.requests.think_time_s", "ag_think"),
            ("requests.jsonl", "scenario"),
        ] {
            assert_eq!(form_key(&s, path), key, "{path}");
        }
    }
}
