//! TEMPORARY bridge: the page's interim scenario type (`core_api::Scenario`) to the core's
//! `servesim_core::scenario::Scenario`, so the comparison can pair arms with "the current
//! scenario" before the page itself carries the core's type. When the page's state holds the
//! core's `Scenario` (web2's branch), delete this file and pass `st.scenario.get().ok()` to
//! `ComparePanel` directly.

use crate::core_api;
use servesim_core::scenario::{CustomModel, GpuRef, ModelRef, Scenario, SCENARIO_VERSION};
use servesim_core::sweep::{GateOp, RawGate, RawSweepSpec};
use servesim_core::workload::RawLengthDist;
use servesim_core::workload::{RawArrival, RawContent, RawSharedPrefix, RawWorkloadSpec};

pub fn core_scenario(s: &core_api::Scenario) -> Scenario {
    let model = match &s.model {
        core_api::ModelRef::Catalog(id) => ModelRef::Catalog(id.clone()),
        core_api::ModelRef::ConfigJson(text) => ModelRef::Custom(CustomModel {
            name: "pasted config.json".into(),
            config_json: text.clone(),
        }),
    };
    let gpu = match &s.gpu {
        core_api::GpuRef::Catalog(id) => GpuRef::Catalog(id.clone()),
        core_api::GpuRef::Custom(g) => GpuRef::Custom(g.clone()),
    };
    let isl = s.workload.isl as f64;
    let prefix = (isl * s.workload.prefix_share).round();
    let requests = match &s.workload.trace {
        Some(jsonl) => RawContent::Mooncake {
            jsonl: jsonl.clone(),
            block_tokens: None,
        },
        None => RawContent::Synthetic {
            input: RawLengthDist::Constant {
                tokens: (isl - prefix).max(1.0),
            },
            output: RawLengthDist::Constant {
                tokens: s.workload.osl as f64,
            },
            shared_prefix: (prefix >= 1.0).then_some(RawSharedPrefix {
                groups: 1.0,
                tokens: prefix,
            }),
        },
    };
    let mut sla = Vec::new();
    if let Some(v) = s.sla.ttft_p90_ms {
        sla.push(RawGate {
            metric: "ttft_ms_p90".into(),
            op: GateOp::Le,
            value: v,
        });
    }
    if let Some(v) = s.sla.itl_p90_ms {
        sla.push(RawGate {
            metric: "itl_ms_p90".into(),
            op: GateOp::Le,
            value: v,
        });
    }
    if let Some(v) = s.sla.min_tokens_per_s_per_user {
        sla.push(RawGate {
            metric: "output_tokens_per_s_per_user".into(),
            op: GateOp::Ge,
            value: v,
        });
    }
    Scenario {
        version: SCENARIO_VERSION,
        model,
        gpu,
        tp: s.parallelism.tp,
        dp: s.parallelism.dp,
        ep: s.parallelism.ep,
        num_gpus: Some(s.num_gpus),
        weight_precision: s.weight_precision,
        kv_cache_dtype: s.kv_cache_dtype,
        engine: s.engine.clone(),
        workload: RawWorkloadSpec {
            arrival: RawArrival::ClosedLoop {
                concurrency: f64::from(s.levels.first().copied().unwrap_or(1)),
                think_time_s: None,
            },
            requests,
            seed: s.seed,
        },
        sweep: RawSweepSpec {
            concurrency: Some(s.levels.iter().map(|c| f64::from(*c)).collect()),
            duration_s: Some(s.duration_s),
            warmup_s: Some(s.duration_s * 0.1),
            sla,
            ..RawSweepSpec::default()
        },
        efficiencies: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_default_becomes_a_resolvable_core_scenario() {
        let s = core_scenario(&core_api::Scenario::default());
        let back = Scenario::from_json(&s.to_json()).unwrap();
        assert_eq!(back, s);
        let r = s.resolve().unwrap();
        assert!(r.capacity.fits);
        assert_eq!(s.sweep.concurrency.as_ref().unwrap().len(), 8);
    }
}
