//! The CPU KV offload tier (engine/offload.rs, docs/engine.md "CPU KV offload tier"):
//! invariants on whole scenarios, the differential against no tier, `blocks_per_chunk`, and the
//! golden of the report's TP8 DeepSeek-V4-Flash arm with MTP and a CPU tier with
//! `blocks_per_chunk` 4 (`tests/golden/scenarios/dsv4flash_tp8_h200_mtp_cpu_offload.json`).

use servesim_core::engine::{
    Engine, EngineConfig, KvFootprint, LinearStepTime, NullObserver, OffloadConfig, Request,
    Segment,
};
use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::scenario::{ResolvedScenario, Scenario, SweepReport};
use servesim_core::sweep::run_level;
use servesim_core::units::Ticks;
use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn scenario(name: &str) -> Scenario {
    let text = std::fs::read_to_string(golden_dir().join("scenarios").join(format!("{name}.json")))
        .unwrap();
    Scenario::from_json(&text).unwrap()
}

fn levels(r: &ResolvedScenario) -> Vec<(LevelResult, Collector)> {
    let runner = r.runner().unwrap();
    runner
        .levels()
        .iter()
        .map(|l| run_level(&r.engine, &r.cost, &r.workload, &r.sweep, *l).unwrap())
        .collect()
}

/// Invariants every run with a CPU tier keeps.
fn check(r: &ResolvedScenario, lr: &LevelResult, col: &Collector) {
    let t = &lr.totals;
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total, "GPU KV over capacity");
    let cfg = r.engine.offload.as_ref().expect("a CPU tier");
    let d = col.offload_totals().expect("the tier reports");
    assert!(d.peak_chunks <= cfg.num_chunks, "CPU tier over capacity");
    // Every load is waited for: admission strictly after the issue (>= 1 ns each), and it
    // moved bytes over the link.
    assert!(d.load_wait_ns >= d.loads);
    assert_eq!(d.loaded_bytes % cfg.chunk_bytes, 0);
    assert!(d.loads == 0 || d.loaded_bytes >= d.loads * cfg.chunk_bytes);
    // Stores move whole chunks of blocks_per_chunk blocks.
    assert_eq!(d.stored_bytes, d.stored_chunks * cfg.chunk_bytes);
    for f in col.finished() {
        assert!(f.arrival <= f.first_scheduled);
        assert!(f.first_scheduled < f.first_token);
        assert!(f.first_token <= f.finish);
        let sum: u64 = col.request_itls(f).iter().map(|x| x.0).sum();
        assert_eq!(sum, f.finish.0 - f.first_token.0);
    }
}

#[test]
fn golden_dsv4flash_tp8_h200_mtp_cpu_offload() {
    let name = "dsv4flash_tp8_h200_mtp_cpu_offload";
    let s = scenario(name);
    let r = s.resolve().unwrap();
    let cfg = r.engine.offload.clone().unwrap();
    assert_eq!(cfg.blocks_per_chunk, 4);
    let tier = r.capacity.cpu_tier.as_ref().unwrap();
    // OffloadingConnector: cpu_bytes_to_use over world_size ranks, chunks of 4 blocks.
    assert_eq!(
        tier.chunks,
        107_374_182_400 / (cfg.chunk_bytes * r.deployment.par.tp as u64)
    );
    // A chunk is 4 GPU blocks of every full-attention group on one rank.
    assert_eq!(
        cfg.chunk_bytes,
        4 * r.capacity.block_bytes * r.engine.kv.full_groups as u64
    );
    let result = r.run().unwrap();
    let mut hits = 0;
    for ((lr, col), got) in levels(&r).iter().zip(&result.levels) {
        assert_eq!(lr, got);
        check(&r, lr, col);
        hits += lr.cpu_offload.as_ref().unwrap().cpu_hit_tokens;
    }
    assert!(hits > 0, "the golden exercises CPU-tier hits");
    let out = SweepReport::new(&s, &r, &result).to_json_pretty();
    let path = golden_dir().join(format!("scenario_{name}.json"));
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).expect("golden file; run with UPDATE_GOLDEN=1");
    assert!(
        want == out,
        "{} differs from the golden output; rerun with UPDATE_GOLDEN=1 if intended",
        path.display()
    );
}

/// A tier that is never hit (every prompt unique) changes nothing but the store traffic.
#[test]
fn never_hit_tier_changes_only_store_traffic() {
    let base = r#"{
      "version": 1,
      "model": {"catalog": "meta-llama/Llama-3.1-8B-Instruct"},
      "gpu": {"catalog": "H100"},
      "engine": {"kv_cache_memory_bytes": 4000000000, "max_model_len": 16384 KVT},
      "workload": {
        "arrival": {"type": "closed_loop", "concurrency": 1},
        "requests": {"type": "synthetic",
          "input": {"type": "constant", "tokens": 3000},
          "output": {"type": "constant", "tokens": 200}},
        "seed": 5
      },
      "sweep": {"concurrency": [2, 4], "duration_s": 40, "warmup_s": 5}
    }"#;
    let off = Scenario::from_json(&base.replace("KVT", ""))
        .unwrap()
        .resolve()
        .unwrap();
    let on = Scenario::from_json(&base.replace(
        "KVT",
        r#", "kv_transfer_config": {"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {"cpu_bytes_to_use": 2000000000, "blocks_per_chunk": 4}}"#,
    ))
    .unwrap()
    .resolve()
    .unwrap();
    for ((a, _), (b, col)) in levels(&off).iter().zip(levels(&on).iter()) {
        check(&on, b, col);
        let c = b.cpu_offload.clone().unwrap();
        assert_eq!(c.cpu_hit_tokens, 0);
        assert_eq!(c.loads, 0);
        assert!(c.stored_bytes_per_rank > 0);
        let mut b = b.clone();
        b.cpu_offload = None;
        assert_eq!(a, &b);
    }
}

/// Loads from the CPU tier: the same scenario gives the same numbers run after run, and the
/// requests that loaded waited for it.
#[test]
fn cpu_hits_are_deterministic_and_waited_for() {
    let r = scenario("dsv4flash_tp8_h200_mtp_cpu_offload")
        .resolve()
        .unwrap();
    let a = levels(&r);
    let b = levels(&r);
    for ((la, ca), (lb, _)) in a.iter().zip(&b) {
        check(&r, la, ca);
        assert_eq!(la, lb);
        let c = la.cpu_offload.as_ref().unwrap();
        if c.loads > 0 {
            assert!(c.load_wait_ms_mean.unwrap() > 0.0);
            assert!(c.cpu_hit_rate.unwrap() > 0.0);
        }
    }
}

#[test]
fn bad_kv_transfer_config_names_the_field() {
    let j = r#"{"version": 1, "model": {"catalog": "meta-llama/Llama-3.1-8B-Instruct"},
      "gpu": {"catalog": "H100"},
      "engine": {"kv_transfer_config": {"kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 1e9, "blocks_per_chunk": 0}}},
      "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
        "requests": {"type": "preset", "name": "agentic-coding"}}}"#;
    let e = match Scenario::from_json(j).and_then(|s| s.resolve().map(|_| ())) {
        Err(e) => e.to_string(),
        Ok(()) => panic!("accepted blocks_per_chunk 0"),
    };
    assert!(e.contains("blocks_per_chunk"), "{e}");
}

fn engine_cfg(blocks: u64, bpc: u32, chunks: u64) -> EngineConfig {
    EngineConfig {
        max_num_seqs: 16,
        max_num_batched_tokens: 512,
        block_size: 16,
        num_gpu_blocks: blocks,
        max_model_len: 4096,
        enable_prefix_caching: true,
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        mamba_align: false,
        v0_prefill_first: false,
        num_scheduler_steps: 1,
        kv: KvFootprint::uniform(),
        spec: None,
        offload: Some(OffloadConfig {
            blocks_per_chunk: bpc,
            num_chunks: chunks,
            chunk_bytes: 1_000_000 * bpc as u64,
            link_bytes_per_s: 50_000_000_000,
            store_threshold: 0,
            max_tracker_size: 64_000,
        }),
    }
}

const MODEL: LinearStepTime = LinearStepTime {
    per_step_ns: 1.0e6,
    per_token_ns: 10_000.0,
    per_ctx_token_ns: 1.0,
};

fn req(id: u64, stream: u64, prompt: u64, out: u64, t: Ticks) -> Request {
    Request {
        id,
        arrival: t,
        prompt: vec![Segment {
            stream,
            start: 0,
            len: prompt,
        }],
        output_stream: 1000 + id,
        output_start: 0,
        output_len: out,
    }
}

/// Stores move whole chunks: 165 prompt tokens + 1 output = 10 full blocks of 16 -> with
/// `blocks_per_chunk` 4, two chunks (blocks 0-7; blocks 8-9 stay on the GPU only), with 1 ten.
#[test]
fn stores_happen_in_chunks_of_blocks_per_chunk() {
    for (bpc, want) in [(4u32, 2u64), (1, 10), (3, 3)] {
        let cfg = engine_cfg(1000, bpc, 100);
        let mut e = Engine::new(0, cfg, &MODEL).unwrap();
        let mut obs = NullObserver;
        e.submit(req(1, 7, 165, 1, Ticks::ZERO), Ticks::ZERO, &mut obs)
            .unwrap();
        e.advance_to(Ticks(u64::MAX / 2), &mut obs).unwrap();
        let (st, held) = e.offload_stats().unwrap();
        assert_eq!(st.stored_chunks, want, "blocks_per_chunk {bpc}");
        assert_eq!(held, want);
        assert_eq!(st.stored_bytes, want * 1_000_000 * bpc as u64);
    }
}

/// A prompt evicted from a small GPU pool comes back from the CPU tier: the repeat waits for its
/// load (> 0 ns), is never scheduled before it, computes only what the tier lacked, and the
/// tier never exceeds its chunks.
#[test]
fn a_reload_costs_time_and_the_request_waits_for_it() {
    // 40 GPU blocks; prompt A (30 blocks), then B (30 blocks) evicts A, then A again.
    let cfg = engine_cfg(40, 2, 40);
    let mut e = Engine::new(0, cfg, &MODEL).unwrap();
    let mut col = Collector::new();
    let mut t = Ticks::ZERO;
    for (id, stream) in [(1u64, 7u64), (2, 8), (3, 7)] {
        e.submit(req(id, stream, 30 * 16 + 3, 2, t), t, &mut col)
            .unwrap();
        e.advance_to(Ticks(u64::MAX / 2), &mut col).unwrap();
        t = col.finished().last().unwrap().finish;
    }
    let (st, held) = e.offload_stats().unwrap();
    assert!(held <= 40);
    assert_eq!(st.loads, 1, "{st:?}");

    assert!(st.hit_tokens > 0, "{st:?}");
    assert!(st.load_wait_ns >= 1);
    // The link time of the load: bytes / rate, at least.
    let link_ns = st.loaded_bytes * 1_000_000_000 / 50_000_000_000;
    assert!(st.load_wait_ns >= link_ns, "{st:?}");
    let a2 = &col.finished()[2];
    assert!(a2.first_scheduled.0 >= a2.arrival.0 + link_ns);
    assert_eq!(col.finished().len(), 3);
}

/// Llama-3.1-8B TP1 with an OffloadingConnector tier of `bytes`, on `gpu`, engine extras.
fn offload_scenario(gpu: &str, bytes: f64, extra: &str) -> Result<ResolvedScenario, String> {
    let j = format!(
        r#"{{"version": 1, "model": {{"catalog": "meta-llama/Llama-3.1-8B-Instruct"}},
      "gpu": {{"catalog": "{gpu}"}}, "num_gpus": 8,
      "engine": {{"kv_transfer_config": {{"kv_connector": "OffloadingConnector",
        "kv_connector_extra_config": {{"cpu_bytes_to_use": {bytes}, "blocks_per_chunk": 1}}}}{extra}}},
      "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
        "requests": {{"type": "preset", "name": "agentic-coding"}}}}}}"#
    );
    Scenario::from_json(&j)
        .and_then(|s| s.resolve())
        .map_err(|e| e.to_string())
}

/// The node's host memory bounds the tier: 8 ranks x 300 GB = 2.4 TB does not fit the 2 TiB
/// of an 8x H100 node (refused naming cpu_bytes_to_use); 8 x 200 GB does, and the capacity
/// report shows the node's memory and its source. A GPU the system table lacks needs the host
/// memory stated (refused naming engine.host_memory_gb_per_node), and a stated value bounds it.
#[test]
fn host_memory_per_node_bounds_the_cpu_tier() {
    let e = offload_scenario("H100", 300e9, "").unwrap_err();
    assert!(
        e.contains("cpu_bytes_to_use") && e.contains("host memory"),
        "{e}"
    );
    let ok = offload_scenario("H100", 200e9, "").unwrap();
    let tier = ok.capacity.cpu_tier.as_ref().unwrap();
    assert_eq!(tier.gpus_per_node, 8);
    assert_eq!(tier.host_memory_bytes_per_node, Some(2048u64 << 30));
    assert!(tier.host_bytes_per_node <= 2048u64 << 30);
    assert!(tier.host_memory_source.contains("mlcommons"));
    // the default host link is the achieved PCIe Gen5 rate, below the 63 GB/s link peak
    assert!(
        (50.0..56.0).contains(&tier.host_link_gb_s),
        "{}",
        tier.host_link_gb_s
    );

    let e = offload_scenario("B200", 100e9, "").unwrap_err();
    assert!(e.contains("engine.host_memory_gb_per_node"), "{e}");
    let stated = offload_scenario("B200", 100e9, r#", "host_memory_gb_per_node": 4096"#).unwrap();
    let tier = stated.capacity.cpu_tier.as_ref().unwrap();
    assert_eq!(tier.host_memory_bytes_per_node, Some(4_096_000_000_000));
    assert!(tier.host_memory_source.contains("stated"));
    let e = offload_scenario("B200", 600e9, r#", "host_memory_gb_per_node": 4096"#).unwrap_err();
    assert!(e.contains("cpu_bytes_to_use"), "{e}");
    let e = offload_scenario("B200", 100e9, r#", "host_memory_gb_per_node": 0"#).unwrap_err();
    assert!(e.contains("host_memory_gb_per_node"), "{e}");
}
