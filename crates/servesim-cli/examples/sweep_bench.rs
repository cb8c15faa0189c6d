//! Native simulator benchmark (docs/performance.md, "Native simulator"): runs a scenario's whole
//! sweep through the same path as `servesim sweep` and reports wall time, simulated output tokens
//! per wall second, engine steps per wall second and the peak heap (a counting global allocator).
//!
//! `cargo run --release -p servesim-cli --example sweep_bench -- [reference|peer|FILE.json]...`
//! (no argument: both named scenarios).

use servesim_core::scenario::Scenario;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

struct Counting;
static CUR: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let c = CUR.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(c, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        CUR.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, n) };
        if !q.is_null() {
            if n >= l.size() {
                let c = CUR.fetch_add(n - l.size(), Ordering::Relaxed) + n - l.size();
                PEAK.fetch_max(c, Ordering::Relaxed);
            } else {
                CUR.fetch_sub(l.size() - n, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

/// DeepSeek-V4-Pro on 8x H200 (TP8), fp8_ds_mla KV, agentic-coding preset, concurrency 1..512
/// (10 levels), 900 s per level.
const REFERENCE: &str = r#"{
  "version": 1,
  "model": {"catalog": "deepseek-ai/DeepSeek-V4-Pro"},
  "gpu": {"catalog": "H200"},
  "tp": 8,
  "kv_cache_dtype": "fp8_ds_mla",
  "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
               "requests": {"type": "preset", "name": "agentic-coding"}},
  "sweep": {"concurrency": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], "duration_s": 900}
}"#;

/// Llama-3.1-8B on one H100, closed loop, input and output normal(512, 256) clamped to
/// [2, 7000], max_num_seqs 256, max_num_batched_tokens 2048, concurrency 8..512 (7 levels),
/// 900 s per level.
const PEER: &str = r#"{
  "version": 1,
  "model": {"catalog": "meta-llama/Meta-Llama-3.1-8B"},
  "gpu": {"catalog": "H100-SXM"},
  "engine": {"max_num_seqs": 256, "max_num_batched_tokens": 2048},
  "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
               "requests": {"type": "synthetic",
                            "input": {"type": "normal", "mean": 512, "std": 256, "min": 2, "max": 7000},
                            "output": {"type": "normal", "mean": 512, "std": 256, "min": 2, "max": 7000}}},
  "sweep": {"concurrency": [8, 16, 32, 64, 128, 256, 512], "duration_s": 900}
}"#;

fn bench(name: &str, json: &str) {
    let s = Scenario::from_json(json).unwrap_or_else(|e| panic!("{name}: {e}"));
    let base = CUR.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let t0 = Instant::now();
    let r = s.resolve().unwrap_or_else(|e| panic!("{name}: {e}"));
    let t_resolve = t0.elapsed().as_secs_f64();
    let res = r.run().unwrap_or_else(|e| panic!("{name}: {e}"));
    let wall = t0.elapsed().as_secs_f64();
    let peak = PEAK.load(Ordering::Relaxed) - base;
    let steps: u64 = res.levels.iter().map(|l| l.totals.steps).sum();
    let reqs: u64 = res.levels.iter().map(|l| l.totals.completed).sum();
    let sim_s: f64 = res.levels.iter().map(|l| l.totals.simulated_s).sum();
    // output tokens over the whole simulated time of each level (not only the window)
    let out_tokens: f64 = res
        .levels
        .iter()
        .map(|l| l.output_tokens_per_s.unwrap_or(0.0) * l.totals.simulated_s)
        .sum();
    println!(
        "{name}: {} levels, {:.0} simulated s in {:.3} s wall (resolve {:.4} s); {steps} steps, {reqs} requests, ~{:.3e} output tokens; {:.3e} simulated output tok per wall s; {:.3e} steps per wall s; peak heap {:.1} MiB",
        res.levels.len(),
        sim_s,
        wall,
        t_resolve,
        out_tokens,
        out_tokens / wall,
        steps as f64 / wall,
        peak as f64 / (1024.0 * 1024.0)
    );
    for l in &res.levels {
        println!(
            "  {:>6} out_tok/s={:>9.1} ttft_p50={:>9.1} ms itl_p50={:>7.2} ms batch={:>6.1} kv_peak={:.2} hit={:.2} preempt={} steps={}",
            l.level.value(),
            l.output_tokens_per_s.unwrap_or(f64::NAN),
            l.ttft_ms.map(|d| d.p50).unwrap_or(f64::NAN),
            l.itl_ms.map(|d| d.p50).unwrap_or(f64::NAN),
            l.mean_running_batch.unwrap_or(f64::NAN),
            l.kv_utilization_peak,
            l.prefix_cache_hit_rate.unwrap_or(f64::NAN),
            l.preemptions,
            l.totals.steps
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = if args.is_empty() {
        vec!["reference".to_string(), "peer".to_string()]
    } else {
        args
    };
    for w in which {
        match w.as_str() {
            "reference" => bench("reference (DeepSeek-V4-Pro, 8x H200, agentic)", REFERENCE),
            "peer" => bench("peer (Llama-3.1-8B, 1x H100, normal 512/512)", PEER),
            path => {
                let json = std::fs::read_to_string(path).expect("read scenario file");
                bench(path, &json)
            }
        }
    }
}
