//! Data-parallel attention with expert parallelism (docs/topology.md "DP + EP", docs/step-time.md
//! "5a. All-to-all backends"): invariants of lockstep runs, the all-to-all backends identical at
//! DP = 1 and different at DP = 2 (and why), the scenario field's validation, and goldens of the
//! validation report's Agg-2r arm at DP = 2 with both DeepEP backends.

use servesim_core::deploy::All2AllBackend;
use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::perf::PrefillChunk;
use servesim_core::scenario::{ResolvedScenario, Scenario, SweepReport};
use servesim_core::sweep::run_level_plan;
use servesim_core::topology::TopologyLevel;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// DeepSeek-V4-Flash TP8 on H200 with DP + EP, 2,000 in / 200 out, closed loop at 32, 30 s.
fn dsv4(dp: u32, backend: All2AllBackend, extra_engine: &str) -> Scenario {
    let json = format!(
        r#"{{
  "version": 2,
  "model": {{"catalog": "deepseek-ai/DeepSeek-V4-Flash"}},
  "gpu": {{"catalog": "H200"}},
  "tp": 8, "dp": {dp}, "enable_expert_parallel": true,
  "kv_cache_dtype": "fp8_ds_mla",
  "engine": {{"max_num_seqs": 256, "all2all_backend": "{}"{extra_engine}}},
  "workload": {{
    "arrival": {{"type": "closed_loop", "concurrency": 1}},
    "requests": {{"type": "synthetic",
      "input": {{"type": "uniform", "min": 1000, "max": 3000}},
      "output": {{"type": "uniform", "min": 100, "max": 300}}}},
    "seed": 3
  }},
  "sweep": {{"concurrency": [32], "duration_s": 30, "warmup_s": 5}}
}}"#,
        backend.name()
    );
    Scenario::from_json(&json).unwrap()
}

fn run_one(r: &ResolvedScenario) -> (LevelResult, Collector, Option<TopologyLevel>) {
    let level = r.runner().unwrap().levels()[0];
    run_level_plan(&r.plan(), &r.workload, &r.sweep, level).unwrap()
}

/// Checks that hold on every run.
fn check_invariants(r: &ResolvedScenario, res: &LevelResult, col: &Collector) {
    let t = &res.totals;
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    let mut ids: Vec<u64> = col.finished().iter().map(|f| f.id).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "a request finished twice");
    assert!(!col.clock_went_back, "time went backwards");
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "KV over capacity: {peak} > {total}");
    assert_eq!(total, r.engine.num_gpu_blocks);
    let engines = r.topology.replicas * r.deployment.par.dp;
    for f in col.finished() {
        assert!(f.engine < engines);
        assert!(f.arrival <= f.first_scheduled);
        assert!(f.first_scheduled < f.first_token);
        assert!(f.first_token <= f.finish);
        let sum: u64 = col.request_itls(f).iter().map(|x| x.0).sum();
        assert_eq!(sum, f.finish.0 - f.first_token.0);
    }
}

/// Per replica, pairs of steps of different DP ranks that overlap in time without being the
/// same interval (0 under lockstep: every step of a group starts and ends together).
fn misaligned_steps(r: &ResolvedScenario, col: &Collector) -> (u64, u64) {
    let dp = r.deployment.par.dp;
    let (mut bad, mut total) = (0u64, 0u64);
    for rep in 0..r.topology.replicas {
        let spans: Vec<Vec<(u64, u64)>> = (0..dp)
            .map(|k| {
                let e = rep * dp + k;
                (0..col.num_steps_of(e))
                    .map(|i| {
                        let (a, b) = col.step_span(e, i);
                        (a.0, b.0)
                    })
                    .collect()
            })
            .collect();
        for v in &spans {
            assert!(
                v.windows(2).all(|w| w[0].1 <= w[1].0),
                "a rank's steps overlap"
            );
            total += v.len() as u64;
        }
        for x in 0..spans.len() {
            for y in x + 1..spans.len() {
                let (p, q) = (&spans[x], &spans[y]);
                let (mut i, mut j) = (0, 0);
                while i < p.len() && j < q.len() {
                    let (a, b) = (p[i], q[j]);
                    if a != b && a.0 < b.1 && b.0 < a.1 {
                        bad += 1;
                    }
                    if a.1 <= b.1 {
                        i += 1;
                    } else {
                        j += 1;
                    }
                }
            }
        }
    }
    (bad, total)
}

#[test]
fn backends_are_identical_at_dp1() {
    // EP within TP (dp = 1): vLLM builds no all2all manager, the MoE output is all-reduced over
    // TP, so the backend changes nothing (the report: byte-identical across 4 backends).
    let mut outs = Vec::new();
    for b in All2AllBackend::ALL {
        let r = dsv4(1, b, "").resolve().unwrap();
        assert!(!r.deployment.dp_lockstep());
        assert!(r.cost.all2all_model().is_none());
        let (res, col, _) = run_one(&r);
        check_invariants(&r, &res, &col);
        outs.push((serde_json::to_string(&res).unwrap(), r.capacity.num_blocks));
    }
    assert!(
        outs.windows(2).all(|w| w[0] == w[1]),
        "a backend changed a DP=1 result"
    );
}

#[test]
fn backends_differ_at_dp2_through_the_all2all_term() {
    // CUDA graphs off on both (deepep_high_throughput turns them off anyway), so the only
    // difference between the two DeepEP backends is the dispatch/combine term.
    let eager = r#", "cudagraph_mode": "NONE""#;
    let ll = dsv4(2, All2AllBackend::DeepepLowLatency, eager)
        .resolve()
        .unwrap();
    let ht = dsv4(2, All2AllBackend::DeepepHighThroughput, eager)
        .resolve()
        .unwrap();
    assert!(ll.deployment.dp_lockstep() && ht.deployment.dp_lockstep());
    // A decode step and a mixed step: every term but the all-to-all is the same.
    let shapes: [(&[PrefillChunk], u64, u64); 2] = [
        (&[], 32, 32 * 2000),
        (&[PrefillChunk { past: 0, new: 2048 }], 16, 16 * 1500),
    ];
    for (pf, n, ctx) in shapes {
        let a = ll.cost.breakdown_iter(pf.iter().copied(), n, ctx);
        let b = ht.cost.breakdown_iter(pf.iter().copied(), n, ctx);
        assert_eq!(a.gemm_compute, b.gemm_compute);
        assert_eq!(a.weight_reads, b.weight_reads);
        assert_eq!(a.attention_compute, b.attention_compute);
        assert_eq!(a.kv_reads, b.kv_reads);
        assert_eq!(a.activations, b.activations);
        assert_eq!(a.tp_allreduce, b.tp_allreduce);
        assert_ne!(a.ep_alltoall, b.ep_alltoall);
        let (la, lb) = (a.all2all.unwrap(), b.all2all.unwrap());
        assert!(
            la.internode && lb.internode,
            "EP 16 spans two 8-GPU H200 nodes"
        );
        assert_eq!(a.overhead, b.overhead);
        // So the step-time difference is the all-to-all difference.
        let d_total = a.total() - b.total();
        let d_a2a = a.ep_alltoall - b.ep_alltoall;
        assert!(
            (d_total - d_a2a).abs() <= 1e-12 * a.total(),
            "total {d_total} vs all2all {d_a2a}"
        );
    }
    // Decode batches of a few tokens per GPU: DeepEP low-latency pays its measured per-call
    // latency (118 / 195 us at EP 16), high-throughput its bytes over RDMA plus 20 us per call.
    let a = ll.cost.breakdown_iter(std::iter::empty(), 32, 32 * 2000);
    let b = ht.cost.breakdown_iter(std::iter::empty(), 32, 32 * 2000);
    assert!(a.ep_alltoall > b.ep_alltoall);
    // The simulated level follows: ITL is higher under low-latency.
    let (ra, ca, _) = run_one(&ll);
    let (rb, cb, _) = run_one(&ht);
    check_invariants(&ll, &ra, &ca);
    check_invariants(&ht, &rb, &cb);
    for (r, c) in [(&ll, &ca), (&ht, &cb)] {
        let (bad, total) = misaligned_steps(r, c);
        assert!(total > 100);
        assert_eq!(bad, 0, "lockstep ranks' steps start and end together");
    }
    // Control: the same deployment as a scenario without the field (independent ranks).
    let mut legacy = dsv4(2, All2AllBackend::DeepepLowLatency, eager);
    legacy.enable_expert_parallel = None;
    legacy.ep = 16;
    let lr = legacy.resolve().unwrap();
    let (res, col, _) = run_one(&lr);
    check_invariants(&lr, &res, &col);
    let (bad, _) = misaligned_steps(&lr, &col);
    assert!(bad > 0, "independent ranks' steps do not line up");
    let (ia, ib) = (ra.itl_ms.as_ref().unwrap(), rb.itl_ms.as_ref().unwrap());
    assert!(ia.p50 > ib.p50, "ITL p50 LL {} vs HT {}", ia.p50, ib.p50);
    assert_ne!(
        serde_json::to_string(&ra).unwrap(),
        serde_json::to_string(&rb).unwrap()
    );
}

#[test]
fn deepep_high_throughput_turns_cuda_graphs_off_at_dp2() {
    let ht = dsv4(2, All2AllBackend::DeepepHighThroughput, "")
        .resolve()
        .unwrap();
    assert_eq!(
        ht.deployment.engine.cudagraph_mode,
        servesim_core::deploy::CudagraphMode::None
    );
    assert!(ht
        .deployment
        .notes
        .iter()
        .any(|n| n.contains("CUDA graphs off")));
    let ll = dsv4(2, All2AllBackend::DeepepLowLatency, "")
        .resolve()
        .unwrap();
    assert_ne!(
        ll.deployment.engine.cudagraph_mode,
        servesim_core::deploy::CudagraphMode::None
    );
}

#[test]
fn lockstep_only_for_moe_with_the_field_stated() {
    // A version-1 file of a MoE model at dp 2 keeps independent ranks (its numbers unchanged).
    let mut legacy = dsv4(2, All2AllBackend::DeepepLowLatency, "");
    legacy.enable_expert_parallel = None;
    legacy.ep = 16;
    let r = legacy.resolve().unwrap();
    assert!(!r.deployment.dp_lockstep());
    assert!(!r.plan().pools[0].lockstep);
    // enable_expert_parallel false: experts tensor-parallel, ranks still in lockstep (vLLM's
    // DPEngineCoreProc is chosen by the model being MoE, not by EP).
    let mut no_ep = dsv4(2, All2AllBackend::AllgatherReducescatter, "");
    no_ep.enable_expert_parallel = Some(false);
    let r = no_ep.resolve().unwrap();
    assert_eq!(r.deployment.par.ep, 1);
    assert!(r.plan().pools[0].lockstep);
    // A dense model: the flag is ignored with a note, as vLLM ignores it.
    let mut dense = Scenario::default_scenario();
    dense.dp = 2;
    dense.enable_expert_parallel = Some(true);
    let r = dense.resolve().unwrap();
    assert_eq!(r.deployment.par.ep, 1);
    assert!(!r.plan().pools[0].lockstep);
    assert!(r
        .deployment
        .notes
        .iter()
        .any(|n| n.contains("enable_expert_parallel has no effect")));
}

#[test]
fn conflicting_ep_names_the_field_and_the_fix() {
    let mut s = dsv4(2, All2AllBackend::DeepepLowLatency, "");
    s.ep = 8;
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "ep");
    assert!(e.to_string().contains("drop ep or set it to 16"), "{e}");
    let mut s = dsv4(2, All2AllBackend::DeepepLowLatency, "");
    s.enable_expert_parallel = Some(false);
    s.ep = 16;
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "ep");
    assert!(
        e.to_string().contains("set enable_expert_parallel true"),
        "{e}"
    );
    // A version-1 document cannot carry the version-2 field.
    let e = Scenario::from_json(
        r#"{"version": 1, "model": {"catalog": "Qwen/Qwen3-30B-A3B"}, "gpu": {"catalog": "H100-SXM"}, "enable_expert_parallel": true, "workload": {"arrival": {"type": "closed_loop", "concurrency": 1}, "requests": {"type": "synthetic", "input": {"type": "constant", "tokens": 10}, "output": {"type": "constant", "tokens": 10}}}}"#,
    )
    .unwrap_err();
    assert_eq!(e.field(), "enable_expert_parallel");
    // Written as version 2, and read back the same.
    let s = dsv4(2, All2AllBackend::DeepepLowLatency, "");
    assert_eq!(s.written_version(), 2);
    assert_eq!(Scenario::from_json(&s.to_json()).unwrap(), s);
}

/// The report's Agg-2r arm at DP = 2 (`tests/scenarios/agg-2r-dsv4-flash-h200-tp8-dp2-*.json`),
/// run on three of its levels for 120 s each (the full sweep is 7 levels x 900 s), against
/// `tests/golden/scenario_agg2r_dp2_*.json`, with the invariants on every level. Regenerate with
/// `UPDATE_GOLDEN=1 cargo test -p servesim-core --test dp_ep` and review the diff.
fn agg2r_golden(short: &str) {
    let input = repo().join(format!(
        "tests/scenarios/agg-2r-dsv4-flash-h200-tp8-dp2-{short}.json"
    ));
    let mut s = Scenario::from_json(&std::fs::read_to_string(&input).unwrap()).unwrap();
    s.sweep.concurrency = Some(vec![8.0, 64.0, 256.0]);
    s.sweep.duration_s = Some(120.0);
    s.sweep.warmup_s = Some(20.0);
    let r = s.resolve().unwrap();
    assert!(r.capacity.fits);
    assert!(r.plan().pools[0].lockstep);
    let result = r.run().unwrap();
    let runner = r.runner().unwrap();
    for (lvl, got) in runner.levels().iter().zip(&result.levels) {
        let (lr, col, _) = run_level_plan(&r.plan(), &r.workload, &r.sweep, *lvl).unwrap();
        assert_eq!(&lr, got, "a level run alone gives the sweep's result");
        check_invariants(&r, &lr, &col);
    }
    let out = SweepReport::new(&s, &r, &result).to_json_pretty();
    let path = repo().join(format!("tests/golden/scenario_agg2r_dp2_{short}.json"));
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden {}; run with UPDATE_GOLDEN=1",
            path.display()
        )
    });
    assert!(want == out, "golden {} differs", path.display());
}

#[test]
fn agg2r_dp2_deepep_low_latency_golden() {
    agg2r_golden("ll");
}

#[test]
fn agg2r_dp2_deepep_high_throughput_golden() {
    agg2r_golden("ht");
}

#[test]
fn the_runs_repeat_bit_for_bit() {
    let r = dsv4(2, All2AllBackend::DeepepLowLatency, "")
        .resolve()
        .unwrap();
    let (a, _, _) = run_one(&r);
    let (b, _, _) = run_one(&r);
    assert_eq!(a, b);
}

#[test]
fn lockstep_with_a_cpu_kv_tier_waits_for_loads_without_spinning() {
    // A small GPU KV pool and the agentic preset's long shared prefixes: blocks go to the CPU
    // tier and come back, so ranks can have only loads in flight while the group waits.
    let json = r#"{
  "version": 2,
  "model": {"catalog": "deepseek-ai/DeepSeek-V4-Flash"},
  "gpu": {"catalog": "H200"},
  "tp": 8, "dp": 2, "enable_expert_parallel": true,
  "kv_cache_dtype": "fp8_ds_mla",
  "engine": {
    "kv_cache_memory_bytes": 3000000000, "max_model_len": 262144,
    "all2all_backend": "deepep_low_latency",
    "kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
      "kv_connector_extra_config": {"cpu_bytes_to_use": 107374182400, "blocks_per_chunk": 4}}
  },
  "workload": {
    "arrival": {"type": "closed_loop", "concurrency": 1},
    "requests": {"type": "preset", "name": "agentic-coding"},
    "seed": 3
  },
  "sweep": {"concurrency": [16], "duration_s": 60, "warmup_s": 10}
}"#;
    let r = Scenario::from_json(json).unwrap().resolve().unwrap();
    assert!(r.plan().pools[0].lockstep);
    let (res, col, _) = run_one(&r);
    check_invariants(&r, &res, &col);
    assert!(res.totals.completed > 0);
    let (bad, total) = misaligned_steps(&r, &col);
    assert!(total > 0);
    assert_eq!(bad, 0);
}
