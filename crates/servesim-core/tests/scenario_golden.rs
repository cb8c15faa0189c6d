//! Golden sweep outputs of whole scenarios (`tests/golden/scenarios/*.json` in,
//! `tests/golden/scenario_*.json` out) through the full path: JSON -> resolve -> roofline step
//! time -> engine -> metrics -> report. Each run is paired with invariant checks on the same
//! levels. Regenerate after an intended change with
//! `UPDATE_GOLDEN=1 cargo test -p servesim-core --test scenario_golden` and review the diff.

use servesim_core::metrics::{Collector, LevelResult};
use servesim_core::scenario::{ResolvedScenario, Scenario, SweepReport};
use servesim_core::sweep::run_level;
use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn check_invariants(r: &ResolvedScenario, res: &LevelResult, col: &Collector) {
    let t = &res.totals;
    assert_eq!(t.submitted, t.completed + t.rejected + t.in_flight_at_end);
    assert!(!col.clock_went_back);
    let (peak, total) = col.kv_peak_blocks();
    assert!(peak <= total);
    assert_eq!(total, r.engine.num_gpu_blocks);
    for f in col.finished() {
        assert!(f.arrival <= f.first_scheduled);
        assert!(f.first_scheduled < f.first_token);
        assert!(f.first_token <= f.finish);
        assert!(f.cached_prompt_tokens < f.prompt_len);
        let sum: u64 = col.request_itls(f).iter().map(|x| x.0).sum();
        assert_eq!(sum, f.finish.0 - f.first_token.0);
    }
    if let (Some(out), Some(got)) = (res.output_tokens_per_s, res.output_tokens_per_s_per_gpu) {
        let per_gpu = out / r.sweep.gpus as f64;
        assert!((got - per_gpu).abs() <= 1e-9 * per_gpu.max(1.0));
    } else {
        assert!(res.no_value.is_some(), "absent rates come with a reason");
    }
    if let (Some(ttft), Some(e2e)) = (res.ttft_ms, res.e2e_s) {
        assert!(ttft.mean <= e2e.mean * 1000.0 + 1e-9);
    }
}

fn run_golden(name: &str) {
    let input = golden_dir().join("scenarios").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&input).unwrap();
    let s = Scenario::from_json(&text).unwrap();
    let r = s.resolve().unwrap();
    let result = r.run().unwrap();
    assert!(!result.cancelled);
    // the same levels run one by one give the same results, and satisfy the invariants
    let runner = r.runner().unwrap();
    assert_eq!(runner.levels().len(), result.levels.len());
    for (lvl, got) in runner.levels().iter().zip(&result.levels) {
        let (lr, col) = run_level(&r.engine, &r.cost, &r.workload, &r.sweep, *lvl).unwrap();
        assert_eq!(&lr, got);
        check_invariants(&r, &lr, &col);
    }
    let out = SweepReport::new(&s, &r, &result).to_json_pretty();
    let path = golden_dir().join(format!("scenario_{name}.json"));
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &out).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing {}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    assert!(
        want == out,
        "{} differs from the golden output; if the change is intended, rerun with UPDATE_GOLDEN=1 and review the diff",
        path.display()
    );
}

#[test]
fn golden_llama8b_h100_random_closed_loop() {
    run_golden("llama8b_h100_random_closed_loop");
}

#[test]
fn golden_qwen3moe_2xh100_dp2_shared_prefix_poisson() {
    run_golden("qwen3moe_2xh100_dp2_shared_prefix_poisson");
}

#[test]
fn golden_gptoss20b_h100_agentic() {
    run_golden("gptoss20b_h100_agentic");
}

/// The report's TP8 DeepSeek-V4-Flash arm with MTP (2 or 3 drafts accepted, mean 3.51).
#[test]
fn golden_dsv4flash_tp8_h200_mtp() {
    run_golden("dsv4flash_tp8_h200_mtp");
}
