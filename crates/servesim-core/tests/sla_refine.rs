//! The SLA operating point refined by simulation (issue 13): bisection between the bracketing
//! sweep levels, each step a real level simulation; the answer does not depend on the levels.

use servesim_core::scenario::Scenario;
use servesim_core::sla_refine::refine_operating_point;
use servesim_core::sweep::run_level;
use servesim_core::workload::Level;

fn refined(levels: &[f64]) -> servesim_core::sla_refine::Refinement {
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(levels.to_vec());
    s.sweep.duration_s = Some(40.0);
    s.sweep.warmup_s = Some(5.0);
    let r = s.resolve().unwrap();
    let res = r.run().unwrap();
    refine_operating_point(&r.plan(), &r.workload, &r.sweep, &res.levels, 16)
        .unwrap()
        .expect("a crossing")
}

#[test]
fn bisection_brackets_the_crossing_with_simulated_levels() {
    let a = refined(&[16.0, 64.0, 256.0]);
    assert!(a.lower <= a.highest_passing && a.lowest_failing <= a.upper);
    assert_eq!(a.lowest_failing, a.highest_passing + 1.0, "{}", a.summary);
    assert!(a.summary.contains("simulated"), "{}", a.summary);
    // every step is a real simulation: re-running its level gives its verdict
    let mut s = Scenario::default_scenario();
    s.sweep.duration_s = Some(40.0);
    s.sweep.warmup_s = Some(5.0);
    let r = s.resolve().unwrap();
    for st in &a.steps {
        let (l, _) = run_level(
            &r.engine,
            &r.cost,
            &r.workload,
            &r.sweep,
            Level::Concurrency(st.level as u32),
        )
        .unwrap();
        let passes = r.sweep.sla.iter().all(|g| g.passes(&l));
        assert_eq!(Some(passes), st.passes, "level {}", st.level);
    }
    // other bracketing levels give the same answer (unless the bisection ran out of steps)
    let b = refined(&[1.0, 8.0, 128.0]);
    if b.lowest_failing == b.highest_passing + 1.0 {
        assert_eq!(a.highest_passing, b.highest_passing);
    }
}

/// The bisection simulates the whole plan: two replicas behind round-robin serve about twice the
/// clients of one before the gate fails (a refinement of one replica would stay at one's).
#[test]
fn refinement_runs_every_replica_of_the_plan() {
    let run = |replicas: u32, levels: &[f64]| {
        let mut s = Scenario::default_scenario();
        s.sweep.concurrency = Some(levels.to_vec());
        s.sweep.duration_s = Some(40.0);
        s.sweep.warmup_s = Some(5.0);
        if replicas > 1 {
            s.topology = Some(servesim_core::topology::RawTopology {
                replicas: Some(replicas),
                router: None,
                ..Default::default()
            });
        }
        let r = s.resolve().unwrap();
        let mut res = r.run().unwrap();
        r.refine(&mut res, 16).unwrap();
        res.refined_operating_point.expect("a crossing")
    };
    let one = run(1, &[16.0, 64.0, 256.0]);
    let two = run(2, &[32.0, 128.0, 512.0]);
    let ratio = two.highest_passing / one.highest_passing;
    assert!(
        (1.6..=2.4).contains(&ratio),
        "one {} two {}",
        one.summary,
        two.summary
    );
}
