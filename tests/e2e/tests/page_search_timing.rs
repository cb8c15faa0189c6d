//! The page's search timings of issue 14 (docs/performance.md "Search"), a benchmark rather than
//! a timed test (`#[ignore]`d, nothing asserted about the time): opens the built page in headless
//! Chromium, fills the "Which deployment?" panel with one of the searches in `tests/searches/`
//! (the scenario through its link, the options typed into the fields), clicks Search and times
//! from the click to the report (`Done`), then prints the wall time, the page's own figure and
//! the number of search workers. It then checks the page searched the file's question (its
//! search JSON equals the file) and, with `SERVESIM_TIMING_CHECK=1`, that its report is the
//! CLI's (the core's `search::run`, single-threaded, after the timing).
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_search_timing
//! -- --ignored --nocapture --test-threads=1` (one search: append `recipe` or `qwen3`).

mod support;

use fantoccini::Locator;
use servesim_core::search::{self, RawSearch};
use servesim_web::core_api::fragment_for;
use std::time::{Duration, Instant};

use support::*;

fn on_off(v: &Option<Vec<bool>>) -> &'static str {
    match v.as_deref() {
        None => "",
        Some([false]) => "off",
        Some([true]) => "on",
        Some(_) => "off,on",
    }
}

fn join<T: ToString>(v: &Option<Vec<T>>) -> String {
    v.as_ref()
        .map(|v| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Fills the panel with the file's search, runs it and prints the timings.
async fn time_search(file: &str) {
    let path = repo_root().join("tests/searches").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let want = RawSearch::from_json(&text).unwrap();
    let frag = fragment_for(&want.base);
    let w = want.clone();
    let out = with_browser("search-timing", |c, base_url| async move {
        let r = async {
            c.goto(&format!("{base_url}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-search_gpus", &join(&w.gpus)).await?;
            type_into(&c, "#f-search_max_gpus", &w.max_gpus.to_string()).await?;
            type_into(&c, "#f-search_tp", &join(&w.tp)).await?;
            type_into(&c, "#f-search_dp", &join(&w.dp)).await?;
            choose(&c, "#f-search_ep", on_off(&w.expert_parallel)).await?;
            choose(&c, "#f-search_spec", on_off(&w.speculative)).await?;
            let kv = w
                .kv_cache_dtypes
                .as_ref()
                .map(|v| v.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "))
                .unwrap_or_default();
            type_into(&c, "#f-search_kv", &kv).await?;
            if let Some(d) = &w.disagg {
                let mode = if d.aggregated == Some(false) { "only" } else { "also" };
                choose(&c, "#f-search_disagg", mode).await?;
                type_into(&c, "#f-search_pd_ratios", &join(&d.pd_ratios)).await?;
                type_into(&c, "#f-search_pd_prefill_tp", &join(&d.prefill_tp)).await?;
                type_into(&c, "#f-search_pd_prefill_dp", &join(&d.prefill_dp)).await?;
                type_into(&c, "#f-search_pd_decode_tp", &join(&d.decode_tp)).await?;
                type_into(&c, "#f-search_pd_decode_dp", &join(&d.decode_dp)).await?;
            }
            let cores = c
                .execute("return navigator.hardwareConcurrency;", vec![])
                .await?;
            let t0 = Instant::now();
            c.find(Locator::Css("#search-btn")).await?.click().await?;
            let status = wait_until("search done", Duration::from_secs(1800), || async {
                Ok(text_of(&c, "#search-status")
                    .await?
                    .filter(|t| t.starts_with("Done") || t.starts_with("Failed")))
            })
            .await?;
            let wall = t0.elapsed().as_secs_f64();
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            // Both inside closed <details>: their text, not their rendered text.
            let texts = c
                .execute(
                    "return ['#search-input', '#search-report'].map(s => document.querySelector(s).textContent);",
                    vec![],
                )
                .await?;
            let (search_json, report): (String, String) = serde_json::from_value(texts)?;
            Ok((wall, status, cores, search_json, report))
        }
        .await;
        (c, r)
    })
    .await;
    let (wall, status, cores, search_json, report) = out;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "[page search timing] {file}: {wall:.1} s wall from Search to the report; page: \"{status}\"; navigator.hardwareConcurrency = {cores}; load average {}",
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    // What the page answered (the report's own numbers), to read against the native figures.
    let r: serde_json::Value = serde_json::from_str(&report).unwrap();
    let answer = |key: &str| {
        let i = r[key][0].as_u64()? as usize;
        let c = &r["candidates"][i];
        let o = &c["outcome"]["operating_point"];
        Some(format!(
            "{} (level {}, {} tok/s/GPU, {} $/M output tokens)",
            c["label"], o["level"], o["output_tokens_per_s_per_gpu"], o["usd_per_m_output_tokens"]
        ))
    };
    println!(
        "[page search timing] summary {}; best tok/s/GPU: {}; lowest cost: {}",
        r["summary"],
        answer("ranking_by_throughput").unwrap_or_default(),
        answer("ranking_by_cost").unwrap_or_default()
    );
    let got = RawSearch::from_json(&search_json).unwrap();
    assert_eq!(got, want, "the page searched the file's question");
    if std::env::var("SERVESIM_TIMING_CHECK").is_ok_and(|v| v == "1") {
        let space = want.validate().unwrap();
        let native = search::run(&space, true);
        let cli = serde_json::to_string_pretty(&native).unwrap() + "\n";
        assert!(report == cli, "the page's report equals the CLI's");
    }
}

/// The recipe's question (8 candidates). Target: <= 20 s in the page on 2 cores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by hand (docs/performance.md \"Search\")"]
async fn recipe() {
    time_search("recipe-dsv4-pro-h200-gb200.json").await;
}

/// The 100-candidate Qwen3-32B search. Target: <= 30 s in the page on 2 cores.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run by hand (docs/performance.md \"Search\")"]
async fn qwen3_32b_100() {
    time_search("qwen3-32b-100.json").await;
}
