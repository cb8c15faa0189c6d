//! Browser test of pinned runs (issue 14 "Side by side"): a finished run is pinned, the next
//! scenario's diff against it is shown, the pin travels in the link (`&p=`), and a fresh browser
//! opening that link simulates the pin again to the same numbers as the run that was pinned and
//! as a native run of its scenario. Same harness as `browser.rs`.
//!
//! Run: `bash scripts/build-web.sh && cargo test -p servesim-e2e --test page_pins -- --test-threads=1`.

mod support;

use fantoccini::Locator;
use servesim_web::core_api::{fragment_for, Scenario};
use std::time::Duration;

use support::*;

fn base() -> Scenario {
    let mut s = Scenario::default_scenario();
    s.sweep.concurrency = Some(vec![1.0, 4.0]);
    s.sweep.duration_s = Some(20.0);
    s.sweep.warmup_s = Some(2.0);
    s
}

async fn pin_values(c: &fantoccini::Client) -> Res<Vec<String>> {
    let v = c
        .execute(
            "return [...document.querySelectorAll('#pins .pin-levels li')].map(li => li.dataset.value);",
            vec![],
        )
        .await?;
    Ok(serde_json::from_value(v)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_run_shows_its_diff_travels_in_the_link_and_reopens_with_the_same_numbers() {
    let frag = fragment_for(&base());
    let (pinned, diff, link) = with_browser("pins", |c, b| async move {
        let r = async {
            c.goto(&format!("{b}#{frag}")).await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let (status, _, _) = run_and_report(&c, 120).await?;
            if !status.starts_with("Done") {
                return Err(status.into());
            }
            c.find(Locator::Css("#pin-btn")).await?.click().await?;
            let pinned = pin_values(&c).await?;
            type_into(&c, "#f-tp", "2").await?;
            wait_text(&c, "#cap-kv-tokens").await?;
            let diff = wait_text(&c, "#pins .pin-diff").await?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let link = c.current_url().await?.to_string();
            Ok((pinned, diff, link))
        }
        .await;
        (c, r)
    })
    .await;
    assert_eq!(pinned.len(), 2, "both levels of the pinned run");
    assert!(diff.contains("tp"), "{diff}");
    assert!(
        link.contains("&p=v1."),
        "the pin travels in the link: {link}"
    );
    let code = link.split("&p=").nth(1).unwrap();
    let pins = servesim_web::pins::decode(code).unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(pins[0].1, base(), "the pin is the scenario that ran");
    // The link's scenario is the edited one.
    let s_part = link.split("#s=").nth(1).unwrap().split('&').next().unwrap();
    let current = Scenario::from_json(&servesim_core::share::decode(s_part).unwrap()).unwrap();
    assert_eq!(current.tp, 2);

    // A fresh browser: the pin is simulated again to the same numbers.
    let reopened = with_browser("pins-open", |c, _| {
        let link = link.clone();
        async move {
            let r = async {
                c.goto(&link).await?;
                wait_text(&c, "#cap-kv-tokens").await?;
                wait_until(
                    "the pin simulated again",
                    Duration::from_secs(120),
                    || async {
                        Ok(text_of(&c, "#pins .pin-status")
                            .await?
                            .filter(|t| t.starts_with("simulated again from the link")))
                    },
                )
                .await?;
                pin_values(&c).await
            }
            .await;
            (c, r)
        }
    })
    .await;
    assert_eq!(
        reopened, pinned,
        "the reopened pin has the pinned run's numbers"
    );
    // And a native run of the pinned scenario gives them too.
    let r = base().resolve().unwrap();
    let native = r.run().unwrap();
    let want: Vec<String> = native
        .levels
        .iter()
        .map(|l| {
            l.output_tokens_per_s
                .map(|v| v.to_string())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(pinned, want);
}
