//! Browser tests of the page's disaggregated prefill/decode pools (issue 9), its CPU KV offload
//! tier (issue 10) and the no-progress check of the sweep worker (issue 13). Same harness as
//! `browser.rs` (tests/e2e/tests/support).
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_topology -- --test-threads=1`.

mod support;

use fantoccini::Locator;
use servesim_web::core_api::{fragment_for, Scenario};
use std::time::Duration;

use support::*;

/// The production recipe's 1P1D seed (DeepSeek-V4-Pro, one TP8 prefill worker with
/// `max_num_batched_tokens` 16384 and one TP8 decode worker on 16x H200; tests/scenarios/README),
/// with its sweep cut to two levels of 60 simulated seconds so the native debug run stays short.
fn seed_1p1d() -> Scenario {
    let text = std::fs::read_to_string(
        repo_root().join("tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"),
    )
    .unwrap();
    let mut s = Scenario::from_json(&text).unwrap();
    s.sweep.concurrency = Some(vec![2.0, 16.0]);
    s.sweep.duration_s = Some(60.0);
    s
}

fn scenario_of_link(link: &str) -> Scenario {
    let code = link.split("#s=").nth(1).expect("a link with #s=");
    let code = code.split('&').next().unwrap_or(code);
    Scenario::from_json(&servesim_core::share::decode(code).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_1p1d_seed_edited_or_opened_in_the_page_gives_the_cli_report() {
    let seed = seed_1p1d();
    // Edited: the seed without its pools (aggregated TP8), then the pools typed into the form.
    let aggregated = Scenario {
        topology: None,
        ..seed.clone()
    };
    let start = fragment_for(&aggregated);
    let (link, report, picture, pools, transfers) = with_browser("pd-edit", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{start}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            c.find(Locator::Css("#f-pd_enabled")).await?.click().await?;
            type_into(&c, "#f-prefill_max_num_batched_tokens", "16384").await?;
            let picture = wait_text(&c, "#topo-kv").await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            let (status, report, _) = run_and_report(&c, 300).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            let pools = wait_text(&c, "#pool-results").await?;
            let transfers = wait_text(&c, "#transfer-results").await?;
            Ok((link, report, picture, pools, transfers))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(
        scenario_of_link(&link),
        seed,
        "the edited form is the seed, and the link carries it"
    );
    assert!(picture.contains("KV transfer (auto)"), "{picture}");
    assert!(
        pools.contains("prefill") && pools.contains("decode"),
        "{pools}"
    );
    assert!(transfers.contains("MB/transfer"), "{transfers}");
    let native = native_report_of_link(&link);
    assert!(
        report == native,
        "the page's report equals `servesim sweep --scenario seed --json` byte for byte"
    );
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(v["topology"][0]["pools"].as_array().map(Vec::len), Some(2));
    assert!(
        v["disaggregated"]["kv_transfer"].is_object(),
        "{}",
        v["disaggregated"]
    );

    // Opened: the seed's own link shows its pools and gives the same bytes.
    let frag = fragment_for(&seed);
    let (fields, prefill_box, report2) = with_browser("pd-open", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let fields = (
                c.find(Locator::Css("#f-pd_enabled"))
                    .await?
                    .prop("checked")
                    .await?,
                value_of(&c, "#f-prefill_replicas").await?,
                value_of(&c, "#f-prefill_max_num_batched_tokens").await?,
                value_of(&c, "#f-decode_replicas").await?,
            );
            let prefill_box = wait_text(&c, "#topo-prefill").await?;
            let (_, report, _) = run_and_report(&c, 300).await?;
            Ok((fields, prefill_box, report))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(
        fields,
        (
            Some("true".to_string()),
            "1".to_string(),
            "16384".to_string(),
            "1".to_string()
        )
    );
    assert_eq!(prefill_box, "prefill: 1 x 8 H200");
    assert!(
        report2 == report,
        "the opened seed gives the edited seed's bytes"
    );
}

/// The recipe's 1P1D seed with the decode worker's CPU KV offload tier stacked on NIXL
/// (`MultiConnector`: NixlConnector, then SimpleCPUOffloadConnector at its 8 GiB default;
/// tests/scenarios/recipe-1p1d-dsv4-pro-16xh200-offload.json), with the same short sweep.
fn seed_1p1d_offload() -> Scenario {
    let text = std::fs::read_to_string(
        repo_root().join("tests/scenarios/recipe-1p1d-dsv4-pro-16xh200-offload.json"),
    )
    .unwrap();
    let mut s = Scenario::from_json(&text).unwrap();
    s.sweep.concurrency = Some(vec![2.0, 16.0]);
    s.sweep.duration_s = Some(60.0);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decode_pools_offload_tier_is_a_field_and_its_link_gives_the_cli_report() {
    let want = seed_1p1d_offload();
    // Edited: the 1P1D seed, then the decode pool's tier chosen in its pool.
    let start = fragment_for(&seed_1p1d());
    let link = with_browser("pd-offload-edit", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{start}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            choose(
                &c,
                "#f-decode_offload_connector",
                "SimpleCPUOffloadConnector",
            )
            .await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(c.current_url().await?.to_string())
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(
        scenario_of_link(&link),
        want,
        "the decode pool's field writes the recipe's MultiConnector stack"
    );

    // Opened: the offload seed's own link shows the tier in the decode pool and runs.
    let frag = fragment_for(&want);
    let (fields, tier, report) = with_browser("pd-offload-open", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let fields = (
                value_of(&c, "#f-decode_offload_connector").await?,
                value_of(&c, "#f-prefill_offload_connector").await?,
                value_of(&c, "#f-offload_connector").await?,
            );
            let tier = wait_text(&c, "#cap-cpu-tier").await?;
            let (status, report, _) = run_and_report(&c, 600).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            Ok((fields, tier, report))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(
        fields,
        (
            "SimpleCPUOffloadConnector".to_string(),
            String::new(),
            String::new()
        )
    );
    // The capacity card is the decode pool's, with its tier's line as `servesim capacity` prints it.
    let r = want.resolve().unwrap();
    let line = r
        .capacity
        .cpu_tier
        .as_ref()
        .expect("the decode pool's tier");
    assert_eq!(tier, line.summary_line());
    assert!(
        tier.starts_with("CPU KV tier (SimpleCPUOffloadConnector)"),
        "{tier}"
    );
    let native = native_report_of_link(&format!("x#{}", fragment_for(&want)));
    assert!(
        report == native,
        "the page's report equals `servesim sweep --scenario offload-seed --json --refine-sla 8` byte for byte"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offload_tier_field_shows_its_capacity_line_and_metrics_as_the_cli() {
    // OffloadingConnector with a 16 GiB tier in chunks of 4 blocks (docs/engine.md), on the
    // default deployment with the agentic-coding preset, whose sessions revisit their prefixes.
    let (link, tier, report, table) = with_browser("offload", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            choose(&c, "#f-preset", "agentic-coding").await?;
            choose(&c, "#f-offload_connector", "OffloadingConnector").await?;
            type_into(&c, "#f-offload_cpu_bytes", "17179869184").await?;
            type_into(&c, "#f-offload_blocks_per_chunk", "4").await?;
            type_into(&c, "#f-levels", "4, 16").await?;
            type_into(&c, "#f-duration_s", "60").await?;
            type_into(&c, "#f-warmup_s", "5").await?;
            let tier = wait_text(&c, "#cap-cpu-tier").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            let (status, report, _) = run_and_report(&c, 300).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            let table = wait_text(&c, "#offload-results").await?;
            Ok((link, tier, report, table))
        }
        .await;
        (c, r)
    })
    .await;
    let s = scenario_of_link(&link);
    let cfg = s
        .engine
        .kv_transfer_config
        .clone()
        .expect("the link carries the tier");
    assert_eq!(cfg.kv_connector.as_deref(), Some("OffloadingConnector"));
    // The card's line is the core's, as `servesim capacity` prints it.
    let r = s.resolve().unwrap();
    let want = r
        .capacity
        .cpu_tier
        .as_ref()
        .expect("a CPU tier")
        .summary_line();
    assert_eq!(tier, want);
    assert!(
        tier.starts_with("CPU KV tier (OffloadingConnector)"),
        "{tier}"
    );
    assert!(
        report == native_report_of_link(&link),
        "page report = CLI report"
    );
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert!(
        levels.iter().all(|l| l["cpu_offload"].is_object()),
        "every level reports the tier"
    );
    assert!(table.contains("CPU hit"), "{table}");
    // The table shows the report's numbers (loads of the first level).
    let loads = levels[0]["cpu_offload"]["loads"].as_u64().unwrap();
    assert!(table.contains(&loads.to_string()), "{table} lacks {loads}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_silent_past_the_no_progress_limit_is_reported_and_replaced() {
    // The limit is 30 s in the product; `?stall_ms=1500` shortens it for this page load only.
    // The worker is made silent for real: the page's messages to it are dropped (the
    // browser's Worker.postMessage replaced), so the run never starts and nothing comes back.
    let (failed, status2) = with_browser("stall", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}?stall_ms=1500")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-levels", "1, 2").await?;
            type_into(&c, "#f-duration_s", "10").await?;
            type_into(&c, "#f-warmup_s", "1").await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            c.execute(
                "window.__post = Worker.prototype.postMessage;
                 Worker.prototype.postMessage = function () {};",
                vec![],
            )
            .await?;
            let t0 = std::time::Instant::now();
            c.find(Locator::Css("#run-btn")).await?.click().await?;
            let failed = wait_status(&c, "Failed", 20).await?;
            let waited = t0.elapsed();
            c.execute("Worker.prototype.postMessage = window.__post;", vec![])
                .await?;
            let (status2, _, _) = run_and_report(&c, 120).await?;
            Ok((
                format!("{failed} [after {} ms]", waited.as_millis()),
                status2,
            ))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(
        failed.starts_with("Failed: the sweep worker sent no progress for 1.5 s"),
        "{failed}"
    );
    assert!(
        status2.starts_with("Done"),
        "the fresh worker runs: {status2}"
    );
}
