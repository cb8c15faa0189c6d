//! Golden sweep outputs in `tests/golden/`, each paired with the invariant checks on the same run.
//! Regenerate after an intended behaviour change with `UPDATE_GOLDEN=1 cargo test -p
//! servesim-core --test engine_golden` and review the diff.

use servesim_core::engine::{EngineConfig, KvFootprint, LinearStepTime};
use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::sweep::{operating_point, run_level, RawSweepSpec, SweepResult};
use servesim_core::workload::RawWorkloadSpec;
use std::path::PathBuf;

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/golden")
        .join(name)
}

fn check_invariants(r: &LevelResult, col: &Collector) {
    let t = &r.totals;
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    assert!(!col.clock_went_back);
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total);
    for f in col.finished() {
        assert!(f.first_token <= f.finish);
        let sum: u64 = col.request_itls(f).iter().map(|x| x.0).sum();
        assert_eq!(sum, f.finish.0 - f.first_token.0);
    }
}

fn run_golden(name: &str, cfg: &EngineConfig, workload: &str, sweep: &str) {
    let model = LinearStepTime {
        per_step_ns: 5.0e6,
        per_token_ns: 25_000.0,
        per_ctx_token_ns: 40.0,
    };
    let w = RawWorkloadSpec::from_json(workload)
        .unwrap()
        .validate()
        .unwrap();
    let s = RawSweepSpec::from_json(sweep).unwrap().validate().unwrap();
    let mut levels = Vec::new();
    for l in &s.levels {
        let (r, col) = run_level(cfg, &model, &w, &s, *l).unwrap();
        check_invariants(&r, &col);
        levels.push(r);
    }
    let out = SweepResult {
        operating_point: operating_point(&levels, &s.sla),
        levels,
        cancelled: false,
        topology: Vec::new(),
        refined_operating_point: None,
    };
    let text = serde_json::to_string_pretty(&out).unwrap() + "\n";
    let path = golden_path(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; create it with UPDATE_GOLDEN=1", path.display()));
    assert!(
        want == text,
        "{name} differs from the golden output; if intended, regenerate with UPDATE_GOLDEN=1 and review the diff"
    );
}

fn cfg() -> EngineConfig {
    EngineConfig {
        max_num_seqs: 64,
        max_num_batched_tokens: 4096,
        block_size: 16,
        num_gpu_blocks: 6000,
        max_model_len: 32768,
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

#[test]
fn golden_closed_loop_synthetic_sweep() {
    run_golden(
        "engine_closed_loop_synthetic.json",
        &cfg(),
        r#"{"arrival":{"type":"closed_loop","concurrency":1},
            "requests":{"type":"synthetic","input":{"type":"normal","mean":1000,"std":300,"min":100,"max":4000},
            "output":{"type":"lognormal","mean":200,"std":100},"shared_prefix":{"groups":4,"tokens":512}},"seed":11}"#,
        r#"{"concurrency":[1,4,16,64,128],"duration_s":120,"warmup_s":20,
            "sla":[{"metric":"e2e_tokens_per_s_per_user","op":">=","value":50},{"metric":"ttft_ms_p50","op":"<","value":5000}]}"#,
    );
}

#[test]
fn golden_poisson_agentic_sweep() {
    run_golden(
        "engine_poisson_agentic.json",
        &cfg(),
        r#"{"arrival":{"type":"poisson","rate":1},
            "requests":{"type":"agentic","system_prompt_tokens":2000,"first_turn_tokens":4000,
            "tokens_per_turn":{"type":"uniform","min":200,"max":800},"output_tokens":{"type":"exponential","mean":150,"max":1000},
            "turns":6,"think_time_s":2},"seed":5}"#,
        r#"{"request_rates":[0.05,0.2,0.5],"duration_s":300,"warmup_s":30}"#,
    );
}
