//! Disaggregated prefill/decode (docs/topology.md, "Disaggregated prefill/decode"): invariants
//! on every run (requests accounted for once across the pools, KV within capacity in every
//! engine, no decode before its transfer completes, time monotonic), a differential check
//! against one aggregated replica with free, instant transfers, the transfer terms, schema
//! errors, and the golden of the recipe's 1P1D DeepSeek-V4-Pro deployment paired with its
//! invariants.

use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::scenario::{ResolvedScenario, Scenario, SweepReport};
use servesim_core::topology::{
    run_disagg_level_logged, HandoffLog, KvPath, RawKvTransfer, RawPool, RawTopology, TopologyLevel,
};
use servesim_core::workload::{Level, RawArrival};
use std::path::PathBuf;

/// Llama-3.1-8B on H100, 1024 in / 128 out, closed loop, 60 s levels (the default scenario's
/// model and workload), as 1 prefill + 1 decode worker.
fn pd_base() -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.duration_s = Some(60.0);
    s.sweep.warmup_s = Some(10.0);
    s.sweep.concurrency = Some(vec![32.0]);
    s.topology = Some(RawTopology {
        prefill: Some(RawPool::default()),
        decode: Some(RawPool::default()),
        ..RawTopology::default()
    });
    s
}

fn free_transfer(s: &mut Scenario) {
    s.topology.as_mut().unwrap().kv_transfer = Some(RawKvTransfer {
        path: Some(KvPath::Rdma),
        rdma_gbps_per_gpu: Some(1e9),
        latency_ms: Some(0.0),
        nvlink_gb_s: None,
    });
}

type Run = (LevelResult, Collector, TopologyLevel, Vec<HandoffLog>);

fn run(r: &ResolvedScenario, level: Level) -> Run {
    run_disagg_level_logged(&r.plan(), &r.workload, &r.sweep, level).unwrap()
}

/// Checks that hold on every disaggregated run.
fn check_invariants(r: &ResolvedScenario, run: &Run) {
    let (res, col, topo, log) = run;
    let t = &res.totals;
    // each request accounted for exactly once across the pools and the links
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    let mut ids: Vec<u64> = col.finished().iter().map(|f| f.id).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "a request finished twice");
    let mut hids: Vec<u64> = log.iter().map(|h| h.id).collect();
    hids.sort_unstable();
    let nh = hids.len();
    hids.dedup();
    assert_eq!(hids.len(), nh, "a request was transferred twice");
    assert!(!col.clock_went_back, "time went backwards");
    // KV never over capacity: decode engines through the collector, every engine by pool
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "decode KV over capacity: {peak} > {total}");
    assert_eq!(total, r.engine.num_gpu_blocks);
    for p in &topo.pools {
        assert!(
            p.kv_utilization_peak <= 1.0,
            "{} pool KV peak {}",
            p.pool,
            p.kv_utilization_peak
        );
        assert!((0.0..=1.0).contains(&p.busy_fraction));
    }
    let decode_engines = r.topology.replicas * r.deployment.par.dp;
    let by_id: std::collections::BTreeMap<u64, &HandoffLog> =
        log.iter().map(|h| (h.id, h)).collect();
    for f in col.finished() {
        assert!(
            f.engine < decode_engines,
            "finished on a non-decode engine {}",
            f.engine
        );
        let h = by_id
            .get(&f.id)
            .expect("every finished request was transferred");
        assert_eq!(h.decode_engine, f.engine, "decoded where its KV went");
        // a decode never starts before its transfer completes
        assert!(
            f.first_scheduled >= h.done,
            "request {} decoded before its KV arrived",
            f.id
        );
        assert!(h.prefill_done <= h.reserved_at && h.reserved_at <= h.start && h.start <= h.done);
        assert!(f.arrival <= h.prefill_done, "prefilled before it was sent");
        assert!(h.tokens <= f.prompt_len);
        if h.tokens > 0 {
            assert!(h.done > h.start || r.disagg.as_ref().unwrap().transfer.rdma_bytes_s > 1e15);
        }
        assert!(f.first_scheduled < f.first_token && f.first_token <= f.finish);
    }
    // routing: every request sent reached the prefill pool once (or waits at its router)
    let routed_p: u64 = topo
        .replicas
        .iter()
        .filter(|x| x.pool == "prefill")
        .map(|x| x.routed_requests)
        .sum();
    assert!(routed_p <= t.submitted && routed_p + t.in_flight_at_end >= t.submitted);
    let routed_d: u64 = topo
        .replicas
        .iter()
        .filter(|x| x.pool == "decode")
        .map(|x| x.routed_requests)
        .sum();
    assert!(routed_d <= routed_p);
    let out: f64 = topo
        .replicas
        .iter()
        .filter(|x| x.pool == "decode")
        .map(|x| x.output_tokens_per_s)
        .sum();
    assert!((out - res.output_tokens_per_s.unwrap()).abs() <= 1e-6 * out.max(1.0));
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

#[test]
fn disaggregated_pair_invariants_hold() {
    let r = pd_base().resolve().unwrap();
    assert!(r.disagg.is_some());
    assert_eq!(r.sweep.gpus, 2);
    for c in [1u32, 8, 64] {
        let out = run(&r, Level::Concurrency(c));
        check_invariants(&r, &out);
        assert!(out.0.completed_requests > 0);
        let x = out.2.transfer.as_ref().unwrap();
        assert!(x.transfers > 0 && x.total_bytes > 0.0);
        // 1024-token unique prompts move whole: 1024 tokens x the decode rank's bytes
        let per = x.bytes_per_transfer_mean.unwrap();
        let want = r
            .disagg
            .as_ref()
            .unwrap()
            .transfer
            .breakdown(1024, KvPath::Rdma)
            .total_bytes;
        assert!(rel(per, want) < 1e-9, "{per} vs {want}");
    }
}

/// A 1P1D pair with free, instant transfers is never slower than one aggregated replica of the
/// same engine (its parts: the same engine does the prefills in one worker and the decodes in
/// the other): output throughput at least the aggregated one's and ITL no worse, at the same
/// concurrency (2% tolerance for the closed loop's different request timing). Its TTFT gains
/// only the decode worker's one-token step over a prefill-only engine, so it is at most the
/// aggregated TTFT plus one decode step.
#[test]
fn free_transfer_pair_is_never_slower_than_its_parts() {
    for c in [4u32, 32, 128] {
        let mut s = pd_base();
        free_transfer(&mut s);
        let r = s.resolve().unwrap();
        let pd = run(&r, Level::Concurrency(c));
        check_invariants(&r, &pd);
        let mut agg_s = Scenario::default_scenario();
        agg_s.sweep = s.sweep.clone();
        let agg = agg_s.resolve().unwrap();
        let (a, _, _) = servesim_core::sweep::run_level_plan(
            &agg.plan(),
            &agg.workload,
            &agg.sweep,
            Level::Concurrency(c),
        )
        .unwrap();
        let p = &pd.0;
        assert!(
            p.output_tokens_per_s.unwrap() >= a.output_tokens_per_s.unwrap() * 0.98,
            "c={c}: pair {:?} tok/s < aggregated {:?}",
            p.output_tokens_per_s,
            a.output_tokens_per_s
        );
        let (pi, ai) = (p.itl_ms.unwrap().mean, a.itl_ms.unwrap().mean);
        assert!(
            pi <= ai * 1.02,
            "c={c}: pair ITL {pi} ms > aggregated {ai} ms"
        );
        let xt = pd.2.transfer.as_ref().unwrap().transfer_ms.unwrap();
        assert!(xt.p99 < 1e-3, "free transfers take {} ms", xt.p99);
    }
}

/// Transfer cost only adds: the default RDMA link (400 Gb/s, 0.05 ms) gives TTFT at least the
/// free link's, and a slow link more; the wait shows in the transfer statistics.
#[test]
fn slower_links_cost_ttft() {
    let mut ttft = Vec::new();
    for gbps in [1e9, 400.0, 10.0] {
        let mut s = pd_base();
        free_transfer(&mut s);
        let k = s.topology.as_mut().unwrap().kv_transfer.as_mut().unwrap();
        k.rdma_gbps_per_gpu = Some(gbps);
        k.latency_ms = Some(if gbps < 1e9 { 0.05 } else { 0.0 });
        // Poisson arrivals: a closed loop of equal requests can lock into waves (every request
        // prefilled in one batch, then decoded together) whose phase a link's delay decides.
        s.workload.arrival = RawArrival::Poisson { rate: 6.0 };
        s.sweep.concurrency = None;
        s.sweep.request_rates = Some(vec![6.0]);
        let r = s.resolve().unwrap();
        let out = run(&r, Level::RequestRate(6.0));
        check_invariants(&r, &out);
        ttft.push((
            gbps,
            out.0.ttft_ms.unwrap().mean,
            out.2.transfer.clone().unwrap(),
        ));
    }
    // A transfer shorter than the decode worker's step often ends inside the step it would
    // wait for anyway, so 400 Gb/s costs TTFT little; it never gains more than rounding.
    assert!(ttft[0].1 <= ttft[1].1 * 1.001, "{ttft:?}");
    assert!(ttft[2].1 > ttft[1].1 + 50.0, "{ttft:?}");
    // 10 Gb/s: 1024 tokens x 128 KiB per token (Llama-8B bf16 KV) = 128 MiB at 1.25 GB/s
    let slow = ttft[2].2.transfer_ms.unwrap().mean;
    assert!((100.0..120.0).contains(&slow), "slow transfer {slow} ms");
}

/// The decode worker reserves blocks before a transfer starts and the transfer waits when it has
/// none: a decode pool with few KV blocks makes requests wait for blocks, never over capacity.
#[test]
fn transfers_wait_for_decode_blocks() {
    let mut s = pd_base();
    s.topology.as_mut().unwrap().decode = Some(RawPool {
        engine: Some(servesim_core::deploy::RawEngineSettings {
            kv_cache_memory_bytes: Some(2 << 30),
            ..Default::default()
        }),
        ..RawPool::default()
    });
    let r = s.resolve().unwrap();
    let out = run(&r, Level::Concurrency(256));
    check_invariants(&r, &out);
    let x = out.2.transfer.as_ref().unwrap();
    assert!(
        x.block_wait_ms.unwrap().p99 > 0.0,
        "no transfer waited: {x:?}"
    );
}

#[test]
fn prefill_pool_runs_no_drafter_and_keeps_its_own_engine_settings() {
    let mut s = pd_base();
    s.engine.speculative_config =
        Some(serde_json::from_str(r#"{"method": "ngram", "num_speculative_tokens": 3}"#).unwrap());
    s.engine.speculative_acceptance =
        Some(serde_json::from_str(r#"{"mean_acceptance_length": 2.8}"#).unwrap());
    s.topology.as_mut().unwrap().prefill = Some(RawPool {
        engine: Some(servesim_core::deploy::RawEngineSettings {
            max_num_batched_tokens: Some(16384),
            ..Default::default()
        }),
        ..RawPool::default()
    });
    let r = s.resolve().unwrap();
    let pre = &r.disagg.as_ref().unwrap().prefill;
    assert!(
        pre.engine.spec.is_none(),
        "the prefill worker runs no drafter"
    );
    assert!(r.engine.spec.is_some(), "the decode worker keeps it");
    assert_eq!(pre.engine.max_num_batched_tokens, 16384);
    assert_ne!(r.engine.max_num_batched_tokens, 16384);
}

/// With `--max-model-len auto` each pool fits its own context to its own KV memory: a prefill
/// pool on a smaller GPU gets a shorter one, rejects the requests longer than it, and the
/// scenario's warnings say so (the decode pool's longer limit alone would not).
#[test]
fn each_pool_auto_fits_its_own_context_and_the_shorter_one_is_warned_about() {
    let mut s = pd_base();
    s.model = servesim_core::scenario::ModelRef::Catalog("Qwen/Qwen3-32B".into());
    s.gpu = servesim_core::scenario::GpuRef::Catalog("H200".into());
    s.engine.max_model_len = Some(-1);
    s.workload = serde_json::from_str(
        r#"{"arrival": {"concurrency": 2.0, "type": "closed_loop"}, "requests": {"input": {"tokens": 30000.0, "type": "constant"}, "output": {"tokens": 100.0, "type": "constant"}, "type": "synthetic"}, "seed": 0}"#,
    )
    .unwrap();
    s.sweep.concurrency = Some(vec![2.0]);
    s.topology.as_mut().unwrap().prefill = Some(RawPool {
        gpu: Some(servesim_core::scenario::GpuRef::Catalog("H100".into())),
        tp: Some(1),
        ..RawPool::default()
    });
    s.topology.as_mut().unwrap().decode = Some(RawPool {
        tp: Some(2),
        ..RawPool::default()
    });
    let r = s.resolve().unwrap();
    let pre = r.disagg.as_ref().unwrap().prefill.engine.max_model_len;
    // Qwen3-32B: 40,960 fits two H200s; one H100 holds 18,256 (tests/capacity_props.rs).
    assert_eq!((pre, r.engine.max_model_len), (18_256, 40_960));
    let w = r.warnings();
    assert!(
        w.iter()
            .any(|m| m.starts_with("prefill pool: requests of 30100 tokens")
                && m.contains("max_model_len 18256")),
        "{w:?}"
    );
    let res = r.run().unwrap();
    assert_eq!(res.levels[0].completed_requests, 0);
    assert!(res.levels[0].rejected_requests > 0);
}

#[test]
fn schema_errors_name_the_field() {
    let mut s = pd_base();
    s.topology.as_mut().unwrap().decode = None;
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.decode");
    let mut s = pd_base();
    s.topology.as_mut().unwrap().prefill.as_mut().unwrap().tp = Some(0);
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.prefill.tp", "{e}");
    assert!(e.to_string().contains("topology.prefill.tp"), "{e}");
    let mut s = pd_base();
    s.topology
        .as_mut()
        .unwrap()
        .decode
        .as_mut()
        .unwrap()
        .replicas = Some(0);
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.decode.replicas", "{e}");
    let mut s = pd_base();
    s.topology.as_mut().unwrap().decode.as_mut().unwrap().engine =
        Some(servesim_core::deploy::RawEngineSettings {
            max_num_seqs: Some(0),
            ..Default::default()
        });
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.decode.engine.max_num_seqs", "{e}");
    let mut s = pd_base();
    free_transfer(&mut s);
    s.topology
        .as_mut()
        .unwrap()
        .kv_transfer
        .as_mut()
        .unwrap()
        .latency_ms = Some(-1.0);
    let e = s.resolve().unwrap_err();
    assert_eq!(e.field(), "topology.kv_transfer.latency_ms", "{e}");
    let mut s = pd_base();
    s.num_gpus = Some(2);
    assert_eq!(s.resolve().unwrap_err().field(), "num_gpus");
    let mut s = pd_base();
    s.topology.as_mut().unwrap().replicas = Some(2);
    assert_eq!(s.resolve().unwrap_err().field(), "topology.replicas");
}

#[test]
fn scenario_json_round_trips_and_is_version_2() {
    let mut s = pd_base();
    free_transfer(&mut s);
    let j = s.to_json();
    assert!(j.contains("\"version\":2"), "{j}");
    let back = Scenario::from_json(&j).unwrap();
    assert_eq!(back, s);
    // and through a share link
    let link = servesim_core::share::encode(&j);
    let back = Scenario::from_json(&servesim_core::share::decode(&link).unwrap()).unwrap();
    assert_eq!(back, s);
}

/// NVLink inside one NVLink domain (GB200 NVL72: 72 GPUs), RDMA across 8-GPU H200 nodes.
#[test]
fn path_follows_the_nvlink_domain() {
    for (file, path) in [
        ("recipe-1p1d-dsv4-pro-16xgb200.json", KvPath::Nvlink),
        ("recipe-1p1d-dsv4-pro-16xh200.json", KvPath::Rdma),
    ] {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/scenarios")
            .join(file);
        let s = Scenario::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
        let r = s.resolve().unwrap();
        let d = r.disagg.as_ref().unwrap();
        assert!(
            d.prefill.capacity.fits && r.capacity.fits,
            "{file} does not fit"
        );
        assert_eq!(d.transfer.path_between(0, 0), path, "{file}");
        assert_eq!(r.sweep.gpus, 16);
    }
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

/// The recipe's 1P1D deployment of DeepSeek-V4-Pro on 16 H200 (TP8 prefill with
/// max_num_batched_tokens 16384, TP8 decode, fp8_ds_mla KV) on the agentic 64K/400/~90% prefix
/// workload, c = 4 and 32 for 120 s: golden report, each level also run with the handoff log
/// and checked against the invariants. Regenerate with
/// `UPDATE_GOLDEN=1 cargo test -p servesim-core --test topology_pd` and review the diff.
#[test]
fn golden_recipe_1p1d_dsv4pro_h200() {
    let name = "pd_1p1d_dsv4pro_h200_agentic";
    let text = std::fs::read_to_string(golden_dir().join("scenarios").join(format!("{name}.json")))
        .unwrap();
    let s = Scenario::from_json(&text).unwrap();
    let r = s.resolve().unwrap();
    let result = r.run().unwrap();
    let runner = r.runner().unwrap();
    for (lvl, got) in runner.levels().iter().zip(&result.levels) {
        let out = run(&r, *lvl);
        assert_eq!(&out.0, got, "the logged run equals the sweep's");
        check_invariants(&r, &out);
        let x = out.2.transfer.as_ref().unwrap();
        assert_eq!(x.rdma_transfers, x.transfers, "H200 nodes: RDMA");
        // ~90% prefix reuse: the decode worker already holds most of each prompt
        let hit = out.2.pools[1].prefix_cache_hit_rate.unwrap();
        assert!(hit > 0.5, "decode-side prefix hit {hit}");
    }
    let out = SweepReport::new(&s, &r, &result).to_json_pretty();
    let path = golden_dir().join(format!("scenario_{name}.json"));
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
    assert_eq!(
        out, want,
        "golden {name} changed; regenerate with UPDATE_GOLDEN=1 and review"
    );
}

/// The recipe's decode worker with the CPU offload tier stacked on NIXL (`MultiConnector` of
/// `NixlConnector` and `SimpleCPUOffloadConnector`, as `topology.decode.engine.kv_transfer_config`):
/// it resolves on the decode pool only and runs with the invariants intact.
#[test]
fn decode_worker_with_offload_stacked_on_nixl() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/scenarios/recipe-1p1d-dsv4-pro-16xh200-offload.json");
    let mut s = Scenario::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
    s.sweep.duration_s = Some(120.0);
    s.sweep.warmup_s = Some(20.0);
    let r = s.resolve().unwrap();
    let pre = &r.disagg.as_ref().unwrap().prefill;
    assert!(
        r.deployment.engine.kv_transfer.is_some(),
        "decode has the tier"
    );
    assert!(
        pre.deployment.engine.kv_transfer.is_none(),
        "prefill has none"
    );
    for c in [8u32, 64] {
        let out = run(&r, Level::Concurrency(c));
        check_invariants(&r, &out);
        assert!(out.0.completed_requests > 0);
        // The decode tier's activity reaches the level: it stores the blocks it holds and is
        // never looked up for a transferred prompt (its KV arrives over NIXL), so none of the
        // prompt tokens looked up (in the prefill pool) came from it.
        let cpu = out.0.cpu_offload.as_ref().expect("cpu_offload section");
        assert!(cpu.stored_bytes_per_rank > 0, "{cpu:?}");
        assert_eq!((cpu.cpu_hit_tokens, cpu.loads), (0, 0), "{cpu:?}");
        assert_eq!(cpu.cpu_hit_rate, Some(0.0), "{cpu:?}");
    }
}

/// Pairs of steps of different DP ranks of one decode replica that overlap in time without
/// being the same interval (0 under lockstep), and the steps counted. Decode engines are
/// `0 .. replicas x dp`; the collector holds their steps.
fn misaligned_decode_steps(r: &ResolvedScenario, col: &Collector) -> (u64, u64) {
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
        total += spans.iter().map(|v| v.len() as u64).sum::<u64>();
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

/// A wide-EP decode pool (the recipe's DP + EP decode workers): with `enable_expert_parallel`
/// on a MoE model, the decode replica's DP ranks step in lockstep inside the disaggregated
/// plan, as they do in an aggregated replica; without the field they step independently (the
/// control shows overlapping, misaligned steps).
#[test]
fn decode_pool_dp_ranks_step_in_lockstep() {
    let scenario = |ep: &str| {
        let json = format!(
            r#"{{
  "version": 2,
  "model": {{"catalog": "deepseek-ai/DeepSeek-V4-Flash"}},
  "gpu": {{"catalog": "H200"}},
  "tp": 8{ep},
  "kv_cache_dtype": "fp8_ds_mla",
  "engine": {{"max_num_seqs": 256}},
  "topology": {{"prefill": {{}}, "decode": {{"dp": 2}}}},
  "workload": {{
    "arrival": {{"type": "closed_loop", "concurrency": 1}},
    "requests": {{"type": "synthetic",
      "input": {{"type": "uniform", "min": 1000, "max": 3000}},
      "output": {{"type": "uniform", "min": 100, "max": 300}}}},
    "seed": 3
  }},
  "sweep": {{"concurrency": [24], "duration_s": 20, "warmup_s": 4}}
}}"#
        );
        Scenario::from_json(&json).unwrap().resolve().unwrap()
    };
    let lock = scenario(r#", "enable_expert_parallel": true"#);
    assert!(lock.deployment.dp_lockstep(), "decode pool: MoE, dp 2, EP");
    let run_l = run(&lock, Level::Concurrency(24));
    check_invariants(&lock, &run_l);
    let (bad, total) = misaligned_decode_steps(&lock, &run_l.1);
    assert!(total > 100, "{total} decode steps");
    assert_eq!(bad, 0, "lockstep: the ranks' steps start and end together");
    assert!(run_l.0.completed_requests > 0);

    let free = scenario("");
    assert!(!free.deployment.dp_lockstep());
    let run_f = run(&free, Level::Concurrency(24));
    check_invariants(&free, &run_f);
    let (bad, _) = misaligned_decode_steps(&free, &run_f.1);
    assert!(bad > 0, "independent ranks overlap");
}
