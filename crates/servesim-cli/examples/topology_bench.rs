//! Topology benchmark (docs/performance.md, "Replicas (topology)"): the cost per simulated event
//! as the number of replicas grows, and the named cases of issue 9's targets.
//!
//! - `[round-robin|least-requests|llm-d] [SECONDS] [MAX_REPLICAS] [MIN_REPLICAS]` (the curve):
//!   each replica is Llama-3.1-8B on one H100 at 16 closed-loop clients (1024 input, 128 output
//!   tokens, every prompt unique), one level of SECONDS simulated seconds at MIN_REPLICAS
//!   (default 1), 4x that, ... up to MAX_REPLICAS replicas, so the work per replica is the same
//!   at every size; the figure that must stay flat is wall time (or instructions) per engine
//!   step and per simulated event (engine steps x 2 + requests x 3: send, front-end delivery,
//!   finish).
//! - `prefix-heavy`: 8 replicas behind the llm-d router (default weights) on a prefix-heavy
//!   workload (shared system prompts and agentic sessions), the class of run issue 9 compares
//!   with BLIS's weighted router.
//! - `sweep64 [CLIENTS_PER_REPLICA]`: 64 replicas, 10 levels x 900 simulated s, round-robin.
//! - `digest DIR`: writes the full JSON result of a set of multi-replica scenarios (every router,
//!   the saturation guard, prefix-index eviction, shared prefixes, DP ranks) to DIR, one file
//!   each, to compare two builds byte for byte (`cmp`).
//!
//! `cargo run --release -p servesim-cli --example topology_bench -- [MODE ...]`

use servesim_core::scenario::Scenario;
use servesim_core::topology::{parse_router, RawTopology};
use servesim_core::workload::{RawAgentic, RawArrival, RawContent, RawLengthDist, RawSharedPrefix};
use std::time::Instant;

fn topo(replicas: u32, router: &str) -> RawTopology {
    RawTopology {
        replicas: Some(replicas),
        router: Some(parse_router(router).expect("router")),
        ..RawTopology::default()
    }
}

/// One level of `secs` simulated seconds at `clients` closed-loop clients.
fn one_level(s: &mut Scenario, clients: f64, secs: f64) {
    s.sweep.duration_s = Some(secs);
    s.sweep.warmup_s = Some(secs / 10.0);
    s.sweep.concurrency = Some(vec![clients]);
}

fn curve(router: &str, secs: f64, min: u32, max: u32) {
    println!("router {router}, {secs} simulated s per run, 16 clients per replica");
    println!(
        "{:>9} {:>10} {:>12} {:>10} {:>12} {:>14}",
        "replicas", "wall s", "steps", "requests", "ns/step", "ns/event"
    );
    let mut n = min.max(1);
    while n <= max {
        let mut s = Scenario::default_scenario();
        one_level(&mut s, 16.0 * n as f64, secs);
        s.topology = Some(topo(n, router));
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

/// Shared system prompts: each prompt is one of 16 system prompts of 4,096 tokens then 512
/// tokens of its own; 256 output tokens.
fn shared_prefix_content() -> RawContent {
    RawContent::Synthetic {
        input: RawLengthDist::Constant { tokens: 512.0 },
        output: RawLengthDist::Constant { tokens: 256.0 },
        shared_prefix: Some(RawSharedPrefix {
            groups: 16.0,
            tokens: 4096.0,
            prompts_per_group: None,
        }),
    }
}

/// Agentic sessions: a 2,048-token system prompt shared by all, an 8,192-token first turn, 1,024
/// new tokens and 256 output tokens per turn, 8 turns (each turn re-sends the conversation).
fn agentic_content() -> RawContent {
    RawContent::Agentic(RawAgentic {
        system_prompt_tokens: 2048.0,
        first_turn_tokens: 8192.0,
        tokens_per_turn: RawLengthDist::Constant { tokens: 1024.0 },
        output_tokens: RawLengthDist::Constant { tokens: 256.0 },
        turns: 8.0,
        think_time_s: None,
    })
}

/// The 8-replica prefix-heavy cluster: Llama-3.1-8B, one H100 per replica, llm-d router with
/// llm-d's default weights (queue 2, kv-cache 2, prefix 3), 32 closed-loop clients per replica,
/// 300 simulated s (30 s warm-up), once with shared system prompts and once with agentic
/// sessions.
fn prefix_heavy_scenarios() -> Vec<(&'static str, Scenario)> {
    let mut out = Vec::new();
    for (name, content) in [
        ("shared-prefix", shared_prefix_content()),
        ("agentic", agentic_content()),
    ] {
        let mut s = Scenario::default_scenario();
        s.workload.requests = content;
        one_level(&mut s, 256.0, 300.0);
        s.topology = Some(topo(8, "llm-d"));
        out.push((name, s));
    }
    out
}

fn run_timed(name: &str, s: &Scenario) {
    let t0 = Instant::now();
    let r = s.resolve().expect("resolves");
    let res = r.run().expect("runs");
    let wall = t0.elapsed().as_secs_f64();
    let steps: u64 = res.levels.iter().map(|l| l.totals.steps).sum();
    let reqs: u64 = res.levels.iter().map(|l| l.totals.submitted).sum();
    let events = 2 * steps + 3 * reqs;
    // Per-replica prefix-cache hit rates of the last level (small clusters only; `-`: no
    // prompt looked up on that replica in the window).
    let hit = res
        .topology
        .last()
        .filter(|t| t.replicas.len() <= 16)
        .map(|t| {
            let h: Vec<String> = t
                .replicas
                .iter()
                .map(|r| {
                    r.prefix_cache_hit_rate
                        .map_or("-".to_string(), |h| format!("{h:.2}"))
                })
                .collect();
            format!("; hit rate per replica {}", h.join(" "))
        })
        .unwrap_or_default();
    println!(
        "{name:>14}: {wall:.3} s wall, {} levels, {steps} steps, {reqs} requests, {:.1} ns/event{hit}",
        res.levels.len(),
        wall * 1e9 / events.max(1) as f64
    );
}

fn prefix_heavy() {
    println!("8 replicas (Llama-3.1-8B, 1x H100 each), llm-d default weights, 256 clients, 300 simulated s");
    for (name, s) in prefix_heavy_scenarios() {
        run_timed(name, &s);
    }
}

fn sweep64(per_replica: f64, secs: f64) {
    let mut s = Scenario::default_scenario();
    s.sweep.duration_s = Some(secs);
    s.sweep.warmup_s = Some(secs / 10.0);
    // 10 levels: total clients per_replica x 64 x {1/512, ..., 1/2, 1}
    let top = per_replica * 64.0;
    s.sweep.concurrency = Some(
        (0..10)
            .map(|i| (top / (1u32 << (9 - i)) as f64).max(1.0).round())
            .collect(),
    );
    s.topology = Some(topo(64, "round-robin"));
    println!(
        "64 replicas, round-robin, 10 levels x {secs} s, total clients {:?}",
        s.sweep.concurrency.as_ref().unwrap()
    );
    run_timed("sweep64", &s);
}

fn digest(dir: &str) {
    std::fs::create_dir_all(dir).expect("dir");
    let mut cases: Vec<(String, Scenario)> = Vec::new();
    for router in [
        "round-robin",
        "least-requests",
        "llm-d",
        "llm-d:precise-prefix",
    ] {
        for (cname, content) in [
            ("unique", None),
            ("shared", Some(shared_prefix_content())),
            ("agentic", Some(agentic_content())),
        ] {
            for guard in [None, Some(3u32)] {
                let mut s = Scenario::default_scenario();
                if let Some(c) = content.clone() {
                    s.workload.requests = c;
                }
                one_level(&mut s, 96.0, 60.0);
                let mut t = topo(6, router);
                if let Some(r) = t.router.as_mut() {
                    r.max_outstanding_per_replica = guard;
                    if router.starts_with("llm-d") {
                        // a small index so eviction runs
                        r.prefix_lru_blocks_per_replica = Some(3000);
                    }
                }
                s.topology = Some(t);
                let g = guard.map_or("noguard".to_string(), |g| format!("guard{g}"));
                cases.push((format!("{}-{cname}-{g}", router.replace(':', "_")), s));
            }
        }
    }
    for (name, s) in prefix_heavy_scenarios() {
        let mut s = s;
        one_level(&mut s, 256.0, 60.0);
        cases.push((format!("prefix-heavy-{name}"), s));
    }
    // a Poisson level over 16 replicas with the llm-d index at auto-tune, and 2 DP ranks
    let mut s = Scenario::default_scenario();
    s.workload.arrival = RawArrival::Poisson { rate: 1.0 };
    s.workload.requests = shared_prefix_content();
    s.sweep.concurrency = None;
    s.sweep.request_rates = Some(vec![40.0, 160.0]);
    s.sweep.duration_s = Some(60.0);
    s.sweep.warmup_s = Some(6.0);
    s.topology = Some(topo(16, "llm-d"));
    cases.push(("poisson-llm-d-16".into(), s.clone()));
    s.dp = 2;
    s.topology = Some(topo(4, "least-requests"));
    cases.push(("poisson-dp2-least-4".into(), s));
    for (name, s) in cases {
        let res = s.resolve().expect("resolves").run().expect("runs");
        let json = serde_json::to_string_pretty(&res).expect("json");
        std::fs::write(format!("{dir}/{name}.json"), json).expect("write");
        println!("{name}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("round-robin");
    match mode {
        "prefix-heavy" => prefix_heavy(),
        "sweep64" => sweep64(
            args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16.0),
            args.get(2).and_then(|s| s.parse().ok()).unwrap_or(900.0),
        ),
        "digest" => digest(args.get(1).map(String::as_str).unwrap_or("digest")),
        router => {
            let secs: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(30.0);
            let max: u32 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
            let min: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
            curve(router, secs, min, max)
        }
    }
}
