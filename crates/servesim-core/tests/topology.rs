//! Replicas behind routers (docs/topology.md): invariants on every run, differential checks
//! against one replica, router behaviour, stated limits, and the version-2 scenario section.

use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::scenario::{ResolvedScenario, Scenario};
use servesim_core::sweep::run_level_plan;
use servesim_core::topology::{RawRouter, RawTopology, RouterPolicy, TopologyLevel, MAX_ENGINES};
use servesim_core::workload::Level;

/// Llama-3.1-8B on H100, constant 1024 in / 128 out, closed loop, 60 s levels.
fn base() -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.duration_s = Some(60.0);
    s.sweep.warmup_s = Some(10.0);
    s.sweep.concurrency = Some(vec![16.0]);
    s
}

fn with_topology(mut s: Scenario, replicas: u32, policy: RouterPolicy) -> Scenario {
    s.topology = Some(RawTopology {
        replicas: Some(replicas),
        router: Some(RawRouter {
            policy,
            ..RawRouter::default()
        }),
        ..RawTopology::default()
    });
    s
}

fn run_one(r: &ResolvedScenario, level: Level) -> (LevelResult, Collector, Option<TopologyLevel>) {
    run_level_plan(&r.plan(), &r.workload, &r.sweep, level).unwrap()
}

/// Checks that hold on every run of a plan.
fn check_invariants(
    r: &ResolvedScenario,
    res: &LevelResult,
    col: &Collector,
    topo: Option<&TopologyLevel>,
) {
    let t = &res.totals;
    // each request accounted for exactly once: submitted = completed + rejected + in flight
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    let mut ids: Vec<u64> = col.finished().iter().map(|f| f.id).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "a request finished twice");
    assert!(!col.clock_went_back, "time went backwards");
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "KV over capacity: {peak} > {total}");
    let engines = r.topology.replicas * r.deployment.par.dp;
    for f in col.finished() {
        assert!(
            f.engine < engines,
            "request on a missing engine {}",
            f.engine
        );
        assert!(f.arrival <= f.first_scheduled);
        assert!(f.first_scheduled < f.first_token);
        assert!(f.first_token <= f.finish);
    }
    if let Some(tl) = topo {
        assert_eq!(tl.replicas.len() as u32, r.topology.replicas);
        let routed: u64 = tl.replicas.iter().map(|x| x.routed_requests).sum();
        // every request sent was routed once, except those still held at the router
        assert!(routed <= t.submitted);
        assert!(routed + t.in_flight_at_end >= t.submitted);
        let completed: u64 = tl.replicas.iter().map(|x| x.completed_requests).sum();
        assert_eq!(completed, res.completed_requests);
        let out: f64 = tl.replicas.iter().map(|x| x.output_tokens_per_s).sum();
        assert!((out - res.output_tokens_per_s.unwrap()).abs() <= 1e-6 * out.max(1.0));
        for x in &tl.replicas {
            assert!((0.0..=1.0).contains(&x.kv_utilization_mean));
        }
    }
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

/// N round-robin replicas at N x C on a uniform workload behave like one replica at C: total
/// throughput N times, TTFT and ITL the same, within noise (the flat cluster's shared API-server
/// queue made two replicas at C=32 show half the TTFT of one replica at C=16).
#[test]
fn round_robin_replicas_equal_n_times_one_replica() {
    let one = base().resolve().unwrap();
    let (r1, c1, t1) = run_one(&one, Level::Concurrency(16));
    check_invariants(&one, &r1, &c1, t1.as_ref());
    assert!(t1.is_none(), "one replica reports no per-replica table");
    for n in [2u32, 4] {
        let s = with_topology(base(), n, RouterPolicy::RoundRobin);
        let rn = s.resolve().unwrap();
        assert_eq!(rn.sweep.gpus, n);
        let (res, col, topo) = run_one(&rn, Level::Concurrency(16 * n));
        check_invariants(&rn, &res, &col, topo.as_ref());
        assert!(
            rel(
                res.output_tokens_per_s.unwrap(),
                n as f64 * r1.output_tokens_per_s.unwrap()
            ) < 0.03,
            "{n} replicas: {:?} tok/s vs {} x {:?}",
            res.output_tokens_per_s,
            n,
            r1.output_tokens_per_s
        );
        assert!(
            rel(
                res.output_tokens_per_s_per_gpu.unwrap(),
                r1.output_tokens_per_s_per_gpu.unwrap()
            ) < 0.02
        );
        let (a, b) = (res.ttft_ms.unwrap().p50, r1.ttft_ms.unwrap().p50);
        assert!(rel(a, b) < 0.10, "{n} replicas: TTFT p50 {a} ms vs {b} ms");
        let (a, b) = (res.itl_ms.unwrap().mean, r1.itl_ms.unwrap().mean);
        assert!(rel(a, b) < 0.03, "{n} replicas: ITL {a} ms vs {b} ms");
        let topo = topo.unwrap();
        let imb = topo.imbalance.unwrap();
        assert!((1.0..1.05).contains(&imb), "imbalance {imb}");
    }
}

/// Throughput with many small replicas is not pinned by one shared API server: per-GPU
/// throughput at 64 clients per GPU stays within a few percent from 1 to 16 GPUs.
#[test]
fn per_gpu_throughput_does_not_collapse_with_replicas() {
    let mut s = base();
    s.workload.requests = servesim_core::workload::RawContent::Synthetic {
        input: servesim_core::workload::RawLengthDist::Constant { tokens: 128.0 },
        output: servesim_core::workload::RawLengthDist::Constant { tokens: 32.0 },
        shared_prefix: None,
    };
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(5.0);
    let one = s.clone().resolve().unwrap();
    let (r1, _, _) = run_one(&one, Level::Concurrency(64));
    let s16 = with_topology(s, 16, RouterPolicy::LeastRequests);
    let r16 = s16.resolve().unwrap();
    let (res, col, topo) = run_one(&r16, Level::Concurrency(64 * 16));
    check_invariants(&r16, &res, &col, topo.as_ref());
    assert!(
        rel(
            res.output_tokens_per_s_per_gpu.unwrap(),
            r1.output_tokens_per_s_per_gpu.unwrap()
        ) < 0.03,
        "{:?} vs {:?} tok/s/GPU",
        res.output_tokens_per_s_per_gpu,
        r1.output_tokens_per_s_per_gpu
    );
}

/// Many shared system prompts that do not all fit in one replica's KV cache: llm-d's prefix
/// scorer keeps each prompt group on the replicas that hold it, round-robin sends every group to
/// every replica (LRU churn), so llm-d's prefix-cache hit rate is higher.
#[test]
fn llm_d_prefix_affinity_beats_round_robin_on_many_shared_prefixes() {
    let mut s = base();
    s.workload.requests = servesim_core::workload::RawContent::Synthetic {
        input: servesim_core::workload::RawLengthDist::Constant { tokens: 256.0 },
        output: servesim_core::workload::RawLengthDist::Constant { tokens: 64.0 },
        shared_prefix: Some(servesim_core::workload::RawSharedPrefix {
            groups: 64.0,
            tokens: 8192.0,
            prompts_per_group: None,
        }),
    };
    let mut hit = Vec::new();
    for policy in [RouterPolicy::RoundRobin, RouterPolicy::LlmD] {
        let r = with_topology(s.clone(), 4, policy).resolve().unwrap();
        let (res, col, topo) = run_one(&r, Level::Concurrency(64));
        check_invariants(&r, &res, &col, topo.as_ref());
        hit.push(res.prefix_cache_hit_rate.unwrap());
    }
    assert!(
        hit[1] > hit[0] + 0.05,
        "llm-d hit rate {} vs round-robin {}",
        hit[1],
        hit[0]
    );
}

/// llm-d's default weights (queue 2, kv 2, prefix 3) pin a workload whose one shared system
/// prompt fills the prefix scorer's 256 blocks: the replica that served the first request
/// holds every prompt's whole hashed prefix (`3 x 1`), more than the queue and KV terms give
/// the other at this load, so it takes every request (imbalance 2, as llm-d would route it).
/// With the same shared prompt a small fraction of the hashed blocks (`3 x 32 / 256`), the
/// queue and KV scorers spread the load.
#[test]
fn llm_d_queue_scorer_takes_over_from_a_short_shared_prefix() {
    use servesim_core::workload::{RawContent, RawLengthDist, RawSharedPrefix};
    let run = |shared: f64, input: f64| {
        let mut s = base();
        s.workload.requests = RawContent::Synthetic {
            input: RawLengthDist::Constant { tokens: input },
            output: RawLengthDist::Constant { tokens: 128.0 },
            shared_prefix: Some(RawSharedPrefix {
                groups: 1.0,
                tokens: shared,
                prompts_per_group: None,
            }),
        };
        let r = with_topology(s, 2, RouterPolicy::LlmD).resolve().unwrap();
        let (res, col, topo) = run_one(&r, Level::Concurrency(32));
        check_invariants(&r, &res, &col, topo.as_ref());
        let topo = topo.unwrap();
        let routed: Vec<u64> = topo.replicas.iter().map(|x| x.routed_requests).collect();
        (routed, topo.imbalance.unwrap())
    };
    // 8,192 shared tokens: the scorer's 256 blocks of 16 tokens are all shared
    let (routed, imb) = run(8192.0, 512.0);
    let least = *routed.iter().min().unwrap() as f64 / routed.iter().sum::<u64>() as f64;
    assert!(imb > 1.9 && least < 0.02, "pinned: {routed:?}, {imb}");
    // 512 shared of 4,096 prompt tokens: the prefix term is at most 3 x 0.125
    let (routed, imb) = run(512.0, 3584.0);
    let least = *routed.iter().min().unwrap() as f64 / routed.iter().sum::<u64>() as f64;
    assert!(imb < 1.25 && least > 0.4, "spread: {routed:?}, {imb}");
}

/// The saturation guard: no replica ever has more than M requests in its engines (the interval
/// from first scheduling to finish lies inside the outstanding interval), and held requests
/// still finish.
#[test]
fn saturation_guard_caps_outstanding_per_replica() {
    for policy in [
        RouterPolicy::RoundRobin,
        RouterPolicy::LeastRequests,
        RouterPolicy::LlmD,
    ] {
        let mut s = with_topology(base(), 2, policy);
        if let Some(t) = s.topology.as_mut() {
            t.router.as_mut().unwrap().max_outstanding_per_replica = Some(4);
        }
        let r = s.resolve().unwrap();
        let (res, col, topo) = run_one(&r, Level::Concurrency(20));
        check_invariants(&r, &res, &col, topo.as_ref());
        assert!(res.completed_requests > 0);
        for replica in 0..2u32 {
            let mut ev: Vec<(u64, i32)> = Vec::new();
            for f in col.finished().iter().filter(|f| f.engine == replica) {
                ev.push((f.first_scheduled.0, 1));
                ev.push((f.finish.0, -1));
            }
            ev.sort();
            let (mut cur, mut max) = (0i32, 0i32);
            for (_, d) in ev {
                cur += d;
                max = max.max(cur);
            }
            assert!(
                max <= 4,
                "{policy:?}: replica {replica} ran {max} requests at once"
            );
        }
        // with the guard, the 12 clients above 2 x 4 wait at the router: TTFT includes it
        assert!(res.ttft_ms.unwrap().p50 > 0.0);
    }
}

/// Same scenario, same bytes, run after run (the router's tie-breaking RNG is seeded).
#[test]
fn topology_runs_are_deterministic() {
    let s = with_topology(base(), 3, RouterPolicy::LlmD);
    let a = s.resolve().unwrap().run().unwrap();
    let b = s.resolve().unwrap().run().unwrap();
    assert_eq!(a, b);
    assert_eq!(a.topology.len(), a.levels.len());
}

/// A version-2 scenario with one replica gives what the version-1 scenario gives, and is
/// written as version 2; a scenario without `topology` is written as version 1.
#[test]
fn version_two_with_one_replica_equals_version_one() {
    let v1 = base();
    assert!(v1.to_json().contains("\"version\":1"));
    let v2 = with_topology(base(), 1, RouterPolicy::RoundRobin);
    let json = v2.to_json();
    assert!(json.contains("\"version\":2"), "{json}");
    let back = Scenario::from_json(&json).unwrap();
    assert_eq!(back, v2);
    let a = v1.resolve().unwrap().run().unwrap();
    let b = back.resolve().unwrap().run().unwrap();
    assert_eq!(a.levels, b.levels);
    // topology in a version-1 document is refused, naming the field
    let bad = json.replace("\"version\":2", "\"version\":1");
    let e = Scenario::from_json(&bad).unwrap_err();
    assert_eq!(e.field(), "topology");
    assert!(e.to_string().contains("version"), "{e}");
}

/// Version-1 scenarios keep their numbers: each golden scenario (recorded before version 2),
/// written to a share link and reopened, is still version 1 and gives the golden report byte for
/// byte.
#[test]
fn version_one_links_reopen_to_the_golden_reports() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden");
    for name in [
        "llama8b_h100_random_closed_loop",
        "qwen3moe_2xh100_dp2_shared_prefix_poisson",
    ] {
        let text =
            std::fs::read_to_string(dir.join("scenarios").join(format!("{name}.json"))).unwrap();
        let s = Scenario::from_json(&text).unwrap();
        let link = servesim_core::share::encode(&s.to_json());
        let json = servesim_core::share::decode(&link).unwrap();
        assert!(json.contains("\"version\":1"), "{name}: {json}");
        let s2 = Scenario::from_json(&json).unwrap();
        let r = s2.resolve().unwrap();
        let res = r.run().unwrap();
        let got = servesim_core::scenario::SweepReport::new(&s2, &r, &res).to_json_pretty();
        let want = std::fs::read_to_string(dir.join(format!("scenario_{name}.json"))).unwrap();
        assert!(
            got == want,
            "{name}: the reopened link no longer gives the golden report"
        );
    }
}

/// No silent engine cap: 8,192 one-GPU replicas are 8,192 engines; above the stated limit the
/// scenario is refused with the limit in the message.
#[test]
fn engine_limit_is_stated_not_silent() {
    let mut s = base();
    s.num_gpus = Some(8192);
    let r = s.resolve().unwrap();
    assert_eq!(r.topology.replicas, 8192);
    assert_eq!(r.plan().total_engines(), 8192);
    assert_eq!(r.sweep.gpus, 8192);
    let mut big = base();
    big.topology = Some(RawTopology {
        replicas: Some(MAX_ENGINES + 1),
        router: None,
        ..RawTopology::default()
    });
    let e = big.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.replicas");
    assert!(e.to_string().contains(&MAX_ENGINES.to_string()), "{e}");
    // replicas and num_gpus must agree
    let mut both = with_topology(base(), 2, RouterPolicy::RoundRobin);
    both.num_gpus = Some(4);
    let e = both.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.replicas");
}

/// Router settings are validated with the field named.
#[test]
fn router_settings_are_validated() {
    let mut s = with_topology(base(), 2, RouterPolicy::LlmD);
    s.topology.as_mut().unwrap().router.as_mut().unwrap().preset = Some("fastest".into());
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.router.preset");
    let mut s = with_topology(base(), 2, RouterPolicy::LlmD);
    s.topology
        .as_mut()
        .unwrap()
        .router
        .as_mut()
        .unwrap()
        .refresh_interval_ms = Some(0.0);
    assert_eq!(
        s.resolve().unwrap_err().field(),
        "topology.router.refresh_interval_ms"
    );
    let mut s = with_topology(base(), 2, RouterPolicy::LlmD);
    s.topology
        .as_mut()
        .unwrap()
        .router
        .as_mut()
        .unwrap()
        .max_outstanding_per_replica = Some(0);
    assert_eq!(
        s.resolve().unwrap_err().field(),
        "topology.router.max_outstanding_per_replica"
    );
    let err = Scenario::from_json(
        r#"{"version":2,"model":{"catalog":"meta-llama/Meta-Llama-3.1-8B"},"gpu":{"catalog":"H100-SXM"},
            "workload":{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"synthetic","input":{"type":"constant","tokens":8},"output":{"type":"constant","tokens":8}}},
            "topology":{"replicas":2,"routr":{}}}"#,
    )
    .unwrap_err();
    assert_eq!(err.field(), "topology");
}

/// The seed deployments (docs/topology.md "Seed scenarios") resolve; the small ones run.
#[test]
fn seed_scenarios_resolve() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 4,
        "seed scenarios missing in {}",
        dir.display()
    );
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap();
        let s = Scenario::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let r = s
            .resolve()
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(r.capacity.fits, "{}: {}", p.display(), r.capacity.reason);
    }
}

/// Chat-template render rounds in every replica's API server (vLLM before 0.19 renders on its
/// event loop; docs/accuracy.md "Front-end terms"): with requests in rounds at the window's end,
/// every request is still accounted for, each replica has its own loop, and a loop faster than
/// the engines leaves the engine-bound throughput as it was.
#[test]
fn render_rounds_keep_every_request_accounted_for() {
    for replicas in [1u32, 3] {
        let run = |render_s: f64| {
            let mut s = if replicas == 1 {
                base()
            } else {
                with_topology(base(), replicas, RouterPolicy::RoundRobin)
            };
            s.endpoint = Some(servesim_core::scenario::Endpoint::Chat);
            s.vllm_version = Some("0.11.0".into());
            let o: servesim_core::perf::EfficiencyOverrides =
                serde_json::from_value(serde_json::json!({"api_render_chat_s": render_s})).unwrap();
            s.efficiencies = Some(o);
            let r = s.resolve().unwrap();
            let (res, col, topo) = run_one(&r, Level::Concurrency(48 * replicas));
            check_invariants(&r, &res, &col, topo.as_ref());
            assert_eq!(
                r.sweep.frontend.render_round.as_secs_f64(),
                render_s,
                "{replicas} replica(s)"
            );
            res
        };
        let without = run(0.0);
        let with = run(0.005);
        assert!(with.totals.in_flight_at_end > 0);
        // The loop renders 200 requests/s per replica, far above what the engines finish here
        // (about 12/s), so the rounds stay small: the engine-bound throughput is unchanged.
        let (a, b) = (
            with.output_tokens_per_s.unwrap(),
            without.output_tokens_per_s.unwrap(),
        );
        assert!(rel(a, b) < 0.05, "{replicas} replica(s): {a} vs {b} tok/s");
        assert_ne!(
            with.ttft_ms, without.ttft_ms,
            "the rounds change when requests start"
        );
    }
}
