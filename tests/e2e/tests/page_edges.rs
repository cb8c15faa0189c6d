//! Browser tests of the page's rough edges (issue 13): results marked stale when the scenario
//! changes, a dying worker reported and replaced, the loading indicator, the narrow-screen
//! layout, the log-scale latency charts, levels without measured requests explained, and a
//! damaged link kept for editing. Same harness as `browser.rs` (tests/e2e/tests/support).
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_edges -- --test-threads=1`.

mod support;

use fantoccini::{Client, Locator};
use serde_json::json;
use std::time::Duration;

use support::*;

/// A quick sweep: two levels of 10 simulated seconds.
async fn small_sweep(c: &Client) -> Res<()> {
    type_into(c, "#f-levels", "1, 2").await?;
    type_into(c, "#f-duration_s", "10").await?;
    type_into(c, "#f-warmup_s", "1").await?;
    Ok(())
}

async fn stale(c: &Client) -> Res<(Option<String>, Option<String>, bool)> {
    Ok((
        attr_of(c, "#results-card", "data-stale").await?,
        attr_of(c, "#charts-card", "data-stale").await?,
        text_of(c, "#stale-banner").await?.is_some(),
    ))
}

async fn wait_stale(c: &Client, want: bool) -> Res<(Option<String>, Option<String>, bool)> {
    let w = if want { "true" } else { "false" };
    wait_attr(c, "#results-card", "data-stale", w).await?;
    stale(c).await
}

/// A hash of the canvas pixels (changes when the chart is redrawn differently).
async fn canvas_hash(c: &Client, css: &str) -> Res<u64> {
    let v = c
        .execute(
            "const cv = document.querySelector(arguments[0]);
             const d = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
             let h = 0; for (let i = 0; i < d.length; i++) h = (h * 31 + d[i]) % 1000000007;
             return h;",
            vec![json!(css)],
        )
        .await?;
    Ok(v.as_u64().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_marked_stale_when_the_scenario_changes_and_fresh_after_a_run() {
    let obs = with_browser("stale", |c, base| async move {
        let r = async {
            let mut o = Vec::new();
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            o.push(("before any run", stale(&c).await?));
            small_sweep(&c).await?;
            run_and_report(&c, 120).await?;
            o.push(("after the first run", wait_stale(&c, false).await?));
            // Log scale on the latency charts: the TTFT chart is redrawn on a log y axis.
            let lin = canvas_hash(&c, "#chart-ttft").await?;
            let lin_attr = attr_of(&c, "#chart-ttft", "data-log-y").await?;
            c.find(Locator::Css("#log-latency")).await?.click().await?;
            wait_attr(&c, "#chart-ttft", "data-log-y", "true").await?;
            let log = canvas_hash(&c, "#chart-ttft").await?;
            let tput = attr_of(&c, "#chart-throughput", "data-log-y").await?;
            // The GPU pick.
            choose(&c, "#f-gpu_id", "H200").await?;
            o.push(("after the GPU pick", wait_stale(&c, true).await?));
            c.find(Locator::Css("#rerun-btn")).await?.click().await?;
            wait_status(&c, "Done", 120).await?;
            o.push(("after Run again", wait_stale(&c, false).await?));
            // The recent-scenario pick: the first (H100) run, then the H200 run on screen.
            let recent: Vec<(String, String)> = serde_json::from_value(
                c.execute(
                    "return [...document.querySelectorAll('#recent option')].filter(o => o.value)
                        .map(o => [o.value, o.textContent]);",
                    vec![],
                )
                .await?,
            )?;
            if recent.len() != 2 {
                return Err(format!("two recent scenarios expected: {recent:?}").into());
            }
            let here = c.current_url().await?.to_string();
            let (other, _) = recent
                .iter()
                .find(|(f, _)| !here.ends_with(f.as_str()))
                .ok_or("a recent scenario other than the current one")?;
            let (same, _) = recent
                .iter()
                .find(|(f, _)| here.ends_with(f.as_str()))
                .ok_or("the current scenario in the recent list")?;
            choose(&c, "#recent", other).await?;
            o.push((
                "after picking the other recent",
                wait_stale(&c, true).await?,
            ));
            let gpu = value_of(&c, "#f-gpu_id").await?;
            choose(&c, "#recent", same).await?;
            o.push(("after picking the run's own", wait_stale(&c, false).await?));
            // Any field.
            type_into(&c, "#f-in_mean", "2048").await?;
            o.push(("after editing a field", wait_stale(&c, true).await?));
            Ok((o, gpu, (lin, log, lin_attr, tput)))
        }
        .await;
        (c, r)
    })
    .await;
    let (o, gpu, (lin, log, lin_attr, tput)) = obs;
    let fresh = (Some("false".to_string()), Some("false".to_string()), false);
    let marked = (Some("true".to_string()), Some("true".to_string()), true);
    assert_eq!(o[0].1, fresh, "{}", o[0].0);
    for (when, got) in &o[1..] {
        let want = if when.contains("after the first")
            || when.contains("Run again")
            || when.contains("run's own")
        {
            &fresh
        } else {
            &marked
        };
        assert_eq!(got, want, "{when}");
    }
    assert_eq!(
        gpu, "H100-SXM",
        "the other recent scenario is the first run's"
    );
    assert_eq!(lin_attr.as_deref(), Some("false"));
    assert_eq!(tput.as_deref(), Some("false"), "only TTFT and ITL go log");
    assert_ne!(lin, log, "the TTFT chart is redrawn on a log axis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_runs_out_of_memory_is_reported_and_replaced() {
    // Every wasm memory in this browser is capped at 160 MiB (2,560 pages of 64 KiB), so a level
    // that holds ~600,000 queued requests (Poisson 20,000 req/s for 30 s on one H100: inside
    // the worker's 1 GiB budget estimate, outside this cap) exhausts the worker's memory: the
    // allocation fails and the wasm traps, as it would on a phone or a tab under memory
    // pressure. The page's own wasm stays far below the cap.
    let (failed, status2, report2, link2) = with_browser_args(
        "worker-oom",
        &["--js-flags=--wasm-max-mem-pages=2560"],
        |c, base| async move {
            let r = async {
                c.goto(&base).await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                choose(&c, "#f-arrival", "poisson").await?;
                type_into(&c, "#f-levels", "20000").await?;
                type_into(&c, "#f-duration_s", "30").await?;
                type_into(&c, "#f-warmup_s", "1").await?;
                c.find(Locator::Css("#run-btn")).await?.click().await?;
                let failed = wait_status(&c, "Failed", 120).await?;
                // The next Run works in the fresh worker.
                choose(&c, "#f-arrival", "closed_loop").await?;
                small_sweep(&c).await?;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let link = c.current_url().await?.to_string();
                let (status2, report2, _) = run_and_report(&c, 120).await?;
                Ok((failed, status2, report2, link))
            }
            .await;
            (c, r)
        },
    )
    .await;
    assert!(
        failed.starts_with("Failed: the sweep worker stopped"),
        "{failed}"
    );
    assert!(failed.contains("level 1 of 1"), "{failed}");
    assert!(
        failed.contains("fewer or lower levels") && failed.contains("shorter"),
        "{failed}"
    );
    assert!(status2.starts_with("Done"), "{status2}");
    assert!(
        report2 == native_report_of_link(&link2),
        "the replacement worker gives the native report"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loading_indicator_shows_until_the_wasm_starts() {
    let html = std::fs::read_to_string(dist_dir().join("index.html")).unwrap();
    // Opened from the file system, the page cannot fetch its wasm: what stays on screen is
    // what a user sees while the wasm loads.
    let file_url = format!("file://{}", dist_dir().join("index.html").display());
    let (before, after) = with_browser("loading", |c, base| async move {
        let r = async {
            c.goto(&file_url).await?;
            let before = wait_text(&c, "#loading").await?;
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let after = text_of(&c, "#loading").await?;
            Ok((before, after))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(html.contains("id=\"loading\""), "dist/index.html has it");
    assert!(before.contains("Loading ServeSim"), "{before}");
    assert_eq!(after, None, "the app removes it on mount");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_390px_screen_the_scenario_panel_covers_neither_run_nor_the_results() {
    let (width, hits, status) =
        with_browser_args("narrow", &["--servesim-viewport=390x844"], |c, base| async move {
            let r = async {
                c.goto(&base).await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                small_sweep(&c).await?;
                let width = c.execute("return window.innerWidth;", vec![]).await?;
                // What is on top at the centre of Run and of the results card, each scrolled
                // into the middle of the viewport.
                let mut hits = Vec::new();
                for css in ["#run-btn", "#results-card h2"] {
                    let v = c
                        .execute(
                            "const e = document.querySelector(arguments[0]);
                             e.scrollIntoView({block: 'center'});
                             const r = e.getBoundingClientRect();
                             const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
                             const panel = document.querySelector('.scenario').getBoundingClientRect();
                             const overlap = !(panel.bottom <= r.top || panel.top >= r.bottom);
                             return [e.contains(top), overlap, r.width > 0];",
                            vec![json!(css)],
                        )
                        .await?;
                    hits.push((css, v));
                }
                c.execute(
                    "document.querySelector('#run-btn').scrollIntoView({block: 'center'});",
                    vec![],
                )
                .await?;
                let (status, _, _) = run_and_report(&c, 120).await?;
                Ok((width, hits, status))
            }
            .await;
            (c, r)
        })
        .await;
    assert_eq!(width, json!(390), "the viewport is 390 px wide");
    for (css, v) in hits {
        assert_eq!(
            v,
            json!([true, false, true]),
            "{css}: on top at its centre, not overlapped by the scenario panel"
        );
    }
    assert!(status.starts_with("Done"), "Run is clickable: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn levels_without_measured_requests_are_explained() {
    let (note, rows, title) = with_browser("unmeasured", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            // 4,096-token answers take longer than the 5 s measurement window: no request that
            // starts after the warm-up finishes before the end.
            choose(&c, "#f-out_kind", "constant").await?;
            type_into(&c, "#f-out_mean", "4096").await?;
            type_into(&c, "#f-levels", "1, 2").await?;
            type_into(&c, "#f-duration_s", "10").await?;
            type_into(&c, "#f-warmup_s", "5").await?;
            run_and_report(&c, 120).await?;
            let note = wait_text(&c, "#unmeasured-note").await?;
            let rows = table_rows(&c).await?;
            let title = attr_of(&c, "#results-table td[data-metric=ttft_ms_p50]", "title").await?;
            Ok((note, rows, title))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(
        note.contains("Levels 1, 2: no request finished inside the measurement window"),
        "{note}"
    );
    assert!(
        note.contains("lengthen the simulated duration or lower the warm-up"),
        "{note}"
    );
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r[0].ends_with('*')), "{rows:?}");
    assert!(
        rows.iter().all(|r| r.iter().any(|c| c == "ttft_ms_p50=")),
        "{rows:?}"
    );
    assert_eq!(
        title.as_deref(),
        Some("no request finished inside the measurement window")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_link_stays_in_the_address_bar_and_can_be_fixed_in_place() {
    use servesim_web::core_api::{fragment_for, Scenario};
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![3.0, 9.0, 27.0]);
    let good = fragment_for(&s);
    let bad = "s=v1.eJzz!!not-base64";
    let good2 = good.clone();
    let (url, text, error, notice, levels, url2, notice2) =
        with_browser("damaged", |c, base| async move {
            let r = async {
                c.goto(&format!("{base}#{bad}")).await?;
                let notice = wait_text(&c, "#notice").await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                tokio::time::sleep(Duration::from_millis(1000)).await;
                let url = c.current_url().await?.to_string();
                let text = value_of(&c, "#damaged-link").await?;
                let error = wait_text(&c, "#damaged-error").await?;
                type_into(&c, "#damaged-link", &format!("{base}#{good2}")).await?;
                c.find(Locator::Css("#open-damaged")).await?.click().await?;
                let levels = wait_until(
                    "the fixed link's levels",
                    Duration::from_secs(10),
                    || async {
                        let v = value_of(&c, "#f-levels").await?;
                        Ok((v == "3, 9, 27").then_some(v))
                    },
                )
                .await?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                let url2 = c.current_url().await?.to_string();
                let notice2 = text_of(&c, "#notice").await?;
                Ok((url, text, error, notice, levels, url2, notice2))
            }
            .await;
            (c, r)
        })
        .await;
    assert!(
        url.ends_with(&format!("#{bad}")),
        "kept in the address bar: {url}"
    );
    assert_eq!(text, bad, "shown for editing");
    assert!(error.contains("not base64url"), "{error}");
    assert!(notice.contains("This link could not be opened"), "{notice}");
    assert_eq!(levels, "3, 9, 27");
    assert!(url2.ends_with(&format!("#{good}")), "{url2}");
    assert_eq!(notice2, None, "the message goes once the link opens");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_behind_the_llm_d_router_reopen_from_the_link_with_the_cli_report() {
    // The topology fieldset (issue 9): 2 GPUs as 2 replicas of TP1 behind the llm-d EPP router.
    let (link, report, replicas, picture) = with_browser("topology-a", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-gpus", "2").await?;
            type_into(&c, "#f-replicas", "2").await?;
            choose(&c, "#f-router", "llm-d:default").await?;
            type_into(&c, "#f-levels", "2, 8").await?;
            type_into(&c, "#f-duration_s", "20").await?;
            type_into(&c, "#f-warmup_s", "2").await?;
            let picture = wait_text(&c, "#topology-picture").await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let link = c.current_url().await?.to_string();
            let (status, report, _) = run_and_report(&c, 120).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            let replicas = wait_text(&c, "#replica-results").await?;
            Ok((link, report, replicas, picture))
        }
        .await;
        (c, r)
    })
    .await;
    let link2 = link.clone();
    let (fields, report2) = with_browser("topology-b", |c, _| async move {
        let r = async {
            c.goto(&link2).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let fields = (
                value_of(&c, "#f-gpus").await?,
                value_of(&c, "#f-replicas").await?,
                value_of(&c, "#f-router").await?,
            );
            let (_, report, _) = run_and_report(&c, 120).await?;
            Ok((fields, report))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(picture.contains("replica 1"), "{picture}");
    assert!(replicas.contains("replica"), "{replicas}");
    assert_eq!(
        fields,
        (
            "2".to_string(),
            "2".to_string(),
            "llm-d:default".to_string()
        )
    );
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(
        v["scenario"]["topology"]["replicas"], 2,
        "{}",
        v["scenario"]
    );
    assert!(report == report2, "the reopened link gives the same bytes");
    assert!(
        report == native_report_of_link(&link),
        "the page's report equals `servesim sweep --scenario S --json` byte for byte"
    );
}

/// A prompt pool set on the form (inference-perf's shared_prefix: 2 prefixes x 5 prompts each,
/// cycled) is in the link and the report; once sent, its prompts come from the prefix cache, and
/// the page's report is the CLI's for the same link.
#[tokio::test]
async fn a_prompt_pool_set_on_the_form_travels_in_the_link_and_hits_the_prefix_cache() {
    let (link, report, field) = with_browser("pool", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            type_into(&c, "#f-prefix_tokens", "256").await?;
            type_into(&c, "#f-prefix_groups", "2").await?;
            type_into(&c, "#f-prefix_prompts", "5").await?;
            type_into(&c, "#f-levels", "4").await?;
            type_into(&c, "#f-duration_s", "30").await?;
            type_into(&c, "#f-warmup_s", "10").await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            let link = c.current_url().await?.to_string();
            let (status, report, _) = run_and_report(&c, 120).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            c.goto(&link).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let field = value_of(&c, "#f-prefix_prompts").await?;
            Ok((link, report, field))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(field, "5", "the reopened link fills the field");
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let sp = &v["scenario"]["workload"]["requests"]["shared_prefix"];
    assert_eq!(
        (&sp["groups"], &sp["tokens"], &sp["prompts_per_group"]),
        (&json!(2.0), &json!(256.0), &json!(5.0)),
        "{sp}"
    );
    // 10 prompts at 4 clients: the first cycle falls in the warm-up, then every prompt is cached
    // up to its last full block.
    let hit = v["levels"][0]["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!(hit > 0.95, "hit rate {hit}");
    assert!(
        report == native_report_of_link(&link),
        "the page's report equals `servesim sweep --scenario S --json` byte for byte"
    );
}

/// Opens the page, sets 8 H200s, pastes `cmd` into the `vllm serve` box and applies it, as a user
/// does; returns once the page says the command was loaded.
async fn paste_command_on_8_h200(c: &Client, base: &str, cmd: &str) -> Res<()> {
    c.goto(base).await?;
    wait_text(c, "#cap-kv-tokens").await?;
    choose(c, "#f-gpu_id", "H200").await?;
    type_into(c, "#f-gpus", "8").await?;
    c.find(Locator::Css("#vllm-command-box > summary"))
        .await?
        .click()
        .await?;
    type_into(c, "#vllm-command", cmd).await?;
    c.find(Locator::Css("#apply-command"))
        .await?
        .click()
        .await?;
    wait_text(c, "#command-loaded").await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_vllm_serve_command_fills_the_form_and_its_link_reopens_it() {
    // vllm-project/recipes `DeepSeek/DeepSeek-V3.md` (snapshot 8959cf6; the core's recipe table,
    // crates/servesim-core/src/vllm/recipe_tests.rs), on the recipe's H200s.
    let cmd = "vllm serve deepseek-ai/DeepSeek-R1-0528 \\\n  --trust-remote-code \\\n  --tensor-parallel-size 8 \\\n  --enable-expert-parallel";
    let (args, fields, serve, link) = with_browser("vllm-command", |c, base| async move {
        let r = async {
            paste_command_on_8_h200(&c, &base, cmd).await?;
            let args: Vec<(String, String)> = serde_json::from_value(
                c.execute(
                    "return [...document.querySelectorAll('#command-args li')].map(li => [li.dataset.arg, li.dataset.status]);",
                    vec![],
                )
                .await?,
            )?;
            let fields = (
                value_of(&c, "#f-model_id").await?,
                value_of(&c, "#f-tp").await?,
                value_of(&c, "#f-ep").await?,
                value_of(&c, "#f-gpu_id").await?,
            );
            let serve = wait_until("the serve command of the new scenario", Duration::from_secs(10), || async {
                Ok(text_of(&c, "#serve-command").await?.filter(|t| t.contains("DeepSeek-R1-0528")))
            })
            .await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            Ok((args, fields, serve, link))
        }
        .await;
        (c, r)
    })
    .await;
    let link2 = link.clone();
    let reopened = with_browser("vllm-command-b", |c, _| async move {
        let r = async {
            c.goto(&link2).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            Ok((
                value_of(&c, "#f-model_id").await?,
                value_of(&c, "#f-tp").await?,
                value_of(&c, "#f-ep").await?,
                value_of(&c, "#f-gpu_id").await?,
            ))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(
        args.contains(&("--trust-remote-code".into(), "ignored".into())),
        "{args:?}"
    );
    assert!(
        args.contains(&("--tensor-parallel-size".into(), "understood".into())),
        "{args:?}"
    );
    assert!(
        args.contains(&("--enable-expert-parallel".into(), "understood".into())),
        "{args:?}"
    );
    assert_eq!(
        fields,
        (
            "deepseek-ai/DeepSeek-R1-0528".to_string(),
            "8".to_string(),
            "8".to_string(),
            "H200".to_string()
        ),
        "the command's settings, the GPU kept from the form"
    );
    assert!(
        serve.contains("vllm serve deepseek-ai/DeepSeek-R1-0528"),
        "{serve}"
    );
    assert!(serve.contains("--tensor-parallel-size 8"), "{serve}");
    assert_eq!(reopened, fields, "the link reopens the pasted scenario");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_max_model_len_auto_is_fitted_shown_and_kept_in_the_link() {
    // vllm-project/recipes `GLM/GLM5.md` (GLM-5-FP8 on 8xH200) with the recipe site's advanced
    // option "max-model-len = auto" (`src/components/recipes/CommandBuilder.jsx`); the core's
    // recipe table has the same command (crates/servesim-core/src/vllm/recipe_tests.rs).
    let cmd = "vllm serve zai-org/GLM-5-FP8 \\\n     --tensor-parallel-size 8 \\\n     --tool-call-parser glm47 \\\n     --reasoning-parser glm45 \\\n     --enable-auto-tool-choice \\\n     --served-model-name glm-5-fp8 --max-model-len auto";
    let (field, log, reason, link) = with_browser("max-len-auto", |c, base| async move {
        let r = async {
            paste_command_on_8_h200(&c, &base, cmd).await?;
            // The start-up log is behind its disclosure, as a user opens it.
            c.find(Locator::Css(".cap-details > summary"))
                .await?
                .click()
                .await?;
            let log = wait_until("the auto-fit log line", Duration::from_secs(20), || async {
                Ok(text_of(&c, "#cap-log")
                    .await?
                    .filter(|t| t.contains("Auto-fit max_model_len")))
            })
            .await?;
            let reason = wait_text(&c, "#cap-reason").await?;
            let field = value_of(&c, "#f-max_model_len").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            Ok((field, log, reason, link))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(field, "auto", "the context field shows vLLM's word for -1");
    // GLM-5-FP8's whole 202,752-token context fits on 8 H200 (as `servesim capacity` says).
    assert!(
        log.contains("Auto-fit max_model_len: full model context length 202752 fits"),
        "{log}"
    );
    assert!(reason.contains("max_model_len 202,752"), "{reason}");
    let reopened = with_browser("max-len-auto-b", |c, _| async move {
        let r = async {
            c.goto(&link).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            value_of(&c, "#f-max_model_len").await
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(reopened, "auto", "the link keeps auto");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sla_operating_point_is_refined_by_simulation_between_the_levels() {
    use servesim_web::core_api::{fragment_for, Scenario};
    // A gate halfway between the per-user speeds simulated at C = 4 and C = 64 (natively), so
    // the crossing lies between the two levels and bisection has room.
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![4.0, 64.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    let plain = s.resolve().unwrap().run().unwrap();
    let speed = |i: usize| plain.levels[i].e2e_tokens_per_s_per_user.unwrap();
    let gate = (speed(0) + speed(1)) / 2.0;
    s.sweep.sla =
        servesim_web::form::parse_sla(&format!("e2e_tokens_per_s_per_user>={gate}")).unwrap();
    let frag = fragment_for(&s);
    let (refined, summary, report, link) = with_browser("refine", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let link = c.current_url().await?.to_string();
            let (_, report, _) = run_and_report(&c, 120).await?;
            let refined = wait_text(&c, "#op-refined").await?;
            let summary = wait_text(&c, "#op-summary").await?;
            Ok((refined, summary, report, link))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(refined.starts_with("Refined by simulation ("), "{refined}");
    assert!(refined.contains("extra run"), "{refined}");
    assert!(summary.ends_with("(interpolated)"), "{summary}");
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    let r = &v["refined_operating_point"];
    let (lo, hi) = (
        r["highest_passing"].as_f64().unwrap(),
        r["lowest_failing"].as_f64().unwrap(),
    );
    assert!((4.0..64.0).contains(&lo) && hi <= 64.0 && lo < hi, "{r}");
    assert!(
        refined.contains(&format!("C = {} passes", lo as u64)),
        "{refined} vs {r}"
    );
    assert!(
        report == native_report_of_link(&link),
        "the page's report equals `servesim sweep --json --refine-sla 8`"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pasted_pd_manifest_fills_the_form_and_its_link_carries_the_pools() {
    // llm-d/llm-d guides/pd-disaggregation/ms-pd/values.yaml (0b8cde6), trimmed copy in
    // tests/manifests/ (cited there); the core's manifest tests read the same file.
    let yaml = std::fs::read_to_string(servesim_e2e_manifest_path(
        "llm-d-pd-disaggregation-values.yaml",
    ))
    .unwrap();
    let (args, fields, link) = with_browser("pd-manifest", |c, base| async move {
        let r = async {
            c.goto(&base).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            c.find(Locator::Css("#vllm-command-box > summary")).await?.click().await?;
            // The textarea takes the text as a paste does (one input event).
            c.execute(
                "const t = document.querySelector('#vllm-command'); t.value = arguments[0]; t.dispatchEvent(new Event('input', {bubbles: true}));",
                vec![serde_json::Value::String(yaml)],
            )
            .await?;
            c.find(Locator::Css("#apply-command")).await?.click().await?;
            wait_text(&c, "#command-loaded").await?;
            let args: Vec<(String, String)> = serde_json::from_value(
                c.execute(
                    "return [...document.querySelectorAll('#command-args li')].map(li => [li.dataset.arg, li.dataset.status]);",
                    vec![],
                )
                .await?,
            )?;
            let fields = (
                value_of(&c, "#f-model_id").await?,
                value_of(&c, "#f-tp").await?,
                value_of(&c, "#f-gpu_id").await?,
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            Ok((args, fields, link))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(
        args.contains(&("prefill: prefill.replicas".into(), "understood".into())),
        "{args:?}"
    );
    assert!(
        args.contains(&("decode: --kv-events-config".into(), "unknown".into())),
        "{args:?}"
    );
    assert_eq!(
        fields,
        (
            "openai/gpt-oss-120b".to_string(),
            "4".to_string(),
            "H200".to_string()
        ),
        "the decode worker's settings and the node selector's GPU"
    );
    let code = link.split("#s=").nth(1).expect("a link with #s=");
    let code = code.split('&').next().unwrap_or(code);
    let s = servesim_core::scenario::Scenario::from_json(
        &servesim_core::share::decode(code).expect("the link decodes"),
    )
    .expect("the link carries a scenario");
    let t = s.topology.expect("the pools ride in the link");
    assert_eq!(t.prefill.as_ref().and_then(|p| p.replicas), Some(2));
    assert_eq!(t.prefill.as_ref().and_then(|p| p.tp), Some(1));
    assert_eq!(t.decode.as_ref().and_then(|p| p.replicas), Some(1));
}

fn servesim_e2e_manifest_path(name: &str) -> std::path::PathBuf {
    repo_root().join("tests/manifests").join(name)
}
