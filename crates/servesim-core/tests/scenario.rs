//! The scenario type: JSON round trip, errors naming their field, the glue from deployment to
//! engine (blocks, footprint, engines, GPUs), the step-time adapter, does-not-fit handling and
//! determinism.

use servesim_core::engine::{PrefillChunk, StepBatch, StepTimeModel};
use servesim_core::model::catalog;
use servesim_core::perf::{PrefillChunk as PerfChunk, StepCostModel, StepWork};
use servesim_core::scenario::{
    kv_footprint, GpuRef, ModelRef, Scenario, ScenarioError, SweepReport,
};
use servesim_core::workload::{RawArrival, RawContent, RawLengthDist};

fn small(model: &str) -> Scenario {
    let mut s = Scenario::default_scenario();
    s.model = ModelRef::Catalog(model.into());
    s.sweep.concurrency = Some(vec![1.0, 16.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    s
}

fn err_of(json: &str) -> ScenarioError {
    match Scenario::from_json(json) {
        Err(e) => e,
        Ok(s) => s.resolve().expect_err("expected an error"),
    }
}

fn with(f: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(&Scenario::default_scenario().to_json()).unwrap();
    f(&mut v);
    v.to_string()
}

#[test]
fn json_round_trip_is_identity_and_canonical() {
    let s = Scenario::default_scenario();
    let j = s.to_json();
    let back = Scenario::from_json(&j).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.to_json(), j, "canonical form is stable");
    assert_eq!(Scenario::from_json(&s.to_json_pretty()).unwrap(), s);
    // absent options are omitted, not written as null
    assert!(!j.contains("null"), "{j}");
    // a scenario with a custom model and GPU survives too
    let mut c = small("meta-llama/Meta-Llama-3.1-8B");
    c.model = ModelRef::Custom(servesim_core::scenario::CustomModel {
        name: "my-8b".into(),
        config_json: catalog::config_json("meta-llama/Meta-Llama-3.1-8B")
            .unwrap()
            .into(),
    });
    c.gpu = GpuRef::Custom(servesim_core::gpu::RawGpu {
        name: "my-gpu".into(),
        memory_visible_mib: 81_559.0,
        hbm_bandwidth_tb_s: 3.35,
        bf16_dense_tflops: 989.0,
        fp8_dense_tflops: Some(1979.0),
        fp4_dense_tflops: None,
        scaleup_unidir_gb_s: 450.0,
        scaleup_domain: 8,
        vendor: None,
    });
    let back = Scenario::from_json(&c.to_json()).unwrap();
    assert_eq!(back, c);
    assert!(back.resolve().is_ok());
}

#[test]
fn unknown_fields_are_named() {
    let e = err_of(&with(|v| v["colour"] = "blue".into()));
    assert_eq!(e.field(), "colour", "{e}");
    let e = err_of(&with(|v| v["engine"]["max_num_seq"] = 8.into()));
    assert_eq!(e.field(), "engine");
    assert!(e.to_string().contains("max_num_seq"), "{e}");
    let e = err_of(&with(|v| v["sweep"]["levels"] = serde_json::json!([1, 2])));
    assert_eq!(e.field(), "sweep");
    assert!(e.to_string().contains("levels"), "{e}");
}

#[test]
fn the_known_top_level_fields_are_the_structs_own() {
    // Derived from serde's field list: the same names, in the order the hand-kept list had.
    assert_eq!(
        Scenario::fields(),
        [
            "version",
            "model",
            "gpu",
            "tp",
            "dp",
            "ep",
            "enable_expert_parallel",
            "num_gpus",
            "weight_precision",
            "kv_cache_dtype",
            "engine",
            "workload",
            "sweep",
            "efficiencies",
            "endpoint",
            "vllm_version",
            "topology",
        ]
    );
    // Every field a scenario serialises is known (a fully populated scenario's JSON reads).
    let mut s = Scenario::default_scenario();
    s.num_gpus = Some(2);
    s.enable_expert_parallel = Some(false);
    s.efficiencies = Some(serde_json::from_str(r#"{"gemm_bf16": 0.5}"#).unwrap());
    s.endpoint = Some(servesim_core::scenario::Endpoint::Chat);
    s.vllm_version = Some("0.15.1".into());
    s.topology = Some(serde_json::from_str(r#"{"replicas": 2}"#).unwrap());
    let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    assert_eq!(keys.len(), Scenario::fields().len(), "{keys:?}");
    for k in keys {
        assert!(Scenario::fields().contains(&k), "{k}");
    }
    assert_eq!(Scenario::from_json(&s.to_json()).unwrap(), s);
    // The unknown-field error names the field and lists the known ones.
    let e = err_of(&with(|v| v["colour"] = "blue".into()));
    assert_eq!(
        e.to_string(),
        format!(
            "scenario JSON: `colour`: unknown field; known fields: {}",
            Scenario::fields().join(", ")
        )
    );
}

#[test]
fn version_2_fields_are_refused_in_version_1_and_set_the_written_version() {
    use servesim_core::scenario::FIELD_VERSIONS;
    for (name, since, used) in FIELD_VERSIONS {
        assert!(Scenario::fields().contains(&name), "{name}");
        assert_eq!(since, 2);
        let value = match name {
            "topology" => serde_json::json!({"replicas": 1}),
            _ => serde_json::json!(false),
        };
        let e = err_of(&with(|v| {
            v["version"] = 1.into();
            v[name] = value.clone();
        }));
        assert_eq!(
            e.to_string(),
            format!("scenario JSON: `{name}`: is a version-2 field; set \"version\": 2")
        );
        assert_eq!(e.field(), name);
        // Accepted as version 2; the scenario then uses it and is written as version 2.
        let s = Scenario::from_json(&with(|v| {
            v["version"] = 2.into();
            v[name] = value.clone();
        }))
        .unwrap();
        assert!(used(&s), "{name}");
        assert_eq!(s.written_version(), 2);
        assert!(s.to_json().contains("\"version\":2"), "{}", s.to_json());
    }
    let d = Scenario::default_scenario();
    assert!(FIELD_VERSIONS.iter().all(|(_, _, used)| !used(&d)));
    assert_eq!(d.written_version(), 1);
}

#[test]
fn field_errors_name_the_top_level_field() {
    let e = err_of(&with(|v| v["tp"] = "four".into()));
    assert_eq!(e.field(), "tp");
    assert_eq!(
        e.to_string(),
        "scenario JSON: `tp`: invalid type: string \"four\", expected u32"
    );
    let e = err_of(&with(|v| {
        v.as_object_mut().unwrap().remove("gpu");
    }));
    assert_eq!(e.to_string(), "scenario JSON: `gpu`: missing (required)");
    // `null` is absent: defaults apply, a required field is missing.
    let s = Scenario::from_json(&with(|v| v["tp"] = serde_json::Value::Null)).unwrap();
    assert_eq!(s.tp, 1);
    let e = err_of(&with(|v| v["workload"] = serde_json::Value::Null));
    assert_eq!(e.field(), "workload");
}

#[test]
fn wrong_or_missing_version_is_a_clear_error() {
    let e = err_of(&with(|v| v["version"] = 3.into()));
    assert!(matches!(e, ScenarioError::Version { .. }), "{e:?}");
    assert_eq!(e.field(), "version");
    assert!(e.to_string().contains("versions 1 to 2"), "{e}");
    let e = err_of(&with(|v| {
        v.as_object_mut().unwrap().remove("version");
    }));
    assert_eq!(e.field(), "version");
    // the version is checked before other fields
    let e = err_of(&with(|v| {
        v["version"] = 7.into();
        v["bogus"] = 1.into();
    }));
    assert!(matches!(e, ScenarioError::Version { .. }), "{e:?}");
}

#[test]
fn zero_negative_and_nan_values_name_their_field() {
    let e = err_of(&with(|v| v["tp"] = 0.into()));
    assert_eq!(e.field(), "tp", "{e}");
    let e = err_of(&with(|v| v["tp"] = (-2).into()));
    assert_eq!(e.field(), "tp", "{e}");
    let e = err_of(&with(|v| v["engine"]["max_num_seqs"] = 0.into()));
    assert_eq!(e.field(), "engine.max_num_seqs", "{e}");
    let e = err_of(&with(|v| {
        v["engine"]["gpu_memory_utilization"] = 1.5.into()
    }));
    assert_eq!(e.field(), "engine.gpu_memory_utilization", "{e}");
    let e = err_of(&with(|v| v["sweep"]["duration_s"] = 0.into()));
    assert_eq!(e.field(), "sweep.duration_s", "{e}");
    let e = err_of(&with(|v| v["sweep"]["engines"] = 4.into()));
    assert_eq!(e.field(), "sweep.engines", "{e}");
    assert!(e.to_string().contains("dp"), "{e}");
    let e = err_of(&with(|v| {
        v["efficiencies"] = serde_json::json!({"gemm_bf16": 2.0})
    }));
    assert_eq!(e.field(), "efficiencies.gemm_bf16", "{e}");
    // NaN cannot be written in JSON; a programmatic scenario carrying one is still caught
    let mut s = Scenario::default_scenario();
    s.workload.requests = RawContent::Synthetic {
        input: RawLengthDist::Normal {
            mean: f64::NAN,
            std: 10.0,
            min: 1.0,
            max: 100.0,
        },
        output: RawLengthDist::Constant { tokens: 10.0 },
        shared_prefix: None,
    };
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "workload.requests.input.mean", "{e}");
    let e = err_of(&with(|v| {
        v["model"] = serde_json::json!({"catalog": "no/such-model"})
    }));
    assert_eq!(e.field(), "model");
    let e = err_of(&with(|v| {
        v["gpu"] = serde_json::json!({"catalog": "Z9000"})
    }));
    assert_eq!(e.field(), "gpu");
}

#[test]
fn engine_config_takes_blocks_from_capacity_and_settings_from_vllm_defaults() {
    let mut s = small("meta-llama/Meta-Llama-3.1-8B");
    s.engine.max_num_seqs = Some(128);
    s.engine.long_prefill_token_threshold = Some(1024);
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits);
    assert_eq!(r.engine.num_gpu_blocks, r.capacity.num_blocks);
    assert_eq!(r.engine.max_num_seqs, 128);
    // vLLM default on H100 (>= 70 GiB, OpenAI server): 8192 batched tokens, block 16
    assert_eq!(r.engine.max_num_batched_tokens, 8192);
    assert_eq!(r.engine.block_size, 16);
    assert_eq!(r.engine.max_model_len, 131_072);
    assert!(r.engine.enable_prefix_caching);
    assert_eq!(r.engine.long_prefill_token_threshold, 1024);
    assert_eq!(r.engine.kv.full_groups, 1);
    assert!(r.engine.kv.sliding.is_empty());
    assert_eq!(r.engine.kv.fixed_blocks, 0);
    assert_eq!((r.sweep.engines, r.sweep.gpus), (1, 1));
}

#[test]
fn engines_are_dp_times_replicas_and_gpus_are_num_gpus() {
    let mut s = small("Qwen/Qwen3-30B-A3B");
    s.tp = 1;
    s.dp = 2;
    s.ep = 2;
    s.num_gpus = Some(8);
    let r = s.resolve().unwrap();
    assert_eq!(r.deployment.replicas(), 4);
    assert_eq!(r.sweep.engines, 8);
    assert_eq!(r.sweep.gpus, 8);
    assert_eq!(r.capacity.engines, 8);
}

#[test]
fn hybrid_sliding_footprint_matches_vllm_group_sizing() {
    let m = catalog::load("openai/gpt-oss-120b").unwrap();
    let mnbt = 8192;
    let spec = m
        .kv_cache_spec(servesim_core::dtype::KvCacheDtype::Auto, 1, 16)
        .unwrap();
    let fp = kv_footprint(&spec, mnbt);
    assert_eq!(fp.full_groups, 1);
    assert_eq!(fp.sliding.len(), 1);
    let w = fp.sliding[0].window;
    assert_eq!(w, 128);
    assert_eq!(fp.sliding[0].max_blocks, (w - 1 + mnbt).div_ceil(16) + 1);
    // beyond the window + budget, the engine's count equals vLLM's per-request block count
    for n in [10_000u64, 50_000, 131_072] {
        assert_eq!(fp.blocks(n, 16), spec.blocks_for_tokens(n, mnbt), "n={n}");
    }
}

#[test]
fn deepseek_v4_footprint_is_one_block_per_block_size_plus_fixed_state() {
    let m = catalog::load("deepseek-ai/DeepSeek-V4-Pro").unwrap();
    let spec = m
        .kv_cache_spec(servesim_core::dtype::KvCacheDtype::Fp8DsMla, 8, 256)
        .unwrap();
    assert!(spec.per_request_fixed_bytes > 0);
    let fp = kv_footprint(&spec, 8192);
    assert_eq!(fp.full_groups, 1);
    assert!(fp.sliding.is_empty());
    let bb = spec.block_bytes();
    assert!(fp.fixed_blocks * bb >= spec.per_request_fixed_bytes);
    assert!((fp.fixed_blocks - 1) * bb < spec.per_request_fixed_bytes);
    for n in [1u64, 256, 257, 100_000] {
        assert_eq!(
            fp.blocks(n, 256),
            spec.blocks_for_tokens(n, 8192) + fp.fixed_blocks
        );
    }
}

#[test]
fn step_time_adapter_equals_the_cost_model_on_the_same_work() {
    let r = small("meta-llama/Meta-Llama-3.1-8B").resolve().unwrap();
    // few chunks (stack buffer) and many chunks (the fallback path)
    for n in [0usize, 3, 32, 33, 100] {
        let chunks: Vec<PrefillChunk> = (0..n)
            .map(|i| PrefillChunk {
                new_tokens: 17 + i as u64,
                context_before: 64 * i as u64,
            })
            .collect();
        let perf: Vec<PerfChunk> = chunks
            .iter()
            .map(|c| PerfChunk {
                past: c.context_before,
                new: c.new_tokens,
            })
            .collect();
        let npt: u64 = chunks.iter().map(|c| c.new_tokens).sum();
        let batch = StepBatch {
            num_seqs: n as u32 + 40,
            num_decode_seqs: 40,
            decode_ctx_sum: 40 * 2000,
            prefills: &chunks,
            num_prefill_tokens: npt,
            prefill_ctx_sum: chunks.iter().map(|c| c.context_before).sum(),
            prefill_attn_pairs: chunks
                .iter()
                .map(|c| c.new_tokens * c.context_before + c.new_tokens * (c.new_tokens + 1) / 2)
                .sum(),
            num_tokens: npt + 40,
            decode_ctx_max: 2000,
        };
        let via_engine = StepTimeModel::step_time(&r.cost, &batch);
        let direct = StepCostModel::step_time(
            &r.cost,
            &StepWork {
                prefill: &perf,
                decode_seqs: 40,
                decode_ctx_sum: 40 * 2000,
            },
        );
        assert_eq!(via_engine, direct, "n={n}");
        assert!(direct.0 > 0);
    }
}

#[test]
fn a_deployment_that_does_not_fit_resolves_but_does_not_run() {
    let s = small("meta-llama/Meta-Llama-3.1-70B");
    let r = s.resolve().expect("resolves with fits = false");
    assert!(!r.capacity.fits);
    let e = match r.runner() {
        Err(e) => e,
        Ok(_) => panic!("runner must refuse a deployment that does not fit"),
    };
    assert!(matches!(e, ScenarioError::DoesNotFit { .. }));
    let msg = e.to_string();
    assert!(msg.contains(&r.capacity.reason), "{msg}");
    assert!(msg.contains("tp = "), "names a fix: {msg}");
}

#[test]
fn two_runs_give_identical_json() {
    let mut s = small("Qwen/Qwen3-8B");
    s.workload.arrival = RawArrival::Poisson { rate: 1.0 };
    s.sweep.concurrency = None;
    s.sweep.request_rates = Some(vec![2.0, 6.0]);
    s.workload.seed = 11;
    let run = || {
        let r = s.resolve().unwrap();
        let res = r.run().unwrap();
        SweepReport::new(&s, &r, &res).to_json_pretty()
    };
    let a = run();
    assert_eq!(a, run());
    assert!(a.contains("\"request_rate\": 2.0"), "{a}");
}

#[test]
fn default_scenario_resolves_with_its_documented_values() {
    let s = Scenario::default_scenario();
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits);
    assert_eq!(r.deployment.model.name, "meta-llama/Meta-Llama-3.1-8B");
    assert_eq!(r.deployment.gpu.id, "H100-SXM");
    assert_eq!(r.sweep.levels.len(), 10);
    assert_eq!(r.sweep.sla.len(), 1);
}

#[test]
fn sla_text_reads_back_and_bad_gates_are_quoted() {
    use servesim_core::sweep::{parse_sla, sla_text, GateOp};
    let g =
        parse_sla("e2e_tokens_per_s_per_user>=50, ttft_ms_p50 < 5000,itl_ms_p90<=40.5").unwrap();
    assert_eq!(
        g.iter().map(|g| g.op).collect::<Vec<_>>(),
        [GateOp::Ge, GateOp::Lt, GateOp::Le]
    );
    assert_eq!(g[1].value, 5000.0);
    let text = sla_text(&g);
    assert_eq!(
        text,
        "e2e_tokens_per_s_per_user>=50, ttft_ms_p50<5000, itl_ms_p90<=40.5"
    );
    assert_eq!(parse_sla(&text).unwrap(), g);
    assert!(parse_sla(" , ").unwrap().is_empty());
    assert_eq!(
        parse_sla("ttft_ms_p50 = 3").unwrap_err(),
        "`ttft_ms_p50 = 3`: expected METRIC>=VALUE (operators >=, >, <=, <)"
    );
    assert_eq!(
        parse_sla("ttft_ms_p50<inf").unwrap_err(),
        "`ttft_ms_p50<inf`: the value is not a number"
    );
    let e = parse_sla("ttft>5").unwrap_err();
    assert!(
        e.starts_with("`ttft>5`: unknown metric `ttft`; known: "),
        "{e}"
    );
    assert!(e.contains("ttft_ms_p50"), "{e}");
}

#[test]
fn set_levels_moves_the_arrival_to_the_first_level_and_keeps_its_process() {
    use servesim_core::compare::LevelKind;
    let mut s = Scenario::default_scenario();
    s.workload.arrival = RawArrival::ClosedLoop {
        concurrency: 1.0,
        think_time_s: Some(2.0),
    };
    s.set_levels(LevelKind::Concurrency, &[4.0, 8.0]);
    assert_eq!(
        s.workload.arrival,
        RawArrival::ClosedLoop {
            concurrency: 4.0,
            think_time_s: Some(2.0)
        }
    );
    assert_eq!(s.sweep.concurrency, Some(vec![4.0, 8.0]));
    assert_eq!(s.sweep.request_rates, None);
    s.set_levels(LevelKind::RequestRate, &[0.5, 1.0]);
    assert_eq!(s.workload.arrival, RawArrival::Poisson { rate: 0.5 });
    assert_eq!(s.sweep.request_rates, Some(vec![0.5, 1.0]));
    assert_eq!(s.sweep.concurrency, None);
    s.workload.arrival = RawArrival::Gamma { rate: 9.0, cv: 3.0 };
    s.set_levels(LevelKind::RequestRate, &[2.0]);
    assert_eq!(s.workload.arrival, RawArrival::Gamma { rate: 2.0, cv: 3.0 });
    s.workload.arrival = RawArrival::Constant { rate: 9.0 };
    s.set_levels(LevelKind::RequestRate, &[3.0]);
    assert_eq!(s.workload.arrival, RawArrival::Constant { rate: 3.0 });
    s.set_levels(LevelKind::Burst, &[64.0]);
    assert_eq!(s.workload.arrival, RawArrival::Burst { count: 64.0 });
    assert_eq!(s.sweep.concurrency, Some(vec![64.0]));
    // A trace replay is rescaled, whatever its arrival was.
    s.workload.requests = RawContent::Mooncake {
        jsonl: String::new(),
        block_tokens: None,
    };
    s.set_levels(LevelKind::RequestRate, &[0.25]);
    assert_eq!(s.workload.arrival, RawArrival::Trace { rate: Some(0.25) });
}

/// A burst level runs until its burst finishes (docs/metrics.md "How a level ends"): every
/// request of each burst completes and is measured, the window is the whole run, and it equals
/// the same run stated with `num_requests` = the burst size. A stated duration keeps its window.
#[test]
fn burst_levels_run_until_the_burst_finishes() {
    use servesim_core::compare::LevelKind;
    use servesim_core::sweep::Stop;
    let base = Scenario::default_scenario();
    let s = base
        .at_measured_levels(LevelKind::Burst, &[8.0, 32.0])
        .unwrap();
    assert_eq!(
        (s.sweep.duration_s, s.sweep.warmup_s, s.sweep.num_requests),
        (None, None, None)
    );
    let r = s.resolve().unwrap();
    assert_eq!(r.sweep.stop, Stop::Burst);
    let res = r.run().unwrap();
    for (l, n) in res.levels.iter().zip([8u64, 32]) {
        assert_eq!(l.totals.submitted, n);
        assert_eq!(l.totals.completed, n);
        assert!(l.output_tokens_per_s.is_some());
        // One burst alone, as a request-count run: the same level.
        let mut one = s.clone();
        one.sweep.concurrency = Some(vec![n as f64]);
        one.sweep.num_requests = Some(n as f64);
        let alone = one.resolve().unwrap().run().unwrap();
        assert_eq!(
            serde_json::to_string(&alone.levels[0]).unwrap(),
            serde_json::to_string(l).unwrap()
        );
    }
    // A stated duration is a fixed window, as before.
    let mut d = s.clone();
    d.sweep.duration_s = Some(60.0);
    assert!(matches!(
        d.resolve().unwrap().sweep.stop,
        Stop::Duration { .. }
    ));
    // Concurrency levels keep the stated stop.
    let c = base
        .at_measured_levels(LevelKind::Concurrency, &[4.0])
        .unwrap();
    assert_eq!(c.sweep.duration_s, base.sweep.duration_s);
    assert!(base.at_measured_levels(LevelKind::Burst, &[2.5]).is_err());
    assert!(base.at_measured_levels(LevelKind::Burst, &[]).is_err());
}

/// vLLM V0 replays a CUDA graph only while every decode's sequence fits
/// `max_seq_len_to_capture` (8192 by default; V0 `_use_captured_graph`): a decode-only step with
/// a longer sequence runs eagerly. The engine passes the longest context to the step-time model;
/// V1 has no such limit.
#[test]
fn v0_decodes_longer_than_max_seq_len_to_capture_run_without_a_graph() {
    use servesim_core::perf::ExecMode;
    let mut s = small("meta-llama/Llama-3.1-8B-Instruct");
    s.vllm_version = Some("0.6.3".into());
    let r = s.resolve().unwrap();
    assert_eq!(r.deployment.engine.max_seq_len_to_capture, Some(8192));
    assert!(StepTimeModel::needs_decode_ctx_max(&r.cost));
    let step = |ctx_max: u64| {
        let b = StepBatch {
            num_seqs: 4,
            num_decode_seqs: 4,
            decode_ctx_sum: 4 * ctx_max,
            prefills: &[],
            num_prefill_tokens: 0,
            prefill_ctx_sum: 0,
            prefill_attn_pairs: 0,
            num_tokens: 4,
            decode_ctx_max: ctx_max,
        };
        StepTimeModel::step_time(&r.cost, &b)
    };
    // 8191 tokens in the cache + the new one = 8192: still a graph, the same time as the roofline's.
    let graph = r
        .cost
        .breakdown_with_ctx_max(std::iter::empty(), 4, 4 * 8191, 8191);
    assert_eq!(graph.mode, ExecMode::FullGraph);
    assert_eq!(step(8191), graph.total_ticks());
    // One token more: eager, priced as `servesim step` prints it.
    let eager = r
        .cost
        .breakdown_with_ctx_max(std::iter::empty(), 4, 4 * 8192, 8192);
    assert_eq!(eager.mode, ExecMode::Eager);
    assert_eq!(step(8192), eager.total_ticks());
    assert_ne!(eager.total_ticks(), graph.total_ticks());

    // V1: no limit, the longest context is not read.
    let r1 = small("meta-llama/Llama-3.1-8B-Instruct").resolve().unwrap();
    assert_eq!(r1.deployment.engine.max_seq_len_to_capture, None);
    assert!(!StepTimeModel::needs_decode_ctx_max(&r1.cost));
    let b = r1
        .cost
        .breakdown_with_ctx_max(std::iter::empty(), 4, 4 * 20_000, 20_000);
    assert_eq!(b.mode, ExecMode::FullGraph);
}

/// `engine.num_scheduler_steps` (V0 multi-step): reaches the engine for a V0 `vllm_version`;
/// refused, naming the field and the fix, for V1, with speculative decoding, and outside its range.
#[test]
fn num_scheduler_steps_is_v0s_and_bounded() {
    let mut s = small("meta-llama/Llama-3.1-8B-Instruct");
    s.vllm_version = Some("0.6.3".into());
    s.engine.num_scheduler_steps = Some(15);
    let r = s.resolve().unwrap();
    assert_eq!(r.engine.num_scheduler_steps, 15);
    assert!(r
        .deployment
        .engine
        .notes
        .iter()
        .any(|n| n.starts_with("num_scheduler_steps 15")));
    // Unset and 1 are the same engine.
    s.engine.num_scheduler_steps = Some(1);
    assert_eq!(s.resolve().unwrap().engine.num_scheduler_steps, 1);
    s.engine.num_scheduler_steps = None;
    assert_eq!(s.resolve().unwrap().engine.num_scheduler_steps, 1);
    for (v, version, fix) in [
        (0, "0.6.3", "positive"),
        (257, "0.6.3", "must be"),
        (8, "0.15.1", "vllm_version < 0.8"),
    ] {
        s.vllm_version = Some(version.into());
        s.engine.num_scheduler_steps = Some(v);
        let err = s.resolve().expect_err("refused");
        // The page puts the message under the field's control.
        assert_eq!(err.field(), "engine.num_scheduler_steps");
        let e = err.to_string();
        assert!(
            e.contains("num_scheduler_steps") && e.contains(fix),
            "{v}: {e}"
        );
    }
    // The JSON field round-trips, and an old scenario without it reads as before.
    s.vllm_version = Some("0.6.3".into());
    s.engine.num_scheduler_steps = Some(8);
    let back = Scenario::from_json(&s.to_json()).unwrap();
    assert_eq!(back.engine.num_scheduler_steps, Some(8));
    assert!(!Scenario::default_scenario()
        .to_json()
        .contains("num_scheduler_steps"));
}

#[test]
fn performance_mode_changes_the_defaults_as_vllm_does() {
    use servesim_core::deploy::PerformanceMode;
    // vLLM `EngineArgs`: "If throughput mode is set, double max_num_batched_tokens and
    // max_num_seqs", each only when not stated.
    let deployment = |mode: Option<PerformanceMode>, seqs: Option<i64>| {
        let mut s = small("meta-llama/Meta-Llama-3.1-8B");
        s.vllm_version = Some("0.17.1".into());
        s.engine.performance_mode = mode;
        s.engine.max_num_seqs = seqs;
        s.deployment().unwrap().engine
    };
    let balanced = deployment(None, None);
    assert_eq!(
        (balanced.max_num_seqs, balanced.max_num_batched_tokens),
        (1024, 8192)
    );
    let thr = deployment(Some(PerformanceMode::Throughput), None);
    assert_eq!(
        (thr.max_num_seqs, thr.max_num_batched_tokens),
        (2048, 16384)
    );
    assert!(thr
        .notes
        .iter()
        .any(|n| n.contains("doubled by --performance-mode throughput")));
    let stated = deployment(Some(PerformanceMode::Throughput), Some(256));
    assert_eq!(
        (stated.max_num_seqs, stated.max_num_batched_tokens),
        (256, 16384)
    );
    // interactivity: CUDA graphs at every batch size up to 32, then vLLM's steps of 8 and 16.
    let inter = deployment(Some(PerformanceMode::Interactivity), None);
    assert_eq!(
        (inter.max_num_seqs, inter.max_num_batched_tokens),
        (1024, 8192)
    );
    assert_eq!(
        inter.cudagraph_capture_sizes[..32],
        (1..=32).collect::<Vec<u64>>()[..]
    );
    assert_eq!(inter.cudagraph_capture_sizes[32], 40);
    assert_eq!(
        inter.cudagraph_capture_sizes[32..],
        balanced.cudagraph_capture_sizes[balanced
            .cudagraph_capture_sizes
            .iter()
            .position(|&s| s == 40)
            .unwrap()..]
    );
    assert_eq!(balanced.cudagraph_capture_sizes[..4], [1, 2, 4, 8]);
}

#[test]
fn performance_mode_needs_a_vllm_that_has_it() {
    let e = err_of(&with(|v| {
        v["vllm_version"] = "0.15.1".into();
        v["engine"]["performance_mode"] = "throughput".into();
    }));
    assert_eq!(e.field(), "engine.performance_mode");
    assert!(e.to_string().contains("0.17"), "{e}");
    let e = err_of(&with(|v| {
        v["engine"]["performance_mode"] = "fastest".into();
    }));
    // The JSON error quotes the value and lists vLLM's names.
    assert!(
        e.to_string().contains("fastest") && e.to_string().contains("interactivity"),
        "{e}"
    );
    // A scenario that does not state the version runs the newest release line, which has it.
    let ok = with(|v| v["engine"]["performance_mode"] = "throughput".into());
    assert!(Scenario::from_json(&ok).unwrap().deployment().is_ok());
}
