//! The streaming collector (`Collector::streaming`, what sweeps use) gives bit for bit the full
//! collector's level results (`Collector::new`, every record kept), over the seed deployments
//! and the golden scenarios: aggregated, DP + EP lockstep, replicas behind llm-d, disaggregated
//! prefill/decode, CPU offload, speculative decoding, request-count mode; and the per-request
//! TPOT percentiles recomputed from the full records.

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

/// `tpot_ms` (docs/metrics.md): per measured request with more than one output token,
/// `(finish - first token) / (output - 1)` in ms; its mean is `tpot_ms_mean` and its p50 / p90 /
/// p99 are numpy-linear percentiles across requests, recomputed here from the full records.
#[test]
fn tpot_percentiles_are_per_request_order_statistics() {
    let mut checked = 0;
    for (name, s) in scenarios().into_iter().take(6) {
        let mut s = s;
        s.sweep.num_requests = None;
        s.sweep.duration_s = Some(40.0);
        s.sweep.warmup_s = Some(10.0);
        let r = s.resolve().unwrap_or_else(|e| panic!("{name}: {e}"));
        let lvl = r.runner().unwrap().levels()[0];
        let (full, col, _) = run_level_plan(&r.plan(), &r.workload, &r.sweep, lvl).unwrap();
        let (ws, we) = (full.window_s.start, full.window_s.end);
        let mut v: Vec<f64> = col
            .finished()
            .iter()
            .filter(|q| q.arrival.as_secs_f64() >= ws && q.finish.as_secs_f64() <= we)
            .filter(|q| q.output_len > 1)
            .map(|q| (q.finish.0 - q.first_token.0) as f64 / 1e6 / (q.output_len - 1) as f64)
            .collect();
        let Some(d) = full.tpot_ms else {
            assert!(v.is_empty(), "{name}");
            continue;
        };
        assert_eq!(Some(d.mean), full.tpot_ms_mean, "{name}");
        v.sort_by(f64::total_cmp);
        let q = |p: f64| {
            let r = p * (v.len() - 1) as f64;
            let lo = r.floor() as usize;
            let hi = (lo + 1).min(v.len() - 1);
            v[lo] + (r - lo as f64) * (v[hi] - v[lo])
        };
        for (got, p) in [(d.p50, 0.5), (d.p90, 0.9), (d.p99, 0.99)] {
            assert!(
                (got - q(p)).abs() <= 1e-9 * got.abs().max(1.0),
                "{name} p{p}: {got} vs {}",
                q(p)
            );
        }
        assert!(d.p50 <= d.p90 && d.p90 <= d.p99, "{name}");
        checked += 1;
    }
    assert!(checked >= 3, "too few scenarios with measured requests");
}
