//! Levels run apart (`SweepRunner::run_at` on separate runners, in any order, as the CLI's
//! `--threads` and the page's level workers do) and assembled with `SweepRunner::finish_with`
//! give the same sweep, to the byte, as stepping through the levels on one runner.

use servesim_core::scenario::Scenario;
use servesim_core::sweep::LevelOutput;

fn scenario(replicas: u32) -> Scenario {
    Scenario::from_json(&format!(
        r#"{{
  "version": 2,
  "model": {{"catalog": "meta-llama/Meta-Llama-3.1-8B"}},
  "gpu": {{"catalog": "H100-SXM"}},
  "topology": {{"replicas": {replicas}, "router": {{"policy": "least_requests"}}}},
  "workload": {{"arrival": {{"type": "closed_loop", "concurrency": 1}},
               "requests": {{"type": "synthetic",
                            "input": {{"type": "uniform", "min": 64, "max": 512}},
                            "output": {{"type": "uniform", "min": 16, "max": 256}}}}}},
  "sweep": {{"concurrency": [64, 1, 256, 16, 4], "duration_s": 40, "warmup_s": 5,
            "sla": [{{"metric": "ttft_ms_p50", "op": "<=", "value": 100}}]}}
}}"#
    ))
    .expect("scenario parses")
}

fn json<T: serde::Serialize>(x: &T) -> String {
    serde_json::to_string(x).expect("serialises")
}

#[test]
fn levels_run_apart_in_any_order_assemble_to_the_stepped_sweep() {
    for replicas in [1, 3] {
        let resolved = scenario(replicas).resolve().expect("resolves");
        let stepped = resolved.run().expect("sweep runs");
        assert_eq!(stepped.levels.len(), 5);
        assert!(!stepped.cancelled);
        // Every level on a fresh runner, last level first; then all on one runner, shuffled.
        let n = stepped.levels.len();
        let mut fresh: Vec<LevelOutput> = (0..n)
            .rev()
            .map(|i| {
                let mut r = resolved.runner().expect("runner");
                r.run_at(i, &mut |_| {}).expect("in range").expect("runs")
            })
            .collect();
        let mut one = resolved.runner().expect("runner");
        let shuffled: Vec<LevelOutput> = [3, 0, 4, 1, 2]
            .into_iter()
            .map(|i| one.run_at(i, &mut |_| {}).expect("in range").expect("runs"))
            .collect();
        assert!(one.run_at(n, &mut |_| {}).is_none(), "past the last level");
        for (i, o) in fresh.iter().rev().enumerate() {
            assert_eq!(o.index, i);
            assert_eq!(json(&o.result), json(&stepped.levels[i]), "level {i}");
        }
        assert_eq!(
            fresh.iter().filter(|o| o.topology.is_some()).count(),
            if replicas > 1 { n } else { 0 },
            "per-replica results travel with their level"
        );
        let runner = resolved.runner().expect("runner");
        // A duplicate and an out-of-range index are ignored.
        fresh.push(fresh[0].clone());
        let mut stray = fresh[1].clone();
        stray.index = 99;
        fresh.push(stray);
        let assembled = runner.finish_with(fresh);
        assert_eq!(json(&assembled), json(&stepped), "{replicas} replica(s)");
        let assembled = resolved.runner().expect("runner").finish_with(shuffled);
        assert_eq!(
            json(&assembled),
            json(&stepped),
            "{replicas} replica(s), one runner"
        );
    }
}

#[test]
fn a_partial_set_of_levels_is_a_cancelled_sweep_of_those_levels() {
    let resolved = scenario(2).resolve().expect("resolves");
    let stepped = resolved.run().expect("sweep runs");
    let mut r = resolved.runner().expect("runner");
    let outs: Vec<LevelOutput> = [4, 1]
        .into_iter()
        .map(|i| r.run_at(i, &mut |_| {}).expect("in range").expect("runs"))
        .collect();
    let partial = resolved.runner().expect("runner").finish_with(outs);
    assert!(partial.cancelled);
    assert_eq!(partial.levels.len(), 2);
    assert_eq!(json(&partial.levels[0]), json(&stepped.levels[1]));
    assert_eq!(json(&partial.levels[1]), json(&stepped.levels[4]));
    assert_eq!(partial.topology.len(), 2);
    assert_eq!(json(&partial.topology[1]), json(&stepped.topology[4]));
}
