//! The page's time for issue 9's 64-replica sweep (docs/performance.md "Replicas (topology)",
//! "In the page"), a benchmark rather than a timed test (`#[ignore]`d, nothing asserted about the
//! time): `topology_bench sweep64 16`'s scenario (64 replicas of Llama-3.1-8B on one H100 each,
//! round-robin, 10 levels of 900 simulated s with 90 s warm-up at 2, 4, ..., 1,024 clients in
//! total, 1024 in / 128 out) is `tests/scenarios/bench-sweep64-llama31-8b-h100-round-robin.json`;
//! the test checks the file is that scenario, opens the built page in headless Chromium through
//! the scenario's share link, clicks Run and times from the click to the finished report (all 10
//! levels), then prints the wall time, the page's own figure and the load average. With
//! `SERVESIM_TIMING_CHECK=1` it then checks the page's report equals the native run's
//! (`servesim sweep --scenario FILE --json --refine-sla 8`, the page's refinement; this scenario
//! passes its SLA at every level, so there is nothing to refine and `--json` alone prints the
//! same) byte for byte, and writes it to `tests/artifacts/sweep64-page-report.json`.
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_sweep64_timing
//! -- --ignored --nocapture --test-threads=1`.

mod support;

use servesim_core::scenario::Scenario;
use servesim_core::topology::{parse_router, RawTopology};
use servesim_web::core_api::fragment_for;
use std::time::{Duration, Instant};

use support::*;

const FILE: &str = "tests/scenarios/bench-sweep64-llama31-8b-h100-round-robin.json";

/// `topology_bench sweep64 16` (crates/servesim-cli/examples/topology_bench.rs): the default
/// scenario, 64 replicas behind round-robin, 900 simulated s per level (90 s warm-up), total
/// clients 16 x 64 x {1/512, ..., 1/2, 1}.
fn sweep64_scenario() -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.duration_s = Some(900.0);
    s.sweep.warmup_s = Some(90.0);
    let top = 16.0 * 64.0;
    s.sweep.concurrency = Some(
        (0..10)
            .map(|i| (top / f64::from(1u32 << (9 - i))).max(1.0).round())
            .collect(),
    );
    s.topology = Some(RawTopology {
        replicas: Some(64),
        router: Some(parse_router("round-robin").expect("router")),
        ..RawTopology::default()
    });
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by hand (docs/performance.md \"Replicas (topology)\")"]
async fn sweep64_in_the_page() {
    let text = std::fs::read_to_string(repo_root().join(FILE)).unwrap();
    let s = sweep64_scenario();
    assert_eq!(
        Scenario::from_json(&text).unwrap(),
        s,
        "{FILE} is topology_bench's sweep64 scenario"
    );
    let frag = fragment_for(&s);
    let load_before = loadavg();
    let (wall, status, ms, report) = with_browser("sweep64-timing", |c, base_url| async move {
        let r = async {
            c.goto(&format!("{base_url}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let t0 = Instant::now();
            c.find(fantoccini::Locator::Css("#run-btn"))
                .await?
                .click()
                .await?;
            let status = wait_until("sweep done", Duration::from_secs(1800), || async {
                Ok(text_of(&c, "#run-status")
                    .await?
                    .filter(|t| t.starts_with("Done") || t.starts_with("Failed")))
            })
            .await?;
            let wall = t0.elapsed().as_secs_f64();
            let v = c
                .execute(
                    "const s = document.querySelector('#run-status');
                     const r = document.querySelector('#report-json');
                     return [r ? r.textContent : '', s.dataset.elapsedMs || ''];",
                    vec![],
                )
                .await?;
            let (report, ms): (String, String) = serde_json::from_value(v)?;
            Ok((wall, status, ms.parse::<f64>().unwrap_or(f64::NAN), report))
        }
        .await;
        (c, r)
    })
    .await;
    println!(
        "[page sweep64 timing] {wall:.1} s wall from Run to the report; page's own figure {:.1} s; page: \"{status}\"; load average before {load_before}, after {}",
        ms / 1000.0,
        loadavg()
    );
    assert!(
        status.starts_with("Done"),
        "the page ran the sweep: {status}"
    );
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let levels = r["levels"].as_array().map_or(0, Vec::len);
    println!(
        "[page sweep64 timing] {levels} levels; operating point: {}",
        r["operating_point"]["summary"]
    );
    assert_eq!(levels, 10, "all 10 levels in the page's report");
    if std::env::var("SERVESIM_TIMING_CHECK").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(repo_root().join("tests/artifacts")).unwrap();
        std::fs::write(
            repo_root().join("tests/artifacts/sweep64-page-report.json"),
            &report,
        )
        .unwrap();
        let resolved = s.resolve().unwrap();
        let mut result = resolved.run().unwrap();
        resolved
            .refine(&mut result, servesim_web::protocol::REFINE_STEPS)
            .unwrap();
        let native =
            servesim_core::scenario::SweepReport::new(&s, &resolved, &result).to_json_pretty();
        assert!(report == native, "the page's report equals the CLI's");
        println!("[page sweep64 timing] the page's report equals the native run byte for byte");
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
