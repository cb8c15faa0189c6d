//! vLLM V0 multi-step scheduling (`EngineConfig::num_scheduler_steps`, docs/engine.md "V0
//! multi-step rounds"): admission only at a round's first step, whole prompts with chunked
//! prefill, prompts over the budget ignored, and the invariants under random scenarios.

use servesim_core::engine::{
    Engine, EngineConfig, KvFootprint, Observer, RejectReason, Request, StepRecord,
};
use servesim_core::metrics::Collector;
use servesim_core::rng::{Rng, Stream};
use servesim_core::sweep::{run_level, RawSweepSpec};
use servesim_core::units::Ticks;
use servesim_core::workload::RawWorkloadSpec;

mod common;
use common::linear_8b as model;

fn cfg(steps: u32, chunked: bool) -> EngineConfig {
    EngineConfig {
        max_num_seqs: 64,
        max_num_batched_tokens: if chunked { 512 } else { 4096 },
        block_size: 16,
        num_gpu_blocks: 4000,
        max_model_len: 4096,
        enable_prefix_caching: false,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: chunked,
        mamba_align: false,
        v0_prefill_first: !chunked,
        num_scheduler_steps: steps,
        kv: KvFootprint::uniform(),
        spec: None,
        offload: None,
    }
}

/// Step records, admissions, first tokens and rejections, as the engine reports them.
#[derive(Default)]
struct Rec {
    steps: Vec<StepRecord>,
    scheduled: Vec<(u64, Ticks)>,
    first: Vec<(u64, Ticks)>,
    rejected: Vec<(u64, RejectReason)>,
    finished: u64,
}

impl Observer for Rec {
    fn on_rejected(&mut self, _e: u32, _t: Ticks, id: u64, reason: &RejectReason) {
        self.rejected.push((id, reason.clone()));
    }
    fn on_scheduled(&mut self, _e: u32, t: Ticks, id: u64, _p: u64, _c: u64) {
        self.scheduled.push((id, t));
    }
    fn on_first_token(&mut self, _e: u32, t: Ticks, id: u64) {
        self.first.push((id, t));
    }
    fn on_finished(&mut self, _r: &servesim_core::engine::FinishedRequest) {
        self.finished += 1;
    }
    fn on_step(&mut self, s: &StepRecord) {
        self.steps.push(*s);
    }
}

/// One long request decodes throughout while short ones arrive at random times (their prompt
/// lengths `lo..=hi`): returns what the engine reported.
fn run(c: EngineConfig, lo: u64, hi: u64, seed: u64) -> Rec {
    run_with(c, lo, hi, seed, false)
}

/// [`run`], letting the engine plan decode runs (`Engine::allow_decode_runs`, as the sweep driver
/// does) when `runs` is set.
fn run_with(c: EngineConfig, lo: u64, hi: u64, seed: u64, runs: bool) -> Rec {
    let m = model();
    let mut e = Engine::new(0, c, &m).unwrap();
    e.allow_decode_runs(runs);
    let mut rec = Rec::default();
    e.submit(Request::unique(0, Ticks(0), 64, 3000), Ticks(0), &mut rec)
        .unwrap();
    let mut rng = Rng::stream(seed, Stream::Test);
    let mut t = Ticks(0);
    for id in 1..=120 {
        t = Ticks(t.0 + rng.range_u64(1, 60_000_000));
        e.advance_to(Ticks(t.0 - 1), &mut rec).unwrap();
        let p = rng.range_u64(lo, hi);
        let o = rng.range_u64(2, 40);
        let _ = e.submit(Request::unique(id, t, p, o), t, &mut rec);
    }
    e.advance_to(Ticks::from_secs_f64(1e4), &mut rec).unwrap();
    rec
}

/// While a decode runs throughout, the scheduler runs at steps 0, N, 2N, ...: every step that
/// admits a prompt has an index divisible by N. With one step per round (N = 1) prompts are
/// admitted at other steps too, so the check discriminates.
#[test]
fn multi_step_admits_prompts_only_at_a_rounds_first_step() {
    for (chunked, runs) in [(true, false), (false, false), (true, true), (false, true)] {
        for n in [4u32, 15] {
            // Sparse arrivals leave the engine idle of waiting requests between them, so with
            // `runs` it plans decode runs across round boundaries and arrivals cut them.
            let rec = run_with(cfg(n, chunked), 16, 300, 7 + n as u64, runs);
            assert_eq!(rec.finished, 121, "chunked {chunked}, runs {runs}, n {n}");
            let admitting: Vec<u64> = rec
                .steps
                .iter()
                .filter(|s| s.num_prefill_tokens > 0 && s.index > 0)
                .map(|s| s.index)
                .collect();
            assert!(
                admitting.len() > 20,
                "chunked {chunked}, runs {runs}, n {n}"
            );
            for k in &admitting {
                assert_eq!(
                    k % n as u64,
                    0,
                    "chunked {chunked}, runs {runs}, n {n}: admitted at step {k}"
                );
            }
        }
        let single = run(cfg(1, chunked), 16, 300, 11);
        assert!(
            single
                .steps
                .iter()
                .any(|s| s.num_prefill_tokens > 0 && s.index % 4 != 0),
            "chunked {chunked}: one step per round admits at any step"
        );
    }
}

/// With chunked prefill, a prompt is admitted whole or waits: every request's first token comes
/// at the end of the step that admitted it. Without multi-step the same requests get chunked.
/// A prompt longer than the whole budget is ignored (rejected), as vLLM V0 ignores it.
#[test]
fn multi_step_with_chunked_prefill_runs_whole_prompts_and_ignores_longer_ones() {
    let ends = |rec: &Rec| -> Vec<bool> {
        rec.scheduled
            .iter()
            .map(|&(id, t)| {
                let step = rec.steps.iter().find(|s| s.start == t).expect("a step");
                let first = rec.first.iter().find(|f| f.0 == id).expect("first token").1;
                first == step.end
            })
            .collect()
    };
    let rec = run(cfg(8, true), 100, 700, 5);
    assert!(ends(&rec).iter().all(|&w| w), "every prompt in one step");
    let over: Vec<_> = rec.rejected.iter().collect();
    assert!(!over.is_empty());
    for (_, r) in over {
        assert!(
            matches!(r, RejectReason::PromptOverMultiStepBudget { prompt, budget: 512 } if *prompt > 512),
            "{r:?}"
        );
    }
    assert_eq!(rec.finished as usize + rec.rejected.len(), 121);
    let single = run(cfg(1, true), 100, 500, 5);
    assert!(single.rejected.is_empty());
    assert!(
        ends(&single).iter().any(|&w| !w),
        "one step per round chunks some prompts"
    );
}

/// Every request accounted for, KV within the pool, TTFT <= E2E and one gap per output token,
/// over random multi-step scenarios with and without chunked prefill.
#[test]
fn property_multi_step_keeps_invariants() {
    let mut rng = Rng::stream(4242, Stream::Test);
    for case in 0..24 {
        let chunked = case % 2 == 0;
        let mut c = cfg(rng.range_u64(2, 16) as u32, chunked);
        c.num_gpu_blocks = rng.range_u64(80, 3000);
        c.max_num_seqs = rng.range_u64(1, 48) as u32;
        c.block_size = [1u32, 4, 16][rng.range_u64(0, 2) as usize];
        c.max_model_len = 2048;
        if !chunked {
            c.max_num_batched_tokens = (c.max_model_len + rng.range_u64(0, 2000)) as u32;
        } else {
            c.max_num_batched_tokens = rng.range_u64(64, 1024).max(c.max_num_seqs as u64) as u32;
        }
        let conc = rng.range_u64(1, 40);
        let w = format!(
            r#"{{"arrival":{{"type":"closed_loop","concurrency":{conc}}},"requests":{{"type":"synthetic","input":{{"type":"uniform","min":1,"max":900}},"output":{{"type":"uniform","min":1,"max":120}}}},"seed":{case}}}"#
        );
        let w = RawWorkloadSpec::from_json(&w).unwrap().validate().unwrap();
        let s = RawSweepSpec::from_json(r#"{"duration_s":20,"warmup_s":2}"#)
            .unwrap()
            .validate()
            .unwrap();
        let (r, col): (_, Collector) = run_level(&c, &model(), &w, &s, w.own_level().unwrap())
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        let t = &r.totals;
        assert_eq!(
            t.submitted,
            t.completed + t.rejected + t.in_flight_at_end,
            "case {case}: {t:?}"
        );
        let (peak, total) = col.kv_peak_blocks();
        assert!(peak <= total, "case {case}: KV {peak} > {total}");
        for f in col.finished() {
            assert!(
                f.arrival <= f.first_scheduled && f.first_token <= f.finish,
                "case {case}"
            );
            assert_eq!(
                col.request_itls(f).len() as u64,
                f.output_len - 1,
                "case {case}"
            );
        }
        assert!(t.completed > 0, "case {case}: {t:?}");
    }
}
