//! Browser tests of the page's speculative decoding controls (issue 10): the report's TP8
//! DeepSeek-V4-Flash arm with MTP ("2 or 3 accepted, mean 3.51") entered through the controls
//! gives the CLI's report byte for byte, and its link reopens with the controls filled. Same
//! harness as `browser.rs` (tests/e2e/tests/support).
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_spec -- --test-threads=1`.

mod support;

use servesim_web::core_api::{drafter_line, fragment_for, Scenario};
use std::time::Duration;

use support::*;

/// The golden scenario `dsv4flash_tp8_h200_mtp` (tests/golden/scenarios): DeepSeek-V4-Flash on
/// 8x H200 at TP8, MTP with k = 3, 2 or 3 drafts accepted with mean acceptance length 3.51.
fn mtp_arm() -> Scenario {
    let text = std::fs::read_to_string(
        repo_root().join("tests/golden/scenarios/dsv4flash_tp8_h200_mtp.json"),
    )
    .unwrap();
    Scenario::from_json(&text).unwrap()
}

fn scenario_of_link(link: &str) -> Scenario {
    let code = link.split("#s=").nth(1).expect("a link with #s=");
    let code = code.split('&').next().unwrap_or(code);
    Scenario::from_json(&servesim_core::share::decode(code).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mtp_arm_entered_through_the_controls_gives_the_cli_report_and_its_link_reopens_filled()
{
    let want = mtp_arm();
    let mut plain = want.clone();
    plain.engine.speculative_config = None;
    plain.engine.speculative_acceptance = None;
    let start = fragment_for(&plain);
    let (link, drafter, report, table) = with_browser("spec-edit", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{start}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            choose(&c, "#f-spec_method", "mtp").await?;
            type_into(&c, "#f-spec_num_tokens", "3").await?;
            choose(&c, "#f-spec_acceptance", "values").await?;
            type_into(&c, "#f-spec_values", "2, 3").await?;
            type_into(&c, "#f-spec_mean", "3.51").await?;
            let drafter = wait_text(&c, "#cap-drafter").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            let (status, report, _) = run_and_report(&c, 600).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            let table = wait_text(&c, "#spec-results").await?;
            Ok((link, drafter, report, table))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(
        scenario_of_link(&link),
        want,
        "the controls write engine.speculative_config and engine.speculative_acceptance"
    );
    let r = want.resolve().unwrap();
    assert_eq!(Some(drafter.clone()), drafter_line(&r.deployment, false));
    assert!(
        drafter.contains("mean acceptance length 3.510"),
        "{drafter}"
    );
    let native = native_report_of_link(&link);
    assert!(
        report == native,
        "the page's report equals `servesim sweep --scenario dsv4flash_tp8_h200_mtp --json --refine-sla 8` byte for byte"
    );
    // The table shows the report's realised acceptance, level by level.
    let v: serde_json::Value = serde_json::from_str(&report).unwrap();
    for l in v["levels"].as_array().unwrap() {
        let sd = &l["spec_decode"];
        let mal = sd["mean_acceptance_length"].as_f64().expect("realised");
        assert!((mal - 3.51).abs() < 0.05, "realised {mal} vs given 3.51");
        let cell = format!("{mal:.3}");
        assert!(table.contains(&cell), "{table} lacks {cell}");
        let drafts = sd["num_drafts"].as_u64().unwrap().to_string();
        assert!(table.contains(&drafts), "{table} lacks {drafts}");
    }

    // Reopened from the link: the controls show the scenario's values.
    let fields = with_browser("spec-open", |c, base| async move {
        let r = async {
            let frag = link.split('#').nth(1).unwrap_or_default().to_string();
            c.goto(&format!("{base}#{frag}")).await?;
            wait_text(&c, "#cap-drafter").await?;
            let mut v = Vec::new();
            for id in [
                "spec_method",
                "spec_num_tokens",
                "spec_acceptance",
                "spec_values",
                "spec_mean",
            ] {
                v.push(value_of(&c, &format!("#f-{id}")).await?);
            }
            Ok(v)
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(fields, ["mtp", "3", "values", "2, 3", "3.51"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_acceptance_is_named_on_its_control_and_pd_says_the_prefill_pool_runs_no_drafter() {
    let seed = std::fs::read_to_string(
        repo_root().join("tests/scenarios/recipe-1p1d-dsv4-pro-16xh200.json"),
    )
    .unwrap();
    let start = fragment_for(&Scenario::from_json(&seed).unwrap());
    let (err, note) = with_browser("spec-errors", |c, base| async move {
        let r = async {
            c.goto(&format!("{base}#{start}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            choose(&c, "#f-spec_method", "mtp").await?;
            type_into(&c, "#f-spec_num_tokens", "3").await?;
            choose(&c, "#f-spec_acceptance", "rates").await?;
            // Increasing rates: the core refuses them (rate_i = P(at least i + 1 accepted)).
            type_into(&c, "#f-spec_rates", "0.5, 0.7, 0.2").await?;
            // Shown (not hidden) once the scenario speculates with pools.
            wait_until("the P/D note shown", Duration::from_secs(30), || async {
                Ok(attr_of(&c, "#spec-pd-note", "hidden")
                    .await?
                    .is_none()
                    .then_some(()))
            })
            .await?;
            let note = wait_text(&c, "#spec-pd-note").await?;
            let err = wait_text(&c, "#e-spec_rates").await?;
            Ok((err, note))
        }
        .await;
        (c, r)
    })
    .await;
    assert!(err.contains("non-increasing"), "{err}");
    assert!(note.contains("prefill pool runs none"), "{note}");
}
