//! End-to-end tests of the "Predicted versus measured" panel in headless Chromium (harness in
//! `support/`). Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e -- --test-threads=1`.

mod support;

use fantoccini::{Client, Locator};
use serde_json::json;
use servesim_core::compare::{import_text, ImportOptions, LevelKind};
use servesim_web::compare_ui::{predict, state};
use std::collections::BTreeMap;
use std::time::Duration;
use support::*;

const MEASURED_CSV: &str =
    "concurrency,output_throughput,Median TTFT (ms),Mean ITL (ms)\n1,80,30,12\n4,300,40,13\n";

/// The page link of a small scenario (two short levels) and the core scenario the comparison
/// pairs arms with: the page carries the core's `Scenario`, so both are the same value.
fn small_scenario() -> (String, servesim_core::scenario::Scenario) {
    let mut s = servesim_core::scenario::Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![1.0, 4.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    (servesim_web::core_api::fragment_for(&s), s)
}

/// The Markdown report the page must show for `MEASURED_CSV`, computed natively with the same
/// core calls (the simulator is deterministic, native == wasm).
fn expected_markdown(scenario: &servesim_core::scenario::Scenario) -> String {
    let runs = import_text(MEASURED_CSV, &ImportOptions::default())
        .unwrap()
        .runs;
    let plans: Vec<state::ArmPlan> = state::plan_arms(&runs, &BTreeMap::new(), Some(scenario))
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let series = predict::predict(scenario, LevelKind::Concurrency, &[1.0, 4.0]).unwrap();
    let mut preds = BTreeMap::new();
    preds.insert(
        "measured".to_string(),
        state::Prediction {
            scenario_json: scenario.to_json(),
            levels: vec![1.0, 4.0],
            result: Ok(series),
        },
    );
    state::score(&plans, &preds).0.unwrap().to_markdown()
}

async fn js_text(c: &Client, css: &str) -> Res<String> {
    let v = c
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            vec![json!(css)],
        )
        .await?;
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no element {css}").into())
}

/// Non-background pixels of each canvas matching `css`.
async fn canvas_pixels(c: &Client, css: &str) -> Res<Vec<u64>> {
    let v = c
        .execute(
            "return [...document.querySelectorAll(arguments[0])].map(cv => {
                const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
                let n = 0; for (let i = 0; i < d.length; i += 4) if (d[i] !== d[0] || d[i+1] !== d[1] || d[i+2] !== d[2]) n++;
                return n; });",
            vec![json!(css)],
        )
        .await?;
    Ok(serde_json::from_value(v)?)
}

/// Signed means shown in the scored table, by metric name.
async fn signed_means(c: &Client) -> Res<BTreeMap<String, f64>> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('#compare-table-0 tbody tr')].map(r =>
                [r.dataset.metric, r.querySelector('.signed').dataset.value]);",
            vec![],
        )
        .await?;
    let pairs: Vec<(String, String)> = serde_json::from_value(v)?;
    Ok(pairs
        .into_iter()
        .map(|(m, s)| (m, s.parse().unwrap_or(f64::NAN)))
        .collect())
}

async fn wait_scored(c: &Client) -> Res<()> {
    wait_until("the scored table", Duration::from_secs(120), || async {
        Ok(c.find(Locator::Css("#compare-table-0 tbody tr"))
            .await
            .ok()
            .map(|_| ()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pasted_csv_is_scored_charted_exported_and_reopens_from_its_link() {
    let (frag, scenario) = small_scenario();
    let expected = expected_markdown(&scenario);
    let (means, px, md, url, png) = with_browser("compare-paste", |c, base| {
        let frag = frag.clone();
        async move {
            let r = async {
                c.goto(&format!("{base}#{frag}")).await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                let t = c.find(Locator::Css("#compare-paste")).await?;
                t.send_keys(MEASURED_CSV).await?;
                wait_text(&c, "#compare-imported").await?;
                c.find(Locator::Css("#compare-run")).await?.click().await?;
                wait_scored(&c).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let means = signed_means(&c).await?;
                let px = canvas_pixels(&c, "#compare-arm-0 canvas").await?;
                let md = js_text(&c, "#compare-markdown").await?;
                c.find(Locator::Css("#compare-export-md"))
                    .await?
                    .click()
                    .await?;
                let url = c.current_url().await?.to_string();
                c.set_window_size(1440, 3000).await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let png = c.screenshot().await?;
                Ok((means, px, md, url, png))
            }
            .await;
            (c, r)
        }
    })
    .await;
    let artifacts = repo_root().join("tests/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    std::fs::write(artifacts.join("compare.png"), &png).unwrap();
    // Three metrics matched (throughput, TTFT p50, ITL mean), each with a finite signed mean.
    assert_eq!(
        means.keys().cloned().collect::<Vec<_>>(),
        ["itl_ms_mean", "output_tokens_per_s", "ttft_ms_p50"]
    );
    assert!(means.values().all(|v| v.is_finite()), "{means:?}");
    assert_eq!(px.len(), 2, "a fit chart and an error chart");
    assert!(px.iter().all(|&n| n > 1000), "both charts draw: {px:?}");
    // The page's report equals the one the core makes natively for the same input.
    assert_eq!(md.trim(), expected.trim());
    assert!(md.contains("| arm | metric | signed mean | MAPE % | shape error % | sign |"));
    // The arm quotes the calibration runs behind its predictions, as the capacity card does.
    let evidence = servesim_core::scenario::Scenario::resolve(&scenario)
        .unwrap()
        .evidence()
        .summary;
    assert!(
        evidence.starts_with("measured evidence: ") && md.lines().any(|l| l == evidence),
        "{md}"
    );
    assert!(
        url.contains("&m=v1."),
        "the link carries the measured data: {url}"
    );

    // A fresh browser (empty localStorage) opening that link shows the same comparison.
    let md2 = with_browser("compare-reopen", |c, _| {
        let url = url.clone();
        async move {
            let r = async {
                c.goto(&url).await?;
                wait_scored(&c).await?;
                let pasted = value_of(&c, "#compare-paste").await?;
                let md = js_text(&c, "#compare-markdown").await?;
                Ok((md, pasted))
            }
            .await;
            (c, r)
        }
    })
    .await;
    // The paste box shows the data restored from the link, as a table the importer reads back
    // to the same levels and values as the pasted CSV.
    use servesim_core::compare::{import_text, ImportOptions};
    let values = |text: &str| {
        import_text(text, &ImportOptions::default())
            .unwrap_or_else(|e| panic!("{e}: {text}"))
            .runs
            .into_iter()
            .map(|r| {
                let levels: Vec<_> = r.levels.into_iter().map(|l| (l.level, l.metrics)).collect();
                (r.arm, r.level_kind, levels)
            })
            .collect::<Vec<_>>()
    };
    assert!(md2.1.starts_with("arm,concurrency,"), "{}", md2.1);
    assert_eq!(values(&md2.1), values(MEASURED_CSV));
    assert_eq!(md2.0, md);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_paste_shows_row_and_column_and_keeps_the_text_across_a_reload() {
    let bad = "concurrency,output_throughput\n8,1000\n16,abc\n";
    let (loc, msg, kept, kept_after_reload, loc_after_reload) =
        with_browser("compare-bad", |c, base| async move {
            let r = async {
                c.goto(&base).await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                c.find(Locator::Css("#compare-paste"))
                    .await?
                    .send_keys(bad)
                    .await?;
                let loc = wait_text(&c, "#compare-error-loc").await?;
                let msg = wait_text(&c, "#compare-error .error-text").await?;
                let kept = value_of(&c, "#compare-paste").await?;
                c.refresh().await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                let loc2 = wait_text(&c, "#compare-error-loc").await?;
                let kept2 = value_of(&c, "#compare-paste").await?;
                Ok((loc, msg, kept, kept2, loc2))
            }
            .await;
            (c, r)
        })
        .await;
    assert_eq!(loc, "pasted line 3, column 2");
    assert!(msg.contains("\"abc\" is not a number"), "{msg}");
    assert!(msg.contains("Fix:"), "{msg}");
    assert_eq!(kept, bad);
    assert_eq!(kept_after_reload, bad);
    assert_eq!(loc_after_reload, loc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmatched_column_can_be_mapped_by_hand() {
    let text = "concurrency,TTFT p95 (ms)\n8,50\n16,70\n";
    let (before, after, imported) = with_browser("compare-map", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            c.find(Locator::Css("#compare-paste"))
                .await?
                .send_keys(text)
                .await?;
            // No column holds a metric: an error, and the mapping control is offered.
            let before = wait_text(&c, "#compare-error .error-text").await?;
            choose(
                &c,
                "select.map-select[data-header='TTFT p95 (ms)']",
                "ttft_ms_p99",
            )
            .await?;
            let imported = wait_text(&c, "#compare-imported").await?;
            let after = js_text(&c, "#compare-columns").await?;
            Ok((before, after, imported))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(
        before.contains("no column holds a ServeSim metric"),
        "{before}"
    );
    assert!(after.contains("ttft_ms_p99 (mapped by hand)"), "{after}");
    assert!(imported.contains("2 concurrency levels"), "{imported}");
}

/// "How far to trust it" leads with the held-out figures, has the per-family table of the
/// shipped summary and the validation set's figures (runs no fit read), and its link to the
/// method opens (accuracy.md is part of the site).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trust_panel_leads_with_held_out_figures_and_its_link_opens() {
    let summary = servesim_core::validate::accuracy_summary();
    let (head, fam_rows, never, status, first_line) = with_browser("trust", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            c.find(Locator::Css("#trust-panel summary"))
                .await?
                .click()
                .await?;
            let head = c
                .execute(
                    "return [...document.querySelectorAll('#accuracy-table thead th')].map(t => t.textContent);",
                    vec![],
                )
                .await?;
            let fam_rows = c
                .execute(
                    "return document.querySelectorAll('#accuracy-families tbody tr').length;",
                    vec![],
                )
                .await?;
            let never = c
                .execute(
                    "const e = document.querySelector('#accuracy-never-fitted'); return e ? e.textContent : '';",
                    vec![],
                )
                .await?;
            let href = attr_of(&c, "#accuracy-doc-link", "href").await?.unwrap_or_default();
            let fetched = c
                .execute_async(
                    "const done = arguments[arguments.length - 1];
                     fetch(arguments[0]).then(async r => done([r.status, (await r.text()).split('\\n')[0]]))
                       .catch(e => done([0, String(e)]));",
                    vec![json!(href)],
                )
                .await?;
            Ok((head, fam_rows, never, fetched[0].clone(), fetched[1].clone()))
        }
        .await;
        (c, r)
    })
    .await;
    let head: Vec<String> = serde_json::from_value(head).unwrap();
    assert_eq!(head[2], "held out: other model families", "{head:?}");
    // The validation set (runs no fit read) is one sentence with each metric's figures and sign.
    let never = never.as_str().unwrap_or_default().to_string();
    assert!(!summary.validation_metrics.is_empty());
    for m in &summary.validation_metrics {
        assert!(
            never.contains(&format!(
                "{} {:.1} % (mean signed {:+.1} %, {} runs)",
                m.metric, m.median_abs_pct, m.mean_signed_pct, m.n
            )),
            "{never}"
        );
    }
    assert_eq!(fam_rows.as_u64().unwrap() as usize, summary.families.len());
    assert!(!summary.families.is_empty());
    assert_eq!(status.as_u64(), Some(200));
    assert!(
        first_line.as_str().unwrap().starts_with("# Accuracy"),
        "{first_line}"
    );
}
