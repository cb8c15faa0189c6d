//! Browser test of the page's "Which deployment?" panel (issue 14): a small search runs across
//! the page's search workers, its report equals the CLI's (`servesim search --search FILE
//! --json`, the core's `search::run` natively) byte for byte, and the winner's link opens as a
//! normal scenario whose sweep gives the search's numbers. Same harness as `browser.rs`.
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_search -- --test-threads=1`.

mod support;

use fantoccini::Locator;
use servesim_core::search::{self, RawSearch};
use servesim_web::core_api::{fragment_for, Scenario};
use std::time::Duration;

use support::*;

/// The default deployment (Llama 3.1 8B) with two short levels and a TTFT gate and a per-user
/// gate, so candidates differ in where they cross.
fn base() -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![1.0, 8.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    s.sweep.sla = vec![
        serde_json::from_str(r#"{"metric":"ttft_ms_p50","op":"<","value":200}"#).unwrap(),
        serde_json::from_str(r#"{"metric":"e2e_tokens_per_s_per_user","op":">=","value":20}"#)
            .unwrap(),
    ];
    s
}

async fn text_content(c: &fantoccini::Client, css: &str) -> Res<String> {
    let v = c
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            vec![serde_json::json!(css)],
        )
        .await?;
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no element {css}").into())
}

/// Clicks Search and waits for the panel's status; a failed search is the error.
async fn search_and_wait(c: &fantoccini::Client) -> Res<String> {
    c.find(Locator::Css("#search-btn")).await?.click().await?;
    let status = wait_until("search done", Duration::from_secs(600), || async {
        Ok(text_of(c, "#search-status")
            .await?
            .filter(|t| t.starts_with("Done") || t.starts_with("Failed")))
    })
    .await?;
    if !status.starts_with("Done") {
        return Err(status.into());
    }
    Ok(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_search_equals_the_cli_and_its_winner_opens_with_the_same_numbers() {
    let frag = fragment_for(&base());
    let out = with_browser("search", |c, base_url| async move {
        let r = async {
            c.goto(&format!("{base_url}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-search_gpus", "H100-SXM, H200").await?;
            type_into(&c, "#f-search_max_gpus", "2").await?;
            type_into(&c, "#f-search_tp", "1, 2").await?;
            // The price fields follow the GPU list; one edited, one left at its default.
            type_into(&c, "#f-search_price-H200", "3.25").await?;
            let cores = c
                .execute("return navigator.hardwareConcurrency;", vec![])
                .await?;
            let status = search_and_wait(&c).await?;
            let search_json = text_content(&c, "#search-input").await?;
            let report = text_content(&c, "#search-report").await?;
            let progress = text_content(&c, "#search-progress").await?;
            let ranking = wait_text(&c, "#search-ranking").await?;
            let evidence = text_content(&c, "#search-evidence").await?;
            let chart_w = c
                .execute(
                    "return document.querySelector('#search-chart').width;",
                    vec![],
                )
                .await?;
            // Open the winner as a normal scenario (its link), and run it.
            c.find(Locator::Css("#search-best-throughput a"))
                .await?
                .click()
                .await?;
            tokio::time::sleep(Duration::from_millis(500)).await;
            wait_text(&c, "#cap-kv-tokens").await?;
            let link = c.current_url().await?.to_string();
            c.execute(
                "document.querySelector('#run-btn').scrollIntoView({block: 'center'});",
                vec![],
            )
            .await?;
            let (run_status, sweep, _) = run_and_report(&c, 300).await?;
            if !run_status.starts_with("Done") {
                return Err(run_status.into());
            }
            Ok((
                status,
                search_json,
                report,
                progress,
                ranking,
                evidence,
                chart_w,
                cores,
                link,
                sweep,
            ))
        }
        .await;
        (c, r)
    })
    .await;
    let (status, search_json, report, progress, ranking, evidence, chart_w, cores, link, sweep) =
        out;
    println!("{status} (navigator.hardwareConcurrency = {cores})");
    // The page's search is the options typed, over the page's scenario.
    let raw = RawSearch::from_json(&search_json).unwrap();
    assert_eq!(raw.base.to_json(), base().to_json());
    assert_eq!(raw.gpus, Some(vec!["H100-SXM".into(), "H200".into()]));
    assert_eq!((raw.max_gpus, raw.tp.clone()), (2, Some(vec![1, 2])));
    assert_eq!(raw.gpu_hour_usd.get("H200"), Some(&3.25));
    // The CLI's report for the same search (`servesim search --search FILE --json`: the core's
    // evaluate + assemble; tested equal for any thread count in cli_search.rs).
    let space = raw.validate().unwrap();
    let native = search::run(&space, true);
    let want = serde_json::to_string_pretty(&native).unwrap() + "\n";
    assert!(
        report == want,
        "the page's search report equals the CLI's byte for byte"
    );
    assert!(native.summary.evaluated >= 2, "{:?}", native.summary);
    // Each GPU is listed with the measured evidence its candidates are predicted on.
    assert_eq!(native.evidence.len(), 2, "{:?}", native.evidence);
    for (g, e) in &native.evidence {
        assert!(
            evidence.contains(&format!("{g}: {e}")),
            "#search-evidence lists {g}: {evidence}"
        );
    }
    assert_eq!(
        progress.matches("GPUs)").count(),
        space.candidates.len(),
        "progress per candidate: {progress}"
    );
    assert!(!progress.contains("running") && !progress.contains("waiting"));
    assert!(chart_w.as_u64().unwrap_or(0) >= 320, "the chart drew");
    let best = native.best_throughput().expect("a winner");
    assert!(ranking.contains(&best.candidate.label), "{ranking}");
    // The winner's link is its scenario, and its sweep gives the search's numbers.
    let code = link.split("#s=").nth(1).expect("a scenario link");
    let opened = Scenario::from_json(&servesim_core::share::decode(code).unwrap()).unwrap();
    assert_eq!(opened.to_json(), best.candidate.scenario.to_json());
    assert!(
        sweep == native_report_of_link(&link),
        "the winner's sweep in the page equals the CLI's sweep of its scenario"
    );
    // The page's sweep is the native sweep byte for byte (above); its levels, exactly as
    // computed (not through a JSON parse), carry the search's numbers.
    let run = opened.resolve().unwrap().run().unwrap();
    let search_levels = match &best.outcome {
        search::Outcome::Evaluated { levels, .. } => levels.clone(),
        o => panic!("{o:?}"),
    };
    let mut compared = 0;
    for l in &run.levels {
        let level = l.level.value();
        let s = search_levels
            .iter()
            .find(|p| p.level == level)
            .expect("every sweep level is in the search");
        assert_eq!(
            l.output_tokens_per_s_per_gpu, s.output_tokens_per_s_per_gpu,
            "level {level}"
        );
        assert_eq!(
            l.e2e_tokens_per_s_per_user, s.e2e_tokens_per_s_per_user,
            "level {level}"
        );
        compared += 1;
    }
    assert_eq!(compared, 2);
}

/// A small disaggregated search (issue 14): aggregated TP1 and 1P1D (TP1 prefill + TP1 decode)
/// of the default deployment on one GPU type. The page's search JSON carries the core's
/// `RawDisaggSpace` as `servesim search --disagg --pd-ratios 1:1 --pd-prefill-tp 1
/// --pd-decode-tp 1` builds it, and its report equals the CLI's byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_pd_search_equals_the_cli() {
    let frag = fragment_for(&base());
    let out = with_browser("search-pd", |c, base_url| async move {
        let r = async {
            c.goto(&format!("{base_url}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-search_gpus", "H100-SXM").await?;
            type_into(&c, "#f-search_max_gpus", "2").await?;
            type_into(&c, "#f-search_tp", "1").await?;
            choose(&c, "#f-search_disagg", "also").await?;
            type_into(&c, "#f-search_pd_ratios", "1:1").await?;
            type_into(&c, "#f-search_pd_prefill_tp", "1").await?;
            type_into(&c, "#f-search_pd_decode_tp", "1").await?;
            let status = search_and_wait(&c).await?;
            let search_json = text_content(&c, "#search-input").await?;
            let report = text_content(&c, "#search-report").await?;
            let links = c
                .execute(
                    "return [...document.querySelectorAll('#search-ranking tr[data-candidate]')]
                        .map(tr => [Number(tr.dataset.candidate), tr.querySelector('a.cand-link').href]);",
                    vec![],
                )
                .await?;
            Ok((status, search_json, report, links))
        }
        .await;
        (c, r)
    })
    .await;
    let (status, search_json, report, links) = out;
    println!("{status}");
    let raw = RawSearch::from_json(&search_json).unwrap();
    assert_eq!(raw.base.to_json(), base().to_json());
    // What `servesim search --disagg --pd-ratios 1:1 --pd-prefill-tp 1 --pd-decode-tp 1`
    // writes (crates/servesim-cli/src/cmd_search.rs).
    assert_eq!(
        raw.disagg,
        Some(search::RawDisaggSpace {
            pd_ratios: Some(vec!["1:1".into()]),
            prefill_tp: Some(vec![1]),
            decode_tp: Some(vec![1]),
            ..Default::default()
        })
    );
    let space = raw.validate().unwrap();
    assert_eq!(space.candidates.len(), 2, "aggregated TP1 and 1P1D");
    let native = search::run(&space, true);
    let want = serde_json::to_string_pretty(&native).unwrap() + "\n";
    assert!(
        report == want,
        "the page's P/D search report equals the CLI's byte for byte"
    );
    assert_eq!(native.summary.evaluated, 2, "{:?}", native.summary);
    let pd = native
        .candidates
        .iter()
        .find(|c| c.candidate.prefill.is_some())
        .expect("a P/D candidate");
    assert!(pd.operating_point().is_some(), "{:?}", pd.outcome);
    // Every ranked candidate's link is its scenario (the P/D one with its pools).
    let links: Vec<(usize, String)> = serde_json::from_value(links).unwrap();
    assert_eq!(links.len(), native.ranking_by_throughput.len());
    assert!(links.iter().any(|(i, _)| *i == pd.candidate.index));
    for (i, href) in links {
        let code = href.split("#s=").nth(1).expect("a scenario link");
        let opened = Scenario::from_json(&servesim_core::share::decode(code).unwrap()).unwrap();
        assert_eq!(
            opened.to_json(),
            native.candidates[i].candidate.scenario.to_json()
        );
    }
}

/// The panel's search dimensions beyond TP/DP (issue 14): two weight precisions (the bf16
/// checkpoint as is and served at fp8), two `max_num_batched_tokens` values, one
/// `max_num_seqs`, and 1P1D with its own prefill-pool `max_num_batched_tokens` list beside the
/// aggregated candidates. A bad weight precision is first shown under its field with the
/// accepted spellings; then the search JSON the worker wrote is the core's `RawSearch` with
/// those lists, and the page's report equals the CLI's (`search::run`) byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_over_precisions_and_token_budgets_equals_the_cli() {
    let frag = fragment_for(&base());
    let out = with_browser("search-dims", |c, base_url| async move {
        let r = async {
            c.goto(&format!("{base_url}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-search_gpus", "H100-SXM").await?;
            type_into(&c, "#f-search_max_gpus", "2").await?;
            type_into(&c, "#f-search_tp", "1").await?;
            type_into(&c, "#f-search_weight_precisions", "checkpoint, fp3").await?;
            type_into(&c, "#f-search_max_num_batched_tokens", "2048, 8192").await?;
            type_into(&c, "#f-search_max_num_seqs", "64").await?;
            type_into(&c, "#f-search_refine_steps", "2").await?;
            choose(&c, "#f-search_disagg", "also").await?;
            type_into(&c, "#f-search_pd_ratios", "1:1").await?;
            type_into(&c, "#f-search_pd_prefill_tp", "1").await?;
            type_into(&c, "#f-search_pd_decode_tp", "1").await?;
            type_into(&c, "#f-search_pd_prefill_mnbt", "4096").await?;
            c.find(Locator::Css("#search-btn")).await?.click().await?;
            let bad = wait_text(&c, "#e-search_weight_precisions").await?;
            type_into(&c, "#f-search_weight_precisions", "checkpoint, fp8").await?;
            let status = search_and_wait(&c).await?;
            let cleared = text_content(&c, "#e-search_weight_precisions").await?;
            let search_json = text_content(&c, "#search-input").await?;
            let report = text_content(&c, "#search-report").await?;
            Ok((bad, cleared, status, search_json, report))
        }
        .await;
        (c, r)
    })
    .await;
    let (bad, cleared, status, search_json, report) = out;
    println!("{status}");
    assert!(
        bad.contains("`fp3`") && bad.contains("checkpoint, bf16, fp8, fp4, int4, int8"),
        "the bad precision is named under its field with the fix: {bad}"
    );
    assert!(cleared.is_empty(), "fixed: {cleared}");
    let raw = RawSearch::from_json(&search_json).unwrap();
    assert_eq!(raw.base.to_json(), base().to_json());
    use servesim_core::dtype::WeightPrecision;
    assert_eq!(
        raw.weight_precisions,
        Some(vec![WeightPrecision::Checkpoint, WeightPrecision::Fp8])
    );
    assert_eq!(raw.max_num_batched_tokens, Some(vec![2048, 8192]));
    assert_eq!(raw.max_num_seqs, Some(vec![64]));
    assert_eq!(raw.refine_steps, Some(2));
    assert_eq!(
        raw.disagg,
        Some(search::RawDisaggSpace {
            pd_ratios: Some(vec!["1:1".into()]),
            prefill_tp: Some(vec![1]),
            decode_tp: Some(vec![1]),
            prefill_max_num_batched_tokens: Some(vec![4096]),
            ..Default::default()
        })
    );
    let space = raw.validate().unwrap();
    // Aggregated: 2 precisions x 2 budgets; 1P1D: 2 precisions x the prefill pool's one budget.
    assert_eq!(space.candidates.len(), 2 * 2 + 2);
    let native = search::run(&space, true);
    let want = serde_json::to_string_pretty(&native).unwrap() + "\n";
    assert!(
        report == want,
        "the page's search report equals the CLI's byte for byte"
    );
    // The dimensions are real: fp8 weights and each budget reached a simulated candidate.
    let evaluated: Vec<_> = native
        .candidates
        .iter()
        .filter(|c| matches!(c.outcome, search::Outcome::Evaluated { .. }))
        .map(|c| &c.candidate)
        .collect();
    assert!(evaluated
        .iter()
        .any(|c| c.weight_precision == Some(WeightPrecision::Fp8)));
    for b in [2048, 8192] {
        assert!(
            evaluated
                .iter()
                .any(|c| c.prefill.is_none() && c.max_num_batched_tokens == Some(b)),
            "{b}"
        );
    }
    assert!(evaluated
        .iter()
        .any(|c| c.prefill.and_then(|p| p.max_num_batched_tokens) == Some(4096)));
}
