//! Topology benchmark (docs/performance.md, "Replicas"): the cost per simulated event as the
//! number of replicas grows. Each replica is Llama-3.1-8B on one H100 at 16 closed-loop clients
//! (1024 input, 128 output tokens), so the work per replica is the same at every size; the
//! figure that must stay flat is wall time per engine step and per simulated event
//! (engine steps x 2 + requests x 3: send, front-end delivery, finish).
//!
//! `cargo run --release -p servesim-cli --example topology_bench -- [round-robin|least-requests|llm-d] [SECONDS] [MAX_REPLICAS]`

use servesim_core::scenario::Scenario;
use servesim_core::topology::{parse_router, RawTopology};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let router = args
        .first()
        .cloned()
        .unwrap_or_else(|| "round-robin".into());
    let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30.0);
    let max: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
    println!("router {router}, {secs} simulated s per run, 16 clients per replica");
    println!(
        "{:>9} {:>10} {:>12} {:>10} {:>12} {:>14}",
        "replicas", "wall s", "steps", "requests", "ns/step", "ns/event"
    );
    let mut n = 1u32;
    while n <= max {
        let mut s = Scenario::default_scenario();
        s.sweep.duration_s = Some(secs);
        s.sweep.warmup_s = Some(secs / 10.0);
        s.sweep.concurrency = Some(vec![16.0 * n as f64]);
        s.topology = Some(RawTopology {
            replicas: Some(n),
            router: Some(parse_router(&router).expect("router")),
            ..RawTopology::default()
        });
        let t0 = Instant::now();
        let r = s.resolve().expect("resolves");
        let res = r.run().expect("runs");
        let wall = t0.elapsed().as_secs_f64();
        let l = &res.levels[0];
        let steps = l.totals.steps;
        let reqs = l.totals.submitted;
        let events = 2 * steps + 3 * reqs;
        println!(
            "{:>9} {:>10.3} {:>12} {:>10} {:>12.1} {:>14.1}",
            n,
            wall,
            steps,
            reqs,
            wall * 1e9 / steps.max(1) as f64,
            wall * 1e9 / events.max(1) as f64
        );
        n *= 4;
    }
}
