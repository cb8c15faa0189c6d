//! Scenario tests of the serving simulator: invariants, properties over random small scenarios,
//! determinism, sanity shapes, preemption, prefix caching, errors and caps.

use servesim_core::engine::Engine;
use servesim_core::engine::{
    EngineConfig, FinishedRequest, KvFootprint, LinearStepTime, NullObserver, Observer, Request,
    SimError, SlidingGroup, StepRecord,
};
use servesim_core::metric::{MetricId, Stat};
use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::rng::{Rng, Stream};
use servesim_core::sweep::{
    operating_point, run_level, sweep, RawSweepSpec, SweepError, SweepRunner, SweepSpec,
};
use servesim_core::units::Ticks;
use servesim_core::workload::{Level, RawWorkloadSpec, WorkloadSpec};

mod common;
use common::linear_8b as model;

fn cfg(blocks: u64) -> EngineConfig {
    EngineConfig {
        max_num_seqs: 64,
        max_num_batched_tokens: 2048,
        block_size: 16,
        num_gpu_blocks: blocks,
        max_model_len: 8192,
        enable_prefix_caching: true,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        mamba_align: false,
        v0_prefill_first: false,
        num_scheduler_steps: 1,
        kv: KvFootprint::uniform(),
        spec: None,
        offload: None,
    }
}

fn workload(json: &str) -> WorkloadSpec {
    RawWorkloadSpec::from_json(json)
        .unwrap()
        .validate()
        .unwrap()
}

fn sweep_spec(json: &str) -> SweepSpec {
    RawSweepSpec::from_json(json).unwrap().validate().unwrap()
}

const SYNTH: &str = r#"{"arrival":{"type":"closed_loop","concurrency":8},
  "requests":{"type":"synthetic","input":{"type":"uniform","min":200,"max":1200},
  "output":{"type":"uniform","min":20,"max":300}},"seed":3}"#;

/// Checks every invariant the brief lists on a finished level.
fn check_invariants(r: &LevelResult, col: &Collector) {
    let t = &r.totals;
    assert_eq!(
        t.submitted,
        t.completed + t.rejected + t.in_flight_at_end,
        "every request accounted for: {t:?}"
    );
    assert_eq!(col.arrivals(), t.submitted);
    assert!(!col.clock_went_back, "clock went back");
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "KV {peak} > {total}");
    for f in col.finished() {
        assert!(f.arrival <= f.first_scheduled);
        assert!(f.first_scheduled <= f.first_token);
        assert!(f.first_token <= f.finish, "TTFT <= E2E");
        let itls = col.request_itls(f);
        assert_eq!(
            itls.len() as u64,
            f.output_len - 1,
            "one ITL per token after the first"
        );
        let sum: u64 = itls.iter().map(|x| x.0).sum();
        assert_eq!(sum, f.finish.0 - f.first_token.0, "ITLs sum to E2E - TTFT");
    }
    assert!(
        r.kv_utilization_peak <= 1.0
            && r.kv_utilization_mean.unwrap() <= r.kv_utilization_peak + 1e-12
    );
}

#[test]
fn invariants_hold_on_a_closed_loop_level() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"duration_s":120,"warmup_s":10}"#);
    let (r, col) = run_level(&cfg(4000), &model(), &w, &s, Level::Concurrency(16)).unwrap();
    check_invariants(&r, &col);
    assert!(r.completed_requests > 100);
    assert_eq!(r.rejected_requests, 0);
    assert_eq!(r.window_s.start, 10.0);
    assert_eq!(r.window_s.end, 120.0);
    // closed loop at c=16: never more than 16 in flight
    assert!(r.mean_running_batch.unwrap() <= 16.0 + 1e-9);
    assert!(r.totals.in_flight_at_end <= 16);
}

#[test]
fn property_random_small_scenarios_keep_invariants() {
    let mut rng = Rng::stream(2024, Stream::Test);
    for case in 0..40 {
        let blocks = rng.range_u64(40, 3000);
        let mut c = cfg(blocks);
        c.max_num_seqs = rng.range_u64(1, 32) as u32;
        c.max_num_batched_tokens = (c.max_num_seqs as u64 + rng.range_u64(0, 4000)) as u32;
        c.block_size = [1u32, 4, 16, 32][rng.range_u64(0, 3) as usize];
        c.long_prefill_token_threshold = [0u32, 64, 512][rng.range_u64(0, 2) as usize];
        c.enable_prefix_caching = rng.range_u64(0, 1) == 1;
        c.max_model_len = rng.range_u64(64, 4096);
        let conc = rng.range_u64(1, 40);
        let w = match case % 3 {
            0 => format!(
                r#"{{"arrival":{{"type":"closed_loop","concurrency":{conc}}},"requests":{{"type":"synthetic","input":{{"type":"exponential","mean":300}},"output":{{"type":"uniform","min":1,"max":200}},"shared_prefix":{{"groups":3,"tokens":100}}}},"seed":{case}}}"#
            ),
            1 => format!(
                r#"{{"arrival":{{"type":"poisson","rate":{}}},"requests":{{"type":"synthetic","input":{{"type":"uniform","min":1,"max":900}},"output":{{"type":"constant","tokens":50}}}},"seed":{case}}}"#,
                conc as f64 / 2.0
            ),
            _ => format!(
                r#"{{"arrival":{{"type":"closed_loop","concurrency":{conc}}},"requests":{{"type":"agentic","system_prompt_tokens":64,"first_turn_tokens":200,"tokens_per_turn":{{"type":"constant","tokens":50}},"output_tokens":{{"type":"constant","tokens":30}},"turns":4}},"seed":{case}}}"#
            ),
        };
        let w = workload(&w);
        let level = w.own_level().unwrap();
        let s = sweep_spec(r#"{"duration_s":30,"warmup_s":5}"#);
        let (r, col) =
            run_level(&c, &model(), &w, &s, level).unwrap_or_else(|e| panic!("case {case}: {e}"));
        check_invariants(&r, &col);
        // requests too big for the pool are rejected, not dropped
        for (_, reason) in col.rejected() {
            assert!(!reason.to_string().is_empty());
        }
    }
}

/// vLLM walks its running list in order and a prefill chunk can use up the token budget; the
/// engine serves decodes first. Both agree only because a decode is never behind a
/// budget-limited chunk (docs/engine.md, "Running order"). Tight budgets and thresholds make
/// budget-limited chunks frequent: the engine debug-asserts the premise at each of them, and a
/// skipped decode would show as an inter-token gap outside the decode runs without a preemption.
#[test]
fn property_tight_budgets_never_put_a_decode_behind_a_budget_limited_chunk() {
    let mut rng = Rng::stream(77, Stream::Test);
    for case in 0..30 {
        let mut c = cfg(rng.range_u64(200, 4000));
        c.max_num_seqs = rng.range_u64(1, 16) as u32;
        c.max_num_batched_tokens = (c.max_num_seqs as u64 + rng.range_u64(0, 96)) as u32;
        c.long_prefill_token_threshold =
            rng.range_u64(0, c.max_num_batched_tokens as u64 + 8) as u32;
        c.block_size = [1u32, 4, 16][rng.range_u64(0, 2) as usize];
        c.enable_prefix_caching = rng.range_u64(0, 1) == 1;
        let conc = rng.range_u64(2, 24);
        let w = workload(&format!(
            r#"{{"arrival":{{"type":"closed_loop","concurrency":{conc}}},"requests":{{"type":"synthetic","input":{{"type":"uniform","min":1,"max":400}},"output":{{"type":"uniform","min":1,"max":60}}}},"seed":{case}}}"#
        ));
        let s = sweep_spec(r#"{"duration_s":20,"warmup_s":2}"#);
        let (r, col) = run_level(&c, &model(), &w, &s, w.own_level().unwrap())
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        check_invariants(&r, &col);
        assert!(r.totals.completed > 0, "case {case}");
        for f in col.finished() {
            assert!(
                f.extra_itls.len() as u32 <= f.preemptions,
                "case {case}: request {} has a gap without a preemption",
                f.id
            );
        }
    }
}

#[test]
fn two_runs_give_identical_output() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"concurrency":[1,8,32],"duration_s":60}"#);
    let a = sweep(&cfg(2000), &model(), &w, &s).unwrap();
    let b = sweep(&cfg(2000), &model(), &w, &s).unwrap();
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
    // a different seed changes the output
    let w2 = workload(&SYNTH.replace("\"seed\":3", "\"seed\":4"));
    let c = sweep(&cfg(2000), &model(), &w2, &s).unwrap();
    assert_ne!(a.levels[1].ttft_ms, c.levels[1].ttft_ms);
}

#[test]
fn throughput_rises_then_saturates_itl_rises_ttft_rises_after_saturation() {
    let w = workload(
        r#"{"arrival":{"type":"closed_loop","concurrency":1},
        "requests":{"type":"synthetic","input":{"type":"constant","tokens":512},
        "output":{"type":"constant","tokens":128}}}"#,
    );
    let mut c = cfg(100_000);
    c.max_num_seqs = 32;
    let s = sweep_spec(r#"{"concurrency":[1,2,4,8,16,32,64,128],"duration_s":200}"#);
    let res = sweep(&c, &model(), &w, &s).unwrap();
    let l = &res.levels;
    for i in 1..l.len() {
        let (a, b) = (&l[i - 1], &l[i]);
        // throughput non-decreasing up to saturation (within 2% noise after it)
        assert!(
            b.output_tokens_per_s.unwrap() >= a.output_tokens_per_s.unwrap() * 0.98,
            "tput fell {:?} -> {:?}",
            a.output_tokens_per_s,
            b.output_tokens_per_s
        );
        let (ia, ib) = (a.itl_ms.unwrap().mean, b.itl_ms.unwrap().mean);
        assert!(ib >= ia * 0.999, "ITL fell {ia} -> {ib}");
    }
    // the batch saturates at max_num_seqs = 32: beyond it, requests queue, TTFT rises sharply
    let ttft = |i: usize| l[i].ttft_ms.unwrap().p50;
    assert!(ttft(7) > 3.0 * ttft(5), "{} vs {}", ttft(7), ttft(5));
    assert!(l[7].queueing_ms_mean.unwrap() > 100.0 * l[4].queueing_ms_mean.unwrap().max(0.01));
    let batch = l[7].mean_running_batch.unwrap();
    assert!(batch <= 32.0 + 1e-9 && batch > 30.0);
    // throughput at 128 equals throughput at 32 (saturated)
    let r = l[7].output_tokens_per_s.unwrap() / l[5].output_tokens_per_s.unwrap();
    assert!((0.95..1.05).contains(&r), "{r}");
}

#[test]
fn tiny_kv_causes_counted_preemptions_and_all_requests_still_finish() {
    // 12 requests of 200 prompt + 400 output need 38 blocks of 16 each; the pool has 120.
    let w = workload(
        r#"{"arrival":{"type":"burst","count":12},
        "requests":{"type":"synthetic","input":{"type":"constant","tokens":200},
        "output":{"type":"constant","tokens":400}}}"#,
    );
    let mut c = cfg(120);
    c.enable_prefix_caching = false;
    let s = sweep_spec(r#"{"num_requests":12}"#);
    let (r, col) = run_level(&c, &model(), &w, &s, Level::Concurrency(12)).unwrap();
    check_invariants(&r, &col);
    assert!(r.preemptions > 0, "expected preemptions");
    assert_eq!(r.preemptions, col.preemption_count());
    assert_eq!(r.totals.completed, 12);
    let preempted: u32 = col.finished().iter().map(|f| f.preemptions).sum();
    assert_eq!(preempted as u64, r.preemptions);
    assert!(r.kv_utilization_peak > 0.9);
    // with ample KV there is no preemption
    let (r2, _) = run_level(&cfg(100_000), &model(), &w, &s, Level::Concurrency(12)).unwrap();
    assert_eq!(r2.preemptions, 0);
}

#[test]
fn shared_prefix_workload_hits_the_prefix_cache() {
    let w = workload(
        r#"{"arrival":{"type":"closed_loop","concurrency":8},
        "requests":{"type":"synthetic","input":{"type":"constant","tokens":200},
        "output":{"type":"constant","tokens":50},"shared_prefix":{"groups":2,"tokens":1600}}}"#,
    );
    let s = sweep_spec(r#"{"duration_s":60}"#);
    let (r, col) = run_level(&cfg(20_000), &model(), &w, &s, Level::Concurrency(8)).unwrap();
    check_invariants(&r, &col);
    // 1600 of 1800 prompt tokens are shared (100 full blocks of 16): hit rate -> 1600/1800
    let h = r.prefix_cache_hit_rate.unwrap();
    assert!((h - 1600.0 / 1800.0).abs() < 0.01, "{h}");
    let mut c = cfg(20_000);
    c.enable_prefix_caching = false;
    let (r2, _) = run_level(&c, &model(), &w, &s, Level::Concurrency(8)).unwrap();
    assert_eq!(r2.prefix_cache_hit_rate, Some(0.0));
    // skipping cached prefill makes TTFT shorter
    assert!(r.ttft_ms.unwrap().mean < r2.ttft_ms.unwrap().mean);
}

#[test]
fn a_prompt_pool_is_served_from_the_prefix_cache_once_it_has_been_sent() {
    // inference-perf's shared_prefix pool: 2 groups x 5 prompts of 100 + 400 tokens, cycled.
    // After the first cycle every prompt is cached up to its last full block: 496 of 500 tokens
    // (vLLM recomputes the partial block). The first cycle (10 requests) falls in the warm-up.
    let w = workload(
        r#"{"arrival":{"type":"closed_loop","concurrency":4},
        "requests":{"type":"synthetic","input":{"type":"constant","tokens":400},
        "output":{"type":"constant","tokens":50},
        "shared_prefix":{"groups":2,"tokens":100,"prompts_per_group":5}}}"#,
    );
    let s = sweep_spec(r#"{"duration_s":60,"warmup_s":10}"#);
    let (r, col) = run_level(&cfg(20_000), &model(), &w, &s, Level::Concurrency(4)).unwrap();
    check_invariants(&r, &col);
    let h = r.prefix_cache_hit_rate.unwrap();
    assert!((h - 496.0 / 500.0).abs() < 0.005, "{h}");
    // The same lengths with a new question every request share only the prefix: 96 of 500.
    let fresh = workload(
        r#"{"arrival":{"type":"closed_loop","concurrency":4},
        "requests":{"type":"synthetic","input":{"type":"constant","tokens":400},
        "output":{"type":"constant","tokens":50},
        "shared_prefix":{"groups":2,"tokens":100}}}"#,
    );
    let (r2, col2) = run_level(&cfg(20_000), &model(), &fresh, &s, Level::Concurrency(4)).unwrap();
    check_invariants(&r2, &col2);
    let h2 = r2.prefix_cache_hit_rate.unwrap();
    assert!((h2 - 96.0 / 500.0).abs() < 0.005, "{h2}");
    // A cached prompt's first token comes after a decode-sized step, not a prefill.
    assert!(r.ttft_ms.unwrap().mean < r2.ttft_ms.unwrap().mean);
}

#[test]
fn agentic_coding_preset_reuses_about_ninety_percent() {
    let w = workload(
        r#"{"arrival":{"type":"closed_loop","concurrency":2},"requests":{"type":"preset","name":"agentic-coding"}}"#,
    );
    let mut c = cfg(200_000);
    c.max_model_len = 131072;
    c.max_num_batched_tokens = 8192;
    let s = sweep_spec(r#"{"duration_s":900,"warmup_s":0}"#);
    let (r, col) = run_level(&c, &model(), &w, &s, Level::Concurrency(2)).unwrap();
    check_invariants(&r, &col);
    let h = r.prefix_cache_hit_rate.unwrap();
    assert!((0.85..0.92).contains(&h), "hit rate {h}");
    let mean_in = col.finished().iter().map(|f| f.prompt_len).sum::<u64>() as f64
        / col.finished().len() as f64;
    assert!(
        (50_000.0..80_000.0).contains(&mean_in),
        "mean input {mean_in}"
    );
    assert!(col.finished().iter().all(|f| f.output_len == 400));
}

#[test]
fn mooncake_trace_replays_timestamps_and_rejects_oversized_requests() {
    let trace = [
        r#"{"timestamp": 0, "input_length": 1024, "output_length": 20, "hash_ids": [1, 2]}"#,
        r#"{"timestamp": 500, "input_length": 1200, "output_length": 20, "hash_ids": [1, 2, 3]}"#,
        r#"{"timestamp": 1000, "input_length": 9000, "output_length": 20, "hash_ids": [9]}"#,
        r#"{"timestamp": 1500, "input_length": 600, "output_length": 20, "hash_ids": [1, 4]}"#,
    ]
    .join("\n");
    let json = serde_json::json!({
        "arrival": {"type": "trace"},
        "requests": {"type": "mooncake", "jsonl": trace}
    });
    let w = workload(&json.to_string());
    let s = sweep_spec(r#"{"num_requests":4}"#);
    let (r, col) = run_level(&cfg(5000), &model(), &w, &s, Level::RequestRate(2.0)).unwrap();
    check_invariants(&r, &col);
    assert_eq!(r.rejected_requests, 1, "9000 + 20 > max_model_len 8192");
    assert_eq!(r.totals.completed, 3);
    let arrivals: Vec<f64> = col
        .finished()
        .iter()
        .map(|f| f.arrival.as_secs_f64())
        .collect();
    assert!(
        arrivals.contains(&0.5) && arrivals.contains(&1.5),
        "{arrivals:?}"
    );
    // request 2 reuses blocks 1,2 (1024 tokens); request 4 reuses block 1 (512)
    let cached: Vec<u64> = col
        .finished()
        .iter()
        .map(|f| f.cached_prompt_tokens)
        .collect();
    assert!(
        cached.contains(&1024) && cached.contains(&512),
        "{cached:?}"
    );
}

#[test]
fn bad_inputs_give_typed_errors() {
    let w = workload(SYNTH);
    let e = SweepRunner::new(
        &cfg(100),
        &model(),
        &w,
        &sweep_spec(r#"{"request_rates":[1.0]}"#),
    )
    .err()
    .unwrap();
    assert!(matches!(e, SweepError::Workload(_)), "{e}");
    let e = RawSweepSpec::from_json(r#"{"duration_s":10,"warmup_s":20}"#)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(
        matches!(&e, SweepError::Spec { field, .. } if field == "warmup_s"),
        "{e}"
    );
    let e = RawSweepSpec::from_json(r#"{"sla":[{"metric":"ttft_p50","op":"<","value":5}]}"#)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("ttft_ms_p50"), "{e}");
    assert!(RawSweepSpec::from_json(r#"{"levels":[1]}"#).is_err());
    let mut c = cfg(100);
    c.max_num_batched_tokens = 8;
    let e = sweep(&c, &model(), &w, &SweepSpec::default()).unwrap_err();
    assert!(e.to_string().contains("max_num_batched_tokens"), "{e}");
}

#[test]
fn event_cap_gives_an_error_instead_of_running_on() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"duration_s":900,"max_events":1000}"#);
    let e = run_level(&cfg(4000), &model(), &w, &s, Level::Concurrency(4))
        .err()
        .unwrap();
    assert_eq!(e, SweepError::Sim(SimError::EventCap { cap: 1000 }));
}

#[test]
fn operating_point_interpolates_in_log_level() {
    let w = workload(SYNTH);
    let s = sweep_spec(
        r#"{"concurrency":[1,2,4,8,16,32,64],"duration_s":60,"gpus":2,
        "sla":[{"metric":"ttft_ms_p50","op":"<","value":60}]}"#,
    );
    let mut c = cfg(100_000);
    c.max_num_seqs = 8;
    let res = sweep(&c, &model(), &w, &s).unwrap();
    let op = res.operating_point.clone().unwrap();
    let ttft = |i: usize| res.levels[i].get(MetricId::TtftMs(Stat::P50)).unwrap();
    let first_fail = (0..res.levels.len()).find(|&i| ttft(i) >= 60.0).unwrap();
    assert!(first_fail > 0);
    let (a, b) = (&res.levels[first_fail - 1], &res.levels[first_fail]);
    let cr = op.crossing.unwrap();
    assert_eq!(cr.lower, a.level.value());
    assert_eq!(cr.upper, b.level.value());
    let f = (60.0 - ttft(first_fail - 1)) / (ttft(first_fail) - ttft(first_fail - 1));
    let expect = libm::exp(libm::log(cr.lower) + f * (libm::log(cr.upper) - libm::log(cr.lower)));
    assert!((cr.level - expect).abs() < 1e-9);
    assert!(op.summary.starts_with("C ~ "), "{}", op.summary);
    assert_eq!(op.highest_passing, Some(a.level.value()));
    // per-GPU throughput is half the total with 2 GPUs
    assert!(
        (a.output_tokens_per_s_per_gpu.unwrap() * 2.0 - a.output_tokens_per_s.unwrap()).abs()
            < 1e-9
    );
    assert_eq!(operating_point(&res.levels, &[]), None);
}

#[test]
fn runner_steps_level_by_level_and_can_stop() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"concurrency":[1,2,4],"duration_s":20}"#);
    let m = model();
    let mut r = SweepRunner::new(&cfg(2000), &m, &w, &s).unwrap();
    assert_eq!(r.total_levels(), 3);
    let first = r.step().unwrap().unwrap().clone();
    assert_eq!(first.level, Level::Concurrency(1));
    assert_eq!(r.done_levels(), 1);
    let out = r.finish();
    assert!(out.cancelled);
    assert_eq!(out.levels.len(), 1);
    // the progress callback sees each level and can cancel
    let mut seen = Vec::new();
    let res = servesim_core::sweep::sweep_with_progress(&cfg(2000), &m, &w, &s, &mut |l, d, t| {
        seen.push((l.level, d, t));
        d < 2
    })
    .unwrap();
    assert_eq!(seen.len(), 2);
    assert!(res.cancelled);
}

#[test]
fn level_result_get_matches_json_fields() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"duration_s":30}"#);
    let (r, _) = run_level(&cfg(4000), &model(), &w, &s, Level::Concurrency(4)).unwrap();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["concurrency"], 4);
    assert_eq!(
        v["ttft_ms"]["p50"].as_f64(),
        r.get(MetricId::TtftMs(Stat::P50))
    );
    assert_eq!(
        v["itl_ms"]["p99"].as_f64(),
        r.get(MetricId::ItlMs(Stat::P99))
    );
    for m in MetricId::all() {
        let name = m.name();
        let flat = match m {
            MetricId::TtftMs(st) => v["ttft_ms"][st.name()].as_f64(),
            MetricId::ItlMs(st) => v["itl_ms"][st.name()].as_f64(),
            MetricId::E2eS(st) => v["e2e_s"][st.name()].as_f64(),
            MetricId::TpotMs(Stat::Mean) => {
                assert_eq!(v["tpot_ms"]["mean"], v["tpot_ms_mean"]);
                v["tpot_ms_mean"].as_f64()
            }
            MetricId::TpotMs(st) => v["tpot_ms"][st.name()].as_f64(),
            _ => v[&name].as_f64(),
        };
        assert_eq!(flat, r.get(m), "{name}");
    }
    let back: LevelResult = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}

/// Records step and per-request facts straight from one engine (no driver).
#[derive(Default)]
struct Rec {
    steps: Vec<StepRecord>,
    fin: Vec<FinishedRequest>,
}
impl Observer for Rec {
    fn on_step(&mut self, s: &StepRecord) {
        self.steps.push(*s);
    }
    fn on_finished(&mut self, r: &FinishedRequest) {
        self.fin.push(r.clone());
    }
}

#[test]
fn single_request_timeline_matches_hand_computation() {
    // per_step 1 ms, per_token 0, per_ctx 0 => every step is 1 ms.
    let m = LinearStepTime {
        per_step_ns: 1e6,
        per_token_ns: 0.0,
        per_ctx_token_ns: 0.0,
    };
    let mut c = cfg(1000);
    c.max_num_batched_tokens = 256;
    let mut e = Engine::new(0, c, &m).unwrap();
    let mut rec = Rec::default();
    // 600-token prompt with a 256-token budget: 3 prefill steps, then 9 decode steps for 10 tokens
    e.submit(Request::unique(1, Ticks(0), 600, 10), Ticks(0), &mut rec)
        .unwrap();
    e.advance_to(Ticks(1_000_000_000), &mut rec).unwrap();
    assert_eq!(rec.fin.len(), 1);
    let f = &rec.fin[0];
    assert_eq!(f.first_token, Ticks(3_000_000));
    assert_eq!(f.finish, Ticks(12_000_000));
    assert_eq!(f.decode_runs, vec![(3, 11)]);
    let prefill: Vec<u64> = rec.steps.iter().map(|s| s.num_prefill_tokens).collect();
    assert_eq!(&prefill[..4], &[256, 256, 88, 0]);
    // KV: after the last decode step 609 tokens are in KV = 39 blocks
    assert_eq!(rec.steps.last().unwrap().kv_used_blocks, 39);
    assert_eq!(e.kv_used_blocks(), 0, "blocks freed at finish");
    assert_eq!(e.next_event_time(), None);
}

#[test]
fn sliding_window_footprint_caps_blocks() {
    let fp = KvFootprint {
        full_groups: 1,
        sliding: vec![SlidingGroup {
            window: 128,
            max_blocks: 10,
        }],
        fixed_blocks: 2,
    };
    assert_eq!(fp.blocks(0, 16), 0);
    assert_eq!(fp.blocks(1, 16), 1 + 1 + 2);
    assert_eq!(fp.blocks(1600, 16), 100 + 10 + 2);
    // Decoding, a sliding group keeps only its window: cdiv(128, 16) + 1 = 9 blocks.
    assert_eq!(fp.blocks_decoding(1601, 16), 101 + 9 + 2);
    assert_eq!(fp.blocks_decoding(100, 16), 7 + 7 + 2);
    let m = model();
    let mut c = cfg(1000);
    c.kv = fp;
    let mut e = Engine::new(0, c, &m).unwrap();
    let mut rec = Rec::default();
    e.submit(Request::unique(1, Ticks(0), 1600, 5), Ticks(0), &mut rec)
        .unwrap();
    e.advance_to(Ticks(10_000_000_000), &mut rec).unwrap();
    // The prompt's chunks hold up to `max_blocks` sliding blocks (100 + 10 + 2); its decodes give
    // back what the window left (vLLM `remove_skipped_blocks`): 101 + 9 + 2 at the last step.
    let peak = rec.steps.iter().map(|s| s.kv_used_blocks).max().unwrap();
    assert_eq!(peak, 101 + 9 + 2);
    assert_eq!(rec.steps.last().unwrap().kv_used_blocks, 101 + 9 + 2);
    assert_eq!(e.kv_used_blocks(), 0);
    let _ = NullObserver;
}

/// vLLM caches a block at the scheduling of the step whose tokens fill it (`allocate_slots`
/// caches `num_computed + num_new` tokens), so a request arriving just before that step can hit
/// a block that a running request's decode output is filling in it.
#[test]
fn decode_output_block_is_cached_at_the_step_that_fills_it() {
    #[derive(Default)]
    struct Hits(Vec<(u64, u64)>);
    impl Observer for Hits {
        fn on_scheduled(&mut self, _e: u32, _t: Ticks, id: u64, _p: u64, cached: u64) {
            self.0.push((id, cached));
        }
    }
    let m = LinearStepTime {
        per_step_ns: 1000.0,
        per_token_ns: 0.0,
        per_ctx_token_ns: 0.0,
    };
    let mut c = cfg(1000);
    c.block_size = 4;
    let mut e = Engine::new(0, c, &m).unwrap();
    let mut obs = Hits::default();
    let x = 0xABCD;
    // A: 16 prompt tokens of stream x, output continues stream x at token 16.
    let a = Request {
        id: 0,
        arrival: Ticks(0),
        prompt: vec![servesim_core::engine::Segment {
            stream: x,
            start: 0,
            len: 16,
        }],
        output_stream: x,
        output_start: 16,
        output_len: 20,
    };
    e.submit(a, Ticks(0), &mut obs).unwrap();
    // Step 0 prefills (first token = token 16); decode step j computes token 16 + j - 1 and
    // emits token 16 + j. Token 19 exists after step 3 (ends at 4 us); step 4 computes it and
    // fills block 4 (tokens 16..19).
    while e.next_event_time().unwrap() < Ticks(4000) || e.steps() < 4 {
        e.process_next_event(&mut obs).unwrap();
    }
    assert_eq!(e.steps(), 4);
    // B echoes tokens 0..21 of the stream, arriving before step 4 is scheduled.
    let b = Request {
        id: 1,
        arrival: Ticks(4000),
        prompt: vec![servesim_core::engine::Segment {
            stream: x,
            start: 0,
            len: 21,
        }],
        output_stream: 0x1234,
        output_start: 0,
        output_len: 1,
    };
    e.submit(b, Ticks(4000), &mut obs).unwrap();
    e.process_next_event(&mut obs).unwrap(); // schedules step 4: A decodes, B is admitted
    assert_eq!(
        obs.0,
        vec![(0, 0), (1, 20)],
        "B hits blocks 0..4, block 4 filled in step 4"
    );
}

/// Records what the engine hands the step-time model at each step.
struct WindowProbe {
    seen: std::cell::RefCell<Vec<(u64, u64, Vec<u64>)>>,
}
impl servesim_core::engine::StepTimeModel for WindowProbe {
    fn step_time(&self, _b: &servesim_core::engine::StepBatch) -> Ticks {
        unreachable!("the engine calls step_time_windowed")
    }
    fn step_time_windowed(
        &self,
        b: &servesim_core::engine::StepBatch,
        w: &[servesim_core::engine::WindowedDecode],
    ) -> Ticks {
        let keys = w.iter().map(|x| x.decode_keys).collect();
        self.seen
            .borrow_mut()
            .push((b.num_decode_seqs as u64, b.decode_ctx_sum, keys));
        Ticks(1000 + 10 * b.num_tokens)
    }
}

fn windowed_cfg(blocks: u64, windows: &[u64]) -> EngineConfig {
    let mut c = cfg(blocks);
    c.block_size = 4;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;
    c.kv.sliding = windows
        .iter()
        .map(|&window| SlidingGroup {
            window,
            max_blocks: 1 << 30,
        })
        .collect();
    c
}

/// Runs `n` random requests to completion on one engine; returns the probe and the finished
/// requests.
fn run_windowed(c: EngineConfig, n: u64, seed: u64) -> (WindowProbe, Vec<FinishedRequest>) {
    let probe = WindowProbe {
        seen: Default::default(),
    };
    let mut rec = Rec::default();
    {
        let mut e = Engine::new(0, c, &probe).unwrap();
        let mut rng = Rng::stream(seed, Stream::Test);
        let mut t = 0;
        for id in 0..n {
            let r = Request::unique(id, Ticks(t), rng.range_u64(1, 90), rng.range_u64(1, 70));
            e.advance_to(Ticks(t), &mut rec).unwrap();
            e.submit(r, Ticks(t), &mut rec).unwrap();
            t += rng.range_u64(0, 20_000);
        }
        e.advance_to(Ticks(u64::MAX), &mut rec).unwrap();
        assert_eq!(e.num_running() + e.num_waiting(), 0);
    }
    (probe, rec.fin)
}

#[test]
fn windowed_decode_keys_match_a_per_request_recount() {
    // A pool large enough for no preemption: each request decodes in one run [a, b] with
    // ctx = prompt + (j - a) at step j, so the windowed key count is min(ctx + 1, w).
    let windows = [1u64, 8, 37, 64, 1 << 40];
    let (probe, fin) = run_windowed(windowed_cfg(100_000, &windows), 60, 5);
    let seen = probe.seen.borrow();
    let mut want = vec![vec![0u64; windows.len()]; seen.len()];
    for f in &fin {
        assert!(f.decode_runs.len() <= 1 && f.preemptions == 0);
        for &(a, b) in &f.decode_runs {
            for j in a..=b {
                let ctx = f.prompt_len + (j - a);
                for (i, &w) in windows.iter().enumerate() {
                    want[j as usize][i] += (ctx + 1).min(w);
                }
            }
        }
    }
    assert!(seen.iter().any(|s| s.0 > 3), "batches with several decodes");
    for (j, (n, ctx_sum, keys)) in seen.iter().enumerate() {
        assert_eq!(keys, &want[j], "step {j}");
        assert_eq!(keys[0], *n, "window 1: one key per decode");
        assert_eq!(keys[4], ctx_sum + n, "huge window: full attention");
    }
}

#[test]
fn windowed_decode_keys_stay_consistent_through_preemptions() {
    let windows = [1u64, 16, 1 << 40];
    let (probe, fin) = run_windowed(windowed_cfg(200, &windows), 80, 9);
    assert!(
        fin.iter().any(|f| f.preemptions > 0),
        "the small pool preempts"
    );
    for (j, (n, ctx_sum, keys)) in probe.seen.borrow().iter().enumerate() {
        assert_eq!(keys[0], *n, "step {j}");
        assert_eq!(keys[2], ctx_sum + n, "step {j}");
        assert!(
            keys[1] <= 16 * n && keys[1] <= ctx_sum + n && keys[1] >= *n,
            "step {j}"
        );
    }
}

/// vLLM V1 with `--no-enable-chunked-prefill`: a waiting prompt that does not fit the step's
/// remaining budget waits for the next step instead of being chunked (docs/engine.md).
#[test]
fn chunked_prefill_off_prefills_whole_prompts_or_waits() {
    let m = LinearStepTime {
        per_step_ns: 1e6,
        per_token_ns: 0.0,
        per_ctx_token_ns: 0.0,
    };
    let run = |chunked: bool| {
        let mut c = cfg(1000);
        c.max_num_batched_tokens = 1024;
        c.max_model_len = 1024;
        c.enable_chunked_prefill = chunked;
        let mut e = Engine::new(0, c, &m).unwrap();
        let mut rec = Rec::default();
        for id in 1..=2 {
            e.submit(Request::unique(id, Ticks(0), 600, 10), Ticks(0), &mut rec)
                .unwrap();
        }
        e.advance_to(Ticks(1_000_000_000), &mut rec).unwrap();
        assert_eq!(rec.fin.len(), 2);
        rec
    };
    let on = run(true);
    let on_prefill: Vec<u64> = on.steps.iter().map(|s| s.num_prefill_tokens).collect();
    assert_eq!(
        &on_prefill[..3],
        &[1024, 176, 0],
        "chunked: B split 424 + 176"
    );
    let off = run(false);
    let off_prefill: Vec<u64> = off.steps.iter().map(|s| s.num_prefill_tokens).collect();
    assert_eq!(
        &off_prefill[..3],
        &[600, 600, 0],
        "B waits one step, then whole"
    );
    // B's prefill step carries A's first decode.
    assert_eq!(off.steps[1].num_decode_seqs, 1);
    let b = off.fin.iter().find(|f| f.id == 2).unwrap();
    assert_eq!(b.first_scheduled, Ticks(1_000_000));
    assert_eq!(b.first_token, Ticks(2_000_000));
}

/// Chunked prefill off, random workload: every request's prompt is computed in the step that
/// first schedules it, and every invariant holds.
#[test]
fn chunked_prefill_off_keeps_the_invariants() {
    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"duration_s":30,"warmup_s":0}"#);
    let mut c = cfg(400);
    c.enable_chunked_prefill = false;
    let m = model();
    let (r, col) = run_level(&c, &m, &w, &s, Level::Concurrency(8)).unwrap();
    check_invariants(&r, &col);
    assert!(r.totals.completed > 50, "{:?}", r.totals);

    let mut e = Engine::new(0, c, &m).unwrap();
    let mut rec = Rec::default();
    let mut g = Rng::stream(11, Stream::Test);
    for id in 0..40u64 {
        let p = g.range_u64(200, 2000);
        e.submit(
            Request::unique(id, Ticks(id * 3_000_000), p, 20),
            Ticks(id * 3_000_000),
            &mut rec,
        )
        .unwrap();
    }
    e.advance_to(Ticks(100_000_000_000), &mut rec).unwrap();
    assert_eq!(rec.fin.len(), 40);
    for f in rec.fin.iter().filter(|f| f.preemptions == 0) {
        let step = rec
            .steps
            .iter()
            .find(|st| st.start == f.first_scheduled)
            .expect("a step starts when the request is scheduled");
        assert_eq!(
            step.end, f.first_token,
            "request {} prefilled in one step",
            f.id
        );
    }
}

/// vLLM's mamba cache mode `align` (hybrid models with prefix caching): a prefill chunk ending
/// before the prompt's last block boundary is cut to whole blocks, one crossing it stops on it,
/// the tail runs whole (`Scheduler._mamba_block_aligned_split`).
#[test]
fn mamba_align_cuts_prefill_chunks_at_block_boundaries() {
    let m = LinearStepTime {
        per_step_ns: 1e6,
        per_token_ns: 0.0,
        per_ctx_token_ns: 0.0,
    };
    let run = |align: bool| {
        let mut c = cfg(1000);
        c.max_num_batched_tokens = 100;
        c.mamba_align = align;
        let mut e = Engine::new(0, c, &m).unwrap();
        let mut rec = Rec::default();
        e.submit(Request::unique(1, Ticks(0), 200, 4), Ticks(0), &mut rec)
            .unwrap();
        e.advance_to(Ticks(1_000_000_000), &mut rec).unwrap();
        assert_eq!(rec.fin.len(), 1);
        rec.steps
            .iter()
            .map(|s| s.num_prefill_tokens)
            .filter(|&n| n > 0)
            .collect::<Vec<_>>()
    };
    assert_eq!(run(false), vec![100, 100]);
    // Block 16: 100 -> 96 (ends before 192), then 104 left: 96 + 100 crosses 192 -> 96, tail 8.
    assert_eq!(run(true), vec![96, 96, 8]);

    let w = workload(SYNTH);
    let s = sweep_spec(r#"{"duration_s":30,"warmup_s":0}"#);
    let mut c = cfg(400);
    c.mamba_align = true;
    let (r, col) = run_level(&c, &model(), &w, &s, Level::Concurrency(8)).unwrap();
    check_invariants(&r, &col);
    assert!(r.totals.completed > 50, "{:?}", r.totals);
}

/// vLLM V0 without chunked prefill (`EngineConfig::v0_prefill_first`): a step that admits a
/// prompt runs it alone and the decodes take their token in the next step. With the same
/// requests, V1's mixed step and V0's two steps differ by exactly what the linear model says.
#[test]
fn v0_prefill_first_runs_a_prompt_alone_and_the_decodes_wait_for_it() {
    let m = model();
    let run = |v0: bool| {
        let mut c = cfg(4000);
        c.enable_chunked_prefill = false;
        c.max_num_batched_tokens = 8192;
        c.v0_prefill_first = v0;
        let mut e = Engine::new(0, c, &m).unwrap();
        let mut col = Collector::new();
        let t1 = Ticks::from_secs_f64(0.1);
        e.submit(Request::unique(1, Ticks(0), 64, 40), Ticks(0), &mut col)
            .unwrap();
        e.advance_to(t1, &mut col).unwrap();
        e.submit(Request::unique(2, t1, 1000, 5), t1, &mut col)
            .unwrap();
        e.advance_to(Ticks::from_secs_f64(100.0), &mut col).unwrap();
        assert_eq!(col.finished().len(), 2);
        for f in col.finished() {
            let itls = col.request_itls(f);
            assert_eq!(itls.len() as u64, f.output_len - 1, "v0 {v0}: {f:?}");
            let sum: u64 = itls.iter().map(|x| x.0).sum();
            assert_eq!(
                sum,
                f.finish.0 - f.first_token.0,
                "v0 {v0}: ITLs sum to E2E - TTFT"
            );
        }
        let a = col.finished().iter().find(|f| f.id == 1).unwrap().clone();
        let b = col.finished().iter().find(|f| f.id == 2).unwrap().clone();
        let a_max = col.request_itls(&a).iter().map(|x| x.0).max().unwrap();
        (a_max, b.first_token.0 - b.arrival.0)
    };
    let (a_v1, b_v1) = run(false);
    let (a_v0, b_v0) = run(true);
    // B's prompt step no longer carries A's decode token (40 us plus A's context reads) ...
    let d = b_v1 as f64 - b_v0 as f64;
    assert!(d > 40_000.0 && d < 41_000.0, "TTFT differs by {d} ns");
    // ... and A waits for the prompt step and then its own decode step: one more step's fixed
    // cost (6 ms) and B's first decode token (40 us) on A's longest gap, plus context reads.
    let d = a_v0 as f64 - a_v1 as f64;
    assert!(
        d > 6.04e6 && d < 6.06e6,
        "A's longest gap differs by {d} ns"
    );
}

#[test]
fn property_v0_prefill_first_keeps_invariants() {
    let mut rng = Rng::stream(1917, Stream::Test);
    for case in 0..30 {
        let mut c = cfg(rng.range_u64(60, 3000));
        c.enable_chunked_prefill = false;
        c.v0_prefill_first = true;
        c.max_model_len = rng.range_u64(64, 2048);
        c.max_num_seqs = rng.range_u64(1, 32) as u32;
        c.max_num_batched_tokens = (c.max_model_len + rng.range_u64(0, 4000)) as u32;
        c.block_size = [1u32, 4, 16][rng.range_u64(0, 2) as usize];
        c.enable_prefix_caching = rng.range_u64(0, 1) == 1;
        let conc = rng.range_u64(1, 40);
        let w = match case % 2 {
            0 => format!(
                r#"{{"arrival":{{"type":"closed_loop","concurrency":{conc}}},"requests":{{"type":"synthetic","input":{{"type":"uniform","min":1,"max":600}},"output":{{"type":"uniform","min":1,"max":80}}}},"seed":{case}}}"#
            ),
            _ => format!(
                r#"{{"arrival":{{"type":"poisson","rate":{}}},"requests":{{"type":"synthetic","input":{{"type":"uniform","min":1,"max":900}},"output":{{"type":"constant","tokens":2}}}},"seed":{case}}}"#,
                conc as f64 / 2.0
            ),
        };
        let w = workload(&w);
        let s = sweep_spec(r#"{"duration_s":20,"warmup_s":2}"#);
        let (r, col) = run_level(&c, &model(), &w, &s, w.own_level().unwrap())
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        check_invariants(&r, &col);
        assert!(r.totals.completed > 0, "case {case}");
    }
}
