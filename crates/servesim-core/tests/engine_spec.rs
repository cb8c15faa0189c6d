//! Speculative decoding in the engine: invariants (requests accounted for, tokens per chunk,
//! KV never over the pool, ITLs summing to E2E - TTFT), acceptance realised = acceptance given
//! within a stated statistical tolerance, zero acceptance slower than no speculation,
//! determinism, and the scenario path with vLLM's `speculative_config`.

use servesim_core::engine::{EngineConfig, KvFootprint, SpecDecode};
use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::scenario::Scenario;
use servesim_core::speculative::{acceptance_pmf, pmf_to_rates, RawSpecAcceptance};
use servesim_core::sweep::{run_level, RawSweepSpec, SweepSpec};
use servesim_core::workload::{Level, RawWorkloadSpec, WorkloadSpec};

mod common;
use common::linear_8b as model;

fn cfg(blocks: u64, spec: Option<SpecDecode>) -> EngineConfig {
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
        spec,
        offload: None,
    }
}

fn spec_of(rates: Vec<f64>, lookahead: bool) -> SpecDecode {
    let k = rates.len() as u32;
    SpecDecode {
        num_speculative_tokens: k,
        num_lookahead_tokens: if lookahead { k } else { 0 },
        eagle_prune: lookahead,
        accept_rates: rates,
        seed: 17,
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

const SYNTH: &str = r#"{"arrival":{"type":"closed_loop","concurrency":16},
  "requests":{"type":"synthetic","input":{"type":"uniform","min":200,"max":1200},
  "output":{"type":"uniform","min":20,"max":400}},"seed":5}"#;

fn run(cfg: &EngineConfig, w: &str, level: u32) -> (LevelResult, Collector) {
    run_level(
        cfg,
        &model(),
        &workload(w),
        &sweep_spec(r#"{"duration_s":120,"warmup_s":10}"#),
        Level::Concurrency(level),
    )
    .unwrap()
}

/// Invariants of a speculative run.
fn check(r: &LevelResult, col: &Collector, k: u32) {
    let t = &r.totals;
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    assert!(!col.clock_went_back);
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "KV {peak} > {total}");
    assert!(!col.finished().is_empty());
    for f in col.finished() {
        // First token from the prefill, then one chunk per decode step / extra gap.
        let chunks = f.chunk_tokens.len() as u64;
        let runs: u64 = f.decode_runs.iter().map(|(a, b)| b + 1 - a).sum();
        assert_eq!(chunks, runs + f.extra_itls.len() as u64);
        let emitted: u64 = f.chunk_tokens.iter().map(|&n| n as u64).sum();
        assert_eq!(
            emitted + 1,
            f.output_len,
            "first token + chunks = output: {f:?}"
        );
        for &n in &f.chunk_tokens {
            assert!(n >= 1 && n as u32 <= k + 1, "chunk of {n} tokens");
        }
        let itls = col.request_itls(f);
        let sum: u64 = itls.iter().map(|x| x.0).sum();
        assert_eq!(
            sum,
            f.finish.0 - f.first_token.0,
            "chunk gaps sum to E2E - TTFT"
        );
    }
}

#[test]
fn speculative_run_keeps_the_invariants() {
    for lookahead in [false, true] {
        let c = cfg(40_000, Some(spec_of(vec![0.8, 0.6, 0.4], lookahead)));
        let (r, col) = run(&c, SYNTH, 16);
        check(&r, &col, 3);
        let sd = r.spec_decode.as_ref().expect("acceptance reported");
        assert!(sd.num_drafts > 0);
        assert!(r.itl_per_token_ms.is_some());
    }
}

#[test]
fn tight_pool_preempts_and_still_accounts_for_everything() {
    // ~ 16 requests x up to 1600 tokens / 16 = 1600 blocks needed at peak; 700 forces preemption.
    let c = cfg(700, Some(spec_of(vec![0.7, 0.5], true)));
    let (r, col) = run(&c, SYNTH, 16);
    assert!(
        r.totals.preemptions > 0,
        "the pool is tight enough to preempt"
    );
    check(&r, &col, 2);
}

/// The realised acceptance matches the given one. Tolerance: each draw's accepted count has
/// variance at most k^2 / 4; with N drafts the realised mean accepted is within 5 standard errors
/// (`5 * k / (2 sqrt N)`) of the given mean, and each per-position rate within
/// `5 * sqrt(p (1 - p) / N)` (+1e-9), a false-failure probability below 1e-6 per check.
#[test]
fn realised_acceptance_matches_the_given_acceptance() {
    let given = [
        vec![0.9, 0.7, 0.4],
        vec![1.0, 1.0, 0.51], // "2 or 3 accepted, mean 3.51"
        vec![0.3],
    ];
    for rates in given {
        let k = rates.len() as u32;
        let mut c = cfg(60_000, Some(spec_of(rates.clone(), true)));
        // A budget no step reaches: no draft is cut.
        c.max_num_batched_tokens = 32_768;
        let (r, _) = run(&c, SYNTH, 16);
        let sd = r.spec_decode.unwrap();
        let n = sd.num_drafts as f64;
        assert!(n > 5_000.0, "enough draws: {n}");
        // Drafts cut by the budget or max_model_len would bias the rates: the run has none.
        assert_eq!(sd.num_draft_tokens, sd.num_drafts * k as u64);
        let want_mean: f64 = rates.iter().sum();
        let got_mean = sd.num_accepted_tokens as f64 / n;
        let tol = 5.0 * k as f64 / (2.0 * n.sqrt());
        assert!(
            (got_mean - want_mean).abs() <= tol,
            "mean accepted {got_mean} vs {want_mean} (tol {tol})"
        );
        for (i, (&g, &p)) in sd.acceptance_rate_per_pos.iter().zip(&rates).enumerate() {
            let tol = 5.0 * (p * (1.0 - p) / n).sqrt() + 1e-9;
            assert!((g - p).abs() <= tol, "position {i}: {g} vs {p} (tol {tol})");
        }
        let mal = sd.mean_acceptance_length.unwrap();
        assert!((mal - (1.0 + got_mean)).abs() < 1e-12);
    }
}

#[test]
fn two_or_three_accepted_gives_chunks_of_three_or_four() {
    let acc = RawSpecAcceptance {
        accepted_values: Some(vec![2, 3]),
        mean_acceptance_length: Some(3.51),
        ..Default::default()
    };
    let rates = pmf_to_rates(&acceptance_pmf(&acc, 3).unwrap());
    let mut c = cfg(60_000, Some(spec_of(rates, true)));
    c.max_num_batched_tokens = 32_768;
    let (r, col) = run(&c, SYNTH, 16);
    for f in col.finished() {
        let n = f.chunk_tokens.len();
        for (i, &t) in f.chunk_tokens.iter().enumerate() {
            // Only a request's last chunk is cut to its remaining tokens (and chunks that
            // follow a preemption; none here).
            if f.preemptions == 0 && i + 1 < n && f.extra_itls.is_empty() {
                assert!(t == 3 || t == 4, "chunk of {t}");
            }
        }
    }
    let mal = r.spec_decode.unwrap().mean_acceptance_length.unwrap();
    assert!((mal - 3.51).abs() < 0.02, "mean acceptance length {mal}");
}

#[test]
fn zero_acceptance_is_slower_than_no_speculation() {
    let off = cfg(40_000, None);
    let zero = cfg(40_000, Some(spec_of(vec![0.0, 0.0, 0.0], true)));
    let (a, _) = run(&off, SYNTH, 16);
    let (b, col) = run(&zero, SYNTH, 16);
    check(&b, &col, 3);
    assert!(
        b.tpot_ms_mean.unwrap() > a.tpot_ms_mean.unwrap(),
        "zero acceptance verifies drafts for nothing"
    );
    assert!(b.output_tokens_per_s < a.output_tokens_per_s);
    // Every chunk is one token.
    assert!(col
        .finished()
        .iter()
        .all(|f| f.chunk_tokens.iter().all(|&n| n == 1)));
    // High acceptance is faster than none.
    let high = cfg(40_000, Some(spec_of(vec![0.9, 0.8, 0.7], true)));
    let (c, _) = run(&high, SYNTH, 16);
    assert!(c.tpot_ms_mean.unwrap() < a.tpot_ms_mean.unwrap());
}

#[test]
fn speculative_runs_are_deterministic() {
    let c = cfg(3_000, Some(spec_of(vec![0.8, 0.5, 0.2], true)));
    let (a, _) = run(&c, SYNTH, 16);
    let (b, _) = run(&c, SYNTH, 16);
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

const DSV4: &str = r#"{"version":1,"model":{"catalog":"deepseek-ai/DeepSeek-V4-Flash"},
 "gpu":{"catalog":"H200"},"tp":8,
 "engine":{"speculative_config":{"method":"mtp","num_speculative_tokens":3},
           "speculative_acceptance":{"accepted_values":[2,3],"mean_acceptance_length":3.51}},
 "workload":{"arrival":{"type":"closed_loop","concurrency":8},
   "requests":{"type":"synthetic","input":{"type":"constant","tokens":2000},"output":{"type":"constant","tokens":300}},"seed":1},
 "sweep":{"concurrency":[8],"duration_s":60,"warmup_s":10}}"#;

#[test]
fn scenario_with_mtp_resolves_and_runs() {
    let s = Scenario::from_json(DSV4).unwrap();
    let r = s.resolve().unwrap();
    let sp = r.engine.spec.as_ref().expect("speculation on");
    assert_eq!(sp.num_speculative_tokens, 3);
    assert_eq!(sp.num_lookahead_tokens, 3);
    assert!(sp.eagle_prune);
    // Capture sizes are multiples of 1 + k.
    assert!(r
        .deployment
        .engine
        .cudagraph_capture_sizes
        .iter()
        .all(|s| s % 4 == 0));
    let off = Scenario::from_json(&DSV4.replace(
        r#""speculative_config":{"method":"mtp","num_speculative_tokens":3},
           "speculative_acceptance":{"accepted_values":[2,3],"mean_acceptance_length":3.51}"#,
        "",
    ))
    .unwrap()
    .resolve()
    .unwrap();
    let (on_r, _) = run_level(
        &r.engine,
        &r.cost,
        &r.workload,
        &r.sweep,
        Level::Concurrency(8),
    )
    .unwrap();
    let (off_r, _) = run_level(
        &off.engine,
        &off.cost,
        &off.workload,
        &off.sweep,
        Level::Concurrency(8),
    )
    .unwrap();
    let mal = on_r
        .spec_decode
        .as_ref()
        .unwrap()
        .mean_acceptance_length
        .unwrap();
    assert!((mal - 3.51).abs() < 0.05, "{mal}");
    // MTP at 3.51 tokens per step beats one token per step at concurrency 8.
    assert!(on_r.tpot_ms_mean.unwrap() < off_r.tpot_ms_mean.unwrap());
    assert!(on_r.itl_ms.unwrap().mean > on_r.itl_per_token_ms.unwrap().mean);
}

#[test]
fn bad_speculative_settings_name_the_field() {
    let cases = [
        (
            r#""speculative_config":{"method":"medusa","num_speculative_tokens":3}"#,
            "speculative_config.method",
        ),
        (
            r#""speculative_config":{"method":"mtp","num_speculative_tokens":0},"speculative_acceptance":{"mean_acceptance_length":2}"#,
            "speculative_config.num_speculative_tokens",
        ),
        (
            r#""speculative_config":{"method":"mtp","num_speculative_tokens":3}"#,
            "speculative_acceptance",
        ),
        (
            r#""speculative_config":{"method":"mtp","num_speculative_tokens":2},"speculative_acceptance":{"acceptance_rate_per_pos":[0.5,0.9]}"#,
            "speculative_acceptance.acceptance_rate_per_pos",
        ),
        (
            r#""speculative_config":{"method":"draft_model","num_speculative_tokens":2},"speculative_acceptance":{"mean_acceptance_length":2}"#,
            "speculative_config.model",
        ),
    ];
    for (engine, field) in cases {
        let json = DSV4.replace(
            r#""speculative_config":{"method":"mtp","num_speculative_tokens":3},
           "speculative_acceptance":{"accepted_values":[2,3],"mean_acceptance_length":3.51}"#,
            engine,
        );
        let e = Scenario::from_json(&json).unwrap().resolve().unwrap_err();
        assert!(
            e.field().ends_with(field),
            "{engine}: field {} ({e})",
            e.field()
        );
    }
    // A model without MTP layers refuses method mtp.
    let json = DSV4
        .replace(
            "deepseek-ai/DeepSeek-V4-Flash",
            "meta-llama/Meta-Llama-3.1-8B",
        )
        .replace(r#""tp":8"#, r#""tp":1"#);
    let e = Scenario::from_json(&json).unwrap().resolve().unwrap_err();
    assert!(e.to_string().contains("no MTP layers"), "{e}");
}
