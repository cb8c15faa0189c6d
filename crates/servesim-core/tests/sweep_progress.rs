//! Progress within a level (`SweepRunner::step_observed`): the callback sees a non-decreasing
//! fraction in [0, 1] and observing does not change the results.

use servesim_core::scenario::Scenario;

fn scenario() -> Scenario {
    let mut s = Scenario::from_json(
        r#"{
  "version": 1,
  "model": {"catalog": "meta-llama/Meta-Llama-3.1-8B"},
  "gpu": {"catalog": "H100-SXM"},
  "workload": {"arrival": {"type": "closed_loop", "concurrency": 1},
               "requests": {"type": "synthetic",
                            "input": {"type": "constant", "tokens": 128},
                            "output": {"type": "constant", "tokens": 32}}},
  "sweep": {"concurrency": [64, 128], "duration_s": 300}
}"#,
    )
    .expect("scenario parses");
    s.sweep.warmup_s = Some(30.0);
    s
}

#[test]
fn level_progress_is_monotonic_within_unit_interval_and_does_not_change_results() {
    let s = scenario();
    let resolved = s.resolve().expect("resolves");

    let mut observed = resolved.runner().expect("runner");
    let mut per_level: Vec<Vec<f64>> = Vec::new();
    loop {
        let mut fractions = Vec::new();
        let r = observed.step_observed(&mut |f| fractions.push(f));
        match r {
            None => break,
            Some(r) => {
                r.expect("level runs");
                per_level.push(fractions);
            }
        }
    }
    let observed = observed.finish();

    let plain = resolved.run().expect("sweep runs");
    assert_eq!(
        serde_json::to_string(&observed).unwrap(),
        serde_json::to_string(&plain).unwrap(),
        "observing progress must not change results"
    );

    assert_eq!(per_level.len(), 2);
    for fractions in &per_level {
        assert!(
            !fractions.is_empty(),
            "a 300 s level of short requests has more than 2^16 events, so progress is reported"
        );
        assert!(fractions.iter().all(|f| (0.0..=1.0).contains(f)));
        assert!(fractions.windows(2).all(|w| w[0] <= w[1]), "{fractions:?}");
    }
}
