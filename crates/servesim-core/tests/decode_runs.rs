//! Decode runs (engine/sched_run.rs) change how many events a simulation takes, never its
//! results: every check here runs the same input with runs allowed and with every step its own
//! event and compares everything observable.
//! - one engine, random workloads (prefix sharing, tight KV pools that preempt, block sizes that
//!   are not powers of two, several groups, prompts that outgrow the budget): the same step
//!   records, in the same order, and the same finished requests; and the runs did happen;
//! - whole scenarios (the golden scenarios and multi-replica plans): the same level results,
//!   topology results and finished requests, with the full and the streaming collector.

use servesim_core::engine::{Engine, SlidingGroup};
use servesim_core::engine::{
    EngineConfig, FinishedRequest, KvFootprint, LinearStepTime, Observer, Request, Segment,
    StepRecord,
};
use servesim_core::scenario::{ResolvedScenario, Scenario};
use servesim_core::sweep::{run_level_plan, run_level_plan_streamed};
use servesim_core::topology::{RawRouter, RawTopology, RouterPolicy};
use servesim_core::units::Ticks;
use std::path::PathBuf;

/// Everything an engine reports, in order.
#[derive(Default)]
struct Record {
    steps: Vec<StepRecord>,
    finished: Vec<FinishedRequest>,
    events: Vec<(u8, u64, u64)>,
}

impl Observer for Record {
    fn on_arrival(&mut self, _e: u32, t: Ticks, id: u64) {
        self.events.push((0, t.0, id));
    }
    fn on_scheduled(&mut self, _e: u32, t: Ticks, id: u64, _p: u64, c: u64) {
        self.events.push((1, t.0, id ^ (c << 32)));
    }
    fn on_first_token(&mut self, _e: u32, t: Ticks, id: u64) {
        self.events.push((2, t.0, id));
    }
    fn on_preempted(&mut self, _e: u32, t: Ticks, id: u64) {
        self.events.push((3, t.0, id));
    }
    fn on_finished(&mut self, r: &FinishedRequest) {
        self.finished.push(r.clone());
    }
    fn on_step(&mut self, s: &StepRecord) {
        self.steps.push(*s);
    }
}

/// A small deterministic generator (xorshift64*), so the cases do not depend on the crate's.
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Drives one engine through `arrivals` (time order; an arrival at the same time as an engine
/// event goes first, as the simulation orders them) and returns what it reported and the
/// events its decode runs stood in for.
fn drive(cfg: &EngineConfig, arrivals: &[(Ticks, Request)], runs: bool) -> (Record, u64) {
    let model = LinearStepTime {
        per_step_ns: 4_000_000.0,
        per_token_ns: 9_000.0,
        per_ctx_token_ns: 13.7,
    };
    let mut e = Engine::new(0, cfg.clone(), &model).unwrap();
    e.allow_decode_runs(runs);
    let mut rec = Record::default();
    let mut elided = 0;
    let mut next = 0;
    loop {
        let arrival = arrivals.get(next).map(|a| a.0);
        match (arrival, e.next_event_time()) {
            (Some(ta), te) if te.is_none_or(|te| ta <= te) => {
                let _ = e.submit(arrivals[next].1.clone(), ta, &mut rec);
                next += 1;
            }
            (_, Some(_)) => e.process_next_event(&mut rec).unwrap(),
            (None, None) => break,
            (Some(_), None) => unreachable!("handled by the first arm"),
        }
        elided += e.take_elided_events();
    }
    (rec, elided)
}

fn case(seed: u64) -> (EngineConfig, Vec<(Ticks, Request)>) {
    let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let block_size = [16, 16, 5, 32][g.range(0, 3) as usize];
    let max_num_seqs = g.range(1, 48) as u32;
    let kv = match g.range(0, 3) {
        0 => KvFootprint {
            full_groups: 2,
            sliding: Vec::new(),
            fixed_blocks: 1,
        },
        1 => KvFootprint {
            full_groups: 1,
            sliding: vec![SlidingGroup {
                window: 64,
                max_blocks: 8,
            }],
            fixed_blocks: 0,
        },
        _ => KvFootprint::uniform(),
    };
    let mut cfg = EngineConfig {
        max_num_seqs,
        max_num_batched_tokens: g.range(max_num_seqs as u64, 2048) as u32,
        block_size,
        // From tight (preemptions) to roomy.
        num_gpu_blocks: g.range(120, 3000),
        max_model_len: 4096,
        enable_prefix_caching: g.range(0, 3) > 0,
        long_prefill_token_threshold: if g.range(0, 3) == 0 { 256 } else { 0 },
        enable_chunked_prefill: true,
        mamba_align: false,
        v0_prefill_first: false,
        num_scheduler_steps: 1,
        kv,
        spec: None,
        offload: None,
    };
    // Every fourth case is vLLM V0 without chunked prefill: prefill-only steps between runs.
    if seed % 4 == 3 {
        cfg.enable_chunked_prefill = false;
        cfg.v0_prefill_first = true;
        cfg.max_num_batched_tokens = cfg.max_model_len as u32;
    }
    let n = g.range(20, 120);
    let mut t = 0u64;
    let mut arrivals = Vec::new();
    for id in 0..n {
        t += g.range(0, 40_000_000);
        let prompt_len = g.range(1, 600);
        let output_len = g.range(1, 300);
        // A third share one of two system prompts (prefix-cache hits and registrations).
        let mut req = Request::unique(id, Ticks(t), prompt_len, output_len);
        if g.range(0, 2) == 0 {
            let shared = g.range(1, prompt_len);
            req.prompt = vec![
                Segment {
                    stream: 7 + g.range(0, 1),
                    start: 0,
                    len: shared,
                },
                Segment {
                    stream: req.output_stream,
                    start: 0,
                    len: prompt_len - shared,
                },
            ];
            req.output_start = prompt_len - shared;
        }
        arrivals.push((Ticks(t), req));
    }
    (cfg, arrivals)
}

#[test]
fn one_engine_reports_the_same_steps_and_requests_with_and_without_runs() {
    let (mut elided, mut preempted_cases, mut run_cases) = (0u64, 0, 0);
    for seed in 0..160 {
        let (cfg, arrivals) = case(seed);
        let (a, ea) = drive(&cfg, &arrivals, true);
        let (b, eb) = drive(&cfg, &arrivals, false);
        assert_eq!(eb, 0, "no runs when not allowed");
        assert_eq!(a.steps, b.steps, "seed {seed}: step records differ");
        assert_eq!(
            a.finished, b.finished,
            "seed {seed}: finished requests differ"
        );
        assert_eq!(a.events, b.events, "seed {seed}: request events differ");
        assert_eq!(
            b.finished.len(),
            arrivals.len(),
            "seed {seed}: every request finishes"
        );
        elided += ea;
        if ea > 0 {
            run_cases += 1;
        }
        if b.events.iter().any(|e| e.0 == 3) {
            preempted_cases += 1;
        }
    }
    // The comparison means something: runs were taken, and some cases preempted.
    assert!(run_cases > 80, "runs in {run_cases} of 160 cases");
    assert!(elided > 10_000, "{elided} events elided");
    assert!(preempted_cases > 5, "{preempted_cases} cases preempted");
}

fn golden_scenarios() -> Vec<(String, Scenario)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden/scenarios");
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    v.into_iter()
        .map(|p| {
            let s = Scenario::from_json(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), s)
        })
        .collect()
}

/// Every level of `r`, with runs on and off, full and streaming collectors: identical.
fn same_with_and_without_runs(name: &str, r: &ResolvedScenario) {
    let mut on = r.plan();
    on.decode_runs = true;
    let mut off = r.plan();
    off.decode_runs = false;
    for level in r.runner().unwrap().levels() {
        let (ra, ca, ta) = run_level_plan(&on, &r.workload, &r.sweep, *level).unwrap();
        let (rb, cb, tb) = run_level_plan(&off, &r.workload, &r.sweep, *level).unwrap();
        assert_eq!(ra, rb, "{name} at {level:?}: level results differ");
        assert_eq!(ta, tb, "{name} at {level:?}: topology results differ");
        assert_eq!(ca.finished(), cb.finished(), "{name} at {level:?}");
        assert!(
            !ca.clock_went_back,
            "{name}: an engine's steps went back in time"
        );
        let (sa, sta) = run_level_plan_streamed(&on, &r.workload, &r.sweep, *level).unwrap();
        assert_eq!(sa, ra, "{name} at {level:?}: streaming differs");
        assert_eq!(sta, ta, "{name} at {level:?}: streaming topology differs");
    }
}

#[test]
fn golden_scenarios_give_the_same_results_with_and_without_runs() {
    for (name, mut s) in golden_scenarios() {
        // Shorter levels keep the test quick in debug builds; the comparison is per level.
        if s.sweep.duration_s.is_some_and(|d| d > 120.0) {
            s.sweep.duration_s = Some(120.0);
            s.sweep.warmup_s = Some(12.0);
        }
        let r = s.resolve().unwrap();
        same_with_and_without_runs(&name, &r);
    }
}

#[test]
fn replicas_behind_routers_give_the_same_results_with_and_without_runs() {
    for (replicas, policy, guard) in [
        (4, RouterPolicy::RoundRobin, None),
        (3, RouterPolicy::LeastRequests, Some(6)),
        (1, RouterPolicy::LlmD, None),
        (5, RouterPolicy::LlmD, None),
        (4, RouterPolicy::LlmD, Some(5)),
    ] {
        let mut s = Scenario::default_scenario();
        s.sweep.duration_s = Some(40.0);
        s.sweep.warmup_s = Some(5.0);
        s.sweep.concurrency = Some(vec![2.0, 24.0, 96.0]);
        s.topology = Some(RawTopology {
            replicas: Some(replicas),
            router: Some(RawRouter {
                policy,
                max_outstanding_per_replica: guard,
                ..RawRouter::default()
            }),
            ..RawTopology::default()
        });
        let r = s.resolve().unwrap();
        same_with_and_without_runs(&format!("{replicas} x {policy:?}"), &r);
    }
}
