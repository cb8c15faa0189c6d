//! The streaming collector (`Collector::streaming`, what sweeps use) gives bit for bit the full
//! collector's level results (`Collector::new`, every record kept), over the seed deployments
//! and the golden scenarios: aggregated, DP + EP lockstep, replicas behind llm-d, disaggregated
//! prefill/decode, CPU offload, speculative decoding, request-count mode.

use servesim_core::scenario::Scenario;
use servesim_core::sweep::{run_level_plan, run_level_plan_streamed};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    for dir in ["tests/scenarios", "tests/golden/scenarios"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let s = Scenario::from_json(&std::fs::read_to_string(&p).unwrap()).unwrap();
            out.push((p.display().to_string(), s));
        }
    }
    out
}

fn same_results(name: &str, mut s: Scenario, short: bool) {
    if short {
        // a short window keeps the test quick; the warm-up still holds steps and requests
        s.sweep.num_requests = None;
        s.sweep.duration_s = Some(40.0);
        s.sweep.warmup_s = Some(10.0);
    }
    let r = s.resolve().unwrap_or_else(|e| panic!("{name}: {e}"));
    let levels = r.runner().unwrap().levels().to_vec();
    for lvl in levels.iter().take(3) {
        let (full, col, t_full) = run_level_plan(&r.plan(), &r.workload, &r.sweep, *lvl).unwrap();
        let (streamed, t_streamed) =
            run_level_plan_streamed(&r.plan(), &r.workload, &r.sweep, *lvl).unwrap();
        assert_eq!(
            serde_json::to_string(&full).unwrap(),
            serde_json::to_string(&streamed).unwrap(),
            "{name} level {lvl:?}"
        );
        assert_eq!(
            serde_json::to_string(&t_full).unwrap(),
            serde_json::to_string(&t_streamed).unwrap(),
            "{name} level {lvl:?}: per-replica results"
        );
        assert!(!col.is_streaming());
    }
}

#[test]
fn streaming_equals_full_records_on_every_scenario() {
    for (name, s) in scenarios() {
        same_results(&name, s, true);
    }
}

#[test]
fn request_count_mode_keeps_full_records_and_equal_results() {
    let (name, mut s) = scenarios().into_iter().next().unwrap();
    s.sweep.duration_s = None;
    s.sweep.warmup_s = None;
    s.sweep.num_requests = Some(40.0);
    same_results(&name, s, false);
}
