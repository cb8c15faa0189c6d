//! Measures the simulator's speed: a default 10-level closed-loop sweep (c = 1..512), 900 s per
//! level, of an 8B-like model on one GPU (linear step-time stand-in).
//! Run: `cargo run --release -p servesim-core --example sweep_speed`
//! Env: `NOPC=1` turns prefix caching off; `ONLY=<substring>` runs only the matching workloads;
//! `QUIET=1` prints only the timing lines.

use servesim_core::engine::{EngineConfig, KvFootprint, LinearStepTime};
use servesim_core::sweep::{sweep, RawSweepSpec};
use servesim_core::workload::RawWorkloadSpec;
use std::time::Instant;

fn main() {
    // Llama-3.1-8B-like on an H100: ~5 ms weight read per step, ~25 us compute per token,
    // 128 KiB of KV per token read at ~3.3 TB/s (~40 ns per context token).
    let model = LinearStepTime {
        per_step_ns: 5.0e6,
        per_token_ns: 25_000.0,
        per_ctx_token_ns: 40.0,
    };
    let cfg = EngineConfig {
        max_num_seqs: 256,
        max_num_batched_tokens: 8192,
        block_size: 16,
        num_gpu_blocks: 29_000,
        max_model_len: 131_072,
        enable_prefix_caching: std::env::var("NOPC").is_err(),
        long_prefill_token_threshold: 0,
        enable_chunked_prefill: true,
        mamba_align: false,
        v0_prefill_first: false,
        num_scheduler_steps: 1,
        kv: KvFootprint::uniform(),
        spec: None,
        offload: None,
    };
    let workloads = [
        (
            "synthetic 1024/256",
            r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"synthetic","input":{"type":"uniform_ratio","nominal":1024,"min_ratio":0.8,"max_ratio":1.0},"output":{"type":"uniform_ratio","nominal":256,"min_ratio":0.8,"max_ratio":1.0}}}"#,
        ),
        (
            "agentic-coding",
            r#"{"arrival":{"type":"closed_loop","concurrency":1},"requests":{"type":"preset","name":"agentic-coding"}}"#,
        ),
    ];
    let spec = RawSweepSpec::default().validate().unwrap();
    let only = std::env::var("ONLY").ok();
    let quiet = std::env::var("QUIET").is_ok();
    for (name, w) in workloads {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let w = RawWorkloadSpec::from_json(w).unwrap().validate().unwrap();
        let t0 = Instant::now();
        let res = sweep(&cfg, &model, &w, &spec).unwrap();
        let dt = t0.elapsed();
        let steps: u64 = res.levels.iter().map(|l| l.totals.steps).sum();
        let reqs: u64 = res.levels.iter().map(|l| l.totals.completed).sum();
        println!(
            "{name}: {} levels x 900 s in {:.3} s wall ({steps} steps, {reqs} requests)",
            res.levels.len(),
            dt.as_secs_f64()
        );
        for l in res.levels.iter().filter(|_| !quiet) {
            println!(
                "  c={:>4} out_tok/s={:>8.0} ttft_p50={:>9.1} ms itl_mean={:>6.1} ms batch={:>6.1} kv_peak={:.2} hit={:.2} preempt={}",
                l.level.value(),
                l.output_tokens_per_s.unwrap_or(f64::NAN),
                l.ttft_ms.map(|d| d.p50).unwrap_or(f64::NAN),
                l.itl_ms.map(|d| d.mean).unwrap_or(f64::NAN),
                l.mean_running_batch.unwrap_or(f64::NAN),
                l.kv_utilization_peak,
                l.prefix_cache_hit_rate.unwrap_or(f64::NAN),
                l.preemptions
            );
        }
    }
}
